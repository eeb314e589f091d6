"""tl.dot that no tensor-core form takes, past the straight-line budget (layout::unrollsFmaDot:
4,096 products a thread per dot, 8,192 per kernel): A and B are staged in shared memory and each
thread loops over K, a few k-steps an iteration, reading its rows of A and columns of B there
and summing into its accumulator registers with fma.rn / mad.lo (kernels:
tests/python/fma_dot_kernels.py, tests/python/batched_dot_kernels.py).

Triton's test_dot shapes that were refused (fp32 with input_precision="ieee", 128x128x64 and
64x128x128 at 2 warps: 16,384 products a thread), at 4 warps too, fp64, int8 into int32, a K
loop and a batched dot past the kernel's budget compile for sm_90a, sm_80 and sm_100a, with a
backward branch in their PTX, and ptxas accepts them in seconds. Dots within the budget keep the
unrolled form. The interpreter runs the same kernels against NumPy (float64 reference, within
the FMA chain's rounding bound). tests/gpu/test_fma_dot_loop_gpu.py runs them on a GPU."""

import importlib
import re
import time

import numpy as np
import pytest

import batched_dot_kernels as bk
import fma_dot_kernels as fk

native_loader = importlib.import_module("warpweave._native_loader")
pytestmark = pytest.mark.skipif(not native_loader.available(),
                                reason="warpweave._native is not built (pip install .)")

TARGETS = ["sm_90a", "sm_80", "sm_100a"]
# Seconds a compile (warpweave and ptxas) may take: the loops took 0.1-1.5 s on a busy 2-core
# host, the unrolled form of the same dots 94-345 s.
COMPILE_SECONDS = 60


@pytest.fixture(autouse=True)
def no_disk_cache(monkeypatch):
    monkeypatch.setenv("WARPWEAVE_CACHE_DISABLE", "1")


def compile_timed(kernel, args, consts, target, warps, stages=1):
    """The kernel compiled for `target` through ptxas, and the seconds that took."""
    start = time.monotonic()
    values = kernel.bind(args, consts)
    k = kernel.compile_for(values, False, (warps, stages, 1), target=target).kernel
    seconds = time.monotonic() - start
    assert k.cubin, "ptxas rejected the kernel"
    print(f"{target} {warps} warps: {seconds:.1f} s, {k.registers} registers, "
          f"{k.spill_bytes} bytes of spills")
    return k, seconds


def backward_branches(ptx):
    """Targets of branches to a label above them: loops."""
    labels = {m.group(1): m.start() for m in re.finditer(r"^(\$\w+):", ptx, re.M)}
    return [m.group(1) for m in re.finditer(r"\bbra(?:\.uni)? (\$\w+);", ptx)
            if m.group(1) in labels and labels[m.group(1)] < m.start()]


def dot_loops(ptx):
    return [t for t in backward_branches(ptx) if t.startswith("$L_dot_k")]


def fmas(ptx, kind="f32"):
    """Per-element dot steps: fma.rn, or an integer mad of two registers into a third operand
    (address arithmetic multiplies by immediates)."""
    if kind == "s32":
        return len(re.findall(r"mad\.lo\.s32 %r\d+, %r\d+, %r\d+, \S+;", ptx))
    return len(re.findall(rf"fma\.rn\.{kind} ", ptx))


def tile_args(M, N, K, dtype, out=None):
    return (np.zeros((M, K), dtype), np.zeros((K, N), dtype), np.zeros((M, N), out or dtype))


def tile(M, N, K, with_acc=False):
    return dict(M=M, N=N, K=K, PRECISION="ieee", WITH_ACC=with_acc)


# ---- compiled for the GPU targets ----------------------------------------------------------------

@pytest.mark.usefixtures("requires_ptxas")
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("warps", [2, 4])
@pytest.mark.parametrize("M,N,K", [(128, 128, 64), (64, 128, 128)])
def test_test_dots_ieee_shapes_loop_over_k(target, warps, M, N, K):
    """128x128x64 and 64x128x128 fp32 `ieee`: 16,384 products a thread at 2 warps (refused
    before), 8,192 at 4 (unrolled before: 94-122 s of ptxas and 155-179 KB of spills)."""
    k, seconds = compile_timed(fk.tile_dot, tile_args(M, N, K, np.float32), tile(M, N, K),
                               target, warps)
    assert len(dot_loops(k.ptx)) == 1
    assert seconds < COMPILE_SECONDS
    # The loop body does a few k-steps of the thread's M * N / (32 * warps) accumulators.
    per_thread = M * N // (32 * warps)
    assert 0 < fmas(k.ptx) <= 512 and fmas(k.ptx) % per_thread == 0
    # One barrier before the operands go to shared memory, one before the loop reads them; the
    # result's conversion to the store's layout brings two more.
    assert k.ptx.count("bar.sync 0;") == 4


@pytest.mark.usefixtures("requires_ptxas")
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("M,N,K,warps", [(64, 64, 128, 2), (128, 128, 64, 4), (128, 128, 64, 2)])
def test_fp64_dots_loop_over_k(target, M, N, K, warps):
    """64x64x128 at 2 warps was the unrolled form's worst: 345 s of ptxas, 431 KB of spills.
    128x128x64 at 2 warps holds 512 accumulator registers a thread, the most accepted."""
    k, seconds = compile_timed(fk.tile_dot, tile_args(M, N, K, np.float64),
                               tile(M, N, K, with_acc=True), target, warps)
    assert len(dot_loops(k.ptx)) == 1 and 0 < fmas(k.ptx, "f64") <= 512
    assert fmas(k.ptx, "f32") == 0
    assert seconds < COMPILE_SECONDS


@pytest.mark.usefixtures("requires_ptxas")
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", [np.int8, np.uint8])
def test_int8_dot_under_mma_rows_loops_with_integer_mads(target, dtype):
    """M = 8 is under mma.sync's 16 rows: per-thread FMAs, 16,384 products a thread at 1 warp,
    summed by mad.lo.s32 into int32. The thread holds more columns than rows here, so B is read
    one column at a time."""
    k, seconds = compile_timed(fk.tile_dot, tile_args(8, 512, 128, dtype, np.int32),
                               tile(8, 512, 128), target, 1)
    assert len(dot_loops(k.ptx)) == 1 and 0 < fmas(k.ptx, "s32") <= 512
    assert not re.search(r"mma\.sync|wgmma", k.ptx)
    assert seconds < COMPILE_SECONDS


@pytest.mark.usefixtures("requires_ptxas")
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("BM,BN,BK,warps", [(128, 128, 64, 2), (64, 128, 128, 4)])
def test_k_loop_carries_its_accumulator_through_the_dot_loop(target, BM, BN, BK, warps):
    args = tile_args(256, 256, 256, np.float32) + (256, 256, 256)
    k, seconds = compile_timed(fk.k_loop, args,
                               dict(BM=BM, BN=BN, BK=BK, PRECISION="ieee"), target, warps, 3)
    loops = backward_branches(k.ptx)
    assert len(dot_loops(k.ptx)) == 1 and len(loops) == 2
    assert seconds < COMPILE_SECONDS


@pytest.mark.usefixtures("requires_ptxas")
@pytest.mark.parametrize("target", TARGETS)
def test_batched_fp64_dot_past_the_kernel_budget_loops(target):
    """8 64x64x64 fp64 dots at 4 warps, 2,048 products a thread each: the first four fill the
    kernel's 8,192 and stay unrolled, the others loop over K (the fifth was refused before)."""
    B = 8
    args = tuple(np.zeros((B, 64, 64), np.float64) for _ in range(4))
    k, seconds = compile_timed(bk.batched_dot, args, dict(B=B, M=64, N=64, K=64, WITH_ACC=0),
                               target, 4)
    assert len(dot_loops(k.ptx)) == B - 4
    body = (fmas(k.ptx, "f64") - 4 * 2048) // (B - 4)
    assert 0 < body <= 512 and fmas(k.ptx, "f64") == 4 * 2048 + (B - 4) * body
    assert seconds < COMPILE_SECONDS


@pytest.mark.usefixtures("requires_ptxas")
def test_dot_loop_in_an_async_task_syncs_the_task_only():
    """A 4-warp worker task's dot loops over K beside the default task's cross-warp max: its
    staging waits on the task's named barrier (bar.sync 14, 128), never on barrier 0, and its
    operands lie past the region the default task uses."""
    M, N, K = 64, 128, 128
    args = tile_args(M, N, K, np.float32) + (np.zeros((128, 64), np.float32), )
    k, _ = compile_timed(fk.dot_in_task, args, dict(M=M, N=N, K=K), "sm_90a", 4)
    ends = re.findall(r"^\$L_task_end_\d+:$", k.ptx, re.M)
    task = k.ptx[k.ptx.index(ends[0]):k.ptx.index(ends[1])]
    assert len(dot_loops(task)) == 1
    assert "bar.sync 0;" not in task and task.count("bar.sync 14, 128;") >= 2


# ---- within the budget: unrolled as before -------------------------------------------------------

@pytest.mark.parametrize("target", TARGETS)
def test_dot_within_the_budget_stays_unrolled(target):
    """64x64x32 fp32 `ieee` at 4 warps: 32 accumulators a thread x K = 32, 1,024 products,
    straight-line FMAs (no loop, no staging of the operands for a loop)."""
    values = fk.tile_dot.bind(tile_args(64, 64, 32, np.float32), tile(64, 64, 32))
    ptx = fk.tile_dot.compile_for(values, False, (4, 1, 1), target=target).kernel.ptx
    assert not backward_branches(ptx)
    assert fmas(ptx) == 32 * 32


@pytest.mark.usefixtures("requires_ptxas")
@pytest.mark.parametrize("target", ["sm_80", "sm_90a"])
def test_fma_dot_kernels_declare_the_register_cap(target):
    """Told only .reqntid, ptxas held the unrolled 1,024-product dot above to 32 registers and
    17 KB of spills: kernels with per-element FMA dots declare .maxnreg (255 at 4 warps), as
    sm_100a kernels do; kernels without them declare nothing on these targets."""
    k, _ = compile_timed(fk.tile_dot, tile_args(64, 64, 32, np.float32), tile(64, 64, 32),
                         target, 4)
    assert re.search(r"^\.maxnreg 255$", k.ptx, re.M)
    assert k.registers > 32
    tf32 = dict(tile(64, 64, 32), PRECISION="tf32")  # wgmma or mma.sync: no FMA dot
    values = fk.tile_dot.bind(tile_args(64, 64, 32, np.float32), tf32)
    ptx = fk.tile_dot.compile_for(values, False, (4, 1, 1), target=target).kernel.ptx
    assert "mma" in ptx and ".maxnreg" not in ptx


# ---- located errors ------------------------------------------------------------------------------

def test_more_accumulators_than_a_loop_holds_are_a_located_error():
    values = fk.tile_dot.bind(tile_args(256, 256, 64, np.float32), tile(256, 256, 64))
    with pytest.raises(Exception, match=(
            r"fma_dot_kernels\.py:\d+:\d+: error: tl\.dot of tensor<256x64xfp32> by "
            r"tensor<64x256xfp32> into tensor<256x256xfp32> has no tensor-core form on sm_90a and "
            r"needs 1024 accumulator registers a thread for per-thread FMAs, at most 512 \(a "
            r"thread has 255\); use smaller tiles, more warps \(num_warps\), or operand types "
            r"that take tensor cores: .*float16 ones into float16")):
        fk.tile_dot.compile_for(values, False, (2, 1, 1), target="sm_90a")


def test_operands_past_shared_memory_are_a_located_error():
    values = fk.tile_dot.bind(tile_args(8, 512, 128, np.float32), tile(8, 512, 128))
    with pytest.raises(Exception, match=(
            r"fma_dot_kernels\.py:\d+:\d+: error: tl\.dot of tensor<8x128xfp32> by "
            r"tensor<128x512xfp32> into tensor<8x512xfp32> has no tensor-core form on sm_80 and "
            r"its per-thread FMAs read A and B from shared memory: 266240 bytes, more than the "
            r"166912 a block may use; use a smaller K or smaller tiles")):
        fk.tile_dot.compile_for(values, False, (1, 1, 1), target="sm_80")


# ---- the same programs in the interpreter --------------------------------------------------------

def within_fma_rounding(out, a, b, acc=None):
    """`out` against the float64 product: a chain of K fp32 (fp64) FMAs is off by at most
    K * u * sum |a| |b| (+ |acc|), u the unit roundoff."""
    u = np.finfo(out.dtype).eps / 2
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    ref, bound = a64 @ b64, np.abs(a64) @ np.abs(b64)
    if acc is not None:
        ref += acc
        bound += np.abs(acc)
    err = np.abs(out.astype(np.float64) - ref)
    assert np.all(err <= a.shape[-1] * u * bound), f"largest error {err.max()}"


@pytest.mark.parametrize("with_acc", [False, True])
@pytest.mark.parametrize("warps", [2, 4])
@pytest.mark.parametrize("M,N,K", [(128, 128, 64), (64, 128, 128)])
def test_test_dots_ieee_shapes_in_interpreter(rng, M, N, K, warps, with_acc):
    a = rng.standard_normal((M, K)).astype(np.float32)
    b = rng.standard_normal((K, N)).astype(np.float32)
    acc = rng.standard_normal((M, N)).astype(np.float32)
    c = acc.copy() if with_acc else np.full((M, N), np.nan, np.float32)
    fk.tile_dot[(1, )](a, b, c, **tile(M, N, K, with_acc), num_warps=warps)
    within_fma_rounding(c, a, b, acc if with_acc else None)


def test_fp64_dot_in_interpreter(rng):
    M, N, K = 64, 64, 128
    a, b, acc = (rng.standard_normal(s) for s in ((M, K), (K, N), (M, N)))
    c = acc.copy()
    fk.tile_dot[(1, )](a, b, c, **tile(M, N, K, with_acc=True), num_warps=2)
    within_fma_rounding(c, a, b, acc)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8])
def test_int8_dot_in_interpreter(rng, dtype):
    info = np.iinfo(dtype)
    a = rng.integers(info.min, int(info.max) + 1, (8, 128)).astype(dtype)
    b = rng.integers(info.min, int(info.max) + 1, (128, 512)).astype(dtype)
    a[0, :], b[:, 0] = info.min, info.max  # the extremes' products
    c = np.zeros((8, 512), np.int32)
    fk.tile_dot[(1, )](a, b, c, **tile(8, 512, 128), num_warps=1)
    np.testing.assert_array_equal(c, a.astype(np.int64) @ b.astype(np.int64))


@pytest.mark.parametrize("BM,BN,BK,warps", [(128, 128, 64, 2), (64, 128, 128, 4)])
def test_k_loop_in_interpreter(rng, BM, BN, BK, warps):
    M, N, K = 200, 136, 256  # ragged M and N
    a = rng.standard_normal((M, K)).astype(np.float32)
    b = rng.standard_normal((K, N)).astype(np.float32)
    c = np.full((M, N), np.nan, np.float32)
    grid = ((M + BM - 1) // BM, (N + BN - 1) // BN)
    fk.k_loop[grid](a, b, c, M, N, K, BM=BM, BN=BN, BK=BK, PRECISION="ieee", num_warps=warps)
    within_fma_rounding(c, a, b)


@pytest.mark.parametrize("B", [8, 16])
def test_batched_fp64_dot_in_interpreter(rng, B):
    a, b = rng.standard_normal((B, 64, 64)), rng.standard_normal((B, 64, 64))
    out = np.full((B, 64, 64), np.nan)
    bk.batched_dot[(1, )](a, b, np.zeros_like(out), out, B=B, M=64, N=64, K=64, WITH_ACC=0)
    for i in range(B):
        within_fma_rounding(out[i], a[i], b[i])


def test_dot_in_task_in_interpreter(rng):
    M, N, K = 64, 128, 128
    a = rng.standard_normal((M, K)).astype(np.float32)
    b = rng.standard_normal((K, N)).astype(np.float32)
    x = rng.standard_normal((128, 64)).astype(np.float32)
    c = np.full((M, N), np.nan, np.float32)
    expected_max = x.max(axis=0)
    fk.dot_in_task[(1, )](a, b, c, x, M=M, N=N, K=K, num_warps=4)
    within_fma_rounding(c, a, b)
    np.testing.assert_array_equal(x[0], expected_max)
