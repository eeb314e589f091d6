"""Hopper fused attention backward, warp-specialized (FlashAttention-3 style), written with TLX.
With S = Q K^T * sm_scale (causal: key > query masked), P = softmax(S) recomputed from the
forward's base-2 log-sum-exp (attention_ws.py / attention.py), O the forward's output and dO its
gradient:

    delta = rowsum(dO * O)                   attention_bwd_ws_preprocess_kernel (also zeroes dQacc)
    dV = P^T dO,  dK = sm_scale * dS^T Q     attention_bwd_ws_kernel (one program per key block)
    dQacc += dS K                            attention_bwd_ws_kernel (TMA reduce-add, fp32)
    dQ = sm_scale * dQacc                    attention_bwd_ws_postprocess_kernel
    with dS = P * (dO V^T - delta)

Each program owns BLOCK_N = 2 * HALF keys of one (batch, head) and walks the query blocks that
see them, BLOCK_M queries at a time:
  - the producer (default task, 4 warps, 24 registers) loads the program's K and V once (one
    HALF-row tile per consumer), then streams Q and dO tiles through a NUM_STAGES ring with TMA
    (separate barriers, so S^T can start before dO lands);
  - two consumer warp groups (one task replicated twice, 240 registers) each own HALF keys and
    keep their dK and dV [HALF, HEAD_DIM] in fp32 registers. Per query block a consumer issues
    S^T = K Q^T and dP^T = V dO^T (wgmma from shared memory, keys along M so that P^T and dS^T
    are wgmma A operands straight from registers), computes P^T from the lse while dP^T runs,
    issues dV += P^T dO, then dS^T = P^T (dP^T - delta) and dK += dS^T Q. dS^T goes to shared
    memory (double-buffered) for dQ = dS K: at HEAD_DIM 128 the consumers meet on a named
    barrier and each computes half of dQ's columns from both halves of dS (two wgmmas over a
    64-column block of each K tile), at HEAD_DIM 64 each computes its keys' dQ term over all
    columns. The fp32 dQ tile leaves through shared memory with a TMA reduce-add into dq_accum.
Causal: queries before the key block see none of it and are skipped; the first BLOCK_N //
BLOCK_M query blocks straddle the diagonal and are masked.

Barriers: kv_full (1 arrival, K and V bytes), q_full / do_full (1, the producer's expect-bytes),
q_empty / do_empty (2: both consumers read every Q and dO tile). Named barrier DS_BAR (both
consumer warp groups) orders the dS halves between them where dQ is split (DQ_SPLIT).

Tensors: q, k, v, dO [Z, H, N_CTX, HEAD_DIM] fp16 or bf16, seen by the host descriptors as 2-D
[Z * H * N_CTX, HEAD_DIM]; lse and delta fp32 [Z * H, N_CTX]; dq_accum fp32 [Z * H * N_CTX,
HEAD_DIM] (zeroed by the preprocess); dk, dv [Z * H * N_CTX, HEAD_DIM] in q's dtype, written
through the K and V tiles with TMA.
    grid = (N_CTX // BLOCK_N, Z * H); N_CTX a multiple of BLOCK_N (and BLOCK_N of BLOCK_M)
    constexprs: HEAD_DIM (64 or 128), BLOCK_M (64, or 128 with DQ_ROWS), BLOCK_N=128,
                NUM_STAGES (2 or 3), CAUSAL, DEFER_DK, DQ_SPLIT
    descriptors: q_desc, do_desc block [BLOCK_M, HEAD_DIM]; k_desc, v_desc, dk_desc, dv_desc
                 [BLOCK_N // 2, HEAD_DIM]; dq_desc (fp32) [DQ_TILE_ROWS, DQ_TILE_COLS]
    launch: num_warps=4 (the default task; the consumers add 8 warps)
"""
import warpweave as ww
import warpweave.language as tl
from warpweave import tlx

from ..attention_bwd import attention_bwd_preprocess_kernel, row_block

DS_BAR: tl.constexpr = 8  # named barrier 8 (id 0 is the CTA-wide barrier)
BOTH_GROUPS: tl.constexpr = 256
# How the two consumers share dQ = dS K of a query block (DQ_SPLIT): each adds its own keys'
# term over all columns (DQ_OWN: two full-tile reductions a block, no hand-over), or they meet on
# DS_BAR and each adds all BLOCK_N keys' term over half the columns (DQ_COLUMNS) or over half the
# query rows (DQ_ROWS: BLOCK_M 128, wgmma's 64 rows each): half the reduce-add traffic.
DQ_AUTO: tl.constexpr = -1  # DQ_COLUMNS at HEAD_DIM 128, else DQ_OWN
DQ_OWN: tl.constexpr = 0
DQ_COLUMNS: tl.constexpr = 1
DQ_ROWS: tl.constexpr = 2  # the host's dQ tile: ops/_attention.py's _bwd_tlx_dq_tile


@ww.jit
def attention_bwd_ws_preprocess_kernel(o_ptr, do_ptr, delta_ptr, dq_accum_ptr, N_CTX,
                                       HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr):
    """delta = rowsum(dO * O) of BLOCK_M rows, and those rows of dq_accum zeroed."""
    attention_bwd_preprocess_kernel(o_ptr, do_ptr, delta_ptr, N_CTX, HEAD_DIM, BLOCK_M)
    offsets, offs_m, row_valid = row_block(N_CTX, HEAD_DIM, BLOCK_M)
    tl.store(dq_accum_ptr + offsets, tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32),
             mask=row_valid[:, None])


@ww.jit
def attention_bwd_ws_postprocess_kernel(dq_accum_ptr, dq_ptr, sm_scale, N_CTX,
                                        HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr):
    """dQ = sm_scale * dq_accum in dQ's dtype, BLOCK_M rows a program."""
    offsets, offs_m, row_valid = row_block(N_CTX, HEAD_DIM, BLOCK_M)
    acc = tl.load(dq_accum_ptr + offsets, mask=row_valid[:, None], other=0.0)
    tl.store(dq_ptr + offsets, (acc * sm_scale).to(dq_ptr.dtype.element_ty),
             mask=row_valid[:, None])


@ww.jit
def query_block(dk, dv, j, j_first, me, q_start, offs_k, k_me, v_me, k_bufs, q_bufs, do_bufs,
                ds_bufs, dq_buf, q_full, do_full, q_empty, do_empty, dq_desc, lse_base, delta_base,
                dq_row, qk_scale, dtype: tl.constexpr, HEAD_DIM: tl.constexpr,
                BLOCK_M: tl.constexpr, KEYS: tl.constexpr, NUM_STAGES: tl.constexpr,
                MASKED: tl.constexpr, DEFER_DK: tl.constexpr, DQ_MODE: tl.constexpr):
    """One query block's terms: dV += P^T dO and dK += dS^T Q into this consumer's registers,
    and its share of dQ (DQ_MODE: its keys' term, half the columns or half the query rows)
    reduce-added into dq_accum.
    DEFER_DK: dK's MMA is issued last and left running into the next block (whose first wait
    completes it, wgmma groups completing in order), so the dQ store and the next block's
    first MMAs follow it without draining the tensor pipe; the previous block's Q stage is
    released there, unless this block (j_first) starts the deferred run."""
    stage = j % NUM_STAGES
    parity = (j // NUM_STAGES) & 1
    offs_q = q_start + tl.arange(0, BLOCK_M)
    q = tlx.local_view(q_bufs, stage)
    do = tlx.local_view(do_bufs, stage)
    lse = tl.load(lse_base + offs_q)
    tlx.barrier_wait(tlx.local_view(q_full, stage), parity)
    s_t = tlx.async_dot(k_me, tlx.local_trans(q))
    tlx.barrier_wait(tlx.local_view(do_full, stage), parity)
    dp_t = tlx.async_dot(v_me, tlx.local_trans(do))
    s_t = tlx.async_dot_wait(1, s_t)
    if DEFER_DK:
        # The wait above also completed the previous block's dK MMA, the last reader of its Q.
        if j > j_first:
            tlx.barrier_arrive(tlx.local_view(q_empty, (j - 1) % NUM_STAGES))
    # P^T from the base-2 lse: one FMA per score before exp2.
    p_t = tl.exp2(tl.fma(s_t, qk_scale, -lse[None, :]))
    if MASKED:
        p_t = tl.where(offs_q[None, :] >= offs_k[:, None], p_t, 0.0)
    dv = tlx.async_dot(p_t.to(dtype), do, dv)
    delta = tl.load(delta_base + offs_q)
    dp_t = tlx.async_dot_wait(1, dp_t)
    ds_t = (p_t * (dp_t - delta[None, :])).to(dtype)
    if not DEFER_DK:
        dk = tlx.async_dot(ds_t, q, dk)
    # dS^T to shared memory for dQ = dS K (the local_trans of [keys, queries] is dS).
    ds_stage = j % 2
    tlx.local_store(tlx.local_view(ds_bufs, me * 2 + ds_stage), ds_t)
    tlx.fence_async_shared()
    if DQ_MODE == DQ_COLUMNS:
        # Both halves of dS are in shared memory: this consumer's half of dQ's columns from all
        # BLOCK_N keys. (The other consumer last read this stage's buffers two blocks ago,
        # before it met this barrier a block ago.)
        COLS: tl.constexpr = HEAD_DIM // 2
        tlx.named_barrier_wait(DS_BAR, BOTH_GROUPS)
        if me == 0:
            k0 = tlx.local_slice(tlx.local_view(k_bufs, 0), [0, 0], [KEYS, COLS])
            k1 = tlx.local_slice(tlx.local_view(k_bufs, 1), [0, 0], [KEYS, COLS])
        else:
            k0 = tlx.local_slice(tlx.local_view(k_bufs, 0), [0, COLS], [KEYS, COLS])
            k1 = tlx.local_slice(tlx.local_view(k_bufs, 1), [0, COLS], [KEYS, COLS])
        dq = tlx.async_dot(tlx.local_trans(tlx.local_view(ds_bufs, ds_stage)), k0)
        dq = tlx.async_dot(tlx.local_trans(tlx.local_view(ds_bufs, 2 + ds_stage)), k1, dq)
        dq_col = me * COLS
        dq_q = q_start
    elif DQ_MODE == DQ_ROWS:
        # This consumer's half of the block's queries against all BLOCK_N keys.
        ROWS: tl.constexpr = BLOCK_M // 2
        tlx.named_barrier_wait(DS_BAR, BOTH_GROUPS)
        if me == 0:
            a0 = tlx.local_slice(tlx.local_view(ds_bufs, ds_stage), [0, 0], [KEYS, ROWS])
            a1 = tlx.local_slice(tlx.local_view(ds_bufs, 2 + ds_stage), [0, 0], [KEYS, ROWS])
        else:
            a0 = tlx.local_slice(tlx.local_view(ds_bufs, ds_stage), [0, ROWS], [KEYS, ROWS])
            a1 = tlx.local_slice(tlx.local_view(ds_bufs, 2 + ds_stage), [0, ROWS],
                                 [KEYS, ROWS])
        dq = tlx.async_dot(tlx.local_trans(a0), tlx.local_view(k_bufs, 0))
        dq = tlx.async_dot(tlx.local_trans(a1), tlx.local_view(k_bufs, 1), dq)
        dq_col = 0
        dq_q = q_start + me * ROWS
    else:
        dq = tlx.async_dot(tlx.local_trans(tlx.local_view(ds_bufs, me * 2 + ds_stage)), k_me)
        dq_col = 0
        dq_q = q_start
    if DEFER_DK:
        dk = tlx.async_dot(ds_t, q, dk)
        dq = tlx.async_dot_wait(1, dq)
        dv = tlx.async_dot_wait(1, dv)
    else:
        dq = tlx.async_dot_wait(0, dq)
        dv = tlx.async_dot_wait(0, dv)
        dk = tlx.async_dot_wait(0, dk)
        tlx.barrier_arrive(tlx.local_view(q_empty, stage))
    tlx.barrier_arrive(tlx.local_view(do_empty, stage))
    # The previous block's reduction has read dq_buf before it is overwritten.
    tlx.async_descriptor_store_wait(0)
    tlx.local_store(dq_buf, dq)
    tlx.async_descriptor_store(dq_desc, dq_buf, [dq_row + dq_q, dq_col], store_reduce="add")
    return dk, dv


@ww.jit
def attention_bwd_ws_kernel(q_desc, k_desc, v_desc, do_desc, dq_desc, dk_desc, dv_desc, lse_ptr,
                            delta_ptr, sm_scale, N_CTX,
                            HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                            NUM_STAGES: tl.constexpr, CAUSAL: tl.constexpr = False,
                            DEFER_DK: tl.constexpr = False, DQ_SPLIT: tl.constexpr = DQ_AUTO):
    dtype: tl.constexpr = tlx.dtype_of(q_desc)
    HALF: tl.constexpr = BLOCK_N // 2
    Q_BYTES: tl.constexpr = BLOCK_M * HEAD_DIM * tlx.size_of(dtype)
    KV_BYTES: tl.constexpr = BLOCK_N * HEAD_DIM * tlx.size_of(dtype)
    MASKED_BLOCKS: tl.constexpr = BLOCK_N // BLOCK_M

    off_hz = tl.program_id(1)
    start_n = tl.program_id(0) * BLOCK_N
    row0 = off_hz * N_CTX  # this head's first row in the 2-D views
    # Causal: queries before the key block see none of its keys.
    lo = 0
    if CAUSAL:
        lo = start_n
    num_q = (N_CTX - lo) // BLOCK_M
    num_masked = 0
    if CAUSAL:
        num_masked = MASKED_BLOCKS

    k_bufs = tlx.local_alloc((HALF, HEAD_DIM), dtype, 2)
    v_bufs = tlx.local_alloc((HALF, HEAD_DIM), dtype, 2)
    q_bufs = tlx.local_alloc((BLOCK_M, HEAD_DIM), dtype, NUM_STAGES)
    do_bufs = tlx.local_alloc((BLOCK_M, HEAD_DIM), dtype, NUM_STAGES)
    ds_bufs = tlx.local_alloc((HALF, BLOCK_M), dtype, 4)  # [consumer * 2 + block % 2]
    # (ops/_attention.py's _bwd_tlx_dq_tile gives the host the same tile.)
    DQ_MODE: tl.constexpr = DQ_SPLIT if DQ_SPLIT != DQ_AUTO else (
        DQ_COLUMNS if HEAD_DIM == 128 else DQ_OWN)
    tl.static_assert(DQ_MODE != DQ_ROWS or BLOCK_M == 128, "DQ_ROWS takes BLOCK_M 128")
    DQ_TILE_ROWS: tl.constexpr = BLOCK_M // 2 if DQ_MODE == DQ_ROWS else BLOCK_M
    DQ_TILE_COLS: tl.constexpr = HEAD_DIM // 2 if DQ_MODE == DQ_COLUMNS else HEAD_DIM
    dq_bufs = tlx.local_alloc((DQ_TILE_ROWS, DQ_TILE_COLS), tl.float32, 2)  # one per consumer
    kv_full = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    q_full = tlx.alloc_barriers(num_barriers=NUM_STAGES, arrive_count=1)
    do_full = tlx.alloc_barriers(num_barriers=NUM_STAGES, arrive_count=1)
    q_empty = tlx.alloc_barriers(num_barriers=NUM_STAGES, arrive_count=2)
    do_empty = tlx.alloc_barriers(num_barriers=NUM_STAGES, arrive_count=2)

    with tlx.async_tasks():
        with tlx.async_task("default", registers=24):
            kv_bar = tlx.local_view(kv_full, 0)
            tlx.barrier_expect_bytes(kv_bar, 2 * KV_BYTES)
            for c in tl.static_range(2):
                tlx.async_descriptor_load(k_desc, tlx.local_view(k_bufs, c),
                                          [row0 + start_n + c * HALF, 0], kv_bar)
                tlx.async_descriptor_load(v_desc, tlx.local_view(v_bufs, c),
                                          [row0 + start_n + c * HALF, 0], kv_bar)
            for j in range(0, num_q):
                stage = j % NUM_STAGES
                free_parity = ((j // NUM_STAGES) & 1) ^ 1
                row = row0 + lo + j * BLOCK_M
                tlx.barrier_wait(tlx.local_view(q_empty, stage), free_parity)
                q_bar = tlx.local_view(q_full, stage)
                tlx.barrier_expect_bytes(q_bar, Q_BYTES)
                tlx.async_descriptor_load(q_desc, tlx.local_view(q_bufs, stage), [row, 0], q_bar)
                tlx.barrier_wait(tlx.local_view(do_empty, stage), free_parity)
                do_bar = tlx.local_view(do_full, stage)
                tlx.barrier_expect_bytes(do_bar, Q_BYTES)
                tlx.async_descriptor_load(do_desc, tlx.local_view(do_bufs, stage), [row, 0],
                                          do_bar)

        with tlx.async_task(num_warps=4, registers=240, replicate=2):
            me = tlx.async_task_replica_id()
            qk_scale = sm_scale * 1.4426950408889634  # log2(e): P in base 2
            offs_k = start_n + me * HALF + tl.arange(0, HALF)
            lse_base = lse_ptr + off_hz * N_CTX
            delta_base = delta_ptr + off_hz * N_CTX
            dk = tl.zeros([HALF, HEAD_DIM], dtype=tl.float32)
            dv = tl.zeros([HALF, HEAD_DIM], dtype=tl.float32)
            k_me = tlx.local_view(k_bufs, me)
            v_me = tlx.local_view(v_bufs, me)
            dq_buf = tlx.local_view(dq_bufs, me)
            tlx.barrier_wait(tlx.local_view(kv_full, 0), 0)
            # The masked blocks never defer dK (the mask's registers beside a running dK MMA
            # make ptxas serialize every wgmma at HEAD_DIM 128).
            for j in range(0, num_masked):
                dk, dv = query_block(dk, dv, j, 0, me, lo + j * BLOCK_M, offs_k, k_me, v_me,
                                     k_bufs, q_bufs, do_bufs, ds_bufs, dq_buf, q_full, do_full,
                                     q_empty, do_empty, dq_desc, lse_base, delta_base, row0,
                                     qk_scale, dtype, HEAD_DIM, BLOCK_M, HALF, NUM_STAGES,
                                     True, False, DQ_MODE)
            for j in range(num_masked, num_q):
                dk, dv = query_block(dk, dv, j, num_masked, me, lo + j * BLOCK_M, offs_k, k_me,
                                     v_me, k_bufs, q_bufs, do_bufs, ds_bufs, dq_buf, q_full,
                                     do_full, q_empty, do_empty, dq_desc, lse_base, delta_base,
                                     row0, qk_scale, dtype, HEAD_DIM, BLOCK_M, HALF, NUM_STAGES,
                                     False, DEFER_DK, DQ_MODE)
            if DEFER_DK:
                dk = tlx.async_dot_wait(0, dk)
            # dK and dV leave through this consumer's K and V tiles with TMA, once the other
            # consumer's last dQ (which reads both K tiles where dQ is split) is done.
            tlx.named_barrier_wait(DS_BAR, BOTH_GROUPS)
            tlx.local_store(k_me, (dk * sm_scale).to(dtype))
            tlx.async_descriptor_store(dk_desc, k_me, [row0 + start_n + me * HALF, 0])
            tlx.local_store(v_me, dv.to(dtype))
            tlx.async_descriptor_store(dv_desc, v_me, [row0 + start_n + me * HALF, 0])
            tlx.async_descriptor_store_wait(0)
