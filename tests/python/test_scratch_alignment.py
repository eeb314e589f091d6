"""Layout conversions through shared memory that the layout pass did not plan scratch for (a
row sum stored under a run-time `if`, beside a TLX buffer and a barrier that end the allocations
at a byte count that is not a multiple of 16) still get vector-aligned scratch: on the H200 the
unaligned st.shared.v4 of such a kernel (TLX's test_async_remote_shmem_store at a 1-CTA cluster)
raised 'misaligned address' and poisoned the CUDA context."""

import importlib
import re

import pytest

native_loader = importlib.import_module("warpweave._native_loader")
pytestmark = pytest.mark.skipif(not native_loader.available(),
                                reason="warpweave._native is not built (pip install .)")

SOURCE = '''
import warpweave
import warpweave.language as tl
from warpweave import tlx


@warpweave.jit
def row_sum_under_if(x_ptr, out_ptr, N: tl.constexpr, BLOCK_M: tl.constexpr):
    bufs = tlx.local_alloc((BLOCK_M, ), tl.float32, 1)
    bars = tlx.alloc_barriers(num_barriers=1)
    rank = tlx.cluster_cta_rank()
    offs_m = tl.arange(0, BLOCK_M)
    data = tl.load(x_ptr + offs_m[:, None] * N + tl.arange(0, N)[None, :])
    total = tl.sum(data, axis=1)
    if rank == 0:
        tl.store(out_ptr + offs_m, total)
    else:
        tlx.local_store(bufs[0], total)
        tlx.barrier_arrive(bars[0])
'''


@pytest.mark.parametrize("num_warps", [1, 2, 4])
def test_unplanned_conversion_scratch_is_vector_aligned(tmp_path, num_warps):
    path = tmp_path / "row_sum_under_if.py"
    path.write_text(SOURCE)
    k = native_loader.native().compile([(str(path), SOURCE)], "row_sum_under_if",
                                       "x_ptr:*fp32:16,out_ptr:*fp32:16,N=256,BLOCK_M=64", {},
                                       target="sm_90a", num_warps=num_warps, stage="cubin")
    accesses = re.findall(r"(?:st|ld)\.shared\.v(\d)\.(?:f|b)32 \[%r\d+\+(\d+)\]", k.ptx)
    for width, offset in accesses:
        assert int(offset) % (4 * int(width)) == 0, (width, offset)
    # The kernel's shared memory covers every scratch access.
    for width, offset in accesses:
        assert int(offset) < k.shared_bytes
