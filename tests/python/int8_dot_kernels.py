"""int8 / uint8 tl.dot kernels (into int32) shared by tests/python/test_int8_dot.py and
tests/gpu/test_int8_dot_gpu.py: one dot of whole tiles, and a masked K loop (the software-pipelined
matmul shape) with B either as the transpose of a loaded [N, K] tile or through its strides
(K-contiguous when B is handed over as the transpose of an [N, K] tensor, which is what wgmma
needs to read 8-bit operands from the pipeline's buffers; N-contiguous otherwise)."""

import warpweave as ww
import warpweave.language as tl


@ww.jit
def tile_dot(a_ptr, b_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr,
             TRANS_B: tl.constexpr):
    rm = tl.arange(0, M)
    rn = tl.arange(0, N)
    rk = tl.arange(0, K)
    a = tl.load(a_ptr + rm[:, None] * K + rk[None, :])
    if TRANS_B:  # b_ptr holds B^T, [N, K]
        b = tl.load(b_ptr + rn[:, None] * K + rk[None, :]).T
    else:
        b = tl.load(b_ptr + rk[:, None] * N + rn[None, :])
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], tl.dot(a, b))


@ww.jit
def matmul_bt(a_ptr, bt_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr,
              BK: tl.constexpr):
    """C [M, N] int32 = A [M, K] @ B, with B given as B^T [N, K] (row-major, K contiguous)."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a_ptrs = a_ptr + rm[:, None] * K + rk[None, :]
    b_ptrs = bt_ptr + rn[:, None] * K + rk[None, :]
    acc = tl.zeros((BM, BN), dtype=tl.int32)
    for k in range(0, tl.cdiv(K, BK)):
        a = tl.load(a_ptrs, mask=(rm[:, None] < M) & (rk[None, :] < K - k * BK), other=0)
        b = tl.load(b_ptrs, mask=(rn[:, None] < N) & (rk[None, :] < K - k * BK), other=0)
        acc = tl.dot(a, b.T, acc)
        a_ptrs += BK
        b_ptrs += BK
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc,
             mask=(rm[:, None] < M) & (rn[None, :] < N))


@ww.jit
def matmul_strided_b(a_ptr, b_ptr, c_ptr, M, N, K, stride_bk, stride_bn, BM: tl.constexpr,
                     BN: tl.constexpr, BK: tl.constexpr):
    """C [M, N] int32 = A [M, K] @ B [K, N], B read through its strides; `acc += tl.dot(..)`."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a_ptrs = a_ptr + rm[:, None] * K + rk[None, :]
    b_ptrs = b_ptr + rk[:, None] * stride_bk + rn[None, :] * stride_bn
    acc = tl.zeros((BM, BN), dtype=tl.int32)
    for k in range(0, tl.cdiv(K, BK)):
        a = tl.load(a_ptrs, mask=(rm[:, None] < M) & (rk[None, :] < K - k * BK), other=0)
        b = tl.load(b_ptrs, mask=(rn[None, :] < N) & (rk[:, None] < K - k * BK), other=0)
        acc += tl.dot(a, b)
        a_ptrs += BK
        b_ptrs += BK * stride_bk
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc,
             mask=(rm[:, None] < M) & (rn[None, :] < N))
