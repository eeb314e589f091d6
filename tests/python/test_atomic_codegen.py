"""Atomics as PTX: an atomic whose result is discarded becomes a `red` where PTX has one, and
stays an `atom` where it has none (exch; Triton's tutorial 05 backward swaps a lock with
atomic_xchg and ignores the old value). ptxas checks the PTX; no GPU needed."""

import numpy as np
import pytest

import warpweave as ww
import warpweave.language as tl

pytestmark = pytest.mark.usefixtures("requires_ptxas")  # the compiles run it (conftest.py)


@ww.jit
def _unused_results(lock, counter, vals, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.atomic_xchg(lock, 0)  # scalar, result unused
    tl.atomic_xchg(vals + offs, offs.to(tl.float32))  # tensor of floats, result unused
    tl.atomic_add(counter, 1)  # result unused: red.add


@pytest.mark.parametrize("target", ["sm_90a", "sm_80"])
def test_unused_exchange_is_an_atom_and_assembles(target, tmp_path, monkeypatch, ptxas):
    monkeypatch.setenv("WARPWEAVE_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("WARPWEAVE_TARGET", target)
    values = _unused_results.bind((np.zeros(1, np.int32), np.zeros(1, np.int32),
                                   np.zeros(128, np.float32)), {"BLOCK": 128})
    ptx = _unused_results.compile_for(values, False, (4, 3, 1)).kernel.ptx
    assert ".exch.b32" in ptx and "red.release.gpu.global.exch" not in ptx
    assert not any(line.strip().startswith("red") and "exch" in line for line in ptx.splitlines())
    assert any(line.strip().lstrip("@%p0123456789 ").startswith("red") and ".add." in line
               for line in ptx.splitlines())
    ptxas(ptx, "sm_90a" if target == "sm_90a" else "sm_80")


def test_unused_exchange_runs_in_the_interpreter():
    lock, counter, vals = np.ones(1, np.int32), np.zeros(1, np.int32), np.zeros(128, np.float32)
    _unused_results[(3, )](lock, counter, vals, BLOCK=128)
    assert lock[0] == 0 and counter[0] == 3
    np.testing.assert_array_equal(vals, np.arange(128, dtype=np.float32))
