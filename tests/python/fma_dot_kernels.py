"""tl.dot kernels that no tensor-core form takes, shared by tests/python/test_fma_dot_loop.py and
tests/gpu/test_fma_dot_loop_gpu.py: one dot of whole tiles (as Triton's test_dot writes it: fp32
with input_precision="ieee", fp64, int8 into int32 where M is under mma.sync's 16), with or
without an accumulator operand; a K loop that carries its accumulator through such dots; and the
dot inside a warp-specialized async task."""

import warpweave as ww
import warpweave.language as tl
from warpweave import tlx


@ww.jit
def tile_dot(a_ptr, b_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr,
             PRECISION: tl.constexpr, WITH_ACC: tl.constexpr):
    """C [M, N] = A [M, K] @ B [K, N] (+ C as read first, WITH_ACC)."""
    rm = tl.arange(0, M)
    rn = tl.arange(0, N)
    rk = tl.arange(0, K)
    a = tl.load(a_ptr + rm[:, None] * K + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * N + rn[None, :])
    c_ptrs = c_ptr + rm[:, None] * N + rn[None, :]
    if WITH_ACC:
        c = tl.dot(a, b, tl.load(c_ptrs), input_precision=PRECISION)
    else:
        c = tl.dot(a, b, input_precision=PRECISION)
    tl.store(c_ptrs, c)


@ww.jit
def k_loop(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
           PRECISION: tl.constexpr):
    """C [M, N] = A [M, K] @ B [K, N], row-major, K a multiple of BK: acc = tl.dot(a, b, acc)."""
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a_ptrs = a_ptr + rm[:, None] * K + rk[None, :]
    b_ptrs = b_ptr + rk[:, None] * N + rn[None, :]
    acc = tl.zeros((BM, BN), dtype=a_ptr.dtype.element_ty)
    for _ in range(0, K // BK):
        a = tl.load(a_ptrs, mask=rm[:, None] < M, other=0)
        b = tl.load(b_ptrs, mask=rn[None, :] < N, other=0)
        acc = tl.dot(a, b, acc, input_precision=PRECISION)
        a_ptrs += BK
        b_ptrs += BK * N
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc,
             mask=(rm[:, None] < M) & (rn[None, :] < N))


@ww.jit
def dot_in_task(a_ptr, b_ptr, c_ptr, x_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    """tile_dot's dot in a 4-warp async task, beside the default task's cross-warp reduction of
    x [128, 64] into its first row: both go through the scratch region, concurrently."""
    with tlx.async_tasks():
        with tlx.async_task("default"):
            rows = tl.arange(0, 128)[:, None] * 64 + tl.arange(0, 64)[None, :]
            x = tl.load(x_ptr + rows)
            tl.store(x_ptr + tl.arange(0, 64), tl.max(x, axis=0))
        with tlx.async_task(num_warps=4):
            rm = tl.arange(0, M)
            rn = tl.arange(0, N)
            rk = tl.arange(0, K)
            a = tl.load(a_ptr + rm[:, None] * K + rk[None, :])
            b = tl.load(b_ptr + rk[:, None] * N + rn[None, :])
            tl.store(c_ptr + rm[:, None] * N + rn[None, :], tl.dot(a, b, input_precision="ieee"))
