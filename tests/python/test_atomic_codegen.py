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
    tl.atomic_add(counter, 1)  # result unused: still an atom, with acq_rel (Triton's PTX)


@pytest.mark.parametrize("target", ["sm_90a", "sm_80"])
def test_unused_exchange_is_an_atom_and_assembles(target, tmp_path, monkeypatch, ptxas):
    monkeypatch.setenv("WARPWEAVE_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("WARPWEAVE_TARGET", target)
    values = _unused_results.bind((np.zeros(1, np.int32), np.zeros(1, np.int32),
                                   np.zeros(128, np.float32)), {"BLOCK": 128})
    ptx = _unused_results.compile_for(values, False, (4, 3, 1)).kernel.ptx
    assert ".exch.b32" in ptx
    # No red at all: a red has no acquire, which the default acq_rel asks for.
    assert not any(line.strip().lstrip("@%p0123456789 ").startswith("red")
                   for line in ptx.splitlines())
    assert "atom.global.gpu.acq_rel.add.u32" in ptx or "atom.global.gpu.acq_rel.add.s32" in ptx
    ptxas(ptx, "sm_90a" if target == "sm_90a" else "sm_80")


def test_unused_exchange_runs_in_the_interpreter():
    lock, counter, vals = np.ones(1, np.int32), np.zeros(1, np.int32), np.zeros(128, np.float32)
    _unused_results[(3, )](lock, counter, vals, BLOCK=128)
    assert lock[0] == 0 and counter[0] == 3
    np.testing.assert_array_equal(vals, np.arange(128, dtype=np.float32))


@ww.jit
def _small_tensor_results(index_ptr, out_ptr, SIZE: tl.constexpr, OP: tl.constexpr):
    # SIZE elements, fewer than the 128 threads: several threads hold each element (Triton's
    # test_tensor_atomic_use_result). Each element's atomic runs once; every holder reads its
    # result.
    rows = tl.arange(0, SIZE)[:, None]
    if OP == "add":
        old = tl.atomic_add(index_ptr + rows, rows, sem="relaxed")
    else:
        old = tl.atomic_cas(index_ptr + rows, tl.zeros((SIZE, 1), tl.int32), rows, sem="relaxed")
    tl.store(out_ptr + old * SIZE + tl.arange(0, SIZE)[None, :], 5)


@pytest.mark.parametrize("target", ["sm_90a", "sm_80"])
@pytest.mark.parametrize("size", [1, 2, 16, 64])
@pytest.mark.parametrize("num_warps", [1, 4])
@pytest.mark.parametrize("op", ["add", "cas"])
def test_atomic_result_shared_with_every_holder(target, size, num_warps, op, tmp_path, monkeypatch,
                                                ptxas):
    # Was refused ("held by more threads than elements"). The owner of each element runs the
    # atomic and writes its result to shared memory under the same predicate; after a barrier
    # every holder reads it back.
    monkeypatch.setenv("WARPWEAVE_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("WARPWEAVE_TARGET", target)
    values = _small_tensor_results.bind((np.zeros(size, np.int32), np.zeros(size * size, np.int32)),
                                        {"SIZE": size, "OP": op})
    # (A cas's compare and new values once kept layouts of their own, fewer registers than its
    # pointers' at 64 elements: the compile failed with an internal index error.)
    ptx = _small_tensor_results.compile_for(values, False, (num_warps, 3, 1)).kernel.ptx
    lines = [l.strip() for l in ptx.splitlines()]
    atom = [l for l in lines if "atom.global." in l and f".{op}." in l]
    assert atom, ptx
    if size >= num_warps * 32:
        # Every element has one holder: each runs its atomic, nothing is shared.
        assert not any(l.startswith("@%p") for l in atom), atom
    else:
        assert all(l.startswith("@%p") for l in atom), atom
        owner = atom[0].split()[0]
        # The owners' results (the atoms' destination registers) go to shared memory under the
        # same predicate, and every holder reads them back after a barrier.
        results = {l.split()[2].rstrip(",") for l in atom}
        shared_stores = [l for l in lines if "st.shared" in l and
                         l.rstrip(";").split(", ")[-1] in results]
        assert shared_stores and all(l.startswith(owner + " ") for l in shared_stores), \
            shared_stores
        tail = ptx[ptx.index(shared_stores[-1]):]
        assert tail.index("bar.sync") < tail.index("ld.shared")
    ptxas(ptx, target)


@pytest.mark.parametrize("size", [1, 2, 16, 64])
@pytest.mark.parametrize("op", ["add", "cas"])
def test_atomic_result_of_small_tensor_in_the_interpreter(size, op):
    index = np.arange(size, dtype=np.int32) if op == "add" else np.zeros(size, np.int32)
    out = np.zeros(size * size, np.int32)
    _small_tensor_results[(1, )](index, out, SIZE=size, OP=op)
    old = np.arange(size) if op == "add" else np.zeros(size, np.int64)
    expect = np.zeros((size, size), np.int32)
    expect[old] = 5
    np.testing.assert_array_equal(out.reshape(size, size), expect)
    np.testing.assert_array_equal(index, np.arange(size) * (2 if op == "add" else 1))


@ww.jit
def _float_min_max(x_ptr, vals_ptr, BLOCK: tl.constexpr, KIND: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    v = tl.load(vals_ptr + offs)
    if KIND == "max":
        tl.atomic_max(x_ptr + offs % 4, v)
    else:
        tl.atomic_min(x_ptr + offs % 4, v)


@pytest.mark.parametrize("target", ["sm_90a", "sm_80"])
@pytest.mark.parametrize("kind", ["max", "min"])
def test_float64_min_max_through_integer_atomics(target, kind, tmp_path, monkeypatch, ptxas):
    # As for float32: non-negative values by signed min / max of their bits, negative ones by
    # unsigned max / min (Triton's test_atomic_rmw covers float64 too).
    monkeypatch.setenv("WARPWEAVE_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("WARPWEAVE_TARGET", target)
    values = _float_min_max.bind((np.zeros(4, np.float64), np.zeros(128, np.float64)),
                                 {"BLOCK": 128, "KIND": kind})
    ptx = _float_min_max.compile_for(values, False, (4, 3, 1)).kernel.ptx
    signed, unsigned = ("max.s64", "min.u64") if kind == "max" else ("min.s64", "max.u64")
    # Triton's order of qualifiers for read-modify-writes: atom.global.<scope>.<sem>.<op>.<type>.
    assert f"atom.global.gpu.acq_rel.{signed} " in ptx, ptx
    assert f"atom.global.gpu.acq_rel.{unsigned} " in ptx, ptx
    ptxas(ptx, target)


@pytest.mark.parametrize("kind", ["max", "min"])
def test_float64_min_max_in_the_interpreter(kind):
    rng = np.random.default_rng(5)
    vals = rng.normal(size=128) * 1e3
    x = np.array([0.0, -1e300, 1e300, -0.5])
    expect = x.copy()
    for i, v in enumerate(vals):
        expect[i % 4] = max(expect[i % 4], v) if kind == "max" else min(expect[i % 4], v)
    _float_min_max[(1, )](x, vals, BLOCK=128, KIND=kind)
    np.testing.assert_array_equal(x, expect)


@ww.jit
def _rmw_and_cas(x_ptr, out_ptr, BLOCK: tl.constexpr, SEM: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    old = tl.atomic_add(x_ptr + offs, 1.0, sem=SEM)
    prev = tl.atomic_cas(out_ptr + offs, tl.zeros((BLOCK,), tl.int32),
                         tl.full((BLOCK,), 1, tl.int32), sem=SEM)
    tl.store(x_ptr + BLOCK + offs, old + prev.to(tl.float32))


@pytest.mark.parametrize("sem", [None, "acquire", "release", "acq_rel", "relaxed"])
def test_qualifier_orders_are_tritons(sem, tmp_path, monkeypatch, ptxas):
    # Triton's test_atomic_rmw looks for atom.global.gpu.<sem> (its read-modify-writes come
    # through LLVM) and its lock test for atom.global.<sem> (compare-and-swap, its own inline
    # PTX); ptxas takes either order.
    monkeypatch.setenv("WARPWEAVE_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("WARPWEAVE_TARGET", raising=False)
    values = _rmw_and_cas.bind((np.zeros(256, np.float32), np.zeros(128, np.int32)),
                               {"BLOCK": 128, "SEM": sem})
    ptx = _rmw_and_cas.compile_for(values, False, (4, 3, 1), target="sm_90a").kernel.ptx
    s = sem or "acq_rel"
    assert f"atom.global.gpu.{s}.add.f32" in ptx, ptx
    assert f"atom.global.{s}.gpu.cas.b32" in ptx, ptx
    ptxas(ptx, "sm_90a")
