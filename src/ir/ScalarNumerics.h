// What Tile IR's arithmetic ops compute on one element: the single definition that constant
// folding (transforms/Fold.cpp) and the interpreter (interp/Elementwise.cpp) call, and that the
// PTX codegen (codegen/ScalarOps.cpp) follows instruction by instruction. It lives beside
// Ops.def because it is the ops' contract, and depends on nothing but DType so that every stage
// may use it (docs/architecture.md, "Scalar numerics").
//
// Integers are held widened to 64 bits: a signed type's value sign-extended in an int64_t, an
// unsigned type's zero-extended in a uint64_t (C below is one of the two). Results are truncated
// to the type's width afterwards (wrapInt, or the interpreter's store). Floats are held as
// doubles that are exact values of their type.
#pragma once

#include "ir/Type.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string_view>
#include <type_traits>

namespace ww::ir::numerics {

// ---- Integers ---------------------------------------------------------------------------------

/// `v` truncated to the width of integer type `t` and re-extended by its signedness (i1: 0 or 1).
int64_t wrapInt(int64_t v, DType t);

/// Truncating division (C and Triton semantics). Division by zero is unspecified in PTX; the
/// interpreter defines x / 0 = all ones (what the unsigned division sequence gives) and constant
/// folding leaves it to the hardware (isDivisionByZero). INT_MIN / -1 wraps to INT_MIN.
template <typename C> constexpr C intDiv(C x, C y) {
  if (y == 0) return C(~uint64_t(0));
  if constexpr (std::is_signed_v<C>)
    if (y == -1) return C(uint64_t(0) - uint64_t(x));
  return x / y;
}
/// C remainder, with the sign of x. x % 0 = x (interpreter; not folded); INT_MIN % -1 = 0.
template <typename C> constexpr C intRem(C x, C y) {
  if (y == 0) return x;
  if constexpr (std::is_signed_v<C>)
    if (y == -1) return 0;
  return x % y;
}
/// Python's floor division (rounds toward minus infinity), the same zero / -1 rules as intDiv.
template <typename C> constexpr C intFloorDiv(C x, C y) {
  if (y == 0) return C(~uint64_t(0));
  if constexpr (std::is_signed_v<C>) {
    if (y == -1) return C(uint64_t(0) - uint64_t(x));
    C q = x / y;
    if (x % y != 0 && ((x < 0) != (y < 0))) --q;
    return q;
  }
  return x / y;
}
template <typename C> constexpr bool isDivisionByZero(C y) {
  return y == 0;
}

/// Shift amounts are read as unsigned and clamped to the width, as PTX's shl / shr do: x << n
/// for n >= bits is 0; x >> n is 0 (unsigned) or the sign fill (signed). A negative amount is a
/// huge unsigned one. Shr is arithmetic on signed types and logical on unsigned ones; Triton picks
/// by the left operand's type, which the specializer keeps as the op's type.
template <typename C> constexpr C shiftLeft(C x, C n, int bits) {
  if (uint64_t(n) >= uint64_t(bits)) return 0;
  return C(uint64_t(x) << uint64_t(n));
}
template <typename C> constexpr C shiftRight(C x, C n, int bits) {
  if (uint64_t(n) >= uint64_t(bits)) {
    if constexpr (std::is_signed_v<C>)
      return x < 0 ? C(-1) : C(0);
    else
      return 0;
  }
  return C(x >> n); // arithmetic on int64_t (sign-extended), logical on uint64_t
}

template <typename C> constexpr C intMax(C x, C y) {
  return std::max(x, y);
}
template <typename C> constexpr C intMin(C x, C y) {
  return std::min(x, y);
}

/// x ** y on integers, wrapping; a negative exponent gives 1 / x ** -y truncated (0 unless |x| =
/// 1).
template <typename C> constexpr C intPow(C x, C y) {
  if constexpr (std::is_signed_v<C>)
    if (y < 0) return x == 1 ? 1 : (x == C(-1) ? ((uint64_t(-y) & 1) ? C(-1) : C(1)) : 0);
  uint64_t result = 1, base = uint64_t(x);
  for (uint64_t e = uint64_t(y); e; e >>= 1, base *= base)
    if (e & 1) result *= base;
  return C(result);
}

/// The high `bits` bits of the 2*bits-bit unsigned product (tl.umulhi).
template <typename C> constexpr C umulhi(C x, C y, int bits) {
  uint64_t mask = bits == 64 ? ~uint64_t(0) : ((uint64_t(1) << bits) - 1);
  unsigned __int128 p = (unsigned __int128)(uint64_t(x) & mask) * (uint64_t(y) & mask);
  return C(uint64_t(p >> bits));
}

// ---- Floats -----------------------------------------------------------------------------------

/// tl.maximum / tl.minimum: a NaN operand yields the other one (propagate_nan = NONE, Triton's
/// default, PTX max.f32) unless `propagateNan` (PropagateNan.ALL, max.NaN.f32); -0 < +0 as in PTX.
template <typename C> C floatMax(C x, C y, bool propagateNan) {
  if (std::isnan(x)) return propagateNan ? x : y;
  if (std::isnan(y)) return propagateNan ? y : x;
  if (x == y) return std::signbit(x) ? y : x; // max(-0, +0) = +0, as PTX max does
  return x > y ? x : y;
}
template <typename C> C floatMin(C x, C y, bool propagateNan) {
  if (std::isnan(x)) return propagateNan ? x : y;
  if (std::isnan(y)) return propagateNan ? y : x;
  if (x == y) return std::signbit(x) ? x : y;
  return x < y ? x : y;
}

// ---- Comparisons ------------------------------------------------------------------------------

/// cmp's [pred]. Floats compare ordered except ne, which a NaN satisfies (PTX setp.neu).
enum class CmpPred { EQ, NE, LT, LE, GT, GE };
std::optional<CmpPred> parseCmpPred(std::string_view pred);
template <typename C> constexpr bool compare(CmpPred p, C x, C y) {
  switch (p) {
  case CmpPred::EQ:
    return x == y;
  case CmpPred::NE:
    return x != y;
  case CmpPred::LT:
    return x < y;
  case CmpPred::LE:
    return x <= y;
  case CmpPred::GT:
    return x > y;
  case CmpPred::GE:
    return x >= y;
  }
  return false;
}

// ---- Rounding and conversions -----------------------------------------------------------------

enum class Rounding { NearestEven, TowardZero };

/// Decodes an fp16 / bf16 / fp8 encoding (low bits of `bits`) to its exact value.
double decodeSmallFloat(DType t, uint32_t bits);
/// Encodes `x` as fp16 / bf16 / fp8 with one rounding. fp16 and bf16 overflow to infinity as
/// cvt.rn.f16.f32 does; fp8 saturates to the largest finite value (cvt.rn.satfinite, what Triton
/// emits on sm_90; the software conversions of fp8e4b15 / fp8e4b8 / fp8e5b16 do the same); NaN
/// stays NaN (fp8e4b8 / fp8e5b16: 0x80, and a zero is +0).
uint32_t encodeSmallFloat(DType t, double x, Rounding r = Rounding::NearestEven);

/// tlx.stoch_round: fp32 -> fp16 / bf16 / fp8 (e4m3, e5m2) with the stochastic rounding of PTX's
/// cvt.rs.satfinite (sm_100a), deterministic given the random bits. |x| is split at the
/// destination's quantum (the ulp of its binade, or the subnormal step) into kept units and a
/// discarded fraction; the low stochasticRoundingBits(t) bits of `rbits` are added to the top that
/// many bits of the fraction, and a carry out rounds the magnitude away from zero, else it is
/// truncated: a value rounds up with probability (its top fraction bits) / 2^bits, and a value the
/// destination holds exactly never moves. fp16 uses 13 random bits (exactly the bits an fp16
/// normal drops from fp32), bf16 16 (exactly the bits it drops), fp8 16 (the top 16 of the 20 or
/// 21 it drops; lower ones are ignored). Satfinite: a result past the largest finite value, and
/// an infinity, is that value with the sign; NaN gives the format's NaN; zeros keep their sign.
/// Only F16, BF16, F8E4M3 and F8E5M2 are destinations.
int stochasticRoundingBits(DType t);
uint32_t encodeStochasticRound(DType t, float x, uint32_t rbits);

inline float halfToFloat(uint16_t h) {
  return static_cast<float>(decodeSmallFloat(DType::F16, h));
}
inline uint16_t floatToHalf(float f) {
  return static_cast<uint16_t>(encodeSmallFloat(DType::F16, f));
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

/// The value of float type `t` nearest `x` (one rounding by `r`): the result of an fp16 / bf16 /
/// fp32 op computed exactly (or in a format at least 2p+2 bits wide, as the codegen's fp32 for
/// fp16 and bf16 is) and rounded once.
double roundToType(double x, DType t, Rounding r = Rounding::NearestEven);

/// Float -> float cast as the codegen emits it: widening is exact; fp64 -> fp16 / bf16 / fp8
/// rounds to fp32 first (cvt.f32.f64, then cvt.f16.f32), everything else rounds once.
double castFloatToFloat(double x, DType from, DType to, Rounding r = Rounding::NearestEven);
/// The same cast to fp16 / bf16 / fp8 `to`, as the encoding (the interpreter stores these).
uint32_t castFloatToSmallFloat(double x, DType from, DType to, Rounding r = Rounding::NearestEven);
/// Integer -> float cast: one rounding to fp64 or fp32 (cvt.rn.f32.s32 ...); narrower floats
/// round to fp32 first, as the codegen converts through it. `v` is widened by the source type.
double castIntToFloat(int64_t v, DType from, DType to, Rounding r = Rounding::NearestEven);

/// Float -> integer as cvt.rzi does: truncation toward zero, saturation to the destination range,
/// NaN -> 0 (0x8000000000000000 for 64-bit destinations, as the GPU). `t` is any integer DType
/// but i1, which is x != 0 (the codegen's setp.neu).
int64_t floatToIntSaturating(double x, DType t);
uint64_t floatToUintSaturating(double x, DType t);
/// Either of the above by `t`'s signedness, as an int64_t bit pattern; i1 gives x != 0.
int64_t castFloatToInt(double x, DType t);

} // namespace ww::ir::numerics
