"""Blackwell (sm_100a) fused attention backward, warp-specialized, written with TLX: tcgen05 MMAs
into tensor memory. With S = Q K^T * sm_scale (causal: key > query masked), P = softmax(S)
recomputed from the forward's base-2 log-sum-exp (the layouts of kernels/attention.py and
kernels/hopper/attention_ws.py), O the forward's output and dO its gradient:

    delta = rowsum(dO * O)                   kernels/hopper/attention_bwd_ws.py's preprocess
                                             kernel (which also zeroes dq_accum)
    dV = P^T dO,  dK = sm_scale * dS^T Q     attention_bwd_ws_kernel (one program per key block)
    dq_accum += dS K                         attention_bwd_ws_kernel (TMA reduce-add, fp32)
    dQ = sm_scale * dq_accum                 the Hopper module's postprocess kernel
    with dS = P * (dP - delta), dP = dO V^T

dQ: every key block adds its term into an fp32 dq_accum with TMA reductions (cp.reduce.async.
bulk.tensor .add, atomic per element in L2), then a small pass scales and converts it: one pass
over Q / dO per key block, where a separate dQ kernel would walk them again.

Each program owns BLOCK_N = 128 keys of one (batch, head) (the tcgen05 M of the transposed
products) and walks the query blocks that see them, BLOCK_M = 64 queries at a time:
  - the load task (1 warp) loads K and V once, then streams Q with its lse and dO with its delta
    through a NUM_STAGES ring (TMA for the tiles, cp.async.bulk for the 64 fp32 row values;
    separate barriers, so S^T can start before dO lands);
  - the MMA task (1 warp) issues every tcgen05 MMA: S^T = K Q^T and dP^T = V dO^T into tensor
    memory, dV += P^T dO with P^T read from tensor memory (the A operand), dK += dS^T Q and
    dQ = dS K with dS^T from shared memory. Block j's dK and dQ are issued after block j + 1's
    S^T, so the compute group's dS of one block overlaps the next block's S^T;
  - the compute task (the default warp group, 4 warps: row r of a [128, N] tile is thread r's)
    loads S^T, writes P^T (fp16 / bf16) over S^T's columns for the dV MMA, loads dP^T and writes
    dS^T to shared memory (double-buffered); at the end it moves dK and dV out of tensor memory
    through the K and V tiles with TMA;
  - the dQ task (a second warp group) loads each block's dQ [64, HEAD_DIM] from tensor memory
    (the M = 64 layout) and reduce-adds it into dq_accum through shared memory.
Causal: queries before the key block see none of it and are skipped; the first BLOCK_N //
BLOCK_M query blocks straddle the diagonal (the mask is applied to every block: it costs a
compare a score, and is all-true past the diagonal).

Tensor memory (32-bit columns of 128 lanes): S^T [128, 64] (P^T over its first 32 columns), dP^T
[128, 64], dV and dK [128, HEAD_DIM], dQ [64, HEAD_DIM]: 512 columns at HEAD_DIM 128, single-
buffered (S^T of block j + 1 is issued after block j's dV MMA, which reads P^T there: one
thread's MMAs run in order).

Barriers (arrivals): kv_full (1: expect-bytes), q_full / do_full [stage] (1: the load task's
expect-bytes, tile plus row values), q_empty / do_empty [stage] (2: the MMA's commit once dK /
dV read the tile, and the compute group once it read lse / delta), s_full, dp_full (MMA commits),
p_full (compute: P^T written), ds_full / ds_empty [2] (compute / MMA commit), dq_full (MMA
commit), dq_empty (dQ task: tensor memory read), dkdv_done (the MMA's last commit).

Tensors: q, k, v, dO [Z, H, N_CTX, HEAD_DIM] fp16 or bf16, seen by the host descriptors as 2-D
[Z * H * N_CTX, HEAD_DIM]; lse and delta fp32 [Z * H, N_CTX]; dq_accum fp32 [Z * H * N_CTX,
HEAD_DIM] (zeroed); dk, dv [Z * H * N_CTX, HEAD_DIM] in q's dtype, written through the K and V
tiles with TMA.
    grid = (N_CTX // BLOCK_N, Z * H); N_CTX a multiple of BLOCK_N
    constexprs: HEAD_DIM (64 or 128), BLOCK_M=64, BLOCK_N=128, NUM_STAGES (2 or 3), CAUSAL
    descriptors: q_desc, do_desc block [BLOCK_M, HEAD_DIM]; k_desc, v_desc, dk_desc, dv_desc
                 [BLOCK_N, HEAD_DIM]; dq_desc (fp32) [BLOCK_M, HEAD_DIM]
    launch: num_warps=4 (the compute group; the dQ group, the load and the MMA warps add 8,
            the last two padded to a warp group)
"""
import warpweave as ww
import warpweave.language as tl
from warpweave import tlx


@ww.jit
def issue_dk_dq(i, k_tile, q_bufs, ds_bufs, dk_tmem, dq_tmem, ds_full, ds_empty, q_empty,
                dq_full, dq_empty, NUM_STAGES: tl.constexpr):
    """Block i's dK += dS^T Q and dQ = dS K, once the compute group wrote dS^T (ds_full) and the
    dQ task read the previous dQ (dq_empty). The commit after dQ releases the Q stage (dK was
    its last reader), dS^T's buffer, and hands dQ over."""
    ds = tlx.local_view(ds_bufs, i % 2)
    tlx.barrier_wait(tlx.local_view(ds_full, i % 2), (i // 2) & 1)
    tlx.async_dot(ds, tlx.local_view(q_bufs, i % NUM_STAGES), dk_tmem, use_acc=i > 0,
                  force_async=True)
    tlx.barrier_wait(tlx.local_view(dq_empty, 0), (i & 1) ^ 1)
    tlx.async_dot(tlx.local_trans(ds), k_tile, dq_tmem, use_acc=False,
                  mBarriers=[tlx.local_view(dq_full, 0), tlx.local_view(q_empty, i % NUM_STAGES),
                             tlx.local_view(ds_empty, i % 2)])


@ww.jit
def attention_bwd_ws_kernel(q_desc, k_desc, v_desc, do_desc, dq_desc, dk_desc, dv_desc, lse_ptr,
                            delta_ptr, sm_scale, N_CTX,
                            HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                            NUM_STAGES: tl.constexpr, CAUSAL: tl.constexpr = False):
    tl.static_assert(BLOCK_N == 128, "BLOCK_N is tcgen05's M: 128 keys a program")
    tl.static_assert(BLOCK_M == 64, "BLOCK_M 64: S^T, dP^T, dV, dK and dQ fill tensor memory")
    dtype: tl.constexpr = tlx.dtype_of(q_desc)
    # A ring stage's bytes: the Q (or dO) tile and its rows' lse (or delta).
    STAGE_BYTES: tl.constexpr = BLOCK_M * HEAD_DIM * tlx.size_of(dtype) + 4 * BLOCK_M
    KV_BYTES: tl.constexpr = BLOCK_N * HEAD_DIM * tlx.size_of(dtype)

    off_hz = tl.program_id(1)
    start_n = tl.program_id(0) * BLOCK_N
    row0 = off_hz * N_CTX  # this head's first row in the 2-D views (and in lse / delta)
    lo = 0
    if CAUSAL:
        lo = start_n  # queries before the key block see none of its keys
    num_q = (N_CTX - lo) // BLOCK_M
    EPI_COLS: tl.constexpr = 64

    k_tile = tlx.local_view(tlx.local_alloc((BLOCK_N, HEAD_DIM), dtype, 1), 0)
    v_tile = tlx.local_view(tlx.local_alloc((BLOCK_N, HEAD_DIM), dtype, 1), 0)
    q_bufs = tlx.local_alloc((BLOCK_M, HEAD_DIM), dtype, NUM_STAGES)
    do_bufs = tlx.local_alloc((BLOCK_M, HEAD_DIM), dtype, NUM_STAGES)
    lse_bufs = tlx.local_alloc((BLOCK_M,), tl.float32, NUM_STAGES)
    delta_bufs = tlx.local_alloc((BLOCK_M,), tl.float32, NUM_STAGES)
    ds_bufs = tlx.local_alloc((BLOCK_N, BLOCK_M), dtype, 2)  # dS^T of blocks j % 2
    dq_buf = tlx.local_view(tlx.local_alloc((BLOCK_M, HEAD_DIM), tl.float32, 1), 0)

    s_tmem = tlx.local_alloc((BLOCK_N, BLOCK_M), tl.float32, 1, tlx.storage_kind.tmem)
    p_tmem = tlx.local_alloc((BLOCK_N, BLOCK_M), dtype, 1, tlx.storage_kind.tmem, reuse=s_tmem)
    dp_tmem = tlx.local_alloc((BLOCK_N, BLOCK_M), tl.float32, 1, tlx.storage_kind.tmem)
    dv_tmem = tlx.local_alloc((BLOCK_N, HEAD_DIM), tl.float32, 1, tlx.storage_kind.tmem)
    dk_tmem = tlx.local_alloc((BLOCK_N, HEAD_DIM), tl.float32, 1, tlx.storage_kind.tmem)
    dq_tmem = tlx.local_alloc((BLOCK_M, HEAD_DIM), tl.float32, 1, tlx.storage_kind.tmem)
    s_t_buf = tlx.local_view(s_tmem, 0)
    p_t_buf = tlx.local_view(p_tmem, 0)
    dp_t_buf = tlx.local_view(dp_tmem, 0)
    dv_buf = tlx.local_view(dv_tmem, 0)
    dk_buf = tlx.local_view(dk_tmem, 0)
    dq_acc = tlx.local_view(dq_tmem, 0)

    kv_full = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    q_full = tlx.alloc_barriers(num_barriers=NUM_STAGES, arrive_count=1)
    do_full = tlx.alloc_barriers(num_barriers=NUM_STAGES, arrive_count=1)
    q_empty = tlx.alloc_barriers(num_barriers=NUM_STAGES, arrive_count=2)
    do_empty = tlx.alloc_barriers(num_barriers=NUM_STAGES, arrive_count=2)
    s_full = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    dp_full = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    p_full = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    ds_full = tlx.alloc_barriers(num_barriers=2, arrive_count=1)
    ds_empty = tlx.alloc_barriers(num_barriers=2, arrive_count=1)
    dq_full = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    dq_empty = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    dkdv_done = tlx.alloc_barriers(num_barriers=1, arrive_count=1)

    with tlx.async_tasks():
        with tlx.async_task("default"):
            # Compute: P^T and dS^T from S^T and dP^T in tensor memory, row r (key start_n + r)
            # in thread r.
            qk_scale = sm_scale * 1.4426950408889634  # log2(e): P in base 2
            offs_k = start_n + tl.arange(0, BLOCK_N)
            for j in range(0, num_q):
                stage = j % NUM_STAGES
                parity = (j // NUM_STAGES) & 1
                q0 = lo + j * BLOCK_M
                tlx.barrier_wait(tlx.local_view(s_full, 0), j & 1)
                tlx.barrier_wait(tlx.local_view(q_full, stage), parity)
                s_t = tlx.local_load(s_t_buf)
                lse = tlx.local_load(tlx.local_view(lse_bufs, stage))
                tlx.barrier_arrive(tlx.local_view(q_empty, stage))
                p_t = tl.exp2(tl.fma(s_t, qk_scale, -lse[None, :]))  # one FMA a score, exp2
                if CAUSAL:
                    offs_q = q0 + tl.arange(0, BLOCK_M)
                    p_t = tl.where(offs_q[None, :] >= offs_k[:, None], p_t, 0.0)
                # P^T over S^T's first columns (row r is thread r's, read above): the dV MMA
                # reads it there (A from tensor memory).
                tlx.local_store(p_t_buf, p_t.to(dtype))
                tlx.barrier_arrive(tlx.local_view(p_full, 0))
                tlx.barrier_wait(tlx.local_view(dp_full, 0), j & 1)
                dp_t = tlx.local_load(dp_t_buf)
                tlx.barrier_wait(tlx.local_view(do_full, stage), parity)
                delta = tlx.local_load(tlx.local_view(delta_bufs, stage))
                tlx.barrier_arrive(tlx.local_view(do_empty, stage))
                ds_t = (p_t * (dp_t - delta[None, :])).to(dtype)
                # dS^T to shared memory for dK (as A) and dQ (its local_trans as A).
                ds_stage = j % 2
                tlx.barrier_wait(tlx.local_view(ds_empty, ds_stage), ((j // 2) & 1) ^ 1)
                tlx.local_store(tlx.local_view(ds_bufs, ds_stage), ds_t)
                tlx.fence_async_shared()
                tlx.barrier_arrive(tlx.local_view(ds_full, ds_stage))
            # dK and dV leave through the K and V tiles, which no MMA reads any more, in
            # 64-column pieces (a whole fp32 row of 128 would not fit beside the rest).
            tlx.barrier_wait(tlx.local_view(dkdv_done, 0), 0)
            for c in tl.static_range(HEAD_DIM // EPI_COLS):
                cols_v = tlx.local_slice(v_tile, [0, c * EPI_COLS], [BLOCK_N, EPI_COLS])
                dv = tlx.local_load(tlx.local_slice(dv_buf, [0, c * EPI_COLS],
                                                    [BLOCK_N, EPI_COLS]))
                tlx.local_store(cols_v, dv.to(dtype))
                cols_k = tlx.local_slice(k_tile, [0, c * EPI_COLS], [BLOCK_N, EPI_COLS])
                dk = tlx.local_load(tlx.local_slice(dk_buf, [0, c * EPI_COLS],
                                                    [BLOCK_N, EPI_COLS]))
                tlx.local_store(cols_k, (dk * sm_scale).to(dtype))
            tlx.fence_async_shared()
            tlx.async_descriptor_store(dv_desc, v_tile, [row0 + start_n, 0])
            tlx.async_descriptor_store(dk_desc, k_tile, [row0 + start_n, 0])
            tlx.async_descriptor_store_wait(0)

        with tlx.async_task(num_warps=4, registers=152):
            # dQ: each block's [BLOCK_M, HEAD_DIM] term, reduce-added into dq_accum.
            for j in range(0, num_q):
                tlx.barrier_wait(tlx.local_view(dq_full, 0), j & 1)
                dq = tlx.local_load(dq_acc)
                tlx.barrier_arrive(tlx.local_view(dq_empty, 0))
                # The previous block's reduction has read dq_buf before it is overwritten.
                tlx.async_descriptor_store_wait(0)
                tlx.local_store(dq_buf, dq)
                tlx.fence_async_shared()
                tlx.async_descriptor_store(dq_desc, dq_buf, [row0 + lo + j * BLOCK_M, 0],
                                          store_reduce="add")
            tlx.async_descriptor_store_wait(0)

        # The load and MMA warps' group at 80 registers: at 48 to 72 ptxas spills 8-24 bytes
        # (their code is held to the budget their setmaxnreg sets).
        with tlx.async_task(num_warps=1, registers=80):
            # Loads: K and V once, then Q + lse and dO + delta through the ring.
            kv_bar = tlx.local_view(kv_full, 0)
            tlx.barrier_expect_bytes(kv_bar, 2 * KV_BYTES)
            tlx.async_descriptor_load(k_desc, k_tile, [row0 + start_n, 0], kv_bar)
            tlx.async_descriptor_load(v_desc, v_tile, [row0 + start_n, 0], kv_bar)
            for j in range(0, num_q):
                stage = j % NUM_STAGES
                free_parity = ((j // NUM_STAGES) & 1) ^ 1
                row = row0 + lo + j * BLOCK_M
                tlx.barrier_wait(tlx.local_view(q_empty, stage), free_parity)
                q_bar = tlx.local_view(q_full, stage)
                tlx.barrier_expect_bytes(q_bar, STAGE_BYTES)
                tlx.async_descriptor_load(q_desc, tlx.local_view(q_bufs, stage), [row, 0], q_bar)
                tlx.async_load(lse_ptr + row, tlx.local_view(lse_bufs, stage), bulk=True,
                               barrier=q_bar)
                tlx.barrier_wait(tlx.local_view(do_empty, stage), free_parity)
                do_bar = tlx.local_view(do_full, stage)
                tlx.barrier_expect_bytes(do_bar, STAGE_BYTES)
                tlx.async_descriptor_load(do_desc, tlx.local_view(do_bufs, stage), [row, 0],
                                          do_bar)
                tlx.async_load(delta_ptr + row, tlx.local_view(delta_bufs, stage), bulk=True,
                               barrier=do_bar)

        with tlx.async_task(num_warps=1, registers=80):
            # MMAs, in the order: S^T(j), dK(j-1), dQ(j-1), dP^T(j), dV(j).
            tlx.barrier_wait(tlx.local_view(kv_full, 0), 0)
            for j in range(0, num_q):
                stage = j % NUM_STAGES
                parity = (j // NUM_STAGES) & 1
                q = tlx.local_view(q_bufs, stage)
                do = tlx.local_view(do_bufs, stage)
                tlx.barrier_wait(tlx.local_view(q_full, stage), parity)
                # S^T's columns hold P^T of block j - 1 until its dV MMA (issued before this
                # one) has read them.
                tlx.async_dot(k_tile, tlx.local_trans(q), s_t_buf, use_acc=False,
                              mBarriers=[tlx.local_view(s_full, 0)])
                if j > 0:
                    issue_dk_dq(j - 1, k_tile, q_bufs, ds_bufs, dk_buf, dq_acc, ds_full,
                                ds_empty, q_empty, dq_full, dq_empty, NUM_STAGES)
                # (dS^T of block j - 1 is written: the compute group has read dP^T(j - 1).)
                tlx.barrier_wait(tlx.local_view(do_full, stage), parity)
                tlx.async_dot(v_tile, tlx.local_trans(do), dp_t_buf, use_acc=False,
                              mBarriers=[tlx.local_view(dp_full, 0)])
                tlx.barrier_wait(tlx.local_view(p_full, 0), j & 1)
                tlx.async_dot(p_t_buf, do, dv_buf, use_acc=j > 0,
                              mBarriers=[tlx.local_view(do_empty, stage)])
            issue_dk_dq(num_q - 1, k_tile, q_bufs, ds_bufs, dk_buf, dq_acc, ds_full, ds_empty,
                        q_empty, dq_full, dq_empty, NUM_STAGES)
            tlx.tcgen05_commit(tlx.local_view(dkdv_done, 0))
