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


class layout_encoding:
    """Base of every TLX layout record (the layouts host code names; see the end of the file)."""


class shared_layout_encoding(layout_encoding):
    """Base of the shared-memory layouts."""


class swizzled_shared_layout_encoding(shared_layout_encoding):
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

    def _kernel_literal(self):
        """The constructor call a kernel given this object as a constexpr evaluates."""
        def ints(x):
            x = list(x) if isinstance(x, (list, tuple)) else [x]
            return "(" + "".join(f"{int(_plain(i))}, " for i in x) + ")"
        return (f"tlx.swizzled_shared_layout_encoding({int(self.vectorSize)}, {int(self.perPhase)}, "
                f"{int(self.maxPhase)}, {ints(self.order)}, {ints(self.numCTAs)}, "
                f"{ints(self.numCTAsPerCGA)}, {ints(self.numCTASplit)}, {ints(self.numCTAOrder)})")

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


class buffered_tensor_type:
    """The type of a buffered_tensor: `num` buffers (0: a single one) of `shape` elements of
    `element_ty` in `storage`. `mangle()` names it as TLX's JIT does in its function keys."""

    def __init__(self, element_ty, shape, num, storage, layout=None):
        self.element_ty = element_ty
        self.shape = list(shape)
        self.num = _plain(num)
        self.storage = storage
        self.layout = layout

    def mangle(self):
        shape = "_".join(map(str, self.shape)) + (f"_{self.num}" if self.num > 0 else "")
        return f"buffered_{self.element_ty.mangle()}S{shape}"

    def __repr__(self):
        return (f"buffered_tensor_<{self.element_ty}, {self.shape}, {self.layout}, "
                f"{self.num}>")


class mbarrier_type(buffered_tensor_type):
    """The type of `num` mbarriers (alloc_barriers / alloc_warp_barrier): 64-bit words."""

    def __init__(self, num, layout, storage, is_warp_barrier=False):
        from .language import int64

        super().__init__(int64, [1], num, storage, layout)
        self.is_warp_barrier = is_warp_barrier


class clc_response_type(buffered_tensor_type):
    """The type of `num` cluster-launch-control responses (16-byte opaque words; int64 stands in
    for their element type, so its mangled name is its own, not a buffer of int64's)."""

    def __init__(self, num, layout):
        from .language import int64

        super().__init__(int64, [1], num, None, layout)

    def mangle(self):
        return f"clc_response_{self.num}"


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


# ------------------------------------------------------------------------------------------------
# Layouts host code names. warpweave picks its own register and shared-memory layouts on NVIDIA
# targets; these records carry TLX's fields so that code building them (and reading them back)
# works, and a kernel given one gets the compiler's error where it uses it.
# ------------------------------------------------------------------------------------------------


class swizzled_layout:
    """CuTe's Swizzle<B, M, S> as a shared-memory layout: `bits` (B, maxPhase = 2**B), `base`
    (M, vector = 2**M elements), `shift` (S, on the flat offset). Triton's per-row perPhase
    depends on the contiguous extent, so `_to_encoding(shape)` resolves it for a buffer shape:
    perPhase = 2**(S + M) / shape[order[0]]."""

    def __init__(self, bits, base=0, shift=0, order=None):
        self.bits, self.base, self.shift = int(_plain(bits)), int(_plain(base)), int(_plain(shift))
        order = _plain(order)
        self.order = None if order is None else [int(_plain(d)) for d in order]

    @classmethod
    def make_default(cls, rank):
        return cls(0, 0, 0, order=list(range(rank - 1, -1, -1)))

    maxPhase = property(lambda self: 1 << self.bits)
    vectorSize = property(lambda self: 1 << self.base)

    def _to_encoding(self, shape=None):
        if self.order is None and shape is None:
            raise ValueError("swizzled_layout: needs an order or a buffer shape to resolve")
        rank = len(self.order) if self.order is not None else len(shape)
        order = list(self.order) if self.order is not None else list(range(rank - 1, -1, -1))
        per_phase = 1
        if self.maxPhase > 1:
            if shape is None:
                raise ValueError("swizzled_layout: a real swizzle (bits > 0) resolves only "
                                 "against the buffer shape")
            contiguous = int(shape[order[0]])
            span = 1 << (self.shift + self.base)
            # AssertionError, as TLX raises for a swizzle finer than one row.
            assert span % contiguous == 0, (
                f"swizzled_layout Swizzle<{self.bits},{self.base},{self.shift}>: 2**(shift+base) "
                f"= {span} is not a multiple of the contiguous extent {contiguous} (perPhase < 1)")
            per_phase = span // contiguous
        ones = [1] * rank
        return swizzled_shared_layout_encoding(self.vectorSize, per_phase, self.maxPhase, order,
                                               ones, list(ones), list(ones),
                                               list(range(rank - 1, -1, -1)))

    def _key(self):
        return (self.bits, self.base, self.shift, None if self.order is None else tuple(self.order))

    def __eq__(self, other):
        return isinstance(other, swizzled_layout) and self._key() == other._key()

    def __hash__(self):
        return hash(self._key())

    def _kernel_literal(self):
        order = "None" if self.order is None else "(" + "".join(f"{d}, " for d in self.order) + ")"
        return f"tlx.swizzled_layout({self.bits}, {self.base}, {self.shift}, order={order})"

    def __repr__(self):
        return f"swizzled_layout(Swizzle<{self.bits},{self.base},{self.shift}>, order={self.order})"


class layout(layout_encoding):
    """A register layout in CuTe's thread-value notation, `tlx.layout(shape=(thread_shape,
    value_shape), stride=(thread_stride, value_stride))`. Given a swizzled_layout instead it is
    that shared layout (resolved now when it does not swizzle)."""

    def __new__(cls, spec=None, *, shape=None, stride=None):
        if isinstance(spec, swizzled_layout):
            return spec._to_encoding() if spec.maxPhase == 1 else spec
        return super().__new__(cls)

    def __init__(self, spec=None, *, shape=None, stride=None):
        # AssertionError, as TLX raises for a layout with neither form.
        assert shape is not None and stride is not None, (
            "tlx.layout takes a swizzled_layout(...) or shape=/stride= (a register layout)")
        assert len(shape) == 2 and len(stride) == 2, (
            "tlx.layout: shape and stride are each (thread, value)")
        self.shape, self.stride = shape, stride
        self.thread_shape, self.value_shape = shape
        self.thread_stride, self.value_stride = stride

    def __repr__(self):
        return f"tlx.layout(shape={self.shape!r}, stride={self.stride!r})"

    def __eq__(self, other):
        return isinstance(other, layout) and (self.shape, self.stride) == (other.shape,
                                                                            other.stride)

    def __hash__(self):
        return hash((repr(self.shape), repr(self.stride)))


class padded_shared_layout_encoding(shared_layout_encoding):
    """AMD's padded shared layout: after every `intervals[i]` elements, `paddings[i]` elements of
    padding; either the identity map over {order, shape} or explicit `offset_bases` (one base
    vector per offset bit) and `block_bases`."""

    def __init__(self, intervals, paddings, order, shape, numCTAsPerCGA, numCTASplit, numCTAOrder,
                 offset_bases=None, block_bases=None):
        assert len(intervals) == len(paddings), "intervals and paddings differ in length"
        self.intervals, self.paddings = list(intervals), list(paddings)
        self.order, self.shape = list(order), list(shape)
        self.numCTAsPerCGA = list(numCTAsPerCGA)
        self.numCTASplit = list(numCTASplit)
        self.numCTAOrder = list(numCTAOrder)
        self.offset_bases = None if offset_bases is None else [list(b) for b in offset_bases]
        self.block_bases = None if block_bases is None else [list(b) for b in block_bases]

    @property
    def intervals_paddings(self):
        return list(zip(self.intervals, self.paddings))

    @staticmethod
    def _split(pairs):
        return [int(p[0]) for p in pairs], [int(p[1]) for p in pairs]

    @classmethod
    def with_bases(cls, interval_padding_pairs, offset_bases, shape, block_bases=None):
        rank = len(shape)
        assert rank > 0 and offset_bases, "with_bases needs a shape and offset bases"
        for b in list(offset_bases) + list(block_bases or []):
            assert len(b) == rank, f"base vector {b} does not have the shape's rank {rank}"
        intervals, paddings = cls._split(interval_padding_pairs)
        return cls(intervals, paddings, list(range(rank - 1, -1, -1)), list(shape), [1] * rank,
                   [1] * rank, list(range(rank)),
                   offset_bases=[[int(x) for x in b] for b in offset_bases],
                   block_bases=[[int(x) for x in b] for b in (block_bases or [])])

    @classmethod
    def with_identity_for(cls, interval_padding_pairs, shape, order=None):
        rank = len(shape)
        intervals, paddings = cls._split(interval_padding_pairs)
        order = list(range(rank - 1, -1, -1)) if order is None else list(order)
        return cls(intervals, paddings, order, list(shape), [1] * rank, [1] * rank,
                   list(range(rank)))

    def make_permute(self, dims):
        return padded_shared_layout_encoding(
            self.intervals, self.paddings, [self.order[d] for d in dims],
            [self.shape[d] for d in dims], self.numCTAsPerCGA, self.numCTASplit, self.numCTAOrder)

    def _kernel_literal(self):
        def ints(x):
            return "(" + "".join(f"{int(i)}, " for i in x) + ")"

        def bases(x):
            return "None" if x is None else "(" + "".join(f"{ints(b)}, " for b in x) + ")"
        return (f"tlx.padded_shared_layout_encoding({ints(self.intervals)}, {ints(self.paddings)}, "
                f"{ints(self.order)}, {ints(self.shape)}, {ints(self.numCTAsPerCGA)}, "
                f"{ints(self.numCTASplit)}, {ints(self.numCTAOrder)}, "
                f"offset_bases={bases(self.offset_bases)}, block_bases={bases(self.block_bases)})")

    def _key(self):
        return self._kernel_literal()

    def __eq__(self, other):
        return isinstance(other, padded_shared_layout_encoding) and self._key() == other._key()

    def __hash__(self):
        return hash(self._key())

    def __repr__(self):
        return (f"tlx.padded_shared_layout_encoding({self.intervals_paddings!r}, "
                f"{self.offset_bases!r}, {self.shape!r})")


class shared_linear_layout_encoding(shared_layout_encoding):
    """An explicit linear shared-memory map (Gluon's): one base vector per offset bit, optional
    block bases, and the alignment (a power of two) of the buffer."""

    def __init__(self, offset_bases, block_bases=None, alignment=16):
        self.offset_bases = [[int(x) for x in b] for b in offset_bases]
        self.block_bases = [[int(x) for x in b] for b in (block_bases or [])]
        self.alignment = int(alignment)
        assert self.offset_bases and self.offset_bases[0], "offset_bases must be non-empty"
        rank = len(self.offset_bases[0])
        assert all(len(b) == rank for b in self.offset_bases + self.block_bases), (
            "every base vector must have the same rank")
        assert self.alignment > 0 and self.alignment & (self.alignment - 1) == 0, (
            "alignment must be a power of two")

    def make_permute(self, dims):
        return self  # a physical image: views describe the permutation


class amd_mfma_layout(layout_encoding):
    """AMD's MFMA register layout (gfx9 matrix cores), recorded for code that builds one;
    warpweave generates NVIDIA code only."""

    def __init__(self, version, instr_shape, transposed, warps_per_cta, element_bitwidth=32,
                 tiles_per_warp=None, cga_layout=None):
        self.version = int(version)
        self.instr_shape = [int(x) for x in instr_shape]
        self.transposed = bool(transposed)
        self.warps_per_cta = [int(x) for x in warps_per_cta]
        self.element_bitwidth = int(element_bitwidth)
        # One tile factor per warp axis (M, N); the instruction's K is not one.
        self.tiles_per_warp = [int(x) for x in (tiles_per_warp or [1] * len(self.warps_per_cta))]
        self.cga_layout = [[int(x) for x in b] for b in (cga_layout or [])]
        assert 1 <= self.version <= 4, "MFMA version is 1 to 4"
        assert len(self.instr_shape) == 3 and self.instr_shape[:2] in (
            [32, 32], [16, 16], [64, 4], [4, 64]), f"unsupported MFMA shape {self.instr_shape}"
        assert self.element_bitwidth in (32, 64)
        assert len(self.tiles_per_warp) == len(self.warps_per_cta)
        assert all(len(b) == len(self.warps_per_cta) for b in self.cga_layout)
