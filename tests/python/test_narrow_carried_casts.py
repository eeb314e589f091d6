"""A value a loop carries in fp32 and only ever casts to fp16 (P in TLX's pipelined attention
loops: made at the end of one iteration, cast for the P x V dot at the top of the next) is
carried as fp16 (src/transforms/NarrowCarriedCasts.cpp): the Tile IR's loop carries the cast
value, results are those of the source's casts, and the PTX compiles."""

import importlib
import re

import numpy as np
import pytest

import warpweave as ww
import warpweave.language as tl
from mma_testing import compiled

native_loader = importlib.import_module("warpweave._native_loader")
pytestmark = pytest.mark.skipif(not native_loader.available(),
                                reason="needs warpweave's C++ extension (the interpreter)")


@ww.jit
def carried_p_kernel(x_ptr, v_ptr, out_ptr, n_blocks, BM: tl.constexpr, BN: tl.constexpr,
                     D: tl.constexpr, WIDE_AFTER: tl.constexpr = False):
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    rd = tl.arange(0, D)
    p = tl.math.exp2(tl.load(x_ptr + rm[:, None] * BN + rn[None, :]))
    acc = tl.zeros((BM, D), dtype=tl.float32)
    for i in range(1, n_blocks):
        v = tl.load(v_ptr + (i - 1) * BN * D + rn[:, None] * D + rd[None, :])
        acc = tl.dot(p.to(tl.float16), v, acc)
        p = tl.math.exp2(tl.load(x_ptr + i * BM * BN + rm[:, None] * BN + rn[None, :]))
    v = tl.load(v_ptr + (n_blocks - 1) * BN * D + rn[:, None] * D + rd[None, :])
    if WIDE_AFTER:
        # The last P read in fp32 after the loop: the loop must keep carrying fp32.
        acc += tl.sum(p, 1)[:, None]
    acc = tl.dot(p.to(tl.float16), v, acc)
    tl.store(out_ptr + rm[:, None] * D + rd[None, :], acc)


def args(rng, n_blocks, BM=64, BN=32, D=64):
    x = rng.standard_normal((n_blocks, BM, BN)).astype(np.float32)
    v = rng.standard_normal((n_blocks, BN, D)).astype(np.float16)
    return x, v, np.zeros((BM, D), np.float32), n_blocks


def reference(x, v, wide_after=False):
    acc = np.zeros((x.shape[1], v.shape[2]), np.float64)
    p = np.exp2(x).astype(np.float32)
    for i in range(x.shape[0]):
        if wide_after and i == x.shape[0] - 1:
            acc += p[i].astype(np.float64).sum(axis=1, keepdims=True)
        acc += p[i].astype(np.float16).astype(np.float64) @ v[i].astype(np.float64)
    return acc


def carried_types(tile_ir):
    """The types each for loop of the Tile IR carries (its header's type list)."""
    return re.findall(r"= for [^:]*: ([^{]*)\{", tile_ir)


@pytest.mark.parametrize("n_blocks", [1, 2, 5])
@pytest.mark.parametrize("wide_after", [False, True])
def test_interpreter_results_are_the_source_casts(rng, n_blocks, wide_after):
    x, v, out, n = args(rng, n_blocks)
    carried_p_kernel[(1,)](x, v, out, n, BM=64, BN=32, D=64, WIDE_AFTER=wide_after)
    # The interpreter's exp2 (the GPU's ex2.approx) and NumPy's differ in the last bits, which
    # can move a P element's fp16 rounding by one step (2^-6 at P = 16): 0.023 at most over 600
    # seeded runs. A P from the wrong iteration would be off by O(1).
    np.testing.assert_allclose(out, reference(x, v, wide_after), rtol=1e-3, atol=0.06)


@pytest.mark.parametrize("target", ["sm_90a", "sm_80"])
def test_the_loop_carries_p_in_fp16(rng, target):
    k = compiled(carried_p_kernel, args(rng, 3), dict(BM=64, BN=32, D=64), target)
    (types,) = carried_types(k.tile_ir)
    assert "tensor<64x32xfp16>" in types and "tensor<64x32xfp32>" not in types, types


def test_a_wide_read_after_the_loop_keeps_fp32(rng):
    k = compiled(carried_p_kernel, args(rng, 3), dict(BM=64, BN=32, D=64, WIDE_AFTER=True),
                 "sm_90a")
    (types,) = carried_types(k.tile_ir)
    assert "tensor<64x32xfp32>" in types, types
