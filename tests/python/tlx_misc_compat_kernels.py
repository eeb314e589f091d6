"""Small TLX kernels for tests/python/test_tlx_misc_compat.py: tlx.get_fp8_format_name,
tlx.fence scopes, tlx.remote_view, barrier inits and loop-carried type errors."""

import warpweave as ww
import warpweave.language as tl
from warpweave import tlx


@ww.jit
def fp8_format_name(out_ptr, DTYPE: tl.constexpr, EXPECTED: tl.constexpr):
    name: tl.constexpr = tlx.get_fp8_format_name(DTYPE)
    tl.store(out_ptr, 1 if name == EXPECTED else 0)


@ww.jit
def fence_scopes(ptr):
    tl.atomic_add(ptr, 1)
    tlx.fence("gpu")
    tl.atomic_add(ptr + 1, 1)
    tlx.fence(scope="sys")
    tl.atomic_add(ptr + 2, 1)
    tlx.fence(kind="async_shared")


@ww.jit
def fence_bad_scope(ptr):
    tlx.fence("cta")
    tl.store(ptr, 1)


@ww.jit
def wait_on_remote_view():
    bars = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    remote = tlx.remote_view(bars[0], 0)
    tlx.barrier_wait(remote, phase=0)


@ww.jit
def arrive_on_remote_view():
    bars = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    tlx.barrier_arrive(tlx.remote_view(bars[0], 1))


@ww.jit
def three_barrier_allocs(out_ptr):
    a = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    b = tlx.alloc_barriers(num_barriers=2, arrive_count=2)
    tlx.barrier_arrive(b[0], 2)
    tlx.barrier_wait(b[0], 0)
    tlx.barrier_arrive(a[0])
    tlx.barrier_wait(a[0], 0)
    tl.store(out_ptr, 1)


@ww.jit
def barrier_groups_used_between(out_ptr):
    a = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    tlx.barrier_arrive(a[0])
    b = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    tlx.barrier_wait(a[0], 0)
    tlx.barrier_arrive(b[0])
    tlx.barrier_wait(b[0], 0)
    tl.store(out_ptr, 1)


@ww.jit
def buffer_view_changes_type():
    x = tlx.local_alloc((16, 16), tl.int16, 2)
    y = x
    for _ in range(0, 4):
        x = tlx.local_view(y, 0)
        tlx.local_store(x, tl.zeros((16, 16), dtype=tl.int16))


@ww.jit
def store_with_eviction_policy(in_desc, out_desc, POLICY: tl.constexpr):
    buf = tlx.local_alloc((64, 64), tl.float16, 1)
    bars = tlx.alloc_barriers(1)
    tlx.barrier_expect_bytes(bars[0], 64 * 64 * 2)
    tlx.async_descriptor_load(in_desc, buf[0], [0, 0], bars[0], eviction_policy=POLICY)
    tlx.barrier_wait(bars[0], 0)
    tlx.fence("async_shared")
    tlx.async_descriptor_store(out_desc, buf[0], [0, 0], eviction_policy=POLICY)
    tlx.async_descriptor_store_wait(0)
