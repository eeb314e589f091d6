"""`warpweave.language.extra`: where Triton keeps TLX (`triton.language.extra.tlx`).

`warpweave.language.extra.tlx` is the same module object as `warpweave.tlx`; its submodules
(`warp_spec`, `mem_ops`) live in the `tlx/` folder beside this file, which becomes the module's
package path here. (`python -m warpweave run` adds `tlx.tutorials`, the TLX tutorials folder of
the script's tree, under the same name as in Triton.)
"""

from __future__ import annotations

import os
import sys

from ... import tlx

_SUBMODULES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tlx")
if _SUBMODULES not in list(getattr(tlx, "__path__", [])):
    tlx.__path__ = [_SUBMODULES] + list(getattr(tlx, "__path__", []))
sys.modules.setdefault(__name__ + ".tlx", tlx)

from . import cuda  # noqa: E402  (`tl.extra.cuda` without an import of its own, as in Triton)

__all__ = ["tlx", "cuda"]
