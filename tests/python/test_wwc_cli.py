"""The wwc command line (and `python -m warpweave`), as users and later stages rely on it."""
import json
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
VECTOR_ADD = ROOT / "examples" / "vector_add.py"
SIG16 = "x_ptr:*fp32:16,y_ptr:*fp32:16,out_ptr:*fp32:16,n:i32:16,BLOCK=1024"
SIG = "x_ptr:*fp32,y_ptr:*fp32,out_ptr:*fp32,n:i32,BLOCK=1024"


def wwc_path():
    """The installed wwc: on PATH, else beside this Python's scripts (pyenv hides new ones)."""
    found = shutil.which("wwc")
    if found:
        return found
    candidate = Path(sysconfig.get_path("scripts")) / "wwc"
    assert candidate.exists(), "wwc is not installed: run scripts/test (it pip-installs the package)"
    return str(candidate)


def wwc(*args, module=False):
    cmd = [sys.executable, "-m", "warpweave"] if module else [wwc_path()]
    return subprocess.run(cmd + [str(a) for a in args], capture_output=True, text=True, timeout=120)


def test_usage_errors_exit_1_with_message():
    r = wwc()
    assert r.returncode == 1
    assert "no input file" in r.stderr and "usage: wwc" in r.stderr
    r = wwc(VECTOR_ADD, "--kernel", "add_kernel", "--signature", SIG, "--emit", "ptx",
            "--target", "sm_75")
    assert r.returncode == 1
    assert "unknown target 'sm_75'" in r.stderr
    r = wwc(VECTOR_ADD, "--kernel", "add_kernel", "--signature", SIG, "--emit", "sass")
    assert r.returncode == 1 and "--emit expects tile-ir, ptx or cubin" in r.stderr


def test_bad_signature_names_the_entry():
    r = wwc(VECTOR_ADD, "--kernel", "add_kernel", "--signature", "x_ptr:*fp32:8", "--emit", "ptx")
    assert r.returncode == 1
    assert "bad signature entry 'x_ptr:*fp32:8'" in r.stderr


def test_syntax_error_reports_file_line_col(tmp_path):
    src = tmp_path / "bad.py"
    src.write_text("import warpweave as ww\n\n@ww.jit\ndef k(x):\n    y = (x +\n")
    r = wwc(src, "--kernel", "k", "--signature", "x:i32", "--emit", "tile-ir")
    assert r.returncode == 1, r.stderr
    first = r.stderr.splitlines()[0]
    assert first.startswith(f"{src}:5:"), r.stderr
    assert ": error: " in first


def test_unknown_kernel_is_reported():
    r = wwc(VECTOR_ADD, "--kernel", "nope", "--signature", SIG, "--emit", "tile-ir")
    assert r.returncode == 1
    assert "nope" in r.stderr and "error" in r.stderr


def test_tile_ir_of_vector_add():
    r = wwc(VECTOR_ADD, "--kernel", "add_kernel", "--signature", SIG16, "--emit", "tile-ir")
    assert r.returncode == 0, r.stderr
    ir = r.stdout
    for op in ("program_id", "arange", "addptr", "cmp", "load", "store", "return"):
        assert op in ir, ir
    assert "tensor<1024xfp32>" in ir


@pytest.mark.parametrize("module", [False, True])
def test_ptx_uses_16_byte_vectors_only_when_declared(tmp_path, module):
    out16 = tmp_path / "a16.ptx"
    out = tmp_path / "a.ptx"
    r = wwc(VECTOR_ADD, "--kernel", "add_kernel", "--signature", SIG16, "--target", "sm_90a",
            "--emit", "ptx", "-o", out16, module=module)
    assert r.returncode == 0, r.stderr
    r = wwc(VECTOR_ADD, "--kernel", "add_kernel", "--signature", SIG, "--target", "sm_90a",
            "--emit", "ptx", "-o", out, module=module)
    assert r.returncode == 0, r.stderr
    ptx16, ptx = out16.read_text(), out.read_text()
    assert ".target sm_90a" in ptx16
    assert "ld.global.v4" in ptx16 and "st.global.v4" in ptx16
    assert "ld.global.v4" not in ptx and "st.global.v4" not in ptx


@pytest.mark.parametrize("target", ["sm_90a", "sm_80", "sm_100a"])
def test_cubin_and_metadata_for_every_target(tmp_path, target, requires_ptxas):
    cubin, meta = tmp_path / "k.cubin", tmp_path / "k.json"
    r = wwc(VECTOR_ADD, "--kernel", "add_kernel", "--signature", SIG16, "--target", target,
            "--emit", "cubin", "-o", cubin, "--meta", meta)
    assert r.returncode == 0, r.stderr
    data = cubin.read_bytes()
    assert data[:4] == b"\x7fELF"
    m = json.loads(meta.read_text())
    assert m["target"] == target
    assert m["num_warps"] == 4
    assert m["registers"] > 0 and m["spill_bytes"] == 0
    assert [p["name"] for p in m["params"]] == ["x_ptr", "y_ptr", "out_ptr", "n"]
    assert m["folded"] == ["BLOCK"]


def test_helpers_from_relative_imports_compile_as_from_python(tmp_path):
    """wwc reads the sibling modules a kernel's relative imports name (as @ww.jit does from
    Python), transitively; a helper it cannot find is a located error at its use."""
    header = "import warpweave as ww\nimport warpweave.language as tl\n"
    (tmp_path / "scale.py").write_text(header + "@ww.jit\ndef scale(x, s):\n    return x * s\n")
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "shift.py").write_text(header + "from ..scale import scale\n\n"
                                  "@ww.jit\ndef shift(x):\n    return scale(x, 3.0) + 1.0\n")
    kern = sub / "kern.py"
    kern.write_text(header + "from .shift import shift\nfrom .absent import gone\n\n"
                    "@ww.jit\ndef k(x_ptr, GONE: tl.constexpr):\n"
                    "    v = tl.load(x_ptr)\n"
                    "    if GONE:\n        v = gone(v)\n"
                    "    tl.store(x_ptr, shift(v))\n")
    r = wwc(kern, "--kernel", "k", "--signature", "x_ptr:*fp32,GONE=0", "--emit", "tile-ir")
    assert r.returncode == 0, r.stderr
    assert "mul" in r.stdout and "add" in r.stdout
    r = wwc(kern, "--kernel", "k", "--signature", "x_ptr:*fp32,GONE=1", "--emit", "tile-ir")
    assert r.returncode == 1
    assert f"{kern}:10:13: error: 'absent.gone' is imported from a module the compiler was not " \
           "given" in r.stderr, r.stderr
