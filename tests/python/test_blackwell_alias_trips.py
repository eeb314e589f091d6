"""A tensor-memory hazard of TLX's 2-CTA attention forward (blackwell_fa_ws_pipelined_persistent.py,
causal): its MMA task loops over the pair's key range while its softmax task loops over a range
computed from the per-CTA BLOCK_M, so in a causal tile the MMA task issues QK MMAs the softmax
never takes, and they write qk's columns after the softmax stored its row sums (l) there (l shares
qk's columns through storage_alias_spec). This kernel of our own has the same shape of protocol:
an MMA task producing S blocks into a tensor-memory tile whose columns a softmax-like consumer
reuses for its row sums after its loop. With matching trip counts it is ordered and matches NumPy;
with one MMA more than the consumer takes, the interpreter reports the unordered write at the MMA
or at the consumer's access (whichever the schedule meets second). No Blackwell GPU ran this."""
import importlib

import numpy as np
import pytest

import warpweave as ww
import warpweave.language as tl
from warpweave import tlx

from blackwell_testing import descriptor, eighths, line_of

native_loader = importlib.import_module("warpweave._native_loader")
pytestmark = pytest.mark.skipif(not native_loader.available(),
                                reason="warpweave._native is not built (pip install .)")


@ww.jit
def blocks_then_row_sums(a_desc, b_desc, out_ptr, K: tl.constexpr, BN: tl.constexpr,
                         N_MMA: tl.constexpr, N_USE: tl.constexpr):
    """out[r] = sum over the first N_USE blocks j of sum_c (A @ B_j^T)[r, c]. The MMA task issues
    N_MMA block products S_j = A @ B_j^T into s; the consumer takes N_USE of them, then stores its
    row sums into l, which lies in s's columns (a shared reuse group), and reads them back."""
    spec = tlx.storage_alias_spec(storage=tlx.storage_kind.tmem)
    s = tlx.local_alloc((128, BN), tl.float32, 1, tlx.storage_kind.tmem, reuse=spec)
    l = tlx.local_alloc((128, 1), tl.float32, 1, tlx.storage_kind.tmem, reuse=spec)
    spec.set_buffer_overlap(tlx.reuse_group(s, l, group_type=tlx.reuse_group_type.shared))
    a = tlx.local_alloc((128, K), tl.float16, 1)
    b = tlx.local_alloc((BN, K), tl.float16, N_MMA)
    loaded = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    s_full = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    s_empty = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    with tlx.async_tasks():
        with tlx.async_task("default"):
            total = tl.zeros([128], tl.float32)
            for j in tl.range(0, N_USE):
                tlx.barrier_wait(s_full[0], j & 1)
                total += tl.sum(tlx.local_load(s[0]), axis=1)
                tlx.barrier_arrive(s_empty[0])
            tlx.local_store(l[0], total[:, None])  # the row sums, in s's columns
            sums = tlx.local_load(l[0])
            tl.store(out_ptr + tl.arange(0, 128)[:, None], sums)
        with tlx.async_task(num_warps=1):
            tlx.barrier_expect_bytes(loaded[0], 2 * (128 + N_MMA * BN) * K)
            tlx.async_descriptor_load(a_desc, a[0], [0, 0], loaded[0])
            for j in tl.static_range(0, N_MMA):
                tlx.async_descriptor_load(b_desc, b[j], [j * BN, 0], loaded[0])
            tlx.barrier_wait(loaded[0], 0)
            for j in tl.range(0, N_MMA):
                tlx.barrier_wait(s_empty[0], (j & 1) ^ 1)  # the consumer read the last block
                tlx.async_dot(a[0], tlx.local_trans(b[j]), s[0], use_acc=False,
                              mBarriers=[s_full[0]])


def run(n_mma, n_use, K=32, BN=64):
    rng = np.random.default_rng(n_mma * 10 + n_use)
    a, b = eighths(rng, (128, K)), eighths(rng, (n_mma * BN, K))
    out = np.full((128, 1), np.nan, np.float32)
    blocks_then_row_sums[(1,)](descriptor(a, [128, K]), descriptor(b, [BN, K]), out, K=K, BN=BN,
                               N_MMA=n_mma, N_USE=n_use, num_warps=4)
    ref = sum((a.astype(np.float64) @ b[j * BN:(j + 1) * BN].T.astype(np.float64)).sum(1)
              for j in range(n_use))
    return out[:, 0], ref


@pytest.fixture
def interpret(monkeypatch):
    monkeypatch.setenv("WARPWEAVE_INTERPRET", "1")


@pytest.mark.parametrize("n", [1, 3])
def test_matching_trip_counts_are_ordered_and_match(interpret, n):
    out, ref = run(n, n)
    np.testing.assert_allclose(out, ref, rtol=1e-6)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_an_mma_the_consumer_never_takes_is_reported_over_its_row_sums(interpret, monkeypatch,
                                                                       seed):
    monkeypatch.setenv("WARPWEAVE_INTERP_SEED", str(seed))
    with pytest.raises(ww.InterpreterError) as e:
        run(3, 2)
    msg = str(e.value)
    mma = f"test_blackwell_alias_trips.py:{line_of(blocks_then_row_sums, 'tlx.async_dot(')}:"
    store = f"test_blackwell_alias_trips.py:{line_of(blocks_then_row_sums, 'local_store(l[0]')}:"
    load = f"test_blackwell_alias_trips.py:{line_of(blocks_then_row_sums, 'local_load(l[0])')}:"
    assert mma in msg and (store in msg or load in msg), msg
