"""Triton's random numbers on the GPU (kernels of tests/python/tl_random_kernels.py): the Philox
words of tl.randint / randint4x / philox / philox_impl and the uniforms of tl.rand / rand4x /
uint_to_uniform_float equal, bit for bit, both the NumPy model (tests/python/
tl_random_reference.py) and the interpreter's results for the same seeds and offsets (32- and
64-bit, signed and unsigned, seeds past 2**32 and negative, n_rounds). tl.randn goes through the
GPU's approximate log / sin / cos (as tl.log / tl.sin do), so its normals are compared to a
tolerance."""

import os
import sys

import numpy as np
import pytest

from gpu_requirements import require_cuda

torch = require_cuda()

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))

import tl_random_kernels as kern  # noqa: E402
import tl_random_reference as ref  # noqa: E402

DEV = "cuda"
SEEDS = [0, 42, 0xFFFFFFFF, 0x0000000FCAFEB0BA, -1, -0x123456789ABCDEF, 0xFEDCBA9876543210]


@pytest.fixture(autouse=True)
def trapped_hangs(monkeypatch):
    monkeypatch.setenv("WARPWEAVE_TRAP_HANGS", "4000000")


def gpu(a):
    return torch.from_numpy(np.ascontiguousarray(a)).to(DEV)


def run_both(kernel, inputs, out_shape, out_dtype, *args, **kw):
    """Runs `kernel` on the GPU (torch tensors) and in the interpreter (NumPy arrays) with the
    same inputs and arguments; returns the two outputs as NumPy arrays."""
    out_gpu = gpu(np.full(out_shape, 0x5A, out_dtype))
    kernel[(1,)](*[gpu(x) for x in inputs], out_gpu, *args, **kw)
    torch.cuda.synchronize()
    out_interp = np.zeros(out_shape, out_dtype)
    kernel[(1,)](*inputs, out_interp, *args, **kw)
    return out_gpu.cpu().numpy(), out_interp


def same_bits(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape
    view = {4: np.uint32, 8: np.uint64}[a.dtype.itemsize]
    np.testing.assert_array_equal(a.view(view), b.view(view))


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint32, np.uint64])
def test_randint(seed, dtype):
    off = ref.offsets_of(dtype, n=1024, base=(1 << 33) + 5 if np.dtype(dtype).itemsize == 8 else 17)
    got, interp = run_both(kern.randint_kernel, [off], off.shape, np.uint32, seed, N=off.size)
    same_bits(got, ref.randint(seed, off))
    same_bits(got, interp)


@pytest.mark.parametrize("rounds", [7, 10])
def test_randint4x_n_rounds(rounds):
    seed = 0x0000000FCAFEB0BA
    off = ref.offsets_of(np.int64, n=256, base=-(1 << 40))
    got, interp = run_both(kern.randint4x_kernel, [off], (4, off.size), np.uint32, seed,
                           N=off.size, ROUNDS=rounds)
    for g, w in zip(got, ref.randint4x(seed, off, rounds)):
        same_bits(g, w)
    same_bits(got, interp)


def test_randint_scalar_and_2d_offsets():
    seed = 0xFEDCBA9876543210
    got, interp = run_both(kern.randint_scalar_kernel, [], (5,), np.uint32, seed, 2**33 + 9)
    want = ref.randint4x(seed, np.array(2**33 + 9, np.int64))
    same_bits(got[:4], np.array([int(w) for w in want], np.uint32))
    same_bits(got, interp)
    got, interp = run_both(kern.randint_2d_kernel, [], (8, 16), np.uint32, 77, 1000, M=8, N=16)
    offs = (1000 + np.arange(8)[:, None] * 16 + np.arange(16)[None, :]).astype(np.int32)
    same_bits(got, ref.randint(77, offs))
    same_bits(got, interp)


@pytest.mark.parametrize("seed", [0, 54, 0xFFFFFFFF, -7])
@pytest.mark.parametrize("rounds", [7, 10])
def test_rand(seed, rounds):
    off = ref.offsets_of(np.int32, n=1024)
    got, interp = run_both(kern.rand_kernel, [off], off.shape, np.float32, seed, N=off.size,
                           ROUNDS=rounds)
    same_bits(got, ref.rand(seed, off, rounds))
    same_bits(got, interp)
    assert (got > 0).all() and (got < 1).all()


def test_rand4x():
    off = ref.offsets_of(np.int64, n=256, base=2**35)
    got, interp = run_both(kern.rand4x_kernel, [off], (4, off.size), np.float32, 5, N=off.size)
    for g, word in zip(got, ref.randint4x(5, off)):
        same_bits(g, ref.uint_to_uniform_float(word))
    same_bits(got, interp)


@pytest.mark.parametrize("dtype", [np.int32, np.uint32, np.int64, np.uint64])
def test_uint_to_uniform_float(dtype):
    info = np.iinfo(dtype)
    x = np.array([info.min, info.max, 0, 1, info.max // 2, info.min + 1, 12345, info.max - 7],
                 dtype)
    got, interp = run_both(kern.to_uniform_kernel, [x], x.shape, np.float32, N=8)
    same_bits(got, ref.uint_to_uniform_float(x))
    same_bits(got, interp)


@pytest.mark.parametrize("seed", [3, 0x0000000FCAFEB0BA, -2])
def test_philox_32_bit_counters(seed):
    rng = np.random.default_rng(seed & 0xFFFF)
    bits = rng.integers(0, 2**32, size=(4, 128), dtype=np.uint64).astype(np.uint32)
    got, interp = run_both(kern.philox_kernel, [bits], (4, 128), np.uint32, seed, N=128,
                           ROUNDS=10)
    k0, k1 = ref.seed_key(seed)
    for g, w in zip(got, ref.philox4x32(*bits, k0, k1)):
        same_bits(g, w)
    same_bits(got, interp)


def test_philox_64_bit_counters():
    seed = 0x0123456789ABCDEF
    rng = np.random.default_rng(7)
    bits = rng.integers(0, 2**63, size=(4, 64), dtype=np.uint64) * np.uint64(2) + np.uint64(1)
    got, interp = run_both(kern.philox_kernel, [bits], (4, 64), np.uint64, seed, N=64, ROUNDS=7)
    for g, w in zip(got, ref.philox4x64(*bits, seed, 0, rounds=7)):
        same_bits(g, w)
    same_bits(got, interp)


def test_philox_impl():
    rng = np.random.default_rng(11)
    c = rng.integers(0, 2**32, size=(4, 64), dtype=np.uint64).astype(np.uint32)
    got, interp = run_both(kern.philox_impl_kernel, [c], (4, 64), np.uint32, 0x9ABCDEF0,
                           0x12345678, N=64)
    for g, w in zip(got, ref.philox4x32(*c, 0x9ABCDEF0, 0x12345678)):
        same_bits(g, w)
    same_bits(got, interp)


@pytest.mark.parametrize("seed", [0, 54, 0x0000000FCAFEB0BA])
def test_randn(seed):
    off = np.arange(1 << 14, dtype=np.int32)
    got, interp = run_both(kern.randn_kernel, [off], off.shape, np.float32, seed, N=off.size)
    np.testing.assert_allclose(got, ref.randn(seed, off), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(got, interp, rtol=1e-4, atol=1e-4)
    assert abs(got.mean()) < 0.05 and abs(got.std() - 1) < 0.05


def test_randn4x():
    off = np.arange(256, dtype=np.int32)
    got, _ = run_both(kern.randn4x_kernel, [off], (4, off.size), np.float32, 8, N=off.size)
    u = [ref.uint_to_uniform_float(w) for w in ref.randint4x(8, off)]
    want = ref.pair_uniform_to_normal(u[0], u[1]) + ref.pair_uniform_to_normal(u[2], u[3])
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)
