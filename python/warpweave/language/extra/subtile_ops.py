"""Sub-tiling helpers (`triton.language.extra.subtile_ops`): split a 2-D tile into a tuple of
column blocks and join such a tuple back. Kernel-callable @jit helpers. warpweave inlines @jit
helpers (no recursion), so the power-of-2 block counts up to 8 are spelled out."""

import warpweave.language as tl
from warpweave.jit import jit


@jit
def _halves(x):
    """The left and right column halves of the [M, N] tile x."""
    return x.reshape([x.shape[0], 2, x.shape[1] // 2]).permute(0, 2, 1).split()


@jit
def _glue(left, right):
    """[left | right]: two [M, N] tiles side by side."""
    both = tl.join(left, right).permute(0, 2, 1)
    return both.reshape([left.shape[0], left.shape[1] * 2])


@jit
def _split_n_2D(x, SPLIT_FACTOR: tl.constexpr):
    """The tuple of SPLIT_FACTOR (1, 2, 4 or 8) equal column blocks of the [M, N] tile x, left to
    right."""
    tl.static_assert(SPLIT_FACTOR == 1 or SPLIT_FACTOR == 2 or SPLIT_FACTOR == 4
                     or SPLIT_FACTOR == 8, "_split_n_2D: SPLIT_FACTOR must be 1, 2, 4 or 8")
    if SPLIT_FACTOR == 1:
        return (x,)
    elif SPLIT_FACTOR == 2:
        a, b = _halves(x)
        return (a, b)
    elif SPLIT_FACTOR == 4:
        a, b = _halves(x)
        a0, a1 = _halves(a)
        b0, b1 = _halves(b)
        return (a0, a1, b0, b1)
    else:
        a, b = _halves(x)
        a0, a1 = _halves(a)
        b0, b1 = _halves(b)
        a00, a01 = _halves(a0)
        a10, a11 = _halves(a1)
        b00, b01 = _halves(b0)
        b10, b11 = _halves(b1)
        return (a00, a01, a10, a11, b00, b01, b10, b11)


@jit
def _join_n_2D(xs):
    """The [M, n * N] tile whose column blocks are the n (1, 2, 4 or 8) [M, N] tiles of xs."""
    tl.static_assert(len(xs) == 1 or len(xs) == 2 or len(xs) == 4 or len(xs) == 8,
                     "_join_n_2D: the tuple must hold 1, 2, 4 or 8 tiles")
    if len(xs) == 1:
        return xs[0]
    elif len(xs) == 2:
        return _glue(xs[0], xs[1])
    elif len(xs) == 4:
        return _glue(_glue(xs[0], xs[1]), _glue(xs[2], xs[3]))
    else:
        left = _glue(_glue(xs[0], xs[1]), _glue(xs[2], xs[3]))
        right = _glue(_glue(xs[4], xs[5]), _glue(xs[6], xs[7]))
        return _glue(left, right)
