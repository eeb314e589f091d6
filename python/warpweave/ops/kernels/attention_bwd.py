"""Fused attention backward (FlashAttention-2 style), causal or not, for the forward of
attention.py: with S = Q K^T * sm_scale (causal: key > query masked), P = softmax(S) recomputed
from the forward's base-2 log-sum-exp, O the forward's output and dO its gradient,

    D  = rowsum(dO * O)                      attention_bwd_preprocess_kernel
    dV = P^T dO,  dK = sm_scale * dS^T Q     attention_bwd_dkdv_kernel (one program per key block)
    dQ = sm_scale * dS K                     attention_bwd_dq_kernel   (one program per query block)
    with dS = P * (dO V^T - D)

Each program keeps its accumulators (dK and dV, or dQ) in fp32 registers and walks the other
side's blocks; P and dS exist only as tiles. No atomics: dK / dV and dQ are separate launches.
Causal programs skip the blocks whose keys are all right of their queries. The walks are the
helpers dkdv_from_query_range and dq_from_key_range (row strides and a causal shift as
arguments), which attention_varlen.py's backward shares.

Tensors are contiguous [Z * H, N_CTX, HEAD_DIM] (fp16 or bf16; q, k, v, dO and the gradients of one
dtype); lse and delta are fp32 [Z * H, N_CTX]. Rows past N_CTX are masked.
    grids: preprocess and dq (cdiv(N_CTX, BLOCK_M), Z * H); dkdv (cdiv(N_CTX, BLOCK_N), Z * H)
    constexprs: HEAD_DIM (16..256, power of two), BLOCK_M, BLOCK_N (>= 16), CAUSAL
"""
import warpweave as ww
import warpweave.language as tl


@ww.jit
def row_block(N_CTX, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr):
    """This program's BLOCK_M rows (program_id(0)) of head program_id(1) in a contiguous
    [Z * H, N_CTX, HEAD_DIM] tensor: their element offsets [BLOCK_M, HEAD_DIM], the rows'
    indices and which of them are below N_CTX."""
    off_hz = tl.program_id(1)
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    offsets = off_hz.to(tl.int64) * N_CTX * HEAD_DIM + offs_m[:, None] * HEAD_DIM + offs_d[None, :]
    return offsets, offs_m, offs_m < N_CTX


@ww.jit
def attention_bwd_preprocess_kernel(o_ptr, do_ptr, delta_ptr, N_CTX,
                                    HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr):
    offsets, offs_m, row_valid = row_block(N_CTX, HEAD_DIM, BLOCK_M)
    o = tl.load(o_ptr + offsets, mask=row_valid[:, None], other=0.0).to(tl.float32)
    do = tl.load(do_ptr + offsets, mask=row_valid[:, None], other=0.0).to(tl.float32)
    tl.store(delta_ptr + tl.program_id(1) * N_CTX + offs_m, tl.sum(o * do, axis=1),
             mask=row_valid)


@ww.jit
def dkdv_from_query_range(dk, dv, k, v, q_base, do_base, stride_qm, stride_dom, lse_base,
                          delta_base, offs_n, offs_d, key_valid, lo, hi, n_rows, causal_shift,
                          qk_scale, BLOCK_M: tl.constexpr, CAUSAL: tl.constexpr):
    """Adds to (dk, dv) of the keys offs_n (rows k, v) the terms of the queries [lo, hi) of
    one head: q and dO rows at q_base / do_base + row * stride, lse (base 2) and delta at
    lse_base / delta_base + row; rows from n_rows on are masked. Causal: query m sees key n
    when m + causal_shift >= n."""
    for start_m in range(lo, hi, BLOCK_M):
        offs_m = start_m + tl.arange(0, BLOCK_M)
        row_valid = offs_m < n_rows
        q = tl.load(q_base + offs_m[:, None] * stride_qm + offs_d[None, :],
                    mask=row_valid[:, None], other=0.0)
        do = tl.load(do_base + offs_m[:, None] * stride_dom + offs_d[None, :],
                     mask=row_valid[:, None], other=0.0)
        lse = tl.load(lse_base + offs_m, mask=row_valid, other=0.0)
        delta = tl.load(delta_base + offs_m, mask=row_valid, other=0.0)
        # P^T as [BLOCK_N, BLOCK_M]: keys along rows, so that dV and dK accumulate by rows.
        p_t = tl.exp2(tl.dot(k, tl.trans(q)) * qk_scale - lse[None, :])
        keep = key_valid[:, None] & row_valid[None, :]
        if CAUSAL:
            keep = keep & (offs_m[None, :] + causal_shift >= offs_n[:, None])
        p_t = tl.where(keep, p_t, 0.0)
        dv = tl.dot(p_t.to(do.dtype), do, dv)
        dp_t = tl.dot(v, tl.trans(do))
        ds_t = p_t * (dp_t - delta[None, :])
        dk = tl.dot(ds_t.to(q.dtype), q, dk)
    return dk, dv


@ww.jit
def dq_from_key_range(dq, q, do, lse, delta, k_base, v_base, stride_kn, stride_vn, offs_m,
                      offs_d, row_valid, lo, hi, n_keys, causal_shift, qk_scale,
                      BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr):
    """Adds to dq of the queries offs_m (rows q, do; lse in base 2, delta) the terms of the keys
    [lo, hi) of one head: K and V rows at k_base / v_base + row * stride; keys from n_keys on
    are masked. Causal: query m sees key n when m + causal_shift >= n."""
    for start_n in range(lo, hi, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        key_valid = offs_n < n_keys
        k = tl.load(k_base + offs_n[:, None] * stride_kn + offs_d[None, :],
                    mask=key_valid[:, None], other=0.0)
        v = tl.load(v_base + offs_n[:, None] * stride_vn + offs_d[None, :],
                    mask=key_valid[:, None], other=0.0)
        p = tl.exp2(tl.dot(q, tl.trans(k)) * qk_scale - lse[:, None])
        keep = row_valid[:, None] & key_valid[None, :]
        if CAUSAL:
            keep = keep & (offs_m[:, None] + causal_shift >= offs_n[None, :])
        p = tl.where(keep, p, 0.0)
        dp = tl.dot(do, tl.trans(v))
        ds = p * (dp - delta[:, None])
        dq = tl.dot(ds.to(k.dtype), k, dq)
    return dq


@ww.jit
def attention_bwd_dkdv_kernel(q_ptr, k_ptr, v_ptr, do_ptr, lse_ptr, delta_ptr, dk_ptr, dv_ptr,
                              sm_scale, N_CTX,
                              HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
                              BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr):
    start_n = tl.program_id(0) * BLOCK_N
    off_hz = tl.program_id(1)
    base = off_hz.to(tl.int64) * N_CTX * HEAD_DIM
    offs_n = start_n + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    key_valid = offs_n < N_CTX
    kv_offsets = base + offs_n[:, None] * HEAD_DIM + offs_d[None, :]
    k = tl.load(k_ptr + kv_offsets, mask=key_valid[:, None], other=0.0)
    v = tl.load(v_ptr + kv_offsets, mask=key_valid[:, None], other=0.0)
    dk = tl.zeros([BLOCK_N, HEAD_DIM], dtype=tl.float32)
    dv = tl.zeros([BLOCK_N, HEAD_DIM], dtype=tl.float32)
    qk_scale = sm_scale * 1.4426950408889634  # log2(e)
    # Causal: queries before this key block's first key see none of its keys.
    lo = 0
    if CAUSAL:
        lo = (start_n // BLOCK_M) * BLOCK_M
    dk, dv = dkdv_from_query_range(dk, dv, k, v, q_ptr + base, do_ptr + base, HEAD_DIM, HEAD_DIM,
                                   lse_ptr + off_hz * N_CTX, delta_ptr + off_hz * N_CTX, offs_n,
                                   offs_d, key_valid, lo, N_CTX, N_CTX, 0, qk_scale, BLOCK_M,
                                   CAUSAL)
    dk = dk * sm_scale
    tl.store(dk_ptr + kv_offsets, dk.to(dk_ptr.dtype.element_ty), mask=key_valid[:, None])
    tl.store(dv_ptr + kv_offsets, dv.to(dv_ptr.dtype.element_ty), mask=key_valid[:, None])


@ww.jit
def attention_bwd_dq_kernel(q_ptr, k_ptr, v_ptr, do_ptr, lse_ptr, delta_ptr, dq_ptr,
                            sm_scale, N_CTX,
                            HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                            CAUSAL: tl.constexpr):
    start_m = tl.program_id(0) * BLOCK_M
    off_hz = tl.program_id(1)
    base = off_hz.to(tl.int64) * N_CTX * HEAD_DIM
    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    row_valid = offs_m < N_CTX
    q_offsets = base + offs_m[:, None] * HEAD_DIM + offs_d[None, :]
    q = tl.load(q_ptr + q_offsets, mask=row_valid[:, None], other=0.0)
    do = tl.load(do_ptr + q_offsets, mask=row_valid[:, None], other=0.0)
    lse = tl.load(lse_ptr + off_hz * N_CTX + offs_m, mask=row_valid, other=0.0)
    delta = tl.load(delta_ptr + off_hz * N_CTX + offs_m, mask=row_valid, other=0.0)
    dq = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    qk_scale = sm_scale * 1.4426950408889634  # log2(e)
    # Causal: keys past this query block's last query are all masked.
    hi = N_CTX
    if CAUSAL:
        hi = tl.minimum(start_m + BLOCK_M, N_CTX)
    dq = dq_from_key_range(dq, q, do, lse, delta, k_ptr + base, v_ptr + base, HEAD_DIM, HEAD_DIM,
                           offs_m, offs_d, row_valid, 0, hi, N_CTX, 0, qk_scale, BLOCK_N, CAUSAL)
    dq = dq * sm_scale
    tl.store(dq_ptr + q_offsets, dq.to(dq_ptr.dtype.element_ty), mask=row_valid[:, None])
