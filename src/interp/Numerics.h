// Bit-exact numeric conversions of the interpreter: the small float formats (fp16, bf16, fp8)
// kept as their encodings, rounded the way the GPU's cvt instructions round.
#pragma once

#include "ir/Type.h"

#include <cstdint>

namespace ww::interp {

enum class Rounding { NearestEven, TowardZero };

/// Decodes an fp16 / bf16 / fp8e4nv / fp8e5 encoding (low bits of `bits`) to its exact value.
double decodeSmallFloat(ir::DType t, uint32_t bits);
/// Encodes `x` as fp16 / bf16 / fp8e4nv / fp8e5 with one rounding. fp16 and bf16 overflow to
/// infinity as cvt.rn.f16.f32 does; fp8 saturates to the largest finite value (cvt.rn.satfinite,
/// what Triton emits on sm_90); NaN stays NaN.
uint32_t encodeSmallFloat(ir::DType t, double x, Rounding r = Rounding::NearestEven);

inline float halfToFloat(uint16_t h) {
  return static_cast<float>(decodeSmallFloat(ir::DType::F16, h));
}
inline uint16_t floatToHalf(float f) {
  return static_cast<uint16_t>(encodeSmallFloat(ir::DType::F16, f));
}
inline float bf16ToFloat(uint16_t b) {
  uint32_t bits = uint32_t(b) << 16;
  float f;
  __builtin_memcpy(&f, &bits, 4);
  return f;
}
uint16_t floatToBf16(float f);

/// fp32 -> fp32 with the one rounding of `r` from a double.
float roundToFloat(double x, Rounding r);

/// The tf32 operand a tensor core sees for an fp32 register: the low 13 mantissa bits dropped.
float truncateToTf32(float x);

/// Float -> integer as cvt.rzi does: truncation toward zero, saturation to the destination range,
/// NaN -> 0. `t` is any integer DType (i1 is handled by the caller as x != 0).
int64_t floatToIntSaturating(double x, ir::DType t);
uint64_t floatToUintSaturating(double x, ir::DType t);

} // namespace ww::interp
