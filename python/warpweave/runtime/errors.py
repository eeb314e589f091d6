"""`warpweave.runtime.errors`: the errors Triton host code imports from `triton.runtime.errors`."""

from ..errors import (AutotunerError, InterpreterError, OutOfResources, PTXASError,  # noqa: F401
                      TritonError)

__all__ = ["AutotunerError", "InterpreterError", "OutOfResources", "PTXASError", "TritonError"]
