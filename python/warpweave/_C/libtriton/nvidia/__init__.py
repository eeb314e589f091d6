"""`triton._C.libtriton.nvidia`: the cuBLAS handle (`cublas.CublasLt`)."""

from . import cublas  # noqa: F401
