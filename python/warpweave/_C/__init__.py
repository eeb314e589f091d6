"""Triton's `triton._C` namespace as far as user scripts reach into it: `libtriton.nvidia.cublas`,
the cuBLASLt handle Triton's tutorials time their kernels against (09-persistent-matmul)."""
