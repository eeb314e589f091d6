"""Kernels and helpers used by the Python tests (a separate module on purpose: helpers from
another file must travel with the kernel's compile environment)."""

import warpweave as ww
import warpweave.language as tl

SCALE = 3
EPS = 1e-5
OUT_DTYPE = tl.float16
NAME = "helper"


@ww.jit
def scale_helper(x):
    return x * SCALE


@ww.jit
def copy_kernel(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst + offs, tl.load(src + offs, mask=offs < n), mask=offs < n)
