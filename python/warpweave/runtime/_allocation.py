"""`warpweave.set_allocator`: the function that gives a kernel launch global-memory scratch
(Triton's: `alloc_fn(size: int, alignment: int, stream: int | None)` returning an object with
`data_ptr()`, typically a torch tensor). Kernels that build tensor descriptors in device code need
it in Triton; warpweave's runtime asks `get_allocator()` for such scratch."""

from __future__ import annotations

from typing import Optional, Protocol

__all__ = ["set_allocator", "get_allocator", "has_allocator", "NullAllocator", "Allocator"]


class Buffer(Protocol):
    def data_ptr(self) -> int:
        ...


class Allocator(Protocol):
    def __call__(self, size: int, alignment: int, stream: Optional[int]) -> Buffer:
        ...


class NullAllocator:
    """The allocator before set_allocator: any request is an error that says what to do."""

    def __call__(self, size: int, alignment: int, stream: Optional[int]):
        raise RuntimeError(
            f"a kernel launch needs {size} bytes of global scratch memory, but no allocator is "
            f"set: call warpweave.set_allocator(fn) (triton.set_allocator) with "
            f"fn(size, alignment, stream) returning a buffer, e.g. a torch.empty(size, "
            f"dtype=torch.int8, device='cuda')")


_NULL = NullAllocator()
# One process-wide allocator (not a ContextVar as in Triton): the autotuner compiles and launches
# from worker threads, which would not see a context variable set by the main thread.
_allocator: Allocator = _NULL


def set_allocator(allocator: Optional[Allocator]) -> None:
    """Sets the allocator kernel launches use for global scratch (None restores the default,
    which refuses)."""
    global _allocator
    if allocator is not None and not callable(allocator):
        raise TypeError(f"set_allocator expects a function (size, alignment, stream) -> buffer, "
                        f"got {type(allocator).__name__}")
    _allocator = _NULL if allocator is None else allocator


def get_allocator() -> Allocator:
    """The allocator set by set_allocator (a NullAllocator that raises when none is)."""
    return _allocator


def has_allocator() -> bool:
    return _allocator is not _NULL
