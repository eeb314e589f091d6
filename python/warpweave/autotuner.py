"""`ww.autotune`, `ww.Config` and `ww.heuristics`, with Triton's meaning: pick the fastest of
several launch configurations per value of `key`, compiling the candidates in parallel (the C++
compiler releases the GIL) and timing them with `ww.testing.do_bench`."""

from __future__ import annotations

import os

from .jit import JITFunction, KernelInterface, _interpret_env, _is_numpy, _is_torch_tensor

__all__ = ["Config", "autotune", "heuristics", "Autotuner", "Heuristics"]


class Config:
    """One candidate: constexpr kwargs plus launch options."""

    def __init__(self, kwargs, num_warps=4, num_stages=3, ctas_per_cga=None, num_ctas=None,
                 pre_hook=None, maxnreg=None):
        self.kwargs = dict(kwargs)
        self.num_warps = num_warps
        self.num_stages = num_stages
        self.ctas_per_cga = ctas_per_cga
        self.num_ctas = num_ctas
        self.pre_hook = pre_hook
        self.maxnreg = maxnreg

    def all_kwargs(self) -> dict:
        out = dict(self.kwargs)
        out["num_warps"] = self.num_warps
        out["num_stages"] = self.num_stages
        if self.ctas_per_cga is not None:
            out["ctas_per_cga"] = self.ctas_per_cga
        if self.num_ctas is not None:
            out["num_ctas"] = self.num_ctas
        return out

    def __repr__(self):
        parts = [f"{k}: {v}" for k, v in self.kwargs.items()]
        parts += [f"num_warps: {self.num_warps}", f"num_stages: {self.num_stages}"]
        if self.ctas_per_cga is not None:
            parts.append(f"ctas_per_cga: {self.ctas_per_cga}")
        return ", ".join(parts)

    def __eq__(self, other):
        return isinstance(other, Config) and self.all_kwargs() == other.all_kwargs()

    def __hash__(self):
        return hash(tuple(sorted((k, repr(v)) for k, v in self.all_kwargs().items())))


def _base_jit(fn) -> JITFunction:
    while not isinstance(fn, JITFunction):
        fn = fn.fn
    return fn


class Autotuner(KernelInterface):
    def __init__(self, fn, configs, key, prune_configs_by=None, reset_to_zero=None,
                 restore_value=None, pre_hook=None, post_hook=None, warmup=None, rep=None,
                 use_cuda_graph=False, do_bench=None):
        if not configs:
            configs = [Config({})]
        self.fn = fn
        self.base = _base_jit(fn)
        self.configs = list(configs)
        self.key = [key] if isinstance(key, str) else list(key)
        unknown = [k for k in self.key if k not in self.base.arg_names]
        if unknown:
            raise ValueError(f"autotune key names unknown parameters {unknown} of "
                             f"{self.base.__name__}")
        prune_configs_by = prune_configs_by or {}
        self.perf_model = prune_configs_by.get("perf_model")
        self.top_k = prune_configs_by.get("top_k")
        self.early_config_prune = prune_configs_by.get("early_config_prune")
        self.reset_to_zero = list(reset_to_zero or [])
        self.restore_value = list(restore_value or [])
        self.user_pre_hook = pre_hook
        self.post_hook = post_hook
        self.warmup = 25 if warmup is None else warmup
        self.rep = 100 if rep is None else rep
        self.use_cuda_graph = use_cuda_graph
        self.custom_bench = do_bench
        self.cache: dict = {}
        self.configs_timings: dict | None = None
        self.best_config: Config | None = None
        self.__name__ = self.base.__name__

    def _key(self, named: dict):
        parts = []
        for k in self.key:
            v = named[k]
            if _is_torch_tensor(v) or _is_numpy(v):
                parts.append(str(v.dtype))
            else:
                parts.append(v)
        # Tensor dtypes of every argument also select the config, as in Triton.
        for v in named.values():
            if _is_torch_tensor(v) or _is_numpy(v):
                parts.append(str(v.dtype))
        return tuple(parts)

    def prune_configs(self, named: dict) -> list:
        configs = self.configs
        if self.early_config_prune:
            configs = list(self.early_config_prune(configs, named))
        if self.perf_model and self.top_k:
            k = self.top_k if isinstance(self.top_k, int) else int(len(configs) * self.top_k)
            if len(configs) > k:
                est = {c: self.perf_model(**named, **c.all_kwargs()) for c in configs}
                configs = sorted(configs, key=lambda c: est[c])[:k]
        return configs

    def _named(self, args, kwargs) -> dict:
        named = dict(zip(self.base.arg_names, args))
        named.update(kwargs)
        return named

    def _hooks_before(self, named, config):
        for name in self.reset_to_zero:
            named[name].zero_()
        if config.pre_hook:
            config.pre_hook({**named, **config.all_kwargs()})
        if self.user_pre_hook:
            self.user_pre_hook({**named, **config.all_kwargs()})

    def _bench(self, args, kwargs, grid, config, named):
        from . import testing

        saved = {n: named[n].clone() for n in self.restore_value}

        def call():
            self._hooks_before(named, config)
            self.fn.run(*args, grid=grid, **kwargs, **config.all_kwargs())

        try:
            if self.custom_bench is not None:
                t = self.custom_bench(call)
            elif self.use_cuda_graph:
                t = testing.do_bench_cudagraph(call, rep=self.rep, return_mode="median")
            else:
                t = testing.do_bench(call, warmup=self.warmup, rep=self.rep,
                                     return_mode="median")
        except Exception as e:  # a config that cannot compile or launch is skipped, not fatal
            if type(e).__name__ in ("CompilationError", "LaunchError", "CudaError"):
                t = float("inf")
            else:
                raise
        finally:
            for n, v in saved.items():
                named[n].copy_(v)
        if self.post_hook:
            self.post_hook(named, None)
        return t

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
        named = self._named(args, kwargs)
        key = self._key(named)
        config = self.cache.get(key)
        if config is None:
            configs = self.prune_configs(named)
            interpreting = _interpret_env() or any(_is_numpy(v) for v in named.values())
            if len(configs) == 1 or interpreting:
                config = configs[0]
            else:
                self._precompile(args, kwargs, configs)
                timings = {c: self._bench(args, kwargs, grid, c, named) for c in configs}
                config = min(timings, key=timings.get)
                self.configs_timings = timings
            self.cache[key] = config
        self.best_config = config
        if config.pre_hook:
            config.pre_hook({**named, **config.all_kwargs()})
        # fn[grid](...) rather than fn.run: a JITFunction launches through its native path.
        return self.fn[grid](*args, **kwargs, **config.all_kwargs())

    def warmup(self, *args, grid=(1,), **kwargs):
        return [self.fn.run(*args, grid=grid, warmup=True, **kwargs, **c.all_kwargs())
                for c in self.prune_configs(self._named(args, kwargs))]


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
             do_bench=None):
    """Decorator: tries each Config (constexpr kwargs + launch options) the first time a new
    value of `key` is seen, and launches with the fastest from then on."""

    def decorate(fn):
        return Autotuner(fn, configs, key, prune_configs_by, reset_to_zero, restore_value,
                         pre_hook, post_hook, warmup, rep, use_cuda_graph, do_bench)

    return decorate


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

    def decorate(fn):
        return Heuristics(fn, values)

    return decorate
