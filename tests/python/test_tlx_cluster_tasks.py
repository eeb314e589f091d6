"""tlx.cluster_barrier inside async tasks (tlx-unit-b, issue 16): as in TLX, every task of every
CTA calls it and all meet there (every thread arrives on the GPU); interpreter runs and sm_90a
PTX (the non-.aligned form, as a task's warps diverge from the others)."""

import re

import numpy as np

import warpweave as ww
import warpweave.language as tl
from warpweave import tlx
from warpweave._native_loader import native


@ww.jit
def _handoff_through_cluster_barrier(x_ptr, y_ptr, BLOCK: tl.constexpr):
    bars = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    tlx.fence_mbarrier_init_cluster()
    rank = tlx.cluster_cta_rank()
    with tlx.async_tasks():
        with tlx.async_task("default"):
            tlx.cluster_barrier()
            if rank == 0:
                tlx.barrier_arrive(bar=bars[0], remote_cta_rank=1)
        with tlx.async_task(num_warps=2):
            tlx.cluster_barrier()
            offs = tl.arange(0, BLOCK) + rank * BLOCK
            data = tl.load(x_ptr + offs)
            if rank == 1:
                tlx.barrier_wait(bars[0], phase=0)
            tl.store(y_ptr + offs, data)
        with tlx.async_task(num_warps=2):
            tlx.cluster_barrier()


def test_every_task_meets_at_the_cluster_barrier():
    x = np.arange(256, dtype=np.float32)
    y = np.zeros_like(x)
    _handoff_through_cluster_barrier[(2,)](x, y, BLOCK=128, ctas_per_cga=(2, 1, 1))
    np.testing.assert_array_equal(y, x)


@ww.jit
def _twice_in_tasks(out_ptr):
    with tlx.async_tasks():
        with tlx.async_task("default"):
            tlx.cluster_barrier()
            tlx.cluster_barrier()
            tl.store(out_ptr + tl.program_id(0), 1)
        with tlx.async_task(num_warps=4, replicate=2):
            tlx.cluster_barrier()
            tlx.cluster_barrier()


def test_replicas_each_arrive_and_phases_repeat():
    out = np.zeros(4, np.int32)
    _twice_in_tasks[(4,)](out, ctas_per_cga=(2, 1, 1))
    assert out.tolist() == [1, 1, 1, 1]


def test_sm90a_ptx_uses_the_unaligned_cluster_barrier_in_tasks(ptxas):
    k = native().compile([(__file__, open(__file__).read())], "_twice_in_tasks",
                         "out_ptr:*i32:16", {}, target="sm_90a", stage="ptx", num_ctas=2)
    body = k.ptx
    assert len(re.findall(r"barrier\.cluster\.arrive\.release;", body)) >= 2, body
    assert "barrier.cluster.arrive.release.aligned" not in body
    ptxas(body, "sm_90a")
