"""`warpweave.profiler`: Triton's Proton profiler (`import triton.profiler as proton`) for
warpweave kernels: sessions (start / activate / deactivate / finalize, the profile decorator),
scopes with metrics, launch_metadata names and metrics (hook="triton"), and Proton's hatchet
tree file, which `warpweave.profiler.viewer` (also `python -m warpweave.profiler.viewer FILE`)
prints with derived metrics such as time/ms and tflop16/s.

Launches are timed by warpweave itself (CUDA events on the GPU, the host clock in the
interpreter) rather than by CUPTI; see _data.py for what is timed where.
"""

from . import context, data  # noqa: F401
from .flags import flags  # noqa: F401
from .profile import DEFAULT_PROFILE_NAME, activate, deactivate, finalize, profile, start
from .scope import cpu_timed_scope, enter_scope, exit_scope, scope

__all__ = ["start", "activate", "deactivate", "finalize", "profile", "scope", "cpu_timed_scope",
           "enter_scope", "exit_scope", "DEFAULT_PROFILE_NAME", "context", "data"]
