"""The command-line compiler on inputs the compiler fuzzer (tools/fuzz, issue 20) found to crash,
hang, exhaust memory, emit PTX that ptxas refuses, or fail without a location: each compiles or
fails with exit code 1 and a `FILE:LINE:COL: error:` that names the construct, in bounded time,
with output that is valid UTF-8. Runs `python -m warpweave` (the wwc command line) of the
extension under test."""
import importlib
import os
import re
import subprocess
import sys

import pytest

native_loader = importlib.import_module("warpweave._native_loader")
pytestmark = pytest.mark.skipif(not native_loader.available(),
                                reason="warpweave._native is not built (pip install .)")

HEADER = "import warpweave as ww\nimport warpweave.language as tl\nfrom warpweave import tlx\n\n\n"


def wwc(path, kernel, signature, *extra, emit="ptx"):
    """Runs the wwc command line; stdout/stderr must decode as UTF-8 (check=False: exit codes
    are the tests' business). A hang fails through the timeout."""
    cmd = [sys.executable, "-m", "warpweave", str(path), "--kernel", kernel, "--signature",
           signature, "--emit", emit, "-o", os.devnull, *extra]
    r = subprocess.run(cmd, capture_output=True, timeout=120)
    r.stdout.decode("utf-8")
    r.stderr = r.stderr.decode("utf-8")
    return r


def write(tmp_path, text, name="k.py", newline="\n"):
    path = tmp_path / name
    path.write_bytes(text.replace("\n", newline).encode("utf-8", "surrogateescape"))
    return path


def kernel(body, params="x_ptr"):
    return HEADER + f"@ww.jit\ndef k({params}):\n" + body


def located(r, path, line=None):
    """The first line of wwc's error: FILE:LINE:COL: error: ..., at `line` when given."""
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert "internal compiler error" not in r.stderr, r.stderr
    first = r.stderr.splitlines()[0]
    m = re.match(re.escape(str(path)) + r":(\d+):(\d+): error: ", first)
    assert m, r.stderr
    if line is not None:
        assert int(m.group(1)) == line, r.stderr
    return first


@pytest.mark.parametrize("newline", ["\r", "\r\n"], ids=["cr", "crlf"])
def test_carriage_return_line_endings(tmp_path, newline):
    src = write(tmp_path, kernel("    tl.store(x_ptr + tl.arange(0, 64), 1.0)\n"),
                newline=newline)
    r = wwc(src, "k", "x_ptr:*fp32")
    assert r.returncode == 0, r.stderr
    # Lines count as Python counts them: the undefined name is on line 8.
    bad = write(tmp_path, kernel("    y = 1\n    tl.store(x_ptr, nope)\n"), "bad.py", newline)
    assert "undefined name 'nope'" in located(wwc(bad, "k", "x_ptr:*fp32"), bad, 9)


def test_shared_memory_past_4_gib_is_refused_not_wrapped(tmp_path):
    # 8388608 x 16 x 16 fp16 = 2**32 bytes: compiled with shared_bytes 0 when sizes were 32-bit.
    src = write(tmp_path, kernel(
        "    buf = tlx.local_alloc((16, 16), tl.float16, 8388608)\n"
        "    offs = tl.arange(0, 16)[:, None] * 16 + tl.arange(0, 16)[None, :]\n"
        "    tlx.local_store(tlx.local_view(buf, 0), tl.load(x_ptr + offs))\n"))
    first = located(wwc(src, "k", "x_ptr:*fp16"), src, 8)
    assert "4294967296 bytes" in first and "232448" in first


def test_twenty_thousand_unused_buffers_compile(tmp_path):
    # The fuzzer's mutant: a local_alloc line repeated 20,000 times. Placing 20,000 buffers that
    # nothing uses took minutes; an unused buffer is dropped, as Triton drops it.
    src = write(tmp_path, kernel(
        "    bufs = tlx.local_alloc((64, 64), tl.float16, 2)\n" * 20000 +
        "    tl.store(x_ptr, 1.0)\n"))
    r = wwc(src, "k", "x_ptr:*fp16", emit="ptx")
    assert r.returncode == 0, r.stderr


def test_many_short_lived_buffers_compile(tmp_path):
    # 10,000 buffers that each die where they are stored to, beside one read at the end: the
    # placement asks whether a barrier lies between every two that share bytes (minutes before
    # the blocks' barrier positions were indexed; a few seconds now).
    body = "    z = tl.zeros([16], tl.float32)\n" + "".join(
        f"    a{i} = tlx.local_alloc((16,), tl.float32, 1)\n"
        f"    tlx.local_store(tlx.local_view(a{i}, 0), z + {i})\n" for i in range(10000))
    body += "    tl.store(x_ptr + tl.arange(0, 16), tlx.local_load(tlx.local_view(a0, 0)))\n"
    src = write(tmp_path, kernel(body))
    r = wwc(src, "k", "x_ptr:*fp32", emit="ptx")
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("warps,groups", [(8, 2), (16, 4)])
def test_a_tensor_memory_tile_narrower_than_its_warp_groups_is_a_located_error(tmp_path, warps,
                                                                               groups):
    # The fuzzer's mutant (wwfuzz --only blackwell, seed 20261208, #6568): a [128, 1] fp32 tile
    # of tensor memory stored by 8 warps, whose two warp groups split the columns, stopped
    # codegen with "unexpected tcgen05 register layout".
    src = write(tmp_path, kernel(
        "    buf = tlx.local_alloc((128, 1), tl.float32, 1, tlx.storage_kind.tmem)\n"
        "    tlx.local_store(tlx.local_view(buf, 0), tl.full((128, 1), 1.0, tl.float32))\n"
        "    tl.store(x_ptr + tl.arange(0, 128)[:, None], tlx.local_load(tlx.local_view(buf, 0)))\n"))
    first = located(wwc(src, "k", "x_ptr:*fp32", "--target", "sm_100a", "--num-warps",
                        str(warps)), src, 9)
    assert f"with {warps} warps: its {groups} warp groups each move an equal share" in first
    assert f"use a tile of at least {groups} columns or 4 warps" in first


@pytest.mark.parametrize("count", ["2**32", "2048", "0", "48"])
def test_named_barrier_thread_counts_outside_a_cta_are_located_errors(tmp_path, count):
    # The fuzzer's mutant (seed 20261213, #8948): 2**32 threads wrapped to bar.arrive 1, 0,
    # which ptxas refuses.
    src = write(tmp_path, kernel(f"    tlx.named_barrier_arrive(1, {count})\n"))
    first = located(wwc(src, "k", "x_ptr:*fp32"), src, 8)
    assert "a named barrier's num_threads must be a multiple of 32 (whole warps) from 32 to " \
           "1024 (a CTA's threads), got " + str(eval(count)) in first


def test_a_buffer_of_a_non_power_of_two_block_is_a_located_error(tmp_path):
    # The fuzzer's mutant (seed 20261215, #10880): a scalar stored into a (91,) buffer became a
    # tensor<91> that layout assignment met before its shape check ("internal compiler error:
    # layout: tensor dim 91 is not a power of two").
    src = write(tmp_path, kernel(
        "    bufs = tlx.local_alloc((91,), tl.float32, 2)\n"
        "    bars = tlx.alloc_barriers(num_barriers=1, arrive_count=1)\n"
        "    tlx.async_remote_shmem_store(bufs[0], 1.0, 1, bars[0])\n"
        "    tlx.barrier_wait(bars[0], 0)\n"))
    first = located(wwc(src, "k", "x_ptr:*fp32", "--num-ctas", "2"), src, 10)
    assert "produces a tensor of shape tensor<91xfp32>; block dimensions must be powers of two" \
        in first


@pytest.mark.parametrize("body,sig,what", [
    ("    bars = tlx.alloc_barriers(num_barriers=2**24, arrive_count=1)\n"
     "    tlx.barrier_arrive(tlx.local_view(bars, 0))\n", "x_ptr:*fp32", "num_barriers=16777216"),
    ("    with tlx.async_tasks():\n        with tlx.async_task('default'):\n            pass\n"
     "        with tlx.async_task(num_warps=1, replicate=2**24):\n            pass\n",
     "x_ptr:*fp32", "replicate=16777216"),
    ("    for i in tl.range(0, 10, 1, loop_unroll_factor=2**24):\n"
     "        tl.store(x_ptr + i, 1.0)\n", "x_ptr:*fp32", "loop_unroll_factor=16777216"),
    ("    a = tl.load(x_ptr + tl.arange(0, 128)[:, None] * 1048576"
     " + tl.arange(0, 1048576)[None, :])\n    tl.store(x_ptr, tl.sum(tl.sum(a, 0), 0))\n",
     "x_ptr:*fp16", "at most 1048576"),
], ids=["barriers", "replicate", "unroll", "block"])
def test_huge_constants_are_located_errors(tmp_path, body, sig, what):
    src = write(tmp_path, kernel(body))
    assert what in located(wwc(src, "k", sig), src)


def test_stages_from_the_signature(tmp_path):
    src = write(tmp_path, HEADER + "@ww.jit\ndef k(x_ptr, STAGES: tl.constexpr):\n"
                "    bufs = tlx.local_alloc((64, 64), tl.float16, STAGES)\n"
                "    bars = tlx.alloc_barriers(num_barriers=STAGES, arrive_count=1)\n")
    assert "16777216 buffers" in located(wwc(src, "k", "x_ptr:*fp16,STAGES=2**24"), src, 8)


def test_undefined_kernel_is_located(tmp_path):
    src = write(tmp_path, kernel("    pass\n"))
    first = located(wwc(src, "not_there", "x_ptr:*fp32"), src, 1)
    assert "kernel 'not_there' is not defined" in first


@pytest.mark.parametrize("bad,what", [
    (b"    # a NUL \x00 in a comment\n", "null bytes"),
    (b"    s = 'caf\xff'\n", "invalid UTF-8"),
    (b"    y =\xc2\xa01\n", "invalid non-printable character U+00A0"),
], ids=["nul", "utf8", "nbsp"])
def test_bytes_python_refuses_are_located(tmp_path, bad, what):
    src = tmp_path / "k.py"
    src.write_bytes(kernel("").encode() + bad)
    r = wwc(src, "k", "x_ptr:*fp32")  # decodes stderr as UTF-8: malformed bytes are escaped
    assert what in located(r, src, 8)


def test_deep_expressions_are_refused_not_crashing(tmp_path):
    src = write(tmp_path, kernel("    a = tl.arange(0, 64)\n    y = a" + "[0]" * 20000 + "\n"))
    first = located(wwc(src, "k", "x_ptr:*fp32"), src, 9)
    assert "nested too deeply" in first


def test_fp8_scalar_parameters_assemble(tmp_path, requires_ptxas):
    src = write(tmp_path, kernel("    tl.store(x_ptr, a.to(tl.float32))\n", "x_ptr, a"))
    for t in ("fp8e4nv", "fp8e5"):
        r = wwc(src, "k", f"x_ptr:*fp32,a:{t}", emit="cubin")
        assert r.returncode == 0, r.stderr


def test_maxnreg_beside_task_register_budgets_is_a_located_error(tmp_path):
    # Task budgets set the launch's registers per thread themselves (setmaxnreg moves within
    # them); a maxnreg beside them would contradict the budgets.
    src = write(tmp_path, kernel(
        "    with tlx.async_tasks():\n"
        "        with tlx.async_task('default'):\n"
        "            tl.store(x_ptr, 1)\n"
        "        with tlx.async_task(num_warps=4, registers=232):\n"
        "            tl.store(x_ptr + 1, 2)\n"))
    first = located(wwc(src, "k", "x_ptr:*i32", "--target", "sm_90a", "--maxnreg", "100"),
                    src, 7)  # the kernel's def
    assert "was given maxnreg=100, but its async tasks' register budgets" in first
    plain = write(tmp_path, kernel("    tl.store(x_ptr, 1)\n"), name="plain.py")
    r = wwc(plain, "k", "x_ptr:*i32", "--target", "sm_90a", "--maxnreg", "40", emit="ptx")
    assert r.returncode == 0
    # Past what a thread can hold: refused by the compiler's option check, at the kernel.
    first = located(wwc(plain, "k", "x_ptr:*i32", "--target", "sm_90a", "--maxnreg", "300"),
                    plain, 7)
    assert "maxnreg=300: a thread holds 1 to 255 registers" in first
