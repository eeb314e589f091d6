"""`warpweave.runtime.driver`: Triton's `triton.runtime.driver`, whose `active` driver answers
host code's questions about the device (`get_active_torch_device()`, `get_current_target()`,
`utils.get_device_properties(dev)`...).

With PyTorch and a CUDA GPU the answers are the GPU's. On a machine without a GPU (kernels then
run in the CPU interpreter) the driver describes the device the interpreter stands in for: the
torch device is 'cpu' (`torch.device('cpu')`, or the string 'cpu' without PyTorch), the target is
`GPUTarget('cuda', 90, 32)` (the interpreter compiles for sm_90a; WARPWEAVE_TARGET=sm_100a or
sm_80 changes it to 100 or 80), and the device properties are those of that architecture's
flagship part (132 SMs and 227 KiB of shared memory per block for sm_90), so that grid sizes and
shared-memory checks in scripts come out as on that GPU. `has_gpu()` tells the two apart.
"""

from __future__ import annotations

import os
import sys

from ..backends.compiler import GPUTarget

__all__ = ["driver", "DriverConfig", "CudaDriver", "active"]

# What a machine without a GPU reports, by architecture: (SMs, opt-in shared memory per block,
# registers per block, SM clock kHz, memory clock kHz, memory bus bits) of H100 SXM, B200, A100.
_STAND_IN = {
    90: (132, 232448, 65536, 1980000, 2619000, 5120),
    100: (148, 232448, 65536, 1965000, 3996000, 8192),
    80: (108, 166912, 65536, 1410000, 1215000, 5120),
}

# CUdevice_attribute values (cuda.h).
_ATTR = {
    "max_shared_mem": 97,  # MAX_SHARED_MEMORY_PER_BLOCK_OPTIN
    "max_num_regs": 12,  # MAX_REGISTERS_PER_BLOCK
    "multiprocessor_count": 16,
    "warpSize": 10,
    "sm_clock_rate": 13,
    "mem_clock_rate": 36,
    "mem_bus_width": 37,
}
_CC_MAJOR, _CC_MINOR = 75, 76
_TARGETS: dict = {}  # arch -> its GPUTarget


def _torch():
    """PyTorch when it is installed (imported on first need), else None."""
    torch = sys.modules.get("torch")
    if torch is not None:
        return torch
    try:
        import torch  # noqa: F811
    except ImportError:
        return None
    return torch


_jit = None


def _jit_module():
    """warpweave.jit, the module (the package's `jit` attribute is the decorator)."""
    global _jit
    if _jit is None:
        import importlib

        _jit = importlib.import_module("..jit", __package__)
    return _jit


def _forced_arch():
    """The architecture WARPWEAVE_TARGET (or TRITON_TARGET) names, or None."""
    from .. import _env

    t = _env.get("TARGET")
    if not t:
        return None
    digits = "".join(ch for ch in t if ch.isdigit())
    return int(digits) if digits else None


class _LibCuda:
    """cuDeviceGetAttribute through ctypes, for the properties PyTorch does not report."""

    _lib = None
    _failed = False

    @classmethod
    def lib(cls):
        if cls._lib is None and not cls._failed:
            import ctypes

            try:
                lib = ctypes.CDLL(os.environ.get("WARPWEAVE_LIBCUDA") or "libcuda.so.1")
                if lib.cuInit(0) != 0:
                    raise OSError("cuInit failed")
                cls._lib = lib
            except (OSError, AttributeError):
                cls._failed = True
        return cls._lib

    @classmethod
    def attribute(cls, attr: int, device: int):
        import ctypes

        lib = cls.lib()
        if lib is None:
            return None
        dev = ctypes.c_int()
        value = ctypes.c_int()
        try:
            if lib.cuDeviceGet(ctypes.byref(dev), int(device)) != 0:
                return None
            if lib.cuDeviceGetAttribute(ctypes.byref(value), attr, dev) != 0:
                return None
        except AttributeError:  # a stub driver without these entry points
            return None
        return value.value

    @classmethod
    def device_count(cls) -> int:
        import ctypes

        lib = cls.lib()
        if lib is None:
            return 0
        n = ctypes.c_int()
        try:
            if lib.cuDeviceGetCount(ctypes.byref(n)) != 0:
                return 0
        except AttributeError:
            return 0
        return n.value


def _device_index(device) -> int:
    """A device given as an int, a torch.device or a string ('cuda:1') -> its index."""
    if device is None:
        return 0
    if isinstance(device, int):
        return device
    index = getattr(device, "index", None)
    if index is not None:
        return int(index)
    text = str(device)
    if ":" in text:
        return int(text.rsplit(":", 1)[1])
    return 0


class CudaUtils:
    """`driver.active.utils`: device queries."""

    def __init__(self, owner: "CudaDriver"):
        self._owner = owner

    def get_device_properties(self, device=None) -> dict:
        """{max_shared_mem, max_num_regs, multiprocessor_count, warpSize, sm_clock_rate,
        mem_clock_rate, mem_bus_width} of `device` (an index, as Triton's; torch devices are
        accepted too), or of the interpreter's stand-in device without a GPU."""
        if self._owner.has_gpu():
            index = _device_index(device)
            props = {k: _LibCuda.attribute(a, index) for k, a in _ATTR.items()}
            if all(v is not None for v in props.values()):
                return props
            torch = _torch()
            if torch is not None and torch.cuda.is_available():
                p = torch.cuda.get_device_properties(index)
                filled = {
                    "max_shared_mem": getattr(p, "shared_memory_per_block_optin", None),
                    "max_num_regs": getattr(p, "regs_per_multiprocessor", None),
                    "multiprocessor_count": p.multi_processor_count,
                    "warpSize": getattr(p, "warp_size", 32),
                    "sm_clock_rate": getattr(p, "clock_rate", None),
                    "mem_clock_rate": getattr(p, "memory_clock_rate", None),
                    "mem_bus_width": getattr(p, "memory_bus_width", None),
                }
                return {k: (props[k] if props[k] is not None else filled[k]) for k in _ATTR}
        arch = self._owner.get_current_target().arch
        sms, smem, regs, sm_clock, mem_clock, bus = _STAND_IN.get(arch, _STAND_IN[90])
        return {"max_shared_mem": smem, "max_num_regs": regs, "multiprocessor_count": sms,
                "warpSize": 32, "sm_clock_rate": sm_clock, "mem_clock_rate": mem_clock,
                "mem_bus_width": bus}

    def get_device_capability(self, device=None):
        return self._owner.get_device_capability(device)

    def get_current_device(self) -> int:
        return self._owner.get_current_device()


class CudaDriver:
    """The one driver warpweave has (Triton's `CudaDriver` interface)."""

    backend = "cuda"

    def __init__(self):
        self.utils = CudaUtils(self)
        self._gpu = None
        self._capabilities: dict = {}  # device index -> (major, minor), with a GPU

    @staticmethod
    def is_active() -> bool:
        return True

    def has_gpu(self) -> bool:
        """Whether a CUDA GPU is visible (else kernels run in the CPU interpreter)."""
        if self._gpu is None:
            torch = _torch()
            if torch is not None:
                self._gpu = bool(torch.cuda.is_available()) and getattr(
                    torch.version, "hip", None) is None
            else:
                self._gpu = _LibCuda.device_count() > 0
        return self._gpu

    # -- devices and streams ---------------------------------------------------------------------

    def get_current_device(self) -> int:
        if self.has_gpu() and _torch() is not None:
            # The launch path's own query (torch's _cuda_getDevice, or 0 with one visible GPU):
            # wrappers ask for the target several times a call (tutorial 06: five).
            return _jit_module()._stream_source()[0]()
        return 0

    def set_current_device(self, device) -> None:
        torch = _torch()
        if torch is not None and self.has_gpu():
            torch.cuda.set_device(_device_index(device))

    def get_current_stream(self, device=None) -> int:
        torch = _torch()
        if torch is not None and self.has_gpu():
            if device is None:
                device = torch.cuda.current_device()
            return torch.cuda.current_stream(device).cuda_stream
        return 0

    def get_device_capability(self, device=None):
        """(major, minor) of the GPU, or of the interpreter's stand-in architecture."""
        if self.has_gpu():
            torch = _torch()
            if torch is not None:
                if device is None:
                    return tuple(torch.cuda.get_device_capability(None))
                index = _device_index(device)
                # A device's capability is fixed for the process (its visible devices are).
                cc = self._capabilities.get(index)
                if cc is None:
                    cc = self._capabilities[index] = tuple(
                        torch.cuda.get_device_capability(index))
                return cc
            index = _device_index(device)
            major = _LibCuda.attribute(_CC_MAJOR, index)
            minor = _LibCuda.attribute(_CC_MINOR, index)
            if major is not None and minor is not None:
                return (major, minor)
        arch = _forced_arch() or 90
        return (arch // 10, arch % 10)

    def get_current_target(self) -> GPUTarget:
        major, minor = self.get_device_capability(self.get_current_device())
        arch = major * 10 + minor
        target = _TARGETS.get(arch)  # GPUTarget is frozen: one per architecture
        if target is None:
            target = _TARGETS[arch] = GPUTarget("cuda", arch, 32)
        return target

    def get_active_torch_device(self):
        """torch.device('cuda', current index) with a GPU; 'cpu' without one (torch.device('cpu')
        when PyTorch is installed, else the string 'cpu')."""
        torch = _torch()
        if torch is None:
            return "cpu"
        if self.has_gpu():
            return torch.device("cuda", self.get_current_device())
        return torch.device("cpu")

    def get_device_interface(self):
        torch = _torch()
        if torch is None:
            raise RuntimeError("get_device_interface() needs PyTorch (torch.cuda)")
        return torch.cuda

    # -- benchmarking ----------------------------------------------------------------------------

    def get_benchmarker(self):
        from ..testing import do_bench

        return do_bench

    def get_empty_cache_for_benchmark(self):
        torch = _torch()
        return torch.empty(256 * 1024 * 1024 // 4, dtype=torch.int, device="cuda")

    def clear_cache(self, cache) -> None:
        cache.zero_()

    def __repr__(self):
        return f"<warpweave CudaDriver ({'GPU' if self.has_gpu() else 'no GPU: interpreter'})>"


class DriverConfig:
    """`triton.runtime.driver`: holds the active driver (settable, as in Triton)."""

    def __init__(self):
        self._default = None
        self._active = None

    @property
    def default(self) -> CudaDriver:
        if self._default is None:
            self._default = CudaDriver()
        return self._default

    @property
    def active(self) -> CudaDriver:
        if self._active is None:
            self._active = self.default
        return self._active

    @active.setter
    def active(self, value) -> None:
        self._active = value

    @active.deleter
    def active(self) -> None:
        self._active = None

    def set_active(self, driver) -> None:
        self._active = driver

    def reset_active(self) -> None:
        self._active = self.default


driver = DriverConfig()


def __getattr__(name):
    # `warpweave.runtime.driver` names the DriverConfig (as in Triton), but code that reaches this
    # module object itself (sys.modules) finds `active` here too.
    if name == "active":
        return driver.active
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
