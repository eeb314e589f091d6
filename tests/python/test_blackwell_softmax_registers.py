"""An online softmax over [128, 128] fp32 tiles in tensor memory, in a warp-specialized task at
setmaxnreg 152 (issue 19): the shape of the attention softmax of TLX's Blackwell tutorials
(blackwell_fa_ws*: S read from tensor memory, one row a thread, its row max, alpha to tensor
memory, P = exp2(S * scale - m) summed and stored back as fp16). P's store goes in tcgen05.st
messages of at most 8 packed words (tmemMessageRegisters): in one x64 message ptxas 13.0 spilled
16 bytes here (60-168 bytes in the tutorials' softmax tasks), the x64 block of consecutive
registers built from the P values while those were live. Checked with ptxas for sm_100a; the
interpreter's values against NumPy."""
import importlib
import re

import numpy as np
import pytest

import warpweave as ww
import warpweave.language as tl
import warpweave.language.extra.tlx as tlx

native_loader = importlib.import_module("warpweave._native_loader")
pytestmark = pytest.mark.skipif(not native_loader.available(),
                                reason="warpweave._native is not built (pip install .)")

ROWS, TILES = 2, 3  # row blocks, and [128, 128] score tiles along each row block


@ww.jit
def online_softmax_tmem(s_ptr, p_ptr, alpha_ptr, l_ptr, m_ptr, scale, n_rows, n_tiles,
                        REGS: tl.constexpr):
    # The default task moves each score tile into tensor memory and P and alpha back out; the
    # softmax task keeps each row's running max and sum over the tiles of its row block.
    s_tile = tlx.local_view(tlx.local_alloc((128, 128), tl.float32, 1, tlx.storage_kind.tmem), 0)
    p_tile = tlx.local_view(tlx.local_alloc((128, 128), tl.float16, 1, tlx.storage_kind.tmem), 0)
    a_tile = tlx.local_view(tlx.local_alloc((128, 1), tl.float32, 1, tlx.storage_kind.tmem), 0)
    s_full = tlx.alloc_barriers(num_barriers=1)
    s_empty = tlx.alloc_barriers(num_barriers=1)
    p_full = tlx.alloc_barriers(num_barriers=1)
    rows = tl.arange(0, 128)
    cols = tl.arange(0, 128)
    with tlx.async_tasks():
        with tlx.async_task("default"):
            k = 0
            for r in range(0, n_rows):
                for t in range(0, n_tiles):
                    offs = ((r * n_tiles + t) * 128 + rows)[:, None] * 128 + cols[None, :]
                    tlx.barrier_wait(s_empty[0], (k & 1) ^ 1)
                    tlx.local_store(s_tile, tl.load(s_ptr + offs))
                    tlx.barrier_arrive(s_full[0])
                    tlx.barrier_wait(p_full[0], k & 1)
                    tl.store(p_ptr + offs, tlx.local_load(p_tile))
                    alpha = tlx.local_load(a_tile)
                    tl.store(alpha_ptr + (r * n_tiles + t) * 128 + rows[:, None], alpha)
                    tlx.barrier_arrive(s_empty[0])
                    k += 1
        with tlx.async_task(num_warps=4, registers=REGS):
            k = 0
            for r in range(0, n_rows):
                m_i = tl.zeros([128], dtype=tl.float32) - float("inf")
                l_i = tl.zeros([128], dtype=tl.float32) + 1.0
                qk_scale = scale * 1.44269504
                for t in range(0, n_tiles):
                    tlx.barrier_wait(s_full[0], k & 1)
                    qk = tlx.local_load(s_tile)
                    m_ij = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
                    alpha = tl.math.exp2(m_i - m_ij)
                    tlx.local_store(a_tile, alpha[:, None])
                    qk = qk * qk_scale - m_ij[:, None]
                    p = tl.math.exp2(qk)
                    l_ij = tl.sum(p, 1)
                    tlx.local_store(p_tile, p.to(tl.float16))
                    tlx.barrier_arrive(p_full[0])
                    l_i = l_i * alpha + l_ij
                    m_i = m_ij
                    k += 1
                tl.store(l_ptr + r * 128 + rows, l_i)
                tl.store(m_ptr + r * 128 + rows, m_i)


def arrays(rng=None):
    s = np.zeros((ROWS * TILES * 128, 128), np.float32)
    if rng is not None:
        s = (rng.standard_normal(s.shape) * 4).astype(np.float32)
    return (s, np.zeros(s.shape, np.float16), np.zeros((s.shape[0], 1), np.float32),
            np.zeros(ROWS * 128, np.float32), np.zeros(ROWS * 128, np.float32))


@pytest.fixture(autouse=True)
def no_disk_cache(monkeypatch):
    monkeypatch.setenv("WARPWEAVE_CACHE_DISABLE", "1")


def test_softmax_task_at_152_registers_does_not_spill(requires_ptxas, ptxas):
    values = online_softmax_tmem.bind(arrays() + (0.5, ROWS, TILES), dict(REGS=152))
    ptx = online_softmax_tmem.compile_for(values, False, (4, 1, 1), target="sm_100a").kernel.ptx
    assert re.search(r"setmaxnreg\.(inc|dec)\.sync\.aligned\.u32 152;", ptx)
    # P: 128 fp16 columns a thread, 64 packed words, in eight messages of 8.
    assert len(re.findall(r"tcgen05\.st\.sync\.aligned\.32x32b\.x8\.b32 \[%r\d+\], "
                          r"\{(?:%r\d+, ){7}%r\d+\};", ptx)) == 8
    # The fp32 scores the default task stores are not packed: two x64 messages.
    assert len(re.findall(r"tcgen05\.st\.sync\.aligned\.32x32b\.x64\.b32 \[%r\d+\], "
                          r"\{(?:%f\d+, ){63}%f\d+\};", ptx)) == 2
    run = ptxas(ptx, arch="sm_100a", verbose=True)
    assert run.spill_bytes == 0, run.log


def test_interpreter_matches_numpy(monkeypatch):
    monkeypatch.setenv("WARPWEAVE_INTERPRET", "1")
    s, p, a, l, m = arrays(np.random.default_rng(0))
    online_softmax_tmem[(1,)](s, p, a, l, m, 0.5, ROWS, TILES, REGS=152)
    x = s.reshape(ROWS, TILES, 128, 128).astype(np.float64) * float(np.float32(0.5 * 1.44269504))
    running = np.maximum.accumulate(x.max(axis=3), axis=1)  # m after each tile
    np.testing.assert_allclose(m.reshape(ROWS, 128), running[:, -1], rtol=1e-6)
    np.testing.assert_allclose(l.reshape(ROWS, 128),
                               np.exp2(x - running[:, -1][:, None, :, None]).sum(axis=(1, 3)),
                               rtol=1e-5)
    # P of each tile against the running max after it (fp16), alpha the change of that max.
    np.testing.assert_allclose(p.reshape(ROWS, TILES, 128, 128).astype(np.float64),
                               np.exp2(x - running[..., None]), atol=1e-3, rtol=1e-3)
    before = np.concatenate([np.full((ROWS, 1, 128), -np.inf), running[:, :-1]], axis=1)
    np.testing.assert_allclose(a.reshape(ROWS, TILES, 128), np.exp2(before - running),
                               rtol=1e-5)
