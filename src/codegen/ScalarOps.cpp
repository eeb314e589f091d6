#include "codegen/ScalarOps.h"
#include "ir/OpAttrs.h"
#include "ir/OpTraits.h"
#include "support/MathExtras.h"

#include <bit>
#include <cmath>
#include <limits>
#include <optional>
#include <stdexcept>

namespace ww::codegen {

using ir::DType;
using ir::OpCode;

namespace {

constexpr double kLog2e = 1.4426950408889634;
constexpr double kLn2 = 0.6931471805599453;

bool isLowFloat(DType t) {
  return t == DType::F16 || t == DType::BF16 || ir::isFp8(t);
}
/// The fp8 types with conversion instructions (sm_89+).
bool isHardwareFp8(DType t) {
  return t == DType::F8E4M3 || t == DType::F8E5M2;
}
/// fp8e4b15 / fp8e4b8 / fp8e5b16: no target converts them, so integer ops do (as Triton's
/// interpreter and its old pre-Hopper lowering did), with ScalarNumerics' encodings.
bool isSoftwareFp8(DType t) {
  return ir::isFp8(t) && !isHardwareFp8(t);
}
bool isByte(DType t) {
  return t == DType::I8 || t == DType::U8;
}

/// Width of the register holding an integer: 8-bit integers live in 16-bit registers.
int regBits(DType t) {
  if (t == DType::I1) return 1;
  return isByte(t) ? 16 : ir::bitWidth(t);
}

/// `prefix` followed by a bit count: s32, b16, ...
std::string sized(char prefix, int bits) {
  std::string s(1, prefix);
  s += std::to_string(bits);
  return s;
}

std::string intType(DType t, bool forceSigned = false) {
  return sized(ir::isSigned(t) || forceSigned ? 's' : 'u', regBits(t));
}

/// Keeps 8-bit integers sign- or zero-extended in their 16-bit register, so that comparisons,
/// division and shifts see the right value.
std::string normalizeByte(ScalarContext& cx, const std::string& x, DType t) {
  if (t == DType::I8)
    return cx.b.pure("cvt.s16.s8", RegClass::B16, {cx.b.materialize(x, RegClass::B16)});
  if (t == DType::U8) return cx.b.pure("and.b16", RegClass::B16, {x, "255"});
  return x;
}

[[noreturn]] void unsupported(ScalarContext& cx, const ir::Op& op, DType t,
                              const std::string& accepted) {
  raiseError(cx.loc, std::string("'") + op.name() + "' is not supported on " +
                         std::string(ir::tlName(t)) + " values; " + accepted);
}

void requireFp8Target(ScalarContext& cx, DType t) {
  if (cx.target == Target::SM80)
    raiseError(cx.loc, "conversions of " + std::string(ir::tlName(t)) +
                           " need sm_89 or newer (cvt.*.e4m3x2/e5m2x2); compile for sm_90a or "
                           "sm_100a, or use float16/bfloat16 on sm_80");
}

std::string toF32(ScalarContext& cx, const std::string& x, DType from) {
  return emitCast(cx, x, from, DType::F32);
}

std::string fromF32(ScalarContext& cx, const std::string& x, DType to) {
  return emitCast(cx, x, DType::F32, to);
}

std::string f32(ScalarContext& cx, const char* opcode, const std::vector<std::string>& args) {
  return cx.b.pure(opcode, RegClass::F32, args);
}

std::string b32(ScalarContext& cx, const char* opcode, const std::vector<std::string>& args) {
  return cx.b.pure(opcode, RegClass::B32, args);
}

/// A software fp8 byte (in its 16-bit register) to f32, exactly: the 7 magnitude bits shifted to
/// the top of an f32 mantissa read as an f32 (subnormal for exponent 0) and scaled by 2^(127 -
/// bias), which is exact for normals and subnormals alike; then the sign and the NaN encodings.
std::string softwareFp8ToF32(ScalarContext& cx, const std::string& x, DType t) {
  const int m = ir::mantissaBits(t), bias = ir::exponentBias(t);
  const bool fnuz = t != DType::F8E4B15;
  std::string w = b32(cx, "cvt.u32.u16", {cx.b.materialize(x, RegClass::B16)});
  std::string mag = b32(cx, "and.b32", {w, "127"});
  std::string f = f32(cx, "mov.b32", {b32(cx, "shl.b32", {mag, immInt(23 - m)})});
  std::string v = f32(cx, "mul.rn.f32", {f, immF32(std::ldexp(1.0f, 127 - bias))});
  std::string sign = b32(cx, "shl.b32", {b32(cx, "and.b32", {w, "128"}), "24"});
  std::string signedV = f32(cx, "mov.b32", {b32(cx, "or.b32", {b32(cx, "mov.b32", {v}), sign})});
  // fnuz: 0x80 is the NaN; e4b15: 0x7F and 0xFF.
  std::string nan =
      cx.b.pure("setp.eq.u32", RegClass::Pred, {fnuz ? w : mag, fnuz ? "128" : "127"});
  return f32(cx, "selp.f32", {immF32(std::numeric_limits<float>::quiet_NaN()), signedV, nan});
}

/// f32 to a software fp8 byte with one rounding (to nearest even, or toward zero), saturating at
/// the largest finite value as cvt.rn.satfinite does for e4m3 / e5m2; NaN to the format's NaN.
/// The rounding works on the f32's integer mantissa (hidden bit included), shifted right by the
/// mantissa bits fp8 drops plus, below fp8's normal range, the exponent deficit.
std::string f32ToSoftwareFp8(ScalarContext& cx, const std::string& x, DType t, bool towardZero) {
  const int m = ir::mantissaBits(t), bias = ir::exponentBias(t);
  const bool fnuz = t != DType::F8E4B15;
  const uint32_t maxMag = fnuz ? 0x7Fu : 0x7Eu;
  const float maxFinite =
      std::ldexp(float((maxMag & ((1u << m) - 1)) | (1u << m)), int(maxMag >> m) - bias - m);
  std::string xf = cx.b.materialize(x, RegClass::F32);
  std::string bits = b32(cx, "mov.b32", {xf});
  std::string sign = b32(cx, "shr.u32", {b32(cx, "and.b32", {bits, "0x80000000"}), "24"});
  // |x| clamped to the largest finite value (min.f32 of a NaN gives the bound; NaN is set last).
  std::string a = f32(cx, "min.f32", {f32(cx, "abs.f32", {xf}), immF32(maxFinite)});
  std::string ua = b32(cx, "mov.b32", {a});
  std::string ea = b32(cx, "shr.u32", {ua, "23"});
  std::string hidden = b32(
      cx, "selp.b32", {immInt(0x800000), "0", cx.b.pure("setp.ne.u32", RegClass::Pred, {ea, "0"})});
  std::string mant = b32(cx, "or.b32", {b32(cx, "and.b32", {ua, immInt(0x7FFFFF)}), hidden});
  std::string e = b32(cx, "add.s32", {ea, immInt(bias - 127)}); // fp8's biased exponent
  std::string deficit = b32(cx, "max.s32", {b32(cx, "sub.s32", {"1", e}), "0"});
  std::string shift = b32(cx, "min.u32", {b32(cx, "add.s32", {deficit, immInt(23 - m)}), "31"});
  std::string rounded;
  if (towardZero) {
    rounded = b32(cx, "shr.u32", {mant, shift});
  } else {
    std::string lsb = b32(cx, "and.b32", {b32(cx, "shr.u32", {mant, shift}), "1"});
    std::string half = b32(cx, "shl.b32", {"1", b32(cx, "sub.s32", {shift, "1"})});
    std::string biased = b32(cx, "add.s32", {b32(cx, "add.s32", {mant, half}), lsb});
    rounded = b32(cx, "shr.u32", {b32(cx, "sub.s32", {biased, "1"}), shift});
  }
  // Normal: (e - 1) << m plus the rounded significand (its hidden bit carries into the exponent).
  std::string expPart =
      b32(cx, "shl.b32", {b32(cx, "sub.s32", {b32(cx, "max.s32", {e, "1"}), "1"}), immInt(m)});
  std::string r = b32(cx, "add.s32", {expPart, rounded});
  if (fnuz) // no -0: a zero result keeps no sign (0x80 is the NaN)
    sign = b32(cx, "selp.b32", {sign, "0", cx.b.pure("setp.ne.u32", RegClass::Pred, {r, "0"})});
  r = b32(cx, "or.b32", {r, sign});
  std::string isNan = cx.b.pure("setp.nan.f32", RegClass::Pred, {xf, xf});
  r = b32(cx, "selp.b32", {fnuz ? "128" : "127", r, isNan});
  return cx.b.pure("cvt.u16.u32", RegClass::B16, {r});
}

// exp through ex2 keeps subnormal results (no .ftz), as Triton lowers tl.exp; tl.exp2 alone is
// .ftz there, and here.
std::string ex2Scaled(ScalarContext& cx, const std::string& x, double scale) {
  std::string y = f32(cx, "mul.f32", {x, immF32(static_cast<float>(scale))});
  return f32(cx, "ex2.approx.f32", {y});
}

/// erf(x) for f32: Abramowitz-Stegun 7.1.26 rational approximation (absolute error < 1.5e-7),
/// applied to |x| and given x's sign.
std::string erfF32(ScalarContext& cx, const std::string& x) {
  static const float coeffs[] = {1.061405429f, -1.453152027f, 1.421413741f, -0.284496736f,
                                 0.254829592f};
  std::string ax = f32(cx, "abs.f32", {x});
  std::string den = f32(cx, "fma.rn.f32", {ax, immF32(0.3275911f), immF32(1.0f)});
  std::string t = f32(cx, "rcp.rn.f32", {den});
  std::string poly = immF32(coeffs[0]);
  poly = cx.b.materialize(poly, RegClass::F32);
  for (int i = 1; i < 5; ++i) poly = f32(cx, "fma.rn.f32", {poly, t, immF32(coeffs[i])});
  poly = f32(cx, "mul.f32", {poly, t});
  std::string sq = f32(cx, "mul.f32", {ax, ax});
  std::string e = ex2Scaled(cx, sq, -kLog2e);
  std::string y = f32(cx, "fma.rn.f32", {f32(cx, "neg.f32", {poly}), e, immF32(1.0f)});
  return f32(cx, "copysign.f32", {x, y});
}

std::string floatMath(ScalarContext& cx, const ir::Op& op, const std::string& x, DType t) {
  if (t == DType::F64) {
    switch (op.code()) {
    case OpCode::Sqrt:
      return cx.b.pure("sqrt.rn.f64", RegClass::F64, {x});
    case OpCode::Rsqrt:
      return cx.b.pure("rsqrt.approx.f64", RegClass::F64, {x});
    case OpCode::Abs:
      return cx.b.pure("abs.f64", RegClass::F64, {x});
    case OpCode::Floor:
      return cx.b.pure("cvt.rmi.f64.f64", RegClass::F64, {x});
    case OpCode::Ceil:
      return cx.b.pure("cvt.rpi.f64.f64", RegClass::F64, {x});
    default:
      unsupported(cx, op, t, "cast to float32 first (fp64 has sqrt, rsqrt, abs, floor, ceil)");
    }
  }
  if (isLowFloat(t)) return fromF32(cx, floatMath(cx, op, toF32(cx, x, t), DType::F32), t);
  if (t != DType::F32) unsupported(cx, op, t, "it takes floating-point values");
  switch (op.code()) {
  case OpCode::Exp:
    return ex2Scaled(cx, x, kLog2e);
  case OpCode::Exp2:
    return f32(cx, cx.reflectFtz ? "ex2.approx.ftz.f32" : "ex2.approx.f32", {x});
  case OpCode::Log:
    return f32(cx, "mul.f32", {f32(cx, "lg2.approx.f32", {x}), immF32(kLn2)});
  case OpCode::Log2:
    return f32(cx, "lg2.approx.f32", {x});
  case OpCode::Sqrt:
    return f32(cx, ir::attr::Sqrt::approx(op) ? "sqrt.approx.f32" : "sqrt.rn.f32", {x});
  case OpCode::Rsqrt:
    return f32(cx, "rsqrt.approx.f32", {x});
  case OpCode::Abs:
    return f32(cx, "abs.f32", {x});
  case OpCode::Sin:
    return f32(cx, "sin.approx.f32", {x});
  case OpCode::Cos:
    return f32(cx, "cos.approx.f32", {x});
  case OpCode::Tanh:
    return f32(cx, "tanh.approx.f32", {x});
  case OpCode::Erf:
    return erfF32(cx, x);
  case OpCode::Floor:
    return f32(cx, "cvt.rmi.f32.f32", {x});
  case OpCode::Ceil:
    return f32(cx, "cvt.rpi.f32.f32", {x});
  case OpCode::Sigmoid: {
    std::string e = ex2Scaled(cx, x, -kLog2e);
    return f32(cx, "rcp.rn.f32", {f32(cx, "add.f32", {e, immF32(1.0f)})});
  }
  default:
    throw std::logic_error("floatMath: not a math op");
  }
}

std::string predBinary(ScalarContext& cx, const ir::Op& op, const std::string& a,
                       const std::string& b) {
  std::string pa = cx.b.materialize(a, RegClass::Pred), pb = cx.b.materialize(b, RegClass::Pred);
  switch (op.code()) {
  case OpCode::And:
  case OpCode::Mul:
  case OpCode::Min:
    return cx.b.pure("and.pred", RegClass::Pred, {pa, pb});
  case OpCode::Or:
  case OpCode::Max:
    return cx.b.pure("or.pred", RegClass::Pred, {pa, pb});
  case OpCode::Xor:
  case OpCode::Add:
  case OpCode::Sub:
    return cx.b.pure("xor.pred", RegClass::Pred, {pa, pb});
  default:
    unsupported(cx, op, DType::I1, "booleans take and, or, xor, min, max");
  }
}

std::string intBinary(ScalarContext& cx, const ir::Op& op, const std::string& a,
                      const std::string& b, DType t) {
  RegClass rc = regClassOf(t);
  std::string it = intType(t), bits = sized('b', regBits(t));
  auto shiftAmount = [&](const std::string& s) -> std::string {
    if (isImmediate(s)) return s;
    if (regBits(t) == 32) return s;
    // shl / shr take a 32-bit amount and clamp it to the width (ir/ScalarNumerics.h): clamp a
    // 64-bit amount first, or 2^32 would shift by 0.
    std::string n = regBits(t) == 64 ? cx.b.pure("min.u64", RegClass::B64, {s, "64"}) : s;
    return cx.b.pure("cvt.u32." + std::string(regBits(t) == 64 ? "u64" : "u16"), RegClass::B32,
                     {n});
  };
  // Division by a power-of-two immediate becomes shifts and masks: ptxas expands div.s32 by an
  // immediate 2 on the uniform datapath into a full reciprocal-based division (about 25
  // instructions), which stage/phase arithmetic in pipelined loops pays every iteration.
  int log2Divisor = -1;
  if (regBits(t) >= 32 && isImmediate(b) &&
      b.find_first_not_of("0123456789") == std::string::npos && b.size() < 19) {
    int64_t d = std::stoll(b);
    if (d > 1 && (d & (d - 1)) == 0) log2Divisor = std::countr_zero(static_cast<uint64_t>(d));
  }
  if (log2Divisor > 0 &&
      (op.code() == OpCode::Div || op.code() == OpCode::Rem || op.code() == OpCode::FloorDiv)) {
    std::string x = cx.b.materialize(a, rc);
    std::string k = immInt(log2Divisor);
    std::string low = immInt((int64_t(1) << log2Divisor) - 1);
    std::string width = std::to_string(regBits(t));
    if (!ir::isSigned(t) || op.code() == OpCode::FloorDiv) {
      // Unsigned, or flooring: the arithmetic shift rounds toward minus infinity.
      if (op.code() == OpCode::Rem) return cx.b.pure("and." + bits, rc, {x, low});
      return cx.b.pure((ir::isSigned(t) ? "shr.s" : "shr.u") + width, rc, {x, k});
    }
    // Truncating signed division: negative dividends get 2^k - 1 added before the shift.
    std::string sign = cx.b.pure("shr.s" + width, rc, {x, immInt(regBits(t) - 1)});
    std::string bias = cx.b.pure("shr.u" + width, rc, {sign, immInt(regBits(t) - log2Divisor)});
    std::string biased = cx.b.pure("add." + it, rc, {x, bias});
    if (op.code() == OpCode::Div) return cx.b.pure("shr.s" + width, rc, {biased, k});
    std::string rounded =
        cx.b.pure("and." + bits, rc, {biased, immInt(~((int64_t(1) << log2Divisor) - 1))});
    return cx.b.pure("sub." + it, rc, {x, rounded});
  }
  // Any other positive 32-bit immediate divides through a multiply-high (support/MathExtras.h):
  // ptxas expands div / rem by an immediate 3 into I2F, MUFU.RCP and an IMAD chain, which a
  // stage index `k % NUM_STAGES` pays on the critical path of every pipelined iteration.
  int64_t divisor = 0;
  if (regBits(t) == 32 && isImmediate(b) &&
      b.find_first_not_of("0123456789") == std::string::npos && b.size() < 11)
    divisor = std::stoll(b);
  if (divisor > 2 && !isPowerOf2(divisor) && divisor < (ir::isSigned(t) ? 1ll << 31 : 1ll << 32) &&
      (op.code() == OpCode::Div || op.code() == OpCode::Rem || op.code() == OpCode::FloorDiv)) {
    std::string x = cx.b.materialize(a, rc);
    std::string q;
    if (ir::isSigned(t)) {
      DivisionMagic m = signedDivisionMagic(static_cast<uint32_t>(divisor));
      q = cx.b.pure("mul.hi.s32", rc, {x, immInt(static_cast<int32_t>(m.multiplier))});
      if (static_cast<int32_t>(m.multiplier) < 0) q = cx.b.pure("add.s32", rc, {q, x});
      if (m.shift > 0) q = cx.b.pure("shr.s32", rc, {q, immInt(m.shift)});
      // Truncation toward zero: a negative dividend's floored quotient moves up by one.
      q = cx.b.pure("add.s32", rc, {q, cx.b.pure("shr.u32", rc, {x, "31"})});
    } else {
      DivisionMagic m = unsignedDivisionMagic(static_cast<uint32_t>(divisor));
      std::string hi = cx.b.pure("mul.hi.u32", rc, {x, immInt(m.multiplier)});
      std::string half = cx.b.pure("shr.u32", rc, {cx.b.pure("sub.s32", rc, {x, hi}), "1"});
      q = cx.b.pure("add.s32", rc, {hi, half});
      if (m.shift > 0) q = cx.b.pure("shr.u32", rc, {q, immInt(m.shift)});
    }
    if (op.code() == OpCode::Div || (op.code() == OpCode::FloorDiv && !ir::isSigned(t))) return q;
    std::string rem = cx.b.pure("mad.lo.s32", rc, {q, immInt(-divisor), x});
    if (op.code() == OpCode::Rem) return rem;
    // Python floors: with a positive divisor, a negative remainder steps the quotient down.
    std::string neg = cx.b.pure("setp.lt.s32", RegClass::Pred, {rem, "0"});
    return cx.b.pure("selp.b32", rc, {cx.b.pure("sub.s32", rc, {q, "1"}), q, neg});
  }
  std::string r;
  switch (op.code()) {
  case OpCode::Add:
    r = cx.b.pure("add." + it, rc, {a, b});
    break;
  case OpCode::Sub:
    r = cx.b.pure("sub." + it, rc, {a, b});
    break;
  case OpCode::Mul:
    r = cx.b.pure("mul.lo." + it, rc, {a, b});
    break;
  case OpCode::Div:
    r = cx.b.pure("div." + it, rc, {a, b});
    break;
  case OpCode::Rem:
    r = cx.b.pure("rem." + it, rc, {a, b});
    break;
  case OpCode::FloorDiv: {
    r = cx.b.pure("div." + it, rc, {a, b});
    if (ir::isSigned(t)) {
      // Python floors: step down when the remainder is non-zero and its sign differs from b's.
      std::string rem = cx.b.pure("rem." + it, rc, {a, b});
      std::string signs = cx.b.pure("xor." + bits, rc, {rem, b});
      std::string nonzero = cx.b.pure("setp.ne." + it, RegClass::Pred, {rem, "0"});
      std::string neg = cx.b.pure("setp.lt." + it, RegClass::Pred, {signs, "0"});
      std::string adjust = cx.b.pure("and.pred", RegClass::Pred, {nonzero, neg});
      std::string down = cx.b.pure("sub." + it, rc, {r, "1"});
      r = cx.b.pure("selp." + bits, rc, {down, r, adjust});
    }
    break;
  }
  case OpCode::And:
    r = cx.b.pure("and." + bits, rc, {a, b});
    break;
  case OpCode::Or:
    r = cx.b.pure("or." + bits, rc, {a, b});
    break;
  case OpCode::Xor:
    r = cx.b.pure("xor." + bits, rc, {a, b});
    break;
  case OpCode::Shl:
    r = cx.b.pure("shl." + bits, rc, {a, shiftAmount(b)});
    break;
  case OpCode::Shr:
    r = cx.b.pure((ir::isSigned(t) ? "shr.s" : "shr.u") + std::to_string(regBits(t)), rc,
                  {a, shiftAmount(b)});
    break;
  case OpCode::Max:
    r = cx.b.pure("max." + it, rc, {a, b});
    break;
  case OpCode::Min:
    r = cx.b.pure("min." + it, rc, {a, b});
    break;
  default:
    unsupported(cx, op, t, "integers take + - * / % // & | ^ << >> min max");
  }
  return normalizeByte(cx, r, t);
}

/// The reciprocal of a float immediate (0f... / 0d...) that is a power of two whose reciprocal
/// is a normal number too, else nothing: x / 2^k and x * 2^-k round the same exact value, so
/// the multiply (one instruction) gives div.rn's result bit for bit (a row mean's / N).
std::optional<std::string> exactReciprocal(const std::string& imm) {
  bool f64 = imm.size() == 18 && imm.compare(0, 2, "0d") == 0;
  if (!f64 && !(imm.size() == 10 && imm.compare(0, 2, "0f") == 0)) return std::nullopt;
  uint64_t bits = std::stoull(imm.substr(2), nullptr, 16);
  int mantissaBits = f64 ? 52 : 23, signBit = f64 ? 63 : 31;
  // 2^(e - bias) has the reciprocal 2^(bias - e), whose biased exponent is 2 * bias - e: a
  // normal number for e from 1 to 2 * bias - 1.
  uint64_t twiceBias = f64 ? 2046 : 254;
  uint64_t exponent = (bits >> mantissaBits) & (twiceBias + 1);
  if ((bits & ((uint64_t(1) << mantissaBits) - 1)) != 0 || exponent < 1 || exponent >= twiceBias)
    return std::nullopt;
  uint64_t reciprocal = (bits >> signBit) << signBit | (twiceBias - exponent) << mantissaBits;
  if (f64) return immF64(std::bit_cast<double>(reciprocal));
  return immF32(std::bit_cast<float>(static_cast<uint32_t>(reciprocal)));
}

std::string floatBinary(ScalarContext& cx, const ir::Op& op, const std::string& a,
                        const std::string& b, DType t) {
  if (isLowFloat(t))
    return fromF32(cx, floatBinary(cx, op, toF32(cx, a, t), toF32(cx, b, t), DType::F32), t);
  RegClass rc = regClassOf(t);
  std::string ft = t == DType::F64 ? "f64" : "f32";
  // Without a rounding modifier ptxas may contract a multiply and an add into an FMA.
  std::string contractible = cx.fpFusion ? "" : "rn.";
  switch (op.code()) {
  case OpCode::Add:
    return cx.b.pure("add." + contractible + ft, rc, {a, b});
  case OpCode::Sub:
    return cx.b.pure("sub." + contractible + ft, rc, {a, b});
  case OpCode::Mul:
    return cx.b.pure("mul." + contractible + ft, rc, {a, b});
  case OpCode::Div:
    if (auto reciprocal = exactReciprocal(b))
      return cx.b.pure("mul." + contractible + ft, rc, {a, *reciprocal});
    if (t == DType::F32 && ir::attr::Div::fast(op))
      return cx.b.pure(cx.reflectFtz ? "div.approx.ftz.f32" : "div.approx.f32", rc, {a, b});
    if (t == DType::F32 && ir::attr::Div::approx(op)) return cx.b.pure("div.full.f32", rc, {a, b});
    return cx.b.pure("div.rn." + ft, rc, {a, b});
  case OpCode::FloorDiv:
    return cx.b.pure("cvt.rmi." + ft + "." + ft, rc, {cx.b.pure("div.rn." + ft, rc, {a, b})});
  case OpCode::Rem: {
    // fmod: a - trunc(a / b) * b.
    std::string q = cx.b.pure("div.rn." + ft, rc, {a, b});
    std::string tq = cx.b.pure("cvt.rzi." + ft + "." + ft, rc, {q});
    std::string ntq = cx.b.pure("neg." + ft, rc, {tq});
    return cx.b.pure("fma.rn." + ft, rc, {ntq, b, a});
  }
  case OpCode::Max:
  case OpCode::Min: {
    const char* name = op.code() == OpCode::Max ? "max" : "min";
    // Plain max/min return the non-NaN operand (Triton's default, and the interpreter's);
    // [propagate_nan] asks for NaN to win.
    bool propagate = ir::propagatesNan(op);
    if (t == DType::F32)
      return cx.b.pure(std::string(name) + (propagate ? ".NaN.f32" : ".f32"), rc, {a, b});
    std::string m = cx.b.pure(std::string(name) + ".f64", rc, {a, b});
    if (!propagate) return m;
    // max.f64 has no NaN-propagating form: a + b is NaN when either is.
    std::string nan = cx.b.pure("setp.nan.f64", RegClass::Pred, {a, b});
    std::string sum = cx.b.pure("add.f64", rc, {a, b});
    return cx.b.pure("selp.f64", rc, {sum, m, nan});
  }
  case OpCode::Pow: {
    if (t != DType::F32) unsupported(cx, op, t, "pow takes float32 (cast first)");
    std::string l = f32(cx, "lg2.approx.f32", {a});
    return f32(cx, cx.reflectFtz ? "ex2.approx.ftz.f32" : "ex2.approx.f32",
               {f32(cx, "mul.f32", {b, l})});
  }
  default:
    unsupported(cx, op, t, "floats take + - * / % // min max pow");
  }
}

std::string compare(ScalarContext& cx, const ir::Op& op, const std::string& a, const std::string& b,
                    DType t) {
  std::string pred = ir::attr::Cmp::pred(op);
  static const char* const preds[] = {"eq", "ne", "lt", "le", "gt", "ge"};
  bool known = false;
  for (const char* p : preds) known |= pred == p;
  if (!known)
    raiseError(cx.loc, "comparison predicate '" + pred + "' is not one of eq ne lt le gt ge");
  if (t == DType::I1) {
    if (pred == "eq" || pred == "ne") {
      std::string x =
          cx.b.pure("xor.pred", RegClass::Pred,
                    {cx.b.materialize(a, RegClass::Pred), cx.b.materialize(b, RegClass::Pred)});
      return pred == "ne" ? x : cx.b.pure("not.pred", RegClass::Pred, {x});
    }
    std::string ia = emitCast(cx, a, DType::I1, DType::U32);
    std::string ib = emitCast(cx, b, DType::I1, DType::U32);
    return cx.b.pure("setp." + pred + ".u32", RegClass::Pred, {ia, ib});
  }
  if (isLowFloat(t)) return compare(cx, op, toF32(cx, a, t), toF32(cx, b, t), DType::F32);
  if (ir::isFloat(t)) {
    // Python's != is true for NaN operands (unordered); the others are ordered.
    std::string p = pred == "ne" ? "neu" : pred;
    return cx.b.pure("setp." + p + (t == DType::F64 ? ".f64" : ".f32"), RegClass::Pred, {a, b});
  }
  return cx.b.pure("setp." + pred + "." + intType(t), RegClass::Pred, {a, b});
}

std::string select(ScalarContext& cx, const std::string& c, const std::string& a,
                   const std::string& b, DType t) {
  std::string cond = cx.b.materialize(c, RegClass::Pred);
  if (t == DType::I1) {
    std::string pa = cx.b.materialize(a, RegClass::Pred), pb = cx.b.materialize(b, RegClass::Pred);
    std::string nc = cx.b.pure("not.pred", RegClass::Pred, {cond});
    std::string x = cx.b.pure("and.pred", RegClass::Pred, {cond, pa});
    std::string y = cx.b.pure("and.pred", RegClass::Pred, {nc, pb});
    return cx.b.pure("or.pred", RegClass::Pred, {x, y});
  }
  RegClass rc = regClassOf(t);
  std::string ty = rc == RegClass::F32 ? "f32" : rc == RegClass::F64 ? "f64" : bitType(t);
  return cx.b.pure("selp." + ty, rc, {a, b, cond});
}

} // namespace

std::string arithType(DType t) {
  if (t == DType::I1) return "pred";
  if (ir::isFloat(t)) return t == DType::F64 ? "f64" : "f32";
  return intType(t);
}

std::string bitType(DType t) {
  if (t == DType::I1) return "pred";
  switch (regClassOf(t)) {
  case RegClass::B16:
    return "b16";
  case RegClass::B32:
  case RegClass::F32:
    return "b32";
  default:
    return "b64";
  }
}

std::string emitElementwise(ScalarContext& cx, const ir::Op& op,
                            const std::vector<std::string>& args,
                            const std::vector<DType>& argTypes, DType resultType) {
  DType t = argTypes.empty() ? resultType : argTypes[0];
  if (ir::isBinaryArithmetic(op.code())) {
    if (t == DType::I1) return predBinary(cx, op, args[0], args[1]);
    if (ir::isFloat(t)) return floatBinary(cx, op, args[0], args[1], t);
    if (op.code() == OpCode::Pow) unsupported(cx, op, t, "pow takes floating-point values");
    return intBinary(cx, op, cx.b.materialize(args[0], regClassOf(t)), args[1], t);
  }
  switch (op.code()) {
  case OpCode::Neg:
    if (t == DType::I1) return args[0];
    if (isLowFloat(t)) return fromF32(cx, f32(cx, "neg.f32", {toF32(cx, args[0], t)}), t);
    if (ir::isFloat(t)) return cx.b.pure("neg." + arithType(t), regClassOf(t), {args[0]});
    return normalizeByte(cx, cx.b.pure("neg." + intType(t, true), regClassOf(t), {args[0]}), t);
  case OpCode::Not:
    if (t == DType::I1)
      return cx.b.pure("not.pred", RegClass::Pred, {cx.b.materialize(args[0], RegClass::Pred)});
    if (ir::isFloat(t)) unsupported(cx, op, t, "bitwise not takes integers or booleans");
    return normalizeByte(cx, cx.b.pure("not." + bitType(t), regClassOf(t), {args[0]}), t);
  case OpCode::Cmp:
    return compare(cx, op, cx.b.materialize(args[0], regClassOf(t)), args[1], t);
  case OpCode::Select:
    return select(cx, args[0], args[1], args[2], argTypes[1]);
  case OpCode::Fma:
    if (isLowFloat(t)) {
      std::string r = f32(cx, "fma.rn.f32",
                          {toF32(cx, args[0], t), toF32(cx, args[1], t), toF32(cx, args[2], t)});
      return fromF32(cx, r, t);
    }
    if (ir::isFloat(t)) return cx.b.pure("fma.rn." + arithType(t), regClassOf(t), args);
    if (t == DType::I1) unsupported(cx, op, t, "fma takes numbers");
    return normalizeByte(cx,
                         cx.b.pure("mad.lo." + intType(t), regClassOf(t),
                                   {cx.b.materialize(args[0], regClassOf(t)), args[1], args[2]}),
                         t);
  case OpCode::Abs:
    if (ir::isInt(t)) {
      if (t == DType::I1 || !ir::isSigned(t)) return args[0];
      return normalizeByte(cx, cx.b.pure("abs." + intType(t), regClassOf(t), {args[0]}), t);
    }
    return floatMath(cx, op, args[0], t);
  case OpCode::Exp:
  case OpCode::Exp2:
  case OpCode::Log:
  case OpCode::Log2:
  case OpCode::Sqrt:
  case OpCode::Rsqrt:
  case OpCode::Sin:
  case OpCode::Cos:
  case OpCode::Tanh:
  case OpCode::Erf:
  case OpCode::Floor:
  case OpCode::Ceil:
  case OpCode::Sigmoid:
    if (!ir::isFloat(t)) unsupported(cx, op, t, "it takes floating-point values (cast first)");
    return floatMath(cx, op, args[0], t);
  case OpCode::Umulhi:
    if (t != DType::I32 && t != DType::U32 && t != DType::I64 && t != DType::U64)
      unsupported(cx, op, t, "umulhi takes 32- or 64-bit integers");
    // The unsigned high half whatever the signedness, as the interpreter and Triton compute it
    // (mul.hi.s32 would be the signed product's).
    return cx.b.pure(ir::bitWidth(t) == 64 ? "mul.hi.u64" : "mul.hi.u32", regClassOf(t),
                     {cx.b.materialize(args[0], regClassOf(t)), args[1]});
  case OpCode::Cast:
    return emitCast(cx, args[0], t, resultType, ir::attr::Cast::rounding(op));
  case OpCode::Bitcast: {
    if (ir::bitWidth(t) != ir::bitWidth(resultType))
      raiseError(cx.loc, "bitcast from " + std::string(ir::tlName(t)) + " to " +
                             std::string(ir::tlName(resultType)) +
                             " changes the bit width; bitcast needs types of one width");
    RegClass from = regClassOf(t), to = regClassOf(resultType);
    std::string x = args[0];
    if (from != to) {
      x = cx.b.materialize(x, from);
      x = cx.b.pure("mov." + bitType(resultType), to, {x});
    }
    return normalizeByte(cx, x, resultType);
  }
  case OpCode::PtrToInt:
  case OpCode::IntToPtr:
    return args[0];
  default:
    throw std::logic_error(std::string("emitElementwise: not elementwise: ") + op.name());
  }
}

std::string emitCast(ScalarContext& cx, const std::string& xIn, DType from, DType to,
                     const std::string& rounding) {
  if (from == to) return xIn;
  if (!rounding.empty() && rounding != "rtne" && rounding != "rtz")
    raiseError(cx.loc, "cast rounding '" + rounding + "' is not one of rtne, rtz");
  std::string x = cx.b.materialize(xIn, regClassOf(from));
  std::string rnd = rounding == "rtz" ? "rz" : "rn";
  // Booleans.
  if (to == DType::I1) {
    if (ir::isFloat(from)) {
      std::string f = isLowFloat(from) ? toF32(cx, x, from) : x;
      return cx.b.pure(from == DType::F64 ? "setp.neu.f64" : "setp.neu.f32", RegClass::Pred,
                       {f, from == DType::F64 ? immF64(0) : immF32(0)});
    }
    return cx.b.pure("setp.ne." + intType(from), RegClass::Pred, {x, "0"});
  }
  if (from == DType::I1) {
    if (ir::isInt(to)) return cx.b.pure("selp." + bitType(to), regClassOf(to), {"1", "0", x});
    if (to == DType::F64) return cx.b.pure("selp.f64", RegClass::F64, {immF64(1), immF64(0), x});
    std::string f = f32(cx, "selp.f32", {immF32(1), immF32(0), x});
    return to == DType::F32 ? f : fromF32(cx, f, to);
  }
  // Integers to integers: extension follows the source's signedness.
  if (ir::isInt(from) && ir::isInt(to)) {
    int fb = regBits(from), tb = regBits(to);
    std::string r = x;
    if (fb < tb)
      r = cx.b.pure("cvt." + intType(from).substr(0, 1) + std::to_string(tb) + "." + intType(from),
                    regClassOf(to), {x});
    else if (fb > tb)
      r = cx.b.pure("cvt.u" + std::to_string(tb) + ".u" + std::to_string(fb), regClassOf(to), {x});
    return normalizeByte(cx, r, to);
  }
  // fp8 goes through f16 with the paired conversions of sm_89+.
  if (isSoftwareFp8(from)) {
    std::string f = softwareFp8ToF32(cx, x, from);
    return to == DType::F32 ? f : emitCast(cx, f, DType::F32, to, rounding);
  }
  if (isSoftwareFp8(to)) {
    std::string f = from == DType::F32 ? x : emitCast(cx, x, from, DType::F32, rounding);
    return f32ToSoftwareFp8(cx, f, to, rounding == "rtz");
  }
  if (isHardwareFp8(from)) {
    requireFp8Target(cx, from);
    std::string pair = cx.b.pure(
        from == DType::F8E4M3 ? "cvt.rn.f16x2.e4m3x2" : "cvt.rn.f16x2.e5m2x2", RegClass::B32, {x});
    // The low byte converts to the low half.
    std::string half = cx.b.pure("cvt.u16.u32", RegClass::B16, {pair});
    return emitCast(cx, half, DType::F16, to, rounding);
  }
  if (isHardwareFp8(to)) {
    requireFp8Target(cx, to);
    std::string f = from == DType::F32 ? x : emitCast(cx, x, from, DType::F32);
    std::string zero = cx.b.materialize(immF32(0), RegClass::F32);
    // The second source converts into the low byte.
    return cx.b.pure(to == DType::F8E4M3 ? "cvt.rn.satfinite.e4m3x2.f32"
                                         : "cvt.rn.satfinite.e5m2x2.f32",
                     RegClass::B16, {zero, f});
  }
  // Integers to floats.
  if (ir::isInt(from)) {
    if (to == DType::F64) return cx.b.pure("cvt.rn.f64." + intType(from), RegClass::F64, {x});
    std::string f = f32(cx, ("cvt.rn.f32." + intType(from)).c_str(), {x});
    return to == DType::F32 ? f : emitCast(cx, f, DType::F32, to, rounding);
  }
  // Floats to integers truncate toward zero.
  if (ir::isInt(to)) {
    std::string f = from == DType::F16 || from == DType::BF16 ? toF32(cx, x, from) : x;
    std::string src = from == DType::F64 ? "f64" : "f32";
    std::string r = cx.b.pure("cvt.rzi." + intType(to) + "." + src, regClassOf(to), {f});
    return normalizeByte(cx, r, to);
  }
  // Floats to floats.
  if (from == DType::F16 && to == DType::F32) return f32(cx, "cvt.f32.f16", {x});
  if (from == DType::BF16 && to == DType::F32) {
    // bf16 is the top half of an f32: exact, and available on every target.
    std::string wide = cx.b.pure("cvt.u32.u16", RegClass::B32, {x});
    std::string bits = cx.b.pure("shl.b32", RegClass::B32, {wide, "16"});
    return f32(cx, "mov.b32", {bits});
  }
  if (from == DType::F32 && to == DType::F64) return cx.b.pure("cvt.f64.f32", RegClass::F64, {x});
  if (from == DType::F64 && to == DType::F32)
    return f32(cx, ("cvt." + rnd + ".f32.f64").c_str(), {x});
  if (from == DType::F32 && (to == DType::F16 || to == DType::BF16))
    return cx.b.pure("cvt." + rnd + (to == DType::F16 ? ".f16.f32" : ".bf16.f32"), RegClass::B16,
                     {x});
  if (from == DType::F64)
    return emitCast(cx, emitCast(cx, x, from, DType::F32, rounding), DType::F32, to, rounding);
  // f16 <-> bf16, and f16/bf16 -> f64, through f32 (exact widening first).
  return emitCast(cx, emitCast(cx, x, from, DType::F32), DType::F32, to, rounding);
}

std::string emitConstant(ScalarContext& cx, double fvalue, int64_t ivalue, bool isFloatValue,
                         DType t) {
  if (t == DType::I1) {
    bool v = isFloatValue ? fvalue != 0 : ivalue != 0;
    return cx.b.pure("setp.ne.u32", RegClass::Pred, {v ? "1" : "0", "0"});
  }
  if (ir::isInt(t)) {
    int64_t v = isFloatValue ? static_cast<int64_t>(fvalue) : ivalue;
    int bits = ir::bitWidth(t);
    if (bits < 64) {
      uint64_t mask = (uint64_t(1) << bits) - 1;
      uint64_t u = static_cast<uint64_t>(v) & mask;
      if (ir::isSigned(t) && (u >> (bits - 1)))
        v = static_cast<int64_t>(u | ~mask);
      else
        v = static_cast<int64_t>(u);
    }
    return immInt(v);
  }
  double v = isFloatValue ? fvalue : static_cast<double>(ivalue);
  if (t == DType::F64) return immF64(v);
  if (t == DType::F32) return immF32(static_cast<float>(v));
  // 16-bit and 8-bit floats: convert an f32 immediate once (hash-consed).
  return emitCast(cx, cx.b.materialize(immF32(static_cast<float>(v)), RegClass::F32), DType::F32,
                  t);
}

} // namespace ww::codegen
