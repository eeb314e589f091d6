"""max_active_clusters on a Hopper GPU: for kernels holding about 200 KB of shared memory (one CTA
per SM) in clusters of 1 to 8 CTAs, the driver's count is positive and at most num_sms // C, and
exactly that many clusters are resident at once: every CTA waits (with a time limit, so a wrong
answer fails instead of hanging) until all of them have arrived on a global counter."""

import json

import pytest

from gpu_requirements import require_cuda

torch = require_cuda((9, 0), "thread-block clusters need compute capability 9.0 or newer")
if torch.cuda.get_device_capability() != (9, 0):
    pytest.skip("the PTX kernel here is sm_90a, which runs on compute capability 9.0 only",
                allow_module_level=True)

import warpweave as ww  # noqa: E402
import warpweave.language as tl  # noqa: E402
from warpweave import _native, tlx  # noqa: E402

CLUSTER_SIZES = range(1, 9)
TIMEOUT_NS = 1_000_000_000  # how long a CTA waits for the others before it reports a shortfall
MAX_POLLS = 1_000_000  # the same for the jit kernel: about 1 s of polls (an atomic and 2 barriers)


@ww.jit
def wait_for_all(counter_ptr, seen_ptr, total, max_polls, ROWS: tl.constexpr,
                 COLS: tl.constexpr, NUM: tl.constexpr):
    """Arrives on the counter, then polls it until `total` CTAs have arrived (or `max_polls`
    polls have gone by) and writes the count it saw. Holds NUM buffers of ROWS x COLS floats of
    shared memory, so that an SM has room for one CTA."""
    bufs = tlx.local_alloc((ROWS, COLS), tl.float32, NUM)
    tlx.local_store(tlx.local_view(bufs, NUM - 1), tl.zeros((ROWS, COLS), tl.float32))
    tl.atomic_add(counter_ptr, 1)
    seen = tl.atomic_add(counter_ptr, 0)
    polls = 0
    # The poll count, not a clock, ends the wait: it is the same in every thread, so they all
    # leave the loop (and its barriers) together.
    while (seen < total) & (polls < max_polls):
        seen = tl.atomic_add(counter_ptr, 0)
        polls += 1
    tl.store(seen_ptr + tl.program_id(0), seen)


# The same wait written in PTX, to also record where each CTA ran (%smid, %clusterid,
# %cluster_ctarank), which the kernel language does not expose. One thread per CTA works; the
# others exit, and the CTA keeps its shared memory until the last thread is done.
WAIT_PTX = """
.version 8.0
.target sm_90a
.address_size 64

.extern .shared .align 1024 .b8 smem[];

.visible .entry coresident_ids(
\t.param .u64 counter_ptr,
\t.param .u64 out_ptr,
\t.param .u32 total,
\t.param .u64 timeout_ns
)
.reqntid 128, 1, 1
{cluster}
{{
\t.reg .pred %p<4>;
\t.reg .b32 %r<12>;
\t.reg .b64 %rd<12>;
\tmov.u32 %r0, %tid.x;
\tsetp.ne.u32 %p0, %r0, 0;
\t@%p0 bra DONE;
\tld.param.u64 %rd0, [counter_ptr];
\tld.param.u64 %rd1, [out_ptr];
\tld.param.u32 %r1, [total];
\tld.param.u64 %rd2, [timeout_ns];
\tst.shared.u32 [smem], %r1;
\tatom.acq_rel.gpu.global.add.u32 %r2, [%rd0], 1;
\tmov.u64 %rd3, %globaltimer;
SPIN:
\tld.acquire.gpu.global.u32 %r3, [%rd0];
\tsetp.ge.u32 %p1, %r3, %r1;
\t@%p1 bra RECORD;
\tmov.u64 %rd4, %globaltimer;
\tsub.u64 %rd5, %rd4, %rd3;
\tsetp.lt.u64 %p2, %rd5, %rd2;
\t@%p2 bra SPIN;
RECORD:
\tmov.u32 %r4, %ctaid.x;
\tmul.wide.u32 %rd6, %r4, 16;
\tadd.u64 %rd7, %rd1, %rd6;
\tmov.u32 %r5, %smid;
\tmov.u32 %r6, %clusterid.x;
\tmov.u32 %r7, %cluster_ctarank;
\tst.global.v4.u32 [%rd7], {{%r3, %r5, %r6, %r7}};
DONE:
\tret;
}}
"""

SHARED_BYTES = 200 * 1024


def num_sms():
    return torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count


def ptx_kernel(ctas):
    """coresident_ids for clusters of `ctas` CTAs, with SHARED_BYTES of dynamic shared memory,
    as a launchable kernel (PTX that the driver compiles)."""
    cluster = f".explicitcluster\n.reqnctapercluster {ctas}, 1, 1" if ctas > 1 else ""
    params = [("counter_ptr", "ptr<u32>", 8), ("out_ptr", "ptr<u32>", 8), ("total", "u32", 4),
              ("timeout_ns", "u64", 8)]
    meta = dict(name="coresident_ids", target="sm_90a", num_warps=4, num_ctas=ctas,
                shared_bytes=SHARED_BYTES,
                params=[dict(name=n, type=t, size=size) for n, t, size in params])
    return _native.kernel_from_metadata(json.dumps(meta), b"", WAIT_PTX.format(cluster=cluster))


def run_ptx(kernel, ctas, clusters, timeout_ns=TIMEOUT_NS):
    """Launches `clusters` clusters; returns (seen, smid, clusterid, rank) rows, one per CTA."""
    total = ctas * clusters
    counter = torch.zeros(1, dtype=torch.int32, device="cuda")
    out = torch.full((total, 4), -1, dtype=torch.int32, device="cuda")
    kernel.launch(total, 1, 1, torch.cuda.current_stream().cuda_stream,
                  [counter.data_ptr(), out.data_ptr(), total, timeout_ns])
    torch.cuda.synchronize()
    return out.cpu().tolist()


@pytest.mark.parametrize("ctas", CLUSTER_SIZES)
def test_the_counted_clusters_of_a_200kb_kernel_run_at_once_one_cta_per_sm(ctas):
    kernel = ptx_kernel(ctas)
    clusters = kernel.max_active_clusters(ctas)
    print(f"clusters of {ctas}: {clusters} resident ({num_sms()} SMs, "
          f"num_sms // C = {num_sms() // ctas})")
    assert 0 < clusters <= num_sms() // ctas
    rows = run_ptx(kernel, ctas, clusters)
    total = ctas * clusters
    late = [i for i, r in enumerate(rows) if r[0] != total]
    assert not late, f"CTAs {late[:8]} timed out before all {total} CTAs were resident: {rows}"
    sms = [r[1] for r in rows]
    assert len(set(sms)) == total, f"200 KB CTAs shared an SM: {sorted(sms)}"
    for cta, (_, _, cluster, rank) in enumerate(rows):
        assert (cluster, rank) == (cta // ctas, cta % ctas), (cta, rows[cta])


@pytest.mark.parametrize("ctas", [2, 3, 4])
def test_one_cluster_more_than_counted_cannot_all_be_resident(ctas):
    # The count is the most that fit, not a safe lower bound: with one more cluster some CTA
    # waits in vain (for 0.2 s) for the last one to start.
    kernel = ptx_kernel(ctas)
    clusters = kernel.max_active_clusters(ctas)
    rows = run_ptx(kernel, ctas, clusters + 1, timeout_ns=200_000_000)
    assert any(r[0] < ctas * (clusters + 1) for r in rows)


@pytest.mark.parametrize("ctas", CLUSTER_SIZES)
def test_a_jit_kernel_counts_its_clusters_and_that_many_run_at_once(ctas):
    counter = torch.zeros(1, dtype=torch.int32, device="cuda")
    meta = dict(ROWS=64, COLS=256, NUM=3, ctas_per_cga=(ctas, 1, 1))
    # The launch below may compile another specialization (of `total`); it has the same warps
    # and shared memory, which is all the count depends on.
    ck = wait_for_all.warmup(counter, counter, 2, MAX_POLLS, grid=(ctas,), **meta)
    assert ck.shared >= 192 * 1024
    clusters = ck.max_active_clusters()
    assert clusters == ck.max_active_clusters(ctas)
    # One CTA per SM either way: the PTX kernel's count for the same cluster size agrees.
    assert clusters == ptx_kernel(ctas).max_active_clusters(ctas)
    total = ctas * clusters
    seen = torch.full((total,), -1, dtype=torch.int32, device="cuda")
    wait_for_all[(total,)](counter, seen, total, MAX_POLLS, **meta)
    torch.cuda.synchronize()
    assert counter.item() == total
    assert seen.tolist() == [total] * total

