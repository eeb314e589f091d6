"""`warpweave.language.extra.cuda`: CUDA-specific kernel helpers under Triton's module path
(`triton.language.extra.cuda`)."""

from . import libdevice  # noqa: E402,F401  (`tl.extra.cuda.libdevice`, as in Triton)
