"""Builds the stand-in CUDA driver (cuda_stub.c) and reads back what it recorded, for tests and
benchmarks of the host launch path on machines without a GPU:

    from cuda_stub import build, Stub
    os.environ["WARPWEAVE_LIBCUDA"] = build()  # before warpweave's first driver call
    stub = Stub(os.environ["WARPWEAVE_LIBCUDA"])
    ...; stub.record.launches, stub.last_params()
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cuda_stub.c")
MAX_PARAMS = 64
MAP_BYTES = 128  # a CUtensorMap


def _cuda_include() -> str:
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if root and os.path.exists(os.path.join(root, "include", "cuda.h")):
            return os.path.join(root, "include")
    raise RuntimeError("cuda.h not found (set CUDA_HOME): the stub driver is built against it")


def build(out_dir: str | None = None, defines=()) -> str:
    """Compiles the stub once per source version; returns the path of the shared library (a
    libcuda.so.1 beside it serves LD_LIBRARY_PATH for builds without WARPWEAVE_LIBCUDA).
    `defines` (e.g. ["WWSTUB_NO_CLUSTER_OCCUPANCY"]: a driver older than CUDA 11.8) build a
    variant of the stub, kept apart from the plain one."""
    with open(SOURCE, "rb") as f:
        digest = hashlib.sha256(f.read() + repr(sorted(defines)).encode()).hexdigest()[:16]
    out_dir = out_dir or os.path.join(tempfile.gettempdir(), f"warpweave-cuda-stub-{digest}")
    lib = os.path.join(out_dir, "libcuda_stub.so")
    if os.path.exists(lib):
        return lib
    os.makedirs(out_dir, exist_ok=True)
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or "clang"
    tmp = f"{lib}.{os.getpid()}.tmp"
    subprocess.run([cc, "-O2", "-fPIC", "-shared", "-Wall", "-Wextra", f"-I{_cuda_include()}",
                    *[f"-D{d}" for d in defines], SOURCE, "-o", tmp],
                   check=True, capture_output=True, text=True)
    os.replace(tmp, lib)  # atomic: concurrent builders never see half a library
    alias = os.path.join(out_dir, "libcuda.so.1")
    if not os.path.exists(alias):
        try:
            os.symlink("libcuda_stub.so", alias)
        except FileExistsError:
            pass
    return lib


class Record(ctypes.Structure):
    _fields_ = [("launches", ctypes.c_ulonglong), ("launch_ex", ctypes.c_ulonglong),
                ("ctx_get_current", ctypes.c_ulonglong), ("module_loads", ctypes.c_ulonglong),
                ("module_unloads", ctypes.c_ulonglong), ("function", ctypes.c_ulonglong),
                ("stream", ctypes.c_ulonglong), ("grid", ctypes.c_uint * 3),
                ("block", ctypes.c_uint * 3), ("shared_bytes", ctypes.c_uint),
                ("cluster", ctypes.c_uint * 3), ("num_params", ctypes.c_uint),
                ("params", ctypes.c_ulonglong * MAX_PARAMS),
                ("launch_buffer", ctypes.c_ulonglong), ("ptx_loads", ctypes.c_ulonglong),
                ("carveout_sets", ctypes.c_ulonglong), ("carveout", ctypes.c_int),
                ("param_bytes", (ctypes.c_ubyte * MAP_BYTES) * MAX_PARAMS),
                ("occupancy_queries", ctypes.c_ulonglong),
                ("occupancy_function", ctypes.c_ulonglong),
                ("occupancy_grid", ctypes.c_uint * 3), ("occupancy_block", ctypes.c_uint * 3),
                ("occupancy_shared", ctypes.c_uint), ("occupancy_cluster", ctypes.c_uint * 3)]


class Stub:
    """The loaded stub (the same library instance warpweave's runtime dlopen'ed from `path`)."""

    def __init__(self, path: str):
        self.lib = ctypes.CDLL(path)
        self.lib.wwstub_record.restype = ctypes.POINTER(Record)
        self.lib.wwstub_record_params.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_int)]
        self.record = self.lib.wwstub_record().contents  # live: reads see later launches
        self.record_sizes = ()  # what record_params set


    def reset(self):
        self.lib.wwstub_reset()
        self.record_sizes = ()

    def record_params(self, sizes):
        """Launches from now on keep their first len(sizes) params, of these byte sizes (1 to 8,
        or 128 for a tensor map)."""
        arr = (ctypes.c_int * max(len(sizes), 1))(*sizes)
        if self.lib.wwstub_record_params(len(sizes), arr) != 0:
            raise ValueError(f"record_params: sizes must be 1..8 or {MAP_BYTES} bytes, at most "
                             f"{MAX_PARAMS}")
        self.record_sizes = tuple(sizes)

    def set_compute_capability(self, major: int, minor: int):
        """The device reports this compute capability from now on (reset() restores 9.0)."""
        self.lib.wwstub_set_compute_capability(major, minor)

    def set_num_regs(self, regs: int):
        """Every function reports this many registers per thread from now on (0, the default
        and what reset() restores: no register limit on occupancy)."""
        self.lib.wwstub_set_num_regs(regs)

    def fail_launches(self, result: int):
        """Launches from now on return this CUresult (0 restores success)."""
        self.lib.wwstub_fail_launches(result)

    def last_params(self) -> tuple:
        """Each recorded value of the last launch as an int (a tensor map's first 8 bytes)."""
        return tuple(self.record.params[i] for i in range(self.record.num_params))

    def last_param_bytes(self) -> tuple:
        """Each recorded value of the last launch as its bytes (tensor maps in full)."""
        sizes = self.record_sizes
        return tuple(bytes(self.record.param_bytes[i])[:sizes[i]] for i in range(len(sizes)))


class StandInDType:
    """A torch dtype as the launch paths read it (its str)."""

    def __init__(self, name):
        self.name = name

    def __str__(self):
        return "torch." + self.name


class StandInTensor:
    """What the launch paths read of a CUDA torch tensor: its address and dtype."""

    __slots__ = ("address", "dtype")
    is_cuda = True

    def __init__(self, address, dtype):
        self.address = address
        self.dtype = dtype

    def data_ptr(self):
        return self.address


class StandInCpuTensor(StandInTensor):
    """StandInTensor of a CPU tensor (is_cuda False), for the launch paths' refusals."""

    __slots__ = ()
    is_cuda = False


class StandInPinnedTensor(StandInCpuTensor):
    """StandInTensor of a CPU tensor in page-locked memory (torch's pin_memory=True)."""

    __slots__ = ()

    def is_pinned(self):
        return True


def use_stub_driver() -> str:
    """Points warpweave (before its first driver call) at a freshly built stand-in driver, for
    sm_90a compiles and launches that really go through the launcher (not the interpreter, no
    hang traps); returns the library's path."""
    os.environ["WARPWEAVE_LIBCUDA"] = build()
    os.environ.setdefault("WARPWEAVE_TARGET", "sm_90a")
    for var in ("WARPWEAVE_INTERPRET", "WARPWEAVE_TRAP_HANGS"):
        os.environ.pop(var, None)
    return os.environ["WARPWEAVE_LIBCUDA"]


def stand_in_torch(jit_module) -> None:
    """Makes warpweave's launch paths (the module warpweave.jit) take StandInTensor for CUDA
    tensors, on stream 0 of device 0, with no torch installed."""
    jit_module._tensor_type = StandInTensor
    jit_module._stream_source = lambda: (lambda: 0, lambda dev: 0x5000)
