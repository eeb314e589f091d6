"""Planted synchronization bugs in the Blackwell library GEMM (warpweave.ops.kernels.blackwell.
gemm_ws) for tests/python/test_blackwell_gemm_ws.py: gemm_ws_kernel rebuilt from the library's
own helpers, with one of its tasks replaced by a copy that leaves out one wait:

PLANT = 1: the epilogue reads the accumulator without waiting for the commit that completes it
           (acc_full): it reads TMEM while the tile's MMAs may still be writing it;
PLANT = 2: the MMA task starts a tile without waiting for the epilogue to have read its
           accumulator (acc_empty): the MMA overwrites what the epilogue reads two tiles back;
PLANT = 3: the MMA task tells the epilogue that the accumulator is complete with a plain arrive
           right after issuing the tile's MMAs instead of a commit (which arrives when they have
           completed): the epilogue's wait passes while the MMAs still write the accumulator."""
import warpweave as ww
import warpweave.language as tl
from warpweave import tlx
from warpweave.ops.kernels.blackwell import gemm_ws as g


@ww.jit
def epilogue_no_wait(c_desc, c_bufs, acc_bufs, acc_full, acc_empty, clc, M, N,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr,
                     NUM_ACC: tl.constexpr, EPI_SUBTILE: tl.constexpr, USE_CLC: tl.constexpr):
    num_pid_m, num_pid_n, num_tiles = g.grid_shape(M, N, BLOCK_M, BLOCK_N, False)
    tile = tl.program_id(0)
    j = 0
    while tile != -1:
        pid_m, pid_n = g.tile_of(tile, num_pid_m, num_pid_n, GROUP_M, False)
        buf = j % NUM_ACC
        # (no wait on acc_full[buf])
        g.store_acc(c_desc, c_bufs, tlx.local_view(acc_bufs, buf),
                    tlx.local_view(acc_empty, buf), pid_m * BLOCK_M, pid_n * BLOCK_N,
                    j * EPI_SUBTILE, BLOCK_M, BLOCK_N, EPI_SUBTILE, False)
        tile = g.next_tile(clc, tile, j, num_tiles, USE_CLC, False)
        j += 1
    tlx.async_descriptor_store_wait(0)


@ww.jit
def mma_planted(a_bufs, b_bufs, acc_bufs, full_bars, empty_bars, acc_full, acc_empty, clc, M, N,
                K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                NUM_STAGES: tl.constexpr, NUM_ACC: tl.constexpr, USE_CLC: tl.constexpr,
                PLANT: tl.constexpr):
    num_pid_m, num_pid_n, num_tiles = g.grid_shape(M, N, BLOCK_M, BLOCK_N, False)
    num_k = tl.cdiv(K, BLOCK_K)
    tile = tl.program_id(0)
    j = 0
    step = 0
    while tile != -1:
        if PLANT == 2:
            buf = j % NUM_ACC
            acc = tlx.local_view(acc_bufs, buf)  # (no wait on acc_empty[buf])
        else:
            buf, acc = g.acquire_acc(acc_bufs, acc_empty, j, NUM_ACC)
        for k in range(0, num_k):
            stage = g.wait_stage(full_bars, step, NUM_STAGES)
            tlx.async_dot(tlx.local_view(a_bufs, stage), tlx.local_view(b_bufs, stage), acc,
                          use_acc=k > 0, mBarriers=[tlx.local_view(empty_bars, stage)])
            step += 1
        if PLANT == 3:
            tlx.barrier_arrive(tlx.local_view(acc_full, buf))
        else:
            tlx.tcgen05_commit(tlx.local_view(acc_full, buf))
        tile = g.next_tile(clc, tile, j, num_tiles, USE_CLC, False)
        j += 1


@ww.jit
def gemm_ws_planted(a_desc, b_desc, c_desc, M, N, K, BLOCK_M: tl.constexpr,
                    BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
                    NUM_STAGES: tl.constexpr, NUM_ACC: tl.constexpr, EPI_SUBTILE: tl.constexpr,
                    USE_CLC: tl.constexpr, PLANT: tl.constexpr):
    dtype: tl.constexpr = tlx.dtype_of(a_desc)
    a_bufs = tlx.local_alloc((BLOCK_M, BLOCK_K), dtype, NUM_STAGES)
    b_bufs = tlx.local_alloc((BLOCK_K, BLOCK_N), dtype, NUM_STAGES)
    c_bufs, acc_bufs, full_bars, empty_bars, acc_full, acc_empty, clc = g.alloc_common(
        c_desc, BLOCK_M, BLOCK_N, NUM_STAGES, NUM_ACC, EPI_SUBTILE, USE_CLC, False)
    with tlx.async_tasks():
        with tlx.async_task("default"):
            if PLANT == 1:
                epilogue_no_wait(c_desc, c_bufs, acc_bufs, acc_full, acc_empty, clc, M, N,
                                 BLOCK_M, BLOCK_N, GROUP_M, NUM_ACC, EPI_SUBTILE, USE_CLC)
            else:
                g.epilogue_task(c_desc, c_bufs, acc_bufs, acc_full, acc_empty, clc, M, N,
                                BLOCK_M, BLOCK_N, GROUP_M, NUM_ACC, EPI_SUBTILE, USE_CLC, False)
        with tlx.async_task(num_warps=1, registers=48):
            if PLANT >= 2:
                mma_planted(a_bufs, b_bufs, acc_bufs, full_bars, empty_bars, acc_full, acc_empty,
                            clc, M, N, K, BLOCK_M, BLOCK_N, BLOCK_K, NUM_STAGES, NUM_ACC,
                            USE_CLC, PLANT)
            else:
                g.mma_task(a_bufs, b_bufs, acc_bufs, full_bars, empty_bars, acc_full,
                           acc_empty, clc, M, N, K, BLOCK_M, BLOCK_N, BLOCK_K, NUM_STAGES,
                           NUM_ACC, USE_CLC, False)
        with tlx.async_task(num_warps=1, registers=48):
            g.producer_task(a_desc, b_desc, a_bufs, b_bufs, full_bars, empty_bars, clc, M, N, K,
                            BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, NUM_STAGES, USE_CLC, False)
