"""Hopper GEMM, software-pipelined with TLX: C = A @ B through TMA, mbarriers and async wgmma.

A [M, K] and B [K, N] are fp16 or bf16, C [M, N] is stored in c_desc's element type, fp32
accumulation. Operands arrive through host TMA descriptors:
    a_desc block [BLOCK_M, BLOCK_K], b_desc block [BLOCK_K, BLOCK_N], c_desc block [BLOCK_M, BLOCK_N]
TMA zero-fills reads past the tensor edge and clips writes, so no masks are needed.

Shared memory holds NUM_STAGES (A, B) tile pairs, each with one mbarrier that the TMA engine
completes when both tiles have landed. The loop keeps one wgmma in flight: after waiting for all
but the newest MMA, the stage the previous MMA read is free and is refilled with the tile
NUM_STAGES - 1 steps ahead, once every warp group has retired the MMA that read it.
    grid = (cdiv(M, BLOCK_M) * cdiv(N, BLOCK_N),)
    constexprs: BLOCK_M=128, BLOCK_N=128 (or 256), BLOCK_K=64, GROUP_M=8, NUM_STAGES=3 or 4
    signature: a_desc:desc<fp16,128x64>, b_desc:desc<fp16,64x128>, c_desc:desc<fp16,128x128>,
               M:i32, N:i32, K:i32, BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8, NUM_STAGES=4
    launch: num_warps=4 (one warp group) or 8 (two, splitting BLOCK_M)
"""
import warpweave as ww
import warpweave.language as tl
from warpweave import tlx

from ..matmul import grouped_tile


@ww.jit
def load_stage(a_desc, b_desc, a_bufs, b_bufs, full_bars, stage, off_m, off_n, off_k,
               STAGE_BYTES: tl.constexpr):
    """Starts the TMA loads of one (A, B) tile pair into `stage`, completing its barrier."""
    bar = tlx.local_view(full_bars, stage)
    tlx.barrier_expect_bytes(bar, STAGE_BYTES)
    tlx.async_descriptor_load(a_desc, tlx.local_view(a_bufs, stage), [off_m, off_k], bar)
    tlx.async_descriptor_load(b_desc, tlx.local_view(b_bufs, stage), [off_k, off_n], bar)


@ww.jit
def gemm_pipelined_kernel(a_desc, b_desc, c_desc, M, N, K,
                          BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                          GROUP_M: tl.constexpr, NUM_STAGES: tl.constexpr):
    tl.static_assert(NUM_STAGES >= 2)
    pid_m, pid_n = grouped_tile(tl.program_id(0), tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N),
                                GROUP_M)
    off_m = pid_m * BLOCK_M
    off_n = pid_n * BLOCK_N
    num_k = tl.cdiv(K, BLOCK_K)

    dtype: tl.constexpr = tlx.dtype_of(a_desc)
    STAGE_BYTES: tl.constexpr = (BLOCK_M * BLOCK_K + BLOCK_K * BLOCK_N) * tlx.size_of(dtype)
    a_bufs = tlx.local_alloc((BLOCK_M, BLOCK_K), dtype, NUM_STAGES)
    b_bufs = tlx.local_alloc((BLOCK_K, BLOCK_N), dtype, NUM_STAGES)
    full_bars = tlx.alloc_barriers(num_barriers=NUM_STAGES, arrive_count=1)

    # Prologue: the first NUM_STAGES - 1 stages start loading before any MMA.
    for i in tl.static_range(NUM_STAGES - 1):
        if i < num_k:
            load_stage(a_desc, b_desc, a_bufs, b_bufs, full_bars, i, off_m, off_n, i * BLOCK_K,
                       STAGE_BYTES)

    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k in range(0, num_k):
        stage = k % NUM_STAGES
        # Each barrier completes once per trip around the ring: its phase flips every trip.
        phase = (k // NUM_STAGES) & 1
        tlx.barrier_wait(tlx.local_view(full_bars, stage), phase)
        acc = tlx.async_dot(tlx.local_view(a_bufs, stage), tlx.local_view(b_bufs, stage), acc)
        # All but the MMA just issued are done, so the stage of step k - 1 may be overwritten.
        acc = tlx.async_dot_wait(1, acc)
        # With two warp groups (num_warps=8) each retires only its own MMAs: all of them must be
        # past step k - 1 before the one issuing thread refills that stage.
        tl.debug_barrier()
        next_k = k + NUM_STAGES - 1
        if next_k < num_k:
            load_stage(a_desc, b_desc, a_bufs, b_bufs, full_bars, next_k % NUM_STAGES, off_m,
                       off_n, next_k * BLOCK_K, STAGE_BYTES)
    acc = tlx.async_dot_wait(0, acc)

    c_desc.store([off_m, off_n], acc.to(tlx.dtype_of(c_desc)))
