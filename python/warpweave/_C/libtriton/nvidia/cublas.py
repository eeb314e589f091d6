"""`nvidia.cublas.CublasLt` with Triton's contract: `matmul(A, B, C)` writes C = A @ B^T and
`gemm(A, B, C, D, alpha, beta)` writes D = alpha * A @ B^T + beta * C, for CUDA tensors A (M, K),
B (N, K), C / D (M, N). The products run in cuBLAS(Lt) through PyTorch, which owns the handle and
its workspace here; the workspace argument is checked and kept as Triton's constructor takes it."""

from __future__ import annotations

_DTYPES = ("float8_e4m3fn", "float16", "float32", "bfloat16")


def _dtype_name(t) -> str:
    return str(t.dtype).rsplit(".", 1)[-1]


def _check(op: str, A, B, out, out_name: str):
    for name, t in (("A", A), ("B", B), (out_name, out)):
        if not all(hasattr(t, a) for a in ("data_ptr", "shape", "dtype")) or not t.is_cuda:
            raise TypeError(f"CublasLt.{op}: {name} must be a CUDA tensor")
        if t.dim() != 2:
            raise ValueError(f"CublasLt.{op}: {name} must be 2-D, got shape {tuple(t.shape)}")
    if A.dtype != B.dtype or A.dtype != out.dtype:
        raise ValueError(f"CublasLt.{op}: A, B and {out_name} must have one dtype, got "
                         f"{A.dtype}, {B.dtype}, {out.dtype}")
    if _dtype_name(A) not in _DTYPES:
        raise ValueError(f"Unsupported dtype for cublasLt.{op}: {_dtype_name(A)} "
                         f"(accepted: {', '.join(_DTYPES)})")
    (M, K), (N, KB) = A.shape, B.shape
    if K != KB or tuple(out.shape) != (M, N):
        raise ValueError(f"CublasLt.{op}: A {tuple(A.shape)} and B {tuple(B.shape)} (B is N x K) "
                         f"do not give {out_name} {tuple(out.shape)}")


def _product(A, B, out_dtype):
    import torch

    if A.dtype == torch.float8_e4m3fn:
        one = torch.ones((), device=A.device, dtype=torch.float32)
        # cuBLASLt's fp8 GEMM wants B column-major: B (N, K) row-major transposed is exactly that.
        # Accumulated in fp32, rounded once to the output type.
        return torch._scaled_mm(A, B.t(), scale_a=one, scale_b=one,
                                out_dtype=torch.float32).to(out_dtype)
    return A @ B.t()


class CublasLt:
    def __init__(self, workspace):
        if not (hasattr(workspace, "data_ptr") and hasattr(workspace, "numel")):
            raise TypeError("CublasLt(workspace): workspace must be a CUDA tensor")
        self.workspace = workspace

    def matmul(self, A, B, C):
        """C = A @ B^T."""
        _check("matmul", A, B, C, "C")
        C.copy_(_product(A, B, C.dtype))

    def gemm(self, A, B, C, D, alpha: float, beta: float):
        """D = alpha * A @ B^T + beta * C (C is float16, as in Triton's binding)."""
        import torch

        _check("gemm", A, B, D, "D")
        if C.dtype != torch.float16:
            raise ValueError(f"C dtype must be float16, got {C.dtype}")
        if tuple(C.shape) != tuple(D.shape):
            raise ValueError("C and D shapes must match")
        acc = _product(A, B, torch.float32).float()
        D.copy_((alpha * acc + beta * C.float()).to(D.dtype))
