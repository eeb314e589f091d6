"""The extension end to end on the CPU: compile through the real C++ pipeline, errors as Python
exceptions, the disk cache with real cubins, and `python -m warpweave`."""

import importlib
import os
import subprocess
import sys

import numpy as np
import pytest

import warpweave as ww
import warpweave.language as tl

native_loader = importlib.import_module("warpweave._native_loader")
pytestmark = pytest.mark.skipif(not native_loader.available(),
                                reason="warpweave._native is not built (pip install .)")

SIG = "x_ptr:*fp32:16,y_ptr:*fp32:16,out_ptr:*fp32:16,n:i32:16,BLOCK=1024"


@ww.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) +
             tl.load(y_ptr + offsets, mask=mask), mask=mask)


def _source():
    return [(__file__, open(__file__).read())]


def test_compile_to_cubin_with_params_and_report():
    nat = native_loader.native()
    k = nat.compile(_source(), "add_kernel", SIG, {}, target="sm_90a", stage="cubin")
    assert k.cubin[:4] == b"\x7fELF"
    assert ".entry" in k.ptx and k.name in k.ptx
    assert [p[0] for p in k.params] == ["x_ptr", "y_ptr", "out_ptr", "n"]
    assert [p[2] for p in k.params] == [8, 8, 8, 4]
    assert "BLOCK" in k.folded_args
    assert k.registers > 0 and k.spill_bytes == 0
    assert k.num_warps == 4


def test_compile_errors_are_compilation_errors_with_location():
    nat = native_loader.native()
    with pytest.raises(ww.CompilationError, match="bad signature entry"):
        nat.compile(_source(), "add_kernel", "x_ptr:*fp32:7", {})
    with pytest.raises(ww.CompilationError):
        nat.compile([("bad.py", "@ww.jit\ndef k(x):\n    return (\n")], "k", "x:i32", {})


def test_metadata_round_trip_rebuilds_a_launchable_kernel():
    nat = native_loader.native()
    k = nat.compile(_source(), "add_kernel", SIG, {}, target="sm_90a", stage="cubin")
    again = nat.kernel_from_metadata(k.metadata_json(), k.cubin, k.ptx)
    assert again.name == k.name
    assert again.params == k.params
    assert again.num_warps == k.num_warps and again.shared_bytes == k.shared_bytes
    assert again.cubin == k.cubin


def test_disk_cache_serves_a_second_process(tmp_path, monkeypatch):
    monkeypatch.setenv("WARPWEAVE_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("WARPWEAVE_TARGET", "sm_90a")
    x = np.zeros(1024, np.float32)
    values = add_kernel.bind((x, x, x, 1024), {"BLOCK": 256})
    add_kernel.cache.clear()
    before = add_kernel.compile_count
    first = add_kernel.compile_for(values, False, (4, 3, 1))
    assert add_kernel.compile_count == before + 1
    entries = list(tmp_path.rglob("*.wwk"))
    assert len(entries) == 1
    add_kernel.cache.clear()
    second = add_kernel.compile_for(values, False, (4, 3, 1))
    assert add_kernel.compile_count == before + 1  # served from disk
    assert second.kernel.cubin == first.kernel.cubin
    # What `asm` shows is the same after a cache hit: PTX and the Tile IR too.
    assert second.asm["ptx"] == first.asm["ptx"]
    assert second.asm["ttir"] == first.asm["ttir"] and "addptr" in first.asm["ttir"]
    # Corrupt the entry: it is detected and recompiled.
    data = bytearray(entries[0].read_bytes())
    data[-10] ^= 0xFF
    entries[0].write_bytes(bytes(data))
    add_kernel.cache.clear()
    third = add_kernel.compile_for(values, False, (4, 3, 1))
    assert add_kernel.compile_count == before + 2
    assert third.kernel.cubin == first.kernel.cubin


def test_python_dash_m_warpweave_is_wwc(tmp_path):
    kernel = tmp_path / "k.py"
    kernel.write_text(open(__file__).read())
    out = subprocess.run([sys.executable, "-m", "warpweave", str(kernel), "--kernel", "add_kernel",
                          "--signature", SIG, "--emit", "ptx"], capture_output=True, text=True,
                         cwd=str(tmp_path))
    assert out.returncode == 0, out.stderr
    assert ".entry" in out.stdout
    bad = subprocess.run([sys.executable, "-m", "warpweave", "--emit", "ptx"],
                         capture_output=True, text=True, cwd=str(tmp_path))
    assert bad.returncode == 1 and "no input file" in bad.stderr


def test_cuda_available_reports_a_reason():
    ok, reason = native_loader.native().cuda_available()
    if not ok:
        assert "libcuda.so.1" in reason or "cuInit" in reason or "no devices" in reason
