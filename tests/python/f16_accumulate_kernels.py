"""Kernels accumulating in fp16 (tests/python/test_f16_accumulate_pipeline.py): a K loop through
tlx.async_dot into an fp16 register accumulator."""

import warpweave as ww
import warpweave.language as tl
from warpweave import tlx


@ww.jit
def tlx_f16_acc(a_ptr, b_ptr, c_ptr, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """C [BM, BN] = A [BM, K] @ B [K, BN] through tlx.async_dot into an fp16 register
    accumulator, one BK step an iteration, waited for (async_dot_wait(0)) before the next step's
    operands overwrite the buffers."""
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a_buf = tlx.local_view(tlx.local_alloc((BM, BK), tl.float16, 1), 0)
    b_buf = tlx.local_view(tlx.local_alloc((BK, BN), tl.float16, 1), 0)
    acc = tl.zeros((BM, BN), dtype=tl.float16)
    for k in range(0, K, BK):
        tlx.local_store(a_buf, tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :]))
        tlx.local_store(b_buf, tl.load(b_ptr + (k + rk)[:, None] * BN + rn[None, :]))
        tlx.fence_async_shared()
        acc = tlx.async_dot(a_buf, b_buf, acc)
        acc = tlx.async_dot_wait(0, acc)
    tl.store(c_ptr + rm[:, None] * BN + rn[None, :], acc)
