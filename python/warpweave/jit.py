"""`@ww.jit`: binds launch arguments, builds the specialization signature, collects the kernel's
compile-time environment, compiles through the C++ compiler (with in-memory and disk caches) and
launches on the GPU (PyTorch's current stream) or in the CPU interpreter.

The signature follows Triton's conventions: tensors become `*fp32` (with `:16` when the address is
16-byte aligned), ints `i32`/`i64`/`u64` (with `:16` when divisible by 16 and `:1` when equal to 1),
floats `fp32`, bools `i1`, and constexprs and None `name=value`.
"""

from __future__ import annotations

import inspect
import math
import operator
import os
import textwrap
import types

from . import knobs as _knobs
from . import language as tl
from ._native_loader import native
from .compiler import CompiledForms
from .tensor_descriptor import TensorDescriptor as _TensorDescriptor

__all__ = ["jit", "JITFunction", "KernelInterface"]

_MISSING = object()

# ------------------------------------------------------------------------------------------------
# dtypes of host arrays
# ------------------------------------------------------------------------------------------------

_NUMPY_DTYPES = {
    "bool": "i1", "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64",
    "uint8": "u8", "uint16": "u16", "uint32": "u32", "uint64": "u64",
    "float16": "fp16", "float32": "fp32", "float64": "fp64", "bfloat16": "bf16",
    "float8_e4m3fn": "fp8e4nv", "float8_e5m2": "fp8e5",
    "float8_e4m3fnuz": "fp8e4b8", "float8_e5m2fnuz": "fp8e5b16",
    # e8m0 block scales (OCP MX): bytes, as Triton takes them (u8)
    "float8_e8m0fnu": "u8",
}
_TORCH_DTYPE_NAMES = {
    "torch.bool": "i1", "torch.int8": "i8", "torch.int16": "i16", "torch.int32": "i32",
    "torch.int64": "i64", "torch.uint8": "u8", "torch.uint16": "u16", "torch.uint32": "u32",
    "torch.uint64": "u64", "torch.float16": "fp16", "torch.bfloat16": "bf16",
    "torch.float32": "fp32", "torch.float64": "fp64", "torch.float8_e4m3fn": "fp8e4nv",
    "torch.float8_e5m2": "fp8e5", "torch.float8_e4m3fnuz": "fp8e4b8",
    "torch.float8_e5m2fnuz": "fp8e5b16", "torch.float8_e8m0fnu": "u8",
}
_torch_dtype_cache: dict = {}


def _torch_sig(dt, name: str) -> str:
    sig = _torch_dtype_cache.get(dt)
    if sig is None:
        if isinstance(dt, tl.dtype):  # a reinterpret()ed tensor's element type
            return dt.sig
        sig = _TORCH_DTYPE_NAMES.get(str(dt))
        if sig is None:
            raise TypeError(
                f"argument '{name}' has dtype {dt}, which warpweave kernels cannot take; "
                f"supported: {', '.join(sorted(_TORCH_DTYPE_NAMES))}")
        _torch_dtype_cache[dt] = sig
    return sig


_numpy_dtype_cache: dict = {}


def _numpy_sig(dt, name: str) -> str:
    sig = _numpy_dtype_cache.get(dt)  # dt.name costs microseconds per call
    if sig is not None:
        return sig
    sig = _NUMPY_DTYPES.get(dt.name)
    if sig is not None:
        _numpy_dtype_cache[dt] = sig
    if sig is None:
        raise TypeError(
            f"argument '{name}' has NumPy dtype {dt}, which warpweave kernels cannot take; "
            f"supported: {', '.join(sorted(_NUMPY_DTYPES))}")
    return sig


def _is_numpy(v) -> bool:
    return type(v).__module__ == "numpy" and type(v).__name__ == "ndarray"


def _is_torch_tensor(v) -> bool:
    return hasattr(v, "data_ptr") and hasattr(v, "is_cuda")


def dtype_sig(value, name: str = "value") -> str:
    """The signature spelling (fp16, i32...) of a tensor's, array's or dtype object's dtype."""
    if isinstance(value, tl.dtype):
        return value.sig
    if _is_numpy(value):
        return _numpy_sig(value.dtype, name)
    if _is_torch_tensor(value):
        return _torch_sig(value.dtype, name)
    if type(value).__module__ == "torch" and str(value).startswith("torch."):
        return _torch_sig(value, name)
    try:
        import numpy as np

        return _numpy_sig(np.dtype(value), name)
    except Exception:
        pass
    raise TypeError(f"'{name}': {value!r} is not a dtype, tensor or array")


# ------------------------------------------------------------------------------------------------
# constexpr values as literal text for the C++ front end
# ------------------------------------------------------------------------------------------------


def literal(value, name: str = "value") -> str:
    """Python value -> the literal text the front end parses for constexprs and globals."""
    if isinstance(value, tl.constexpr):
        value = value.value
    if type(value).__module__ == "numpy":
        value = _plain_scalar(value)
    if value is None:
        return "None"
    if value is True or value is False:
        return "True" if value else "False"
    if isinstance(value, int):
        return str(int(value))
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"constexpr '{name}' = {value!r}: only finite floats can be "
                             f"compile-time values (pass it as a runtime argument instead)")
        return repr(float(value))
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, tl.dtype):
        return f"tl.{value.name}"
    if isinstance(value, tl.ReductionOrdering):
        return f"tl.ReductionOrdering.{value.name.upper()}"
    if type(value).__name__ == "_EnumValue" and type(value).__module__ == "warpweave.tlx":
        return f"tlx.{value.kind}.{value.name}"
    if type(value).__name__ == "layout" and type(value).__module__ == "warpweave._tlx_host":
        # tlx.layout(shape=, stride=): the kernel's register layout, rebuilt from its text
        return f"tlx.layout(shape={literal(value.shape, name)}, stride={literal(value.stride, name)})"
    if type(value).__module__ == "warpweave._tlx_host" and hasattr(value, "_kernel_literal"):
        # A TLX shared layout (swizzled_layout, swizzled_shared_layout_encoding,
        # padded_shared_layout_encoding): its constructor call, which the kernel evaluates.
        return value._kernel_literal()
    if isinstance(value, (tuple, list)):
        inner = ", ".join(literal(v, name) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    owner = (value.__module__ if isinstance(value, type) else type(value).__module__) or ""
    if owner.split(".")[0] in ("torch", "numpy", "ml_dtypes"):
        try:
            return f"tl.{tl.DTYPES[dtype_sig(value, name)].name}"
        except TypeError:
            pass
    raise TypeError(
        f"constexpr '{name}' = {value!r} of type {type(value).__name__}: compile-time values must "
        f"be int, float, bool, str, None, a tl dtype, a TLX layout object (tlx.layout, "
        f"tlx.swizzled_layout, tlx.swizzled_shared_layout_encoding, "
        f"tlx.padded_shared_layout_encoding), or tuples of these; or a @jit function or a tl "
        f"function the kernel calls")


# ------------------------------------------------------------------------------------------------
# Argument kinds
# ------------------------------------------------------------------------------------------------


def _plain_scalar(value):
    """The Python bool, int or float a NumPy scalar stands for (np.int64(256) -> 256, np.float32
    -> float, np.bool_ -> bool), so that it specializes and passes as that value; anything else
    unchanged."""
    import numpy as np

    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    if isinstance(value, np.str_):
        return str(value)
    return value


class IntArgumentRangeError(ValueError, OverflowError):
    """An int argument outside what a kernel parameter can hold (-2**63 to 2**64 - 1). An
    OverflowError as Triton raises for it, and a ValueError as warpweave's other bad values."""


class LaunchOptionError(ValueError, AssertionError):
    """A launch option out of its range (num_warps not a power of 2 ...). A ValueError as
    warpweave's other bad values, and an AssertionError as Triton's option checks raise."""


def _int_spec(v: int, specialize: bool, name: str = "value") -> str:
    if -(1 << 31) <= v < (1 << 31):
        base = "i32"
    elif -(1 << 63) <= v < (1 << 63):
        base = "i64"
    elif 0 <= v < (1 << 64):  # as Triton: beyond i64, unsigned
        base = "u64"
    else:
        raise IntArgumentRangeError(
            f"argument '{name}' = {v} does not fit in 64 bits: a kernel int takes -2**63 to "
            f"2**64 - 1 (i32, i64, and u64 from 2**63 on)")
    if not specialize:
        return base
    if v == 1:
        return base + ":1"
    if v % 16 == 0:
        return base + ":16"
    return base


# Descriptor signature text by (base dtype, *block shape).
_descriptor_specs: dict = {}


class _Arg:
    """How one runtime argument enters the signature and the launch."""

    TENSOR, NUMPY, INT, FLOAT, BOOL, DESC = range(6)


def runtime_spec(value, name: str, specialize: bool = True):
    """(signature type text, argument kind) of a runtime argument; raises TypeError naming the
    argument for values a kernel cannot take."""
    t = type(value)
    if t.__module__ == "numpy" and not _is_numpy(value):
        value = _plain_scalar(value)
        t = type(value)
    if t is bool:
        return "i1", _Arg.BOOL
    if t is int:
        return _int_spec(value, specialize, name), _Arg.INT
    if t is float:
        return "fp32", _Arg.FLOAT
    if _is_torch_tensor(value):
        sig = "*" + _torch_sig(value.dtype, name)
        if specialize and value.data_ptr() % 16 == 0:
            sig += ":16"
        return sig, _Arg.TENSOR
    if _is_numpy(value):
        sig = "*" + _numpy_sig(value.dtype, name)
        if specialize and value.ctypes.data % 16 == 0:
            sig += ":16"
        return sig, _Arg.NUMPY
    from .tensor_descriptor import TensorDescriptor

    if isinstance(value, TensorDescriptor):
        return value.signature_type(), _Arg.DESC
    if isinstance(value, int):  # IntEnum...
        return _int_spec(int(value), specialize, name), _Arg.INT
    if isinstance(value, float):
        return "fp32", _Arg.FLOAT
    if t.__module__ == "warpweave._tlx_host" and hasattr(value, "_kernel_literal"):
        raise TypeError(f"argument '{name}' = {value!r} is a TLX layout, a compile-time value: "
                        f"annotate the parameter `{name}: tl.constexpr`")
    raise TypeError(
        f"argument '{name}' of type {t.__module__}.{t.__name__} cannot be passed to a kernel: "
        f"expected a torch tensor, a NumPy array, a TensorDescriptor, an int, a float or a bool "
        f"(or annotate the parameter `: tl.constexpr`)")


# ------------------------------------------------------------------------------------------------
# Compile-time environment
# ------------------------------------------------------------------------------------------------


def _code_names(code: types.CodeType, out: set):
    out.update(code.co_names)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            _code_names(c, out)


def _read_source(fn, src: str | None = None) -> tuple[str, str]:
    """(path, text) of the file holding `fn`. Module-level kernels give the whole file (the front
    end parses it, helpers included); a kernel defined inside a function gives its own dedented
    source, padded with blank lines so that line numbers still match the file. `src`: the
    function's source as JITFunction._unsafe_update_src set it, in place of the file's (from its
    `def` line on)."""
    path = inspect.getsourcefile(fn) or f"<{fn.__name__}>"
    nested = "<locals>" in fn.__qualname__
    if src is None and not nested and os.path.isfile(path):
        with open(path, encoding="utf-8") as f:
            return path, f.read()
    lines, first = inspect.getsourcelines(fn)
    if src is not None:
        first += _def_line_offset(lines)
        lines = src.splitlines(keepends=True)
    body = textwrap.dedent("".join(lines)).splitlines()
    prefix = [""] * (first - 1)
    if os.path.isfile(path):
        with open(path, encoding="utf-8") as f:
            prefix = _module_imports(f.read().splitlines()[:first - 1])
    return path, "\n".join(prefix + body) + "\n"


def _def_line_offset(lines) -> int:
    """Where the `def` is among a function's source lines (after its decorators)."""
    import re

    for i, line in enumerate(lines):
        if re.match(r"\s*def\s", line):
            return i
    return 0


def _function_src(fn) -> str:
    """Triton's `JITFunction.src`: the function's dedented source from its `def` on."""
    lines, _ = inspect.getsourcelines(fn)
    return textwrap.dedent("".join(lines[_def_line_offset(lines):]))


def _module_imports(lines):
    """`lines` with everything blanked except top-level import statements (so that a nested
    kernel's `tl`, `tlx`, `math` aliases resolve and its line numbers stay those of the file)."""
    out = []
    open_parens = 0
    for line in lines:
        if open_parens > 0 or line.startswith(("import ", "from ")):
            out.append(line)
            open_parens += line.count("(") - line.count(")")
        else:
            out.append("")
    return out


class _Environment:
    """What a kernel's compile needs from Python: the files holding its code and its helpers'
    (files[0] holds the kernel), and for each file the module-level names that code uses, bound
    as the live Python objects are (not as the import statements read): names[i] maps a name of
    files[i] to (kind, target, file index), ww::NameBinding's fields. `globals` is every value
    binding as literal text (for callers that pass no names); `guards` holds where each value was
    read, to tell at launch that one changed."""

    def __init__(self, files, names, globals_, guards):
        self.files = files  # [(path, text)]
        self.names = names  # [{name: (kind, target, file)}], one per file
        self.globals = globals_  # name -> literal text
        self.guards = guards  # ((module dict, name, value) or (closure cell, None, value), ...)

    def current(self) -> bool:
        """No value the compile read has been rebound since (the native launch path checks the
        same: an object of the same type that compares equal, or the very object)."""
        for holder, name, value in self.guards:
            if name is None:
                try:
                    now = holder.cell_contents
                except ValueError:
                    return False
            else:
                now = holder.get(name, _MISSING)
            if now is value:
                continue
            try:
                if type(now) is not type(value) or not (now == value):
                    return False
            except Exception:
                return False
        return True


def _is_language_module(module) -> bool:
    """warpweave's and triton's modules and math, which the compiler knows by name; not those
    of them that hold @jit helpers (language.extra.cuda.inline_ptx_lib): they are helper
    modules, compiled from their files."""
    name = getattr(module, "__name__", "") or ""
    if not (name.split(".")[0] in ("warpweave", "triton") or name == "math"):
        return False
    return not any(isinstance(v, JITFunction) for v in list(vars(module).values()))


def _language_members() -> dict:
    """id(object) -> "module.attr" for the functions, classes and objects of the language modules
    loaded (`from warpweave.language import arange` binds one of these)."""
    import sys

    first = ("warpweave.language", "warpweave.language.math", "warpweave.tlx")
    loaded = [n for n in list(sys.modules)
              if n.startswith(("warpweave.language", "warpweave.tlx", "triton.language"))
              or n == "warpweave.profiler.language"]
    out: dict = {}
    for modname in list(first) + sorted(set(loaded) - set(first)):
        module = sys.modules.get(modname)
        if module is None or not _is_language_module(module):
            continue
        for attr, v in list(vars(module).items()):
            if attr.startswith("_") or isinstance(v, (bool, int, float, str, types.ModuleType)):
                continue
            out.setdefault(id(v), f"{modname}.{attr}")
    return out


def _top_level_def(tree, fn):
    """The `def` of module-level function `fn` in its module's parsed file, or None."""
    import ast

    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == fn.__name__:
            first = node.decorator_list[0].lineno if node.decorator_list else node.lineno
            if first == fn.__code__.co_firstlineno:
                return node
    return None


def _referenced_names(fn, tree=None):
    """(names, dotted chains) that `fn`'s source reads from outside itself: the names its code
    uses that are not its locals (defaults and annotations are evaluated outside, so all of their
    names), and each `a.b.c` whose base is such a name, as ("a", "b", "c"). `tree`: fn's def,
    when the caller has it."""
    import ast

    code = fn.__code__
    try:
        if tree is None:
            tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError, IndentationError):
        names: set = set()
        _code_names(code, names)
        return names | set(code.co_freevars), []
    local = set(code.co_varnames) | set(code.co_cellvars)
    outside: list = []  # default values and annotations: evaluated where the def is
    found: list = []  # (Name node, attribute chain above it)
    for node in ast.walk(tree):
        t = type(node)
        if t is ast.Name:
            found.append((node, ()))
        elif t is ast.Attribute and type(node.value) in (ast.Name, ast.Attribute):
            attrs = []
            base = node
            while type(base) is ast.Attribute:
                attrs.append(base.attr)
                base = base.value
            if type(base) is ast.Name:
                found.append((base, tuple(reversed(attrs))))
        elif t in (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda):
            a = node.args
            outside += a.defaults + [d for d in a.kw_defaults if d is not None]
            outside += [x.annotation for x in a.posonlyargs + a.args + a.kwonlyargs
                        if getattr(x, "annotation", None) is not None]
    outside_ids = {id(n) for root in outside for n in ast.walk(root)}
    names = set()
    chains = set()
    for base, attrs in found:
        if base.id not in local or id(base) in outside_ids:
            if attrs:
                chains.add((base.id, *attrs))
            else:
                names.add(base.id)
    return names, sorted(chains)


def _read_file(path: str) -> str | None:
    if os.path.isfile(path):
        with open(path, encoding="utf-8") as f:
            return f.read()
    return None


def _describe(value) -> str:
    """What a Python object is, for the compiler's "kernel code cannot use" error."""
    if callable(value) and hasattr(value, "__code__"):
        return f"the Python function {getattr(value, '__qualname__', '?')} (not @jit)"
    t = type(value)
    return f"a {t.__module__}.{t.__qualname__} object" if t.__module__ != "builtins" else \
        f"a {t.__qualname__}"


# TLX's library helpers its package exports beside the builtins (`tlx._to_mxfp8_block`): @jit
# functions of warpweave's modules, given to the compiler with their files when a kernel names
# them (src/specialize/TlBuiltins.cpp, tlxHelperModule).
_TLX_HELPERS = {"_to_mxfp8_block": "warpweave.language.extra.tlx.mxfp8_utils"}


# A constexpr whose value is a @jit function reaches the compiler as this name plus the
# parameter's, bound in the kernel's file to that function (collect_environment's
# `constexpr_functions`).
_FN_CONSTEXPR = "__ww_constexpr_fn_"


def _is_function_constexpr(value) -> bool:
    """A constexpr value the kernel calls: a @jit function, or a function of the language
    modules (`tl.exp`, a libdevice function), as Triton lets a constexpr be."""
    if isinstance(value, JITFunction):
        return True
    return (callable(value) and not isinstance(value, type)
            and type(value).__module__ != "warpweave._tlx_host"
            and id(value) in _language_members())


def collect_environment(jitfn: "JITFunction", constexpr_functions=None) -> _Environment:
    """The kernel's compile environment, read from the live Python objects: starting at the
    kernel, every name its code uses is looked up in its closure and globals (as Python would at
    run time) and recorded with what it is; @jit functions reached that way add their files and
    names in turn, as do helper modules reached through attributes (`helpers.f`)."""
    files: list = []  # [[path, text]]
    names: list = []
    entries: dict = {}  # ("module", id(globals dict)) or ("function", id(fn)) -> file index
    functions: dict = {}  # id(fn) -> file index
    globals_: dict = {}
    guards: list = []
    guarded: set = set()
    members = _language_members()
    trees: dict = {}  # file index -> its parsed text (module files), or None
    language: dict = {}  # id(module) -> _is_language_module(module)

    def is_language(module) -> bool:
        r = language.get(id(module))
        if r is None:
            r = language[id(module)] = _is_language_module(module)
        return r

    def def_of(i, fn):
        """fn's def from the parsed file i (one parse per file), or None."""
        if i not in trees:
            import ast

            try:
                trees[i] = ast.parse(files[i][1])
            except (SyntaxError, ValueError):
                trees[i] = None
        return None if trees[i] is None else _top_level_def(trees[i], fn)

    def add(key, path, text):
        entries[key] = len(files)
        files.append([path, text])
        names.append({})
        return entries[key]

    def module_entry(g: dict, path: str, with_text: bool):
        """The file entry of the module whose globals are `g` (its text once it is needed)."""
        i = entries.get(("module", id(g)))
        if i is None:
            i = add(("module", id(g)), path, "")
        if with_text and not files[i][1]:
            files[i][1] = _read_file(path) or ""
        return i

    def visit(fn, src=None) -> int:
        """The file index defining `fn` (added, with its names, on the first visit); `src`: its
        source as _unsafe_update_src set it."""
        i = functions.get(id(fn))
        if i is not None:
            return i
        path = inspect.getsourcefile(fn) or f"<{fn.__name__}>"
        tree = None
        if src is not None:
            import ast

            i = add(("function", id(fn)), *_read_source(fn, src))
            try:
                tree = ast.parse(textwrap.dedent(src))
            except SyntaxError:
                tree = None  # the front end reports it at its line
        elif "<locals>" in fn.__qualname__ or not os.path.isfile(path):
            # Its own dedented source (line numbers kept): a nested kernel or helper has its
            # closure as well as its module's globals.
            i = add(("function", id(fn)), *_read_source(fn))
        else:
            i = module_entry(fn.__globals__, path, True)
            tree = def_of(i, fn)
        functions[id(fn)] = i
        free = dict(zip(fn.__code__.co_freevars, fn.__closure__ or ()))
        g = fn.__globals__

        def lookup(name):
            if name in free:
                try:
                    return free[name].cell_contents, free[name], None
                except ValueError:  # a cell not yet filled
                    return _MISSING, None, None
            return g.get(name, _MISSING), g, name

        refs, chains = _referenced_names(fn, tree)
        for name in sorted(refs):
            value, holder, key = lookup(name)
            if value is not _MISSING:
                bind(i, name, value, holder, key)
        for chain in chains:
            value = lookup(chain[0])[0]
            for attr in chain[1:]:
                if isinstance(value, types.ModuleType) and attr in _TLX_HELPERS and \
                        getattr(value, "__name__", "") == "warpweave.tlx":
                    # tlx.<helper>: the compiler finds it in its module's file (and the
                    # helpers that one calls in theirs).
                    import importlib

                    visit(getattr(importlib.import_module(_TLX_HELPERS[attr]), attr).fn)
                    break
                if not isinstance(value, types.ModuleType) or is_language(value):
                    break
                d = vars(value)
                if attr not in d:
                    break
                bind(module_of(value), attr, d[attr], d, attr)
                value = d[attr]
        return i

    def module_of(module) -> int:
        """The entry of a helper module: its file's text when it defines @jit functions."""
        d = vars(module)
        path = getattr(module, "__file__", None) or f"<module {module.__name__}>"
        has_jit = any(isinstance(v, JITFunction) for v in list(d.values()))
        return module_entry(d, path, has_jit and path.endswith(".py"))

    def bind(i, name, value, holder, key):
        table = names[i]
        if name in table:
            return
        table[name] = ("opaque", "", -1)  # a placeholder while a helper is visited
        table[name] = binding = classify(value)
        if binding[0] == "value":
            globals_.setdefault(name, binding[1])
            if (id(holder), key) not in guarded:
                guarded.add((id(holder), key))
                guards.append((holder, key, value))

    def classify(value):
        if isinstance(value, JITFunction):
            return ("function", value.fn.__name__, visit(value.fn, value._src))
        if isinstance(value, types.ModuleType):
            if is_language(value):
                return ("module", value.__name__, -1)
            return ("helper", value.__name__, module_of(value))
        if _is_numpy(value) or _is_torch_tensor(value):
            return ("opaque", _describe(value), -1)  # literal() would take their dtypes
        if type(value) is float and not math.isfinite(value):  # NEG_INF = float("-inf")
            return ("value", f"float('{value!r}')", -1)
        if not callable(value) or isinstance(value, (tl.dtype, tl.constexpr)):
            try:
                return ("value", literal(value), -1)
            except (TypeError, ValueError):
                pass
        member = members.get(id(value))
        if member is not None:
            return ("member", member, -1)
        try:
            return ("value", literal(value), -1)  # numpy/torch dtype classes
        except (TypeError, ValueError):
            return ("opaque", _describe(value), -1)

    root = visit(jitfn.fn, jitfn._src)
    for name, fn in (constexpr_functions or {}).items():
        bind(root, name, fn, None, None)
    return _Environment([tuple(f) for f in files], names, globals_, tuple(guards))


# ------------------------------------------------------------------------------------------------
# Targets and streams
# ------------------------------------------------------------------------------------------------

_target_cache: dict = {}
_torch_cuda = None  # (current-device function, raw-stream function), looked up once


def _single_visible_gpu(torch) -> bool:
    """One CUDA device is visible to this process (a count fixed at CUDA's initialization)."""
    try:
        return torch.cuda.device_count() == 1
    except Exception:  # a broken driver: torch's own query reports it at the launch
        return False


def _torch_cuda_fns():
    global _torch_cuda
    if _torch_cuda is None:
        import torch

        get_device = getattr(torch._C, "_cuda_getDevice", None) or torch.cuda.current_device
        if _single_visible_gpu(torch):
            # The current device can only be 0: a C function returning 0 stands in for torch's
            # query, which cost 0.13 us of every launch on the H200 (bench/launch_bench.py).
            get_device = (0).conjugate
        get_raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        if get_raw is None:
            get_raw = lambda dev: torch.cuda.current_stream(dev).cuda_stream  # noqa: E731
        _torch_cuda = (get_device, get_raw)
    return _torch_cuda


# The target of each compute capability's major version warpweave compiles for.
_TARGET_OF_MAJOR = {8: "sm_80", 9: "sm_90a", 10: "sm_100a"}


def _arch_target(arch) -> str:
    """The target of Triton's `arch` option or override_arch knob: "sm80" / "sm_80" / 80, "sm90"
    / "sm90a", "sm100" / "sm100a" (and CUDA's "cuda:90")."""
    import re

    m = re.fullmatch(r"(?:sm_?|cuda:)?(\d+)a?", str(arch).strip())
    number = int(m.group(1)) if m else -1
    target = _TARGET_OF_MAJOR.get(number // 10) if number % 10 == 0 else None
    if target is None:
        raise ValueError(f"arch {arch!r} is not a warpweave target: it compiles for sm80, sm90 "
                         f"(sm_90a) and sm100 (sm_100a)")
    return target


def _interpreter_target() -> str:
    """The target the interpreter stands in for: WARPWEAVE_TARGET, else sm_90a (what an
    interpreted kernel's resources and Triton stages are those of)."""
    return os.environ.get("WARPWEAVE_TARGET") or "sm_90a"


def _interpreted_ir_target() -> str:
    """The target whose Tile IR the interpreter runs: the one it stands in for where that is
    sm_100a (so tl.dot's tcgen05 lowerings run on CPU as they compile for Blackwell), else
    sm_90a's, which holds every form the interpreter models (sm_80 refuses TLX's ops)."""
    target = _interpreter_target()
    return target if target == "sm_100a" else "sm_90a"


def _gpu_target() -> str:
    env = os.environ.get("WARPWEAVE_TARGET")
    if env:
        return env
    try:
        get_device = _torch_cuda_fns()[0]
    except ImportError:
        return "sm_90a"
    dev = get_device()
    t = _target_cache.get(dev)
    if t is None:
        import torch

        major, minor = torch.cuda.get_device_capability(dev)
        t = _TARGET_OF_MAJOR.get(major)
        if t is None:
            raise RuntimeError(f"GPU of compute capability {major}.{minor} is not supported: "
                               f"warpweave targets sm_80, sm_90a and sm_100a")
        _target_cache[dev] = t
    return t


def _stream_source():
    """(current-device function, device -> raw current-stream function): PyTorch's, which the
    general and the native launch paths both call for every launch."""
    return _torch_cuda_fns()


# The parameter through which a kernel that builds tensor maps gets its global scratch
# (kGlobalScratchParam in warpweave.h).
_GLOBAL_SCRATCH = "__ww_global_scratch"


def _current_stream() -> int:
    get_device, get_raw = _stream_source()
    return get_raw(get_device())


# os.environ's backing dict (bytes keys on POSIX): a membership test there costs far less than
# os.environ.get, and every launch asks whether the interpreter is forced.
_ENV_DATA = getattr(os.environ, "_data", None)
_INTERPRET_KEY = b"WARPWEAVE_INTERPRET"
# A forced target chooses the kernel: the native launch path keys on its value.
_TARGET_KEY = b"WARPWEAVE_TARGET"
# knobs.language.default_fp_fusion once set: launches then take the general path, which reads it.
_FP_FUSION_KEY = b"WARPWEAVE_DEFAULT_FP_FUSION"


def _interpret_env() -> bool:
    if type(_ENV_DATA) is dict and _INTERPRET_KEY not in _ENV_DATA:
        return False
    return os.environ.get("WARPWEAVE_INTERPRET", "0") not in ("", "0", "false", "False")


_TRAP_HANGS_KEY = b"WARPWEAVE_TRAP_HANGS"


def trap_hang_tries() -> int:
    """WARPWEAVE_TRAP_HANGS=N: compile barrier waits that trap (with a report of the barrier)
    after N failed try_wait rounds; unset or 0 compiles plain spinning waits."""
    if type(_ENV_DATA) is dict and _TRAP_HANGS_KEY not in _ENV_DATA:
        return 0
    text = os.environ.get("WARPWEAVE_TRAP_HANGS", "").strip()
    if text in ("", "0"):
        return 0
    try:
        tries = int(text)
    except ValueError:
        tries = -1
    if tries < 0:
        raise ValueError(f"WARPWEAVE_TRAP_HANGS={text!r}: expected the number of failed barrier "
                         f"wait rounds before a trap (a positive integer), or 0 to disable")
    return tries


# ------------------------------------------------------------------------------------------------
# Compiled kernels
# ------------------------------------------------------------------------------------------------


def _split_signature(signature: str):
    """The entries of a compile signature, split at its top-level commas (a descriptor's type,
    desc<fp16,128x64>, has its own)."""
    depth, start = 0, 0
    for i, ch in enumerate(signature):
        if ch in "<([":
            depth += 1
        elif ch in ">)]":
            depth -= 1
        elif ch == "," and depth == 0:
            yield signature[start:i]
            start = i + 1
    if signature[start:]:
        yield signature[start:]


def _specialization_proxy(signature: str):
    """What Triton hands a @jit(repr=...) function: `.signature` (argument name -> type, such as
    "i64" or "*fp32"; "constexpr" for compile-time values) and `.constants` (argument name ->
    value, for constexprs and the integers specialized as equal to 1)."""
    import ast as _ast
    from collections import namedtuple

    types, constants = {}, {}
    for entry in _split_signature(signature):
        name, eq, value = entry.partition("=")
        if eq and ":" not in name:
            try:
                constants[name] = _ast.literal_eval(value)
            except (ValueError, SyntaxError):
                constants[name] = value
            types[name] = "constexpr"
            continue
        name, _, rest = entry.partition(":")
        ty, _, hint = rest.partition(":")
        if hint == "1" and not ty.startswith("*"):
            constants[name] = 1
            types[name] = "constexpr"
        else:
            types[name] = ty
    return namedtuple("SpecializationProxy", ["constants", "signature"])(constants, types)


class CompiledKernel:
    """A kernel compiled for one specialization, with what a launch needs precomputed."""

    # The guards of the environment it was compiled in (_Environment.guards).
    used_globals = ()

    def __init__(self, jitfn, native_kernel, signature: str, arg_kinds, interpret: bool, options):
        self.fn = jitfn
        self.kernel = native_kernel
        self.signature = signature
        self.interpret = interpret
        self.options = options
        folded = set(native_kernel.folded_args)
        index = jitfn._index
        if interpret:
            runtime = [n for n, kind in arg_kinds if kind is not None and n not in folded]
        else:
            runtime = [p[0] for p in native_kernel.params if p[0] != _GLOBAL_SCRATCH]
            for n in runtime:
                if n not in index:
                    raise RuntimeError(f"internal error: kernel parameter '{n}' is not an argument "
                                       f"of {jitfn.__name__}")
        kinds = dict(arg_kinds)
        self.binder = [(index[n], kinds[n], n) for n in runtime]
        # Descriptor params: the swizzle the kernel's shared-memory tile expects, when it says.
        from .tensor_descriptor import swizzle_of

        self.swizzles = {p[0]: swizzle_of(p[1]) for p in native_kernel.params
                         if p[1].startswith("desc")} if not interpret else {}
        # The parameter passed in each launch slot (what the native launch path remembers of
        # this kernel, with `swizzles`), and whether all are plain values (no descriptors).
        self.gpu_index = [i for i, _, _ in self.binder]
        self.gpu_plain = all(kind != _Arg.DESC for _, kind, _ in self.binder)
        # Global scratch per program for tensor maps built in the kernel, passed after the
        # arguments (the native fast path, which passes arguments only, never serves it).
        self.scratch_size = 0 if interpret else getattr(native_kernel, "global_scratch_size", 0)
        self._scratch = None

    # Properties Triton users look at.
    @property
    def name(self) -> str:
        """The kernel's name: the function's, or what its @jit(repr=...) function returns for
        this specialization (Triton names the compiled kernel so)."""
        make = getattr(self.fn, "_repr", None)
        if make is None:
            return self.kernel.name
        return make(_specialization_proxy(self.signature))

    @property
    def asm(self) -> dict:
        """The compiled forms by Triton's keys: "ttir" and "ttgir" (warpweave's Tile IR in the
        words of Triton's dialects), "tile_ir" (the Tile IR itself), "ptx", "cubin". Triton's
        other stages (LLVM IR, ...) do not exist here: asking for one raises a KeyError that
        says so and names the keys there are."""
        forms = self.__dict__.get("_forms")
        if forms is None:
            # An interpreted kernel's Triton stages are those of the device the interpreter
            # stands in for (WARPWEAVE_TARGET, else sm_90a), as its resources are.
            target = _interpreter_target() if self.interpret else self.kernel.target
            forms = self._forms = CompiledForms(self.kernel.tile_ir, target, ptx=self.kernel.ptx,
                                                cubin=self.kernel.cubin)
        return forms

    @property
    def metadata(self):
        """Triton's launch metadata fields: num_warps, num_stages, shared (bytes), name, and the
        cluster as ctas_per_cga / cluster_dims (x, y, z). num_ctas is Triton's CTA-split count:
        warpweave runs a program on one CTA whatever the launch asked, so always 1."""
        from types import SimpleNamespace

        cluster = tuple(self.kernel.cluster_dims)
        return SimpleNamespace(
            name=self.name, num_warps=self.kernel.num_warps, num_stages=self.options[1],
            num_ctas=1, ctas_per_cga=cluster, cluster_dims=cluster,
            preferred_ctas_per_cga=None, shared=self.shared,
            target=self.kernel.target)

    def __getitem__(self, grid):
        """Triton's `compiled[grid](*args)`: launches this very kernel with every argument of the
        @jit function, constexprs included, in order (tutorial 02 launches the kernel its warmup
        returned this way). As in Triton the arguments are not re-specialized: they must be those
        it was compiled for."""
        def runner(*args, stream=None):
            self.launch(_normalize_grid(grid, self.fn.__name__), self.fn.bind(args, {}))

        return runner

    def launch(self, grid, values, passed=None, pdl=False):
        """One launch of bound `values`: in the interpreter, or on the GPU (`passed`: what
        JITFunction._scan extracted; `pdl`: a programmatic dependent launch)."""
        if self.interpret:
            self.run_interpreter(grid, values)
        else:
            self.launch_gpu(grid, values, passed, bool(pdl))

    def _init_handles(self):
        """Triton loads the module here before reading n_regs / n_spills; warpweave knows them
        from ptxas at compile time and loads the module at the first launch."""

    def _gpu_kernel(self):
        """The kernel whose resources this one reports: itself on the GPU; in the interpreter,
        the same kernel compiled once for the device the interpreter describes (the driver's
        target: sm_90a unless WARPWEAVE_TARGET says otherwise), since host code sizes grids from
        them (Triton's tutorial 02 divides by n_regs and metadata.shared). None when that
        compile is not possible here (no ptxas): then they read 0."""
        if not self.interpret:
            return self.kernel
        if not hasattr(self, "_gpu_build"):
            self._gpu_build = None
            request = getattr(self, "_request", None)
            if request is not None:
                try:
                    request = dict(request, stage="cubin",
                                   target=_interpreter_target())
                    self._gpu_build = native().compile(**request)
                except Exception:  # noqa: BLE001 - no ptxas, or a kernel only the interpreter runs
                    self._gpu_build = None
        return self._gpu_build

    def _resource(self, name) -> int:
        k = self._gpu_kernel()
        return getattr(k, name) if k is not None else 0

    @property
    def n_regs(self) -> int:
        return self._resource("registers")

    @property
    def n_spills(self) -> int:
        return self._resource("spill_bytes")

    @property
    def shared(self) -> int:
        return self._resource("shared_bytes")

    def max_active_clusters(self, cluster_size=None):
        """How many clusters of `cluster_size` CTAs (default: the kernel's ctas_per_cga) can be
        resident at once on the current CUDA device, with this kernel's num_warps and shared
        memory (cuOccupancyMaxActiveClusters): a persistent cluster kernel's grid[0] is at most
        that many clusters times cluster_size CTAs. Since a cluster must fit inside one GPC, it
        can be less than num_sms // cluster_size. A kernel compiled for clusters answers for its
        own cluster size only (ValueError for others, and for sizes below 1); 0 means no cluster
        of this kernel fits. Returns None when there is no device to ask: a kernel compiled for
        the interpreter, or a CUDA driver older than the query (11.8)."""
        import operator

        if cluster_size is None:
            cluster_size = max(1, self.kernel.num_ctas)
        try:
            if isinstance(cluster_size, bool):
                raise TypeError
            cluster_size = operator.index(cluster_size)
        except TypeError:
            raise TypeError(f"max_active_clusters: cluster_size must be an int (CTAs per "
                            f"cluster), got {cluster_size!r}") from None
        if self.interpret:
            return None
        return self.kernel.max_active_clusters(cluster_size)

    def launch_metadata(self, grid, values):
        """What launch hooks receive (Triton's): a LazyDict of name, function and stream (None in
        the interpreter), to which the @jit function's `launch_metadata(grid, metadata, args)`
        adds its dict (args by parameter name, constexprs included) when a hook asks."""
        from .compiler import LazyDict

        stream = None if self.interpret else _current_stream()
        ret = LazyDict({"name": self.kernel.name, "function": self.kernel, "stream": stream})
        fn = getattr(self.fn, "launch_metadata", None)
        if fn is not None:
            ret.add(fn, (grid, self.metadata, dict(zip(self.fn.arg_names, values))))
        return ret

    def launch_gpu(self, grid, values, passed=None, pdl=False):
        """Launches on PyTorch's current stream. `passed` holds what _scan already extracted
        (device addresses, ints); descriptors are encoded here, at launch."""
        if passed is None:
            passed = self.fn._scan(values)[2]
        if self.gpu_plain:
            args = [passed[i] for i in self.gpu_index]
        else:
            args = []
            for i, kind, name in self.binder:
                if kind == _Arg.DESC:
                    args.append(values[i].encode(self.swizzles.get(name)))
                else:
                    args.append(passed[i])
        stream = _current_stream()
        if self.scratch_size:
            args.append(self._global_scratch(grid, stream))
        self.kernel.launch(grid[0], grid[1], grid[2], stream, args, pdl)

    def _global_scratch(self, grid, stream):
        """The device address of scratch_size bytes per program from set_allocator's function
        (Triton's: fn(size, alignment=128, stream)); the buffer is kept until the next launch."""
        from .runtime._allocation import get_allocator

        self._scratch = get_allocator()(self.scratch_size * grid[0] * grid[1] * grid[2], 128,
                                        stream)
        return self._scratch.data_ptr()

    def run_interpreter(self, grid, values):
        args = []
        write_back = []
        keep = []
        for i, kind, name in self.binder:
            v = values[i]
            # NumPy arrays and torch tensors share a specialization (same dtype and alignment),
            # so the compiled kernel may have been bound to the other kind: look at the object.
            if kind in (_Arg.NUMPY, _Arg.TENSOR) and hasattr(v, "__array_interface__"):
                args.append(_host_buffer(v, name))
            elif kind in (_Arg.NUMPY, _Arg.TENSOR):
                host, back = _torch_host_view(v)
                keep.append(host)
                args.append(_host_buffer(host, name))
                if back is not None:
                    write_back.append((v, back))
            elif kind == _Arg.DESC:
                v.check_tma_rules(name)
                base = v.base
                if not hasattr(base, "__array_interface__"):
                    base, back = _torch_host_view(base)
                    keep.append(base)
                    if back is not None:
                        write_back.append((v.base, back))
                address, nbytes, *writable = _host_buffer(base, name)
                args.append((address, nbytes, list(v.shape), list(v.strides), *writable))
            elif kind == _Arg.BOOL:
                args.append(int(v))
            elif kind == _Arg.INT:
                args.append(int(v))
            else:
                args.append(float(v))
        read_only = [name for (_, _, name), a in zip(self.binder, args)
                     if type(a) is tuple and a[-1] is False]
        if read_only:
            self._refuse_read_only_writes(read_only, values)
        self.kernel.interpret(tuple(grid), args, _HostMemory())
        for tensor, host in write_back:
            tensor.copy_(host)
        del keep

    def _refuse_read_only_writes(self, read_only, values):
        """ValueError naming the first read-only array the kernel may store to (the interpreter
        would refuse the store mid-run, after other arguments were written)."""
        written = getattr(self, "_written", None)
        if written is None:
            written = self._written = frozenset(getattr(self.kernel, "written_params", ()))
        for name in read_only:
            if name in written:
                v = values[self.fn._index[name]]
                what = "a TensorDescriptor over a read-only array" if isinstance(
                    v, _TensorDescriptor) else "a read-only array"
                raise ValueError(
                    f"argument '{name}' of {self.fn.__name__} is {what} (its NumPy "
                    f"flags.writeable is False, or it views immutable memory such as bytes), but "
                    f"the kernel may store to it; pass a writable copy, e.g. np.array({name})")


def _host_buffer(arr, name: str):
    """(address, nbytes) of a NumPy array for the interpreter, (address, nbytes, False) when it is
    read-only: from the array's first element to the end of the memory that really lies behind
    it, so that strided views index as on the GPU and no access leaves that memory (an
    np.lib.stride_tricks.as_strided view may claim more than its buffer holds)."""
    start = arr.ctypes.data
    writable = bool(arr.flags.writeable)
    if arr.size == 0:
        return (start, 0) if writable else (start, 0, False)
    if any(s < 0 for s in arr.strides):
        raise ValueError(f"argument '{name}': arrays with negative strides are not supported; "
                         f"pass np.ascontiguousarray(...)")
    # The end of the .base chain owns the memory: an array that owns its data, or the object a
    # view was made from (bytes, bytearray, mmap, memoryview...), whose buffer is the truth.
    # Views and as_strided's DummyArray in between only claim a shape.
    owner, array = arr, arr
    while getattr(owner, "base", None) is not None:
        owner = owner.base
        if _is_numpy(owner):
            array = owner
    extent = _exported_memory(owner) if owner is not array else None
    if extent is None:  # an array at the end, or an exporter without the buffer protocol
        extent = _array_span(array)
    lo, hi, exporter_writable = extent
    if not lo <= start < hi:
        raise ValueError(f"argument '{name}': the array's first element lies outside the memory "
                         f"of the object it views ({type(owner).__name__})")
    if writable and exporter_writable:
        return (start, hi - start)
    return (start, hi - start, False)


def _exported_memory(obj):
    """(first address, end address, writable) of what `obj` exports through the buffer
    protocol, or None when it exports nothing C-contiguous."""
    import numpy as np

    try:
        raw = np.frombuffer(obj, dtype=np.uint8)
    except (TypeError, ValueError, BufferError):
        return None
    start = raw.ctypes.data
    return start, start + raw.size, bool(raw.flags.writeable)


def _array_span(arr):
    """(first address, end address, writable) of the bytes an array's own shape and strides
    reach (for an array that owns its data, its allocation)."""
    start = arr.ctypes.data
    lo = hi = start
    for n, s in zip(arr.shape, arr.strides):
        if s < 0:
            lo += (n - 1) * s
        else:
            hi += (n - 1) * s
    return lo, hi + arr.itemsize, bool(arr.flags.writeable)


class _HostMemory:
    """The interpreter's answer for an address outside every argument: the live host memory that
    holds it (a CPU torch tensor's storage or a NumPy array's buffer), as (address, nbytes,
    writable), or None. Kernels reach such memory through addresses they read, as Triton's
    grouped GEMM tutorial reads its tensors' addresses from a table; Triton's interpreter
    dereferences them as they are. The candidates are gathered once per launch, at the first
    such address."""

    def __init__(self):
        import sys

        # The launching frames: the interpreter may ask from a thread of its own (async tasks),
        # whose Python stack is empty.
        self._frame = sys._getframe(1)
        self._spans = None

    def __call__(self, address):
        if self._spans is None:
            self._spans = _live_host_spans(self._frame)
        for lo, hi, writable in self._spans:
            if lo <= address < hi:
                return (lo, hi - lo, writable)
        return None


def _live_host_spans(frame):
    """(first address, end address, writable) of every CPU torch tensor's storage and every
    NumPy array's memory that the garbage collector or `frame` and its callers reach."""
    import gc
    import sys

    torch = sys.modules.get("torch")
    np = sys.modules.get("numpy")
    objects = gc.get_objects()
    while frame is not None:  # locals of running functions are no gc objects since 3.11
        objects.append(frame.f_locals)
        frame = frame.f_back
    spans = []
    if torch is not None:
        for o in objects:
            if issubclass(type(o), torch.Tensor) and o.device.type == "cpu":
                try:
                    storage = o.untyped_storage()
                    lo, n = storage.data_ptr(), storage.nbytes()
                except (RuntimeError, NotImplementedError):  # sparse, meta, ...
                    continue
                if n:
                    spans.append((lo, lo + n, True))
    if np is not None:
        seen = set()
        for o in gc.get_referents(*objects):
            if issubclass(type(o), np.ndarray) and id(o) not in seen:
                seen.add(id(o))
                owner = o
                while isinstance(owner.base, np.ndarray):
                    owner = owner.base
                extent = None
                if owner.base is not None:
                    extent = _exported_memory(owner.base)
                if extent is None:
                    extent = _array_span(owner)
                if extent[1] > extent[0]:
                    spans.append(extent)
    return spans


def _torch_host_view(t):
    """A NumPy view of a torch tensor for the interpreter, and the CPU copy to write back when
    the tensor lives on the GPU."""
    import torch

    back = None
    base = getattr(t, "base", None)
    if base is not None and not hasattr(t, "detach"):  # a TensorWrapper: the same bytes
        t = base
    host = t.detach()
    if host.is_cuda:
        host = host.cpu()
        back = host
    if host.dtype == torch.bfloat16:
        arr = host.view(torch.int16).numpy()
    elif str(host.dtype).startswith("torch.float8"):
        arr = host.view(torch.uint8).numpy()
    else:
        arr = host.numpy()
    return arr, back


# ------------------------------------------------------------------------------------------------
# JITFunction
# ------------------------------------------------------------------------------------------------

_LAUNCH_OPTIONS = ("num_warps", "num_stages", "ctas_per_cga", "num_ctas")


class KernelInterface:
    """`kernel[grid](*args, **kwargs)`."""

    def __getitem__(self, grid):
        def launcher(*args, **kwargs):
            return self.run(*args, grid=grid, **kwargs)

        return launcher



# ptxas's notes that a kernel lost tensor-core overlap: C7510-C7517 are its wgmma serialization
# (C7514: a register of a wgmma in flight read elsewhere; C7512: too few registers) and the
# wait it injects before an accumulator is read (C7517).
_PTXAS_PERFORMANCE_NOTE = r"\((C75(?:1\d))\) (.*)"


def _warn_performance_notes(kernel_name: str, ptxas_log: str) -> None:
    """Each of ptxas's wgmma performance notes in `ptxas_log` as a warpweave PerformanceWarning."""
    import re
    import warnings

    from .errors import PerformanceWarning

    for line in (ptxas_log or "").splitlines():
        m = re.search(_PTXAS_PERFORMANCE_NOTE, line)
        if m:
            warnings.warn(PerformanceWarning(f"kernel '{kernel_name}': ptxas {m.group(1)}: "
                                             f"{m.group(2).strip()}"), stacklevel=3)


class JITFunction(KernelInterface):
    def __init__(self, fn, do_not_specialize=(), noinline=False, debug=None):
        if not callable(fn) or not hasattr(fn, "__code__"):
            raise TypeError(f"@ww.jit expects a Python function, got {type(fn).__name__}")
        self.fn = fn
        self.__name__ = fn.__name__
        self.__qualname__ = fn.__qualname__
        self.__module__ = fn.__module__
        self.__doc__ = fn.__doc__
        self.__wrapped__ = fn
        self.noinline = noinline
        self.debug = debug
        sig = inspect.signature(fn)
        self.params = list(sig.parameters.values())
        for p in self.params:
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                raise TypeError(f"kernel '{fn.__name__}': *args and **kwargs parameters are not "
                                f"supported; list every parameter")
        self.arg_names = [p.name for p in self.params]
        self._index = {n: i for i, n in enumerate(self.arg_names)}
        # Parameters named like a launch option (tutorial 02's `num_stages: tl.constexpr`)
        # receive the option's value too, as Triton binds such a keyword to both.
        self._option_params = tuple(o for o in _LAUNCH_OPTIONS if o in self._index)
        self.constexprs = [self._is_constexpr(p.annotation) for p in self.params]
        self.defaults = [p.default if p.default is not p.empty else _MISSING for p in self.params]
        dns = set()
        if isinstance(do_not_specialize, (str, int)):
            do_not_specialize = [do_not_specialize]
        for d in do_not_specialize:
            if isinstance(d, bool) or not isinstance(d, (int, str)):
                raise TypeError(f"do_not_specialize: {d!r} is neither a parameter name nor an "
                                f"index of kernel '{fn.__name__}'")
            if isinstance(d, int) and not -len(self.arg_names) <= d < len(self.arg_names):
                raise ValueError(f"do_not_specialize: index {d} is out of range; kernel "
                                 f"'{fn.__name__}' has {len(self.arg_names)} parameters")
            dns.add(self.arg_names[d] if isinstance(d, int) else d)
        unknown = dns - set(self.arg_names)
        if unknown:
            raise ValueError(f"do_not_specialize names unknown parameters: {sorted(unknown)}")
        self.specialize = [n not in dns for n in self.arg_names]
        self._nargs = len(self.arg_names)
        self._launcher = None  # native FastLauncher, made on first use; False without one
        self._bound: dict = {}  # grid tuple -> kernel[grid], so kernel[(n,)] allocates nothing
        self._option_cache: dict = {}
        self._env = None
        self._src = None  # the source _unsafe_update_src set, else the file's
        self.cache = _KernelCache()
        self.cache.owner = self
        self.compile_count = 0  # compiles done (not served by a cache), for tests and tools

    def __getitem__(self, grid):
        # Replaced by the extension's C version (make_subscript) when a launcher is made.
        return self._subscript(grid)

    def _subscript(self, grid):
        """kernel[grid], bound once per grid tuple (and grid function without a closure)."""
        try:
            bound = self._bound.get(grid)
        except TypeError:  # an unhashable grid (a list)
            bound = hashable = None
        else:
            if bound is not None:
                return bound
            hashable = True
        launcher = self._launcher
        if launcher is None:
            launcher = self._launcher = _make_native_launcher(self)
        bound = launcher.bind(grid) if launcher is not False else _PythonBoundLaunch(self, grid)
        # Grid tuples, and grid functions without closures (a closure may hold tensors, which
        # the cache must not keep alive; a lambda made per call would never hit anyway).
        if hashable and (type(grid) is tuple or getattr(grid, "__closure__", True) is None):
            if len(self._bound) >= 64:  # bounded: grids usually take a few shapes
                self._bound.clear()
            self._bound[grid] = bound
        return bound

    def _launch_general(self, grid, args, kwargs):
        """The native launch path's fallback: a launch it does not serve (yet)."""
        launcher = self._launcher
        if launcher is not None and launcher is not False and not launcher.configured:
            _configure_launcher(launcher)
        return self.run(*args, grid=grid, **kwargs)

    @staticmethod
    def _is_constexpr(annotation) -> bool:
        if annotation is tl.constexpr:
            return True
        if isinstance(annotation, str):
            return annotation.split(".")[-1] == "constexpr"
        return False

    def __repr__(self):
        return f"JITFunction({self.__module__}:{self.__qualname__})"

    def __call__(self, *args, **kwargs):
        raise RuntimeError(
            f"@ww.jit function '{self.__name__}' cannot be called directly from Python: launch it "
            f"as {self.__name__}[grid](...), or call it from another @ww.jit kernel")

    # -- binding ---------------------------------------------------------------------------------

    def bind(self, args, kwargs) -> list:
        """Positional and keyword arguments -> one value per parameter (defaults applied)."""
        n = len(self.arg_names)
        if len(args) > n:
            raise TypeError(f"{self.__name__}() takes {n} arguments "
                            f"({', '.join(self.arg_names)}) but {len(args)} were given")
        values = list(args)
        values.extend([_MISSING] * (n - len(args)))
        for k, v in kwargs.items():
            i = self._index.get(k)
            if i is None:
                raise TypeError(f"{self.__name__}() got an unexpected keyword argument '{k}'; its "
                                f"parameters are {', '.join(self.arg_names)}")
            if i < len(args):
                raise TypeError(f"{self.__name__}() got multiple values for argument '{k}'")
            values[i] = v
        for i, v in enumerate(values):
            if v is _MISSING:
                d = self.defaults[i]
                if d is _MISSING:
                    what = "constexpr" if self.constexprs[i] else "argument"
                    raise TypeError(f"{self.__name__}() missing required {what} "
                                    f"'{self.arg_names[i]}'")
                values[i] = d
        return values

    def _scan(self, values):
        """One pass over the bound values: the specialization key, each argument's (name, kind)
        (kind None for constexprs), the value a GPU launch passes for it, whether NumPy arrays
        or CUDA tensors are among them, and the index of the first CPU torch tensor."""
        key = []
        kinds = []
        passed = []
        has_numpy = has_cuda = False
        cpu_tensor = None
        names = self.arg_names
        for i, v in enumerate(values):
            name = names[i]
            if self.constexprs[i] or v is None:
                cv = v.value if isinstance(v, tl.constexpr) else v
                key.append((type(cv), _hashable(cv)))
                kinds.append((name, None))
                passed.append(None)
                continue
            t = type(v)
            if t is int:
                key.append(_int_spec(v, self.specialize[i], name))
                kinds.append((name, _Arg.INT))
                passed.append(v)
            elif hasattr(v, "data_ptr") and hasattr(v, "is_cuda"):
                ptr = v.data_ptr()
                sig = "*" + _torch_sig(v.dtype, name)
                key.append(sig + ":16" if self.specialize[i] and ptr % 16 == 0 else sig)
                kinds.append((name, _Arg.TENSOR))
                passed.append(ptr)
                if v.is_cuda:
                    has_cuda = True
                elif cpu_tensor is None and not _is_pinned(v):
                    # Page-locked host memory is addressable from kernels (unified addressing),
                    # so Triton launches with it; other CPU memory is not.
                    cpu_tensor = i
            elif t is _TensorDescriptor:  # the signature by base dtype and block: cached
                base = v.base
                spec_key = (getattr(base, "dtype", None), *v.block_shape)
                spec = _descriptor_specs.get(spec_key)
                if spec is None:
                    spec = v.signature_type()  # raises, naming the argument, for a bad base
                    _descriptor_specs[spec_key] = spec
                key.append(spec)
                kinds.append((name, _Arg.DESC))
                passed.append(v)
                if _is_numpy(base):
                    has_numpy = True
                else:
                    cuda = getattr(base, "is_cuda", None)
                    if cuda:
                        has_cuda = True
                    elif cuda is False and cpu_tensor is None:
                        cpu_tensor = i
            else:
                if t.__module__ == "numpy" and not _is_numpy(v):
                    v = _plain_scalar(v)  # np.int64(5) is passed as 5
                spec, kind = runtime_spec(v, name, self.specialize[i])
                key.append(spec)
                kinds.append((name, kind))
                if kind == _Arg.NUMPY:
                    has_numpy = True
                elif kind == _Arg.DESC:  # where its base lives decides, as for tensors
                    base = v.base
                    if _is_numpy(base):
                        has_numpy = True
                    elif _is_torch_tensor(base):
                        if base.is_cuda:
                            has_cuda = True
                        elif cpu_tensor is None:
                            cpu_tensor = i
                passed.append(int(v) if kind == _Arg.BOOL else v)
        return tuple(key), kinds, passed, has_numpy, has_cuda, cpu_tensor

    def specialization(self, values):
        """(cache key part, [(name, kind or None for constexprs)])."""
        key, kinds = self._scan(values)[:2]
        return key, kinds

    def signature_string(self, values, kinds, key_part) -> str:
        """The `wwc --signature` text of one specialization."""
        entries = []
        for (name, kind), v, key in zip(kinds, values, key_part):
            if kind is None and _is_function_constexpr(v):
                entries.append(f"{name}={_FN_CONSTEXPR}{name}")
            elif kind is None:
                entries.append(f"{name}={literal(v, name)}")
            else:
                entries.append(f"{name}:{key}")
        return ",".join(entries)

    @property
    def src(self) -> str:
        """The kernel's source from its `def` on (dedented), as Triton's JITFunction.src."""
        return self._src if self._src is not None else _function_src(self.fn)

    @src.setter
    def src(self, value):
        raise AttributeError("JITFunction.src cannot be set directly; use "
                             "_unsafe_update_src(new_src), as in Triton")

    def _unsafe_update_src(self, new_src: str) -> None:
        """Compiles the kernel from `new_src` (a `def` of the same name and parameters) from
        now on, in place of its file's text: Triton's test idiom
        `kernel._unsafe_update_src(kernel.src.replace(...))`. Kernels that call this one are not
        recompiled (in Triton the caller clears their hashes)."""
        if not isinstance(new_src, str):
            raise TypeError(f"_unsafe_update_src: expected the new source as a str, got "
                            f"{type(new_src).__name__}")
        self._src = new_src
        self._env = None
        self._bound.clear()
        self.cache.clear()

    def environment(self) -> _Environment:
        if self._env is None:
            self._env = collect_environment(self)
        return self._env

    def _check_environment(self):
        """Forgets the compiled kernels (and the environment) once a global value they were
        compiled with has been rebound, so that the launch recompiles with the new value, as
        Triton checks its used_global_vals; the native launch path checks the same guards."""
        env = self._env
        if env is not None and env.guards and not env.current():
            self._env = None
            self.cache.clear()

    # -- compile + launch ------------------------------------------------------------------------

    def _options(self, num_warps, num_stages, ctas_per_cga, num_ctas):
        """(num_warps, num_stages, CTAs per cluster, the cluster's (x, y, z) shape) of a launch's
        options, each checked."""
        num_warps = _option_int("num_warps", num_warps, 4)
        if not 1 <= num_warps <= 32 or num_warps & (num_warps - 1):
            raise LaunchOptionError(
                f"num_warps must be a power of 2 from 1 to 32, got {num_warps!r}")
        num_stages = _option_int("num_stages", num_stages, 3)
        if not 0 <= num_stages <= _MAX_STAGES:
            raise ValueError(f"num_stages must be from 0 to {_MAX_STAGES} (0 and 1: loops are not "
                             f"pipelined), got {num_stages!r}")
        ctas, shape = 1, (1, 1, 1)
        if ctas_per_cga is not None:
            given = ctas_per_cga
            dims = tuple(given) if isinstance(given, (tuple, list)) else (given,)
            if not 1 <= len(dims) <= 3:
                raise ValueError(f"ctas_per_cga={given!r}: expected (x,), (x, y) or (x, y, z)")
            dims = tuple(_option_int("ctas_per_cga", d, None, given) for d in dims)
            shape = dims + (1,) * (3 - len(dims))
            ctas = shape[0] * shape[1] * shape[2]
            if any(d < 1 for d in shape) or ctas > _MAX_CLUSTER:
                raise ValueError(f"ctas_per_cga={given!r}: a cluster holds 1 to {_MAX_CLUSTER} "
                                 f"CTAs, each dimension at least 1")
        if num_ctas is not None:
            # Triton's num_ctas splits one program over a cluster of CTAs; what a program computes
            # does not change with it. warpweave runs each program on one CTA (no cluster), so
            # the grid counts programs as in Triton and any grid is accepted.
            n = _option_int("num_ctas", num_ctas, 1)
            if not 1 <= n <= _MAX_CLUSTER:
                raise ValueError(f"num_ctas must be from 1 to {_MAX_CLUSTER}, got {num_ctas!r}")
            if n != 1 and ctas_per_cga is not None and n != ctas:
                raise ValueError(f"num_ctas={n} and ctas_per_cga={ctas_per_cga!r} ({ctas} CTAs) "
                                 f"disagree; give one of them")
        return num_warps, num_stages, ctas, shape

    def compile_for(self, values, interpret: bool, options, target=None):
        """Compiled kernel for bound `values` (served by the memory and disk caches)."""
        key_part, kinds = self.specialization(values)
        options = tuple(options)
        if target is None:
            target = "interp:" + _interpreted_ir_target() if interpret else _gpu_target()
        trap = trap_hang_tries()
        key = (interpret, target, options, trap, key_part)
        self._check_environment()
        compiled = self.cache.get(key)
        if compiled is None:
            compiled = self._compile(values, key_part, kinds, interpret, options, target, trap)
            self.cache[key] = compiled
        return compiled

    def _compile(self, values, key_part, kinds, interpret, options, target, trap=0):
        signature = self.signature_string(values, kinds, key_part)
        env = self.environment()
        functions = {_FN_CONSTEXPR + name: v for (name, kind), v in zip(kinds, values)
                     if kind is None and _is_function_constexpr(v)}
        if functions:  # @jit functions passed as constexprs: their files and bindings too
            env = collect_environment(self, functions)
        num_warps, num_stages, num_ctas = options[:3]
        shape = options[3] if len(options) > 3 else (num_ctas, 1, 1)  # callers giving three
        given = tuple(options[4:])
        fp_fusion, reflect_ftz, maxnreg = given + _OPTION_TAIL_DEFAULTS[len(given):]
        nat = native()
        stage = "tile-ir" if interpret else "cubin"
        compile_target = _interpreted_ir_target() if interpret else target
        request = dict(files=env.files, kernel=self.fn.__name__, signature=signature,
                       globals=env.globals, target=compile_target, num_warps=num_warps,
                       num_stages=num_stages, num_ctas=num_ctas, stage=stage, names=env.names)
        if shape[1:] != (1, 1):  # 1-D clusters keep the request (and disk-cache key) they had
            request["cluster_dims"] = list(shape)
        if trap:
            request["mbarrier_trap_tries"] = trap
        if not fp_fusion:  # the default keeps the request (and disk-cache key) it had
            request["fp_fusion"] = False
        if not reflect_ftz:
            request["reflect_ftz"] = False
        if maxnreg is not None:
            request["maxnreg"] = maxnreg
        kernel = None
        disk_key = None
        if not interpret:
            from . import cache

            disk_key = cache.cache_key(request, nat.compiler_version() + cache.build_id(nat))
            kernel = cache.load(disk_key)
            if kernel is not None and any(p[0] not in self._index and p[0] != _GLOBAL_SCRATCH
                                          for p in kernel.params):
                # Keys match but the entry is not this kernel's: never serve it again.
                cache.discard(disk_key, f"its parameters are not those of {self.__name__}")
                kernel = None
        if kernel is None:
            try:
                kernel = nat.compile(**request)
            except nat.CompilationError as e:
                from .errors import as_interpreter_error, chain_error_detail

                chain_error_detail(e)
                if interpret:  # Triton's interpreter reports it as an InterpreterError
                    raise as_interpreter_error(e) from e.__cause__
                raise
            self.compile_count += 1
            _warn_performance_notes(self.fn.__name__, getattr(kernel, "ptxas_log", ""))
            if disk_key is not None:
                from . import cache

                cache.store(disk_key, kernel)
        compiled = CompiledKernel(self, kernel, signature, kinds, interpret, options)
        if interpret:
            compiled._request = request  # for the resources it reports (CompiledKernel.n_regs)
        compiled.used_globals = env.guards  # what the native launch path checks on each launch
        return compiled

    def run(self, *args, grid, num_warps=None, num_stages=None, ctas_per_cga=None, num_ctas=None,
            warmup=False, launch_pdl=False, extern_libs=None, launch_cooperative_grid=False,
            enable_fp_fusion=None, launch_cluster=False, arch=None, enable_reflect_ftz=True,
            maxnreg=None, **kwargs):
        # launch_pdl: a programmatic dependent launch (the kernel orders itself after the previous
        # one with tl.extra.cuda.gdc_wait). extern_libs: Triton links the named bitcode libraries;
        # warpweave implements libdevice itself, so the paths are not read.
        # launch_cooperative_grid: Triton's cooperative launch (all programs resident at once, for
        # its grid-wide barrier, which warpweave's language does not have). The interpreter runs
        # the programs one after another as Triton's does; a GPU launch is an ordinary one.
        # launch_cluster: TLX's cluster launch of a grid without ctas_per_cga, each CTA a cluster
        # of one. A plain launch is that already (cluster launch control cancels single CTAs, and
        # a CTA's cluster rank and size read 0 and 1), so only ctas_per_cga changes the launch.
        # enable_fp_fusion: whether float multiplies and adds may become FMAs on the GPU (None:
        # knobs.language.default_fp_fusion, True unless set); the interpreter never fuses them.
        # enable_reflect_ftz=False: the fp32 approximations that flush subnormals to zero (ex2 of
        # exp2 and pow, fast_dividef) are issued without .ftz, as Triton's option.
        # arch: the GPU architecture to compile for ("sm80", "sm90", "sm100"; None:
        # knobs.runtime.override_arch, else the current device's), as Triton's option.
        # maxnreg: the kernel declares .maxnreg (registers per thread), as Triton's option.
        if self._option_params:
            given = dict(num_warps=num_warps, num_stages=num_stages, ctas_per_cga=ctas_per_cga,
                         num_ctas=num_ctas)
            for name in self._option_params:
                if given[name] is not None and name not in kwargs:
                    kwargs[name] = given[name]
        if kwargs or len(args) != self._nargs:
            values = self.bind(args, kwargs)
        else:
            values = args
        # Keyed with the types too: 4.0 and True must not find the options of 4 and 1.
        opt_key = (num_warps, num_stages, ctas_per_cga, num_ctas, type(num_warps),
                   type(num_stages), type(ctas_per_cga), type(num_ctas))
        try:
            options = self._option_cache.get(opt_key)
        except TypeError:  # unhashable: checked below, never cached
            options = opt_key = None
        if options is None:
            options = self._options(num_warps, num_stages, ctas_per_cga, num_ctas)
            if opt_key is not None and (ctas_per_cga is None or type(ctas_per_cga) is int):
                self._option_cache[opt_key] = options
        if enable_fp_fusion is None:
            enable_fp_fusion = _knobs.language.default_fp_fusion
        # (fusion, reflect ftz, maxnreg) after the cluster shape, up to the last that is not its
        # default: a launch that changes none keys (and compiles) as it always did.
        tail = (bool(enable_fp_fusion), bool(enable_reflect_ftz),
                None if maxnreg is None else _maxnreg(maxnreg))
        while tail and tail[-1] == _OPTION_TAIL_DEFAULTS[len(tail) - 1]:
            tail = tail[:-1]
        options = options[:4] + tail
        key_part, kinds, passed, has_numpy, has_cuda, cpu_tensor = self._scan(values)
        interpret = has_numpy or _interpret_env()
        if interpret:
            if has_numpy and has_cuda:
                raise ValueError(f"{self.__name__}: NumPy arrays and CUDA tensors cannot be mixed "
                                 f"in one launch")
            target = "interp:" + _interpreted_ir_target()
        else:
            if cpu_tensor is not None:
                raise ValueError(
                    f"argument '{self.arg_names[cpu_tensor]}' of {self.__name__} is a CPU tensor; "
                    f"GPU launches need CUDA tensors (move it with .cuda(), pass NumPy arrays, or "
                    f"set WARPWEAVE_INTERPRET=1 to run in the interpreter)")
            if arch is None:
                arch = _knobs.runtime.override_arch
            target = _gpu_target() if arch is None else _arch_target(arch)
            if target == "sm_80" and num_ctas is not None and _option_int("num_ctas", num_ctas,
                                                                          1) > 1:
                # Triton's check: its CTA split needs clusters (warpweave ignores the split, but
                # a launch Triton refuses is refused here too).
                raise ValueError("num_ctas > 1 requires NVIDIA SM90+ (Hopper); the target is "
                                 "sm_80")
        trap = trap_hang_tries()
        key = (interpret, target, options, trap, key_part)
        self._check_environment()
        compiled = self.cache.get(key)
        if compiled is None:
            compiled = self._compile(values, key_part, kinds, interpret, options, target, trap)
            self.cache[key] = compiled
        if warmup:
            return compiled
        g = grid
        if callable(g):
            meta = dict(zip(self.arg_names, values))
            meta["num_warps"], meta["num_stages"], meta["num_ctas"] = options[:3]
            g = g(meta)
        g = _normalize_grid(g, self.__name__)
        runtime_knobs = _knobs.runtime
        enter_hook, exit_hook = runtime_knobs.launch_enter_hook, runtime_knobs.launch_exit_hook
        if enter_hook or exit_hook:
            return self._run_hooked(compiled, g, values, passed, enter_hook, exit_hook,
                                    launch_pdl)
        compiled.launch(g, values, passed, launch_pdl)
        return compiled

    def _run_hooked(self, compiled, grid, values, passed, enter_hook, exit_hook, pdl=False):
        """A launch between the launch hooks (Triton's order: enter, launch, exit; exit also
        when the launch raises, so that a profiler's open launch is closed)."""
        metadata = compiled.launch_metadata(grid, values)
        if enter_hook:
            enter_hook(metadata)
        try:
            compiled.launch(grid, values, passed, pdl)
        finally:
            if exit_hook:
                exit_hook(metadata)
        return compiled

    def warmup(self, *args, grid=(1,), **kwargs):
        """Compiles for these arguments without launching; returns the CompiledKernel."""
        return self.run(*args, grid=grid, warmup=True, **kwargs)


def _hashable(v):
    """A key part for a constexpr's value; tuples and lists item by item with the items' types,
    as their literal text differs: (1, 2) and (True, 2.0) are equal but not one kernel."""
    if isinstance(v, (list, tuple)):
        return tuple((type(x), _hashable(x)) for x in v)
    if type(v).__module__ == "warpweave._tlx_host" and hasattr(v, "_kernel_literal"):
        return v._kernel_literal()  # the kernel sees exactly this text: its value is the key
    try:
        hash(v)
        return v
    except TypeError:
        return repr(v)


# The largest num_stages and CTAs per cluster a launch may ask for: 16 CTAs is sm_90's largest
# (non-portable) cluster; 16 stages is far deeper than any useful software pipeline, and bounds
# what a mistaken value can make the compiler allocate.
_MAX_STAGES = 16
_MAX_CLUSTER = 16
# The defaults of the options a compile's option tuple may carry after the cluster shape, in
# their order there (compile_for reads them): fp fusion, reflect ftz, maxnreg.
_OPTION_TAIL_DEFAULTS = (True, True, None)


def _is_pinned(tensor) -> bool:
    """Whether a CPU tensor's memory is page-locked (torch's pin_memory)."""
    try:
        return bool(tensor.is_pinned())
    except (AttributeError, RuntimeError, TypeError):
        return False


def _maxnreg(value) -> int:
    """A launch's maxnreg, checked: an int from 1 to 255 registers per thread."""
    n = _option_int("maxnreg", value, None)
    if not 1 <= n <= 255:
        raise ValueError(f"maxnreg must be from 1 to 255 registers per thread, got {value!r}")
    return n


def _option_int(option, value, default, shown=None):
    """A launch option's int value (`default` for None); TypeError naming the option for
    anything but an int (NumPy ints included; bools and floats refused)."""
    if type(value) is int:
        return value
    if value is None and default is not None:
        return default
    try:
        if isinstance(value, bool):
            raise TypeError
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{option} must be an int, got {shown if shown is not None else value!r}"
                        f" ({type(value).__name__})") from None


# CUDA's limits on a launch grid (x, y, z), which the interpreter keeps too.
_GRID_LIMITS = ((1 << 31) - 1, 65535, 65535)


def _normalize_grid(g, name):
    """The (x, y, z) ints of a launch grid: an int or a tuple/list of 1 to 3 ints (NumPy ints
    too), each from 0 to CUDA's limit; TypeError or ValueError naming the entry otherwise."""
    if type(g) is tuple and len(g) == 3 and type(g[0]) is int and type(g[1]) is int and \
            type(g[2]) is int and 0 <= g[0] <= 0x7FFFFFFF and 0 <= g[1] <= 0xFFFF and \
            0 <= g[2] <= 0xFFFF:  # the usual grid, checked inline (_GRID_LIMITS)
        return g
    if not isinstance(g, (tuple, list)):
        try:
            g = (operator.index(g),)
        except TypeError:
            raise TypeError(f"{name}: the grid must be an int, a tuple of 1 to 3 ints or a "
                            f"function returning one, got {g!r}") from None
    if not 1 <= len(g) <= 3:
        raise ValueError(f"{name}: the grid must have 1 to 3 dimensions, got {g!r}")
    dims = []
    for i, x in enumerate(g):
        try:
            v = operator.index(x)
        except TypeError:
            hint = "; round it up explicitly (ww.cdiv)" if isinstance(x, float) else ""
            raise TypeError(f"{name}: grid[{i}] = {x!r} of type {type(x).__name__} is not an int "
                            f"(grid {tuple(g)!r}){hint}") from None
        if v < 0:
            raise ValueError(f"{name}: grid dimensions must be >= 0, got grid[{i}] = {v} in "
                             f"{tuple(g)!r}")
        if v > _GRID_LIMITS[i]:
            raise ValueError(f"{name}: grid[{i}] = {v} is above CUDA's limit of {_GRID_LIMITS[i]} "
                             f"programs in that dimension (grid {tuple(g)!r})")
        dims.append(v)
    return tuple(dims) + (1,) * (3 - len(dims))


# ------------------------------------------------------------------------------------------------
# Fast launch path (native: FastLauncher in python/bindings/module.cpp; docs/user-guide.md)
# ------------------------------------------------------------------------------------------------

_tensor_type = None  # torch.Tensor once torch is imported


def _torch_tensor_type():
    global _tensor_type
    if _tensor_type is None:
        import sys

        torch = sys.modules.get("torch")
        if torch is None:
            return None
        _tensor_type = torch.Tensor
    return _tensor_type


def _env_key(key: bytes) -> bytes:
    """os.environ's own key object equal to `key` when the variable is set (a dict keeps the
    key object it was first given), else `key`: the native path's lookups by it are then
    identity hits, with no bytes comparison."""
    if type(_ENV_DATA) is dict:
        for k in _ENV_DATA:
            if k == key:
                return k
    return key


def _make_native_launcher(jitfn: "JITFunction"):
    """The native kernel[grid](...) path of `jitfn`, or False without the extension. It keys
    launches as JITFunction.run does (see _scan) and sends whatever it does not serve to
    jitfn._launch_general; os.environ's dict tells it when WARPWEAVE_INTERPRET or
    WARPWEAVE_TRAP_HANGS is set (it then always takes the general path), and the value of
    WARPWEAVE_TARGET, which is part of its keys as it is of the compile cache's."""
    from . import _native_loader

    try:
        fast_launcher = _native_loader.native().FastLauncher
    except (ImportError, AttributeError):
        return False
    import weakref

    # A weak reference: the function owns the launcher, and nanobind objects cannot be
    # collected as parts of cycles.
    launcher = fast_launcher(jitfn.__name__, jitfn.arg_names, [int(c) for c in jitfn.constexprs],
                             [int(s) for s in jitfn.specialize], list(jitfn.defaults), _MISSING,
                             weakref.ref(jitfn), _normalize_grid, _ENV_DATA,
                             [_env_key(_INTERPRET_KEY), _env_key(_TRAP_HANGS_KEY),
                              _env_key(_FP_FUSION_KEY)],
                             [_env_key(_TARGET_KEY)])
    _configure_launcher(launcher)
    if type(JITFunction.__dict__["__getitem__"]) is types.FunctionType:
        # kernel[grid] in C from now on: a grid bound before is a dict hit with no Python frame.
        make_subscript = getattr(_native_loader.native(), "make_subscript", None)
        if make_subscript is not None:
            JITFunction.__getitem__ = make_subscript(JITFunction._subscript)
    return launcher


def _configure_launcher(launcher):
    """Hands the launcher torch's tensor type and stream functions once torch is imported, and
    the TensorDescriptor class: descriptors over CUDA tensors then take the fast path too."""
    tensor_type = _torch_tensor_type()
    if tensor_type is not None:
        launcher.configure(tensor_type, *_stream_source(), descriptor_type=_TensorDescriptor)


class _PythonBoundLaunch:
    """kernel[grid] without the extension (pure-Python tests): always the general path."""

    __slots__ = ("jitfn", "grid")

    def __init__(self, jitfn, grid):
        self.jitfn = jitfn
        self.grid = grid

    def __call__(self, *args, **kwargs):
        return self.jitfn.run(*args, grid=self.grid, **kwargs)


class _KernelCache(dict):
    """The compiled kernels of one @jit function; clearing it also makes the native launch path
    forget them (benchmarks and tests clear it to force a compile)."""

    __slots__ = ("owner",)

    def clear(self):
        super().clear()
        launcher = self.owner._launcher
        if launcher is not None and launcher is not False:
            launcher.clear()


def jit(fn=None, *, version=None, repr=None, launch_metadata=None, do_not_specialize=(),
        do_not_specialize_on_alignment=(), debug=None, noinline=None):
    """Marks a function as a warpweave kernel (or a helper called from kernels). Takes Triton's
    keywords: `do_not_specialize` (names or indices of arguments compiled without value
    specialization), `do_not_specialize_on_alignment` (compiled without the 16-byte alignment
    hint; warpweave then drops every value specialization of those arguments, which is always
    correct), `noinline`, `debug`, and `version`, `repr`, `launch_metadata` (kept on the
    function, for tools that read them)."""

    def as_list(what, value):
        if isinstance(value, (str, int)):
            return [value]
        if isinstance(value, (bytes, bytearray)) or not hasattr(value, "__iter__"):
            raise TypeError(f"jit({what}=...) expects parameter names or indices, got "
                            f"{type(value).__name__}")
        return list(value)

    dns = as_list("do_not_specialize", do_not_specialize)
    dnsa = as_list("do_not_specialize_on_alignment", do_not_specialize_on_alignment)

    def decorate(f):
        names = dns + [d for d in dnsa if d not in dns]
        jf = JITFunction(f, do_not_specialize=names, noinline=bool(noinline), debug=debug)
        jf.version = version
        jf._repr = repr
        jf.launch_metadata = launch_metadata
        jf.do_not_specialize_on_alignment = tuple(do_not_specialize_on_alignment)
        return jf

    return decorate(fn) if fn is not None else decorate
