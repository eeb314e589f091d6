"""examples/demo.py, the README's main job, on this machine: the warp-specialized GEMM and
attention compile for sm_90a and sm_100a with their register budgets, run (interpreter or GPU) within
tolerance of NumPy, and the planted barrier bug is reported at its line."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

native_loader = pytest.importorskip("warpweave._native_loader")
pytestmark = pytest.mark.skipif(not native_loader.available(),
                                reason="warpweave._native is not built (pip install .)")

DEMO = Path(__file__).resolve().parents[2] / "examples" / "demo.py"


def test_demo_runs_and_catches_the_planted_bug():
    p = subprocess.run([sys.executable, str(DEMO)], capture_output=True, text=True, timeout=600,
                       env=dict(os.environ))
    out = p.stdout + p.stderr
    assert p.returncode == 0, out
    # Section 1: both kernels for each target, with the producer trimmed and the consumers
    # raised, and nothing spilled.
    assert re.search(r"sm_90a +gemm_ws_kernel .* 12 +40 / 232 / 232 +\d+ KiB +0 B", out), out
    assert re.search(r"sm_90a +attention_ws_kernel .* 12 +\d+ / \d+ / \d+ +\d+ KiB +0 B", out), out
    assert re.search(r"sm_100a +gemm_ws_kernel .* 8 +[\d / ]+ +\d+ KiB +0 B", out), out
    assert re.search(r"sm_100a +attention_ws_kernel .* 16 +[\d / ]+ +\d+ KiB +0 B", out), out
    # Section 2: errors against float64 NumPy within fp16 accuracy.
    errors = [float(e) for e in re.findall(r"fp16 +([0-9.e-]+) ", out)]
    assert len(errors) == 2 and errors[0] < 0.1 and errors[1] < 5e-3, out
    # Section 3: the correct ring is right, the planted bug is located in demo.py.
    assert "out == 2 * x is True" in out
    assert re.search(r"demo\.py:\d+:\d+: error: ", out), out
