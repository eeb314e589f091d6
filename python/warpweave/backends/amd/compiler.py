"""Triton's `backends.amd.compiler` names (HIPBackend, HIPOptions): constructing either raises,
since warpweave has no AMD backend (see the package docstring)."""

from __future__ import annotations

_WHY = ("warpweave compiles for NVIDIA GPUs only (sm_80, sm_90a, sm_100a); Triton's AMD HIP "
        "backend is not available")


class HIPOptions:
    def __init__(self, *args, **kwargs):
        raise NotImplementedError(f"backends.amd.compiler.HIPOptions: {_WHY}")


class HIPBackend:
    def __init__(self, *args, **kwargs):
        raise NotImplementedError(f"backends.amd.compiler.HIPBackend: {_WHY}")
