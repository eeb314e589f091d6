"""Vector add through the real compiler and the CPU interpreter, against NumPy."""

import importlib

import numpy as np
import pytest

import warpweave as ww
import warpweave.language as tl

native_loader = importlib.import_module("warpweave._native_loader")
pytestmark = pytest.mark.skipif(not native_loader.available(),
                                reason="warpweave._native is not built (pip install .)")


@ww.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + y, mask=mask)


@ww.jit
def unmasked_copy(src, dst, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst + offsets, tl.load(src + offsets))


@pytest.mark.parametrize("n", [1, 17, 1000, 4099])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32])
def test_vector_add_matches_numpy(n, dtype):
    rng = np.random.default_rng(n)
    x = (rng.standard_normal(n) * 100).astype(dtype)
    y = (rng.standard_normal(n) * 100).astype(dtype)
    poison = np.nan if np.issubdtype(dtype, np.floating) else -12345
    out = np.full(n + 8, poison, dtype)  # room past n stays poisoned
    block = 256
    add_kernel[lambda m: (ww.cdiv(n, m["BLOCK"]),)](x, y, out, n, BLOCK=block)
    np.testing.assert_array_equal(out[:n], x + y)
    assert np.all(out[n:] != out[n:]) if np.issubdtype(dtype, np.floating) else np.all(
        out[n:] == poison)


def test_out_of_bounds_access_is_reported_with_the_source_line():
    src = np.arange(100, dtype=np.float32)
    dst = np.zeros(100, np.float32)
    with pytest.raises(ww.InterpreterError) as e:
        unmasked_copy[(1,)](src, dst, BLOCK=128)
    assert "test_vector_add_interp.py" in str(e.value)


def test_torch_cpu_tensors_run_in_the_interpreter(monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setenv("WARPWEAVE_INTERPRET", "1")
    x = torch.randn(300)
    y = torch.randn(300)
    out = torch.full((300,), float("nan"))
    add_kernel[(3,)](x, y, out, 300, BLOCK=128)
    assert torch.equal(out, x + y)
