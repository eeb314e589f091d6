"""`warpweave.language.target_info` (Triton's `triton.language.target_info`): compile-time
questions about the target a kernel is compiled for. Inside a kernel the compiler answers them
(a compile-time bool, so `if cuda_capability_geq(10, 0):` picks code at compile time): sm_80 is
capability 8.0, sm_90a 9.0, sm_100a 10.0; the interpreter runs Tile IR on the CPU and has no
CUDA target, so there every one is False. Called from host code they describe the GPU that
kernels would be compiled for now (WARPWEAVE_TARGET, else the current device)."""

__all__ = ["is_cuda", "cuda_capability_geq", "is_hip", "is_hip_cdna3", "is_hip_cdna4",
           "is_hip_gfx1250"]

_ARCH = {"sm_80": 80, "sm_90a": 90, "sm_100a": 100}


def _host_arch():
    import os

    if os.environ.get("WARPWEAVE_INTERPRET") == "1" or os.environ.get("TRITON_INTERPRET") == "1":
        return None
    from ..jit import _gpu_target

    try:
        return _ARCH.get(_gpu_target())
    except Exception:  # no usable GPU
        return None


def is_cuda():
    """Whether kernels compile for a CUDA GPU (False in the interpreter)."""
    return _host_arch() is not None


def cuda_capability_geq(major, minor=0):
    """Whether the target's compute capability is at least major.minor (False in the
    interpreter): Triton's guard for inline PTX that needs a newer GPU."""
    arch = _host_arch()
    return arch is not None and arch >= int(major) * 10 + int(minor)


def is_hip():
    """False: warpweave compiles for NVIDIA GPUs only."""
    return False


def is_hip_cdna3():
    return False


def is_hip_cdna4():
    return False


def is_hip_gfx1250():
    return False
