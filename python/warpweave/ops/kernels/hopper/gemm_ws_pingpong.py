"""Hopper GEMM, persistent and warp-specialized (ping-pong): C = A @ B with TLX async tasks.

A [M, K] and B [K, N] are fp16 or bf16, C [M, N] in c_desc's element type, fp32 accumulation.
Unlike the cooperative kernel (gemm_ws.py), each consumer warp group owns whole output tiles
and the two take turns: consumer 0 computes the program's tiles 0, 2, 4, ..., consumer 1 tiles
1, 3, 5, .... The producer (the default task, 4 warps, 40 registers) fills one ring of
NUM_STAGES stages in tile order, so the consumers' main loops follow each other through the
ring and one consumer's epilogue (convert, store C) overlaps the other's MMAs. SMEM_EPILOGUE
(default): C goes through a swizzled buffer per consumer and a TMA store that is waited for only
before the consumer's next epilogue; otherwise through the descriptor's own store.

Why it trails the cooperative kernel (0.80x vs 1.02x cuBLAS on the H200, bench/sweep_gemm.py,
2026-11-30): a model that fits both numbers is shared-memory bandwidth, 128 bytes per clock per
SM against 2048 fp16 FMA per clock. A consumer's 128x128 tile issues two m64n128k16 wgmmas per
k16 step, each reading its A rows and the same B from shared memory: 12 KB per 128 clocks, 96
B/clk, plus the TMA writes of 32 KB per 128x128x64 stage, 64 B/clk: 160 B/clk, so at most 0.8
of the tensor rate. The cooperative 128x256 tile needs 80 + 48 = 128 B/clk. Not yet checked with
hardware counters.

Per stage, full_bars[s] (1 arrival: the producer's expect-bytes, completed by the TMA bytes) and
empty_bars[s] (1 arrival: the one consumer that read the stage). The producer counts ring steps
across all of the program's tiles; a consumer's tile j starts at ring step j * num_k.
A parity wait on an mbarrier is only meaningful one phase ahead, so the consumers take turns
through named barriers 8 (consumer 0's turn) and 9 (consumer 1's): a consumer starts a main loop
only once the other has seen every stage of its previous tile land. Consumer 1 hands the first
turn over, and nobody hands over after the program's last tile, so every wait has one arrive.

Descriptors: a_desc block [BLOCK_M, BLOCK_K], b_desc block [BLOCK_K, BLOCK_N],
             c_desc block [BLOCK_M, BLOCK_N]
    grid = (min(NUM_SMS, cdiv(M, BLOCK_M) * cdiv(N, BLOCK_N)),)
    constexprs: BLOCK_M=128, BLOCK_N=128 (a consumer's accumulator: 128 registers a thread;
                64x256 measured slower on the H200), BLOCK_K=64, GROUP_M=8, NUM_STAGES=4,
                NUM_SMS (the number of SMs, 132 on H100/H200), SMEM_EPILOGUE
    signature: a_desc:desc<fp16,128x64>, b_desc:desc<fp16,64x128>, c_desc:desc<fp16,128x128>,
               M:i32, N:i32, K:i32, BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8,
               NUM_STAGES=4, NUM_SMS=132
    launch: num_warps=4 (the default task; the consumers add 8 warps)
"""
import warpweave as ww
import warpweave.language as tl
from warpweave import tlx

from ..matmul import grouped_tile
from .gemm_ws import acquire_stage


@ww.jit
def gemm_ws_pingpong_kernel(a_desc, b_desc, c_desc, M, N, K,
                            BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                            GROUP_M: tl.constexpr, NUM_STAGES: tl.constexpr,
                            NUM_SMS: tl.constexpr, SMEM_EPILOGUE: tl.constexpr = True):
    TURN_BAR: tl.constexpr = 8  # named barriers 8 and 9 carry the main-loop turn
    BOTH_GROUPS: tl.constexpr = 256
    dtype: tl.constexpr = tlx.dtype_of(a_desc)
    STAGE_BYTES: tl.constexpr = (BLOCK_M * BLOCK_K + BLOCK_K * BLOCK_N) * tlx.size_of(dtype)

    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_tiles = num_pid_m * num_pid_n
    num_k = tl.cdiv(K, BLOCK_K)

    a_bufs = tlx.local_alloc((BLOCK_M, BLOCK_K), dtype, NUM_STAGES)
    b_bufs = tlx.local_alloc((BLOCK_K, BLOCK_N), dtype, NUM_STAGES)
    full_bars = tlx.alloc_barriers(num_barriers=NUM_STAGES, arrive_count=1)
    empty_bars = tlx.alloc_barriers(num_barriers=NUM_STAGES, arrive_count=1)
    c_dtype: tl.constexpr = tlx.dtype_of(c_desc)
    if SMEM_EPILOGUE:
        c_bufs = tlx.local_alloc((BLOCK_M, BLOCK_N), c_dtype, 2)

    with tlx.async_tasks():
        with tlx.async_task("default", registers=40):
            step = 0
            for tile_id in range(tl.program_id(0), num_tiles, NUM_SMS):
                pid_m, pid_n = grouped_tile(tile_id, num_pid_m, num_pid_n, GROUP_M)
                off_m = pid_m * BLOCK_M
                off_n = pid_n * BLOCK_N
                for k in range(0, num_k):
                    stage, full = acquire_stage(full_bars, empty_bars, step, NUM_STAGES,
                                                STAGE_BYTES)
                    off_k = k * BLOCK_K
                    tlx.async_descriptor_load(a_desc, tlx.local_view(a_bufs, stage),
                                              [off_m, off_k], full)
                    tlx.async_descriptor_load(b_desc, tlx.local_view(b_bufs, stage),
                                              [off_k, off_n], full)
                    step += 1

        with tlx.async_task(num_warps=4, registers=232, replicate=2):
            me = tlx.async_task_replica_id()
            # The program's tile count: consumer me computes tiles j = me, me + 2, ... of it.
            my_tiles = tl.cdiv(num_tiles - tl.program_id(0), NUM_SMS)
            if me == 1:
                tlx.named_barrier_arrive(TURN_BAR, BOTH_GROUPS)  # consumer 0 goes first
            j = me
            for tile_id in range(tl.program_id(0) + me * NUM_SMS, num_tiles, 2 * NUM_SMS):
                pid_m, pid_n = grouped_tile(tile_id, num_pid_m, num_pid_n, GROUP_M)
                step = j * num_k
                acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
                tlx.named_barrier_wait(TURN_BAR + me, BOTH_GROUPS)
                for k in range(0, num_k):
                    stage = step % NUM_STAGES
                    tlx.barrier_wait(tlx.local_view(full_bars, stage), (step // NUM_STAGES) & 1)
                    acc = tlx.async_dot(tlx.local_view(a_bufs, stage),
                                        tlx.local_view(b_bufs, stage), acc)
                    # Keep one MMA in flight; the one before it is done, so release its stage.
                    acc = tlx.async_dot_wait(1, acc)
                    if k > 0:
                        tlx.barrier_arrive(tlx.local_view(empty_bars, (step - 1) % NUM_STAGES))
                    step += 1
                # Every stage of this tile has landed: the other consumer's waits for the next
                # tile's stages are one phase ahead at most. Its main loop may start.
                if j + 1 < my_tiles:
                    tlx.named_barrier_arrive(TURN_BAR + 1 - me, BOTH_GROUPS)
                acc = tlx.async_dot_wait(0, acc)
                if num_k > 0:
                    tlx.barrier_arrive(tlx.local_view(empty_bars, (step - 1) % NUM_STAGES))
                if SMEM_EPILOGUE:
                    # Wait for the store of this consumer's previous tile to have read its C
                    # buffer; this tile's store then runs on during the next main loop.
                    c_buf = tlx.local_view(c_bufs, me)
                    tlx.async_descriptor_store_wait(0)
                    tlx.local_store(c_buf, acc.to(c_dtype))
                    tlx.async_descriptor_store(c_desc, c_buf, [pid_m * BLOCK_M, pid_n * BLOCK_N])
                else:
                    c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], acc.to(c_dtype))
                j += 2
            if SMEM_EPILOGUE:
                tlx.async_descriptor_store_wait(0)
