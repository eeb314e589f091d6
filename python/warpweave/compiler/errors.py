"""`warpweave.compiler.errors`: the compile errors Triton code catches by these names."""

from ..errors import CompilationError  # noqa: F401

# warpweave reports a failed tl.static_assert as a CompilationError naming the assertion.
CompileTimeAssertionFailure = CompilationError

__all__ = ["CompilationError", "CompileTimeAssertionFailure"]
