"""Within a thread, a max (or min) reduction combines its registers as 8 chains over
consecutive runs whose results meet in a tree, not as one chain (src/codegen/Reduce.cpp). An
attention softmax over a wgmma accumulator holds 32 scores of a row per thread: its row max was
31 dependent max.f32 at the head of the softmax's critical path (every exp2 of the row waits for
it); now 3 + 3. Sums keep one chain (their rounding, and the registers of memory-bound kernels).
The kernel is a small attention-like score block written here; the interpreter checks the
values, the sm_90a PTX the depth of the combine chains."""

import re

import numpy as np
import pytest

import warpweave as ww
import warpweave.language as tl

pytest.importorskip("warpweave._native")


@ww.jit
def score_softmax(q_ptr, k_ptr, p_ptr, m_ptr, l_ptr, idx_ptr, scale, BM: tl.constexpr,
                  BN: tl.constexpr, D: tl.constexpr):
    rows = tl.arange(0, BM)
    cols = tl.arange(0, BN)
    d = tl.arange(0, D)
    q = tl.load(q_ptr + rows[:, None] * D + d[None, :])
    k = tl.load(k_ptr + cols[:, None] * D + d[None, :])
    s = tl.dot(q, tl.trans(k))
    m = tl.max(s, axis=1)
    p = tl.exp2(s * scale - (m * scale)[:, None])
    tl.store(p_ptr + rows[:, None] * BN + cols[None, :], p)
    tl.store(m_ptr + rows, m)
    tl.store(l_ptr + rows, tl.sum(p, axis=1))
    # The first column holding the row max: ties keep the lowest index whatever the tree's shape.
    tl.store(idx_ptr + rows, tl.argmax(s, axis=1, tie_break_left=True))


BM, BN, D = 64, 128, 32


def _inputs():
    rng = np.random.default_rng(7)
    # Small integers: the scores are exact, and many rows hold their max more than once.
    q = rng.integers(-2, 3, (BM, D)).astype(np.float16)
    k = rng.integers(-2, 3, (BN, D)).astype(np.float16)
    return q, k


def test_values_in_the_interpreter():
    q, k = _inputs()
    p = np.zeros((BM, BN), np.float32)
    m, l = np.zeros(BM, np.float32), np.zeros(BM, np.float32)
    idx = np.zeros(BM, np.int32)
    score_softmax[(1,)](q, k, p, m, l, idx, 0.5, BM=BM, BN=BN, D=D)
    s = q.astype(np.float64) @ k.astype(np.float64).T
    np.testing.assert_array_equal(m, s.max(1))
    np.testing.assert_array_equal(idx, s.argmax(1))
    assert (s == s.max(1, keepdims=True)).sum(1).max() > 1  # ties are exercised
    want = np.exp2((s - s.max(1, keepdims=True)) * 0.5)
    np.testing.assert_allclose(p, want, rtol=1e-6)
    np.testing.assert_allclose(l, want.sum(1), rtol=1e-6)


def _longest_chain(ptx, opcode):
    """The most instructions `opcode` in a row along def-use edges."""
    depth = {}
    for line in ptx.splitlines():
        m = re.match(rf"\s*{re.escape(opcode)}\s+(%\w+),\s*(%\w+),\s*(%\w+);", line)
        if m:
            d, a, b = m.groups()
            depth[d] = 1 + max(depth.get(a, 0), depth.get(b, 0))
    return max(depth.values(), default=0)


def test_row_max_is_a_shallow_tree_in_the_ptx(monkeypatch):
    monkeypatch.setenv("WARPWEAVE_TARGET", "sm_90a")
    monkeypatch.setenv("WARPWEAVE_CACHE_DISABLE", "1")
    q, k = _inputs()
    p = np.zeros((BM, BN), np.float32)
    m, l = np.zeros(BM, np.float32), np.zeros(BM, np.float32)
    idx = np.zeros(BM, np.int32)
    values = score_softmax.bind((q, k, p, m, l, idx, 0.5), {"BM": BM, "BN": BN, "D": D})
    ptx = score_softmax.compile_for(values, False, (4, 3, 1)).kernel.ptx
    assert "wgmma.mma_async" in ptx  # the scores are a wgmma accumulator: 32 a row per thread
    # 32 registers of a row: runs of 4 (3 combines), a tree of the 8 partials (3), then the two
    # combines of the quad's butterfly (each takes its own value one step further). As one
    # chain it was 33.
    assert _longest_chain(ptx, "max.f32") == 8
    # The row sum stays one chain of its 32 registers, then the butterfly.
    assert _longest_chain(ptx, "add.f32") == 33
