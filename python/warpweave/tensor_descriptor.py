"""Host-side TMA tensor descriptors (`ww.TensorDescriptor`), as in Triton: built from a tensor,
its shape, strides and a block shape; the 128-byte CUtensorMap is encoded at launch, so
`block_shape` may be changed after construction (autotuning does this)."""

from __future__ import annotations

import re

from ._native_loader import native


def default_swizzle(inner_bytes: int) -> int:
    """The widest TMA swizzle (128, 64, 32 bytes, or 0) whose span the innermost block row fills:
    the layout the compiler gives a shared-memory tile that TMA writes."""
    for s in (128, 64, 32):
        if inner_bytes >= s:
            return s
    return 0


def box_shape(block_shape, dtype: str, swizzle: int | None) -> list:
    """The TMA box for `block_shape` under `swizzle`: a kernel whose swizzled tile rows are wider
    than the swizzle span lays the tile out as column blocks of that span and copies one block
    at a time, so the box is one span wide (the compiler declares the swizzle per descriptor).
    A box has at most 256 elements per dim: the kernel copies a longer block as several boxes,
    each a contiguous part of its tile, so past the first dim (innermost first) longer than 256
    the box is 1 wide (the compiler's tmaBoxes makes the same split)."""
    from .language import DTYPES

    elem = max(DTYPES[dtype].bits // 8, 1)
    box = list(block_shape)
    if swizzle and box[-1] * elem > swizzle:
        box[-1] = swizzle // elem
    for d in reversed(range(len(box))):
        if box[d] > 256:
            box[d] = 256
            box[:d] = [1] * d
            break
    return box


# CUtensorMap bytes by (base dtype, address, shape, strides, block shape, swizzle), oldest dropped
# first: wrappers build a new descriptor per call over tensors that the caching allocator often
# places at the same address, and the bytes depend on the key alone.
_encoded_maps: dict = {}
_ENCODED_MAPS_KEPT = 256


# What TensorDescriptor takes in one pass when every item is an int (torch.Size is a tuple).
# bool is an int subclass, not `int` itself, so True still reaches _int_list's check.
_SEQUENCES = (list, tuple)


def _int_list(name: str, values) -> list:
    """A descriptor's shape / strides / block_shape as ints, or a TypeError naming it."""
    if isinstance(values, (str, bytes, bytearray)) or not hasattr(values, "__iter__"):
        raise TypeError(f"TensorDescriptor: {name} must be a sequence of ints, got "
                        f"{type(values).__name__}")
    out = []
    for v in values:
        if isinstance(v, bool) or not hasattr(v, "__index__"):
            raise TypeError(f"TensorDescriptor: {name} must be a sequence of ints, got "
                            f"{v!r} in {list(values)!r}")
        out.append(int(v))
    return out


class TensorDescriptor:
    def __init__(self, base, shape, strides, block_shape, padding: str = "zero"):
        if padding != "zero":
            raise ValueError(f"TensorDescriptor padding={padding!r}: only 'zero' is supported")
        self.base = base
        # Wrappers build three descriptors per call: lists / tuples of plain ints are checked
        # in one loop over all three (the general conversion below names the bad argument).
        plain = (isinstance(shape, _SEQUENCES) and isinstance(strides, _SEQUENCES)
                 and isinstance(block_shape, _SEQUENCES))
        if plain:
            for v in (*shape, *strides, *block_shape):
                if type(v) is not int:
                    plain = False
                    break
        if plain:
            self.shape, self.strides = list(shape), list(strides)
            self.block_shape = block = list(block_shape)
        else:
            self.shape = _int_list("shape", shape)
            self.strides = _int_list("strides", strides)
            self.block_shape = block = _int_list("block_shape", block_shape)
        for b in block:
            if b <= 0:
                raise ValueError(f"TensorDescriptor: block_shape {block} must be positive")
        self.padding = padding
        rank = len(self.shape)
        if not (rank == len(self.strides) == len(block)):
            raise ValueError(f"TensorDescriptor: shape {self.shape}, strides {self.strides} and "
                             f"block_shape {block} must have the same rank")
        if not 1 <= rank <= 5:
            raise ValueError(f"TensorDescriptor: rank {rank} is not 1..5")
        self._encoded = None

    @staticmethod
    def from_tensor(tensor, block_shape):
        """Over a whole torch tensor or NumPy array (NumPy strides are in bytes: converted)."""
        if not hasattr(tensor, "shape") or not (callable(getattr(tensor, "stride", None))
                                                or hasattr(tensor, "strides")):
            raise TypeError(f"TensorDescriptor.from_tensor expects a torch tensor or a NumPy "
                            f"array, got {type(tensor).__name__}")
        if callable(getattr(tensor, "stride", None)):
            strides = list(tensor.stride())
        else:
            strides = [s // tensor.itemsize for s in tensor.strides]
        return TensorDescriptor(tensor, list(tensor.shape), strides, block_shape)

    def check_tma_rules(self, name: str = "descriptor"):
        """Raises LaunchError where the GPU's TMA unit would refuse this descriptor (the rules
        cuTensorMapEncodeTiled applies), so that the interpreter accepts only what the GPU runs."""
        from .language import DTYPES

        elem = max(DTYPES[self.dtype_sig].bits // 8, 1)
        problem = None
        if self.strides[-1] != 1:
            problem = f"the innermost (last) dimension must have stride 1, got {self.strides[-1]}"
        elif any(d <= 0 for d in self.shape):
            problem = f"every dimension must be positive, got shape {self.shape}"
        elif any(b < 1 or (b > 256 and b % 256) for b in self.block_shape):
            problem = (f"block_shape {self.block_shape} has a dimension that is not in 1..256 "
                       f"or a multiple of 256 (copied as boxes of 256)")
        else:
            for dim, stride in enumerate(self.strides[:-1]):
                if stride * elem <= 0 or stride * elem % 16 != 0:
                    problem = (f"stride of dimension {dim} is {stride * elem} bytes; TMA needs a "
                               f"positive multiple of 16")
                    break
        if problem is None:
            address = (self.base.__array_interface__["data"][0]
                       if hasattr(self.base, "__array_interface__") else self.base.data_ptr())
            if address % 16 != 0:
                problem = "the base address must be 16-byte aligned"
        if problem is not None:
            raise native().LaunchError(f"argument '{name}': tensor descriptor: {problem}")

    @property
    def dtype_sig(self) -> str:
        from .jit import dtype_sig

        return dtype_sig(self.base, "TensorDescriptor.base")

    def signature_type(self) -> str:
        return f"desc<{self.dtype_sig},{'x'.join(str(b) for b in self.block_shape)}>"

    def encode(self, swizzle: int | None = None) -> bytes:
        """The CUtensorMap bytes for the current base, shape, strides and block shape."""
        base = self.base
        address = base.data_ptr()
        # Keyed by the base's dtype object: the signature spelling is worked out on a miss only.
        key = (base.dtype, address, tuple(self.shape), tuple(self.strides),
               tuple(self.block_shape), swizzle, isinstance(swizzle, Fp4Padded))
        if self._encoded is not None and self._encoded[0] == key:
            return self._encoded[1]
        data = _encoded_maps.get(key)
        if data is None:
            data = self._encode_new(address, swizzle)
            if len(_encoded_maps) >= _ENCODED_MAPS_KEPT:
                del _encoded_maps[next(iter(_encoded_maps))]
            _encoded_maps[key] = data
        self._encoded = (key, data)
        return data

    def _encode_new(self, address: int, swizzle: int | None) -> bytes:
        dtype = self.dtype_sig
        if isinstance(swizzle, Fp4Padded):
            # Packed e2m1 bytes loaded padded: the map counts 4-bit values along the innermost
            # dimension (two a byte), strides stay in bytes, boxes are 128 values wide.
            if dtype not in ("u8", "i8"):
                raise native().LaunchError(
                    f"tensor descriptor of {dtype}: the e2m1 operand of a mixed "
                    f"tlx.async_dot_scaled is packed two values a byte in a uint8 tensor")
            shape = self.shape[:-1] + [2 * self.shape[-1]]
            block = self.block_shape[:-1] + [2 * self.block_shape[-1]]
            return native().encode_tensor_map("fp4_padded", address, shape, self.strides,
                                              box_shape(block, "u8", int(swizzle)),
                                              int(swizzle))
        # Only a kernel's declared swizzle may narrow the box (see box_shape).
        box = box_shape(self.block_shape, dtype, swizzle)
        if swizzle is None:
            from .language import DTYPES

            inner = self.block_shape[-1] * max(DTYPES[dtype].bits // 8, 1)
            swizzle = default_swizzle(inner)
        return native().encode_tensor_map(dtype, address, self.shape, self.strides, box,
                                          swizzle)

    def __repr__(self):
        return (f"TensorDescriptor(shape={self.shape}, strides={self.strides}, "
                f"block_shape={self.block_shape}, dtype={self.dtype_sig})")


_SWIZZLE = re.compile(r"swizzle\s*=\s*(\d+)")


class Fp4Padded(int):
    """The swizzle of a descriptor whose TMA loads fill padded e2m1 tiles (the e2m1 operand of a
    mixed tlx.async_dot_scaled, `desc<..., fp4_padded>`): encode() then builds the map of 4-bit
    values that TMA writes 16 to 16 bytes (CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN16B)."""


def swizzle_of(param_type: str) -> int | None:
    """The swizzle a kernel's descriptor parameter declares (`desc<..., swizzle=128>`), as an
    Fp4Padded where it declares `fp4_padded`."""
    m = _SWIZZLE.search(param_type)
    if not m:
        return None
    return Fp4Padded(int(m.group(1))) if "fp4_padded" in param_type else int(m.group(1))
