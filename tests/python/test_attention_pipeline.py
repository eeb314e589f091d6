"""The software-pipelined tl.dot attention (sm_90a): python/warpweave/ops/kernels/attention.py at ops.attention's GPU
configuration, whose sm_90a Tile IR (Q stored once into a swizzled buffer, K and V copied by
cp.async into multi-buffered buffers ahead of use, S = Q K^T and O += P V as async wgmma) runs in
the interpreter here against a float64 NumPy reference on odd sequence lengths; and the
compiled PTX and cubin for the H200 (cp.async, wgmma, no spills)."""

import importlib
import math
import os
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

from warpweave import ops  # noqa: E402
from warpweave.ops import _common  # noqa: E402

ATTENTION = os.path.join(ROOT, "python", "warpweave", "ops", "kernels", "attention.py")


@pytest.fixture
def gpu_config(monkeypatch):
    """ops.attention picks its GPU block sizes, warps and stages, but runs in the interpreter on
    the NumPy arrays (which executes the sm_90a Tile IR)."""
    monkeypatch.setattr(_common._Place, "on_gpu", property(lambda self: True))


def attention_ref(q, k, v, causal, sm_scale):
    s = np.einsum("zhmd,zhnd->zhmn", q.astype(np.float64), k.astype(np.float64)) * sm_scale
    if causal:
        n = s.shape[-1]
        s = np.where(np.tril(np.ones((n, n), bool)), s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    p = np.exp(s - m)
    total = p.sum(axis=-1, keepdims=True)
    lse2 = (m[..., 0] + np.log(total[..., 0])) / math.log(2.0)
    return np.einsum("zhmn,zhnd->zhmd", p / total, v.astype(np.float64)), lse2


def rel_error(out, ref):
    out = out.astype(np.float64)
    assert np.isfinite(out).all(), "non-finite values in the output"
    return np.linalg.norm(out - ref) / max(np.linalg.norm(ref), 1e-30)


@pytest.mark.parametrize("shape", [
    (1, 2, 200, 64),   # past three key blocks, the last one partly masked
    (1, 1, 77, 128),   # two key blocks, both query rows blocks partly empty
    (2, 1, 130, 64),   # one row past two query blocks
    (1, 1, 1, 64),     # one key: prologue copies past the end only
    (1, 2, 37, 16),    # the narrowest rows (32 bytes: 32-byte swizzle)
    (1, 1, 150, 32),
])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_pipelined_attention_in_interpreter(gpu_config, rng, shape, causal, dtype):
    if dtype == "bfloat16":
        ml_dtypes = pytest.importorskip("ml_dtypes")
        np_dtype = ml_dtypes.bfloat16
    else:
        np_dtype = np.float16
    q, k, v = (rng.standard_normal(shape).astype(np_dtype) for _ in range(3))
    sm_scale = 0.5 / math.sqrt(shape[-1]) + 0.1
    out, lse = ops.attention(q, k, v, causal=causal, sm_scale=sm_scale, return_lse=True)
    ref, lse_ref = attention_ref(q, k, v, causal, sm_scale)
    assert out.shape == shape and lse.shape == shape[:3]
    assert rel_error(out, ref) < (2e-3 if dtype == "float16" else 1.6e-2)
    np.testing.assert_allclose(lse, lse_ref, rtol=1e-4, atol=1e-4)


@pytest.fixture
def compiled(monkeypatch, gpu_compiles):
    """ops.attention as on the H200, its launches replaced by compiles (to a cubin) for sm_90a;
    the compiled kernels are returned in a list."""
    # Compiled here, not served from a disk cache that an older build of the pass may have
    # filled for the same source (the cache key holds the compiler's version, not its build).
    monkeypatch.setenv("WARPWEAVE_CACHE_DISABLE", "1")
    return gpu_compiles.kernels


@pytest.mark.parametrize("head_dim", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
def test_gpu_configuration_is_pipelined_without_spills(compiled, head_dim, causal):
    x = np.ones((1, 2, 1024, head_dim), np.float16)
    ops.attention(x, x, x, causal=causal)
    assert len(compiled) == 1
    kernel = compiled[0]
    ptx = kernel.asm["ptx"]
    assert "cp.async.cg.shared.global" in ptx
    # S = Q K^T from two swizzled buffers, P V with A from registers.
    assert f"wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16" in ptx
    assert f"wgmma.mma_async.sync.aligned.m64n{head_dim}k16.f32.f16.f16" in ptx
    assert "wgmma.wait_group.sync.aligned 0;" in ptx
    # Only Q is loaded by plain loads (then stored to its buffer); K and V arrive by cp.async.
    assert ptx.count("ld.global") == head_dim // 16
    print(f"head_dim {head_dim} causal {causal}: {kernel.n_regs} registers, "
          f"{kernel.n_spills} spill bytes, {kernel.shared} B shared")
    assert kernel.n_spills == 0


def wwc(*args):
    return subprocess.run([sys.executable, "-m", "warpweave", *map(str, args)],
                          capture_output=True, text=True, timeout=120)


def signature(head_dim, causal):
    strides = ",".join(f"stride_{t}{d}:i32:16" for t in "qkvo" for d in ("zhm" if t in "qo"
                                                                           else "zhn"))
    return ("q_ptr:*fp16:16,k_ptr:*fp16:16,v_ptr:*fp16:16,out_ptr:*fp16:16,lse_ptr:*fp32:16,"
            f"sm_scale:fp32,{strides},H:i32,N_CTX:i32,HEAD_DIM={head_dim},BLOCK_M=128,"
            f"BLOCK_N=64,CAUSAL={causal}")


@pytest.mark.parametrize("head_dim,causal", [(64, False), (128, True)])
def test_wwc_emits_the_pipelined_tile_ir(head_dim, causal):
    common = [ATTENTION, "--kernel", "attention_fwd_kernel", "--signature",
              signature(head_dim, causal), "--num-warps", "8"]
    r = wwc(*common, "--target", "sm_90a", "--num-stages", "3", "--emit", "tile-ir")
    assert r.returncode == 0, r.stderr
    ir = r.stdout
    # Q's buffer, K and V in three slots each, two iterations copied ahead in the prologue.
    assert f"buffer<1x128x{head_dim}xfp16, smem>" in ir
    assert ir.count(f"local_alloc {{storage = \"smem\"}} : buffer<3x64x{head_dim}xfp16, smem>") == 2
    assert ir.count("async_load ") == 6
    assert ir.count("async_dot ") == 2 and ir.count("local_trans ") == 1
    assert " = dot " not in ir
    # Off Hopper, or with num_stages=1, the plain dots stay.
    for extra in (["--target", "sm_80", "--num-stages", "3"],
                  ["--target", "sm_90a", "--num-stages", "1"]):
        r = wwc(*common, *extra, "--emit", "tile-ir")
        assert r.returncode == 0, r.stderr
        assert r.stdout.count(" = dot ") == 2 and "async_load" not in r.stdout, extra
