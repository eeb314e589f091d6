"""Profiler scopes (Proton's `scope`, `cpu_timed_scope`, `enter_scope` / `exit_scope`): named
frames that launches made inside them nest under, with metrics added to the scope's node (a
scope entered several times adds them up). Outside a started profile they do nothing."""

from __future__ import annotations

import threading
import time
from functools import wraps
from typing import Any, Optional

from . import _data
from .flags import flags

_explicit = threading.local()  # enter_scope / exit_scope's own stack of (id, name)


class scope:
    """A context manager and decorator: `with proton.scope("name", {"bytes": n}): ...` or
    `@proton.scope("name")`. `metrics` (a dict of name to number, list of numbers or tensor) is
    added to the scope's node on entry."""

    def __init__(self, name: str, metrics: Optional[dict[str, Any]] = None) -> None:
        self.name = name
        self.metrics = metrics
        self.id = None

    def _enter_scope(self):
        if not flags.profiling_on:
            return
        self.id = _data.enter_scope(self.name, self.metrics)

    def _exit_scope(self):
        if not flags.profiling_on or self.id is None:
            return
        scope_id, self.id = self.id, None
        _data.exit_scope(scope_id)

    def __enter__(self):
        self._enter_scope()
        return self

    def __exit__(self, exc_type, exc_value, traceback):
        self._exit_scope()

    def __call__(self, func):

        @wraps(func)
        def wrapper(*args, **kwargs):
            self._enter_scope()
            try:
                return func(*args, **kwargs)
            finally:
                self._exit_scope()

        return wrapper


class cpu_timed_scope(scope):
    """A scope that also records its host time as the metric "cpu_time (ns)" (the viewer's
    cpu_time/s, cpu_time/ms, ...). The metric name cpu_time is reserved."""

    def __init__(self, name: str, metrics: Optional[dict[str, Any]] = None) -> None:
        super().__init__(name, metrics)
        self.start_time = None
        if metrics and "cpu_time" in metrics:
            raise ValueError("The metric name 'cpu_time' is reserved.")

    def _enter_scope(self):
        if not flags.profiling_on:
            return
        self.start_time = time.perf_counter_ns()
        super()._enter_scope()

    def _exit_scope(self):
        if not flags.profiling_on or self.id is None:
            return
        elapsed = time.perf_counter_ns() - self.start_time
        scope_id, self.id = self.id, None
        _data.exit_scope(scope_id, {"cpu_time (ns)(exc)": elapsed})


def enter_scope(name: str, *, metrics: Optional[dict[str, Any]] = None) -> Optional[int]:
    """Opens a scope until the matching exit_scope(); returns its id (None when not profiling)."""
    if not flags.profiling_on:
        return None
    scope_id = _data.enter_scope(name, metrics)
    opened = getattr(_explicit, "scopes", None)
    if opened is None:
        opened = _explicit.scopes = []
    opened.append((scope_id, name))
    return scope_id


def exit_scope(name: Optional[str] = None, *,
               metrics: Optional[dict[str, Any]] = None) -> Optional[int]:
    """Closes the scope the last enter_scope() opened (ValueError when `name` is not its name);
    `metrics` are added to it. Returns its id (None when not profiling)."""
    if not flags.profiling_on:
        return None
    opened = getattr(_explicit, "scopes", None)
    if not opened:
        raise IndexError("exit_scope() without an open enter_scope()")
    scope_id, popped_name = opened[-1]
    if name and name != popped_name:
        raise ValueError(f"Scope name mismatch: {name} != {popped_name}")
    opened.pop()
    _data.exit_scope(scope_id, metrics)
    return scope_id
