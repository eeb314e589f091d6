"""Buffer and barrier views carried by run-time loops (issue 19: TLX's GDPA tutorial carries its
V tile from one iteration to the next): the interpreter's values against NumPy, and the PTX for
sm_90a (TMA + wgmma) and sm_100a (TMA + tcgen05) through ptxas, where a carried view's address
is the register the loop carries and its layout that of the allocation it views."""
import importlib
from pathlib import Path

import numpy as np
import pytest

import tlx_carried_view_kernels as ck
from blackwell_testing import descriptor, eighths

native_loader = importlib.import_module("warpweave._native_loader")
pytestmark = pytest.mark.skipif(not native_loader.available(),
                                reason="warpweave._native is not built (pip install .)")

KERNELS = Path(ck.__file__)


def compile_here(kernel, signature, target):
    result = native_loader.native().compile([(str(KERNELS), KERNELS.read_text())], kernel,
                                            signature, {}, target=target, num_warps=4, stage="ptx")
    return result if isinstance(result, str) else getattr(result, "ptx", None) or result["ptx"]


@pytest.fixture
def interpret(monkeypatch):
    monkeypatch.setenv("WARPWEAVE_INTERPRET", "1")


@pytest.mark.parametrize("steps", [2, 3, 6])
def test_carried_ring_interp(interpret, steps):
    N = 16
    x = np.arange(N * N, dtype=np.float32).reshape(N, N)
    out = np.zeros((3, N, N), np.float32)
    ck.carried_ring[(1,)](x, out, steps, N=N)
    for slot in range(2):  # the last iteration that chose the slot wrote it
        last = max(i for i in range(steps) if i % 2 == slot)
        np.testing.assert_array_equal(out[slot], x + last)
    # The view the loop left chosen is slot steps % 2, last written by iteration steps - 2.
    np.testing.assert_array_equal(out[2], x + steps - 2)


def test_carried_view_of_a_ring_nothing_wrote_is_reported(interpret):
    N = 16
    out = np.zeros((3, N, N), np.float32)
    with pytest.raises(Exception) as e:  # steps 0: slot 0 is read before anything wrote it
        ck.carried_ring[(1,)](np.zeros((N, N), np.float32), out, 0, N=N)
    assert "reads shared memory that nothing wrote" in str(e.value)


@pytest.mark.parametrize("kernel", ["carried_wgmma", "carried_tcgen05"])
@pytest.mark.parametrize("K", [32, 96, 160])
def test_carried_views_gemm_interp(interpret, kernel, K):
    BM, BN, BK = (64 if kernel == "carried_wgmma" else 128), 64, 32
    rng = np.random.default_rng(K)
    a, b = eighths(rng, (BM, K)), eighths(rng, (K, BN))
    c = np.full((BM, BN), np.nan, np.float32)
    getattr(ck, kernel)[(1,)](descriptor(a, [BM, BK]), descriptor(b, [BK, BN]), c, K, BM=BM, BN=BN,
                              BK=BK)
    np.testing.assert_array_equal(c, a.astype(np.float64) @ b)


def test_carried_views_sm90a_ptx(ptxas):
    ptx = compile_here("carried_wgmma", "a_desc:desc<fp16,64x32>,b_desc:desc<fp16,32x64>,"
                       "c_ptr:*fp32:16,K:i32,BM=64,BN=64,BK=32", "sm_90a")
    assert "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16" in ptx
    assert "cp.async.bulk.tensor.2d.shared::cluster.global" in ptx
    ptxas(ptx, arch="sm_90a")


def test_carried_views_sm100a_ptx(ptxas):
    ptx = compile_here("carried_tcgen05", "a_desc:desc<fp16,128x32>,b_desc:desc<fp16,32x64>,"
                       "c_ptr:*fp32:16,K:i32,BM=128,BN=64,BK=32", "sm_100a")
    assert "tcgen05.mma.cta_group::1.kind::f16" in ptx
    assert "cp.async.bulk.tensor.2d.shared::cluster.global" in ptx
    ptxas(ptx, arch="sm_100a")
