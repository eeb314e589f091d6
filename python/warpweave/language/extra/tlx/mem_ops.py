"""`tlx.mem_ops`: TLX's memory operations under the module name Triton's TLX gives them (the same
objects as `warpweave.tlx.<name>`)."""

from warpweave import tlx as _tlx

_NAMES = [
    "local_alloc", "local_view", "local_load", "local_store", "local_trans", "local_slice",
    "local_reinterpret", "async_load", "async_load_commit_group", "async_load_wait_group",
    "async_descriptor_load", "async_descriptor_store", "async_descriptor_store_wait",
    "remote_shmem_store", "async_remote_shmem_store", "tmem_copy", "fence", "fence_async_shared",
    "subslice",
]
__all__ = [n for n in _NAMES if hasattr(_tlx, n)]
for _n in __all__:
    globals()[_n] = getattr(_tlx, _n)
del _n
