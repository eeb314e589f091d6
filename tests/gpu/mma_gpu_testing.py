"""Fixtures and helpers of the tensor-core dot GPU tests (test_int8_dot_gpu.py,
test_f16_accumulate_dot_gpu.py): a logged random seed, the two targets (the GPU's own and
sm_80, which the driver JITs for a newer GPU) and a launch that returns the PTX it ran."""

import os

import pytest


@pytest.fixture(autouse=True)
def seeded():
    import torch

    seed = int.from_bytes(os.urandom(4), "little")
    print(f"random seed {seed}")
    torch.manual_seed(seed)


@pytest.fixture(params=["native", "sm_80"])
def target(request, monkeypatch):
    """The target kernels compile for: the GPU's own (sm_90a on Hopper), or sm_80."""
    monkeypatch.delenv("WARPWEAVE_INTERPRET", raising=False)
    if request.param == "sm_80":
        monkeypatch.setenv("WARPWEAVE_TARGET", "sm_80")
    else:
        monkeypatch.delenv("WARPWEAVE_TARGET", raising=False)
    return request.param


def launch(fn, grid, args, consts, warps, stages=3):
    """Runs fn[grid] and returns the PTX of the kernel it ran: compile_for with the same bound
    values, options and target (WARPWEAVE_TARGET, else the GPU's) finds that kernel."""
    import torch

    fn[grid](*args, **consts, num_warps=warps, num_stages=stages)
    torch.cuda.synchronize()
    compiled = fn.compile_for(fn.bind(args, consts), False, (warps, stages, 1))
    return compiled.kernel.ptx
