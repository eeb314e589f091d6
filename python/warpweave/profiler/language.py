"""`warpweave.profiler.language`: Proton's in-kernel scopes (`import triton.profiler.language as
pl`), for kernels that mark regions with `pl.enter_scope("name")` / `pl.exit_scope("name")` or
`with pl.scope("name"):`.

Proton records a scope only under its instrumentation backend (`proton.start(...,
backend="instrumentation")`), which warpweave does not have; with it off, as here always, Proton's
scopes emit nothing. So in a warpweave kernel they compile to nothing and the interpreter runs
them as nothing, while the name is still checked to be a compile-time string as Proton requires.
The functions are kernel-only: called as ordinary Python they raise, as Triton's builtins do.

`enable_semantic` / `disable_semantic` choose which of Proton's front ends (Triton's, Gluon's)
instrument their kernels; they are kept for source compatibility and change nothing here.
"""

from ..language import _kernel_only

__all__ = ["enter_scope", "exit_scope", "scope", "enable_semantic", "disable_semantic"]

enter_scope = _kernel_only("warpweave.profiler.language", "enter_scope")
exit_scope = _kernel_only("warpweave.profiler.language", "exit_scope")

_KNOWN_SEMANTICS = ("triton", "gluon")
_enabled = {"gluon"}  # Proton's default: only Gluon kernels are instrumented


class scope:
    """`with pl.scope("name"):` in a kernel: enter_scope at the start, exit_scope at the end
    (both nothing in warpweave). Kernel-only."""

    def __init__(self, name, _semantic=None):
        self.name = name

    def __enter__(self):
        enter_scope(self.name)

    def __exit__(self, exc_type, exc_value, traceback):
        exit_scope(self.name)


def _semantic_name(name: str) -> str:
    if name not in _KNOWN_SEMANTICS:
        raise KeyError(name)  # Proton looks the name up in a dict of its front ends
    return name


def enable_semantic(semantic_name: str) -> None:
    _enabled.add(_semantic_name(semantic_name))


def disable_semantic(semantic_name: str) -> None:
    _enabled.remove(_semantic_name(semantic_name))
