"""Attention loops written with tl.dot, for tests/python/test_blackwell_tl_attention.py: the
softmax form over pointer loads (cp.async copies), and a SiLU form over host descriptors whose
accumulator the loop only adds to (the "triton_spec" kernels of TLX's cross-attention tutorial
have that shape). The TMA softmax form is attnregs_kernels.attention_tma_fwd."""

import warpweave as ww
import warpweave.language as tl


@ww.jit
def attention_ptr_fwd(q_ptr, k_ptr, v_ptr, o_ptr, sm_scale, N_CTX, HEAD_DIM: tl.constexpr,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """Softmax attention of one head per program row: q, k, v, o [heads, N_CTX, HEAD_DIM]
    contiguous; N_CTX any length (rows and keys past it masked)."""
    block = tl.program_id(0)
    base = tl.program_id(1) * N_CTX * HEAD_DIM
    rows = block * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, HEAD_DIM)
    q = tl.load(q_ptr + base + rows[:, None] * HEAD_DIM + cols[None, :],
                mask=rows[:, None] < N_CTX, other=0.0)
    row_max = tl.full([BLOCK_M], float("-inf"), tl.float32)
    row_sum = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    scale = sm_scale * 1.44269504
    for start in range(0, N_CTX, BLOCK_N):
        keys = start + tl.arange(0, BLOCK_N)
        k = tl.load(k_ptr + base + keys[:, None] * HEAD_DIM + cols[None, :],
                    mask=keys[:, None] < N_CTX, other=0.0)
        s = tl.dot(q, tl.trans(k)) * scale
        s = tl.where(keys[None, :] < N_CTX, s, float("-inf"))
        new_max = tl.maximum(row_max, tl.max(s, 1))
        p = tl.math.exp2(s - new_max[:, None])
        alpha = tl.math.exp2(row_max - new_max)
        row_sum = row_sum * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        v = tl.load(v_ptr + base + keys[:, None] * HEAD_DIM + cols[None, :],
                    mask=keys[:, None] < N_CTX, other=0.0)
        acc = tl.dot(p.to(v.dtype), v, acc)
        row_max = new_max
    out = acc / row_sum[:, None]
    tl.store(o_ptr + base + rows[:, None] * HEAD_DIM + cols[None, :],
             out.to(o_ptr.dtype.element_ty), mask=rows[:, None] < N_CTX)


@ww.jit
def silu_attention_fwd(q_desc, k_desc, v_desc, o_ptr, alpha, N_CTX, HEAD_DIM: tl.constexpr,
                       BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """o = sum over keys of silu(alpha * q k^T) v / N_CTX per head; q, k, v [heads * N_CTX,
    HEAD_DIM] through descriptors, o fp32 [heads * N_CTX, HEAD_DIM]; N_CTX a multiple of
    BLOCK_M and BLOCK_N."""
    first = tl.program_id(1) * N_CTX
    row0 = first + tl.program_id(0) * BLOCK_M
    q = q_desc.load([row0, 0])
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    for start in tl.range(0, N_CTX, BLOCK_N):
        k = k_desc.load([first + start, 0])
        qk = tl.dot(q, tl.trans(k)) * alpha
        act = qk / (1.0 + tl.exp(-qk))
        v = v_desc.load([first + start, 0])
        acc += tl.dot(act.to(tl.float16), v)
    rows = row0 + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, HEAD_DIM)
    tl.store(o_ptr + rows[:, None] * HEAD_DIM + cols[None, :], acc / N_CTX)


@ww.jit
def silu_attention_t_fwd(q_desc, k_desc, v_desc, o_ptr, alpha, N_CTX, HEAD_DIM: tl.constexpr,
                         BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """silu_attention_fwd computed transposed: S^T = K Q^T and O^T += V^T P^T (the TRANS form
    of TLX's cross-attention reference kernel); o is written as o^T, fp32 [heads, HEAD_DIM,
    N_CTX]."""
    first = tl.program_id(1) * N_CTX
    row0 = first + tl.program_id(0) * BLOCK_M
    q = q_desc.load([row0, 0])
    acc = tl.zeros([HEAD_DIM, BLOCK_M], tl.float32)
    for start in tl.range(0, N_CTX, BLOCK_N):
        k = k_desc.load([first + start, 0])
        qk = tl.dot(k, tl.trans(q)) * alpha
        act = qk / (1.0 + tl.exp(-qk))
        v = v_desc.load([first + start, 0])
        acc += tl.dot(tl.trans(v), act.to(tl.float16))
    dims = tl.arange(0, HEAD_DIM)
    cols = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    o_base = o_ptr + tl.program_id(1) * HEAD_DIM * N_CTX
    tl.store(o_base + dims[:, None] * N_CTX + cols[None, :], acc / N_CTX)


@ww.jit
def silu_attention_by_length(q_desc, k_desc, v_desc, q1_desc, k1_desc, v1_desc, o_ptr, alpha,
                             N_CTX, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
                             BLOCK_N: tl.constexpr, BLOCK_M1: tl.constexpr,
                             BLOCK_N1: tl.constexpr):
    """silu_attention_fwd with its tiles picked by the sequence length, as TLX's cross-attention
    reference kernel picks them: BLOCK_M1 x BLOCK_N1 through the *1 descriptors where N_CTX fits
    one BLOCK_M1 block, BLOCK_M x BLOCK_N otherwise. Each branch holds its own attention loop;
    only one runs."""
    if N_CTX <= BLOCK_M1:
        silu_attention_fwd(q1_desc, k1_desc, v1_desc, o_ptr, alpha, N_CTX, HEAD_DIM, BLOCK_M1,
                           BLOCK_N1)
    else:
        silu_attention_fwd(q_desc, k_desc, v_desc, o_ptr, alpha, N_CTX, HEAD_DIM, BLOCK_M,
                           BLOCK_N)


@ww.jit
def masked_silu_attention_t_fwd(q_desc, k_desc, v_desc, o_ptr, alpha, N_CTX,
                                HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
                                BLOCK_N: tl.constexpr, RECOMPUTE_OFFSETS: tl.constexpr,
                                FAST_TANH: tl.constexpr):
    """silu_attention_t_fwd as TLX's cross-attention reference kernel writes it: keys and
    queries past N_CTX masked (N_CTX any length), the activation through inline PTX with
    FAST_TANH (tanh.approx.f32: silu(x) = x / 2 * (1 + tanh(x / 2))), else x / (1 + exp(-x)),
    and the query offsets reassigned in the loop only
    under a constexpr, which leaves them carried unchanged. o^T is fp32 [heads, HEAD_DIM,
    N_CTX]."""
    first = tl.program_id(1) * N_CTX
    start_m = tl.program_id(0) * BLOCK_M
    offs_m = start_m + tl.arange(0, BLOCK_M)
    q = q_desc.load([first + start_m, 0])
    acc = tl.zeros([HEAD_DIM, BLOCK_M], tl.float32)
    for start in tl.range(0, N_CTX, BLOCK_N):
        if RECOMPUTE_OFFSETS:
            offs_m = start_m + tl.arange(0, BLOCK_M)
        offs_n = start + tl.arange(0, BLOCK_N)
        k = k_desc.load([first + start, 0])
        qk = tl.dot(k, tl.trans(q))
        valid = (offs_m[None, :] < N_CTX) & (offs_n[:, None] < N_CTX)
        qk = qk * tl.where(valid, alpha, 0.0)
        if FAST_TANH:
            half = qk * 0.5
            t = tl.inline_asm_elementwise("tanh.approx.f32 $0, $1;", "=f,f", [half],
                                          dtype=tl.float32, is_pure=True, pack=1)
            act = tl.where(valid, half * (1.0 + t), 0.0)
        else:
            act = tl.where(valid, qk / (1.0 + tl.exp(-qk)), 0.0)
        v = v_desc.load([first + start, 0])
        acc += tl.dot(tl.trans(v), act.to(tl.float16))
    dims = tl.arange(0, HEAD_DIM)
    o_base = o_ptr + tl.program_id(1) * HEAD_DIM * N_CTX
    tl.store(o_base + dims[:, None] * N_CTX + offs_m[None, :], acc / N_CTX,
             mask=(offs_m < N_CTX)[None, :])


@ww.jit
def biased_silu_attention_t_fwd(q_desc, k_desc, v_desc, bias_ptr, o_ptr, N_CTX,
                                HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
                                BLOCK_N: tl.constexpr):
    """silu_attention_t_fwd with a [N_CTX, N_CTX] fp32 bias added to S^T, loaded by pointers in
    the loop (bias[key, query]); o^T fp32 [heads, HEAD_DIM, N_CTX]."""
    first = tl.program_id(1) * N_CTX
    start_m = tl.program_id(0) * BLOCK_M
    offs_m = start_m + tl.arange(0, BLOCK_M)
    q = q_desc.load([first + start_m, 0])
    acc = tl.zeros([HEAD_DIM, BLOCK_M], tl.float32)
    for start in tl.range(0, N_CTX, BLOCK_N):
        offs_n = start + tl.arange(0, BLOCK_N)
        bias = tl.load(bias_ptr + offs_n[:, None] * N_CTX + offs_m[None, :])
        k = k_desc.load([first + start, 0])
        qk = tl.dot(k, tl.trans(q)) + bias
        act = qk / (1.0 + tl.exp(-qk))
        v = v_desc.load([first + start, 0])
        acc += tl.dot(tl.trans(v), act.to(tl.float16))
    dims = tl.arange(0, HEAD_DIM)
    o_base = o_ptr + tl.program_id(1) * HEAD_DIM * N_CTX
    tl.store(o_base + dims[:, None] * N_CTX + offs_m[None, :], acc / N_CTX)
