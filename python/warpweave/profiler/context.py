"""`proton.context`: the scope stack the next launch would nest under."""

from __future__ import annotations

from typing import Optional

from . import _data
from .flags import flags


def depth(session: Optional[int] = 0) -> Optional[int]:
    """How many scopes are open on this thread (None when not profiling; IndexError for an
    unknown session)."""
    if not flags.profiling_on:
        return None
    _data._session(session)
    return len(_data.stack())
