"""`proton.data`: a session's profile in memory, as finalize() would write it."""

from __future__ import annotations

from typing import Optional

from . import _data


def get(session: Optional[int] = 0, phase: int = 0):
    """The session's hatchet data (the JSON list finalize() writes), with every GPU timing
    read; None for session None. IndexError for an unknown session; warpweave keeps one phase
    (0)."""
    if session is None:
        return None
    if phase != 0:
        raise ValueError(f"phase {phase}: warpweave.profiler keeps a single phase (0)")
    with _data._lock:
        s = _data._session(session)
        _data.resolve_pending(wait=True)
        return s.hatchet()
