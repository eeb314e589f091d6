"""Row max / argmax / sum over a wgmma accumulator on the GPU, whose max now combines each
thread's registers as chains and a tree (tests/python/test_reduce_tree.py holds the kernel and
the PTX checks): the values against NumPy, ties keeping the lowest index."""

import os
import sys

import numpy as np

from gpu_requirements import require_cuda

torch = require_cuda()

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))

import test_reduce_tree as m  # noqa: E402


def test_score_softmax_matches_numpy():
    q, k = m._inputs()
    dev = "cuda"
    p = torch.zeros((m.BM, m.BN), device=dev, dtype=torch.float32)
    mx = torch.zeros(m.BM, device=dev, dtype=torch.float32)
    l = torch.zeros(m.BM, device=dev, dtype=torch.float32)
    idx = torch.zeros(m.BM, device=dev, dtype=torch.int32)
    m.score_softmax[(1,)](torch.from_numpy(q).to(dev), torch.from_numpy(k).to(dev), p, mx, l, idx,
                          0.5, BM=m.BM, BN=m.BN, D=m.D)
    s = q.astype(np.float64) @ k.astype(np.float64).T
    np.testing.assert_array_equal(mx.cpu().numpy(), s.max(1))
    np.testing.assert_array_equal(idx.cpu().numpy(), s.argmax(1))
    want = np.exp2((s - s.max(1, keepdims=True)) * 0.5)
    np.testing.assert_allclose(p.cpu().numpy(), want, rtol=1e-5)
    np.testing.assert_allclose(l.cpu().numpy(), want.sum(1), rtol=1e-5)
