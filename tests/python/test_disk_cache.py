"""The on-disk kernel cache: keys, atomic entries, corruption detection, and its use by @ww.jit
(the native compile is replaced by a recorder so that the test runs without the extension; the
end-to-end cache test with the real compiler is in test_native_pipeline.py)."""

import importlib
import os
import threading

import numpy as np
import pytest

import warpweave as ww
import warpweave.language as tl

cache = importlib.import_module("warpweave.cache")
jitmod = importlib.import_module("warpweave.jit")


class FakeKernel:
    def __init__(self, name="k", cubin=b"\x7fELF-cubin-bytes", ptx=".version 8.0",
                 tile_ir="tt.func @k"):
        self.name = name
        self.cubin = cubin
        self.ptx = ptx
        self.tile_ir = tile_ir
        self.params = [("x_ptr", "ptr<fp32>", 8, 16), ("n", "i32", 4, 1)]
        self.folded_args = []

    def metadata_json(self):
        return '{"name": "%s", "params": []}' % self.name


class FakeNative:
    def __init__(self):
        self.compiles = 0
        self.loaded = []
        self.requests = []

    def compile(self, **req):
        self.compiles += 1
        self.requests.append(req)
        return FakeKernel(req["kernel"])

    def kernel_from_metadata(self, meta, cubin, ptx, tile_ir=""):
        self.loaded.append((meta, cubin, ptx))
        return FakeKernel("from-cache", cubin, ptx, tile_ir)

    def compiler_version(self):
        return "test-1"


@pytest.fixture
def fake(monkeypatch, tmp_path):
    f = FakeNative()
    monkeypatch.setattr(cache, "native", lambda: f)
    monkeypatch.setattr(jitmod, "native", lambda: f)
    monkeypatch.setenv("WARPWEAVE_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("WARPWEAVE_CACHE_DISABLE", raising=False)
    return f


REQUEST = dict(files=[("k.py", "def k(): pass\n")], kernel="k", signature="x:*fp32:16",
               globals={"A": "1"}, target="sm_90a", num_warps=4, num_stages=3, num_ctas=1,
               stage="cubin")


def test_key_depends_on_every_input():
    base = cache.cache_key(REQUEST, "v1")
    assert base == cache.cache_key(dict(REQUEST), "v1")
    variants = [
        dict(REQUEST, files=[("k.py", "def k(): pass \n")]),
        dict(REQUEST, files=[("other.py", "def k(): pass\n")]),
        dict(REQUEST, globals={"A": "2"}),
        dict(REQUEST, signature="x:*fp32"),
        dict(REQUEST, target="sm_80"),
        dict(REQUEST, num_warps=8),
        dict(REQUEST, num_stages=4),
        dict(REQUEST, num_ctas=2),
        dict(REQUEST, kernel="k2"),
        dict(REQUEST, mbarrier_trap_tries=1000),
        # The options a request carries only when they differ from the default: a 4-CTA
        # cluster as (2, 2, 1) or (1, 4, 1), and enable_fp_fusion=False, each its own kernel.
        dict(REQUEST, num_ctas=4, cluster_dims=[2, 2, 1]),
        dict(REQUEST, num_ctas=4, cluster_dims=[1, 4, 1]),
        dict(REQUEST, fp_fusion=False),
    ]
    keys = {cache.cache_key(v, "v1") for v in variants}
    assert len(keys) == len(variants) and base not in keys
    assert cache.cache_key(REQUEST, "v2") != base


def test_fp_fusion_off_is_not_served_the_fused_kernel(tmp_path, monkeypatch, requires_ptxas):
    # The real compiler: enable_fp_fusion=False keeps multiplies and adds apart (mul.rn / add.rn,
    # which ptxas may not contract); the fused kernel in the disk cache must not answer for it.
    pytest.importorskip("warpweave._native")
    monkeypatch.setenv("WARPWEAVE_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("WARPWEAVE_CACHE_DISABLE", raising=False)
    x = np.zeros(128, np.float32)
    values = mul_add.bind((x, x, x), dict(N=128))
    ptx = {}
    for fused in (True, False, True):
        mul_add.cache.clear()
        k = mul_add.compile_for(values, False, (4, 1, 1, (1, 1, 1), fused), target="sm_90a")
        ptx[fused] = k.kernel.ptx
    assert "mul.rn.f32" in ptx[False] and "mul.rn.f32" not in ptx[True]
    assert len(list(tmp_path.rglob("*.wwk"))) == 2


@ww.jit
def mul_add(X, Y, Z, N: tl.constexpr):
    o = tl.arange(0, N)
    tl.store(Z + o, tl.load(X + o) * tl.load(Y + o) + 1.0)


def test_store_then_load_round_trips(fake, tmp_path):
    key = cache.cache_key(REQUEST, "v1")
    assert cache.load(key) is None
    assert cache.store(key, FakeKernel())
    k = cache.load(key)
    assert k is not None and k.name == "from-cache"
    meta, cubin, ptx = fake.loaded[-1]
    assert cubin == b"\x7fELF-cubin-bytes" and ptx == ".version 8.0"
    assert '"name": "k"' in meta
    assert k.tile_ir == "tt.func @k"  # asm["ttir"] survives the cache
    # No temp files are left behind.
    assert [p.name for p in (tmp_path / key[:2]).iterdir()] == [key + ".wwk"]


@pytest.mark.parametrize("damage", ["flip", "truncate", "garbage", "empty"])
def test_damaged_entries_are_detected_and_removed(fake, damage):
    key = cache.cache_key(REQUEST, "v1")
    cache.store(key, FakeKernel())
    path = cache._entry_path(key)
    data = bytearray(open(path, "rb").read())
    if damage == "flip":
        data[-3] ^= 0x40
    elif damage == "truncate":
        data = data[:-5]
    elif damage == "garbage":
        data = bytearray(b"not a cache entry at all")
    else:
        data = bytearray()
    open(path, "wb").write(bytes(data))
    assert cache.load(key) is None
    assert not os.path.exists(path)


def test_disabled_cache_stores_nothing(fake, monkeypatch, tmp_path):
    monkeypatch.setenv("WARPWEAVE_CACHE_DISABLE", "1")
    key = cache.cache_key(REQUEST, "v1")
    assert not cache.store(key, FakeKernel())
    assert list(tmp_path.iterdir()) == []


def test_concurrent_writers_leave_one_valid_entry(fake):
    key = cache.cache_key(REQUEST, "v1")
    errors = []

    def write(i):
        try:
            for _ in range(20):
                cache.store(key, FakeKernel(cubin=bytes([i]) * 5000))
                assert cache.load(key) is not None
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    _, cubin, _ = fake.loaded[-1]
    assert len(cubin) == 5000 and len(set(cubin)) == 1
    assert sorted(os.listdir(os.path.dirname(cache._entry_path(key)))) == [key + ".wwk"]


@ww.jit
def gpu_only(x_ptr, n, BLOCK: tl.constexpr):
    pass


def test_jit_uses_the_disk_cache_for_gpu_compiles(fake, monkeypatch):
    monkeypatch.setenv("WARPWEAVE_TARGET", "sm_90a")
    values = gpu_only.bind((np.zeros(4, np.float32), 4), {"BLOCK": 4})
    gpu_only.cache.clear()
    first = gpu_only.compile_for(values, False, (4, 3, 1))
    assert fake.compiles == 1 and first.kernel.name == "gpu_only"
    gpu_only.cache.clear()  # a new process: only the disk cache remains
    second = gpu_only.compile_for(values, False, (4, 3, 1))
    assert fake.compiles == 1 and second.kernel.name == "from-cache"


def test_trap_hangs_env_reaches_the_compile_and_the_keys(fake, monkeypatch):
    monkeypatch.setenv("WARPWEAVE_TARGET", "sm_90a")
    monkeypatch.delenv("WARPWEAVE_TRAP_HANGS", raising=False)
    values = gpu_only.bind((np.zeros(4, np.float32), 4), {"BLOCK": 4})
    gpu_only.cache.clear()
    plain = gpu_only.compile_for(values, False, (4, 3, 1))
    assert "mbarrier_trap_tries" not in fake.requests[-1]
    monkeypatch.setenv("WARPWEAVE_TRAP_HANGS", "5000")
    trapping = gpu_only.compile_for(values, False, (4, 3, 1))
    # Neither the memory cache nor the disk cache hands back the kernel without traps.
    assert trapping is not plain and fake.compiles == 2
    assert fake.requests[-1]["mbarrier_trap_tries"] == 5000
    assert trapping.kernel.name == "gpu_only"
    gpu_only.cache.clear()
    assert gpu_only.compile_for(values, False, (4, 3, 1)).kernel.name == "from-cache"
    assert fake.compiles == 2


@pytest.mark.parametrize("text", ["many", "-3", "1.5"])
def test_trap_hangs_env_must_be_a_count(fake, monkeypatch, text):
    monkeypatch.setenv("WARPWEAVE_TARGET", "sm_90a")
    monkeypatch.setenv("WARPWEAVE_TRAP_HANGS", text)
    values = gpu_only.bind((np.zeros(4, np.float32), 4), {"BLOCK": 4})
    with pytest.raises(ValueError, match="WARPWEAVE_TRAP_HANGS"):
        gpu_only.compile_for(values, False, (4, 3, 1))


def test_build_id_tells_builds_of_the_extension_apart(tmp_path):
    import types

    first, second = tmp_path / "a.so", tmp_path / "b.so"
    first.write_bytes(b"x" * 10)
    second.write_bytes(b"x" * 11)
    a = cache.build_id(types.SimpleNamespace(__file__=str(first)))
    b = cache.build_id(types.SimpleNamespace(__file__=str(second)))
    assert a and b and a != b
    assert cache.build_id(types.SimpleNamespace(__file__=str(first))) == a
    assert cache.build_id(types.SimpleNamespace()) == ""
