"""tlx.vote_ballot_sync over a tensor predicate (issue 19: the RESCALE_OPT paths of TLX's
Blackwell attention tutorials), with TLX's rule: each thread votes with the OR of the elements of
pred it holds and every one of them gets its warp's ballot (bit l: lane l voted true). The
interpreter deals the elements to threads as the compiler lays pred out (here a tensor-memory
load: row r in thread r); the PTX votes once per thread (vote.sync.ballot.b32 after or.pred of a
thread's elements), and ptxas assembles it."""
import importlib
import re
from pathlib import Path

import numpy as np
import pytest

import tlx_vote_kernels as vk

native_loader = importlib.import_module("warpweave._native_loader")
pytestmark = pytest.mark.skipif(not native_loader.available(),
                                reason="warpweave._native is not built (pip install .)")

KERNELS = Path(vk.__file__)


def compile_here(kernel, signature):
    result = native_loader.native().compile([(str(KERNELS), KERNELS.read_text())], kernel,
                                            signature, {}, target="sm_100a", num_warps=4,
                                            stage="ptx")
    return result if isinstance(result, str) else getattr(result, "ptx", None) or result["ptx"]


@pytest.fixture
def interpret(monkeypatch):
    monkeypatch.setenv("WARPWEAVE_INTERPRET", "1")


def warp_ballots(votes):
    # votes[t]: thread t's vote (128 threads, 4 warps) -> each thread's warp's ballot.
    out = np.zeros(128, np.int64)
    for w in range(4):
        bits = sum(int(votes[32 * w + l]) << l for l in range(32))
        out[32 * w:32 * w + 32] = bits
    return out.astype(np.uint32).view(np.int32)


@pytest.mark.parametrize("cols", [1, 2])
def test_tensor_vote_gives_each_element_its_warps_ballot(interpret, cols):
    rng = np.random.default_rng(cols)
    x = rng.random((128, cols)).astype(np.float32)
    x[32:64] = 1.0  # warp 1: nobody votes
    x[64:96, 0] = 0.0  # warp 2: everyone votes
    ballot = np.zeros((128, cols), np.int32)
    vk.tmem_vote[(1,)](x, ballot, COLS=cols)
    want = warp_ballots((x < 0.5).any(axis=1))  # thread r holds row r: it votes with its OR
    np.testing.assert_array_equal(ballot, np.repeat(want[:, None], cols, axis=1))
    assert (ballot[32:64] == 0).all() and (ballot[64:96] == -1).all()


@pytest.mark.parametrize("below", [None, 0, 77, 127])
def test_rescale_decision_of_the_attention_tutorials(interpret, below):
    x = np.ones(128, np.float32)
    if below is not None:
        x[below] = 0.25
    flag = np.full(1, -1, np.int32)
    vk.tmem_vote_any[(1,)](x, flag)
    assert flag[0] == (below is not None)


@pytest.mark.parametrize("cols", [1, 2])
def test_tensor_vote_ptx(ptxas, cols):
    ptx = compile_here("tmem_vote", f"x_ptr:*fp32:16,ballot_ptr:*i32:16,COLS={cols}")
    # One vote per thread over its elements (or.pred joins a thread's two), all lanes.
    assert len(re.findall(r"vote\.sync\.ballot\.b32 %r\d+, %p\d+, (%r\d+|-1);", ptx)) == 1
    assert len(re.findall(r"or\.pred", ptx)) == cols - 1
    ptxas(ptx, arch="sm_100a")


def test_rescale_decision_ptx(ptxas):
    ptx = compile_here("tmem_vote_any", "x_ptr:*fp32:16,flag_ptr:*i32")
    assert "vote.sync.ballot.b32" in ptx
    ptxas(ptx, arch="sm_100a")
