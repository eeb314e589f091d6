"""Host-side values of `warpweave.tlx`: the TLX objects that ordinary Python may build before a
launch (task descriptions, storage-alias specs and reuse groups, buffer descriptions, shared
layouts). Inside a kernel the compiler reads the same names by their `tlx.` spelling; out here
they are plain records with TLX's attribute names, validated as TLX validates them, so that host
code (configs, tests, helpers that assemble launch arguments) sees what it would see under
Triton's TLX."""

from __future__ import annotations

from typing import Optional


def _plain(value):
    """The value inside a `tl.constexpr` (TLX accepts either wherever it takes a number)."""
    from .language import constexpr

    return value.value if isinstance(value, constexpr) else value


def check_register_count(value, what="num_regs"):
    """Register budgets are set by setmaxnreg, which takes multiples of 8."""
    if value is not None and value % 8 != 0:
        raise ValueError(f"{what} must be divisible by 8, got {value}")


class async_task:
    """One task of a `with tlx.async_tasks():` region: `async_task("default", num_regs=...)` for
    the kernel's own warps, `async_task(num_warps=, num_regs=, replicate=,
    warp_group_start_id=)` for a worker, or `async_task([task ids])`. `registers` is accepted as
    another spelling of `num_regs`."""

    def __init__(self, *args, **kwargs):
        self.is_default = False
        self.is_explict = False  # TLX's spelling, kept for code that reads it
        self.task_ids = None
        self.num_warps = None
        self.num_regs = None
        self.replicate = None
        self.warp_group_start_id = None
        if len(args) > 1:
            raise TypeError(f"async_task() takes at most one positional argument "
                            f"('default' or a list of task ids), got {len(args)}")
        if args and _plain(args[0]) != "default":
            self.task_ids = sorted({_plain(t) for t in args[0]})
            return
        self.is_explict = True
        self.is_default = bool(args)
        if not args:
            self.num_warps = _plain(kwargs.get("num_warps"))
        self.num_regs = _plain(kwargs.get("num_regs", kwargs.get("registers")))
        check_register_count(self.num_regs)
        self.replicate = _plain(kwargs.get("replicate", 1))
        self.warp_group_start_id = _plain(kwargs.get("warp_group_start_id"))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def __repr__(self):
        if self.task_ids is not None:
            return f"tlx.async_task({self.task_ids!r})"
        head = "'default', " if self.is_default else f"num_warps={self.num_warps}, "
        return f"tlx.async_task({head}num_regs={self.num_regs}, replicate={self.replicate})"


class async_tasks:
    """The `with tlx.async_tasks(...):` region that holds async_task blocks. Options:
    `exclusive`, `no_ending_cluster_sync`, `mbarrier_try_wait_suspend_ns` (a non-negative
    int)."""

    def __init__(self, *args, exclusive=False, no_ending_cluster_sync=False,
                 mbarrier_try_wait_suspend_ns=None, **kwargs):
        self.exclusive = _plain(exclusive)
        self.no_ending_cluster_sync = _plain(no_ending_cluster_sync)
        ns = _plain(mbarrier_try_wait_suspend_ns)
        if ns is not None and (not isinstance(ns, int) or isinstance(ns, bool) or ns < 0):
            raise ValueError("mbarrier_try_wait_suspend_ns must be a non-negative integer")
        self.mbarrier_try_wait_suspend_ns = ns

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class swizzled_shared_layout_encoding:
    """A shared-memory layout in TLX's terms (vector size, phase, order and the CTA split of a
    cluster). `make_default(rank)` is the unswizzled row-major one."""

    def __init__(self, vectorSize, perPhase, maxPhase, order, numCTAs, numCTAsPerCGA, numCTASplit,
                 numCTAOrder):
        self.vectorSize = vectorSize
        self.perPhase = perPhase
        self.maxPhase = maxPhase
        self.order = order
        self.numCTAs = numCTAs
        self.numCTAsPerCGA = numCTAsPerCGA
        self.numCTASplit = numCTASplit
        self.numCTAOrder = numCTAOrder

    @classmethod
    def make_default(cls, rank):
        row_major = list(range(rank - 1, -1, -1))
        ones = [1] * rank
        return cls(1, 1, 1, row_major, ones, list(ones), list(ones), list(row_major))

    def make_permute(self, dims):
        return swizzled_shared_layout_encoding(
            self.vectorSize, self.perPhase, self.maxPhase, tuple(self.order[d] for d in dims),
            self.numCTAs, self.numCTAsPerCGA, self.numCTASplit, self.numCTAOrder)

    def _key(self):
        return (self.vectorSize, self.perPhase, self.maxPhase, tuple(self.order))

    def __eq__(self, other):
        return isinstance(other, swizzled_shared_layout_encoding) and self._key() == other._key()

    def __hash__(self):
        return hash(self._key())

    def __repr__(self):
        return (f"tlx.swizzled_shared_layout_encoding(vectorSize={self.vectorSize}, "
                f"perPhase={self.perPhase}, maxPhase={self.maxPhase}, order={self.order!r})")


class buffered_tensor:
    """What `tlx.local_alloc` returns, as a description: `num` buffers of `shape` elements of
    `element_ty` in `storage`, with a shared layout. Kernels get theirs from local_alloc; host
    code builds one to describe a buffer (e.g. in a reuse_group)."""

    def __init__(self, handle, element_ty, shape, num, storage, layout=None):
        self.handle = handle
        self.dtype = element_ty
        self.shape = list(shape)
        self.num = _plain(num)
        self.storage = storage
        self.layout = layout

    def __repr__(self):
        return (f"tlx.buffered_tensor({self.dtype!r}, shape={self.shape!r}, num={self.num}, "
                f"storage={self.storage!r})")


class storage_alias_spec_type:
    """The type of a storage alias spec: its storage kind and, when sized, its size in bytes."""

    def __init__(self, storage, buffer_size_bytes: Optional[int] = None):
        self._storage = storage
        self._buffer_size_bytes = buffer_size_bytes

    storage = property(lambda self: self._storage)
    buffer_size_bytes = property(lambda self: self._buffer_size_bytes)

    def _size_suffix(self, sep):
        return f"{sep}{self._buffer_size_bytes}" if self._buffer_size_bytes else ""

    def __eq__(self, other):
        return (isinstance(other, storage_alias_spec_type)
                and (self._storage, self._buffer_size_bytes)
                == (other._storage, other._buffer_size_bytes))

    def __hash__(self):
        return hash((self._storage, self._buffer_size_bytes))

    def __repr__(self):
        suffix = self._size_suffix(", size=")
        return f"storage_alias_spec_type(storage={self._storage.value}{suffix})"

    def mangle(self):
        return f"storage_alias_spec_{self._storage.value}{self._size_suffix('_')}"


class storage_alias_spec:
    """A buffer that several local_allocs share (`tlx.storage_alias_spec(storage=...)` in a
    kernel; `tlx.storage_alias_spec_type_class` names this record in host code). Immutable;
    smemCluster storage is refused, as in TLX."""

    def __init__(self, handle, storage, buffer_size_bytes: Optional[int] = None):
        if getattr(storage, "name", None) == "smemCluster":
            raise ValueError("storage_alias_spec: smemCluster storage is not supported (smem or "
                             "tmem)")
        object.__setattr__(self, "_handle", handle)
        object.__setattr__(self, "_storage", storage)
        object.__setattr__(self, "_buffer_size_bytes", _plain(buffer_size_bytes))
        object.__setattr__(self, "type", storage_alias_spec_type(storage, self._buffer_size_bytes))

    handle = property(lambda self: self._handle)
    storage = property(lambda self: self._storage)
    buffer_size_bytes = property(lambda self: self._buffer_size_bytes)

    def __setattr__(self, name, value):
        raise AttributeError(f"storage_alias_spec is immutable: cannot set '{name}'")

    def __repr__(self):
        size = f", size={self._buffer_size_bytes}" if self._buffer_size_bytes else ""
        return f"storage_alias_spec(storage={self._storage.value}{size})"


class reuse_group:
    """A tree saying how buffers of one storage_alias_spec overlap: `shared` elements occupy the
    same region at each buffer index, `distinct` ones disjoint regions; leaves are buffers,
    inner nodes nested groups. `group_size` treats that many consecutive buffers as one."""

    def __init__(self, *args, group_type=None, group_size=1):
        from .tlx import reuse_group_type

        if not args:
            raise ValueError("reuse_group requires at least one element")
        group_size = _plain(group_size)
        if not isinstance(group_size, int) or isinstance(group_size, bool) or group_size < 1:
            raise ValueError(f"group_size must be a positive integer, got {group_size!r}")
        args = tuple(_plain(a) for a in args)
        for a in args:
            if not isinstance(a, (reuse_group, buffered_tensor)):
                raise TypeError(f"reuse_group elements must be buffered_tensor or reuse_group, "
                                f"got {type(a).__name__}")
        self._args = args
        self._group_type = reuse_group_type.shared if group_type is None else group_type
        self._group_size = group_size

    args = property(lambda self: self._args)
    group_type = property(lambda self: self._group_type)
    group_size = property(lambda self: self._group_size)

    def __repr__(self):
        size = f", group_size={self._group_size}" if self._group_size != 1 else ""
        return f"reuse_group({self._args}, group_type={self._group_type.value}{size})"
