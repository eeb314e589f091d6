"""`triton.language.extra.cuda.libdevice`: the functions of warpweave.language.extra.libdevice."""

from ..libdevice import *  # noqa: F401,F403
from ..libdevice import SUPPORTED, __getattr__  # noqa: F401
