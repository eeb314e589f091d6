"""tl.range(..., loop_unroll_factor=U) unrolls run-time loops (transforms/LoopUnroll.cpp): the same
results as the plain loop in the interpreter for every trip count (none, fewer than U, whole groups
of U plus a remainder), with run-time bounds and steps, loop-carried scalars and tensors, a branch
and an inner loop in the body; the unrolled Tile IR and sm_90a / sm_80 PTX that ptxas accepts."""

import importlib

import numpy as np
import pytest

import warpweave as ww
import warpweave.language as tl

native_loader = importlib.import_module("warpweave._native_loader")
pytestmark = pytest.mark.skipif(not native_loader.available(),
                                reason="warpweave._native is not built (pip install .)")


@ww.jit
def strided_sums(x_ptr, out_ptr, lo, hi, step, BLOCK: tl.constexpr, UNROLL: tl.constexpr):
    """out[0:BLOCK] = sum over i in range(lo, hi, step) of x[i:i+BLOCK] * (i % 3 + 1), with a
    run-time branch and an inner loop in the body; out[BLOCK] = the iteration count, out[BLOCK+1]
    = the last i seen (or -1)."""
    lanes = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    count = 0
    last = -1
    for i in tl.range(lo, hi, step, loop_unroll_factor=UNROLL):
        x = tl.load(x_ptr + i + lanes)
        if i % 2 == 0:
            x = x * 1.0
        else:
            x = x * 1.0 + 0.0
        for j in range(0, i % 3):
            x = x + tl.load(x_ptr + i + lanes) * 1.0
        acc += x
        count += 1
        last = i
    tl.store(out_ptr + lanes, acc)
    tl.store(out_ptr + BLOCK, count.to(tl.float32))
    tl.store(out_ptr + BLOCK + 1, last.to(tl.float32))


def reference(x, lo, hi, step, block):
    acc = np.zeros(block, np.float64)
    count, last = 0, -1
    for i in range(lo, hi, step):
        acc += x[i:i + block].astype(np.float64) * (i % 3 + 1)
        count, last = count + 1, i
    return acc, count, last


@pytest.mark.parametrize("unroll", [2, 3, 4, 8])
@pytest.mark.parametrize("lo,hi,step", [
    (0, 0, 1), (5, 2, 1), (0, 1, 1), (0, 3, 1), (0, 4, 1), (0, 9, 1), (3, 40, 2), (1, 30, 7),
    (2, 17, 4), (0, 64, 1)])
def test_unrolled_loops_match_the_plain_loop(unroll, lo, hi, step):
    block = 16
    x = np.random.default_rng(lo * 1000 + hi * 10 + step).standard_normal(96).astype(np.float32)
    out = np.zeros(block + 2, np.float32)
    strided_sums[(1,)](x, out, lo, hi, step, BLOCK=block, UNROLL=unroll)
    acc, count, last = reference(x, lo, hi, step, block)
    np.testing.assert_allclose(out[:block], acc, rtol=1e-5, atol=1e-5)
    assert (out[block], out[block + 1]) == (count, last)


def compiled(unroll, target=None):
    """The kernel compiled (not run) for a 9-iteration loop: for the interpreter, or for target."""
    values = strided_sums.bind((np.zeros(96, np.float32), np.zeros(18, np.float32), 0, 9, 1),
                               dict(BLOCK=16, UNROLL=unroll))
    options = strided_sums._options(None, None, None, None)
    return strided_sums.compile_for(values, target is None, options, target=target)


def test_tile_ir_holds_the_copies_and_the_remainder_loop():
    plain, unrolled = compiled(1).asm["tile_ir"], compiled(4).asm["tile_ir"]
    # Without unrolling: the loop over i and its inner loop. With it: the unrolled loop with an
    # inner loop per copy (four), then the remainder loop with its own.
    assert plain.count(" = for ") == 2, plain
    assert unrolled.count(" = for ") == 1 + 4 + 1 + 1, unrolled
    assert unrolled.count(" = load ") == 5 * plain.count(" = load "), unrolled


@pytest.mark.parametrize("target", ["sm_90a", "sm_80"])
def test_unrolled_loops_compile_for_the_gpu(target, requires_ptxas):
    kernel = compiled(4, target)
    assert kernel.n_spills == 0
