"""The parts of issue 19's Blackwell work that Hopper runs too, on the GPU: TMA reductions
(async_descriptor_store(..., store_reduce=)) through 4-D descriptors into 2-D buffers, buffer
and barrier views carried by run-time loops (TMA + wgmma), reuse= of a shared-memory allocation,
a tensor vote_ballot_sync (its ballots against the interpreter's, which deals the elements as
the compiler lays them out) and Proton's in-kernel scopes (compiled to nothing). Kernels from
tests/python; each result against PyTorch or the interpreter."""

import os
import sys

import numpy as np
import pytest

from gpu_requirements import require_cuda

torch = require_cuda((9, 0), "TMA and wgmma need Hopper")

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))

import profiler_scope_kernels as scopes  # noqa: E402
import tlx_alias_kernels as alias  # noqa: E402
import tlx_carried_view_kernels as carried  # noqa: E402
import tlx_tma_extras_kernels as tma  # noqa: E402

import warpweave as ww  # noqa: E402
import warpweave.language as tl  # noqa: E402
from warpweave import tlx  # noqa: E402

DEV = "cuda"


@pytest.fixture(autouse=True)
def trap_hangs(monkeypatch):
    monkeypatch.setenv("WARPWEAVE_TRAP_HANGS", "4000000")


def desc4(t, block):
    return ww.TensorDescriptor(t, list(t.shape), list(t.stride()), block)


@pytest.mark.parametrize("kind,dtype", [("add", torch.float32), ("add", torch.float16),
                                        ("add", torch.int32), ("min", torch.int32),
                                        ("max", torch.float16), ("xor", torch.int32)])
def test_tma_reduce(kind, dtype):
    g = torch.Generator(device=DEV).manual_seed(7)
    if dtype.is_floating_point:
        src = (torch.randint(-8, 9, (2, 1, 64, 16), generator=g, device=DEV) / 4).to(dtype)
        dst = (torch.randint(-8, 9, (2, 1, 32, 16), generator=g, device=DEV) / 4).to(dtype)
    else:
        src = torch.randint(-1000, 1000, (2, 1, 64, 16), generator=g, device=DEV, dtype=dtype)
        dst = torch.randint(-1000, 1000, (2, 1, 32, 16), generator=g, device=DEV, dtype=dtype)
    want = dst.clone()
    op = {"add": torch.add, "min": torch.minimum, "max": torch.maximum,
          "xor": torch.bitwise_xor}[kind]
    for m in range(2):
        want = op(want, src[:, :, 32 * m:32 * m + 32])
    tma.tile_reduce_4d[(2, 2, 1)](desc4(src, [1, 1, 32, 16]), desc4(dst, [1, 1, 32, 16]), BM=32,
                                  BN=16, REDUCE=kind)
    torch.testing.assert_close(dst, want, atol=0, rtol=0)


@pytest.mark.parametrize("K", [32, 96, 160])
def test_views_carried_by_a_loop_through_tma_and_wgmma(K):
    a = (torch.randint(-8, 9, (64, K), device=DEV) / 8).half()
    b = (torch.randint(-8, 9, (K, 64), device=DEV) / 8).half()
    c = torch.full((64, 64), float("nan"), device=DEV)
    carried.carried_wgmma[(1,)](ww.TensorDescriptor.from_tensor(a, [64, 32]),
                                ww.TensorDescriptor.from_tensor(b, [32, 64]), c, K, BM=64, BN=64,
                                BK=32)
    torch.testing.assert_close(c, a.float() @ b.float(), atol=0, rtol=0)


def test_reuse_of_a_shared_buffer():
    R = C = 64
    out = torch.zeros(2 * R * C, device=DEV)
    alias.alias_reuse_buffer[(1,)](out, R=R, C=C)
    # o[0] lies over q[0] (same type and layout): it reads the 3.0 stored there.
    torch.testing.assert_close(out[:R * C], torch.full((R * C, ), 3.0, device=DEV))


@ww.jit
def vote_of_loaded(x_ptr, out_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    ballot = tlx.vote_ballot_sync(0xFFFFFFFF, tl.load(x_ptr + offs) < 0.5)
    tl.store(out_ptr + offs, ballot)


@pytest.mark.parametrize("n", [128, 512])
def test_tensor_vote_matches_the_interpreter(n):
    x = torch.rand(n, device=DEV)
    x[n // 4:n // 2] = 1.0
    got = torch.zeros(n, dtype=torch.int32, device=DEV)
    vote_of_loaded[(1,)](x, got, N=n)
    want = np.zeros(n, np.int32)
    vote_of_loaded[(1,)](x.cpu().numpy(), want, N=n)
    np.testing.assert_array_equal(got.cpu().numpy(), want)


def test_proton_scopes_run_as_nothing():
    x = torch.arange(128, dtype=torch.float32, device=DEV)
    y = torch.zeros_like(x)
    scopes.scoped_affine[(1,)](x, y, N=128, SCOPES=True)
    torch.testing.assert_close(y, 2 * x + 1)
