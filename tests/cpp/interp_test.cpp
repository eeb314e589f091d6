// Interpreter tests: kernels built with ir::Builder run on host buffers and are checked against
// C++ references computed here.
#include "frontend/Parser.h"
#include "interp/Interpreter.h"
#include "interp/Numerics.h"
#include "interp/Races.h"
#include "ir/Builder.h"
#include "specialize/Specializer.h"
#include "transforms/Passes.h"
#include "warpweave/runtime.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <random>

using namespace ww;
using namespace ww::ir;

namespace {

/// A kernel under construction: its Function, a SourceManager holding the kernel text the test
/// pretends it was written as, and a Builder whose locations point into that text.
struct TestKernel {
  SourceManager sm;
  uint32_t file = 0;
  Function fn;
  Builder b{&fn.body};

  explicit TestKernel(std::string name, std::string source = "") {
    file = sm.addFile(name + ".py", std::move(source));
    fn.name = std::move(name);
  }
  Value* arg(const std::string& name, Type t) {
    Value* v = fn.body.addArg(t, name);
    fn.args.push_back(KernelArg{name, t, 1, false, v});
    return v;
  }
  /// Points subsequent ops at line:col of the kernel text.
  void at(uint32_t line, uint32_t col) { b.setLoc(SourceLoc{file, line, col}); }
  void run(std::vector<int> grid, const std::vector<InterpArg>& args) {
    int g[3] = {grid.size() > 0 ? grid[0] : 1, grid.size() > 1 ? grid[1] : 1,
                grid.size() > 2 ? grid[2] : 1};
    interp::run(fn, &sm, g, args);
  }
  std::string runExpectingError(std::vector<int> grid, const std::vector<InterpArg>& args) {
    try {
      run(std::move(grid), args);
    } catch (const InterpreterError& e) {
      return e.what();
    }
    ADD_FAILURE() << "expected an InterpreterError";
    return "";
  }
};

template <typename T> InterpArg buf(std::vector<T>& v) {
  return InterpArg::buffer(v.data(), v.size() * sizeof(T));
}

const char* kVectorAddSource = "@ww.jit\n"
                               "def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):\n"
                               "    pid = tl.program_id(0)\n"
                               "    offsets = pid * BLOCK + tl.arange(0, BLOCK)\n"
                               "    mask = offsets < n\n"
                               "    x = tl.load(x_ptr + offsets, mask=mask)\n"
                               "    y = tl.load(y_ptr + offsets, mask=mask)\n"
                               "    tl.store(out_ptr + offsets, x + y, mask=mask)\n";

/// The vector add of the Triton tutorial; `masked` false drops the masks of the loads.
void buildVectorAdd(TestKernel& k, int64_t block, bool masked) {
  Value* x = k.arg("x_ptr", Type::ptr(DType::F32));
  Value* y = k.arg("y_ptr", Type::ptr(DType::F32));
  Value* out = k.arg("out_ptr", Type::ptr(DType::F32));
  Value* n = k.arg("n", Type::scalar(DType::I32));
  Builder& b = k.b;
  std::vector<int64_t> shape{block};
  k.at(3, 11);
  Value* pid = b.programId(0);
  k.at(4, 15);
  Value* start = b.binary(OpCode::Mul, pid, b.i32(block));
  Value* offsets = b.binary(OpCode::Add, b.splat(start, shape), b.arange(0, block));
  k.at(5, 12);
  Value* mask = b.cmp("lt", offsets, b.splat(n, shape));
  k.at(6, 9);
  Value* xv = b.load(b.addPtr(b.splat(x, shape), offsets), masked ? mask : nullptr);
  k.at(7, 9);
  Value* yv = b.load(b.addPtr(b.splat(y, shape), offsets), masked ? mask : nullptr);
  k.at(8, 5);
  Value* sum = b.binary(OpCode::Add, xv, yv);
  b.store(b.addPtr(b.splat(out, shape), offsets), sum, mask);
  b.ret();
}

std::vector<float> randomFloats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-100.0f, 100.0f);
  std::vector<float> v(n);
  for (float& f : v) f = dist(rng);
  return v;
}

bool sameBits(float a, float b) {
  return std::memcmp(&a, &b, 4) == 0;
}

} // namespace

TEST(InterpVectorAdd, MatchesReferenceOverGridWithOddSize) {
  const int64_t n = 1000003, block = 1024, slack = 1000;
  TestKernel k("add_kernel", kVectorAddSource);
  buildVectorAdd(k, block, /*masked=*/true);
  std::vector<float> x = randomFloats(n, 1), y = randomFloats(n, 2);
  // The output has slack past n, poisoned like the rest, to show masked lanes store nothing.
  const float poison = std::nanf("0x5a5a");
  std::vector<float> out(n + slack, poison);
  int grid = int((n + block - 1) / block);
  auto t0 = std::chrono::steady_clock::now();
  k.run({grid},
        {buf(x), buf(y), InterpArg::buffer(out.data(), out.size() * 4), InterpArg::integer(n)});
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(out[i], x[i] + y[i]) << "element " << i;
  for (int64_t i = n; i < n + slack; ++i) ASSERT_TRUE(sameBits(out[i], poison)) << "element " << i;
  // Printed, not asserted: tests check behaviour, and ctest's time limit catches a hang.
  std::printf("vector add of %lld elements: %.3f s\n", (long long)n, seconds);
}

TEST(InterpVectorAdd, OutOfBoundsLoadIsReportedWithLocation) {
  const int64_t n = 1000003, block = 1024;
  TestKernel k("add_kernel", kVectorAddSource);
  buildVectorAdd(k, block, /*masked=*/false);
  std::vector<float> x = randomFloats(n, 1), y = randomFloats(n, 2), out(n, 0.0f);
  int grid = int((n + block - 1) / block);
  std::string err = k.runExpectingError({grid}, {buf(x), buf(y), buf(out), InterpArg::integer(n)});
  // The last program starts at 976 * 1024 = 999424; its element 579 is index 1000003, the first
  // one past the end.
  EXPECT_EQ(err, "add_kernel.py:6:9: error: out-of-bounds load of 4 bytes at offset 4000012 "
                 "past the end of argument 'x_ptr' (4000012 bytes) in program (976, 0, 0), "
                 "element [579]\n"
                 "      x = tl.load(x_ptr + offsets, mask=mask)\n"
                 "          ^");
  // Programs before the faulting one ran and stored their results.
  EXPECT_EQ(out[0], x[0] + y[0]);
  EXPECT_EQ(out[999423], x[999423] + y[999423]);
}

TEST(InterpVectorAdd, AdjacentBuffersDoNotHideOverruns) {
  // x and y live in one host array, so x's overrun lands inside y's memory: the interpreter
  // must still report it against x, because pointers remember their argument.
  const int64_t n = 1000, block = 1024;
  TestKernel k("add_kernel", kVectorAddSource);
  buildVectorAdd(k, block, /*masked=*/false);
  std::vector<float> both(2 * block, 1.0f), out(block, 0.0f);
  std::string err = k.runExpectingError({1}, {InterpArg::buffer(both.data(), n * 4),
                                              InterpArg::buffer(both.data() + n, n * 4), buf(out),
                                              InterpArg::integer(n)});
  EXPECT_NE(err.find("out-of-bounds load of 4 bytes at offset 4000 past the end of argument "
                     "'x_ptr' (4000 bytes) in program (0, 0, 0), element [1000]"),
            std::string::npos)
      << err;
}

TEST(InterpVectorAdd, WrongArgumentCountIsRejected) {
  TestKernel k("add_kernel", kVectorAddSource);
  buildVectorAdd(k, 16, true);
  std::vector<float> x(16);
  EXPECT_THROW(k.run({1}, {buf(x)}), std::invalid_argument);
}

// ---------------------------------------------------------------------------------------------
// Helpers for single-program kernels: load whole inputs, apply ops, store whole outputs.
// ---------------------------------------------------------------------------------------------

namespace {

Value* flatOffsets(Builder& b, int64_t n) {
  return b.arange(0, n);
}

Value* loadAll(Builder& b, Value* ptr, int64_t n) {
  return b.load(b.addPtr(b.splat(ptr, {n}), flatOffsets(b, n)));
}

void storeAll(Builder& b, Value* ptr, Value* v) {
  int64_t n = v->type().numElements();
  if (v->type().shape.size() != 1) v = b.create1(OpCode::Reshape, {v}, v->type().withShape({n}));
  b.store(b.addPtr(b.splat(ptr, {n}), flatOffsets(b, n)), v);
}

Value* reshape(Builder& b, Value* v, std::vector<int64_t> shape) {
  return b.create1(OpCode::Reshape, {v}, v->type().withShape(std::move(shape)));
}

/// Runs out = op(a, b) elementwise over vectors of storage type S (dtype `in`), result dtype
/// `out` with storage R.
template <typename S, typename R = S>
std::vector<R> runBinary(OpCode code, DType in, const std::vector<S>& a, const std::vector<S>& bv,
                         DType out = DType::I1, bool sameOut = true) {
  TestKernel k("binary");
  int64_t n = int64_t(a.size());
  Value* pa = k.arg("a", Type::ptr(in));
  Value* pb = k.arg("b", Type::ptr(in));
  Value* po = k.arg("out", Type::ptr(sameOut ? in : out));
  Value* x = loadAll(k.b, pa, n);
  Value* y = loadAll(k.b, pb, n);
  storeAll(k.b, po, k.b.binary(code, x, y));
  k.b.ret();
  std::vector<S> ca = a, cb = bv;
  std::vector<R> result(a.size());
  k.run({1}, {buf(ca), buf(cb), buf(result)});
  return result;
}

template <typename S, typename R>
std::vector<R> runCast(DType from, DType to, const std::vector<S>& in,
                       const std::string& rounding = "") {
  TestKernel k("cast");
  int64_t n = int64_t(in.size());
  Value* pi = k.arg("in", Type::ptr(from));
  Value* po = k.arg("out", Type::ptr(to));
  Value* x = loadAll(k.b, pi, n);
  std::vector<NamedAttr> attrs;
  if (!rounding.empty()) attrs.push_back({"rounding", rounding});
  storeAll(k.b, po, k.b.create1(OpCode::Cast, {x}, Type::tensor(to, {n}), attrs));
  k.b.ret();
  std::vector<S> ci = in;
  std::vector<R> result(in.size());
  k.run({1}, {buf(ci), buf(result)});
  return result;
}

template <typename S> std::vector<S> runUnary(OpCode code, DType t, const std::vector<S>& in) {
  TestKernel k("unary");
  int64_t n = int64_t(in.size());
  Value* pi = k.arg("in", Type::ptr(t));
  Value* po = k.arg("out", Type::ptr(t));
  Value* x = loadAll(k.b, pi, n);
  storeAll(k.b, po, k.b.create1(code, {x}, x->type()));
  k.b.ret();
  std::vector<S> ci = in, result(in.size());
  k.run({1}, {buf(ci), buf(result)});
  return result;
}

uint32_t bitsOf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

} // namespace

// ---------------------------------------------------------------------------------------------
// Numerics
// ---------------------------------------------------------------------------------------------

TEST(InterpNumerics, Fp16EncodingRoundsToNearestEven) {
  using interp::encodeSmallFloat;
  auto h = [](double x) { return encodeSmallFloat(DType::F16, x); };
  EXPECT_EQ(h(1.0), 0x3C00u);
  EXPECT_EQ(h(-0.0), 0x8000u);
  EXPECT_EQ(h(65504.0), 0x7BFFu);
  EXPECT_EQ(h(65519.0), 0x7BFFu);                      // below the halfway point to 65536
  EXPECT_EQ(h(65520.0), 0x7C00u);                      // halfway, ties to even: overflows to inf
  EXPECT_EQ(h(1.0 + std::ldexp(1, -11)), 0x3C00u);     // tie -> even mantissa
  EXPECT_EQ(h(1.0 + 3 * std::ldexp(1, -11)), 0x3C02u); // tie -> even mantissa (up)
  EXPECT_EQ(h(std::ldexp(1, -24)), 0x0001u);           // smallest subnormal
  EXPECT_EQ(h(std::ldexp(1, -25)), 0x0000u);           // tie between 0 and it -> 0
  EXPECT_EQ(h(3 * std::ldexp(1, -26)), 0x0001u);
  EXPECT_EQ(h(std::ldexp(1023, -24)), 0x03FFu); // largest subnormal
  EXPECT_EQ(h(std::ldexp(1, -14)), 0x0400u);    // smallest normal
  EXPECT_EQ(h(std::nan("")), 0x7FFFu);
  EXPECT_EQ(h(1.0 + std::ldexp(1, -11)), interp::floatToHalf(1.0f + std::ldexp(1.0f, -11)));
  EXPECT_EQ(interp::encodeSmallFloat(DType::F16, 1.0 + 3 * std::ldexp(1, -11),
                                     interp::Rounding::TowardZero),
            0x3C01u);
  EXPECT_EQ(interp::decodeSmallFloat(DType::F16, 0x0001), std::ldexp(1, -24));
  EXPECT_TRUE(std::isinf(interp::decodeSmallFloat(DType::F16, 0xFC00)));
  EXPECT_LT(interp::decodeSmallFloat(DType::F16, 0xFC00), 0);
}

TEST(InterpNumerics, Bf16AndFp8Encodings) {
  using interp::encodeSmallFloat;
  EXPECT_EQ(interp::floatToBf16(1.0f), 0x3F80u);
  EXPECT_EQ(interp::floatToBf16(1.0f + std::ldexp(1.0f, -8)), 0x3F80u);
  EXPECT_EQ(interp::floatToBf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3F82u);
  EXPECT_EQ(interp::floatToBf16(3.4028235e38f), 0x7F80u); // FLT_MAX rounds up to inf
  EXPECT_EQ(encodeSmallFloat(DType::BF16, 1.0 + 3 * std::ldexp(1, -8)), 0x3F82u);
  // fp8e4nv: no infinity, max 448, saturating conversion (cvt.rn.satfinite).
  EXPECT_EQ(encodeSmallFloat(DType::F8E4M3, 1.0), 0x38u);
  EXPECT_EQ(encodeSmallFloat(DType::F8E4M3, 448.0), 0x7Eu);
  EXPECT_EQ(encodeSmallFloat(DType::F8E4M3, 464.0), 0x7Eu); // tie rounds to 448 (even)
  EXPECT_EQ(encodeSmallFloat(DType::F8E4M3, 1e6), 0x7Eu);
  EXPECT_EQ(encodeSmallFloat(DType::F8E4M3, -1e6), 0xFEu);
  EXPECT_EQ(encodeSmallFloat(DType::F8E4M3, INFINITY), 0x7Eu);
  EXPECT_EQ(encodeSmallFloat(DType::F8E4M3, std::ldexp(1, -9)), 0x01u);
  EXPECT_TRUE(std::isnan(interp::decodeSmallFloat(DType::F8E4M3, 0x7F)));
  EXPECT_EQ(interp::decodeSmallFloat(DType::F8E4M3, 0x7E), 448.0);
  // fp8e5: max 57344.
  EXPECT_EQ(encodeSmallFloat(DType::F8E5M2, 1.0), 0x3Cu);
  EXPECT_EQ(encodeSmallFloat(DType::F8E5M2, 57344.0), 0x7Bu);
  EXPECT_EQ(encodeSmallFloat(DType::F8E5M2, 1e9), 0x7Bu);
  EXPECT_EQ(encodeSmallFloat(DType::F8E5M2, 1.25), 0x3Du);
  EXPECT_EQ(encodeSmallFloat(DType::F8E5M2, 1.125), 0x3Cu); // tie -> even
  // Every fp16 and fp8 encoding survives decode + encode (NaNs excepted).
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    double v = interp::decodeSmallFloat(DType::F16, bits);
    if (!std::isnan(v)) {
      ASSERT_EQ(encodeSmallFloat(DType::F16, v), bits) << bits;
    }
  }
  for (DType t : {DType::F8E4M3, DType::F8E5M2}) {
    for (uint32_t bits = 0; bits < 0x100; ++bits) {
      double v = interp::decodeSmallFloat(t, bits);
      if (!std::isnan(v) && !std::isinf(v)) {
        ASSERT_EQ(encodeSmallFloat(t, v), bits) << bits;
      }
    }
  }
}

TEST(InterpNumerics, FloatToIntTruncatesAndSaturatesLikeCvtRzi) {
  std::vector<float> in{3.7f, -3.7f, 1e10f, -1e10f, NAN, 2147483520.0f, -0.5f, 126.9f};
  auto i32 = runCast<float, int32_t>(DType::F32, DType::I32, in);
  EXPECT_EQ(i32, (std::vector<int32_t>{3, -3, 2147483647, -2147483647 - 1, 0, 2147483520, 0, 126}));
  auto u8 = runCast<float, uint8_t>(DType::F32, DType::U8, {-5.0f, 300.0f, 254.9f, NAN});
  EXPECT_EQ(u8, (std::vector<uint8_t>{0, 255, 254, 0}));
  auto i8 = runCast<float, int8_t>(DType::F32, DType::I8, {200.5f, -200.5f, -128.9f});
  EXPECT_EQ(i8, (std::vector<int8_t>{127, -128, -128}));
  auto b = runCast<float, uint8_t>(DType::F32, DType::I1, {0.0f, -0.0f, 0.25f, NAN});
  EXPECT_EQ(b, (std::vector<uint8_t>{0, 0, 1, 1}));
}

TEST(InterpNumerics, IntCastsWrapExtendAndRoundToFloat) {
  EXPECT_EQ((runCast<int32_t, uint8_t>(DType::I32, DType::U8, {-1, 300, 255})),
            (std::vector<uint8_t>{255, 44, 255}));
  EXPECT_EQ((runCast<int32_t, int8_t>(DType::I32, DType::I8, {300, 128, -129})),
            (std::vector<int8_t>{44, -128, 127}));
  EXPECT_EQ((runCast<uint32_t, int64_t>(DType::U32, DType::I64, {0xFFFFFFFFu})),
            (std::vector<int64_t>{4294967295LL}));
  EXPECT_EQ((runCast<int32_t, int64_t>(DType::I32, DType::I64, {-2})), (std::vector<int64_t>{-2}));
  EXPECT_EQ((runCast<int32_t, uint8_t>(DType::I32, DType::I1, {0, 2, -1})),
            (std::vector<uint8_t>{0, 1, 1}));
  // int -> fp32 rounds to nearest even: 2^24 + 1 ties down, 2^24 + 3 ties up.
  EXPECT_EQ((runCast<int32_t, float>(DType::I32, DType::F32, {16777217, 16777219})),
            (std::vector<float>{16777216.0f, 16777220.0f}));
  EXPECT_EQ((runCast<int32_t, uint16_t>(DType::I32, DType::F16, {2049, 2051, 70000})),
            (std::vector<uint16_t>{0x6800, 0x6802, 0x7C00}));
}

TEST(InterpNumerics, FloatCastsRoundOnceAndHonourRtz) {
  float tie = 1.0f + std::ldexp(1.0f, -11), above = 1.0f + 3 * std::ldexp(1.0f, -11);
  EXPECT_EQ((runCast<float, uint16_t>(DType::F32, DType::F16, {tie, above, 1e6f, -1e-9f})),
            (std::vector<uint16_t>{0x3C00, 0x3C02, 0x7C00, 0x8000}));
  EXPECT_EQ((runCast<float, uint16_t>(DType::F32, DType::F16, {above, 1e6f}, "rtz")),
            (std::vector<uint16_t>{0x3C01, 0x7BFF}));
  EXPECT_EQ((runCast<float, uint16_t>(DType::F32, DType::BF16, {1.0f + 3 * std::ldexp(1.0f, -8)})),
            (std::vector<uint16_t>{0x3F82}));
  EXPECT_EQ((runCast<uint16_t, float>(DType::F16, DType::F32, {0x3555, 0x0001})),
            (std::vector<float>{float(interp::decodeSmallFloat(DType::F16, 0x3555)),
                                std::ldexp(1.0f, -24)}));
  EXPECT_EQ((runCast<uint16_t, uint8_t>(DType::F16, DType::F8E4M3, {0x5F00 /*448*/, 0x7C00})),
            (std::vector<uint8_t>{0x7E, 0x7E}));
  // fp64 -> fp32 rounds once: 1 + 2^-24 + 2^-50 is just above the tie and rounds up; the
  // exact tie 1 + 2^-24 rounds to even (1).
  EXPECT_EQ((runCast<double, float>(
                DType::F64, DType::F32,
                {1.0 + std::ldexp(1, -24) + std::ldexp(1, -50), 1.0 + std::ldexp(1, -24)})),
            (std::vector<float>{1.0f + std::ldexp(1.0f, -23), 1.0f}));
}

TEST(InterpNumerics, IntegerArithmeticWrapsAndDividesLikeC) {
  const int32_t mx = 2147483647, mn = -2147483647 - 1;
  EXPECT_EQ(runBinary<int32_t>(OpCode::Add, DType::I32, {mx, -7, 5}, {1, 2, -9}),
            (std::vector<int32_t>{mn, -5, -4}));
  EXPECT_EQ(runBinary<int32_t>(OpCode::Mul, DType::I32, {65536, -3}, {65536, 7}),
            (std::vector<int32_t>{0, -21}));
  EXPECT_EQ(runBinary<int32_t>(OpCode::Div, DType::I32, {-7, 7, mn, 5}, {2, -2, -1, 0}),
            (std::vector<int32_t>{-3, -3, mn, -1}));
  EXPECT_EQ(runBinary<int32_t>(OpCode::Rem, DType::I32, {-7, 7, mn, 5}, {2, -2, -1, 0}),
            (std::vector<int32_t>{-1, 1, 0, 5}));
  EXPECT_EQ(runBinary<int32_t>(OpCode::FloorDiv, DType::I32, {-7, 7, 6, -6}, {2, -2, 3, 3}),
            (std::vector<int32_t>{-4, -4, 2, -2}));
  EXPECT_EQ(runBinary<uint32_t>(OpCode::Sub, DType::U32, {0u, 5u}, {1u, 3u}),
            (std::vector<uint32_t>{4294967295u, 2u}));
  EXPECT_EQ(runBinary<uint32_t>(OpCode::Div, DType::U32, {4294967295u, 9u}, {2u, 0u}),
            (std::vector<uint32_t>{2147483647u, 4294967295u}));
  EXPECT_EQ(runBinary<int32_t>(OpCode::Shr, DType::I32, {-8, -8, 8}, {1, 40, 40}),
            (std::vector<int32_t>{-4, -1, 0}));
  EXPECT_EQ(runBinary<uint32_t>(OpCode::Shr, DType::U32, {0x80000000u}, {31u}),
            (std::vector<uint32_t>{1u}));
  EXPECT_EQ(runBinary<int32_t>(OpCode::Shl, DType::I32, {1, 1, 3}, {31, 32, 2}),
            (std::vector<int32_t>{mn, 0, 12}));
  EXPECT_EQ(runBinary<int8_t>(OpCode::Add, DType::I8, {127, -128}, {1, -1}),
            (std::vector<int8_t>{-128, 127}));
  EXPECT_EQ(runBinary<uint32_t>(OpCode::Umulhi, DType::U32, {0xFFFFFFFFu, 0x10000u},
                                {0xFFFFFFFFu, 0x10000u}),
            (std::vector<uint32_t>{0xFFFFFFFEu, 1u}));
  EXPECT_EQ(runBinary<int32_t>(OpCode::Xor, DType::I32, {0xF0, -1}, {0xFF, 5}),
            (std::vector<int32_t>{0x0F, -6}));
}

TEST(InterpNumerics, FloatArithmeticRoundsPerOpInItsType) {
  // fp16: 2048 + 1 is not representable and rounds to even (2048); in fp32 it would be 2049.
  uint16_t h2048 = 0x6800, h1 = 0x3C00;
  EXPECT_EQ(runBinary<uint16_t>(OpCode::Add, DType::F16, {h2048, 0x6801}, {h1, h1}),
            (std::vector<uint16_t>{0x6800, 0x6802}));
  EXPECT_EQ(runBinary<float>(OpCode::Div, DType::F32, {1.0f, 1.0f}, {3.0f, 0.0f}),
            (std::vector<float>{1.0f / 3.0f, INFINITY}));
  EXPECT_EQ(runBinary<float>(OpCode::Rem, DType::F32, {-7.5f, 7.5f}, {2.0f, -2.0f}),
            (std::vector<float>{-1.5f, 1.5f}));
  // max/min: NaN is ignored (tl.maximum's default), -0 < +0.
  auto mx = runBinary<float>(OpCode::Max, DType::F32, {NAN, 1.0f, -0.0f}, {2.0f, NAN, 0.0f});
  EXPECT_EQ(mx[0], 2.0f);
  EXPECT_EQ(mx[1], 1.0f);
  EXPECT_EQ(bitsOf(mx[2]), 0u);
  auto mn = runBinary<float>(OpCode::Min, DType::F32, {-0.0f}, {0.0f});
  EXPECT_EQ(bitsOf(mn[0]), 0x80000000u);
}

TEST(InterpNumerics, ComparisonsAndSelect) {
  TestKernel k("cmp");
  Value* pa = k.arg("a", Type::ptr(DType::U32));
  Value* pf = k.arg("f", Type::ptr(DType::F32));
  Value* po = k.arg("out", Type::ptr(DType::I32));
  Value* a = loadAll(k.b, pa, 4);
  Value* f = loadAll(k.b, pf, 4);
  Value* one = k.b.splat(k.b.constInt(1, Type::scalar(DType::U32)), {4});
  Value* aLtOne = k.b.cmp("lt", a, one); // unsigned: 0xFFFFFFFF is not < 1
  Value* fNe = k.b.cmp("ne", f, f);      // only NaN != itself
  Value* fGe = k.b.cmp("ge", f, k.b.splat(k.b.constFloat(0.0, Type::scalar(DType::F32)), {4}));
  auto i32 = [&](Value* c) {
    return k.b.create1(OpCode::Cast, {c}, Type::tensor(DType::I32, {4}));
  };
  Value* packed = k.b.binary(
      OpCode::Add, i32(aLtOne),
      k.b.binary(OpCode::Add, k.b.binary(OpCode::Mul, i32(fNe), k.b.splat(k.b.i32(10), {4})),
                 k.b.binary(OpCode::Mul, i32(fGe), k.b.splat(k.b.i32(100), {4}))));
  Value* sel =
      k.b.create1(OpCode::Select, {fGe, packed, k.b.splat(k.b.i32(-1), {4})}, packed->type());
  storeAll(k.b, po, sel);
  k.b.ret();
  std::vector<uint32_t> av{0u, 0xFFFFFFFFu, 1u, 0u};
  std::vector<float> fv{1.0f, -1.0f, NAN, -0.0f};
  std::vector<int32_t> out(4);
  k.run({1}, {buf(av), buf(fv), buf(out)});
  EXPECT_EQ(out, (std::vector<int32_t>{101, -1, -1, 101}));
}

TEST(InterpNumerics, MathFunctions) {
  std::vector<float> in{0.5f, 1.0f, 2.0f, 4.0f};
  auto exp = runUnary<float>(OpCode::Exp, DType::F32, in);
  auto sqrt = runUnary<float>(OpCode::Sqrt, DType::F32, in);
  auto rsqrt = runUnary<float>(OpCode::Rsqrt, DType::F32, in);
  auto sig = runUnary<float>(OpCode::Sigmoid, DType::F32, in);
  auto log2 = runUnary<float>(OpCode::Log2, DType::F32, in);
  auto erf = runUnary<float>(OpCode::Erf, DType::F32, in);
  for (size_t i = 0; i < in.size(); ++i) {
    EXPECT_NEAR(exp[i], std::exp(double(in[i])), 1e-6 * std::exp(double(in[i])));
    EXPECT_EQ(sqrt[i], std::sqrt(in[i])); // sqrt is correctly rounded
    EXPECT_NEAR(rsqrt[i], 1.0 / std::sqrt(double(in[i])), 1e-6);
    EXPECT_NEAR(sig[i], 1.0 / (1.0 + std::exp(-double(in[i]))), 1e-6);
    EXPECT_NEAR(log2[i], std::log2(double(in[i])), 1e-6);
    EXPECT_NEAR(erf[i], std::erf(double(in[i])), 1e-6);
  }
  EXPECT_EQ(runUnary<float>(OpCode::Floor, DType::F32, {-1.5f, 1.5f}),
            (std::vector<float>{-2.0f, 1.0f}));
  EXPECT_EQ(runUnary<float>(OpCode::Ceil, DType::F32, {-1.5f, 1.5f}),
            (std::vector<float>{-1.0f, 2.0f}));
  EXPECT_EQ(runUnary<int32_t>(OpCode::Abs, DType::I32, {-5, 5, -2147483647 - 1}),
            (std::vector<int32_t>{5, 5, -2147483647 - 1}));
  EXPECT_EQ(runUnary<int32_t>(OpCode::Neg, DType::I32, {-5, -2147483647 - 1}),
            (std::vector<int32_t>{5, -2147483647 - 1}));
  EXPECT_EQ(runUnary<int32_t>(OpCode::Not, DType::I32, {0, 5}), (std::vector<int32_t>{-1, -6}));
  // fp16 exp: computed exactly, then one rounding to fp16.
  auto hexp = runUnary<uint16_t>(OpCode::Exp, DType::F16, {0x3C00});
  EXPECT_EQ(hexp[0], interp::encodeSmallFloat(DType::F16, std::exp(1.0)));
}

TEST(InterpNumerics, FmaRoundsOnce) {
  TestKernel k("fma");
  Value* pa = k.arg("a", Type::ptr(DType::F32));
  Value* po = k.arg("out", Type::ptr(DType::F32));
  Value* a = loadAll(k.b, pa, 1);
  Value* negOne = k.b.splat(k.b.constFloat(-1.0, Type::scalar(DType::F32)), {1});
  storeAll(k.b, po, k.b.create1(OpCode::Fma, {a, a, negOne}, a->type()));
  k.b.ret();
  float x = 1.0f + std::ldexp(1.0f, -12);
  std::vector<float> in{x}, out(1);
  k.run({1}, {buf(in), buf(out)});
  // x*x - 1 = 2^-11 + 2^-24 exactly; a separate multiply would round away the 2^-24.
  EXPECT_EQ(out[0], std::ldexp(1.0f, -11) + std::ldexp(1.0f, -24));
}

// ---------------------------------------------------------------------------------------------
// Shape ops
// ---------------------------------------------------------------------------------------------

TEST(InterpShape, ReshapePermuteBroadcastExpandJoinSplitCat) {
  TestKernel k("shapes");
  Value* po = k.arg("out", Type::ptr(DType::I32));
  Builder& b = k.b;
  Value* x = reshape(b, b.arange(0, 24), {2, 3, 4});
  Value* perm = b.create1(OpCode::Permute, {x}, Type::tensor(DType::I32, {4, 2, 3}),
                          {{"order", std::vector<int64_t>{2, 0, 1}}});
  Value* col = reshape(b, b.arange(0, 3), {3, 1});
  Value* bc = b.create1(OpCode::Broadcast, {col}, Type::tensor(DType::I32, {3, 4}));
  Value* row = b.create1(OpCode::ExpandDims, {b.arange(10, 14)}, Type::tensor(DType::I32, {1, 4}),
                         {{"axis", int64_t(0)}});
  Value* rowB = b.create1(OpCode::Broadcast, {row}, Type::tensor(DType::I32, {3, 4}));
  Value* joined = b.create1(OpCode::Join, {b.arange(0, 4), b.arange(100, 104)},
                            Type::tensor(DType::I32, {4, 2}));
  Op* split = b.create(OpCode::Split, {joined},
                       {Type::tensor(DType::I32, {4}), Type::tensor(DType::I32, {4})});
  Value* cat =
      b.create1(OpCode::Cat, {split->result(1), split->result(0)}, Type::tensor(DType::I32, {8}));
  // out = perm (24) | bc + rowB (12) | joined (8) | cat (8)
  Value* all = b.create1(
      OpCode::Cat, {reshape(b, perm, {24}), reshape(b, b.binary(OpCode::Add, bc, rowB), {12})},
      Type::tensor(DType::I32, {36}));
  Value* tail =
      b.create1(OpCode::Cat, {reshape(b, joined, {8}), cat}, Type::tensor(DType::I32, {16}));
  storeAll(b, po, b.create1(OpCode::Cat, {all, tail}, Type::tensor(DType::I32, {52})));
  b.ret();
  std::vector<int32_t> out(52, -1);
  k.run({1}, {buf(out)});
  std::vector<int32_t> ref;
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 2; ++j)
      for (int l = 0; l < 3; ++l) ref.push_back(j * 12 + l * 4 + i); // perm[i][j][l] = x[j][l][i]
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) ref.push_back(i + 10 + j);
  for (int i = 0; i < 4; ++i) {
    ref.push_back(i);
    ref.push_back(100 + i);
  }
  for (int i = 0; i < 4; ++i) ref.push_back(100 + i);
  for (int i = 0; i < 4; ++i) ref.push_back(i);
  EXPECT_EQ(out, ref);
}

// ---------------------------------------------------------------------------------------------
// Reductions, scans, dot
// ---------------------------------------------------------------------------------------------

namespace {

/// Adds a combine region (a, b) -> a `code` b to a reduce/scan op over f32 scalars.
void addCombine(Op* op, OpCode code, DType t) {
  Block* body = op->addRegion();
  Value* a = body->addArg(Type::scalar(t));
  Value* c = body->addArg(Type::scalar(t));
  Builder rb(body);
  rb.create(OpCode::Yield, {rb.binary(code, a, c)}, {});
}

} // namespace

TEST(InterpReduce, BuiltinsCustomAndArgWithTies) {
  TestKernel k("reduce");
  Value* px = k.arg("x", Type::ptr(DType::F32));
  Value* po = k.arg("out", Type::ptr(DType::F32));
  Value* pi = k.arg("idx", Type::ptr(DType::I32));
  Builder& b = k.b;
  Value* x = reshape(b, loadAll(b, px, 12), {3, 4});
  Type row3 = Type::tensor(DType::F32, {3});
  Value* sum = b.create1(OpCode::Reduce, {x}, row3, {{"axis", int64_t(1)}, {"kind", "sum"}});
  Value* mx = b.create1(OpCode::Reduce, {x}, Type::tensor(DType::F32, {4}),
                        {{"axis", int64_t(0)}, {"kind", "max"}});
  Op* prod = b.create(OpCode::Reduce, {x}, {row3}, {{"axis", int64_t(1)}, {"kind", "custom"}});
  addCombine(prod, OpCode::Mul, DType::F32);
  Value* amax = b.create1(OpCode::Reduce, {x}, Type::tensor(DType::I32, {3}),
                          {{"axis", int64_t(1)}, {"kind", "argmax"}});
  Value* amin = b.create1(OpCode::Reduce, {x}, Type::tensor(DType::I32, {3}),
                          {{"axis", int64_t(1)}, {"kind", "argmin"}});
  Value* total = b.create1(OpCode::Reduce, {reshape(b, x, {12})}, Type::scalar(DType::F32),
                           {{"axis", int64_t(0)}, {"kind", "sum"}});
  Value* f = b.create1(OpCode::Cat, {sum, prod->result()}, Type::tensor(DType::F32, {6}));
  Value* g = b.create1(OpCode::Cat, {f, mx}, Type::tensor(DType::F32, {10}));
  storeAll(b, po, g);
  b.store(b.addPtr(po, b.i32(10)), total);
  storeAll(b, pi, b.create1(OpCode::Cat, {amax, amin}, Type::tensor(DType::I32, {6})));
  b.ret();
  std::vector<float> xv{3, 7, 7, 1, /**/ 5, 1, 1, 1, /**/ -2, 0.5, 4, 4};
  std::vector<float> out(11);
  std::vector<int32_t> idx(6);
  k.run({1}, {buf(xv), buf(out), buf(idx)});
  EXPECT_EQ(out, (std::vector<float>{18, 8, 6.5, 147, 5, -16, 5, 7, 7, 4, 32.5}));
  EXPECT_EQ(idx, (std::vector<int32_t>{1, 0, 2, /*argmin*/ 3, 1, 0}));
}

TEST(InterpReduce, Fp32SumAccumulatesInOrder) {
  // 1e8 + 1 + 1 + ... : in order, each 1 is lost against 1e8 in fp32 (ulp 8).
  TestKernel k("ordered_sum");
  Value* px = k.arg("x", Type::ptr(DType::F32));
  Value* po = k.arg("out", Type::ptr(DType::F32));
  Value* x = loadAll(k.b, px, 8);
  Value* s = k.b.create1(OpCode::Reduce, {x}, Type::scalar(DType::F32),
                         {{"axis", int64_t(0)}, {"kind", "sum"}});
  k.b.store(po, s);
  k.b.ret();
  std::vector<float> xv{1e8f, 1, 1, 1, 1, 1, 1, 1}, out(1);
  k.run({1}, {buf(xv), buf(out)});
  EXPECT_EQ(out[0], 1e8f);
}

TEST(InterpReduce, ScansForwardReverseAndCustom) {
  TestKernel k("scan");
  Value* px = k.arg("x", Type::ptr(DType::I32));
  Value* po = k.arg("out", Type::ptr(DType::I32));
  Builder& b = k.b;
  Value* x = reshape(b, loadAll(b, px, 8), {2, 4});
  Type t = x->type();
  Value* fwd = b.create1(OpCode::Scan, {x}, t, {{"axis", int64_t(1)}, {"kind", "sum"}});
  Value* rev = b.create1(OpCode::Scan, {x}, t,
                         {{"axis", int64_t(1)}, {"kind", "sum"}, {"reverse", int64_t(1)}});
  Op* cmax = b.create(OpCode::Scan, {x}, {t}, {{"axis", int64_t(0)}, {"kind", "custom"}});
  addCombine(cmax, OpCode::Max, DType::I32);
  Value* a = b.create1(OpCode::Cat, {reshape(b, fwd, {8}), reshape(b, rev, {8})},
                       Type::tensor(DType::I32, {16}));
  storeAll(
      b, po,
      b.create1(OpCode::Cat, {a, reshape(b, cmax->result(), {8})}, Type::tensor(DType::I32, {24})));
  b.ret();
  std::vector<int32_t> xv{1, 2, 3, 4, 10, -20, 30, -40}, out(24);
  k.run({1}, {buf(xv), buf(out)});
  EXPECT_EQ(out, (std::vector<int32_t>{1,  3, 6, 10, 10,  -10, 20,  -20,  // forward
                                       10, 9, 7, 4,  -20, -30, -10, -40,  // reverse
                                       1,  2, 3, 4,  10,  2,   30,  4})); // running max over rows
}

namespace {

/// out = dot(a MxK, b KxN, acc) with a/b of `in` dtype (storage S) and fp32 acc/out.
template <typename S>
std::vector<float> runDot(DType in, int64_t M, int64_t K, int64_t N, const std::vector<S>& a,
                          const std::vector<S>& bv, const std::vector<float>& acc,
                          const std::string& precision = "ieee") {
  TestKernel k("dot");
  Value* pa = k.arg("a", Type::ptr(in));
  Value* pb = k.arg("b", Type::ptr(in));
  Value* pc = k.arg("c", Type::ptr(DType::F32));
  Value* po = k.arg("out", Type::ptr(DType::F32));
  Builder& b = k.b;
  Value* av = reshape(b, loadAll(b, pa, M * K), {M, K});
  Value* bm = reshape(b, loadAll(b, pb, K * N), {K, N});
  Value* cv = reshape(b, loadAll(b, pc, M * N), {M, N});
  storeAll(b, po,
           b.create1(OpCode::Dot, {av, bm, cv}, Type::tensor(DType::F32, {M, N}),
                     {{"input_precision", precision}}));
  b.ret();
  std::vector<S> ca = a, cb = bv;
  std::vector<float> cc = acc, out(size_t(M * N));
  k.run({1}, {buf(ca), buf(cb), buf(cc), buf(out)});
  return out;
}

} // namespace

TEST(InterpDot, Fp16InputsAccumulateInFp32) {
  const int64_t M = 16, K = 32, N = 8;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-2, 2);
  std::vector<uint16_t> a(M * K), bv(K * N);
  for (auto& v : a) v = interp::floatToHalf(dist(rng));
  for (auto& v : bv) v = interp::floatToHalf(dist(rng));
  std::vector<float> acc(M * N);
  for (auto& v : acc) v = dist(rng);
  auto out = runDot<uint16_t>(DType::F16, M, K, N, a, bv, acc);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double ref = acc[m * N + n];
      for (int64_t kk = 0; kk < K; ++kk)
        ref += double(interp::halfToFloat(a[m * K + kk])) * interp::halfToFloat(bv[kk * N + n]);
      EXPECT_NEAR(out[m * N + n], ref, 1e-4) << m << "," << n;
    }
  // 4096 ones: an fp16 accumulator would stop at 2048; fp32 counts exactly.
  const int64_t bigK = 4096;
  std::vector<uint16_t> ones(bigK, 0x3C00);
  auto big = runDot<uint16_t>(DType::F16, 1, bigK, 1, ones, ones, {0.0f});
  EXPECT_EQ(big[0], 4096.0f);
}

TEST(InterpDot, Tf32TruncatesFp32InputsAndIeeeDoesNot) {
  float x = 1.0f + std::ldexp(1.0f, -20); // below tf32's 10-bit mantissa
  auto ieee = runDot<float>(DType::F32, 1, 1, 1, {x}, {1.0f}, {0.0f}, "ieee");
  auto tf32 = runDot<float>(DType::F32, 1, 1, 1, {x}, {1.0f}, {0.0f}, "tf32");
  EXPECT_EQ(ieee[0], x);
  EXPECT_EQ(tf32[0], 1.0f);
}

// ---------------------------------------------------------------------------------------------
// Control flow
// ---------------------------------------------------------------------------------------------

TEST(InterpControl, ForWithIfAndWhileLoops) {
  TestKernel k("control");
  Value* po = k.arg("out", Type::ptr(DType::I32));
  Value* pn = k.arg("n", Type::scalar(DType::I32));
  Builder& b = k.b;
  Type i32 = Type::scalar(DType::I32);
  // for i in range(0, n): acc += i if i % 2 == 0 else -1
  Op* loop = b.create(OpCode::For, {b.i32(0), pn, b.i32(1), b.i32(0)}, {i32});
  Block* body = loop->addRegion();
  Value* iv = body->addArg(i32, "i");
  Value* acc = body->addArg(i32, "acc");
  {
    Builder lb(body);
    Value* even = lb.cmp("eq", lb.binary(OpCode::Rem, iv, lb.i32(2)), lb.i32(0));
    Op* ifOp = lb.create(OpCode::If, {even}, {i32});
    Builder tb(ifOp->addRegion());
    tb.create(OpCode::Yield, {tb.binary(OpCode::Add, acc, iv)}, {});
    Builder eb(ifOp->addRegion());
    eb.create(OpCode::Yield, {eb.binary(OpCode::Sub, acc, eb.i32(1))}, {});
    lb.create(OpCode::Yield, {ifOp->result()}, {});
  }
  b.store(po, loop->result());
  // Collatz steps from 27: while x != 1: x = x / 2 if even else 3x + 1; steps += 1
  Op* wh = b.create(OpCode::While, {b.i32(27), b.i32(0)}, {i32, i32});
  Block* before = wh->addRegion();
  {
    Value* x = before->addArg(i32);
    Value* steps = before->addArg(i32);
    Builder bb(before);
    bb.create(OpCode::Condition, {bb.cmp("ne", x, bb.i32(1)), x, steps}, {});
  }
  Block* after = wh->addRegion();
  {
    Value* x = after->addArg(i32);
    Value* steps = after->addArg(i32);
    Builder ab(after);
    Value* even = ab.cmp("eq", ab.binary(OpCode::Rem, x, ab.i32(2)), ab.i32(0));
    Value* half = ab.binary(OpCode::Div, x, ab.i32(2));
    Value* up = ab.binary(OpCode::Add, ab.binary(OpCode::Mul, x, ab.i32(3)), ab.i32(1));
    Value* next = ab.create1(OpCode::Select, {even, half, up}, i32);
    ab.create(OpCode::Yield, {next, ab.binary(OpCode::Add, steps, ab.i32(1))}, {});
  }
  b.store(b.addPtr(po, b.i32(1)), wh->result(1));
  b.store(b.addPtr(po, b.i32(2)), wh->result(0));
  b.ret();
  std::vector<int32_t> out(3, -1);
  k.run({1}, {buf(out), InterpArg::integer(10)});
  EXPECT_EQ(out, (std::vector<int32_t>{0 + 2 + 4 + 6 + 8 - 5, 111, 1}));
  k.run({1}, {buf(out), InterpArg::integer(0)}); // zero-trip loop yields the initial value
  EXPECT_EQ(out[0], 0);
}

TEST(InterpControl, ZeroStepForLoopIsAnError) {
  TestKernel k("zero_step", "for i in range(0, n, step):\n");
  Value* step = k.arg("step", Type::scalar(DType::I32));
  k.at(1, 1);
  Op* loop = k.b.create(OpCode::For, {k.b.i32(0), k.b.i32(4), step}, {});
  loop->addRegion()->addArg(Type::scalar(DType::I32));
  k.b.ret();
  std::string err = k.runExpectingError({1}, {InterpArg::integer(0)});
  EXPECT_NE(err.find("zero_step.py:1:1: error: for loop with step 0 never terminates"),
            std::string::npos)
      << err;
}

// ---------------------------------------------------------------------------------------------
// Atomics, descriptors, print, assert
// ---------------------------------------------------------------------------------------------

TEST(InterpMemory, AtomicsAcrossProgramsAreSequential) {
  TestKernel k("atomics");
  Value* counter = k.arg("counter", Type::ptr(DType::I32));
  Value* lock = k.arg("lock", Type::ptr(DType::I32));
  Value* olds = k.arg("olds", Type::ptr(DType::I32));
  Value* fmax = k.arg("fmax", Type::ptr(DType::F32));
  Builder& b = k.b;
  Value* pid = b.programId(0);
  Value* one = b.binary(OpCode::Add, pid, b.i32(1));
  Value* old =
      b.create1(OpCode::AtomicRMW, {counter, one}, Type::scalar(DType::I32), {{"kind", "add"}});
  b.store(b.addPtr(olds, pid), old);
  Value* casOld = b.create1(OpCode::AtomicCas, {lock, b.i32(0), one}, Type::scalar(DType::I32));
  b.store(b.addPtr(olds, b.binary(OpCode::Add, pid, b.i32(8))), casOld);
  // fmax[j] = max over programs of (pid - j), only for j < 3 (masked)
  Value* j = b.arange(0, 4);
  Value* vals = b.create1(OpCode::Cast, {b.binary(OpCode::Sub, b.splat(pid, {4}), j)},
                          Type::tensor(DType::F32, {4}));
  Value* m = b.cmp("lt", j, b.splat(b.i32(3), {4}));
  b.create(OpCode::AtomicRMW, {b.addPtr(b.splat(fmax, {4}), j), vals, m},
           {Type::tensor(DType::F32, {4})}, {{"kind", "max"}, {"has_mask", int64_t(1)}});
  b.ret();
  std::vector<int32_t> c{0}, l{0}, o(16, -1);
  std::vector<float> f(4, -100.0f);
  k.run({8}, {buf(c), buf(l), buf(o), buf(f)});
  EXPECT_EQ(c[0], 36);
  EXPECT_EQ(l[0], 1);
  EXPECT_EQ(o, (std::vector<int32_t>{0, 1, 3, 6, 10, 15, 21, 28, 0, 1, 1, 1, 1, 1, 1, 1}));
  EXPECT_EQ(f, (std::vector<float>{7, 6, 5, -100}));
}

TEST(InterpMemory, DescriptorLoadsClipToZeroAndStoresClip) {
  TestKernel k("desc");
  Type descT = Type::descriptor(DType::F32, {4, 8}, 2);
  Value* din = k.arg("in_desc", descT);
  Value* dout = k.arg("out_desc", descT);
  Value* flat = k.arg("flat", Type::ptr(DType::F32));
  Builder& b = k.b;
  Value* tile =
      b.create1(OpCode::DescLoad, {din, b.i32(8), b.i32(8)}, Type::tensor(DType::F32, {4, 8}));
  storeAll(b, flat, tile);
  Value* plus =
      b.binary(OpCode::Add, tile, b.splat(b.constFloat(1000.0, Type::scalar(DType::F32)), {4, 8}));
  b.create(OpCode::DescStore, {dout, plus, b.i32(8), b.i32(8)}, {});
  b.ret();
  std::vector<float> in(10 * 12), out(10 * 12, -1.0f), flatOut(32, -1.0f);
  for (size_t i = 0; i < in.size(); ++i) in[i] = float(i);
  k.run({1}, {InterpArg::descriptor(in.data(), in.size() * 4, {10, 12}, {12, 1}),
              InterpArg::descriptor(out.data(), out.size() * 4, {10, 12}, {12, 1}), buf(flatOut)});
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 8; ++c) {
      bool inside = 8 + r < 10 && 8 + c < 12;
      EXPECT_EQ(flatOut[r * 8 + c], inside ? in[(8 + r) * 12 + 8 + c] : 0.0f) << r << "," << c;
    }
  for (int r = 0; r < 10; ++r)
    for (int c = 0; c < 12; ++c) {
      bool written = r >= 8 && c >= 8;
      EXPECT_EQ(out[r * 12 + c], written ? in[r * 12 + c] + 1000 : -1.0f) << r << "," << c;
    }
}

TEST(InterpDebug, PrintWritesEveryElementWithProgramId) {
  TestKernel k("print");
  Value* px = k.arg("x", Type::ptr(DType::I32));
  Value* x = loadAll(k.b, px, 3);
  k.b.create(OpCode::Print, {x}, {}, {{"prefix", " x"}});
  k.b.ret();
  std::vector<int32_t> xv{5, -6, 7};
  testing::internal::CaptureStdout();
  k.run({2}, {buf(xv)});
  std::string printed = testing::internal::GetCapturedStdout();
  EXPECT_EQ(printed, "pid (0, 0, 0) idx [0]  x: 5\npid (0, 0, 0) idx [1]  x: -6\n"
                     "pid (0, 0, 0) idx [2]  x: 7\npid (1, 0, 0) idx [0]  x: 5\n"
                     "pid (1, 0, 0) idx [1]  x: -6\npid (1, 0, 0) idx [2]  x: 7\n");
}

TEST(InterpDebug, FailedAssertReportsLocationProgramAndElement) {
  TestKernel k("assert", "    tl.device_assert(offs < 3, \"offs must be small\")\n");
  Value* offs = k.b.arange(0, 4);
  k.at(1, 5);
  k.b.create(OpCode::Assert, {k.b.cmp("lt", offs, k.b.splat(k.b.i32(3), {4}))}, {},
             {{"message", "offs must be small"}});
  k.b.ret();
  std::string err = k.runExpectingError({1}, {});
  EXPECT_EQ(err, "assert.py:1:5: error: device assertion failed: offs must be small in program "
                 "(0, 0, 0), element [3]\n"
                 "      tl.device_assert(offs < 3, \"offs must be small\")\n"
                 "      ^");
}

// ---------------------------------------------------------------------------------------------
// TLX: shared-memory buffers
// ---------------------------------------------------------------------------------------------

namespace {

Value* view(Builder& b, Value* bufs, Value* index) {
  Type t = bufs->type();
  t.count = 1;
  return b.create1(OpCode::LocalView, {bufs, index}, t);
}

Value* zerosF32(Builder& b, std::vector<int64_t> shape) {
  return b.splat(b.constFloat(0.0, Type::scalar(DType::F32)), shape);
}

} // namespace

TEST(InterpTlx, LocalBuffersViewsTransposeSliceAndPoison) {
  TestKernel k("buffers", "    v = tlx.local_view(bufs, 2)\n");
  Value* px = k.arg("x", Type::ptr(DType::F32));
  Value* po = k.arg("out", Type::ptr(DType::F32));
  Builder& b = k.b;
  Value* bufs = b.create1(OpCode::LocalAlloc, {}, Type::buffer(DType::F32, {4, 8}, 2));
  Value* v1 = view(b, bufs, b.i32(1));
  Value* x = reshape(b, loadAll(b, px, 32), {4, 8});
  b.create(OpCode::LocalStore, {v1, x}, {});
  Value* back = b.create1(OpCode::LocalLoad, {v1}, Type::tensor(DType::F32, {4, 8}));
  Value* tv = b.create1(OpCode::LocalTrans, {v1}, Type::buffer(DType::F32, {8, 4}, 1));
  Value* t = b.create1(OpCode::LocalLoad, {tv}, Type::tensor(DType::F32, {8, 4}));
  Value* sv =
      b.create1(OpCode::LocalSlice, {v1}, Type::buffer(DType::F32, {2, 4}, 1),
                {{"offsets", std::vector<int64_t>{1, 2}}, {"sizes", std::vector<int64_t>{2, 4}}});
  Value* s = b.create1(OpCode::LocalLoad, {sv}, Type::tensor(DType::F32, {2, 4}));
  Value* a1 = b.create1(OpCode::Cat, {reshape(b, back, {32}), reshape(b, t, {32})},
                        Type::tensor(DType::F32, {64}));
  Value* a2 = b.create1(OpCode::Cat, {a1, reshape(b, s, {8})}, Type::tensor(DType::F32, {72}));
  storeAll(b, po, a2);
  b.ret();
  std::vector<float> xv(32), out(72);
  for (int i = 0; i < 32; ++i) xv[i] = float(i);
  k.run({1}, {buf(xv), buf(out)});
  for (int i = 0; i < 32; ++i) EXPECT_EQ(out[i], xv[i]);
  for (int r = 0; r < 8; ++r)
    for (int c = 0; c < 4; ++c) EXPECT_EQ(out[32 + r * 4 + c], xv[c * 8 + r]);
  for (int r = 0; r < 2; ++r)
    for (int c = 0; c < 4; ++c) EXPECT_EQ(out[64 + r * 4 + c], xv[(1 + r) * 8 + 2 + c]);

  // Reading shared memory that nothing wrote (garbage on the GPU) is reported.
  TestKernel fresh("fresh", "    x = tlx.local_load(bufs[0])\n");
  Value* fb = fresh.b.create1(OpCode::LocalAlloc, {}, Type::buffer(DType::F32, {4, 8}, 2));
  fresh.b.create(OpCode::LocalStore, {view(fresh.b, fb, fresh.b.i32(1)), zerosF32(fresh.b, {4, 8})},
                 {});
  fresh.at(1, 9);
  fresh.b.create1(OpCode::LocalLoad, {view(fresh.b, fb, fresh.b.i32(0))},
                  Type::tensor(DType::F32, {4, 8}));
  fresh.b.ret();
  EXPECT_EQ(fresh.runExpectingError({1}, {}),
            "fresh.py:1:9: error: local_load reads shared memory that nothing wrote (program (0, "
            "0, 0))\n"
            "      x = tlx.local_load(bufs[0])\n"
            "          ^");

  TestKernel bad("buffers", "    v = tlx.local_view(bufs, 2)\n");
  Value* bb = bad.b.create1(OpCode::LocalAlloc, {}, Type::buffer(DType::F32, {4, 8}, 2));
  bad.at(1, 9);
  view(bad.b, bb, bad.b.i32(2));
  bad.b.ret();
  EXPECT_EQ(bad.runExpectingError({1}, {}),
            "buffers.py:1:9: error: local_view index 2 is out of range for 2 buffers (valid: "
            "0..1) in program (0, 0, 0)\n"
            "      v = tlx.local_view(bufs, 2)\n"
            "          ^");
}

// ---------------------------------------------------------------------------------------------
// TLX: mbarriers and TMA in a single agent
// ---------------------------------------------------------------------------------------------

namespace {

Value* allocBarriers(Builder& b, int64_t count, int64_t arriveCount) {
  return b.create1(OpCode::AllocBarriers, {}, Type::barrier(count),
                   {{"arrive_count", arriveCount}});
}

} // namespace

TEST(InterpTlx, BarrierPhaseParity) {
  // A fresh barrier is in phase 0: waiting for parity 1 passes at once; after the one expected
  // arrival phase 0 completes and waiting for parity 0 passes.
  TestKernel k("parity");
  Value* po = k.arg("out", Type::ptr(DType::I32));
  Builder& b = k.b;
  Value* bar = view(b, allocBarriers(b, 1, 1), b.i32(0));
  b.create(OpCode::BarrierWait, {bar, b.i32(1)}, {});
  b.store(po, b.i32(1));
  b.create(OpCode::BarrierArrive, {bar}, {}, {{"arrive_count", int64_t(1)}});
  b.create(OpCode::BarrierWait, {bar, b.i32(0)}, {});
  b.store(b.addPtr(po, b.i32(1)), b.i32(2));
  b.ret();
  std::vector<int32_t> out(2, 0);
  k.run({1}, {buf(out)});
  EXPECT_EQ(out, (std::vector<int32_t>{1, 2}));
}

TEST(InterpTlx, WaitingOnAnIncompletePhaseIsADeadlock) {
  TestKernel k("hang", "    tlx.barrier_wait(bar, 0)\n");
  Builder& b = k.b;
  Value* bar = view(b, allocBarriers(b, 2, 2), b.i32(1));
  b.create(OpCode::BarrierArrive, {bar}, {}, {{"arrive_count", int64_t(1)}});
  k.at(1, 5);
  b.create(OpCode::BarrierWait, {bar, b.i32(0)}, {});
  b.ret();
  EXPECT_EQ(k.runExpectingError({1}, {}),
            "hang.py:1:5: error: deadlock in program (0, 0, 0): the program waits on barrier 1 "
            "for the phase of parity 0 to complete; the barrier is in phase 0 (parity 0): 1 of "
            "2 arrivals pending, 0 transaction bytes outstanding, and nothing else can make "
            "progress\n"
            "      tlx.barrier_wait(bar, 0)\n"
            "      ^\n"
            "note: arrived on the phase in progress: the program");
}

TEST(InterpTlx, TooManyArrivalsInAPhaseAreReported) {
  TestKernel k("over", "    tlx.barrier_arrive(bar, 2)\n");
  Builder& b = k.b;
  Value* bar = view(b, allocBarriers(b, 1, 1), b.i32(0));
  k.at(1, 5);
  b.create(OpCode::BarrierArrive, {bar}, {}, {{"arrive_count", int64_t(2)}});
  b.ret();
  std::string err = k.runExpectingError({1}, {});
  EXPECT_NE(err.find("over.py:1:5: error: over-arrival: barrier_arrive of 2 arrivals on barrier "
                     "0 in phase 0 (parity 0): 1 of 1 arrivals pending"),
            std::string::npos)
      << err;
}

namespace {

/// TMA-loads one [4, 8] box of a [10, 12] fp32 tensor at (row0, 0) into shared memory, waits on
/// the barrier and stores the tile. `expect` false leaves out barrier_expect_bytes.
/// `peekEarly` also stores the tile read before the wait to out[32..64).
void buildTmaLoad(TestKernel& k, int64_t row0, bool expect, bool peekEarly) {
  Type descT = Type::descriptor(DType::F32, {4, 8}, 2);
  Value* d = k.arg("desc", descT);
  Value* po = k.arg("out", Type::ptr(DType::F32));
  Builder& b = k.b;
  Value* smem =
      view(b, b.create1(OpCode::LocalAlloc, {}, Type::buffer(DType::F32, {4, 8}, 1)), b.i32(0));
  Value* bar = view(b, allocBarriers(b, 1, 1), b.i32(0));
  if (expect) b.create(OpCode::BarrierExpectBytes, {bar, b.i32(4 * 8 * 4)}, {});
  b.create(OpCode::AsyncDescLoad, {d, smem, bar, b.i32(row0), b.i32(0)}, {});
  Type tileT = Type::tensor(DType::F32, {4, 8});
  Value* early = peekEarly ? b.create1(OpCode::LocalLoad, {smem}, tileT) : nullptr;
  k.at(1, 5);
  b.create(OpCode::BarrierWait, {bar, b.i32(0)}, {});
  Value* tile = b.create1(OpCode::LocalLoad, {smem}, tileT);
  if (early)
    tile = b.create1(OpCode::Cat, {reshape(b, tile, {32}), reshape(b, early, {32})},
                     Type::tensor(DType::F32, {64}));
  storeAll(b, po, tile);
  b.ret();
}

} // namespace

TEST(InterpTlx, AsyncDescriptorLoadCompletesOnItsBarrier) {
  TestKernel k("tma", "    tlx.barrier_wait(bar, 0)\n");
  buildTmaLoad(k, /*row0=*/8, /*expect=*/true, /*peekEarly=*/false);
  std::vector<float> in(120), out(32, -1.0f);
  for (size_t i = 0; i < in.size(); ++i) in[i] = float(i);
  k.run({1}, {InterpArg::descriptor(in.data(), in.size() * 4, {10, 12}, {12, 1}), buf(out)});
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 8; ++c)
      EXPECT_EQ(out[r * 8 + c], 8 + r < 10 ? in[(8 + r) * 12 + c] : 0.0f) << r << "," << c;
}

TEST(InterpTlx, ReadingATmaBufferBeforeItsBarrierWaitIsARace) {
  TestKernel k("tma", "    tlx.barrier_wait(bar, 0)\n");
  buildTmaLoad(k, /*row0=*/8, /*expect=*/true, /*peekEarly=*/true);
  std::vector<float> in(120), out(64, -1.0f);
  std::string err = k.runExpectingError(
      {1}, {InterpArg::descriptor(in.data(), in.size() * 4, {10, 12}, {12, 1}), buf(out)});
  EXPECT_NE(err.find("error: local_load reads shared memory that async_desc_load by the program "
                     "is still writing"),
            std::string::npos)
      << err;
}

TEST(InterpTlx, TmaWithoutExpectedBytesNeverCompletesThePhase) {
  TestKernel k("tma", "    tlx.barrier_wait(bar, 0)\n");
  buildTmaLoad(k, 0, /*expect=*/false, /*peekEarly=*/false);
  std::vector<float> in(120), out(32);
  std::string err = k.runExpectingError(
      {1}, {InterpArg::descriptor(in.data(), in.size() * 4, {10, 12}, {12, 1}), buf(out)});
  EXPECT_NE(err.find("tma.py:1:5: error: deadlock in program (0, 0, 0): the program waits on "
                     "barrier 0 for the phase of parity 0 to complete; the barrier is in phase 0 "
                     "(parity 0): 1 of 1 arrivals pending, -128 transaction bytes outstanding"),
            std::string::npos)
      << err;
}

// ---------------------------------------------------------------------------------------------
// TLX: async_dot
// ---------------------------------------------------------------------------------------------

namespace {

/// A, B in shared memory; out = async_dot chained `chain` times through its accumulator, then
/// async_dot_wait. `useEarly` stores the un-waited result instead (an error).
void buildAsyncDot(TestKernel& k, int chain, bool useEarly) {
  const int64_t M = 16, K = 16, N = 8;
  Value* pa = k.arg("a", Type::ptr(DType::F16));
  Value* pb = k.arg("b", Type::ptr(DType::F16));
  Value* po = k.arg("out", Type::ptr(DType::F32));
  Builder& b = k.b;
  Value* as =
      view(b, b.create1(OpCode::LocalAlloc, {}, Type::buffer(DType::F16, {M, K}, 1)), b.i32(0));
  Value* bs =
      view(b, b.create1(OpCode::LocalAlloc, {}, Type::buffer(DType::F16, {K, N}, 1)), b.i32(0));
  b.create(OpCode::LocalStore, {as, reshape(b, loadAll(b, pa, M * K), {M, K})}, {});
  b.create(OpCode::LocalStore, {bs, reshape(b, loadAll(b, pb, K * N), {K, N})}, {});
  Type accT = Type::tensor(DType::F32, {M, N});
  Value* acc = zerosF32(b, {M, N});
  for (int i = 0; i < chain; ++i) acc = b.create1(OpCode::AsyncDot, {as, bs, acc}, accT);
  k.at(1, 5);
  if (useEarly) {
    storeAll(b, po, acc);
  } else {
    Value* done = b.create1(OpCode::AsyncDotWait, {acc}, accT, {{"pendings", int64_t(0)}});
    storeAll(b, po, done);
  }
  b.ret();
}

} // namespace

TEST(InterpTlx, AsyncDotChainsThroughPendingAccumulators) {
  TestKernel k("wgmma", "    tl.store(out_ptrs, acc)\n");
  buildAsyncDot(k, /*chain=*/2, /*useEarly=*/false);
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> dist(-4, 4);
  std::vector<uint16_t> a(16 * 16), bv(16 * 8);
  for (auto& v : a) v = interp::floatToHalf(float(dist(rng)) * 0.5f);
  for (auto& v : bv) v = interp::floatToHalf(float(dist(rng)) * 0.25f);
  std::vector<float> out(16 * 8);
  k.run({1}, {buf(a), buf(bv), buf(out)});
  for (int m = 0; m < 16; ++m)
    for (int n = 0; n < 8; ++n) {
      double ref = 0; // small multiples of 1/8: every sum is exact in fp32
      for (int kk = 0; kk < 16; ++kk)
        ref += double(interp::halfToFloat(a[m * 16 + kk])) * interp::halfToFloat(bv[kk * 8 + n]);
      EXPECT_EQ(out[m * 8 + n], float(2 * ref)) << m << "," << n;
    }
}

TEST(InterpTlx, UsingAnAsyncDotResultBeforeWaitingIsAnError) {
  TestKernel k("wgmma", "    tl.store(out_ptrs, acc)\n");
  buildAsyncDot(k, 1, /*useEarly=*/true);
  std::vector<uint16_t> a(16 * 16, 0x3C00), bv(16 * 8, 0x3C00);
  std::vector<float> out(16 * 8);
  std::string err = k.runExpectingError({1}, {buf(a), buf(bv), buf(out)});
  EXPECT_NE(err.find("reads the result of an async_dot that has not completed; wait for it with "
                     "async_dot_wait first (program (0, 0, 0))"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("note: the async_dot was issued here"), std::string::npos) << err;
}

// ---------------------------------------------------------------------------------------------
// TLX: async tasks as agents
// ---------------------------------------------------------------------------------------------

namespace {

const char* kPipelineSource = "with tlx.async_tasks():\n"
                              "    tlx.barrier_wait(full[s], phase)      # consumer\n"
                              "    tlx.barrier_wait(empty[s], phase ^ 1) # producer\n";

/// A two-stage producer/consumer pipeline over `iters` chunks of 8 floats: the producer task
/// loads each chunk into one of two shared buffers; the consumer (default task) sums them.
void buildPipeline(TestKernel& k, int64_t iters, bool forgetFullArrive) {
  Value* pin = k.arg("in", Type::ptr(DType::F32));
  Value* pout = k.arg("out", Type::ptr(DType::F32));
  Builder& b = k.b;
  Type i32 = Type::scalar(DType::I32);
  Value* bufs = b.create1(OpCode::LocalAlloc, {}, Type::buffer(DType::F32, {8}, 2));
  Value* full = allocBarriers(b, 2, 1);
  Value* empty = allocBarriers(b, 2, 1);
  Value* zeros = zerosF32(b, {8});
  Op* tasks = b.create(OpCode::AsyncTasks, {}, {});
  Builder tb(tasks->addRegion());
  Op* consumer = tb.create(OpCode::AsyncTask, {}, {},
                           {{"default", int64_t(1)}, {"name", std::string("consumer")}});
  Op* producer = tb.create(OpCode::AsyncTask, {}, {},
                           {{"num_warps", int64_t(4)}, {"name", std::string("producer")}});
  auto stageAndPhase = [&](Builder& lb, Value* i, bool invert) {
    Value* s = lb.binary(OpCode::Rem, i, lb.i32(2));
    Value* ph = lb.binary(OpCode::Rem, lb.binary(OpCode::Div, i, lb.i32(2)), lb.i32(2));
    if (invert) ph = lb.binary(OpCode::Xor, ph, lb.i32(1));
    return std::make_pair(s, ph);
  };
  {
    Builder cb(consumer->addRegion());
    Op* loop =
        cb.create(OpCode::For, {cb.i32(0), cb.i32(iters), cb.i32(1), zeros}, {zeros->type()});
    Block* body = loop->addRegion();
    Value* i = body->addArg(i32);
    Value* acc = body->addArg(zeros->type());
    Builder lb(body);
    auto [s, ph] = stageAndPhase(lb, i, false);
    lb.setLoc(SourceLoc{k.file, 2, 5});
    lb.create(OpCode::BarrierWait, {view(lb, full, s), ph}, {});
    Value* v = lb.create1(OpCode::LocalLoad, {view(lb, bufs, s)}, zeros->type());
    lb.create(OpCode::BarrierArrive, {view(lb, empty, s)}, {}, {{"arrive_count", int64_t(1)}});
    lb.create(OpCode::Yield, {lb.binary(OpCode::Add, acc, v)}, {});
    storeAll(cb, pout, loop->result());
  }
  {
    Builder pb(producer->addRegion());
    Op* loop = pb.create(OpCode::For, {pb.i32(0), pb.i32(iters), pb.i32(1)}, {});
    Block* body = loop->addRegion();
    Value* i = body->addArg(i32);
    Builder lb(body);
    auto [s, ph] = stageAndPhase(lb, i, true);
    lb.setLoc(SourceLoc{k.file, 3, 5});
    lb.create(OpCode::BarrierWait, {view(lb, empty, s), ph}, {});
    Value* offs = lb.binary(OpCode::Add, lb.splat(lb.binary(OpCode::Mul, i, lb.i32(8)), {8}),
                            lb.arange(0, 8));
    Value* x = lb.load(lb.addPtr(lb.splat(pin, {8}), offs));
    lb.create(OpCode::LocalStore, {view(lb, bufs, s), x}, {});
    if (!forgetFullArrive)
      lb.create(OpCode::BarrierArrive, {view(lb, full, s)}, {}, {{"arrive_count", int64_t(1)}});
    lb.create(OpCode::Yield, {}, {});
  }
  b.ret();
}

} // namespace

TEST(InterpTasks, ProducerConsumerPipelineThroughTwoBuffers) {
  const int64_t iters = 7;
  TestKernel k("pipeline", kPipelineSource);
  buildPipeline(k, iters, false);
  std::vector<float> in(iters * 8), out(8, -1.0f);
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> dist(-1, 1);
  for (auto& v : in) v = dist(rng);
  k.run({2}, {buf(in), buf(out)});
  for (int j = 0; j < 8; ++j) {
    float ref = 0;
    for (int64_t i = 0; i < iters; ++i) ref += in[i * 8 + j];
    EXPECT_EQ(out[j], ref) << j;
  }
}

TEST(InterpTasks, MissingArriveIsReportedAsDeadlockNamingEveryTask) {
  TestKernel k("pipeline", kPipelineSource);
  buildPipeline(k, 7, /*forgetFullArrive=*/true);
  std::vector<float> in(56), out(8);
  std::string err = k.runExpectingError({1}, {buf(in), buf(out)});
  EXPECT_EQ(err,
            "pipeline.py:2:5: error: deadlock in program (0, 0, 0): every async task is blocked "
            "and no copy is in flight\n"
            "      tlx.barrier_wait(full[s], phase)      # consumer\n"
            "      ^\n"
            "pipeline.py:2:5: note: task 'consumer' waits on barrier 0 for the phase of parity 0 "
            "to complete; the barrier is in phase 0 (parity 0): 1 of 1 arrivals pending, 0 "
            "transaction bytes outstanding\n"
            "      tlx.barrier_wait(full[s], phase)      # consumer\n"
            "      ^\n"
            "note: nothing has arrived on this barrier yet\n"
            "pipeline.py:3:5: note: task 'producer' waits on barrier 0 for the phase of parity 0 "
            "to complete; the barrier is in phase 0 (parity 0): 1 of 1 arrivals pending, 0 "
            "transaction bytes outstanding\n"
            "      tlx.barrier_wait(empty[s], phase ^ 1) # producer\n"
            "      ^\n"
            "note: nothing has arrived on this barrier yet");
}

TEST(InterpTasks, NamedBarrierOrdersWriterBeforeReaderAndReplicasSeeTheirIds) {
  TestKernel k("named");
  Value* pin = k.arg("in", Type::ptr(DType::F32));
  Value* pout = k.arg("out", Type::ptr(DType::F32));
  Value* pids = k.arg("ids", Type::ptr(DType::I32));
  Builder& b = k.b;
  Value* smem =
      view(b, b.create1(OpCode::LocalAlloc, {}, Type::buffer(DType::F32, {8}, 1)), b.i32(0));
  Op* tasks = b.create(OpCode::AsyncTasks, {}, {});
  Builder tb(tasks->addRegion());
  // The reader is scheduled first and must wait for the writer at named barrier 1.
  Op* reader = tb.create(OpCode::AsyncTask, {}, {}, {{"default", int64_t(1)}});
  Op* writer = tb.create(OpCode::AsyncTask, {}, {}, {{"num_warps", int64_t(4)}});
  Op* replicas =
      tb.create(OpCode::AsyncTask, {}, {}, {{"num_warps", int64_t(1)}, {"replicate", int64_t(3)}});
  {
    Builder rb(reader->addRegion());
    rb.create(OpCode::NamedBarrierWait, {rb.i32(1), rb.i32(256)}, {});
    storeAll(rb, pout, rb.create1(OpCode::LocalLoad, {smem}, Type::tensor(DType::F32, {8})));
  }
  {
    Builder wb(writer->addRegion());
    wb.create(OpCode::LocalStore, {smem, loadAll(wb, pin, 8)}, {});
    wb.create(OpCode::NamedBarrierArrive, {wb.i32(1), wb.i32(256)}, {});
  }
  {
    Builder pb(replicas->addRegion());
    Value* r = pb.create1(OpCode::ReplicaId, {}, Type::scalar(DType::I32));
    Value* v = pb.binary(OpCode::Add, pb.binary(OpCode::Mul, r, pb.i32(10)), pb.programId(0));
    pb.store(pb.addPtr(pids, pb.binary(OpCode::Add, r,
                                       pb.binary(OpCode::Mul, pb.programId(0), pb.i32(3)))),
             v);
  }
  b.ret();
  std::vector<float> in{1, 2, 3, 4, 5, 6, 7, 8}, out(8, -1);
  std::vector<int32_t> ids(6, -1);
  k.run({2}, {buf(in), buf(out), buf(ids)});
  EXPECT_EQ(out, in);
  EXPECT_EQ(ids, (std::vector<int32_t>{0, 10, 20, 1, 11, 21}));
}

TEST(InterpTasks, ErrorInsideATaskNamesTheTask) {
  TestKernel k("task_oob", "    tl.load(p + 100)\n");
  Value* p = k.arg("p", Type::ptr(DType::F32));
  Value* id = k.b.i32(2);
  Value* threads = k.b.i32(256);
  Op* tasks = k.b.create(OpCode::AsyncTasks, {}, {});
  Builder tb(tasks->addRegion());
  Op* t0 = tb.create(OpCode::AsyncTask, {}, {}, {{"default", int64_t(1)}});
  Op* t1 = tb.create(OpCode::AsyncTask, {}, {},
                     {{"num_warps", int64_t(4)}, {"name", std::string("loader")}});
  // The default task waits for a barrier nobody completes; the loader's fault must win and
  // unwind it.
  Builder(t0->addRegion()).create(OpCode::NamedBarrierWait, {id, threads}, {});
  Builder lb(t1->addRegion());
  lb.setLoc(SourceLoc{k.file, 1, 5});
  lb.load(lb.addPtr(p, lb.i32(100)));
  k.b.ret();
  std::vector<float> x(10);
  std::string err = k.runExpectingError({1}, {buf(x)});
  EXPECT_NE(err.find("task_oob.py:1:5: error: out-of-bounds load of 4 bytes at offset 400 past "
                     "the end of argument 'p' (40 bytes) in program (0, 0, 0) task 'loader'"),
            std::string::npos)
      << err;
}

TEST(InterpReduce, CumprodScanWrapsInItsType) {
  TestKernel k("cumprod");
  Value* px = k.arg("x", Type::ptr(DType::I32));
  Value* po = k.arg("out", Type::ptr(DType::I32));
  Value* x = loadAll(k.b, px, 4);
  storeAll(k.b, po,
           k.b.create1(OpCode::Scan, {x}, x->type(),
                       {{"axis", int64_t(0)}, {"kind", "prod"}, {"reverse", int64_t(0)}}));
  k.b.ret();
  std::vector<int32_t> xv{3, 65536, 65536, 7}, out(4);
  k.run({1}, {buf(xv), buf(out)});
  EXPECT_EQ(out, (std::vector<int32_t>{3, 196608, 0, 0})); // 3 * 2^32 wraps to 0
}

TEST(InterpTlx, AsyncDotPredicateAndUseAccFollowTheirAttributes) {
  // async_dot(a, b, acc, pred=False) has pred at operand 3 (has_use_acc = 0): the accumulator
  // passes through untouched. use_acc=False ignores the accumulator.
  TestKernel k("wgmma_pred");
  Value* po = k.arg("out", Type::ptr(DType::F32));
  Builder& b = k.b;
  Value* as =
      view(b, b.create1(OpCode::LocalAlloc, {}, Type::buffer(DType::F16, {16, 16}, 1)), b.i32(0));
  Value* bs =
      view(b, b.create1(OpCode::LocalAlloc, {}, Type::buffer(DType::F16, {16, 8}, 1)), b.i32(0));
  Value* one = b.constFloat(1.0, Type::scalar(DType::F16));
  b.create(OpCode::LocalStore, {as, b.splat(one, {16, 16})}, {});
  b.create(OpCode::LocalStore, {bs, b.splat(one, {16, 8})}, {});
  Type accT = Type::tensor(DType::F32, {16, 8});
  Value* acc = b.splat(b.constFloat(5.0, Type::scalar(DType::F32)), {16, 8});
  Value* f = b.constInt(0, Type::scalar(DType::I1));
  Value* off = b.create1(OpCode::AsyncDot, {as, bs, acc, f}, accT,
                         {{"has_use_acc", int64_t(0)}, {"has_pred", int64_t(1)}});
  Value* fresh = b.create1(OpCode::AsyncDot, {as, bs, acc, f}, accT,
                           {{"has_use_acc", int64_t(1)}, {"has_pred", int64_t(0)}});
  Op* wait = b.create(OpCode::AsyncDotWait, {off, fresh}, {accT, accT}, {{"pendings", int64_t(0)}});
  storeAll(b, po,
           b.create1(OpCode::Cat,
                     {reshape(b, wait->result(0), {128}), reshape(b, wait->result(1), {128})},
                     Type::tensor(DType::F32, {256})));
  b.ret();
  std::vector<float> out(256);
  k.run({1}, {buf(out)});
  for (int i = 0; i < 128; ++i) EXPECT_EQ(out[i], 5.0f) << i;
  for (int i = 128; i < 256; ++i) EXPECT_EQ(out[i], 16.0f) << i;
}

TEST(InterpTasks, ExpandedReplicasRunOncePerOp) {
  // The specializer emits one async_task per replica with [replicate, replica]; each op is one
  // agent.
  TestKernel k("replicas");
  Value* pids = k.arg("ids", Type::ptr(DType::I32));
  Op* tasks = k.b.create(OpCode::AsyncTasks, {}, {});
  Builder tb(tasks->addRegion());
  tb.create(OpCode::AsyncTask, {}, {}, {{"default", int64_t(1)}})->addRegion();
  for (int64_t r = 0; r < 2; ++r) {
    Op* t = tb.create(OpCode::AsyncTask, {}, {},
                      {{"num_warps", int64_t(4)}, {"replicate", int64_t(2)}, {"replica", r}});
    Builder rb(t->addRegion());
    Value* id = rb.create1(OpCode::ReplicaId, {}, Type::scalar(DType::I32));
    rb.create(OpCode::AtomicRMW, {rb.addPtr(pids, id), rb.binary(OpCode::Add, id, rb.i32(1))},
              {Type::scalar(DType::I32)}, {{"kind", "add"}});
  }
  k.b.ret();
  std::vector<int32_t> ids(2, 0);
  k.run({3}, {buf(ids)});
  EXPECT_EQ(ids, (std::vector<int32_t>{3, 6}));
}

// ---------------------------------------------------------------------------------------------
// Kernels from source: the repository's kernels/ through the parser, the specializer and the
// clean-up passes, then the interpreter, against C++ references.
// ---------------------------------------------------------------------------------------------

namespace {

/// A kernel file of the repository (`kernels/...`) with the sibling files its relative imports
/// name, as @ww.jit compiles it.
std::vector<SourceFile> kernelFiles(const std::string& path) {
  return readSourceWithImports(std::string(WW_SOURCE_DIR) + "/" + path);
}

/// The 1-based line of `source` holding `part`.
int lineOf(const std::string& source, const std::string& part) {
  size_t at = source.find(part);
  EXPECT_NE(at, std::string::npos) << part;
  return 1 + int(std::count(source.begin(), source.begin() + std::ptrdiff_t(at), '\n'));
}

struct SourceKernel {
  SourceManager sm;
  std::vector<ast::Module> modules;
  std::unique_ptr<Function> fn;
  std::string error;

  SourceKernel(const std::string& path, const std::string& kernel, const std::string& sig,
               int numWarps = 4, int numCtas = 1) {
    std::vector<SourceFile> files = kernelFiles(path);
    modules.reserve(files.size()); // the specializer keeps the modules' addresses
    try {
      specialize::SpecializeInput in;
      for (const SourceFile& f : files) {
        modules.push_back(frontend::parseModule(sm, sm.addFile(f.path, f.text)));
        in.modules.push_back(&modules.back());
      }
      in.sources = &sm;
      in.kernel = kernel;
      in.signature = parseSignature(sig);
      in.options.numWarps = numWarps;
      in.options.numCtas = numCtas;
      fn = specialize::specialize(in);
      transforms::runCleanupPipeline(*fn);
    } catch (CompileError& e) {
      e.render(sm);
      error = e.what();
    }
  }
  bool ok() const { return fn != nullptr; }
  void run(std::vector<int> grid, const std::vector<InterpArg>& args) {
    int g[3] = {grid.size() > 0 ? grid[0] : 1, grid.size() > 1 ? grid[1] : 1,
                grid.size() > 2 ? grid[2] : 1};
    interp::run(*fn, &sm, g, args);
  }
  void run(std::vector<int> grid, const std::vector<InterpArg>& args,
           const interp::RunOptions& options) {
    int g[3] = {grid.size() > 0 ? grid[0] : 1, grid.size() > 1 ? grid[1] : 1,
                grid.size() > 2 ? grid[2] : 1};
    interp::run(*fn, &sm, g, args, options);
  }
};

} // namespace

// The GPU targets split a batched tl.dot into one 2-D dot per batch element
// (transforms/DecomposeBatchedDots.cpp); the split kernel computes what the batched one does.
// Small integers in fp16 keep every product and sum exact, so both match a double reference.
TEST(InterpKernels, BatchedDotsSplitIntoTwoDDotsComputeTheSame) {
  struct Case {
    const char* kernel;
    std::string sig;
    int64_t batch, M, N, K;
    bool acc;
  };
  const std::string ptrs = "a_ptr:*fp16,b_ptr:*fp16,c_ptr:*fp32,out_ptr:*fp32,";
  const Case cases[] = {
      {"batched_dot", ptrs + "B=4,M=16,N=16,K=16,WITH_ACC=0", 4, 16, 16, 16, false},
      {"batched_dot", ptrs + "B=2,M=32,N=16,K=64,WITH_ACC=1", 2, 32, 16, 64, true},
      {"batched_dot", ptrs + "B=8,M=16,N=32,K=16,WITH_ACC=1", 8, 16, 32, 16, true},
      {"batched_dot", ptrs + "B=1,M=16,N=16,K=32,WITH_ACC=1", 1, 16, 16, 32, true},
      {"batched_dot_4d", "a_ptr:*fp16,b_ptr:*fp16,out_ptr:*fp32,B0=2,B1=4,M=16,N=16,K=16", 8, 16,
       16, 16, false},
  };
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> small(-3, 3);
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.kernel) + " " + c.sig);
    const char* path = "tests/python/batched_dot_kernels.py";
    SourceKernel whole(path, c.kernel, c.sig), split(path, c.kernel, c.sig);
    ASSERT_TRUE(whole.ok() && split.ok()) << whole.error;
    EXPECT_EQ(transforms::decomposeBatchedDots(*split.fn), 1);
    transforms::runCleanupPipeline(*split.fn);
    int dots = 0;
    walk(split.fn->body, [&](const Op& op) {
      if (op.code() != OpCode::Dot) return;
      ++dots;
      EXPECT_EQ(op.result()->type().shape, (std::vector<int64_t>{c.M, c.N}));
    });
    EXPECT_EQ(dots, c.batch);

    std::vector<uint16_t> a(c.batch * c.M * c.K), b(c.batch * c.K * c.N);
    std::vector<float> acc(c.batch * c.M * c.N);
    std::vector<double> ref(acc.size());
    for (auto& x : a) x = interp::floatToHalf(float(small(rng)));
    for (auto& x : b) x = interp::floatToHalf(float(small(rng)));
    for (auto& x : acc) x = float(small(rng));
    for (int64_t e = 0; e < c.batch; ++e)
      for (int64_t m = 0; m < c.M; ++m)
        for (int64_t n = 0; n < c.N; ++n) {
          double sum = c.acc ? acc[(e * c.M + m) * c.N + n] : 0.0;
          for (int64_t k = 0; k < c.K; ++k)
            sum += double(interp::halfToFloat(a[(e * c.M + m) * c.K + k])) *
                   double(interp::halfToFloat(b[(e * c.K + k) * c.N + n]));
          ref[(e * c.M + m) * c.N + n] = sum;
        }
    for (SourceKernel* k : {&whole, &split}) {
      std::vector<float> out(acc.size(), std::nanf(""));
      std::map<std::string, InterpArg> byName = {
          {"a_ptr", buf(a)}, {"b_ptr", buf(b)}, {"c_ptr", buf(acc)}, {"out_ptr", buf(out)}};
      std::vector<InterpArg> args;
      for (const KernelArg& arg : k->fn->args)
        if (arg.value) args.push_back(byName.at(arg.name));
      k->run({1}, args);
      for (size_t i = 0; i < out.size(); ++i)
        ASSERT_EQ(double(out[i]), ref[i]) << (k == &whole ? "batched" : "split") << " at " << i;
    }
  }
}

// tl.exp / exp2 / log / log2 / sin / cos of float64 values, as the GPU targets compute them
// (built from libdevice's fp64 pieces: the specializer for a CUDA target, which SourceKernel is,
// emits them; the interpreter runs those ops), against the C library within a few ulps, with
// the special values exact.
TEST(InterpKernels, Float64MathAsTheGpuComputesIt) {
  struct Fn {
    const char* name;
    double (*ref)(double);
    std::vector<double> specials;
  };
  const double inf = std::numeric_limits<double>::infinity();
  const Fn fns[] = {
      {"exp",
       [](double x) { return std::exp(x); },
       {0.0, -0.0, 1.0, 709.0, 710.0, -745.0, -inf, inf}},
      {"exp2",
       [](double x) { return std::exp2(x); },
       {0.0, 1.0, 10.0, -1074.0, 1023.5, 1024.0, -inf}},
      {"log", [](double x) { return std::log(x); }, {1.0, 0.0, -1.0, inf, 4.9e-324, 1e308}},
      {"log2", [](double x) { return std::log2(x); }, {1.0, 8.0, 0.5, 0.0, -2.0, inf, 4.9e-324}},
      {"sin", [](double x) { return std::sin(x); }, {0.0, -0.0, 3.141592653589793, 1e6, inf}},
      {"cos", [](double x) { return std::cos(x); }, {0.0, 1.5707963267948966, -1e6, inf}},
      // The pieces' seams (1 and 6 for erf, 27.3 for erfc's underflow) and the tails.
      {"erf",
       [](double x) { return std::erf(x); },
       {0.0, -0.0, 1e-300, 1.0, -1.0, 0.9999999999999999, 1.0000000000000002, 6.0, -6.0, inf,
        -inf}},
      {"erfc",
       [](double x) { return std::erfc(x); },
       {0.0, 1.0, 6.0, 26.5, 27.2, 27.4, -30.0, inf, -inf}},
  };
  const int64_t n = 4096;
  std::mt19937_64 rng(11);
  for (const Fn& fn : fns) {
    SCOPED_TRACE(fn.name);
    SourceKernel k("tests/python/float64_math_kernels.py", "float64_math",
                   "x_ptr:*fp64,out_ptr:*fp64,n:i32,FN=\"" + std::string(fn.name) +
                       "\",BLOCK=1024");
    ASSERT_TRUE(k.ok()) << k.error;
    int approx = 0;
    walk(k.fn->body, [&](const Op& op) {
      approx += op.code() == OpCode::Exp || op.code() == OpCode::Exp2 || op.code() == OpCode::Log ||
                op.code() == OpCode::Log2 || op.code() == OpCode::Sin || op.code() == OpCode::Cos ||
                op.code() == OpCode::Erf;
    });
    EXPECT_EQ(approx, 0) << "the fp64 function is built from plain arithmetic";
    std::string name = fn.name;
    std::uniform_real_distribution<double> range =
        name == "exp"                     ? std::uniform_real_distribution<double>(-700, 700)
        : name == "exp2"                  ? std::uniform_real_distribution<double>(-1020, 1020)
        : name == "log" || name == "log2" ? std::uniform_real_distribution<double>(-300, 300)
        : name == "erf"                   ? std::uniform_real_distribution<double>(-7, 7)
        : name == "erfc"                  ? std::uniform_real_distribution<double>(-3, 28)
                                          : std::uniform_real_distribution<double>(-100, 100);
    std::vector<double> x(n), out(n, std::nan(""));
    for (int64_t i = 0; i < n; ++i) {
      double r = range(rng);
      x[i] = name == "log" || name == "log2" ? std::pow(10.0, r) : r;
    }
    std::copy(fn.specials.begin(), fn.specials.end(), x.begin());
    k.run({int(n / 1024)}, {buf(x), buf(out), InterpArg::integer(n)});
    double worst = 0;
    for (int64_t i = 0; i < n; ++i) {
      double want = fn.ref(x[i]);
      if (std::isnan(want) || std::isinf(want) || want == 0.0) {
        EXPECT_TRUE(std::isnan(want) ? std::isnan(out[i]) : out[i] == want)
            << fn.name << "(" << x[i] << ") = " << out[i] << ", want " << want;
        continue;
      }
      double ulp = std::nextafter(std::fabs(want), inf) - std::fabs(want);
      worst = std::max(worst, std::fabs(out[i] - want) / ulp);
    }
    // erfc multiplies three rounded factors (erfcx, and e^-a^2 as two exponentials).
    EXPECT_LT(worst, name == "erfc" ? 8.0 : 4.0) << fn.name;
  }
}

TEST(InterpKernels, VectorAddAndPersistentVectorAdd) {
  const int64_t n = 100003;
  std::vector<float> x = randomFloats(n, 5), y = randomFloats(n, 6);
  for (const char* name : {"add_kernel", "add_kernel_persistent"}) {
    SourceKernel k("python/warpweave/ops/kernels/vector_add.py", name,
                   "x_ptr:*fp32:16, y_ptr:*fp32:16, out_ptr:*fp32:16, n:i32, BLOCK=1024");
    ASSERT_TRUE(k.ok()) << k.error;
    std::vector<float> out(n, std::nanf(""));
    int grid = std::string(name) == "add_kernel" ? int((n + 1023) / 1024) : 7;
    k.run({grid}, {buf(x), buf(y), buf(out), InterpArg::integer(n)});
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(out[i], x[i] + y[i]) << name << " element " << i;
  }
}

TEST(InterpKernels, SoftmaxMatchesFloat64Reference) {
  const int rows = 37, cols = 300, stride = 320;
  SourceKernel k("python/warpweave/ops/kernels/softmax.py", "softmax_kernel",
                 "out_ptr:*fp32:16, in_ptr:*fp32:16, in_row_stride:i32, out_row_stride:i32, "
                 "n_rows:i32, n_cols:i32, BLOCK=512");
  ASSERT_TRUE(k.ok()) << k.error;
  std::vector<float> in = randomFloats(size_t(rows) * stride, 9);
  std::vector<float> out(size_t(rows) * stride, std::nanf(""));
  k.run({5}, {buf(out), buf(in), InterpArg::integer(stride), InterpArg::integer(stride),
              InterpArg::integer(rows), InterpArg::integer(cols)});
  for (int r = 0; r < rows; ++r) {
    double rmax = -INFINITY, sum = 0;
    for (int c = 0; c < cols; ++c) rmax = std::max(rmax, double(in[r * stride + c]));
    for (int c = 0; c < cols; ++c) sum += std::exp(double(in[r * stride + c]) - rmax);
    for (int c = 0; c < cols; ++c) {
      double ref = std::exp(double(in[r * stride + c]) - rmax) / sum;
      ASSERT_NEAR(out[r * stride + c], ref, 1e-6 + 1e-5 * ref) << r << "," << c;
    }
    for (int c = cols; c < stride; ++c) ASSERT_TRUE(std::isnan(out[r * stride + c]));
  }
}

TEST(InterpKernels, WarpSpecializedHopperGemm) {
  // Small tiles so the CPU run stays quick; M, N, K are not multiples of the tiles so TMA
  // clipping is exercised, and 2 persistent programs walk 4 tiles each.
  const int M = 200, N = 136,
            K = 80; // tiles: BLOCK_M 64 (two halves of 32), BLOCK_N 32, BLOCK_K 16
  SourceKernel k("python/warpweave/ops/kernels/hopper/gemm_ws.py", "gemm_ws_kernel",
                 "a_desc:desc<fp16,32x16>, b_desc:desc<fp16,16x32>, c_desc:desc<fp16,32x32>, "
                 "M:i32, N:i32, K:i32, BLOCK_M=64, BLOCK_N=32, BLOCK_K=16, GROUP_M=2, "
                 "NUM_STAGES=3, NUM_SMS=2");
  ASSERT_TRUE(k.ok()) << k.error;
  std::mt19937 rng(21);
  std::uniform_int_distribution<int> dist(-8, 8);
  std::vector<uint16_t> a(size_t(M) * K), b(size_t(K) * N), c(size_t(M) * N, 0xFFFF);
  for (auto& v : a) v = interp::floatToHalf(float(dist(rng)) / 8);
  for (auto& v : b) v = interp::floatToHalf(float(dist(rng)) / 8);
  k.run({2}, {InterpArg::descriptor(a.data(), a.size() * 2, {M, K}, {K, 1}),
              InterpArg::descriptor(b.data(), b.size() * 2, {K, N}, {N, 1}),
              InterpArg::descriptor(c.data(), c.size() * 2, {M, N}, {N, 1}), InterpArg::integer(M),
              InterpArg::integer(N), InterpArg::integer(K)});
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      double ref = 0; // multiples of 1/64 summed over K = 80: exact in fp32
      for (int kk = 0; kk < K; ++kk)
        ref += double(interp::halfToFloat(a[m * K + kk])) * interp::halfToFloat(b[kk * N + n]);
      ASSERT_EQ(c[m * N + n], interp::encodeSmallFloat(DType::F16, ref)) << m << "," << n;
    }
}

namespace {

std::vector<uint16_t> randomHalves(size_t n, uint32_t seed, int range, float scale) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> dist(-range, range);
  std::vector<uint16_t> v(n);
  for (auto& h : v) h = interp::floatToHalf(float(dist(rng)) * scale);
  return v;
}

float h2f(uint16_t h) {
  return interp::halfToFloat(h);
}

} // namespace

TEST(InterpKernels, MatmulWithFoldedUnitStridesAndLeakyRelu) {
  const int M = 70, N = 40, K = 48;
  SourceKernel k("python/warpweave/ops/kernels/matmul.py", "matmul_kernel",
                 "a_ptr:*fp16:16, b_ptr:*fp16:16, c_ptr:*fp16:16, M:i32, N:i32, K:i32, "
                 "stride_am:i32, stride_ak:i32:1, stride_bk:i32, stride_bn:i32:1, "
                 "stride_cm:i32, stride_cn:i32:1, BLOCK_M=32, BLOCK_N=32, BLOCK_K=16, "
                 "GROUP_M=2, ACTIVATION=\"leaky_relu\"");
  ASSERT_TRUE(k.ok()) << k.error;
  auto a = randomHalves(size_t(M) * K, 31, 8, 0.125f),
       b = randomHalves(size_t(K) * N, 32, 8, 0.125f);
  std::vector<uint16_t> c(size_t(M) * N, 0xFFFF);
  int grid = ((M + 31) / 32) * ((N + 31) / 32);
  // The unit strides are folded into the IR: only the other strides are passed.
  k.run({grid}, {buf(a), buf(b), buf(c), InterpArg::integer(M), InterpArg::integer(N),
                 InterpArg::integer(K), InterpArg::integer(K), InterpArg::integer(N),
                 InterpArg::integer(N)});
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      float acc = 0; // multiples of 1/64: exact in fp32 in any order
      for (int kk = 0; kk < K; ++kk) acc += h2f(a[m * K + kk]) * h2f(b[kk * N + n]);
      float act = acc >= 0 ? acc : 0.01f * acc;
      ASSERT_EQ(c[m * N + n], interp::floatToHalf(act)) << m << "," << n;
    }
}

TEST(InterpKernels, RowMaxKeepsTheFirstMaximum) {
  const int rows = 9, cols = 150, stride = 160;
  SourceKernel k("python/warpweave/ops/kernels/reduction.py", "row_max_kernel",
                 "x_ptr:*fp32:16, out_ptr:*fp32:16, out_index_ptr:*i32:16, n_rows:i32, "
                 "n_cols:i32, stride_row:i32, BLOCK_M=4, BLOCK_N=64");
  ASSERT_TRUE(k.ok()) << k.error;
  std::mt19937 rng(4);
  std::uniform_int_distribution<int> dist(0, 20); // few distinct values: many ties
  std::vector<float> x(size_t(rows) * stride);
  for (auto& v : x) v = float(dist(rng));
  std::vector<float> out(rows, -1);
  std::vector<int32_t> idx(rows, -1);
  k.run({(rows + 3) / 4}, {buf(x), buf(out), buf(idx), InterpArg::integer(rows),
                           InterpArg::integer(cols), InterpArg::integer(stride)});
  for (int r = 0; r < rows; ++r) {
    int best = 0;
    for (int c = 1; c < cols; ++c)
      if (x[r * stride + c] > x[r * stride + best]) best = c;
    EXPECT_EQ(out[r], x[r * stride + best]) << r;
    EXPECT_EQ(idx[r], best) << r;
  }
}

TEST(InterpKernels, PipelinedHopperGemm) {
  const int M = 100, N = 72, K = 56;
  SourceKernel k("python/warpweave/ops/kernels/hopper/gemm_pipelined.py", "gemm_pipelined_kernel",
                 "a_desc:desc<fp16,32x16>, b_desc:desc<fp16,16x32>, c_desc:desc<fp16,32x32>, "
                 "M:i32, N:i32, K:i32, BLOCK_M=32, BLOCK_N=32, BLOCK_K=16, GROUP_M=2, "
                 "NUM_STAGES=3");
  ASSERT_TRUE(k.ok()) << k.error;
  auto a = randomHalves(size_t(M) * K, 41, 8, 0.125f),
       b = randomHalves(size_t(K) * N, 42, 8, 0.125f);
  std::vector<uint16_t> c(size_t(M) * N, 0xFFFF);
  int grid = ((M + 31) / 32) * ((N + 31) / 32);
  k.run({grid}, {InterpArg::descriptor(a.data(), a.size() * 2, {M, K}, {K, 1}),
                 InterpArg::descriptor(b.data(), b.size() * 2, {K, N}, {N, 1}),
                 InterpArg::descriptor(c.data(), c.size() * 2, {M, N}, {N, 1}),
                 InterpArg::integer(M), InterpArg::integer(N), InterpArg::integer(K)});
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      float acc = 0;
      for (int kk = 0; kk < K; ++kk) acc += h2f(a[m * K + kk]) * h2f(b[kk * N + n]);
      ASSERT_EQ(c[m * N + n], interp::floatToHalf(acc)) << m << "," << n;
    }
}

TEST(InterpKernels, PingPongWarpSpecializedAttention) {
  // Two consumer warp groups take turns through named barriers 8 and 9; K/V stream through a
  // two-stage ring. Checked against a float64 softmax attention.
  const int ZH = 2, NCTX = 64, D = 16;
  const double smScale = 0.3;
  SourceKernel k("python/warpweave/ops/kernels/hopper/attention_ws.py", "attention_ws_kernel",
                 "q_desc:desc<fp16,16x16>, k_desc:desc<fp16,16x16>, v_desc:desc<fp16,16x16>, "
                 "o_desc:desc<fp16,16x16>, lse_ptr:*fp32:16, sm_scale:fp32, N_CTX:i32:16, "
                 "HEAD_DIM=16, BLOCK_M=16, BLOCK_N=16, NUM_STAGES=2");
  ASSERT_TRUE(k.ok()) << k.error;
  size_t n = size_t(ZH) * NCTX * D;
  auto q = randomHalves(n, 51, 16, 1.0f / 16), kk = randomHalves(n, 52, 16, 1.0f / 16),
       v = randomHalves(n, 53, 16, 1.0f / 16);
  std::vector<uint16_t> o(n, 0xFFFF);
  std::vector<float> lse(size_t(ZH) * NCTX, std::nanf(""));
  auto desc = [&](std::vector<uint16_t>& t) {
    return InterpArg::descriptor(t.data(), t.size() * 2, {ZH * NCTX, D}, {D, 1});
  };
  k.run({NCTX / 32, ZH}, {desc(q), desc(kk), desc(v), desc(o), buf(lse), InterpArg::real(smScale),
                          InterpArg::integer(NCTX)});
  for (int h = 0; h < ZH; ++h)
    for (int i = 0; i < NCTX; ++i) {
      std::vector<double> s(NCTX);
      double mx = -INFINITY, sum = 0;
      for (int j = 0; j < NCTX; ++j) {
        double dot = 0;
        for (int d = 0; d < D; ++d)
          dot += double(h2f(q[(h * NCTX + i) * D + d])) * h2f(kk[(h * NCTX + j) * D + d]);
        s[j] = dot * double(float(smScale));
        mx = std::max(mx, s[j]);
      }
      for (int j = 0; j < NCTX; ++j) sum += std::exp(s[j] - mx);
      EXPECT_NEAR(lse[h * NCTX + i], (mx + std::log(sum)) / std::log(2.0), 1e-4) << h << "," << i;
      for (int d = 0; d < D; ++d) {
        double ref = 0;
        for (int j = 0; j < NCTX; ++j)
          ref += std::exp(s[j] - mx) / sum * h2f(v[(h * NCTX + j) * D + d]);
        // P is rounded to fp16 before the second MMA, as on the GPU.
        EXPECT_NEAR(h2f(o[(h * NCTX + i) * D + d]), ref, 2e-3) << h << "," << i << "," << d;
      }
    }
}

TEST(InterpKernels, LayernormForwardMatchesFloat64Reference) {
  const int rows = 6, cols = 300;
  SourceKernel k("python/warpweave/ops/kernels/layernorm.py", "layernorm_fwd_kernel",
                 "x_ptr:*fp32:16, y_ptr:*fp32:16, w_ptr:*fp32:16, b_ptr:*fp32:16, "
                 "mean_ptr:*fp32:16, rstd_ptr:*fp32:16, stride:i32, n_cols:i32, eps:fp32, "
                 "BLOCK=128");
  ASSERT_TRUE(k.ok()) << k.error;
  std::vector<float> x = randomFloats(size_t(rows) * cols, 61), w = randomFloats(cols, 62),
                     bias = randomFloats(cols, 63);
  std::vector<float> y(x.size(), std::nanf("")), mean(rows), rstd(rows);
  const double eps = 1e-5;
  k.run({rows}, {buf(x), buf(y), buf(w), buf(bias), buf(mean), buf(rstd), InterpArg::integer(cols),
                 InterpArg::integer(cols), InterpArg::real(eps)});
  for (int r = 0; r < rows; ++r) {
    double mu = 0, var = 0;
    for (int c = 0; c < cols; ++c) mu += x[r * cols + c];
    mu /= cols;
    for (int c = 0; c < cols; ++c) var += (x[r * cols + c] - mu) * (x[r * cols + c] - mu);
    double rs = 1 / std::sqrt(var / cols + eps);
    EXPECT_NEAR(mean[r], mu, 1e-3) << r;
    EXPECT_NEAR(rstd[r], rs, 1e-6) << r;
    for (int c = 0; c < cols; ++c) {
      double ref = (x[r * cols + c] - mu) * rs * w[c] + bias[c];
      ASSERT_NEAR(y[r * cols + c], ref, 1e-2) << r << "," << c;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Remaining ops: bitcast, hints, masked loads with other, reinterpret, cp.async groups, TMA store
// ---------------------------------------------------------------------------------------------

TEST(InterpMisc, BitcastHintsAndMaskedLoadWithOther) {
  TestKernel k("misc");
  Value* px = k.arg("x", Type::ptr(DType::F32));
  Value* po = k.arg("out", Type::ptr(DType::I32));
  Builder& b = k.b;
  Value* offs = b.create1(OpCode::MultipleOf, {b.arange(0, 4)}, Type::tensor(DType::I32, {4}),
                          {{"values", std::vector<int64_t>{4}}});
  Value* mask = b.cmp("lt", offs, b.splat(b.i32(2), {4}));
  Value* other = b.splat(b.constFloat(-2.5, Type::scalar(DType::F32)), {4});
  Value* x = b.load(b.addPtr(b.splat(px, {4}), offs), mask, other);
  storeAll(b, po, b.create1(OpCode::Bitcast, {x}, Type::tensor(DType::I32, {4})));
  b.ret();
  std::vector<float> xv{1.0f, -0.0f}; // only 2 elements: masked lanes must not be read
  std::vector<int32_t> out(4);
  k.run({1}, {buf(xv), buf(out)});
  EXPECT_EQ(out, (std::vector<int32_t>{0x3F800000, int32_t(0x80000000u), int32_t(0xC0200000u),
                                       int32_t(0xC0200000u)}));
}

TEST(InterpTlx, ReinterpretAsyncLoadGroupsAndTmaStore) {
  TestKernel k("cp_async");
  Value* px = k.arg("x", Type::ptr(DType::F32));
  Value* po = k.arg("out", Type::ptr(DType::F32));
  Value* d = k.arg("out_desc", Type::descriptor(DType::F32, {2, 4}, 2));
  Builder& b = k.b;
  Value* bufs = b.create1(OpCode::LocalAlloc, {}, Type::buffer(DType::F32, {8}, 2));
  Value* ptrs = b.addPtr(b.splat(px, {8}), b.arange(0, 8));
  Value* ptrs2 = b.addPtr(b.splat(px, {8}), b.arange(8, 16));
  Type tile = Type::tensor(DType::F32, {8});
  b.create(OpCode::AsyncLoad, {ptrs, view(b, bufs, b.i32(0))}, {Type::token()});
  b.create(OpCode::AsyncCommitGroup, {}, {Type::token()});
  b.create(OpCode::AsyncLoad, {ptrs2, view(b, bufs, b.i32(1))}, {Type::token()});
  b.create(OpCode::AsyncCommitGroup, {}, {Type::token()});
  // Waiting until at most 1 group is pending retires only the first group.
  b.create(OpCode::AsyncWaitGroup, {}, {}, {{"pendings", int64_t(1)}});
  Value* first = b.create1(OpCode::LocalLoad, {view(b, bufs, b.i32(0))}, tile);
  b.create(OpCode::AsyncWaitGroup, {}, {}, {{"pendings", int64_t(0)}});
  Value* second = b.create1(OpCode::LocalLoad, {view(b, bufs, b.i32(1))}, tile);
  // Stage 1 reinterpreted as a [2, 4] tile goes out through a TMA store at (1, 0).
  Value* as2d = b.create1(OpCode::LocalReinterpret, {view(b, bufs, b.i32(1))},
                          Type::buffer(DType::F32, {2, 4}, 1));
  b.create(OpCode::AsyncDescStore, {d, as2d, b.i32(1), b.i32(0)}, {});
  b.create(OpCode::AsyncDescStoreWait, {}, {}, {{"pendings", int64_t(0)}});
  storeAll(b, po, b.create1(OpCode::Cat, {first, second}, Type::tensor(DType::F32, {16})));
  b.ret();
  std::vector<float> xv(16), out(16), grid2d(3 * 4, -1.0f);
  for (int i = 0; i < 16; ++i) xv[i] = float(i);
  k.run({1}, {buf(xv), buf(out),
              InterpArg::descriptor(grid2d.data(), grid2d.size() * 4, {3, 4}, {4, 1})});
  for (int i = 0; i < 8; ++i) EXPECT_EQ(out[i], float(i));
  for (int i = 8; i < 16; ++i) EXPECT_EQ(out[i], float(i));
  // Rows 1..2 of the 3x4 tensor hold x[8..16); row 0 is untouched.
  EXPECT_EQ(grid2d, (std::vector<float>{-1, -1, -1, -1, 8, 9, 10, 11, 12, 13, 14, 15}));
}

TEST(InterpTasks, SchedulingIsDeterministic) {
  // The same warp-specialized kernel twice gives bit-identical results (the scheduler
  // interleaves agents only at blocking points, in a fixed round-robin order).
  const int64_t iters = 9;
  std::vector<float> in(iters * 8);
  for (size_t i = 0; i < in.size(); ++i) in[i] = 1.0f / float(i + 1);
  std::vector<float> first(8), second(8);
  for (auto* out : {&first, &second}) {
    TestKernel k("pipeline", kPipelineSource);
    buildPipeline(k, iters, false);
    k.run({3}, {buf(in), buf(*out)});
  }
  for (int j = 0; j < 8; ++j) EXPECT_TRUE(sameBits(first[j], second[j])) << j;
}

TEST(InterpPublicApi, CompileToTileIrThenInterpret) {
  CompileRequest req;
  req.files = kernelFiles("python/warpweave/ops/kernels/vector_add.py");
  req.kernel = "add_kernel";
  req.signature = parseSignature("x_ptr:*fp32:16, y_ptr:*fp32:16, out_ptr:*fp32:16, n:i32, "
                                 "BLOCK=256");
  req.stage = Stage::TileIR;
  CompiledKernel kernel = compile(req);
  const int64_t n = 1000;
  std::vector<float> x = randomFloats(n, 71), y = randomFloats(n, 72), out(n, -1);
  int grid[3] = {4, 1, 1};
  interpret(kernel, grid, {buf(x), buf(y), buf(out), InterpArg::integer(n)});
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(out[i], x[i] + y[i]) << i;
  // An output buffer shorter than n: the first store past its end is reported through the
  // public API as an InterpreterError with the kernel's location.
  int big[3] = {5, 1, 1};
  std::vector<float> shortOut(n - 24, -1);
  try {
    interpret(kernel, big, {buf(x), buf(y), buf(shortOut), InterpArg::integer(n)});
    FAIL() << "expected an InterpreterError";
  } catch (const InterpreterError& e) {
    EXPECT_NE(std::string(e.what()).find("vector_add.py:"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("out-of-bounds store of 4 bytes at offset 3904 past the "
                                         "end of argument 'out_ptr' (3904 bytes) in program "
                                         "(3, 0, 0), element [208]"),
              std::string::npos)
        << e.what();
  }
}

TEST(InterpTasks, NamedBarrierThreadCountMismatchIsReported) {
  TestKernel k("named_mismatch", "    tlx.named_barrier_wait(3, 128)\n");
  Value* id = k.b.i32(3);
  Value* n256 = k.b.i32(256);
  Value* n128 = k.b.i32(128);
  Op* tasks = k.b.create(OpCode::AsyncTasks, {}, {});
  Builder tb(tasks->addRegion());
  Op* t0 = tb.create(OpCode::AsyncTask, {}, {}, {{"default", int64_t(1)}});
  Op* t1 = tb.create(OpCode::AsyncTask, {}, {}, {{"num_warps", int64_t(4)}});
  Builder(t0->addRegion()).create(OpCode::NamedBarrierArrive, {id, n256}, {});
  Builder wb(t1->addRegion());
  wb.setLoc(SourceLoc{k.file, 1, 5});
  wb.create(OpCode::NamedBarrierWait, {id, n128}, {});
  k.b.ret();
  std::string err = k.runExpectingError({1}, {});
  // The 128 threads of the default task that arrive with 256 can never make up 256: reported
  // at the first use of the barrier, with a note at the other count's use.
  EXPECT_NE(err.find("error: named barrier 3 is used with different thread counts (128, 256): "
                     "the tasks that arrive on it with 256 threads have only 128 threads in "
                     "all"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("named_mismatch.py:1:5: note: named_barrier_wait on named barrier 3 with "
                     "128 threads by async task 1 (128 threads)"),
            std::string::npos)
      << err;
}

TEST(InterpTlx, LocalSliceOutsideTheBufferIsReported) {
  TestKernel k("slice", "    s = tlx.local_slice(buf, [0, 6], [4, 4])\n");
  Value* bufs = k.b.create1(OpCode::LocalAlloc, {}, Type::buffer(DType::F32, {4, 8}, 1));
  Value* v = view(k.b, bufs, k.b.i32(0));
  k.at(1, 9);
  k.b.create1(OpCode::LocalSlice, {v}, Type::buffer(DType::F32, {4, 4}, 1),
              {{"offsets", std::vector<int64_t>{0, 6}}, {"sizes", std::vector<int64_t>{4, 4}}});
  k.b.ret();
  std::string err = k.runExpectingError({1}, {});
  EXPECT_NE(err.find("slice.py:1:9: error: local_slice [6, 10) of dimension 1 leaves the buffer "
                     "(size 8) in program (0, 0, 0)"),
            std::string::npos)
      << err;
}

// ---------------------------------------------------------------------------------------------
// Synchronization checks on kernel-language source: planted bugs in a TMA ring buffer
// ---------------------------------------------------------------------------------------------

namespace {

/// A producer task TMA-loads NUM_TILES [BLOCK, BLOCK] tiles through a two-slot ring; a consumer
/// task sums them. Each planted bug below replaces one numbered line.
const std::vector<std::string> kRingLines = {
    "import warpweave as ww",                                                               // 1
    "import warpweave.language as tl",                                                      // 2
    "from warpweave import tlx",                                                            // 3
    "",                                                                                     // 4
    "",                                                                                     // 5
    "@ww.jit",                                                                              // 6
    "def ring_sum(x_desc, out_ptr, NUM_TILES: tl.constexpr, BLOCK: tl.constexpr):",         // 7
    "    bufs = tlx.local_alloc((BLOCK, BLOCK), tl.float32, 2)",                            // 8
    "    full = tlx.alloc_barriers(num_barriers=2, arrive_count=1)",                        // 9
    "    empty = tlx.alloc_barriers(num_barriers=2, arrive_count=1)",                       // 10
    "    with tlx.async_tasks():",                                                          // 11
    "        with tlx.async_task(\"default\"):",                                            // 12
    "            for i in range(NUM_TILES):",                                               // 13
    "                s = i % 2",                                                            // 14
    "                tlx.barrier_wait(tlx.local_view(empty, s), ((i // 2) & 1) ^ 1)",       // 15
    "                tlx.barrier_expect_bytes(tlx.local_view(full, s), BLOCK * BLOCK * 4)", // 16
    "                tlx.async_descriptor_load(x_desc, tlx.local_view(bufs, s), [i * BLOCK, 0], "
    "tlx.local_view(full, s))",                                                               // 17
    "        with tlx.async_task(num_warps=4):",                                              // 18
    "            acc = tl.zeros([BLOCK, BLOCK], dtype=tl.float32)",                           // 19
    "            for i in range(NUM_TILES):",                                                 // 20
    "                s = i % 2",                                                              // 21
    "                tlx.barrier_wait(tlx.local_view(full, s), (i // 2) & 1)",                // 22
    "                acc += tlx.local_load(tlx.local_view(bufs, s))",                         // 23
    "                tlx.barrier_arrive(tlx.local_view(empty, s))",                           // 24
    "            offs = tl.arange(0, BLOCK)[:, None] * BLOCK + tl.arange(0, BLOCK)[None, :]", // 25
    "            tl.store(out_ptr + offs, acc)",                                              // 26
};

constexpr int kRingTiles = 5, kRingBlock = 8;

/// The ring kernel with `replacements` (1-based line -> new text) compiled to Tile IR.
CompiledKernel compileRing(const std::map<int, std::string>& replacements) {
  std::string text;
  for (size_t i = 0; i < kRingLines.size(); ++i) {
    auto it = replacements.find(int(i) + 1);
    text += (it != replacements.end() ? it->second : kRingLines[i]) + "\n";
  }
  CompileRequest req;
  req.files.push_back({"ring.py", text});
  req.kernel = "ring_sum";
  req.signature = parseSignature("x_desc:desc<fp32,8x8>, out_ptr:*fp32, NUM_TILES=5, BLOCK=8");
  req.stage = Stage::TileIR;
  return compile(req);
}

struct RingData {
  std::vector<float> x, out;
  RingData() : x(size_t(kRingTiles) * kRingBlock * kRingBlock), out(kRingBlock * kRingBlock, -1) {
    for (size_t i = 0; i < x.size(); ++i) x[i] = float(i % 13);
  }
  std::vector<InterpArg> args() {
    return {InterpArg::descriptor(x.data(), x.size() * 4, {kRingTiles * kRingBlock, kRingBlock},
                                  {kRingBlock, 1}),
            buf(out)};
  }
};

/// Runs the ring kernel with `replacements` under `options`; returns the error ("" if none).
std::string runRing(const std::map<int, std::string>& replacements,
                    interp::RunOptions options = {}) {
  CompiledKernel kernel = compileRing(replacements);
  RingData data;
  int grid[3] = {1, 1, 1};
  try {
    interp::run(*kernel.module->functions.front(), kernel.module->sources, grid, data.args(),
                options);
  } catch (const InterpreterError& e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

} // namespace

TEST(InterpRaces, CleanRingRunsCleanAndSumsUnderManySeeds) {
  CompiledKernel kernel = compileRing({});
  for (uint64_t seed : {0, 1, 2, 3, 17, 1234}) {
    RingData data;
    int grid[3] = {1, 1, 1};
    interp::RunOptions o;
    o.seed = seed;
    interp::run(*kernel.module->functions.front(), kernel.module->sources, grid, data.args(), o);
    for (int e = 0; e < kRingBlock * kRingBlock; ++e) {
      float ref = 0;
      for (int t = 0; t < kRingTiles; ++t) ref += data.x[size_t(t * kRingBlock * kRingBlock + e)];
      ASSERT_EQ(data.out[size_t(e)], ref) << "seed " << seed << " element " << e;
    }
  }
}

TEST(InterpRaces, WrongParityReadsATileStillInFlight) {
  std::string err = runRing(
      {{22, "                tlx.barrier_wait(tlx.local_view(full, s), ((i // 2) & 1) ^ 1)"}});
  EXPECT_TRUE(contains(err, "ring.py:23:")) << err;
  EXPECT_TRUE(contains(err, "local_load reads shared memory that async_desc_load by default task"))
      << err;
  EXPECT_TRUE(contains(err, "is still writing")) << err;
}

TEST(InterpRaces, MissingReleaseDeadlocksAtTheProducersWait) {
  std::string err = runRing({{24, "                pass"}});
  EXPECT_TRUE(contains(err, "deadlock")) << err;
  EXPECT_TRUE(contains(err, "ring.py:15:")) << err;
}

TEST(InterpRaces, TwoConsumersOnACountOneBarrierOverArrive) {
  // Both replicas arrive on `empty` for each tile: the second arrival completes the next phase
  // before the producer has waited for the first one.
  std::string err = runRing({{18, "        with tlx.async_task(num_warps=4, replicate=2):"}});
  EXPECT_TRUE(contains(err, "ring.py:24:17: error: over-arrival: barrier_arrive by async task 1 "
                            "replica 1 on phase 1 of barrier 0 of 'empty' comes before any "
                            "barrier_wait has seen phase 0 complete"))
      << err;
  EXPECT_TRUE(contains(err, "ring.py:24:17: note: phase 0 was completed here by async task 1 "
                            "replica 0"))
      << err;
  EXPECT_TRUE(contains(err, "ring.py:10:13: note: the barrier was initialized here for 1 "
                            "arrival per phase"))
      << err;
  // Other interleavings report the surplus arrival too, or the race it lets through first: one
  // replica's read of a slot that the producer refills because the other replica's arrival
  // alone completed the slot's phase (the notes name that wait and that arrival).
  int overArrivals = 0, races = 0;
  for (uint64_t seed = 1; seed <= 24; ++seed) {
    interp::RunOptions o;
    o.seed = seed;
    err = runRing({{18, "        with tlx.async_task(num_warps=4, replicate=2):"}}, o);
    if (contains(err, "ring.py:24:17: error: over-arrival: barrier_arrive by async task 1 replica"))
      ++overArrivals;
    else if (contains(err, "ring.py:23:24: error: local_load reads shared memory that "
                           "async_desc_load by default task") &&
             contains(err, "ring.py:17:17: note: the copy was issued here") &&
             contains(err, "ring.py:15:17: note: issued after default task passed this "
                           "barrier_wait on barrier") &&
             contains(err, "ring.py:24:17: note: whose phase was completed by async task 1 "
                           "replica"))
      ++races;
    else
      ADD_FAILURE() << "seed " << seed << ": " << err;
  }
  EXPECT_GT(overArrivals, 0);
  EXPECT_EQ(overArrivals + races, 24);
}

TEST(InterpRaces, ArrivingOnABarrierBeyondTheInitializedOnesIsReported) {
  std::string err =
      runRing({{24, "                tlx.barrier_arrive(tlx.local_view(empty, s + 1))"}});
  EXPECT_TRUE(contains(err, "ring.py:24:36: error: barrier index 2 is out of range for 2 "
                            "barriers (valid: 0..1): an arrival or wait there would use a barrier "
                            "alloc_barriers never initialized"))
      << err;
  EXPECT_TRUE(contains(err, "ring.py:10:13: note: alloc_barriers initialized 2 barriers here"))
      << err;
}

TEST(InterpRaces, TooFewExpectedBytesAreReportedAtTheCopy) {
  std::string err = runRing(
      {{16,
        "                tlx.barrier_expect_bytes(tlx.local_view(full, s), BLOCK * BLOCK * 2)"}});
  EXPECT_TRUE(contains(err, "ring.py:17:")) << err;
  EXPECT_TRUE(contains(err, "128 more than its phase expects")) << err;
  EXPECT_TRUE(contains(err, "ring.py:16:17: note: barrier_expect_bytes by default task here: the "
                            "phase expects 128 transaction bytes, its copies delivered 256"))
      << err;
}

TEST(InterpRaces, TooManyExpectedBytesDeadlockSayingWhatIsStillExpected) {
  std::string err = runRing(
      {{16,
        "                tlx.barrier_expect_bytes(tlx.local_view(full, s), BLOCK * BLOCK * 8)"}});
  EXPECT_TRUE(contains(err, "deadlock")) << err;
  EXPECT_TRUE(contains(err, "ring.py:22:")) << err;
  EXPECT_TRUE(contains(err, "still expects 256 transaction bytes")) << err;
  EXPECT_TRUE(contains(err, "ring.py:16:17: note: barrier_expect_bytes by default task here: the "
                            "phase expects 512 transaction bytes, its copies delivered 256"))
      << err;
}

TEST(InterpRaces, ReadWithoutWaitingForTheTmaBarrier) {
  std::string err = runRing({{22, "                pass"}});
  EXPECT_TRUE(contains(err, "ring.py:23:")) << err;
  EXPECT_TRUE(contains(err, "is still writing")) << err;
}

TEST(InterpRaces, ReleasingASlotBeforeReadingItIsReported) {
  // The consumer arrives on `empty` before its local_load: the producer may refill the slot
  // while it is read.
  std::string err =
      runRing({{23, "                tlx.barrier_arrive(tlx.local_view(empty, s))"},
               {24, "                acc += tlx.local_load(tlx.local_view(bufs, s))"}});
  EXPECT_TRUE(contains(err, "ring.py:17:") || contains(err, "ring.py:24:")) << err;
  EXPECT_TRUE(contains(err, "overwrites shared memory") || contains(err, "is still writing"))
      << err;
}

TEST(InterpRaces, WarpSpecializedHopperGemmRunsCleanUnderSeededSchedules) {
  const int M = 100, N = 72, K = 48;
  SourceKernel k("python/warpweave/ops/kernels/hopper/gemm_ws.py", "gemm_ws_kernel",
                 "a_desc:desc<fp16,32x16>, b_desc:desc<fp16,16x32>, c_desc:desc<fp16,32x32>, "
                 "M:i32, N:i32, K:i32, BLOCK_M=64, BLOCK_N=32, BLOCK_K=16, GROUP_M=2, "
                 "NUM_STAGES=2, NUM_SMS=2");
  ASSERT_TRUE(k.ok()) << k.error;
  std::vector<uint16_t> a = randomHalves(size_t(M) * K, 31, 8, 0.125f),
                        b = randomHalves(size_t(K) * N, 32, 8, 0.125f);
  for (uint64_t seed : {1, 5, 99}) {
    std::vector<uint16_t> c(size_t(M) * N, 0xFFFF);
    interp::RunOptions o;
    o.seed = seed;
    o.schedules = 2; // seeds `seed` and `seed + 1`
    k.run({2},
          {InterpArg::descriptor(a.data(), a.size() * 2, {M, K}, {K, 1}),
           InterpArg::descriptor(b.data(), b.size() * 2, {K, N}, {N, 1}),
           InterpArg::descriptor(c.data(), c.size() * 2, {M, N}, {N, 1}), InterpArg::integer(M),
           InterpArg::integer(N), InterpArg::integer(K)},
          o);
    for (int m = 0; m < M; ++m)
      for (int n = 0; n < N; ++n) {
        double ref = 0;
        for (int kk = 0; kk < K; ++kk) ref += double(h2f(a[m * K + kk])) * h2f(b[kk * N + n]);
        ASSERT_EQ(c[m * N + n], interp::encodeSmallFloat(DType::F16, ref))
            << "seed " << seed << " at " << m << "," << n;
      }
  }
}

namespace {

/// A writer task stores a tile to shared memory and arrives on named barrier 1; the default
/// task waits there and reads it. `waitLine` replaces line 13 (the wait).
std::string runNamedHandoff(const std::string& waitLine, uint64_t seed) {
  std::string text =
      "import warpweave as ww\n"                                                     // 1
      "import warpweave.language as tl\n"                                            // 2
      "from warpweave import tlx\n"                                                  // 3
      "\n"                                                                           // 4
      "\n"                                                                           // 5
      "@ww.jit\n"                                                                    // 6
      "def handoff(x_ptr, out_ptr, BLOCK: tl.constexpr):\n"                          // 7
      "    buf = tlx.local_alloc((BLOCK,), tl.float32, 1)\n"                         // 8
      "    offs = tl.arange(0, BLOCK)\n"                                             // 9
      "    with tlx.async_tasks():\n"                                                // 10
      "        with tlx.async_task(\"default\"):\n"                                  // 11
      "            v = tlx.local_view(buf, 0)\n"                                     // 12
      + waitLine + "\n" +                                                            // 13
      "            tl.store(out_ptr + offs, tlx.local_load(v))\n"                    // 14
      "        with tlx.async_task(num_warps=4):\n"                                  // 15
      "            tlx.local_store(tlx.local_view(buf, 0), tl.load(x_ptr + offs))\n" // 16
      "            tlx.named_barrier_arrive(1, 256)\n";                              // 17
  CompileRequest req;
  req.files.push_back({"handoff.py", text});
  req.kernel = "handoff";
  req.signature = parseSignature("x_ptr:*fp32, out_ptr:*fp32, BLOCK=16");
  req.stage = Stage::TileIR;
  CompiledKernel kernel = compile(req);
  std::vector<float> x(16), out(16, -1);
  for (int i = 0; i < 16; ++i) x[size_t(i)] = float(i) * 0.5f;
  int grid[3] = {1, 1, 1};
  interp::RunOptions o;
  o.seed = seed;
  try {
    interp::run(*kernel.module->functions.front(), kernel.module->sources, grid, {buf(x), buf(out)},
                o);
  } catch (const InterpreterError& e) {
    return e.what();
  }
  if (out != x) return "wrong result";
  return "";
}

} // namespace

TEST(InterpRaces, NamedBarrierHandoffIsCleanAndItsBugsAreReported) {
  for (uint64_t seed : {0, 1, 2, 3, 4, 5}) {
    EXPECT_EQ(runNamedHandoff("            tlx.named_barrier_wait(1, 256)", seed), "")
        << "seed " << seed;
    // Count mismatch: whichever side arrives first, the counts 128 and 256 of named barrier 1
    // are reported with both lines (the 128 threads of the writer cannot make up 256).
    std::string err = runNamedHandoff("            tlx.named_barrier_wait(1, 128)", seed);
    EXPECT_TRUE(contains(err, "named barrier 1 is used with different thread counts (128, 256): "
                              "the tasks that arrive on it with 256 threads have only 128"))
        << err;
    EXPECT_TRUE((contains(err, "handoff.py:13:13: error:") &&
                 contains(err, "handoff.py:17:13: note: named_barrier_arrive on named barrier 1 "
                               "with 256 threads by async task 1 (128 threads)")) ||
                (contains(err, "handoff.py:17:13: error:") &&
                 contains(err, "handoff.py:13:13: note: named_barrier_wait on named barrier 1 "
                               "with 128 threads by default task (128 threads)")))
        << err;
    // No barrier at all: the read is not ordered after the store.
    err = runNamedHandoff("            pass", seed);
    EXPECT_TRUE(contains(err, "handoff.py:14:")) << err;
    EXPECT_TRUE(contains(err, "local_load reads shared memory that nothing wrote") ||
                contains(err, "wrote, with no barrier ordering that write before this read"))
        << err;
  }
}

TEST(InterpRaces, RefillingAStageAnUnretiredWgmmaReadsIsReported) {
  // kernels/hopper/gemm_pipelined.py with one MMA too many left in flight: the stage of step
  // k - 1 is refilled while its wgmma may still read it.
  std::vector<SourceFile> files =
      kernelFiles("python/warpweave/ops/kernels/hopper/gemm_pipelined.py");
  std::string source = files[0].text;
  const std::string retire = "acc = tlx.async_dot_wait(1, acc)";
  ASSERT_NE(source.find(retire), std::string::npos);
  const int refill = lineOf(source, "tlx.async_descriptor_load(a_desc");
  const int dot = lineOf(source, "acc = tlx.async_dot(");
  CompileRequest req;
  req.kernel = "gemm_pipelined_kernel";
  req.signature = parseSignature(
      "a_desc:desc<fp16,32x16>, b_desc:desc<fp16,16x32>, c_desc:desc<fp16,32x32>, M:i32, N:i32, "
      "K:i32, BLOCK_M=32, BLOCK_N=32, BLOCK_K=16, GROUP_M=2, NUM_STAGES=3");
  req.stage = Stage::TileIR;
  const int M = 32, N = 32, K = 80;
  auto a = randomHalves(size_t(M) * K, 51, 8, 0.125f),
       b = randomHalves(size_t(K) * N, 52, 8, 0.125f);
  std::vector<uint16_t> c(size_t(M) * N, 0xFFFF);
  int grid[3] = {1, 1, 1};
  auto args = [&] {
    return std::vector<InterpArg>{InterpArg::descriptor(a.data(), a.size() * 2, {M, K}, {K, 1}),
                                  InterpArg::descriptor(b.data(), b.size() * 2, {K, N}, {N, 1}),
                                  InterpArg::descriptor(c.data(), c.size() * 2, {M, N}, {N, 1}),
                                  InterpArg::integer(M),
                                  InterpArg::integer(N),
                                  InterpArg::integer(K)};
  };
  // As written the kernel runs clean, also under seeded schedules.
  req.files = files;
  CompiledKernel clean = compile(req);
  interp::RunOptions o;
  o.seed = 3;
  o.schedules = 3;
  interp::run(*clean.module->functions.front(), clean.module->sources, grid, args(), o);

  source.replace(source.find(retire), retire.size(), "acc = tlx.async_dot_wait(2, acc)");
  req.files = files;
  req.files[0].text = source;
  CompiledKernel buggy = compile(req);
  try {
    interpret(buggy, grid, args());
    FAIL() << "expected an InterpreterError";
  } catch (const InterpreterError& e) {
    std::string err = e.what();
    EXPECT_TRUE(contains(err, "gemm_pipelined.py:" + std::to_string(refill) +
                                  ":5: error: async_desc_load overwrites shared memory that "
                                  "async_dot by the program may still be reading"))
        << err;
    EXPECT_TRUE(contains(err, "gemm_pipelined.py:" + std::to_string(dot) + ":"))
        << err; // the async_dot's note
  }
}

// ---------------------------------------------------------------------------------------------
// Several warp groups in one agent: async_dot_wait retires a wgmma for the waiting group only
// ---------------------------------------------------------------------------------------------

namespace {

/// kernels/hopper/gemm_pipelined.py (with `from` replaced by `to` when given) on a 64x32x80
/// product at `numWarps` under the schedules of `options`: the error, or "" once C is checked
/// exact (the products of eighths sum exactly in fp32). `withoutInsertedBarriers` runs it without
/// the barriers the compiler inserted (SharedMemoryBarriers.cpp).
std::string runPipelinedGemm(const std::string& source, int numWarps,
                             interp::RunOptions options = {},
                             bool withoutInsertedBarriers = false) {
  CompileRequest req;
  req.kernel = "gemm_pipelined_kernel";
  req.signature = parseSignature(
      "a_desc:desc<fp16,32x16>, b_desc:desc<fp16,16x32>, c_desc:desc<fp16,32x32>, M:i32, N:i32, "
      "K:i32, BLOCK_M=32, BLOCK_N=32, BLOCK_K=16, GROUP_M=2, NUM_STAGES=3");
  req.stage = Stage::TileIR;
  req.options.numWarps = numWarps;
  req.files = kernelFiles(
      "python/warpweave/ops/kernels/hopper/gemm_pipelined.py"); // with matmul.py's grouped_tile
  req.files[0].text = source;
  CompiledKernel kernel = compile(req);
  if (withoutInsertedBarriers) {
    // As the kernel ran before the compiler ordered shared memory itself (SharedMemoryBarriers).
    std::function<void(ir::Block&)> erase = [&](ir::Block& block) {
      std::erase_if(block.ops(), [](const std::unique_ptr<ir::Op>& op) {
        return op->code() == ir::OpCode::DebugBarrier && op->intAttr("smem_hazard");
      });
      for (auto& op : block.ops())
        for (unsigned r = 0; r < op->numRegions(); ++r) erase(*op->region(r));
    };
    erase(kernel.module->functions.front()->body);
  }
  const int M = 64, N = 32, K = 80;
  auto a = randomHalves(size_t(M) * K, 61, 8, 0.125f),
       b = randomHalves(size_t(K) * N, 62, 8, 0.125f);
  std::vector<uint16_t> c(size_t(M) * N, 0xFFFF);
  int grid[3] = {2, 1, 1};
  try {
    interp::run(*kernel.module->functions.front(), kernel.module->sources, grid,
                {InterpArg::descriptor(a.data(), a.size() * 2, {M, K}, {K, 1}),
                 InterpArg::descriptor(b.data(), b.size() * 2, {K, N}, {N, 1}),
                 InterpArg::descriptor(c.data(), c.size() * 2, {M, N}, {N, 1}),
                 InterpArg::integer(M), InterpArg::integer(N), InterpArg::integer(K)},
                options);
  } catch (const InterpreterError& e) {
    return e.what();
  }
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      float acc = 0;
      for (int kk = 0; kk < K; ++kk) acc += h2f(a[m * K + kk]) * h2f(b[kk * N + n]);
      EXPECT_EQ(c[m * N + n], interp::floatToHalf(acc)) << m << "," << n;
    }
  return "";
}

std::string replaced(std::string source, const std::string& from, const std::string& to) {
  size_t at = source.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) source.replace(at, from.size(), to);
  return source;
}

} // namespace

TEST(InterpRaces, PipelinedGemmOnTwoWarpGroupsIsCleanUnderSeeds) {
  const std::string source =
      kernelFiles("python/warpweave/ops/kernels/hopper/gemm_pipelined.py")[0].text;
  for (uint64_t seed : {0, 1, 7, 42}) {
    interp::RunOptions o;
    o.seed = seed;
    o.schedules = seed ? 3 : 1;
    EXPECT_EQ(runPipelinedGemm(source, 8, o), "") << "seed " << seed;
  }
  // The barrier may also be a named one of all 256 threads.
  EXPECT_EQ(
      runPipelinedGemm(replaced(source, "tl.debug_barrier()", "tlx.named_barrier_wait(1, 256)"), 8),
      "");
}

TEST(InterpRaces, RefillBeforeBothWarpGroupsRetiredTheirWgmmaIsReported) {
  // The kernel before its fix: thread 0 refills the stage of step k - 1 right after
  // async_dot_wait(1), which only the issuing warp group's wgmmas are past.
  const std::string fixed =
      kernelFiles("python/warpweave/ops/kernels/hopper/gemm_pipelined.py")[0].text;
  const std::string source = replaced(fixed, "tl.debug_barrier()", "pass");
  const int refill = lineOf(source, "tlx.async_descriptor_load(a_desc");
  const int wait = lineOf(source, "acc = tlx.async_dot_wait(1, acc)");
  const int dot = lineOf(source, "acc = tlx.async_dot(");
  // The compiler now inserts the barrier the fix added by hand, as Triton's does.
  EXPECT_EQ(runPipelinedGemm(source, 8), "");
  for (uint64_t seed : {0, 3}) {
    interp::RunOptions o;
    o.seed = seed;
    std::string err = runPipelinedGemm(source, 8, o, /*withoutInsertedBarriers=*/true);
    EXPECT_TRUE(contains(err, "gemm_pipelined.py:" + std::to_string(refill) +
                                  ":5: error: async_desc_load overwrites shared memory that "
                                  "async_dot by the program may still be reading in another "
                                  "warp group: the program spans 2 warp groups"))
        << err;
    EXPECT_TRUE(contains(err, "gemm_pipelined.py:" + std::to_string(wait) +
                                  ":15: note: async_dot_wait retired the async_dot here, for the "
                                  "waiting warp group only"))
        << err;
    EXPECT_TRUE(contains(err, "gemm_pipelined.py:" + std::to_string(dot) +
                                  ":15: note: the async_dot was issued here"))
        << err;
  }
  // One warp group: its own wait covers every wgmma, and the refill is correct.
  EXPECT_EQ(runPipelinedGemm(source, 4), "");
}

namespace {

/// An async task of TASK_WARPS warps TMA-loads one (A, B) tile pair per step into a single
/// stage, which its previous wgmma read: a race with two warp groups unless SYNC.
std::string taskDotSource(int taskWarps, const std::string& sync) {
  return "import warpweave as ww\n"
         "import warpweave.language as tl\n"
         "from warpweave import tlx\n"
         "\n"
         "\n"
         "@ww.jit\n"
         "def task_dot(a_desc, b_desc, c_ptr):\n"
         "    a_buf = tlx.local_alloc((64, 16), tl.float16, 1)\n"
         "    b_buf = tlx.local_alloc((16, 32), tl.float16, 1)\n"
         "    bars = tlx.alloc_barriers(num_barriers=2, arrive_count=1)\n"
         "    with tlx.async_tasks():\n"
         "        with tlx.async_task(\"default\"):\n"
         "            tl.store(c_ptr + 64 * 32, 1.0)\n"
         "        with tlx.async_task(num_warps=" +
         std::to_string(taskWarps) +
         "):\n"
         "            acc = tl.zeros([64, 32], dtype=tl.float32)\n"
         "            for i in range(2):\n"
         "                bar = tlx.local_view(bars, i)\n"
         "                tlx.barrier_expect_bytes(bar, 3072)\n"
         "                tlx.async_descriptor_load(a_desc, a_buf[0], [0, i * 16], bar)\n" // 19
         "                tlx.async_descriptor_load(b_desc, b_buf[0], [i * 16, 0], bar)\n"
         "                tlx.barrier_wait(bar, 0)\n"
         "                acc = tlx.async_dot(a_buf[0], b_buf[0], acc)\n" // 22
         "                acc = tlx.async_dot_wait(0, acc)\n"             // 23
         "                " +
         sync +
         "\n"
         "            offs = tl.arange(0, 64)[:, None] * 32 + tl.arange(0, 32)[None, :]\n"
         "            tl.store(c_ptr + offs, acc)\n";
}

std::string runTaskDot(int taskWarps, const std::string& sync) {
  CompileRequest req;
  req.kernel = "task_dot";
  req.signature = parseSignature("a_desc:desc<fp16,64x16>, b_desc:desc<fp16,16x32>, c_ptr:*fp32");
  req.stage = Stage::TileIR;
  req.files = {{"task_dot.py", taskDotSource(taskWarps, sync)}};
  CompiledKernel kernel = compile(req);
  const int M = 64, N = 32, K = 32;
  auto a = randomHalves(size_t(M) * K, 71, 8, 0.125f),
       b = randomHalves(size_t(K) * N, 72, 8, 0.125f);
  std::vector<float> c(size_t(M) * N + 1, -1.0f);
  int grid[3] = {1, 1, 1};
  try {
    interp::run(*kernel.module->functions.front(), kernel.module->sources, grid,
                {InterpArg::descriptor(a.data(), a.size() * 2, {M, K}, {K, 1}),
                 InterpArg::descriptor(b.data(), b.size() * 2, {K, N}, {N, 1}), buf(c)});
  } catch (const InterpreterError& e) {
    return e.what();
  }
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      float acc = 0;
      for (int kk = 0; kk < K; ++kk) acc += h2f(a[m * K + kk]) * h2f(b[kk * N + n]);
      EXPECT_EQ(c[m * N + n], acc) << m << "," << n;
    }
  return "";
}

} // namespace

TEST(InterpRaces, TaskOfTwoWarpGroupsNeedsATaskBarrierBeforeItsOwnRefill) {
  std::string err = runTaskDot(8, "pass");
  EXPECT_TRUE(contains(err, "task_dot.py:19:17: error: async_desc_load overwrites shared memory "
                            "that async_dot by async task 1 may still be reading in another "
                            "warp group: async task 1 spans 2 warp groups"))
      << err;
  EXPECT_TRUE(contains(err, "task_dot.py:23:23: note: async_dot_wait retired")) << err;
  EXPECT_TRUE(contains(err, "task_dot.py:22:23: note: the async_dot was issued here")) << err;
  // A barrier of the task's warps (debug_barrier inside a task is one), or a task of one group.
  EXPECT_EQ(runTaskDot(8, "tl.debug_barrier()"), "");
  EXPECT_EQ(runTaskDot(4, "pass"), "");
}

// ---------------------------------------------------------------------------------------------
// Views the interpreter refuses as the PTX backend does, with a location
// ---------------------------------------------------------------------------------------------

namespace {

std::string runViewKernel(const std::string& view, std::vector<float>* out = nullptr) {
  CompileRequest req;
  req.kernel = "view_sum";
  req.signature = parseSignature("x_ptr:*fp32, out_ptr:*i32");
  req.stage = Stage::TileIR;
  req.files = {{"views.py", "import warpweave as ww\n"
                            "import warpweave.language as tl\n"
                            "from warpweave import tlx\n"
                            "\n"
                            "\n"
                            "@ww.jit\n"
                            "def view_sum(x_ptr, out_ptr):\n"
                            "    buf = tlx.local_alloc((8, 8), tl.float32, 1)\n"
                            "    offs = tl.arange(0, 8)[:, None] * 8 + tl.arange(0, 8)[None, :]\n"
                            "    tlx.local_store(buf[0], tl.load(x_ptr + offs))\n"
                            "    v = " +
                                view +
                                "\n"
                                "    r = tlx.local_load(v)\n"
                                "    tl.store(out_ptr + tl.arange(0, 16), tl.reshape(r, [16]))\n"}};
  CompiledKernel kernel = compile(req);
  std::vector<float> x(64);
  for (int i = 0; i < 64; ++i) x[size_t(i)] = float(i);
  std::vector<int32_t> sink(16, 0);
  int grid[3] = {1, 1, 1};
  try {
    interp::run(*kernel.module->functions.front(), kernel.module->sources, grid,
                {buf(x), buf(sink)});
  } catch (const InterpreterError& e) {
    return e.what();
  }
  if (out) {
    out->clear();
    for (int32_t bits : sink) {
      float f;
      std::memcpy(&f, &bits, 4);
      out->push_back(f);
    }
  }
  return "";
}

} // namespace

TEST(InterpTlx, ReinterpretOfASliceOrTransposeIsRefusedLikeTheBackend) {
  const std::string refusal =
      "views.py:11:9: error: tlx.local_reinterpret of a sliced, transposed or reinterpreted view "
      "is not supported; reinterpret the buffer and slice the result";
  // Columns 4..7 of every row: not contiguous.
  std::string err = runViewKernel(
      "tlx.local_reinterpret(tlx.local_slice(buf[0], [0, 4], [8, 2]), tl.int32, [16])");
  EXPECT_TRUE(contains(err, refusal)) << err;
  err = runViewKernel("tlx.local_reinterpret(tlx.local_trans(tlx.local_slice(buf[0], [0, 0], "
                      "[4, 4])), tl.int32, [16])");
  EXPECT_TRUE(contains(err, refusal)) << err;
  // Rows 2 and 3 are contiguous bytes: read exactly, as int32 bits of the floats 16..31.
  std::vector<float> out;
  EXPECT_EQ(
      runViewKernel(
          "tlx.local_reinterpret(tlx.local_slice(buf[0], [2, 0], [2, 8]), tl.int32, [16])", &out),
      "");
  ASSERT_EQ(out.size(), 16u);
  for (int i = 0; i < 16; ++i) EXPECT_EQ(out[size_t(i)], float(16 + i));
}

TEST(InterpTlx, TransposeThatIsNotAPermutationIsALocatedError) {
  std::string err = runViewKernel("tlx.local_reinterpret(buf[0], tl.int32, [8, 8])\n"
                                  "    v = tlx.local_slice(tlx.local_trans(v, [0, 0]), [0, 0], "
                                  "[2, 8])");
  EXPECT_TRUE(contains(err, "views.py:12:25: error: tlx.local_trans's dims must be a permutation "
                            "of the 2 dimensions of the buffer (each of 0..1 once)"))
      << err;
}

TEST(InterpTlx, MalformedViewAndTaskIrIsALocatedError) {
  // IR the front end never emits, as a hand-built module may: located errors, not crashes.
  TestKernel rank("rank", "    s = tlx.local_slice(buf, [0], [4])\n");
  Value* bufs = rank.b.create1(OpCode::LocalAlloc, {}, Type::buffer(DType::F32, {4, 8}, 1));
  Value* v = view(rank.b, bufs, rank.b.i32(0));
  rank.at(1, 9);
  rank.b.create1(OpCode::LocalSlice, {v}, Type::buffer(DType::F32, {4, 8}, 1),
                 {{"offsets", std::vector<int64_t>{0}}, {"sizes", std::vector<int64_t>{4}}});
  rank.b.ret();
  EXPECT_TRUE(contains(rank.runExpectingError({1}, {}),
                       "rank.py:1:9: error: local_slice of a rank-2 buffer with 1 offsets and 1 "
                       "sizes: give one of each per dimension"));

  TestKernel wrong("wrong", "    x = tlx.local_load(bars[0])\n");
  Value* bars = allocBarriers(wrong.b, 1, 1);
  Value* bar0 = view(wrong.b, bars, wrong.b.i32(0));
  wrong.at(1, 9);
  wrong.b.create1(OpCode::LocalLoad, {bar0}, Type::tensor(DType::F32, {4, 8}));
  wrong.b.ret();
  std::string err = wrong.runExpectingError({1}, {});
  EXPECT_TRUE(contains(err, "wrong.py:1:9: error: local_load takes a shared buffer "
                            "(tlx.local_alloc or a view of one) as operand 0, got"))
      << err;

  TestKernel waitOnBuffer("wait", "    tlx.barrier_wait(buf, 0)\n");
  Value* wb = waitOnBuffer.b.create1(OpCode::LocalAlloc, {}, Type::buffer(DType::F32, {4, 8}, 1));
  waitOnBuffer.at(1, 5);
  waitOnBuffer.b.create(OpCode::BarrierWait,
                        {view(waitOnBuffer.b, wb, waitOnBuffer.b.i32(0)), waitOnBuffer.b.i32(0)},
                        {});
  waitOnBuffer.b.ret();
  err = waitOnBuffer.runExpectingError({1}, {});
  EXPECT_TRUE(contains(err, "wait.py:1:5: error: barrier_wait takes an mbarrier "
                            "(tlx.alloc_barriers or a view of one) as operand 0, got"))
      << err;

  TestKernel task("task", "    with tlx.async_task(num_warps=4):\n");
  task.at(1, 10);
  Op* t = task.b.create(OpCode::AsyncTask, {}, {}, {{"num_warps", int64_t(4)}});
  t->addRegion();
  task.b.ret();
  err = task.runExpectingError({1}, {});
  EXPECT_TRUE(contains(err, "task.py:1:10: error: tlx.async_task outside 'with "
                            "tlx.async_tasks()'"))
      << err;
}

TEST(InterpTlx, LocalLoadOfAShapeTheViewDoesNotHoldIsALocatedError) {
  TestKernel k("shape", "    x = tlx.local_load(bufs[0])\n");
  Value* bufs = k.b.create1(OpCode::LocalAlloc, {}, Type::buffer(DType::F32, {4, 8}, 2));
  Value* v = view(k.b, bufs, k.b.i32(0));
  k.b.create(OpCode::LocalStore, {v, zerosF32(k.b, {4, 8})}, {});
  k.at(1, 9);
  k.b.create1(OpCode::LocalLoad, {v}, Type::tensor(DType::F32, {8, 8}));
  k.b.ret();
  EXPECT_EQ(k.runExpectingError({1}, {}),
            "shape.py:1:9: error: local_load moves 64 elements through a view of 1 buffer of 32 "
            "elements: the shapes must match one buffer or all of them (program (0, 0, 0))\n"
            "      x = tlx.local_load(bufs[0])\n"
            "          ^");
}

// ---------------------------------------------------------------------------------------------
// Thread-block clusters: the CTAs of a cluster run together.
// ---------------------------------------------------------------------------------------------

TEST(InterpRaces, ColumnSlicesOfOneTileAreDisjointRows) {
  // Two column halves of a [4, 8] fp16 tile (16-byte rows): bytes 0..7 and 8..15 of each row.
  interp::ByteSpan left{0, 3 * 16 + 8, 16, 0, 8}, right{8, 4 * 16, 16, 8, 8};
  interp::ByteSpan whole{0, 64}, secondRow{16, 32};
  EXPECT_FALSE(left.overlaps(right));
  EXPECT_FALSE(right.overlaps(left));
  EXPECT_TRUE(left.overlaps(whole) && whole.overlaps(right));
  EXPECT_TRUE(secondRow.overlaps(left) && secondRow.overlaps(right));
  EXPECT_TRUE(whole.covers(left) && whole.covers(right));
  EXPECT_FALSE(left.covers(right) || left.covers(whole) || left.covers(secondRow));
  // A quarter inside the left half (bytes 4..7 of rows 1 and 2) is covered by it, not by the
  // right half; a left half of another pitch is assumed to meet it.
  interp::ByteSpan quarter{16 + 4, 2 * 16 + 8, 16, 4, 4};
  EXPECT_TRUE(left.covers(quarter));
  EXPECT_FALSE(right.covers(quarter) || right.overlaps(quarter));
  EXPECT_TRUE(interp::ByteSpan({0, 64, 32, 0, 8}).overlaps(right));
}

TEST(InterpClusters, TwoCtaClusterGemmWithMulticastAndRemoteArrives) {
  // gemm_ws CLUSTER_N=2 at small tiles: each CTA multicasts one half of A into both CTAs and its
  // consumers release every stage on both CTAs' empty barriers. Odd tile counts leave the
  // second CTA of the last cluster past the edge.
  const int M = 136, N = 104, K = 56;
  SourceKernel k("python/warpweave/ops/kernels/hopper/gemm_ws.py", "gemm_ws_kernel",
                 "a_desc:desc<fp16,16x16>, b_desc:desc<fp16,16x32>, c_desc:desc<fp16,16x32>, "
                 "M:i32, N:i32, K:i32, BLOCK_M=32, BLOCK_N=32, BLOCK_K=16, GROUP_M=2, "
                 "NUM_STAGES=2, NUM_SMS=4, CLUSTER_N=2",
                 4, 2);
  ASSERT_TRUE(k.ok()) << k.error;
  std::vector<uint16_t> a = randomHalves(size_t(M) * K, 31, 8, 0.125f);
  std::vector<uint16_t> b = randomHalves(size_t(K) * N, 32, 8, 0.125f);
  std::vector<uint16_t> c(size_t(M) * N, 0xFFFF);
  std::vector<InterpArg> args = {InterpArg::descriptor(a.data(), a.size() * 2, {M, K}, {K, 1}),
                                 InterpArg::descriptor(b.data(), b.size() * 2, {K, N}, {N, 1}),
                                 InterpArg::descriptor(c.data(), c.size() * 2, {M, N}, {N, 1}),
                                 InterpArg::integer(M),
                                 InterpArg::integer(N),
                                 InterpArg::integer(K)};
  k.run({4}, args);
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      double ref = 0; // multiples of 1/64 summed over K = 56: exact in fp32
      for (int kk = 0; kk < K; ++kk) ref += double(h2f(a[m * K + kk])) * h2f(b[kk * N + n]);
      ASSERT_EQ(c[m * N + n], interp::encodeSmallFloat(DType::F16, ref)) << m << "," << n;
    }
  // The launcher's rule: whole clusters only.
  try {
    k.run({3}, args);
    FAIL() << "expected a LaunchError";
  } catch (const LaunchError& e) {
    EXPECT_STREQ(e.what(), "kernel 'gemm_ws_kernel' runs in clusters of 2 CTAs (ctas_per_cga): "
                           "grid[0] = 3 must be a multiple of 2");
  }
}
