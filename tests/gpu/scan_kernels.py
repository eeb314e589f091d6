"""Scan kernels for the GPU tests: tl.cumsum / tl.cumprod / tl.associative_scan over a whole
[M, N] tile held by one program, along either axis, forwards or reversed."""
import warpweave as ww
import warpweave.language as tl


@ww.jit
def _running_max(a, b):
    return tl.maximum(a, b)


@ww.jit
def _pick_later_if_positive(a, b):
    # Not commutative: the combine order must be the scan order.
    return tl.where(b > 0, b, a)


@ww.jit
def scan_kernel(x_ptr, out_ptr, M: tl.constexpr, N: tl.constexpr, AXIS: tl.constexpr,
                KIND: tl.constexpr, REVERSE: tl.constexpr):
    offs = tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :]
    x = tl.load(x_ptr + offs)
    if KIND == "sum":
        y = tl.cumsum(x, axis=AXIS, reverse=REVERSE)
    elif KIND == "prod":
        y = tl.cumprod(x, axis=AXIS, reverse=REVERSE)
    elif KIND == "max":
        y = tl.associative_scan(x, AXIS, _running_max, reverse=REVERSE)
    else:
        y = tl.associative_scan(x, AXIS, _pick_later_if_positive, reverse=REVERSE)
    tl.store(out_ptr + offs, y)


@ww.jit
def cumsum_1d_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0)
    tl.store(out_ptr + offs, tl.cumsum(x, axis=0), mask=mask)
