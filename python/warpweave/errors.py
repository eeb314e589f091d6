"""warpweave's exception classes in one place (the package root and `warpweave.runtime.errors`
re-export them). The first four are the C++ extension's when it is built; the rest carry
Triton's names for the errors Triton host code catches."""

from __future__ import annotations

from ._native_loader import available as _native_available

__all__ = ["CompilationError", "InterpreterError", "KernelCompilationError", "CudaError", "LaunchError", "TritonError",
           "OutOfResources", "PTXASError", "AutotunerError"]


class TritonError(Exception):
    """Base of compile, interpreter and the Triton-named errors (Triton's
    `triton.errors.TritonError`): host code catches any of them through it."""

    __slots__ = ()  # Exception's own layout, so the extension's classes can take it as base


if _native_available():
    from ._native import CompilationError, CudaError, InterpreterError, LaunchError  # noqa: F401

    # The extension's two error classes are plain Exception subclasses; Triton derives both
    # from TritonError, so they take it as their base here (their layout is Exception's).
    for _cls in (CompilationError, InterpreterError):
        if TritonError not in _cls.__mro__:
            _cls.__bases__ = (TritonError,)
    del _cls
else:
    class CompilationError(TritonError):
        """A kernel failed to compile (the C++ extension is not built)."""

    class InterpreterError(TritonError):
        """The interpreter found a fault in a kernel."""

    class CudaError(RuntimeError):
        """A CUDA driver call failed."""

    class LaunchError(ValueError):
        """A launch was refused before reaching the driver."""


def _error_message(err):
    """The message of a compile error without its location and source excerpt (the text after
    the first 'error: '): Triton's CompilationError.error_message, which its tests read."""
    text = str(err)
    for line in text.splitlines():
        head, sep, message = line.partition("error: ")
        if sep:
            return message
    return text or None


if not hasattr(CompilationError, "error_message"):
    CompilationError.error_message = property(_error_message)


class KernelCompilationError(CompilationError, InterpreterError):
    """A kernel's compile error in interpreter mode. Triton's interpreter runs a kernel as Python,
    so an error its front end finds there surfaces as an InterpreterError (chained to the
    builtin's exception); warpweave compiles the kernel first, and its CompilationError is then
    also an InterpreterError, so code written for either catches it."""

    __slots__ = ()


class CompilationErrorDetail(Exception):
    """The message of a CompilationError without its location and source excerpt, chained as
    its `__cause__`: Triton chains the exception a builtin raised there, and code that reports
    compile errors reads `str(err.__cause__)` for the bare reason."""


def as_interpreter_error(err):
    """The CompilationError `err` as a KernelCompilationError (same message and cause), for
    interpreter mode."""
    if isinstance(err, InterpreterError):
        return err
    new = KernelCompilationError(*err.args)
    new.__cause__ = err.__cause__
    return new


def chain_error_detail(err):
    """Sets err.__cause__ to a CompilationErrorDetail of its first error's message, unless
    it already has a cause."""
    if err.__cause__ is not None:
        return
    text = str(err)
    for line in text.splitlines():
        head, sep, message = line.partition("error: ")
        if sep:
            err.__cause__ = CompilationErrorDetail(message)
            return


class OutOfResources(TritonError):
    """A kernel needs more of a resource (`name`: shared memory, registers...) than the hardware
    has: `required` against `limit`."""

    def __init__(self, required, limit, name):
        super().__init__(required, limit, name)
        self.required = required
        self.limit = limit
        self.name = name

    def __str__(self):
        return (f"out of resource: {self.name}, required {self.required}, hardware limit "
                f"{self.limit}; smaller blocks or fewer stages may fit")


class PTXASError(TritonError):
    """ptxas rejected the generated PTX."""

    def __init__(self, error_message=None):
        super().__init__(error_message)
        self.error_message = error_message

    def __str__(self):
        return f"PTXAS error: {self.error_message or ''}"


class PerformanceWarning(UserWarning):
    """ptxas compiled the kernel but noted that it lost speed: its wgmma serialized (a register
    of one in flight read by another instruction, too few registers) or a wait injected before
    an accumulator read. The kernel's results are right; its tensor-core work overlaps less."""


class AutotunerError(TritonError):
    """The autotuner was left without a configuration to run."""

    def __init__(self, error_message=None):
        super().__init__(error_message)
        self.error_message = error_message

    def __str__(self):
        return f"Autotuner error: {self.error_message or ''}"
