"""The software-pipelined tl.dot matmul (sm_90a): python/warpweave/ops/kernels/matmul.py at its GPU block sizes, whose
sm_90a Tile IR (cp.async copies into multi-buffered shared memory, async wgmma with one MMA in
flight) runs in the interpreter here, against a float64 NumPy reference on odd sizes; and the
pipelined Tile IR and PTX as `python -m warpweave` emits them."""

import importlib
import os
import re
import subprocess
import sys

import numpy as np
import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

native_loader = importlib.import_module("warpweave._native_loader")
pytestmark = pytest.mark.skipif(not native_loader.available(),
                                reason="warpweave._native is not built (pip install .)")

from warpweave.ops.kernels import matmul as matmul_module  # noqa: E402
from warpweave import ops  # noqa: E402
from warpweave.ops import _common  # noqa: E402

MATMUL = os.path.join(ROOT, "python", "warpweave", "ops", "kernels", "matmul.py")


def rel_error(out, ref):
    out = out.astype(np.float64)
    assert np.isfinite(out).all(), "non-finite values in the output"
    return np.linalg.norm(out - ref) / max(np.linalg.norm(ref), 1e-30)


def run_matmul(a, b, num_stages, block=(128, 128, 64), num_warps=8):
    """Launches python/warpweave/ops/kernels/matmul.py's kernel at a GPU configuration on NumPy arrays (interpreter)."""
    M, K = a.shape
    N = b.shape[1]
    c = np.full((M, N), np.nan, np.float16)  # poisoned
    bm, bn, bk = block
    grid = (-(-M // bm) * -(-N // bn),)
    matmul_module.matmul_kernel[grid](
        a, b, c, M, N, K, a.strides[0] // 2, a.strides[1] // 2, b.strides[0] // 2,
        b.strides[1] // 2, c.strides[0] // 2, c.strides[1] // 2, BLOCK_M=bm, BLOCK_N=bn,
        BLOCK_K=bk, GROUP_M=8, ACTIVATION="", num_warps=num_warps, num_stages=num_stages)
    return c


@pytest.mark.parametrize("mnk,num_stages", [
    ((200, 136, 328), 3),   # K not a multiple of BLOCK_K; M, N past one tile
    ((200, 136, 328), 4),
    ((130, 70, 40), 5),     # one K tile, three prologue iterations (two past the end)
    ((64, 256, 512), 4),    # several full K tiles
])
def test_pipelined_matmul_in_interpreter(rng, mnk, num_stages):
    M, N, K = mnk
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    c = run_matmul(a, b, num_stages)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    assert rel_error(c, ref) < 2e-3


def test_ops_matmul_gpu_configuration_in_interpreter(rng, monkeypatch):
    # The wrapper's GPU block sizes and stages, computed by the interpreter.
    monkeypatch.setattr(_common._Place, "on_gpu", property(lambda self: True))
    a = rng.standard_normal((260, 200)).astype(np.float16)
    b = rng.standard_normal((200, 300)).astype(np.float16)
    c = ops.matmul(a, b, activation="relu")
    ref = np.maximum(a.astype(np.float64) @ b.astype(np.float64), 0)
    assert rel_error(c, ref) < 2e-3
    # A transposed view: A's pointers are contiguous along M, across the buffer's rows, so its
    # copies go element by element (no cp.async vector), still through the pipeline.
    at = rng.standard_normal((200, 130)).astype(np.float16)
    c = ops.matmul(at.T, b)
    assert rel_error(c, at.T.astype(np.float64) @ b.astype(np.float64)) < 2e-3


def wwc(*args):
    return subprocess.run([sys.executable, "-m", "warpweave", *map(str, args)],
                          capture_output=True, text=True, timeout=120)


SIGNATURE = ("a_ptr:*fp16:16,b_ptr:*fp16:16,c_ptr:*fp16:16,M:i32,N:i32,K:i32:16,"
             "stride_am:i32:16,stride_ak:i32:1,stride_bk:i32:16,stride_bn:i32:1,"
             "stride_cm:i32:16,stride_cn:i32:1,BLOCK_M=128,BLOCK_N=128,BLOCK_K=64,GROUP_M=8,"
             "ACTIVATION=\"\"")


def test_wwc_emits_the_pipelined_tile_ir_and_ptx():
    common = [MATMUL, "--kernel", "matmul_kernel", "--signature", SIGNATURE, "--num-warps", "8",
              "--num-stages", "3"]
    r = wwc(*common, "--target", "sm_90a", "--emit", "tile-ir")
    assert r.returncode == 0, r.stderr
    ir = r.stdout
    assert "buffer<3x128x64xfp16, smem>" in ir and "buffer<3x64x128xfp16, smem>" in ir
    # num_stages - 1 = two prologue iterations and the loop, A and B each (Triton's distance)
    assert ir.count("async_load ") == 6
    assert "async_dot " in ir and "{pendings = 1}" in ir
    assert " = dot " not in ir
    r = wwc(*common, "--target", "sm_80", "--emit", "tile-ir")
    assert r.returncode == 0, r.stderr
    assert " = dot " in r.stdout and "async_load" not in r.stdout
    r = wwc(*common, "--target", "sm_90a", "--emit", "ptx")
    assert r.returncode == 0, r.stderr
    assert "cp.async.cg.shared.global" in r.stdout
    assert "wgmma.wait_group.sync.aligned 1;" in r.stdout


def test_pointer_advances_follow_the_last_copy_and_write_the_carried_pointers():
    # The K loop carries A's pointers as their entry values plus one byte offset
    # (transforms/LoopPointerOffsets.cpp): each copy's address is entry + offset, and the offset
    # advances by BLOCK_K elements (`add.s64 %o, %o, 128`) once, after the iteration's copies,
    # in the register the loop carries: no pointer tensor advanced in place, no copy back.
    r = wwc(MATMUL, "--kernel", "matmul_kernel", "--signature", SIGNATURE, "--num-warps", "4",
            "--num-stages", "4", "--target", "sm_90a", "--emit", "ptx")
    assert r.returncode == 0, r.stderr
    body = r.stdout.split("$L_for_", 1)[1].split("bra.uni", 1)[0]
    lines = [line.strip() for line in body.splitlines()]
    advances = [i for i, line in enumerate(lines)
                if re.fullmatch(r"add\.s64 (%rd\d+), \1, 128;", line)]
    assert len(advances) == 1, body  # A's offset, for the thread's 8 rows of A
    offset = lines[advances[0]].split()[1].rstrip(",")
    copies = [i for i, line in enumerate(lines) if line.startswith("cp.async.cg")]
    a_copies = []
    for j in copies:
        addr = re.search(r"\], \[(%rd\d+)\]", lines[j]).group(1)
        src = next(line for line in lines if line.startswith(f"add.s64 {addr}, "))
        if src.endswith(f", {offset};"):
            a_copies.append(j)
    assert len(a_copies) == 8, body
    assert max(a_copies) < advances[0], body
    assert not re.search(r"mov\.b64 %rd\d+, %rd\d+;", body), body
