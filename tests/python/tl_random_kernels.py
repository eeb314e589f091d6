"""Kernels using Triton's random numbers (tl.randint, tl.rand, ..., tl.random.*), run by
tests/python/test_tl_random.py in the interpreter and by tests/gpu/test_tl_random_gpu.py on the
GPU against the NumPy model in tl_random_reference.py."""

import warpweave as ww
import warpweave.language as tl
from warpweave.language.random import randint4x as imported_randint4x


@ww.jit
def randint_kernel(off_ptr, out_ptr, seed, N: tl.constexpr):
    i = tl.arange(0, N)
    tl.store(out_ptr + i, tl.randint(seed, tl.load(off_ptr + i)))


@ww.jit
def randint_const_seed_kernel(off_ptr, out_ptr, SEED: tl.constexpr, N: tl.constexpr):
    i = tl.arange(0, N)
    tl.store(out_ptr + i, tl.randint(SEED, tl.load(off_ptr + i)))


@ww.jit
def randint4x_kernel(off_ptr, out_ptr, seed, N: tl.constexpr, ROUNDS: tl.constexpr):
    i = tl.arange(0, N)
    a, b, c, d = tl.randint4x(seed, tl.load(off_ptr + i), n_rounds=ROUNDS)
    tl.store(out_ptr + i, a)
    tl.store(out_ptr + N + i, b)
    tl.store(out_ptr + 2 * N + i, c)
    tl.store(out_ptr + 3 * N + i, d)


@ww.jit
def randint4x_default_rounds_kernel(off_ptr, out_ptr, seed, N: tl.constexpr):
    i = tl.arange(0, N)
    # Positional n_rounds, through the module's name and a from-import.
    a, b, c, d = imported_randint4x(seed, tl.load(off_ptr + i), tl.random.N_ROUNDS_DEFAULT)
    tl.store(out_ptr + i, a)
    tl.store(out_ptr + N + i, b)
    tl.store(out_ptr + 2 * N + i, c)
    tl.store(out_ptr + 3 * N + i, d)


@ww.jit
def rand_kernel(off_ptr, out_ptr, seed, N: tl.constexpr, ROUNDS: tl.constexpr):
    i = tl.arange(0, N)
    tl.store(out_ptr + i, tl.rand(seed, tl.load(off_ptr + i), ROUNDS))


@ww.jit
def rand4x_kernel(off_ptr, out_ptr, seed, N: tl.constexpr):
    i = tl.arange(0, N)
    a, b, c, d = tl.random.rand4x(seed, tl.load(off_ptr + i))
    tl.store(out_ptr + i, a)
    tl.store(out_ptr + N + i, b)
    tl.store(out_ptr + 2 * N + i, c)
    tl.store(out_ptr + 3 * N + i, d)


@ww.jit
def randn_kernel(off_ptr, out_ptr, seed, N: tl.constexpr):
    i = tl.arange(0, N)
    tl.store(out_ptr + i, tl.randn(seed, tl.load(off_ptr + i)))


@ww.jit
def randn4x_kernel(off_ptr, out_ptr, seed, N: tl.constexpr):
    i = tl.arange(0, N)
    a, b, c, d = tl.randn4x(seed, tl.load(off_ptr + i))
    tl.store(out_ptr + i, a)
    tl.store(out_ptr + N + i, b)
    tl.store(out_ptr + 2 * N + i, c)
    tl.store(out_ptr + 3 * N + i, d)


@ww.jit
def randint_2d_kernel(out_ptr, seed, base, M: tl.constexpr, N: tl.constexpr):
    offs = base + tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :]
    tl.store(out_ptr + tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :],
             tl.randint(seed, offs))


@ww.jit
def randint_scalar_kernel(out_ptr, seed, offset):
    a, b, c, d = tl.randint4x(seed, offset)
    tl.store(out_ptr, a)
    tl.store(out_ptr + 1, b)
    tl.store(out_ptr + 2, c)
    tl.store(out_ptr + 3, d)
    tl.store(out_ptr + 4, tl.randint(seed, 7))


@ww.jit
def philox_kernel(c_ptr, out_ptr, seed, N: tl.constexpr, ROUNDS: tl.constexpr):
    i = tl.arange(0, N)
    c0 = tl.load(c_ptr + i)
    c1 = tl.load(c_ptr + N + i)
    c2 = tl.load(c_ptr + 2 * N + i)
    c3 = tl.load(c_ptr + 3 * N + i)
    a, b, c, d = tl.philox(seed, c0, c1, c2, c3, ROUNDS)
    tl.store(out_ptr + i, a)
    tl.store(out_ptr + N + i, b)
    tl.store(out_ptr + 2 * N + i, c)
    tl.store(out_ptr + 3 * N + i, d)


@ww.jit
def philox_impl_kernel(c_ptr, out_ptr, k0, k1, N: tl.constexpr):
    i = tl.arange(0, N)
    c0 = tl.load(c_ptr + i)
    c1 = tl.load(c_ptr + N + i)
    c2 = tl.load(c_ptr + 2 * N + i)
    c3 = tl.load(c_ptr + 3 * N + i)
    a, b, c, d = tl.random.philox_impl(c0, c1, c2, c3, k0.to(tl.uint32), k1.to(tl.uint32))
    tl.store(out_ptr + i, a)
    tl.store(out_ptr + N + i, b)
    tl.store(out_ptr + 2 * N + i, c)
    tl.store(out_ptr + 3 * N + i, d)


@ww.jit
def to_uniform_kernel(x_ptr, out_ptr, N: tl.constexpr):
    i = tl.arange(0, N)
    tl.store(out_ptr + i, tl.random.uint_to_uniform_float(tl.load(x_ptr + i)))


@ww.jit
def box_muller_kernel(u_ptr, out_ptr, N: tl.constexpr):
    i = tl.arange(0, N)
    n1, n2 = tl.pair_uniform_to_normal(tl.load(u_ptr + i), tl.load(u_ptr + N + i))
    tl.store(out_ptr + i, n1)
    tl.store(out_ptr + N + i, n2)
