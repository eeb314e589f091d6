"""Kernels of the batched tl.dot tests (tests/python/test_batched_dot.py, tests/cpp/interp_test.cpp's
BatchedDots, tests/gpu/test_batched_dot_gpu.py): 3-D and 4-D dots, as Triton's test_dot3d writes
them, which the GPU targets split into one 2-D dot per batch element
(transforms/DecomposeBatchedDots.cpp)."""
import warpweave as ww
import warpweave.language as tl


@ww.jit
def batched_dot(a_ptr, b_ptr, c_ptr, out_ptr, B: tl.constexpr, M: tl.constexpr,
                N: tl.constexpr, K: tl.constexpr, WITH_ACC: tl.constexpr):
    bi = tl.arange(0, B)[:, None, None]
    mi = tl.arange(0, M)[None, :, None]
    ni = tl.arange(0, N)[None, None, :]
    ki = tl.arange(0, K)
    a = tl.load(a_ptr + bi * M * K + mi * K + ki[None, None, :])
    b = tl.load(b_ptr + bi * K * N + ki[None, :, None] * N + ni)
    if WITH_ACC:
        out = tl.dot(a, b, tl.load(c_ptr + bi * M * N + mi * N + ni))
    else:
        out = tl.dot(a, b)
    tl.store(out_ptr + bi * M * N + mi * N + ni, out)


@ww.jit
def batched_dot_4d(a_ptr, b_ptr, out_ptr, B0: tl.constexpr, B1: tl.constexpr, M: tl.constexpr,
                   N: tl.constexpr, K: tl.constexpr):
    b0 = tl.arange(0, B0)[:, None, None, None]
    b1 = tl.arange(0, B1)[None, :, None, None]
    mi = tl.arange(0, M)[None, None, :, None]
    ni = tl.arange(0, N)[None, None, None, :]
    ki = tl.arange(0, K)
    batch = b0 * B1 + b1
    a = tl.load(a_ptr + batch * M * K + mi * K + ki[None, None, None, :])
    b = tl.load(b_ptr + batch * K * N + ki[None, None, :, None] * N + ni)
    tl.store(out_ptr + batch * M * N + mi * N + ni, tl.dot(a, b, out_dtype=tl.float32))
