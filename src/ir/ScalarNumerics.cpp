// Out-of-line parts of the scalar numerics contract (ScalarNumerics.h): small-float encodings,
// roundings and conversions.
#include "ir/ScalarNumerics.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <stdexcept>

namespace ww::ir::numerics {

namespace {

struct SmallFloatFormat {
  int expBits;
  int mantBits;
  bool hasInf;       // e4m3 (the "fn" variant) has no infinity
  bool satFinite;    // overflow clamps to the largest finite value instead of infinity
  uint32_t nanBits;  // the canonical NaN the GPU produces
  int biasValue;     // exponent bias
  bool fnuz = false; // "fnuz" formats: 0x80 is the one NaN, no -0, the all-ones exponent finite
  int bias() const { return biasValue; }
  int totalBits() const { return 1 + expBits + mantBits; }
  uint32_t infMagnitude() const { return ((1u << expBits) - 1) << mantBits; }
  uint32_t maxFiniteMagnitude() const {
    if (hasInf) return infMagnitude() - 1;
    if (fnuz) return (1u << (expBits + mantBits)) - 1;
    // e4m3fn: the all-ones exponent is finite except for the all-ones mantissa (NaN).
    return (((1u << expBits) - 1) << mantBits) | ((1u << mantBits) - 2);
  }
};

SmallFloatFormat formatOf(DType t) {
  switch (t) {
  case DType::F16:
    return {5, 10, true, false, 0x7FFF, 15};
  case DType::BF16:
    return {8, 7, true, false, 0x7FFF, 127};
  case DType::F8E5M2:
    return {5, 2, true, true, 0x7F, 15};
  case DType::F8E4M3:
    return {4, 3, false, true, 0x7F, 7};
  // Triton's other fp8 formats convert in software on every target, saturating as the two above.
  case DType::F8E4B15:
    return {4, 3, false, true, 0x7F, 15};
  case DType::F8E4B8:
    return {4, 3, false, true, 0x80, 8, true};
  case DType::F8E5B16:
    return {5, 2, false, true, 0x80, 16, true};
  default:
    throw std::logic_error("not a small float type");
  }
}

/// The magnitude bits of `units` quanta of 2^quantumExp (quantumExp the binade's or the
/// subnormal one, units > 0, at most one carry past the binade), or nullopt past the largest
/// finite value.
std::optional<uint32_t> magnitudeOf(const SmallFloatFormat& f, uint64_t units, int quantumExp) {
  if (units >= (uint64_t(1) << (f.mantBits + 1))) { // rounding carried into the next binade
    units >>= 1;
    ++quantumExp;
  }
  uint32_t magnitude;
  if (units < (uint64_t(1) << f.mantBits)) {
    magnitude = static_cast<uint32_t>(units); // subnormal
  } else {
    int64_t expField = int64_t(quantumExp) + f.mantBits + f.bias();
    if (expField >= (int64_t(1) << f.expBits)) return std::nullopt;
    magnitude = static_cast<uint32_t>((expField << f.mantBits) |
                                      int64_t(units - (uint64_t(1) << f.mantBits)));
  }
  if (magnitude > f.maxFiniteMagnitude()) return std::nullopt;
  return magnitude;
}

/// The exponent of the quantum (the last kept place) of finite nonzero `a` in format `f`.
int quantumExponent(const SmallFloatFormat& f, double a) {
  int e;
  std::frexp(a, &e); // a = m * 2^e with m in [0.5, 1)
  return std::max(e - 1, 1 - f.bias()) - f.mantBits;
}

} // namespace

double decodeSmallFloat(DType t, uint32_t bits) {
  SmallFloatFormat f = formatOf(t);
  const uint32_t mantMask = (1u << f.mantBits) - 1;
  const uint32_t expMax = (1u << f.expBits) - 1;
  bool negative = (bits >> (f.totalBits() - 1)) & 1;
  uint32_t expField = (bits >> f.mantBits) & expMax;
  uint32_t mant = bits & mantMask;
  double v;
  if (f.fnuz && bits == (1u << (f.totalBits() - 1)))
    return std::numeric_limits<double>::quiet_NaN();
  if (f.hasInf && expField == expMax) {
    v = mant ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  } else if (!f.hasInf && !f.fnuz && expField == expMax && mant == mantMask) {
    v = std::numeric_limits<double>::quiet_NaN();
  } else if (expField == 0) {
    v = std::ldexp(double(mant), 1 - f.bias() - f.mantBits);
  } else {
    v = std::ldexp(double(mant | (1u << f.mantBits)), int(expField) - f.bias() - f.mantBits);
  }
  return negative ? -v : v;
}

uint32_t encodeSmallFloat(DType t, double x, Rounding r) {
  SmallFloatFormat f = formatOf(t);
  if (std::isnan(x)) return f.nanBits;
  // A fnuz format has no -0 (its sign bit on a zero magnitude is the NaN): zeros are +0.
  const uint32_t sign = std::signbit(x) ? 1u << (f.totalBits() - 1) : 0;
  const uint32_t zero = f.fnuz ? 0 : sign;
  double a = std::fabs(x);
  auto overflow = [&]() -> uint32_t {
    if (f.satFinite || r == Rounding::TowardZero || !f.hasInf) return sign | f.maxFiniteMagnitude();
    return sign | f.infMagnitude();
  };
  if (std::isinf(a)) return (f.hasInf && !f.satFinite) ? (sign | f.infMagnitude()) : overflow();
  if (a == 0) return zero;
  const int quantumExp = quantumExponent(f, a);
  double q = std::ldexp(a, -quantumExp);
  double rounded = r == Rounding::NearestEven ? std::nearbyint(q) : std::trunc(q);
  uint64_t units = static_cast<uint64_t>(rounded);
  if (units == 0) return zero;
  std::optional<uint32_t> magnitude = magnitudeOf(f, units, quantumExp);
  return magnitude ? sign | *magnitude : overflow();
}

int stochasticRoundingBits(DType t) {
  switch (t) {
  case DType::F16:
    return 13;
  case DType::BF16:
  case DType::F8E4M3:
  case DType::F8E5M2:
    return 16;
  default:
    throw std::logic_error("stochastic rounding: not a cvt.rs destination type");
  }
}

uint32_t encodeStochasticRound(DType t, float x, uint32_t rbits) {
  const int bits = stochasticRoundingBits(t);
  SmallFloatFormat f = formatOf(t);
  if (std::isnan(x)) return f.nanBits;
  const uint32_t sign = std::signbit(x) ? 1u << (f.totalBits() - 1) : 0;
  const uint32_t largest = sign | f.maxFiniteMagnitude();
  double a = std::fabs(double(x));
  if (std::isinf(a)) return largest;
  if (a == 0) return sign;
  // a = (units + fraction) quanta, both exact in a double: x has 24 significant bits.
  const int quantumExp = quantumExponent(f, a);
  double q = std::ldexp(a, -quantumExp);
  double units = std::floor(q);
  uint64_t top = static_cast<uint64_t>(std::ldexp(q - units, bits)); // the fraction's top bits
  uint64_t random = rbits & ((uint64_t(1) << bits) - 1);
  uint64_t rounded = static_cast<uint64_t>(units) + ((top + random) >> bits);
  if (rounded == 0) return sign;
  std::optional<uint32_t> magnitude = magnitudeOf(f, rounded, quantumExp);
  return magnitude ? sign | *magnitude : largest;
}

uint16_t floatToBf16(float x) {
  if (std::isnan(x)) return 0x7FFF;
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  // Round to nearest even on the 16 dropped bits; a carry into the exponent is the right answer.
  bits += 0x7FFF + ((bits >> 16) & 1);
  return static_cast<uint16_t>(bits >> 16);
}

float roundToFloat(double x, Rounding r) {
  float f = static_cast<float>(x);
  if (r == Rounding::TowardZero && !std::isinf(x) && std::fabs(double(f)) > std::fabs(x))
    f = std::nextafter(f, 0.0f);
  return f;
}

float truncateToTf32(float x) {
  if (std::isnan(x)) return x;
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  bits &= 0xFFFFE000u;
  std::memcpy(&x, &bits, 4);
  return x;
}

// NaN converts as the GPU's cvt does: to 0 for 32 bits and fewer, to 0x8000000000000000 for 64
// bits (measured on the H200: cvt.rni.s64.f32 of NaN; CUDA's __float2ll_* / __float2ull_* say
// the same).
int64_t floatToIntSaturating(double x, DType t) {
  int bits = bitWidth(t);
  if (std::isnan(x)) return bits == 64 ? std::numeric_limits<int64_t>::min() : 0;
  double lo = -std::ldexp(1.0, bits - 1);
  double hiExclusive = std::ldexp(1.0, bits - 1);
  x = std::trunc(x);
  if (x <= lo) return bits == 64 ? std::numeric_limits<int64_t>::min() : int64_t(lo);
  if (x >= hiExclusive)
    return bits == 64 ? std::numeric_limits<int64_t>::max() : int64_t(hiExclusive) - 1;
  return static_cast<int64_t>(x);
}

uint64_t floatToUintSaturating(double x, DType t) {
  int bits = bitWidth(t);
  if (std::isnan(x)) return bits == 64 ? uint64_t(1) << 63 : 0;
  double hiExclusive = std::ldexp(1.0, bits);
  x = std::trunc(x);
  if (x <= 0) return 0;
  if (x >= hiExclusive)
    return bits == 64 ? std::numeric_limits<uint64_t>::max() : (uint64_t(1) << bits) - 1;
  return static_cast<uint64_t>(x);
}

int64_t wrapInt(int64_t v, DType t) {
  int bits = bitWidth(t);
  if (bits >= 64) return v;
  uint64_t mask = (uint64_t(1) << bits) - 1;
  uint64_t u = static_cast<uint64_t>(v) & mask;
  if (t != DType::I1 && isSigned(t) && (u >> (bits - 1)) & 1) u |= ~mask;
  return static_cast<int64_t>(u);
}

std::optional<CmpPred> parseCmpPred(std::string_view p) {
  if (p == "eq") return CmpPred::EQ;
  if (p == "ne") return CmpPred::NE;
  if (p == "lt") return CmpPred::LT;
  if (p == "le") return CmpPred::LE;
  if (p == "gt") return CmpPred::GT;
  if (p == "ge") return CmpPred::GE;
  return std::nullopt;
}

double roundToType(double x, DType t, Rounding r) {
  switch (t) {
  case DType::F64:
    return x;
  case DType::F32:
    return roundToFloat(x, r);
  case DType::F16:
  case DType::BF16:
  case DType::F8E4M3:
  case DType::F8E5M2:
  case DType::F8E4B15:
  case DType::F8E4B8:
  case DType::F8E5B16:
    return decodeSmallFloat(t, encodeSmallFloat(t, x, r));
  default:
    throw std::logic_error("roundToType: not a float type");
  }
}

uint32_t castFloatToSmallFloat(double x, DType from, DType to, Rounding r) {
  if (from == DType::F64) x = roundToFloat(x, r); // the codegen narrows fp64 through fp32
  return encodeSmallFloat(to, x, r);
}

double castFloatToFloat(double x, DType from, DType to, Rounding r) {
  if (to == DType::F64 || to == DType::F32) return roundToType(x, to, r);
  return decodeSmallFloat(to, castFloatToSmallFloat(x, from, to, r));
}

double castIntToFloat(int64_t v, DType from, DType to, Rounding r) {
  bool uns = !isSigned(from) || from == DType::I1;
  if (to == DType::F64) return uns ? static_cast<double>(uint64_t(v)) : static_cast<double>(v);
  float f = uns ? static_cast<float>(uint64_t(v)) : static_cast<float>(v); // cvt.rn.f32.s64 ...
  return to == DType::F32 ? f : roundToType(f, to, r);
}

int64_t castFloatToInt(double x, DType t) {
  if (t == DType::I1) return x != 0;
  if (isSigned(t)) return floatToIntSaturating(x, t);
  return static_cast<int64_t>(floatToUintSaturating(x, t));
}

} // namespace ww::ir::numerics
