"""Batched tl.dot (3-D and 4-D operands, as Triton's test_dot3d writes them) on the GPU targets:
each is split into one 2-D dot per batch element (transforms/DecomposeBatchedDots.cpp) that the
targets' MMA lowerings take, where it used to stop with "not supported by the GPU backends yet".
The split's arithmetic is checked in the interpreter by tests/cpp/interp_test.cpp (BatchedDots);
here: the PTX for sm_80, sm_90a and sm_100a, assembled by ptxas, and the interpreter's batched dot
against NumPy. tests/gpu/test_batched_dot_gpu.py runs them on the GPU."""
import importlib
import re
from pathlib import Path

import numpy as np
import pytest

import batched_dot_kernels as bk

native_loader = importlib.import_module("warpweave._native_loader")
pytestmark = pytest.mark.skipif(not native_loader.available(),
                                reason="warpweave._native is not built (pip install .)")

PTRS = "a_ptr:*fp16:16,b_ptr:*fp16:16,c_ptr:*fp32:16,out_ptr:*fp32:16,"
CASES = {
    "b4_16x16x16": ("batched_dot", PTRS + "B=4,M=16,N=16,K=16,WITH_ACC=0", 4),
    "b2_64x32x32_acc": ("batched_dot", PTRS + "B=2,M=64,N=32,K=32,WITH_ACC=1", 2),
    "4d_2x2_32x32x16": ("batched_dot_4d",
                        "a_ptr:*fp16:16,b_ptr:*fp16:16,out_ptr:*fp32:16,B0=2,B1=2,M=32,N=32,K=16", 4),
}
# The MMA instruction each target's 2-D dots use.
MMA = {"sm_80": r"mma\.sync\.aligned", "sm_90a": r"(wgmma\.mma_async|mma\.sync\.aligned)",
       "sm_100a": r"(tcgen05\.mma|mma\.sync\.aligned)"}


def compile_case(case, target, num_warps=4):
    kernel, sig, _ = CASES[case]
    path = Path(bk.__file__)
    return native_loader.native().compile([(str(path), path.read_text())], kernel, sig, {},
                                          target=target, num_warps=num_warps, stage="ptx")


@pytest.mark.parametrize("target", ["sm_80", "sm_90a", "sm_100a"])
@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("num_warps", [1, 4])
def test_batched_dot_compiles_for_each_target(ptxas, target, case, num_warps):
    ptx = compile_case(case, target, num_warps).ptx
    assert re.search(MMA[target], ptx), ptx[-2000:]
    ptxas(ptx, arch=target)


def test_each_batch_element_is_a_two_d_dot():
    # The Tile IR the GPU path compiles holds one 2-D dot per batch element.
    ir = compile_case("4d_2x2_32x32x16", "sm_90a").tile_ir
    dots = re.findall(r"= dot .*: tensor<([0-9x]+)xfp32>", ir)
    assert dots == ["32x32"] * 4, ir


@pytest.fixture
def interpret(monkeypatch):
    monkeypatch.setenv("WARPWEAVE_INTERPRET", "1")


@pytest.mark.parametrize("with_acc", [False, True])
def test_interpreter_batched_dot_matches_numpy(interpret, with_acc):
    rng = np.random.default_rng(3)
    B, M, N, K = 4, 16, 32, 16
    a = rng.integers(-3, 4, (B, M, K)).astype(np.float16)
    b = rng.integers(-3, 4, (B, K, N)).astype(np.float16)
    c = rng.integers(-3, 4, (B, M, N)).astype(np.float32)
    out = np.full((B, M, N), np.nan, np.float32)
    bk.batched_dot[(1,)](a, b, c, out, B=B, M=M, N=N, K=K, WITH_ACC=with_acc)
    ref = np.matmul(a.astype(np.float64), b.astype(np.float64)) + (c if with_acc else 0)
    np.testing.assert_array_equal(out, ref)
