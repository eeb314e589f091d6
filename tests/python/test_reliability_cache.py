"""Reliability of the disk cache (issue 20): an entry records the key it was stored under, so a
swapped or foreign entry is discarded (one warning line) and recompiled instead of serving the
wrong cubin or failing every later launch; no metadata, however nested, can crash the process
that reads it; and a store that fails (full disk, unwritable directory) warns once and the
kernel is still used."""

import errno
import importlib
import json
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

import warpweave as ww
import warpweave.language as tl

from test_disk_cache import REQUEST, FakeKernel, fake  # noqa: F401  (fake is a fixture)

cache = importlib.import_module("warpweave.cache")


@ww.jit
def cached_kernel(x_ptr, n, BLOCK: tl.constexpr):
    pass


@pytest.fixture(autouse=True)
def fresh_store_warnings(monkeypatch):
    monkeypatch.setattr(cache, "_STORE_WARNED", set())


def key_of(kernel_name):
    return cache.cache_key(dict(REQUEST, kernel=kernel_name), "v1")


def runtime_warnings(record):
    return [str(w.message) for w in record if issubclass(w.category, RuntimeWarning)]


def test_entries_record_their_key(fake):
    key = key_of("a")
    cache.store(key, FakeKernel("a"))
    header = json.loads(open(cache._entry_path(key), "rb").read().split(b"\n")[0])
    assert header["key"] == key and header["format"] == 3


def test_swapped_entries_are_discarded_with_one_warning_each(fake):
    a, b = key_of("a"), key_of("b")
    cache.store(a, FakeKernel("a", cubin=b"cubin of a"))
    cache.store(b, FakeKernel("b", cubin=b"cubin of b"))
    pa, pb = cache._entry_path(a), cache._entry_path(b)
    data_a, data_b = open(pa, "rb").read(), open(pb, "rb").read()
    open(pa, "wb").write(data_b)
    open(pb, "wb").write(data_a)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        assert cache.load(a) is None
        assert cache.load(b) is None
    messages = runtime_warnings(record)
    assert len(messages) == 2 and all("\n" not in m for m in messages)
    assert f"discarded the kernel cache entry {pa}: it holds the entry of key {b[:16]}" \
           in messages[0]
    assert "recompiling" in messages[0]
    assert not os.path.exists(pa) and not os.path.exists(pb)
    assert fake.loaded == []  # neither cubin was ever handed out


def test_jit_recompiles_over_a_swapped_entry_and_stores_its_own(fake, monkeypatch):
    monkeypatch.setenv("WARPWEAVE_TARGET", "sm_90a")
    values = cached_kernel.bind((np.zeros(4, np.float32), 4), {"BLOCK": 4})
    other = cached_kernel.bind((np.zeros(4, np.float32), 5), {"BLOCK": 8})
    for v in (values, other):
        cached_kernel.cache.clear()
        cached_kernel.compile_for(v, False, (4, 3, 1))
    assert fake.compiles == 2
    entries = sorted(str(p) for p in __import__("pathlib").Path(cache.cache_dir()).rglob("*.wwk"))
    assert len(entries) == 2
    first, second = (open(p, "rb").read() for p in entries)
    open(entries[0], "wb").write(second)
    open(entries[1], "wb").write(first)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        for v in (values, other):
            cached_kernel.cache.clear()
            assert cached_kernel.compile_for(v, False, (4, 3, 1)).kernel.name == "cached_kernel"
    assert fake.compiles == 4 and len(runtime_warnings(record)) == 2
    for v in (values, other):  # stored again, each under its own key
        cached_kernel.cache.clear()
        assert cached_kernel.compile_for(v, False, (4, 3, 1)).kernel.name == "from-cache"
    assert fake.compiles == 4


def test_an_entry_for_another_kernel_under_the_right_key_is_discarded_once(fake, monkeypatch):
    """Before keys were recorded, such an entry failed every launch with 'internal error'."""
    monkeypatch.setenv("WARPWEAVE_TARGET", "sm_90a")

    class Foreign(FakeKernel):
        def __init__(self, *a, **k):
            super().__init__(*a, **k)
            self.params = [("q_ptr", "ptr<fp32>", 8, 16)]  # not a parameter of cached_kernel

    values = cached_kernel.bind((np.zeros(4, np.float32), 4), {"BLOCK": 16})
    real_load = fake.kernel_from_metadata
    fake.kernel_from_metadata = lambda *a: Foreign("other")
    cached_kernel.cache.clear()
    cached_kernel.compile_for(values, False, (4, 3, 1))  # compiles and stores
    cached_kernel.cache.clear()
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        c = cached_kernel.compile_for(values, False, (4, 3, 1))
    assert c.kernel.name == "cached_kernel" and fake.compiles == 2
    (message,) = runtime_warnings(record)
    assert "its parameters are not those of cached_kernel; recompiling" in message
    fake.kernel_from_metadata = real_load
    cached_kernel.cache.clear()
    assert cached_kernel.compile_for(values, False, (4, 3, 1)).kernel.name == "from-cache"


def test_unreadable_metadata_is_discarded_with_a_warning(fake):
    key = key_of("a")
    cache.store(key, FakeKernel("a"))

    def refuse(meta, cubin, ptx, tile_ir):
        raise ValueError("kernel metadata JSON: nesting deeper than 64 levels at offset 64")

    fake.kernel_from_metadata = refuse
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        assert cache.load(key) is None
    (message,) = runtime_warnings(record)
    assert "its metadata cannot be read (ValueError: kernel metadata JSON: nesting deeper" in message
    assert not os.path.exists(cache._entry_path(key))


@pytest.mark.parametrize("header", [b"[" * 100000, b'{"format": 2, "key": ' + b"[" * 100000,
                                    b'{"format": 2, "key": "k", "meta": -1, "ptx": 0, '
                                    b'"cubin": 1, "sha256": ""}',
                                    b'{"format": 2, "key": "k", "meta": 1.5, "ptx": 0, '
                                    b'"cubin": 0, "sha256": ""}',
                                    b'"just a string"', b"null"])
def test_malformed_headers_are_removed_quietly(fake, header):
    key = key_of("a")
    path = cache._entry_path(key)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    open(path, "wb").write(header + b"\nxyz")
    assert cache.load(key) is None
    assert not os.path.exists(path)


def test_entries_of_the_previous_format_are_replaced_quietly(fake):
    key = key_of("a")
    path = cache._entry_path(key)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    payload = b'{"name": "a"}'
    import hashlib

    header = {"format": 1, "sha256": hashlib.sha256(payload).hexdigest(), "meta": len(payload),
              "ptx": 0, "cubin": 0}
    open(path, "wb").write(json.dumps(header).encode() + b"\n" + payload)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        assert cache.load(key) is None
    assert runtime_warnings(record) == [] and not os.path.exists(path)


# ---- failed stores ---------------------------------------------------------------------------


def failing_mkstemp(code):
    def mkstemp(*a, **k):
        raise OSError(code, os.strerror(code))

    return mkstemp


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EACCES, errno.EROFS])
def test_a_failed_store_warns_once_and_the_kernel_is_still_used(fake, monkeypatch, code):
    monkeypatch.setenv("WARPWEAVE_TARGET", "sm_90a")
    monkeypatch.setattr(cache.tempfile, "mkstemp", failing_mkstemp(code))
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        for n in (4, 5, 6):
            values = cached_kernel.bind((np.zeros(4, np.float32), n), {"BLOCK": 32})
            cached_kernel.cache.clear()
            assert cached_kernel.compile_for(values, False, (4, 3, 1)).kernel.name == \
                "cached_kernel"
    (message,) = runtime_warnings(record)
    assert f"cannot write the kernel cache in {cache.cache_dir()} ({os.strerror(code)})" in message
    assert "\n" not in message and fake.compiles == 3


def test_a_full_disk_while_writing_leaves_no_partial_entry(fake, monkeypatch):
    key = key_of("a")
    real_fdopen = os.fdopen

    class Full:
        def __init__(self, f):
            self.f = f

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

        def write(self, data):
            self.f.write(data[:10])
            raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(cache.os, "fdopen", lambda fd, mode: Full(real_fdopen(fd, mode)))
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        assert cache.store(key, FakeKernel("a")) is False
        assert cache.store(key, FakeKernel("a")) is False
    assert len(runtime_warnings(record)) == 1
    assert os.listdir(os.path.dirname(cache._entry_path(key))) == []


def test_a_cache_dir_that_is_a_file_warns_once(fake, monkeypatch, tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    monkeypatch.setenv("WARPWEAVE_CACHE_DIR", str(blocker))
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        assert cache.store(key_of("a"), FakeKernel("a")) is False
        assert cache.store(key_of("b"), FakeKernel("b")) is False
        assert cache.load(key_of("a")) is None
    (message,) = runtime_warnings(record)
    assert f"cannot write the kernel cache in {blocker}" in message


# ---- the real metadata reader ----------------------------------------------------------------


def test_deeply_nested_metadata_cannot_crash_the_reader():
    """In a fresh process: the reader recursed once per level, and 100000 levels crashed."""
    pytest.importorskip("warpweave._native")
    code = '''
from warpweave import _native
for text in ("[" * 1000000, '{"name": "k", "x": ' + "[" * 200000 + "]" * 200000 + "}",
             '{"a": ' * 100000 + "1" + "}" * 100000):
    try:
        _native.kernel_from_metadata(text, b"\\x7fELF", "")
    except ValueError as e:
        print("refused:", e)
'''
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("refused: kernel metadata JSON: nesting deeper than 64 levels") == 3


def test_a_cache_entry_of_deeply_nested_metadata_is_discarded(monkeypatch, tmp_path):
    native = pytest.importorskip("warpweave._native")
    monkeypatch.setenv("WARPWEAVE_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("WARPWEAVE_CACHE_DISABLE", raising=False)
    monkeypatch.setattr(cache, "native", lambda: native)

    class Deep(FakeKernel):
        def metadata_json(self):
            return '{"name": "k", "params": ' + "[" * 100000 + "]" * 100000 + "}"

    key = key_of("deep")
    assert cache.store(key, Deep("k"))
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        assert cache.load(key) is None
    (message,) = runtime_warnings(record)
    assert "nesting deeper than 64 levels" in message
    assert not os.path.exists(cache._entry_path(key))
