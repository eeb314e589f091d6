"""Host wrappers for the kernel library: one function per kernel, taking NumPy arrays (run in the
CPU interpreter) or CUDA torch tensors (run on the GPU), allocating the outputs and computing each
launch grid from the kernel's constexprs, as the Triton tutorials' wrappers do.

    from kernels import ops          # with the repository root on sys.path
    y = ops.softmax(x)               # x: np.ndarray -> interpreter, torch.cuda tensor -> GPU

CPU torch tensors run in the interpreter only when WARPWEAVE_INTERPRET=1 (as TRITON_INTERPRET=1
does for Triton); otherwise they are refused, since a silent host round trip would hide a missing
`.cuda()`. Every argument error is a ValueError that names the argument.

Block sizes: the GPU configurations are the ones each kernel's docstring recommends; the
interpreter gets smaller blocks, because it executes every lane of a block on the CPU and the
padding lanes of a large block over a small input are pure waste there.
"""

from __future__ import annotations

import functools
import math
import os
import threading

import warpweave as ww

from . import attention as _attention
from . import embedding_bag as _embedding_bag
from . import layernorm as _layernorm
from . import matmul as _matmul
from . import reduction as _reduction
from . import softmax as _softmax
from . import vector_add as _vector_add
from .hopper import attention_ws as _attention_ws
from .hopper import gemm_pipelined as _gemm_pipelined
from .hopper import gemm_ws as _gemm_ws
from .hopper import gemm_ws_pingpong as _gemm_ws_pingpong
from .hopper import layernorm_tma as _layernorm_tma
from .hopper import rows_cluster as _rows_cluster
from .hopper import rows_smem as _rows_smem
from .hopper import softmax_tma as _softmax_tma

__all__ = [
    "add", "softmax", "layernorm_fwd", "layernorm_bwd", "matmul", "embedding_bag", "row_sum",
    "row_max", "attention", "matmul_tlx", "attention_tlx",
]

_FLOATS = ("float16", "bfloat16", "float32")
_HALF_FLOATS = ("float16", "bfloat16")
_INDEX_TYPES = ("int32", "int64")

# Rows up to this many columns keep the whole row in one block (softmax_kernel, up to 32 warps
# and no rows loaded ahead: 32768 fp32 columns take 63 registers per thread, no spills); longer
# rows take the two-pass online kernel, whose block size does not grow with the row.
SOFTMAX_FUSED_MAX_COLS = 32768

# ------------------------------------------------------------------------------------------------
# Where a call's arrays live
# ------------------------------------------------------------------------------------------------


_numpy_array_type = None  # numpy.ndarray, once one has been seen (numpy is imported lazily)


def _is_numpy(value) -> bool:
    global _numpy_array_type
    t = type(value)
    if t is _numpy_array_type:
        return True
    if t.__name__ == "ndarray" and t.__module__ == "numpy":
        _numpy_array_type = t
        return True
    return False


def _is_torch(value) -> bool:
    return type(value).__module__.startswith("torch") and hasattr(value, "data_ptr")


def _interpret_env() -> bool:
    return os.environ.get("WARPWEAVE_INTERPRET", "0") not in ("", "0", "false", "False")


_sm_counts: dict = {}


class _Place:
    """The library (NumPy or torch) and device of one call's arrays: outputs are allocated here,
    and the interpreter or the GPU runs the kernels (launch). Under a _planned wrapper's first
    call it also tells the call's _PlanRecorder what it allocated and launched."""

    def __init__(self, op: str, arrays: dict):
        self.op = op
        self.torch_device = None
        self.kind = None  # "numpy" or "torch"
        # Only the call's first place records (a nested call's places do not).
        self.recorder = getattr(_recording, "recorder", None)
        if self.recorder is not None:
            _recording.recorder = None
            self.recorder.place = self
        first = None
        for name, value in arrays.items():
            if value is None:
                continue
            if _is_numpy(value):
                kind, device = "numpy", None
            elif _is_torch(value):
                kind, device = "torch", value.device
                if device.type != "cuda" and not _interpret_env():
                    raise ValueError(
                        f"{op}: '{name}' is a torch tensor on {device}; pass CUDA tensors (GPU), "
                        f"NumPy arrays (interpreter), or set WARPWEAVE_INTERPRET=1 to run CPU "
                        f"tensors in the interpreter")
            else:
                raise ValueError(f"{op}: '{name}' must be a NumPy array or a torch tensor, got "
                                 f"{type(value).__module__}.{type(value).__name__}")
            if first is None:
                first = name
                self.kind, self.torch_device = kind, device
            elif kind != self.kind:
                raise ValueError(f"{op}: '{name}' is a {kind} array but '{first}' is a "
                                 f"{self.kind} array; pass all NumPy arrays or all torch tensors")
            elif device != self.torch_device:
                raise ValueError(f"{op}: '{name}' is on {device} but '{first}' is on "
                                 f"{self.torch_device}; put every tensor on one device")
        if self.kind is None:
            raise ValueError(f"{op}: no array arguments")

    @property
    def on_gpu(self) -> bool:
        """True when the kernels run on the GPU (not in the interpreter)."""
        return (self.kind == "torch" and self.torch_device.type == "cuda" and
                not _interpret_env())

    def empty(self, shape, dtype: str):
        if self.kind == "numpy":
            import numpy as np

            out = np.empty(shape, _numpy_dtype(dtype))
        else:
            import torch

            out = torch.empty(shape, dtype=getattr(torch, dtype), device=self.torch_device)
        if self.recorder is not None:
            self.recorder.allocated(out, shape, dtype)
        return out

    def launch(self, kernel, grid, /, *args, **meta):
        """kernel[grid](*args, **meta); a grid function is called with `meta` (the launch's
        keyword arguments: its constexprs and options)."""
        if callable(grid):
            grid = grid(meta)
        if self.recorder is not None:
            self.recorder.launched(kernel, grid, args, meta)
        kernel[grid](*args, **meta)

    def num_sms(self) -> int:
        """The GPU's SM count, or a small stand-in for the interpreter (where persistent grids only
        need to be smaller than the row count to exercise their loops)."""
        if not self.on_gpu:
            return 4
        index = self.torch_device.index
        if index is None:
            import torch

            index = torch.cuda.current_device()
        count = _sm_counts.get(index)
        if count is None:
            import torch

            count = torch.cuda.get_device_properties(index).multi_processor_count
            _sm_counts[index] = count
        return count


# ------------------------------------------------------------------------------------------------
# Launch plans: a wrapper's host work, done once per argument signature
# ------------------------------------------------------------------------------------------------
#
# The row wrappers' checks, routing, tile and grid choices and occupancy lookups cost 35-160 us of
# host time per call on the H200's host (bench/profile_wrappers.py), more than the GPU takes for
# a 256 MB layer norm: per-launch timings then measure the host. All of that depends only on the
# arguments' dtypes, shapes, strides, 16-byte alignment and device, and on the other arguments'
# values. A _planned wrapper's first call with a signature records what its place allocated and
# launched (each tensor argument traced back to an input or an allocation by address); later calls
# with that signature allocate the same outputs and replay the launches on the new arrays. A call
# is not recorded when anything it launched cannot be traced (a copy made by .contiguous(), a view
# starting inside an array), when it launched nothing, or when an argument is not a plain value;
# such calls always take the wrapper's full path. Wrappers under _planned must do all their device
# work through place.launch and place.empty.

_recording = threading.local()
_launch_plans: dict = {}
_LAUNCH_PLANS_KEPT = 256
# False: every call takes the full path. (tests/conftest.py clears _launch_plans before each
# test instead, so that tests patching the routing see their first call take it.)
LAUNCH_PLANS = True


def _array_key(value):
    """(signature part, address) of one array argument, or None for a value that is not an
    array."""
    if _is_numpy(value):
        address = value.ctypes.data
        return ("numpy", value.dtype.str, value.shape, value.strides, address & 15), address
    if _is_torch(value):
        address = value.data_ptr()
        return (value.dtype, value.shape, value.stride(), address & 15, value.device), address
    return None


def _frozen(value):
    """A hashable stand-in for a plain argument value (numbers, strings, None, and dicts, lists
    and tuples of them); raises TypeError for anything else."""
    if value is None or type(value) in (bool, int, float, str):
        return (type(value), value)
    if type(value) is dict:
        return ("dict", tuple(sorted((k, _frozen(v)) for k, v in value.items())))
    if type(value) in (list, tuple):
        return (type(value).__name__, tuple(_frozen(v) for v in value))
    raise TypeError


def _address(value) -> int:
    return value.ctypes.data if _is_numpy(value) else value.data_ptr()


class _PlanRecorder:
    """Traces one wrapper call's launches back to its inputs and allocations."""

    def __init__(self, inputs):
        self.traceable = True
        self.place = None  # the call's first _Place
        self.allocations = []  # (shape, dtype)
        self.by_address = {}  # address -> ("in", index, dtype, numel) or ("alloc", ...)
        self.launches = []  # (kernel, grid, argument sources, meta)
        for i, value in enumerate(inputs):
            self._name(value, ("in", i))

    def _name(self, value, source):
        address = _address(value)
        entry = (*source, _dtype_name(value), _numel(value))
        known = self.by_address.get(address, ())
        if source[0] == "in" and known:
            # Inputs at one address: the plan key holds which inputs share addresses, so any of
            # them serves a replay; the first is named.
            return
        # An allocation may take the address of one freed during the call (the latest counts),
        # but not an input's (empty arrays: which one a launch took is unknown).
        self.by_address[address] = None if known is None or known[:1] == ("in",) else entry

    def allocated(self, value, shape, dtype):
        self.allocations.append((shape, dtype))
        self._name(value, ("alloc", len(self.allocations) - 1))

    def source(self, value):
        """Where an array argument comes from: ("in" | "alloc", index), or None."""
        entry = self.by_address.get(_address(value))
        if entry is None or entry[2] != _dtype_name(value) or entry[3] != _numel(value):
            return None
        return entry[:2]

    def launched(self, kernel, grid, args, meta):
        sources = []
        for value in args:
            if _is_numpy(value) or _is_torch(value):
                source = self.source(value)
                if source is None:
                    self.traceable = False
                    return
                sources.append(("array", source))
            elif type(value) is ww.TensorDescriptor:
                source = self.source(value.base)
                if source is None:
                    self.traceable = False
                    return
                sources.append(("descriptor", (source, value.shape, value.strides,
                                               value.block_shape, value.padding)))
            elif value is None or type(value) in (bool, int, float, str):
                sources.append(("value", value))
            else:
                self.traceable = False
                return
        self.launches.append((kernel, grid, tuple(sources), dict(meta)))

    def plan(self, place, result):
        """The _LaunchPlan of the recorded call, or None when it cannot be replayed."""
        if not self.traceable or not self.launches or place is None:
            return None
        many = type(result) is tuple
        results = []
        for value in (result if many else (result,)):
            source = self.source(value) if (_is_numpy(value) or _is_torch(value)) else None
            if source is None:
                return None
            results.append((source, tuple(value.shape)))
        return _LaunchPlan(place, self.allocations, self.launches, results, many)


class _LaunchPlan:
    """One recorded call: the allocations to make and the launches to replay on new arrays."""

    def __init__(self, place, allocations, launches, results, many):
        self.place = place
        self.allocations = allocations
        self.launches = launches
        self.results = results
        self.many = many

    def run(self, inputs):
        made = [self.place.empty(shape, dtype) for shape, dtype in self.allocations]
        arrays = {"in": inputs, "alloc": made}
        for kernel, grid, sources, meta in self.launches:
            args = []
            for kind, value in sources:
                if kind == "value":
                    args.append(value)
                elif kind == "array":
                    args.append(arrays[value[0]][value[1]])
                else:
                    (where, index), shape, strides, block, padding = value
                    args.append(ww.TensorDescriptor(arrays[where][index], shape, strides, block,
                                                    padding))
            kernel[grid](*args, **meta)
        out = tuple(arrays[where][index].reshape(shape) for (where, index), shape in self.results)
        return out if self.many else out[0]


def _planned(wrapper):
    """Records wrapper's first call per argument signature as a _LaunchPlan and replays it on
    later calls with that signature (see the section's comment)."""
    name = wrapper.__name__

    @functools.wraps(wrapper)
    def planned(*args, **kwargs):
        if not LAUNCH_PLANS:
            return wrapper(*args, **kwargs)
        inputs = []
        addresses = []
        key = [name, _interpret_env()]
        try:
            for value in (*args, *kwargs.values()):
                array = _array_key(value)
                if array is None:
                    key.append(_frozen(value))
                else:
                    inputs.append(value)
                    addresses.append(array[1])
                    key.append(array[0])
            key.append(tuple(kwargs))
            # Which inputs share an address (x passed as both operands): a plan recorded with
            # one pattern is replayed only with it.
            key.append(tuple(addresses.index(a) for a in addresses))
            key = tuple(key)
            plan = _launch_plans.get(key)
        except TypeError:  # an argument that is not a plain value: no plan
            return wrapper(*args, **kwargs)
        if plan is not None:
            return plan.run(inputs)
        recorder = _PlanRecorder(inputs)
        _recording.recorder = recorder
        try:
            result = wrapper(*args, **kwargs)
        finally:
            _recording.recorder = None
            if recorder.place is not None:  # the plan allocates through it: no more recording
                recorder.place.recorder = None
        plan = recorder.plan(recorder.place, result)
        if plan is not None:
            if len(_launch_plans) >= _LAUNCH_PLANS_KEPT:
                del _launch_plans[next(iter(_launch_plans))]
            _launch_plans[key] = plan
        return result

    return planned


def _numpy_dtype(name: str):
    import numpy as np

    if name == "bfloat16":
        try:
            import ml_dtypes
        except ImportError:
            raise ValueError("bfloat16 NumPy arrays need the ml_dtypes package "
                             "(pip install ml-dtypes)") from None
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


_dtype_names: dict = {}  # dtype object -> name: str() and .name cost microseconds a call


def _dtype_name(value) -> str:
    """'float16', 'bfloat16', 'int64'... for a NumPy array or a torch tensor."""
    dtype = value.dtype
    name = _dtype_names.get(dtype)
    if name is None:
        name = dtype.name if _is_numpy(value) else str(dtype).replace("torch.", "")
        _dtype_names[dtype] = name
    return name


def _strides(value) -> tuple:
    """Strides in elements."""
    if _is_numpy(value):
        return tuple(s // value.itemsize for s in value.strides)
    return tuple(value.stride())


def _itemsize(value) -> int:
    if _is_numpy(value):
        return value.itemsize
    return value.element_size()


def _contiguous(value):
    if _is_numpy(value):
        import numpy as np

        return np.ascontiguousarray(value)
    return value.contiguous()


def _rows_unit_stride(value):
    """A 2-D view whose columns are adjacent in memory (rows may be strided): the layout the row
    kernels index; copies only when the columns are not adjacent or strides are negative."""
    strides = _strides(value)
    if (value.shape[1] > 1 and strides[1] != 1) or strides[0] < 0:
        return _contiguous(value)
    return value


def _check_dtype(op: str, name: str, value, allowed) -> str:
    dt = _dtype_name(value)
    if dt not in allowed:
        raise ValueError(f"{op}: '{name}' has dtype {dt}; expected {' or '.join(allowed)}")
    return dt


def _check_ndim(op: str, name: str, value, ndims, what: str = "") -> None:
    if value.ndim not in ndims:
        want = " or ".join(f"{n}-D" for n in ndims)
        raise ValueError(f"{op}: '{name}' must be {want}{what}, got shape {tuple(value.shape)}")


def _check_shape(op: str, name: str, value, shape, what: str = "") -> None:
    if tuple(value.shape) != tuple(shape):
        raise ValueError(f"{op}: '{name}' must have shape {tuple(shape)}{what}, got "
                         f"{tuple(value.shape)}")


def _as_rows(op: str, name: str, x):
    """x [..., N] as a 2-D [rows, N] view with adjacent columns."""
    if x.ndim < 1:
        raise ValueError(f"{op}: '{name}' must have at least one dimension, got a scalar")
    n_cols = x.shape[-1]
    if x.ndim != 2:
        x = _contiguous(x).reshape(-1, n_cols)
    return _rows_unit_stride(x)


def _numel(value) -> int:
    return math.prod(value.shape)


# ------------------------------------------------------------------------------------------------
# Element-wise
# ------------------------------------------------------------------------------------------------

# add_kernel computes 32-bit offsets; vectors this long take the persistent kernel's 64-bit ones.
ADD_PERSISTENT_FROM = (1 << 31) - 4096
_ADD_DTYPES = ("float16", "bfloat16", "float32", "float64", "int32", "int64")


@_planned
def add(x, y):
    """x + y element-wise (same shape and dtype); returns a new contiguous array."""
    place = _Place("add", {"x": x, "y": y})
    dt = _check_dtype("add", "x", x, _ADD_DTYPES)
    if _dtype_name(y) != dt:
        raise ValueError(f"add: 'y' has dtype {_dtype_name(y)} but 'x' has {dt}; convert one")
    if tuple(y.shape) != tuple(x.shape):
        raise ValueError(f"add: 'y' has shape {tuple(y.shape)} but 'x' has {tuple(x.shape)}; "
                         f"broadcasting is not supported")
    out = place.empty(tuple(x.shape), dt)
    n = _numel(x)
    if n == 0:
        return out
    xf, yf = _contiguous(x).reshape(-1), _contiguous(y).reshape(-1)
    if n < ADD_PERSISTENT_FROM:
        place.launch(_vector_add.add_kernel, (ww.cdiv(n, 1024),), xf, yf, out.reshape(-1), n,
                     BLOCK=1024, num_warps=4)
    else:
        programs = place.num_sms() * 4
        place.launch(_vector_add.add_kernel_persistent, (min(programs, ww.cdiv(n, 4096)),), xf,
                     yf, out.reshape(-1), n, BLOCK=4096, num_warps=8)
    return out


# ------------------------------------------------------------------------------------------------
# Softmax
# ------------------------------------------------------------------------------------------------


def _softmax_warps(block: int) -> int:
    if block >= 32768:
        return 32
    if block >= 8192:
        return 16
    if block >= 2048:
        return 8
    return 4


def _softmax_rows_ahead(block: int, dt: str) -> int:
    """Rows softmax_kernel loads ahead: 2 while the rows in registers (those ahead and the fp32
    one reduced) stay within half the register file; ptxas -v on 32 warps at BLOCK=32768:
    fp16 one row ahead 64 registers, fp32 none ahead 63, one ahead 64 with 500 bytes spilled.
    bf16 widens to fp32 in more registers than fp16: one row ahead at 32768 spilled 16 bytes."""
    if dt == "bfloat16" and block >= 32768:
        return 0
    itemsize = 4 if dt == "float32" else 2
    return max(0, min(2, 131072 // (block * itemsize) - 1))


# The online softmax's block and warps on the GPU: 47 registers per thread (fp16, 58 fp32) on 32
# warps, so one program per SM, whose row (200 KB at 100000 fp16 columns) stays in L2 for the
# second pass; 4096 columns on 16 warps kept four rows per SM in flight, more than L2 holds.
SOFTMAX_ONLINE_BLOCK = 8192
SOFTMAX_ONLINE_WARPS = 32


_resident_programs_cache = {}


_tma_devices = {}


def _row_descriptor(x2, tiles):
    """The TMA descriptor whose [TILE_R, TILE_C] blocks are the rows of x2 (see _tma_row_tiles)."""
    tile_r, tile_c = tiles
    return _descriptor(x2.reshape(x2.shape[0] * tile_r, tile_c), [tile_r, tile_c])


def _tma_row_tiles(place, x2):
    """(TILE_R, TILE_C) when each row of the 2-D array x2 can be copied by one TMA copy as a
    [TILE_R, TILE_C] block of x2 viewed as [n_rows * TILE_R, TILE_C] (TILE_C: 128 bytes of
    elements, the buffer's swizzle span): rows contiguous and back to back, TILE_R a power of two
    from 8 (one swizzle atom) to 256 (the TMA box limit), a 16-byte aligned base, a GPU with
    TMA; else None."""
    if place.on_gpu and place.kind == "torch" and not _sm90_or_later(place):
        return None
    n_rows, n_cols = x2.shape
    tile_c = 128 // _itemsize(x2)
    tile_r = n_cols // tile_c
    address = x2.ctypes.data if _is_numpy(x2) else x2.data_ptr()
    # The row coordinate n_rows * TILE_R is 32-bit.
    if (n_rows == 0 or n_cols % tile_c or tile_r & (tile_r - 1) or not 8 <= tile_r <= 256
            or _strides(x2) != (n_cols, 1) or address % 16 or n_rows * tile_r >= 1 << 31):
        return None
    return tile_r, tile_c


# Shared memory a block may use on sm_90a.
_MAX_SHARED_PER_BLOCK = 232448


def _tma_rows_fit(x2, config, inputs: int) -> bool:
    """Whether a TMA row kernel takes x2's rows on config's warps: each thread holds at most 64
    of the row's fp32 values (layernorm_fwd_tma_kernel at 16384 columns on 4 warps, 128 per
    thread, spilled 1168 bytes), and its shared memory fits one block: num_stages row buffers
    per input, two output rows with tma_store, and the fp32 row of scratch its row reduction
    takes (the compiler's figure: layernorm_bwd_tma_kernel at 16384 fp16 columns, 2 stages with
    TMA stores, needs 6 * 32 KB + 64 KB + 1 KB = 263168 bytes). Other rows stay on the register
    kernels."""
    n_cols = x2.shape[1]
    if n_cols > 64 * 32 * (config.get("num_warps") or 4):
        return False
    rows = inputs * (config.get("num_stages") or 2) + (2 if config.get("tma_store") else 0)
    return rows * n_cols * _itemsize(x2) + 4 * n_cols + 2048 <= _MAX_SHARED_PER_BLOCK


def _tma_row_defaults(op: str, place, x2) -> dict:
    """The configuration a call without one (config=None) takes on an sm_90+ GPU: the TMA row
    kernel where it was faster than the register kernel on the H200, at contiguous rows of 2 to
    32 KB, else {} (the register kernels' own defaults). The backward's rows of 32 KB are split
    over a 2-CTA cluster: one CTA's registers do not hold the dw / db sums of 16384 columns
    (0.61x of a same-size copy at 8192x16384 fp16 per launch, against 0.42x for the rows_cluster
    kernel and 0.35x for the register kernels before this session). Measured as CUDA-graph
    replays (bench/sweep_memory.py --graph, fp16, against the copy of the same bytes): softmax
    0.92 / 0.87 / 0.87 / 0.89x at 1024 / 4096 / 8192 / 16384 columns (register kernel 0.90 /
    0.84 / 0.86 / 0.87x); layer norm forward 0.88 / 0.89 / 0.86 / 0.88x (0.84 / 0.84 / 0.83 /
    0.69x); backward 0.86x at 1024 on 4 warps, 2 stages, 0.96x at 4096 on 8 warps with TMA
    stores and two programs per SM, 0.92x at 8192 on 8 warps, 3 stages (0.74 / 0.81 / 0.66x).
    Rows (or slices) of 32 KB take 8 warps: the kernels hold at most 64 of a row's fp32 values
    a thread. (Softmax rows of 64 KB split over 2-CTA clusters, 8 warps, 2 stages, ran 0.78x at
    4096x32768 fp16 and 0.87x at 8192x16384 fp32, where the register kernel ran 0.86 / 0.91x:
    not a default.)"""
    if not _sm90_or_later(place):
        return {}
    row_bytes = x2.shape[1] * _itemsize(x2)
    # The backward's rows past 16 KB are split over clusters into slices of 16 KB.
    split = max(1, row_bytes // 16384) if op == "layernorm_bwd" else 1
    if (not 2048 <= row_bytes <= (131072 if op == "layernorm_bwd" else 32768)
            or split not in (1, 2, 4, 8)  # cluster sizes the TMA kernel takes (_row_split)
            or _strides(x2) != (x2.shape[1], 1) or x2.shape[1] % split):
        return {}
    if _tma_row_tiles(place, _row_slices(x2, split)) is None:
        return {}
    if split > 1:
        # Each CTA streams its slices as one CTA does rows of 16 KB.
        return dict(tma=True, split=split, num_warps=8, num_stages=3)
    if op != "layernorm_bwd":
        return dict(tma=True, num_warps=4 if row_bytes <= 16384 else 8, num_stages=2)
    if row_bytes <= 4096:
        return dict(tma=True, num_warps=4, num_stages=2)
    if row_bytes <= 8192:
        return dict(tma=True, tma_store=True, num_warps=8, num_stages=2, programs_per_sm=2)
    return dict(tma=True, num_warps=8, num_stages=3)


def _row_split(op: str, config) -> int:
    """config's `split`: the CTAs of a cluster that share each row in the TMA row kernels."""
    split = config.get("split", 1)
    if type(split) is not int or split not in (1, 2, 4, 8):
        raise ValueError(f"{op}: config 'split' must be 1, 2, 4 or 8 (the CTAs of a cluster that "
                         f"share each row in the TMA kernel), got {split!r}")
    return split


def _row_slices(t, split: int):
    """The rows of the contiguous 2-D array t as `split` slices each: [n_rows * split, n_cols /
    split] (t itself for split 1)."""
    if split == 1:
        return t
    return t.reshape(t.shape[0] * split, t.shape[1] // split)


def _register_fallback(config, tiles):
    """The configuration of the register kernel that takes rows the TMA option asked for but the
    TMA kernel cannot take: its own defaults, since the warps, stages and programs per SM given
    with tma=True are the TMA kernel's (4 warps on 32768 fp16 columns spilled 14 KB)."""
    return {} if config.get("tma") and tiles is None else config


def _compiled_once(place, kernel, key, args, count_of, **meta):
    """count_of(compiled kernel), computed once per key (the kernel compiled without launching,
    from `args` or, when callable, what it returns: stand-in arguments cost a call's host time
    and are built only here); None in the interpreter."""
    if not place.on_gpu:
        return None
    count = _resident_programs_cache.get(key)
    if count is None:
        compiled = kernel.warmup(*(args() if callable(args) else args), **meta)
        count = count_of(compiled)
        _resident_programs_cache[key] = count
    return count


def _resident_programs(place, kernel, key, args, **meta) -> int:
    """Programs of one configuration that an SM runs at once, from the compiled kernel's
    registers and shared memory (64 warps, 65536 registers and 227 KiB per SM), as the Triton
    tutorials size their persistent grids; the interpreter gets a small stand-in."""
    warps = meta["num_warps"]

    def per_sm(compiled):
        if compiled is None or not getattr(compiled, "n_regs", 0):
            return max(1, 32 // warps)  # no ptxas report (interpreted or not compiled here)
        registers = max(8, (compiled.n_regs + 7) // 8 * 8)
        count = min(64 // warps, 65536 // (warps * 32 * registers))
        if compiled.shared:
            count = min(count, 232448 // (compiled.shared + 1024))
        return max(1, count)

    count = _compiled_once(place, kernel, key, args, per_sm, grid=(1,), **meta)
    return 2 if count is None else count


def _resident_clusters(place, kernel, key, args, cluster_size: int, **meta) -> int:
    """Clusters of `cluster_size` CTAs of one configuration that the GPU runs at once
    (cuOccupancyMaxActiveClusters: a cluster sits in one GPC, so this can be less than the SMs'
    count over cluster_size), the grid of a persistent cluster kernel; the interpreter gets 2."""

    def clusters(compiled):
        count = compiled.max_active_clusters() if compiled is not None else None
        # No answer (an old driver), or none fits: the SMs' share.
        return count or max(1, place.num_sms() // cluster_size)

    count = _compiled_once(place, kernel, key, args, clusters, grid=(cluster_size,), **meta)
    return 2 if count is None else count


# Wide rows on sm_90+ GPUs are split over the CTAs of a thread-block cluster
# (kernels/hopper/rows_cluster.py): each CTA holds a slice of the row in registers, the width at
# which the one-CTA kernels already run near the copy bandwidth, and the CTAs exchange partial
# statistics per row. Per op: rows longer than `from_cols` take it, in clusters of
# cdiv(n_cols, slice_cols) CTAs, at most max_ctas (8 is the portable cluster size; up to
# ROWS_CLUSTER_MAX_CTAS, 16 on sm_90, the launcher allows non-portable sizes).
# Each cluster takes rows_per_cluster consecutive rows, or, with programs_per_sm, one share of
# the rows per cluster when num_sms * programs_per_sm / C clusters take them all (the backward's
# clusters each leave one row of dw / db partials: few clusters); rows_ahead: rows a CTA keeps
# loading. Rows of `dtypes` longer than from_cols take the split by default (None: only when
# config asks). On the H200 (bench/sweep_memory.py and bench_kernels.py, fp16):
# - softmax at 2048x100000 over 8 CTAs of 8 warps, one row per cluster: 2.53-2.57 TB/s (0.61x
#   copy) against 2.33-2.37 for the online kernel; 13 CTAs 2.55-2.61, 16 2.54-2.56; clusters
#   taking 4-8 rows each with rows loaded ahead 1.4-2.4. In fp32 2.39 (0.56x), where the online
#   kernel gave 2.55 (0.60x, an earlier run): fp32 stays on it. At 4096x32768 the one-CTA kernel
#   stays ahead (3.47 against 2.63).
# - layer norm backward at 8192x16384 over 2 CTAs of 32 warps, one cluster per 2 SMs:
#   1.74-1.85 (0.42-0.45x) against 1.49-1.50 (0.36x) for the dx + partials kernels.
# - layer norm forward at 8192x16384: the fused one-CTA kernel 2.86-2.88 (0.69x), the best split
#   2.14-2.23 (8 CTAs of 4 warps, 4 of 4); at 2048x100000 the split (8 CTAs of 8 warps) gave 1.33
#   (0.32x), not timed against the three-pass kernel: not a default.
ROWS_CLUSTER_MAX_CTAS = 16
ROWS_CLUSTER_DEFAULTS = {
    "softmax": dict(from_cols=32768, dtypes=_HALF_FLOATS, slice_cols=12800,
                    max_ctas=8, rows_per_cluster=1, programs_per_sm=0, rows_ahead=0,
                    defer_store=False),
    "layernorm_fwd": dict(from_cols=None, dtypes=_FLOATS, slice_cols=12800, max_ctas=8,
                          rows_per_cluster=1, programs_per_sm=0, rows_ahead=0,
                          defer_store=False),
    # Deferred dx stores: 8192-column fp16 slices one row ahead spilled 8 bytes without.
    "layernorm_bwd": dict(from_cols=8192, dtypes=_FLOATS, slice_cols=8192, max_ctas=16,
                          rows_per_cluster=0, programs_per_sm=1, rows_ahead=1, defer_store=True),
}


def _sm90_or_later(place) -> bool:
    """Whether the call runs on a GPU of compute capability 9.0 or later (TMA, clusters)."""
    if not (place.on_gpu and place.kind == "torch"):
        return False
    found = _tma_devices.get(place.torch_device)
    if found is None:
        import torch

        found = torch.cuda.get_device_capability(place.torch_device)[0] >= 9
        _tma_devices[place.torch_device] = found
    return found


def _cluster_ctas(op: str, place, n_cols: int, dt: str, config) -> int:
    """CTAs per cluster that split each row of `op` (0: the one-CTA kernels take the rows):
    config's `cluster` (0 or 1: never; 2 to ROWS_CLUSTER_MAX_CTAS: always, the interpreter
    included), else ROWS_CLUSTER_DEFAULTS on sm_90+ GPUs for rows of dtype `dt`."""
    ctas = config.get("cluster")
    if ctas is not None:
        if (isinstance(ctas, bool) or not isinstance(ctas, int)
                or not 0 <= ctas <= ROWS_CLUSTER_MAX_CTAS):
            raise ValueError(f"{op}: config 'cluster' must be an int from 0 to "
                             f"{ROWS_CLUSTER_MAX_CTAS} (CTAs per row; 0 or 1: no cluster), got "
                             f"{ctas!r}")
        return ctas if ctas >= 2 else 0
    defaults = ROWS_CLUSTER_DEFAULTS[op]
    if (defaults["from_cols"] is None or n_cols <= defaults["from_cols"]
            or dt not in defaults["dtypes"] or not _sm90_or_later(place)):
        return 0
    return max(2, min(defaults["max_ctas"], ww.cdiv(n_cols, defaults["slice_cols"])))


def _cluster_launch(op: str, place, n_rows: int, n_cols: int, ctas: int, config,
                    warps_for_block, wide_ahead_block: int = 0):
    """(slice_cols, rows_per_cluster, n_clusters, launch options) of a rows_cluster kernel:
    slices of cdiv(n_cols, ctas) columns rounded up to 16 (16-byte vectors at every slice
    start); each cluster takes rows_per_cluster consecutive rows (config's; else one share of
    the rows per cluster when config's `clusters`, or programs_per_sm CTAs per SM, set the
    cluster count; else the op's defaults), loading the op's default rows_ahead when it has more
    than one (none from wide_ahead_block lanes on when that is given); num_warps, rows_ahead and
    defer_store (a row's output stored after the next row's cluster barrier) override."""
    defaults = ROWS_CLUSTER_DEFAULTS[op]
    slice_cols = ww.cdiv(ww.cdiv(n_cols, ctas), 16) * 16
    block = ww.next_power_of_2(slice_cols)
    rows_per_cluster = config.get("rows_per_cluster")
    if not rows_per_cluster:
        clusters = config.get("clusters") or place.num_sms() * config.get(
            "programs_per_sm", defaults["programs_per_sm"]) // ctas
        rows_per_cluster = ww.cdiv(n_rows, clusters) if clusters else defaults["rows_per_cluster"]
    rows_per_cluster = max(1, min(n_rows, rows_per_cluster))
    ahead = defaults["rows_ahead"] if not 0 < wide_ahead_block <= block else 0
    meta = dict(BLOCK=block, C=ctas, PEERS=ww.next_power_of_2(ctas),
                ROWS_AHEAD=config.get("rows_ahead", ahead if rows_per_cluster > 1 else 0),
                DEFER_STORE=bool(config.get("defer_store", defaults["defer_store"])),
                num_warps=config.get("num_warps") or warps_for_block(block),
                ctas_per_cga=(ctas, 1, 1))
    return slice_cols, rows_per_cluster, ww.cdiv(n_rows, rows_per_cluster), meta


def _cluster_warps(block: int) -> int:
    # A warp per 2048 lanes (4 to 16): 12512-column fp16 slices in 16384 lanes on 8 warps.
    return min(max(block // 2048, 4), 16)


@_planned
def softmax(x, online=None, config=None):
    """Softmax over the last dimension of x (fp16, bf16 or fp32), computed in fp32 and returned
    in x's dtype and shape. `online` forces (True) or forbids (False) the two-pass kernel for
    long rows; by default rows longer than SOFTMAX_FUSED_MAX_COLS take it. `config` (for
    bench/sweep_memory.py) overrides num_warps and programs_per_sm; tma=True streams rows
    through shared memory with TMA where one copy moves a row (sm_90 and later; contiguous rows
    of 8 to 256 times 128 bytes, a power of two, whose shared buffers fit; num_stages rows
    loading per program, tma_store writes them back by TMA too; other rows stay on the register
    kernel). rows_ahead (0-2) overrides the rows the register kernel loads ahead. On sm_90+ GPUs
    16-bit rows longer than ROWS_CLUSTER_DEFAULTS["softmax"]["from_cols"] are split over the CTAs
    of a thread-block cluster and read once (kernels/hopper/rows_cluster.py); config's
    cluster=C (2 to 16) forces that split, 0 forbids it, and with it rows_per_cluster (or
    clusters, or programs_per_sm: see _cluster_launch), num_warps, rows_ahead (0-2) and
    defer_store apply to that kernel. Without a config, sm_90+ GPUs take the TMA kernel at rows
    of 2 to 32 KB (_tma_row_defaults), as layernorm_fwd and layernorm_bwd do, and wider rows
    held in shared memory over clusters (kernels/hopper/rows_smem.py, _softmax_smem_defaults);
    config=dict(smem=True, ...) forces that kernel (see _softmax_smem; unroll=U unrolls its
    passes over a slice's chunks), config=dict(tma=False)
    keeps the register kernel."""
    config = config or {}
    place = _Place("softmax", {"x": x})
    dt = _check_dtype("softmax", "x", x, _FLOATS)
    shape = tuple(x.shape)
    x2 = _as_rows("softmax", "x", x)
    n_rows, n_cols = x2.shape
    out = place.empty((n_rows, n_cols), dt)
    if n_rows == 0 or n_cols == 0:
        return out.reshape(shape)
    if not config and not online:
        config = _tma_row_defaults("softmax", place, x2) or _softmax_smem_defaults(place, x2)
    in_stride = _strides(x2)[0]
    if config.get("smem"):
        _softmax_smem(place, x2, out, in_stride, config)
        return out.reshape(shape)
    ctas = 0 if online else _cluster_ctas("softmax", place, n_cols, dt, config)
    cluster_asked = bool(config.get("cluster"))
    if online is None:
        # The fused kernel's row offsets are 32-bit.
        online = n_cols > SOFTMAX_FUSED_MAX_COLS or n_rows * max(in_stride, n_cols) >= 1 << 31
    split = _row_split("softmax", config)
    tiles = None
    if config.get("tma") and n_cols % split == 0 and _strides(x2) == (n_cols, 1):
        # With split > 1 the TMA kernel takes each row as `split` slices.
        x_rows = _row_slices(x2, split)
        tiles = _tma_row_tiles(place, x_rows)
        if tiles is not None and not _tma_rows_fit(x_rows, config, inputs=1):
            tiles = None
    config = _register_fallback(config, tiles)
    if ctas and (tiles is None or cluster_asked):
        # Each row split over a cluster of `ctas` CTAs, read once (kernels/hopper/rows_cluster.py).
        slice_cols, rows_per_cluster, n_clusters, meta = _cluster_launch(
            "softmax", place, n_rows, n_cols, ctas, config, _cluster_warps)
        scratch = place.empty((n_rows, ctas, 2), "float32")
        place.launch(_rows_cluster.softmax_cluster_kernel, (n_clusters * ctas,),
                     out, x2, scratch, in_stride, n_cols, n_rows, rows_per_cluster, n_cols,
                     slice_cols, **meta)
    elif not online and tiles is not None:
        # Rows stream through a ring of shared buffers (kernels/hopper/softmax_tma.py); the
        # default at rows of 2-16 KB on sm_90+ (_tma_row_defaults). Its per-launch timings once
        # scattered between runs (2.66-3.57 TB/s at 16384x4096): the wrapper's host cost, ~75 us
        # a call against ~20 for the register kernel's, shows when it exceeds the GPU time of the
        # L2 flush before each timed run; as CUDA-graph replays it is steady.
        tile_r, tile_c = tiles
        warps = config.get("num_warps") or 4
        stages = config.get("num_stages") or 2
        args = (_row_descriptor(x_rows, tiles), _row_descriptor(_row_slices(out, split), tiles),
                out, n_rows)
        meta = dict(TILE_R=tile_r, TILE_C=tile_c, NUM_STAGES=stages, num_warps=warps,
                    TMA_STORE=bool(config.get("tma_store")),
                    STORE_EVICT=config.get("store_evict", ""), SPLIT=split, PEERS=split)
        if split > 1:
            meta["ctas_per_cga"] = (split, 1, 1)
        key = ("softmax_tma", dt, n_cols, stages, warps, split)
        if split > 1 and not config.get("programs_per_sm"):
            # The clusters that fit at once (a cluster sits in one GPC).
            clusters = _resident_clusters(place, _softmax_tma.softmax_tma_kernel, key, args,
                                          split, **meta)
        else:
            programs = place.num_sms() * (config.get("programs_per_sm") or min(
                8, _resident_programs(place, _softmax_tma.softmax_tma_kernel, key, args, **meta)))
            clusters = programs // split
        clusters = max(1, min(n_rows, clusters))
        place.launch(_softmax_tma.softmax_tma_kernel, (clusters * split,), *args, **meta)
    elif not online:
        block = ww.next_power_of_2(n_cols)
        # With two rows in flight per program, ptxas -v gives 62 registers per thread at
        # BLOCK=4096 on 8 warps (fp16): four programs per SM, 64 KB of loads in flight. (16 warps
        # would take 32 registers for the same bytes in flight, but twice the per-row
        # reduction work across warps.)
        warps = config.get("num_warps") or _softmax_warps(block)
        ahead = config.get("rows_ahead", _softmax_rows_ahead(block, dt))
        args = (out, x2, in_stride, n_cols, n_rows, n_cols)
        programs = place.num_sms() * (config.get("programs_per_sm") or _resident_programs(
            place, _softmax.softmax_kernel, ("softmax", dt, block, warps, ahead), args,
            BLOCK=block, ROWS_AHEAD=ahead, num_warps=warps))
        place.launch(_softmax.softmax_kernel, (min(n_rows, programs),), *args, BLOCK=block,
                     ROWS_AHEAD=ahead, num_warps=warps)
    else:
        if place.on_gpu:
            block, warps = SOFTMAX_ONLINE_BLOCK, SOFTMAX_ONLINE_WARPS
        else:
            block = min(256, ww.next_power_of_2(n_cols))
            warps = _softmax_warps(block)
        place.launch(_softmax.softmax_online_kernel, (n_rows,),
                     out, x2, in_stride, n_cols, n_cols, BLOCK=block, num_warps=warps)
    return out.reshape(shape)


def _softmax_smem_defaults(place, x2) -> dict:
    """The smem softmax's configuration for rows wider than the TMA kernels take (32 KB) on
    sm_90+ GPUs, else {}: the fewest CTAs per row (1, 2, 4 or 16) whose slices (in chunks of
    8 KB) fit a ring of two or three in 216 KB, 8 warps (16 at 4 CTAs a row). Measured on the
    H200 against a copy of the same bytes (bench/sweep_memory.py --table smem): 0.90x at
    4096x32768 fp16 (one CTA a row, three slices of 64 KB), 0.87x at 2048x100000 fp16 (2 CTAs,
    two of 104 KB) and 0.92x in fp32 (4 CTAs of 16 warps), 0.80 / 0.79x at 1024x262144 fp16 /
    fp32 (16 CTAs), where the kernels before ran 0.84x, 0.61x, 0.62x and 0.73 / 0.65x."""
    item = _itemsize(x2)
    n_cols = x2.shape[1]
    if n_cols * item <= 32768 or not _sm90_or_later(place):
        return {}
    block = 8192 // item
    if item == 4 and n_cols * item <= 65536:
        # fp32 rows of 64 KB ran 0.96x over 2 CTAs with four 32 KB slices in 16 KB chunks,
        # against 0.90x for one CTA a row (8192x16384; in fp16 one CTA a row stayed ahead).
        return dict(smem=True, split=2, block=4096, num_stages=4, num_warps=8)
    # (Past 4 CTAs a row, 16 (a non-portable cluster size) with three slices beat 8 with two or
    # three: 0.80 / 0.78 / 0.73x at 1024x262144 fp16, 0.79x in fp32 where 8 do not fit.)
    # The passes over a slice's chunks unrolled (unroll, as the sweep's unroll=U entries ran on
    # the H200 against the same configuration without): 2048x100000 fp16 over 2 CTAs 0.87-0.88x
    # of copy at 4 against 0.85-0.86x, 1024x262144 over 16 CTAs 0.80x at 4 (fp16) and 0.81x at
    # 2 (fp32) against 0.79 / 0.78x; one CTA a row (4096x32768 fp16) and 4 (2048x100000 fp32)
    # within the run's noise.
    unroll = {2: 4, 16: 4 if item == 2 else 2}
    for split in (1, 2, 4, 16):
        slice_bytes = ww.cdiv(ww.cdiv(ww.cdiv(n_cols, split), 16) * 16, block) * 8192
        stages = min(3, 221184 // slice_bytes)
        if stages >= 2:
            return dict(smem=True, split=split, block=block, num_stages=stages,
                        num_warps=16 if split == 4 else 8, unroll=unroll.get(split, 1))
    return {}


def _smem_rows_meta(op: str, place, x2, config, kernel, args_of, resident_slices: int = 0,
                    resident_itemsize: int = 0, **constexprs) -> tuple:
    """(grid, meta, slice_cols) of a rows_smem kernel from config: split (CTAs of a cluster per
    row, 1 to 16), block (columns per chunk, a power of two from 16), num_stages (slices in each
    CTA's ring, at least 2), num_warps, unroll (the passes' loop_unroll_factor) and the
    persistent grid's clusters (default: as many as fit at once, at most one per row);
    `constexprs` join meta. args_of(slice_cols) gives the
    kernel's arguments (for the occupancy query)."""
    n_rows, n_cols = x2.shape
    split = config.get("split", 2)
    if type(split) is not int or not 1 <= split <= ROWS_CLUSTER_MAX_CTAS:
        raise ValueError(f"{op}: config 'split' must be an int from 1 to "
                         f"{ROWS_CLUSTER_MAX_CTAS} (CTAs per row), got {split!r}")
    block = config.get("block", 4096)
    stages = config.get("num_stages", 2)
    if type(block) is not int or block < 16 or block & (block - 1):
        raise ValueError(f"{op}: config 'block' must be a power of two >= 16, got {block!r}")
    if type(stages) is not int or stages < 2:
        raise ValueError(f"{op}: config 'num_stages' must be an int >= 2, got {stages!r}")
    slice_cols = ww.cdiv(ww.cdiv(n_cols, split), 16) * 16
    chunks = ww.cdiv(slice_cols, block)
    # The ring of slices, and `resident_slices` more slices of `resident_itemsize` bytes an
    # element that the kernel keeps for every row (the layer norm's w and b with WB_SMEM).
    ring_bytes = (stages * _itemsize(x2) + resident_slices * resident_itemsize) * chunks * block
    if ring_bytes + 2048 > _MAX_SHARED_PER_BLOCK:
        raise ValueError(f"{op}: config {config!r} needs {ring_bytes} bytes of shared memory "
                         f"for its ring at {n_cols} columns (at most "
                         f"{_MAX_SHARED_PER_BLOCK - 2048}); raise split or lower num_stages")
    # unroll=U: the passes over a slice's whole chunks unrolled U times.
    unroll = config.get("unroll", 1)
    if type(unroll) is not int or unroll < 1:
        raise ValueError(f"{op}: config 'unroll' must be an int >= 1 (the loop_unroll_factor of "
                         f"the passes over a slice's chunks), got {unroll!r}")
    meta = dict(BLOCK=block, K=chunks, NUM_STAGES=stages, C=split,
                PEERS=ww.next_power_of_2(split), STORE_EVICT=config.get("store_evict", ""),
                num_warps=config.get("num_warps") or 8, UNROLL=unroll, **constexprs)
    if split > 1:
        meta["ctas_per_cga"] = (split, 1, 1)
    clusters = config.get("clusters") or _resident_clusters(
        place, kernel, (kernel.__name__, _dtype_name(x2), n_cols, split, block, stages,
                        meta["num_warps"], unroll, tuple(sorted(constexprs.items()))),
        lambda: args_of(slice_cols), split, **meta)
    return (max(1, min(n_rows, clusters)) * split,), meta, slice_cols


def _softmax_smem(place, x2, out, in_stride: int, config) -> None:
    """Softmax with each row's slices held in shared memory (kernels/hopper/rows_smem.py), as
    _smem_rows_meta configures it; config's dsmem=False exchanges the partials through global
    scratch and a cluster barrier a row instead of the peers' shared memory."""
    n_rows, n_cols = x2.shape
    dsmem = bool(config.get("dsmem", True))
    split = config.get("split", 2)  # (checked by _smem_rows_meta)
    # The scratch exchange's slots (dsmem=False; unused, and not allocated, otherwise).
    scratch = (place.empty((n_rows, split, 2), "float32")
               if type(split) is int and split > 1 and not dsmem else out)

    def args_of(slice_cols):
        return (out, x2, scratch, in_stride, n_cols, n_rows, n_cols, slice_cols)

    kernel = _rows_smem.softmax_smem_kernel
    grid, meta, slice_cols = _smem_rows_meta("softmax", place, x2, config, kernel, args_of,
                                             DSMEM=dsmem)
    place.launch(kernel, grid, *args_of(slice_cols), **meta)


# ------------------------------------------------------------------------------------------------
# Layer norm
# ------------------------------------------------------------------------------------------------


# Rows up to this long, and up to LAYERNORM_FUSED_MAX_BYTES, are normalized by the one-pass
# persistent kernel; longer rows are read three times. ptxas -v on 32 warps at 16384 columns:
# fp16 62 registers, no spills; fp32 132 bytes spilled.
LAYERNORM_FUSED_MAX_COLS = 16384
LAYERNORM_FUSED_MAX_BYTES = 32768

# Backward rows up to this long keep their dw and db sums in registers beside the row (16 warps at
# 8192 columns: 102 registers); longer rows leave them to layernorm_bwd_partials_kernel, as
# holding them spilled (16384 fp16 columns: 2856 bytes on 16 warps, 192 on 32 with the sums
# taken early, and the 0.11x-of-copy time on the H200).
LAYERNORM_BWD_PARTIALS_MAX_COLS = 8192


def _layernorm_fwd_smem_defaults(place, x2, w, b) -> dict:
    """The layer norm forward's configuration for rows wider than the TMA kernels take (32 KB)
    on sm_90+ GPUs, else {}: rows held in shared memory (kernels/hopper/rows_smem.py) over the
    fewest CTAs (2 to 16) whose ring of two slices and w and b slices fit, in chunks of 8 KB,
    8 warps. Measured on the H200 against a copy of the same bytes (bench/sweep_memory.py
    --table smem, fp16): 0.85x at 4096x32768 (2 CTAs; with or without w and b in shared
    memory), 0.75x at 2048x100000 (4 CTAs, where 2 without them ran 0.56x), against 0.68 /
    0.44x for the register kernels; one CTA a row (three 64 KB slices) ran 0.70x."""
    item = _itemsize(x2)
    n_cols = x2.shape[1]
    if n_cols * item <= 32768 or not _sm90_or_later(place):
        return {}
    block = 8192 // item
    wb_item = max(_itemsize(w), _itemsize(b))
    for split in (2, 4, 8, 16):
        chunks = ww.cdiv(ww.cdiv(ww.cdiv(n_cols, split), 16) * 16, block)
        if (2 * item + 2 * wb_item) * chunks * block + 2048 <= _MAX_SHARED_PER_BLOCK:
            return dict(smem=True, wb_smem=True, split=split, block=block, num_stages=2,
                        num_warps=8)
    return {}


def _layernorm_fwd_block(n_cols: int) -> int:
    # Longer rows are walked 8192 columns at a time: ptxas -v gives 96 registers per thread for
    # an fp16 block of 8192 on 8 warps but 222 for 32768, which leaves one program per SM.
    return min(ww.next_power_of_2(n_cols), 8192)


@_planned
def layernorm_fwd(x, w, b, eps=1e-5, config=None):
    """Layer norm over the last dimension: returns (y, mean, rstd), y in x's dtype and shape,
    mean and rstd fp32 with one entry per row (x's leading dimensions). `config` (for
    bench/sweep_memory.py) overrides num_warps and programs_per_sm; tma=True (with num_stages,
    tma_store) streams rows through shared memory with TMA, as softmax's option does; cluster=C
    splits each row over a thread-block cluster, as softmax's option does (not a default: see
    ROWS_CLUSTER_DEFAULTS); smem=True holds rows in shared memory over clusters, as softmax's
    smem option does (split, block, num_stages, num_warps, clusters, and wb_smem: w and b
    slices in shared memory too), the default on sm_90+ GPUs for rows wider than 32 KB
    (_layernorm_fwd_smem_defaults)."""
    config = config or {}
    op = "layernorm_fwd"
    place = _Place(op, {"x": x, "w": w, "b": b})
    dt = _check_dtype(op, "x", x, _FLOATS)
    _check_dtype(op, "w", w, _FLOATS)
    _check_dtype(op, "b", b, _FLOATS)
    if not isinstance(eps, (int, float)) or not eps >= 0 or not math.isfinite(eps):
        raise ValueError(f"{op}: 'eps' must be a finite number >= 0, got {eps!r}")
    shape = tuple(x.shape)
    x2 = _contiguous(_as_rows(op, "x", x))
    n_rows, n_cols = x2.shape
    _check_shape(op, "w", w, (n_cols,), " (x's last dimension)")
    _check_shape(op, "b", b, (n_cols,), " (x's last dimension)")
    if n_cols == 0:
        raise ValueError(f"{op}: 'x' has an empty last dimension; there is nothing to normalize")
    if not config and n_rows > 0:
        config = _tma_row_defaults(op, place, x2) or _layernorm_fwd_smem_defaults(place, x2, w, b)
    y = place.empty((n_rows, n_cols), dt)
    mean = place.empty((n_rows,), "float32")
    rstd = place.empty((n_rows,), "float32")
    if config.get("smem") and n_rows > 0:
        # Rows held in shared memory over clusters (kernels/hopper/rows_smem.py).
        w2, b2 = _contiguous(w), _contiguous(b)

        def args_of(slice_cols):
            return (x2, y, w2, b2, mean, rstd, _strides(x2)[0], n_cols, n_rows, n_cols,
                    slice_cols, float(eps))

        kernel = _rows_smem.layernorm_fwd_smem_kernel
        # wb_smem=True: each CTA keeps its w and b slices in shared memory for all its rows.
        wb_smem = bool(config.get("wb_smem", False))
        grid, meta, slice_cols = _smem_rows_meta(
            op, place, x2, config, kernel, args_of, resident_slices=2 if wb_smem else 0,
            resident_itemsize=max(_itemsize(w2), _itemsize(b2)), WB_SMEM=wb_smem)
        place.launch(kernel, grid, *args_of(slice_cols), **meta)
        return y.reshape(shape), mean.reshape(shape[:-1]), rstd.reshape(shape[:-1])
    ctas = _cluster_ctas(op, place, n_cols, dt, config) if n_rows > 0 else 0
    cluster_asked = bool(config.get("cluster"))
    tiles = _tma_row_tiles(place, x2) if config.get("tma") and n_rows > 0 else None
    if tiles is not None and not _tma_rows_fit(x2, config, inputs=1):
        tiles = None
    config = _register_fallback(config, tiles)
    if ctas and (tiles is None or cluster_asked):
        # Each row split over a cluster of `ctas` CTAs, read once (kernels/hopper/rows_cluster.py).
        slice_cols, rows_per_cluster, n_clusters, meta = _cluster_launch(
            op, place, n_rows, n_cols, ctas, config, _cluster_warps)
        scratch = place.empty((n_rows, ctas, 2), "float32")
        place.launch(_rows_cluster.layernorm_fwd_cluster_kernel, (n_clusters * ctas,),
                     x2, y, _contiguous(w), _contiguous(b), mean, rstd, scratch, n_cols, n_rows,
                     rows_per_cluster, n_cols, slice_cols, float(eps), **meta)
    elif tiles is not None:
        # Rows stream through a ring of shared buffers (kernels/hopper/layernorm_tma.py); the
        # default at rows of 2-16 KB on sm_90+ (_tma_row_defaults; on the per-launch scatter see
        # softmax's).
        tile_r, tile_c = tiles
        warps = config.get("num_warps") or 4
        stages = config.get("num_stages") or 2
        args = (_row_descriptor(x2, tiles), _row_descriptor(y, tiles), y, _contiguous(w),
                _contiguous(b), mean, rstd, n_rows, float(eps))
        meta = dict(TILE_R=tile_r, TILE_C=tile_c, NUM_STAGES=stages, num_warps=warps,
                    TMA_STORE=bool(config.get("tma_store")),
                    STORE_EVICT=config.get("store_evict", ""))
        programs = place.num_sms() * (config.get("programs_per_sm") or _resident_programs(
            place, _layernorm_tma.layernorm_fwd_tma_kernel,
            ("layernorm_fwd_tma", dt, _dtype_name(w), n_cols, stages, warps), args, **meta))
        place.launch(_layernorm_tma.layernorm_fwd_tma_kernel, (min(n_rows, programs),), *args,
                     **meta)
    elif (n_rows > 0 and n_cols <= LAYERNORM_FUSED_MAX_COLS
          and ww.next_power_of_2(n_cols) * _itemsize(x2) <= LAYERNORM_FUSED_MAX_BYTES):
        # The row fits one block: persistent programs read each row once.
        block = ww.next_power_of_2(n_cols)
        # ptxas -v: 80 registers per thread at BLOCK=4096 on 8 warps (fp16, two rows in flight):
        # three programs per SM; 62 at 16384 on 32 warps.
        warps = config.get("num_warps") or min(max(block // 512, 1), 32)
        args = (x2, y, _contiguous(w), _contiguous(b), mean, rstd, n_cols, n_rows, n_cols,
                float(eps))
        programs = place.num_sms() * (config.get("programs_per_sm") or _resident_programs(
            place, _layernorm.layernorm_fwd_fused_kernel,
            ("layernorm_fwd", dt, _dtype_name(w), block, warps), args, BLOCK=block,
            num_warps=warps))
        place.launch(_layernorm.layernorm_fwd_fused_kernel, (min(n_rows, programs),),
                     *args, BLOCK=block, num_warps=warps)
    elif n_rows > 0:
        block = _layernorm_fwd_block(n_cols)
        place.launch(_layernorm.layernorm_fwd_kernel, (n_rows,),
                     x2, y, _contiguous(w), _contiguous(b), mean, rstd, n_cols, n_cols, float(eps),
                     BLOCK=block, num_warps=min(max(block // 256, 1), 8))
    return y.reshape(shape), mean.reshape(shape[:-1]), rstd.reshape(shape[:-1])


def _layernorm_bwd_warps(block: int) -> int:
    # The program keeps dw and db rows in registers besides x and dy. At BLOCK=4096 (fp16) 8 warps
    # without rows loaded ahead take 124 registers (ptxas -v), two programs per SM: on the H200
    # 2.92 TB/s against 1.58 for one 32-warp program per SM loading three rows ahead
    # (bench/sweep_memory.py, 16384x4096); 16 warps one row ahead with dw and db summed before
    # the row reduction (64 registers, two per SM) 3.01-3.07 in three runs. (The TMA kernel with
    # TMA stores, 8 warps, 2 stages, 2 per SM: 3.60 as CUDA-graph replays against 3.23 for
    # this one, but 1.45 and 3.03 per launch with do_bench: its wrapper's host cost; it is
    # the default on sm_90+, see _tma_row_defaults.) Past 4096 columns 16 warps, and 32
    # past LAYERNORM_BWD_PARTIALS_MAX_COLS, where the kernel holds only the row (16384 fp16
    # columns one row ahead: 64 registers, no spills).
    if block < 4096:
        return 4 if block <= 1024 else 8
    return 16 if block <= LAYERNORM_BWD_PARTIALS_MAX_COLS else 32


@_planned
def layernorm_bwd(dy, x, w, mean, rstd, config=None):
    """Gradients of layernorm_fwd: returns (dx, dw, db); dx in x's dtype and shape, dw and db in
    w's dtype. mean and rstd are layernorm_fwd's fp32 outputs. Rows must fit one block (up to
    65536 bytes of x's elements) unless split over a cluster. `config` (for
    bench/sweep_memory.py) overrides num_warps, prefetch (rows loaded ahead, 0-3),
    accumulate_early (dw and db summed before the row reduction), programs_per_sm (0: as many as
    fit), block_n and block_p (columns per program and partial rows per step of the dw/db sum);
    tma=True streams x and dy through shared memory with TMA, num_stages rows loading per
    program (sm_90a; inputs softmax's tma option does not take ignore it), with split=C each row
    over a C-CTA cluster. cluster=C splits
    each row over a thread-block cluster, as softmax's option does, rows of any width included
    (each cluster leaves one row of dw / db partials). On sm_90+ GPUs rows of 32 to 128 KB take
    the TMA kernel split over clusters of row bytes / 16 KB CTAs by default (_tma_row_defaults),
    wider ones the cluster split."""
    config = config or {}
    op = "layernorm_bwd"
    place = _Place(op, {"dy": dy, "x": x, "w": w, "mean": mean, "rstd": rstd})
    dt = _check_dtype(op, "x", x, _FLOATS)
    if _dtype_name(dy) != dt:
        raise ValueError(f"{op}: 'dy' has dtype {_dtype_name(dy)} but 'x' has {dt}")
    wdt = _check_dtype(op, "w", w, _FLOATS)
    _check_dtype(op, "mean", mean, ("float32",))
    _check_dtype(op, "rstd", rstd, ("float32",))
    shape = tuple(x.shape)
    _check_shape(op, "dy", dy, shape, " (x's shape)")
    x2 = _contiguous(_as_rows(op, "x", x))
    dy2 = _contiguous(_as_rows(op, "dy", dy))
    n_rows, n_cols = x2.shape
    if n_cols == 0:
        raise ValueError(f"{op}: 'x' has an empty last dimension")
    _check_shape(op, "w", w, (n_cols,), " (x's last dimension)")
    for name, stat in (("mean", mean), ("rstd", rstd)):
        if _numel(stat) != n_rows:
            raise ValueError(f"{op}: '{name}' must have one entry per row of x ({n_rows}), got "
                             f"shape {tuple(stat.shape)}")
    if not config and n_rows > 0:
        config = _tma_row_defaults(op, place, x2)
    block = ww.next_power_of_2(n_cols)
    ctas = _cluster_ctas(op, place, n_cols, dt, config)
    cluster_asked = bool(config.get("cluster"))
    if not ctas and block > 65536 // _itemsize(x2):
        raise ValueError(f"{op}: 'x' rows of {n_cols} columns do not fit one block; the backward "
                         f"kernel takes rows of up to {65536 // _itemsize(x2)} elements")
    dx = place.empty((n_rows, n_cols), dt)
    dw = place.empty((n_cols,), wdt)
    db = place.empty((n_cols,), wdt)
    if n_rows == 0:
        dw[...] = 0
        db[...] = 0
        return dx.reshape(shape), dw, db
    # Past LAYERNORM_BWD_PARTIALS_MAX_COLS the dx kernel keeps no dw and db sums (a second kernel
    # takes them from x and dy: two more reads of the rows, but no spills).
    sums_in_dx = block <= LAYERNORM_BWD_PARTIALS_MAX_COLS
    split = _row_split(op, config)
    tiles = None
    if config.get("tma") and n_cols % split == 0:
        # With split > 1 the TMA kernel takes each row as `split` slices.
        x_rows, dy_rows = _row_slices(x2, split), _row_slices(dy2, split)
        tiles = _tma_row_tiles(place, x_rows)
        # The TMA kernel keeps dw and db sums of its columns in registers, and its buffers must
        # fit shared memory: other rows take the register kernels.
        if tiles is not None and (
                ww.next_power_of_2(n_cols // split) > LAYERNORM_BWD_PARTIALS_MAX_COLS
                or not _tma_rows_fit(x_rows, config, inputs=2)
                or _tma_row_tiles(place, dy_rows) != tiles):
            tiles = None
    config = _register_fallback(config, tiles)
    w2, mean2, rstd2 = _contiguous(w), _contiguous(mean.reshape(-1)), _contiguous(rstd.reshape(-1))
    if ctas and (tiles is None or cluster_asked):
        # Each row split over a cluster of `ctas` CTAs (kernels/hopper/rows_cluster.py): x and dy
        # read once; each cluster leaves one row of dw / db partials.
        # 16 warps a CTA up to 4096-column slices, 32 past: a slice of x, dy and the dw / db
        # sums, one row ahead, take 64 registers a thread at 4096 and 8192 fp16 columns (fp32:
        # 76, and none ahead at 8192, where one ahead spilled 92 bytes, bf16 16; 100000 fp16
        # columns over 13 CTAs one ahead spilled 76).
        slice_cols, rows_per_cluster, n_clusters, meta = _cluster_launch(
            op, place, n_rows, n_cols, ctas, config, lambda block: 16 if block <= 4096 else 32,
            wide_ahead_block=8192 if dt != "float16" or ctas > 8 else 0)
        # dsmem=True: the row sums pushed into the peers' shared memory (st.async) rather than
        # exchanged through global scratch and a cluster barrier a row (an option: 0.19x of copy
        # at 2048x100000 fp16 on the H200 against 0.18x; ptxas spills 484 bytes against 424 at
        # 262144 columns over 16 CTAs, not timed).
        meta["DSMEM"] = bool(config.get("dsmem", False))
        scratch = dx if meta["DSMEM"] else place.empty((n_rows, ctas, 2), "float32")
        partial_dw = place.empty((n_clusters, n_cols), "float32")
        partial_db = place.empty((n_clusters, n_cols), "float32")
        place.launch(_rows_cluster.layernorm_bwd_cluster_kernel, (n_clusters * ctas,),
                     dx, dy2, partial_dw, partial_db, x2, w2, mean2, rstd2, scratch, n_cols, n_rows,
                     rows_per_cluster, n_cols, slice_cols, **meta)
        _layernorm_bwd_dwdb(place, config, partial_dw, partial_db, dw, db, n_clusters, n_cols)
        return dx.reshape(shape), dw, db
    warps = config.get("num_warps") or _layernorm_bwd_warps(block)
    # Rows are loaded ahead only in the narrower blocks; at 4096 columns a second program per SM
    # hides more latency than rows loaded ahead within one (on 16 warps with dw and db summed
    # early, 64 registers, one row ahead still fits two programs per SM). Without the sums, 16384
    # columns on 32 warps: 16-bit rows one ahead 64 registers; fp32 rows none ahead 56, one
    # ahead 416 bytes spilled.
    wide_ahead = 1 if _itemsize(x2) == 2 else 0
    prefetch = config.get("prefetch", 3 if block <= 2048 else 1 if block == 4096 else
                          0 if sums_in_dx else wide_ahead)
    accumulate_early = config.get("accumulate_early", block == 4096)
    # As many programs per SM as fit up to 4096 columns (at 1024 fp16 columns on 4 warps three
    # rows ahead, 94 registers: five, where two left 8 warps per SM to hide the latency of each
    # row's reduction; 0.47x of copy on the H200 at 65536x1024), one past it;
    # programs_per_sm=0 asks for as many as the compiled kernel's registers allow.
    per_sm = config.get("programs_per_sm", 0 if block <= 4096 else 1)
    if tiles is not None:
        # x and dy rows stream through rings of shared buffers (kernels/hopper/layernorm_tma.py);
        # each persistent program keeps its dw and db sums in registers.
        tile_r, tile_c = tiles
        stages = config.get("num_stages") or 2
        tma_meta = dict(TILE_R=tile_r, TILE_C=tile_c, NUM_STAGES=stages, num_warps=warps,
                        TMA_STORE=bool(config.get("tma_store")),
                        STORE_EVICT=config.get("store_evict", ""), SPLIT=split, PEERS=split)
        if split > 1:
            tma_meta["ctas_per_cga"] = (split, 1, 1)
        dx_rows = _row_slices(dx, split)

        def tma_args(partial_dw, partial_db):
            return (_row_descriptor(x_rows, tiles), _row_descriptor(dy_rows, tiles),
                    _row_descriptor(dx_rows, tiles), dx, partial_dw, partial_db, w2, mean2,
                    rstd2, n_rows)

        def stand_in_args():
            stand_in = place.empty((1,), "float32")
            return tma_args(stand_in, stand_in)

        key = ("layernorm_bwd_tma", dt, wdt, n_cols, stages, warps, split)
        # (per_sm defaults to 1 past 4096 columns; 4-CTA clusters of one CTA per SM fit 30 at
        # once on the H200, not 132 / 4: only an explicit programs_per_sm overrides the count.)
        if split > 1 and not config.get("programs_per_sm"):
            # The clusters that fit at once (a cluster sits in one GPC).
            clusters = _resident_clusters(place, _layernorm_tma.layernorm_bwd_tma_kernel, key,
                                          stand_in_args, split, **tma_meta)
        else:
            clusters = place.num_sms() * (per_sm or _resident_programs(
                place, _layernorm_tma.layernorm_bwd_tma_kernel, key, stand_in_args,
                **tma_meta)) // split
        # One partial row per program, or per cluster of `split` programs.
        n_partials = max(1, min(n_rows, clusters))
        partial_dw = place.empty((n_partials, n_cols), "float32")
        partial_db = place.empty((n_partials, n_cols), "float32")
        place.launch(_layernorm_tma.layernorm_bwd_tma_kernel, (n_partials * split,),
                     *tma_args(partial_dw, partial_db), **tma_meta)
        _layernorm_bwd_dwdb(place, config, partial_dw, partial_db, dw, db, n_partials, n_cols)
        return dx.reshape(shape), dw, db
    meta = dict(BLOCK=block, PREFETCH=prefetch,
                ACCUMULATE_EARLY=bool(accumulate_early), PARTIALS=sums_in_dx, num_warps=warps)
    if not place.on_gpu:
        target_programs = 8
    elif per_sm:
        target_programs = place.num_sms() * per_sm
    else:
        # Compiled (not launched) with stand-in partial buffers and a row count that is not 1.
        def stand_in_args():
            stand_in = place.empty((1,), "float32")
            return (dx, dy2, stand_in, stand_in, x2, w2, mean2, rstd2, n_cols, n_rows, n_cols, 3)

        target_programs = place.num_sms() * _resident_programs(
            place, _layernorm.layernorm_bwd_dx_kernel,
            ("layernorm_bwd", dt, wdt, block, prefetch, meta["ACCUMULATE_EARLY"], sums_in_dx,
             warps), stand_in_args, **meta)
    # Every program takes an equal share of the rows: one wave of programs.
    rows_per_program = ww.cdiv(n_rows, target_programs)
    n_programs = ww.cdiv(n_rows, rows_per_program)
    if sums_in_dx:
        partial_dw = place.empty((n_programs, n_cols), "float32")
        partial_db = place.empty((n_programs, n_cols), "float32")
        place.launch(_layernorm.layernorm_bwd_dx_kernel, (n_programs,),
                     dx, dy2, partial_dw, partial_db, x2, w2, mean2, rstd2, n_cols, n_rows, n_cols,
                     rows_per_program, **meta)
        _layernorm_bwd_dwdb(place, config, partial_dw, partial_db, dw, db, n_programs, n_cols)
        return dx.reshape(shape), dw, db
    stand_in = place.empty((1,), "float32")
    place.launch(_layernorm.layernorm_bwd_dx_kernel, (n_programs,),
                 dx, dy2, stand_in, stand_in, x2, w2, mean2, rstd2, n_cols, n_rows, n_cols,
                 rows_per_program, **meta)
    # Tiles of 16 rows by 256 columns on 8 warps (64 registers, no spills at fp16): about eight
    # programs per SM over the column blocks and row chunks; each chunk leaves one partial row.
    block_r = 16
    block_n = 256 if place.on_gpu else min(64, ww.next_power_of_2(n_cols))
    col_blocks = ww.cdiv(n_cols, block_n)
    chunks = max(1, min(ww.cdiv(n_rows, block_r), ww.cdiv(place.num_sms() * 8, col_blocks)))
    chunk_rows = ww.cdiv(ww.cdiv(n_rows, chunks), block_r) * block_r
    n_partials = ww.cdiv(n_rows, chunk_rows)
    partial_dw = place.empty((n_partials, n_cols), "float32")
    partial_db = place.empty((n_partials, n_cols), "float32")
    place.launch(_layernorm.layernorm_bwd_partials_kernel, (col_blocks, n_partials),
                 partial_dw, partial_db, dy2, x2, mean2, rstd2, n_cols, n_rows, n_cols, chunk_rows,
                 BLOCK_R=block_r, BLOCK_N=block_n, num_warps=8 if place.on_gpu else 4)
    _layernorm_bwd_dwdb(place, config, partial_dw, partial_db, dw, db, n_partials, n_cols)
    return dx.reshape(shape), dw, db


def _layernorm_bwd_dwdb(place, config, partial_dw, partial_db, dw, db, n_partials, n_cols):
    """dw and db from the backward kernels' per-program partial sums."""
    # Narrow column blocks: enough programs to spread the partial sums over the SMs, and many
    # partial rows per step in flight. On the H200 (bench/sweep_memory.py's dwdb_alone, 264 x 4096
    # partials) 256 partial rows of 8 columns per step take 9.8 us, 64 of 16 11.3, 32 of 32 14.9.
    # Past 512 partial rows (the TMA kernel's 8 programs per SM at 1024 columns leave 1056),
    # 1024 per step: 11.7 us against 14.5 for 256 at 1056 x 1024 (0.85x of a copy for the whole
    # backward at 65536x1024 fp16 against 0.84x).
    block_n = config.get("block_n") or (
        8 if place.on_gpu else min(128, ww.next_power_of_2(n_cols)))
    block_p = config.get("block_p") or (
        (1024 if n_partials > 512 else 256) if place.on_gpu else 32)
    place.launch(_layernorm.layernorm_bwd_dwdb_kernel, (ww.cdiv(n_cols, block_n),),
                 partial_dw, partial_db, dw, db, n_partials, n_cols, BLOCK_P=block_p,
                 BLOCK_N=block_n, num_warps=4 if block_p * block_n <= 4096 else 8)


# ------------------------------------------------------------------------------------------------
# Matmul
# ------------------------------------------------------------------------------------------------

def _matmul_operands(op: str, a, b):
    """Checks the two operands of a matmul (2-D, fp16 or bf16, one dtype, inner dims equal):
    returns where the result lives, its dtype and M, N, K."""
    place = _Place(op, {"a": a, "b": b})
    dt = _check_dtype(op, "a", a, _HALF_FLOATS)
    if _dtype_name(b) != dt:
        raise ValueError(f"{op}: 'b' has dtype {_dtype_name(b)} but 'a' has {dt}; both must be "
                         f"float16 or both bfloat16")
    _check_ndim(op, "a", a, (2,))
    _check_ndim(op, "b", b, (2,))
    M, K = a.shape
    if b.shape[0] != K:
        raise ValueError(f"{op}: 'b' has shape {tuple(b.shape)} but 'a' has {tuple(a.shape)}; "
                         f"b's first dimension must equal a's second ({K})")
    return place, dt, M, b.shape[1], K


_ACTIVATIONS = {None: "", "relu": "relu", "leaky_relu": "leaky_relu"}


def matmul(a, b, activation=None):
    """activation(a @ b) for fp16 or bf16 a [M, K] and b [K, N] (any strides), accumulated in fp32
    and returned in a's dtype. activation: None, "relu" or "leaky_relu" (slope 0.01)."""
    op = "matmul"
    if activation not in _ACTIVATIONS:
        raise ValueError(f"{op}: 'activation' must be None, 'relu' or 'leaky_relu', got "
                         f"{activation!r}")
    place, dt, M, N, K = _matmul_operands(op, a, b)
    c = place.empty((M, N), dt)
    if M == 0 or N == 0:
        return c
    if min(_strides(a)) < 0:
        a = _contiguous(a)
    if min(_strides(b)) < 0:
        b = _contiguous(b)
    if place.on_gpu:
        # On sm_90a the loop is software-pipelined: 5 stages of 128x32 + 32x256 tiles (cp.async,
        # 3 k-steps loaded ahead of the MMA), two warp groups of wgmma splitting BLOCK_M.
        config = dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=32, GROUP_M=8, num_warps=8,
                      num_stages=5)
    else:
        config = dict(BLOCK_M=32, BLOCK_N=32, BLOCK_K=32, GROUP_M=4, num_warps=4)
    sa, sb, sc = _strides(a), _strides(b), _strides(c)
    place.launch(
        _matmul.matmul_kernel, lambda m: (ww.cdiv(M, m["BLOCK_M"]) * ww.cdiv(N, m["BLOCK_N"]),),
        a, b, c, M, N, K, sa[0], sa[1], sb[0], sb[1], sc[0], sc[1],
        ACTIVATION=_ACTIVATIONS[activation], **config)
    return c


# ------------------------------------------------------------------------------------------------
# Embedding bag
# ------------------------------------------------------------------------------------------------


def embedding_bag(weight, indices, offsets, per_sample_weights=None, mode="sum", config=None):
    """out[b] = sum over i in [offsets[b], offsets[b+1]) of s_i * weight[indices[i]], with s_i =
    per_sample_weights[i] (or 1), divided by the bag size when mode="mean" (an empty bag gives
    zeros). offsets are CSR style, num_bags + 1 entries (torch's include_last_offset=True).
    weight [num_embeddings, D] fp16/bf16/fp32; indices, offsets int32/int64; per_sample_weights
    float, one per index. Returns [num_bags, D] in weight's dtype, summed in fp32.

    With NumPy inputs the indices and offsets are checked against the table; with CUDA tensors
    they are not (that would synchronize the GPU), as with torch. `config` (for
    bench/sweep_memory.py) overrides BLOCK_I, BLOCK_D and num_warps."""
    config = config or {}
    op = "embedding_bag"
    place = _Place(op, {"weight": weight, "indices": indices, "offsets": offsets,
                        "per_sample_weights": per_sample_weights})
    dt = _check_dtype(op, "weight", weight, _FLOATS)
    _check_ndim(op, "weight", weight, (2,), " [num_embeddings, D]")
    _check_dtype(op, "indices", indices, _INDEX_TYPES)
    _check_dtype(op, "offsets", offsets, _INDEX_TYPES)
    _check_ndim(op, "indices", indices, (1,))
    _check_ndim(op, "offsets", offsets, (1,), " (num_bags + 1 entries)")
    if mode not in ("sum", "mean"):
        raise ValueError(f"{op}: 'mode' must be 'sum' or 'mean', got {mode!r}")
    if offsets.shape[0] < 1:
        raise ValueError(f"{op}: 'offsets' needs num_bags + 1 entries (at least 1), got none")
    if per_sample_weights is not None:
        _check_dtype(op, "per_sample_weights", per_sample_weights, _FLOATS)
        _check_shape(op, "per_sample_weights", per_sample_weights, tuple(indices.shape),
                     " (one weight per index)")
    num_embeddings, dim = weight.shape
    num_bags = offsets.shape[0] - 1
    if place.kind == "numpy":
        import numpy as np

        if num_bags > 0 and (offsets[0] < 0 or offsets[-1] > indices.shape[0] or
                             np.any(np.diff(offsets) < 0)):
            raise ValueError(f"{op}: 'offsets' must be non-decreasing within [0, "
                             f"{indices.shape[0]}] (the number of indices)")
        if indices.size and (indices.min() < 0 or indices.max() >= num_embeddings):
            raise ValueError(f"{op}: 'indices' must lie in [0, {num_embeddings}) (weight's "
                             f"rows), got values in [{indices.min()}, {indices.max()}]")
    out = place.empty((num_bags, dim), dt)
    if num_bags == 0 or dim == 0:
        return out
    weight = _rows_unit_stride(weight)
    has_weights = per_sample_weights is not None
    # One warp per [BLOCK_I, 64] tile: on the H200 (1M x 128 fp16, 32768 bags of 32) 4.06 TB/s
    # against 2.04 for two warps on [32, 128] tiles and 3.95 for one warp on them
    # (bench/sweep_memory.py): more, smaller programs keep more bags in flight per SM.
    block_d = config.get("BLOCK_D") or min(64, max(16, ww.next_power_of_2(dim)))
    # A whole bag of the average size in one tile (its row loads all in flight together), from
    # the shapes alone: reading the offsets would synchronize the GPU.
    average_bag = ww.cdiv(indices.shape[0], num_bags)
    block_i = config.get("BLOCK_I") or min(32, max(8, ww.next_power_of_2(average_bag)))
    place.launch(
        _embedding_bag.embedding_bag_kernel, lambda m: (num_bags, ww.cdiv(dim, m["BLOCK_D"])),
        weight, _contiguous(indices), _contiguous(offsets),
        _contiguous(per_sample_weights) if has_weights else weight, out,
        dim, _strides(weight)[0], dim,
        BLOCK_I=block_i, BLOCK_D=block_d, HAS_SAMPLE_WEIGHTS=has_weights, MEAN=mode == "mean",
        num_warps=config.get("num_warps") or 1)
    return out


# ------------------------------------------------------------------------------------------------
# Row reductions
# ------------------------------------------------------------------------------------------------


def _reduction_config(n_cols: int, on_gpu: bool, vector_rows: bool = True) -> dict:
    if on_gpu:
        # 4096 elements per step: narrow rows trade columns for rows instead of masking most of
        # a wide block. Two rows of 2048 per step on the H200 (16384x4096 fp32): row_max 3.64
        # TB/s against 3.46 for four of 1024, row_sum 3.70 against 3.65 (bench/sweep_memory.py).
        block_n = 2048 if n_cols >= 2048 else min(1024, max(16, ww.next_power_of_2(n_cols)))
        # Rows the loads cannot take 16 bytes at a time (see _rows_vectorizable) load one
        # element per instruction, each with its own address: at 4096 elements the narrow
        # blocks took 96 to 254 registers (sm_90a, fp32, 32 x 128: 254, two programs an SM),
        # at 1024 they take 32 to 40 (64 x 16: 72).
        elements = 4096 if vector_rows or block_n >= 1024 else 1024
        return dict(BLOCK_M=max(1, elements // block_n), BLOCK_N=block_n, num_warps=4)
    return dict(BLOCK_M=4, BLOCK_N=min(256, max(16, ww.next_power_of_2(n_cols))), num_warps=4)


def _rows_vectorizable(x) -> bool:
    """Whether the specializer can prove x's rows 16-byte aligned (column count, row stride
    and base address multiples of 16), which the row kernels' vector loads need."""
    address = x.ctypes.data if _is_numpy(x) else x.data_ptr()
    return x.shape[1] % 16 == 0 and _strides(x)[0] % 16 == 0 and address % 16 == 0


def _reduction_chunks(place, partial_kernel, key, n_rows, n_cols, config, args) -> int:
    """Column chunks per row: 1 while the row programs alone fill the GPU (4 per SM), else
    enough chunks for about one full wave of resident partial programs, each chunk at least
    four blocks of columns wide (fewer, longer chunks would leave the combine less to do but
    the SMs idle)."""
    row_programs = ww.cdiv(n_rows, config["BLOCK_M"])
    most = n_cols // (4 * config["BLOCK_N"])
    if row_programs >= 4 * place.num_sms() or most <= 1:
        return 1
    resident = _resident_programs(place, partial_kernel, (*key, tuple(sorted(config.items()))),
                                  args, **config)
    return min(most, ww.cdiv(place.num_sms() * min(8, resident), row_programs))


def _reduction_chunk_cols(n_cols: int, n_chunks: int, block_n: int) -> tuple:
    """(columns per chunk, chunk count): chunks whole blocks wide, none left empty."""
    chunk_cols = ww.cdiv(ww.cdiv(n_cols, n_chunks), block_n) * block_n
    return chunk_cols, ww.cdiv(n_cols, chunk_cols)


@_planned
def row_sum(x, config=None):
    """Sum of each row of a 2-D x (fp16, bf16 or fp32; rows may be strided), accumulated and
    returned in fp32, shape [n_rows]. `config` (for bench/sweep_memory.py) overrides BLOCK_M,
    BLOCK_N, num_warps and chunks (column chunks per row, split across programs and combined
    by a second launch; by default from the SM count, 1 when the rows fill the GPU)."""
    op = "row_sum"
    place = _Place(op, {"x": x})
    _check_dtype(op, "x", x, _FLOATS)
    _check_ndim(op, "x", x, (2,))
    x = _rows_unit_stride(x)
    n_rows, n_cols = x.shape
    out = place.empty((n_rows,), "float32")
    if n_rows == 0:
        return out
    config = {**_reduction_config(n_cols, place.on_gpu, _rows_vectorizable(x)), **(config or {})}
    n_chunks = config.pop("chunks", None) or _reduction_chunks(
        place, _reduction.row_sum_partial_kernel, (op, str(x.dtype)), n_rows, n_cols, config,
        (x, out, n_rows, n_cols, _strides(x)[0], n_cols))
    if n_chunks > 1:
        chunk_cols, n_chunks = _reduction_chunk_cols(n_cols, n_chunks, config["BLOCK_N"])
    if n_chunks > 1:
        partial = place.empty((n_rows, n_chunks), "float32")
        place.launch(
            _reduction.row_sum_partial_kernel, lambda m: (ww.cdiv(n_rows, m["BLOCK_M"]), n_chunks),
            x, partial, n_rows, n_cols, _strides(x)[0], chunk_cols, **config)
        # Summing the partials in chunk order, one program per rows: deterministic. Few rows of
        # a block each (the combine moves little; 128 rows of 32 chunks took 254 registers).
        block_c = min(1024, max(16, ww.next_power_of_2(n_chunks)))
        place.launch(_reduction.row_sum_kernel, lambda m: (ww.cdiv(n_rows, m["BLOCK_M"]),),
                     partial, out, n_rows, n_chunks, n_chunks,
                     BLOCK_M=max(1, min(16, 2048 // block_c)), BLOCK_N=block_c, num_warps=4)
        return out
    place.launch(_reduction.row_sum_kernel, lambda m: (ww.cdiv(n_rows, m["BLOCK_M"]),),
                 x, out, n_rows, n_cols, _strides(x)[0], **config)
    return out


@_planned
def row_max(x, config=None):
    """(values, indices) of each row's maximum of a 2-D x (fp16, bf16 or fp32): values fp32,
    indices int32, the first column holding the maximum (NaN compares false, so it never
    replaces a number). Rows must not be empty. `config` (for bench/sweep_memory.py) overrides
    BLOCK_M, BLOCK_N, num_warps and chunks (as row_sum's)."""
    op = "row_max"
    place = _Place(op, {"x": x})
    _check_dtype(op, "x", x, _FLOATS)
    _check_ndim(op, "x", x, (2,))
    x = _rows_unit_stride(x)
    n_rows, n_cols = x.shape
    if n_cols == 0 and n_rows > 0:
        raise ValueError(f"{op}: 'x' has empty rows (shape {tuple(x.shape)}); a maximum needs at "
                         f"least one column")
    values = place.empty((n_rows,), "float32")
    indices = place.empty((n_rows,), "int32")
    if n_rows == 0:
        return values, indices
    config = {**_reduction_config(n_cols, place.on_gpu, _rows_vectorizable(x)), **(config or {})}
    n_chunks = config.pop("chunks", None) or _reduction_chunks(
        place, _reduction.row_max_partial_kernel, (op, str(x.dtype)), n_rows, n_cols, config,
        (x, values, indices, n_rows, n_cols, _strides(x)[0], n_cols))
    if n_chunks > 1:
        chunk_cols, n_chunks = _reduction_chunk_cols(n_cols, n_chunks, config["BLOCK_N"])
    if n_chunks > 1:
        partial = place.empty((n_rows, n_chunks), "float32")
        partial_index = place.empty((n_rows, n_chunks), "int32")
        place.launch(
            _reduction.row_max_partial_kernel, lambda m: (ww.cdiv(n_rows, m["BLOCK_M"]), n_chunks),
            x, partial, partial_index, n_rows, n_cols, _strides(x)[0], chunk_cols, **config)
        block_c = max(16, ww.next_power_of_2(n_chunks))
        block_m = max(1, min(16, 2048 // block_c))
        place.launch(_reduction.row_max_combine_kernel, (ww.cdiv(n_rows, block_m),),
                     partial, partial_index, values, indices, n_rows, n_chunks, BLOCK_M=block_m,
                     BLOCK_C=block_c, num_warps=4)
        return values, indices
    place.launch(_reduction.row_max_kernel, lambda m: (ww.cdiv(n_rows, m["BLOCK_M"]),),
                 x, values, indices, n_rows, n_cols, _strides(x)[0], **config)
    return values, indices


# ------------------------------------------------------------------------------------------------
# Attention
# ------------------------------------------------------------------------------------------------


def _check_attention_args(op, q, k, v, causal, sm_scale, head_dims) -> tuple:
    """(dtype name, q's shape, sm_scale) of an attention call, after checking q, k and v (one
    shape [Z, H, N_CTX, HEAD_DIM] and one 16-bit float dtype, HEAD_DIM one of `head_dims`),
    causal and sm_scale (default 1 / sqrt(HEAD_DIM))."""
    dt = _check_dtype(op, "q", q, _HALF_FLOATS)
    _check_ndim(op, "q", q, (4,), " [Z, H, N_CTX, HEAD_DIM]")
    for name, t in (("k", k), ("v", v)):
        if _dtype_name(t) != dt:
            raise ValueError(f"{op}: '{name}' has dtype {_dtype_name(t)} but 'q' has {dt}")
        _check_shape(op, name, t, tuple(q.shape), " (q's shape)")
    head_dim = q.shape[3]
    if head_dim not in head_dims:
        raise ValueError(f"{op}: 'q' has HEAD_DIM {head_dim}; the kernel takes "
                         f"{', '.join(map(str, head_dims[:-1]))} or {head_dims[-1]}")
    if sm_scale is None:
        sm_scale = 1.0 / math.sqrt(head_dim)
    if not isinstance(sm_scale, (int, float)) or not math.isfinite(sm_scale):
        raise ValueError(f"{op}: 'sm_scale' must be a finite number, got {sm_scale!r}")
    if not isinstance(causal, bool):
        raise ValueError(f"{op}: 'causal' must be True or False, got {causal!r}")
    return dt, tuple(q.shape), sm_scale


def attention(q, k, v, causal=False, sm_scale=None, return_lse=False):
    """softmax(q @ k^T * sm_scale [+ causal mask]) @ v for q, k, v [Z, H, N_CTX, HEAD_DIM], all
    fp16 or all bf16, of one shape, with HEAD_DIM a power of two in 16..256. sm_scale defaults to
    1 / sqrt(HEAD_DIM). Returns out (q's dtype, contiguous), and with return_lse also the fp32
    [Z, H, N_CTX] base-2 log-sum-exp of the scaled scores."""
    op = "attention"
    place = _Place(op, {"q": q, "k": k, "v": v})
    dt, (z, h, n_ctx, head_dim), sm_scale = _check_attention_args(
        op, q, k, v, causal, sm_scale, (16, 32, 64, 128, 256))
    q, k, v = (t if _strides(t)[3] == 1 and min(_strides(t)) >= 0 else _contiguous(t)
               for t in (q, k, v))
    out = place.empty((z, h, n_ctx, head_dim), dt)
    lse = place.empty((z * h, n_ctx), "float32")
    if z * h > 0 and n_ctx > 0:
        if place.on_gpu:
            # 8 warps (two warp groups of 64 query rows) for every head size; on sm_90a the
            # loop is software-pipelined (K and V copied three blocks ahead into four slots, Q
            # in shared memory): 145 registers at HEAD_DIM=64, 191-192 at 128, no spills
            # (ptxas, tests/python/test_attention_pipeline.py). The registers allow one program
            # per SM either way, so the deeper copies' shared memory (96 / 192 KB) costs none.
            config = dict(BLOCK_M=128, BLOCK_N=64, num_warps=8, num_stages=4)
        else:
            config = dict(BLOCK_M=32, BLOCK_N=16, num_warps=4)
        sq, sk, sv, so = (_strides(t) for t in (q, k, v, out))
        place.launch(
            _attention.attention_fwd_kernel, lambda m: (ww.cdiv(n_ctx, m["BLOCK_M"]), z * h),
            q, k, v, out, lse, float(sm_scale), sq[0], sq[1], sq[2], sk[0], sk[1], sk[2],
            sv[0], sv[1], sv[2], so[0], so[1], so[2], h, n_ctx,
            HEAD_DIM=head_dim, CAUSAL=causal, **config)
    if return_lse:
        return out, lse.reshape(z, h, n_ctx)
    return out


# ------------------------------------------------------------------------------------------------
# Hopper TLX kernels (GPU only: their operands arrive through host TMA descriptors, which the
# interpreter does not take)
# ------------------------------------------------------------------------------------------------


def _tma_operand(op: str, name: str, t, place: _Place):
    """t as a row-major tensor that a TMA descriptor can address: contiguous, 16-byte aligned
    base and row pitch."""
    if not place.on_gpu:
        raise ValueError(f"{op}: '{name}' must be a CUDA tensor: the TLX kernels load through host "
                         f"TMA descriptors, which only the GPU runs (use the non-TLX op for "
                         f"NumPy arrays)")
    t = _contiguous(t)
    address = t.ctypes.data if _is_numpy(t) else t.data_ptr()
    if address % 16 or (t.shape[-1] * _itemsize(t)) % 16:
        raise ValueError(f"{op}: '{name}' rows of {t.shape[-1]} elements are not a multiple of "
                         f"16 bytes (or its base is misaligned): TMA cannot address it")
    return t


def _descriptor(t, block_shape):
    return ww.TensorDescriptor(t, list(t.shape), list(_strides(t)), block_shape)


# Tile shapes of the TLX GEMMs: 64x256 wgmma tiles per consumer where two consumers share a
# tile. Chosen with bench/sweep_gemm.py on the H200 (2026-11-30, fp16/bf16 at 4096^3 and 8192^3,
# median ratio to cuBLAS timed beside each): the cooperative kernel stores C in four 64-column
# chunks, which leaves shared memory for a 4th stage of 128x256x64 (geomean 0.88x -> 0.99x
# cuBLAS; the chunks alone, at 3 stages, 0.90x), and takes 16 tile-rows per group (1.02x; 16
# rows without the 4th stage: 0.89x). The 2-CTA cluster variants measured 0.67x (A shared) and
# 0.72x (B shared) at 3 stages and slower with 4: they keep 3.
TLX_GEMM_CONFIGS = {
    # Two consumer warp groups split a 128x256 tile along M.
    "ws": dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, GROUP_M=16, NUM_STAGES=4,
               SMEM_EPILOGUE=True, EPI_SUBTILE=4),
    # "ws" in 2-CTA clusters on N-neighbour tiles: each CTA multicasts one A half to both.
    "ws_cluster": dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, GROUP_M=8, NUM_STAGES=3,
                       SMEM_EPILOGUE=True, CLUSTER_N=2),
    # "ws" in 2-CTA clusters on M-neighbour tiles: each CTA multicasts one column half of B.
    "ws_cluster_m": dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, GROUP_M=8, NUM_STAGES=3,
                         SMEM_EPILOGUE=True, CLUSTER_M=2),
    # Each consumer owns whole 128x128 tiles (two m64n128 wgmmas a step); the two alternate.
    "pingpong": dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8, NUM_STAGES=4),
    # No specialization: two warp groups (num_warps=8) split a 128x256 tile.
    "pipelined": dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, GROUP_M=8, NUM_STAGES=3),
}


def matmul_tlx(a, b, variant="ws", config=None):
    """a @ b with a Hopper TLX GEMM: variant "ws" (persistent, warp-specialized, cooperative:
    kernels/hopper/gemm_ws.py), "ws_cluster" / "ws_cluster_m" (the same in 2-CTA clusters that
    share A / B through multicast TMA), "pingpong" (persistent, warp-specialized, consumers
    alternate tiles: kernels/hopper/gemm_ws_pingpong.py) or "pipelined"
    (kernels/hopper/gemm_pipelined.py). fp16 or bf16 CUDA tensors on an sm_90 GPU; rows must be
    multiples of 16 bytes (K and N multiples of 8). `config` overrides entries of
    TLX_GEMM_CONFIGS[variant]."""
    return _matmul_tlx("matmul_tlx", a, b, variant, config, compile_only=False)


def compile_matmul_tlx(a, b, variant="ws", config=None):
    """Compiles the kernel that matmul_tlx(a, b, variant, config) would launch, without launching
    it (sweeps compile their configurations in parallel threads first)."""
    _matmul_tlx("compile_matmul_tlx", a, b, variant, config, compile_only=True)


def _matmul_tlx(op, a, b, variant, config, compile_only):
    if variant not in TLX_GEMM_CONFIGS:
        raise ValueError(f"{op}: 'variant' must be one of {sorted(TLX_GEMM_CONFIGS)}, got "
                         f"{variant!r}")
    place, dt, M, N, K = _matmul_operands(op, a, b)
    a = _tma_operand(op, "a", a, place)
    b = _tma_operand(op, "b", b, place)
    c = place.empty((M, N), dt)
    if M == 0 or N == 0:
        return c
    c = _tma_operand(op, "c", c, place)
    cfg = dict(TLX_GEMM_CONFIGS[variant], **(config or {}))
    block_m, block_n, block_k = cfg["BLOCK_M"], cfg["BLOCK_N"], cfg["BLOCK_K"]
    tiles = ww.cdiv(M, block_m) * ww.cdiv(N, block_n)

    def launch(kernel, grid, *args, **kwargs):
        if compile_only:
            return kernel.warmup(*args, grid=grid, **kwargs)
        return kernel[grid](*args, **kwargs)

    if variant.startswith("ws"):
        half = block_m // 2
        cluster_m, cluster_n = cfg.get("CLUSTER_M", 1), cfg.get("CLUSTER_N", 1)
        cluster = cluster_m * cluster_n
        # The epilogue stores C in EPI_SUBTILE column chunks when it goes through shared memory.
        c_cols = block_n // cfg.get("EPI_SUBTILE", 1) if cfg.get("SMEM_EPILOGUE") else block_n
        a_desc = _descriptor(a, [half, block_k])
        b_desc = _descriptor(b, [block_k, block_n // cluster_m])
        c_desc = _descriptor(c, [half, c_cols])
        # Whole clusters: NUM_SMS counts the CTAs of the clusters that fit on the GPU. A config
        # may ask for fewer persistent programs (sweeps use it to see whether every cluster of
        # the grid is resident at once).
        sms = cfg.pop("NUM_SMS", None) or place.num_sms()
        sms = sms // cluster * cluster
        work = ww.cdiv(ww.cdiv(M, block_m), cluster_m) * ww.cdiv(ww.cdiv(N, block_n), cluster_n)
        extra = {"ctas_per_cga": (cluster, 1, 1)} if cluster > 1 else {}
        launch(_gemm_ws.gemm_ws_kernel, (min(sms // cluster, work) * cluster,),
               a_desc, b_desc, c_desc, M, N, K, **cfg, NUM_SMS=sms, num_warps=4, **extra)
    elif variant == "pingpong":
        a_desc = _descriptor(a, [block_m, block_k])
        b_desc = _descriptor(b, [block_k, block_n])
        c_desc = _descriptor(c, [block_m, block_n])
        sms = place.num_sms()
        launch(_gemm_ws_pingpong.gemm_ws_pingpong_kernel, (min(sms, tiles),),
               a_desc, b_desc, c_desc, M, N, K, **cfg, NUM_SMS=sms, num_warps=4)
    else:
        a_desc = _descriptor(a, [block_m, block_k])
        b_desc = _descriptor(b, [block_k, block_n])
        c_desc = _descriptor(c, [block_m, block_n])
        # One warp group per 64 rows of the tile.
        launch(_gemm_pipelined.gemm_pipelined_kernel, (tiles,),
               a_desc, b_desc, c_desc, M, N, K, **cfg, num_warps=max(4, block_m // 16))
    return c


def attention_tlx(q, k, v, sm_scale=None, return_lse=False, causal=False):
    """Attention with the Hopper warp-specialized ping-pong kernel
    (kernels/hopper/attention_ws.py): q, k, v [Z, H, N_CTX, HEAD_DIM] fp16 or bf16 CUDA tensors,
    HEAD_DIM 64 or 128, N_CTX a multiple of 128. Same results as attention(causal=causal)."""
    op = "attention_tlx"
    place = _Place(op, {"q": q, "k": k, "v": v})
    dt, (z, h, n_ctx, head_dim), sm_scale = _check_attention_args(op, q, k, v, causal, sm_scale,
                                                                   (64, 128))
    # 64 query rows per consumer warp group: its S and O tiles (64x128 and 64xHEAD_DIM fp32)
    # then fit in registers beside P.
    block_m, block_n = 64, 128
    if n_ctx % block_n or n_ctx == 0:
        raise ValueError(f"{op}: 'q' has N_CTX {n_ctx}; the kernel needs a positive multiple of "
                         f"{block_n} (use attention() for other lengths)")
    q2, k2, v2 = (_tma_operand(op, name, t, place).reshape(-1, head_dim)
                  for name, t in (("q", q), ("k", k), ("v", v)))
    out = place.empty((z, h, n_ctx, head_dim), dt)
    lse = place.empty((z * h, n_ctx), "float32")
    o2 = out.reshape(-1, head_dim)
    descs = [_descriptor(t, [rows, head_dim])
             for t, rows in ((q2, block_m), (k2, block_n), (v2, block_n), (o2, block_m))]
    _attention_ws.attention_ws_kernel[(n_ctx // (2 * block_m), z * h)](
        *descs, lse, float(sm_scale), n_ctx, HEAD_DIM=head_dim, BLOCK_M=block_m,
        BLOCK_N=block_n, NUM_STAGES=2, CAUSAL=bool(causal), num_warps=4)
    if return_lse:
        return out, lse.reshape(z, h, n_ctx)
    return out
