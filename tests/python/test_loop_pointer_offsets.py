"""Loop pointer offsets (transforms/LoopPointerOffsets.cpp): cp.async address tensors a K loop
advances in place become entry pointers plus one carried byte offset, each copy's addresses one
64-bit add before it. The PTX of the tl.dot GEMM at tutorial 03's 128x256x64 configuration
carries no pointer tensor advanced in place, and its SASS loop computes addresses without
IMAD.WIDE (8 a step before, each waiting for the LDGSTS that read its register); the
interpreter runs the rewritten loops exactly, a pointer read after its loop included."""

import importlib
import re
from pathlib import Path

import numpy as np
import pytest

import gemm_epilogue_kernels as ek
import loop_pointer_kernels as lk

native_loader = importlib.import_module("warpweave._native_loader")
pytestmark = pytest.mark.skipif(not native_loader.available(),
                                reason="warpweave._native is not built (pip install .)")

POINTERS = ("a_ptr:*fp16:16,b_ptr:*fp16:16,c_ptr:*fp16:16,M:i32:16,N:i32:16,K:i32:16,"
            "stride_am:i32:16,stride_ak:i32:1,stride_bk:i32:16,stride_bn:i32:1,"
            "stride_cm:i32:16,stride_cn:i32:1")
CONFIGS = {"128x256x64_w8_s3": ("BLOCK_M=128,BLOCK_N=256,BLOCK_K=64,GROUP_M=8", 8, 3),
           "128x128x64_w4_s4": ("BLOCK_M=128,BLOCK_N=128,BLOCK_K=64,GROUP_M=8", 4, 4)}


@pytest.fixture(autouse=True)
def no_disk_cache(monkeypatch):
    monkeypatch.setenv("WARPWEAVE_CACHE_DISABLE", "1")


def compile_gemm(name, stage):
    constexprs, warps, stages = CONFIGS[name]
    path = Path(ek.__file__)
    return native_loader.native().compile([(str(path), path.read_text())], "dot_gemm",
                                          POINTERS + "," + constexprs, {}, target="sm_90a",
                                          num_warps=warps, num_stages=stages, stage=stage)


def k_loop(ptx):
    """The body of the loop that issues the cp.async copies."""
    for m in re.finditer(r"^(\$L_for_\d+):\n(.*?)^\$L_endfor_\d+:", ptx, re.M | re.S):
        if "cp.async.cg" in m.group(2):
            return m.group(2)
    raise AssertionError("no loop with cp.async copies")


@pytest.mark.parametrize("name", list(CONFIGS))
def test_k_loop_copies_read_entry_pointers_plus_one_offset(name):
    kernel = compile_gemm(name, "ptx")
    assert "ptr_offset" in kernel.tile_ir
    loop = k_loop(kernel.ptx)
    copies = re.findall(r"cp\.async\.cg\.shared\.global \[[^]]+\], \[(%rd\d+)\]", loop)
    assert len(copies) == (12 if name.startswith("128x256") else 16)
    in_place = set(re.findall(r"add\.s64 (%rd\d+), \1,", loop))
    offsets = in_place - set(copies)
    assert len(offsets) == 2, in_place  # A's and B's byte offsets: nothing else moves in place
    for reg in copies:
        # Each address: an entry pointer (never written in the loop) plus an offset.
        base, off = re.search(rf"add\.s64 {re.escape(reg)}, (%rd\d+), (%rd\d+);", loop).groups()
        assert off in offsets
        assert not re.search(rf"(?:add|mov|mad)\S* {re.escape(base)},", loop)


def test_k_loop_sass_has_no_wide_pointer_advances(sass, requires_ptxas):
    kernel = compile_gemm("128x256x64_w8_s3", "cubin")
    assert kernel.spill_bytes == 0
    text = sass(kernel.cubin)
    # The loop's copies: from its wgmma wait (one group left in flight) to its branch back.
    start = text.index("WARPGROUP.DEPBAR.LE gsb0, 0x1")
    loop = text[start:text.index("BRA", start)]
    assert loop.count("LDGSTS") == 12
    # One IMAD.WIDE at most (B's offset advance); each pointer advanced in place was one.
    assert len(re.findall(r"\bIMAD\.WIDE\b", loop)) <= 1, loop


@pytest.mark.parametrize("rows", [16, 40])
def test_pointer_read_after_its_loop_is_advanced_in_the_interpreter(rows):
    ROWS, COLS, stride = 8, 16, 24
    x = (np.arange(rows * stride) % 13).astype(np.float16).reshape(rows, stride)
    out = np.zeros((ROWS, COLS), np.float32)
    compiled = lk.strided_row_sum[(1,)](x, out, rows, stride, ROWS=ROWS, COLS=COLS)
    assert "ptr_offset" in compiled.asm["tile_ir"]
    blocks = x[:rows // ROWS * ROWS, :COLS].astype(np.float32).reshape(-1, ROWS, COLS)
    np.testing.assert_array_equal(out, blocks.sum(axis=0))
