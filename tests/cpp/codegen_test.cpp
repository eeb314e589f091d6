// PTX codegen tests: kernels built with ir::Builder, lowered to PTX for each target, and
// assembled by ptxas; assertions on the instructions the lowering must choose.
#include "codegen/Codegen.h"
#include "codegen/PtxBuilder.h"
#include "ir/Builder.h"
#include "runtime/Ptxas.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <iostream>
#include <regex>

namespace ww {
namespace {

using ir::DType;
using ir::OpCode;
using ir::Type;
using ir::Value;

/// A kernel under construction: its function, a builder at the end of its body.
struct KernelBuilder {
  std::unique_ptr<ir::Function> fn = std::make_unique<ir::Function>();
  ir::Builder b{&fn->body};

  explicit KernelBuilder(std::string name, int numWarps = 4) {
    fn->name = std::move(name);
    fn->numWarps = numWarps;
  }
  Value* arg(const std::string& name, Type t, int divisibility = 1) {
    Value* v = fn->body.addArg(t, name);
    fn->args.push_back({name, t, divisibility, false, v});
    return v;
  }
  /// pid * block + arange(0, block)
  Value* offsets(int64_t block) {
    Value* pid = b.programId(0);
    Value* start = b.binary(OpCode::Mul, pid, b.i32(block));
    return b.binary(OpCode::Add, b.splat(start, {block}), b.arange(0, block));
  }
  Value* ptrs(Value* base, Value* offs) {
    return b.addPtr(b.splat(base, offs->type().shape), offs);
  }
};

CompileOptions optionsFor(Target t, int numWarps = 4) {
  CompileOptions o;
  o.target = t;
  o.numWarps = numWarps;
  return o;
}

/// Emits and assembles; fails the test with ptxas's log (and the PTX) when ptxas rejects it.
codegen::PtxKernel emitAndAssemble(const ir::Function& fn, Target target,
                                   const SourceManager* sm = nullptr) {
  codegen::PtxKernel k = codegen::emitPtx(fn, optionsFor(target, fn.numWarps), sm);
  if (std::getenv("WW_TEST_DUMP_PTX")) std::cout << k.ptx << "\n";
  runtime::PtxasResult r = runtime::runPtxas(k.ptx, target, k.entry);
  EXPECT_TRUE(r.ok) << "ptxas rejected the PTX for " << targetName(target) << ":\n"
                    << r.log << "\n"
                    << k.ptx;
  EXPECT_EQ(r.spillBytes, 0) << r.log;
  return k;
}

int count(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t p = text.find(needle); p != std::string::npos; p = text.find(needle, p + 1)) ++n;
  return n;
}

const Target kAllTargets[] = {Target::SM90a, Target::SM80, Target::SM100a};
const Target kTestedTargets[] = {Target::SM90a, Target::SM80};

/// Triton's tutorial vector add: out = x + y over n elements, BLOCK=1024.
std::unique_ptr<ir::Function> vectorAdd(int divisibility, SourceLoc loc = {}) {
  KernelBuilder k("add_kernel");
  k.b.setLoc(loc);
  Value* x = k.arg("x_ptr", Type::ptr(DType::F32), divisibility);
  Value* y = k.arg("y_ptr", Type::ptr(DType::F32), divisibility);
  Value* out = k.arg("out_ptr", Type::ptr(DType::F32), divisibility);
  Value* n = k.arg("n", Type::scalar(DType::I32), divisibility);
  Value* offs = k.offsets(1024);
  Value* mask = k.b.cmp("lt", offs, k.b.splat(n, {1024}));
  Value* xv = k.b.load(k.ptrs(x, offs), mask);
  Value* yv = k.b.load(k.ptrs(y, offs), mask);
  Value* sum = k.b.binary(OpCode::Add, xv, yv);
  k.b.store(k.ptrs(out, offs), sum, mask);
  k.b.ret();
  return std::move(k.fn);
}

TEST(PtxBuilder, HashConsesPureInstructionsWithinScopes) {
  codegen::PtxBuilder b;
  std::string t = b.pure("mov.u32", codegen::RegClass::B32, {"%tid.x"});
  std::string a = b.pure("add.s32", codegen::RegClass::B32, {t, "4"});
  EXPECT_EQ(a, b.pure("add.s32", codegen::RegClass::B32, {t, "4"}));
  EXPECT_NE(a, b.pure("add.s32", codegen::RegClass::B32, {t, "8"}));
  b.pushScope();
  std::string inner = b.pure("mul.lo.s32", codegen::RegClass::B32, {t, "3"});
  EXPECT_EQ(inner, b.pure("mul.lo.s32", codegen::RegClass::B32, {t, "3"}));
  EXPECT_EQ(a, b.pure("add.s32", codegen::RegClass::B32, {t, "4"})); // outer entries visible
  b.popScope();
  // After the region, its instructions are emitted again (the region may not have run).
  EXPECT_NE(inner, b.pure("mul.lo.s32", codegen::RegClass::B32, {t, "3"}));
  EXPECT_EQ(count(b.body(), "add.s32"), 2);
  EXPECT_EQ(count(b.body(), "mul.lo.s32"), 2);
  EXPECT_NE(b.regDeclarations().find(".reg .b32 %r<"), std::string::npos);
}

TEST(PtxBuilder, FloatImmediatesAreBitExact) {
  EXPECT_EQ(codegen::immF32(1.0f), "0f3F800000");
  EXPECT_EQ(codegen::immF32(-2.5f), "0fC0200000");
  EXPECT_EQ(codegen::immF64(1.0), "0d3FF0000000000000");
}

TEST(Codegen, VectorAddAssemblesForEveryTarget) {
  auto fn = vectorAdd(16);
  for (Target t : kAllTargets) {
    SCOPED_TRACE(targetName(t));
    codegen::PtxKernel k = emitAndAssemble(*fn, t);
    EXPECT_EQ(k.entry, "add_kernel");
    EXPECT_NE(k.ptx.find(std::string(".target ") + targetName(t)), std::string::npos);
    EXPECT_NE(k.ptx.find(".reqntid 128, 1, 1"), std::string::npos);
  }
}

TEST(Codegen, VectorAddUses16ByteVectorsWhenAligned) {
  auto fn = vectorAdd(16);
  codegen::PtxKernel k = emitAndAssemble(*fn, Target::SM90a);
  // 1024 fp32 over 128 threads: 8 per thread, two 16-byte vectors per tensor.
  EXPECT_EQ(count(k.ptx, "ld.global.v4.f32"), 4) << k.ptx;
  EXPECT_EQ(count(k.ptx, "st.global.v4.f32"), 2) << k.ptx;
  EXPECT_EQ(count(k.ptx, "ld.global.f32"), 0) << k.ptx;
  // Masked: every vector access is predicated.
  EXPECT_TRUE(std::regex_search(k.ptx, std::regex(R"(@%p\d+ ld\.global\.v4\.f32)"))) << k.ptx;
  EXPECT_TRUE(std::regex_search(k.ptx, std::regex(R"(@%p\d+ st\.global\.v4\.f32)"))) << k.ptx;
}

TEST(Codegen, VectorAddUsesScalarAccessesWhenUnaligned) {
  auto fn = vectorAdd(1);
  codegen::PtxKernel k = emitAndAssemble(*fn, Target::SM90a);
  EXPECT_EQ(count(k.ptx, "ld.global.v"), 0) << k.ptx;
  EXPECT_EQ(count(k.ptx, "st.global.v"), 0) << k.ptx;
  EXPECT_EQ(count(k.ptx, "ld.global.f32"), 16) << k.ptx;
  EXPECT_EQ(count(k.ptx, "st.global.f32"), 8) << k.ptx;
}

TEST(Codegen, VectorAddParamsAndLineInfo) {
  SourceManager sm;
  uint32_t file = sm.addFile("kernels/vector_add.py", "def add_kernel(x, y, out, n):\n  pass\n");
  auto fn = vectorAdd(16, SourceLoc{file, 2, 5});
  codegen::PtxKernel k = emitAndAssemble(*fn, Target::SM90a, &sm);
  ASSERT_EQ(k.params.size(), 4u);
  EXPECT_EQ(k.params[0].name, "x_ptr");
  EXPECT_EQ(k.params[0].type, "ptr<fp32>");
  EXPECT_EQ(k.params[0].sizeBytes, 8);
  EXPECT_EQ(k.params[0].divisibility, 16);
  EXPECT_EQ(k.params[3].name, "n");
  EXPECT_EQ(k.params[3].sizeBytes, 4);
  EXPECT_NE(k.ptx.find(".param .u64 add_kernel_param_0"), std::string::npos);
  EXPECT_NE(k.ptx.find(".param .u32 add_kernel_param_3"), std::string::npos);
  EXPECT_NE(k.ptx.find(".file 1 \"kernels/vector_add.py\""), std::string::npos) << k.ptx;
  EXPECT_NE(k.ptx.find(".loc 1 2 5"), std::string::npos) << k.ptx;
  EXPECT_EQ(k.sharedBytes, 0);
}

TEST(Codegen, RedundantIndexMathIsEmittedOnce) {
  auto fn = vectorAdd(16);
  codegen::PtxKernel k = emitAndAssemble(*fn, Target::SM90a);
  // The three pointer tensors share the offsets: one %tid.x read, one %ctaid.x read.
  EXPECT_EQ(count(k.ptx, "%tid.x"), 1) << k.ptx;
  EXPECT_EQ(count(k.ptx, "%ctaid.x"), 1) << k.ptx;
}

} // namespace
} // namespace ww
