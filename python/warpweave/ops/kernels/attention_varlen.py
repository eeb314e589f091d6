"""Variable-length attention, forward and backward, with the semantics of FlashAttention's
flash_attn_varlen_func: B sequences packed along the token dimension,

    q [total_q, H, HEAD_DIM], k and v [total_k, H_KV, HEAD_DIM] (H % H_KV == 0: query head h reads
    key / value head h // (H // H_KV), grouped-query attention), out like q;
    sequence b owns q's rows cu_seqlens_q[b] .. cu_seqlens_q[b + 1] and k's / v's rows
    cu_seqlens_k[b] .. cu_seqlens_k[b + 1] (int32 prefix sums, B + 1 entries); sequences may
    be empty.

Within a sequence of Lq queries and Lk keys, out = softmax(Q K^T * sm_scale [+ causal mask]) V.
The causal mask is aligned to the bottom right corner of the Lq x Lk score matrix, as FlashAttention
has it since 2.1: query i sees key j when j <= i + Lk - Lq (with Lq == Lk the usual lower
triangle; with Lq > Lk the first Lq - Lk queries see no key). A query that sees no key (no keys,
or all masked) gets a zero output and a log-sum-exp of +inf (so that its P is zero in the
backward), as FlashAttention does.

The kernels are those of attention.py and attention_bwd.py with the batch index taken from the
grid and the bounds of each sequence read from cu_seqlens: the forward folds key blocks with
attention.py's attend_block_range (the bottom-right causal mask is its diagonal mask with the
query rows shifted by Lk - Lq), the backward walks blocks with attention_bwd.py's
dkdv_from_query_range / dq_from_key_range. Programs past the end of their sequence (the grid
is sized by max_seqlen) run no loop iterations and store nothing.

    attention_varlen_fwd_kernel     grid (cdiv(max_seqlen_q, BLOCK_M), B * H)
        lse: fp32 [H, total_q], natural-log log-sum-exp of the scaled scores
    attention_varlen_bwd_preprocess_kernel   grid (cdiv(total_q, BLOCK_M), H)
        delta = rowsum(dO * O) and lse in base 2 (what the shared backward loops take), both fp32
        [H, total_q]
    attention_varlen_bwd_dkdv_kernel  grid (cdiv(max_seqlen_k, BLOCK_N), B * H_KV): one program
        per key block of one key / value head, looping over the GROUP query heads that read it
        (no atomics)
    attention_varlen_bwd_dq_kernel    grid (cdiv(max_seqlen_q, BLOCK_M), B * H)
    constexprs: HEAD_DIM (16..256, power of two), BLOCK_M, BLOCK_N (forward: BLOCK_M a multiple
                of BLOCK_N), CAUSAL
Tensors have a contiguous last dimension; the token and head strides are arguments (the
backward's dO, O, lse and delta are contiguous).
"""
import warpweave as ww
import warpweave.language as tl

from .attention import attend_block_range
from .attention_bwd import dkdv_from_query_range, dq_from_key_range


@ww.jit
def program_sequence(cu_seqlens_q, cu_seqlens_k, heads, CAUSAL: tl.constexpr):
    """(head, first query row, query count, first key row, key count, causal shift) of the
    program's (sequence, head) pair, program_id(1) = sequence * heads + head; the shift Lk - Lq
    aligns the causal mask to the bottom right corner (0 when not causal)."""
    off_bh = tl.program_id(1)
    b = off_bh // heads
    q_start = tl.load(cu_seqlens_q + b)
    seqlen_q = tl.load(cu_seqlens_q + b + 1) - q_start
    k_start = tl.load(cu_seqlens_k + b)
    seqlen_k = tl.load(cu_seqlens_k + b + 1) - k_start
    shift = 0
    if CAUSAL:
        shift = seqlen_k - seqlen_q
    return (off_bh % heads).to(tl.int64), q_start, seqlen_q, k_start, seqlen_k, shift


@ww.jit
def attention_varlen_fwd_kernel(q_ptr, k_ptr, v_ptr, out_ptr, lse_ptr, cu_seqlens_q,
                                cu_seqlens_k, sm_scale,
                                stride_qt, stride_qh, stride_kt, stride_kh,
                                stride_vt, stride_vh, stride_ot, stride_oh,
                                H, GROUP, total_q,
                                HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
                                BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr):
    tl.static_assert(BLOCK_M % BLOCK_N == 0)
    start_m = tl.program_id(0)
    h, q_start, seqlen_q, k_start, seqlen_k, shift = program_sequence(cu_seqlens_q, cu_seqlens_k,
                                                                      H, CAUSAL)
    kv_h = h // GROUP
    q_base = q_ptr + q_start.to(tl.int64) * stride_qt + h * stride_qh
    o_base = out_ptr + q_start.to(tl.int64) * stride_ot + h * stride_oh
    k_base = k_ptr + k_start.to(tl.int64) * stride_kt + kv_h * stride_kh
    v_base = v_ptr + k_start.to(tl.int64) * stride_vt + kv_h * stride_vh

    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    row_valid = offs_m < seqlen_q
    q = tl.load(q_base + offs_m[:, None] * stride_qt + offs_d[None, :],
                mask=row_valid[:, None], other=0.0)

    m_i = tl.full([BLOCK_M], -float("inf"), dtype=tl.float32)
    l_i = tl.full([BLOCK_M], 1.0, dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    qk_scale = sm_scale * 1.4426950408889634  # log2(e)

    # Keys up to the last one this block's last query sees; none past the sequence's end.
    hi = seqlen_k
    if CAUSAL:
        hi = tl.minimum((start_m + 1) * BLOCK_M + shift, seqlen_k)
    hi = tl.where(start_m * BLOCK_M < seqlen_q, hi, 0)
    # attend_block_range masks key > query: shifting the queries by Lk - Lq makes that the
    # bottom-right-aligned mask.
    acc, l_i, m_i = attend_block_range(acc, l_i, m_i, q, k_base, v_base, stride_kt, stride_vt,
                                       offs_m + shift, offs_d, 0, hi, qk_scale, seqlen_k,
                                       BLOCK_N, CAUSAL)

    # A query that sees no key: zero output, lse +inf (attend_block_range's causal fill leaves
    # a mean of the masked keys there otherwise).
    has_key = (offs_m + shift >= 0) & (seqlen_k > 0)
    out = tl.where(has_key[:, None], acc / l_i[:, None], 0.0)
    lse = tl.where(has_key, (m_i + tl.log2(l_i)) * 0.6931471805599453, float("inf"))  # ln(2)
    tl.store(lse_ptr + h * total_q + q_start + offs_m, lse, mask=row_valid)
    tl.store(o_base + offs_m[:, None] * stride_ot + offs_d[None, :],
             out.to(out_ptr.dtype.element_ty), mask=row_valid[:, None])


@ww.jit
def attention_varlen_bwd_preprocess_kernel(o_ptr, do_ptr, lse_ptr, delta_ptr, lse2_ptr, H,
                                           total_q, HEAD_DIM: tl.constexpr,
                                           BLOCK_M: tl.constexpr):
    """delta = rowsum(dO * O) and the lse in base 2 for the rows of one head (o, do contiguous
    [total_q, H, HEAD_DIM]; lse, delta, lse2 [H, total_q])."""
    h = tl.program_id(1)
    offs_t = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    row_valid = offs_t < total_q
    offsets = (offs_t.to(tl.int64)[:, None] * H + h) * HEAD_DIM + offs_d[None, :]
    o = tl.load(o_ptr + offsets, mask=row_valid[:, None], other=0.0).to(tl.float32)
    do = tl.load(do_ptr + offsets, mask=row_valid[:, None], other=0.0).to(tl.float32)
    rows = h.to(tl.int64) * total_q + offs_t
    tl.store(delta_ptr + rows, tl.sum(o * do, axis=1), mask=row_valid)
    lse = tl.load(lse_ptr + rows, mask=row_valid, other=0.0)
    tl.store(lse2_ptr + rows, lse * 1.4426950408889634, mask=row_valid)  # log2(e)


@ww.jit
def attention_varlen_bwd_dkdv_kernel(q_ptr, k_ptr, v_ptr, do_ptr, lse2_ptr, delta_ptr, dk_ptr,
                                     dv_ptr, cu_seqlens_q, cu_seqlens_k, sm_scale,
                                     stride_qt, stride_qh, stride_kt, stride_kh,
                                     stride_vt, stride_vh, stride_dot, stride_doh,
                                     stride_dkt, stride_dkh, stride_dvt, stride_dvh,
                                     H_KV, total_q, GROUP: tl.constexpr,
                                     HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
                                     BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr):
    start_n = tl.program_id(0) * BLOCK_N
    kv_h, q_start, seqlen_q, k_start, seqlen_k, shift = program_sequence(
        cu_seqlens_q, cu_seqlens_k, H_KV, CAUSAL)
    offs_n = start_n + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    key_valid = offs_n < seqlen_k
    k_rows = k_start.to(tl.int64) + offs_n[:, None]
    k = tl.load(k_ptr + k_rows * stride_kt + kv_h * stride_kh + offs_d[None, :],
                mask=key_valid[:, None], other=0.0)
    v = tl.load(v_ptr + k_rows * stride_vt + kv_h * stride_vh + offs_d[None, :],
                mask=key_valid[:, None], other=0.0)
    dk = tl.zeros([BLOCK_N, HEAD_DIM], dtype=tl.float32)
    dv = tl.zeros([BLOCK_N, HEAD_DIM], dtype=tl.float32)
    qk_scale = sm_scale * 1.4426950408889634  # log2(e)
    # Causal: queries before start_n - shift see none of this block's keys.
    lo = 0
    if CAUSAL:
        lo = (tl.maximum(start_n - shift, 0) // BLOCK_M) * BLOCK_M
    hi = tl.where(start_n < seqlen_k, seqlen_q, 0)
    q_row0 = q_start.to(tl.int64)
    # One loop over the queries per query head (unrolled: each is the shared loop on its own,
    # which sm_90a software-pipelines; a run-time loop around it is not).
    for g in tl.static_range(GROUP):
        h = kv_h * GROUP + g
        rows = h * total_q + q_row0
        dk, dv = dkdv_from_query_range(
            dk, dv, k, v, q_ptr + q_row0 * stride_qt + h * stride_qh,
            do_ptr + q_row0 * stride_dot + h * stride_doh, stride_qt, stride_dot,
            lse2_ptr + rows, delta_ptr + rows, offs_n, offs_d, key_valid, lo, hi, seqlen_q,
            shift, qk_scale, BLOCK_M, CAUSAL)
    dk = dk * sm_scale
    tl.store(dk_ptr + k_rows * stride_dkt + kv_h * stride_dkh + offs_d[None, :],
             dk.to(dk_ptr.dtype.element_ty), mask=key_valid[:, None])
    tl.store(dv_ptr + k_rows * stride_dvt + kv_h * stride_dvh + offs_d[None, :],
             dv.to(dv_ptr.dtype.element_ty), mask=key_valid[:, None])


@ww.jit
def attention_varlen_bwd_dq_kernel(q_ptr, k_ptr, v_ptr, do_ptr, lse2_ptr, delta_ptr, dq_ptr,
                                   cu_seqlens_q, cu_seqlens_k, sm_scale,
                                   stride_qt, stride_qh, stride_kt, stride_kh,
                                   stride_vt, stride_vh, stride_dot, stride_doh,
                                   stride_dqt, stride_dqh,
                                   H, GROUP, total_q,
                                   HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
                                   BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr):
    start_m = tl.program_id(0) * BLOCK_M
    h, q_start, seqlen_q, k_start, seqlen_k, shift = program_sequence(cu_seqlens_q, cu_seqlens_k,
                                                                      H, CAUSAL)
    kv_h = h // GROUP
    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    row_valid = offs_m < seqlen_q
    q_rows = q_start.to(tl.int64) + offs_m[:, None]
    q = tl.load(q_ptr + q_rows * stride_qt + h * stride_qh + offs_d[None, :],
                mask=row_valid[:, None], other=0.0)
    do = tl.load(do_ptr + q_rows * stride_dot + h * stride_doh + offs_d[None, :],
                 mask=row_valid[:, None], other=0.0)
    rows = h * total_q + q_start + offs_m
    lse = tl.load(lse2_ptr + rows, mask=row_valid, other=0.0)
    delta = tl.load(delta_ptr + rows, mask=row_valid, other=0.0)
    dq = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    qk_scale = sm_scale * 1.4426950408889634  # log2(e)
    # Causal: keys past the one this block's last query sees are all masked.
    hi = seqlen_k
    if CAUSAL:
        hi = tl.minimum(start_m + BLOCK_M + shift, seqlen_k)
    hi = tl.where(start_m < seqlen_q, hi, 0)
    k_row0 = k_start.to(tl.int64)
    dq = dq_from_key_range(dq, q, do, lse, delta, k_ptr + k_row0 * stride_kt + kv_h * stride_kh,
                           v_ptr + k_row0 * stride_vt + kv_h * stride_vh, stride_kt, stride_vt,
                           offs_m, offs_d, row_valid, 0, hi, seqlen_k, shift, qk_scale, BLOCK_N,
                           CAUSAL)
    dq = dq * sm_scale
    tl.store(dq_ptr + q_rows * stride_dqt + h * stride_dqh + offs_d[None, :],
             dq.to(dq_ptr.dtype.element_ty), mask=row_valid[:, None])
