"""tlx.async_dot into an fp16 register accumulator on sm_90a
(tests/python/f16_accumulate_kernels.py): wgmma m64nNk16.f16.f16.f16, whose accumulator
registers hold two fp16 each; a loop carries those packed words from one wait to the next MMA
(no unpacking and packing per iteration) and ptxas takes the kernels without spills or
serialized wgmmas. The interpreter against a float32 NumPy product within fp16 accumulation's
error."""

import importlib
import re

import numpy as np
import pytest

import f16_accumulate_kernels as fk
from mma_testing import compiled, mmas

native_loader = importlib.import_module("warpweave._native_loader")
pytestmark = pytest.mark.skipif(not native_loader.available(),
                                reason="warpweave._native is not built (pip install .)")

WGMMA = r"wgmma\.mma_async\.sync\.aligned\.m64n(\d+)k16\.f16\.f16\.f16"


@pytest.fixture(autouse=True)
def no_disk_cache(monkeypatch):
    monkeypatch.setenv("WARPWEAVE_CACHE_DISABLE", "1")


def operands(M, N, K, rng=None):
    """A [M, K] and B [K, N] with entries of about K^-1/4: sums of order 1 at every K."""
    if rng is None:
        return np.zeros((M, K), np.float16), np.zeros((K, N), np.float16)
    scale = K**-0.25
    return ((rng.standard_normal((M, K)) * scale).astype(np.float16),
            (rng.standard_normal((K, N)) * scale).astype(np.float16))


def loop_body(ptx):
    """The PTX of the (one) K loop's body: from its head to its back edge."""
    return ptx.split("$L_for_", 1)[1].split("bra.uni", 1)[0]


def close_to_f32(c, a, b):
    """fp16 accumulation against the float32 product: one fp16 rounding of the running sum per
    K step (a tl.dot in the interpreter, an instruction on the GPU), a random walk growing as
    sqrt(K)."""
    assert c.dtype == np.float16 and np.isfinite(c).all()
    ref = a.astype(np.float32) @ b.astype(np.float32)
    K = a.shape[1]
    np.testing.assert_allclose(c.astype(np.float32), ref, rtol=1e-2,
                               atol=1e-2 * max(1.0, (K / 128)**0.5))


def tlx_args(BM, BN, K, rng=None):
    a, b = operands(BM, BN, K, rng)
    return (a, b, np.full((BM, BN), np.nan, np.float16), K), a, b


@pytest.mark.parametrize("BM,BN,BK,warps", [(64, 64, 32, 4), (128, 128, 64, 4), (128, 256, 64, 8)])
def test_tlx_async_dot_accumulates_in_fp16(BM, BN, BK, warps, ptxas):
    args, _, _ = tlx_args(BM, BN, 256)
    k = compiled(fk.tlx_f16_acc, args, dict(BM=BM, BN=BN, BK=BK), "sm_90a", warps)
    names = mmas(k.ptx)
    assert len(names) == 1 and re.fullmatch(WGMMA, names[0]), names
    # The loop carries the words its wait returned, accumulating into them in place: no
    # instruction of the loop but the wgmmas names them (no unpacking, packing or copy).
    body = loop_body(k.ptx)
    assert "wgmma.wait_group.sync.aligned 0;" in body
    words = set()
    for x in re.findall(r"wgmma\.mma_async\S+ \{([^}]*)\}", body):
        words |= set(x.split(", "))
    others = [ln for ln in body.splitlines() if "wgmma.mma_async" not in ln]
    assert not [ln for ln in others if set(re.findall(r"%r\d+\b", ln)) & words], body
    log = ptxas(k.ptx, "sm_90a", verbose=True).log
    assert re.search(r"0 bytes spill stores, 0 bytes spill loads", log), log
    assert "serialized" not in log and not re.search(r"C751\d", log), log


@pytest.mark.parametrize("K", [32, 256])
def test_tlx_async_dot_into_fp16_in_interpreter(rng, K):
    args, a, b = tlx_args(64, 64, K, rng)
    fk.tlx_f16_acc[(1, )](*args, BM=64, BN=64, BK=32, num_warps=4)
    close_to_f32(args[2], a, b)
