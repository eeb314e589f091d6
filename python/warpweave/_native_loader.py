"""Imports the C++ extension on first use, so that the pure-Python parts of the package (the
language names, signature building, argument binding) work and are testable without it."""

from __future__ import annotations

_native = None


def native():
    global _native
    if _native is None:
        try:
            from . import _native as mod
        except ImportError as e:
            raise ImportError(
                "warpweave's C++ extension (warpweave._native) is not built or failed to load: "
                f"{e}. Install the package with `pip install --no-build-isolation .` from the "
                "repository root.") from e
        _native = mod
    return _native


def available() -> bool:
    try:
        native()
        return True
    except ImportError:
        return False
