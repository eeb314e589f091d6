"""`warpweave.runtime.autotuner`: the names Triton code imports from `triton.runtime.autotuner`."""

from ..autotuner import Autotuner, Config, Heuristics, autotune, heuristics  # noqa: F401

__all__ = ["Autotuner", "Config", "Heuristics", "autotune", "heuristics"]
