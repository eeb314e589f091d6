"""`warpweave.tlx`: the TLX low-level extensions (buffers, barriers, TMA, async MMA, warp
specialization, clusters). Like `tl`, these are compiled by the C++ front end; calling one from
ordinary Python raises a clear error. Enum-like names (`storage_kind.smem`) are real objects so
that host code can pass them as compile-time arguments."""

from __future__ import annotations

from .language import _kernel_only, constexpr, dtype  # noqa: F401  (re-exported for kernels)


class _Enum:
    def __init__(self, kind: str, names):
        self._kind = kind
        for n in names:
            setattr(self, n, _EnumValue(kind, n))


class _EnumValue:
    __slots__ = ("kind", "name")

    def __init__(self, kind, name):
        self.kind = kind
        self.name = name

    def __repr__(self):
        return f"tlx.{self.kind}.{self.name}"


storage_kind = _Enum("storage_kind", ["smem", "tmem"])

# Exactly the names the compiler knows (src/specialize/TlxBuiltins.cpp, tlxFunctionNames). The
# Blackwell ones at the end (LANGUAGE.md's compile-checked list) are recognized but not
# implemented: a kernel using them gets the compiler's "not supported" error at the call.
_FUNCTIONS = """
local_alloc local_view local_load local_store local_trans local_slice local_reinterpret
alloc_barriers alloc_warp_barrier barrier_expect_bytes barrier_wait barrier_arrive
named_barrier_wait named_barrier_arrive fence_async_shared fence fence_mbarrier_init_cluster
async_descriptor_load async_descriptor_store async_descriptor_store_wait async_load
async_load_commit_group async_load_wait_group async_dot async_dot_wait
async_tasks async_task async_task_replica_id cluster_cta_rank cluster_size_1d cluster_barrier
async_remote_shmem_store remote_shmem_store
thread_id clock64 dtype_of size_of vote_ballot_sync
tmem_copy async_dot_scaled clc_create_context clc_producer clc_consumer
""".split()

__all__ = ["storage_kind", "constexpr", "dtype"] + _FUNCTIONS

for _name in _FUNCTIONS:
    globals()[_name] = _kernel_only("tlx", _name)
del _name
