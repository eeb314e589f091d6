"""The TMA-pipelined flash-attention forward (tests/python/attnregs_kernels.py, Triton's
tutorial 06 form: host tensor descriptors, sm_90a) on the GPU against PyTorch, at the
tutorial's test configuration (BLOCK_M=128, BLOCK_N=64, HEAD_DIM=128, 4 warps, 2 and 3
stages) and a small one, causal and not."""

import math
import os
import sys

import pytest

from gpu_requirements import require_cuda

torch = require_cuda()

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))

import warpweave as ww  # noqa: E402
from attnregs_kernels import attention_tma_fwd  # noqa: E402

DEV = "cuda"


@pytest.mark.parametrize("head_dim,block_m,block_n,warps", [
    (128, 128, 64, 4), (64, 64, 32, 4),
    (64, 128, 64, 4),    # tutorial 06's D64 choice: P @ V retired by the next wait for S
    (128, 128, 128, 8),  # two warp groups: the copies wait for the other group's P @ V
])
@pytest.mark.parametrize("stages", [2, 3])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("heads,n_ctx", [(2, 128), (3, 1024)])
def test_attention_tma_matches_torch(head_dim, block_m, block_n, warps, stages, causal, heads,
                                     n_ctx):
    if torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("the TMA pipeline is built for sm_90a")
    torch.manual_seed(0)
    q, k, v = (torch.randn(heads, n_ctx, head_dim, device=DEV, dtype=torch.float16)
               for _ in range(3))
    o = torch.empty_like(q)
    lse = torch.empty(heads, n_ctx, device=DEV, dtype=torch.float32)
    rows = heads * n_ctx
    descs = [ww.TensorDescriptor.from_tensor(t.view(rows, head_dim), [b, head_dim])
             for t, b in ((q, block_m), (k, block_n), (v, block_n), (o, block_m))]
    sm_scale = 1 / math.sqrt(head_dim)
    attention_tma_fwd[(n_ctx // block_m, heads)](*descs, lse, sm_scale, heads, n_ctx,
                                                 HEAD_DIM=head_dim, BLOCK_M=block_m,
                                                 BLOCK_N=block_n, CAUSAL=causal, num_warps=warps,
                                                 num_stages=stages)
    ref = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float(),
                                                           is_causal=causal, scale=sm_scale)
    torch.testing.assert_close(o.float(), ref, atol=2e-2, rtol=2e-2)
    s = torch.einsum("hmd,hnd->hmn", q.float(), k.float()) * sm_scale
    if causal:
        s = s.masked_fill(~torch.ones(n_ctx, n_ctx, dtype=torch.bool, device=DEV).tril(),
                          float("-inf"))
    torch.testing.assert_close(lse, torch.logsumexp(s, -1) / math.log(2.0), atol=1e-2,
                               rtol=1e-3)
