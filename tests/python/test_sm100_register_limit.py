"""sm_100a kernels without register budgets of their own declare the most registers a thread of
their block may have (.maxnreg): left to itself, ptxas 13 for sm_100a capped some kernels (TLX's
Blackwell pipelined GEMM at 168 registers, tl.dot kernels of its grouped GEMM at 32) and spilled
for it. sm_90a's ptxas takes what a kernel needs unasked, so its PTX says nothing."""
import re

import numpy as np
import pytest

import warpweave as ww
import warpweave.language as tl

pytest.importorskip("warpweave._native")


@ww.jit
def dot_loop(a_ptr, b_ptr, c_ptr, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros([BM, BN], dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :])
        b = tl.load(b_ptr + (k + rk)[:, None] * BN + rn[None, :])
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + rm[:, None] * BN + rn[None, :], acc)


def compile_dot_loop(target, warps):
    a = np.zeros((128, 256), np.float16)
    b = np.zeros((256, 128), np.float16)
    c = np.zeros((128, 128), np.float32)
    values = dot_loop.bind((a, b, c, 256), dict(BM=128, BN=128, BK=64))
    return dot_loop.compile_for(values, False, (warps, 3, 1), target=target)


def maxnreg(ptx):
    found = re.findall(r"^\.maxnreg (\d+)$", ptx, re.M)
    return int(found[0]) if found else None


@pytest.fixture(autouse=True)
def no_disk_cache(monkeypatch):
    monkeypatch.setenv("WARPWEAVE_CACHE_DISABLE", "1")


@pytest.mark.parametrize("warps,limit", [(4, 255), (8, 255), (16, 128)])
def test_sm100a_kernel_declares_the_registers_its_block_leaves(requires_ptxas, warps, limit):
    kernel = compile_dot_loop("sm_100a", warps).kernel
    assert maxnreg(kernel.ptx) == limit


def test_sm90a_kernel_leaves_registers_to_ptxas(requires_ptxas):
    assert maxnreg(compile_dot_loop("sm_90a", 4).kernel.ptx) is None

