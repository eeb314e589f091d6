"""`gluon.language` placeholder (see warpweave.experimental.gluon): any attribute is a stand-in
that raises NotImplementedError when called or indexed."""

from . import _core  # noqa: F401

_WHY = "Gluon is not supported by warpweave"


class _Placeholder:
    def __init__(self, name):
        self._name = name

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Placeholder(f"{self._name}.{name}")

    def __call__(self, *args, **kwargs):
        raise NotImplementedError(f"{_WHY}: {self._name}")

    def __repr__(self):
        return f"<gluon placeholder {self._name}>"


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    return _Placeholder(f"ttgl.{name}")
