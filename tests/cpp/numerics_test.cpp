// The scalar numerics contract (src/ir/ScalarNumerics.h): constant folding and the interpreter
// compute the same value for every op and operand pair tried, edge cases included (division and
// remainder by -1 at INT_MIN, shifts by the width or a negative amount, NaN in min / max with and
// without propagate_nan, float -> int saturation, fp16 / bf16 rounding, casts through fp32).
#include "interp/Elementwise.h"
#include "ir/Builder.h"
#include "ir/ScalarNumerics.h"
#include "transforms/Passes.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>

using namespace ww;
using ir::DType;
using ir::OpCode;
using ir::Type;
namespace num = ww::ir::numerics;

namespace {

/// Folds `code` over constants of types `ta` (and `tb`) to a constant of `rt`; nullopt if the
/// folder left the op.
std::optional<ir::Attr> fold(OpCode code, const std::vector<ir::Attr>& in,
                             const std::vector<DType>& types, DType rt,
                             std::vector<ir::NamedAttr> attrs = {}) {
  ir::Function fn;
  ir::Builder b(&fn.body);
  Type pt = Type::ptr(rt);
  ir::Value* p = fn.body.addArg(pt, "p");
  fn.args.push_back({"p", pt, 1, false, p});
  std::vector<ir::Value*> operands;
  for (size_t i = 0; i < in.size(); ++i) {
    Type t = Type::scalar(types[i]);
    if (auto* iv = std::get_if<int64_t>(&in[i]))
      operands.push_back(b.constInt(*iv, t));
    else
      operands.push_back(b.constFloat(std::get<double>(in[i]), t));
  }
  ir::Value* r = b.create1(code, operands, Type::scalar(rt), std::move(attrs));
  b.store(p, r);
  b.ret();
  transforms::foldConstants(fn);
  ir::Value* stored = nullptr;
  ir::walk(fn.body, [&](const ir::Op& op) {
    if (op.code() == OpCode::Store) stored = op.operand(1);
  });
  const ir::Op* def = stored ? stored->def() : nullptr;
  if (!def || def->code() != OpCode::Constant) return std::nullopt;
  return *def->attr("value");
}

/// The interpreter's value of the same op: constants made as it makes them, then its kernel.
interp::Scalar interpret(OpCode code, const std::vector<ir::Attr>& in,
                         const std::vector<DType>& types, DType rt, bool propagateNan = false,
                         interp::Rounding rounding = interp::Rounding::NearestEven) {
  std::vector<interp::TensorPtr> t;
  for (size_t i = 0; i < in.size(); ++i)
    t.push_back(interp::makeConstant(Type::scalar(types[i]), in[i]));
  interp::TensorPtr r;
  if (code == OpCode::Cast)
    r = interp::evalCast(*t[0], Type::scalar(rt), rounding);
  else if (code == OpCode::StochRound)
    r = interp::evalStochRound(*t[0], *t[1], Type::scalar(rt));
  else
    r = interp::evalBinary(code, *t[0], *t[1], Type::scalar(rt), propagateNan);
  return interp::readScalar(*r, 0);
}

/// Both agree, bit for bit: the folded constant read back as the interpreter reads its result.
void expectAgree(OpCode code, const std::vector<ir::Attr>& in, const std::vector<DType>& types,
                 DType rt, bool propagateNan = false, const char* rounding = nullptr) {
  std::vector<ir::NamedAttr> attrs;
  if (propagateNan) attrs.push_back({"propagate_nan", int64_t(1)});
  if (rounding) attrs.push_back({"rounding", std::string(rounding)});
  auto folded = fold(code, in, types, rt, attrs);
  interp::Scalar run =
      interpret(code, in, types, rt, propagateNan,
                rounding && std::string(rounding) == "rtz" ? interp::Rounding::TowardZero
                                                           : interp::Rounding::NearestEven);
  std::string what = std::string(ir::opName(code)) + " -> " + std::string(ir::sigName(rt));
  ASSERT_TRUE(folded.has_value()) << what << " was not folded";
  // The folded constant, materialised by the interpreter, is what the op computed.
  interp::Scalar k = interp::readScalar(*interp::makeConstant(Type::scalar(rt), *folded), 0);
  if (ir::isFloat(rt)) {
    ASSERT_TRUE(run.isFloat && k.isFloat) << what;
    if (std::isnan(run.f))
      EXPECT_TRUE(std::isnan(k.f)) << what << ": folded " << k.f << ", interpreted NaN";
    else
      EXPECT_EQ(std::bit_cast<uint64_t>(k.f), std::bit_cast<uint64_t>(run.f))
          << what << ": folded " << k.f << ", interpreted " << run.f;
  } else {
    EXPECT_EQ(k.i, run.i) << what;
  }
}

const DType kInts[] = {DType::I8, DType::I16, DType::I32, DType::I64,
                       DType::U8, DType::U16, DType::U32, DType::U64};

} // namespace

TEST(Numerics, IntegerOpsFoldAsInterpreted) {
  const int64_t values[] = {0,         1,         -1,        2,    -2,  7,     -7,
                            63,        64,        127,       -128, 255, 32767, INT32_MIN,
                            INT32_MAX, INT64_MIN, INT64_MAX, 40,   -40, 100000};
  const OpCode ops[] = {OpCode::Add,      OpCode::Sub, OpCode::Mul, OpCode::Div, OpCode::Rem,
                        OpCode::FloorDiv, OpCode::And, OpCode::Or,  OpCode::Xor, OpCode::Shl,
                        OpCode::Shr,      OpCode::Max, OpCode::Min};
  for (DType t : kInts)
    for (OpCode op : ops)
      for (int64_t a : values)
        for (int64_t b : values) {
          // Division by zero is left to the hardware (tested below).
          bool byZero = (op == OpCode::Div || op == OpCode::Rem || op == OpCode::FloorDiv) &&
                        num::wrapInt(b, t) == 0;
          if (byZero) continue;
          SCOPED_TRACE(std::to_string(a) + " " + ir::opName(op) + " " + std::to_string(b) + " : " +
                       std::string(ir::sigName(t)));
          expectAgree(op, {a, b}, {t, t}, t);
          if (HasFatalFailure()) return;
        }
}

TEST(Numerics, DivisionByZeroIsNotFolded) {
  for (OpCode op : {OpCode::Div, OpCode::Rem, OpCode::FloorDiv})
    for (DType t : kInts)
      EXPECT_FALSE(fold(op, {int64_t(5), int64_t(0)}, {t, t}, t).has_value()) << ir::opName(op);
  // 256 is 0 as u8.
  EXPECT_FALSE(fold(OpCode::Div, {int64_t(5), int64_t(256)}, {DType::U8, DType::U8}, DType::U8));
}

TEST(Numerics, EdgeCasesHaveTheContractsValues) {
  using num::intDiv, num::intRem, num::shiftLeft, num::shiftRight;
  EXPECT_EQ(num::wrapInt(intDiv<int64_t>(INT32_MIN, -1), DType::I32), INT32_MIN);
  EXPECT_EQ(intDiv<int64_t>(INT64_MIN, -1), INT64_MIN);
  EXPECT_EQ(intRem<int64_t>(INT64_MIN, -1), 0);
  EXPECT_EQ(intDiv<int64_t>(-7, 2), -3);
  EXPECT_EQ(intRem<int64_t>(-7, 2), -1);
  EXPECT_EQ(num::intFloorDiv<int64_t>(-7, 2), -4);
  EXPECT_EQ(shiftLeft<int64_t>(1, 32, 32), 0);
  EXPECT_EQ(shiftLeft<int64_t>(1, -1, 32), 0);
  EXPECT_EQ(shiftRight<int64_t>(-8, 40, 32), -1);
  EXPECT_EQ(shiftRight<uint64_t>(0xFFFFFFF8u, 40, 32), 0u);
  EXPECT_EQ(shiftRight<uint64_t>(0xFFFFFFF8u, 1, 32), 0x7FFFFFFCu);
  EXPECT_EQ(shiftRight<int64_t>(-8, 1, 32), -4);
  double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(num::floatMax(nan, 1.0, false), 1.0);
  EXPECT_EQ(num::floatMin(1.0, nan, false), 1.0);
  EXPECT_TRUE(std::isnan(num::floatMax(1.0, nan, true)));
  EXPECT_FALSE(std::signbit(num::floatMax(-0.0, 0.0, false)));
  EXPECT_TRUE(std::signbit(num::floatMin(0.0, -0.0, false)));
  EXPECT_EQ(num::castFloatToInt(nan, DType::I32), 0);
  EXPECT_EQ(num::castFloatToInt(1e10, DType::I32), INT32_MAX);
  EXPECT_EQ(num::castFloatToInt(-1e10, DType::I32), INT32_MIN);
  EXPECT_EQ(num::castFloatToInt(-1.0, DType::U32), 0);
  EXPECT_EQ(num::castFloatToInt(INFINITY, DType::U64), -1); // all ones
  EXPECT_EQ(num::castFloatToInt(0.5, DType::I1), 1);
  // fp64 -> fp16 rounds through fp32: 1 + 2^-11 + 2^-40 is the tie 1 + 2^-11 in fp32.
  EXPECT_EQ(
      num::castFloatToFloat(1 + std::ldexp(1, -11) + std::ldexp(1, -40), DType::F64, DType::F16),
      1.0);
  EXPECT_EQ(
      num::castFloatToFloat(1 + std::ldexp(1, -11) + std::ldexp(1, -40), DType::F32, DType::F16),
      1.0 + std::ldexp(1, -10));
  // int -> bf16 through fp32: 2^24 + 2^16 + 1 -> 2^24 + 2^16 (a bf16 tie) -> 2^24.
  EXPECT_EQ(num::castIntToFloat((1 << 24) + (1 << 16) + 1, DType::I32, DType::BF16),
            double(1 << 24));
  EXPECT_TRUE(std::isinf(num::roundToType(65504.0 * 2, DType::F16)));
}

TEST(Numerics, FloatOpsFoldAsInterpreted) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double values[] = {
      0.0,     -0.0, 1.0,   -1.0,     0.1,       1e-4, 3.0,
      65504.0, 1e30, -1e30, INFINITY, -INFINITY, nan,  1.0 + std::ldexp(1, -11)};
  const OpCode ops[] = {OpCode::Add, OpCode::Sub, OpCode::Mul,
                        OpCode::Div, OpCode::Max, OpCode::Min};
  for (DType t : {DType::F16, DType::BF16, DType::F32, DType::F64})
    for (OpCode op : ops)
      for (double a : values)
        for (double b : values)
          for (bool propagate : {false, true}) {
            if (propagate && op != OpCode::Max && op != OpCode::Min) continue;
            SCOPED_TRACE(std::to_string(a) + " " + ir::opName(op) + " " + std::to_string(b) +
                         " : " + std::string(ir::sigName(t)) + (propagate ? " propagate" : ""));
            expectAgree(op, {a, b}, {t, t}, t, propagate);
            if (HasFatalFailure()) return;
          }
}

TEST(Numerics, CastsFoldAsInterpreted) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double floats[] = {0.0,      -0.0,
                           0.5,      -3.9,
                           0.1,      1e10,
                           -1e10,    1e30,
                           INFINITY, -INFINITY,
                           nan,      65519.0,
                           65520.0,  1.0 + std::ldexp(1, -11) + std::ldexp(1, -40)};
  const DType floatTypes[] = {DType::F16, DType::BF16, DType::F32, DType::F64};
  for (DType from : floatTypes)
    for (double v : floats) {
      for (DType to : kInts) {
        SCOPED_TRACE(std::to_string(v) + " " + std::string(ir::sigName(from)) + " -> " +
                     std::string(ir::sigName(to)));
        expectAgree(OpCode::Cast, {v}, {from}, to);
      }
      for (DType to : floatTypes)
        for (const char* r : {"rtne", "rtz"}) {
          SCOPED_TRACE(std::to_string(v) + " " + std::string(ir::sigName(from)) + " -> " +
                       std::string(ir::sigName(to)) + " " + r);
          expectAgree(OpCode::Cast, {v}, {from}, to, false, r);
        }
    }
  const int64_t ints[] = {0,         1,         -1,        16777217, (1 << 24) + (1 << 16) + 1,
                          INT32_MIN, INT64_MAX, INT64_MIN, 65520,    1 << 30};
  for (DType from : kInts)
    for (int64_t v : ints) {
      for (DType to : floatTypes) {
        SCOPED_TRACE(std::to_string(v) + " " + std::string(ir::sigName(from)) + " -> " +
                     std::string(ir::sigName(to)));
        expectAgree(OpCode::Cast, {v}, {from}, to);
      }
      for (DType to : kInts) expectAgree(OpCode::Cast, {v}, {from}, to);
    }
}

TEST(Numerics, NanToIntegerIsTheGpusValue) {
  // The H200's cvt of NaN to a 64-bit integer gives 0x8000000000000000 (libdevice llrint /
  // llround on the GPU); narrower destinations give 0.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(num::floatToIntSaturating(nan, DType::I64), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(num::floatToUintSaturating(nan, DType::U64), uint64_t(1) << 63);
  for (DType t : {DType::I8, DType::I16, DType::I32})
    EXPECT_EQ(num::floatToIntSaturating(nan, t), 0);
  for (DType t : {DType::U8, DType::U16, DType::U32})
    EXPECT_EQ(num::floatToUintSaturating(nan, t), 0u);
}

TEST(Numerics, StochasticRoundingIsTheIsasRule) {
  // tlx.stoch_round (cvt.rs.satfinite): the random bits are added to the top bits of what the
  // destination drops, a carry rounds the magnitude away from zero.
  const float tieF16 = 1.0f + std::ldexp(1.0f, -11); // half an fp16 place above 1
  EXPECT_EQ(num::encodeStochasticRound(DType::F16, tieF16, 0x0FFF), 0x3C00u);
  EXPECT_EQ(num::encodeStochasticRound(DType::F16, tieF16, 0x1000), 0x3C01u);
  EXPECT_EQ(num::encodeStochasticRound(DType::F16, -tieF16, 0x1000), 0xBC01u);
  // fp16 uses the 13 low bits; bits above them change nothing.
  EXPECT_EQ(num::encodeStochasticRound(DType::F16, tieF16, 0xFFFFEFFF), 0x3C00u);
  const float tieBf16 = 1.0f + std::ldexp(1.0f, -8);
  EXPECT_EQ(num::encodeStochasticRound(DType::BF16, tieBf16, 0x7FFF), 0x3F80u);
  EXPECT_EQ(num::encodeStochasticRound(DType::BF16, tieBf16, 0x8000), 0x3F81u);
  const float tieE4m3 = 1.0f + std::ldexp(1.0f, -4);
  EXPECT_EQ(num::encodeStochasticRound(DType::F8E4M3, tieE4m3, 0xFFFF7FFF), 0x38u);
  EXPECT_EQ(num::encodeStochasticRound(DType::F8E4M3, tieE4m3, 0x8000), 0x39u);
  // fp8 adds its 16 bits to the top 16 of the 20 dropped: a unit in the last fp32 place never
  // carries; fp16's 13 cover all it drops.
  const float ulp32 = 1.0f + std::ldexp(1.0f, -23);
  EXPECT_EQ(num::encodeStochasticRound(DType::F8E4M3, ulp32, 0xFFFFFFFF), 0x38u);
  EXPECT_EQ(num::encodeStochasticRound(DType::F8E5M2, ulp32, 0xFFFFFFFF), 0x3Cu);
  EXPECT_EQ(num::encodeStochasticRound(DType::F16, ulp32, 0x1FFF), 0x3C01u);
  // Exact values never move.
  for (uint32_t r : {0u, 0xFFFFFFFFu, 0x12345678u}) {
    EXPECT_EQ(num::encodeStochasticRound(DType::F16, 65504.0f, r), 0x7BFFu);
    EXPECT_EQ(num::encodeStochasticRound(DType::F8E4M3, -448.0f, r), 0xFEu);
    EXPECT_EQ(num::encodeStochasticRound(DType::F8E5M2, 0.75f, r), 0x3Au);
    EXPECT_EQ(num::encodeStochasticRound(DType::F16, std::ldexp(1.0f, -24), r), 0x0001u);
  }
  // satfinite: past the largest finite value (a carry out of it too) and infinities clamp;
  // NaN is the format's NaN; zeros keep their sign.
  EXPECT_EQ(num::encodeStochasticRound(DType::F16, 65519.0f, 0xFFFFFFFF), 0x7BFFu);
  EXPECT_EQ(num::encodeStochasticRound(DType::F16, -INFINITY, 0), 0xFBFFu);
  EXPECT_EQ(num::encodeStochasticRound(DType::BF16, INFINITY, 0), 0x7F7Fu);
  EXPECT_EQ(num::encodeStochasticRound(DType::F8E4M3, 460.0f, 0), 0x7Eu);
  EXPECT_EQ(num::encodeStochasticRound(DType::F8E4M3, 447.0f, 0xFFFF), 0x7Eu);
  EXPECT_EQ(num::encodeStochasticRound(DType::F8E5M2, -60000.0f, 0xFFFF), 0xFBu);
  EXPECT_EQ(num::encodeStochasticRound(DType::F8E5M2, NAN, 0), 0x7Fu);
  EXPECT_EQ(num::encodeStochasticRound(DType::F16, NAN, 0), 0x7FFFu);
  EXPECT_EQ(num::encodeStochasticRound(DType::F8E4M3, -0.0f, 0xFFFFFFFF), 0x80u);
  // Subnormal results: half the smallest fp16 subnormal rounds up from half the range.
  EXPECT_EQ(num::encodeStochasticRound(DType::F16, std::ldexp(1.0f, -25), 0x0FFF), 0x0000u);
  EXPECT_EQ(num::encodeStochasticRound(DType::F16, std::ldexp(1.0f, -25), 0x1000), 0x0001u);
  EXPECT_THROW(num::encodeStochasticRound(DType::F32, 1.0f, 0), std::logic_error);
}

TEST(Numerics, StochasticRoundingFoldsAsInterpreted) {
  const double values[] = {0.0,
                           -0.0,
                           1.0 + std::ldexp(1, -11),
                           -2.7182817459106445,
                           65519.0,
                           -1e30,
                           INFINITY,
                           NAN,
                           3.0e-8,
                           1e-40,
                           0.1,
                           65504.0};
  const int64_t words[] = {0, 0x1000, 0xFFFF, 0x8000, 0xFFFFFFFF, 0x12345678};
  for (DType to : {DType::F16, DType::BF16})
    for (double v : values)
      for (int64_t r : words) {
        SCOPED_TRACE(std::to_string(v) + " " + std::to_string(r) + " -> " +
                     std::string(ir::sigName(to)));
        expectAgree(OpCode::StochRound, {v, r}, {DType::F32, DType::U32}, to);
      }
}
