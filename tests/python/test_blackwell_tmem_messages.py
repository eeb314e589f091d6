"""How many registers one tcgen05.ld / st message moves (issue 19): as Triton sizes them
(TensorMemoryUtils.cpp's getVec), at most half of what a thread may hold where the message is
issued, and a quarter when a thread has all 256 and the access needs more than one message. A
message takes that many consecutive registers; with x128 messages ptxas capped a 4-warp kernel
reading a [128, 256] fp32 accumulator at 168 registers and spilled (TLX's pipelined GEMM at BN
256: 1,408 bytes) unless told .maxnreg. Checked in the PTX and with ptxas for sm_100a."""
import importlib
import re

import numpy as np
import pytest

import warpweave as ww
import warpweave.language as tl
import warpweave.language.extra.tlx as tlx

native_loader = importlib.import_module("warpweave._native_loader")
pytestmark = pytest.mark.skipif(not native_loader.available(),
                                reason="warpweave._native is not built (pip install .)")


@ww.jit
def accumulator_epilogue(x_ptr, out_ptr, BN: tl.constexpr):
    # A [128, BN] fp32 tile in tensor memory, filled 64 columns at a time, read back whole and
    # written out as fp16: the epilogue of a GEMM whose accumulator is BN columns wide.
    tile = tlx.local_view(tlx.local_alloc((128, BN), tl.float32, 1, tlx.storage_kind.tmem), 0)
    rows = tl.arange(0, 128)[:, None] * BN
    for i in tl.static_range(BN // 64):
        offs = rows + (i * 64 + tl.arange(0, 64))[None, :]
        tlx.local_store(tlx.local_slice(tile, [0, i * 64], [128, 64]), tl.load(x_ptr + offs))
    y = tlx.local_load(tile)
    tl.store(out_ptr + rows + tl.arange(0, BN)[None, :], y.to(tl.float16))


@ww.jit
def task_epilogue(x_ptr, out_ptr, BN: tl.constexpr, REGS: tl.constexpr):
    # The same read in an async task of REGS registers beside a 1-warp task of 24.
    tile = tlx.local_view(tlx.local_alloc((128, BN), tl.float32, 1, tlx.storage_kind.tmem), 0)
    with tlx.async_tasks():
        with tlx.async_task("default", registers=REGS):
            rows = tl.arange(0, 128)[:, None] * BN
            for i in tl.static_range(BN // 64):
                offs = rows + (i * 64 + tl.arange(0, 64))[None, :]
                tlx.local_store(tlx.local_slice(tile, [0, i * 64], [128, 64]),
                                tl.load(x_ptr + offs))
            y = tlx.local_load(tile)
            tl.store(out_ptr + rows + tl.arange(0, BN)[None, :], y.to(tl.float16))
        with tlx.async_task(num_warps=1, registers=24):
            pass


def messages(ptx):
    """Registers of each tcgen05.ld message, in order."""
    return [int(n) for n in re.findall(r"tcgen05\.ld\.sync\.aligned\.32x32b\.x(\d+)\.b32", ptx)]


def compile_ptx(kernel, BN, warps=4, **consts):
    x = np.zeros((128, BN), np.float32)
    out = np.zeros((128, BN), np.float16)
    values = kernel.bind((x, out), dict(BN=BN, **consts))
    return kernel.compile_for(values, False, (warps, 1, 1), target="sm_100a").kernel.ptx


@pytest.fixture(autouse=True)
def no_disk_cache(monkeypatch):
    monkeypatch.setenv("WARPWEAVE_CACHE_DISABLE", "1")


def test_whole_register_file_reads_of_256_registers_go_in_x64_messages(requires_ptxas, ptxas):
    ptx = compile_ptx(accumulator_epilogue, 256)
    assert messages(ptx) == [64, 64, 64, 64]
    # Without the .maxnreg warpweave adds (Triton's PTX has .reqntid only), ptxas neither caps
    # the kernel at 168 registers nor spills.
    run = ptxas(re.sub(r"^\.maxnreg \d+\n", "", ptx, flags=re.M), arch="sm_100a", verbose=True)
    assert run.spill_bytes == 0
    assert run.registers <= 168


def test_one_message_keeps_its_full_size(requires_ptxas, ptxas):
    # 128 registers a thread fit one message of half the 256: x128, as Triton issues it.
    ptx = compile_ptx(accumulator_epilogue, 128)
    assert messages(ptx) == [128]
    ptxas(ptx, arch="sm_100a")


@pytest.mark.parametrize("regs,size", [(256, 64), (152, 64), (112, 32)])
def test_messages_in_a_task_are_at_most_half_its_registers(requires_ptxas, ptxas, regs, size):
    # The task's budget caps its messages, and so does the kernel's .maxnreg (248 here: 65,536
    # over the 8 warps the tasks fill, rounded down), which ptxas checks tcgen05 messages
    # against even where setmaxnreg gives a task more.
    ptx = compile_ptx(task_epilogue, 256, REGS=regs)
    launch = int(re.search(r"^\.maxnreg (\d+)$", ptx, re.M).group(1))
    assert launch == 248
    assert messages(ptx) == [size] * (256 // size)
    assert size <= min(regs, launch) // 2
    ptxas(ptx, arch="sm_100a")
