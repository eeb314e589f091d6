"""What every op of warpweave.ops shares: where a call's arrays live (_Place: NumPy arrays run in
the CPU interpreter, CUDA torch tensors on the GPU), launch plans (a wrapper's host work done once
per argument signature), argument checks whose errors name the op and the argument, and the
occupancy queries that size persistent grids.

CPU torch tensors run in the interpreter only when WARPWEAVE_INTERPRET=1 (as TRITON_INTERPRET=1
does for Triton) or through the torch.ops.warpweave custom ops (warpweave.ops._library), which
hand the interpreter NumPy views of them; otherwise they are refused, since a silent host round
trip would hide a missing `.cuda()`. Every argument error is a ValueError that names the argument.

Block sizes: the GPU configurations are the ones each kernel's docstring recommends; the
interpreter gets smaller blocks, because it executes every lane of a block on the CPU and the
padding lanes of a large block over a small input are pure waste there.
"""

from __future__ import annotations

import collections
import functools
import math
import os
import sys
import threading

import warpweave as ww

from ..jit import _interpret_env  # WARPWEAVE_INTERPRET, read as launches read it
from . import _tuning

_FLOATS = ("float16", "bfloat16", "float32")
_HALF_FLOATS = ("float16", "bfloat16")
_INDEX_TYPES = ("int32", "int64")

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

# The op modules' routing switches (_matmul.MATMUL_TLX_ON_SM90 and the like), which a user or a
# test may flip between calls: their values are part of every plan's key, so that a plan never
# replays a routing the switches no longer choose.
_routing_switches: list = []  # (module's __dict__, attribute name)


def routing_switches(module_name: str, *names: str):
    """Registers module `module_name`'s routing switches `names` (called at its import)."""
    namespace = vars(sys.modules[module_name])
    _routing_switches.extend((namespace, name) for name in names)


_torch_tensor_type = None  # torch.Tensor, once one has been seen (the plan key's fast test)


def _array_key(value):
    """(signature part, address) of one array argument, or None for a value that is not an
    array."""
    global _torch_tensor_type
    t = type(value)
    if t is not _torch_tensor_type:
        if _is_numpy(value):
            address = value.ctypes.data
            return ("numpy", value.dtype.str, value.shape, value.strides, address & 15), address
        if not _is_torch(value):
            return None
        if t.__name__ == "Tensor" and t.__module__ == "torch":
            _torch_tensor_type = t
    address = value.data_ptr()
    return (value.dtype, value.shape, value.stride(), address & 15, value.device), address


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
        self.input_shapes = [tuple(value.shape) for value in inputs]
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
        return _LaunchPlan(place, self.input_shapes, self.allocations, self.launches, results,
                           many)


class _Replay(collections.namedtuple("_Replay", "kernel grid arguments slots meta")):
    """One launch of a plan: `arguments` with the plain values in place, `slots` the positions
    (position, array number, None or a descriptor's (shape, strides, block, padding), None or
    the plan's TensorDescriptor for that slot) that take the replay's arrays."""


class _LaunchPlan:
    """One recorded call: the allocations to make and the launches to replay on new arrays.

    Built into the replay's few steps once, since a replay is what the host pays per call (a
    GEMM of 512x4096x4096 takes 31 us on an H100, about what the wrapper's host path costs): the
    arrays a replay handles are numbered (inputs, then allocations), each launch keeps its
    argument list with the plain values in place and the slots that take an array or a
    descriptor over one, and results skip reshapes that change nothing."""

    def __init__(self, place, input_shapes, allocations, launches, results, many):
        # Descriptor slots keep one TensorDescriptor each, given the replay's array for the
        # launch only (it must not keep arrays alive): a descriptor whose base stays at one
        # address (the caching allocator's usual reuse) is then encoded from its own cache, at
        # a third of the cost of building one. A replay running beside another of the same
        # plan (another thread) builds its own.
        self.in_use = threading.Lock()
        self.descriptors = []
        n_in = len(input_shapes)
        shapes = list(input_shapes) + [tuple(shape) for shape, _ in allocations]

        def index(source):
            where, i = source
            return i if where == "in" else n_in + i

        if place.kind == "numpy":
            import numpy as np

            self.allocations = [functools.partial(np.empty, shape, _numpy_dtype(dtype))
                                for shape, dtype in allocations]
        else:
            import torch

            self.allocations = [functools.partial(torch.empty, shape, dtype=getattr(torch, dtype),
                                                  device=place.torch_device)
                                for shape, dtype in allocations]
        self.launches = []  # _Replay
        for kernel, grid, sources, meta in launches:
            arguments, slots = [], []
            for position, (kind, value) in enumerate(sources):
                arguments.append(value if kind == "value" else None)
                if kind == "array":
                    slots.append((position, index(value), None, None))
                elif kind == "descriptor":
                    source, shape, strides, block, padding = value
                    layout = (shape, strides, block, padding)
                    shared = ww.TensorDescriptor(None, *layout)
                    self.descriptors.append(shared)
                    slots.append((position, index(source), layout, shared))
            self.launches.append(_Replay(kernel, grid, arguments, slots, meta))
        self.results = [(index(source), None if shapes[index(source)] == shape else shape)
                        for source, shape in results]
        self.many = many

    def run(self, inputs):
        arrays = inputs + [allocate() for allocate in self.allocations]
        descriptor = ww.TensorDescriptor
        shared = self.in_use.acquire(False)
        try:
            for kernel, grid, arguments, slots, meta in self.launches:
                args = list(arguments)
                for position, i, layout, plan_descriptor in slots:
                    if layout is None:
                        args[position] = arrays[i]
                    elif shared:
                        plan_descriptor.base = arrays[i]
                        args[position] = plan_descriptor
                    else:
                        args[position] = descriptor(arrays[i], *layout)
                kernel[grid](*args, **meta)
        finally:
            if shared:
                for plan_descriptor in self.descriptors:
                    plan_descriptor.base = None
                self.in_use.release()
        out = tuple(arrays[i] if shape is None else arrays[i].reshape(shape)
                    for i, shape in self.results)
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
        key = [name, _interpret_env(), _tuning.plan_key(),
               tuple([namespace[switch] for namespace, switch in _routing_switches])]
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
            key.append(tuple(map(addresses.index, addresses)))
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
# Occupancy: programs and clusters resident at once, from the compiled kernel
# ------------------------------------------------------------------------------------------------

_resident_programs_cache = {}
_tma_devices = {}
_sm90_devices = {}
_sm100_devices = {}

# Shared memory a block may use on sm_90a.
_MAX_SHARED_PER_BLOCK = 232448


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


def _is_sm90(place) -> bool:
    """Whether the call runs on a GPU of compute capability 9.0 (Hopper) and compiles for sm_90a,
    the target of the TLX warp-specialized kernels (wgmma, TMA). WARPWEAVE_TARGET=sm_80 on a
    Hopper GPU compiles for sm_80, where those kernels do not exist."""
    if not (place.on_gpu and place.kind == "torch"):
        return False
    if os.environ.get("WARPWEAVE_TARGET", "sm_90a") not in ("", "sm_90a"):
        return False
    found = _sm90_devices.get(place.torch_device)
    if found is None:
        import torch

        found = tuple(torch.cuda.get_device_capability(place.torch_device)) == (9, 0)
        _sm90_devices[place.torch_device] = found
    return found


def _is_sm100(place) -> bool:
    """Whether the call runs on a GPU of compute capability 10.x (Blackwell: B200, GB200) and
    compiles for sm_100a, the target of the Blackwell TLX kernels (tcgen05, tensor memory,
    cluster launch control): WARPWEAVE_TARGET unset or sm_100a."""
    if not (place.on_gpu and place.kind == "torch"):
        return False
    if os.environ.get("WARPWEAVE_TARGET", "sm_100a") not in ("", "sm_100a"):
        return False
    found = _sm100_devices.get(place.torch_device)
    if found is None:
        import torch

        found = torch.cuda.get_device_capability(place.torch_device)[0] == 10
        _sm100_devices[place.torch_device] = found
    return found


# ------------------------------------------------------------------------------------------------
# TMA operands (the Hopper TLX kernels load through host TMA descriptors)
# ------------------------------------------------------------------------------------------------

def _tma_operand(op: str, name: str, t, place: _Place):
    """t as a row-major tensor that a TMA descriptor can address: contiguous, 16-byte aligned
    base and row pitch (a CUDA tensor, or a NumPy array whose descriptor the interpreter runs)."""
    t = _contiguous(t)
    address = t.ctypes.data if _is_numpy(t) else t.data_ptr()
    if address % 16 or (t.shape[-1] * _itemsize(t)) % 16:
        raise ValueError(f"{op}: '{name}' rows of {t.shape[-1]} elements are not a multiple of "
                         f"16 bytes (or its base is misaligned): TMA cannot address it")
    return t


def _descriptor(t, block_shape):
    return ww.TensorDescriptor(t, list(t.shape), list(_strides(t)), block_shape)

