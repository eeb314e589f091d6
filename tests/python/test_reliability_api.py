"""Bad arguments to the Python API (issue 20): every one is a TypeError or ValueError that names
the argument, raised before anything runs, never an IndexError, AttributeError or OverflowError
from deep inside."""

import numpy as np
import pytest

import warpweave as ww
import warpweave.language as tl


@ww.jit
def _inc(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m) + 1, mask=m)


def _raises(exc, fragment, fn):
    with pytest.raises(exc) as info:
        fn()
    assert fragment in str(info.value), str(info.value)


@pytest.mark.parametrize("value", [b"x", 2.5, None, object()])
def test_jit_do_not_specialize_types(value):
    _raises(TypeError, "do_not_specialize", lambda: ww.jit(do_not_specialize=value)(_inc.fn))


@pytest.mark.parametrize("value", [(7,), [-9], (1, 2, 3, 4)])
def test_jit_do_not_specialize_index_range(value):
    _raises(ValueError, "out of range", lambda: ww.jit(do_not_specialize=value)(_inc.fn))


def test_jit_do_not_specialize_accepts_name_index_and_single_name():
    a = ww.jit(do_not_specialize=("n", 0))(_inc.fn)
    assert a.specialize == [False, True, False, True]
    b = ww.jit(do_not_specialize="n")(_inc.fn)
    assert b.specialize == [True, True, False, True]


@pytest.mark.parametrize("configs", ["s", [1], ww.Config({"BLOCK": 64}), ({"BLOCK": 64},)])
def test_autotune_configs_must_be_configs(configs):
    _raises(TypeError, "configs", lambda: ww.autotune(configs=configs, key=["n"]))


@pytest.mark.parametrize("key", [None, [1], 5, ["n", 2.0]])
def test_autotune_key_must_be_names(key):
    _raises(TypeError, "key", lambda: ww.autotune(configs=[ww.Config({"BLOCK": 64})],
                                                    key=key)(_inc))


def test_autotune_single_key_string_and_empty_configs_run():
    x = np.arange(100, dtype=np.float32)
    y = np.zeros_like(x)
    tuned = ww.autotune(configs=[ww.Config({"BLOCK": 64}), ww.Config({"BLOCK": 128})],
                        key="n")(_inc)
    tuned[lambda meta: (ww.cdiv(100, meta["BLOCK"]),)](x, y, 100)
    np.testing.assert_array_equal(y, x + 1)


def test_config_argument_types():
    _raises(TypeError, "kwargs", lambda: ww.Config("BLOCK"))
    _raises(TypeError, "pre_hook", lambda: ww.Config({}, pre_hook=5))


def test_config_bad_launch_options_named_at_launch():
    x = np.arange(64, dtype=np.float32)
    y = np.zeros_like(x)
    for cfg, exc, frag in [(ww.Config({"BLOCK": 64}, num_warps="s"), TypeError, "num_warps"),
                           (ww.Config({"BLOCK": 64}, num_warps=3), ValueError, "num_warps"),
                           (ww.Config({"BLOCK": 64}, num_stages=-2), ValueError, "num_stages")]:
        tuned = ww.autotune(configs=[cfg], key=["n"])(_inc)
        _raises(exc, frag, lambda: tuned[(1,)](x, y, 64))


def test_heuristics_values_must_be_functions():
    _raises(TypeError, "values", lambda: ww.heuristics(3))
    _raises(TypeError, "'BLOCK'", lambda: ww.heuristics({"BLOCK": 64}))


@pytest.mark.parametrize("kw", [dict(warmup=float("inf")), dict(warmup=-1), dict(rep="10"),
                                dict(rep=float("nan")), dict(warmup=True)])
def test_do_bench_times(kw):
    exc = TypeError if isinstance(next(iter(kw.values())), (str, bool)) else ValueError
    _raises(exc, next(iter(kw)), lambda: ww.testing.do_bench(lambda: None, **kw))


def test_do_bench_fn_and_cudagraph():
    _raises(TypeError, "fn", lambda: ww.testing.do_bench(3))
    _raises(ValueError, "rep", lambda: ww.testing.do_bench_cudagraph(lambda: None, rep=-5))


@pytest.mark.parametrize("field", ["shape", "strides", "block_shape"])
@pytest.mark.parametrize("value", [b"x", "64", [1.5], [None], 7])
def test_tensor_descriptor_fields(field, value):
    x = np.zeros(64, dtype=np.float32)
    args = dict(shape=[64], strides=[1], block_shape=[16])
    args[field] = value
    _raises(TypeError, field, lambda: ww.TensorDescriptor(x, **args))


def test_tensor_descriptor_block_and_source():
    x = np.zeros(64, dtype=np.float32)
    _raises(ValueError, "block_shape", lambda: ww.TensorDescriptor.from_tensor(x, [-16]))
    _raises(TypeError, "from_tensor", lambda: ww.TensorDescriptor.from_tensor("abc", [16]))
    d = ww.TensorDescriptor.from_tensor(x, [np.int64(16)])
    assert d.block_shape == [16] and d.shape == [64] and d.strides == [1]


@pytest.mark.parametrize("value", [float("inf"), 2.5, "8", None])
def test_next_power_of_2_needs_int(value):
    _raises(TypeError, "next_power_of_2", lambda: ww.next_power_of_2(value))


def test_next_power_of_2_values():
    assert [ww.next_power_of_2(n) for n in (0, 1, 2, 3, 1000, np.int64(1025))] == \
        [1, 1, 2, 4, 1024, 2048]
