"""MXFP8 helpers of TLX (`tlx.mxfp8_utils`): quantize fp32 tiles to fp8 with one power-of-two
(E8M0) scale per block of VEC_SIZE values. Kernel-callable @jit helpers, written as tile
arithmetic with the results of TLX's PTX versions: the scale exponent rounds up (RCEIL) and the
conversions saturate to the fp8 format's largest finite value."""

import warpweave.language as tl
from warpweave.jit import jit


@jit
def _fused_amax_to_e8m0(amax, max_norm_rcp):
    """(e8m0, inv_scale): the biased exponent of amax * max_norm_rcp rounded up to a power of
    two, saturated to [0, 254] (uint32), and 2**(127 - e8m0) as fp32, the factor that brings a
    block under the format's largest value."""
    scale = amax.to(tl.float32) * max_norm_rcp
    bits = scale.to(tl.uint32, bitcast=True) & 0x7FFFFFFF
    exp = bits >> 23
    # Rounding up: a non-zero mantissa (or a subnormal scale) takes the next exponent.
    exp = tl.where((bits & 0x7FFFFF) != 0, exp + 1, exp)
    exp = tl.minimum(exp, 254)
    inv_bits = (254 - exp) << 23
    return exp, inv_bits.to(tl.float32, bitcast=True)


@jit
def _cvt_e4m3x4_f32(a):
    """fp32 -> fp8 e4m3, rounding to nearest and saturating to +-448."""
    return tl.clamp(a.to(tl.float32), -448.0, 448.0).to(tl.float8e4nv)


@jit
def _cvt_e5m2x4_f32(a):
    """fp32 -> fp8 e5m2, rounding to nearest and saturating to +-57344."""
    return tl.clamp(a.to(tl.float32), -57344.0, 57344.0).to(tl.float8e5)


@jit
def _amax_to_e8m0_and_quantize(data_input, block_amax, VEC_SIZE: tl.constexpr,
                               dtype: tl.constexpr):
    """(scales [BLOCK_M, BLOCK_K // VEC_SIZE] as uint8 E8M0, data [BLOCK_M, BLOCK_K] as fp8)
    from the given amax of each block of VEC_SIZE consecutive values of a row."""
    BLOCK_M: tl.constexpr = data_input.shape[0]
    BLOCK_K: tl.constexpr = data_input.shape[1]
    NUM_SCALES: tl.constexpr = BLOCK_K // VEC_SIZE
    blocks = tl.reshape(data_input.to(tl.float32), [BLOCK_M, NUM_SCALES, VEC_SIZE])
    amax = block_amax
    if dtype == tl.float8e4nv:
        scale, inv = _fused_amax_to_e8m0(amax, 1.0 / 448.0)
        data = _cvt_e4m3x4_f32(blocks * tl.reshape(inv, [BLOCK_M, NUM_SCALES, 1]))
    else:
        tl.static_assert(dtype == tl.float8e5, "dtype must be tl.float8e4nv or tl.float8e5")
        scale, inv = _fused_amax_to_e8m0(amax, 1.0 / 57344.0)
        data = _cvt_e5m2x4_f32(blocks * tl.reshape(inv, [BLOCK_M, NUM_SCALES, 1]))
    return scale.to(tl.uint8), tl.reshape(data, [BLOCK_M, BLOCK_K])


@jit
def _compute_scale_and_quantize(data_block, VEC_SIZE: tl.constexpr, dtype: tl.constexpr):
    """(scales, data) as _amax_to_e8m0_and_quantize, with each block's amax computed here."""
    BLOCK_M: tl.constexpr = data_block.shape[0]
    BLOCK_K: tl.constexpr = data_block.shape[1]
    NUM_SCALES: tl.constexpr = BLOCK_K // VEC_SIZE
    blocks = tl.reshape(data_block.to(tl.float32), [BLOCK_M, NUM_SCALES, VEC_SIZE])
    return _amax_to_e8m0_and_quantize(data_block, tl.max(tl.abs(blocks), axis=2), VEC_SIZE,
                                      dtype)


@jit
def _to_mxfp8_block(data_input, VEC_SIZE: tl.constexpr, dtype: tl.constexpr):
    """(data, scales): fp8 data and one E8M0 scale per 32 consecutive values of a row."""
    tl.static_assert(VEC_SIZE == 32, "MXFP8 blocks are 32 values")
    tl.static_assert(data_input.shape[1] % VEC_SIZE == 0, "BLOCK_K must be a multiple of 32")
    scale, data = _compute_scale_and_quantize(data_input, VEC_SIZE, dtype)
    return data, scale


@jit
def _to_mxfp8_block_with_block_amax(data_input, block_amax, VEC_SIZE: tl.constexpr,
                                    dtype: tl.constexpr):
    """(data, scales) as _to_mxfp8_block, from precomputed block amaxes [BLOCK_M, BLOCK_K // 32]."""
    tl.static_assert(VEC_SIZE == 32, "MXFP8 blocks are 32 values")
    tl.static_assert(data_input.shape[1] % VEC_SIZE == 0, "BLOCK_K must be a multiple of 32")
    scale, data = _amax_to_e8m0_and_quantize(data_input, block_amax, VEC_SIZE, dtype)
    return data, scale


@jit
def _to_mxfp8_32x32_block(data_input, VEC_SIZE: tl.constexpr, dtype: tl.constexpr):
    """(data, scales [BLOCK_M, BLOCK_K // 32]): one scale per 32x32 block (32 rows by 32
    consecutive values), repeated on each of the block's rows."""
    BLOCK_M: tl.constexpr = data_input.shape[0]
    BLOCK_K: tl.constexpr = data_input.shape[1]
    NUM_SCALES: tl.constexpr = BLOCK_K // VEC_SIZE
    tl.static_assert(VEC_SIZE == 32, "MXFP8 blocks are 32 values")
    tl.static_assert(BLOCK_M % VEC_SIZE == 0, "BLOCK_M must be a multiple of 32")
    blocks = tl.reshape(data_input.to(tl.float32), [BLOCK_M, NUM_SCALES, VEC_SIZE])
    row_amax = tl.max(tl.abs(blocks), axis=2)
    groups = tl.reshape(row_amax, [BLOCK_M // VEC_SIZE, VEC_SIZE, NUM_SCALES])
    group_amax = tl.max(groups, axis=1)
    block_amax = tl.reshape(tl.broadcast_to(tl.reshape(group_amax, [BLOCK_M // VEC_SIZE, 1, NUM_SCALES]),
                                            [BLOCK_M // VEC_SIZE, VEC_SIZE, NUM_SCALES]),
                            [BLOCK_M, NUM_SCALES])
    scale, data = _amax_to_e8m0_and_quantize(data_input, block_amax, VEC_SIZE, dtype)
    return data, scale
