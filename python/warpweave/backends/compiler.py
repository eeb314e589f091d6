"""`GPUTarget`: what `driver.active.get_current_target()` returns, as in Triton."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

__all__ = ["GPUTarget"]


@dataclass(frozen=True)
class GPUTarget:
    """A compilation target: `backend` ('cuda' for warpweave's GPUs), `arch` (the compute
    capability as major * 10 + minor, e.g. 90 for Hopper) and `warp_size` (32)."""

    backend: str
    arch: Union[int, str]
    warp_size: int

    def is_cuda_backend(self) -> bool:
        return self.backend in ("cuda", "tileir")

    def sm(self) -> str:
        """warpweave's target name for this architecture (sm_90a, sm_100a, sm_80)."""
        if self.backend not in ("cuda", "tileir") or not isinstance(self.arch, int):
            raise ValueError(f"{self!r} is not a CUDA target")
        return {90: "sm_90a", 100: "sm_100a"}.get(self.arch, f"sm_{self.arch}")
