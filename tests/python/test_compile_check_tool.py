"""tools/upstream/compile_check.py: a pytest plugin that compiles for a GPU target every kernel an
interpreter run compiles, logging each (the way Triton's test_core showed which of its programs
the GPU path refused). Runs a small suite of our own through it: one kernel that compiles and one
that only the interpreter takes must be logged as such."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("warpweave._native")
ROOT = Path(__file__).resolve().parents[2]

SUITE = '''
import numpy as np
import warpweave as ww
import warpweave.language as tl


@ww.jit
def double_it(x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs) * 2)


@ww.jit
def tanh64(x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.math.tanh(tl.load(x_ptr + offs)))


def test_both():
    x = np.ones(64, np.float32)
    double_it[(1,)](x, BLOCK=64)
    double_it[(1,)](x, BLOCK=64)  # the same compile is logged once
    assert (x == 4).all()
    y = np.zeros(64, np.float64)
    tanh64[(1,)](y, BLOCK=64)
    assert (y == 0).all()
'''


def test_logs_each_interpreted_kernel_compiled_for_the_target(tmp_path, requires_ptxas):
    (tmp_path / "test_suite.py").write_text(SUITE)
    log = tmp_path / "check.jsonl"
    import warpweave
    pyroot = str(Path(warpweave.__file__).parents[1])  # the warpweave this test imports
    env = dict(os.environ, WARPWEAVE_INTERPRET="1", WARPWEAVE_CACHE_DISABLE="1",
               WW_COMPILE_CHECK_TARGET="sm_90a", WW_COMPILE_CHECK_LOG=str(log),
               PYTHONPATH=os.pathsep.join([pyroot, str(ROOT / "tools" / "upstream")]))
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p",
                        "compile_check", str(tmp_path / "test_suite.py")], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    records = {json.loads(line)["kernel"]: json.loads(line) for line in log.read_text().splitlines()}
    assert len(log.read_text().splitlines()) == 2
    assert records["double_it"]["ok"] and records["double_it"]["test"].endswith("test_both (call)")
    # fp64 tanh: the interpreter computes it, the GPU targets refuse it (no fp64 form is built).
    assert not records["tanh64"]["ok"] and "'tanh' is not supported" in records["tanh64"]["error"]
    summary = subprocess.run([sys.executable, str(ROOT / "tools" / "upstream" / "compile_check.py"),
                              str(log)], capture_output=True, text=True, env=env)
    assert "2 kernels compiled for sm_90a, 1 failed" in summary.stdout
