"""The Blackwell mxfp8 library GEMM (issue 19): ops.scaled_mm_mx, kernels/blackwell/scaled_mm_mx.py
(gemm_ws.py's persistent warp-specialized structure with tlx.async_dot_scaled: e4m3 / e5m2 data,
one e8m0 scale per 32 elements of K, loaded by TMA in the cuBLAS block-scaled layout the host
builds from plain [rows, K / 32] scales).

Checked in the interpreter (race checks on) against a float64 reference that applies the scales,
on data whose scaled products and sums are exact in fp32 (ragged M / N / K, several tiles per
program, CLC and static persistence, CTA pairs, each format pair and output dtype); the host's
layout against the definition; argument errors; each configuration compiled for sm_100a and
assembled by ptxas (registers, no spills, shared memory). No Blackwell GPU ran any of this."""
import importlib
import re

import numpy as np
import pytest

import warpweave.ops as ops
from warpweave.ops import _common, _scaled_mm

ml_dtypes = pytest.importorskip("ml_dtypes")
native_loader = importlib.import_module("warpweave._native_loader")
pytestmark = pytest.mark.skipif(not native_loader.available(),
                                reason="warpweave._native is not built (pip install .)")

FP8 = {"e4m3": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2}
OUT = {"bfloat16": ml_dtypes.bfloat16, "float16": np.float16, "float32": np.float32}


@pytest.fixture
def interpret(monkeypatch):
    monkeypatch.setenv("WARPWEAVE_INTERPRET", "1")


def operands(M, N, K, fa, fb, seed):
    # Multiples of 1/8 in [-1, 1] (exact in e4m3 and e5m2), scales 2^-3 .. 2^3: every scaled
    # product and its sum over K <= 512 is exact in fp32.
    rng = np.random.default_rng(seed)
    a = (rng.integers(-8, 9, (M, K)) / 8).astype(FP8[fa])
    bt = (rng.integers(-8, 9, (N, K)) / 8).astype(FP8[fb])
    sa = rng.integers(124, 131, (M, K // 32)).astype(np.uint8)
    sb = rng.integers(124, 131, (N, K // 32)).astype(np.uint8)
    return a, bt, sa, sb


def reference(a, bt, sa, sb):
    af = a.astype(np.float64) * np.repeat(2.0 ** (sa.astype(np.float64) - 127), 32, axis=1)
    bf = bt.astype(np.float64) * np.repeat(2.0 ** (sb.astype(np.float64) - 127), 32, axis=1)
    return af @ bf.T


# (variant, config overrides, M, N, K, A format, B format, out dtype). 128x128 tiles: 200 x 136
# is 2 x 2 tiles (4 SMs in the interpreter: static persistence over 2 programs below), 300 x 264
# with pairs 4 x 3.
CASES = [
    ("mx", {}, 200, 136, 160, "e4m3", "e4m3", "bfloat16"),
    ("mx", {"USE_CLC": False}, 300, 264, 288, "e5m2", "e4m3", "float32"),
    ("mx_2cta", {}, 300, 136, 288, "e4m3", "e5m2", "float16"),
    ("mx_2cta", {"USE_CLC": False, "EPI_SUBTILE": 2}, 300, 264, 96, "e5m2", "e5m2", "bfloat16"),
    ("mx", {"BLOCK_K": 256, "NUM_STAGES": 2, "EPI_SUBTILE": 1}, 130, 200, 512, "e4m3", "e4m3",
     "float32"),
]


@pytest.mark.parametrize("variant,config,M,N,K,fa,fb,out", CASES)
def test_matches_scaled_reference(interpret, variant, config, M, N, K, fa, fb, out):
    a, bt, sa, sb = operands(M, N, K, fa, fb, M + N + K)
    c = ops.scaled_mm_mx(a, bt.T, sa, sb, out, variant, config)
    assert c.dtype == OUT[out] and c.shape == (M, N)
    np.testing.assert_array_equal(c, reference(a, bt, sa, sb).astype(OUT[out]))


def test_static_persistence_takes_several_tiles_per_program(interpret, monkeypatch):
    # One SM: the single persistent program walks all 6 tiles (two accumulators, reused).
    monkeypatch.setattr(_common._Place, "num_sms", lambda self: 1)
    a, bt, sa, sb = operands(300, 200, 64, "e4m3", "e4m3", 5)
    c = ops.scaled_mm_mx(a, bt.T, sa, sb, "float32", config={"USE_CLC": False})
    np.testing.assert_array_equal(c, reference(a, bt, sa, sb).astype(np.float32))


def test_e8m0_dtype_and_nan_scale(interpret):
    a, bt, sa, sb = operands(128, 128, 64, "e4m3", "e4m3", 9)
    sa[3, 1] = 255  # NaN: row 3 of the product
    c = ops.scaled_mm_mx(a, bt.T, sa.view(ml_dtypes.float8_e8m0fnu), sb, "float32")
    assert np.isnan(c[3]).all() and not np.isnan(np.delete(c, 3, axis=0)).any()
    ref = reference(a, bt, np.where(sa == 255, 127, sa).astype(np.uint8), sb)
    np.testing.assert_array_equal(np.delete(c, 3, axis=0), np.delete(ref, 3, axis=0))


def test_blocked_layout_follows_its_definition():
    # Row 128 b + 32 i + l, scale column 4 c + j lands at byte 16 l + 4 i + j of chunk (b, c).
    rng = np.random.default_rng(2)
    s = rng.integers(0, 255, (200, 9)).astype(np.uint8)
    out = _scaled_mm._mx_blocked("t", "s", s, 200, 9 * 32)
    assert out.shape == (1, 2, 3, 2, 256)
    flat = out.reshape(2, 3, 512)
    for r in range(256):
        for col in range(12):
            want = s[r, col] if r < 200 and col < 9 else 127
            assert flat[r // 128, col // 4, 16 * (r % 32) + 4 * ((r % 128) // 32) + col % 4] == want


E4 = ml_dtypes.float8_e4m3fn


@pytest.mark.parametrize("call,match", [
    (lambda: ops.scaled_mm_mx(np.zeros((4, 48), E4), np.zeros((48, 4), E4).T.T,
                              np.zeros((4, 1), np.uint8), np.zeros((4, 1), np.uint8)),
     "K must be a multiple of 32"),
    (lambda: ops.scaled_mm_mx(np.zeros((4, 64), E4), np.zeros((4, 64), E4).T,
                              np.zeros((4, 3), np.uint8), np.zeros((4, 2), np.uint8)),
     r"'a_scales' has shape \(4, 3\); expected \[4, 2\]"),
    (lambda: ops.scaled_mm_mx(np.zeros((4, 64), E4), np.zeros((4, 64), E4).T,
                              np.zeros((4, 2), np.float32), np.zeros((4, 2), np.uint8)),
     "'a_scales' has dtype float32; e8m0 scales are uint8"),
    (lambda: ops.scaled_mm_mx(np.zeros((4, 64), E4), np.zeros((64, 4), E4),
                              np.zeros((4, 2), np.uint8), np.zeros((4, 2), np.uint8)),
     "'b' must be column-major"),
    (lambda: ops.scaled_mm_mx(np.zeros((4, 64), np.float16), np.zeros((4, 64), E4).T,
                              np.zeros((4, 2), np.uint8), np.zeros((4, 2), np.uint8)),
     "'a' has dtype float16; expected float8_e4m3fn or float8_e5m2"),
    (lambda: ops.scaled_mm_mx(np.zeros((4, 64), E4), np.zeros((6, 64), E4).T,
                              np.zeros((4, 2), np.uint8), np.zeros((6, 2), np.uint8)),
     r"N \* 2 bytes .* must be a multiple of 16"),
    (lambda: ops.scaled_mm_mx(np.zeros((4, 64), E4), np.zeros((8, 64), E4).T,
                              np.zeros((4, 2), np.uint8), np.zeros((8, 2), np.uint8),
                              variant="mx_4cta"), "'variant' must be one of"),
    (lambda: ops.scaled_mm_mx(np.zeros((4, 64), E4), np.zeros((8, 64), E4).T,
                              np.zeros((4, 2), np.uint8), np.zeros((8, 2), np.uint8),
                              config={"FAST": 1}), r"unknown config entries \['FAST'\]"),
])
def test_errors_name_what_is_accepted(interpret, call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_empty_products(interpret):
    z = np.zeros((0, 2), np.uint8)
    assert ops.scaled_mm_mx(np.zeros((0, 64), E4), np.zeros((8, 64), E4).T, z,
                            np.zeros((8, 2), np.uint8)).shape == (0, 8)
    c = ops.scaled_mm_mx(np.zeros((4, 0), E4), np.zeros((8, 0), E4).T,
                         np.zeros((4, 0), np.uint8), np.zeros((8, 0), np.uint8), "float32")
    np.testing.assert_array_equal(c, np.zeros((4, 8), np.float32))


# ---- sm_100a: PTX and ptxas ----

@pytest.fixture
def sm100_compiles(monkeypatch, gpu_compiles):
    gpu_compiles.target = "sm_100a"
    monkeypatch.setenv("WARPWEAVE_CACHE_DISABLE", "1")
    monkeypatch.setattr(_common, "_is_sm100", lambda place: True)
    return gpu_compiles.kernels


COMPILES = [
    ("mx", {}, "e4m3", "e4m3", "bfloat16"),
    ("mx", {"USE_CLC": False}, "e5m2", "e4m3", "float32"),
    ("mx_2cta", {}, "e4m3", "e5m2", "float16"),
    ("mx_2cta", {"USE_CLC": False}, "e4m3", "e4m3", "float32"),
]


@pytest.mark.parametrize("variant,config,fa,fb,out", COMPILES)
def test_compiles_for_sm100a_without_spills(sm100_compiles, variant, config, fa, fb, out):
    a, bt, sa, sb = operands(512, 512, 512, fa, fb, 0)
    ops.scaled_mm_mx(a, bt.T, sa, sb, out, variant, config)
    (compiled,) = sm100_compiles
    k = compiled.kernel
    print(f"{variant} {config} {fa} x {fb} -> {out}: {k.registers} registers, "
          f"{k.spill_bytes} spill bytes, {k.shared_bytes} B shared")
    assert k.spill_bytes == 0
    assert k.registers <= 248
    assert k.shared_bytes <= 232448
    ptx = k.ptx
    cfg = dict(_scaled_mm.SCALED_MM_MX_CONFIGS[variant], **config)
    group = "cta_group::2" if cfg["PAIR"] else "cta_group::1"
    assert re.search(r"tcgen05\.mma\." + group +
                     r"\.kind::mxf8f6f4\.block_scale\.scale_vec::1X", ptx)
    assert re.search(r"tcgen05\.cp\." + group + r"\.32x128b\.warpx4", ptx)
    assert ("clusterlaunchcontrol.try_cancel" in ptx) == cfg["USE_CLC"]


# ---- torch.ops.warpweave.scaled_mm_mx ----


def test_custom_op_on_cpu_tensors_fake_and_errors(interpret):
    torch = pytest.importorskip("torch")
    a, bt, sa, sb = operands(72, 40, 64, "e4m3", "e5m2", 11)
    ta = torch.from_numpy(a.view(np.uint8)).view(torch.float8_e4m3fn)
    tbt = torch.from_numpy(bt.view(np.uint8)).view(torch.float8_e5m2)
    tsa = torch.from_numpy(sa)
    tsb = torch.from_numpy(sb).view(torch.float8_e8m0fnu)  # either scale dtype is taken
    c = torch.ops.warpweave.scaled_mm_mx(ta, tbt.t(), tsa, tsb, torch.float32)
    assert c.dtype == torch.float32 and c.shape == (72, 40)
    np.testing.assert_array_equal(c.numpy(), reference(a, bt, sa, sb).astype(np.float32))
    # The fake implementation: shape and dtype without running, under torch.compile's tracing.
    f = lambda x, y, p, q: torch.ops.warpweave.scaled_mm_mx(x, y, p, q)  # noqa: E731
    torch.library.opcheck(torch.ops.warpweave.scaled_mm_mx.default, (ta, tbt.t(), tsa, tsb),
                          test_utils=("test_faketensor",))  # (test_schema multiplies fp8)
    out = torch.compile(f, fullgraph=True, backend="aot_eager")(ta, tbt.t(), tsa, tsb)
    assert out.dtype == torch.bfloat16 and out.shape == (72, 40)
    with pytest.raises(ValueError, match=r"warpweave::scaled_mm_mx: 'a_scales' must have shape "
                                         r"\(72, 2\)"):
        torch.ops.warpweave.scaled_mm_mx(ta, tbt.t(), tsa[:, :1], tsb)
    with pytest.raises(ValueError, match=r"warpweave::scaled_mm_mx: 'b_scales' has dtype float32"):
        torch.ops.warpweave.scaled_mm_mx(ta, tbt.t(), tsa, torch.ones(40, 2))
