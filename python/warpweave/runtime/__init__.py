"""`warpweave.runtime`: Triton's `triton.runtime` namespace as host code uses it: `driver` (the
active device driver: `driver.active.get_active_torch_device()`, `get_current_target()`,
`utils.get_device_properties(dev)`), the autotuner classes, `JITFunction`, the error classes and
the scratch allocator (`set_allocator`)."""

from ..autotuner import Autotuner, Config, Heuristics, autotune, heuristics  # noqa: F401
from ..errors import AutotunerError, InterpreterError, OutOfResources, PTXASError  # noqa: F401
from ..jit import JITFunction, KernelInterface  # noqa: F401
from . import errors  # noqa: F401
from ._allocation import get_allocator, set_allocator  # noqa: F401
from .driver import driver  # noqa: F401  (the DriverConfig object, as in Triton)
from .jit import MockTensor  # noqa: F401

__all__ = [
    "Autotuner", "AutotunerError", "Config", "Heuristics", "InterpreterError", "JITFunction",
    "KernelInterface", "MockTensor", "OutOfResources", "PTXASError", "autotune", "driver",
    "errors", "get_allocator", "heuristics", "set_allocator",
]
