"""Software pipelining of loops with several tl.dots (SoftwarePipeline.cpp, analyzeMultiDot):
attention's backward pass (python/warpweave/ops/kernels/attention_bwd.py at ops.attention_bwd's
GPU configuration) and a small kernel of this file, whose sm_90a Tile IR (the loop-invariant A
operands stored once into shared memory before the loop, the two per-iteration loads that the
dots read as B copied by cp.async S - 1 iterations ahead, every dot an async wgmma) runs in the
interpreter against float64 references; and the Tile IR / PTX that wwc emits for them."""

import importlib
import os
import subprocess
import sys

import numpy as np
import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

torch = pytest.importorskip("torch", reason="PyTorch is not installed")
native_loader = importlib.import_module("warpweave._native_loader")
pytestmark = pytest.mark.skipif(not native_loader.available(),
                                reason="warpweave._native is not built (pip install .)")

import warpweave as ww  # noqa: E402
import warpweave.language as tl  # noqa: E402
from warpweave import ops  # noqa: E402
from warpweave.ops import _common  # noqa: E402

ATTENTION_BWD = os.path.join(ROOT, "python", "warpweave", "ops", "kernels", "attention_bwd.py")
F = torch.nn.functional


@pytest.fixture(autouse=True)
def fresh_compiles(monkeypatch):
    """Compiled here, not served from a disk cache that an older build of the pass may have
    filled for the same source (the cache key holds the compiler's version, not its build)."""
    monkeypatch.setenv("WARPWEAVE_CACHE_DISABLE", "1")


@ww.jit
def multi_dot_kernel(x_ptr, b_ptr, c_ptr, out_ptr, ITERS,
                     M: tl.constexpr, D: tl.constexpr, N: tl.constexpr):
    """out = sum_j fp16(x @ b_j) @ c_j + (x @ c_j^T) scaled, for b_j [D, N] and c_j [N, D]:
    x is loop-invariant, b_j and c_j are read as B directly and (c_j) through its transpose."""
    offs_m = tl.arange(0, M)
    offs_d = tl.arange(0, D)
    offs_n = tl.arange(0, N)
    x = tl.load(x_ptr + offs_m[:, None] * D + offs_d[None, :])
    acc = tl.zeros([M, D], dtype=tl.float32)
    side = tl.zeros([M, N], dtype=tl.float32)
    b_ptrs = b_ptr + offs_d[:, None] * N + offs_n[None, :]
    c_ptrs = c_ptr + offs_n[:, None] * D + offs_d[None, :]
    for j in range(0, ITERS):
        b = tl.load(b_ptrs)
        c = tl.load(c_ptrs)
        s = tl.dot(x, b)
        acc = tl.dot(s.to(tl.float16), c, acc)
        t = tl.dot(x, tl.trans(c))
        side += t * 0.5
        b_ptrs += D * N
        c_ptrs += N * D
    tl.store(out_ptr + offs_m[:, None] * D + offs_d[None, :], acc)
    tl.store(out_ptr + M * D + offs_m[:, None] * N + offs_n[None, :], side)


@ww.jit
def two_loops_kernel(x_ptr, y_ptr, b_ptr, c_ptr, out_ptr, ITERS,
                     M: tl.constexpr, D: tl.constexpr, N: tl.constexpr):
    """Two multi-dot loops one after the other, the second with other invariant operands (y),
    whose buffers share their bytes with the first loop's (x's, and the rings)."""
    offs_m = tl.arange(0, M)
    offs_d = tl.arange(0, D)
    offs_n = tl.arange(0, N)
    x = tl.load(x_ptr + offs_m[:, None] * D + offs_d[None, :])
    acc = tl.zeros([M, D], dtype=tl.float32)
    side = tl.zeros([M, N], dtype=tl.float32)
    b_ptrs = b_ptr + offs_d[:, None] * N + offs_n[None, :]
    c_ptrs = c_ptr + offs_n[:, None] * D + offs_d[None, :]
    for j in range(0, ITERS):
        b = tl.load(b_ptrs)
        c = tl.load(c_ptrs)
        s = tl.dot(x, b)
        acc = tl.dot(s.to(tl.float16), c, acc)
        side = tl.dot(x, tl.trans(c), side)
        b_ptrs += D * N
        c_ptrs += N * D
    y = tl.load(y_ptr + offs_m[:, None] * D + offs_d[None, :])
    b_ptrs = b_ptr + offs_d[:, None] * N + offs_n[None, :]
    c_ptrs = c_ptr + offs_n[:, None] * D + offs_d[None, :]
    for j in range(0, ITERS):
        b = tl.load(b_ptrs)
        c = tl.load(c_ptrs)
        s = tl.dot(y, b)
        acc = tl.dot(s.to(tl.float16), c, acc)
        side = tl.dot(y, tl.trans(c), side)
        b_ptrs += D * N
        c_ptrs += N * D
    tl.store(out_ptr + offs_m[:, None] * D + offs_d[None, :], acc)
    tl.store(out_ptr + M * D + offs_m[:, None] * N + offs_n[None, :], side)


def multi_dot_ref(x, b, c):
    x64 = x.astype(np.float64)
    acc = np.zeros((x.shape[0], c.shape[2]))
    side = np.zeros((x.shape[0], b.shape[2]))
    for j in range(b.shape[0]):
        s = (x64 @ b[j].astype(np.float64)).astype(np.float16).astype(np.float64)
        acc += s @ c[j].astype(np.float64)
        side += 0.5 * (x64 @ c[j].astype(np.float64).T)
    return acc, side


@pytest.mark.parametrize("iters,num_stages", [(1, 3), (2, 5), (7, 3), (6, 4)])
def test_multi_dot_loop_in_interpreter(rng, iters, num_stages):
    M, D, N = 64, 32, 32
    x = (rng.standard_normal((M, D)) * 0.5).astype(np.float16)
    b = (rng.standard_normal((iters, D, N)) * 0.5).astype(np.float16)
    c = (rng.standard_normal((iters, N, D)) * 0.5).astype(np.float16)
    out = np.full(M * D + M * N, np.nan, np.float32)  # poisoned
    multi_dot_kernel[(1,)](x, b, c, out, iters, M=M, D=D, N=N, num_warps=4,
                           num_stages=num_stages)
    acc, side = multi_dot_ref(x, b, c)
    np.testing.assert_allclose(out[:M * D].reshape(M, D), acc, rtol=2e-2, atol=2e-2)
    np.testing.assert_allclose(out[M * D:].reshape(M, N), side, rtol=1e-3, atol=1e-3)


@ww.jit
def dkdv_like_kernel(k_ptr, q_ptr, do_ptr, out_ptr, ITERS,
                     N: tl.constexpr, D: tl.constexpr, M: tl.constexpr):
    """The shape of attention's dK / dV loop: qT [D, M] loaded from [M, D] memory (its
    addresses consecutive down the columns: copied transposed), read as B directly and through
    tl.trans; k loop-invariant and read by two dots."""
    offs_n = tl.arange(0, N)
    offs_d = tl.arange(0, D)
    offs_m = tl.arange(0, M)
    k = tl.load(k_ptr + offs_n[:, None] * D + offs_d[None, :])
    dk = tl.zeros([N, D], dtype=tl.float32)
    dv = tl.zeros([N, D], dtype=tl.float32)
    qT_ptrs = q_ptr + offs_m[None, :] * D + offs_d[:, None]
    do_ptrs = do_ptr + offs_m[:, None] * D + offs_d[None, :]
    for j in range(0, ITERS):
        qT = tl.load(qT_ptrs)
        do = tl.load(do_ptrs)
        s_t = tl.dot(k, qT)
        dv = tl.dot((s_t * 0.25).to(tl.float16), do, dv)
        dp_t = tl.dot(k, tl.trans(do))
        dk = tl.dot(dp_t.to(tl.float16), tl.trans(qT), dk)
        qT_ptrs += M * D
        do_ptrs += M * D
    tl.store(out_ptr + offs_n[:, None] * D + offs_d[None, :], dk)
    tl.store(out_ptr + N * D + offs_n[:, None] * D + offs_d[None, :], dv)


@pytest.mark.parametrize("iters,num_stages", [(1, 5), (3, 3), (6, 5)])
def test_dkdv_like_loop_in_interpreter(rng, iters, num_stages):
    N, D, M = 64, 32, 16
    k = (rng.standard_normal((N, D)) * 0.5).astype(np.float16)
    q = (rng.standard_normal((iters, M, D)) * 0.5).astype(np.float16)
    do = (rng.standard_normal((iters, M, D)) * 0.5).astype(np.float16)
    out = np.full(2 * N * D, np.nan, np.float32)  # poisoned
    dkdv_like_kernel[(1,)](k, q, do, out, iters, N=N, D=D, M=M, num_warps=4,
                           num_stages=num_stages)
    k64 = k.astype(np.float64)
    dk = np.zeros((N, D))
    dv = np.zeros((N, D))
    for j in range(iters):
        q64, do64 = q[j].astype(np.float64), do[j].astype(np.float64)
        p_t = (0.25 * (k64 @ q64.T)).astype(np.float16).astype(np.float64)
        dv += p_t @ do64
        dp_t = (k64 @ do64.T).astype(np.float16).astype(np.float64)
        dk += dp_t @ q64
    np.testing.assert_allclose(out[:N * D].reshape(N, D), dk, rtol=2e-2, atol=2e-2)
    np.testing.assert_allclose(out[N * D:].reshape(N, D), dv, rtol=2e-2, atol=2e-2)


def test_dkdv_like_loop_copies_qT_transposed():
    r = wwc(__file__, "--kernel", "dkdv_like_kernel", "--signature",
            "k_ptr:*fp16:16,q_ptr:*fp16:16,do_ptr:*fp16:16,out_ptr:*fp32:16,ITERS:i32,N=64,D=32,"
            "M=16", "--target", "sm_90a", "--num-warps", 4, "--num-stages", 3, "--emit",
            "tile-ir")
    assert r.returncode == 0, r.stderr
    ir = r.stdout
    assert ir.count("async_dot ") == 4 and " = dot " not in ir
    # qT's ring holds [M, D] tiles (q as in memory), do's [M, D] too; each buffer in a storage
    # alias region of its own role, which later multi-dot loops of the block would share.
    rings = [line for line in ir.splitlines() if "pipeline_b" in line and "local_alloc" in line]
    assert len(rings) == 2, rings
    assert all("alias = " in line and "buffer<3x16x32xfp16, smem>" in line for line in rings)
    # k stored once, read by two dots.
    assert ir.count("local_store") == 1
    r = wwc(__file__, "--kernel", "dkdv_like_kernel", "--signature",
            "k_ptr:*fp16:16,q_ptr:*fp16:16,do_ptr:*fp16:16,out_ptr:*fp32:16,ITERS:i32,N=64,D=32,"
            "M=16", "--target", "sm_90a", "--num-warps", 4, "--num-stages", 3, "--emit", "ptx")
    assert r.returncode == 0, r.stderr
    # Every copy a vector cp.async (a thread's 8 bytes of these small tiles), no element-wise
    # copy through registers; only k is loaded by plain loads.
    assert "cp.async.ca.shared.global" in r.stdout and "st.shared.b16" not in r.stdout
    assert r.stdout.count("ld.global") == 2


def loop_body(ptx):
    """The PTX of the kernel's one `for` loop, from its label to its back edge."""
    import re
    m = re.search(r"bra\.uni (\$L_for_\d+);", ptx)
    return ptx[ptx.index(m.group(1) + ":"):m.end()]


@pytest.mark.parametrize("n,d,waits", [(64, 32, 2), (128, 128, 4)])
def test_dkdv_like_loop_retires_accumulators_lazily(n, d, waits):
    # dV and dK are only carried: dV's MMA is retired by dP^T's wait, dK's by the next
    # iteration's first wait (the copies into the slot it reads go out after that wait), and
    # the last one after the loop. Two wgmma waits per iteration, not four (Triton's schedule).
    # Accumulators of more than half a thread's registers (dK and dV of 128 each) keep every
    # MMA retired where it stands: ptxas would only spill more.
    r = wwc(__file__, "--kernel", "dkdv_like_kernel", "--signature",
            "k_ptr:*fp16:16,q_ptr:*fp16:16,do_ptr:*fp16:16,out_ptr:*fp32:16,ITERS:i32,"
            f"N={n},D={d},M=16", "--target", "sm_90a", "--num-warps", 4, "--num-stages", 3,
            "--emit", "ptx")
    assert r.returncode == 0, r.stderr
    body = loop_body(r.stdout)
    assert body.count("wgmma.commit_group") == 4
    assert body.count("wgmma.wait_group") == waits, body
    if waits == 2:
        assert body.index("wgmma.wait_group") < body.index("cp.async.ca.shared.global")
        after = r.stdout[r.stdout.index("$L_endfor_"):]
        assert after.index("wgmma.wait_group.sync.aligned 0;") < after.index("st.global")


@pytest.mark.parametrize("iters,num_stages", [(1, 3), (5, 4)])
def test_two_loops_in_interpreter(rng, iters, num_stages):
    M, D, N = 64, 32, 32
    x, y = ((rng.standard_normal((M, D)) * 0.5).astype(np.float16) for _ in range(2))
    b = (rng.standard_normal((iters, D, N)) * 0.5).astype(np.float16)
    c = (rng.standard_normal((iters, N, D)) * 0.5).astype(np.float16)
    out = np.full(M * D + M * N, np.nan, np.float32)  # poisoned
    two_loops_kernel[(1,)](x, y, b, c, out, iters, M=M, D=D, N=N, num_warps=4,
                           num_stages=num_stages)
    acc_x, side_x = multi_dot_ref(x, b, c)
    acc_y, side_y = multi_dot_ref(y, b, c)
    np.testing.assert_allclose(out[:M * D].reshape(M, D), acc_x + acc_y, rtol=2e-2, atol=3e-2)
    np.testing.assert_allclose(out[M * D:].reshape(M, N), 2 * (side_x + side_y), rtol=1e-3,
                               atol=2e-3)


def test_two_loops_share_their_buffers():
    r = wwc(__file__, "--kernel", "two_loops_kernel", "--signature",
            "x_ptr:*fp16:16,y_ptr:*fp16:16,b_ptr:*fp16:16,c_ptr:*fp16:16,out_ptr:*fp32:16,"
            "ITERS:i32,M=64,D=32,N=32", "--target", "sm_90a", "--num-warps", 4,
            "--num-stages", 3, "--emit", "tile-ir")
    assert r.returncode == 0, r.stderr
    allocs = [line.split("alias = ")[1].split("}")[0] for line in r.stdout.splitlines()
              if "local_alloc" in line]
    # x's and y's buffers, and the two loops' rings, pairwise in one region each.
    assert len(allocs) == 6 and len(set(allocs)) == 3, allocs
    assert r.stdout.count("async_dot ") == 6 and " = dot " not in r.stdout


def reference(q, k, v, do, causal):
    qt, kt, vt = (torch.tensor(np.asarray(a, np.float64), requires_grad=True) for a in (q, k, v))
    out = F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)
    out.backward(torch.tensor(np.asarray(do, np.float64)))
    return qt.grad.numpy(), kt.grad.numpy(), vt.grad.numpy()


@pytest.mark.parametrize("shape", [(1, 2, 150, 64), (1, 1, 70, 128)])
@pytest.mark.parametrize("causal", [False, True])
def test_attention_bwd_gpu_configuration_in_interpreter(monkeypatch, shape, causal):
    """ops.attention_bwd at its GPU block sizes, warps and stages runs the pipelined sm_90a Tile
    IR in the interpreter."""
    monkeypatch.setattr(_common._Place, "on_gpu", property(lambda self: True))
    rng = np.random.default_rng(11)
    q, k, v, do = (rng.standard_normal(shape).astype(np.float16) for _ in range(4))
    out, lse = ops.attention(q, k, v, causal=causal, return_lse=True)
    grads = ops.attention_bwd(do, q, k, v, out, lse, causal=causal)
    for name, mine, theirs in zip(("dq", "dk", "dv"), grads, reference(q, k, v, do, causal)):
        err = np.abs(mine.astype(np.float64) - theirs).max()
        assert err <= 4e-3 * max(1.0, np.abs(theirs).max()), (name, err)


def wwc(*args):
    return subprocess.run([sys.executable, "-m", "warpweave", *map(str, args)],
                          capture_output=True, text=True, timeout=300)


def bwd_args(kernel, head_dim, causal, emit, num_warps=4):
    sig = ("q_ptr:*fp16:16,k_ptr:*fp16:16,v_ptr:*fp16:16,do_ptr:*fp16:16,lse_ptr:*fp32:16,"
           "delta_ptr:*fp32:16," + ("dk_ptr:*fp16:16,dv_ptr:*fp16:16," if kernel == "dkdv"
                                    else "dq_ptr:*fp16:16,") +
           f"sm_scale:fp32,N_CTX:i32:16,HEAD_DIM={head_dim},BLOCK_M=64,BLOCK_N=64,"
           f"CAUSAL={causal}")
    return [ATTENTION_BWD, "--kernel", f"attention_bwd_{kernel}_kernel", "--signature", sig,
            "--target", "sm_90a", "--num-warps", num_warps, "--num-stages", 3, "--emit", emit]


@pytest.mark.parametrize("kernel", ["dkdv", "dq"])
def test_attention_bwd_loops_are_pipelined(kernel):
    r = wwc(*bwd_args(kernel, 64, True, "tile-ir"))
    assert r.returncode == 0, r.stderr
    ir = r.stdout
    # Both loop-invariant operands stored once, two cp.async rings, every dot an async wgmma.
    assert ir.count("local_store") == 2
    assert "pipeline_invariant" in ir and "pipeline_b0" in ir and "pipeline_b1" in ir
    assert ir.count("async_dot ") == (4 if kernel == "dkdv" else 3)
    assert " = dot " not in ir
    assert "async_wait_group {pendings = 1}" in ir


def test_multi_dot_kernel_is_pipelined():
    r = wwc(__file__, "--kernel", "multi_dot_kernel", "--signature",
            "x_ptr:*fp16:16,b_ptr:*fp16:16,c_ptr:*fp16:16,out_ptr:*fp32:16,ITERS:i32,M=64,D=32,"
            "N=32", "--target", "sm_90a", "--num-warps", 4, "--num-stages", 4, "--emit",
            "tile-ir")
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("async_dot ") == 3 and " = dot " not in r.stdout
    assert r.stdout.count("local_store") == 1 and "async_wait_group {pendings = 2}" in r.stdout


@pytest.mark.parametrize("head_dim", [64, 128])
@pytest.mark.parametrize("kernel", ["dkdv", "dq"])
def test_attention_bwd_ptx_is_accepted_by_ptxas(tmp_path, requires_ptxas, kernel, head_dim):
    meta = tmp_path / "meta.json"
    r = wwc(*bwd_args(kernel, head_dim, True, "cubin", 4 if head_dim <= 64 else 8),
            "-o", tmp_path / "k.cubin", "--meta", meta)
    assert r.returncode == 0, r.stderr
    import json
    info = json.loads(meta.read_text())
    print(f"{kernel} D={head_dim}: {info['registers']} registers, "
          f"{info['spill_bytes']} spill bytes, {info['shared_bytes']} B shared")
    r = wwc(*bwd_args(kernel, head_dim, True, "ptx", 4 if head_dim <= 64 else 8))
    assert r.returncode == 0, r.stderr
    assert "cp.async.cg.shared.global" in r.stdout
    assert "wgmma.mma_async" in r.stdout
