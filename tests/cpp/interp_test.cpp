// Interpreter tests: kernels built with ir::Builder run on host buffers and are checked against
// C++ references computed here.
#include "interp/Interpreter.h"
#include "interp/Numerics.h"
#include "ir/Builder.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
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
  std::printf("vector add of %lld elements: %.3f s\n", (long long)n, seconds);
  EXPECT_LT(seconds, 1.0);
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
