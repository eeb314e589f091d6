"""`warpweave._internal_testing`: the device predicates Triton's tests import from
`triton._internal_testing` (is_cuda, is_hopper, is_blackwell, is_hip...), with Triton's meaning:
each describes the GPU the tests run on, so on a machine without one (or with the interpreter
forced by WARPWEAVE_INTERPRET / TRITON_INTERPRET) every predicate is False and GPU-only tests
skip. warpweave targets NVIDIA GPUs only: the HIP / AMD predicates are always False.
"""

from __future__ import annotations

import os

__all__ = [
    "is_interpreter", "get_current_target", "is_cuda", "is_ampere_or_newer", "is_hopper",
    "is_hopper_or_newer", "is_blackwell", "is_blackwell_ultra", "is_rubin", "is_sm12x", "is_hip",
    "is_hip_cdna", "is_hip_cdna2", "is_hip_cdna3", "is_hip_cdna4", "is_hip_cdna3_or_newer",
    "is_hip_rdna", "is_hip_rdna3", "is_hip_rdna4", "is_hip_gfx1250", "is_xpu",
    "get_hip_lds_size", "int_dtypes", "uint_dtypes", "integral_dtypes", "float_dtypes",
    "float_dtypes_with_bfloat16", "dtypes", "dtypes_with_bfloat16", "torch_float8_dtypes",
    "torch_dtypes", "tma_dtypes", "numpy_random", "str_to_triton_dtype", "torch_dtype_name",
    "to_triton", "to_numpy", "unwrap_tensor", "default_alloc_fn", "supports_tma", "supports_ws", "tma_skip_msg",
    "_fresh_knobs_impl",
]

int_dtypes = ["int8", "int16", "int32", "int64"]
uint_dtypes = ["uint8", "uint16", "uint32", "uint64"]
integral_dtypes = int_dtypes + uint_dtypes
float_dtypes = ["float16", "float32", "float64"]
float_dtypes_with_bfloat16 = float_dtypes + ["bfloat16"]
dtypes = integral_dtypes + float_dtypes
dtypes_with_bfloat16 = dtypes + ["bfloat16"]
torch_float8_dtypes = ["float8_e4m3fn", "float8_e5m2"]
torch_dtypes = ["bool"] + int_dtypes + ["uint8"] + float_dtypes + ["bfloat16"]
tma_dtypes = sorted(set(dtypes_with_bfloat16) - {"int64", "uint64", "float64"})


def is_interpreter() -> bool:
    for var in ("WARPWEAVE_INTERPRET", "TRITON_INTERPRET"):
        if os.environ.get(var, "0") not in ("", "0", "false", "False"):
            return True
    return False


def get_current_target():
    """The GPU's GPUTarget, or None under the interpreter or without a GPU."""
    if is_interpreter():
        return None
    from .runtime.driver import driver

    active = driver.active
    if not active.has_gpu():
        return None
    return active.get_current_target()


def _arch():
    target = get_current_target()
    if target is None or not target.is_cuda_backend():
        return None
    return target.arch


def is_cuda() -> bool:
    return _arch() is not None


def is_ampere_or_newer() -> bool:
    a = _arch()
    return a is not None and a >= 80


def is_hopper() -> bool:
    a = _arch()
    return a is not None and a // 10 == 9


def is_hopper_or_newer() -> bool:
    a = _arch()
    return a is not None and a >= 90


def is_blackwell() -> bool:
    a = _arch()
    return a is not None and a // 10 in (10, 11)


def is_blackwell_ultra() -> bool:
    return _arch() == 103


def is_rubin() -> bool:
    return _arch() == 107


def is_sm12x() -> bool:
    a = _arch()
    return a is not None and a // 10 == 12


def _false() -> bool:
    return False


is_hip = is_hip_cdna = is_hip_cdna2 = is_hip_cdna3 = is_hip_cdna4 = _false
is_hip_cdna3_or_newer = is_hip_rdna = is_hip_rdna3 = is_hip_rdna4 = is_hip_gfx1250 = _false
is_xpu = _false


def get_hip_lds_size() -> int:
    return 65536


def numpy_random(shape, dtype_str, rs=None, low=None, high=None):
    """A random NumPy array of `dtype_str` (a name above), as Triton's tests expect: integers over
    the type's range (or [low, high)) with no zeros; floats from a normal distribution (bfloat16
    ones exactly representable in bfloat16, as float32); float8 names give int8 bit patterns
    from 20 to 39; bool from the sign of a normal sample."""
    import numpy as np

    if isinstance(shape, int):
        shape = (shape,)
    if rs is None:
        rs = np.random.RandomState(seed=17)
    if dtype_str in integral_dtypes:
        info = np.iinfo(getattr(np, dtype_str))
        lo = info.min if low is None else max(low, info.min)
        hi = info.max if high is None else min(high, info.max)
        x = rs.randint(lo, hi, shape, dtype=getattr(np, dtype_str))
        x[x == 0] = 1  # division tests never see a zero
        return x
    if dtype_str and "float8" in dtype_str:
        return rs.randint(20, 40, shape, dtype=np.int8)
    if dtype_str in float_dtypes:
        return rs.normal(0, 1, shape).astype(dtype_str)
    if dtype_str == "bfloat16":
        bits = rs.normal(0, 1, shape).astype(np.float32).view(np.uint32) & np.uint32(0xFFFF0000)
        return bits.view(np.float32)
    if dtype_str in ("bool", "int1", "bool_"):
        return rs.normal(0, 1, shape) > 0.0
    raise ValueError(f"numpy_random: unknown dtype {dtype_str!r}")


def str_to_triton_dtype(name: str):
    """The tl dtype of a type name in any of Triton's spellings (int32, i32, float16, fp16...)."""
    from . import language as tl
    from .runtime.jit import type_canonicalisation_dict

    sig = type_canonicalisation_dict.get(name, name)
    if sig not in tl.DTYPES:
        raise ValueError(f"unknown element type {name!r}")
    return tl.DTYPES[sig]


def torch_dtype_name(dtype) -> str:
    """'int64' for torch.int64 or tl.int64."""
    from . import language as tl

    if isinstance(dtype, tl.dtype):
        return dtype.name
    text = str(dtype)
    if type(dtype).__module__ == "torch" and text.startswith("torch."):
        return text[len("torch."):]
    raise TypeError(f"not a tl or torch dtype: {type(dtype).__name__}")


def to_triton(x, device, dst_type=None):
    """A torch tensor on `device` holding NumPy array `x`: unsigned arrays (which torch lacks
    beyond uint8) and float8 bit patterns (`dst_type` float8...) as reinterpret()ed wrappers,
    float32 with `dst_type` 'bfloat16' converted."""
    import numpy as np
    import torch

    from . import language as tl
    from .runtime.jit import reinterpret

    t = x.dtype.name
    if t in uint_dtypes:
        signed = x.astype(getattr(np, t[1:]))
        return reinterpret(torch.tensor(signed, device=device), getattr(tl, t))
    if dst_type and "float8" in dst_type:
        return reinterpret(torch.tensor(x, device=device), str_to_triton_dtype(dst_type))
    if t == "float32" and dst_type == "bfloat16":
        return torch.tensor(x, device=device).bfloat16()
    return torch.tensor(x, device=device)


def to_numpy(x):
    """A NumPy array of a torch tensor or reinterpret()ed wrapper (bfloat16 as float32)."""
    import numpy as np
    import torch

    from .runtime.jit import TensorWrapper

    if isinstance(x, TensorWrapper):
        return x.base.cpu().numpy().astype(getattr(np, torch_dtype_name(x.dtype)))
    if isinstance(x, torch.Tensor):
        if x.dtype is torch.bfloat16:
            return x.cpu().float().numpy()
        return x.cpu().numpy()
    raise ValueError(f"not a tensor: {type(x).__name__}")


def unwrap_tensor(t):
    """The torch tensor under a reinterpret()ed wrapper (or `t` itself)."""
    from .runtime.jit import TensorWrapper

    return t.base if isinstance(t, TensorWrapper) else t


def default_alloc_fn(size: int, align: int, stream):
    """The scratch allocator Triton's tests install (set_allocator): int8 torch memory on the
    GPU, or on the CPU where there is none (the interpreter)."""
    import torch

    device = "cuda" if torch.cuda.is_available() and not is_interpreter() else "cpu"
    return torch.empty(size, dtype=torch.int8, device=device)


def supports_tma(byval_only=False) -> bool:
    """Whether tensor descriptors run here: in the interpreter always, on a GPU from sm_90."""
    if is_interpreter():
        return True
    a = _arch()
    return a is not None and a >= 90


def supports_ws() -> bool:
    return supports_tma()


def tma_skip_msg(byval_only=False) -> str:
    return "tensor descriptors need an sm_90 or newer GPU (or the interpreter)"


def _fresh_knobs_impl(skipped_attr=None):
    """Triton's test fixtures' helper: `(fresh, reset)`. `fresh()` puts a new, default-valued knob
    group in place of each of `warpweave.knobs`' groups (cache, compilation, runtime, ...) whose
    name is not in `skipped_attr`, removes the environment variables behind their knobs, and
    returns the `knobs` module; `reset()` puts the old groups and the environment back (a
    variable first set inside is removed again).

    One difference from Triton: `runtime.interpret` (WARPWEAVE_INTERPRET / TRITON_INTERPRET) is
    kept. warpweave reads it at each launch, so removing it would send a test run in the
    interpreter to the GPU part way through; Triton decides it when `@jit` runs."""
    from . import knobs

    skipped = set(skipped_attr or ())
    kept_vars = {"WARPWEAVE_INTERPRET", "TRITON_INTERPRET"}
    groups = {name: group for name, group in vars(knobs).items()
              if isinstance(group, knobs.base_knobs) and name not in skipped}
    saved_env = dict(os.environ)
    saved_propagate = getattr(knobs, "propagate_env", True)

    def env_vars(group):
        return [k.var for k in vars(type(group)).values() if isinstance(k, knobs._EnvKnob)]

    def fresh():
        for name, group in groups.items():
            for var in env_vars(group):
                if var not in kept_vars:
                    os.environ.pop(var, None)
            setattr(knobs, name, group._fresh())
        knobs.propagate_env = True
        knobs._launch_hooks_changed()
        return knobs

    def reset():
        for name, group in groups.items():
            setattr(knobs, name, group)
        for var in list(os.environ):
            if var not in saved_env:
                del os.environ[var]
        os.environ.update(saved_env)
        knobs.propagate_env = saved_propagate
        knobs._launch_hooks_changed()

    return fresh, reset
