"""One tcgen05 MMA step per kernel, for tests/python/test_blackwell_descriptors.py: A [BM, BK]
K-major and B either [BK, BN] (N-major) or [BN, BK] passed through tlx.local_trans (K-major), of
any element type tcgen05 takes, so that the test can read each instruction and shared-memory
descriptor form out of the PTX and decode it with the PTX ISA's tables."""
import warpweave as ww
import warpweave.language as tl
import warpweave.language.extra.tlx as tlx


@ww.jit
def one_mma(a_desc, b_desc, c_ptr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
            B_K_MAJOR: tl.constexpr):
    a = tlx.local_alloc((BM, BK), tlx.dtype_of(a_desc), 1)
    if B_K_MAJOR:
        b = tlx.local_alloc((BN, BK), tlx.dtype_of(b_desc), 1)
    else:
        b = tlx.local_alloc((BK, BN), tlx.dtype_of(b_desc), 1)
    acc = tlx.local_view(tlx.local_alloc((BM, BN), tl.float32, 1, tlx.storage_kind.tmem), 0)
    bars = tlx.alloc_barriers(num_barriers=2, arrive_count=1)
    loaded = tlx.local_view(bars, 0)
    done = tlx.local_view(bars, 1)
    tlx.barrier_expect_bytes(loaded, (BM + BN) * BK * tlx.size_of(tlx.dtype_of(a_desc)))
    tlx.async_descriptor_load(a_desc, tlx.local_view(a, 0), [0, 0], loaded)
    tlx.async_descriptor_load(b_desc, tlx.local_view(b, 0), [0, 0], loaded)
    tlx.barrier_wait(loaded, 0)
    if B_K_MAJOR:
        tlx.async_dot(tlx.local_view(a, 0), tlx.local_trans(tlx.local_view(b, 0)), acc,
                      use_acc=False, mBarriers=[done])
    else:
        tlx.async_dot(tlx.local_view(a, 0), tlx.local_view(b, 0), acc, use_acc=False,
                      mBarriers=[done])
    tlx.barrier_wait(done, 0)
    result = tlx.local_load(acc)
    rows = tl.arange(0, BM)
    cols = tl.arange(0, BN)
    tl.store(c_ptr + rows[:, None] * BN + cols[None, :], result)
