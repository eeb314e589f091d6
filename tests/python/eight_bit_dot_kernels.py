"""tl.dot kernels of 8-bit operands (fp8, and int8 / uint8 into int32) shared by
tests/python/test_fp8_dot.py, tests/python/test_int8_dot.py and their tests/gpu counterparts:
one dot of whole tiles, a K loop (the software-pipelined matmul shape) and an attention-like
loop (Q K^T, an exp2 softmax without the running max, P cast to fp8, P V), each with B given as
the transpose of a loaded [N, K] tile, which is K-major as wgmma needs for 8-bit operands; and
the K loop with B through its strides (K- or N-contiguous). ACC: the accumulator's type
(tl.int32 for int8 operands). tests/python/test_f16_accumulate_dot.py and its tests/gpu
counterpart run tile_dot and matmul on fp16 operands with OUT / ACC = tl.float16."""

import warpweave as ww
import warpweave.language as tl


@ww.jit
def tile_dot(a_ptr, b_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr,
             TRANS_B: tl.constexpr, OUT: tl.constexpr, LIMIT: tl.constexpr = None):
    rm = tl.arange(0, M)
    rn = tl.arange(0, N)
    rk = tl.arange(0, K)
    a = tl.load(a_ptr + rm[:, None] * K + rk[None, :])
    if TRANS_B:  # b_ptr holds B^T, [N, K]
        b = tl.load(b_ptr + rn[:, None] * K + rk[None, :]).T
    else:
        b = tl.load(b_ptr + rk[:, None] * N + rn[None, :])
    c = tl.dot(a, b, out_dtype=OUT, max_num_imprecise_acc=LIMIT)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], c)


@ww.jit
def tile_ranges(BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """This program's rows and columns of C, and the K offsets of one step."""
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    return rm, rn, tl.arange(0, BK)


@ww.jit
def matmul(a_ptr, bt_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
           LIMIT: tl.constexpr = None, ACC: tl.constexpr = tl.float32):
    """C [M, N] = A [M, K] @ B, with B given as B^T [N, K] (row-major, K contiguous)."""
    rm, rn, rk = tile_ranges(BM, BN, BK)
    a_ptrs = a_ptr + rm[:, None] * K + rk[None, :]
    b_ptrs = bt_ptr + rn[:, None] * K + rk[None, :]
    acc = tl.zeros((BM, BN), dtype=ACC)
    for k in range(0, tl.cdiv(K, BK)):
        a = tl.load(a_ptrs, mask=(rm[:, None] < M) & (rk[None, :] < K - k * BK), other=0.0)
        b = tl.load(b_ptrs, mask=(rn[:, None] < N) & (rk[None, :] < K - k * BK), other=0.0)
        acc = tl.dot(a, b.T, acc, max_num_imprecise_acc=LIMIT)
        a_ptrs += BK
        b_ptrs += BK
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc,
             mask=(rm[:, None] < M) & (rn[None, :] < N))


@ww.jit
def attention(q_ptr, k_ptr, vt_ptr, o_ptr, N_CTX, scale, D: tl.constexpr, BM: tl.constexpr,
              BN: tl.constexpr, P_TYPE: tl.constexpr):
    """O [N_CTX, D] = (exp2(Q K^T * scale) / rowsum) V with Q, K [N_CTX, D] and V given as
    V^T [D, N_CTX]; P is cast to P_TYPE before P V, as tutorial 06 does in fp8."""
    pid = tl.program_id(0)
    rm = pid * BM + tl.arange(0, BM)
    rn = tl.arange(0, BN)
    rd = tl.arange(0, D)
    q = tl.load(q_ptr + rm[:, None] * D + rd[None, :])
    acc = tl.zeros((BM, D), dtype=tl.float32)
    l_i = tl.zeros((BM, ), dtype=tl.float32)
    for start in range(0, N_CTX, BN):
        k = tl.load(k_ptr + (start + rn)[:, None] * D + rd[None, :])
        s = tl.dot(q, k.T)
        p = tl.math.exp2(s * scale)
        l_i += tl.sum(p, 1)
        v = tl.load(vt_ptr + rd[:, None] * N_CTX + (start + rn)[None, :]).T
        acc = tl.dot(p.to(P_TYPE), v, acc)
    tl.store(o_ptr + rm[:, None] * D + rd[None, :], acc / l_i[:, None])


@ww.jit
def matmul_strided_b(a_ptr, b_ptr, c_ptr, M, N, K, stride_bk, stride_bn, BM: tl.constexpr,
                     BN: tl.constexpr, BK: tl.constexpr, ACC: tl.constexpr = tl.float32):
    """Tutorial 03's form: B [K, N] loaded as [BK, BN] tiles through its strides (K-contiguous
    when B is handed over as the transpose of an [N, K] tensor, as the tutorial does in fp8),
    summed as `acc += tl.dot(a, b)`."""
    rm, rn, rk = tile_ranges(BM, BN, BK)
    a_ptrs = a_ptr + rm[:, None] * K + rk[None, :]
    b_ptrs = b_ptr + rk[:, None] * stride_bk + rn[None, :] * stride_bn
    acc = tl.zeros((BM, BN), dtype=ACC)
    for k in range(0, tl.cdiv(K, BK)):
        a = tl.load(a_ptrs, mask=(rm[:, None] < M) & (rk[None, :] < K - k * BK), other=0.0)
        b = tl.load(b_ptrs, mask=(rn[None, :] < N) & (rk[:, None] < K - k * BK), other=0.0)
        acc += tl.dot(a, b)
        a_ptrs += BK
        b_ptrs += BK * stride_bk
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc,
             mask=(rm[:, None] < M) & (rn[None, :] < N))
