"""tl.multiple_of / tl.max_contiguous describe the value they are given, as Triton's hints
annotate that value's defining op: a hint called as a statement, its result discarded, still lets
every use of the value vectorize (Triton's test_vectorization_hints). Checked in the sm_90a /
sm_80 PTX (ptxas assembles it) and by the interpreter's results."""

import numpy as np
import pytest

import warpweave as ww
import warpweave.language as tl

pytest.importorskip("warpweave._native")


@ww.jit
def shifted_copy(dst, src, off, N, BLOCK: tl.constexpr, HINT: tl.constexpr,
                 ASSIGN: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    offsets = offsets + tl.load(off)  # nothing is known of a loaded offset
    if HINT:
        if ASSIGN:
            offsets = tl.max_contiguous(tl.multiple_of(offsets, BLOCK), BLOCK)
        else:
            tl.max_contiguous(tl.multiple_of(offsets, BLOCK), BLOCK)  # result discarded
    x = tl.load(src + offsets, mask=offsets < N)
    tl.store(dst + offsets, x + 1.0, mask=offsets < N)


@ww.jit
def hint_in_helper(dst, src, off, BLOCK: tl.constexpr, HINT: tl.constexpr):
    offsets = tl.arange(0, BLOCK) + tl.load(off)
    if HINT:
        annotate(offsets, BLOCK)
    tl.store(dst + offsets, tl.load(src + offsets) * 2.0)


@ww.jit
def annotate(x, BLOCK: tl.constexpr):
    tl.multiple_of(x, BLOCK)
    tl.max_contiguous(x, BLOCK)


def ptx_of(kernel, args, consts, target):
    values = kernel.bind(args, consts)
    return kernel.compile_for(values, False, (4, 1, 1), target=target).kernel.ptx


ARGS = (np.zeros(1024, np.float32), np.zeros(1024, np.float32), np.zeros(1, np.int32), 1024)


@pytest.mark.parametrize("target", ["sm_90a", "sm_80"])
@pytest.mark.parametrize("assign", [False, True])
def test_hint_vectorizes_whether_or_not_its_result_is_kept(target, assign, ptxas):
    ptx = ptx_of(shifted_copy, ARGS, dict(BLOCK=1024, HINT=True, ASSIGN=assign), target)
    assert "ld.global.v4.b32" in ptx and "st.global.v4.b32" in ptx, ptx
    ptxas(ptx, target)


@pytest.mark.parametrize("target", ["sm_90a", "sm_80"])
def test_without_hints_a_loaded_offset_stays_scalar(target):
    ptx = ptx_of(shifted_copy, ARGS, dict(BLOCK=1024, HINT=False, ASSIGN=False), target)
    assert "ld.global.v4.b32" not in ptx and "ld.global.b32" in ptx


@pytest.mark.parametrize("hint", [False, True])
def test_hint_given_in_a_helper_annotates_the_callers_value(hint):
    ptx = ptx_of(hint_in_helper, (np.zeros(512, np.float32), np.zeros(512, np.float32),
                                  np.zeros(1, np.int32)), dict(BLOCK=512, HINT=hint), "sm_90a")
    assert ("ld.global.v4.b32" in ptx and "st.global.v4.b32" in ptx) == hint, ptx


@pytest.mark.parametrize("assign", [False, True])
def test_hinted_copy_runs_in_the_interpreter(assign):
    src = np.arange(1024, dtype=np.float32)
    dst = np.zeros(1024, np.float32)
    shifted_copy[(1,)](dst, src, np.zeros(1, np.int32), 1024, BLOCK=1024, HINT=True,
                       ASSIGN=assign)
    np.testing.assert_array_equal(dst, src + 1)
