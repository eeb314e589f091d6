"""python/warpweave/ops/kernels/hopper/gemm_pipelined.py as it was before its fix (commit 22b1ec5): with num_warps=8
(two consumer warp groups, no async tasks) thread 0 refills a stage by TMA right after
async_dot_wait(1), which retires only its own warp group's wgmmas, while the other group's wgmma
of the step before may still read that stage. Correct with num_warps=4 (one warp group). Since
issue 16 the compiler inserts the missing CTA barrier itself (SharedMemoryBarriers.cpp), as
Triton's does.
    signature: a_desc:desc<fp16,BMxBK>, b_desc:desc<fp16,BKxBN>, c_desc:desc<fp16,BMxBN>,
               M:i32, N:i32, K:i32, BLOCK_M, BLOCK_N, BLOCK_K, NUM_STAGES
"""
import warpweave as ww
import warpweave.language as tl
from warpweave import tlx


@ww.jit
def load_stage(a_desc, b_desc, a_bufs, b_bufs, full_bars, stage, off_m, off_n, off_k,
               STAGE_BYTES: tl.constexpr):
    bar = tlx.local_view(full_bars, stage)
    tlx.barrier_expect_bytes(bar, STAGE_BYTES)
    a_stage = tlx.local_view(a_bufs, stage)
    tlx.async_descriptor_load(a_desc, a_stage, [off_m, off_k], bar)  # MARK refill
    tlx.async_descriptor_load(b_desc, tlx.local_view(b_bufs, stage), [off_k, off_n], bar)


@ww.jit
def gemm_pipelined_unsynced(a_desc, b_desc, c_desc, M, N, K, BLOCK_M: tl.constexpr,
                            BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                            NUM_STAGES: tl.constexpr):
    off_m = tl.program_id(0) * BLOCK_M
    off_n = tl.program_id(1) * BLOCK_N
    num_k = tl.cdiv(K, BLOCK_K)
    dtype: tl.constexpr = tlx.dtype_of(a_desc)
    STAGE_BYTES: tl.constexpr = (BLOCK_M * BLOCK_K + BLOCK_K * BLOCK_N) * tlx.size_of(dtype)
    a_bufs = tlx.local_alloc((BLOCK_M, BLOCK_K), dtype, NUM_STAGES)
    b_bufs = tlx.local_alloc((BLOCK_K, BLOCK_N), dtype, NUM_STAGES)
    full_bars = tlx.alloc_barriers(num_barriers=NUM_STAGES, arrive_count=1)
    for i in tl.static_range(NUM_STAGES - 1):
        if i < num_k:
            load_stage(a_desc, b_desc, a_bufs, b_bufs, full_bars, i, off_m, off_n, i * BLOCK_K,
                       STAGE_BYTES)
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k in range(0, num_k):
        stage = k % NUM_STAGES
        tlx.barrier_wait(tlx.local_view(full_bars, stage), (k // NUM_STAGES) & 1)
        a_stage = tlx.local_view(a_bufs, stage)
        b_stage = tlx.local_view(b_bufs, stage)
        acc = tlx.async_dot(a_stage, b_stage, acc)  # MARK dot
        acc = tlx.async_dot_wait(1, acc)  # MARK wait
        # Missing here: tl.debug_barrier(), so that both warp groups are past step k - 1.
        next_k = k + NUM_STAGES - 1
        if next_k < num_k:
            load_stage(a_desc, b_desc, a_bufs, b_bufs, full_bars, next_k % NUM_STAGES, off_m,
                       off_n, next_k * BLOCK_K, STAGE_BYTES)
    acc = tlx.async_dot_wait(0, acc)
    c_desc.store([off_m, off_n], acc.to(tlx.dtype_of(c_desc)))
