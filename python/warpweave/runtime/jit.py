"""`warpweave.runtime.jit`: the names Triton code imports from `triton.runtime.jit`."""

from ..jit import JITFunction, KernelInterface, jit  # noqa: F401

__all__ = ["JITFunction", "KernelInterface", "jit", "MockTensor"]


class MockTensor:
    """A stand-in for a tensor argument when only compiling (Triton's): its dtype and shape,
    address 0 (so it is taken as 16-byte aligned)."""

    def __init__(self, dtype, shape=None):
        self.dtype = dtype
        self.shape = list(shape) if shape is not None else [1]
        self.is_cuda = True

    @staticmethod
    def wrap_dtype(arg):
        if type(arg).__module__ == "torch" and str(arg).startswith("torch."):
            return MockTensor(arg)
        return arg

    def data_ptr(self) -> int:
        return 0

    def stride(self):
        strides = []
        step = 1
        for s in reversed(self.shape):
            strides.append(step)
            step *= s
        return tuple(reversed(strides))
