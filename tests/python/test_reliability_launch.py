"""Reliability of kernel[grid](...) on the host (issue 20): every bad launch argument, grid or
option ends in a TypeError or ValueError naming it, on the general path and on the native fast
path once that holds a kernel, never in a binding's or C++'s raw error (std::bad_cast), a
truncated value or an accepted nonsense option. GPU launches are recorded (tests/python/
test_fast_launch.py's, tools/cuda_stub's stand-ins); interpreter launches run for real."""

import importlib
import json

import numpy as np
import pytest

import warpweave as ww
import warpweave.language as tl

native = pytest.importorskip("warpweave._native")
jitmod = importlib.import_module("warpweave.jit")

from cuda_stub import StandInTensor  # noqa: E402
from test_fast_launch import Recorder, tensor  # noqa: E402


@ww.jit
def take_int(x_ptr, v):
    pass


@ww.jit
def take_scalars(x_ptr, i, f, b, BLOCK: tl.constexpr, FLAG: tl.constexpr = False,
                 SCALE: tl.constexpr = 1.0):
    pass


@ww.jit
def store_int(out_ptr, v):
    tl.store(out_ptr, v)


@ww.jit
def copy_block(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


@ww.jit
def count_programs(counter_ptr):
    tl.atomic_add(counter_ptr, 1)


GPU_KERNELS = (take_int, take_scalars)


@pytest.fixture
def gpu(monkeypatch):
    """Recorded GPU launches: (recorder, general-path calls)."""
    r = Recorder()
    monkeypatch.setattr(jitmod, "native", lambda: r)
    monkeypatch.setattr(jitmod, "_tensor_type", StandInTensor)
    monkeypatch.setattr(jitmod, "_stream_source", lambda: (lambda: 0, lambda dev: 99))
    monkeypatch.setenv("WARPWEAVE_TARGET", "sm_90a")
    monkeypatch.setenv("WARPWEAVE_CACHE_DISABLE", "1")
    monkeypatch.delenv("WARPWEAVE_INTERPRET", raising=False)
    monkeypatch.delenv("WARPWEAVE_TRAP_HANGS", raising=False)
    for k in GPU_KERNELS:
        k.cache.clear()
        k._launcher = None
        k._bound.clear()
        k._option_cache.clear()
    slow = []
    real_run = jitmod.JITFunction.run
    monkeypatch.setattr(jitmod.JITFunction, "run",
                        lambda self, *a, **k: slow.append(1) or real_run(self, *a, **k))
    native._set_launch_recorder(r.record)
    yield r, slow
    native._set_launch_recorder(None)


@pytest.fixture
def interp(monkeypatch):
    monkeypatch.setenv("WARPWEAVE_CACHE_DISABLE", "1")
    monkeypatch.delenv("WARPWEAVE_INTERPRET", raising=False)


X = tensor(0x10000)


# ---- ints beyond i64 -------------------------------------------------------------------------


@pytest.mark.parametrize("value", [1 << 63, (1 << 64) - 1, (1 << 63) + 16])
def test_ints_from_2_63_to_2_64_are_u64_as_in_triton(gpu, value):
    rec, slow = gpu
    for _ in range(2):  # the general path, then the fast one
        take_int[(1,)](X, value)
    assert rec.requests[-1]["signature"].startswith("x_ptr:*fp32:16,v:u64")
    assert [launch[3] for launch in rec.launches] == [(0x10000, value)] * 2
    assert len(slow) == 1


@pytest.mark.parametrize("value", [-(1 << 63) - 1, 1 << 64, -(1 << 70), 1 << 100])
def test_ints_beyond_64_bits_are_refused_naming_the_argument(gpu, value):
    rec, _ = gpu
    take_int[(1,)](X, 5)
    take_int[(1,)](X, 5)  # a fast-path entry exists: the bad call must still be reported
    for _ in range(2):
        with pytest.raises(ValueError, match=r"argument 'v' = -?\d+ does not fit in 64 bits"):
            take_int[(1,)](X, value)
    # Triton raises OverflowError for these; the error is both.
    with pytest.raises(OverflowError):
        take_int[(1,)](X, value)
    assert len(rec.launches) == 2


def test_u64_ints_reach_the_interpreter_by_their_bits(interp):
    out = np.zeros(1, np.uint64)
    for value in (1 << 63, (1 << 64) - 1):
        store_int[(1,)](out, value)
        assert int(out[0]) == value
    neg = np.zeros(1, np.int64)
    store_int[(1,)](neg, -(1 << 63))
    assert int(neg[0]) == -(1 << 63)
    with pytest.raises(ValueError, match="argument 'v'"):
        store_int[(1,)](neg, -(1 << 63) - 1)


# ---- NumPy scalars ---------------------------------------------------------------------------


def test_numpy_scalars_are_the_python_values_they_hold(gpu):
    rec, _ = gpu
    for _ in range(2):
        take_scalars[(1,)](X, np.int64(7), np.float32(1.5), np.bool_(True), BLOCK=np.int64(256),
                           FLAG=np.bool_(True), SCALE=np.float32(0.5))
    assert rec.requests[-1]["signature"] == \
        "x_ptr:*fp32:16,i:i32,f:fp32,b:i1,BLOCK=256,FLAG=True,SCALE=0.5"
    assert rec.launches[-1][3] == (0x10000, 7, 1.5, 1)
    # The same kernel as for Python scalars of those values.
    take_scalars[(1,)](X, 7, 1.5, True, BLOCK=256, FLAG=True, SCALE=0.5)
    assert len({r["signature"] for r in rec.requests}) == 1
    for v, sig in [(np.uint64((1 << 63) + 1), "u64"), (np.int16(-3), "i32"), (np.float64(2.0), "fp32"),
                   (np.uint8(32), "i32:16")]:
        take_scalars[(1,)](X, v, 1.0, False, BLOCK=16)
        assert rec.requests[-1]["signature"].split(",")[1] == "i:" + sig, v


def test_numpy_constexprs_in_the_interpreter(interp):
    x = np.arange(512, dtype=np.float32)
    out = np.zeros(512, np.float32)
    copy_block[(np.int64(2),)](x, out, np.int32(512), BLOCK=np.int64(256))
    np.testing.assert_array_equal(out, x)


@ww.jit
def cas_block(lock_ptr, out_ptr, SIZE: tl.constexpr):
    offs = tl.program_id(0) * SIZE + tl.arange(0, SIZE)
    old = tl.atomic_cas(lock_ptr + offs, tl.zeros((SIZE,), tl.int32), tl.full((SIZE,), 1, tl.int32))
    tl.store(out_ptr + offs, old)


@pytest.mark.parametrize("grid,num_ctas", [(1, 4), (3, 2), (5, 16)])
def test_num_ctas_splits_no_program_in_the_interpreter(interp, grid, num_ctas):
    # Triton's num_ctas spreads one program over a cluster; it changes neither how many programs
    # run nor what each computes, and any grid is accepted (a grid of 1 with num_ctas=4 included).
    lock = np.arange(7, 7 + 64 * grid, dtype=np.int32)
    out = np.zeros_like(lock)
    cas_block[(grid,)](lock, out, SIZE=64, num_ctas=num_ctas)
    np.testing.assert_array_equal(out, np.arange(7, 7 + 64 * grid, dtype=np.int32))
    np.testing.assert_array_equal(lock, out)  # no old value was 0: nothing was swapped


def test_num_ctas_launches_one_cta_a_program_on_the_gpu(gpu):
    rec, _ = gpu
    take_int[(3,)](X, 5, num_ctas=4)
    assert rec.requests[-1]["num_ctas"] == 1 and "cluster_dims" not in rec.requests[-1]
    assert rec.launches[-1][1] == (3, 1, 1)


def test_numpy_scalars_that_are_not_numbers_are_refused(gpu):
    with pytest.raises(TypeError, match="argument 'i'"):
        take_scalars[(1,)](X, np.complex64(1j), 1.0, True, BLOCK=16)
    with pytest.raises(TypeError, match="constexpr 'BLOCK'"):
        take_scalars[(1,)](X, 1, 1.0, True, BLOCK=np.datetime64("2020-01-01"))


# ---- grids -----------------------------------------------------------------------------------


BAD_GRIDS = [
    ((2.7,), TypeError, r"grid\[0\] = 2.7 of type float is not an int"),
    ((1 << 31, 1, 1), ValueError, r"grid\[0\] = 2147483648 is above CUDA's limit of 2147483647"),
    ((1, 65536, 1), ValueError, r"grid\[1\] = 65536 is above CUDA's limit of 65535"),
    ((1, 1, 1 << 40), ValueError, r"grid\[2\] = 1099511627776 is above"),
    ((1.0, 1, 1), TypeError, r"grid\[0\] = 1.0 of type float is not an int"),
    ((1, "a", 1), TypeError, r"grid\[1\] = 'a' of type str is not an int"),
    ((1, 1, None), TypeError, r"grid\[2\] = None of type NoneType is not an int"),
    ((np.float64(3.0),), TypeError, r"grid\[0\] = .*3.0.* is not an int"),
    (None, TypeError, r"the grid must be an int, a tuple of 1 to 3 ints or a function"),
    ("abc", TypeError, r"the grid must be an int, a tuple of 1 to 3 ints or a function"),
    (2.5, TypeError, r"the grid must be an int"),
    ((1, -1, 1), ValueError, r"grid dimensions must be >= 0, got grid\[1\] = -1"),
    ((), ValueError, r"1 to 3 dimensions"),
]


@pytest.mark.parametrize("grid,error,message", BAD_GRIDS, ids=[repr(g[0]) for g in BAD_GRIDS])
def test_bad_grids_are_refused_naming_the_entry(gpu, grid, error, message):
    rec, _ = gpu
    take_int[(1,)](X, 5)
    take_int[(1,)](X, 5)  # the kernel is on the fast path now
    with pytest.raises(error, match=message):
        take_int[grid](X, 5)
    with pytest.raises(error, match=message):  # a grid function's result, checked the same way
        take_int[lambda meta: grid](X, 5)
    assert len(rec.launches) == 2


def test_grid_limits_are_inclusive_and_numpy_ints_count(gpu):
    rec, _ = gpu
    for grid in [((1 << 31) - 1, 65535, 65535), (np.int64(3), np.uint16(2)), [4, 1], 7, (0,)]:
        for _ in range(2):
            take_int[grid](X, 5)
    assert [launch[1] for launch in rec.launches] == [
        ((1 << 31) - 1, 65535, 65535)] * 2 + [(3, 2, 1)] * 2 + [(4, 1, 1)] * 2 + \
        [(7, 1, 1)] * 2 + [(0, 1, 1)] * 2


def test_a_float_grid_runs_no_programs_in_the_interpreter(interp):
    counter = np.zeros(1, np.int32)
    with pytest.raises(TypeError, match=r"grid\[0\] = 2.7"):
        count_programs[(2.7,)](counter)
    with pytest.raises(TypeError, match=r"grid\[1\] = 1.5"):
        count_programs[(1, 1.5, 1)](counter)
    with pytest.raises(ValueError, match=r"grid\[0\] = 2147483648"):
        count_programs[(1 << 31, 1, 1)](counter)
    assert counter[0] == 0
    count_programs[(2, 3)](counter)
    assert counter[0] == 6


# ---- launch options --------------------------------------------------------------------------

BAD_OPTIONS = [
    (dict(num_warps=1 << 31), ValueError, r"num_warps must be a power of 2 from 1 to 32, got 2147"),
    (dict(num_warps=64), ValueError, r"num_warps must be a power of 2 from 1 to 32"),
    (dict(num_warps=3), ValueError, r"power of 2"),
    (dict(num_warps=0), ValueError, r"power of 2"),
    (dict(num_warps=4.0), TypeError, r"num_warps must be an int, got 4.0"),
    (dict(num_warps=True), TypeError, r"num_warps must be an int, got True"),
    (dict(num_warps="4"), TypeError, r"num_warps must be an int"),
    (dict(num_stages=-1), ValueError, r"num_stages must be from 0 to 16.*got -1"),
    (dict(num_stages=1 << 40), ValueError, r"num_stages must be from 0 to 16"),
    (dict(num_stages=2.0), TypeError, r"num_stages must be an int"),
    (dict(num_ctas=-3), ValueError, r"num_ctas must be from 1 to 16.*got -3"),
    (dict(num_ctas=0), ValueError, r"num_ctas must be from 1 to 16"),
    (dict(num_ctas=1 << 31), ValueError, r"num_ctas must be from 1 to 16"),
    (dict(num_ctas=2.5), TypeError, r"num_ctas must be an int"),
    (dict(ctas_per_cga=(2.5, 1, 1)), TypeError, r"ctas_per_cga must be an int, got \(2.5, 1, 1\)"),
    (dict(ctas_per_cga=(0, 1, 1)), ValueError, r"ctas_per_cga=\(0, 1, 1\): a cluster holds 1 to"),
    (dict(ctas_per_cga=(4, 4, 2)), ValueError, r"a cluster holds 1 to 16 CTAs"),
    (dict(ctas_per_cga=(1, 1, 1, 1)), ValueError, r"expected \(x,\), \(x, y\) or \(x, y, z\)"),
    (dict(ctas_per_cga=[2, "1"]), TypeError, r"ctas_per_cga must be an int"),
]


@pytest.mark.parametrize("options,error,message", BAD_OPTIONS,
                         ids=[repr(o[0]) for o in BAD_OPTIONS])
def test_bad_launch_options_are_refused_naming_the_option(gpu, options, error, message):
    rec, _ = gpu
    take_int[(1,)](X, 5)
    take_int[(1,)](X, 5)
    with pytest.raises(error, match=message):
        take_int[(1,)](X, 5, **options)
    with pytest.raises(error, match=message):  # and again: a refusal is never cached
        take_int[(1,)](X, 5, **options)
    assert len(rec.requests) == 1 and len(rec.launches) == 2


def test_equal_options_of_other_types_do_not_reuse_checked_ones(gpu):
    rec, _ = gpu
    take_int[(1,)](X, 5, num_warps=1, num_stages=2)
    with pytest.raises(TypeError, match="num_warps must be an int, got True"):
        take_int[(1,)](X, 5, num_warps=True, num_stages=2)
    with pytest.raises(TypeError, match="num_stages must be an int, got 2.0"):
        take_int[(1,)](X, 5, num_warps=1, num_stages=2.0)


def test_valid_options_in_every_spelling(gpu):
    rec, _ = gpu
    for options in [dict(num_warps=np.int64(8)), dict(num_stages=0), dict(num_stages=16),
                    dict(ctas_per_cga=[2, 1, 1]), dict(ctas_per_cga=(2,)), dict(num_ctas=16)]:
        take_int[(16,)](X, 5, **options)
    # ctas_per_cga=[2, 1, 1] and (2,) are one kernel; num_ctas (Triton's CTA split) asks for no
    # cluster: the program runs on one CTA.
    assert [(r["num_warps"], r["num_stages"], r["num_ctas"]) for r in rec.requests] == [
        (8, 3, 1), (4, 0, 1), (4, 16, 1), (4, 3, 2), (4, 3, 1)]
    assert len(rec.launches) == 6


# ---- constexpr tuples on the fast path -------------------------------------------------------


@ww.jit
def take_shape(x_ptr, SHAPE: tl.constexpr):
    pass


def shape_kernels(rec):
    """take_shape's compiles recorded (the stand-in compile cannot split tuple constexprs)."""
    take_shape.cache.clear()
    take_shape._launcher = None
    take_shape._bound.clear()

    def compile(**req):
        rec.requests.append(req)
        meta = {"name": "take_shape", "target": req["target"], "num_warps": req["num_warps"],
                "params": [{"name": "x_ptr", "type": "ptr<fp32>", "size": 8}],
                "folded": ["SHAPE"]}
        return native.kernel_from_metadata(json.dumps(meta), b"\x7fELF not a real cubin", "")

    rec.compile = compile


def test_equal_tuples_of_other_item_types_are_other_kernels(gpu):
    """(2, 4), (2.0, 4) and (True, 4) compare equal, but their literals differ: one kernel each,
    on the general path and on the fast path once each is known."""
    rec, slow = gpu
    shape_kernels(rec)
    shapes = [(2, 4), (2.0, 4), (True, 4), ((2, 4), 1), ((2.0, 4), 1)]
    for _ in range(2):
        for shape in shapes:
            take_shape[(1,)](X, SHAPE=shape)
    assert [r["signature"].split(",", 1)[1] for r in rec.requests] == [
        "SHAPE=(2, 4)", "SHAPE=(2.0, 4)", "SHAPE=(True, 4)", "SHAPE=((2, 4), 1)",
        "SHAPE=((2.0, 4), 1)"]
    assert len(slow) == len(shapes)  # the second round was served fast, each by its own kernel
    assert len(rec.launches) == 2 * len(shapes)


def test_long_constexpr_tuples_take_the_general_path_correctly(gpu):
    rec, slow = gpu
    shape_kernels(rec)
    long_tuple = tuple(range(400))  # more key words than the fast path holds
    many_floats = tuple(float(i) for i in range(100))  # more objects than it holds
    for shape in (long_tuple, many_floats):
        for _ in range(2):
            take_shape[(1,)](X, SHAPE=shape)
    assert len(rec.requests) == 2 and len(rec.launches) == 4
    assert rec.requests[0]["signature"].endswith("399)")
