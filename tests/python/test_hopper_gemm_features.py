"""Hopper GEMM features (tests/python/hopper_gemm_kernels.py): async_dot with column-major
operands (A or B read through tlx.local_trans: wgmma's transpose immediates), fp8 e4m3 / e5m2
operands (wgmma .e4m3 / .e5m2, K=32, both K-major), multicast targets computed at run time and
TMA copies into a buffer view an if chooses at run time. The interpreter against NumPy, the
sm_90a PTX (its instructions, ptxas accepting it) and the register budget of a 128x256x64
cp.async GEMM on 8 warps (no spills)."""

import importlib
import re
from pathlib import Path

import numpy as np
import pytest

import warpweave as ww

import hopper_gemm_kernels as hk

native_loader = importlib.import_module("warpweave._native_loader")
pytestmark = pytest.mark.skipif(not native_loader.available(),
                                reason="warpweave._native is not built (pip install .)")

KERNELS = Path(hk.__file__)
ml_dtypes = pytest.importorskip("ml_dtypes")
FP8 = {"fp8e4nv": ml_dtypes.float8_e4m3fn, "fp8e5": ml_dtypes.float8_e5m2}
NUMPY = {"fp16": np.float16, "bf16": ml_dtypes.bfloat16, **FP8}


@pytest.fixture(autouse=True)
def no_disk_cache(monkeypatch):
    monkeypatch.setenv("WARPWEAVE_CACHE_DISABLE", "1")


def descriptor(t, block):
    return ww.TensorDescriptor(t, list(t.shape), [int(s) // t.itemsize for s in t.strides], block)


def eighths(rng, shape, dtype):
    # Multiples of 1/8 in [-1, 1]: exact in every operand type, and their products and sums
    # over K are exact in fp32.
    return (rng.integers(-8, 9, shape) / 8).astype(NUMPY[dtype])


def product(a, b):
    return a.astype(np.float64) @ b.astype(np.float64)


def compile_kernel(kernel, signature, num_warps=4, num_ctas=1, stage="cubin"):
    return native_loader.native().compile([(str(KERNELS), KERNELS.read_text())], kernel, signature,
                                          {}, target="sm_90a", num_warps=num_warps,
                                          stage=stage, num_ctas=num_ctas)


def wgmmas(ptx):
    """(opcode, immediates after the scale-d predicate) of every wgmma.mma_async in `ptx`."""
    return [(m.group(1), [x.strip() for x in m.group(2).split(",")])
            for m in re.finditer(r"(wgmma\.mma_async\.\S+)\s+\{[^}]*\},\s*(?:\{[^}]*\}|%\w+),"
                                 r"\s*%\w+,\s*%\w+,\s*([^;]*);", ptx)]


# ------------------------------------------------------------------------------------------------
# The interpreter
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
@pytest.mark.parametrize("a_row_major,b_row_major", [(True, True), (False, True), (True, False),
                                                     (False, False)])
def test_tile_dot_with_column_major_operands(dtype, a_row_major, b_row_major):
    rng = np.random.default_rng(1)
    M, N, K = 64, 32, 32
    a, b = eighths(rng, (M, K), dtype), eighths(rng, (K, N), dtype)
    c = np.full((M, N), np.nan, np.float32)
    hk.tile_dot[(1,)](a if a_row_major else np.ascontiguousarray(a.T),
                      b if b_row_major else np.ascontiguousarray(b.T), c, M=M, N=N, K=K,
                      A_ROW_MAJOR=a_row_major, B_ROW_MAJOR=b_row_major, num_warps=4)
    np.testing.assert_array_equal(c, product(a, b))


@pytest.mark.parametrize("a_dtype,b_dtype", [("fp8e4nv", "fp8e4nv"), ("fp8e5", "fp8e5"),
                                             ("fp8e4nv", "fp8e5"), ("fp8e5", "fp8e4nv")])
def test_tile_dot_with_fp8_operands(a_dtype, b_dtype):
    rng = np.random.default_rng(2)
    M, N, K = 64, 64, 64
    a, b = eighths(rng, (M, K), a_dtype), eighths(rng, (K, N), b_dtype)
    c = np.full((M, N), np.nan, np.float32)
    # B K-major: held as [N, K] and read through local_trans, as wgmma needs for 8-bit types.
    hk.tile_dot[(1,)](a, np.ascontiguousarray(b.T), c, M=M, N=N, K=K, A_ROW_MAJOR=True,
                      B_ROW_MAJOR=False, num_warps=4)
    np.testing.assert_array_equal(c, product(a, b))


def ws_gemm(a, b, c_dtype, a_row_major, b_row_major, ctas, BM=64, BN=32, BK=32, stages=2):
    """Runs hk.ws_gemm on a [M, K] and b [K, N] (handed over column-major when asked)."""
    M, K = a.shape
    N = b.shape[1]
    sub = BM // 2
    c = np.full((M, N), np.nan, c_dtype)
    A = a if a_row_major else np.ascontiguousarray(a.T)
    B = b if b_row_major else np.ascontiguousarray(b.T)
    a_desc = descriptor(A, [sub, BK] if a_row_major else [BK, sub])
    b_desc = descriptor(B, [BK, BN // ctas] if b_row_major else [BN // ctas, BK])
    clusters_m = -(-(-(-M // BM)) // ctas)
    grid = clusters_m * ctas * -(-N // BN)
    extra = {"ctas_per_cga": (ctas, 1, 1)} if ctas > 1 else {}
    hk.ws_gemm[(grid,)](a_desc, b_desc, descriptor(c, [sub, BN]), M, N, K, BM=BM, BN=BN, BK=BK,
                        NUM_STAGES=stages, A_ROW_MAJOR=a_row_major, B_ROW_MAJOR=b_row_major,
                        NUM_CTAS=ctas, CONSUMERS=2, num_warps=4, **extra)
    return c


@pytest.mark.parametrize("ctas", [1, 2])
@pytest.mark.parametrize("a_row_major,b_row_major", [(True, True), (False, True), (True, False),
                                                     (False, False)])
def test_ws_gemm_with_column_major_operands(a_row_major, b_row_major, ctas):
    # Three M tiles: with 2-CTA clusters the second cluster's rank-1 CTA lies past the edge and
    # still multicasts its half of B; K = 80 leaves a partial last K step.
    rng = np.random.default_rng(3)
    M, N, K = 176, 64, 80
    a, b = eighths(rng, (M, K), "fp16"), eighths(rng, (K, N), "fp16")
    c = ws_gemm(a, b, np.float16, a_row_major, b_row_major, ctas)
    np.testing.assert_array_equal(c, product(a, b).astype(np.float16))


@pytest.mark.parametrize("a_dtype,b_dtype,ctas", [("fp8e4nv", "fp8e4nv", 1), ("fp8e5", "fp8e5", 2),
                                                  ("fp8e4nv", "fp8e5", 2)])
def test_ws_gemm_with_fp8_operands(a_dtype, b_dtype, ctas):
    rng = np.random.default_rng(4)
    M, N, K = 128, 64, 128
    a, b = eighths(rng, (M, K), a_dtype), eighths(rng, (K, N), b_dtype)
    c = ws_gemm(a, b, np.float32, True, False, ctas, BK=64)
    np.testing.assert_array_equal(c, product(a, b))


def test_multicast_targets_computed_at_run_time():
    rng = np.random.default_rng(5)
    half, cols = 16, 32
    x = eighths(rng, (2 * 2 * half, cols), "fp16")  # two clusters' tiles
    out = np.full((4 * 2 * half, cols), np.nan, np.float16)
    hk.multicast_halves_runtime[(4,)](descriptor(x, [half, cols]), descriptor(out, [2 * half, cols]),
                                      HALF=half, COLS=cols, PEER_STEP=2, ctas_per_cga=(2, 1, 1))
    tiles = x.reshape(2, 2 * half, cols)
    np.testing.assert_array_equal(out, np.stack([tiles, tiles], 1).reshape(-1, cols))


def test_run_time_multicast_target_outside_the_cluster_is_a_located_error():
    half, cols = 16, 32
    x = np.zeros((2 * 2 * half, cols), np.float16)
    out = np.zeros((4 * 2 * half, cols), np.float16)
    with pytest.raises(Exception, match=r"hopper_gemm_kernels\.py:\d+:\d+: error: "
                                        r"async_descriptor_load's multicast target names CTA rank "
                                        r"2, outside the cluster of 2 CTAs"):
        hk.multicast_halves_runtime[(4,)](descriptor(x, [half, cols]),
                                          descriptor(out, [2 * half, cols]), HALF=half, COLS=cols,
                                          PEER_STEP=1, ctas_per_cga=(2, 1, 1))


@pytest.mark.parametrize("cut", [False, True])
@pytest.mark.parametrize("which", [0, 1])
def test_tma_load_into_a_view_chosen_at_run_time(which, cut):
    R, C = 16, 64
    x = np.arange(R * C, dtype=np.float32).reshape(R, C).astype(np.float16)
    out = np.full((R, C), np.nan, np.float16)
    block = [R // 2, C // 4] if cut else [R, C // 2]
    hk.runtime_view_load[(1,)](descriptor(x, block), descriptor(out, [R, C]), which, ROWS=R,
                               COLS=C, CUT=cut)
    expect = np.zeros((R, C), np.float16)
    expect[:block[0], which * block[1]:(which + 1) * block[1]] = x[:block[0], :block[1]]
    np.testing.assert_array_equal(out, expect)


@pytest.mark.parametrize("which", [0, 1])
def test_tma_into_a_buffer_and_barrier_chosen_at_run_time(which):
    x = np.arange(32 * 64, dtype=np.float32).reshape(32, 64).astype(np.float16)
    out = np.full_like(x, np.nan)
    hk.runtime_stage_load[(1,)](descriptor(x, [32, 64]), descriptor(out, [32, 64]), which,
                                ROWS=32, COLS=64)
    np.testing.assert_array_equal(out, x)


def test_pipelined_gemm_on_clipped_tiles():
    rng = np.random.default_rng(6)
    M, N, K = 80, 48, 72
    a, b = eighths(rng, (M, K), "fp16"), eighths(rng, (K, N), "fp16")
    c = np.full((M, N), np.nan, np.float16)
    BM, BN, BK = 64, 32, 16
    hk.pipelined_gemm[(-(-M // BM) * -(-N // BN),)](a, b, c, M, N, K, K, 1, N, 1, N, 1,
                                                    BLOCK_M=BM, BLOCK_N=BN, BLOCK_K=BK,
                                                    NUM_STAGES=3, num_warps=4)
    np.testing.assert_array_equal(c, product(a, b).astype(np.float16))


# ------------------------------------------------------------------------------------------------
# sm_90a: PTX and ptxas
# ------------------------------------------------------------------------------------------------

def tile_dot_signature(a_dtype, b_dtype, a_row_major, b_row_major, M=64, N=64, K=64):
    return (f"a_ptr:*{a_dtype}:16, b_ptr:*{b_dtype}:16, c_ptr:*fp32:16, M={M}, N={N}, K={K}, "
            f"A_ROW_MAJOR={int(a_row_major)}, B_ROW_MAJOR={int(b_row_major)}")


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
@pytest.mark.parametrize("a_row_major,b_row_major", [(True, True), (False, True), (True, False),
                                                     (False, False)])
def test_transposed_operands_set_wgmma_transpose_immediates(dtype, a_row_major, b_row_major):
    k = compile_kernel("tile_dot", tile_dot_signature(dtype, dtype, a_row_major, b_row_major))
    found = wgmmas(k.ptx)
    assert len(found) == 4, k.ptx  # K = 64 in steps of 16
    for opcode, imms in found:
        name = {"fp16": "f16", "bf16": "bf16"}[dtype]
        assert opcode == f"wgmma.mma_async.sync.aligned.m64n64k16.f32.{name}.{name}"
        # scale-a, scale-b, then tnspA (1: A is M-major) and tnspB (1: B is N-major).
        assert imms == ["1", "1", "0" if a_row_major else "1", "1" if b_row_major else "0"]
    assert k.spill_bytes == 0


def test_column_major_a_descriptor_steps_k_by_rows():
    # A held as [K, M] = [64, 64] fp16 (128-byte rows along M): each K step of 16 is 16 rows,
    # 2048 bytes (128 in the descriptor's 16-byte units); the leading offset steps M blocks of
    # K rows (64 x 128 bytes = 512 units), the stride offset 8 rows (64 units).
    ptx = compile_kernel("tile_dot", tile_dot_signature("fp16", "fp16", False, True),
                         stage="ptx").ptx
    fixed = (1 << 62) | (64 << 32) | (512 << 16)
    assert re.search(r"or\.b64\s+%rd\d+,\s*%rd\d+,\s*" + str(fixed) + ";", ptx), ptx
    for step in (128, 256, 384):
        assert re.search(r"add\.s64\s+%rd\d+,\s*%rd\d+,\s*" + str(step) + ";", ptx)


@pytest.mark.parametrize("a_dtype,b_dtype", [("fp8e4nv", "fp8e4nv"), ("fp8e5", "fp8e5"),
                                             ("fp8e4nv", "fp8e5")])
def test_fp8_async_dot_is_a_k32_wgmma_without_transposes(a_dtype, b_dtype):
    k = compile_kernel("tile_dot", tile_dot_signature(a_dtype, b_dtype, True, False))
    name = {"fp8e4nv": "e4m3", "fp8e5": "e5m2"}
    found = wgmmas(k.ptx)
    assert len(found) == 2, k.ptx  # K = 64 in steps of 32
    for opcode, imms in found:
        assert opcode == f"wgmma.mma_async.sync.aligned.m64n64k32.f32.{name[a_dtype]}." \
                         f"{name[b_dtype]}"
        assert imms == ["1", "1"]  # no transpose immediates for 8-bit types
    assert k.spill_bytes == 0


@pytest.mark.parametrize("a_row_major,b_row_major,what", [
    (True, True, r"B is a \[K, N\] buffer \(N contiguous\); store B as an \[N, K\] buffer and "
                 r"pass its tlx.local_trans"),
    (False, False, r"A is the local_trans of a \[K, M\] buffer \(M contiguous\); store A as an "
                   r"\[M, K\] buffer")])
def test_fp8_operands_that_are_not_k_major_are_a_located_error(a_row_major, b_row_major, what):
    with pytest.raises(ww.CompilationError,
                       match=r"hopper_gemm_kernels\.py:\d+:\d+: error: tlx.async_dot of fp8e4nv "
                             r"and fp8e4nv operands: wgmma reads 8-bit operands from shared "
                             r"memory with K contiguous only, but " + what):
        compile_kernel("tile_dot",
                       tile_dot_signature("fp8e4nv", "fp8e4nv", a_row_major, b_row_major))


def ws_signature(dtype, a_row_major, b_row_major, ctas, BM=128, BN=256, BK=64, c_dtype="fp16"):
    sub = BM // 2
    a_block = f"{sub}x{BK}" if a_row_major else f"{BK}x{sub}"
    b_block = f"{BK}x{BN // ctas}" if b_row_major else f"{BN // ctas}x{BK}"
    return (f"a_desc:desc<{dtype},{a_block}>, b_desc:desc<{dtype},{b_block}>, "
            f"c_desc:desc<{c_dtype},{sub}x{BN}>, M:i32, N:i32, K:i32, BM={BM}, BN={BN}, BK={BK}, "
            f"NUM_STAGES=3, A_ROW_MAJOR={int(a_row_major)}, B_ROW_MAJOR={int(b_row_major)}, "
            f"NUM_CTAS={ctas}, CONSUMERS=2")


@pytest.mark.parametrize("ctas", [1, 2])
@pytest.mark.parametrize("a_row_major,b_row_major", [(True, True), (False, True), (True, False),
                                                     (False, False)])
def test_ws_gemm_compiles_at_the_tutorial_configuration(a_row_major, b_row_major, ctas):
    # BM 128 x BN 256 x BK 64, two consumer warp groups of 64 rows, 3 stages (hopper_gemm_ws's
    # test configuration), with either operand column-major and in 2-CTA clusters.
    k = compile_kernel("ws_gemm", ws_signature("fp16", a_row_major, b_row_major, ctas),
                       num_ctas=ctas)
    assert k.spill_bytes == 0
    found = wgmmas(k.ptx)
    assert found and all(imms[2:] == ["0" if a_row_major else "1", "1" if b_row_major else "0"]
                         for _, imms in found)
    multicasts = re.findall(r"\.multicast::cluster\s+\[[^;]*,\s*(%h\d+);", k.ptx)
    if ctas == 1:
        assert not multicasts
        return
    # B's half: [64, 128] row-major in two 128-byte column blocks, or [128, 64] in one.
    assert len(multicasts) == (2 if b_row_major else 1), k.ptx
    # The CTA mask: (1 << rank) | (1 << (rank ^ 1)) built at run time.
    mask = multicasts[0]
    m = re.search(r"cvt\.u16\.u32\s+" + re.escape(mask) + r",\s*(%r\d+);", k.ptx)
    assert m, k.ptx
    assert re.search(r"or\.b32\s+" + re.escape(m.group(1)) + r",\s*%r\d+,\s*%r\d+;", k.ptx)
    assert len(re.findall(r"shl\.b32\s+%r\d+,\s*1,\s*%r\d+;", k.ptx)) == 2


def test_fp8_ws_gemm_compiles_in_clusters():
    k = compile_kernel("ws_gemm", ws_signature("fp8e4nv", True, False, 2, c_dtype="fp32"),
                       num_ctas=2)
    assert k.spill_bytes == 0
    assert {op for op, _ in wgmmas(k.ptx)} == {
        "wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3"}


def test_run_time_multicast_needs_a_cluster_launch():
    sig = "in_desc:desc<fp16,64x64>, out_desc:desc<fp16,128x64>, HALF=64, COLS=64, PEER_STEP=2"
    with pytest.raises(ww.CompilationError,
                       match=r"hopper_gemm_kernels\.py:\d+:\d+: error: 'async_desc_load' with "
                             r"multicast_targets needs a cluster launch"):
        compile_kernel("multicast_halves_runtime", sig)
    k = compile_kernel("multicast_halves_runtime", sig, num_ctas=2)
    assert len(re.findall(r"\.multicast::cluster", k.ptx)) == 1


def test_tma_into_a_run_time_view_takes_the_chosen_slice_register():
    sig = ("in_desc:desc<fp16,64x64>, out_desc:desc<fp16,64x128>, which:i32, ROWS=64, COLS=128, "
           "CUT=0")
    k = compile_kernel("runtime_view_load", sig)
    assert k.spill_bytes == 0
    # The right half of a [64, 128] fp16 buffer is its second 128-byte column block, 64 rows x
    # 128 bytes past the left one; the if yields one or the other as the copy's destination.
    m = re.search(r"add\.s32\s+(%r\d+),\s*(%r\d+),\s*8192;\s*mov\.b32\s+(%r\d+),\s*\1;", k.ptx)
    assert m, k.ptx
    assert re.search(r"mov\.b32\s+" + re.escape(m.group(3)) + r",\s*" + re.escape(m.group(2)) +
                     ";", k.ptx)


def test_a_barrier_and_buffer_chosen_at_run_time_are_one_register_each():
    sig = "in_desc:desc<fp16,64x64>, out_desc:desc<fp16,64x64>, which:i32, ROWS=64, COLS=64"
    k = compile_kernel("runtime_stage_load", sig)
    assert k.spill_bytes == 0
    # The copy's destination and barrier are shared-memory offsets that both branches of the if
    # move into one register each (the second barrier sits 8 bytes past the first).
    copy = re.search(r"cp\.async\.bulk\.tensor\.2d\.shared::cluster\S*\s+\[(%r\d+)\],\s*"
                     r"\[[^]]*\],\s*\[(%r\d+)\];", k.ptx)
    assert copy, k.ptx
    for address in copy.groups():
        offset = re.search(r"add\.s32\s+" + re.escape(address) + r",\s*%r\d+,\s*(%r\d+);", k.ptx)
        assert offset, (address, k.ptx)
        moves = re.findall(r"mov\.b32\s+" + re.escape(offset.group(1)) + r",\s*%r\d+;", k.ptx)
        assert len(moves) == 2, (offset.group(1), k.ptx)


def test_run_time_view_that_cuts_the_swizzle_is_refused_at_the_copy():
    sig = ("in_desc:desc<fp16,32x32>, out_desc:desc<fp16,64x128>, which:i32, ROWS=64, COLS=128, "
           "CUT=1")
    with pytest.raises(ww.CompilationError,
                       match=r"hopper_gemm_kernels\.py:\d+:\d+: error: 'async_desc_load' reads "
                             r"the local_slice .* as a tile, but it is not one"):
        compile_kernel("runtime_view_load", sig)


# ------------------------------------------------------------------------------------------------
# Registers: a 128x256 fp32 accumulator on 8 warps (128 registers a thread) without spills
# ------------------------------------------------------------------------------------------------

PIPELINED = ("a_ptr:*fp16:16, b_ptr:*fp16:16, c_ptr:*fp16:16, M:i32:16, N:i32:16, K:i32:16, "
             "stride_am:i32:16, stride_ak:i32:1, stride_bk:i32:16, stride_bn:i32:1, "
             "stride_cm:i32:16, stride_cn:i32:1, BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, "
             "NUM_STAGES=3")


def test_pipelined_gemm_128x256x64_on_8_warps_does_not_spill(ptxas):
    ptx = compile_kernel("pipelined_gemm", PIPELINED, num_warps=8, stage="ptx").ptx
    run = ptxas(ptx, "sm_90a", verbose=True)
    registers, spills, text = run.registers, run.spill_bytes, run.log
    assert spills == 0, text
    assert registers <= 255
    # Both operands stream in 16-byte cp.async copies: (x % M) and (y % N) offsets stay
    # contiguous in runs of M's and N's divisibility (16), so B is not copied element by element.
    assert "ld.global" not in ptx
    copies = re.findall(r"cp\.async\.cg\.shared\.global\s+\[[^]]*\],\s*\[[^]]*\],\s*16", ptx)
    # Per thread and stage: A 128x64 / 256 threads / 8 = 4 copies, B 64x256 / 256 / 8 = 8;
    # two prologue stages (unrolled) and the loop's one.
    assert len(copies) == 3 * (4 + 8), len(copies)
    # The accumulator stays in place across async_dot and its wait: no copies of it.
    assert not re.search(r"mov\.f32\s+%f\d+,\s*%f\d+;", ptx)


def k_loop(ptx):
    """The body of the loop that holds the wgmma (from its label to its back branch)."""
    mma = ptx.index("wgmma.mma_async")
    start = ptx.rindex("$L_for_", 0, mma)
    return ptx[start:ptx.index("bra.uni", mma)]


@pytest.mark.parametrize("k_multiple_of_16", [True, False])
def test_k_masks_compare_once_per_run_of_equal_rows(k_multiple_of_16):
    """`ks[:, None] < K - ahead * BLOCK_K` with K a multiple of 16 is constant over aligned runs
    of 16 rows (AxisInfo), so a thread holding B rows r and r + 8 (8 warps, one 256-wide row per
    warp) sets one predicate for both, as Triton's lowering does: 4 compares for its 8 rows, and
    one for A's 8 columns. When K is not known to be a multiple of 16, every B row compares (and
    A's copies shrink below 16 bytes: its mask may change inside a vector)."""
    sig = PIPELINED if k_multiple_of_16 else PIPELINED.replace("K:i32:16,", "K:i32,")
    loop = k_loop(compile_kernel("pipelined_gemm", sig, num_warps=8, stage="ptx").ptx)
    # The zero-fill size of each 16-byte copy of the stage (16 or 0 by its mask).
    sizes = re.findall(r"cp\.async\.cg\.shared\.global\s+\[[^]]*\],\s*\[[^]]*\],\s*16,\s*(%r\d+);",
                       loop)
    if k_multiple_of_16:
        assert len(sizes) == 4 + 8 and len(set(sizes[:4])) == 1, sizes
        assert len(set(sizes[4:])) == 4 and sizes[4] == sizes[5] and sizes[6] == sizes[7], sizes
        assert len(re.findall(r"setp\.lt\.s32", loop)) == 1 + 4, loop
    else:
        assert len(sizes) == 8 and len(set(sizes)) == 8, sizes


def test_pipelined_gemm_k_loop_keeps_its_wgmma_pipeline(ptxas):
    """The K loop's 4 wgmmas of a stage are not serialized (C7511-C7519) and nothing spills on 8
    warps. (On 4 warps the 128x256 fp32 accumulator alone is 256 registers a thread, past
    ptxas's 255: Triton 3.6 gets the same C7511 and spills there.)"""
    ptx = compile_kernel("pipelined_gemm", PIPELINED, num_warps=8, stage="ptx").ptx
    run = ptxas(ptx, "sm_90a", verbose=True)
    assert run.spill_bytes == 0 and not re.search(r"C75[01]\d", run.log), run.log


def test_warp_group_origin_of_wgmma_descriptors_comes_from_a_uniform_warp_index():
    """Each warp group's A tile starts at its own rows: the descriptors take that origin from
    the warp index every lane reads from lane 0 (shfl.sync.idx of %tid.x / 32), so that ptxas
    keeps them in uniform registers, not from %tid.x directly."""
    ptx = compile_kernel("pipelined_gemm", PIPELINED, num_warps=8, stage="ptx").ptx
    tid = re.search(r"mov\.u32\s+(%r\d+),\s*%tid\.x;", ptx).group(1)
    shifted = re.search(rf"shr\.u32\s+(%r\d+),\s*{tid},\s*5;", ptx).group(1)
    warp = re.search(rf"shfl\.sync\.idx\.b32\s+(%r\d+),\s*{shifted},\s*0,\s*31,\s*-1;",
                     ptx).group(1)
    warp_tid = re.search(rf"shl\.b32\s+(%r\d+),\s*{warp},\s*5;", ptx).group(1)
    # The warp-group bit (tid bit 7) of the A descriptor's origin, taken before the first wgmma.
    group_bit = re.findall(r"and\.b32\s+%r\d+,\s*(%r\d+),\s*128;",
                           ptx[:ptx.index("wgmma.mma_async")])
    assert warp_tid in group_bit, group_bit
