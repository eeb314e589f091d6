"""`warpweave.language.extra.cuda`: CUDA-specific kernel helpers under Triton's module path
(`triton.language.extra.cuda`). The functions below are compiler builtins: they stand for the
names here (so that `from triton.language.extra.cuda import smid`, or passing one as a
constexpr, binds them) and raise if called from Python."""

from . import libdevice  # noqa: E402,F401  (`tl.extra.cuda.libdevice`, as in Triton)


def _kernel_only(name):
    raise RuntimeError(f"tl.extra.cuda.{name}() is called in kernel code only")


def smid():
    """The id of the SM the program runs on (%smid), an int32 scalar; 0 in the interpreter."""
    _kernel_only("smid")


def globaltimer():
    """The GPU's global nanosecond timer (%globaltimer), an int64 scalar; the host's steady
    clock in the interpreter."""
    _kernel_only("globaltimer")


def num_threads():
    """The kernel's threads per program (num_warps * 32), a compile-time constant."""
    _kernel_only("num_threads")


def num_warps():
    """The kernel's num_warps, a compile-time constant."""
    _kernel_only("num_warps")


def gdc_wait():
    """Programmatic dependent launch: waits until the grids this launch depends on completed
    (griddepcontrol.wait; sm_90 and newer)."""
    _kernel_only("gdc_wait")


def gdc_launch_dependents():
    """Programmatic dependent launch: lets the next launch on the stream start
    (griddepcontrol.launch_dependents; sm_90 and newer)."""
    _kernel_only("gdc_launch_dependents")
