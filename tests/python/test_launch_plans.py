"""warpweave.ops's launch plans in the interpreter: a wrapper's second call with the same argument
signature replays the first call's launches on the new arrays, with the same results as the full
path, and calls whose launches cannot be traced to their arrays are never replayed."""

import importlib

import numpy as np
import pytest

from warpweave import ops
from warpweave.ops import _common

pytestmark = pytest.mark.skipif(not importlib.import_module("warpweave._native_loader").available(),
                                reason="needs warpweave's C++ extension (the interpreter)")


def softmax_ref(x):
    x = x.astype(np.float64)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def layernorm_ref(x, w, b, eps):
    x = x.astype(np.float64)
    mean = x.mean(axis=-1, keepdims=True)
    rstd = 1.0 / np.sqrt(((x - mean) ** 2).mean(axis=-1, keepdims=True) + eps)
    return (x - mean) * rstd * w + b, mean[..., 0], rstd[..., 0]


@pytest.mark.parametrize("shape", [(37, 200), (3, 5, 64), (1, 1)])
def test_repeated_softmax_replays_with_new_data(rng, full_path_calls, shape):
    first = rng.standard_normal(shape).astype(np.float32)
    out1 = ops.softmax(first)
    assert full_path_calls == ["softmax"]
    outs = []
    for scale in (2.0, -3.0):
        x = (rng.standard_normal(shape) * scale).astype(np.float32)
        out = ops.softmax(x)
        np.testing.assert_allclose(out, softmax_ref(x), rtol=2e-6, atol=1e-7)
        assert out.shape == shape and out.dtype == np.float32
        outs.append(out)
    assert full_path_calls == ["softmax"], "the later calls replayed the plan"
    # Each replay allocates its own output.
    assert not np.shares_memory(outs[0], outs[1]) and not np.shares_memory(out1, outs[0])
    np.testing.assert_allclose(out1, softmax_ref(first), rtol=2e-6, atol=1e-7)


def test_signature_changes_take_the_full_path(rng, full_path_calls):
    x = rng.standard_normal((16, 96)).astype(np.float32)
    ops.softmax(x)
    ops.softmax(x[:, :64])  # another shape and row stride
    ops.softmax(x.astype(np.float16))  # another dtype
    ops.softmax(np.ascontiguousarray(x[:8]))  # another shape
    unaligned = np.frombuffer(np.zeros(16 * 96 + 1, np.float32).tobytes(), np.float32)[1:]
    ops.softmax(unaligned.reshape(16, 96))  # a base address off 16 bytes
    ops.softmax(x, config=dict(num_warps=2))  # another config
    assert full_path_calls == ["softmax"] * 6
    ops.softmax(x * 2, config=dict(num_warps=2))
    ops.softmax((-x)[:, :64])
    assert len(full_path_calls) == 6


def test_layernorm_eps_is_part_of_the_signature(rng, full_path_calls):
    x = rng.standard_normal((24, 80)).astype(np.float32) * 3 + 1
    w = rng.standard_normal(80).astype(np.float32)
    b = rng.standard_normal(80).astype(np.float32)
    for eps in (1e-5, 0.5, 1e-5, 0.5):
        y, mean, rstd = ops.layernorm_fwd(x, w, b, eps)
        y_ref, mean_ref, rstd_ref = layernorm_ref(x, w, b, eps)
        np.testing.assert_allclose(y, y_ref, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(mean, mean_ref, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(rstd, rstd_ref, rtol=1e-4)
    assert full_path_calls == ["layernorm_fwd"] * 2


def test_layernorm_bwd_replays_and_aliased_inputs(rng, full_path_calls):
    rows, cols = 40, 128
    w = rng.standard_normal(cols).astype(np.float32)
    b = np.zeros(cols, np.float32)

    def run(x, dy):
        _, mean, rstd = ops.layernorm_fwd(x, w, b, 1e-5)
        return ops.layernorm_bwd(dy, x, w, mean, rstd)

    x = rng.standard_normal((rows, cols)).astype(np.float32)
    reference = run(x, x.copy())  # full path
    replayed = run(x.copy(), x.copy())
    aliased = run(x, x)  # dy is x: another signature
    aliased_again = run(x.copy(), x)  # as the first call
    x2 = x.copy()
    aliased_replayed = run(x2, x2)
    for got in (replayed, aliased, aliased_again, aliased_replayed):
        for g, r in zip(got, reference):
            np.testing.assert_allclose(g, r, rtol=1e-5, atol=1e-5)
    assert full_path_calls == ["layernorm_fwd", "layernorm_bwd", "layernorm_bwd"]


def test_aliased_inputs_are_their_own_signature(rng, full_path_calls):
    x = rng.standard_normal((40, 128)).astype(np.float32)
    w = rng.standard_normal(128).astype(np.float32)
    b = rng.standard_normal(128).astype(np.float32)
    # w passed as both w and b, then distinct w and b of the same signature, then aliased again:
    # each pattern has its own plan, and each replay reads its own arrays.
    for weight, bias in ((w, w), (w, b), (b, b), (b, w)):
        y = ops.layernorm_fwd(x, weight, bias, 1e-5)[0]
        np.testing.assert_allclose(y, layernorm_ref(x, weight, bias, 1e-5)[0], rtol=1e-4,
                                   atol=1e-4)
    assert full_path_calls == ["layernorm_fwd"] * 2


def test_copied_inputs_are_not_recorded(rng, full_path_calls):
    # A transposed (column-strided) input is copied by the wrapper: the launch takes the copy.
    x = rng.standard_normal((64, 48)).astype(np.float32).T
    for _ in range(2):
        np.testing.assert_allclose(ops.softmax(x), softmax_ref(x), rtol=2e-6, atol=1e-7)
    assert full_path_calls == ["softmax"] * 2


def test_tuple_results_and_two_launch_plans(rng, full_path_calls):
    x = rng.standard_normal((6, 5000)).astype(np.float32)
    config = dict(chunks=3)  # partial rows, then their combine: two launches
    for _ in range(2):
        x = rng.standard_normal((6, 5000)).astype(np.float32)
        values, indices = ops.row_max(x, config=config)
        np.testing.assert_array_equal(values, x.max(axis=1))
        np.testing.assert_array_equal(indices, x.argmax(axis=1))
        np.testing.assert_allclose(ops.row_sum(x, config=config), x.astype(np.float64).sum(axis=1),
                                   rtol=1e-5, atol=1e-4)
    assert full_path_calls == ["row_max", "row_sum"]


def test_add_and_disabled_plans(rng, full_path_calls, monkeypatch):
    x = rng.standard_normal((3, 7, 11)).astype(np.float32)
    y = rng.standard_normal((3, 7, 11)).astype(np.float32)
    for _ in range(2):
        np.testing.assert_array_equal(ops.add(x, y), x + y)
    monkeypatch.setattr(_common, "LAUNCH_PLANS", False)
    for _ in range(2):
        np.testing.assert_array_equal(ops.add(y, x), x + y)
    assert full_path_calls == ["add"] * 3


def test_empty_inputs_and_errors_are_not_recorded(full_path_calls):
    empty = np.zeros((0, 8), np.float32)
    assert ops.softmax(empty).shape == (0, 8)
    assert ops.softmax(empty).shape == (0, 8)
    bad = np.zeros((4, 8), np.int32)
    for _ in range(2):
        with pytest.raises(ValueError, match="softmax: 'x' has dtype int32"):
            ops.softmax(bad)
    assert full_path_calls == ["softmax"] * 4
    assert not _common._launch_plans


# ---- the GEMM and attention wrappers ------------------------------------------------------------
# On a GPU their routing and candidate lists cost about 100 us of host time per call (H100,
# session 30: ops.matmul 102 us, ops.attention 89 us, against 28 us of kernel at 2048^3), so
# they keep launch plans too. A replay must give the full path's bits exactly: the same kernels
# in the same configuration on the new arrays.


def full_path(monkeypatch, fn, *args, **kwargs):
    with monkeypatch.context() as m:
        m.setattr(_common, "LAUNCH_PLANS", False)
        return fn(*args, **kwargs)


def assert_same(got, expected):
    got = got if isinstance(got, tuple) else (got,)
    expected = expected if isinstance(expected, tuple) else (expected,)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert g.shape == e.shape and g.dtype == e.dtype
        np.testing.assert_array_equal(g, e)


def test_matmul_replays_with_new_operands(rng, full_path_calls, monkeypatch):
    def operands():
        return (rng.standard_normal((48, 40)).astype(np.float16),
                rng.standard_normal((40, 56)).astype(np.float16))

    first = operands()
    ops.matmul(*first, activation=None)
    for activation in (None, "relu", None):
        a, b = operands()
        got = ops.matmul(a, b, activation=activation)
        assert_same(got, full_path(monkeypatch, ops.matmul, a, b, activation=activation))
        ref = a.astype(np.float32) @ b.astype(np.float32)
        if activation == "relu":
            ref = np.maximum(ref, 0)
        np.testing.assert_allclose(got.astype(np.float32), ref, rtol=2e-2, atol=2e-2)
    # The activation is part of the signature: the wrapper took its full path twice (None, then
    # relu); the other three are full_path()'s references.
    assert full_path_calls == ["matmul"] * 5
    assert sum(key[0] == "matmul" for key in _common._launch_plans) == 2


def test_matmul_of_a_copied_operand_is_not_recorded(rng, full_path_calls):
    # A negative stride makes the wrapper copy b: its launch takes the copy, so nothing is kept.
    a = rng.standard_normal((32, 48)).astype(np.float16)
    b = rng.standard_normal((48, 32)).astype(np.float16)[::-1]
    for _ in range(2):
        np.testing.assert_allclose(ops.matmul(a, b).astype(np.float32),
                                   a.astype(np.float32) @ b.astype(np.float32), rtol=2e-2,
                                   atol=2e-2)
    assert full_path_calls == ["matmul"] * 2
    assert not [key for key in _common._launch_plans if key[0] == "matmul"]


@pytest.mark.parametrize("causal", [False, True])
def test_attention_forward_and_backward_replay(rng, full_path_calls, monkeypatch, causal):
    shape = (1, 2, 48, 16)

    def tensors(n):
        return [rng.standard_normal(shape).astype(np.float16) for _ in range(n)]

    q, k, v = tensors(3)
    ops.attention(q, k, v, causal=causal, return_lse=True)
    q, k, v, do = tensors(4)
    out, lse = ops.attention(q, k, v, causal=causal, return_lse=True)
    assert lse.shape == shape[:3]
    assert_same((out, lse), full_path(monkeypatch, ops.attention, q, k, v, causal=causal,
                                      return_lse=True))
    grads = [ops.attention_bwd(do, q, k, v, out, lse, causal=causal) for _ in range(2)]
    assert_same(grads[1], full_path(monkeypatch, ops.attention_bwd, do, q, k, v, out, lse,
                                    causal=causal))
    assert_same(grads[0], grads[1])
    # return_lse is part of the signature: a call without it takes its own full path once.
    for _ in range(2):
        assert_same(ops.attention(q, k, v, causal=causal), out)
    assert full_path_calls == ["attention", "attention", "attention_bwd", "attention_bwd",
                               "attention"]


def test_varlen_attention_replays_with_new_sequences_of_one_layout(rng, full_path_calls,
                                                                   monkeypatch):
    # The same cu_seqlens layout (its values are the arrays' data, not the signature): the second
    # call replays, reading the new q / k / v and offsets.
    lengths, h, d = [5, 17, 1], 2, 16
    cu = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)

    def tensors():
        return [rng.standard_normal((sum(lengths), h, d)).astype(np.float16) for _ in range(4)]

    ops.attention_varlen(*tensors()[:3], cu, cu, max(lengths), max(lengths), causal=True,
                         return_lse=True)
    q, k, v, do = tensors()
    other = np.concatenate([[0], np.cumsum([1, 5, 17])]).astype(np.int32)  # same total, moved
    out, lse = ops.attention_varlen(q, k, v, other, other, 17, 17, causal=True, return_lse=True)
    assert_same((out, lse), full_path(monkeypatch, ops.attention_varlen, q, k, v, other, other,
                                      17, 17, causal=True, return_lse=True))
    for _ in range(2):
        grads = ops.attention_varlen_bwd(do, q, k, v, out, lse, other, other, 17, 17, True)
    assert_same(grads, full_path(monkeypatch, ops.attention_varlen_bwd, do, q, k, v, out, lse,
                                 other, other, 17, 17, True))
    assert full_path_calls == ["attention_varlen"] * 2 + ["attention_varlen_bwd"] * 2


def test_descriptor_slots_replay_and_release_their_arrays(rng, monkeypatch):
    # The TLX fp8 GEMM in the interpreter takes TMA descriptors over its operands and C. A
    # replay hands each descriptor slot the plan's own TensorDescriptor with the new array as
    # its base for the launch only: afterwards no plan descriptor holds an array, and a replay
    # that finds the plan in use (another thread's) builds descriptors of its own.
    ml_dtypes = pytest.importorskip("ml_dtypes")
    import weakref

    M, N, K = 40, 72, 64

    def operands():
        a = rng.integers(-3, 4, (M, K)).astype(ml_dtypes.float8_e4m3fn)
        bt = rng.integers(-3, 4, (N, K)).astype(ml_dtypes.float8_e4m3fn)
        return a, bt.T, np.float32([0.5]), np.float32([2.0])

    def call(args):
        return ops.scaled_mm(*args, out_dtype=np.float32, kernel="tlx")

    call(operands())
    (plan,) = [p for key, p in _common._launch_plans.items() if key[0] == "_scaled_mm"]
    assert len(plan.descriptors) == 3  # a, b^T and C
    replays = []
    run = plan.run
    monkeypatch.setattr(plan, "run", lambda inputs: replays.append(1) or run(inputs))
    for hold_plan in (False, True):
        args = operands()
        if hold_plan:
            plan.in_use.acquire()
        try:
            got = call(args)
        finally:
            if hold_plan:
                plan.in_use.release()
        assert_same(got, full_path(monkeypatch, call, args))
        a, b = (x.astype(np.float32) for x in args[:2])
        np.testing.assert_array_equal(got, a @ b)
        assert all(d.base is None for d in plan.descriptors)
        alive = weakref.ref(args[0])
        del args, a, got
        assert alive() is None
    assert len(replays) == 2
    assert [p for key, p in _common._launch_plans.items() if key[0] == "_scaled_mm"] == [plan]
