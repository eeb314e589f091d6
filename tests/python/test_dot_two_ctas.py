"""tl.dot's two_ctas= and attrs= (Triton's Blackwell CTA-pair request and its automatic
warp-specialization attributes). With two_ctas=True each CTA still loads its full B tile and gets
the full product; Triton's compiler may split the MMA over a CTA pair, which changes nothing in
the result. warpweave computes the dot in each CTA, so the result must equal the plain dot's, in
the interpreter and in a cluster kernel compiled for sm_100a. attrs must be None."""
import importlib

import numpy as np
import pytest

import warpweave as ww
import warpweave.language as tl

native_loader = importlib.import_module("warpweave._native_loader")
pytestmark = pytest.mark.skipif(not native_loader.available(),
                                reason="warpweave._native is not built (pip install .)")


@ww.jit
def pair_dot_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr,
                    BK: tl.constexpr, PAIR: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        rk = k + tl.arange(0, BK)
        a = tl.load(a_ptr + rm[:, None] * K + rk[None, :],
                    mask=(rm[:, None] < M) & (rk[None, :] < K), other=0.0)
        b = tl.load(b_ptr + rk[:, None] * N + rn[None, :],
                    mask=(rk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc, two_ctas=PAIR, attrs=None)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc,
             mask=(rm[:, None] < M) & (rn[None, :] < N))


@ww.jit
def runtime_pair_kernel(a_ptr, c_ptr, flag):
    r = tl.arange(0, 16)
    a = tl.load(a_ptr + r[:, None] * 16 + r[None, :])
    tl.store(c_ptr + r[:, None] * 16 + r[None, :], tl.dot(a, a, two_ctas=flag > 0))


@ww.jit
def attrs_kernel(a_ptr, c_ptr):
    r = tl.arange(0, 16)
    a = tl.load(a_ptr + r[:, None] * 16 + r[None, :])
    tl.store(c_ptr + r[:, None] * 16 + r[None, :], tl.dot(a, a, attrs="stage"))


@pytest.mark.parametrize("pair", [False, True])
def test_two_ctas_dot_is_the_dot(pair):
    rng = np.random.default_rng(5)
    M, N, K = 72, 40, 48
    a = (rng.integers(-8, 9, (M, K)) / 8).astype(np.float16)
    b = (rng.integers(-8, 9, (K, N)) / 8).astype(np.float16)
    c = np.full((M, N), np.nan, np.float32)
    # Clusters of 2 along M, as Triton's two_ctas dot is launched (ctas_per_cga=(2, 1, 1)).
    pair_dot_kernel[(4, 2)](a, b, c, M, N, K, BM=32, BN=32, BK=16, PAIR=pair,
                            ctas_per_cga=(2, 1, 1))
    np.testing.assert_array_equal(c, a.astype(np.float64) @ b.astype(np.float64))


def test_two_ctas_dot_compiles_for_sm100a_clusters(requires_ptxas):
    from warpweave.backends.compiler import GPUTarget

    sig = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp32", "M": "i32", "N": "i32",
           "K": "i32"}
    src = ww.compiler.ASTSource(pair_dot_kernel, signature=sig,
                                constexprs={"BM": 128, "BN": 128, "BK": 64, "PAIR": True})
    k = ww.compiler.compile(src, target=GPUTarget("cuda", 100, 32),
                            options={"num_warps": 4, "ctas_per_cga": (2, 1, 1)})
    ptx = k.asm["ptx"]
    assert ".reqnctapercluster 2, 1, 1" in ptx and "mma" in ptx
    assert k.asm.get("cubin")


def test_two_ctas_must_be_a_compile_time_bool():
    a = np.zeros((16, 16), np.float16)
    c = np.zeros((16, 16), np.float32)
    with pytest.raises(ww.CompilationError) as e:
        runtime_pair_kernel[(1,)](a, c, 1)
    assert "two_ctas must be a compile-time constant" in str(e.value)
    assert "test_dot_two_ctas.py:40:" in str(e.value)


def test_attrs_other_than_none_are_refused():
    a = np.zeros((16, 16), np.float16)
    c = np.zeros((16, 16), np.float32)
    with pytest.raises(ww.CompilationError) as e:
        attrs_kernel[(1,)](a, c)
    assert "attrs" in str(e.value) and "must be None" in str(e.value)
