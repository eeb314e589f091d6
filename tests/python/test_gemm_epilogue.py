"""The epilogue of cp.async + wgmma GEMMs on sm_90a (issues 16 and 18): the tl.dot K loop
(gemm_epilogue_kernels.dot_gemm, Triton's tutorial 03 shape) and its TLX form
(hopper_gemm_kernels.pipelined_gemm, TLX's hopper_gemm_pipelined shape) at the configurations
those tutorials run. C leaves the wgmma accumulator's layout for the coalesced store through
shared memory: written with stmatrix, 16 bytes a matrix row (was 4-byte st.shared, four times
the instructions and their swizzled addresses), read back 16 bytes a thread; and the loop's exit
drain (cp.async.wait_group 0, proxy fence, barrier) is the only fence and barrier before those
writes (was a second fence and two more barriers). The words read back go to st.global as they
are (were unpacked into halves and packed again). The interpreter runs the kernels exactly."""

import importlib
import re
from pathlib import Path

import numpy as np
import pytest

import gemm_epilogue_kernels as ek
import hopper_gemm_kernels as hk

native_loader = importlib.import_module("warpweave._native_loader")
pytestmark = pytest.mark.skipif(not native_loader.available(),
                                reason="warpweave._native is not built (pip install .)")


@pytest.fixture(autouse=True)
def no_disk_cache(monkeypatch):
    monkeypatch.setenv("WARPWEAVE_CACHE_DISABLE", "1")


POINTERS = ("a_ptr:*fp16:16,b_ptr:*fp16:16,c_ptr:*fp16:16,M:i32:16,N:i32:16,K:i32:16,"
            "stride_am:i32:16,stride_ak:i32:1,stride_bk:i32:16,stride_bn:i32:1,"
            "stride_cm:i32:16,stride_cn:i32:1")

# name: (kernel file, kernel, constexprs, warps, stages)
CONFIGS = {
    "dot_128x256x64_w8_s3": (ek, "dot_gemm", "BLOCK_M=128,BLOCK_N=256,BLOCK_K=64,GROUP_M=8", 8, 3),
    "dot_128x128x64_w4_s4": (ek, "dot_gemm", "BLOCK_M=128,BLOCK_N=128,BLOCK_K=64,GROUP_M=8", 4, 4),
    "tlx_128x256x64_w8_s3": (hk, "pipelined_gemm", "BLOCK_M=128,BLOCK_N=256,BLOCK_K=64,NUM_STAGES=3",
                             8, 1),
}


def compile_config(name, stage):
    module, kernel, constexprs, warps, stages = CONFIGS[name]
    path = Path(module.__file__)
    return native_loader.native().compile([(str(path), path.read_text())], kernel,
                                          POINTERS + "," + constexprs, {}, target="sm_90a",
                                          num_warps=warps, num_stages=stages, stage=stage)


def epilogue(ptx):
    """The PTX after the K loop's last wgmma retires."""
    return ptx.rsplit("wgmma.wait_group.sync.aligned 0;", 1)[1]


def tile_elements(name):
    m, n = (int(x) for x in re.search(r"BLOCK_M=(\d+),BLOCK_N=(\d+)", CONFIGS[name][2]).groups())
    return m * n


@pytest.mark.parametrize("name", list(CONFIGS))
def test_accumulator_goes_to_shared_memory_as_matrices(name, ptxas):
    ptx = compile_config(name, "ptx").ptx
    tail = epilogue(ptx)
    threads = 32 * CONFIGS[name][3]
    per_thread = tile_elements(name) // threads  # fp16 elements of C a thread holds
    # stmatrix.x4: four 8x8 matrices, a 32-bit pair of each per thread.
    assert tail.count("stmatrix.sync.aligned.m8n8.x4.shared.b16") == per_thread // 8, tail[:3000]
    assert "st.shared" not in tail
    # Read back 8 consecutive elements a thread, stored 16 bytes at a time.
    assert len(re.findall(r"ld\.shared\.v4\.b32", tail)) == per_thread // 8
    assert len(re.findall(r"st\.global(\.[a-z]+)*\.v4\.b32", tail)) == per_thread // 8
    # The words read back are the words stored: no unpacking into halves and packing again.
    loaded = set(re.findall(r"ld\.shared\.v4\.b32 \{([^}]*)\}", tail))
    stored = set(re.findall(r"st\.global(?:\.[a-z]+)*\.v4\.b32 \[[^]]*\], \{([^}]*)\}", tail))
    assert stored == loaded
    # Matrix rows: one base register (the thread's rows in the window), XORed with a group's
    # swizzle bits where it has any; every other part of the offset in the immediate.
    addresses = re.findall(r"stmatrix\.[a-z0-9.]+ \[(%r\d+)\+\d+\]", tail)
    assert len(addresses) == per_thread // 8
    xors = dict(re.findall(r"xor\.b32 (%r\d+), (%r\d+), \d+;", tail))
    assert len({xors.get(a, a) for a in addresses}) == 1
    run = ptxas(ptx, "sm_90a", verbose=True)
    assert run.spill_bytes == 0, run.log


@pytest.mark.parametrize("name", list(CONFIGS))
def test_one_fence_and_two_barriers_after_the_loop(name):
    tail = epilogue(compile_config(name, "ptx").ptx)
    # Two barriers: one before the scratch writes, one between them and the reads. In the
    # tl.dot loop the first is the exit drain's (cp.async.wait_group 0, proxy fence, barrier),
    # which already orders the operand buffers' last accesses before the scratch reuses them;
    # the TLX loop leaves copies in flight and its scratch lies past the buffers.
    assert tail.count("bar.sync") == 2
    assert not re.search(r"bar\.sync 0;\s*bar\.sync 0;", tail)
    first_barrier = tail.index("bar.sync")
    assert tail.index("stmatrix") > first_barrier
    assert tail.count("fence.proxy.async") == (1 if name.startswith("dot") else 0)
    assert tail.find("fence.proxy.async", first_barrier) == -1


@pytest.mark.parametrize("name", list(CONFIGS))
def test_epilogue_sass(name, sass, requires_ptxas):
    text = sass(compile_config(name, "cubin").cubin)
    tail = text.rsplit("WARPGROUP.DEPBAR.LE gsb0, 0x0", 1)[1]
    per_thread = tile_elements(name) // (32 * CONFIGS[name][3])
    assert len(re.findall(r"\bSTSM\.16\.M88\.4\b", tail)) == per_thread // 8
    assert not re.search(r"\bSTS(\.\d+)?\b", tail)
    assert len(re.findall(r"\bLDS\.128\b", tail)) == per_thread // 8
    assert len(re.findall(r"\bMEMBAR\b", tail)) == (1 if name.startswith("dot") else 0)


def exact_operands(rng, m, n, k):
    """fp16 operands of -1, 0, 1, so that every product and partial sum (K <= 2048) is exact in
    fp32 and C in fp16: any misplaced element shows as a mismatch."""
    a = rng.integers(-1, 2, (m, k)).astype(np.float16)
    b = rng.integers(-1, 2, (k, n)).astype(np.float16)
    return a, b, (a.astype(np.int64) @ b.astype(np.int64)).astype(np.float16)


@pytest.mark.parametrize("mnk", [(200, 136, 328), (64, 96, 40)])
def test_dot_gemm_in_the_interpreter(mnk):
    m, n, k = mnk
    a, b, want = exact_operands(np.random.default_rng(16), m, n, k)
    c = np.full((m, n), np.nan, np.float16)
    bm, bn, bk = 64, 64, 32
    grid = (-(-m // bm) * -(-n // bn),)
    ek.dot_gemm[grid](a, b, c, m, n, k, k, 1, n, 1, n, 1, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk,
                      GROUP_M=8, num_warps=4, num_stages=3)
    np.testing.assert_array_equal(c, want)
