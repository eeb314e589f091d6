"""Every kernel in python/warpweave/ops/kernels/ runs clean in the interpreter under several schedules: seeded random
interleavings of its async tasks (WARPWEAVE_INTERP_SEED, WARPWEAVE_INTERP_SCHEDULES) must bring
no synchronization report (race, deadlock, over-arrival, byte count) and the right results. The
plain kernels go through warpweave.ops; the Hopper TLX kernels, whose wrappers are GPU-only,
are launched directly with tensor descriptors over NumPy arrays at small block sizes."""

import importlib
import math
import os
import sys

import numpy as np
import pytest

import warpweave as ww

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

native_loader = importlib.import_module("warpweave._native_loader")
pytestmark = pytest.mark.skipif(not native_loader.available(),
                                reason="warpweave._native is not built (pip install .)")

from warpweave import ops  # noqa: E402
from warpweave.ops.kernels.hopper import (attention_ws, gemm_pipelined, gemm_ws,  # noqa: E402
                            gemm_ws_pingpong, grouped_mm_ws)

# (first seed, schedules): seed 0 alone is the deterministic round-robin schedule; the others
# run that many seeded interleavings (seed, seed + 1, ...) and keep the last one's results.
SCHEDULES = [(0, 1), (1, 4), (77, 3), (123456789, 2)]


@pytest.fixture(params=SCHEDULES, ids=[f"seed{s}x{n}" for s, n in SCHEDULES])
def schedules(request, monkeypatch):
    seed, count = request.param
    monkeypatch.setenv("WARPWEAVE_INTERP_SEED", str(seed))
    monkeypatch.setenv("WARPWEAVE_INTERP_SCHEDULES", str(count))
    return request.param


@pytest.fixture
def rng():
    return np.random.default_rng(20261130)


def close(out, ref, tol):
    out = np.asarray(out, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    assert out.shape == ref.shape
    assert np.all(np.isfinite(out))
    err = np.linalg.norm(out - ref) / max(np.linalg.norm(ref), 1e-30)
    assert err <= tol, f"relative error {err:.3g}"


def test_add(schedules, rng):
    x, y = rng.standard_normal(1000).astype(np.float32), rng.standard_normal(1000).astype(np.float32)
    close(ops.add(x, y), x.astype(np.float64) + y, 1e-6)


@pytest.mark.parametrize("online", [False, True])
def test_softmax(schedules, rng, online):
    x = rng.standard_normal((5, 300)).astype(np.float32)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    close(ops.softmax(x, online=online), e / e.sum(axis=1, keepdims=True), 1e-5)


def test_layernorm_forward_and_backward(schedules, rng):
    x = rng.standard_normal((6, 200)).astype(np.float32)
    w, b = rng.standard_normal(200).astype(np.float32), rng.standard_normal(200).astype(np.float32)
    y, mean, rstd = ops.layernorm_fwd(x, w, b)
    x64 = x.astype(np.float64)
    mu = x64.mean(axis=1, keepdims=True)
    inv = 1.0 / np.sqrt(x64.var(axis=1, keepdims=True) + 1e-5)
    close(y, (x64 - mu) * inv * w + b, 1e-5)
    dy = rng.standard_normal(x.shape).astype(np.float32)
    dx, dw, db = ops.layernorm_bwd(dy, x, w, mean, rstd)
    xhat = (x64 - mu) * inv
    close(db, dy.astype(np.float64).sum(axis=0), 1e-5)
    close(dw, (dy * xhat).sum(axis=0), 1e-5)
    g = dy * w
    ref_dx = inv * (g - g.mean(axis=1, keepdims=True) -
                    xhat * (g * xhat).mean(axis=1, keepdims=True))
    close(dx, ref_dx, 1e-4)


def test_matmul(schedules, rng):
    a = rng.standard_normal((40, 24)).astype(np.float16)
    b = rng.standard_normal((24, 36)).astype(np.float16)
    close(ops.matmul(a, b), a.astype(np.float64) @ b, 2e-3)


def test_embedding_bag(schedules, rng):
    weight = rng.standard_normal((50, 16)).astype(np.float32)
    indices = rng.integers(0, 50, 30).astype(np.int64)
    offsets = np.array([0, 4, 4, 11, 20, 30], dtype=np.int64)  # CSR: num_bags + 1 entries
    ref = np.stack([weight[indices[s:e]].astype(np.float64).sum(axis=0)
                    for s, e in zip(offsets[:-1], offsets[1:])])
    close(ops.embedding_bag(weight, indices, offsets), ref, 1e-6)


def test_row_reductions(schedules, rng):
    x = rng.standard_normal((7, 130)).astype(np.float32)
    close(ops.row_sum(x), x.astype(np.float64).sum(axis=1), 1e-6)
    values, indices = ops.row_max(x)
    close(values, x.max(axis=1), 0)
    np.testing.assert_array_equal(indices, x.argmax(axis=1))


@pytest.mark.parametrize("causal", [False, True])
def test_attention(schedules, rng, causal):
    q, k, v = (rng.standard_normal((1, 2, 40, 16)).astype(np.float16) for _ in range(3))
    s = np.einsum("zhid,zhjd->zhij", q.astype(np.float64), k) / math.sqrt(16)
    if causal:
        s = np.where(np.tril(np.ones((40, 40), bool)), s, -np.inf)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    ref = np.einsum("zhij,zhjd->zhid", p / p.sum(axis=-1, keepdims=True), v)
    close(ops.attention(q, k, v, causal=causal), ref, 5e-3)


# ------------------------------------------------------------------------------------------------
# Hopper TLX kernels (warp-specialized: these are the ones the schedules actually vary)
# ------------------------------------------------------------------------------------------------


def halves(rng, shape, scale):
    return (rng.standard_normal(shape) * scale).astype(np.float16)


def desc(t, block):
    return ww.TensorDescriptor(t, list(t.shape), [s // t.itemsize for s in t.strides], block)


def test_gemm_ws(schedules, rng):
    M, N, K = 100, 72, 48
    a, b = halves(rng, (M, K), 0.25), halves(rng, (K, N), 0.25)
    c = np.full((M, N), np.nan, np.float16)
    gemm_ws.gemm_ws_kernel[(2,)](desc(a, [32, 16]), desc(b, [16, 32]), desc(c, [32, 32]), M, N, K,
                                 BLOCK_M=64, BLOCK_N=32, BLOCK_K=16, GROUP_M=2, NUM_STAGES=2,
                                 NUM_SMS=2, num_warps=4)
    close(c, a.astype(np.float64) @ b, 2e-3)


@pytest.mark.parametrize("epi_subtile", [1, 2])
def test_grouped_mm_ws(schedules, rng, epi_subtile):
    # Groups of 40, 0, 7 and 33 rows and 10 tail rows on 32-row tiles: two programs take turns
    # over whole tiles (TMA stores), partial ones (masked stores) and the tail's zeros.
    sizes, K, N = [40, 0, 7, 33], 48, 40
    M_total = sum(sizes) + 10
    offs = np.cumsum(sizes).astype(np.int32)
    a, b = halves(rng, (M_total, K), 0.25), halves(rng, (len(sizes), K, N), 0.25)
    c = np.full((M_total, N), np.nan, np.float16)
    grouped_mm_ws.grouped_mm_ws_kernel[(2,)](
        desc(a, [16, 16]), ww.TensorDescriptor(b, [len(sizes) * K, N], [N, 1], [16, 32]),
        desc(c, [16, 32 // epi_subtile]), c, offs, len(sizes), M_total, N, K, BLOCK_M=32,
        BLOCK_N=32, BLOCK_K=16, GROUP_M=2, NUM_STAGES=2, NUM_SMS=2, EPI_SUBTILE=epi_subtile,
        num_warps=4)
    ref = np.zeros((M_total, N))
    for g, (start, end) in enumerate(zip([0, *offs[:-1]], offs)):
        ref[start:end] = a[start:end].astype(np.float64) @ b[g]
    close(c, ref, 2e-3)
    assert not np.any(c[offs[-1]:])


@pytest.mark.parametrize("sizes", [[20, 0, 1, 16, 9], [7, 18, 1, 0, 5, 3, 9]])
@pytest.mark.parametrize("a_mmajor", [False, True])
def test_grouped_mm_ragged_k_ws(schedules, rng, a_mmajor, sizes):
    # K columns split 20, 0, 1, 16 and 9 (10 left over) on 16-deep K steps: the two consumers
    # zero the part of a group's last step that reads into the next group (a generic store to
    # the stage, a proxy fence and their named barrier before the MMA), while two programs take
    # turns over the groups' 2 x 2 tiles (M = 40: the second tile-row stored through masks).
    # Split 7, 18, 1, 0, 5, 3 and 9 (groups from columns 7, 25, 26, 31 and 34), with a's rows
    # contiguous the first step of a group starts at a multiple of 8 columns and the consumers
    # zero its head the same way (the group from column 7: head and tail in different steps;
    # from 26: head and tail in one).
    M, N, K = 40, 48, 56
    offs = np.cumsum(sizes).astype(np.int32)
    a, b = halves(rng, (M, K), 0.25), halves(rng, (K, N), 0.25)
    c = np.full((len(sizes), M, N), np.nan, np.float16)
    if a_mmajor:
        at = np.ascontiguousarray(a.T)
        a_desc = desc(at, [16, 16])
    else:
        a_desc = desc(a, [16, 16])
    grouped_mm_ws.grouped_mm_ragged_k_ws_kernel[(2,)](
        a_desc, desc(b, [16, 32]),
        ww.TensorDescriptor(c, [len(sizes) * M, N], [N, 1], [16, 16]), c, offs, len(sizes), M,
        N, K, BLOCK_M=32, BLOCK_N=32, BLOCK_K=16, GROUP_M=2, NUM_STAGES=2, NUM_SMS=2,
        EPI_SUBTILE=2, A_MMAJOR=a_mmajor, num_warps=4)
    ref = np.zeros((len(sizes), M, N))
    for g, (start, end) in enumerate(zip([0, *offs[:-1]], offs)):
        ref[g] = a[:, start:end].astype(np.float64) @ b[start:end]
    close(c, ref, 2e-3)
    assert not np.any(c[sizes.index(0)])  # the empty group


@pytest.mark.parametrize("smem_epilogue", [True, False])
def test_gemm_ws_pingpong(schedules, rng, smem_epilogue):
    # Six 32x32 tiles on two programs: the consumers of each take turns over its three tiles.
    M, N, K = 96, 64, 48
    a, b = halves(rng, (M, K), 0.25), halves(rng, (K, N), 0.25)
    c = np.full((M, N), np.nan, np.float16)
    gemm_ws_pingpong.gemm_ws_pingpong_kernel[(2,)](
        desc(a, [32, 16]), desc(b, [16, 32]), desc(c, [32, 32]), M, N, K, BLOCK_M=32,
        BLOCK_N=32, BLOCK_K=16, GROUP_M=2, NUM_STAGES=2, NUM_SMS=2,
        SMEM_EPILOGUE=smem_epilogue, num_warps=4)
    close(c, a.astype(np.float64) @ b, 2e-3)


@pytest.mark.parametrize("num_warps", [4, 8])
def test_gemm_pipelined(schedules, rng, num_warps):
    # num_warps=8: two warp groups, each retiring only its own wgmmas (the interpreter reports a
    # refill that is not after a barrier of both).
    M, N, K = 64, 64, 80
    a, b = halves(rng, (M, K), 0.25), halves(rng, (K, N), 0.25)
    c = np.full((M, N), np.nan, np.float16)
    grid = (ww.cdiv(M, 32) * ww.cdiv(N, 32),)
    gemm_pipelined.gemm_pipelined_kernel[grid](desc(a, [32, 16]), desc(b, [16, 32]),
                                               desc(c, [32, 32]), M, N, K, BLOCK_M=32, BLOCK_N=32,
                                               BLOCK_K=16, GROUP_M=2, NUM_STAGES=3,
                                               num_warps=num_warps)
    close(c, a.astype(np.float64) @ b, 2e-3)


def test_attention_ws(schedules, rng):
    zh, n_ctx, d = 2, 64, 16
    q, k, v = (halves(rng, (zh * n_ctx, d), 0.5) for _ in range(3))
    o = np.full((zh * n_ctx, d), np.nan, np.float16)
    lse = np.full((zh, n_ctx), np.nan, np.float32)
    scale = 0.3
    attention_ws.attention_ws_kernel[(n_ctx // 32, zh)](
        desc(q, [16, d]), desc(k, [16, d]), desc(v, [16, d]), desc(o, [16, d]), lse, scale, n_ctx,
        HEAD_DIM=d, BLOCK_M=16, BLOCK_N=16, NUM_STAGES=2, num_warps=4)
    q3, k3, v3 = (t.astype(np.float64).reshape(zh, n_ctx, d) for t in (q, k, v))
    s = np.einsum("hid,hjd->hij", q3, k3) * np.float64(np.float32(scale))
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    ref = np.einsum("hij,hjd->hid", p / p.sum(axis=-1, keepdims=True), v3)
    close(o.reshape(zh, n_ctx, d), ref, 5e-3)
