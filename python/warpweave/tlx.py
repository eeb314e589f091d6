"""`warpweave.tlx`: the TLX low-level extensions (buffers, barriers, TMA, async MMA, warp
specialization, clusters). Like `tl`, these are compiled by the C++ front end; calling one from
ordinary Python raises a clear error. Enum-like names (`storage_kind.smem`) are real objects so
that host code can pass them as compile-time arguments."""

from __future__ import annotations

from .language import _kernel_only, constexpr, dtype  # noqa: F401  (re-exported for kernels)


class _Enum:
    def __init__(self, kind: str, names):
        self._kind = kind
        self._members = [_EnumValue(kind, n) for n in names]
        for m in self._members:
            setattr(self, m.name, m)

    def __iter__(self):
        return iter(self._members)

    def __len__(self):
        return len(self._members)


class _EnumValue:
    __slots__ = ("kind", "name")

    def __init__(self, kind, name):
        self.kind = kind
        self.name = name

    @property
    def value(self):
        return self.name  # as TLX's enum.Enum members, whose values are their names

    def __repr__(self):
        return f"tlx.{self.kind}.{self.name}"


storage_kind = _Enum("storage_kind", ["smem", "tmem", "smemCluster"])
reuse_group_type = _Enum("reuse_group_type", ["shared", "distinct"])

from ._tlx_host import (  # noqa: E402  (host-side values; see the module)
    amd_mfma_layout, async_task, async_tasks, buffered_tensor, buffered_tensor_type,
    clc_response_type, layout, layout_encoding, mbarrier_type,
    padded_shared_layout_encoding, reuse_group, shared_layout_encoding,
    shared_linear_layout_encoding, storage_alias_spec_type, swizzled_layout,
    swizzled_shared_layout_encoding)
from ._tlx_host import storage_alias_spec as storage_alias_spec_type_class  # noqa: E402


# Exactly the names the compiler knows (src/specialize/TlxBuiltins.cpp, tlxBuiltins). The
# Blackwell ones at the end (LANGUAGE.md's compile-checked list) are recognized but not
# implemented: a kernel using them gets the compiler's "not supported" error at the call.
_FUNCTIONS = """
local_alloc local_view local_load local_store local_trans local_slice local_reinterpret
alloc_barriers alloc_warp_barrier barrier_expect_bytes barrier_wait barrier_arrive
named_barrier_wait named_barrier_arrive fence_async_shared fence fence_mbarrier_init_cluster
async_descriptor_load async_descriptor_store async_descriptor_store_wait async_load
async_load_commit_group async_load_wait_group async_dot async_dot_wait
async_task_replica_id cluster_cta_rank cluster_size_1d cluster_barrier
async_remote_shmem_store remote_shmem_store
thread_id clock64 dtype_of size_of vote_ballot_sync stoch_round
tmem_copy async_dot_scaled clc_create_context clc_producer clc_consumer
get_fp8_format_name local_gather local_scatter remote_view storage_alias_spec subslice
dump_layout
""".split()

# Values host code builds and kernels do not call (the compiler does not know these names).
_HOST_ONLY = ["layout", "padded_shared_layout_encoding", "reuse_group_type", "buffered_tensor",
              "buffered_tensor_type", "mbarrier_type", "clc_response_type",
              "reuse_group", "storage_alias_spec_type", "storage_alias_spec_type_class",
              "swizzled_shared_layout_encoding", "swizzled_layout", "layout_encoding",
              "shared_layout_encoding", "shared_linear_layout_encoding", "amd_mfma_layout"]

__all__ = ["storage_kind", "constexpr", "dtype", "async_task", "async_tasks"] + _HOST_ONLY + \
    _FUNCTIONS

for _name in _FUNCTIONS:
    globals()[_name] = _kernel_only("tlx", _name)
del _name


def _local_alloc_signature():
    # TLX's parameter list, for code that inspects it (the call itself is compiled).
    import inspect

    P = inspect.Parameter
    params = [("shape", P.empty, "tuple"), ("dtype", P.empty, "tl.dtype"),
              ("num", P.empty, "tl.constexpr"), ("storage", storage_kind.smem, "tlx.storage_kind"),
              ("reuse", None, "Optional[tlx.buffered_tensor | tlx.storage_alias_spec]"),
              ("layout", None, "Optional[tlx.shared_layout_encoding]")]
    return inspect.Signature([P(n, P.POSITIONAL_OR_KEYWORD, default=d, annotation=a)
                              for n, d, a in params], return_annotation="tlx.buffered_tensor")


local_alloc.__signature__ = _local_alloc_signature()  # noqa: F821  (set in the loop above)
