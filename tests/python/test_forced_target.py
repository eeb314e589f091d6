"""WARPWEAVE_TARGET=sm_80 on a machine whose GPU would pick sm_90a: the forced target reaches the
compile (sm_80 PTX: mma.sync, no wgmma), the memory and disk cache keys, and gives PTX that
ptxas assembles for the Hopper device too (what the driver's JIT does when the runtime loads an
sm_80 kernel on an H200). No GPU needed; ptxas is."""

import importlib
import os
import subprocess

import numpy as np
import pytest

import warpweave as ww
import warpweave.language as tl

pytest.importorskip("warpweave._native")
jitmod = importlib.import_module("warpweave.jit")
cache = importlib.import_module("warpweave.cache")


pytestmark = pytest.mark.usefixtures("requires_ptxas")  # the compiles run it (conftest.py)


@ww.jit
def dot_kernel(a_ptr, b_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    rm, rn, rk = tl.arange(0, M), tl.arange(0, N), tl.arange(0, K)
    a = tl.load(a_ptr + rm[:, None] * K + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * N + rn[None, :])
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], tl.dot(a, b))


def _values(dtype):
    a = np.zeros((64, 32), dtype)
    b = np.zeros((32, 64), dtype)
    c = np.zeros((64, 64), np.float32)
    return dot_kernel.bind((a, b, c), {"M": 64, "N": 64, "K": 32})


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("WARPWEAVE_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("WARPWEAVE_CACHE_DISABLE", raising=False)
    monkeypatch.delenv("WARPWEAVE_TRAP_HANGS", raising=False)
    dot_kernel.cache.clear()
    yield tmp_path
    dot_kernel.cache.clear()


def test_forced_sm80_reaches_the_ptx_and_the_cache_keys(cache_dir, monkeypatch):
    values = _values(np.float16)
    monkeypatch.setenv("WARPWEAVE_TARGET", "sm_90a")
    hopper = dot_kernel.compile_for(values, False, (4, 3, 1))
    monkeypatch.setenv("WARPWEAVE_TARGET", "sm_80")
    ampere = dot_kernel.compile_for(values, False, (4, 3, 1))
    assert ampere is not hopper and dot_kernel.compile_count == 2
    assert hopper.kernel.target == "sm_90a" and ampere.kernel.target == "sm_80"
    assert ".target sm_90a" in hopper.kernel.ptx and "wgmma.mma_async" in hopper.kernel.ptx
    ptx = ampere.kernel.ptx
    assert ".target sm_80" in ptx
    assert "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" in ptx
    assert "wgmma" not in ptx and "cp.async.bulk" not in ptx and "mbarrier" not in ptx
    assert len(ampere.kernel.cubin) > 0
    # The memory cache keeps both; the disk cache serves each target its own kernel.
    assert dot_kernel.compile_for(values, False, (4, 3, 1)) is ampere
    dot_kernel.cache.clear()
    again = dot_kernel.compile_for(values, False, (4, 3, 1))
    assert dot_kernel.compile_count == 2 and again.kernel.target == "sm_80"
    assert again.kernel.ptx == ptx
    monkeypatch.setenv("WARPWEAVE_TARGET", "sm_90a")
    assert dot_kernel.compile_for(values, False, (4, 3, 1)).kernel.target == "sm_90a"
    assert dot_kernel.compile_count == 2
    assert len(list(cache_dir.rglob("*.wwk"))) == 2


@pytest.mark.parametrize("dtype,instruction", [
    (np.float16, "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"),
    (np.float32, "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32"),
])
def test_sm80_ptx_assembles_for_the_hopper_device(cache_dir, monkeypatch, ptxas, dtype,
                                                  instruction):
    """The runtime hands sm_80 PTX to the driver's JIT on an sm_90 device; ptxas for sm_90 is
    the same compiler: it must accept the sm_80 PTX and keep the tensor-core MMAs (HMMA)."""
    monkeypatch.setenv("WARPWEAVE_TARGET", "sm_80")
    ptx = dot_kernel.compile_for(_values(dtype), False, (4, 3, 1)).kernel.ptx
    assert instruction in ptx
    out = ptxas(ptx, "sm_90").output
    cuobjdump = os.path.join(os.path.dirname(ptxas.path), "cuobjdump")
    if os.path.exists(cuobjdump):
        sass = subprocess.run([cuobjdump, "--dump-sass", out], capture_output=True,
                              text=True, timeout=120).stdout
        assert "HMMA" in sass and "HGMMA" not in sass


def test_fp8_dot_for_sm80_is_a_located_error(cache_dir, monkeypatch):
    monkeypatch.setenv("WARPWEAVE_TARGET", "sm_80")
    values = _values(np.float16)
    key_part, kinds = dot_kernel.specialization(values)
    signature = dot_kernel.signature_string(values, kinds, key_part)
    fp8 = signature.replace("*fp16", "*fp8e4nv")
    assert fp8 != signature
    env = dot_kernel.environment()
    with pytest.raises(ww.CompilationError, match=r"sm_80") as e:
        jitmod.native().compile(files=env.files, kernel="dot_kernel", signature=fp8,
                                globals=env.globals, target="sm_80", stage="ptx")
    assert "test_forced_target.py:" in str(e.value)


def _kernel_library_sm80_cases():
    from test_kernels_interp import GPU_CALLS, HOPPER_ONLY

    return [name for name in GPU_CALLS if name not in HOPPER_ONLY]


@pytest.mark.parametrize("name", _kernel_library_sm80_cases())
def test_kernel_library_sm80_ptx_assembles_for_the_hopper_device(gpu_compiles, ptxas, name):
    """Each warpweave.ops wrapper's GPU configuration, compiled for sm_80, is PTX the H200's
    driver JIT accepts (ptxas for sm_90 as a stand-in for it)."""
    from test_kernels_interp import GPU_CALLS

    gpu_compiles.target = "sm_80"
    gpu_compiles.kernels = []
    GPU_CALLS[name]()
    assert gpu_compiles.kernels, "the wrapper launched nothing"
    for compiled in gpu_compiles.kernels:
        ptx = compiled.kernel.ptx
        assert ".target sm_80" in ptx and "wgmma" not in ptx
        r = ptxas(ptx, "sm_90", check=False)
        assert r.returncode == 0, f"{compiled.fn.__name__}: {r.log}"
