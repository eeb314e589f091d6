"""Op attributes are checked where the user wrote them: tl.load / tl.store's cache_modifier and
eviction_policy outside Triton's allowed sets are located errors at the call naming the values
accepted (not a PTX codegen failure), and every value Triton accepts runs in the interpreter and
lowers to its PTX qualifier."""

import importlib
import re
from pathlib import Path

import numpy as np
import pytest

import warpweave as ww
from op_attributes_kernels import copy_with_hints

native_loader = importlib.import_module("warpweave._native_loader")
pytestmark = pytest.mark.skipif(not native_loader.available(),
                                reason="warpweave._native is not built (pip install .)")

KERNELS = Path(__file__).with_name("op_attributes_kernels.py")
SOURCE = KERNELS.read_text().splitlines()
LOAD_LINE = next(i + 1 for i, line in enumerate(SOURCE) if "tl.load(" in line)
STORE_LINE = next(i + 1 for i, line in enumerate(SOURCE) if "tl.store(" in line)

LOAD_CACHE = ["", ".ca", ".cg", ".cs", ".cv"]
STORE_CACHE = ["", ".wb", ".cg", ".cs", ".wt"]
EVICT = ["", "evict_first", "evict_last"]


def run(load_cache="", store_cache="", load_evict="", store_evict=""):
    x = np.arange(64, dtype=np.float32)
    y = np.zeros_like(x)
    copy_with_hints[(1,)](x, y, N=64, LOAD_CACHE=load_cache, STORE_CACHE=store_cache,
                          LOAD_EVICT=load_evict, STORE_EVICT=store_evict)
    return x, y


def ptx(load_cache="", store_cache="", load_evict="", store_evict=""):
    sig = (f"x_ptr:*fp32:16, y_ptr:*fp32:16, N=64, LOAD_CACHE='{load_cache}', "
           f"STORE_CACHE='{store_cache}', LOAD_EVICT='{load_evict}', STORE_EVICT='{store_evict}'")
    return native_loader.native().compile([(str(KERNELS), KERNELS.read_text())],
                                          "copy_with_hints", sig, {}, target="sm_90a",
                                          num_warps=4, stage="ptx").ptx


def located(message, line):
    """The error names op_attributes_kernels.py and the line of the call."""
    return re.search(rf"op_attributes_kernels\.py:{line}:\d+: error: ", message) is not None


@pytest.mark.parametrize("cache", LOAD_CACHE)
def test_load_cache_modifiers_triton_accepts(cache):
    x, y = run(load_cache=cache)
    np.testing.assert_array_equal(y, x + 1)


@pytest.mark.parametrize("cache", STORE_CACHE)
def test_store_cache_modifiers_triton_accepts(cache):
    x, y = run(store_cache=cache)
    np.testing.assert_array_equal(y, x + 1)


@pytest.mark.parametrize("policy", EVICT)
def test_eviction_policies_triton_accepts(policy):
    x, y = run(load_evict=policy, store_evict=policy)
    np.testing.assert_array_equal(y, x + 1)


@pytest.mark.parametrize("cache", [".wt", ".wb", "cg", ".lu", "none"])
def test_load_cache_modifier_outside_the_set_is_located(cache):
    with pytest.raises(Exception) as e:
        run(load_cache=cache)
    msg = str(e.value)
    assert located(msg, LOAD_LINE), msg
    assert f"tl.load's cache_modifier must be \"\", \".ca\", \".cg\", \".cs\" or \".cv\", got '{cache}'" in msg


@pytest.mark.parametrize("cache", [".ca", ".cv", "wt"])
def test_store_cache_modifier_outside_the_set_is_located(cache):
    with pytest.raises(Exception) as e:
        run(store_cache=cache)
    msg = str(e.value)
    assert located(msg, STORE_LINE), msg
    assert f"tl.store's cache_modifier must be \"\", \".wb\", \".cg\", \".cs\" or \".wt\", got '{cache}'" in msg


@pytest.mark.parametrize("which", ["load", "store"])
@pytest.mark.parametrize("policy", ["evict_normal", "evict_last_use", "first"])
def test_eviction_policy_outside_the_set_is_located(which, policy):
    with pytest.raises(Exception) as e:
        run(**{which + "_evict": policy})
    msg = str(e.value)
    assert located(msg, LOAD_LINE if which == "load" else STORE_LINE), msg
    assert (f"tl.{which}'s eviction_policy must be \"\", \"evict_first\" or \"evict_last\", "
            f"got '{policy}'") in msg


def test_rejected_before_codegen():
    """The PTX path reports the same located error (the specializer's, before any lowering)."""
    with pytest.raises(Exception) as e:
        ptx(load_cache=".wt")
    assert located(str(e.value), LOAD_LINE), str(e.value)


@pytest.mark.parametrize("cache", [".ca", ".cg", ".cs", ".cv"])
def test_load_cache_modifier_lowers_to_its_qualifier(cache):
    assert f"ld.global{cache}." in ptx(load_cache=cache)


@pytest.mark.parametrize("cache", [".wb", ".cg", ".cs", ".wt"])
def test_store_cache_modifier_lowers_to_its_qualifier(cache):
    assert f"st.global{cache}." in ptx(store_cache=cache)


def test_eviction_policy_lowers_to_a_cache_hint():
    text = ptx(load_evict="evict_first", store_evict="evict_last")
    assert "createpolicy.fractional.L2::evict_first" in text
    assert "createpolicy.fractional.L2::evict_last" in text
    assert ".L2::cache_hint" in text
