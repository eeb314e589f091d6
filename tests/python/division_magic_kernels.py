"""Kernels of the constant-division tests (tests/python/test_division_magic.py,
tests/gpu/test_division_magic_gpu.py): 32-bit integer `//` and `%` by immediates that are not
powers of two, which the codegen lowers through a multiply-high instead of div / rem.

- const_div: each element x of an int32 or uint32 tensor gives x // 3, x % 3, x // 7, x % 7,
  x // 641, x % 1000003 (six output rows).
- stage_ring: the stage index and ring phase of a pipelined loop, k % STAGES and
  (k // STAGES) & 1, for k in [0, n), as the TLX tutorials compute them.
"""
import numpy as np

import warpweave as ww
import warpweave.language as tl


@ww.jit
def const_div(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    # Divisors of x's type (an unsigned x does not mix with the int32 literal).
    d3 = tl.cast(3, x.dtype)
    d7 = tl.cast(7, x.dtype)
    tl.store(out_ptr + offs, x // d3, mask=m)
    tl.store(out_ptr + n + offs, x % d3, mask=m)
    tl.store(out_ptr + 2 * n + offs, x // d7, mask=m)
    tl.store(out_ptr + 3 * n + offs, x % d7, mask=m)
    tl.store(out_ptr + 4 * n + offs, x // tl.cast(641, x.dtype), mask=m)
    tl.store(out_ptr + 5 * n + offs, x % tl.cast(1000003, x.dtype), mask=m)

@ww.jit
def stage_ring(out_ptr, n, STAGES: tl.constexpr):
    for k in range(0, n):
        tl.store(out_ptr + 2 * k, k % STAGES)
        tl.store(out_ptr + 2 * k + 1, (k // STAGES) & 1)


DIVISORS = [3, 3, 7, 7, 641, 1000003]
IS_REM = [False, True, False, True, False, True]


def edge_values(dtype):
    info = np.iinfo(dtype)
    vals = list(range(-40, 41)) + [info.min, info.min + 1, info.max, info.max - 1, 1000002,
                                   1000003, -1000003, 640, 641, -641, 2**30, -(2**30)]
    rng = np.random.default_rng(11)
    vals += list(rng.integers(info.min, info.max, 300, dtype=np.int64))
    return np.array([v for v in vals if info.min <= v <= info.max], dtype=np.int64).astype(dtype)


def expected(x):
    """C semantics, as Triton: quotients truncate toward zero, remainders take x's sign."""
    rows = []
    wide = x.astype(np.int64)
    for d, rem in zip(DIVISORS, IS_REM):
        q = np.where(wide < 0, -((-wide) // d), wide // d)
        rows.append((wide - q * d) if rem else q)
    return np.concatenate(rows).astype(x.dtype)


def check_const_div_gpu(dtype_name):
    import torch
    dtype = np.dtype(dtype_name)
    x = edge_values(dtype)
    xt = torch.from_numpy(x.view(np.int32)).cuda()
    out = torch.zeros(6 * len(x), dtype=torch.int32, device="cuda")
    if dtype == np.uint32:
        xt, out = xt.view(torch.uint32), out.view(torch.uint32)
    const_div[(ww.cdiv(len(x), 128),)](xt, out, len(x), BLOCK=128)
    got = out.view(torch.int32).cpu().numpy().view(dtype)
    np.testing.assert_array_equal(got, expected(x))
