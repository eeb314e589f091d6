"""`warpweave.language` (imported as `tl`): the names kernels use.

Kernels are compiled by warpweave's C++ front end, never executed by Python, so the functions here
exist only so that `import warpweave.language as tl` works, editors resolve the names, and a call
from ordinary Python code fails with a clear message. The dtypes and `constexpr` are real objects:
host code passes them as compile-time arguments (`DTYPE=tl.float16`).
"""

from __future__ import annotations

__all__ = [
    "constexpr", "dtype", "pointer_type", "tensor", "cdiv", "next_power_of_2", "PropagateNan",
    "ReductionOrdering",
    "int1", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float8e4nv", "float8e5", "float8e4b15", "float8e4b8", "float8e5b16", "float16", "bfloat16", "float32", "float64",
    "pi32_t", "const", "constexpr_type",
]


class constexpr:
    """A compile-time value. As a parameter annotation (`BLOCK: tl.constexpr`) it marks the
    parameter as specialized at compile time; as a wrapper (`tl.constexpr(4)`) it holds a value
    that host code passes into a kernel's environment."""

    def __init__(self, value=None):
        self.value = value.value if isinstance(value, constexpr) else value

    def __repr__(self):
        return f"constexpr[{self.value!r}]"

    def __eq__(self, other):
        other = other.value if isinstance(other, constexpr) else other
        return self.value == other

    def __hash__(self):
        return hash(self.value)

    def __index__(self):
        return self.value.__index__()

    def __bool__(self):
        return bool(self.value)

    def __int__(self):
        return int(self.value)

    @property
    def type(self):
        """Triton's type of a compile-time value: constexpr_type(value)."""
        return constexpr_type(self.value)


class constexpr_type:
    """The type of a compile-time value (what `x.type` gives for a constexpr `x` in a kernel):
    two are equal when their values are."""

    def __init__(self, value):
        self.value = value.value if isinstance(value, constexpr) else value

    def __eq__(self, other):
        return isinstance(other, constexpr_type) and self.value == other.value

    def __hash__(self):
        return hash(self.value)

    def __repr__(self):
        return f"constexpr_type[{self.value}]"


class const:
    """A parameter annotation (`in_ptr: tl.const`) marking a pointer to constant data: the kernel
    cannot store or run atomics through it, and it does not mix with writable pointers where one
    type is needed (both branches of an `if`, a helper's returns, loop-carried values)."""


class dtype:
    """An element type. `name` is Triton's spelling (float16), `sig` the signature spelling (fp16)
    that the compiler and `wwc --signature` use."""

    __slots__ = ("name", "sig", "bits")

    # Triton's names of the element types, by kind (`tl.dtype(name)` takes any of them).
    SINT_TYPES = ["int8", "int16", "int32", "int64"]
    UINT_TYPES = ["int1", "uint8", "uint16", "uint32", "uint64"]
    FP_TYPES = ["fp8e4b15", "fp8e4nv", "fp8e4b8", "fp8e5", "fp8e5b16", "fp16", "bf16", "fp32",
                "fp64"]
    STANDARD_FP_TYPES = ["fp16", "bf16", "fp32", "fp64"]
    OTHER_TYPES = ["void"]

    def __new__(cls, name: str, sig: str | None = None, bits: int | None = None):
        if sig is not None:
            return super().__new__(cls)
        # tl.dtype("fp16") / tl.dtype("float16"): the one object of that type.
        from ..runtime.jit import type_canonicalisation_dict

        found = DTYPES.get(type_canonicalisation_dict.get(name, name))
        if found is None:
            raise ValueError(f"tl.dtype: unknown element type {name!r}")
        return found

    def __init__(self, name: str, sig: str | None = None, bits: int | None = None):
        if sig is None:  # an existing dtype returned by __new__
            return
        self.name = name
        self.sig = sig
        self.bits = bits

    @property
    def primitive_bitwidth(self) -> int:
        return self.bits

    @property
    def fp_mantissa_width(self) -> int:
        """A float type's explicit mantissa bits (Triton's field; floats only)."""
        if not self.is_floating():
            raise AttributeError(f"{self.name} is not a floating-point type")
        return _FP_LAYOUT[self.sig][0]

    @property
    def exponent_bias(self) -> int:
        """A float type's exponent bias (Triton's field; floats only)."""
        if not self.is_floating():
            raise AttributeError(f"{self.name} is not a floating-point type")
        return _FP_LAYOUT[self.sig][1]

    @property
    def itemsize(self) -> int:
        return self.bits // 8

    def is_floating(self) -> bool:
        return self.sig.startswith(("fp", "bf"))

    def is_int(self) -> bool:
        return not self.is_floating()

    def is_int_signed(self) -> bool:
        return self.sig.startswith("i")

    def mangle(self) -> str:
        """The type's name in mangled function keys, as Triton writes it: i32, u8, fp16, bf16."""
        if self.is_floating():
            return self.sig
        return ("u" if self.name in self.UINT_TYPES else "i") + str(self.bits)

    def __repr__(self):
        # An expression that evaluates back to this dtype, as Triton's.
        return f"warpweave.language.{self.name}"

    def __str__(self):
        # Triton's short name: int32, uint8, fp16, bf16, fp8e4nv...
        return self.name if self.sig[0] in "iu" else self.sig

    def __eq__(self, other):
        return isinstance(other, dtype) and other.sig == self.sig

    def __hash__(self):
        return hash(("dtype", self.sig))


class pointer_type:
    """The type of a pointer argument (`*fp16`), as `x_ptr.dtype` in a kernel names it."""

    def __init__(self, element_ty: dtype):
        self.element_ty = element_ty

    def __repr__(self):
        return f"pointer<{self.element_ty!r}>"

    def __eq__(self, other):
        return isinstance(other, pointer_type) and other.element_ty == self.element_ty

    def __hash__(self):
        return hash(("ptr", self.element_ty))


int1 = dtype("int1", "i1", 1)
int8 = dtype("int8", "i8", 8)
int16 = dtype("int16", "i16", 16)
int32 = dtype("int32", "i32", 32)
int64 = dtype("int64", "i64", 64)
uint8 = dtype("uint8", "u8", 8)
uint16 = dtype("uint16", "u16", 16)
uint32 = dtype("uint32", "u32", 32)
uint64 = dtype("uint64", "u64", 64)
float8e4nv = dtype("float8e4nv", "fp8e4nv", 8)
float8e5 = dtype("float8e5", "fp8e5", 8)
# Triton's other float8 formats (fp8e4b15: bias 15, 0x7F NaN; fp8e4b8 / fp8e5b16: torch's fnuz
# types, 0x80 NaN): kernels convert them in software (docs/language.md).
float8e4b15 = dtype("float8e4b15", "fp8e4b15", 8)
float8e4b8 = dtype("float8e4b8", "fp8e4b8", 8)
float8e5b16 = dtype("float8e5b16", "fp8e5b16", 8)
float16 = dtype("float16", "fp16", 16)
bfloat16 = dtype("bfloat16", "bf16", 16)
float32 = dtype("float32", "fp32", 32)
float64 = dtype("float64", "fp64", 64)
# Triton's one named pointer type (triton.language.pi32_t).
pi32_t = pointer_type(int32)

# (mantissa bits, exponent bias) of each float type, as Triton's dtype reports them.
_FP_LAYOUT = {"fp8e4nv": (3, 7), "fp8e5": (2, 15), "fp8e4b15": (3, 15), "fp8e4b8": (3, 8),
              "fp8e5b16": (2, 16), "fp16": (10, 15), "bf16": (7, 127), "fp32": (23, 127),
              "fp64": (52, 1023)}

DTYPES = {d.sig: d for d in (int1, int8, int16, int32, int64, uint8, uint16, uint32, uint64,
                             float8e4nv, float8e5, float8e4b15, float8e4b8, float8e5b16, float16,
                             bfloat16, float32, float64)}


class tensor:
    """The type of kernel values (`x: tl.tensor` annotations, `isinstance` checks in host code).
    Kernels are compiled, not run, so no instance exists on the host."""

    def __init__(self, *args, **kwargs):
        raise TypeError("tl.tensor values exist only inside @jit kernels")


class PropagateNan:
    """propagate_nan of tl.maximum / minimum / clamp: NONE (the default: a NaN operand yields the
    other one) or ALL (NaN wins), as Triton's."""
    NONE = "NONE"
    ALL = "ALL"


class ReductionOrdering:
    """reduction_ordering of tl.sum / tl.reduce (and the other reductions), as Triton's:
    UNORDERED (the default: any order) or INNER_TREE (adjacent pairs, then pairs of pairs, in
    index order: the same bits whatever num_warps, layout or target)."""

    def __init__(self, name: str):
        self.name = name

    def __eq__(self, other):
        return isinstance(other, ReductionOrdering) and self.name == other.name

    def __hash__(self):
        return hash(self.name)

    def __repr__(self):
        return f"ReductionOrdering.{self.name.upper()}"


ReductionOrdering.UNORDERED = ReductionOrdering("unordered")
ReductionOrdering.INNER_TREE = ReductionOrdering("inner_tree")


def cdiv(x, y):
    """ceil(x / y) for integers; usable in host code (grids) as well as in kernels."""
    x = x.value if isinstance(x, constexpr) else x
    y = y.value if isinstance(y, constexpr) else y
    return (x + y - 1) // y


def next_power_of_2(n: int) -> int:
    """The smallest power of 2 >= n (1 for n <= 1); usable in host code."""
    n = n.value if isinstance(n, constexpr) else n
    if isinstance(n, bool) or not hasattr(n, "__index__"):
        raise TypeError(f"next_power_of_2 expects an int, got {n!r}")
    n = int(n)
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def _kernel_only(module: str, name: str):
    def stub(*args, **kwargs):
        raise RuntimeError(
            f"{module}.{name}() can only be called inside a @ww.jit kernel, which warpweave "
            f"compiles; it cannot run as ordinary Python. Launch the kernel with "
            f"kernel[grid](...), or set WARPWEAVE_INTERPRET=1 to run it in the interpreter.")

    stub.__name__ = name
    stub.__qualname__ = name
    stub.__doc__ = f"`{module}.{name}`: kernel-only (see LANGUAGE.md)."
    return stub


_KERNEL_FUNCTIONS = """
program_id num_programs arange zeros zeros_like full load store broadcast broadcast_to
expand_dims reshape view permute trans split join where maximum minimum sum max min argmax argmin
reduce dot exp exp2 log log2 sqrt sqrt_rn rsqrt abs fma sigmoid cast static_assert static_range
range multiple_of max_contiguous max_constancy make_tensor_descriptor atomic_add atomic_max
atomic_min atomic_and atomic_or atomic_xor atomic_xchg atomic_cas debug_barrier device_print
static_print device_assert cumsum cumprod associative_scan sort histogram gather rand randn randint
clamp erf tanh cos sin floor ceil div_rn fdiv umulhi inline_asm_elementwise make_block_ptr advance
xor_sum flip interleave ravel swizzle2d assume condition squeeze unsqueeze topk map_elementwise
randint4x rand4x randn4x philox philox_impl uint_to_uniform_float pair_uniform_to_normal
""".split()

for _name in _KERNEL_FUNCTIONS:
    globals()[_name] = _kernel_only("tl", _name)
    __all__.append(_name)
del _name

from . import math  # noqa: E402  (tl.math.*, also kernel-only)
from . import random  # noqa: E402  (tl.random.*: the same functions as tl.rand...)

__all__ += ["math", "random"]
