"""`warpweave._internal_testing`: the device predicates Triton's tests import from
`triton._internal_testing` (is_cuda, is_hopper, is_blackwell, is_hip...), with Triton's meaning:
each describes the GPU the tests run on, so on a machine without one (or with the interpreter
forced by WARPWEAVE_INTERPRET / TRITON_INTERPRET) every predicate is False and GPU-only tests
skip. warpweave targets NVIDIA GPUs only: the HIP / AMD predicates are always False.
"""

from __future__ import annotations

import os

__all__ = [
    "is_interpreter", "get_current_target", "is_cuda", "is_ampere_or_newer", "is_hopper",
    "is_hopper_or_newer", "is_blackwell", "is_blackwell_ultra", "is_rubin", "is_sm12x", "is_hip",
    "is_hip_cdna", "is_hip_cdna2", "is_hip_cdna3", "is_hip_cdna4", "is_hip_cdna3_or_newer",
    "is_hip_rdna", "is_hip_rdna3", "is_hip_rdna4", "is_hip_gfx1250", "is_xpu",
    "get_hip_lds_size", "int_dtypes", "uint_dtypes", "integral_dtypes", "float_dtypes",
    "float_dtypes_with_bfloat16", "dtypes", "dtypes_with_bfloat16", "torch_float8_dtypes",
    "torch_dtypes", "tma_dtypes", "numpy_random",
]

int_dtypes = ["int8", "int16", "int32", "int64"]
uint_dtypes = ["uint8", "uint16", "uint32", "uint64"]
integral_dtypes = int_dtypes + uint_dtypes
float_dtypes = ["float16", "float32", "float64"]
float_dtypes_with_bfloat16 = float_dtypes + ["bfloat16"]
dtypes = integral_dtypes + float_dtypes
dtypes_with_bfloat16 = dtypes + ["bfloat16"]
torch_float8_dtypes = ["float8_e4m3fn", "float8_e5m2"]
torch_dtypes = ["bool"] + int_dtypes + ["uint8"] + float_dtypes + ["bfloat16"]
tma_dtypes = sorted(set(dtypes_with_bfloat16) - {"int64", "uint64", "float64"})


def is_interpreter() -> bool:
    for var in ("WARPWEAVE_INTERPRET", "TRITON_INTERPRET"):
        if os.environ.get(var, "0") not in ("", "0", "false", "False"):
            return True
    return False


def get_current_target():
    """The GPU's GPUTarget, or None under the interpreter or without a GPU."""
    if is_interpreter():
        return None
    from .runtime.driver import driver

    active = driver.active
    if not active.has_gpu():
        return None
    return active.get_current_target()


def _arch():
    target = get_current_target()
    if target is None or not target.is_cuda_backend():
        return None
    return target.arch


def is_cuda() -> bool:
    return _arch() is not None


def is_ampere_or_newer() -> bool:
    a = _arch()
    return a is not None and a >= 80


def is_hopper() -> bool:
    a = _arch()
    return a is not None and a // 10 == 9


def is_hopper_or_newer() -> bool:
    a = _arch()
    return a is not None and a >= 90


def is_blackwell() -> bool:
    a = _arch()
    return a is not None and a // 10 in (10, 11)


def is_blackwell_ultra() -> bool:
    return _arch() == 103


def is_rubin() -> bool:
    return _arch() == 107


def is_sm12x() -> bool:
    a = _arch()
    return a is not None and a // 10 == 12


def _false() -> bool:
    return False


is_hip = is_hip_cdna = is_hip_cdna2 = is_hip_cdna3 = is_hip_cdna4 = _false
is_hip_cdna3_or_newer = is_hip_rdna = is_hip_rdna3 = is_hip_rdna4 = is_hip_gfx1250 = _false
is_xpu = _false


def get_hip_lds_size() -> int:
    return 65536


def numpy_random(shape, dtype_str, rs=None, low=None, high=None):
    """A random NumPy array of `dtype_str` (a name above): integers over the type's range (or
    [low, high)) with no zeros, floats from a normal distribution."""
    import numpy as np

    if isinstance(shape, int):
        shape = (shape,)
    if rs is None:
        rs = np.random.RandomState(seed=17)
    if dtype_str in integral_dtypes:
        info = np.iinfo(getattr(np, dtype_str))
        lo = info.min if low is None else max(low, info.min)
        hi = info.max if high is None else min(high, info.max)
        x = rs.randint(lo, hi, shape, dtype=getattr(np, dtype_str))
        x[x == 0] = 1  # division tests never see a zero
        return x
    if dtype_str == "bool":
        return rs.randint(0, 2, shape).astype(bool)
    if dtype_str in float_dtypes_with_bfloat16:
        dt = np.float32 if dtype_str == "bfloat16" else getattr(np, dtype_str)
        return rs.normal(0, 1, shape).astype(dt)
    raise ValueError(f"numpy_random: unknown dtype {dtype_str!r}")
