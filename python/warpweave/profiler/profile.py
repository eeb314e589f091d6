"""Profiling sessions (Proton's `start`, `activate`, `deactivate`, `finalize`, `profile`).

A session records while active: each warpweave kernel launch (GPU: CUDA events around it; the
interpreter: host time), nested under the scopes open at the time, and the scopes' metrics. With
hook="triton" a launch is named and given metrics by its kernel's `launch_metadata`. finalize()
writes the tree as `<name>.hatchet` (Proton's JSON, read by warpweave.profiler.viewer)."""

from __future__ import annotations

import functools
from typing import Optional

from . import _data
from .flags import flags

DEFAULT_PROFILE_NAME = "proton"

_BACKENDS = (None, "cupti")  # warpweave times launches itself, as the CUDA backend would
_HOOKS = (None, "triton", "warpweave")  # "warpweave": a Triton script with the word replaced
_OUTPUT_FORMATS = ("", "hatchet")


def start(name: Optional[str] = None, *, context: Optional[str] = "shadow",
          data: Optional[str] = "tree", backend: Optional[str] = None, mode=None,
          hook=None) -> Optional[int]:
    """Starts (and activates) a session writing to `name` + ".hatchet" (default "proton");
    starting a name already profiled activates its session again. Returns the session id.

    context: "shadow" (the scope stack); data: "tree"; backend: None or "cupti"; mode: None;
    hook: None, "triton" or "warpweave" (name and metrics from each kernel's launch_metadata;
    "warpweave" is what a Triton script reads after the word `triton` is replaced)."""
    if context != "shadow":
        raise ValueError(f"Unknown context source: {context} (warpweave.profiler supports "
                         f"context='shadow')")
    if data != "tree":
        raise ValueError(f"Unknown data: {data} (warpweave.profiler supports data='tree')")
    if backend not in _BACKENDS:
        raise ValueError(f"Unknown profiler: {backend} (warpweave.profiler times launches "
                         f"itself: backend None or 'cupti')")
    if mode is not None:
        raise ValueError(f"Unsupported mode: {mode!r} (warpweave.profiler has no modes)")
    if hook not in _HOOKS:
        raise ValueError(f"Unsupported hook: {hook!r} (warpweave.profiler takes hook=None, "
                         f"'triton' or 'warpweave')")
    if flags.command_line:
        return None
    flags.profiling_on = True
    name = DEFAULT_PROFILE_NAME if name is None else str(name)
    return _data.add_session(name, hook is not None)


def activate(session: Optional[int] = None) -> None:
    """Records again into `session` (all sessions when None); IndexError for an unknown id."""
    _data.set_active(session, True)


def deactivate(session: Optional[int] = None, flushing: bool = False) -> None:
    """Stops recording into `session` (all when None), keeping its data; IndexError for an
    unknown id. `flushing` is accepted for Proton's signature (timings are read at finalize)."""
    _data.set_active(session, False)


def finalize(session: Optional[int] = None, output_format: Optional[str] = "") -> None:
    """Writes `session` (all sessions when None) as `<name>.hatchet` ("-" or "": to stdout) and
    ends it; a session that does not exist is ignored. output_format: "" or "hatchet"."""
    fmt = output_format or ""
    if fmt.lower() not in _OUTPUT_FORMATS:
        raise ValueError(f"Unknown output format: {output_format} (warpweave.profiler writes "
                         f"'hatchet')")
    if session is None:
        flags.profiling_on = False
    _data.finalize(session, fmt)


def _profiling(func, name=None, context="shadow", data="tree", backend=None, mode=None,
               hook=None):

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        session = start(name, context=context, data=data, backend=backend, mode=mode, hook=hook)
        ret = func(*args, **kwargs)
        deactivate(session)
        return ret

    return wrapper


def profile(func=None, *, name: Optional[str] = None, context: Optional[str] = "shadow",
            data: Optional[str] = "tree", backend: Optional[str] = None, mode=None, hook=None):
    """Decorator: `@proton.profile` or `@proton.profile(name=..., hook="triton")` starts the
    session before each call and deactivates it after (finalize() writes it, as in Proton)."""
    if func is None:
        return lambda f: _profiling(f, name=name, context=context, data=data, backend=backend,
                                    mode=mode, hook=hook)
    return _profiling(func, name=name, context=context, data=data, backend=backend, mode=mode,
                      hook=hook)
