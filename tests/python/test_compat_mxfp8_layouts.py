"""Names TLX scripts import at module level: tlx.mxfp8_utils (MXFP8 quantization helpers, run
in the interpreter against a NumPy reference), AMD layout descriptors (host values only),
tl.core._aggregate and tl.tensor."""

import importlib

import numpy as np
import pytest

import warpweave as ww
import warpweave.language as tl
from warpweave import tlx
from warpweave.language.extra.tlx import mxfp8_utils

native_loader = importlib.import_module("warpweave._native_loader")
ml_dtypes = pytest.importorskip("ml_dtypes")


@ww.jit
def quantize(x_ptr, data_ptr, scale_ptr, M: tl.constexpr, K: tl.constexpr,
             PER_32X32: tl.constexpr):
    offs = tl.arange(0, M)[:, None] * K + tl.arange(0, K)[None, :]
    x = tl.load(x_ptr + offs)
    if PER_32X32:
        data, scale = mxfp8_utils._to_mxfp8_32x32_block(x, 32, tl.float8e4nv)
    else:
        data, scale = mxfp8_utils._to_mxfp8_block(x, 32, tl.float8e4nv)
    tl.store(data_ptr + offs, data)
    s_offs = tl.arange(0, M)[:, None] * (K // 32) + tl.arange(0, K // 32)[None, :]
    tl.store(scale_ptr + s_offs, scale)


@ww.jit
def quantize_through_tlx(x_ptr, data_ptr, scale_ptr, M: tl.constexpr, K: tl.constexpr,
                         FP8: tl.constexpr):
    # TLX's package exports _to_mxfp8_block beside its builtins: tlx._to_mxfp8_block.
    offs = tl.arange(0, M)[:, None] * K + tl.arange(0, K)[None, :]
    data, scale = tlx._to_mxfp8_block(tl.load(x_ptr + offs), 32, FP8)
    tl.store(data_ptr + offs, data)
    tl.store(scale_ptr + tl.arange(0, M)[:, None] * (K // 32) + tl.arange(0, K // 32)[None, :],
             scale)


def reference(x, per_32x32, largest=448.0, fp8=None):
    m, k = x.shape
    amax = np.abs(x.reshape(m, k // 32, 32)).max(axis=2)
    if per_32x32:
        amax = np.repeat(amax.reshape(m // 32, 32, k // 32).max(axis=1), 32, axis=0)
    scale = amax * np.float32(1.0 / largest)
    bits = scale.view(np.uint32) & 0x7FFFFFFF
    exp = (bits >> 23) + ((bits & 0x7FFFFF) != 0)
    exp = np.minimum(exp, 254).astype(np.uint32)
    inv = ((254 - exp) << 23).astype(np.uint32).view(np.float32)
    data = np.clip(x.reshape(m, k // 32, 32) * inv[:, :, None], -largest, largest).reshape(m, k)
    return data.astype(fp8 or ml_dtypes.float8_e4m3fn), exp.astype(np.uint8)


@pytest.mark.skipif(not native_loader.available(), reason="warpweave._native is not built")
@pytest.mark.parametrize("per_32x32", [False, True])
def test_mxfp8_quantize_matches_reference(rng, per_32x32):
    M, K = 64, 128
    x = (rng.standard_normal((M, K)) * rng.choice([1e-3, 1.0, 300.0], size=(M, 1))).astype(
        np.float32)
    data = np.zeros((M, K), ml_dtypes.float8_e4m3fn)
    scale = np.zeros((M, K // 32), np.uint8)
    quantize[(1,)](x, data, scale, M=M, K=K, PER_32X32=per_32x32)
    ref_data, ref_scale = reference(x, per_32x32)
    np.testing.assert_array_equal(scale, ref_scale)
    np.testing.assert_array_equal(data.astype(np.float32), ref_data.astype(np.float32))
    if per_32x32:
        return  # rows of 1e-3 share a scale with rows of 300 there: they underflow, as intended
    # Dequantized, each block comes back within half an fp8 step at its largest value (e4m3
    # keeps 3 mantissa bits; values far below the block's largest are subnormal there).
    blocks = x.reshape(M, K // 32, 32)
    back = data.astype(np.float32).reshape(M, K // 32, 32) * np.exp2(
        scale.astype(np.float32) - 127)[:, :, None]
    bound = np.abs(blocks).max(axis=2, keepdims=True) * 2.0**-4
    assert np.all(np.abs(back - blocks) <= bound)


@pytest.mark.skipif(not native_loader.available(), reason="warpweave._native is not built")
@pytest.mark.parametrize("fmt", ["e4m3", "e5m2"])
def test_tlx_to_mxfp8_block_is_the_mxfp8_utils_helper(rng, fmt):
    fp8, largest, dtype = {"e4m3": (ml_dtypes.float8_e4m3fn, 448.0, tl.float8e4nv),
                           "e5m2": (ml_dtypes.float8_e5m2, 57344.0, tl.float8e5)}[fmt]
    M, K = 32, 128
    x = (rng.standard_normal((M, K)) * rng.choice([1e-3, 1.0, 300.0], size=(M, 1))).astype(
        np.float32)
    x[3] = 0  # all-zero blocks: scale 0 and zero data
    data = np.zeros((M, K), fp8)
    scale = np.zeros((M, K // 32), np.uint8)
    quantize_through_tlx[(1,)](x, data, scale, M=M, K=K, FP8=dtype)
    ref_data, ref_scale = reference(x, False, largest, fp8)
    np.testing.assert_array_equal(scale, ref_scale)
    np.testing.assert_array_equal(data.astype(np.float32), ref_data.astype(np.float32))
    assert (scale[3] == 0).all() and (data[3].astype(np.float32) == 0).all()


@pytest.mark.skipif(not native_loader.available(), reason="warpweave._native is not built")
def test_tlx_to_mxfp8_block_without_its_file_names_the_module(tmp_path):
    # Compiling a file alone (no @jit launcher to give the helper's file): a located error that
    # says where the helper lives.
    src = tmp_path / "k.py"
    src.write_text("import warpweave as ww\nimport warpweave.language as tl\n"
                   "from warpweave import tlx\n\n\n@ww.jit\ndef k(x_ptr):\n"
                   "    x = tl.load(x_ptr + tl.arange(0, 32)[:, None] * 32 + "
                   "tl.arange(0, 32)[None, :])\n"
                   "    d, s = tlx._to_mxfp8_block(x, 32, tl.float8e4nv)\n")
    with pytest.raises(Exception) as e:
        native_loader.native().compile([(str(src), src.read_text())], "k", "x_ptr:*fp32:16", {},
                                       target="sm_90a", stage="ptx")
    assert "k.py:9:" in str(e.value)
    assert "warpweave.language.extra.tlx.mxfp8_utils" in str(e.value)


def test_amd_layout_descriptors_are_host_values():
    lay = tlx.layout(shape=((16, 16), (8, 8)), stride=((8, 128), (1, 2048)))
    assert lay == tlx.layout(shape=((16, 16), (8, 8)), stride=((8, 128), (1, 2048)))
    enc = tlx.padded_shared_layout_encoding.with_bases([(512, 16)], [[0, 1]], [64, 32])
    assert enc.intervals_paddings == [(512, 16)] and enc.shape == [64, 32]
    enc2 = tlx.padded_shared_layout_encoding.with_identity_for([[64, 8]], [64, 32], [1, 0])
    assert enc2.order == [1, 0]


def test_aggregate_decorator_and_tensor_type():
    from warpweave.language.core import _aggregate

    @_aggregate
    class State:
        acc: tl.tensor

    assert State.__triton_aggregate__
    with pytest.raises(TypeError, match="only inside @jit kernels"):
        tl.tensor()
