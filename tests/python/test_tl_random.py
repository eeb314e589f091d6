"""Triton's random numbers in the interpreter: tl.randint / randint4x / rand / rand4x / randn /
randn4x / philox / philox_impl / uint_to_uniform_float / pair_uniform_to_normal (also as
tl.random.*) against an independent NumPy Philox (tl_random_reference.py, itself checked against
the Random123 known-answer vectors). The integers and uniforms must match bit for bit for 32- and
64-bit seeds (constexpr and run-time), every offset width and signedness, scalar, 1-D and 2-D
offsets and any n_rounds; the normals to float32 accuracy. Also: the located errors, and that
kernels using them (Triton's low-memory dropout among them) compile to PTX that ptxas accepts
for sm_90a and sm_80."""

import importlib
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tl_random_reference as ref
import warpweave as ww
import warpweave.language as tl
from tl_random_kernels import (box_muller_kernel, philox_impl_kernel, philox_kernel,
                               rand4x_kernel, rand_kernel, randint4x_default_rounds_kernel,
                               randint4x_kernel, randint_2d_kernel, randint_const_seed_kernel,
                               randint_kernel, randint_scalar_kernel, randn4x_kernel, randn_kernel,
                               to_uniform_kernel)

native_loader = importlib.import_module("warpweave._native_loader")
pytestmark = pytest.mark.skipif(not native_loader.available(),
                                reason="warpweave._native is not built (pip install .)")

# 32-bit, >= 2**31, >= 2**32, negative (sign-extended: high key word all ones) and >= 2**63
# (a u64 argument) seeds.
SEEDS = [0, 42, 0x7FFFFFFF, 0xFFFFFFFF, 0x0000000FCAFEB0BA, -1, -0x123456789ABCDEF,
         0xFEDCBA9876543210]


def test_reference_matches_the_random123_known_answers():
    # Random123's kat_vectors, philox4x32_10 and philox4x64_10.
    assert [int(x) for x in ref.philox4x32(0, 0, 0, 0, 0, 0)] == [
        0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]
    m = 0xFFFFFFFF
    assert [int(x) for x in ref.philox4x32(m, m, m, m, m, m)] == [
        0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD]
    assert [int(x) for x in ref.philox4x32(0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344,
                                           0xA4093822, 0x299F31D0)] == [
        0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1]
    assert [int(x) for x in ref.philox4x64(0, 0, 0, 0, 0, 0)] == [
        0x16554D9ECA36314C, 0xDB20FE9D672D0FDC, 0xD7E772CEE186176B, 0x7E68B68AEC7BA23B]


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint32, np.uint64])
def test_randint_is_philox_of_seed_and_offset(seed, dtype):
    off = ref.offsets_of(dtype, base=(1 << 33) + 5 if np.dtype(dtype).itemsize == 8 else 17)
    out = np.zeros(off.shape, np.uint32)
    randint_kernel[(1,)](off, out, seed, N=off.size)
    np.testing.assert_array_equal(out, ref.randint(seed, off))


@pytest.mark.parametrize("seed", [0, 0xFFFFFFFF, 0x0000000FCAFEB0BA, -1, -0x123456789ABCDEF])
def test_randint_with_a_constexpr_seed(seed):
    off = ref.offsets_of(np.int64, base=-100)
    out = np.zeros(off.shape, np.uint32)
    randint_const_seed_kernel[(1,)](off, out, SEED=seed, N=off.size)
    np.testing.assert_array_equal(out, ref.randint(seed, off))


@pytest.mark.parametrize("rounds", [0, 1, 7, 10, 13])
@pytest.mark.parametrize("dtype", [np.int32, np.uint64])
def test_randint4x_all_four_words_and_n_rounds(rounds, dtype):
    seed = 0x0000000FCAFEB0BA
    off = ref.offsets_of(dtype, n=128, base=3)
    out = np.zeros((4, off.size), np.uint32)
    randint4x_kernel[(1,)](off, out, seed, N=off.size, ROUNDS=rounds)
    for got, want in zip(out, ref.randint4x(seed, off, rounds)):
        np.testing.assert_array_equal(got, want)


def test_randint4x_default_rounds_through_tl_random_names():
    off = ref.offsets_of(np.int32, n=64)
    out = np.zeros((4, off.size), np.uint32)
    randint4x_default_rounds_kernel[(1,)](off, out, 1234, N=off.size)
    for got, want in zip(out, ref.randint4x(1234, off)):
        np.testing.assert_array_equal(got, want)


def test_randint_of_2d_offsets():
    out = np.zeros((8, 16), np.uint32)
    randint_2d_kernel[(1,)](out, 77, 1000, M=8, N=16)
    offs = 1000 + np.arange(8)[:, None] * 16 + np.arange(16)[None, :]
    np.testing.assert_array_equal(out, ref.randint(77, offs.astype(np.int32)))


@pytest.mark.parametrize("offset", [0, 5, -3, 2**31 - 1, 2**33 + 9, -(2**40)])
def test_randint4x_of_a_scalar_offset(offset):
    # Python ints type as Triton's: i32 when they fit, else i64.
    dtype = np.int32 if -2**31 <= offset < 2**31 else np.int64
    seed = 0xFEDCBA9876543210
    out = np.zeros(5, np.uint32)
    randint_scalar_kernel[(1,)](out, seed, offset)
    want = ref.randint4x(seed, np.array(offset, dtype))
    np.testing.assert_array_equal(out[:4], [int(w) for w in want])
    assert out[4] == ref.randint(seed, np.array(7, np.int32))


@pytest.mark.parametrize("seed", [0, 42, 0xFFFFFFFF, 0x0000000FCAFEB0BA, -7])
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_rand_is_the_uniform_of_randint_bit_for_bit(seed, dtype):
    off = ref.offsets_of(dtype, n=1024)
    out = np.zeros(off.shape, np.float32)
    rand_kernel[(1,)](off, out, seed, N=off.size, ROUNDS=10)
    want = ref.rand(seed, off)
    np.testing.assert_array_equal(out.view(np.uint32), want.view(np.uint32))
    assert (out > 0).all() and (out < 1).all()


def test_rand_with_seven_rounds():
    off = np.arange(512, dtype=np.int32)
    out = np.zeros(off.shape, np.float32)
    rand_kernel[(1,)](off, out, 99, N=off.size, ROUNDS=7)
    np.testing.assert_array_equal(out.view(np.uint32), ref.rand(99, off, 7).view(np.uint32))


def test_rand_is_uniform_in_the_open_unit_interval():
    n = 1 << 16
    off = np.arange(n, dtype=np.int32)
    out = np.zeros(n, np.float32)
    rand_kernel[(1,)](off, out, 2024, N=n, ROUNDS=10)
    assert out.min() > 0 and out.max() < 1
    # Each tenth of [0, 1) holds a tenth of the draws (6 sigma of a binomial of 65536 / 10).
    counts = np.histogram(out, bins=10, range=(0, 1))[0]
    assert np.all(np.abs(counts - n / 10) < 6 * np.sqrt(n * 0.1 * 0.9)), counts


def test_rand4x_is_four_uniforms():
    off = ref.offsets_of(np.int64, n=256, base=2**35)
    out = np.zeros((4, off.size), np.float32)
    rand4x_kernel[(1,)](off, out, 5, N=off.size)
    for got, word in zip(out, ref.randint4x(5, off)):
        np.testing.assert_array_equal(got.view(np.uint32),
                                      ref.uint_to_uniform_float(word).view(np.uint32))


@pytest.mark.parametrize("seed", [0, 54, 0x0000000FCAFEB0BA])
def test_randn_is_box_muller_of_the_first_two_words(seed):
    off = ref.offsets_of(np.int32, n=1024)
    out = np.zeros(off.shape, np.float32)
    randn_kernel[(1,)](off, out, seed, N=off.size)
    np.testing.assert_allclose(out, ref.randn(seed, off), rtol=2e-5, atol=2e-5)


def test_randn_is_standard_normal():
    n = 1 << 16
    off = np.arange(n, dtype=np.int32)
    out = np.zeros(n, np.float32)
    randn_kernel[(1,)](off, out, 31337, N=n)
    assert np.isfinite(out).all()
    assert abs(out.mean()) < 0.02 and abs(out.std() - 1) < 0.02


def test_randn4x_pairs_words_one_two_and_three_four():
    off = np.arange(256, dtype=np.int32)
    out = np.zeros((4, off.size), np.float32)
    randn4x_kernel[(1,)](off, out, 8, N=off.size)
    u = [ref.uint_to_uniform_float(w) for w in ref.randint4x(8, off)]
    want = ref.pair_uniform_to_normal(u[0], u[1]) + ref.pair_uniform_to_normal(u[2], u[3])
    for got, w in zip(out, want):
        np.testing.assert_allclose(got, w, rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("dtype", [np.uint32, np.int32, np.float32])
@pytest.mark.parametrize("seed", [3, 0x0000000FCAFEB0BA, -2])
def test_philox_on_32_bit_counters(dtype, seed, rng):
    n = 128
    bits = rng.integers(0, 2**32, size=(4, n), dtype=np.uint64).astype(np.uint32)
    c = bits.view(dtype)
    out = np.zeros((4, n), np.uint32)
    philox_kernel[(1,)](c, out, seed, N=n, ROUNDS=10)
    k0, k1 = ref.seed_key(seed)
    for got, want in zip(out, ref.philox4x32(*bits, k0, k1)):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", [np.uint64, np.int64])
def test_philox_on_64_bit_counters_is_philox_4x64(dtype, rng):
    n, seed = 16, 0x0123456789ABCDEF
    bits = rng.integers(0, 2**63, size=(4, n), dtype=np.uint64) * np.uint64(2) + np.uint64(1)
    out = np.zeros((4, n), np.uint64)
    philox_kernel[(1,)](bits.view(dtype), out, seed, N=n, ROUNDS=7)
    # The whole seed is the first key word, the second is zero.
    for got, want in zip(out, ref.philox4x64(*bits, seed, 0, rounds=7)):
        np.testing.assert_array_equal(got, want)


def test_philox_impl_takes_the_key_as_given(rng):
    n = 64
    c = rng.integers(0, 2**32, size=(4, n), dtype=np.uint64).astype(np.uint32)
    out = np.zeros((4, n), np.uint32)
    philox_impl_kernel[(1,)](c, out, 0x9ABCDEF0, 0x12345678, N=n)
    for got, want in zip(out, ref.philox4x32(*c, 0x9ABCDEF0, 0x12345678)):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", [np.int32, np.uint32, np.int64, np.uint64])
def test_uint_to_uniform_float_edges(dtype):
    info = np.iinfo(dtype)
    x = np.array([info.min, info.max, 0, 1, info.max // 2, info.min + 1, 12345, info.max - 7,
                  ], dtype)
    out = np.zeros(x.shape, np.float32)
    to_uniform_kernel[(1,)](x, out, N=8)
    np.testing.assert_array_equal(out.view(np.uint32), ref.uint_to_uniform_float(x).view(np.uint32))
    assert (out >= 0).all() and (out < 1).all()
    if np.dtype(dtype).kind == "i":
        # The signed extremes fold onto one value, just below 1 (never 1.0).
        assert out[0] == out[1]
        assert 1 - np.finfo(np.float32).eps <= out[1] < 1


def test_pair_uniform_to_normal_clamps_u1():
    u = np.array([[0.0, 1e-9, 0.5, 0.999999, 0.25, 0.75, 1e-7, 0.1],
                  [0.0, 0.5, 0.25, 0.125, 0.0, 0.9, 0.3, 0.7]], np.float32)
    out = np.zeros_like(u)
    box_muller_kernel[(1,)](u, out, N=8)
    assert np.isfinite(out).all()
    want = ref.pair_uniform_to_normal(u[0], u[1])
    np.testing.assert_allclose(out[0], want[0], rtol=2e-5, atol=2e-5)
    np.testing.assert_allclose(out[1], want[1], rtol=2e-5, atol=2e-5)


# ------------------------------------------------------------------------------------------------
# Errors
# ------------------------------------------------------------------------------------------------


@ww.jit
def float_seed_kernel(out_ptr):
    tl.store(out_ptr + tl.arange(0, 4), tl.rand(2.5, tl.arange(0, 4)))


@ww.jit
def pointer_seed_kernel(out_ptr, seed_ptr):
    tl.store(out_ptr + tl.arange(0, 4), tl.rand(seed_ptr, tl.arange(0, 4)))


@ww.jit
def float_offset_kernel(out_ptr, seed):
    tl.store(out_ptr + tl.arange(0, 4), tl.randint(seed, tl.arange(0, 4).to(tl.float32)))


@ww.jit
def runtime_rounds_kernel(out_ptr, seed, rounds):
    tl.store(out_ptr + tl.arange(0, 4), tl.randint(seed, tl.arange(0, 4), rounds))


@ww.jit
def signed_philox_impl_kernel(out_ptr, seed):
    c = tl.arange(0, 4)
    a, b, c2, d = tl.philox_impl(c, c, c, c, seed, seed)
    tl.store(out_ptr + tl.arange(0, 4), a)


@ww.jit
def int16_counters_kernel(out_ptr, seed):
    c = tl.arange(0, 4).to(tl.int16)
    a, b, c2, d = tl.philox(seed, c, c, c, c)
    tl.store(out_ptr + tl.arange(0, 4), a)


@ww.jit
def float_to_uniform_kernel(out_ptr):
    tl.store(out_ptr + tl.arange(0, 4), tl.uint_to_uniform_float(tl.arange(0, 4).to(tl.float32)))


def _error(kernel, *args):
    with pytest.raises(ww.CompilationError) as info:
        kernel[(1,)](*args)
    return str(info.value)


def test_located_errors():
    out = np.zeros(4, np.float32)
    assert "test_tl_random.py" in (m := _error(float_seed_kernel, out))
    assert "tl.rand's seed must be an integer, got a float" in m
    m = _error(pointer_seed_kernel, out, np.zeros(1, np.int32))
    assert "tl.rand's seed must be an integer, got a scalar (ptr<i32>)" in m
    m = _error(float_offset_kernel, np.zeros(4, np.uint32), 1)
    assert "tl.randint's offset must be an integer, got a tensor (tensor<4xfp32>)" in m
    m = _error(runtime_rounds_kernel, np.zeros(4, np.uint32), 1, 3)
    assert "tl.randint's n_rounds must be a compile-time constant" in m
    m = _error(signed_philox_impl_kernel, np.zeros(4, np.uint32), 1)
    assert "tl.philox_impl needs uint32 or uint64 counters, got c0 of tensor<4xi32>" in m
    m = _error(int16_counters_kernel, np.zeros(4, np.uint32), 1)
    assert "tl.philox needs 32- or 64-bit counters, got c0 of tensor<4xi16>" in m
    m = _error(float_to_uniform_kernel, out)
    assert "needs uint32, int32, uint64 or int64 integers, got a tensor (tensor<4xfp32>)" in m


# ------------------------------------------------------------------------------------------------
# PTX: the kernels compile for sm_90a and sm_80, and ptxas accepts them
# ------------------------------------------------------------------------------------------------

HERE = Path(__file__)
KERNELS = HERE.parent / "tl_random_kernels.py"

# Compiled from its text (no Python objects): the names bind from the triton imports.
DROPOUT = '''
import triton
import triton.language as tl
from triton.language.random import randn4x


@triton.jit
def noise(out_ptr, seed, N: tl.constexpr):
    i = tl.arange(0, N)
    a, b, c, d = randn4x(seed, i.to(tl.int64))
    e = tl.random.randint(seed, i, n_rounds=tl.random.N_ROUNDS_DEFAULT)
    tl.store(out_ptr + i, a + b + c + d + e.to(tl.float32))


@triton.jit
def seeded_dropout(x_ptr, output_ptr, n_elements, p, seed, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    random = tl.rand(seed, offsets)
    x_keep = random > p
    output = tl.where(x_keep, x / (1 - p), 0.0)
    tl.store(output_ptr + offsets, output, mask=mask)
'''

PTX_CASES = [
    ("randint_kernel", "off_ptr:*i64:16,out_ptr:*u32:16,seed:i64,N=256", KERNELS),
    ("randint4x_kernel", "off_ptr:*u32:16,out_ptr:*u32:16,seed:i32,N=128,ROUNDS=7", KERNELS),
    ("rand_kernel", "off_ptr:*i32:16,out_ptr:*fp32:16,seed:u64,N=1024,ROUNDS=10", KERNELS),
    ("randn4x_kernel", "off_ptr:*i32:16,out_ptr:*fp32:16,seed:i32,N=256", KERNELS),
    ("philox_kernel", "c_ptr:*u64:16,out_ptr:*u64:16,seed:i64,N=64,ROUNDS=10", KERNELS),
    ("randint_scalar_kernel", "out_ptr:*u32:16,seed:i64,offset:i64", KERNELS),
    ("seeded_dropout", "x_ptr:*fp32:16,output_ptr:*fp32:16,n_elements:i32,p:fp32,seed:i32,"
                       "BLOCK_SIZE=1024", None),
    ("noise", "out_ptr:*fp32:16,seed:i64,N=512", None),
]


@pytest.mark.parametrize("target", ["sm_90a", "sm_80"])
@pytest.mark.parametrize("name,sig,path", PTX_CASES, ids=[c[0] for c in PTX_CASES])
def test_ptx_assembles(name, sig, path, target, tmp_path, monkeypatch, ptxas):
    monkeypatch.setenv("WARPWEAVE_CACHE_DISABLE", "1")
    if path is None:
        path = tmp_path / "dropout.py"
        path.write_text(DROPOUT)
    ptx = native_loader.native().compile([(str(path), Path(path).read_text())], name, sig, {},
                                         target=target, num_warps=4, stage="ptx").ptx
    assert "mul.hi.u" in ptx  # the rounds' multiply-high
    ptxas(ptx, target)


def _upstream_tutorial(name):
    """Triton's tutorial `name`, where a copy of upstream Triton's tree sits in the repository's
    .upstream folder (never committed); None otherwise."""
    path = HERE.parents[2] / ".upstream" / "python" / "tutorials" / name
    return path if path.exists() else None


@pytest.mark.parametrize("target", ["sm_90a", "sm_80"])
def test_triton_tutorial_04_low_memory_dropout_compiles(target, monkeypatch, ptxas):
    path = _upstream_tutorial("04-low-memory-dropout.py")
    if path is None:
        pytest.skip("Triton's tutorials are not checked out beside the repository")
    monkeypatch.setenv("WARPWEAVE_CACHE_DISABLE", "1")
    sig = "x_ptr:*fp32:16,output_ptr:*fp32:16,n_elements:i32,p:fp32,seed:i32,BLOCK_SIZE=1024"
    ptx = native_loader.native().compile([(str(path), path.read_text())], "_seeded_dropout", sig,
                                         {}, target=target, num_warps=4, stage="ptx").ptx
    ptxas(ptx, target)


@pytest.mark.parametrize("target", ["sm_90a", "sm_80"])
def test_wwc_builds_cubins(target, tmp_path, requires_ptxas):
    # The command line (`python -m warpweave` is wwc) on the kernels file: PTX assembled by ptxas.
    for kernel, sig in [("randn4x_kernel", "off_ptr:*i64:16,out_ptr:*fp32:16,seed:i64,N=512"),
                        ("philox_impl_kernel", "c_ptr:*u32:16,out_ptr:*u32:16,k0:i32,k1:i32,N=64")]:
        r = subprocess.run([sys.executable, "-m", "warpweave", str(KERNELS), "--kernel", kernel,
                            "--signature", sig, "--target", target, "--emit", "cubin", "-o",
                            str(tmp_path / f"{kernel}.cubin")],
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        assert (tmp_path / f"{kernel}.cubin").stat().st_size > 0


@ww.jit
def seeded_dropout_kernel(x_ptr, output_ptr, n_elements, p, seed, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    keep = tl.rand(seed, offsets) > p
    tl.store(output_ptr + offsets, tl.where(keep, x / (1 - p), 0.0), mask=mask)


def test_seeded_dropout_keeps_what_the_seed_says():
    # Tutorial 04's kernel in the interpreter: the mask is a function of (seed, offset) only.
    n, p = 3000, 0.5
    x = np.linspace(1, 2, n, dtype=np.float32)
    outs = []
    for seed in (123, 123, 512):
        out = np.zeros_like(x)
        seeded_dropout_kernel[(3,)](x, out, n, p, seed, BLOCK_SIZE=1024)
        outs.append(out)
    np.testing.assert_array_equal(outs[0], outs[1])
    keep = ref.rand(123, np.arange(n, dtype=np.int32)) > np.float32(p)
    np.testing.assert_array_equal(outs[0] != 0, keep)
    np.testing.assert_allclose(outs[0][keep], x[keep] / np.float32(1 - p), rtol=1e-6)
    assert (outs[0] != outs[2]).any()
