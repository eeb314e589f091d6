"""`warpweave.compiler`: ahead-of-time compilation in Triton's form,

    src = compiler.ASTSource(fn=kernel, signature={"x": "*fp32", "n": "i32", "BLOCK": "constexpr"},
                             constexprs={"BLOCK": 128})
    k = warpweave.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4})
    k.asm["ptx"]

through warpweave's compiler (the same one kernel launches use). `asm` holds warpweave's stages:
"tile_ir" (warpweave's Tile IR), "ttir" and "ttgir" (that IR in the words of Triton's
dialects: tt.load, ttg.local_alloc, ttng.wait_barrier, ttg.warp_specialize ...), "ptx" and "cubin"
(absent when ptxas is not installed); Triton's "llir" has no warpweave counterpart.
"""

from __future__ import annotations

from ..errors import CompilationError  # noqa: F401
from . import errors  # noqa: F401

__all__ = ["ASTSource", "CompiledKernel", "CompilationError", "LazyDict", "compile"]


class LazyDict:
    """Launch metadata as launch hooks receive it (Triton's): `data` holds what is known at
    once; `get()` adds what the functions given to `add` return (a kernel's launch_metadata),
    evaluating them only when a hook asks."""

    def __init__(self, data):
        self.data = data
        self.extras = []

    def get(self):
        for func, args in self.extras:
            self.data = self.data | func(*args)
        self.extras.clear()
        return self.data

    def add(self, func, args):
        self.extras.append((func, args))


class ASTSource:
    """A @jit function and the specialization to compile: `signature` maps parameter names to
    types ('*fp16', 'i32', 'fp32', 'i1', 'constexpr', or a tensor-descriptor type), `constexprs`
    maps names (or 1-tuples of indices) to values, `attrs` maps (index,) to Triton's attribute
    lists ([["tt.divisibility", 16]] marks a pointer 16-byte aligned, an int divisible by 16)."""

    def __init__(self, fn, signature, constexprs=None, attrs=None):
        from ..jit import JITFunction

        if not isinstance(fn, JITFunction):
            raise TypeError(f"ASTSource expects a @jit function, got {type(fn).__name__}")
        for k in signature:
            if not isinstance(k, str):
                raise TypeError("ASTSource signature keys must be parameter names (str)")
        self.fn = fn
        self.name = fn.__name__
        self.signature = dict(signature)
        self.constants = {}
        for k, v in (constexprs or {}).items():
            if isinstance(k, str):
                k = (fn.arg_names.index(k),)
            self.constants[tuple(k)] = v
        self.attrs = dict(attrs or {})

    def _divisible(self, index: int) -> bool:
        for attr in self.attrs.get((index,), []):
            if list(attr[:1]) == ["tt.divisibility"] and int(attr[1]) % 16 == 0:
                return True
        return False

    def signature_text(self) -> str:
        """The `wwc --signature` text of this specialization."""
        from ..jit import literal

        parts = []
        for i, name in enumerate(self.fn.arg_names):
            if (i,) in self.constants:
                parts.append(f"{name}={literal(self.constants[(i,)], name)}")
                continue
            ty = self.signature.get(name)
            if ty is None:
                default = self.fn.defaults[i]
                if self.fn.constexprs[i] and default is not _missing():
                    parts.append(f"{name}={literal(default, name)}")
                    continue
                raise TypeError(f"ASTSource: parameter '{name}' of {self.name} has no type in "
                                f"the signature and no constexpr value")
            if ty == "constexpr":
                raise TypeError(f"ASTSource: constexpr '{name}' of {self.name} needs a value in "
                                f"constexprs")
            if self._divisible(i) and not ty.startswith("desc") and ":" not in ty:
                ty += ":16"
            parts.append(f"{name}:{ty}")
        return ",".join(parts)


def _missing():
    from ..jit import _MISSING

    return _MISSING


class CompiledForms(dict):
    """A compiled kernel's `asm`: its stages by Triton's keys. "tile_ir" is warpweave's Tile IR;
    "ttir" is that IR printed with the names of Triton's dialect ops, "ttgir" the same with the
    register layouts, shared encodings and layout conversions code generation uses (both made
    when first asked for); "ptx", "cubin"; "sass" (cuobjdump's, as in Triton not among the keys,
    made when first asked for where there is a cubin). Triton's other stages ("llir",
    ...) do not exist here; asking for one raises a KeyError that says so and names the keys
    there are."""

    _TRITON_STAGES = ("ttir", "ttgir")

    def __init__(self, tile_ir: str = "", target: str = "sm_90a", **forms):
        super().__init__(tile_ir=tile_ir, **forms)
        self._target = target

    def _lazy(self):
        """The Triton-dialect stages not printed yet (none without Tile IR)."""
        if not dict.get(self, "tile_ir"):
            return []
        return [k for k in self._TRITON_STAGES if not dict.__contains__(self, k)]

    def __missing__(self, key):
        if key == "sass" and dict.get(self, "cubin"):
            # As in Triton: not one of the stages, disassembled from the cubin when asked for.
            from ..tools.disasm import get_sass

            try:
                text = get_sass(self["cubin"])
            except RuntimeError as e:
                raise KeyError(f"'sass': {e}") from None
            self[key] = text
            return text
        if key in self._lazy():
            from .._native_loader import native

            nat = native()
            if key == "ttir":
                text = nat.triton_dialect_text(self["tile_ir"], self._target)
            else:
                try:
                    text = nat.triton_dialect_text(self["tile_ir"], self._target, True)
                except nat.CompilationError as e:  # layouts this IR cannot be given here
                    reason = str(e).strip().splitlines()[0] if str(e).strip() else "unknown"
                    text = (f"// warpweave: no layouts assigned ({reason})\n"
                            + nat.triton_dialect_text(self["tile_ir"], self._target))
            self[key] = text
            return text
        raise KeyError(f"{key!r}: warpweave has no such stage (it compiles its own Tile IR "
                       f"straight to PTX, not through Triton's MLIR dialects or LLVM); "
                       f"available: {', '.join(map(repr, self))}")

    # The stages printed on demand count as present, as in Triton's dict of stages.
    def __contains__(self, key):
        return dict.__contains__(self, key) or key in self._lazy()

    def __iter__(self):
        return iter(list(dict.keys(self)) + self._lazy())

    def __len__(self):
        return dict.__len__(self) + len(self._lazy())

    def keys(self):
        return list(self)

    def items(self):
        return [(k, self[k]) for k in self]

    def values(self):
        return [self[k] for k in self]

    def get(self, key, default=None):
        return self[key] if key in self else default


class CompiledKernel:
    """What compile() returns: the stages (`asm`) and the resources of the compiled kernel."""

    def __init__(self, native_kernel, name: str, options: dict):
        self.kernel = native_kernel
        self.name = name
        self.metadata = dict(options)
        self.metadata["shared"] = getattr(native_kernel, "shared_bytes", 0)

    @property
    def asm(self) -> dict:
        out = CompiledForms(self.kernel.tile_ir, self.kernel.target, ptx=self.kernel.ptx)
        cubin = getattr(self.kernel, "cubin", b"")
        if cubin:
            out["cubin"] = cubin
        return out

    @property
    def n_regs(self) -> int:
        return self.kernel.registers

    @property
    def n_spills(self) -> int:
        return self.kernel.spill_bytes

    @property
    def shared(self) -> int:
        return self.kernel.shared_bytes


def compile(src, target=None, options=None):  # noqa: A001  (Triton's name)
    """Compiles an ASTSource for `target` (a GPUTarget; default: the active driver's) with
    `options` (num_warps, num_stages, num_ctas or ctas_per_cga)."""
    from .._native_loader import native
    from ..runtime.driver import driver

    if not isinstance(src, ASTSource):
        raise TypeError(f"compile expects an ASTSource, got {type(src).__name__} (warpweave "
                        f"compiles Python kernels only, not IR files)")
    options = dict(options or {})
    if target is None:
        target = driver.active.get_current_target()
    num_warps = int(options.get("num_warps", 4))
    num_stages = int(options.get("num_stages", 3))
    num_ctas = options.get("num_ctas") or 1
    cga = options.get("ctas_per_cga")
    shape = None
    if cga is not None:
        dims = tuple(cga) if isinstance(cga, (tuple, list)) else (cga,)
        if not 1 <= len(dims) <= 3:
            raise ValueError(f"ctas_per_cga={cga!r}: expected (x,), (x, y) or (x, y, z)")
        shape = tuple(int(d) for d in dims) + (1,) * (3 - len(dims))
        num_ctas = shape[0] * shape[1] * shape[2]
    env = src.fn.environment()
    request = dict(files=env.files, kernel=src.name, signature=src.signature_text(),
                   globals=env.globals, target=target.sm(), num_warps=num_warps,
                   num_stages=num_stages, num_ctas=int(num_ctas), names=env.names)
    if shape is not None and shape[1:] != (1, 1):
        request["cluster_dims"] = list(shape)
    try:
        kernel = native().compile(**request, stage="cubin")
    except CompilationError as e:  # no ptxas on this machine: the PTX is still worth having
        if "ptxas not found" not in str(e):
            raise
        kernel = native().compile(**request, stage="ptx")
    return CompiledKernel(kernel, src.name, {"num_warps": num_warps, "num_stages": num_stages,
                                             "num_ctas": int(num_ctas), "target": target})
