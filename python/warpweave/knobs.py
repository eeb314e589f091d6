"""`warpweave.knobs`: Triton's `triton.knobs` settings object, for host code and tests that read
or patch it. Knobs that warpweave honours are views of its environment variables (so the C++
runtime sees them too):

    cache.dir                   WARPWEAVE_CACHE_DIR
    compilation.always_compile  WARPWEAVE_CACHE_DISABLE (compile instead of reading the disk cache)
    runtime.interpret           WARPWEAVE_INTERPRET
    autotuning.print            WARPWEAVE_PRINT_AUTOTUNING (the autotuner prints its timings)
    autotuning.cache            WARPWEAVE_CACHE_AUTOTUNING (tuning results kept in the disk cache)
    ops.tuning                  WARPWEAVE_OPS_TUNING (1: tunes warpweave.ops per shape; 0, default:
                                the fixed GPU configurations)
    ops.config                  WARPWEAVE_OPS_CONFIG (forces warpweave.ops's configurations:
                                "op=kernel(K=V, ...);...", see warpweave.ops._tuning)
    language.default_fp_fusion  WARPWEAVE_DEFAULT_FP_FUSION (0: launches do not fuse mul + add
                                into FMAs unless they pass enable_fp_fusion=True)
    runtime.launch_enter_hook,  HookChains called before and after each launch with its
    runtime.launch_exit_hook    metadata (warpweave.profiler installs its hooks there)

Every other knob (Triton compiler switches such as `nvidia.use_meta_ws`) can be read and set, and
`scope()` restores them, but warpweave's compiler does not look at them. Reading a knob Triton
has that is not listed here gives None.
"""

from __future__ import annotations

import contextlib
import os

__all__ = ["HookChain", "cache", "compilation", "runtime", "autotuning", "ops", "nvidia", "amd",
           "language"]

_TRUE = ("1", "true", "True", "on", "ON", "yes")


class _EnvKnob:
    """A knob stored in an environment variable (bool or str)."""

    def __init__(self, var: str, kind=str, default=None):
        self.var = var
        self.kind = kind
        self.default = default

    def __get__(self, obj, owner=None):
        if obj is None:
            return self
        value = os.environ.get(self.var)
        if value is None:
            return self.default
        if self.kind is bool:
            return value in _TRUE
        return value

    def __set__(self, obj, value):
        if value is None or (self.kind is bool and not value and not self.default):
            os.environ.pop(self.var, None)
        elif self.kind is bool:
            os.environ[self.var] = "1" if value else "0"
        else:
            os.environ[self.var] = str(value)


class _Namespace:
    """One group of knobs: known ones are class attributes; `scope()` puts back every knob of
    the group that was changed inside it."""

    _lenient = True

    def __getattr__(self, name):
        if name.startswith("__") or not type(self)._lenient:
            raise AttributeError(name)
        return None

    def _snapshot(self) -> dict:
        names = {n for n in dir(type(self)) if not n.startswith("_") and n != "scope"}
        names |= set(self.__dict__)
        return {n: getattr(self, n) for n in names}

    def _fresh(self):
        """A new group of this kind with every knob at its default (what a process that set
        nothing sees): plain knobs as the class gives them, hook chains empty. Environment-backed
        knobs read the environment, which the caller clears."""
        group = type(self)()
        for name, value in vars(type(self)).items():
            if isinstance(value, HookChain):
                object.__setattr__(group, name, HookChain(reversed=value.reversed))
        return group

    @contextlib.contextmanager
    def scope(self):
        saved = self._snapshot()
        try:
            yield self
        finally:
            for name in list(self.__dict__):
                if name not in saved:
                    del self.__dict__[name]
            for name, value in saved.items():
                setattr(self, name, value)


class _Cache(_Namespace):
    dir = _EnvKnob("WARPWEAVE_CACHE_DIR", str,
                   os.path.join(os.path.expanduser("~"), ".cache", "warpweave"))


class _Compilation(_Namespace):
    always_compile = _EnvKnob("WARPWEAVE_CACHE_DISABLE", bool, False)


class HookChain:
    """Triton's chain of hooks of one kind, called in order (`reversed`: last added first).
    A launch hook takes the launch's metadata, a `warpweave.compiler.LazyDict` of name, function
    and stream (None for interpreter launches) plus what the kernel's `launch_metadata` adds."""

    def __init__(self, reversed: bool = False):
        self.calls: list = []
        self.reversed = reversed

    def add(self, func) -> None:
        if func not in self.calls:
            self.calls.append(func)
            _launch_hooks_changed()

    def remove(self, func) -> None:
        if func in self.calls:
            self.calls.remove(func)
            _launch_hooks_changed()

    def __bool__(self):
        return len(self.calls) > 0

    def __call__(self, *args, **kwargs):
        for call in (reversed(self.calls) if self.reversed else self.calls):
            call(*args, **kwargs)


class _Runtime(_Namespace):
    interpret = _EnvKnob("WARPWEAVE_INTERPRET", bool, False)
    # The GPU architecture kernels compile for in place of the current device's (Triton's
    # override_arch: "sm80", "sm90", "sm100"; jit's `arch=` launch option does the same per call).
    override_arch = _EnvKnob("WARPWEAVE_OVERRIDE_ARCH", str, None)
    # Called around every kernel launch while non-empty (a plain callable may replace a chain).
    # Launches then all take the Python launch path; with none, the native path runs unhooked.
    launch_enter_hook = HookChain()
    launch_exit_hook = HookChain(reversed=True)

    def __setattr__(self, name, value):
        super().__setattr__(name, value)
        if name in ("launch_enter_hook", "launch_exit_hook"):
            _launch_hooks_changed()


def _launch_hooks_changed():
    """Tells the native launch path whether launches must go through the hooks."""
    on = bool(runtime.launch_enter_hook) or bool(runtime.launch_exit_hook)
    try:
        from . import _native_loader

        set_launch_hooks = _native_loader.native().set_launch_hooks
    except (ImportError, AttributeError):
        return  # no native launch path to divert
    set_launch_hooks(on)


class _Autotuning(_Namespace):
    print = _EnvKnob("WARPWEAVE_PRINT_AUTOTUNING", bool, False)
    warmup = 25
    rep = 100
    # Every autotuner keeps its timings in the disk cache, as autotune(cache_results=True).
    cache = _EnvKnob("WARPWEAVE_CACHE_AUTOTUNING", bool, False)


class _Ops(_Namespace):
    # warpweave.ops's per-shape tuning (warpweave.ops._tuning): on GPUs, the first call of an op
    # on a new shape times its candidate configurations and keeps the fastest (in memory and in
    # the disk cache). False: the fixed configurations.
    tuning = _EnvKnob("WARPWEAVE_OPS_TUNING", bool, False)
    # "op=SPEC;op=SPEC": the configuration each named op launches on the GPU, tuning or not.
    config = _EnvKnob("WARPWEAVE_OPS_CONFIG", str, None)
    # do_bench's warm-up and timed milliseconds per candidate.
    warmup = 10
    rep = 50


# Triton's name for the knob groups' base class (`isinstance(knobs.runtime, knobs.base_knobs)`).
base_knobs = _Namespace
propagate_env = True

class _Language(_Namespace):
    # False: float multiplies and adds are not contracted into FMAs on the GPU, unless a launch
    # says enable_fp_fusion=True (Triton's TRITON_DEFAULT_FP_FUSION).
    default_fp_fusion = _EnvKnob("WARPWEAVE_DEFAULT_FP_FUSION", bool, True)


cache = _Cache()
compilation = _Compilation()
runtime = _Runtime()
autotuning = _Autotuning()
ops = _Ops()
nvidia = _Namespace()
amd = _Namespace()
language = _Language()
