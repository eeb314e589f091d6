"""Hopper GEMM, persistent and warp-specialized (cooperative): C = A @ B with TLX async tasks.

A [M, K] and B [K, N] are fp16 or bf16, C [M, N] in c_desc's element type, fp32 accumulation.
Three warp groups share each output tile:
  - the producer (the default task, 4 warps, trimmed to 40 registers per thread) issues the TMA
    loads of A and B into a NUM_STAGES ring of shared-memory stages;
  - two consumer warp groups (one task replicated twice, 232 registers per thread) each compute
    half of the tile's rows, BLOCK_M // 2, against the same B tile, with async wgmma.
Register budget: 128 * 40 + 2 * 128 * 232 = 64,512 of the SM's 65,536 registers.

Per stage, full_bars[s] (1 arrival: the producer's expect-bytes, completed by the TMA bytes) says
"A halves and B landed"; empty_bars[s] (2 arrivals, one per consumer warp group) says "both
consumers are done reading". The producer waits on empty with the opposite parity, so the first
trip around the ring passes at once (a fresh barrier completes parity 1 immediately).
Every program walks tiles tile_id = pid, pid + NUM_SMS, ...; `step` counts k-steps across tiles
so that producer and consumers agree on the stage and the phase of every load. Tiles are taken in
grouped order: GROUP_M tile-rows at a time, or with RASTER_N GROUP_M tile-columns at a time.

SMEM_EPILOGUE: each consumer writes C to its own swizzled buffer and stores it with TMA without
waiting; it waits for that store only before it writes the buffer again (next tile). With
EPI_SUBTILE = 2, 4 or 8 it stores its 64 x BLOCK_N result in that many column chunks through two
chunk buffers it alternates between, so the epilogue needs 4 * 64 * BLOCK_N / EPI_SUBTILE
elements of shared memory instead of 2 * 64 * BLOCK_N: at 128x256x64, EPI_SUBTILE=4 leaves room
for NUM_STAGES=4 (4 * 48 KB of stages + 32 KB of chunks). The epilogue buffers are separate from
the ring, so the producer fills stages of the next tile while the consumers store this one.

The shared memory (alloc_ring), the producer's k-step (load_stage), a consumer's K loop
(mma_tile) and its epilogue store (store_tile) are helpers that the fp8 GEMM (scaled_mm_ws.py)
shares, and the grouped GEMM (grouped_mm_ws.py: all but load_stage for ragged M, all for
ragged K); their B_KMAJOR option (B^T tiles [BLOCK_N, BLOCK_K], handed to wgmma as their
local_trans) is for 8-bit operands and K-major expert weights, A_MMAJOR (A^T tiles
[BLOCK_K, BLOCK_M // 2]) for the weight gradient's x.t(), and mma_tile's TAIL_K and HEAD_K
(zero_k_outside: the parts of a tile's last and first stages outside its K range zeroed before
the MMA) for ragged K ranges.
The producer's wait for a free stage (acquire_stage) is the ping-pong kernel's too.

Clusters of two CTAs (launch with ctas_per_cga=(2, 1, 1) and an even grid) share one operand
through multicast TMA, halving its L2-to-SM traffic:
  - CLUSTER_N=2: the CTAs compute N-neighbour tiles; each loads one A half into both CTAs;
  - CLUSTER_M=2: the CTAs compute M-neighbour tiles; each loads one column half of B
    (b_desc block [BLOCK_K, BLOCK_N // 2]) into both CTAs (load_stage's B_KMAJOR, the fp8
    GEMM's: one row half of B^T, block [BLOCK_N // 2, BLOCK_K]).
empty_bars then take 4 arrivals (both consumers of both CTAs: the peer's producer writes this
CTA's stage too), and the CTAs meet at a cluster barrier before they exit.

Descriptors: a_desc block [BLOCK_M // 2, BLOCK_K], b_desc block [BLOCK_K, BLOCK_N // CLUSTER_M],
             c_desc block [BLOCK_M // 2, BLOCK_N // EPI_SUBTILE] (BLOCK_N without SMEM_EPILOGUE)
    grid = (min(NUM_SMS, number of cluster tiles * cluster size),) rounded to whole clusters
    constexprs: BLOCK_M=128, BLOCK_N=256 (each consumer a 64x256 wgmma tile), BLOCK_K=64,
                GROUP_M=16, NUM_STAGES=4 with EPI_SUBTILE=4 (3 with whole-tile C buffers),
                NUM_SMS (the number of SMs, 132 on H100/H200), SMEM_EPILOGUE (default False:
                C leaves through the descriptor's own store), CLUSTER_N=1, CLUSTER_M=1,
                RASTER_N=False
    signature: a_desc:desc<fp16,64x64>, b_desc:desc<fp16,64x256>, c_desc:desc<fp16,64x64>,
               M:i32, N:i32, K:i32, BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, GROUP_M=16,
               NUM_STAGES=4, NUM_SMS=132, SMEM_EPILOGUE=1, EPI_SUBTILE=4 (warpweave.ops's)
    launch: num_warps=4 (the default task; the consumers add 8 warps)
"""
import warpweave as ww
import warpweave.language as tl
from warpweave import tlx

from ..matmul import grouped_tile


@ww.jit
def rastered_tile(tile_id, num_pid_m, num_pid_n, GROUP: tl.constexpr, RASTER_N: tl.constexpr):
    """grouped_tile, or with RASTER_N its transpose: GROUP tile-columns at a time, row-major."""
    if RASTER_N:
        pid_n, pid_m = grouped_tile(tile_id, num_pid_n, num_pid_m, GROUP)
    else:
        pid_m, pid_n = grouped_tile(tile_id, num_pid_m, num_pid_n, GROUP)
    return pid_m, pid_n


@ww.jit
def release(empty_bars, stage, rank, CLUSTER: tl.constexpr):
    """This consumer is done reading `stage`: with a 2-CTA cluster the peer's producer must know
    too, since it multicasts its operand half into this CTA's stage."""
    tlx.barrier_arrive(tlx.local_view(empty_bars, stage))
    if CLUSTER == 2:
        tlx.barrier_arrive(tlx.local_view(empty_bars, stage), 1, remote_cta_rank=1 - rank)


@ww.jit
def split_columns(x, ROWS: tl.constexpr, COLS: tl.constexpr):
    """The left and right column halves of x [ROWS, COLS]."""
    return x.reshape([ROWS, 2, COLS // 2]).permute(0, 2, 1).split()


@ww.jit
def store_chunk(c_desc, c_bufs, value, buf_index, off_m, off_n, ROWS: tl.constexpr = 0,
                PAIRS: tl.constexpr = 0, EVICT_FIRST: tl.constexpr = False):
    """Stores one column chunk of C through chunk buffer `buf_index`. A consumer alternates
    between its two chunk buffers, one TMA store group per chunk: once at most one group is
    pending, the store that last read this buffer (two chunks ago) is done with it. PAIRS > 0:
    value [ROWS, PAIRS] is uint32, each two neighbour 16-bit elements of C (the first in the
    low half), written to the buffer read as uint32. EVICT_FIRST: the store's lines are the
    first L2 evicts (C is written once and not read here; A and B tiles are)."""
    buf = tlx.local_view(c_bufs, buf_index)
    tlx.async_descriptor_store_wait(1)
    if PAIRS > 0:
        tlx.local_store(tlx.local_reinterpret(buf, tl.uint32, [ROWS, PAIRS]), value)
    else:
        tlx.local_store(buf, value)
    store_c(c_desc, buf, off_m, off_n, EVICT_FIRST)


@ww.jit
def store_c(c_desc, buf, off_m, off_n, EVICT_FIRST: tl.constexpr):
    """The TMA store of a C buffer at [off_m, off_n], evict-first in L2 with EVICT_FIRST."""
    if EVICT_FIRST:
        tlx.async_descriptor_store(c_desc, buf, [off_m, off_n], eviction_policy="evict_first")
    else:
        tlx.async_descriptor_store(c_desc, buf, [off_m, off_n])


@ww.jit
def alloc_ring(a_dtype: tl.constexpr, b_dtype: tl.constexpr, c_dtype: tl.constexpr,
               HALF_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
               NUM_STAGES: tl.constexpr, B_KMAJOR: tl.constexpr, READERS: tl.constexpr,
               EPI_SUBTILE: tl.constexpr, A_MMAJOR: tl.constexpr = False):
    """The cooperative kernels' shared memory: a_bufs, b_bufs, full_bars, empty_bars, c_bufs.
    Stage s of the NUM_STAGES ring holds A halves 2s (rows of consumer 0) and 2s + 1 (consumer 1)
    and B tile s ([BLOCK_K, BLOCK_N], or with B_KMAJOR B^T's [BLOCK_N, BLOCK_K]); full_bars[s]
    take the producer's one arrival, empty_bars[s] READERS (the consumer warp groups that read
    the stage). c_bufs are store_tile's: one [HALF_M, BLOCK_N] buffer per consumer with
    EPI_SUBTILE = 1, else two chunk buffers [HALF_M, BLOCK_N // EPI_SUBTILE] per consumer;
    None with EPI_SUBTILE = 0 (C stored without shared memory). A_MMAJOR: the A halves hold
    A^T's [BLOCK_K, HALF_M] (A's rows contiguous in memory: the grouped GEMM's ragged-K form)."""
    if A_MMAJOR:
        a_bufs = tlx.local_alloc((BLOCK_K, HALF_M), a_dtype, NUM_STAGES * 2)
    else:
        a_bufs = tlx.local_alloc((HALF_M, BLOCK_K), a_dtype, NUM_STAGES * 2)
    if B_KMAJOR:
        b_bufs = tlx.local_alloc((BLOCK_N, BLOCK_K), b_dtype, NUM_STAGES)
    else:
        b_bufs = tlx.local_alloc((BLOCK_K, BLOCK_N), b_dtype, NUM_STAGES)
    full_bars = tlx.alloc_barriers(num_barriers=NUM_STAGES, arrive_count=1)
    empty_bars = tlx.alloc_barriers(num_barriers=NUM_STAGES, arrive_count=READERS)
    c_bufs = None
    if EPI_SUBTILE == 1:
        c_bufs = tlx.local_alloc((HALF_M, BLOCK_N), c_dtype, 2)
    elif EPI_SUBTILE > 1:
        c_bufs = tlx.local_alloc((HALF_M, BLOCK_N // EPI_SUBTILE), c_dtype, 4)
    return a_bufs, b_bufs, full_bars, empty_bars, c_bufs


@ww.jit
def acquire_stage(full_bars, empty_bars, step, NUM_STAGES: tl.constexpr,
                  STAGE_BYTES: tl.constexpr):
    """The producer's k-step `step`: waits until the consumers released its stage (step %
    NUM_STAGES; the first trip around the ring passes at once), then expects the stage's
    STAGE_BYTES on its full barrier; returns the stage and that barrier for the loads."""
    stage = step % NUM_STAGES
    trip_parity = (step // NUM_STAGES) & 1
    tlx.barrier_wait(tlx.local_view(empty_bars, stage), trip_parity ^ 1)
    full = tlx.local_view(full_bars, stage)
    tlx.barrier_expect_bytes(full, STAGE_BYTES)
    return stage, full


@ww.jit
def load_stage(a_desc, b_desc, a_bufs, b_bufs, full, stage, off_m, off_n, off_k, rank,
               HALF_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
               CLUSTER_M: tl.constexpr, CLUSTER_N: tl.constexpr, B_KMAJOR: tl.constexpr,
               A_MMAJOR: tl.constexpr = False):
    """One k-step's TMA loads into `stage`, completing on `full`: A's two row halves (buffers
    2 * stage and 2 * stage + 1; with A_MMAJOR A^T's [BLOCK_K, HALF_M] at [off_k, off_m]) and
    B's tile, [BLOCK_K, BLOCK_N] at [off_k, off_n], or with B_KMAJOR B^T's [BLOCK_N, BLOCK_K]
    at [off_n, off_k] (K contiguous: 8-bit wgmma operands must be). In a 2-CTA cluster this CTA
    loads one half of the shared operand into both CTAs: with CLUSTER_M=2 one column half of B,
    or with B_KMAJOR one row half of B^T."""
    tl.static_assert(not (A_MMAJOR and CLUSTER_N == 2))
    B_PART: tl.constexpr = BLOCK_N // CLUSTER_M  # the columns of B (rows of B^T) this CTA loads
    if CLUSTER_N == 2:
        # This CTA's A half lands in both CTAs (the peer sends the other).
        tlx.async_descriptor_load(a_desc, tlx.local_view(a_bufs, 2 * stage + rank),
                                  [off_m + rank * HALF_M, off_k], full,
                                  multicast_targets=[0, 1])
    elif A_MMAJOR:
        tlx.async_descriptor_load(a_desc, tlx.local_view(a_bufs, 2 * stage), [off_k, off_m],
                                  full)
        tlx.async_descriptor_load(a_desc, tlx.local_view(a_bufs, 2 * stage + 1),
                                  [off_k, off_m + HALF_M], full)
    else:
        tlx.async_descriptor_load(a_desc, tlx.local_view(a_bufs, 2 * stage), [off_m, off_k],
                                  full)
        tlx.async_descriptor_load(a_desc, tlx.local_view(a_bufs, 2 * stage + 1),
                                  [off_m + HALF_M, off_k], full)
    if B_KMAJOR and CLUSTER_M == 2:
        # This CTA's row half of B^T lands in both CTAs (compile-time slice offsets, as below).
        bt_buf = tlx.local_view(b_bufs, stage)
        if rank == 0:
            tlx.async_descriptor_load(
                b_desc, tlx.local_slice(bt_buf, [0, 0], [B_PART, BLOCK_K]),
                [off_n, off_k], full, multicast_targets=[0, 1])
        else:
            tlx.async_descriptor_load(
                b_desc, tlx.local_slice(bt_buf, [B_PART, 0], [B_PART, BLOCK_K]),
                [off_n + B_PART, off_k], full, multicast_targets=[0, 1])
    elif B_KMAJOR:
        tlx.async_descriptor_load(b_desc, tlx.local_view(b_bufs, stage), [off_n, off_k], full)
    elif CLUSTER_M == 2:
        # This CTA's column half of B lands in both CTAs (slice offsets are compile-time
        # constants, hence one branch per rank).
        b_buf = tlx.local_view(b_bufs, stage)
        if rank == 0:
            tlx.async_descriptor_load(
                b_desc, tlx.local_slice(b_buf, [0, 0], [BLOCK_K, B_PART]),
                [off_k, off_n], full, multicast_targets=[0, 1])
        else:
            tlx.async_descriptor_load(
                b_desc, tlx.local_slice(b_buf, [0, B_PART], [BLOCK_K, B_PART]),
                [off_k, off_n + B_PART], full, multicast_targets=[0, 1])
    else:
        tlx.async_descriptor_load(b_desc, tlx.local_view(b_bufs, stage), [off_k, off_n], full)


@ww.jit
def issue_stage(a_bufs, b_bufs, full_bars, step, half, acc, use_acc,
                NUM_STAGES: tl.constexpr, B_KMAJOR: tl.constexpr, A_MMAJOR: tl.constexpr = False):
    """Waits for stage `step` % NUM_STAGES to land and issues its async wgmma chain of this
    consumer's A half (A^T read transposed with A_MMAJOR) by B (B^T read transposed with
    B_KMAJOR) into acc (use_acc: whether the chain adds to acc or starts from zero); returns the
    in-flight result."""
    stage = step % NUM_STAGES
    tlx.barrier_wait(tlx.local_view(full_bars, stage), (step // NUM_STAGES) & 1)
    if A_MMAJOR:
        a = tlx.local_trans(tlx.local_view(a_bufs, 2 * stage + half))
    else:
        a = tlx.local_view(a_bufs, 2 * stage + half)
    if B_KMAJOR:
        acc = tlx.async_dot(a, tlx.local_trans(tlx.local_view(b_bufs, stage)), acc,
                            use_acc=use_acc)
    else:
        acc = tlx.async_dot(a, tlx.local_view(b_bufs, stage), acc, use_acc=use_acc)
    return acc


@ww.jit
def add_partial(acc, partial, empty_bars, step, rank, PENDING: tl.constexpr,
                NUM_STAGES: tl.constexpr, CLUSTER: tl.constexpr):
    """PROMOTE: waits until at most PENDING wgmma groups are in flight, which completes the
    partial of stage `step`, releases the stage and adds the partial into acc; returns both."""
    partial = tlx.async_dot_wait(PENDING, partial)
    release(empty_bars, step % NUM_STAGES, rank, CLUSTER)
    return acc + partial, partial


ZERO_BAR: tl.constexpr = 8  # named barrier 8: zero_k_outside's (id 0 is the CTA-wide barrier)


@ww.jit
def zero_k_outside(a_bufs, b_bufs, step, half, k_lo, k_hi, BLOCK_N: tl.constexpr,
                   BLOCK_K: tl.constexpr, NUM_STAGES: tl.constexpr, A_MMAJOR: tl.constexpr,
                   HEAD: tl.constexpr = False):
    """mma_tile's TAIL_K / HEAD_K: of the BLOCK_K steps of K in stage `step` % NUM_STAGES only
    [k_lo, k_hi) belong to the tile (k_lo = 0 unless HEAD); its TMA boxes read on past k_hi
    into data of another product (the grouped GEMM's next group along a ragged K) and, with
    HEAD, start k_lo steps before the tile's first (the previous group's: the box was moved
    back to a 16-byte aligned K), and that data must not reach the accumulator, not even as
    0 * inf. Once the stage has landed, this consumer zeroes the K steps outside [k_lo, k_hi)
    of its own A half and of its column half of the B tile the two consumers share, makes the
    writes visible to wgmma (the async proxy) and meets the other consumer (named barrier
    ZERO_BAR), so that neither multiplies B before both halves are zeroed."""
    HALF_N: tl.constexpr = BLOCK_N // 2
    stage = step % NUM_STAGES
    ks = tl.arange(0, BLOCK_K)
    if HEAD:
        keep = (ks >= k_lo) & (ks < k_hi)
    else:
        keep = ks < k_hi
    a_buf = tlx.local_view(a_bufs, 2 * stage + half)
    if A_MMAJOR:
        tlx.local_store(a_buf, tl.where(keep[:, None], tlx.local_load(a_buf), 0.0))
    else:
        tlx.local_store(a_buf, tl.where(keep[None, :], tlx.local_load(a_buf), 0.0))
    b_buf = tlx.local_view(b_bufs, stage)
    if half == 0:
        b_part = tlx.local_slice(b_buf, [0, 0], [BLOCK_K, HALF_N])
        tlx.local_store(b_part, tl.where(keep[:, None], tlx.local_load(b_part), 0.0))
    else:
        b_part = tlx.local_slice(b_buf, [0, HALF_N], [BLOCK_K, HALF_N])
        tlx.local_store(b_part, tl.where(keep[:, None], tlx.local_load(b_part), 0.0))
    tlx.fence_async_shared()
    tlx.named_barrier_wait(ZERO_BAR, 256)


@ww.jit
def mma_tile(a_bufs, b_bufs, full_bars, empty_bars, step, num_k, half, rank,
             HALF_M: tl.constexpr, BLOCK_N: tl.constexpr, NUM_STAGES: tl.constexpr,
             CLUSTER: tl.constexpr, B_KMAJOR: tl.constexpr, PROMOTE: tl.constexpr = False,
             A_MMAJOR: tl.constexpr = False, k_last=0, TAIL_K: tl.constexpr = 0, k_head=0,
             HEAD_K: tl.constexpr = False):
    """One consumer's fp32 accumulator of its HALF_M rows of a tile, over the tile's num_k
    stages from `step` on; returns it and the step after the tile. With B_KMAJOR the stages hold
    B^T and wgmma reads B as its transpose; with A_MMAJOR the A halves hold A^T.

    TAIL_K (= BLOCK_K, without PROMOTE, without B_KMAJOR, two consumers, no cluster): the last
    stage holds only k_last (1..TAIL_K) of the tile's K steps, the rest another group's data:
    zero_k_outside zeroes them before that stage's wgmma. HEAD_K (with TAIL_K): the first stage
    also starts with k_head (0..TAIL_K - 1) K steps of the previous group's, zeroed the same way
    (in the same pass where the tile has a single stage). Without HEAD_K the loop is the
    tail-only one, k_head unread.

    PROMOTE (fp8): Hopper's fp8 wgmma sums its k32 steps with reduced precision, so each stage's
    wgmma chain (BLOCK_K / 32 steps) sums into a fresh partial (use_acc=False: scale-d 0) that
    is added into the fp32 accumulator once waited for (CUTLASS's promotion interval of one
    stage, torch._scaled_mm's use_fast_accum=False). Two partials alternate (stage i into
    `odd` for even i, `even` for odd i: they are named by the stage after the first), each
    issued in place into its own registers (the add that read them came first: codegen's
    overwritesDeadAccumulator). In the steady state each stage's chain is issued, then
    wait(1) completes the previous stage's chain, whose partial is added while this one runs:
    the tensor cores never wait for the adds. The first stage is issued before the loop so
    that the loop is entered, as it is continued, with the odd partial in flight: the same loop
    entered with nothing in flight (its first wait(1) on zeros) made ptxas 13.0 serialize every
    wgmma (C7514), apparently unable to follow the two partials' groups around the loop."""
    tl.static_assert(not PROMOTE or (not A_MMAJOR and TAIL_K == 0))
    acc = tl.zeros([HALF_M, BLOCK_N], dtype=tl.float32)
    if PROMOTE:
        even = tl.zeros([HALF_M, BLOCK_N], dtype=tl.float32)
        odd = tl.zeros([HALF_M, BLOCK_N], dtype=tl.float32)
        if num_k > 0:
            odd = issue_stage(a_bufs, b_bufs, full_bars, step, half, odd, False, NUM_STAGES,
                              B_KMAJOR)
            # Stage `step`'s chain (odd) is in flight at the top of each pair.
            for pair in range(0, (num_k - 1) // 2):
                even = issue_stage(a_bufs, b_bufs, full_bars, step + 1, half, even, False,
                                   NUM_STAGES, B_KMAJOR)
                acc, odd = add_partial(acc, odd, empty_bars, step, rank, 1, NUM_STAGES,
                                       CLUSTER)
                odd = issue_stage(a_bufs, b_bufs, full_bars, step + 2, half, odd, False,
                                  NUM_STAGES, B_KMAJOR)
                acc, even = add_partial(acc, even, empty_bars, step + 1, rank, 1, NUM_STAGES,
                                        CLUSTER)
                step += 2
            if num_k % 2 == 0:
                even = issue_stage(a_bufs, b_bufs, full_bars, step + 1, half, even, False,
                                   NUM_STAGES, B_KMAJOR)
                acc, odd = add_partial(acc, odd, empty_bars, step, rank, 1, NUM_STAGES, CLUSTER)
                acc, even = add_partial(acc, even, empty_bars, step + 1, rank, 0, NUM_STAGES,
                                        CLUSTER)
                step += 2
            else:
                acc, odd = add_partial(acc, odd, empty_bars, step, rank, 0, NUM_STAGES, CLUSTER)
                step += 1
    else:
        tl.static_assert(TAIL_K == 0 or (not B_KMAJOR and CLUSTER == 1))
        for k in range(0, num_k):
            if TAIL_K > 0:
                if HEAD_K:
                    # The K steps of this stage that are the tile's: [k_lo, k_hi).
                    k_lo = tl.where(k == 0, k_head, 0)
                    k_hi = tl.where(k == num_k - 1, k_last, TAIL_K)
                    partial = (k_lo > 0) | (k_hi < TAIL_K)
                else:
                    k_lo = 0
                    k_hi = k_last
                    partial = (k == num_k - 1) & (k_last < TAIL_K)
                if partial:
                    # (issue_stage's wait below then passes at once)
                    tlx.barrier_wait(tlx.local_view(full_bars, step % NUM_STAGES),
                                     (step // NUM_STAGES) & 1)
                    zero_k_outside(a_bufs, b_bufs, step, half, k_lo, k_hi, BLOCK_N, TAIL_K,
                                   NUM_STAGES, A_MMAJOR, HEAD_K)
            acc = issue_stage(a_bufs, b_bufs, full_bars, step, half, acc, True, NUM_STAGES,
                              B_KMAJOR, A_MMAJOR)
            # Keep one MMA in flight; the one before it is done, so release its stage.
            acc = tlx.async_dot_wait(1, acc)
            if k > 0:
                release(empty_bars, (step - 1) % NUM_STAGES, rank, CLUSTER)
            step += 1
        acc = tlx.async_dot_wait(0, acc)
        if num_k > 0:
            release(empty_bars, (step - 1) % NUM_STAGES, rank, CLUSTER)
    return acc, step


@ww.jit
def mma_tile_rest(a_bufs, b_bufs, full_bars, empty_bars, acc, step, num_k, half, rank,
                  NUM_STAGES: tl.constexpr, CLUSTER: tl.constexpr, B_KMAJOR: tl.constexpr):
    """mma_tile without PROMOTE for a tile whose first stage, `step`, was issued into acc and
    is in flight (the fp8 GEMM's DEFER_STORE issues it before the previous tile's store):
    issues the tile's other num_k - 1 stages into acc, one chain in flight while the previous
    one's stage is released, and returns the finished accumulator and the step after the tile.
    The loop is entered, as it is continued, with one chain in flight (mma_tile's PROMOTE
    comment says why that matters to ptxas)."""
    for k in range(1, num_k):
        acc = issue_stage(a_bufs, b_bufs, full_bars, step + 1, half, acc, True, NUM_STAGES,
                          B_KMAJOR)
        acc = tlx.async_dot_wait(1, acc)
        release(empty_bars, step % NUM_STAGES, rank, CLUSTER)
        step += 1
    acc = tlx.async_dot_wait(0, acc)
    release(empty_bars, step % NUM_STAGES, rank, CLUSTER)
    return acc, step + 1


@ww.jit
def issue_part(a_bufs, b_bufs, stage, half, part, PART: tl.constexpr, HALF_N: tl.constexpr,
               BLOCK_K: tl.constexpr, B_KMAJOR: tl.constexpr):
    """mma_tile_split: the async wgmma chain of this consumer's A half of `stage` by column
    half PART of its B tile (rows PART * HALF_N on of B^T with B_KMAJOR) into a fresh partial
    (`part`'s registers); returns the in-flight result."""
    b_buf = tlx.local_view(b_bufs, stage)
    a_buf = tlx.local_view(a_bufs, 2 * stage + half)
    if B_KMAJOR:
        b = tlx.local_trans(tlx.local_slice(b_buf, [PART * HALF_N, 0], [HALF_N, BLOCK_K]))
    else:
        b = tlx.local_slice(b_buf, [0, PART * HALF_N], [BLOCK_K, HALF_N])
    return tlx.async_dot(a_buf, b, part, use_acc=False)


@ww.jit
def mma_tile_split(a_bufs, b_bufs, full_bars, empty_bars, step, num_k, half, rank,
                   HALF_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                   NUM_STAGES: tl.constexpr, CLUSTER: tl.constexpr, B_KMAJOR: tl.constexpr):
    """mma_tile's PROMOTE for tiles too wide for two partials beside the accumulator (BLOCK_N
    = 256: 128 + 2 * 128 registers): this consumer's fp32 accumulator in two column halves
    [HALF_M, BLOCK_N // 2] (left, right), each stage's wgmma chain split into one per column
    half, both through one partial [HALF_M, BLOCK_N // 2] (192 registers in all). Each chain is
    waited for (wait 0) and added before the next is issued into the partial: the tensor cores
    run the other consumer's chains meanwhile. Returns left, right and the step after the
    tile."""
    HALF_N: tl.constexpr = BLOCK_N // 2
    left = tl.zeros([HALF_M, HALF_N], dtype=tl.float32)
    right = tl.zeros([HALF_M, HALF_N], dtype=tl.float32)
    part = tl.zeros([HALF_M, HALF_N], dtype=tl.float32)
    for k in range(0, num_k):
        stage = step % NUM_STAGES
        tlx.barrier_wait(tlx.local_view(full_bars, stage), (step // NUM_STAGES) & 1)
        part = issue_part(a_bufs, b_bufs, stage, half, part, 0, HALF_N, BLOCK_K, B_KMAJOR)
        part = tlx.async_dot_wait(0, part)
        left += part
        part = issue_part(a_bufs, b_bufs, stage, half, part, 1, HALF_N, BLOCK_K, B_KMAJOR)
        part = tlx.async_dot_wait(0, part)
        release(empty_bars, stage, rank, CLUSTER)
        right += part
        step += 1
    return left, right, step


@ww.jit
def pack_pairs(x, ROWS: tl.constexpr, COLS: tl.constexpr, c_dtype: tl.constexpr,
               PTX: tl.constexpr):
    """fp32 x [ROWS, COLS] rounded to c_dtype (bf16 or fp16) as [ROWS, COLS // 2] uint32, each
    two neighbour columns (the first in the low half: their bytes in memory order). A 16-bit
    element held on its own takes a whole register; packed, the tile takes half as many.
    PTX: one cvt.rn.{bf16,f16}x2.f32 a pair (ptxas's F2FP; the integer ops below round each
    element on its own, F2F, and combine them, PRMT, three times the instructions); the
    interpreter, which runs no PTX, takes the integer ops (the same bits)."""
    lo, hi = x.reshape([ROWS, COLS // 2, 2]).split()
    if PTX:
        if c_dtype == tl.bfloat16:
            packed = tl.inline_asm_elementwise("cvt.rn.bf16x2.f32 $0, $2, $1;", "=r,f,f",
                                               [lo, hi], dtype=tl.uint32, is_pure=True, pack=1)
        else:
            packed = tl.inline_asm_elementwise("cvt.rn.f16x2.f32 $0, $2, $1;", "=r,f,f",
                                               [lo, hi], dtype=tl.uint32, is_pure=True, pack=1)
    else:
        lo = lo.to(c_dtype).to(tl.uint16, bitcast=True).to(tl.uint32)
        hi = hi.to(c_dtype).to(tl.uint16, bitcast=True).to(tl.uint32)
        packed = (hi << 16) | lo
    return packed


@ww.jit
def store_tile(c_desc, c_bufs, c, half, off_m, off_n, HALF_M: tl.constexpr,
               BLOCK_N: tl.constexpr, EPI_SUBTILE: tl.constexpr, PACKED: tl.constexpr = False,
               EVICT_FIRST: tl.constexpr = False):
    """SMEM_EPILOGUE: stores consumer `half`'s result c [HALF_M, BLOCK_N] (C's dtype) at
    [off_m, off_n] through its shared-memory buffer(s) with TMA, without waiting for the store:
    whole (EPI_SUBTILE = 1) or in 2, 4 or 8 column chunks (store_chunk: chunk i through buffer
    2 * half + i % 2). PACKED: c is pack_pairs's [HALF_M, BLOCK_N // 2] of 16-bit C, written
    as it is (EPI_SUBTILE >= 2). EVICT_FIRST: store_chunk's."""
    EPI_N: tl.constexpr = BLOCK_N // EPI_SUBTILE
    tl.static_assert(not PACKED or EPI_SUBTILE > 1)
    # The columns of c and of its chunks: pairs when PACKED.
    if PACKED:
        W: tl.constexpr = BLOCK_N // 2
        PAIRS: tl.constexpr = EPI_N // 2
    else:
        W: tl.constexpr = BLOCK_N
        PAIRS: tl.constexpr = 0
    if EPI_SUBTILE == 1:
        # The previous tile's store must have read this consumer's C buffer; the store of this
        # tile then runs on while the next main loop starts.
        c_buf = tlx.local_view(c_bufs, half)
        tlx.async_descriptor_store_wait(0)
        tlx.local_store(c_buf, c)
        store_c(c_desc, c_buf, off_m, off_n, EVICT_FIRST)
    else:
        store_chunks(c_desc, c_bufs, c, half, off_m, off_n, HALF_M, W, EPI_SUBTILE, 0, EPI_N,
                     PAIRS, EVICT_FIRST)


@ww.jit
def store_chunks(c_desc, c_bufs, c, half, off_m, off_n, HALF_M: tl.constexpr, W: tl.constexpr,
                 CHUNKS: tl.constexpr, FIRST: tl.constexpr, EPI_N: tl.constexpr,
                 PAIRS: tl.constexpr, EVICT_FIRST: tl.constexpr):
    """store_tile's column chunks: c [HALF_M, W] is chunks FIRST .. FIRST + CHUNKS - 1 of the
    tile, left to right; chunk i goes to column off_n + i * EPI_N through buffer
    2 * half + i % 2 (store_chunk)."""
    if CHUNKS == 1:
        store_chunk(c_desc, c_bufs, c, 2 * half + FIRST % 2, off_m, off_n + FIRST * EPI_N,
                    HALF_M, PAIRS, EVICT_FIRST)
    else:
        left, right = split_columns(c, HALF_M, W)
        store_chunks(c_desc, c_bufs, left, half, off_m, off_n, HALF_M, W // 2, CHUNKS // 2,
                     FIRST, EPI_N, PAIRS, EVICT_FIRST)
        store_chunks(c_desc, c_bufs, right, half, off_m, off_n, HALF_M, W // 2, CHUNKS // 2,
                     FIRST + CHUNKS // 2, EPI_N, PAIRS, EVICT_FIRST)


@ww.jit
def gemm_ws_kernel(a_desc, b_desc, c_desc, M, N, K,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                   GROUP_M: tl.constexpr, NUM_STAGES: tl.constexpr, NUM_SMS: tl.constexpr,
                   SMEM_EPILOGUE: tl.constexpr = False, CLUSTER_N: tl.constexpr = 1,
                   CLUSTER_M: tl.constexpr = 1, EPI_SUBTILE: tl.constexpr = 1,
                   RASTER_N: tl.constexpr = False):
    CLUSTER: tl.constexpr = CLUSTER_M * CLUSTER_N
    tl.static_assert(CLUSTER <= 2)
    tl.static_assert(EPI_SUBTILE == 1 or EPI_SUBTILE == 2 or EPI_SUBTILE == 4 or
                     EPI_SUBTILE == 8)
    HALF_M: tl.constexpr = BLOCK_M // 2
    dtype: tl.constexpr = tlx.dtype_of(a_desc)
    STAGE_BYTES: tl.constexpr = (BLOCK_M * BLOCK_K + BLOCK_K * BLOCK_N) * tlx.size_of(dtype)

    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_k = tl.cdiv(K, BLOCK_K)
    # Work items are cluster tiles of (CLUSTER_M * BLOCK_M) x (CLUSTER_N * BLOCK_N): the CTAs of
    # a cluster (consecutive programs) take neighbour tiles that share the multicast operand.
    num_cluster_m = tl.cdiv(num_pid_m, CLUSTER_M)
    num_cluster_n = tl.cdiv(num_pid_n, CLUSTER_N)
    num_work = num_cluster_m * num_cluster_n
    first_work = tl.program_id(0) // CLUSTER
    rank = tl.program_id(0) % CLUSTER  # the CTA's rank in its (1-D) cluster

    c_dtype: tl.constexpr = tlx.dtype_of(c_desc)
    # In a 2-CTA cluster both CTAs' consumers read each stage (the peer's producer writes it).
    a_bufs, b_bufs, full_bars, empty_bars, c_bufs = alloc_ring(
        dtype, dtype, c_dtype, HALF_M, BLOCK_N, BLOCK_K, NUM_STAGES, False, 2 * CLUSTER,
        EPI_SUBTILE if SMEM_EPILOGUE else 0)

    with tlx.async_tasks():
        with tlx.async_task("default", registers=40):
            step = 0
            for work in range(first_work, num_work, NUM_SMS // CLUSTER):
                cluster_m, cluster_n = rastered_tile(work, num_cluster_m, num_cluster_n, GROUP_M,
                                                     RASTER_N)
                off_m = (cluster_m * CLUSTER_M + rank % CLUSTER_M) * BLOCK_M
                off_n = (cluster_n * CLUSTER_N + rank // CLUSTER_M) * BLOCK_N
                for k in range(0, num_k):
                    stage, full = acquire_stage(full_bars, empty_bars, step, NUM_STAGES,
                                                STAGE_BYTES)
                    load_stage(a_desc, b_desc, a_bufs, b_bufs, full, stage, off_m, off_n,
                               k * BLOCK_K, rank, HALF_M, BLOCK_N, BLOCK_K, CLUSTER_M, CLUSTER_N,
                               False)
                    step += 1

        with tlx.async_task(num_warps=4, registers=232, replicate=2):
            half = tlx.async_task_replica_id()
            step = 0
            for work in range(first_work, num_work, NUM_SMS // CLUSTER):
                cluster_m, cluster_n = rastered_tile(work, num_cluster_m, num_cluster_n, GROUP_M,
                                                     RASTER_N)
                pid_m = cluster_m * CLUSTER_M + rank % CLUSTER_M
                pid_n = cluster_n * CLUSTER_N + rank // CLUSTER_M
                acc, step = mma_tile(a_bufs, b_bufs, full_bars, empty_bars, step, num_k, half,
                                     rank, HALF_M, BLOCK_N, NUM_STAGES, CLUSTER, False)
                off_m = pid_m * BLOCK_M + half * HALF_M
                off_n = pid_n * BLOCK_N
                if SMEM_EPILOGUE:
                    store_tile(c_desc, c_bufs, acc.to(c_dtype), half, off_m, off_n, HALF_M,
                               BLOCK_N, EPI_SUBTILE)
                else:
                    c_desc.store([off_m, off_n], acc.to(c_dtype))
            if SMEM_EPILOGUE:
                tlx.async_descriptor_store_wait(0)
    if CLUSTER > 1:
        # No CTA leaves while its peer may still arrive on its barriers or write its stages.
        tlx.cluster_barrier()
