"""`ww.autotune`, `ww.Config` and `ww.heuristics`, with Triton's meaning: pick the fastest of
several launch configurations per value of `key`, compiling the candidates in parallel (the C++
compiler releases the GIL) and timing them with `ww.testing.do_bench`.

Triton's keywords and call forms are accepted: `prune_configs_by={'early_config_prune': f,
'perf_model': m, 'top_k': k}` with `f(configs, named_args, **kwargs)`, autotune-level
`pre_hook(kwargs, reset_only=False)` and `post_hook(kwargs, exception)` (replacing the default
reset_to_zero / restore_value handling, as in Triton), `do_bench(fn, quantiles=...)`, and
`warmup`, `rep`, `use_cuda_graph`. WARPWEAVE_PRINT_AUTOTUNING=1 (or TRITON_PRINT_AUTOTUNING)
prints each candidate's time and the choice."""

from __future__ import annotations

import inspect
import os
import time

from .jit import JITFunction, KernelInterface, _interpret_env, _is_numpy, _is_torch_tensor
from .tensor_descriptor import TensorDescriptor

__all__ = ["Config", "autotune", "heuristics", "Autotuner", "Heuristics"]

# Triton's Config keywords that tune Triton's own compiler passes (automatic warp specialization,
# register reallocation, TMA lowering...): accepted and kept on the Config, but warpweave's
# compiler has no such passes, so they do not change the kernel.
_TRITON_HINTS = {
    "minRegAutoWS": None, "maxRegAutoWS": None, "pingpongAutoWS": None,
    "num_buffers_warp_spec": 0, "num_consumer_groups": 0, "reg_dec_producer": 0,
    "reg_inc_consumer": 0, "early_tma_store_lowering": None, "tma_store_pipelining": None,
    "generate_subtiled_region": None, "preferred_ctas_per_cga": None, "multicast": False,
    "auto_tma": None, "enable_tree_reduction": None, "allowDependentTwoCTA": None,
}


class Config:
    """One candidate: constexpr kwargs plus launch options (Triton's signature:
    `Config(kwargs, num_warps=4, num_stages=3, num_ctas=1, maxnreg=None, pre_hook=None, ...)`).
    `maxnreg` is applied (the kernel's .maxnreg); the Triton compiler hints above are recorded but
    not applied."""

    def __init__(self, kwargs, num_warps=4, num_stages=3, num_ctas=None, maxnreg=None,
                 pre_hook=None, ir_override=None, ctas_per_cga=None, **hints):
        unknown = sorted(set(hints) - set(_TRITON_HINTS))
        if unknown:
            raise TypeError(f"Config() got unexpected keyword arguments {unknown}")
        if ir_override is not None:
            raise NotImplementedError("Config(ir_override=...): warpweave compiles from Python "
                                      "source only and cannot load IR files")
        if not isinstance(kwargs, dict):
            raise TypeError(f"Config(kwargs=...) expects a dict of constexpr values, got "
                            f"{type(kwargs).__name__}")
        if pre_hook is not None and not callable(pre_hook):
            raise TypeError(f"Config(pre_hook=...) expects a function or None, got "
                            f"{type(pre_hook).__name__}")
        self.kwargs = dict(kwargs)
        self.num_warps = num_warps
        self.num_stages = num_stages
        self.ctas_per_cga = ctas_per_cga
        self.num_ctas = num_ctas
        self.pre_hook = pre_hook
        self.maxnreg = maxnreg
        self.ir_override = None
        for name, default in _TRITON_HINTS.items():
            setattr(self, name, hints.get(name, default))
        for name in ("minRegAutoWS", "maxRegAutoWS"):  # setmaxnreg counts, as in Triton
            if getattr(self, name) is not None and getattr(self, name) % 8 != 0:
                raise ValueError(f"Config({name}={getattr(self, name)}): register counts "
                                 f"must be divisible by 8")

    def all_kwargs(self) -> dict:
        """The kwargs and the launch options a launch with this config passes."""
        out = dict(self.kwargs)
        out["num_warps"] = self.num_warps
        out["num_stages"] = self.num_stages
        if self.ctas_per_cga is not None:
            out["ctas_per_cga"] = self.ctas_per_cga
        if self.num_ctas is not None:
            out["num_ctas"] = self.num_ctas
        if self.maxnreg is not None:
            out["maxnreg"] = self.maxnreg
        return out

    def __repr__(self):
        parts = [f"{k}: {v}" for k, v in self.kwargs.items()]
        parts += [f"num_warps: {self.num_warps}", f"num_stages: {self.num_stages}"]
        if self.num_ctas is not None:
            parts.append(f"num_ctas: {self.num_ctas}")
        if self.ctas_per_cga is not None:
            parts.append(f"ctas_per_cga: {self.ctas_per_cga}")
        if self.maxnreg is not None:
            parts.append(f"maxnreg: {self.maxnreg}")
        return ", ".join(parts)

    __str__ = __repr__

    def __eq__(self, other):
        return (isinstance(other, Config) and self.all_kwargs() == other.all_kwargs()
                and self.pre_hook is other.pre_hook)

    def __hash__(self):
        return hash(tuple(sorted((k, repr(v)) for k, v in self.all_kwargs().items())))


def _print_autotuning() -> bool:
    from . import _env

    return _env.get("PRINT_AUTOTUNING", "0") not in ("", "0", "false", "False")


def _runs_in_interpreter(named: dict) -> bool:
    """Whether a launch with these arguments runs in the interpreter (forced, or given NumPy
    arrays or descriptors over them), where timing configurations would measure nothing."""
    if _interpret_env():
        return True
    for v in named.values():
        if _is_numpy(v) or _is_numpy(getattr(v, "base", None)):
            return True
    return False


def _accepts_reset_only(fn) -> bool:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return "reset_only" in params or any(p.kind == p.VAR_KEYWORD for p in params.values())


def _base_jit(fn) -> JITFunction:
    while not isinstance(fn, JITFunction):
        fn = fn.fn
    return fn


def _checked_configs(configs) -> list:
    if isinstance(configs, Config) or not isinstance(configs, (list, tuple)):
        raise TypeError(f"autotune(configs=...) expects a list of Config, got "
                        f"{type(configs).__name__}")
    for i, c in enumerate(configs):
        if not isinstance(c, Config):
            raise TypeError(f"autotune(configs=...): configs[{i}] is a {type(c).__name__}, "
                            f"not a Config")
    return list(configs)


def _checked_key(key) -> list:
    if isinstance(key, str):
        key = [key]
    if not isinstance(key, (list, tuple)) or not all(isinstance(k, str) for k in key):
        raise TypeError(f"autotune(key=...) expects a list of argument names, got {key!r}")
    return list(key)


# What a candidate that cannot run raises: it is timed as infinitely slow instead of failing the
# tuning (Triton skips such configs too).
_UNRUNNABLE = ("CompilationError", "LaunchError", "CudaError", "OutOfResources", "PTXASError")


def time_call(call, warmup, rep, use_cuda_graph=False, custom_bench=None) -> list:
    """[median, 20th, 80th percentile] ms of `call` by ww.testing.do_bench (warm-up runs, then
    timed runs, L2 flushed before each), by do_bench_cudagraph, or by a custom
    `do_bench(fn, quantiles=...)`; infinities when `call` cannot compile or launch. The one
    timing path of the autotuner and of warpweave.ops's per-shape tuning."""
    from . import testing

    try:
        if custom_bench is not None:
            t = custom_bench(call, quantiles=(0.5, 0.2, 0.8))
        elif use_cuda_graph:
            t = testing.do_bench_cudagraph(call, rep=rep, quantiles=(0.5, 0.2, 0.8))
        else:
            t = testing.do_bench(call, warmup=warmup, rep=rep, quantiles=(0.5, 0.2, 0.8))
    except Exception as e:
        if type(e).__name__ not in _UNRUNNABLE:
            raise
        if _print_autotuning():
            print(f"Autotuning failed with {e}")
        t = [float("inf")] * 3
    return list(t) if isinstance(t, (list, tuple)) else [t]


# Argument types that are never tensors or arrays, known without attribute lookups: the key is
# computed on every call, and a descriptor's failed hasattr costs as much as the rest of it.
_NOT_TENSORS = frozenset((int, float, bool, str, type(None), TensorDescriptor))


_dtype_texts: dict = {}


def _dtype_text(dtype) -> str:
    """str(dtype), remembered per dtype object: the key is computed on every call."""
    try:
        text = _dtype_texts.get(dtype)
    except TypeError:  # unhashable
        return str(dtype)
    if text is None:
        text = str(dtype)
        if len(_dtype_texts) < 64:
            _dtype_texts[dtype] = text
    return text


class Autotuner(KernelInterface):
    def __init__(self, fn, configs, key, prune_configs_by=None, reset_to_zero=None,
                 restore_value=None, pre_hook=None, post_hook=None, warmup=None, rep=None,
                 use_cuda_graph=False, do_bench=None, cache_results=False):
        if not configs:
            configs = [Config({})]
        self.fn = fn
        self.base = _base_jit(fn)
        self.arg_names = self.base.arg_names
        self.configs = _checked_configs(configs)
        self.key = _checked_key(key)
        self.keys = self.key
        # As in Triton, key names that are not parameters of the kernel select nothing (TLX's
        # HSTU tutorial names keys its launcher never passes).
        prune_configs_by = prune_configs_by or {}
        self.perf_model = prune_configs_by.get("perf_model")
        self.top_k = prune_configs_by.get("top_k", 1.0)
        self.configs_top_k = self.top_k
        self.early_config_prune = prune_configs_by.get("early_config_prune")
        self.reset_to_zero = list(reset_to_zero or [])
        self.restore_value = list(restore_value or [])
        # A user pre_hook / post_hook replaces the reset_to_zero / restore_value handling.
        self.user_pre_hook = pre_hook
        self.user_post_hook = post_hook
        self.user_defined_pre_hook = pre_hook is not None
        self.user_defined_post_hook = post_hook is not None
        self._restore_copies: dict = {}
        self.warmup = 25 if warmup is None else warmup
        self.rep = 100 if rep is None else rep
        self.use_cuda_graph = use_cuda_graph
        self.custom_bench = do_bench
        self.cache_results = bool(cache_results)
        self.cache: dict = {}
        self.configs_timings: dict | None = None
        self.best_config: Config | None = None
        self.bench_time = None
        self.nargs = None
        self.__name__ = self.base.__name__

    # -- hooks (Triton's contract) ---------------------------------------------------------------

    def pre_hook(self, kwargs, reset_only=False):
        if self.user_pre_hook is not None:
            if reset_only:
                if _accepts_reset_only(self.user_pre_hook):
                    self.user_pre_hook(kwargs, reset_only=True)
            else:
                self.user_pre_hook(kwargs)
            return
        for name in self.reset_to_zero:
            if kwargs.get(name) is not None:
                kwargs[name].zero_()
        if not reset_only:
            self._restore_copies = {n: kwargs[n].clone() for n in self.restore_value
                                    if kwargs.get(n) is not None}

    def post_hook(self, kwargs, exception):
        if self.user_post_hook is not None:
            self.user_post_hook(kwargs, exception)
            return
        for name, value in self._restore_copies.items():
            kwargs[name].copy_(value)
        self._restore_copies = {}

    # -- choosing --------------------------------------------------------------------------------

    def _key(self, named: dict):
        parts = []
        for k in self.key:
            if k not in named:
                continue
            v = named[k]
            if type(v) not in _NOT_TENSORS and (_is_torch_tensor(v) or _is_numpy(v)):
                parts.append(_dtype_text(v.dtype))
            else:
                parts.append(v)
        # Tensor dtypes of every argument also select the config, as in Triton.
        for v in named.values():
            if type(v) not in _NOT_TENSORS and (_is_torch_tensor(v) or _is_numpy(v)):
                parts.append(_dtype_text(v.dtype))
        return tuple(parts)

    def prune_configs(self, named: dict, kwargs=None) -> list:
        """The configs left by early_config_prune(configs, named, **kwargs) and then the perf
        model's top_k (an int, or a fraction of the configs when a float <= 1). `named` holds the
        arguments by name, `kwargs` the keyword arguments of the call."""
        configs = self.configs
        kwargs = kwargs or {}
        if self.early_config_prune:
            configs = list(self.early_config_prune(configs, named, **kwargs))
            if not configs:
                from .errors import AutotunerError

                raise AutotunerError("no configurations left after early_config_prune; it must "
                                     "return at least one")
        if self.perf_model:
            k = self.top_k
            if isinstance(k, float) and k <= 1.0:
                k = max(1, int(len(configs) * k))
            elif not isinstance(k, int):
                raise TypeError(f"prune_configs_by top_k must be an int or a float <= 1.0, "
                                f"got {k!r}")
            if len(configs) > k:
                est = {c: self.perf_model(**{**named, **kwargs}, **c.all_kwargs())
                       for c in configs}
                configs = sorted(configs, key=lambda c: est[c])[:k]
        return configs

    def _caches(self) -> bool:
        from . import knobs

        return self.cache_results or bool(knobs.autotuning.cache)

    def _named(self, args, kwargs) -> dict:
        named = dict(zip(self.base.arg_names, args))
        named.update(kwargs)
        return named

    def _bench(self, args, kwargs, grid, config, named):
        conflicts = set(kwargs) & set(config.kwargs)
        if conflicts:
            raise ValueError(f"conflicting meta-parameters: {', '.join(sorted(conflicts))} are "
                             f"both passed to {self.__name__} and set by the autotuner's configs")
        full = {**named, **config.all_kwargs()}
        if _print_autotuning():
            print(f"Autotuning kernel {self.__name__} with config {config}")

        def call():
            if config.pre_hook:
                config.pre_hook(full)
            self.pre_hook(full)
            try:
                self.fn.run(*args, grid=grid, **kwargs, **config.all_kwargs())
            except Exception as e:
                self.post_hook(full, e)
                raise
            self.post_hook(full, None)

        return time_call(call, self.warmup, self.rep, self.use_cuda_graph, self.custom_bench)

    def _precompile(self, args, kwargs, configs):
        """Compiles every candidate in parallel; failures surface again when benchmarked."""
        if len(configs) < 2:
            return

        def build(c):
            try:
                self.base.warmup(*args, **_heuristic_kwargs(self.fn, args, kwargs),
                                 **c.all_kwargs())
            except Exception:
                pass

        workers = min(len(configs), os.cpu_count() or 1)
        import concurrent.futures  # here, not at import: it costs `import warpweave` ~10 ms

        with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
            list(pool.map(build, configs))

    def run(self, *args, grid, **kwargs):
        self.nargs = nargs = dict(zip(self.arg_names, args))
        named = {**nargs, **kwargs}  # _named(args, kwargs), from the dict just made
        key = self._key(named)
        config = self.cache.get(key)
        if config is None:
            configs = self.prune_configs(named, kwargs)
            if len(configs) == 1 or _runs_in_interpreter(named):
                config = configs[0]
            else:
                start = time.time()
                stored = (_TuningRecord(self.__name__, [self.base.environment()], key, configs,
                                        _device_text(named)) if self._caches() else None)
                timings = stored.load() if stored else None
                benched = timings is None
                if benched:
                    self._precompile(args, kwargs, configs)
                    timings = {c: self._bench(args, kwargs, grid, c, named) for c in configs}
                    if stored:
                        stored.save(timings)
                self.bench_time = time.time() - start
                config = min(timings, key=lambda c: timings[c][0])
                self.configs_timings = timings
                if benched:  # the timing runs dirtied the reset_to_zero arguments
                    self.pre_hook({**named, **config.all_kwargs()}, reset_only=True)
                if _print_autotuning():
                    for c in sorted(timings, key=lambda c: timings[c][0]):
                        print(f"  config [{c}]: {timings[c][0]:.4f} ms")
                    print(f"Autotuning {self.__name__} for key {key} took "
                          f"{self.bench_time:.2f}s; best config: {config}")
            self.cache[key] = config
        self.best_config = config
        meta = config.all_kwargs()
        if config.pre_hook:
            config.pre_hook({**named, **meta})
        # fn[grid](...) rather than fn.run: a JITFunction launches through its native path.
        try:
            return self.fn[grid](*args, **kwargs, **meta)
        finally:
            # As Triton: the call's arguments are not kept alive past the call.
            self.nargs = None

    def warmup(self, *args, grid=(1,), **kwargs):
        return [self.fn.run(*args, grid=grid, warmup=True, **kwargs, **c.all_kwargs())
                for c in self.prune_configs(self._named(args, kwargs), kwargs)]


def _heuristic_kwargs(fn, args, kwargs) -> dict:
    """kwargs with the values every Heuristics layer between `fn` and its JITFunction adds."""
    out = dict(kwargs)
    while not isinstance(fn, JITFunction):
        if isinstance(fn, Heuristics):
            named = dict(zip(_base_jit(fn).arg_names, args))
            named.update(out)
            for name, f in fn.values.items():
                out[name] = f(named)
                named[name] = out[name]
        fn = fn.fn
    return out


def autotune(configs, key, prune_configs_by=None, reset_to_zero=None, restore_value=None,
             pre_hook=None, post_hook=None, warmup=None, rep=None, use_cuda_graph=False,
             do_bench=None, cache_results=False, include_npot=False):
    """Decorator: tries each Config (constexpr kwargs + launch options) the first time a new
    value of `key` is seen, and launches with the fastest from then on. Triton's keywords are
    accepted (see the module docstring). `cache_results=True` (or knobs.autotuning.cache,
    WARPWEAVE_CACHE_AUTOTUNING=1) keeps each key's timings in the disk cache, so that later
    processes launch the best config without timing them again (Triton's disk cache of tuning
    results); `include_npot` is accepted and has no effect."""
    _checked_configs(configs or [])
    _checked_key(key)

    def decorate(fn):
        return Autotuner(fn, configs, key, prune_configs_by, reset_to_zero, restore_value,
                         pre_hook, post_hook, warmup, rep, use_cuda_graph, do_bench,
                         cache_results)

    return decorate


class _TuningRecord:
    """One key's timings in the disk cache (WARPWEAVE_CACHE_DIR/autotune): a JSON file named by
    a hash of the tuned kernels' sources and globals, the name and key, the candidate configs,
    the device and the compiler build. It holds each config's index in that list and its
    timings; a file that does not match (another key, other configs, damaged) is ignored and
    written again. The autotuner keeps one per kernel and key; warpweave.ops's per-shape tuning
    one per op and shape key (`environments`: every kernel its candidates launch)."""

    _FORMAT = 1

    def __init__(self, name: str, environments: list, key, configs: list, device: str):
        import hashlib

        from . import cache
        from ._native_loader import native

        self.configs = configs
        self.key_text = repr(key)
        d = cache.cache_dir()
        self.path = None
        if d is None:
            return
        nat = native()
        h = hashlib.sha256()
        h.update(f"warpweave-autotune-v{self._FORMAT}\0{nat.compiler_version()}"
                 f"{cache.build_id(nat)}\0{name}\0{self.key_text}\0".encode())
        for env in environments:
            cache.hash_sources(h, env.files, env.globals)
        for c in configs:
            h.update(f"config\0{c!r}\0".encode())
        h.update(f"device\0{device}\0".encode())
        self.path = os.path.join(d, "autotune", h.hexdigest() + ".json")

    def load(self):
        import json

        if self.path is None or not os.path.exists(self.path):
            return None
        try:
            with open(self.path, encoding="utf-8") as f:
                data = json.load(f)
            if data.get("key") != self.key_text or data.get("configs") != len(self.configs):
                return None
            timings = {self.configs[int(i)]: [float(x) for x in t] for i, t in data["timings"]}
        except (OSError, ValueError, KeyError, TypeError, IndexError):
            return None
        return timings if len(timings) == len(self.configs) else None

    def save(self, timings: dict) -> None:
        import json
        import tempfile

        if self.path is None:
            return
        data = {"key": self.key_text, "configs": len(self.configs),
                "timings": [[i, list(timings[c])] for i, c in enumerate(self.configs)]}
        try:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=os.path.dirname(self.path), suffix=".tmp")
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(data, f)
            os.replace(tmp, self.path)
        except OSError:
            pass  # an unwritable cache only means tuning again next time


def _device_text(named: dict) -> str:
    """The GPU the timings were taken on (name and compute capability), from the first CUDA
    tensor among the arguments."""
    for v in named.values():
        if _is_torch_tensor(v) and getattr(v, "is_cuda", False):
            return cuda_device_text(v.device)
    return os.environ.get("WARPWEAVE_TARGET", "")


def cuda_device_text(device) -> str:
    """A CUDA device's name and compute capability, what tuning results are kept under."""
    import torch

    cc = torch.cuda.get_device_capability(device)
    return f"{torch.cuda.get_device_name(device)}:{cc}"


class Heuristics(KernelInterface):
    def __init__(self, fn, values: dict):
        self.fn = fn
        self.values = dict(values)
        self.base = _base_jit(fn)
        self.__name__ = self.base.__name__

    def run(self, *args, grid, **kwargs):
        named = dict(zip(self.base.arg_names, args))
        named.update(kwargs)
        for name, f in self.values.items():
            kwargs[name] = f(named)
            named[name] = kwargs[name]
        return self.fn[grid](*args, **kwargs)

    def warmup(self, *args, grid=(1,), **kwargs):
        return self.run(*args, grid=grid, warmup=True, **kwargs)


def heuristics(values: dict):
    """Decorator: computes constexpr arguments from the others, `{name: f(args_dict)}`."""
    if not isinstance(values, dict):
        raise TypeError(f"heuristics(values=...) expects a dict {{name: function(args)}}, "
                        f"got {type(values).__name__}")
    for name, f in values.items():
        if not callable(f):
            raise TypeError(f"heuristics: the value for '{name}' must be a function of the "
                            f"arguments' dict, got {type(f).__name__}")

    def decorate(fn):
        return Heuristics(fn, values)

    return decorate
