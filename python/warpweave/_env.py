"""Triton's environment variables, honoured beside warpweave's own.

Every `WARPWEAVE_X` that warpweave reads (in Python and in the C++ runtime) also has the spelling
`TRITON_X`, and a few of Triton's own names map onto warpweave's where they mean the same thing
(`TRITON_PTXAS_PATH`, `TRITON_LIBCUDA_PATH`, `TRITON_ALWAYS_COMPILE`). `mirror()` copies each set
Triton variable into its warpweave name unless that one is set too (the warpweave spelling wins),
so that every reader, Python or C++ (getenv), sees it. It runs when `warpweave` is imported and
again when `python -m warpweave run` starts a script: a TRITON_ variable set after that is not
seen, as Triton itself reads most of its knobs once.
"""

from __future__ import annotations

import os

# warpweave's variables (suffix after WARPWEAVE_): TRITON_<suffix> is an alias of each.
NAMES = (
    "INTERPRET", "TARGET", "CACHE_DIR", "CACHE_DISABLE", "TRAP_HANGS", "PTXAS", "LIBCUDA",
    "INTERP_SEED", "INTERP_SCHEDULES", "PRINT_AUTOTUNING", "BENCH_POINTS", "CACHE_AUTOTUNING",
    "OPS_TUNING", "OPS_CONFIG", "OVERRIDE_ARCH",
)


def _libcuda_path(value: str) -> str:
    # Triton's TRITON_LIBCUDA_PATH names the directory holding libcuda.so; warpweave's
    # WARPWEAVE_LIBCUDA names the library file itself.
    if os.path.isdir(value):
        for name in ("libcuda.so.1", "libcuda.so"):
            if os.path.exists(os.path.join(value, name)):
                return os.path.join(value, name)
        return os.path.join(value, "libcuda.so.1")
    return value


# Triton's own names whose meaning warpweave shares: TRITON name -> (WARPWEAVE name, converter).
UPSTREAM = {
    "TRITON_PTXAS_PATH": ("WARPWEAVE_PTXAS", str),
    "TRITON_LIBCUDA_PATH": ("WARPWEAVE_LIBCUDA", _libcuda_path),
    # Triton recompiles instead of reading its cache; warpweave's switch skips its disk cache.
    "TRITON_ALWAYS_COMPILE": ("WARPWEAVE_CACHE_DISABLE", str),
}


def aliases() -> dict:
    """{TRITON name: (WARPWEAVE name, converter)} for every alias."""
    out = {f"TRITON_{n}": (f"WARPWEAVE_{n}", str) for n in NAMES}
    out.update(UPSTREAM)
    return out


def mirror(environ=None) -> dict:
    """Copies set TRITON_ variables to their WARPWEAVE_ names where those are unset; returns
    {WARPWEAVE name: value} of what it set."""
    env = os.environ if environ is None else environ
    done = {}
    for triton_name, (ww_name, convert) in aliases().items():
        value = env.get(triton_name)
        if value is None or ww_name in env or ww_name in done:
            continue
        done[ww_name] = convert(value)
    for k, v in done.items():
        env[k] = v  # os.environ also calls putenv: the C++ runtime's getenv sees it
    return done


def get(name: str, default=None):
    """os.environ[WARPWEAVE_name], else os.environ[TRITON_name], else `default` (`name` without
    the prefix, e.g. "INTERPRET")."""
    value = os.environ.get("WARPWEAVE_" + name)
    if value is None:
        value = os.environ.get("TRITON_" + name)
    return default if value is None else value
