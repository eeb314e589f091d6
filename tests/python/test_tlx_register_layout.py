"""tlx.local_load(..., layout=tlx.layout(shape=, stride=)): a kernel-given register layout (TLX's
CuTe-style thread-value layout). The interpreter gives the same values as a plain local_load
(a layout does not change values); the PTX for sm_90a (shared memory) and sm_100a (shared and
tensor memory) is accepted by ptxas; layouts the compiler cannot honour are errors at their
line. No GPU ran any of this."""
import importlib
from pathlib import Path

import numpy as np
import pytest

import tlx_register_layout_kernels as lk

native_loader = importlib.import_module("warpweave._native_loader")
pytestmark = pytest.mark.skipif(not native_loader.available(),
                                reason="warpweave._native is not built (pip install .)")


@pytest.fixture
def interpret(monkeypatch):
    monkeypatch.setenv("WARPWEAVE_INTERPRET", "1")


def data(shape):
    return (np.arange(np.prod(shape), dtype=np.float32).reshape(shape) % 97) / 8


def test_shared_memory_load_in_a_layout_keeps_values(interpret):
    x = data((64, 64))
    out = np.zeros_like(x)
    lk.smem_load_in_layout[(1,)](x, out, num_warps=4)
    np.testing.assert_array_equal(out, x * 3)


@pytest.mark.parametrize("mode", [0, 1, 2])
def test_tensor_memory_load_in_a_layout_keeps_values(interpret, mode):
    x = data((128, 64))
    out = np.zeros_like(x)
    lk.tmem_load_in_layout[(1,)](x, out, MODE=mode, num_warps=8)
    np.testing.assert_array_equal(out, x * 3)


# ---- PTX ----

def compile_kernel(name, signature, target, num_warps, stage="ptx"):
    path = Path(lk.__file__)
    return native_loader.native().compile([(str(path), path.read_text())], name, signature, {},
                                          target=target, num_warps=num_warps, stage=stage)


def ptx_text(result):
    return result if isinstance(result, str) else getattr(result, "ptx", None) or result["ptx"]


@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_shared_memory_load_in_a_layout_ptx(ptxas, target):
    ptx = ptx_text(compile_kernel("smem_load_in_layout", "x_ptr:*fp32:16,out_ptr:*fp32:16",
                                  target, 4))
    # Each thread reads its two 16-column runs as 4-element vectors.
    assert "ld.shared.v4.f32" in ptx or "ld.shared.v4.b32" in ptx
    ptxas(ptx, arch=target)


def tmem_ptx(mode):
    return ptx_text(compile_kernel("tmem_load_in_layout",
                                   f"x_ptr:*fp32:16,out_ptr:*fp32:16,MODE={mode}", "sm_100a", 8))


def test_tensor_memory_load_in_the_tcgen05_layout(ptxas):
    ptx = tmem_ptx(0)
    assert "tcgen05.ld.sync.aligned.32x32b.x32.b32" in ptx
    ptxas(ptx, arch="sm_100a")


def test_tensor_memory_load_in_a_separable_layout_reads_its_column_runs(ptxas):
    # Columns 0-15 and 32-47 of the row, plus 16 for the second warp group: two messages of 16,
    # no exchange between warps beyond the tcgen05 layout's own.
    ptx = tmem_ptx(1)
    assert ptx.count("tcgen05.ld.sync.aligned.32x32b.x16.b32") == 2
    assert "tcgen05.ld.sync.aligned.32x32b.x32.b32" not in ptx
    assert ptx.count("bar.sync") == tmem_ptx(0).count("bar.sync")
    ptxas(ptx, arch="sm_100a")


def test_tensor_memory_load_in_another_layout_converts(ptxas):
    # Lanes along the columns: read in tcgen05's layout, then through shared memory.
    ptx = tmem_ptx(2)
    assert "tcgen05.ld.sync.aligned.32x32b.x32.b32" in ptx
    assert ptx.count("bar.sync") > tmem_ptx(0).count("bar.sync")
    ptxas(ptx, arch="sm_100a")


# ---- located errors ----

def compile_error(tmp_path, body, layout, num_warps=4, target="sm_100a", sig="x_ptr:*fp32:16"):
    src = tmp_path / "k.py"
    text = ("import warpweave as ww\nimport warpweave.language as tl\n"
            "from warpweave import tlx\n\n"
            f"L = {layout}\n\n\n@ww.jit\ndef k(x_ptr):\n" + body)
    src.write_text(text)
    with pytest.raises(Exception) as info:
        native_loader.native().compile([(str(src), text)], "k", sig, {}, target=target,
                                       num_warps=num_warps, stage="ptx")
    return str(info.value), str(src)


SMEM_BODY = ("    t = tlx.local_view(tlx.local_alloc((64, 64), tl.float32, 1), 0)\n"
             "    v = tlx.local_load(t, layout=L)\n"
             "    tl.store(x_ptr + tl.arange(0, 64)[:, None] * 64 + tl.arange(0, 64)[None, :], v)\n")
GOOD = "tlx.layout(shape=((32, 2, 2), (16, 2)), stride=((64, 2048, 16), (1, 32)))"


def test_layout_for_other_warps_is_an_error_at_the_load(tmp_path):
    msg, path = compile_error(tmp_path, SMEM_BODY, GOOD, num_warps=8)
    assert f"{path}:11:" in msg and "8 warps" in msg and "4 warps" in msg


@pytest.mark.parametrize("layout,where,words", [
    ("tlx.layout(shape=((32, 3, 2), (16, 2)), stride=((64, 2048, 16), (1, 32)))", 5,
     "power of two"),
    ("tlx.layout(shape=((32, 2, 2), (16,)), stride=((64, 2048, 16), (1, 32)))", 5, "modes"),
    ("tlx.layout(shape=((32, 2, 2),), stride=((64, 2048, 16),))", 5, "(thread, value) pair"),
    ("tlx.layout(shape=((32, 2, 2), (16, 2)), stride=((64, 2048, 16), (1, 16)))", 11,
     "must cover the tile"),
    ("tlx.layout(shape=((32, 2, 2), (16, 2)), stride=((64, 4096, 16), (1, 32)))", 11,
     "outside the 64x64 tile"),
    ("tlx.layout(shape=((8, 2), (16, 2)), stride=((64, 512), (1, 32)))", 11,
     "32 lanes"),
    ("3", 11, "register layout"),
])
def test_layouts_we_cannot_honour_are_located_errors(tmp_path, layout, where, words):
    msg, path = compile_error(tmp_path, SMEM_BODY, layout)
    assert f"{path}:{where}:" in msg, msg
    assert words in msg, msg
    assert "shape=" in msg or "tile" in msg or "lanes" in msg, msg
