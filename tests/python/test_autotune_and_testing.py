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
