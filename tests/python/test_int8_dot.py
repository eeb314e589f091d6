"""int8 / uint8 tl.dot into int32 on tensor cores (tests/python/eight_bit_dot_kernels.py).

sm_90a: wgmma ...k32.s32.s8.s8 (.u8) in the plain lowering and in the software-pipelined K loop
(B K-major: the transpose of a loaded [N, K] tile, or a [K, N] tile whose addresses run along K);
an N-major B stays an unpipelined wgmma, as fp8 does. sm_80 and sm_100a (and M < 64 on sm_90a):
mma.sync m16n8k32 .s32. ptxas accepts every kernel; no per-element integer FMA dot is left. The
interpreter against NumPy (exact, int8 extremes, several K steps, K = 32)."""

import importlib
import re

import numpy as np
import pytest

import warpweave.language as tl

import eight_bit_dot_kernels as ek
from mma_testing import compiled, mmas

native_loader = importlib.import_module("warpweave._native_loader")
pytestmark = pytest.mark.skipif(not native_loader.available(),
                                reason="warpweave._native is not built (pip install .)")

PTX_NAME = {np.int8: "s8", np.uint8: "u8"}
DTYPES = [np.int8, np.uint8]


@pytest.fixture(autouse=True)
def no_disk_cache(monkeypatch):
    monkeypatch.setenv("WARPWEAVE_CACHE_DISABLE", "1")


def operand(rng, shape, dtype):
    """Random values with the type's extremes on the first row and column (their products are
    the largest and most negative the sum sees)."""
    info = np.iinfo(dtype)
    x = rng.integers(info.min, int(info.max) + 1, shape).astype(dtype)
    x[0, :] = info.min
    x[:, 0] = info.max
    x[-1, :] = info.max
    return x


def exact(a, b):
    return a.astype(np.int64) @ b.astype(np.int64)


def fma_dot_steps(ptx):
    # The per-element path multiplies two operand registers into a third; address arithmetic
    # (mad.lo.s32 of a register by an immediate) is not a dot.
    return len(re.findall(r"mad\.lo\.s32 %r\d+, %r\d+, %r\d+, %r\d+;", ptx))


def wgmma_name(M, N, warps, dtype):
    # Warp groups split M first (64 rows each), then N.
    groups_n = max(1, (warps // 4) // max(1, M // 64))
    return f"wgmma.mma_async.sync.aligned.m64n{min(256, N // groups_n)}k32.s32." \
           f"{PTX_NAME[dtype]}.{PTX_NAME[dtype]}.satfinite"


def tile(M, N, K, trans_b=False):
    """tile_dot's constexprs (its out_dtype is ignored for integer operands: int32)."""
    return dict(M=M, N=N, K=K, TRANS_B=trans_b, OUT=tl.int32)


def mma_sync_name(dtype):
    return (f"mma.sync.aligned.m16n8k32.row.col.satfinite.s32.{PTX_NAME[dtype]}."
            f"{PTX_NAME[dtype]}.s32")


# ---- one dot of whole tiles ----------------------------------------------------------------------

TILES = [(64, 64, 64), (128, 128, 64), (64, 32, 32), (128, 64, 128)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("trans_b", [True, False])
@pytest.mark.parametrize("M,N,K", TILES)
@pytest.mark.parametrize("warps", [4, 8])
def test_tile_dot_is_an_int8_wgmma_on_sm90a(dtype, trans_b, M, N, K, warps):
    a, b = np.zeros((M, K), dtype), np.zeros((K, N), dtype)
    args = (a, np.ascontiguousarray(b.T) if trans_b else b, np.zeros((M, N), np.int32))
    k = compiled(ek.tile_dot, args, tile(M, N, K, trans_b), "sm_90a", warps)
    assert mmas(k.ptx) == [wgmma_name(M, N, warps, dtype)]
    # K / 32 k-steps of each warp group's tiles.
    assert k.ptx.count("wgmma.mma_async") == (K // 32) * max(1, M // 64 // max(1, warps // 4))
    assert fma_dot_steps(k.ptx) == 0
    # wgmma's integer form takes no scale or transpose immediates: one predicate after B.
    assert re.search(r"wgmma\.mma_async\S+ \{[^}]*\}, %rd\d+, %rd\d+, %p\d+;", k.ptx)


@pytest.mark.parametrize("target", ["sm_80", "sm_100a"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("M,N,K", TILES)
@pytest.mark.parametrize("warps", [2, 4, 8])
def test_tile_dot_is_an_m16n8k32_mma_sync(target, dtype, M, N, K, warps):
    a, b = np.zeros((M, K), dtype), np.zeros((K, N), dtype)
    args = (a, b, np.zeros((M, N), np.int32))
    k = compiled(ek.tile_dot, args, tile(M, N, K), target, warps)
    assert mmas(k.ptx) == [mma_sync_name(dtype)]
    # Every 16 x 8 x 32 tile once, split over the warps (more warps than tiles hold copies).
    assert k.ptx.count("mma.sync") == max(1, (M // 16) * (N // 8) * (K // 32) // warps)
    assert fma_dot_steps(k.ptx) == 0


@pytest.mark.parametrize("M,N,K,warps", [(32, 64, 64, 4), (16, 8, 32, 4), (64, 64, 32, 2)])
def test_sm90a_tiles_wgmma_cannot_take_are_mma_sync(M, N, K, warps):
    """M below 64 or fewer than 4 warps: no warp group, so mma.sync as on sm_80."""
    args = (np.zeros((M, K), np.int8), np.zeros((K, N), np.int8), np.zeros((M, N), np.int32))
    k = compiled(ek.tile_dot, args, tile(M, N, K), "sm_90a", warps)
    assert mmas(k.ptx) == [mma_sync_name(np.int8)]
    assert fma_dot_steps(k.ptx) == 0


@pytest.mark.parametrize("target,warps", [("sm_90a", 4), ("sm_90a", 8), ("sm_80", 2),
                                          ("sm_80", 4), ("sm_80", 8)])
def test_128x128x64_dot_was_8192_fmas_a_thread(target, warps):
    """The shape that lowered to 8,192 mad.lo.s32 a thread at 4 warps (and was refused at 2)."""
    args = (np.zeros((128, 64), np.int8), np.zeros((64, 128), np.int8),
            np.zeros((128, 128), np.int32))
    k = compiled(ek.tile_dot, args, tile(128, 128, 64), target, warps)
    assert mmas(k.ptx) and fma_dot_steps(k.ptx) == 0
    assert k.ptx.count("mad.lo.s32") < 64


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("M,N,K", [(64, 32, 32), (64, 64, 128), (128, 64, 64), (32, 16, 32),
                                   (16, 8, 32)])
@pytest.mark.parametrize("trans_b", [True, False])
def test_tile_dot_in_interpreter(dtype, M, N, K, trans_b):
    rng = np.random.default_rng(M * 7 + N * 3 + K)
    a, b = operand(rng, (M, K), dtype), operand(rng, (K, N), dtype)
    c = np.full((M, N), -1, np.int32)
    ek.tile_dot[(1, )](a, np.ascontiguousarray(b.T) if trans_b else b, c,
                       **tile(M, N, K, trans_b))
    np.testing.assert_array_equal(c, exact(a, b))


def test_all_extremes_sum_exactly():
    """-128 * -128 over K = 512 is 2**23: every product at its largest, summed exactly."""
    M, N, K = 64, 32, 512
    a, b = np.full((M, K), -128, np.int8), np.full((K, N), -128, np.int8)
    a[1, :] = 127
    c = np.zeros((M, N), np.int32)
    ek.tile_dot[(1, )](a, b, c, **tile(M, N, K))
    np.testing.assert_array_equal(c, exact(a, b))
    assert c[0, 0] == 2**23 and c[1, 0] == -127 * 128 * K


# ---- the K loop ----------------------------------------------------------------------------------


def loop_args(kernel, dtype, M, N, K, b_layout, rng=None):
    """Arguments of `kernel` and the reference: B as B^T (matmul), or through strides,
    K-contiguous ("k") or N-contiguous ("n")."""
    zeros = rng is None
    make = (lambda s: np.zeros(s, dtype)) if zeros else (lambda s: operand(rng, s, dtype))
    a, b = make((M, K)), make((K, N))
    c = np.full((M, N), -1, np.int32)
    if kernel is ek.matmul:
        return (a, np.ascontiguousarray(b.T), c, M, N, K), exact(a, b)
    bb = np.asfortranarray(b) if b_layout == "k" else b
    strides = (1, K) if b_layout == "k" else (N, 1)
    return (a, bb, c, M, N, K, *strides), exact(a, b)


LOOPS = [(ek.matmul, "t"), (ek.matmul_strided_b, "k"), (ek.matmul_strided_b, "n")]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kernel,b_layout", LOOPS)
@pytest.mark.parametrize("warps", [4, 8])
def test_k_loop_on_sm90a_is_pipelined_where_b_is_k_major(dtype, kernel, b_layout, warps):
    args, _ = loop_args(kernel, dtype, 256, 256, 256, b_layout)
    k = compiled(kernel, args, dict(BM=128, BN=128, BK=64, ACC=tl.int32), "sm_90a", warps, 3)
    assert mmas(k.ptx) == [wgmma_name(128, 128, warps, dtype)]
    assert fma_dot_steps(k.ptx) == 0
    assert k.spill_bytes == 0
    pipelined = b_layout != "n"  # wgmma reads 8-bit operands K-major only, as for fp8
    assert bool(re.search(r"cp\.async\.c[ag]\.shared\.global", k.ptx)) == pipelined
    if pipelined:
        # Asynchronous wgmma: the loop waits for the previous iteration's, not its own.
        assert re.search(r"wgmma\.wait_group\.sync\.aligned [1-9]", k.ptx)
        sizes = re.findall(r"cp\.async\.c[ag]\.shared\.global \[[^]]*\], \[[^]]*\], (\d+)", k.ptx)
        assert set(sizes) == {"16"}, sorted(set(sizes))


@pytest.mark.parametrize("target,warps", [("sm_80", 2), ("sm_80", 4), ("sm_80", 8),
                                          ("sm_100a", 4), ("sm_100a", 8)])
@pytest.mark.parametrize("kernel,b_layout", LOOPS)
def test_k_loop_elsewhere_is_mma_sync(target, warps, kernel, b_layout):
    args, _ = loop_args(kernel, np.int8, 256, 256, 256, b_layout)
    k = compiled(kernel, args, dict(BM=128, BN=128, BK=64, ACC=tl.int32), target, warps, 3)
    assert mmas(k.ptx) == [mma_sync_name(np.int8)]
    assert fma_dot_steps(k.ptx) == 0


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kernel,b_layout", LOOPS)
@pytest.mark.parametrize("M,N,K,BK", [(100, 72, 160, 32), (64, 64, 32, 32), (128, 64, 256, 64)])
def test_k_loop_in_interpreter(dtype, kernel, b_layout, M, N, K, BK):
    """Ragged M / N / K (masked), K = 32 (one step) and several K steps."""
    rng = np.random.default_rng(M + N + K)
    args, ref = loop_args(kernel, dtype, M, N, K, b_layout, rng)
    grid = (-(-M // 64), -(-N // 64))
    kernel[grid](*args, BM=64, BN=64, BK=BK, ACC=tl.int32, num_warps=4, num_stages=3)
    np.testing.assert_array_equal(args[2], ref)


# ---- what no tensor core takes -------------------------------------------------------------------


@pytest.mark.parametrize("ta,tb,target,message", [
    # Triton asks for one operand dtype (its dot refuses int8 by uint8); so does warpweave.
    (np.int8, np.uint8, "sm_90a", r"tl\.dot operands must have one dtype, got int8 and uint8"),
    (np.int16, np.int16, "sm_80",
     r"integer tl\.dot needs int8 or uint8 operands \(it sums into int32\), got int16"),
])
def test_integer_dots_no_mma_takes_are_located_errors(ta, tb, target, message):
    args = (np.zeros((64, 32), ta), np.zeros((32, 64), tb), np.zeros((64, 64), np.int32))
    with pytest.raises(Exception, match=r"eight_bit_dot_kernels\.py:\d+:\d+: error: " + message):
        compiled(ek.tile_dot, args, tile(64, 64, 32), target)


def test_dot_no_mma_takes_is_a_located_error_naming_what_is_accepted():
    """float64 has no tensor-core form: per-thread FMAs, which loop over K reading A and B from
    shared memory (tests/python/test_fma_dot_loop.py); two 128x128 fp64 tiles are 256 KiB, past
    the 163 KiB a block has on sm_80."""
    args = (np.zeros((128, 128), np.float64), np.zeros((128, 128), np.float64),
            np.zeros((128, 128), np.float64))
    with pytest.raises(Exception, match=r"eight_bit_dot_kernels\.py:\d+:\d+: error: tl\.dot of "
                       r"tensor<128x128xfp64> by tensor<128x128xfp64> into "
                       r"tensor<128x128xfp64> has no tensor-core form on sm_80 and its per-thread "
                       r"FMAs read A and B from shared memory: 262144 bytes, more than the 166912 "
                       r"a block may use; use a smaller K or smaller tiles, or operand types that "
                       r"take tensor cores: .*int8 / uint8 ones into int32"):
        compiled(ek.tile_dot, args, tile(128, 128, 128), "sm_80", 4)
