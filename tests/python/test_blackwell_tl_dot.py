"""tl.dot K loops on sm_100a (issue 19): the software pipeliner stages A and B in swizzled shared
memory (cp.async, or TMA for host descriptors) and the dot becomes tcgen05.mma into an fp32
accumulator in tensor memory, as upstream Triton lowers tl.dot for Blackwell:

- PTX structure: tcgen05.alloc of the accumulator's columns (N rounded up to a power of two, 32
  at least) and its dealloc, tcgen05.mma of the operands' kind with an instruction descriptor
  decoded field by field from the PTX ISA's table (the same decoder as test_blackwell_
  descriptors.py), tcgen05.commit to an mbarrier, a wait on the previous MMA's barrier before
  the copies overwrite its stage, a wait on the last MMA before tcgen05.ld reads the result, and
  no mma.sync; ptxas -v assembles it without spills.
- The same Tile IR runs in the interpreter (an MMA lands when its commit completes, so a read of
  the accumulator or a stage overwritten before the wait would be reported) against NumPy.
- Fallbacks: dots tcgen05.mma does not take here stay mma.sync, and sm_90a keeps wgmma.

No Blackwell GPU ran any of this: the PTX is checked against the PTX ISA and ptxas only."""
import importlib
import re
from pathlib import Path

import numpy as np
import pytest

import blackwell_tl_dot_kernels as dk
from test_blackwell_descriptors import decode_idesc, decode_sdesc, immediate_of

native_loader = importlib.import_module("warpweave._native_loader")
pytestmark = pytest.mark.skipif(not native_loader.available(),
                                reason="warpweave._native is not built (pip install .)")

PATH = Path(dk.__file__)
# dtype -> (bytes, tcgen05 kind, the instruction descriptor's atype / btype code)
FORMS = {"fp16": (2, "f16", 0), "bf16": (2, "f16", 1), "fp8e4nv": (1, "f8f6f4", 0),
         "fp8e5": (1, "f8f6f4", 1)}


def sig_dot_loop(dtype, BM, BN, BK, init=False, b_kn=True, out="fp16", div16=True):
    # div16: M, N, K and the strides divisible by 16, as Triton's launcher specializes them (the K
    # mask is then constant over each 16-byte copy).
    d = ":16" if div16 else ""
    return (f"a_ptr:*{dtype}:16,b_ptr:*{dtype}:16,c_ptr:*{out}:16,M:i32{d},N:i32{d},K:i32{d},"
            f"stride_am:i32{d},stride_bk:i32{d},stride_cm:i32{d},BM={BM},BN={BN},BK={BK},"
            f"INIT={int(init)},B_KN={int(b_kn)}")


def compile_kernel(name, sig, target="sm_100a", num_warps=4, num_stages=3, stage="ptx"):
    return native_loader.native().compile([(str(PATH), PATH.read_text())], name, sig, {},
                                          target=target, num_warps=num_warps,
                                          num_stages=num_stages, stage=stage)


def ptx_of(name, sig, **kw):
    return compile_kernel(name, sig, **kw).ptx


def alloc_columns(ptx):
    allocs = re.findall(r"tcgen05\.alloc\.cta_group::1\.sync\.aligned\.shared::cta\.b32 "
                        r"\[%r\d+\], (\d+);", ptx)
    deallocs = re.findall(r"tcgen05\.dealloc\.cta_group::1\.sync\.aligned\.b32 %r\d+, (\d+);", ptx)
    return [int(c) for c in allocs], [int(c) for c in deallocs]


def check_structure(ptx, kind, mmas_per_step):
    """The order of the tcgen05 steps in the PTX text; returns the MMAs' operand registers."""
    mmas = re.findall(rf"tcgen05\.mma\.cta_group::1\.kind::{kind} \[(%r\d+)\], (%rd\d+), "
                      rf"(%rd\d+), (%r\d+), (%p\d+);", ptx)
    assert len(mmas) == mmas_per_step  # one K step's instructions, in the loop body only
    assert "mma.sync" not in ptx and "wgmma" not in ptx
    first_mma = ptx.index("tcgen05.mma.")
    last_mma = ptx.rindex("tcgen05.mma.")
    commit = ptx.index("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64",
                       last_mma)
    # The previous MMA's barrier is waited on before this iteration's copies refill its stage.
    wait = ptx.index("mbarrier.try_wait.parity.shared::cta.b64", commit)
    refill = min(i for i in (ptx.find("cp.async.", wait), ptx.find("cp.async.bulk.tensor", wait))
                 if i >= 0)
    assert first_mma < commit < wait < refill
    # After the loop: the last MMA's wait, then tcgen05.ld (with its wait) and the dealloc.
    ld = ptx.index("tcgen05.ld.sync.aligned.32x32b" if "32x32b" in ptx[refill:]
                   else "tcgen05.ld.sync.aligned.16x32bx2", refill)
    assert ptx.rfind("mbarrier.try_wait.parity.shared::cta.b64", 0, ld) > refill
    assert ld < ptx.index("tcgen05.wait::ld.sync.aligned", ld) < ptx.index("tcgen05.dealloc", ld)
    return mmas


@pytest.mark.parametrize("dtype,BM,BN,BK,warps,b_kn", [
    ("fp16", 128, 128, 64, 4, True),
    ("fp16", 128, 256, 64, 8, True),    # tutorial 03's Blackwell configuration
    ("bf16", 128, 64, 32, 4, True),
    ("fp16", 64, 128, 32, 4, True),     # M = 64: the 16x32bx2 read-back
    ("fp16", 128, 16, 16, 4, True),     # N = 16 (32 columns allocated), K = 16: one MMA
    ("fp8e4nv", 128, 128, 128, 8, True),   # fp8 B N-major: tcgen05 reads it transposed
    ("fp8e5", 128, 64, 64, 4, False),   # fp8 B from K-contiguous memory: copied [N, K]
])
def test_tcgen05_dot_ptx(ptxas, dtype, BM, BN, BK, warps, b_kn):
    ptx = ptx_of("dot_loop", sig_dot_loop(dtype, BM, BN, BK, b_kn=b_kn), num_warps=warps)
    elem, kind, code = FORMS[dtype]
    cols = max(32, 1 << (BN - 1).bit_length())
    assert alloc_columns(ptx) == ([cols], [cols])
    mmas = check_structure(ptx, kind, BK * elem // 32)
    d = decode_idesc(immediate_of(ptx, mmas[0][3], "mov.b32"))
    # B as loaded ([K, N], N contiguous) is MN-major ("transpose B"); fp8 B loaded from
    # K-contiguous memory is copied as [N, K] and read K-major.
    assert d == {"sparse_sel": 0, "sparse": 0, "saturate": 0, "dtype": 1, "r6": 0,
                 "atype": code, "btype": code, "neg_a": 0, "neg_b": 0, "trans_a": 0,
                 "trans_b": int(b_kn), "n": BN, "r23": 0, "m": BM, "r29": 0, "shift": 0}
    for reg in mmas[0][1:3]:
        s = decode_sdesc(immediate_of(ptx, reg, "or.b64"))
        assert s["version"] == 1 and s["swizzle"] in (2, 4, 6) and s["fixed0"] == 0
    # Accumulate-or-not: the first MMA of a zero-initialized loop overwrites the accumulator.
    assert re.search(rf"setp\.ne\.s32 {re.escape(mmas[0][4])}, %r\d+, 0;", ptx)
    run = ptxas(ptx, arch="sm_100a", verbose=True)
    assert run.spill_bytes == 0, run.log


def test_loaded_accumulator_is_stored_to_tensor_memory(ptxas):
    # acc starts from C: tcgen05.st before the loop, every MMA accumulates (a constant true).
    ptx = ptx_of("dot_loop", sig_dot_loop("fp16", 128, 128, 64, init=True))
    st = ptx.index("tcgen05.st.sync.aligned.32x32b")
    assert st < ptx.index("tcgen05.mma.") and "tcgen05.wait::st.sync.aligned" in ptx
    ptxas(ptx, arch="sm_100a")


@pytest.mark.parametrize("b_nk", [True, False])
def test_tma_dot_loop_ptx(ptxas, b_nk):
    b_block = "128x64" if b_nk else "64x128"
    sig = (f"a_desc:desc<fp16,128x64>,b_desc:desc<fp16,{b_block}>,c_ptr:*fp16:16,M:i32,N:i32,"
           f"K:i32,stride_cm:i32:16,BM=128,BN=128,BK=64,B_NK={int(b_nk)}")
    ptx = ptx_of("dot_loop_tma", sig)
    mmas = check_structure(ptx, "f16", 4)
    assert "cp.async.bulk.tensor.2d.shared::cluster.global" in ptx
    d = decode_idesc(immediate_of(ptx, mmas[0][3], "mov.b32"))
    assert (d["trans_a"], d["trans_b"], d["n"], d["m"]) == (0, 0 if b_nk else 1, 128, 128)
    run = ptxas(ptx, arch="sm_100a", verbose=True)
    assert run.spill_bytes == 0, run.log


def test_persistent_loop_reuses_tensor_memory(ptxas):
    sig = ("a_ptr:*fp16:16,b_ptr:*fp16:16,c_ptr:*fp16:16,M:i32:16,N:i32:16,K:i32:16,NUM_PROGS:i32,"
           "BM=128,BN=128,BK=64")
    ptx = ptx_of("dot_loop_persistent", sig)
    assert alloc_columns(ptx) == ([128], [128])  # once per kernel, outside the tile loop
    check_structure(ptx, "f16", 4)
    run = ptxas(ptx, arch="sm_100a", verbose=True)
    assert run.spill_bytes == 0, run.log


# ---- the sm_100a Tile IR in the interpreter ----

def buf(x, writable=False):
    return (x.ctypes.data, x.nbytes, writable)


def eighths(rng, shape, dtype=np.float16):
    return (rng.integers(-8, 9, shape) / 8).astype(dtype)


@pytest.mark.parametrize("mnk,block,init,b_kn,stages", [
    ((200, 136, 328), (128, 64, 64), False, True, 3),   # clipped tiles, K not a multiple of BK
    ((130, 70, 40), (128, 128, 32), True, True, 4),     # C accumulated onto; prologue past the end
    ((64, 96, 256), (64, 32, 64), False, False, 2),     # M = 64 tiles, B given as [N, K] rows
    ((128, 64, 0), (128, 64, 64), False, True, 3),      # K = 0: the loop runs no iteration
    ((128, 64, 0), (128, 64, 64), True, True, 3),
])
def test_sm100a_tile_ir_in_interpreter(rng, mnk, block, init, b_kn, stages):
    M, N, K = mnk
    BM, BN, BK = block
    k = compile_kernel("dot_loop", sig_dot_loop("fp16", BM, BN, BK, init=init, b_kn=b_kn,
                                                out="fp32", div16=False),
                       num_stages=stages, stage="tile-ir")
    assert "tcgen05_mma" in k.tile_ir and " dot " not in k.tile_ir
    a = eighths(rng, (M, K))
    b = eighths(rng, (K, N))
    bm = b if b_kn else np.ascontiguousarray(b.T)
    c0 = eighths(rng, (M, N), np.float32)
    c = c0.copy()
    grid = (-(-M // BM), -(-N // BN), 1)
    k.interpret(grid, [buf(a), buf(bm), buf(c, True), M, N, K, max(K, 1), bm.shape[1], N])
    # Sums of products of eighths are exact in fp32.
    ref = a.astype(np.float64) @ b.astype(np.float64) + (c0 if init else 0)
    np.testing.assert_array_equal(c, ref.astype(np.float32))


def test_sm100a_persistent_tile_ir_in_interpreter(rng):
    M, N, K = 256, 384, 192
    k = compile_kernel("dot_loop_persistent", "a_ptr:*fp16:16,b_ptr:*fp16:16,c_ptr:*fp16:16,"
                       "M:i32,N:i32,K:i32,NUM_PROGS:i32,BM=128,BN=128,BK=64", stage="tile-ir")
    assert k.tile_ir.count("tcgen05_mma") == 1
    a, b = eighths(rng, (M, K)), eighths(rng, (K, N))
    c = np.full((M, N), np.nan, np.float16)
    k.interpret((2, 1, 1), [buf(a), buf(b), buf(c, True), M, N, K, 2])
    np.testing.assert_array_equal(c, (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float16))


def test_sm100a_tma_tile_ir_in_interpreter(rng):
    M, N, K = 256, 128, 320
    sig = ("a_desc:desc<fp16,128x64>,b_desc:desc<fp16,128x64>,c_ptr:*fp16:16,M:i32,N:i32,K:i32,"
           "stride_cm:i32:16,BM=128,BN=128,BK=64,B_NK=1")
    k = compile_kernel("dot_loop_tma", sig, stage="tile-ir")
    assert "tcgen05_mma" in k.tile_ir
    a, bt = eighths(rng, (M, K)), eighths(rng, (N, K))
    c = np.full((M, N), np.nan, np.float16)
    k.interpret((2, 1, 1), [(a.ctypes.data, a.nbytes, [M, K], [K, 1]),
                                   (bt.ctypes.data, bt.nbytes, [N, K], [K, 1]),
                                   buf(c, True), M, N, K, N])
    np.testing.assert_array_equal(
        c, (a.astype(np.float64) @ bt.T.astype(np.float64)).astype(np.float16))


# ---- where tl.dot stays mma.sync on sm_100a, and sm_90a is untouched ----

@pytest.mark.parametrize("dtype,BM,BN,BK,warps,why", [
    ("fp16", 256, 64, 32, 8, "M = 256 per CTA: past one cta_group::1 MMA's 128 rows"),
    ("fp16", 32, 64, 32, 4, "M = 32: tcgen05.mma takes M = 64 or 128"),
    ("fp16", 128, 64, 32, 2, "2 warps: tcgen05.ld reads by whole warp groups"),
    ("fp16", 128, 512, 16, 8, "N = 512: wider than one MMA (N <= 256)"),
    ("fp32", 128, 64, 32, 4, "tf32 not built for tl.dot yet"),
])
def test_fallback_to_mma_sync(ptxas, dtype, BM, BN, BK, warps, why):
    ptx = ptx_of("dot_loop", sig_dot_loop(dtype, BM, BN, BK, out="fp32"), num_warps=warps)
    assert "mma.sync.aligned" in ptx and "tcgen05" not in ptx, why
    ptxas(ptx, arch="sm_100a")


def test_sm90a_keeps_wgmma():
    ptx = ptx_of("dot_loop", sig_dot_loop("fp16", 128, 128, 64), target="sm_90a")
    assert "wgmma.mma_async" in ptx and "tcgen05" not in ptx


def test_sm100a_tma_in_while_loop(ptxas, rng):
    # The TMA ring of a K loop nested in a while loop: its barriers are initialized again each
    # pass (after the CTA meets), in the PTX and in the interpreter, where 2 programs take the
    # 9 tiles in turn (tiles clipped in M and N, K not a multiple of BK).
    sig = ("a_desc:desc<fp16,128x64>,b_desc:desc<fp16,64x64>,c_ptr:*fp16:16,M:i32,N:i32,K:i32,"
           "NUM_PROGS:i32,BM=128,BN=64,BK=64")
    ptx = ptx_of("dot_loop_tma_while", sig)
    check_structure(ptx, "f16", 4)
    assert "cp.async.bulk.tensor.2d.shared::cluster.global" in ptx
    run = ptxas(ptx, arch="sm_100a", verbose=True)
    assert run.spill_bytes == 0, run.log
    M, N, K = 300, 150, 200
    k = compile_kernel("dot_loop_tma_while", sig, stage="tile-ir")
    assert k.tile_ir.count("tcgen05_mma") == 1 and "while" in k.tile_ir
    a, bt = eighths(rng, (M, K)), eighths(rng, (N, K))
    c = np.full((M, N), np.nan, np.float16)
    k.interpret((2, 1, 1), [(a.ctypes.data, a.nbytes, [M, K], [K, 1]),
                            (bt.ctypes.data, bt.nbytes, [N, K], [K, 1]),
                            buf(c, True), M, N, K, 2])
    np.testing.assert_array_equal(
        c, (a.astype(np.float64) @ bt.T.astype(np.float64)).astype(np.float16))
