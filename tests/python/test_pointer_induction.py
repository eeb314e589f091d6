"""Pointer inductions strength-reduced (transforms/PointerInduction.cpp): loops that advance
pointer tensors by a scalar carry a 64-bit offset instead, and give the same results in the
interpreter: run-time strides, unrolled bodies (two advances per iteration), no iterations, a
pointer read after the loop, and a pointer advanced per element (left as it was)."""

import importlib

import numpy as np
import pytest

import warpweave as ww
import warpweave.language as tl

native_loader = importlib.import_module("warpweave._native_loader")
pytestmark = pytest.mark.skipif(not native_loader.available(),
                                reason="warpweave._native is not built (pip install .)")


@ww.jit
def walk_rows(x_ptr, out_ptr, tail_ptr, n_rows, stride, BLOCK: tl.constexpr,
              UNROLL: tl.constexpr):
    """out = the sum of x's first n_rows rows (row pitch `stride`), read through a pointer
    tensor advanced by one row per iteration; tail = the row the pointer stops at (n_rows), read
    through the pointer left after the loop; x's column j also walks down by j + 1 per row."""
    cols = tl.arange(0, BLOCK)
    p = x_ptr + cols
    diag = x_ptr + cols
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    skew = tl.zeros([BLOCK], dtype=tl.float32)
    for _ in tl.range(0, n_rows, loop_unroll_factor=UNROLL):
        acc += tl.load(p)
        skew += tl.load(diag)
        p += stride
        diag += cols + 1
    tl.store(out_ptr + cols, acc)
    tl.store(out_ptr + BLOCK + cols, skew)
    tl.store(tail_ptr + cols, tl.load(p))


@pytest.mark.parametrize("unroll", [1, 2])
@pytest.mark.parametrize("n_rows", [0, 1, 5, 8])
def test_results_match_numpy(n_rows, unroll):
    block, stride = 16, 24
    x = np.arange(40 * stride, dtype=np.float32) % 97
    out = np.zeros(2 * block, np.float32)
    tail = np.zeros(block, np.float32)
    walk_rows[(1,)](x, out, tail, n_rows, stride, BLOCK=block, UNROLL=unroll)
    rows = x.reshape(-1, stride)[:, :block]
    np.testing.assert_array_equal(out[:block], rows[:n_rows].sum(0))
    cols = np.arange(block)
    skew = sum(x[cols + r * (cols + 1)] for r in range(n_rows)) if n_rows else np.zeros(block)
    np.testing.assert_array_equal(out[block:], skew)
    np.testing.assert_array_equal(tail, rows[n_rows])


def test_tile_ir_carries_an_offset_for_the_uniform_advance_only():
    x = np.zeros(40 * 24, np.float32)
    values = walk_rows.bind((x, x, x, 5, 24), {"BLOCK": 16, "UNROLL": 1})
    ir = walk_rows.compile_for(values, False, walk_rows._options(4, 3, None, None),
                               target="sm_90a").asm["ttir"]
    loop = ir.split(" = for ", 1)[1]
    header = loop.split("{ ^(", 1)[1].split(")", 1)[0]
    # p became an i64 offset; diag (advanced by a different amount per column) is still carried.
    assert "p_off: i64" in header, header
    assert "diag: tensor<16xptr<fp32>>" in header, header
