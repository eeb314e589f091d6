"""Debugging aids on the GPU: WARPWEAVE_TRAP_HANGS turns a planted barrier hang into a trap that
prints the block, thread, task, barrier, phase and source line; tl.device_print prints every
element once, as the interpreter does; tl.device_assert fails the launch with its message.
Each kernel runs in a subprocess, since a trap or assert leaves the CUDA context unusable."""

import os
import re
import subprocess
import sys
import textwrap

import pytest

from gpu_requirements import require_cuda

torch = require_cuda((9, 0), "mbarriers and async tasks need sm_90")

HANG_SCRIPT = textwrap.dedent('''
    import sys
    import time

    import torch

    import warpweave as ww
    import warpweave.language as tl
    from warpweave import tlx


    @ww.jit
    def hang_kernel(out_ptr, BLOCK: tl.constexpr):
        ready = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
        offs = tl.arange(0, BLOCK)
        with tlx.async_tasks():
            with tlx.async_task("default"):
                tl.store(out_ptr + offs, offs.to(tl.float32))
            with tlx.async_task(num_warps=4):
                tlx.barrier_wait(tlx.local_view(ready, 0), 0)  # PLANTED: nobody arrives
                tl.store(out_ptr + BLOCK + offs, offs.to(tl.float32))


    out = torch.zeros(256, device="cuda")
    start = time.perf_counter()
    try:
        hang_kernel[(2,)](out, BLOCK=128)
        torch.cuda.synchronize()
    except Exception as e:  # the trap fails the launch (and the context)
        print(f"LAUNCH FAILED after {time.perf_counter() - start:.3f} s: {type(e).__name__}: {e}",
              flush=True)
        sys.exit(3)
    print("NO ERROR", flush=True)
''')

PRINT_SCRIPT = textwrap.dedent('''
    import sys

    import numpy as np
    import torch

    import warpweave as ww
    import warpweave.language as tl


    @ww.jit
    def print_kernel(x_ptr, n_ptr, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs)
        tl.device_print("x", x)
        tl.device_print("n", tl.load(n_ptr))


    x = np.arange(64, dtype=np.float32) * 0.5 - 3.0
    n = np.array([-7], dtype=np.int32)
    if sys.argv[1] == "gpu":
        print_kernel[(2,)](torch.from_numpy(x).cuda(), torch.from_numpy(n).cuda(), BLOCK=64)
        torch.cuda.synchronize()
    else:
        print_kernel[(2,)](x, n, BLOCK=64)  # NumPy arrays: the interpreter
''')

ASSERT_SCRIPT = textwrap.dedent('''
    import sys

    import torch

    import warpweave as ww
    import warpweave.language as tl


    @ww.jit
    def assert_kernel(x_ptr, BLOCK: tl.constexpr):
        x = tl.load(x_ptr + tl.arange(0, BLOCK))
        tl.device_assert(x >= 0, "x must not be negative")  # PLANTED


    x = torch.ones(128, device="cuda")
    x[77] = -1.0
    try:
        assert_kernel[(1,)](x, BLOCK=128)
        torch.cuda.synchronize()
    except Exception as e:
        print(f"LAUNCH FAILED: {type(e).__name__}: {e}", flush=True)
        sys.exit(3)
    print("NO ERROR", flush=True)
''')


def run_script(tmp_path, name, text, env_extra=None, timeout=120, args=()):
    path = tmp_path / name
    path.write_text(text)
    env = dict(os.environ)
    env.pop("WARPWEAVE_INTERPRET", None)
    env.update(env_extra or {})
    env["PYTHONUNBUFFERED"] = "1"
    # A private cache: trapping kernels must not be served to (or from) other runs.
    env["WARPWEAVE_CACHE_DIR"] = str(tmp_path / "cache")
    proc = subprocess.run([sys.executable, str(path), *args], capture_output=True, text=True, env=env,
                          timeout=timeout, cwd=str(tmp_path))
    output = proc.stdout + proc.stderr
    print(output)  # kept in the test log: the exact facts the GPU printed
    return proc, output, path


def line_of(text, marker):
    return next(i for i, line in enumerate(text.splitlines(), 1) if marker in line)


def test_trap_hangs_reports_the_planted_hang_instead_of_hanging(tmp_path):
    proc, output, path = run_script(tmp_path, "hang.py", HANG_SCRIPT,
                                    {"WARPWEAVE_TRAP_HANGS": str(1 << 20)})
    assert proc.returncode == 3, output
    assert "LAUNCH FAILED" in output
    line = line_of(HANG_SCRIPT, "PLANTED")
    # Lane 0 of each of the waiting task's four warps, in both blocks.
    pattern = re.compile(r"warpweave: barrier_wait timed out: block \((\d+),0,0\) thread (\d+) "
                         r"async task 1 \(warps 4-7\) barrier 'ready' at smem offset (\d+) phase "
                         r"0 at (\S+):(\d+)")
    reports = pattern.findall(output)
    assert reports, output
    for block, thread, _offset, file, at in reports:
        assert block in ("0", "1")
        assert int(thread) in (128, 160, 192, 224)
        assert file.endswith("hang.py") and int(at) == line
    assert {r[0] for r in reports} == {"0", "1"}, output


def test_device_print_prints_each_element_once_like_the_interpreter(tmp_path):
    lines = {}
    for where in ("gpu", "interpreter"):
        proc, output, _ = run_script(tmp_path, "show.py", PRINT_SCRIPT, args=(where,))
        assert proc.returncode == 0, output
        lines[where] = sorted(line for line in output.splitlines() if line.startswith("pid"))
    # 2 programs x (64 elements + 1 scalar), the same lines as the interpreter's
    assert len(lines["gpu"]) == 130, lines["gpu"]
    assert lines["gpu"] == lines["interpreter"]
    assert "pid (1, 0, 0) idx [5] x: -0.5" in lines["gpu"]
    assert "pid (0, 0, 0) idx () n: -7" in lines["gpu"]


def test_device_assert_fails_the_launch_with_message_and_line(tmp_path):
    proc, output, path = run_script(tmp_path, "check.py", ASSERT_SCRIPT)
    assert proc.returncode == 3, output
    line = line_of(ASSERT_SCRIPT, "PLANTED")
    assert "x must not be negative" in output
    assert f"check.py:{line}" in output
