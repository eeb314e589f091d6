"""List comprehensions in kernel code, as Triton's front end takes them: one `for` clause over
range() with compile-time arguments or over a tuple, evaluated at compile time into a tuple
(of tensors, numbers, ...) that run-time loops carry element by element. What Triton does not
accept (several `for` clauses, `if` filters, tuple targets, run-time bounds, tl.static_range,
generator expressions) is an error at its source location."""

import numpy as np
import pytest

import warpweave as ww
import warpweave.language as tl

pytest.importorskip("warpweave._native")


@ww.jit
def sum_parts(X, OUT, n, BLOCK: tl.constexpr, PARTS: tl.constexpr):
    # One running sum per part of the row, carried by a run-time loop as a tuple.
    accs = [tl.zeros([BLOCK], dtype=tl.float32) for _ in range(PARTS)]
    for i in range(n):
        xs = [tl.load(X + i * BLOCK * PARTS + p * BLOCK + tl.arange(0, BLOCK))
              for p in range(PARTS)]
        accs = [accs[p] + xs[p] * (p + 1) for p in range(PARTS)]
    # Over a tuple, and nested in the element.
    halves = [a * 0.5 for a in accs]
    grid = [[q * 10 + r for r in range(2)] for q in range(PARTS)]
    for p in tl.static_range(PARTS):
        tl.store(OUT + p * BLOCK + tl.arange(0, BLOCK), halves[p] + grid[p][1])


@pytest.mark.parametrize("parts", [1, 2, 3])
def test_comprehensions_carried_by_a_run_time_loop(parts):
    n, block = 5, 32
    rng = np.random.default_rng(parts)
    x = rng.standard_normal((n, parts, block)).astype(np.float32)
    out = np.zeros((parts, block), np.float32)
    sum_parts[(1,)](x, out, n, BLOCK=block, PARTS=parts)
    ref = x.sum(axis=0) * np.arange(1, parts + 1, dtype=np.float32)[:, None] * 0.5
    ref += (np.arange(parts) * 10 + 1)[:, None]
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)


@ww.jit
def ranges(OUT):
    # range() with start, end and a negative step; the target stays bound afterwards (Triton).
    vals = [j * 2 for j in range(7, 0, -3)]
    tl.static_assert(len(vals) == 3 and [j * 2 for j in range(7, 0, -3)][2] == 2)
    tl.static_assert(j == 1)
    empty = [q for q in range(3, 3)]
    tl.static_assert(len(empty) == 0)
    tl.store(OUT + tl.arange(0, 4), tl.full([4], vals[0] + vals[1] + vals[2] + len(vals), tl.int32))


def test_range_forms():
    out = np.zeros(4, np.int32)
    ranges[(1,)](out)
    np.testing.assert_array_equal(out, 27)


def _error(src, tmp_path):
    import importlib
    path = tmp_path / "k.py"
    text = ("import warpweave as ww\nimport warpweave.language as tl\n\n\n@ww.jit\n"
            "def k(X, n, N: tl.constexpr):\n" + src)
    path.write_text(text)
    native = importlib.import_module("warpweave._native_loader").native()
    with pytest.raises(Exception) as info:
        native.compile([(str(path), text)], "k", "X:*fp32,n:i32,N=4", {}, target="sm_90a",
                       stage="ptx")
    return str(info.value)


@pytest.mark.parametrize("src, where, message", [
    ("    y = [i for i in range(2) for j in range(2)]\n", "7:30", "takes a single 'for' clause"),
    ("    y = [i for i in range(N) if i > 1]\n", "7:30", "'if' filters in a list comprehension"),
    ("    y = [a for a, b in ((1, 2), (3, 4))]\n", "7:16", "must be a single name"),
    ("    y = [i for i in range(n)]\n", "7:27", "must be a compile-time constant"),
    ("    y = [i for i in tl.static_range(N)]\n", "7:21", "write range(...)"),
    ("    y = [i for i in N]\n", "7:21", "over a tuple, not 4"),
    ("    y = tl.sum(i for i in range(N))\n", "7:18", "generator expressions are not supported"),
])
def test_what_triton_does_not_accept_is_a_located_error(tmp_path, src, where, message):
    text = _error(src, tmp_path)
    assert f"k.py:{where}: error:" in text and message in text, text
