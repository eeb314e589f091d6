"""The on-disk kernel cache: compiled cubins and their launch metadata, keyed by a hash of
everything that determines the compile (sources, globals, signature, options, compiler version,
target). Entries carry a SHA-256 of their contents, so a truncated or corrupted file is detected
and recompiled; writes go to a temp file renamed into place, so concurrent processes never see a
partial entry.

WARPWEAVE_CACHE_DIR picks the directory (default ~/.cache/warpweave); WARPWEAVE_CACHE_DISABLE=1
turns the cache off.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile

from ._native_loader import native

_FORMAT = 1


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


def cache_key(request: dict, compiler_version: str) -> str:
    """SHA-256 over the whole compile request and the compiler version."""
    h = hashlib.sha256()
    h.update(f"warpweave-cache-v{_FORMAT}\0{compiler_version}\0".encode())
    for path, text in request["files"]:
        h.update(f"file\0{path}\0{len(text)}\0".encode())
        h.update(text.encode("utf-8", "surrogatepass"))
    for name in sorted(request["globals"]):
        h.update(f"global\0{name}\0{request['globals'][name]}\0".encode())
    for field in ("kernel", "signature", "target", "num_warps", "num_stages", "num_ctas", "stage"):
        h.update(f"{field}\0{request[field]}\0".encode())
    # Absent from requests that do not trap on hangs (WARPWEAVE_TRAP_HANGS).
    h.update(f"mbarrier_trap_tries\0{request.get('mbarrier_trap_tries', 0)}\0".encode())
    return h.hexdigest()


def _entry_path(key: str) -> str | None:
    d = cache_dir()
    return None if d is None else os.path.join(d, key[:2], key + ".wwk")


def _encode(kernel) -> bytes:
    meta = kernel.metadata_json().encode()
    ptx = kernel.ptx.encode()
    cubin = bytes(kernel.cubin)
    payload = meta + ptx + cubin
    header = {"format": _FORMAT, "sha256": hashlib.sha256(payload).hexdigest(),
              "meta": len(meta), "ptx": len(ptx), "cubin": len(cubin)}
    return json.dumps(header).encode() + b"\n" + payload


def _decode(data: bytes):
    """(metadata JSON, PTX, cubin), or None when the entry is damaged or of another format."""
    nl = data.find(b"\n")
    if nl < 0:
        return None
    try:
        header = json.loads(data[:nl])
        if header.get("format") != _FORMAT:
            return None
        payload = data[nl + 1:]
        if len(payload) != header["meta"] + header["ptx"] + header["cubin"]:
            return None
        if hashlib.sha256(payload).hexdigest() != header["sha256"]:
            return None
        m, p = header["meta"], header["ptx"]
        return payload[:m].decode(), payload[m:m + p].decode(), payload[m + p:]
    except (ValueError, KeyError, TypeError, UnicodeDecodeError):
        return None


def load(key: str):
    """The cached native kernel for `key`, or None (missing, damaged: it is then removed)."""
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
        try:
            os.unlink(path)
        except OSError:
            pass
        return None
    meta, ptx, cubin = decoded
    try:
        return native().kernel_from_metadata(meta, cubin, ptx)
    except ValueError:
        return None


def store(key: str, kernel) -> bool:
    """Writes `kernel` (compiled to a cubin) atomically; returns False when it could not."""
    path = _entry_path(key)
    if path is None or not kernel.cubin:
        return False
    d = os.path.dirname(path)
    try:
        os.makedirs(d, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=d, prefix=".tmp-", suffix=".wwk")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(_encode(kernel))
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
        return True
    except OSError:
        return False
