"""Triton language behaviours that Triton's test_core.py exercised and warpweave lacked (issue
17), in the interpreter: tl.xor_sum (integers and booleans, any axis, keep_dims), slices whose
bounds are None (`x[None, None:None]` keeps a dimension as ':' does; a real bound is refused as
"unsupported tensor index"), compile errors in interpreter mode being InterpreterErrors too, and
the launch options `launch_cooperative_grid` and `launch_cluster`."""

import importlib

import numpy as np
import pytest

import warpweave as ww
import warpweave.language as tl

pytest.importorskip("warpweave._native")


# ------------------------------------------------------------------------------------------------
# tl.xor_sum
# ------------------------------------------------------------------------------------------------


@ww.jit
def xor_sum_2d_kernel(X, Z, M: tl.constexpr, N: tl.constexpr, AXIS: tl.constexpr,
                      KEEP: tl.constexpr):
    rows = tl.arange(0, M)[:, None]
    cols = tl.arange(0, N)[None, :]
    x = tl.load(X + rows * N + cols)
    z = tl.xor_sum(x, axis=AXIS, keep_dims=KEEP)
    if KEEP:
        if AXIS == 0:
            tl.store(Z + cols, z)
        else:
            tl.store(Z + rows, z)
    else:
        if AXIS == 0:
            tl.store(Z + tl.arange(0, N), z)
        else:
            tl.store(Z + tl.arange(0, M), z)


@pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.uint8, np.int32, np.int64])
@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("keep", [False, True])
def test_xor_sum_along_an_axis(dtype, axis, keep):
    rng = np.random.default_rng(7)
    if dtype is np.bool_:
        x = rng.integers(0, 2, (4, 16)).astype(np.bool_)
    else:
        x = rng.integers(0, 120, (4, 16)).astype(dtype)
    z = np.zeros(16 if axis == 0 else 4, dtype)
    xor_sum_2d_kernel[(1,)](x, z, M=4, N=16, AXIS=axis, KEEP=keep)
    np.testing.assert_array_equal(z, np.bitwise_xor.reduce(x, axis=axis))


@ww.jit
def xor_sum_all_kernel(X, Z, N: tl.constexpr):
    x = tl.load(X + tl.arange(0, N))
    tl.store(Z, tl.xor_sum(x))
    tl.store(Z + 1, x.xor_sum(0))


def test_xor_sum_of_everything_and_as_a_method():
    x = np.array([3, 5, 9, 17, 33, 65, 129, 255], np.int32)
    z = np.zeros(2, np.int32)
    xor_sum_all_kernel[(1,)](x, z, N=8)
    expect = np.bitwise_xor.reduce(x)
    np.testing.assert_array_equal(z, [expect, expect])


@ww.jit
def xor_sum_float_kernel(X, Z):
    tl.store(Z, tl.xor_sum(tl.load(X + tl.arange(0, 4))))


def test_xor_sum_refuses_floats():
    with pytest.raises(ww.CompilationError, match="xor_sum only supported for integers"):
        xor_sum_float_kernel[(1,)](np.ones(4, np.float32), np.zeros(1, np.float32))


# ------------------------------------------------------------------------------------------------
# Slices with None bounds
# ------------------------------------------------------------------------------------------------


@ww.jit
def none_slices_kernel(OUT, N: tl.constexpr):
    data = tl.arange(0, N)
    a = data[None, None:]  # 1 x N
    b = data[None, :None, None]  # 1 x N x 1
    c = data[None, None:None:None, None]  # 1 x N x 1
    d = data[None, ::None]  # 1 x N
    NOTHING: tl.constexpr = None
    e = data[NOTHING, :]  # a compile-time None adds a dimension as the literal does
    tl.static_assert(a.shape == [1, N])
    tl.static_assert(b.shape == [1, N, 1])
    tl.static_assert(c.shape == [1, N, 1])
    tl.static_assert(e.shape == [1, N])
    total = tl.reshape(a, [N]) + tl.reshape(b, [N]) + tl.reshape(c, [N]) + tl.reshape(d, [N])
    tl.store(OUT + tl.arange(0, N), total + tl.reshape(e, [N]))


def test_slices_with_none_bounds_keep_the_dimension():
    out = np.zeros(8, np.int32)
    none_slices_kernel[(1,)](out, N=8)
    np.testing.assert_array_equal(out, 5 * np.arange(8))


@ww.jit
def real_slice_kernel(dst):
    x = tl.arange(0, 16)
    tl.store(dst + tl.arange(0, 16), x[1:])


def test_a_slice_with_a_bound_is_an_unsupported_tensor_index():
    with pytest.raises(ww.TritonError, match="unsupported tensor index"):
        real_slice_kernel[(1,)](np.zeros(16, np.int32))


# ------------------------------------------------------------------------------------------------
# Interpreter mode: a compile error is an InterpreterError too
# ------------------------------------------------------------------------------------------------


@ww.jit
def small_descriptor_kernel(ptr):
    desc = tl.make_tensor_descriptor(ptr, [16, 16], [16, 1], [1, 2])
    desc.load([0, 0])


def test_compile_error_in_the_interpreter_is_both_error_classes():
    for cls in (ww.InterpreterError, ww.CompilationError, ww.TritonError):
        with pytest.raises(cls) as e:
            small_descriptor_kernel[(1,)](np.zeros((16, 16), np.int32))
        # the bare reason is the cause, as Triton chains the builtin's exception
        assert "Descriptor block shape must have at least 16 bytes" in str(e.value.__cause__)
        assert "small_descriptor_kernel" in str(e.value) or "desc" in str(e.value)


# ------------------------------------------------------------------------------------------------
# launch_cooperative_grid, launch_cluster
# ------------------------------------------------------------------------------------------------


@ww.jit
def copy_plus_pid_kernel(X, Y, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(Y + offs, tl.load(X + offs) + tl.program_id(0))


@pytest.mark.parametrize("option", ["launch_cooperative_grid", "launch_cluster"])
@pytest.mark.parametrize("value", [True, False])
def test_launch_options_are_accepted(option, value):
    # Triton's cooperative launch and TLX's launch of one-CTA clusters: the same programs run.
    x = np.arange(64, dtype=np.float32)
    y = np.zeros(64, np.float32)
    copy_plus_pid_kernel[(4,)](x, y, BLOCK=16, **{option: value})
    np.testing.assert_array_equal(y, x + np.repeat(np.arange(4), 16))


# ------------------------------------------------------------------------------------------------
# Resources of an interpreted kernel (Triton's tutorial 02 sizes its grid from them)
# ------------------------------------------------------------------------------------------------


@ww.jit
def row_softmax_kernel(Y, X, N: tl.constexpr):
    row = tl.program_id(0)
    x = tl.load(X + row * N + tl.arange(0, N))
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(Y + row * N + tl.arange(0, N), e / tl.sum(e, axis=0))


@pytest.mark.usefixtures("requires_ptxas")
def test_interpreted_kernel_reports_the_gpu_compiles_resources(monkeypatch):
    monkeypatch.setenv("WARPWEAVE_INTERPRET", "1")
    x = np.random.default_rng(3).standard_normal((4, 1024)).astype(np.float32)
    y = np.zeros_like(x)
    k = row_softmax_kernel.warmup(y, x, N=1024, num_warps=8, grid=(1,))
    # what the sm_90a build of the same kernel uses: registers, and shared memory for the
    # cross-warp reductions; never 0, which host code divides by
    assert 0 < k.n_regs <= 255
    assert k.metadata.shared == k.shared > 0
    assert k.n_spills >= 0
    k[(4,)](y, x, 1024)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(y, e / e.sum(axis=1, keepdims=True), rtol=1e-5)


# ------------------------------------------------------------------------------------------------
# tl.cat along any dimension
# ------------------------------------------------------------------------------------------------


@ww.jit
def cat_dim_kernel(X, Y, Z, A: tl.constexpr, B: tl.constexpr, C: tl.constexpr,
                   DIM: tl.constexpr):
    i = tl.arange(0, A)[:, None, None]
    j = tl.arange(0, B)[None, :, None]
    k = tl.arange(0, C)[None, None, :]
    offs = i * B * C + j * C + k
    z = tl.cat(tl.load(X + offs), tl.load(Y + offs), dim=DIM)
    zi = tl.arange(0, A * (2 if DIM == 0 else 1))[:, None, None]
    zj = tl.arange(0, B * (2 if DIM == 1 else 1))[None, :, None]
    zk = tl.arange(0, C * (2 if DIM == 2 else 1))[None, None, :]
    zb = B * (2 if DIM == 1 else 1)
    zc = C * (2 if DIM == 2 else 1)
    tl.store(Z + zi * zb * zc + zj * zc + zk, z)


@pytest.mark.parametrize("dim", [0, 1, 2, -1])
def test_cat_along_a_dimension(dim):
    rng = np.random.default_rng(11)
    x = rng.standard_normal((2, 4, 8)).astype(np.float32)
    y = rng.standard_normal((2, 4, 8)).astype(np.float32)
    expect = np.concatenate([x, y], axis=dim)
    z = np.zeros_like(expect)
    cat_dim_kernel[(1,)](x, y, z, A=2, B=4, C=8, DIM=dim % 3)
    np.testing.assert_array_equal(z, expect)
    if dim == -1:  # a negative dim counts from the end, as the positive one does
        z2 = np.zeros_like(expect)
        cat_neg_kernel[(1,)](x, y, z2)
        np.testing.assert_array_equal(z2, expect)


@ww.jit
def cat_neg_kernel(X, Y, Z):
    i = tl.arange(0, 2)[:, None, None]
    j = tl.arange(0, 4)[None, :, None]
    k = tl.arange(0, 8)[None, None, :]
    z = tl.cat(tl.load(X + i * 32 + j * 8 + k), tl.load(Y + i * 32 + j * 8 + k), dim=-1)
    tl.store(Z + i * 64 + j * 16 + tl.arange(0, 16)[None, None, :], z)


# ------------------------------------------------------------------------------------------------
# CompiledKernel.name and @jit(repr=...)
# ------------------------------------------------------------------------------------------------


def _describe(spec):
    ones = "_".join(k for k, v in spec.constants.items() if v == 1)
    return f"k_{spec.signature['value']}_{spec.signature['X']}_{ones}_{spec.constants['C']}"


def _named_kernel(value, is_one, X, C: tl.constexpr):
    pass


def test_compiled_kernel_name_follows_the_jit_repr_function():
    named = ww.jit(repr=_describe)(_named_kernel)
    plain = ww.jit(_named_kernel)
    x = np.zeros(4, np.float32)
    cases = [(-2**63, "i64"), (2**64 - 1, "u64"), (7, "i32"), (2.5, "fp32")]
    for value, ty in cases:
        k = named.warmup(value, 1, x, 3, grid=(1,))
        assert k.name == f"k_{ty}_*fp32_is_one_3", k.name
        assert k.metadata.name == k.name
    assert plain.warmup(7, 1, x, 3, grid=(1,)).name == "_named_kernel"


# ------------------------------------------------------------------------------------------------
# argmax / argmin with NaN, tie_break_left=False
# ------------------------------------------------------------------------------------------------


@ww.jit
def arg_nan_kernel(X, OUT, N: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x_max = tl.load(X + offs, mask=offs < N, other=-float("inf"))
    x_min = tl.load(X + offs, mask=offs < N, other=float("inf"))
    tl.store(OUT + 0, tl.argmax(x_max, axis=0, tie_break_left=False))
    tl.store(OUT + 1, tl.argmin(x_min, axis=0, tie_break_left=False))
    tl.store(OUT + 2, tl.argmax(x_max, axis=0))
    tl.store(OUT + 3, tl.argmin(x_min, axis=0))


@pytest.mark.parametrize("values, argmax, argmin", [
    ([np.nan, 6.0, 8.0], 2, 1),
    ([3.0, 5.0, np.nan], 1, 0),
    ([3.0, np.nan, 1.0], 0, 2),
    ([np.nan, np.nan, 4.0], 2, 2),
])
def test_argmax_argmin_skip_nan(values, argmax, argmin):
    out = np.full(4, -1, np.int32)
    arg_nan_kernel[(1,)](np.array(values, np.float32), out, N=3, BLOCK=4)
    np.testing.assert_array_equal(out, [argmax, argmin, argmax, argmin])


# ------------------------------------------------------------------------------------------------
# bfloat16 sums and scans run in fp32 (Triton promotes bfloat16 first)
# ------------------------------------------------------------------------------------------------

torch = pytest.importorskip("torch")


@ww.jit
def bf16_sum_scan_kernel(X, S, CS, CP, N: tl.constexpr):
    x = tl.load(X + tl.arange(0, N))
    s = tl.sum(x, axis=0)
    cs = tl.cumsum(x, axis=0)
    cp = tl.cumprod(x, axis=0)
    tl.static_assert(s.dtype == tl.float32)
    tl.static_assert(cs.dtype == tl.float32)
    tl.static_assert(cp.dtype == tl.float32)
    tl.store(S, s)
    tl.store(CS + tl.arange(0, N), cs)
    tl.store(CP + tl.arange(0, N), cp)


def test_bfloat16_sum_cumsum_cumprod_accumulate_in_fp32(monkeypatch):
    monkeypatch.setenv("WARPWEAVE_INTERPRET", "1")
    ones = torch.ones(1024, dtype=torch.bfloat16)
    s, cs, cp = torch.zeros(1), torch.zeros(1024), torch.zeros(1024)
    bf16_sum_scan_kernel[(1,)](ones, s, cs, cp, N=1024)
    assert s.item() == 1024.0  # in bfloat16 the running sum sticks at 256
    np.testing.assert_array_equal(cs.numpy(), np.arange(1, 1025, dtype=np.float32))
    x = (torch.randn(1024, generator=torch.Generator().manual_seed(5)) * 0.01 + 1).bfloat16()
    bf16_sum_scan_kernel[(1,)](x, s, cs, cp, N=1024)
    xf = x.float().numpy()
    np.testing.assert_allclose(cs.numpy(), np.cumsum(xf, dtype=np.float32), rtol=1e-5)
    np.testing.assert_allclose(cp.numpy(), np.cumprod(xf, dtype=np.float32), rtol=1e-4)
    np.testing.assert_allclose(s.item(), xf.sum(dtype=np.float32), rtol=1e-5)


# ------------------------------------------------------------------------------------------------
# tl.dot with several batch dimensions
# ------------------------------------------------------------------------------------------------


@ww.jit
def dot_nd_kernel(X, Y, A, Z, RANK: tl.constexpr, TRANS_B: tl.constexpr, ACC: tl.constexpr):
    n: tl.constexpr = 256 << (RANK - 2)
    shape: tl.constexpr = [2] * (RANK - 2) + [16, 16]
    x = tl.load(X + tl.arange(0, n)).reshape(shape)
    y = tl.load(Y + tl.arange(0, n)).reshape(shape)
    if TRANS_B:
        y = tl.trans(y)
    if ACC:
        z = tl.dot(x, y, acc=tl.load(A + tl.arange(0, n)).reshape(shape))
    else:
        z = tl.dot(x, y)
    tl.store(Z + tl.arange(0, n), z.reshape([n]))


@pytest.mark.parametrize("rank", [3, 4, 5])
@pytest.mark.parametrize("trans_b", [False, True])
@pytest.mark.parametrize("acc", [False, True])
def test_dot_with_several_batch_dimensions(rank, trans_b, acc):
    rng = np.random.default_rng(rank)
    shape = (2,) * (rank - 2) + (16, 16)
    x = rng.integers(-4, 5, shape).astype(np.float32)
    y = rng.integers(-4, 5, shape).astype(np.float32)
    a = rng.integers(-4, 5, shape).astype(np.float32)
    z = np.zeros(shape, np.float32)
    dot_nd_kernel[(1,)](x, y, a, z, RANK=rank, TRANS_B=trans_b, ACC=acc)
    yy = np.swapaxes(y, -1, -2) if trans_b else y
    np.testing.assert_array_equal(z, x @ yy + (a if acc else 0))


@ww.jit
def dot_batch_mismatch_kernel(X, Z):
    x = tl.load(X + tl.arange(0, 1024)).reshape([2, 2, 16, 16])
    y = tl.load(X + tl.arange(0, 1024)).reshape([4, 1, 16, 16])
    tl.store(Z + tl.arange(0, 1024), tl.dot(x, y).reshape([1024]))


def test_dot_refuses_different_batch_dimensions():
    with pytest.raises(ww.CompilationError, match="same batch dimensions"):
        dot_batch_mismatch_kernel[(1,)](np.zeros(1024, np.float32), np.zeros(1024, np.float32))


BATCHED_DOT_SOURCE = """
import warpweave as ww
import warpweave.language as tl

@ww.jit
def batched(X, Z):
    x = tl.load(X + tl.arange(0, 512)).reshape([2, 16, 16])
    tl.store(Z + tl.arange(0, 512), tl.dot(x, x).reshape([512]))
"""


@pytest.mark.parametrize("target", ["sm_90a", "sm_80"])
def test_batched_dot_compiles_for_gpu_targets(tmp_path, target, ptxas):
    # The interpreter runs batched dots whole (above); the GPU targets split them into one 2-D
    # dot per batch element (tests/python/test_batched_dot.py), where they stopped at the dot.
    native_loader = importlib.import_module("warpweave._native_loader")
    path = tmp_path / "batched_dot.py"
    path.write_text(BATCHED_DOT_SOURCE)
    kernel = native_loader.native().compile([(str(path), BATCHED_DOT_SOURCE)], "batched",
                                            "X:*fp16:16,Z:*fp32:16", {}, target=target,
                                            num_warps=4, stage="ptx")
    assert "mma" in kernel.ptx
    ptxas(kernel.ptx, arch=target)


# ------------------------------------------------------------------------------------------------
# reduction_ordering=tl.ReductionOrdering.INNER_TREE
# ------------------------------------------------------------------------------------------------


def _adjacent_tree(x, axis, op):
    """Adjacent pairs, then pairs of pairs, in float32, along `axis` (Triton's INNER_TREE)."""
    x = np.moveaxis(x, axis, -1).astype(np.float32)
    while x.shape[-1] > 1:
        x = op(x[..., 0::2], x[..., 1::2]).astype(np.float32)
    return x[..., 0]


@ww.jit
def _mul(a, b):
    return a * b


@ww.jit
def inner_tree_kernel(X, S, P, M: tl.constexpr, N: tl.constexpr, AXIS: tl.constexpr,
                      ORDER: tl.constexpr):
    rows = tl.arange(0, M)[:, None]
    cols = tl.arange(0, N)[None, :]
    x = tl.load(X + rows * N + cols)
    s = tl.sum(x, axis=AXIS, reduction_ordering=ORDER)
    p = tl.reduce(x, AXIS, _mul, reduction_ordering=ORDER)
    if AXIS == 0:
        tl.store(S + tl.arange(0, N), s)
        tl.store(P + tl.arange(0, N), p)
    else:
        tl.store(S + tl.arange(0, M), s)
        tl.store(P + tl.arange(0, M), p)


@pytest.mark.parametrize("axis", [0, 1])
def test_inner_tree_sum_and_reduce_are_bitwise_the_adjacent_pair_tree(axis):
    rng = np.random.default_rng(21)
    x = rng.standard_normal((8, 256)).astype(np.float32)
    x[:, ::7] *= 1e4  # magnitudes far apart, so that the order shows in the bits
    p_in = (1 + 0.01 * rng.standard_normal((8, 256))).astype(np.float32)
    n = 256 if axis == 0 else 8
    s = np.zeros(n, np.float32)
    p = np.zeros(n, np.float32)
    order = tl.ReductionOrdering.INNER_TREE
    inner_tree_kernel[(1,)](x, s, np.zeros(n, np.float32), M=8, N=256, AXIS=axis, ORDER=order)
    np.testing.assert_array_equal(s, _adjacent_tree(x, axis, np.add))
    inner_tree_kernel[(1,)](p_in, np.zeros(n, np.float32), p, M=8, N=256, AXIS=axis, ORDER=order)
    np.testing.assert_array_equal(p, _adjacent_tree(p_in, axis, np.multiply))
    if axis == 1:  # the default order (in index order here) gives other bits for these rows
        s2 = np.zeros(n, np.float32)
        inner_tree_kernel[(1,)](x, s2, np.zeros(n, np.float32), M=8, N=256, AXIS=1,
                                ORDER=tl.ReductionOrdering.UNORDERED)
        assert not np.array_equal(s2, s)


@ww.jit
def inner_tree_all_kernel(X, S, N: tl.constexpr):
    x = tl.load(X + tl.arange(0, N)[:, None] * 4 + tl.arange(0, 4)[None, :])
    s = tl.sum(x, reduction_ordering=tl.ReductionOrdering.INNER_TREE, keep_dims=True)
    tl.static_assert(s.shape == [1, 1])
    tl.store(S + tl.arange(0, 1)[:, None], s)
    tl.store(S + 1, tl.argmin(x.reshape([N * 4]), 0, reduction_ordering=tl.ReductionOrdering.INNER_TREE))


def test_inner_tree_over_all_elements_in_a_kernel():
    x = np.random.default_rng(4).standard_normal((64, 4)).astype(np.float32)
    s = np.zeros(2, np.float32)
    inner_tree_all_kernel[(1,)](x, s, N=64)
    assert s[0] == _adjacent_tree(x.reshape(-1), 0, np.add)
    assert s[1] == np.argmin(x.reshape(-1))


@ww.jit
def bad_ordering_kernel(X):
    tl.store(X, tl.sum(tl.load(X + tl.arange(0, 4)), reduction_ordering=tl.PropagateNan.ALL))


def test_reduction_ordering_refuses_other_values():
    with pytest.raises(ww.CompilationError, match="must be tl.ReductionOrdering.INNER_TREE"):
        bad_ordering_kernel[(1,)](np.zeros(4, np.float32))


# ------------------------------------------------------------------------------------------------
# A 1-tuple given to tl.reduce gives a 1-tuple back; program_id's axis message is Triton's
# ------------------------------------------------------------------------------------------------


@ww.jit
def _add(a, b):
    return a + b


@ww.jit
def one_tuple_reduce_kernel(X, Z, N: tl.constexpr):
    x = tl.load(X + tl.arange(0, N))
    (s, ) = tl.reduce((x, ), 0, _add)
    (c, ) = tl.associative_scan((x, ), 0, _add)
    tl.store(Z, s)
    tl.store(Z + 1 + tl.arange(0, N), c)


def test_one_tuple_reduce_and_scan_unpack():
    x = np.arange(1, 9, dtype=np.float32)
    z = np.zeros(9, np.float32)
    one_tuple_reduce_kernel[(1,)](x, z, N=8)
    np.testing.assert_array_equal(z, np.concatenate([[x.sum()], np.cumsum(x)]))


@ww.jit
def bad_pid_kernel(X):
    tl.store(X, tl.program_id(20))


def test_program_id_axis_message():
    with pytest.raises(ww.CompilationError, match="program_id axis must be 0, 1, or 2 but got 20"):
        bad_pid_kernel[(1,)](np.zeros(1, np.int32))
