"""tlx.local_load(..., layout=tlx.layout(shape=, stride=)): a kernel-given register layout (TLX's
CuTe-style thread-value layout). The interpreter gives the same values as a plain local_load
(a layout does not change values); the PTX for sm_90a (shared memory) and sm_100a (shared and
tensor memory) is accepted by ptxas; layouts the compiler cannot honour are errors at their
line. No GPU ran any of this."""
import importlib
import re
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


@pytest.mark.parametrize("dtype", ["tl.float32", "tl.bfloat16", "tl.float8e4nv"])
@pytest.mark.parametrize("mode", [1, 2, 3])
def test_tensor_memory_store_in_a_layout_keeps_values(interpret, mode, dtype):
    # Values k / 8 for k < 16 are exact in every DTYPE (doubled too).
    x = (np.arange(128 * 64, dtype=np.float32).reshape(128, 64) % 16) / 8
    import warpweave.language as tl
    dt = {"tl.float32": tl.float32, "tl.bfloat16": tl.bfloat16, "tl.float8e4nv": tl.float8e4nv}
    given, default = np.zeros_like(x), np.zeros_like(x)
    lk.tmem_store_in_layout[(1,)](x, given, MODE=mode, DTYPE=dt[dtype], num_warps=8)
    lk.tmem_store_in_layout[(1,)](x, default, MODE=0, DTYPE=dt[dtype], num_warps=8)
    np.testing.assert_array_equal(given, default)
    np.testing.assert_array_equal(given, x * 3)


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


def store_ptx(mode, dtype):
    return ptx_text(compile_kernel("tmem_store_in_layout",
                                   f"x_ptr:*fp32:16,out_ptr:*fp32:16,MODE={mode},DTYPE={dtype}",
                                   "sm_100a", 8))


def tcgen05_stores(ptx):
    # (message shape, the address register's column offset expression) of each tcgen05.st.
    return re.findall(r"tcgen05\.st\.sync\.aligned\.(\w+)\.(x\d+)\.b32 \[(%r\d+)\]", ptx)


def column_offsets(ptx, stores):
    # The immediate each store's address adds to the thread's base address (0 when none).
    adds = dict(re.findall(r"add\.u32\s+(%r\d+),\s*%r\d+,\s*(\d+);", ptx))
    return [int(adds.get(reg, 0)) for _, _, reg in stores]


@pytest.mark.parametrize("dtype,n,cols", [
    # SEPARABLE: the thread's columns 0-15 and 32-47 (its warp group's 16 further along).
    ("tl.float32", "x16", [0, 32]),
    ("tl.bfloat16", "x8", [0, 16]),     # two to a 32-bit column
    ("tl.float8e4nv", "x4", [0, 8]),    # four to a 32-bit column
])
def test_tensor_memory_store_in_a_separable_layout_writes_its_column_runs(ptxas, dtype, n, cols):
    ptx = store_ptx(1, dtype)
    stores = tcgen05_stores(ptx)
    # The first store (x from tl.load, in the compiler's layout) is one .x32 / x16 / x8 message;
    # the layout-given store writes the two runs with no conversion through shared memory.
    given = stores[1:]
    assert [s[:2] for s in given] == [("32x32b", n)] * 2, stores
    assert column_offsets(ptx, given) == cols
    assert ptx.count("bar.sync") == store_ptx(0, dtype).count("bar.sync")
    # The second warp group's 16 element columns further along, in 32-bit columns.
    wg = 16 * {"tl.float32": 4, "tl.bfloat16": 2, "tl.float8e4nv": 1}[dtype] // 4
    assert re.search(rf"mad\.lo\.s32 %r\d+, %r\d+, {wg}, ", ptx)
    ptxas(ptx, arch="sm_100a")


@pytest.mark.parametrize("mode,dtype", [(2, "tl.float32"), (3, "tl.bfloat16"),
                                        (3, "tl.float8e4nv")])
def test_tensor_memory_store_in_another_layout_converts(ptxas, mode, dtype):
    # Lanes along the columns (mode 2), or a 32-bit column's 16-bit / 8-bit elements split
    # between warp groups (mode 3): converted to tcgen05's layout through shared memory, then
    # one message per thread like the compiler's own store.
    ptx = store_ptx(mode, dtype)
    default = store_ptx(0, dtype)
    assert [s[:2] for s in tcgen05_stores(ptx)] == [s[:2] for s in tcgen05_stores(default)]
    assert ptx.count("bar.sync") > default.count("bar.sync")
    ptxas(ptx, arch="sm_100a")


def test_tensor_memory_store_of_single_columns_in_a_layout(ptxas):
    # 32-bit elements in SPLIT_PAIRS: each thread's columns are every other one, one-column
    # messages, no conversion.
    ptx = store_ptx(3, "tl.float32")
    given = tcgen05_stores(ptx)[1:]
    assert [s[:2] for s in given] == [("32x32b", "x1")] * 32
    assert sorted(column_offsets(ptx, given)) == list(range(0, 64, 2))
    assert ptx.count("bar.sync") == store_ptx(0, "tl.float32").count("bar.sync")
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
