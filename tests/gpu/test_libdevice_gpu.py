"""libdevice on the GPU (issue 17): every function of tests/python/test_libdevice.py's accuracy
tables runs compiled, over the same inputs, within the documented ulp bounds of the mpmath / math
references (one ulp of slack: ptxas may fuse a multiply and an add the interpreter rounds twice),
and integer, rounding, conversion and directed-rounding functions give exactly what the
interpreter and Python give. Tutorial 07 (asin with extern_libs=) against torch.asin."""

import math
import os
import sys
import tempfile

import numpy as np
import pytest

from gpu_requirements import require_cuda

torch = require_cuda()

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))

import test_libdevice as m  # noqa: E402

DEV = "cuda"
KDIR = tempfile.mkdtemp(prefix="libdevice_gpu_")
F32 = np.float32


def run_gpu(fn, *xs, out_dtype=None):
    xs = [np.asarray(x) for x in xs]
    n = len(xs[0])
    block = 1 << max(4, (n - 1).bit_length())
    padded = []
    for x in xs:
        p = np.zeros(block, x.dtype)
        p[:n] = x
        padded.append(torch.from_numpy(p).to(DEV))
    out = torch.from_numpy(np.zeros(block, out_dtype or xs[0].dtype)).to(DEV)
    m.make_kernel(KDIR, fn, len(xs))[(1, )](*padded, out, BLOCK=block)
    torch.cuda.synchronize()
    return out.cpu().numpy()[:n]


@pytest.mark.parametrize("fn", sorted(m.REF_UNARY))
def test_unary_accuracy_on_gpu(fn):
    ref_fn, bound, pts = m.REF_UNARY[fn]
    x = np.r_[np.asarray(pts, np.float64), m.EDGES].astype(F32)
    if fn in ("sin", "cos", "tan"):
        x = x[~(np.abs(x) >= 2**20)]
    got = run_gpu(fn, x)
    ref = np.array([ref_fn(float(v)) for v in x])
    if fn == "tgamma":
        fin = np.isfinite(ref) & (np.abs(ref) < m.MAXF) & (ref != 0)
        rel = np.abs(got[fin].astype(np.float64) - ref[fin]) / np.abs(ref[fin])
        assert rel.max() <= 2e-5
        return
    err = m.ulp_err(got, ref)
    if fn == "lgamma":
        err = np.where(np.abs(got.astype(np.float64) - ref) <= 4e-6, 0.0, err)
    worst = int(np.argmax(err))
    assert err[worst] <= bound + 1, (fn, x[worst], got[worst], ref[worst], err[worst])
    # The GPU and the interpreter run the same sequence.
    interp = m.run(KDIR, fn, x)
    close = (got == interp) | (np.isnan(got) & np.isnan(interp)) | (m.ulp_err(got, interp) <= 2)
    assert close.all(), (fn, x[~close][:4], got[~close][:4], interp[~close][:4])


@pytest.mark.parametrize("fn", sorted(m.REF_BINARY))
def test_binary_accuracy_on_gpu(fn):
    ref_fn, bound = m.REF_BINARY[fn]
    a = [F32(v) for v in m.BIN_VALUES]
    xs = np.array([u for u in a for _ in a], F32)
    ys = np.array([v for _ in a for v in a], F32)
    got = run_gpu(fn, xs, ys)
    ref = np.array([ref_fn(float(u), float(v)) for u, v in zip(xs, ys)])
    err = m.ulp_err(got, ref)
    if fn in ("fmod", "remainder"):
        with np.errstate(all="ignore"):
            far = np.abs(xs.astype(np.float64) / ys.astype(np.float64)) >= 2**29
        err = np.where(far & np.isfinite(xs) & np.isfinite(ys), 0.0, err)
    worst = int(np.argmax(err))
    assert err[worst] <= bound + (1 if bound else 0), (fn, xs[worst], ys[worst], got[worst],
                                                       ref[worst])


@pytest.mark.parametrize("fn,ins,out", [
    ("clz", [np.int32], np.int32), ("popc", [np.int32], np.int32), ("brev", [np.int32], np.int32),
    ("ffs", [np.int32], np.int32), ("clz", [np.int64], np.int32), ("popc", [np.int64], np.int32),
    ("brev", [np.int64], np.int64), ("ffs", [np.int64], np.int32),
    ("mulhi", [np.int32] * 2, np.int32), ("mulhi", [np.uint32] * 2, np.uint32),
    ("mulhi", [np.int64] * 2, np.int64), ("mul24", [np.int32] * 2, np.int32),
    ("hadd", [np.int32] * 2, np.int32), ("rhadd", [np.int32] * 2, np.int32),
    ("sad", [np.int32, np.int32, np.uint32], np.int32), ("byte_perm", [np.int32] * 3, np.int32),
])
def test_integer_functions_match_the_interpreter(fn, ins, out):
    rng = np.random.default_rng(17)
    xs = []
    for d in ins:
        info = np.iinfo(d)
        v = rng.integers(info.min, info.max, 512, dtype=d, endpoint=True)
        v[:4] = [0, 1, info.max, info.min]
        xs.append(v)
    if fn == "byte_perm":
        xs[2] = xs[2] & 0x7777
    np.testing.assert_array_equal(run_gpu(fn, *xs, out_dtype=out), m.run(KDIR, fn, *xs,
                                                                          out_dtype=out))


@pytest.mark.parametrize("fn", ["round", "rint", "trunc", "nearbyint", "signbit", "ilogb", "logb",
                                "isinf", "isnan", "finitef", "saturatef", "llrint", "llround"])
def test_exact_float_functions_match_the_interpreter(fn):
    x = np.r_[np.linspace(-10, 10, 161), m.EDGES].astype(F32)
    out = {"signbit": np.int32, "ilogb": np.int32, "isinf": np.bool_, "isnan": np.bool_,
           "finitef": np.bool_, "llrint": np.int64, "llround": np.int64}.get(fn, F32)
    got, want = run_gpu(fn, x, out_dtype=out), m.run(KDIR, fn, x, out_dtype=out)
    same = (got == want) | (np.isnan(got) & np.isnan(want)) if out == F32 else got == want
    assert same.all(), (fn, x[~same][:4], got[~same][:4], want[~same][:4])


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div"])
@pytest.mark.parametrize("mode", ["rn", "rz", "rd", "ru"])
def test_directed_rounding_matches_torch_and_the_interpreter(op, mode):
    rng = np.random.default_rng(3)
    a = (rng.standard_normal(1024) * 10.0**rng.integers(-30, 30, 1024)).astype(F32)
    b = (rng.standard_normal(1024) * 10.0**rng.integers(-30, 30, 1024)).astype(F32)
    fn = f"{op}_{mode}"
    got = run_gpu(fn, a, b)
    np.testing.assert_array_equal(got, m.run(KDIR, fn, a, b))
    if mode == "rn":
        t = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div}[op]
        want = t(torch.from_numpy(a).to(DEV), torch.from_numpy(b).to(DEV)).cpu().numpy()
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("fn", ["int2float_rz", "int2float_rd", "int2float_ru", "float2int_rn",
                                "float2int_rd", "double2float_rz", "double2float_ru",
                                "ll2float_rd", "ull2double_ru"])
def test_conversions_match_the_interpreter(fn):
    ins, out = m._signature(fn)
    rng = np.random.default_rng(5)
    d = ins[0]
    if np.issubdtype(d, np.integer):
        info = np.iinfo(d)
        x = rng.integers(info.min, info.max, 512, dtype=d, endpoint=True)
    else:
        x = (rng.standard_normal(512) * 10.0**rng.integers(-5, 12, 512)).astype(d)
    np.testing.assert_array_equal(run_gpu(fn, x, out_dtype=out), m.run(KDIR, fn, x, out_dtype=out))


def test_tutorial_07_asin_with_extern_libs():
    k = m.make_kernel(KDIR, "asin", 1)
    x = torch.rand(4096, device=DEV) * 2 - 1
    y = torch.empty_like(x)
    for i in range(0, 4096, 1024):
        k[(1, )](x[i:i + 1024], y[i:i + 1024], BLOCK=1024,
                 extern_libs={"libdevice": "/usr/local/cuda/nvvm/libdevice/libdevice.10.bc"})
    torch.testing.assert_close(y, torch.asin(x), rtol=3e-7, atol=1e-7)
    assert math.isnan(run_gpu("asin", np.array([1.5], F32))[0])


@pytest.mark.parametrize("fn,ref,pts", m.FP64_CASES)
def test_fp64_forms_on_gpu(fn, ref, pts):
    x = np.asarray(pts, np.float64)
    got = run_gpu(fn, x)
    with m.mp.workdps(40):
        want = [ref(m.mp.mpf(float(v))) for v in x]
    err = m._ulp64(got, want)
    worst = int(np.argmax(err))
    assert err[worst] <= 4, (fn, x[worst], got[worst], want[worst], err[worst])
