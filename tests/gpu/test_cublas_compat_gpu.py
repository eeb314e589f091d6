"""`warpweave._C.libtriton.nvidia.cublas.CublasLt`, the cuBLAS handle Triton scripts import from
`triton._C` (tutorial 09 times its kernels against it): C = A @ B^T and D = alpha A B^T + beta C
with Triton's argument checks, against torch."""

import pytest

from gpu_requirements import require_cuda

torch = require_cuda()

from warpweave._C.libtriton import nvidia  # noqa: E402


@pytest.fixture(scope="module")
def blas():
    return nvidia.cublas.CublasLt(torch.empty(32 * 1024 * 1024, device="cuda", dtype=torch.uint8))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_matmul_is_a_times_b_transposed(blas, dtype):
    M, N, K = 192, 320, 256
    a = torch.randn((M, K), device="cuda", dtype=dtype)
    b = torch.randn((N, K), device="cuda", dtype=dtype)
    c = torch.full((M, N), float("nan"), device="cuda", dtype=dtype)
    blas.matmul(a, b, c)
    ref = a.float() @ b.float().T
    torch.testing.assert_close(c.float(), ref, rtol=2e-2, atol=2e-1)


def test_fp8_matmul(blas):
    if torch.cuda.get_device_capability() < (9, 0):
        pytest.skip("fp8 GEMM needs compute capability 9.0")
    M, N, K = 128, 256, 128
    a = (torch.randn((M, K), device="cuda") / 4).to(torch.float8_e4m3fn)
    b = (torch.randn((N, K), device="cuda") / 4).to(torch.float8_e4m3fn)
    c = torch.empty((M, N), device="cuda", dtype=torch.float8_e4m3fn)
    blas.matmul(a, b, c)
    ref = (a.float() @ b.float().T).to(torch.float8_e4m3fn).float()
    torch.testing.assert_close(c.float(), ref, rtol=0.13, atol=0.05)


def test_gemm_scales_and_adds(blas):
    M, N, K = 128, 192, 64
    a = torch.randn((M, K), device="cuda", dtype=torch.float16)
    b = torch.randn((N, K), device="cuda", dtype=torch.float16)
    c = torch.randn((M, N), device="cuda", dtype=torch.float16)
    d = torch.empty((M, N), device="cuda", dtype=torch.float16)
    blas.gemm(a, b, c, d, 0.5, -2.0)
    ref = 0.5 * (a.float() @ b.float().T) - 2.0 * c.float()
    torch.testing.assert_close(d.float(), ref, rtol=2e-2, atol=2e-1)


def test_bad_arguments_name_the_problem(blas):
    a = torch.randn((64, 32), device="cuda", dtype=torch.float16)
    b = torch.randn((48, 32), device="cuda", dtype=torch.float16)
    with pytest.raises(ValueError, match=r"do not give C \(64, 64\)"):
        blas.matmul(a, b, torch.empty((64, 64), device="cuda", dtype=torch.float16))
    with pytest.raises(ValueError, match="one dtype"):
        blas.matmul(a, b, torch.empty((64, 48), device="cuda", dtype=torch.float32))
    with pytest.raises(ValueError, match="Unsupported dtype for cublasLt.matmul: int8"):
        i8 = torch.ones((64, 32), device="cuda", dtype=torch.int8)
        blas.matmul(i8, i8[:48], torch.empty((64, 48), device="cuda", dtype=torch.int8))
    with pytest.raises(TypeError, match="A must be a CUDA tensor"):
        blas.matmul(a.cpu(), b, torch.empty((64, 48), device="cuda", dtype=torch.float16))
    with pytest.raises(ValueError, match="C dtype must be float16"):
        blas.gemm(a, b, torch.empty((64, 48), device="cuda", dtype=torch.float32),
                  torch.empty((64, 48), device="cuda", dtype=torch.float16), 1.0, 0.0)
