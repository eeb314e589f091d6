"""Helpers of the tensor-core dot tests (test_fp8_dot.py, test_fp8_promoted_pipeline.py,
test_int8_dot.py): compile a kernel for a target through ptxas, list the MMA instructions of its
PTX, and the fp8 type pairs they run."""

import re

# Every pairing of Triton's two fp8 types a dot may take, and their names in wgmma's opcodes.
FP8_PAIRS = [("fp8e4nv", "fp8e4nv"), ("fp8e5", "fp8e5"), ("fp8e4nv", "fp8e5"), ("fp8e5", "fp8e4nv")]
FP8_PTX_NAME = {"fp8e4nv": "e4m3", "fp8e5": "e5m2"}


def compiled(kernel, args, kwargs, target, num_warps=4, num_stages=1):
    """The kernel compiled for `target` (through ptxas: its cubin must exist)."""
    values = kernel.bind(args, kwargs)
    k = kernel.compile_for(values, False, (num_warps, num_stages, 1), target=target).kernel
    assert k.cubin, "ptxas rejected the kernel"
    return k


def mmas(ptx):
    """The distinct wgmma / mma.sync opcodes of `ptx`, sorted."""
    return sorted(set(re.findall(r"(wgmma\.mma_async\S+|mma\.sync\S+)", ptx)))
