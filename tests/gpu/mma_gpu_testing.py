"""Fixtures and helpers of the tensor-core dot GPU tests (test_int8_dot_gpu.py,
test_f16_accumulate_dot_gpu.py, the fp8 ones): a logged random seed, the two targets (the GPU's
own and sm_80, which the driver JITs for a newer GPU), a launch that returns the PTX it ran, fp8
inputs and an fp32 torch reference without tf32."""

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


# Every pairing of Triton's two fp8 types a dot may take.
FP8_PAIRS = [("fp8e4nv", "fp8e4nv"), ("fp8e5", "fp8e5"), ("fp8e4nv", "fp8e5"), ("fp8e5", "fp8e4nv")]


def fp8_dtype(name):
    """The torch dtype of Triton's fp8 type `name` (fp8e4nv, fp8e5)."""
    import torch

    return {"fp8e4nv": torch.float8_e4m3fn, "fp8e5": torch.float8_e5m2}[name]


def fp8(shape, dtype, seed):
    """Normal random values rounded to fp8 type `dtype`, on the GPU, from generator seed `seed`."""
    import torch

    g = torch.Generator(device="cuda").manual_seed(seed)
    return torch.randn(shape, device="cuda", generator=g).to(fp8_dtype(dtype))


@pytest.fixture(autouse=True)
def exact_fp32_reference():
    """fp32 torch matmuls as references, not tf32 ones."""
    import torch

    saved = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32 = saved
