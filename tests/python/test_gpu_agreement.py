"""Values where the H200 disagreed with the interpreter (session 11's GPU run of
tests/gpu/test_libdevice_gpu.py), pinned here: NaN converted to a 64-bit integer, and the high half
of a signed product (tl.umulhi on int32 / int64 is the unsigned product's, as in Triton, and
libdevice.mulhi corrects it for the signs)."""


import numpy as np
import pytest

import warpweave as ww
import warpweave.language as tl
from warpweave.language.extra import libdevice


@ww.jit
def _nan_to_ints(x_ptr, i64_ptr, i32_ptr, u64_ptr, r64_ptr):
    x = tl.load(x_ptr)
    tl.store(i64_ptr, x.to(tl.int64))
    tl.store(i32_ptr, x.to(tl.int32))
    tl.store(u64_ptr, x.to(tl.uint64))
    tl.store(r64_ptr, libdevice.llrint(x))


def test_nan_to_64_bit_integers_is_the_gpus_value():
    x = np.array([np.nan], np.float32)
    i64, i32 = np.zeros(1, np.int64), np.ones(1, np.int32)
    u64, r64 = np.zeros(1, np.uint64), np.zeros(1, np.int64)
    _nan_to_ints[(1, )](x, i64, i32, u64, r64)
    assert i64[0] == np.iinfo(np.int64).min and r64[0] == np.iinfo(np.int64).min
    assert u64[0] == np.uint64(1 << 63) and i32[0] == 0


@ww.jit
def _high_halves(x_ptr, y_ptr, u_ptr, s_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    x, y = tl.load(x_ptr + offs), tl.load(y_ptr + offs)
    tl.store(u_ptr + offs, tl.umulhi(x, y))
    tl.store(s_ptr + offs, libdevice.mulhi(x, y))


def test_high_halves_of_signed_products():
    rng = np.random.default_rng(11)
    x = rng.integers(-2**31, 2**31, 256, dtype=np.int64).astype(np.int32)
    y = rng.integers(-2**31, 2**31, 256, dtype=np.int64).astype(np.int32)
    u, s = np.zeros(256, np.int32), np.zeros(256, np.int32)
    _high_halves[(1, )](x, y, u, s, N=256)
    unsigned = (x.astype(np.uint32).astype(np.uint64) * y.astype(np.uint32).astype(np.uint64)) >> 32
    np.testing.assert_array_equal(u.view(np.uint32), unsigned.astype(np.uint32))
    signed = (x.astype(np.int64) * y.astype(np.int64)) >> 32
    np.testing.assert_array_equal(s, signed.astype(np.int32))


@pytest.mark.parametrize("dtype,instr", [(np.int32, "mul.hi.u32"), (np.int64, "mul.hi.u64")])
def test_umulhi_of_signed_integers_is_unsigned_in_ptx(dtype, instr, tmp_path, monkeypatch,
                                                     requires_ptxas):
    monkeypatch.setenv("WARPWEAVE_CACHE_DIR", str(tmp_path))
    a = np.zeros(256, dtype)
    values = _high_halves.bind((a, a, a, a), {"N": 256})
    ptx = _high_halves.compile_for(values, False, (4, 3, 1), target="sm_90a").kernel.ptx
    assert instr in ptx and "mul.hi.s" not in ptx
