"""Kernels of the fp64 math tests (tests/python/test_float64_math.py, tests/cpp/interp_test.cpp's
Float64Math, tests/gpu/test_float64_math_gpu.py): tl.exp / exp2 / log / log2 / sin / cos of
float64 values (and tl.erf, libdevice's erfc), which the GPU targets build as libdevice's fp64
functions are built."""
import warpweave as ww
import warpweave.language as tl
from warpweave.language.extra import libdevice


@ww.jit
def float64_math(x_ptr, out_ptr, n, FN: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    if FN == "exp":
        y = tl.exp(x)
    elif FN == "exp2":
        y = tl.exp2(x)
    elif FN == "log":
        y = tl.log(x)
    elif FN == "log2":
        y = tl.log2(x)
    elif FN == "erf":
        y = tl.erf(x)
    elif FN == "erfc":
        y = libdevice.erfc(x)
    elif FN == "sin":
        y = tl.sin(x)
    else:
        y = tl.cos(x)
    tl.store(out_ptr + offs, y, mask=mask)
