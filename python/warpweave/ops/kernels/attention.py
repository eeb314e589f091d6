"""Fused attention forward (FlashAttention-2 style), causal or not:

    out = softmax(Q @ K^T * sm_scale [+ causal mask]) @ V,   lse = row-wise log2-sum-exp2 of the scores

Q, K, V, out are [Z, H, N_CTX, HEAD_DIM] fp16 or bf16 with a contiguous last dimension (other
strides free); lse is fp32 [Z * H, N_CTX] (base-2 log-sum-exp of the scaled scores, what a
backward pass needs). Scores are never written to memory: each program keeps a running row max
m_i, row sum l_i and output accumulator in registers while it walks the keys BLOCK_N at a time,
rescaling by exp2(m_old - m_new) whenever the max grows. Softmax uses exp2 with sm_scale folded
with log2(e).

Causal programs walk the keys up to the end of their diagonal block in one loop, masking key >
query (one loop keeps a single software pipeline on sm_90a); blocks right of it are skipped.
    grid = (cdiv(N_CTX, BLOCK_M), Z * H)
    constexprs: HEAD_DIM (16..256, power of two), BLOCK_M (e.g. 128), BLOCK_N (e.g. 64; BLOCK_M
                must be a multiple of BLOCK_N), CAUSAL
    launch: num_warps=8, num_stages=4 (sm_90a: K and V copied three blocks ahead)
"""
import warpweave as ww
import warpweave.language as tl


@ww.jit
def attend_block_range(acc, l_i, m_i, q, k_base, v_base, stride_kn, stride_vn, offs_m, offs_d,
                       lo, hi, qk_scale, N_CTX,
                       BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr):
    """Folds keys [lo, hi) into the running (acc, l_i, m_i) of the query rows offs_m."""
    offs_n = tl.arange(0, BLOCK_N)
    for start_n in range(lo, hi, BLOCK_N):
        keys = start_n + offs_n
        key_valid = keys < N_CTX
        # K's rows as stored ([BLOCK_N, HEAD_DIM], contiguous along HEAD_DIM); the dot reads
        # them transposed, which on sm_90a is a K-major wgmma operand straight from the
        # pipelined buffer.
        k = tl.load(k_base + keys[:, None] * stride_kn + offs_d[None, :],
                    mask=key_valid[:, None], other=0.0)
        qk = tl.dot(q, tl.trans(k)) * qk_scale
        if CAUSAL:
            qk = tl.where(offs_m[:, None] >= keys[None, :], qk, -1.0e6)
        qk = tl.where(key_valid[None, :], qk, -float("inf"))
        m_new = tl.maximum(m_i, tl.max(qk, axis=1))
        p = tl.exp2(qk - m_new[:, None])
        alpha = tl.exp2(m_i - m_new)
        v = tl.load(v_base + keys[:, None] * stride_vn + offs_d[None, :],
                    mask=key_valid[:, None], other=0.0)
        acc = acc * alpha[:, None]
        acc = tl.dot(p.to(v.dtype), v, acc)
        # After the dot: on sm_90a its MMA runs while the row sums are reduced.
        l_i = l_i * alpha + tl.sum(p, axis=1)
        m_i = m_new
    return acc, l_i, m_i


@ww.jit
def attention_fwd_kernel(q_ptr, k_ptr, v_ptr, out_ptr, lse_ptr, sm_scale,
                         stride_qz, stride_qh, stride_qm,
                         stride_kz, stride_kh, stride_kn,
                         stride_vz, stride_vh, stride_vn,
                         stride_oz, stride_oh, stride_om,
                         H, N_CTX,
                         HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                         CAUSAL: tl.constexpr):
    tl.static_assert(BLOCK_M % BLOCK_N == 0)
    start_m = tl.program_id(0)
    off_hz = tl.program_id(1)
    off_z = (off_hz // H).to(tl.int64)
    off_h = (off_hz % H).to(tl.int64)
    q_base = q_ptr + off_z * stride_qz + off_h * stride_qh
    k_base = k_ptr + off_z * stride_kz + off_h * stride_kh
    v_base = v_ptr + off_z * stride_vz + off_h * stride_vh
    o_base = out_ptr + off_z * stride_oz + off_h * stride_oh

    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    row_valid = offs_m < N_CTX
    q = tl.load(q_base + offs_m[:, None] * stride_qm + offs_d[None, :],
                mask=row_valid[:, None], other=0.0)

    m_i = tl.full([BLOCK_M], -float("inf"), dtype=tl.float32)
    # l_i starts at 1 so that a row that sees no key divides by 1, not 0; the first block
    # multiplies it by exp2(-inf) = 0 anyway.
    l_i = tl.full([BLOCK_M], 1.0, dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    qk_scale = sm_scale * 1.4426950408889634  # log2(e)

    # Causal programs stop at the end of their diagonal block: keys right of it are all masked.
    hi = N_CTX
    if CAUSAL:
        hi = tl.minimum((start_m + 1) * BLOCK_M, N_CTX)
    acc, l_i, m_i = attend_block_range(acc, l_i, m_i, q, k_base, v_base, stride_kn, stride_vn,
                                       offs_m, offs_d, 0, hi, qk_scale, N_CTX, BLOCK_N, CAUSAL)

    lse = m_i + tl.log2(l_i)
    out = acc / l_i[:, None]
    tl.store(lse_ptr + off_hz * N_CTX + offs_m, lse, mask=row_valid)
    tl.store(o_base + offs_m[:, None] * stride_om + offs_d[None, :],
             out.to(out_ptr.dtype.element_ty), mask=row_valid[:, None])
