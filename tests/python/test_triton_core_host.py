"""Triton's host API pieces that Triton's own language tests lean on: `reinterpret` /
`TensorWrapper` (a tensor's bytes passed as another element type), `tl.dtype(name)` and its kind
lists, the dtype's repr / str, `TritonError` as the base of compile and interpreter errors, and
the conversion helpers of `warpweave._internal_testing`."""

import numpy as np
import pytest

import warpweave as ww
import warpweave.language as tl
from warpweave import _internal_testing as it

pytest.importorskip("warpweave._native")
torch = pytest.importorskip("torch")


@ww.jit
def add_one_kernel(src, dst, N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(dst + offs, tl.load(src + offs) + 1)


def test_reinterpreted_int32_tensor_runs_as_uint32(monkeypatch):
    monkeypatch.setenv("WARPWEAVE_INTERPRET", "1")
    # 0xFFFFFFFF read as uint32 is 4294967295; + 1 wraps to 0, and 7 + 1 is 8.
    src = torch.tensor([-1, 7, -2, 0], dtype=torch.int32)
    dst = torch.zeros(4, dtype=torch.int32)
    wsrc, wdst = ww.reinterpret(src, tl.uint32), ww.reinterpret(dst, tl.uint32)
    assert isinstance(wsrc, ww.TensorWrapper) and wsrc.dtype is tl.uint32
    add_one_kernel[(1,)](wsrc, wdst, N=4)
    assert dst.tolist() == [0, 8, -1, 1]
    # Read back as its own dtype, a wrapper is its base again.
    assert ww.reinterpret(wdst, torch.int32) is dst


def test_reinterpret_refuses_non_tensors():
    with pytest.raises(TypeError, match="cannot reinterpret"):
        ww.reinterpret([1, 2], tl.uint8)


def test_tl_dtype_by_name_is_the_one_object():
    assert tl.dtype("fp16") is tl.float16
    assert tl.dtype("float16") is tl.float16
    assert tl.dtype("int1") is tl.int1
    assert tl.dtype("bf16") is tl.bfloat16
    for name in tl.dtype.SINT_TYPES + tl.dtype.UINT_TYPES + tl.dtype.STANDARD_FP_TYPES:
        assert isinstance(tl.dtype(name), tl.dtype)
    with pytest.raises(ValueError, match="unknown element type"):
        tl.dtype("fp12")


def test_dtype_repr_evaluates_back_and_str_is_the_short_name():
    import warpweave  # noqa: F401  (the repr names it)

    for d in (tl.int8, tl.uint64, tl.float16, tl.bfloat16, tl.float32):
        assert eval(repr(d)) is d
    assert str(tl.float16) == "fp16"
    assert str(tl.bfloat16) == "bf16"
    assert str(tl.int32) == "int32"
    assert str(tl.uint8) == "uint8"


@ww.jit
def bad_kernel(x):
    y = x + "text"  # noqa: F841


def test_compile_and_interpreter_errors_share_triton_error():
    assert issubclass(ww.CompilationError, ww.TritonError)
    assert issubclass(ww.InterpreterError, ww.TritonError)
    assert issubclass(ww.OutOfResources, ww.TritonError)
    with pytest.raises(ww.TritonError):
        bad_kernel[(1,)](np.zeros(4, np.float32))


def test_internal_testing_conversions():
    x = np.array([1, 200, 65535], np.uint16)
    t = it.to_triton(x, device="cpu")
    assert t.dtype is tl.uint16
    np.testing.assert_array_equal(it.to_numpy(t), x)
    b = it.to_triton(np.array([1.5, -2.0], np.float32), device="cpu", dst_type="bfloat16")
    assert b.dtype == torch.bfloat16
    np.testing.assert_array_equal(it.to_numpy(b), [1.5, -2.0])
    assert it.str_to_triton_dtype("int32") is tl.int32
    assert it.str_to_triton_dtype("bf16") is tl.bfloat16
    assert it.torch_dtype_name(torch.int64) == "int64"
    assert it.torch_dtype_name(tl.float16) == "float16"


def test_numpy_random_bfloat16_values_are_exact_in_bfloat16():
    x = it.numpy_random(64, "bfloat16")
    assert x.dtype == np.float32
    assert not (x.view(np.uint32) & 0xFFFF).any()
    f8 = it.numpy_random((4, 4), "float8e5")
    assert f8.dtype == np.int8 and f8.min() >= 20 and f8.max() < 40
