"""Element-wise ops: add (kernels/vector_add.py)."""

from __future__ import annotations

import warpweave as ww

from ._common import _Place, _check_dtype, _contiguous, _dtype_name, _numel, _planned
from .kernels import vector_add as vector_add_kernels


# add_kernel computes 32-bit offsets; vectors this long take the persistent kernel's 64-bit ones.
ADD_PERSISTENT_FROM = (1 << 31) - 4096
_ADD_DTYPES = ("float16", "bfloat16", "float32", "float64", "int32", "int64")


@_planned
def add(x, y):
    """x + y element-wise (same shape and dtype); returns a new contiguous array."""
    place = _Place("add", {"x": x, "y": y})
    dt = _check_dtype("add", "x", x, _ADD_DTYPES)
    if _dtype_name(y) != dt:
        raise ValueError(f"add: 'y' has dtype {_dtype_name(y)} but 'x' has {dt}; convert one")
    if tuple(y.shape) != tuple(x.shape):
        raise ValueError(f"add: 'y' has shape {tuple(y.shape)} but 'x' has {tuple(x.shape)}; "
                         f"broadcasting is not supported")
    out = place.empty(tuple(x.shape), dt)
    n = _numel(x)
    if n == 0:
        return out
    xf, yf = _contiguous(x).reshape(-1), _contiguous(y).reshape(-1)
    if n < ADD_PERSISTENT_FROM:
        place.launch(vector_add_kernels.add_kernel, (ww.cdiv(n, 1024),), xf, yf, out.reshape(-1), n,
                     BLOCK=1024, num_warps=4)
    else:
        programs = place.num_sms() * 4
        place.launch(vector_add_kernels.add_kernel_persistent,
                     (min(programs, ww.cdiv(n, 4096)),), xf, yf, out.reshape(-1), n, BLOCK=4096,
                     num_warps=8)
    return out
