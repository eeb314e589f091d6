"""`warpweave.runtime.jit`: the names Triton code imports from `triton.runtime.jit`."""

from ..jit import JITFunction, KernelInterface, jit  # noqa: F401

__all__ = ["JITFunction", "KernelInterface", "jit", "MockTensor", "TensorWrapper", "reinterpret",
           "type_canonicalisation_dict"]

# Every spelling of an element type that Triton's host code uses, to the signature spelling.
type_canonicalisation_dict = {
    "bool": "i1", "int1": "i1", "i1": "i1",
    "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64",
    "i8": "i8", "i16": "i16", "i32": "i32", "i64": "i64",
    "uint8": "u8", "uint16": "u16", "uint32": "u32", "uint64": "u64",
    "u8": "u8", "u16": "u16", "u32": "u32", "u64": "u64",
    "float16": "fp16", "half": "fp16", "fp16": "fp16",
    "bfloat16": "bf16", "bf16": "bf16",
    "float32": "fp32", "float": "fp32", "fp32": "fp32",
    "float64": "fp64", "double": "fp64", "fp64": "fp64",
    "float8e4nv": "fp8e4nv", "float8_e4m3fn": "fp8e4nv", "fp8e4nv": "fp8e4nv",
    "float8e5": "fp8e5", "float8_e5m2": "fp8e5", "fp8e5": "fp8e5",
    "float8e4b15": "fp8e4b15", "fp8e4b15": "fp8e4b15",
    "float8e4b8": "fp8e4b8", "float8_e4m3fnuz": "fp8e4b8", "fp8e4b8": "fp8e4b8",
    "float8e5b16": "fp8e5b16", "float8_e5m2fnuz": "fp8e5b16", "fp8e5b16": "fp8e5b16",
}


class TensorWrapper:
    """A tensor's memory read as another element type of the same width (`reinterpret`): a
    uint32 or float8 view of a torch tensor whose own dtype torch cannot express. Kernels take
    it as a pointer to `dtype`."""

    def __init__(self, base, dtype):
        self.dtype = dtype
        self.base = base
        self.data = base.data
        self.device = base.device
        self.shape = self.base.shape

    @property
    def is_cuda(self):
        return bool(getattr(self.base, "is_cuda", False))

    def data_ptr(self):
        return self.base.data_ptr()

    def stride(self, *args):
        return self.base.stride(*args)

    def numel(self):
        return self.base.numel()

    def dim(self):
        return self.base.dim()

    def __str__(self) -> str:
        return f"TensorWrapper[{self.dtype}]({self.base})"

    def element_size(self):
        return self.base.element_size()

    def cpu(self):
        return TensorWrapper(self.base.cpu(), self.dtype)

    def copy_(self, other):
        self.base.copy_(other.base if isinstance(other, TensorWrapper) else other)
        return self

    def clone(self):
        return TensorWrapper(self.base.clone(), self.dtype)

    def to(self, device):
        return TensorWrapper(self.base.to(device), self.dtype)

    def new_empty(self, sizes):
        return TensorWrapper(self.base.new_empty(sizes), self.dtype)


def reinterpret(tensor, dtype):
    """`tensor`'s memory as elements of `dtype` (a tl dtype): a TensorWrapper, or the tensor
    itself when a wrapper is read back as its base's own dtype."""
    if isinstance(tensor, TensorWrapper):
        if dtype == tensor.base.dtype:
            return tensor.base
        return TensorWrapper(tensor.base, dtype)
    if hasattr(tensor, "data_ptr"):
        return TensorWrapper(tensor, dtype)
    raise TypeError(f"cannot reinterpret a {type(tensor).__name__}: expected a tensor")


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
