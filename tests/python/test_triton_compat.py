"""Triton's host-side names under warpweave (driver, allocator, testing, tools, TLX module paths,
Config / autotune / jit keywords, TRITON_ environment variables, _internal_testing, knobs,
compile): each exists and behaves as Triton's does, on a machine without a GPU."""

import importlib
import os
import subprocess
import sys

import numpy as np
import pytest

import warpweave as ww
import warpweave.language as tl
from warpweave.language.extra.tlx.warp_spec import get_bufidx_phase

native_loader = importlib.import_module("warpweave._native_loader")
needs_native = pytest.mark.skipif(not native_loader.available(),
                                  reason="warpweave._native is not built (pip install .)")
driver_mod = importlib.import_module("warpweave.runtime.driver")
_env = importlib.import_module("warpweave._env")


def _no_gpu():
    return not ww.runtime.driver.active.has_gpu()


no_gpu_only = pytest.mark.skipif(not _no_gpu(), reason="describes the machine without a GPU")


# ------------------------------------------------------------------------------------------------
# runtime.driver
# ------------------------------------------------------------------------------------------------


def test_driver_is_reachable_under_every_spelling():
    import warpweave.runtime.driver as driver  # as Triton's conftest imports it

    assert driver is ww.runtime.driver
    assert driver.active is ww.runtime.driver.active
    assert driver_mod.active is driver.active  # the module object answers too


@no_gpu_only
def test_driver_without_a_gpu_describes_the_interpreters_device(monkeypatch):
    monkeypatch.delenv("WARPWEAVE_TARGET", raising=False)
    monkeypatch.delenv("TRITON_TARGET", raising=False)
    active = ww.runtime.driver.active
    target = active.get_current_target()
    assert (target.backend, target.arch, target.warp_size) == ("cuda", 90, 32)
    assert target.is_cuda_backend()
    dev = active.get_active_torch_device()
    assert str(dev) == "cpu"
    props = active.utils.get_device_properties(active.get_current_device())
    assert props["multiprocessor_count"] == 132
    assert props["max_shared_mem"] == 227 * 1024
    assert props["warpSize"] == 32
    assert set(props) == {"max_shared_mem", "max_num_regs", "multiprocessor_count", "warpSize",
                          "sm_clock_rate", "mem_clock_rate", "mem_bus_width"}


@no_gpu_only
def test_forced_target_changes_the_reported_architecture(monkeypatch):
    monkeypatch.setenv("WARPWEAVE_TARGET", "sm_100a")
    active = ww.runtime.driver.active
    assert active.get_current_target().arch == 100
    assert active.utils.get_device_properties(0)["multiprocessor_count"] == 148
    monkeypatch.setenv("WARPWEAVE_TARGET", "sm_80")
    assert active.get_device_capability() == (8, 0)


def test_driver_config_can_swap_the_active_driver():
    config = driver_mod.DriverConfig()
    default = config.active
    marker = object()
    config.set_active(marker)
    assert config.active is marker
    config.reset_active()
    assert config.active is default
    config.active = marker
    del config.active
    assert config.active is default


def test_gpu_target_is_a_frozen_value():
    from warpweave.backends.compiler import GPUTarget

    assert GPUTarget("cuda", 90, 32) == GPUTarget("cuda", 90, 32)
    assert GPUTarget("cuda", 90, 32).sm() == "sm_90a"
    assert GPUTarget("cuda", 100, 32).sm() == "sm_100a"
    assert not GPUTarget("hip", "gfx942", 64).is_cuda_backend()
    with pytest.raises(Exception):
        GPUTarget("cuda", 90, 32).arch = 80


# ------------------------------------------------------------------------------------------------
# set_allocator
# ------------------------------------------------------------------------------------------------


def test_set_allocator_stores_the_function_and_none_restores_the_refusal():
    alloc = ww.runtime._allocation
    calls = []

    def fn(size, align, stream):
        calls.append((size, align, stream))
        return bytearray(size)

    try:
        ww.set_allocator(fn)
        assert alloc.get_allocator() is fn and alloc.has_allocator()
        assert len(alloc.get_allocator()(64, 128, 0)) == 64
        assert calls == [(64, 128, 0)]
        ww.set_allocator(None)
        assert not alloc.has_allocator()
        with pytest.raises(RuntimeError, match="set_allocator"):
            alloc.get_allocator()(64, 128, None)
        with pytest.raises(TypeError):
            ww.set_allocator(42)
    finally:
        ww.set_allocator(None)


# ------------------------------------------------------------------------------------------------
# testing: perf_report / Benchmark / assert_close / do_bench without a GPU
# ------------------------------------------------------------------------------------------------


def _bench(**extra):
    return ww.testing.Benchmark(x_names=["N"], x_vals=[1, 2, 4], line_arg="provider",
                                line_vals=["a", "b"], line_names=["A", "B"], ylabel="GB/s",
                                plot_name="demo", args={"scale": 10}, **extra)


def test_perf_report_prints_a_table_of_every_x_and_line(capsys):
    seen = []

    @ww.testing.perf_report(_bench())
    def bench(N, provider, scale):
        seen.append((N, provider, scale))
        base = N * scale + (1 if provider == "b" else 0)
        return base, base - 1, base + 1

    assert bench.run(print_data=True) is None
    out = capsys.readouterr().out
    assert seen == [(1, "a", 10), (1, "b", 10), (2, "a", 10), (2, "b", 10), (4, "a", 10),
                    (4, "b", 10)]
    assert out.startswith("demo:")
    assert "A (GB/s)" in out and "B (GB/s)" in out and "min" not in out
    assert "41" in out  # N=4, provider b


def test_bench_points_keeps_the_first_sizes_of_each_table(monkeypatch):
    seen = []

    @ww.testing.perf_report(_bench())
    def bench(N, provider, scale):
        seen.append(N)
        return float(N)

    monkeypatch.setenv("WARPWEAVE_BENCH_POINTS", "2")
    table = bench.run(return_df=True)
    assert seen == [1, 1, 2, 2]
    assert len(table) == 2
    # Triton's spelling reaches the same knob.
    assert ww._env.mirror({"TRITON_BENCH_POINTS": "1"}) == {"WARPWEAVE_BENCH_POINTS": "1"}


def test_perf_report_saves_csv_and_returns_tables(tmp_path):
    @ww.testing.perf_report([_bench()])
    def bench(N, provider, scale):
        return float(N)

    tables = bench.run(save_path=str(tmp_path), return_df=True, diff_col=True)
    assert len(tables) == 1
    table = tables[0]
    assert list(table.columns) == ["N", "A (GB/s)", "B (GB/s)"]
    csv = (tmp_path / "demo.csv").read_text().splitlines()
    assert csv[0] == "N,A (GB/s),B (GB/s)"
    assert csv[1].startswith("1,1.000000,1.000000")
    assert (tmp_path / "results.html").exists()


def test_benchmark_x_vals_may_give_each_name_its_own_value(capsys):
    b = ww.testing.Benchmark(x_names=["M", "N"], x_vals=[(1, 2), (3, 4)], line_arg="p",
                             line_vals=[0, 1], line_names=["zero", "one"], plot_name="two",
                             args={})

    @ww.testing.perf_report(b)
    def bench(M, N, p):
        return M * 100 + N * 10 + p

    table = bench.run(return_df=True, diff_col=False)
    assert list(table["zero ()"]) == [120, 340]
    assert list(table["one ()"]) == [121, 341]
    bad = ww.testing.Benchmark(x_names=["M", "N"], x_vals=[(1, 2, 3)], line_arg="p",
                               line_vals=[0], line_names=["z"], plot_name="bad", args={})
    with pytest.raises(ValueError, match="one value for each"):
        ww.testing.perf_report(bad)(bench.fn).run()


def test_assert_close_follows_tritons_tolerances():
    ww.testing.assert_close(np.array([1.0, 2.0]), np.array([1.005, 2.0]))  # atol 1e-2
    with pytest.raises(AssertionError):
        ww.testing.assert_close(np.array([1.0, 2.0]), np.array([1.1, 2.0]))
    ww.testing.assert_close(np.array([1.0, 2.0]), np.array([1.1, 2.0]), atol=0, rtol=0.1)
    ww.testing.assert_close(1.0, 1.001)
    with pytest.raises(AssertionError, match="context"):
        ww.testing.assert_close(1.0, 2.0, err_msg="context")
    ww.testing.assert_close([np.nan, 1.0], [np.nan, 1.0])
    ww.testing.assert_close(np.float32(1), np.float32(1.5), atol=lambda dt: 1.0)


def test_do_bench_without_a_gpu_times_on_the_host_clock(monkeypatch):
    monkeypatch.setattr(ww.testing, "_cuda_torch", lambda: None)
    runs = []
    t = ww.testing.do_bench(lambda: runs.append(1), warmup=1, rep=1)
    assert isinstance(t, float) and t >= 0 and len(runs) >= 3
    lo, mid, hi = ww.testing.do_bench(lambda: None, quantiles=[0.2, 0.5, 0.8], rep=1)
    assert lo <= mid <= hi
    assert isinstance(ww.testing.do_bench_cudagraph(lambda: None, rep=1), float)


# ------------------------------------------------------------------------------------------------
# tools, TLX module paths, package exports
# ------------------------------------------------------------------------------------------------


def test_tools_and_package_exports():
    from warpweave.tools.tensor_descriptor import TensorDescriptor
    from warpweave.tools.mxfp import MXFP4Tensor, MXScaleTensor  # noqa: F401

    assert TensorDescriptor is ww.TensorDescriptor
    for name in ("set_allocator", "runtime", "tools", "knobs", "compile", "OutOfResources",
                 "CompilationError", "Config", "autotune", "heuristics", "jit", "cdiv",
                 "next_power_of_2", "testing", "language", "KernelInterface", "JITFunction"):
        assert hasattr(ww, name), name
    from warpweave.runtime import OutOfResources, driver, errors  # noqa: F401
    from warpweave.runtime.errors import InterpreterError

    assert InterpreterError is ww.InterpreterError
    from warpweave.compiler.errors import CompilationError

    assert CompilationError is ww.CompilationError
    e = ww.OutOfResources(300000, 232448, "shared memory")
    assert "shared memory" in str(e) and "232448" in str(e)


def test_mxfp_scales_round_to_powers_of_two():
    torch = pytest.importorskip("torch")
    from warpweave.tools.mxfp import MXFP4Tensor, MXScaleTensor

    s = MXScaleTensor(data=torch.tensor([1.0, 3.0, 0.25, 8.0]))
    assert s.to(torch.float32).tolist() == [1.0, 4.0, 0.25, 8.0]
    r = MXScaleTensor(size=(64,)).random(high=32.0)
    assert float(r.to(torch.float32).max()) <= 32.0
    f = MXFP4Tensor(data=torch.tensor([0.0, 0.7, -1.25, 5.5, 100.0]))
    assert f.to(torch.float32).tolist() == [0.0, 0.5, -1.0, 6.0, 6.0]
    packed = f.to_packed_tensor(dim=0)
    assert packed.shape[0] == 3
    assert f.unpack_packed_tensor(packed, 0, f.data.shape).tolist() == f.data.tolist()


def test_language_extra_tlx_is_the_tlx_module():
    import warpweave.language.extra.tlx as tlx
    from warpweave.language.extra import tlx as tlx2
    from warpweave.language.extra.tlx import warp_spec
    from warpweave.language.extra.tlx.mem_ops import local_alloc

    assert tlx is ww.tlx and tlx2 is ww.tlx
    assert ww.language.extra.tlx is ww.tlx
    assert isinstance(warp_spec.get_bufidx_phase, ww.JITFunction)
    assert local_alloc is ww.tlx.local_alloc


def test_language_extra_cuda_needs_no_import_of_its_own():
    # Triton's tests reach `tl.extra.cuda.libdevice` through `tl` alone.
    lib = tl.extra.cuda.libdevice
    from warpweave.language.extra.libdevice import exp

    assert lib.exp.__name__ == exp.__name__ == "exp"


@ww.jit
def _ring_kernel(out_slot, out_phase, n, NUM_BUFFERS: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    slot, phase = get_bufidx_phase(offs, NUM_BUFFERS)
    tl.store(out_slot + offs, slot, mask=offs < n)
    tl.store(out_phase + offs, phase, mask=offs < n)


@needs_native
@pytest.mark.parametrize("buffers", [1, 2, 3])
def test_get_bufidx_phase_is_a_kernel_callable_helper(buffers):
    slot = np.full(64, -1, np.int32)
    phase = np.full(64, -1, np.int32)
    _ring_kernel[(1,)](slot, phase, 64, NUM_BUFFERS=buffers, BLOCK=64)
    counts = np.arange(64)
    np.testing.assert_array_equal(slot, counts % buffers)
    np.testing.assert_array_equal(phase, (counts // buffers) & 1)


def test_internal_testing_predicates_without_a_gpu(monkeypatch):
    it = importlib.import_module("warpweave._internal_testing")
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert it.is_interpreter() and it.get_current_target() is None
    assert not (it.is_cuda() or it.is_hopper() or it.is_blackwell() or it.is_hopper_or_newer())
    monkeypatch.delenv("TRITON_INTERPRET")
    monkeypatch.delenv("WARPWEAVE_INTERPRET", raising=False)
    if _no_gpu():
        assert it.get_current_target() is None and not it.is_hopper()
    assert not (it.is_hip() or it.is_hip_cdna3() or it.is_hip_cdna4() or it.is_hip_gfx1250())
    x = it.numpy_random((4, 5), "int8")
    assert x.dtype == np.int8 and x.shape == (4, 5) and np.all(x != 0)
    assert it.numpy_random(3, "float16").dtype == np.float16


def test_internal_testing_reads_the_target_with_a_gpu(monkeypatch):
    it = importlib.import_module("warpweave._internal_testing")
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.delenv("WARPWEAVE_INTERPRET", raising=False)

    class FakeDriver:
        def __init__(self, arch):
            self.arch = arch

        def has_gpu(self):
            return True

        def get_current_target(self):
            from warpweave.backends.compiler import GPUTarget

            return GPUTarget("cuda", self.arch, 32)

    config = ww.runtime.driver
    try:
        config.set_active(FakeDriver(90))
        assert it.is_cuda() and it.is_hopper() and it.is_hopper_or_newer()
        assert not it.is_blackwell()
        config.set_active(FakeDriver(100))
        assert it.is_blackwell() and it.is_hopper_or_newer() and not it.is_hopper()
    finally:
        config.reset_active()


def test_placeholders_for_tritons_other_languages_import():
    from warpweave.experimental import gluon
    from warpweave.experimental.gluon import language as ttgl
    from warpweave.experimental.gluon.language._core import builtin
    from warpweave._filecheck import run_parser
    from warpweave.runtime.fbcode_gating import is_fbcode_dependant

    assert builtin(len) is len
    assert not is_fbcode_dependant()

    @gluon.jit
    def k():
        pass

    with pytest.raises(NotImplementedError, match="Gluon"):
        k[(1,)]
    with pytest.raises(NotImplementedError):
        ttgl.full([16], 1.0)
    with pytest.raises(NotImplementedError):
        run_parser(k)


# ------------------------------------------------------------------------------------------------
# knobs
# ------------------------------------------------------------------------------------------------


def test_knobs_view_the_environment_and_scope_restores(monkeypatch):
    monkeypatch.delenv("WARPWEAVE_CACHE_DISABLE", raising=False)
    knobs = ww.knobs
    assert knobs.compilation.always_compile is False
    with knobs.compilation.scope():
        knobs.compilation.always_compile = True
        assert os.environ["WARPWEAVE_CACHE_DISABLE"] == "1"
    assert "WARPWEAVE_CACHE_DISABLE" not in os.environ
    monkeypatch.setattr(knobs.compilation, "always_compile", True)
    assert knobs.compilation.always_compile is True
    assert knobs.nvidia.use_meta_ws is None
    with knobs.nvidia.scope():
        knobs.nvidia.use_meta_ws = True
        assert knobs.nvidia.use_meta_ws is True
    assert knobs.nvidia.use_meta_ws is None


# ------------------------------------------------------------------------------------------------
# TRITON_ environment variables
# ------------------------------------------------------------------------------------------------


def test_mirror_copies_triton_spellings_unless_warpweaves_is_set(tmp_path):
    env = {"TRITON_INTERPRET": "1", "TRITON_CACHE_DIR": "/c", "WARPWEAVE_TARGET": "sm_80",
           "TRITON_TARGET": "sm_100a", "TRITON_PTXAS_PATH": "/opt/ptxas",
           "TRITON_LIBCUDA_PATH": str(tmp_path), "TRITON_ALWAYS_COMPILE": "1",
           "TRITON_INTERP_SEED": "7"}
    done = _env.mirror(env)
    assert env["WARPWEAVE_INTERPRET"] == "1"
    assert env["WARPWEAVE_CACHE_DIR"] == "/c"
    assert env["WARPWEAVE_TARGET"] == "sm_80"  # warpweave's own spelling wins
    assert "WARPWEAVE_TARGET" not in done
    assert env["WARPWEAVE_PTXAS"] == "/opt/ptxas"
    assert env["WARPWEAVE_LIBCUDA"] == os.path.join(str(tmp_path), "libcuda.so.1")
    assert env["WARPWEAVE_CACHE_DISABLE"] == "1"
    assert env["WARPWEAVE_INTERP_SEED"] == "7"


def test_every_warpweave_variable_read_has_an_alias():
    # The variables the package and the C++ runtime read (kept in step with _env.NAMES).
    for name in ("INTERPRET", "TARGET", "CACHE_DIR", "CACHE_DISABLE", "TRAP_HANGS", "PTXAS",
                 "LIBCUDA", "INTERP_SEED", "INTERP_SCHEDULES"):
        assert _env.aliases()[f"TRITON_{name}"][0] == f"WARPWEAVE_{name}"


def _python(code, **env_extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WARPWEAVE_", "TRITON_"))}
    env["PYTHONPATH"] = os.path.dirname(os.path.dirname(ww.__file__)) + os.pathsep + env.get(
        "PYTHONPATH", "")
    env.update(env_extra)
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=120)


def test_triton_interpret_switches_the_interpreter_on_at_import():
    code = ("import warpweave, os; from warpweave.jit import _interpret_env; "
            "print(_interpret_env(), os.environ.get('WARPWEAVE_INTERPRET'))")
    assert _python(code, TRITON_INTERPRET="1").stdout.split() == ["True", "1"]
    assert _python(code).stdout.split() == ["False", "None"]
    assert _python(code, TRITON_INTERPRET="1", WARPWEAVE_INTERPRET="0").stdout.split() == [
        "False", "0"]


def test_triton_cache_variables_reach_the_disk_cache(tmp_path):
    code = "import warpweave; from warpweave import cache; print(cache.cache_dir())"
    assert _python(code, TRITON_CACHE_DIR=str(tmp_path)).stdout.strip() == str(tmp_path)
    assert _python(code, TRITON_ALWAYS_COMPILE="1").stdout.strip() == "None"


# ------------------------------------------------------------------------------------------------
# Config / autotune / heuristics keywords
# ------------------------------------------------------------------------------------------------


@ww.jit
def _k(x_ptr, n, BLOCK: tl.constexpr):
    pass


def test_config_takes_tritons_keywords():
    hook = lambda nargs: None  # noqa: E731
    c = ww.Config({"BLOCK": 64}, num_warps=8, num_stages=2, num_ctas=1, maxnreg=128,
                  pre_hook=hook, minRegAutoWS=24, maxRegAutoWS=240, pingpongAutoWS=True,
                  ctas_per_cga=(2, 1, 1))
    assert c.maxnreg == 128 and c.pre_hook is hook and c.maxRegAutoWS == 240
    assert c.all_kwargs() == {"BLOCK": 64, "num_warps": 8, "num_stages": 2, "num_ctas": 1,
                              "ctas_per_cga": (2, 1, 1), "maxnreg": 128}
    c2 = ww.Config(kwargs={"BLOCK": 64}, num_warps=8, num_stages=2, num_ctas=1, maxnreg=128,
                   ctas_per_cga=(2, 1, 1))
    assert c != c2  # a different pre_hook, as in Triton
    assert "maxnreg: 128" in str(c)
    with pytest.raises(TypeError, match="no_such_option"):
        ww.Config({}, no_such_option=1)
    with pytest.raises(NotImplementedError, match="IR"):
        ww.Config({}, ir_override="k.ttgir")


def test_early_config_prune_gets_named_args_and_the_calls_kwargs():
    configs = [ww.Config({"BLOCK": b}) for b in (16, 32, 64)]
    seen = {}

    def prune(configs, named_args, **kwargs):
        seen["named"], seen["kwargs"] = dict(named_args), dict(kwargs)
        return [c for c in configs if c.kwargs["BLOCK"] <= named_args["n"]]

    tuner = ww.autotune(configs=configs, key=["n"], prune_configs_by={
        "early_config_prune": prune})(_k)
    kept = tuner.prune_configs({"x_ptr": None, "n": 40}, {"n": 40})
    assert [c.kwargs["BLOCK"] for c in kept] == [16, 32]
    assert seen["kwargs"] == {"n": 40}
    tuner = ww.autotune(configs, key="n", prune_configs_by={
        "early_config_prune": lambda c, a, **k: []})(_k)
    with pytest.raises(ww.AutotunerError):
        tuner.prune_configs({"x_ptr": None, "n": 1})


def test_perf_model_top_k_as_a_fraction_keeps_at_least_one():
    configs = [ww.Config({"BLOCK": b}) for b in (16, 32, 64, 128)]
    model = lambda BLOCK, **_: abs(BLOCK - 64)  # noqa: E731
    tuner = ww.autotune(configs, key=["n"], prune_configs_by={"perf_model": model,
                                                                "top_k": 0.1})(_k)
    assert [c.kwargs["BLOCK"] for c in tuner.prune_configs({"x_ptr": 0, "n": 1})] == [64]
    tuner = ww.autotune(configs, key=["n"], prune_configs_by={"perf_model": model,
                                                                "top_k": 0.5})(_k)
    assert [c.kwargs["BLOCK"] for c in tuner.prune_configs({"x_ptr": 0, "n": 1})] == [64, 32]
    tuner = ww.autotune(configs, key=["n"], prune_configs_by={"perf_model": model,
                                                                "top_k": "x"})(_k)
    with pytest.raises(TypeError, match="top_k"):
        tuner.prune_configs({"x_ptr": 0, "n": 1})


class _Buf:
    """A tensor-like argument for the hook tests: zero_, clone, copy_."""

    def __init__(self, v):
        self.v = v

    def zero_(self):
        self.v = 0

    def clone(self):
        return _Buf(self.v)

    def copy_(self, other):
        self.v = other.v


class _FakeKernel:
    """Stands in for the JITFunction under an Autotuner: records launches, mutates `x`."""

    def __init__(self, base):
        self.base = base
        self.runs = []

    @property
    def fn(self):
        return self.base

    def run(self, x, n, grid, **kw):
        self.runs.append(("bench", kw["BLOCK"], x.v))
        x.v += kw["BLOCK"]

    def __getitem__(self, grid):
        def launch(x, n, **kw):
            self.runs.append(("launch", kw["BLOCK"], x.v))
        return launch


def _tuner(**kw):
    configs = [ww.Config({"BLOCK": 16}), ww.Config({"BLOCK": 32})]
    times = {16: 2.0, 32: 1.0}

    def bench(fn, quantiles):
        fn()
        return [times[bench.block], times[bench.block], times[bench.block]]

    tuner = ww.autotune(configs, key=["n"], do_bench=bench, **kw)(_k)
    fake = _FakeKernel(_k)
    tuner.fn = fake
    tuner._precompile = lambda *a: None
    orig = tuner._bench

    def tracking(args, kwargs, grid, config, named):
        bench.block = config.kwargs["BLOCK"]
        return orig(args, kwargs, grid, config, named)

    tuner._bench = tracking
    return tuner, fake


def test_autotune_benchmarks_with_a_custom_do_bench_and_restores_values(monkeypatch):
    monkeypatch.delenv("WARPWEAVE_INTERPRET", raising=False)
    tuner, fake = _tuner(restore_value=["x_ptr"])
    x = _Buf(5)
    tuner[(1,)](x, 7)
    assert tuner.best_config.kwargs == {"BLOCK": 32}
    assert [r for r in fake.runs if r[0] == "bench"] == [("bench", 16, 5), ("bench", 32, 5)]
    assert fake.runs[-1] == ("launch", 32, 5)  # x restored after each benchmark run
    assert tuner.configs_timings[tuner.best_config][0] == 1.0
    fake.runs.clear()
    tuner[(1,)](x, 7)  # cached: no benchmarking
    assert fake.runs == [("launch", 32, 5)]


def test_autotune_reset_to_zero_and_user_hooks(monkeypatch):
    monkeypatch.delenv("WARPWEAVE_INTERPRET", raising=False)
    tuner, fake = _tuner(reset_to_zero=["x_ptr"])
    x = _Buf(5)
    tuner[(1,)](x, 7)
    assert [r[2] for r in fake.runs if r[0] == "bench"] == [0, 0]
    assert fake.runs[-1] == ("launch", 32, 0)  # zeroed again before the real launch

    calls = []

    def pre(kwargs, reset_only=False):
        calls.append(("pre", reset_only, kwargs["BLOCK"]))

    def post(kwargs, exception):
        calls.append(("post", exception))

    tuner, fake = _tuner(reset_to_zero=["x_ptr"], pre_hook=pre, post_hook=post)
    x = _Buf(5)
    tuner[(1,)](x, 7)
    assert x.v == 5 + 16 + 32  # the user's hooks replace reset_to_zero
    assert calls == [("pre", False, 16), ("post", None), ("pre", False, 32), ("post", None),
                     ("pre", True, 32)]


def test_autotune_does_not_time_interpreter_launches(monkeypatch):
    monkeypatch.delenv("WARPWEAVE_INTERPRET", raising=False)
    tuner, fake = _tuner()
    x = _Buf(5)
    x.base = np.zeros(4, np.float32)  # like a TensorDescriptor over a NumPy array
    tuner[(1,)](x, 7)
    assert fake.runs == [("launch", 16, 5)]  # the first config, untimed


def test_autotune_refuses_kwargs_that_the_configs_set(monkeypatch):
    monkeypatch.delenv("WARPWEAVE_INTERPRET", raising=False)
    tuner, _ = _tuner()
    with pytest.raises(ValueError, match="conflicting meta-parameters: BLOCK"):
        tuner[(1,)](_Buf(0), 7, BLOCK=8)


def test_autotune_accepts_tritons_keywords():
    tuner = ww.autotune(configs=[ww.Config({"BLOCK": 32})], key=["n"], warmup=5, rep=10,
                        use_cuda_graph=True, cache_results=True, include_npot=False,
                        prune_configs_by={"early_config_prune": lambda c, a, **k: c,
                                          "perf_model": None, "top_k": None})(_k)
    assert tuner.warmup == 5 and tuner.rep == 10 and tuner.use_cuda_graph
    h = ww.heuristics(values={"BLOCK": lambda args: 16})(_k)
    assert h.values["BLOCK"]({}) == 16


# ------------------------------------------------------------------------------------------------
# jit keywords
# ------------------------------------------------------------------------------------------------


def test_jit_takes_tritons_keywords():
    meta = lambda grid, kernel, args: {}  # noqa: E731

    @ww.jit(version=2, repr=lambda _: "k", launch_metadata=meta, do_not_specialize=["n"],
            do_not_specialize_on_alignment=["y_ptr"], debug=True, noinline=None)
    def k(x_ptr, y_ptr, n, m):
        pass

    assert isinstance(k, ww.JITFunction)
    assert k.specialize == [True, False, False, True]
    assert k.launch_metadata is meta and k.version == 2 and k.debug is True
    assert k.noinline is False

    @ww.jit(do_not_specialize_on_alignment=[0])
    def k2(x_ptr, n):
        pass

    assert k2.specialize == [False, True]


# ------------------------------------------------------------------------------------------------
# compile (Triton's ASTSource form)
# ------------------------------------------------------------------------------------------------


@ww.jit
def _scale(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2.0, mask=offs < n)


@needs_native
def test_compile_an_ast_source_for_a_target():
    from warpweave.backends.compiler import GPUTarget
    from warpweave.compiler import ASTSource

    src = ASTSource(fn=_scale, signature={"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32",
                                          "BLOCK": "constexpr"},
                    constexprs={"BLOCK": 128}, attrs={(0,): [["tt.divisibility", 16]]})
    assert src.signature_text() == "x_ptr:*fp32:16,y_ptr:*fp32,n:i32,BLOCK=128"
    k = ww.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4})
    assert "_scale" in k.asm["ptx"] and "tt.load" in k.asm["ttir"]
    assert 'ttg.target = "cuda:90"' in k.asm["ttgir"]
    with pytest.raises(KeyError, match="'llir': warpweave has no such stage"):
        k.asm["llir"]
    assert k.metadata["num_warps"] == 4
    with pytest.raises(TypeError, match="constexpr"):
        ASTSource(fn=_scale, signature={"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32",
                                        "BLOCK": "constexpr"}).signature_text()


# ------------------------------------------------------------------------------------------------
# A parameter named like a launch option receives the option too (Triton's tutorial 02)
# ------------------------------------------------------------------------------------------------


@ww.jit
def _stages_seen(out, num_stages: tl.constexpr, num_warps: tl.constexpr):
    tl.store(out, num_stages * 10 + num_warps)


def test_parameter_named_like_a_launch_option_receives_it():
    out = np.zeros(1, np.int32)
    _stages_seen[(1, )](out, num_stages=3, num_warps=4)
    assert out[0] == 34
    compiled = _stages_seen.warmup(out, num_stages=2, num_warps=8, grid=(1, ))
    assert compiled.metadata.num_stages == 2 and compiled.metadata.num_warps == 8
    # Tutorial 02 then reads the register count after _init_handles(), as in Triton, and launches
    # the compiled kernel itself with every argument.
    assert compiled._init_handles() is None and isinstance(compiled.n_regs, int)
    out[0] = 0
    compiled[(1, 1, 1)](out, 2, 8)
    assert out[0] == 28
    with pytest.raises(TypeError, match="missing required constexpr 'num_warps'"):
        _stages_seen[(1, )](out, num_stages=3)


# ------------------------------------------------------------------------------------------------
# CompiledKernel.asm: Triton's keys that exist, and a clear KeyError for its other stages
# ------------------------------------------------------------------------------------------------


def test_asm_names_the_stages_warpweave_has_and_refuses_tritons_others():
    out = np.zeros(1, np.int32)
    compiled = _stages_seen.warmup(out, num_stages=2, num_warps=4, grid=(1, ))
    asm = compiled.asm
    assert "kernel @_stages_seen" in asm["tile_ir"] and "store %0_out" in asm["tile_ir"]
    assert set(asm) >= {"tile_ir", "ttir", "ttgir", "ptx", "cubin"}
    # TTIR and TTGIR: the Tile IR in the words of Triton's dialects, TTGIR with the layouts
    # (this kernel stores a scalar: no tensor, no register layout).
    assert "tt.func public @_stages_seen" in asm.get("ttir") and "#linear" not in asm["ttir"]
    assert "tt.func public @_stages_seen" in asm["ttgir"]
    assert "#smem = #ttg.shared_memory" in asm["ttgir"]
    assert "llir" not in asm and asm.get("llir") is None
    with pytest.raises(KeyError, match="'llir': warpweave has no such stage.*available: "
                                       "'tile_ir', 'ptx', 'cubin', 'ttir', 'ttgir'"):
        asm["llir"]
