"""CPU-side logic of ww.autotune / ww.Config (pruning, keys) and ww.testing (quantiles and
summaries); the timing itself runs on the GPU in tests/gpu."""

import importlib

import pytest

import warpweave as ww
import warpweave.language as tl

testing = importlib.import_module("warpweave.testing")


@ww.jit
def k(x_ptr, n, BLOCK: tl.constexpr):
    pass


def test_config_kwargs_and_equality():
    c = ww.Config({"BLOCK": 64}, num_warps=8, num_stages=2, ctas_per_cga=(2, 1, 1))
    assert c.all_kwargs() == {"BLOCK": 64, "num_warps": 8, "num_stages": 2,
                              "ctas_per_cga": (2, 1, 1)}
    assert c == ww.Config({"BLOCK": 64}, num_warps=8, num_stages=2, ctas_per_cga=(2, 1, 1))
    assert len({c, ww.Config({"BLOCK": 64}, num_warps=8, num_stages=2,
                             ctas_per_cga=(2, 1, 1))}) == 1
    assert "BLOCK: 64" in repr(c) and "num_warps: 8" in repr(c)


def test_pruning_early_prune_then_perf_model_top_k():
    configs = [ww.Config({"BLOCK": b}, num_warps=w) for b in (32, 64, 128, 256) for w in (2, 4)]
    seen = {}

    def early(cfgs, named):
        seen["named"] = named
        return [c for c in cfgs if c.kwargs["BLOCK"] >= 64]

    def model(x_ptr, n, BLOCK, num_warps, num_stages, **_):
        return abs(BLOCK - 128) + num_warps  # best: BLOCK=128, fewest warps

    tuner = ww.autotune(configs, key=["n"], prune_configs_by={
        "early_config_prune": early, "perf_model": model, "top_k": 2})(k)
    pruned = tuner.prune_configs({"x_ptr": None, "n": 100})
    assert seen["named"]["n"] == 100
    assert pruned == [ww.Config({"BLOCK": 128}, num_warps=2), ww.Config({"BLOCK": 128},
                                                                        num_warps=4)]


def test_autotune_key_not_a_parameter_selects_nothing():
    # Triton's rule: a key that names no parameter is left out of the tuning key.
    tuner = ww.autotune([ww.Config({"BLOCK": 32})], key=["m", "n"])(k)
    assert tuner._key({"x_ptr": None, "n": 100}) == (100,)
    assert tuner._key({"x_ptr": None, "n": 7}) != tuner._key({"x_ptr": None, "n": 100})


def test_quantiles_interpolate_like_torch_quantile():
    xs = [4.0, 1.0, 3.0, 2.0]
    assert testing.quantiles_of(xs, [0, 0.5, 1]) == [1.0, 2.5, 4.0]
    assert testing.quantiles_of(xs, [0.25]) == [1.75]
    with pytest.raises(ValueError):
        testing.quantiles_of(xs, [1.5])


def test_summaries():
    xs = [3.0, 1.0, 2.0]
    assert testing._summarize(xs, None, "min") == 1.0
    assert testing._summarize(xs, None, "max") == 3.0
    assert testing._summarize(xs, None, "mean") == 2.0
    assert testing._summarize(xs, None, "median") == 2.0
    assert testing._summarize(xs, None, "all") == xs
    assert testing._summarize(xs, [0.5], "mean") == 2.0  # one quantile: a number
    assert testing._summarize(xs, [0.0, 1.0], "mean") == [1.0, 3.0]
    with pytest.raises(ValueError, match="return_mode"):
        testing._summarize(xs, None, "avg")


@ww.jit
def fill_block(out_ptr, n, BLOCK: tl.constexpr):
    tl.store(out_ptr + tl.arange(0, BLOCK), tl.full([BLOCK], BLOCK, tl.int32))


def _timed_tuner(seen, benched, cache_results=True):
    """An autotuner over BLOCK whose do_bench runs the candidate (in the interpreter) and reports
    a fixed time per BLOCK: 64 is the fastest."""
    fake_ms = {32: 3.0, 64: 1.0, 128: 2.0}

    def record(named):
        seen.append(named["BLOCK"])

    def bench(call, quantiles=None):
        call()
        benched.append(seen[-1])
        t = fake_ms[seen[-1]]
        return [t, t, t]

    configs = [ww.Config({"BLOCK": b}, pre_hook=record) for b in (32, 64, 128)]
    return ww.autotune(configs, key=["n"], do_bench=bench, cache_results=cache_results)(fill_block)


def test_cache_results_keeps_timings_on_disk(tmp_path, monkeypatch):
    import numpy as np

    autotuner = importlib.import_module("warpweave.autotuner")
    monkeypatch.setattr(autotuner, "_runs_in_interpreter", lambda named: False)
    monkeypatch.setenv("WARPWEAVE_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("WARPWEAVE_CACHE_DISABLE", raising=False)

    def launch(tuner, n):
        out = np.zeros(128, np.int32)
        tuner[(1,)](out, n)
        return out

    seen, benched = [], []
    first = _timed_tuner(seen, benched)
    out = launch(first, 0)
    assert sorted(benched) == [32, 64, 128] and first.best_config.kwargs == {"BLOCK": 64}
    assert (out[:64] == 64).all()  # the launch after tuning ran BLOCK=64
    files = list((tmp_path / "autotune").glob("*.json"))
    assert len(files) == 1
    # A new autotuner (as in another process) over the same kernel and configs: no timing.
    seen, benched = [], []
    second = _timed_tuner(seen, benched)
    launch(second, 0)
    assert benched == [] and second.best_config.kwargs == {"BLOCK": 64}
    # A damaged record is timed again and rewritten.
    files[0].write_text("{not json")
    seen, benched = [], []
    third = _timed_tuner(seen, benched)
    launch(third, 0)
    assert sorted(benched) == [32, 64, 128]
    # Without cache_results (and the knob off) nothing is read: every tuner times again.
    seen, benched = [], []
    launch(_timed_tuner(seen, benched, cache_results=False), 0)
    assert sorted(benched) == [32, 64, 128]
    # knobs.autotuning.cache (WARPWEAVE_CACHE_AUTOTUNING=1) turns it on for every autotuner.
    monkeypatch.setenv("WARPWEAVE_CACHE_AUTOTUNING", "1")
    assert ww.knobs.autotuning.cache
    seen, benched = [], []
    launch(_timed_tuner(seen, benched, cache_results=False), 0)
    assert benched == []
