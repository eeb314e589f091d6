"""The matmul K loop accumulating in fp16, shared by tests/python/test_f16_accumulate_pipeline.py
and tests/gpu/test_f16_accumulate_dot_gpu.py: A [M, K] and B [K, N] through their strides
(Triton's tutorial form), masked at the edges, summed into an fp16 accumulator as
`acc = tl.dot(a, b, acc)` or (ADD) `acc += tl.dot(a, b, out_dtype=tl.float16)`; the loop
through TMA descriptors; and the same sum through tlx.async_dot into an fp16 accumulator."""

import warpweave as ww
import warpweave.language as tl
from warpweave import tlx


@ww.jit
def matmul_f16_acc(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                   stride_cm, stride_cn, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                   ADD: tl.constexpr = False):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a_ptrs = a_ptr + rm[:, None] * stride_am + rk[None, :] * stride_ak
    b_ptrs = b_ptr + rk[:, None] * stride_bk + rn[None, :] * stride_bn
    acc = tl.zeros((BM, BN), dtype=tl.float16)
    for k in range(0, tl.cdiv(K, BK)):
        a = tl.load(a_ptrs, mask=(rm[:, None] < M) & (rk[None, :] < K - k * BK), other=0.0)
        b = tl.load(b_ptrs, mask=(rk[:, None] < K - k * BK) & (rn[None, :] < N), other=0.0)
        if ADD:
            acc += tl.dot(a, b, out_dtype=tl.float16)
        else:
            acc = tl.dot(a, b, acc)
        a_ptrs += BK * stride_ak
        b_ptrs += BK * stride_bk
    tl.store(c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn, acc,
             mask=(rm[:, None] < M) & (rn[None, :] < N))


@ww.jit
def tma_matmul_f16_acc(a_desc, bt_desc, c_desc, K, BM: tl.constexpr, BN: tl.constexpr,
                       BK: tl.constexpr):
    """The K loop through host descriptors (tutorial 09's form): A [M, K] and B^T [N, K] tiles,
    an fp16 accumulator, the tile stored through c_desc."""
    row = tl.program_id(0) * BM
    col = tl.program_id(1) * BN
    acc = tl.zeros((BM, BN), dtype=tl.float16)
    for kk in range(0, tl.cdiv(K, BK)):
        acc = tl.dot(a_desc.load([row, kk * BK]), bt_desc.load([col, kk * BK]).T, acc)
    c_desc.store([row, col], acc)


@ww.jit
def tlx_f16_acc(a_ptr, b_ptr, c_ptr, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """C [BM, BN] = A [BM, K] @ B [K, BN] through tlx.async_dot into an fp16 register
    accumulator, one BK step an iteration, waited for (async_dot_wait(0)) before the next step's
    operands overwrite the buffers."""
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a_buf = tlx.local_view(tlx.local_alloc((BM, BK), tl.float16, 1), 0)
    b_buf = tlx.local_view(tlx.local_alloc((BK, BN), tl.float16, 1), 0)
    acc = tl.zeros((BM, BN), dtype=tl.float16)
    for k in range(0, K, BK):
        tlx.local_store(a_buf, tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :]))
        tlx.local_store(b_buf, tl.load(b_ptr + (k + rk)[:, None] * BN + rn[None, :]))
        tlx.fence_async_shared()
        acc = tlx.async_dot(a_buf, b_buf, acc)
        acc = tlx.async_dot_wait(0, acc)
    tl.store(c_ptr + rm[:, None] * BN + rn[None, :], acc)
