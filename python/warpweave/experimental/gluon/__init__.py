"""`warpweave.experimental.gluon`: a placeholder. Gluon is a separate language of Triton that
warpweave does not implement; the names exist so that files importing them load, and decorating
is allowed, but launching or compiling a Gluon kernel raises NotImplementedError."""

from . import language  # noqa: F401

_WHY = "Gluon kernels are not supported by warpweave (write the kernel with tl and tlx)"


class GluonJITFunction:
    def __init__(self, fn):
        self.fn = fn
        self.__name__ = getattr(fn, "__name__", "gluon_kernel")

    def __getitem__(self, grid):
        raise NotImplementedError(_WHY)

    def __call__(self, *args, **kwargs):
        raise NotImplementedError(_WHY)

    def warmup(self, *args, **kwargs):
        raise NotImplementedError(_WHY)


def jit(fn=None, **kwargs):
    if fn is None:
        return lambda f: GluonJITFunction(f)
    return GluonJITFunction(fn)
