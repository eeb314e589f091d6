"""The on-disk kernel cache: compiled cubins and their launch metadata, keyed by a hash of
everything that determines the compile (sources, globals, signature, options, compiler version,
target). Entries carry a SHA-256 of their contents, so a truncated or corrupted file is detected
and recompiled, and the key they were stored under, so an entry found under another key (files
swapped or copied between cache directories) is discarded with a warning instead of serving
another kernel's cubin. Writes go to a temp file renamed into place, so concurrent processes never
see a partial entry; a write that fails (full disk, read-only directory) warns once per directory
and the compiled kernel is used uncached.

WARPWEAVE_CACHE_DIR picks the directory (default ~/.cache/warpweave); WARPWEAVE_CACHE_DISABLE=1
turns the cache off.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import warnings

from ._native_loader import native

_FORMAT = 3  # 2: the header records the entry's key; 3: and holds the Tile IR


def cache_dir() -> str | None:
    if os.environ.get("WARPWEAVE_CACHE_DISABLE", "0") not in ("", "0"):
        return None
    d = os.environ.get("WARPWEAVE_CACHE_DIR")
    if not d:
        d = os.path.join(os.path.expanduser("~"), ".cache", "warpweave")
    return d


_BUILD_IDS: dict = {}


def build_id(native) -> str:
    """Which build of the extension compiles: its file's size and modification time. A rebuilt
    compiler with an unchanged version string (any development build) must not be served kernels
    an older build made."""
    path = getattr(native, "__file__", None)
    if path not in _BUILD_IDS:
        try:
            st = os.stat(path)
            _BUILD_IDS[path] = f"{st.st_size}:{st.st_mtime_ns}"
        except (OSError, TypeError):
            _BUILD_IDS[path] = ""
    return _BUILD_IDS[path]


def hash_sources(h, files, globals_: dict) -> None:
    """Adds a kernel's source files ((path, text) pairs) and global values to the hash `h`: what
    a compile and a tuning record are keyed on."""
    for path, text in files:
        h.update(f"file\0{path}\0{len(text)}\0".encode())
        h.update(text.encode("utf-8", "surrogatepass"))
    for name in sorted(globals_):
        h.update(f"global\0{name}\0{globals_[name]}\0".encode())


def cache_key(request: dict, compiler_version: str) -> str:
    """SHA-256 over the whole compile request and the compiler version."""
    h = hashlib.sha256()
    h.update(f"warpweave-cache-v{_FORMAT}\0{compiler_version}\0".encode())
    hash_sources(h, request["files"], request["globals"])
    for i, names in enumerate(request.get("names") or ()):  # how each file's names are bound
        for name in sorted(names or ()):
            h.update(f"name\0{i}\0{name}\0{names[name]!r}\0".encode())
    fields = ("kernel", "signature", "target", "num_warps", "num_stages", "num_ctas", "stage")
    for field in fields:
        h.update(f"{field}\0{request[field]}\0".encode())
    # Absent from requests that do not trap on hangs (WARPWEAVE_TRAP_HANGS).
    h.update(f"mbarrier_trap_tries\0{request.get('mbarrier_trap_tries', 0)}\0".encode())
    # Every other option a request carries (cluster_dims of 2-D / 3-D clusters, fp_fusion=False),
    # each only when present, so that the default requests keep their keys.
    for field in sorted(set(request) - set(fields) - {"files", "globals", "names",
                                                      "mbarrier_trap_tries"}):
        h.update(f"{field}\0{request[field]!r}\0".encode())
    return h.hexdigest()


def _entry_path(key: str) -> str | None:
    d = cache_dir()
    return None if d is None else os.path.join(d, key[:2], key + ".wwk")


def _encode(kernel, key: str) -> bytes:
    meta = kernel.metadata_json().encode()
    ptx = kernel.ptx.encode()
    cubin = bytes(kernel.cubin)
    tir = kernel.tile_ir.encode()  # asm["ttir"] after a cache hit, as after a compile
    payload = meta + ptx + cubin + tir
    header = {"format": _FORMAT, "key": key, "sha256": hashlib.sha256(payload).hexdigest(),
              "meta": len(meta), "ptx": len(ptx), "cubin": len(cubin), "tile_ir": len(tir)}
    return json.dumps(header).encode() + b"\n" + payload


def _decode(data: bytes):
    """(key the entry was stored under, metadata JSON, PTX, cubin, Tile IR), or None when the
    entry is damaged or of another format."""
    nl = data.find(b"\n")
    if nl < 0:
        return None
    try:
        header = json.loads(data[:nl])
        if header.get("format") != _FORMAT or not isinstance(header.get("key"), str):
            return None
        payload = data[nl + 1:]
        m, p, c, t = header["meta"], header["ptx"], header["cubin"], header["tile_ir"]
        if (not all(type(n) is int and n >= 0 for n in (m, p, c, t))
                or len(payload) != m + p + c + t):
            return None
        if hashlib.sha256(payload).hexdigest() != header["sha256"]:
            return None
        return (header["key"], payload[:m].decode(), payload[m:m + p].decode(),
                payload[m + p:m + p + c], payload[m + p + c:].decode())
    # RecursionError: a header of deeply nested JSON.
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
        return None


def _remove(path: str):
    try:
        os.unlink(path)
    except OSError:
        pass


def discard(key: str, why: str):
    """Removes `key`'s entry, with one warning line saying why (an entry that decoded but cannot
    serve its kernel: it is recompiled and stored again)."""
    path = _entry_path(key)
    if path is None:
        return
    warnings.warn(f"warpweave: discarded the kernel cache entry {path}: {why}; recompiling",
                  RuntimeWarning, stacklevel=3)
    _remove(path)


def load(key: str):
    """The cached native kernel for `key`, or None: missing, damaged or of an older format (then
    removed), or stored under another key or unreadable by this build (then removed with a
    warning)."""
    path = _entry_path(key)
    if path is None:
        return None
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    decoded = _decode(data)
    if decoded is None:
        _remove(path)
        return None
    stored_key, meta, ptx, cubin, tile_ir = decoded
    if stored_key != key:
        discard(key, f"it holds the entry of key {stored_key[:16]}..., not {key[:16]}...")
        return None
    try:
        return native().kernel_from_metadata(meta, cubin, ptx, tile_ir)
    except Exception as e:  # whatever the metadata holds, never worse than a recompile
        discard(key, f"its metadata cannot be read ({type(e).__name__}: {e})".replace("\n", " "))
        return None


_STORE_WARNED: set = set()  # directories whose failed writes were reported


def store(key: str, kernel) -> bool:
    """Writes `kernel` (compiled to a cubin) atomically; returns False when it could not (the
    first failure in a directory warns once)."""
    path = _entry_path(key)
    if path is None or not kernel.cubin:
        return False
    d = os.path.dirname(path)
    try:
        os.makedirs(d, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=d, prefix=".tmp-", suffix=".wwk")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(_encode(kernel, key))
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
        return True
    except OSError as e:
        root = os.path.dirname(d)
        if root not in _STORE_WARNED:
            _STORE_WARNED.add(root)
            warnings.warn(f"warpweave: cannot write the kernel cache in {root} "
                          f"({e.strerror or e}); compiled kernels are used without caching them "
                          f"(set WARPWEAVE_CACHE_DIR to a writable directory, or "
                          f"WARPWEAVE_CACHE_DISABLE=1)", RuntimeWarning, stacklevel=3)
        return False
