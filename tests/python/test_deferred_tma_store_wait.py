"""A descriptor store inside an async task waits for the TMA to read its staged tile
(cp.async.bulk.wait_group.read) where the scratch region is next claimed, not at once: the read
overlaps the task's next iteration (a persistent GEMM's next tile). The wait still comes before
any write to the region, and before the task ends; outside tasks the store waits at once."""

import importlib
import re

import numpy as np
import pytest

import warpweave as ww

from deferred_store_kernels import scaled_tiles, summed_tiles

pytestmark = pytest.mark.usefixtures("requires_ptxas")

ROWS, COLS = 64, 64
WAIT = "cp.async.bulk.wait_group.read 0;"
COMMIT = "cp.async.bulk.commit_group;"


def compile_ptx(center, odd_only, n_tiles=8):
    x = np.zeros((n_tiles * ROWS + 1, COLS), np.float32)
    out = np.zeros((n_tiles * ROWS, COLS), np.float32)
    args = (x, ww.TensorDescriptor.from_tensor(out, [ROWS, COLS]), n_tiles)
    consts = dict(ROWS=ROWS, COLS=COLS, CENTER=center, ODD_ONLY=odd_only)
    values = scaled_tiles.bind(args, consts)
    return scaled_tiles.compile_for(values, False, (4, 1, 1), target="sm_90a").kernel.ptx


def instructions(ptx):
    """The PTX body's instructions and labels, without .loc lines and blank ones."""
    return [ln.strip() for ln in ptx.splitlines()
            if ln.strip() and not ln.strip().startswith((".loc", "//"))]


def consumer(lines):
    """The stores' task: the code between two task_end labels that issues the bulk copies."""
    ends = [i for i, ln in enumerate(lines) if ln.startswith("$L_task_end_")]
    for start, end in zip([0] + ends, ends):
        if any(ln.endswith(COMMIT) for ln in lines[start:end]):
            return lines[start:end]
    raise AssertionError("no task issues a bulk copy:\n" + "\n".join(lines))


def staging_writes(lines):
    return [i for i, ln in enumerate(lines)
            if re.search(r"\b(st\.shared|stmatrix)", ln)]


@pytest.mark.parametrize("center", [False, True], ids=["plain", "reduction_first"])
@pytest.mark.parametrize("odd_only", [False, True], ids=["every_tile", "under_a_branch"])
def test_the_wait_moves_to_the_regions_next_claim(center, odd_only, ptxas):
    ptx = compile_ptx(center, odd_only)
    task = consumer(instructions(ptx))
    commits = [i for i, ln in enumerate(task) if ln.endswith(COMMIT)]
    waits = [i for i, ln in enumerate(task) if ln.endswith(WAIT)]
    assert commits, "\n".join(task)
    # Not straight after the copy is issued ...
    for c in commits:
        assert not task[c + 1].endswith(WAIT), "\n".join(task[c - 3:c + 3])
    # ... but before the task ends (after the last copy) ...
    assert waits and waits[-1] > commits[-1], "\n".join(task[commits[-1]:])
    # ... and before the region's first write in the loop body, which a later iteration's
    # copy may still be reading: the loop's first write (the reduction's or the store's
    # staging) comes after a wait that follows the loop head, then a barrier of the task.
    head = next(i for i, ln in enumerate(task) if re.match(r"\$L_for_\d+:", ln))
    first_write = next(i for i in staging_writes(task) if i > head)
    drains = [w for w in waits if head < w < first_write]
    assert drains, "\n".join(task[head:first_write + 1])
    assert any(task[j].startswith("bar.sync") for j in range(drains[-1], first_write)), \
        "\n".join(task[drains[-1]:first_write + 1])
    log = ptxas(ptx, "sm_90a", verbose=True).log
    assert "C7514" not in log, log


def test_a_read_pending_at_an_inner_loop_that_claims_scratch_drains_once_before_it(ptxas):
    # The previous tile's read is drained before the inner loop (once a tile), not at the top
    # of every inner iteration; and not inside it, where a loop that runs no iteration would
    # leave the read pending for the store after it.
    x = np.zeros((4 * 3 * ROWS + 1, COLS), np.float32)
    out = np.zeros((4 * ROWS, COLS), np.float32)
    args = (x, ww.TensorDescriptor.from_tensor(out, [ROWS, COLS]), 4, 3)
    values = summed_tiles.bind(args, dict(ROWS=ROWS, COLS=COLS))
    ptx = summed_tiles.compile_for(values, False, (4, 1, 1), target="sm_90a").kernel.ptx
    task = consumer(instructions(ptx))
    heads = [i for i, ln in enumerate(task) if re.match(r"\$L_for_\d+:", ln)]
    assert len(heads) == 2, "\n".join(task)
    outer, inner = heads
    inner_end = next(i for i, ln in enumerate(task) if re.match(r"\$L_endfor_\d+:", ln))
    waits = [i for i, ln in enumerate(task) if ln.endswith(WAIT)]
    assert any(outer < w < inner for w in waits), "\n".join(task[outer:inner + 1])
    assert not any(inner < w < inner_end for w in waits), "\n".join(task[inner:inner_end + 1])
    log = ptxas(ptx, "sm_90a", verbose=True).log
    assert "C7514" not in log, log


def test_the_interpreter_sums_every_tile(rng):
    n_tiles, n_inner = 3, 2
    x = rng.standard_normal((n_tiles * n_inner * ROWS + 1, COLS)).astype(np.float32)
    out = np.full((n_tiles * ROWS, COLS), -7.0, np.float32)
    summed_tiles[(2,)](x, ww.TensorDescriptor.from_tensor(out, [ROWS, COLS]), n_tiles, n_inner,
                       ROWS=ROWS, COLS=COLS)  # NumPy arrays: the interpreter
    blocks = x[:-1].reshape(n_tiles, n_inner, ROWS, COLS)
    want = (blocks - blocks.max(axis=2, keepdims=True)).sum(axis=1).reshape(-1, COLS)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


def test_outside_tasks_the_store_waits_at_once(tmp_path):
    src = tmp_path / "plain_store.py"
    src.write_text(
        "import warpweave as ww\n"
        "import warpweave.language as tl\n"
        "\n"
        "\n"
        "@ww.jit\n"
        "def plain_store(x_ptr, out_desc, ROWS: tl.constexpr, COLS: tl.constexpr):\n"
        "    rows = tl.arange(0, ROWS)\n"
        "    x = tl.load(x_ptr + rows[:, None] * COLS + tl.arange(0, COLS)[None, :])\n"
        "    out_desc.store([0, 0], x * 2.0)\n")
    native_loader = importlib.import_module("warpweave._native_loader")
    k = native_loader.native().compile(
        [(str(src), src.read_text())], "plain_store",
        f"x_ptr:*fp32:16, out_desc:desc<fp32,{ROWS}x{COLS}>, ROWS={ROWS}, COLS={COLS}", {},
        target="sm_90a", num_warps=4, stage="ptx")
    lines = instructions(k.ptx)
    c = next(i for i, ln in enumerate(lines) if ln.endswith(COMMIT))
    assert lines[c + 1].endswith(WAIT), "\n".join(lines[c - 2:c + 3])


@pytest.mark.parametrize("center", [False, True])
@pytest.mark.parametrize("odd_only", [False, True])
def test_the_interpreter_stores_every_tile(center, odd_only, rng):
    n_tiles = 6
    x = rng.standard_normal((n_tiles * ROWS + 1, COLS)).astype(np.float32)
    out = np.full((n_tiles * ROWS, COLS), -7.0, np.float32)
    desc = ww.TensorDescriptor.from_tensor(out, [ROWS, COLS])
    scaled_tiles[(2,)](x, desc, n_tiles, ROWS=ROWS, COLS=COLS, CENTER=center,
                       ODD_ONLY=odd_only)  # NumPy arrays: the interpreter
    want = x[:-1] * 2.0
    if center:
        want = (want.reshape(n_tiles, ROWS, COLS)
                - want.reshape(n_tiles, ROWS, COLS).max(axis=1, keepdims=True)).reshape(-1, COLS)
    for t in range(n_tiles):
        rows = slice(t * ROWS, (t + 1) * ROWS)
        if odd_only and t % 2 == 0:
            assert (out[rows] == -7.0).all()
        else:
            np.testing.assert_array_equal(out[rows], want[rows])
