// PTX codegen tests: kernels built with ir::Builder, lowered to PTX for each target, and
// assembled by ptxas; assertions on the instructions the lowering must choose.
#include "codegen/Codegen.h"
#include "codegen/PtxBuilder.h"
#include "ir/Builder.h"
#include "runtime/Ptxas.h"
#include "warpweave/runtime.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <map>
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

TEST(PtxBuilder, DeadInstructionsAndDeadLoopCyclesAreRemoved) {
  using codegen::RegClass;
  codegen::PtxBuilder b;
  std::string t = b.pure("mov.u32", RegClass::B32, {"%tid.x"});
  std::string used = b.pure("add.s32", RegClass::B32, {t, "1"});
  b.pure("mul.lo.s32", RegClass::B32, {t, "7"}); // never read
  // A loop-carried register that only feeds itself (a dead cycle), and a live one.
  std::string dead = b.newReg(RegClass::B32), live = b.newReg(RegClass::B32);
  b.inst("mov.b32", {dead, "0"});
  b.inst("mov.b32", {live, "0"});
  b.label("$L_loop");
  std::string deadNext = b.pure("add.s32", RegClass::B32, {dead, "16"});
  b.inst("mov.b32", {dead, deadNext});
  std::string liveNext = b.pure("add.s32", RegClass::B32, {live, used});
  b.inst("mov.b32", {live, liveNext});
  std::string p = b.pure("setp.lt.s32", RegClass::Pred, {live, "100"});
  b.inst("bra", {"$L_loop"}, p);
  b.inst("st.global.b32", {"[%rd0]", live});
  b.eliminateDeadInstructions();
  const std::string& body = b.body();
  EXPECT_EQ(body.find("mul.lo.s32"), std::string::npos) << body;
  EXPECT_EQ(body.find(", 16;"), std::string::npos) << body; // the dead cycle's add
  EXPECT_EQ(body.find("mov.b32 " + dead), std::string::npos) << body;
  EXPECT_NE(body.find("mov.b32 " + live + ", " + liveNext), std::string::npos) << body;
  EXPECT_NE(body.find("add.s32 " + used), std::string::npos);
  EXPECT_NE(body.find("setp.lt.s32"), std::string::npos);
  EXPECT_NE(body.find("$L_loop:"), std::string::npos);
  EXPECT_NE(body.find("st.global.b32"), std::string::npos);
}

TEST(Codegen, UnsupportedOpsAreUserErrorsAtTheirLocation) {
  // An in-kernel descriptor reaches codegen only when the rewrite before it (compile's
  // lowerDeviceDescriptors) did not run, as with this hand-built IR.
  KernelBuilder k("describing");
  Value* base = k.arg("x", Type::ptr(DType::F32));
  k.b.setLoc(SourceLoc{0, 7, 3});
  k.b.create1(OpCode::MakeDescriptor,
              {base, k.b.i32(64), k.b.constInt(1, Type::scalar(DType::I64))},
              Type::descriptor(DType::F32, {64}, 1), {{"block_shape", std::vector<int64_t>{64}}});
  k.b.ret();
  try {
    codegen::emitPtx(*k.fn, optionsFor(Target::SM80), nullptr);
    FAIL() << "expected a CompileError";
  } catch (const CompileError& e) {
    EXPECT_EQ(e.diagnostic().loc.line, 7u);
    EXPECT_NE(std::string(e.what()).find("'make_desc'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("sm_80"), std::string::npos) << e.what();
  }
  KernelBuilder w("odd_warps", 3);
  w.b.ret();
  EXPECT_THROW(codegen::emitPtx(*w.fn, optionsFor(Target::SM90a, 3), nullptr), CompileError);
}

TEST(Codegen, VoteBallotOfAPerThreadPredicate) {
  KernelBuilder k("voting");
  Value* out = k.arg("out", Type::ptr(DType::I32));
  Value* pred = k.b.cmp(
      "lt", k.b.create1(OpCode::ThreadId, {}, Type::scalar(DType::I32), {{"axis", int64_t(0)}}),
      k.b.i32(5));
  Value* ballot = k.b.create1(OpCode::VoteBallot, {k.b.i32(-1), pred}, Type::scalar(DType::I32));
  k.b.store(out, ballot);
  k.b.ret();
  for (Target t : {Target::SM90a, Target::SM80, Target::SM100a}) {
    codegen::PtxKernel p = emitAndAssemble(*k.fn, t);
    EXPECT_NE(p.ptx.find("vote.sync.ballot.b32"), std::string::npos) << p.ptx;
  }
  // A tensor predicate (TLX's rule): each thread votes once, with the OR of the elements it
  // holds, and every one of them gets the ballot; the result lies as the predicate.
  KernelBuilder v("tensor_vote");
  Value* vout = v.arg("out", Type::ptr(DType::I32));
  Value* offs = v.offsets(512); // four elements a thread with 4 warps
  Value* tp = v.b.cmp("lt", offs, v.b.splat(v.b.i32(5), {512}));
  Value* tb = v.b.create1(OpCode::VoteBallot, {v.b.i32(-1), tp}, Type::tensor(DType::I32, {512}));
  v.b.store(v.ptrs(vout, offs), tb);
  v.b.ret();
  for (Target t : {Target::SM90a, Target::SM80, Target::SM100a}) {
    codegen::PtxKernel p = emitAndAssemble(*v.fn, t);
    size_t at = p.ptx.find("vote.sync.ballot.b32");
    ASSERT_NE(at, std::string::npos) << p.ptx;
    EXPECT_EQ(p.ptx.find("vote.sync.ballot.b32", at + 1), std::string::npos) << p.ptx;
    EXPECT_NE(p.ptx.find("or.pred"), std::string::npos) << p.ptx;
  }
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
  EXPECT_EQ(count(k.ptx, "ld.global.v4.b32"), 4) << k.ptx;
  EXPECT_EQ(count(k.ptx, "st.global.v4.b32"), 2) << k.ptx;
  EXPECT_EQ(count(k.ptx, "ld.global.b32"), 0) << k.ptx;
  // Masked: every vector access is predicated.
  EXPECT_TRUE(std::regex_search(k.ptx, std::regex(R"(@%p\d+ ld\.global\.v4\.b32)"))) << k.ptx;
  EXPECT_TRUE(std::regex_search(k.ptx, std::regex(R"(@%p\d+ st\.global\.v4\.b32)"))) << k.ptx;
}

TEST(Codegen, VectorAddUsesScalarAccessesWhenUnaligned) {
  auto fn = vectorAdd(1);
  codegen::PtxKernel k = emitAndAssemble(*fn, Target::SM90a);
  EXPECT_EQ(count(k.ptx, "ld.global.v"), 0) << k.ptx;
  EXPECT_EQ(count(k.ptx, "st.global.v"), 0) << k.ptx;
  EXPECT_EQ(count(k.ptx, "ld.global.b32"), 16) << k.ptx;
  EXPECT_EQ(count(k.ptx, "st.global.b32"), 8) << k.ptx;
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

// ---------------------------------------------------------------------------------------------
// Elementwise arithmetic, math, casts
// ---------------------------------------------------------------------------------------------

using BodyFn = std::function<std::vector<Value*>(KernelBuilder&, const std::vector<Value*>&)>;

/// Loads one tensor of `n` elements per input type, applies `body`, stores every result to its
/// own output pointer (all pointers 16-byte aligned).
std::unique_ptr<ir::Function> elementwiseKernel(const std::string& name,
                                                const std::vector<DType>& inputs,
                                                const BodyFn& body, int64_t n = 256) {
  KernelBuilder k(name);
  std::vector<Value*> ptrArgs;
  for (size_t i = 0; i < inputs.size(); ++i)
    ptrArgs.push_back(k.arg("in" + std::to_string(i), Type::ptr(inputs[i]), 16));
  // Outputs are added after the body tells their types; remember where they go.
  Value* offs = k.offsets(n);
  std::vector<Value*> vals;
  for (size_t i = 0; i < inputs.size(); ++i) vals.push_back(k.b.load(k.ptrs(ptrArgs[i], offs)));
  std::vector<Value*> results = body(k, vals);
  for (size_t i = 0; i < results.size(); ++i) {
    Value* out = k.arg("out" + std::to_string(i), Type::ptr(results[i]->type().elem), 16);
    k.b.store(k.ptrs(out, offs), results[i]);
  }
  k.b.ret();
  return std::move(k.fn);
}

Value* binop(KernelBuilder& k, OpCode code, Value* a, Value* b) {
  return k.b.binary(code, a, b);
}
Value* unop(KernelBuilder& k, OpCode code, Value* a, std::vector<ir::NamedAttr> attrs = {}) {
  return k.b.create1(code, {a}, a->type(), std::move(attrs));
}
Value* castTo(KernelBuilder& k, Value* a, DType to) {
  return k.b.create1(OpCode::Cast, {a}, a->type().withElem(to));
}

TEST(Codegen, IntegerArithmeticFollowsSignedness) {
  for (DType t : {DType::I8, DType::U8, DType::I16, DType::U16, DType::I32, DType::U32, DType::I64,
                  DType::U64}) {
    SCOPED_TRACE(std::string(ir::tlName(t)));
    auto fn = elementwiseKernel("int_ops", {t, t}, [](KernelBuilder& k, auto v) {
      std::vector<Value*> r;
      for (OpCode c : {OpCode::Add, OpCode::Sub, OpCode::Mul, OpCode::Div, OpCode::Rem,
                       OpCode::FloorDiv, OpCode::And, OpCode::Or, OpCode::Xor, OpCode::Shl,
                       OpCode::Shr, OpCode::Max, OpCode::Min})
        r.push_back(binop(k, c, v[0], v[1]));
      r.push_back(unop(k, OpCode::Neg, v[0]));
      r.push_back(unop(k, OpCode::Not, v[0]));
      r.push_back(unop(k, OpCode::Abs, v[0]));
      Value* lt = k.b.cmp("lt", v[0], v[1]);
      r.push_back(lt);
      r.push_back(k.b.create1(OpCode::Select, {lt, v[0], v[1]}, v[0]->type()));
      r.push_back(k.b.create1(OpCode::Fma, {v[0], v[1], v[0]}, v[0]->type()));
      return r;
    });
    for (Target target : kTestedTargets) {
      SCOPED_TRACE(targetName(target));
      codegen::PtxKernel k = emitAndAssemble(*fn, target);
      int bits = ir::bitWidth(t) == 8 ? 16 : ir::bitWidth(t);
      std::string s = ir::isSigned(t) ? "s" : "u";
      s += std::to_string(bits);
      EXPECT_NE(k.ptx.find("div." + s), std::string::npos) << k.ptx;
      EXPECT_NE(k.ptx.find("rem." + s), std::string::npos);
      EXPECT_NE(k.ptx.find("max." + s), std::string::npos);
      EXPECT_NE(k.ptx.find("setp.lt." + s), std::string::npos);
      EXPECT_NE(k.ptx.find(std::string(ir::isSigned(t) ? "shr.s" : "shr.u") + std::to_string(bits)),
                std::string::npos);
      if (ir::bitWidth(t) == 8) { // 8-bit results are re-normalized in their 16-bit registers
        EXPECT_NE(k.ptx.find(t == DType::I8 ? "cvt.s16.s8" : "and.b16"), std::string::npos);
      }
    }
  }
}

/// x / 2^k, x % 2^k and x // 2^k by an immediate: shifts and masks (ptxas turns div.s32 by an
/// immediate into a reciprocal-based division on the uniform datapath).
std::unique_ptr<ir::Function> powerOfTwoDivisionKernel(DType t) {
  return elementwiseKernel("pow2_div", {t}, [](KernelBuilder& k, auto v) {
    std::vector<Value*> r;
    for (int64_t d : {2, 8})
      for (OpCode c : {OpCode::Div, OpCode::Rem, OpCode::FloorDiv})
        r.push_back(binop(k, c, v[0], k.b.constInt(d, v[0]->type())));
    return r;
  });
}

TEST(Codegen, DivisionByAPowerOfTwoShifts) {
  for (DType t : {DType::I32, DType::U32, DType::I64, DType::U64}) {
    SCOPED_TRACE(std::string(ir::tlName(t)));
    auto fn = powerOfTwoDivisionKernel(t);
    codegen::PtxKernel k = emitAndAssemble(*fn, Target::SM90a);
    EXPECT_EQ(count(k.ptx, "div."), 0) << k.ptx;
    EXPECT_EQ(count(k.ptx, "rem."), 0) << k.ptx;
  }
}

TEST(Codegen, FloatDivisionByAPowerOfTwoMultiplies) {
  // x / 1024 and x / -0.25 round the same exact value as x * 2^-10 and x * -4: one multiply.
  // Divisors whose reciprocal is not a normal number (or that are not powers of two) keep
  // div.rn.
  for (DType t : {DType::F32, DType::F64}) {
    SCOPED_TRACE(std::string(ir::tlName(t)));
    auto fn = elementwiseKernel("float_pow2_div", {t}, [t](KernelBuilder& k, auto v) {
      std::vector<Value*> r;
      for (double d : {1024.0, -0.25, 3.0, std::ldexp(1.0, t == DType::F32 ? 127 : 1023)})
        r.push_back(binop(k, OpCode::Div, v[0], k.b.constFloat(d, v[0]->type())));
      return r;
    });
    codegen::PtxKernel k = emitAndAssemble(*fn, Target::SM90a);
    std::string ft = t == DType::F32 ? "f32" : "f64";
    std::string reciprocal = t == DType::F32 ? "0f3A800000" : "0d3F50000000000000";
    std::string minusFour = t == DType::F32 ? "0fC0800000" : "0dC010000000000000";
    // Each divisor is used once per element a thread holds.
    int perDivisor = count(k.ptx, reciprocal);
    EXPECT_GT(perDivisor, 0) << k.ptx;
    EXPECT_EQ(count(k.ptx, minusFour), perDivisor) << k.ptx;
    EXPECT_EQ(count(k.ptx, "div.rn." + ft), 2 * perDivisor) << k.ptx;
  }
}

TEST(Codegen, FloatArithmeticAndComparisons) {
  for (DType t : {DType::F16, DType::BF16, DType::F32, DType::F64}) {
    SCOPED_TRACE(std::string(ir::tlName(t)));
    auto fn = elementwiseKernel("float_ops", {t, t}, [](KernelBuilder& k, auto v) {
      std::vector<Value*> r;
      for (OpCode c : {OpCode::Add, OpCode::Sub, OpCode::Mul, OpCode::Div, OpCode::Rem,
                       OpCode::FloorDiv, OpCode::Max, OpCode::Min})
        r.push_back(binop(k, c, v[0], v[1]));
      r.push_back(unop(k, OpCode::Neg, v[0]));
      for (const char* p : {"eq", "ne", "lt", "le", "gt", "ge"})
        r.push_back(k.b.cmp(p, v[0], v[1]));
      r.push_back(k.b.create1(OpCode::Fma, {v[0], v[1], v[0]}, v[0]->type()));
      r.push_back(k.b.create1(OpCode::Select, {r[9], v[0], v[1]}, v[0]->type()));
      return r;
    });
    for (Target target : kTestedTargets) {
      SCOPED_TRACE(targetName(target));
      codegen::PtxKernel k = emitAndAssemble(*fn, target);
      std::string ft = t == DType::F64 ? "f64" : "f32"; // fp16/bf16 compute in fp32
      EXPECT_NE(k.ptx.find("div.rn." + ft), std::string::npos) << k.ptx;
      EXPECT_NE(k.ptx.find("fma.rn." + ft), std::string::npos);
      // != is unordered (true on NaN); the other comparisons are ordered.
      EXPECT_NE(k.ptx.find("setp.neu." + ft), std::string::npos);
      EXPECT_NE(k.ptx.find("setp.lt." + ft), std::string::npos);
      if (t != DType::F64) { // NaN yields the other operand, as tl.maximum's default
        EXPECT_NE(k.ptx.find("max.f32"), std::string::npos);
        EXPECT_EQ(k.ptx.find("max.NaN.f32"), std::string::npos);
      }
      if (t == DType::F16) {
        EXPECT_NE(k.ptx.find("cvt.rn.f16.f32"), std::string::npos);
      }
      if (t == DType::BF16) {
        EXPECT_NE(k.ptx.find("cvt.rn.bf16.f32"), std::string::npos);
      }
    }
  }
}

TEST(Codegen, MathFunctions) {
  auto fn = elementwiseKernel("math_ops", {DType::F32, DType::F32}, [](KernelBuilder& k, auto v) {
    std::vector<Value*> r;
    for (OpCode c : {OpCode::Exp, OpCode::Exp2, OpCode::Log, OpCode::Log2, OpCode::Sqrt,
                     OpCode::Rsqrt, OpCode::Abs, OpCode::Sin, OpCode::Cos, OpCode::Tanh,
                     OpCode::Erf, OpCode::Floor, OpCode::Ceil, OpCode::Sigmoid})
      r.push_back(unop(k, c, v[0]));
    r.push_back(unop(k, OpCode::Sqrt, v[1], {{"approx", int64_t(1)}}));
    r.push_back(binop(k, OpCode::Pow, v[0], v[1]));
    return r;
  });
  for (Target target : kTestedTargets) {
    SCOPED_TRACE(targetName(target));
    codegen::PtxKernel k = emitAndAssemble(*fn, target);
    for (const char* inst :
         {"ex2.approx.ftz.f32", "lg2.approx.f32", "sqrt.rn.f32", "sqrt.approx.f32",
          "rsqrt.approx.f32", "abs.f32", "sin.approx.f32", "cos.approx.f32", "tanh.approx.f32",
          "cvt.rmi.f32.f32", "cvt.rpi.f32.f32", "copysign.f32", "rcp.rn.f32"})
      EXPECT_NE(k.ptx.find(inst), std::string::npos) << inst << "\n" << k.ptx;
    // exp(x) = ex2(x * log2(e)).
    EXPECT_NE(k.ptx.find(codegen::immF32(1.4426950408889634f)), std::string::npos);
  }
}

// As Triton lowers them: exp keeps subnormal results (ex2.approx.f32 after the scale by
// log2(e)), exp2 flushes them (ex2.approx.ftz.f32).
TEST(Codegen, ExpKeepsSubnormalsExp2FlushesThem) {
  for (OpCode c : {OpCode::Exp, OpCode::Exp2}) {
    auto fn = elementwiseKernel(
        "exp_ops", {DType::F32},
        [&](KernelBuilder& k, auto v) -> std::vector<Value*> { return {unop(k, c, v[0])}; });
    codegen::PtxKernel k = emitAndAssemble(*fn, Target::SM90a);
    bool isExp = c == OpCode::Exp;
    EXPECT_EQ(k.ptx.find("ex2.approx.f32") != std::string::npos, isExp) << k.ptx;
    EXPECT_EQ(k.ptx.find("ex2.approx.ftz.f32") != std::string::npos, !isExp) << k.ptx;
  }
}

TEST(Codegen, CastsAmongAllTypes) {
  const DType types[] = {DType::I1,  DType::I8,     DType::U8,    DType::I16,  DType::I32,
                         DType::U32, DType::I64,    DType::F16,   DType::BF16, DType::F32,
                         DType::F64, DType::F8E4M3, DType::F8E5M2};
  for (DType from : types) {
    SCOPED_TRACE(std::string("from ") + std::string(ir::tlName(from)));
    auto fn = elementwiseKernel("casts", {from}, [&](KernelBuilder& k, auto v) {
      std::vector<Value*> r;
      for (DType to : types)
        if (to != from) r.push_back(castTo(k, v[0], to));
      return r;
    });
    codegen::PtxKernel k = emitAndAssemble(*fn, Target::SM90a);
    if (from == DType::F32) {
      for (const char* inst :
           {"cvt.rn.f16.f32", "cvt.rn.bf16.f32", "cvt.rzi.s32.f32", "cvt.f64.f32",
            "cvt.rn.satfinite.e4m3x2.f32", "cvt.rn.satfinite.e5m2x2.f32", "setp.neu.f32"})
        EXPECT_NE(k.ptx.find(inst), std::string::npos) << inst << "\n" << k.ptx;
    }
    if (from == DType::F8E4M3) {
      EXPECT_NE(k.ptx.find("cvt.rn.f16x2.e4m3x2"), std::string::npos);
    }
    if (from == DType::I32) {
      EXPECT_NE(k.ptx.find("cvt.rn.f32.s32"), std::string::npos);
    }
    if (from == DType::U32) {
      EXPECT_NE(k.ptx.find("cvt.rn.f32.u32"), std::string::npos);
    }
    if (from == DType::I8) {
      EXPECT_NE(k.ptx.find("cvt.s32.s16"), std::string::npos) << k.ptx;
    }
    bool fp8 = from == DType::F8E4M3 || from == DType::F8E5M2;
    if (fp8) {
      // sm_80 has no fp8 conversions: a user error naming the type and what to use.
      EXPECT_THROW(codegen::emitPtx(*fn, optionsFor(Target::SM80), nullptr), CompileError);
    } else {
      auto noFp8 = elementwiseKernel("casts80", {from}, [&](KernelBuilder& k, auto v) {
        std::vector<Value*> r;
        for (DType to : types)
          if (to != from && to != DType::F8E4M3 && to != DType::F8E5M2)
            r.push_back(castTo(k, v[0], to));
        return r;
      });
      emitAndAssemble(*noFp8, Target::SM80);
    }
  }
}

TEST(Codegen, CastRoundingTowardZero) {
  auto fn = elementwiseKernel("cast_rtz", {DType::F32}, [](KernelBuilder& k, auto v) {
    return std::vector<Value*>{k.b.create1(OpCode::Cast, {v[0]}, v[0]->type().withElem(DType::F16),
                                           {{"rounding", std::string("rtz")}})};
  });
  codegen::PtxKernel k = emitAndAssemble(*fn, Target::SM90a);
  EXPECT_NE(k.ptx.find("cvt.rz.f16.f32"), std::string::npos) << k.ptx;
}

TEST(Codegen, BitcastKeepsBits) {
  auto fn = elementwiseKernel("bitcast", {DType::F32, DType::I16}, [](KernelBuilder& k, auto v) {
    return std::vector<Value*>{
        k.b.create1(OpCode::Bitcast, {v[0]}, v[0]->type().withElem(DType::I32)),
        k.b.create1(OpCode::Bitcast, {v[1]}, v[1]->type().withElem(DType::F16))};
  });
  for (Target target : kTestedTargets) {
    codegen::PtxKernel k = emitAndAssemble(*fn, target);
    EXPECT_NE(k.ptx.find("mov.b32 %r"), std::string::npos) << k.ptx;
  }
  auto bad = elementwiseKernel("bad_bitcast", {DType::F32}, [](KernelBuilder& k, auto v) {
    return std::vector<Value*>{
        k.b.create1(OpCode::Bitcast, {v[0]}, v[0]->type().withElem(DType::I64))};
  });
  EXPECT_THROW(codegen::emitPtx(*bad, optionsFor(Target::SM90a), nullptr), CompileError);
}

// ---------------------------------------------------------------------------------------------
// Shape ops, conversions, reductions
// ---------------------------------------------------------------------------------------------

Value* expandDims(KernelBuilder& k, Value* x, int64_t axis) {
  std::vector<int64_t> shape = x->type().shape;
  shape.insert(shape.begin() + axis, 1);
  return k.b.create1(OpCode::ExpandDims, {x}, x->type().withShape(shape), {{"axis", axis}});
}
Value* broadcastTo(KernelBuilder& k, Value* x, std::vector<int64_t> shape) {
  return k.b.create1(OpCode::Broadcast, {x}, x->type().withShape(std::move(shape)));
}
/// Row-major offsets of an M x N tile with row stride `stride`: offs_m[:, None]*stride +
/// offs_n[None, :].
Value* tileOffsets(KernelBuilder& k, int64_t M, int64_t N, int64_t stride) {
  Value* rows = expandDims(k, k.b.arange(0, M), 1);
  rows = k.b.binary(OpCode::Mul, rows, k.b.splat(k.b.i32(stride), {M, 1}));
  Value* cols = expandDims(k, k.b.arange(0, N), 0);
  return k.b.binary(OpCode::Add, broadcastTo(k, rows, {M, N}), broadcastTo(k, cols, {M, N}));
}
Value* tilePtrs(KernelBuilder& k, Value* base, Value* offs) {
  return k.ptrs(base, offs);
}
Value* reduce(KernelBuilder& k, Value* x, int64_t axis, const std::string& kind, DType resultElem) {
  std::vector<int64_t> shape = x->type().shape;
  shape.erase(shape.begin() + axis);
  Type t = shape.empty() ? Type::scalar(resultElem) : Type::tensor(resultElem, shape);
  return k.b.create1(OpCode::Reduce, {x}, t, {{"axis", axis}, {"kind", kind}});
}

TEST(Codegen, ShapeOpsAndLayoutConversions) {
  KernelBuilder k("shapes");
  Value* x = k.arg("x", Type::ptr(DType::F32), 16);
  Value* y = k.arg("y", Type::ptr(DType::F32), 16);
  Value* outT = k.arg("out_t", Type::ptr(DType::F32), 16);
  Value* outR = k.arg("out_r", Type::ptr(DType::F32), 16);
  Value* outJ = k.arg("out_j", Type::ptr(DType::F32), 16);
  Value* outS = k.arg("out_s", Type::ptr(DType::F32), 16);
  Value* offs = tileOffsets(k, 32, 64, 64);
  Value* xv = k.b.load(tilePtrs(k, x, offs));
  Value* yv = k.b.load(tilePtrs(k, y, offs));
  // Transpose: stored through [64, 32] offsets (needs data movement between threads).
  Value* t = k.b.create1(OpCode::Permute, {xv}, Type::tensor(DType::F32, {64, 32}),
                         {{"order", std::vector<int64_t>{1, 0}}});
  k.b.store(tilePtrs(k, outT, tileOffsets(k, 64, 32, 32)), t);
  // Reshape to 1-D.
  Value* r = k.b.create1(OpCode::Reshape, {xv}, Type::tensor(DType::F32, {2048}));
  k.b.store(k.ptrs(outR, k.b.arange(0, 2048)), r);
  // Join along a new minor dim, then split back.
  Value* j = k.b.create1(OpCode::Join, {xv, yv}, Type::tensor(DType::F32, {32, 64, 2}));
  Value* jr = k.b.create1(OpCode::Reshape, {j}, Type::tensor(DType::F32, {32, 128}));
  k.b.store(tilePtrs(k, outJ, tileOffsets(k, 32, 128, 128)), jr);
  ir::Op* split = k.b.create(
      OpCode::Split, {j}, {Type::tensor(DType::F32, {32, 64}), Type::tensor(DType::F32, {32, 64})});
  Value* diff = k.b.binary(OpCode::Sub, split->result(1), split->result(0));
  k.b.store(tilePtrs(k, outS, offs), diff);
  k.b.ret();
  for (Target target : kTestedTargets) {
    SCOPED_TRACE(targetName(target));
    codegen::PtxKernel kk = emitAndAssemble(*k.fn, target);
    // The transpose moves data between threads through shared memory.
    EXPECT_NE(kk.ptx.find("st.shared"), std::string::npos) << kk.ptx;
    EXPECT_NE(kk.ptx.find("ld.shared"), std::string::npos);
    EXPECT_NE(kk.ptx.find("bar.sync 0"), std::string::npos);
    EXPECT_GE(kk.sharedBytes, 32 * 64 * 4);
    EXPECT_NE(kk.ptx.find(".extern .shared .align 1024 .b8 global_smem[]"), std::string::npos);
  }
}

TEST(Codegen, BroadcastOfARowStaysInRegisters) {
  KernelBuilder k("bcast");
  Value* out = k.arg("out", Type::ptr(DType::I32), 16);
  Value* offs = tileOffsets(k, 32, 64, 64);
  k.b.store(tilePtrs(k, out, offs), offs);
  k.b.ret();
  codegen::PtxKernel kk = emitAndAssemble(*k.fn, Target::SM90a);
  EXPECT_EQ(kk.ptx.find("st.shared"), std::string::npos) << kk.ptx;
  EXPECT_EQ(kk.sharedBytes, 0);
}

TEST(Codegen, ReductionsWithinThreadsWarpsAndAcrossWarps) {
  KernelBuilder k("reductions", 8);
  Value* x = k.arg("x", Type::ptr(DType::F32), 16);
  Value* outSum = k.arg("out_sum", Type::ptr(DType::F32), 16);
  Value* outMax = k.arg("out_max", Type::ptr(DType::F32), 16);
  Value* outArg = k.arg("out_arg", Type::ptr(DType::I32), 16);
  Value* outAll = k.arg("out_all", Type::ptr(DType::F32), 16);
  Value* outProd = k.arg("out_prod", Type::ptr(DType::F32), 16);
  Value* offs = tileOffsets(k, 32, 64, 64);
  Value* xv = k.b.load(tilePtrs(k, x, offs));
  Value* rowSum = reduce(k, xv, 1, "sum", DType::F32);
  k.b.store(k.ptrs(outSum, k.b.arange(0, 32)), rowSum);
  Value* colMax = reduce(k, xv, 0, "max", DType::F32);
  k.b.store(k.ptrs(outMax, k.b.arange(0, 64)), colMax);
  Value* rowArg = reduce(k, xv, 1, "argmax", DType::I32);
  k.b.store(k.ptrs(outArg, k.b.arange(0, 32)), rowArg);
  Value* all = reduce(k, rowSum, 0, "sum", DType::F32);
  k.b.store(outAll, all);
  // A custom combine region: the product of each column.
  ir::Op* custom = k.b.create(OpCode::Reduce, {xv}, {Type::tensor(DType::F32, {64})},
                              {{"axis", int64_t(0)}, {"kind", std::string("custom")}});
  ir::Block* region = custom->addRegion();
  Value* a = region->addArg(Type::scalar(DType::F32));
  Value* b = region->addArg(Type::scalar(DType::F32));
  ir::Builder rb(region);
  rb.create(OpCode::Yield, {rb.binary(OpCode::Mul, a, b)}, {});
  k.b.store(k.ptrs(outProd, k.b.arange(0, 64)), custom->result());
  k.b.ret();
  for (Target target : kTestedTargets) {
    SCOPED_TRACE(targetName(target));
    codegen::PtxKernel kk = emitAndAssemble(*k.fn, target);
    EXPECT_NE(kk.ptx.find("shfl.sync.bfly.b32"), std::string::npos) << kk.ptx;
    EXPECT_NE(kk.ptx.find("max.f32"), std::string::npos);
    EXPECT_NE(kk.ptx.find("mul.f32"), std::string::npos);
    EXPECT_NE(kk.ptx.find("bar.sync 0"), std::string::npos);
  }
}

Value* scan(KernelBuilder& k, Value* x, int64_t axis, const std::string& kind, bool reverse) {
  return k.b.create1(OpCode::Scan, {x}, x->type(),
                     {{"axis", axis}, {"reverse", int64_t(reverse)}, {"kind", kind}});
}

TEST(Codegen, ScansAlongEveryAxisAssembleForEveryTarget) {
  // cumsum of a row spread over registers, lanes and 8 warps (the warp steps go through shared
  // memory), reversed; cumprod down the columns of a tile; a custom running max.
  KernelBuilder k("scans", 8);
  Value* x = k.arg("x", Type::ptr(DType::F32), 16);
  Value* outSum = k.arg("out_sum", Type::ptr(DType::F32), 16);
  Value* outProd = k.arg("out_prod", Type::ptr(DType::F32), 16);
  Value* outMax = k.arg("out_max", Type::ptr(DType::F32), 16);
  Value* row = k.b.load(k.ptrs(x, k.b.arange(0, 4096)));
  k.b.store(k.ptrs(outSum, k.b.arange(0, 4096)), scan(k, row, 0, "sum", true));
  Value* offs = tileOffsets(k, 32, 64, 64);
  Value* tile = k.b.load(tilePtrs(k, x, offs));
  k.b.store(tilePtrs(k, outProd, offs), scan(k, tile, 0, "prod", false));
  ir::Op* custom =
      k.b.create(OpCode::Scan, {tile}, {tile->type()},
                 {{"axis", int64_t(1)}, {"reverse", int64_t(0)}, {"kind", std::string("custom")}});
  ir::Block* region = custom->addRegion();
  Value* a = region->addArg(Type::scalar(DType::F32));
  Value* b = region->addArg(Type::scalar(DType::F32));
  ir::Builder rb(region);
  rb.create(OpCode::Yield, {rb.binary(OpCode::Max, a, b)}, {});
  k.b.store(tilePtrs(k, outMax, offs), custom->result());
  // An axis of one element: the scan is the input.
  Value* single = k.b.create1(OpCode::Reshape, {row}, Type::tensor(DType::F32, {1, 4096}));
  Value* same = scan(k, single, 0, "sum", false);
  k.b.store(k.ptrs(outSum, k.b.arange(0, 4096)),
            k.b.create1(OpCode::Reshape, {same}, Type::tensor(DType::F32, {4096})));
  k.b.ret();
  for (Target target : kAllTargets) {
    SCOPED_TRACE(targetName(target));
    codegen::PtxKernel kk = emitAndAssemble(*k.fn, target);
    EXPECT_NE(kk.ptx.find("shfl.sync.idx.b32"), std::string::npos) << kk.ptx;
    EXPECT_NE(kk.ptx.find("st.shared.f32"), std::string::npos);
    EXPECT_NE(kk.ptx.find("mul.f32"), std::string::npos);
    EXPECT_NE(kk.ptx.find("max.f32"), std::string::npos);
  }
}

TEST(Codegen, ConversionWithinWarpsUsesShuffles) {
  // Row indices loaded once per warp (lanes along the rows), then used as the rows of a tile
  // spread over lane bit 4, the warps and the registers: shuffles, no shared memory.
  KernelBuilder k("row_gather", 4);
  Value* idx = k.arg("idx", Type::ptr(DType::I64), 16);
  Value* table = k.arg("table", Type::ptr(DType::F16), 16);
  Value* out = k.arg("out", Type::ptr(DType::F16), 16);
  Value* rows = k.b.load(k.ptrs(idx, k.b.arange(0, 32)));
  Value* rowOffs =
      k.b.binary(OpCode::Mul, rows, k.b.splat(k.b.constInt(128, Type::scalar(DType::I64)), {32}));
  Value* cols = castTo(k, k.b.arange(0, 128), DType::I64);
  Value* offs = k.b.binary(OpCode::Add, broadcastTo(k, expandDims(k, rowOffs, 1), {32, 128}),
                           broadcastTo(k, expandDims(k, cols, 0), {32, 128}));
  Value* tile = k.b.load(k.b.addPtr(k.b.splat(table, {32, 128}), offs));
  k.b.store(tilePtrs(k, out, tileOffsets(k, 32, 128, 128)), tile);
  k.b.ret();
  for (Target target : kTestedTargets) {
    SCOPED_TRACE(targetName(target));
    codegen::PtxKernel kk = emitAndAssemble(*k.fn, target);
    EXPECT_NE(kk.ptx.find("shfl.sync.idx.b32"), std::string::npos) << kk.ptx;
    EXPECT_EQ(kk.ptx.find("st.shared"), std::string::npos) << kk.ptx;
    EXPECT_EQ(kk.ptx.find("bar.sync"), std::string::npos) << kk.ptx;
  }
}

// ---------------------------------------------------------------------------------------------
// Control flow
// ---------------------------------------------------------------------------------------------

TEST(Codegen, ForLoopCarriesTensorsInRegisters) {
  KernelBuilder k("for_sum");
  Value* x = k.arg("x", Type::ptr(DType::F32), 16);
  Value* out = k.arg("out", Type::ptr(DType::F32), 16);
  Value* n = k.arg("n", Type::scalar(DType::I32));
  Value* offs = k.b.arange(0, 512);
  Value* zero = k.b.constFloat(0.0, Type::tensor(DType::F32, {512}));
  ir::Op* loop =
      k.b.create(OpCode::For, {k.b.i32(0), n, k.b.i32(1), zero}, {Type::tensor(DType::F32, {512})});
  ir::Block* body = loop->addRegion();
  Value* iv = body->addArg(Type::scalar(DType::I32));
  Value* acc = body->addArg(Type::tensor(DType::F32, {512}));
  {
    ir::Builder lb(body);
    Value* base = lb.binary(OpCode::Mul, iv, lb.i32(512));
    Value* o = lb.binary(OpCode::Add, offs, lb.splat(base, {512}));
    Value* v = lb.load(lb.addPtr(lb.splat(x, {512}), o));
    lb.create(OpCode::Yield, {lb.binary(OpCode::Add, acc, v)}, {});
  }
  k.b.store(k.ptrs(out, offs), loop->result());
  k.b.ret();
  for (Target target : kTestedTargets) {
    SCOPED_TRACE(targetName(target));
    codegen::PtxKernel kk = emitAndAssemble(*k.fn, target);
    EXPECT_TRUE(std::regex_search(kk.ptx, std::regex(R"(\$L_for_\d+:)"))) << kk.ptx;
    EXPECT_NE(kk.ptx.find("setp.ge.s32"), std::string::npos);
    EXPECT_NE(kk.ptx.find("bra.uni"), std::string::npos);
    EXPECT_EQ(count(kk.ptx, "ld.global.v4.b32"), 1);
  }
}

TEST(Codegen, IfMergesValuesAndWhileLoops) {
  KernelBuilder k("branches");
  Value* x = k.arg("x", Type::ptr(DType::F32), 16);
  Value* out = k.arg("out", Type::ptr(DType::F32), 16);
  Value* count_ = k.arg("count", Type::ptr(DType::I32), 16);
  Value* n = k.arg("n", Type::scalar(DType::I32));
  Value* offs = k.b.arange(0, 256);
  Value* xv = k.b.load(k.ptrs(x, offs));
  Value* pid = k.b.programId(0);
  Value* first = k.b.cmp("eq", pid, k.b.i32(0));
  ir::Op* branch = k.b.create(OpCode::If, {first}, {Type::tensor(DType::F32, {256})});
  {
    ir::Builder tb(branch->addRegion());
    tb.create(OpCode::Yield, {tb.binary(OpCode::Mul, xv, xv)}, {});
    ir::Builder eb(branch->addRegion());
    eb.create(OpCode::Yield, {eb.create1(OpCode::Neg, {xv}, xv->type())}, {});
  }
  k.b.store(k.ptrs(out, offs), branch->result());
  // while (i < n) i = i * 2 + 1
  ir::Op* loop = k.b.create(OpCode::While, {k.b.i32(1)}, {Type::scalar(DType::I32)});
  {
    ir::Block* before = loop->addRegion();
    Value* i = before->addArg(Type::scalar(DType::I32));
    ir::Builder bb(before);
    bb.create(OpCode::Condition, {bb.cmp("lt", i, n), i}, {});
    ir::Block* after = loop->addRegion();
    Value* j = after->addArg(Type::scalar(DType::I32));
    ir::Builder ab(after);
    Value* twice = ab.binary(OpCode::Mul, j, ab.i32(2));
    ab.create(OpCode::Yield, {ab.binary(OpCode::Add, twice, ab.i32(1))}, {});
  }
  k.b.store(count_, loop->result());
  k.b.ret();
  for (Target target : kTestedTargets) {
    SCOPED_TRACE(targetName(target));
    codegen::PtxKernel kk = emitAndAssemble(*k.fn, target);
    EXPECT_TRUE(std::regex_search(kk.ptx, std::regex(R"(@!%p\d+ bra \$L_else_\d+)"))) << kk.ptx;
    EXPECT_TRUE(std::regex_search(kk.ptx, std::regex(R"(@!%p\d+ bra \$L_endwhile_\d+)")));
    // The scalar store is done by one thread.
    EXPECT_NE(kk.ptx.find("st.global.b32"), std::string::npos);
  }
}

// ---------------------------------------------------------------------------------------------
// Atomics
// ---------------------------------------------------------------------------------------------

TEST(Codegen, AtomicsStayAtomsWhenTheResultIsUnused) {
  KernelBuilder k("atomics");
  Value* acc = k.arg("acc", Type::ptr(DType::F32), 16);
  Value* cnt = k.arg("cnt", Type::ptr(DType::I32), 16);
  Value* old = k.arg("old", Type::ptr(DType::F32), 16);
  Value* lock = k.arg("lock", Type::ptr(DType::I32), 16);
  Value* n = k.arg("n", Type::scalar(DType::I32));
  Value* offs = k.offsets(256);
  Value* mask = k.b.cmp("lt", offs, k.b.splat(n, {256}));
  Value* ones = k.b.constFloat(1.0, Type::tensor(DType::F32, {256}));
  k.b.create(OpCode::AtomicRMW, {k.ptrs(acc, offs), ones, mask}, {Type::tensor(DType::F32, {256})},
             {{"kind", std::string("add")}, {"has_mask", int64_t(1)}});
  Value* prev = k.b.create1(OpCode::AtomicRMW, {k.ptrs(acc, offs), ones, mask},
                            Type::tensor(DType::F32, {256}),
                            {{"kind", std::string("max")}, {"has_mask", int64_t(1)}});
  k.b.store(k.ptrs(old, offs), prev);
  Value* ticket = k.b.create1(OpCode::AtomicRMW, {cnt, k.b.i32(1)}, Type::scalar(DType::I32),
                              {{"kind", std::string("add")}, {"sem", std::string("relaxed")}});
  Value* got = k.b.create1(OpCode::AtomicCas, {lock, ticket, k.b.i32(7)}, Type::scalar(DType::I32));
  k.b.store(cnt, got);
  k.b.ret();
  for (Target target : kTestedTargets) {
    SCOPED_TRACE(targetName(target));
    codegen::PtxKernel kk = emitAndAssemble(*k.fn, target);
    // Its result unused, the add is still an atom with acq_rel (a red could only release).
    EXPECT_NE(kk.ptx.find("atom.global.gpu.acq_rel.add.f32"), std::string::npos) << kk.ptx;
    EXPECT_EQ(kk.ptx.find("red.global"), std::string::npos) << kk.ptx;
    // fp32 max through integer max/min on the bit pattern.
    EXPECT_NE(kk.ptx.find("atom.global.gpu.acq_rel.max.s32"), std::string::npos);
    EXPECT_NE(kk.ptx.find("atom.global.gpu.acq_rel.min.u32"), std::string::npos);
    EXPECT_NE(kk.ptx.find("atom.global.gpu.relaxed.add.u32"), std::string::npos);
    EXPECT_NE(kk.ptx.find("atom.global.acq_rel.gpu.cas.b32"), std::string::npos);
  }
}

// ---------------------------------------------------------------------------------------------
// Dot
// ---------------------------------------------------------------------------------------------

std::unique_ptr<ir::Function> dotKernel(DType in, int64_t M, int64_t N, int64_t K,
                                        const std::string& precision = "tf32", int numWarps = 4) {
  KernelBuilder k("dot_kernel", numWarps);
  Value* a = k.arg("a", Type::ptr(in), 16);
  Value* b = k.arg("b", Type::ptr(in), 16);
  Value* c = k.arg("c", Type::ptr(DType::F32), 16);
  Value* av = k.b.load(tilePtrs(k, a, tileOffsets(k, M, K, K)));
  Value* bv = k.b.load(tilePtrs(k, b, tileOffsets(k, K, N, N)));
  Value* acc = k.b.constFloat(0.0, Type::tensor(DType::F32, {M, N}));
  Value* d = k.b.create1(OpCode::Dot, {av, bv, acc}, Type::tensor(DType::F32, {M, N}),
                         {{"input_precision", precision}});
  k.b.store(tilePtrs(k, c, tileOffsets(k, M, N, N)), d);
  k.b.ret();
  return std::move(k.fn);
}

TEST(Codegen, DotUsesTensorCores) {
  for (DType in : {DType::F16, DType::BF16}) {
    auto fn = dotKernel(in, 64, 64, 32);
    std::string t = in == DType::F16 ? "f16" : "bf16";
    // sm_90a: one warp group, one m64n64 tile, K=32 in two k16 steps, operands from shared
    // memory through matrix descriptors.
    codegen::PtxKernel h = emitAndAssemble(*fn, Target::SM90a);
    EXPECT_EQ(count(h.ptx, "wgmma.mma_async.sync.aligned.m64n64k16.f32." + t + "." + t), 2)
        << h.ptx;
    EXPECT_NE(h.ptx.find("wgmma.fence.sync.aligned"), std::string::npos);
    EXPECT_NE(h.ptx.find("wgmma.commit_group.sync.aligned"), std::string::npos);
    EXPECT_NE(h.ptx.find("wgmma.wait_group.sync.aligned 0"), std::string::npos);
    EXPECT_NE(h.ptx.find("fence.proxy.async.shared::cta"), std::string::npos);
    // sm_80: 64x64 over 4 warps, each 16 rows x 64 cols = 8 n-tiles x 2 k-steps.
    codegen::PtxKernel a = emitAndAssemble(*fn, Target::SM80);
    EXPECT_GE(count(a.ptx, "mma.sync.aligned.m16n8k16.row.col.f32." + t + "." + t + ".f32"), 16)
        << a.ptx;
  }
  codegen::PtxKernel w = emitAndAssemble(*dotKernel(DType::F32, 64, 32, 16), Target::SM90a);
  EXPECT_EQ(count(w.ptx, "wgmma.mma_async.sync.aligned.m64n32k8.f32.tf32.tf32"), 2) << w.ptx;
  codegen::PtxKernel big =
      emitAndAssemble(*dotKernel(DType::F16, 128, 128, 64, "tf32", 8), Target::SM90a);
  // Two warp groups along M, each one m64n128 tile, four k16 steps.
  EXPECT_EQ(count(big.ptx, "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16"), 4) << big.ptx;
  auto tf32 = dotKernel(DType::F32, 32, 32, 16);
  codegen::PtxKernel kk = emitAndAssemble(*tf32, Target::SM80);
  EXPECT_NE(kk.ptx.find("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32"), std::string::npos);
  EXPECT_NE(kk.ptx.find("cvt.rna.tf32.f32"), std::string::npos);
  // ieee fp32 has no tensor-core form: per-element FMAs.
  auto ieee = dotKernel(DType::F32, 16, 16, 16, "ieee");
  codegen::PtxKernel fk = emitAndAssemble(*ieee, Target::SM80);
  EXPECT_EQ(fk.ptx.find("mma.sync"), std::string::npos);
  EXPECT_NE(fk.ptx.find("fma.rn.f32"), std::string::npos);
}

// ---------------------------------------------------------------------------------------------
// Tensor descriptors (TMA)
// ---------------------------------------------------------------------------------------------

/// out[block] = in[block] + 1 for 64x32 fp32 blocks addressed by program ids through TMA.
std::unique_ptr<ir::Function> descriptorKernel() {
  KernelBuilder k("tma_copy");
  Type desc = Type::descriptor(DType::F32, {64, 32}, 2);
  Value* in = k.arg("in_desc", desc);
  Value* out = k.arg("out_desc", desc);
  Value* row = k.b.binary(OpCode::Mul, k.b.programId(0), k.b.i32(64));
  Value* col = k.b.binary(OpCode::Mul, k.b.programId(1), k.b.i32(32));
  Value* tile = k.b.create1(OpCode::DescLoad, {in, row, col}, Type::tensor(DType::F32, {64, 32}));
  Value* plus = k.b.binary(OpCode::Add, tile, k.b.constFloat(1.0, tile->type()));
  k.b.create(OpCode::DescStore, {out, plus, row, col}, {});
  k.b.ret();
  return std::move(k.fn);
}

TEST(Codegen, DescriptorLoadsAndStoresUseTma) {
  auto fn = descriptorKernel();
  for (Target target : {Target::SM90a, Target::SM100a}) {
    SCOPED_TRACE(targetName(target));
    codegen::PtxKernel k = emitAndAssemble(*fn, target);
    EXPECT_NE(k.ptx.find(".param .align 64 .b8 tma_copy_param_0[128]"), std::string::npos) << k.ptx;
    EXPECT_NE(k.ptx.find("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::"
                         "complete_tx::bytes"),
              std::string::npos);
    EXPECT_NE(k.ptx.find("cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group"),
              std::string::npos);
    EXPECT_NE(k.ptx.find("mbarrier.arrive.expect_tx.shared::cta.b64 _, "), std::string::npos);
    EXPECT_NE(k.ptx.find("mbarrier.try_wait.parity.shared::cta.b64"), std::string::npos);
    ASSERT_EQ(k.params.size(), 2u);
    EXPECT_EQ(k.params[0].sizeBytes, 128);
    EXPECT_EQ(k.params[0].type, "desc<fp32, 64x32, rank=2, swizzle=0>");
    EXPECT_GE(k.sharedBytes, 64 * 32 * 4);
  }
  EXPECT_THROW(codegen::emitPtx(*fn, optionsFor(Target::SM80), nullptr), CompileError);
}

/// TLX buffers and barriers: a 64x64 fp16 tile goes global -> one of two shared buffers (picked
/// at run time by pid % 2) -> registers -> global, with the buffer's mbarrier, a named barrier
/// and a proxy fence in between.
std::unique_ptr<ir::Function> tlxBufferKernel() {
  KernelBuilder k("tlx_buffers");
  Value* x = k.arg("x", Type::ptr(DType::F16), 16);
  Value* out = k.arg("out", Type::ptr(DType::F16), 16);
  Value* bufs = k.b.create1(OpCode::LocalAlloc, {}, Type::buffer(DType::F16, {64, 64}, 2),
                            {{"storage", std::string("smem")}});
  Value* bars = k.b.create1(OpCode::AllocBarriers, {}, Type::barrier(2),
                            {{"arrive_count", int64_t(1)}, {"warp", int64_t(0)}});
  Value* stage = k.b.binary(OpCode::Rem, k.b.programId(0), k.b.i32(2));
  Value* buf = k.b.create1(OpCode::LocalView, {bufs, stage}, Type::buffer(DType::F16, {64, 64}, 1));
  Value* bar = k.b.create1(OpCode::LocalView, {bars, stage}, Type::barrier(1));
  Value* offs = tileOffsets(k, 64, 64, 64);
  k.b.create(OpCode::LocalStore, {buf, k.b.load(tilePtrs(k, x, offs))}, {});
  k.b.create(OpCode::Fence, {}, {}, {{"kind", std::string("async_shared")}});
  k.b.create(OpCode::BarrierExpectBytes, {bar, k.b.i32(0)}, {}, {{"has_pred", int64_t(0)}});
  k.b.create(OpCode::BarrierArrive, {bar}, {},
             {{"arrive_count", int64_t(1)},
              {"has_remote_cta_rank", int64_t(0)},
              {"has_pred", int64_t(0)}});
  k.b.create(OpCode::BarrierWait, {bar, k.b.i32(0)}, {}, {{"has_pred", int64_t(0)}});
  k.b.create(OpCode::NamedBarrierWait, {k.b.i32(1), k.b.i32(128)}, {});
  Value* tile = k.b.create1(OpCode::LocalLoad, {buf}, Type::tensor(DType::F16, {64, 64}));
  k.b.store(tilePtrs(k, out, offs), tile);
  k.b.ret();
  return std::move(k.fn);
}

TEST(Codegen, TlxBuffersAndBarriers) {
  auto fn = tlxBufferKernel();
  codegen::PtxKernel k = emitAndAssemble(*fn, Target::SM90a);
  const std::string& ptx = k.ptx;
  // Two 64x64 fp16 buffers (8 KiB each, 1024-aligned for the NVMMA swizzle) and two barriers.
  EXPECT_GE(k.sharedBytes, 2 * 8192 + 16);
  EXPECT_EQ(count(ptx, "mbarrier.init.shared::cta.b64"), 2) << ptx;
  EXPECT_NE(ptx.find("fence.mbarrier_init.release.cluster"), std::string::npos);
  EXPECT_NE(ptx.find("fence.proxy.async.shared::cta"), std::string::npos);
  // The runtime buffer index scales by the buffer size.
  EXPECT_NE(ptx.find(", 8192, "), std::string::npos) << ptx;
  EXPECT_NE(ptx.find("mbarrier.arrive.expect_tx.shared::cta.b64 _, ["), std::string::npos);
  EXPECT_NE(ptx.find("mbarrier.arrive.shared::cta.b64 _, ["), std::string::npos);
  EXPECT_NE(ptx.find("mbarrier.try_wait.parity.shared::cta.b64"), std::string::npos);
  EXPECT_NE(ptx.find("bar.sync 1, 128"), std::string::npos) << ptx;
  EXPECT_GT(count(ptx, "st.shared"), 0);
  EXPECT_GT(count(ptx, "ld.shared"), 0);
  // Only one thread initializes and arrives on the count-1 barriers.
  std::regex guardedInit(R"(@%p\d+ mbarrier\.init)");
  EXPECT_TRUE(std::regex_search(ptx, guardedInit)) << ptx;
  try {
    codegen::emitPtx(*fn, optionsFor(Target::SM80), nullptr);
    FAIL() << "expected a CompileError on sm_80";
  } catch (const CompileError& e) {
    EXPECT_NE(std::string(e.what()).find("sm_90a"), std::string::npos) << e.what();
  }
}

/// TLX TMA round trip: a 64x64 fp16 tile is loaded by TMA into a 128-byte-swizzled buffer
/// (completing an mbarrier), incremented in registers, written back to the buffer and stored
/// by TMA.
std::unique_ptr<ir::Function> tlxTmaKernel() {
  KernelBuilder k("tlx_tma");
  Type desc = Type::descriptor(DType::F16, {64, 64}, 2);
  Value* in = k.arg("in_desc", desc);
  Value* out = k.arg("out_desc", desc);
  Value* buf0 = k.b.create1(OpCode::LocalAlloc, {}, Type::buffer(DType::F16, {64, 64}, 1),
                            {{"storage", std::string("smem")}});
  Value* bars = k.b.create1(OpCode::AllocBarriers, {}, Type::barrier(1),
                            {{"arrive_count", int64_t(1)}, {"warp", int64_t(0)}});
  Value* buf =
      k.b.create1(OpCode::LocalView, {buf0, k.b.i32(0)}, Type::buffer(DType::F16, {64, 64}, 1));
  Value* bar = k.b.create1(OpCode::LocalView, {bars, k.b.i32(0)}, Type::barrier(1));
  Value* row = k.b.binary(OpCode::Mul, k.b.programId(0), k.b.i32(64));
  Value* col = k.b.binary(OpCode::Mul, k.b.programId(1), k.b.i32(64));
  k.b.create(OpCode::BarrierExpectBytes, {bar, k.b.i32(64 * 64 * 2)}, {},
             {{"has_pred", int64_t(0)}});
  k.b.create(OpCode::AsyncDescLoad, {in, buf, bar, row, col}, {},
             {{"multicast_mask", int64_t(0)},
              {"cache", std::string("")},
              {"evict", std::string("")},
              {"has_pred", int64_t(0)}});
  k.b.create(OpCode::BarrierWait, {bar, k.b.i32(0)}, {}, {{"has_pred", int64_t(0)}});
  Value* tile = k.b.create1(OpCode::LocalLoad, {buf}, Type::tensor(DType::F16, {64, 64}));
  Value* plus = k.b.binary(OpCode::Add, tile, k.b.constFloat(1.0, tile->type()));
  k.b.create(OpCode::LocalStore, {buf, plus}, {});
  k.b.create(OpCode::Fence, {}, {}, {{"kind", std::string("async_shared")}});
  k.b.create(OpCode::AsyncDescStore, {out, buf, row, col}, {});
  k.b.create(OpCode::AsyncDescStoreWait, {}, {}, {{"pendings", int64_t(0)}});
  k.b.ret();
  return std::move(k.fn);
}

TEST(Codegen, TlxTmaCopiesUseTheBufferSwizzle) {
  auto fn = tlxTmaKernel();
  for (Target target : {Target::SM90a, Target::SM100a}) {
    SCOPED_TRACE(targetName(target));
    codegen::PtxKernel k = emitAndAssemble(*fn, target);
    const std::string& ptx = k.ptx;
    EXPECT_EQ(count(ptx, "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::"
                         "complete_tx::bytes"),
              1)
        << ptx;
    EXPECT_EQ(count(ptx, "cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group"), 1);
    EXPECT_NE(ptx.find("cp.async.bulk.commit_group"), std::string::npos);
    EXPECT_NE(ptx.find("cp.async.bulk.wait_group.read 0"), std::string::npos);
    EXPECT_NE(ptx.find("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r"), std::string::npos);
    ASSERT_EQ(k.params.size(), 2u);
    // 64 fp16 = 128-byte rows: the host must encode both tensor maps with the 128-byte swizzle.
    EXPECT_EQ(k.params[0].type, "desc<fp16, 64x64, rank=2, swizzle=128>");
    EXPECT_EQ(k.params[1].type, "desc<fp16, 64x64, rank=2, swizzle=128>");
  }
  // A 64x128 fp16 block has 256-byte rows, wider than one swizzle row: it is copied as two
  // 64x64 column blocks (shared offsets 0 and 64 * 128 bytes, columns +0 and +64), completing
  // one barrier.
  KernelBuilder w("wide_tma");
  Type desc = Type::descriptor(DType::F16, {64, 128}, 2);
  Value* in = w.arg("in_desc", desc);
  Value* buf = w.b.create1(OpCode::LocalAlloc, {}, Type::buffer(DType::F16, {64, 128}, 1),
                           {{"storage", std::string("smem")}});
  Value* bars = w.b.create1(OpCode::AllocBarriers, {}, Type::barrier(1),
                            {{"arrive_count", int64_t(1)}, {"warp", int64_t(0)}});
  Value* view =
      w.b.create1(OpCode::LocalView, {buf, w.b.i32(0)}, Type::buffer(DType::F16, {64, 128}, 1));
  Value* bar = w.b.create1(OpCode::LocalView, {bars, w.b.i32(0)}, Type::barrier(1));
  w.b.create(OpCode::AsyncDescLoad, {in, view, bar, w.b.i32(0), w.b.i32(0)}, {},
             {{"multicast_mask", int64_t(0)}, {"has_pred", int64_t(0)}});
  w.b.ret();
  codegen::PtxKernel wide = emitAndAssemble(*w.fn, Target::SM90a);
  EXPECT_EQ(count(wide.ptx, "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::"
                            "complete_tx::bytes"),
            2)
      << wide.ptx;
  EXPECT_NE(wide.ptx.find(", 8192;"), std::string::npos) << wide.ptx;
  EXPECT_NE(wide.ptx.find(", 64;"), std::string::npos) << wide.ptx;
  EXPECT_EQ(wide.params.at(0).type, "desc<fp16, 64x128, rank=2, swizzle=128>");
}

/// tlx.async_dot: A [128, 64] and B [64, 128] fp16 tiles stored into TLX buffers, multiplied
/// by wgmma from the buffers, waited for, and stored as fp32.
std::unique_ptr<ir::Function> tlxAsyncDotKernel(int numWarps) {
  KernelBuilder k("tlx_async_dot", numWarps);
  Value* a = k.arg("a", Type::ptr(DType::F16), 16);
  Value* b = k.arg("b", Type::ptr(DType::F16), 16);
  Value* c = k.arg("c", Type::ptr(DType::F32), 16);
  Value* aBufs = k.b.create1(OpCode::LocalAlloc, {}, Type::buffer(DType::F16, {128, 64}, 2),
                             {{"storage", std::string("smem")}});
  Value* bBufs = k.b.create1(OpCode::LocalAlloc, {}, Type::buffer(DType::F16, {64, 128}, 2),
                             {{"storage", std::string("smem")}});
  Value* stage = k.b.binary(OpCode::Rem, k.b.programId(0), k.b.i32(2));
  Value* aBuf =
      k.b.create1(OpCode::LocalView, {aBufs, stage}, Type::buffer(DType::F16, {128, 64}, 1));
  Value* bBuf =
      k.b.create1(OpCode::LocalView, {bBufs, stage}, Type::buffer(DType::F16, {64, 128}, 1));
  k.b.create(OpCode::LocalStore, {aBuf, k.b.load(tilePtrs(k, a, tileOffsets(k, 128, 64, 64)))}, {});
  k.b.create(OpCode::LocalStore, {bBuf, k.b.load(tilePtrs(k, b, tileOffsets(k, 64, 128, 128)))},
             {});
  k.b.create(OpCode::Fence, {}, {}, {{"kind", std::string("async_shared")}});
  k.b.create(OpCode::DebugBarrier, {}, {});
  Value* zero = k.b.constFloat(0.0, Type::tensor(DType::F32, {128, 128}));
  Value* acc = k.b.create1(OpCode::AsyncDot, {aBuf, bBuf, zero}, zero->type(),
                           {{"has_use_acc", int64_t(0)},
                            {"has_pred", int64_t(0)},
                            {"input_precision", std::string("tf32")}});
  Value* done = k.b.create1(OpCode::AsyncDotWait, {acc}, acc->type(), {{"pendings", int64_t(0)}});
  k.b.store(tilePtrs(k, c, tileOffsets(k, 128, 128, 128)), done);
  k.b.ret();
  return std::move(k.fn);
}

TEST(Codegen, TlxAsyncDotUsesSwizzledDescriptors) {
  for (int numWarps : {4, 8}) {
    SCOPED_TRACE(numWarps);
    auto fn = tlxAsyncDotKernel(numWarps);
    codegen::PtxKernel k = emitAndAssemble(*fn, Target::SM90a);
    const std::string& ptx = k.ptx;
    // 128x128 over warp groups: m64n128k16 (4 warps: 2 M tiles x 4 k steps; 8 warps split M).
    int perGroup = numWarps == 4 ? 8 : 4;
    EXPECT_EQ(count(ptx, "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16"), perGroup) << ptx;
    EXPECT_EQ(count(ptx, "wgmma.fence.sync.aligned"), 1);
    EXPECT_EQ(count(ptx, "wgmma.commit_group.sync.aligned"), 1);
    EXPECT_NE(ptx.find("wgmma.wait_group.sync.aligned 0"), std::string::npos);
    // B is N-major: the transposed-B immediate is 1, A's is 0.
    EXPECT_NE(ptx.find(", 1, 1, 0, 1;"), std::string::npos) << ptx;
    // 128-byte swizzle mode (1 << 62) with SBO = 1024 bytes (64 << 32) in both descriptors; A's
    // LBO field is 1, B's is the 8 KiB column block of 64 rows x 128 bytes (512 << 16).
    uint64_t aFixed = (uint64_t(1) << 62) | (uint64_t(64) << 32) | (uint64_t(1) << 16);
    uint64_t bFixed = (uint64_t(1) << 62) | (uint64_t(64) << 32) | (uint64_t(512) << 16);
    EXPECT_NE(ptx.find(std::to_string(static_cast<int64_t>(aFixed))), std::string::npos) << ptx;
    EXPECT_NE(ptx.find(std::to_string(static_cast<int64_t>(bFixed))), std::string::npos) << ptx;
  }
  auto fn = tlxAsyncDotKernel(4);
  EXPECT_THROW(codegen::emitPtx(*fn, optionsFor(Target::SM80), nullptr), CompileError);
}

/// async_dot without an accumulator (S = Q K^T) leaves the registers unwritten: the first k step
/// of each wgmma tile has scale-d false, the later ones true, and no zeros are moved in.
TEST(Codegen, TlxAsyncDotOntoZeroSkipsTheAccumulatorInit) {
  auto fn = tlxAsyncDotKernel(4);
  codegen::PtxKernel k = emitAndAssemble(*fn, Target::SM90a);
  const std::string& ptx = k.ptx;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(ptx, m, std::regex(R"(setp\.ne\.u32\s+(%p\d+),\s*0,\s*0;)")))
      << ptx;
  const std::string off = m[1];
  ASSERT_TRUE(std::regex_search(ptx, m, std::regex(R"(setp\.ne\.u32\s+(%p\d+),\s*1,\s*0;)")))
      << ptx;
  const std::string on = m[1];
  // Two m64 tiles of four k steps (4 warps, 128x128).
  EXPECT_EQ(count(ptx, ", " + off + ", 1, 1, 0, 1;"), 2) << ptx;
  EXPECT_EQ(count(ptx, ", " + on + ", 1, 1, 0, 1;"), 6) << ptx;
  EXPECT_EQ(count(ptx, "mov.f32"), 0) << ptx;
}

/// Q K^T as attention issues it: a [64, headDim] Q tile and a [128, headDim] K tile stored into
/// qBuf and kBuf, K's local_trans as wgmma's B, and the fp32 [64, 128] result stored to c.
codegen::PtxKernel emitQkTransposed(KernelBuilder& k, Value* q, Value* kp, Value* c, Value* qBuf,
                                    Value* kBuf, int64_t headDim) {
  k.b.create(OpCode::LocalStore,
             {qBuf, k.b.load(tilePtrs(k, q, tileOffsets(k, 64, headDim, headDim)))}, {});
  k.b.create(OpCode::LocalStore,
             {kBuf, k.b.load(tilePtrs(k, kp, tileOffsets(k, 128, headDim, headDim)))}, {});
  k.b.create(OpCode::Fence, {}, {}, {{"kind", std::string("async_shared")}});
  k.b.create(OpCode::DebugBarrier, {}, {});
  Value* kT = k.b.create1(OpCode::LocalTrans, {kBuf}, Type::buffer(DType::F16, {headDim, 128}, 1),
                          {{"order", std::vector<int64_t>{1, 0}}});
  Value* zero = k.b.constFloat(0.0, Type::tensor(DType::F32, {64, 128}));
  Value* acc = k.b.create1(OpCode::AsyncDot, {qBuf, kT, zero}, zero->type(),
                           {{"has_use_acc", int64_t(0)}, {"has_pred", int64_t(0)}});
  Value* done = k.b.create1(OpCode::AsyncDotWait, {acc}, acc->type(), {{"pendings", int64_t(0)}});
  k.b.store(tilePtrs(k, c, tileOffsets(k, 64, 128, 128)), done);
  k.b.ret();
  return emitAndAssemble(*k.fn, Target::SM90a);
}

/// Q K^T as in attention: K is stored [N, K] and its local_trans feeds wgmma as a K-major B.
TEST(Codegen, TlxAsyncDotReadsATransposedBufferAsKMajorB) {
  KernelBuilder k("tlx_qk", 4);
  Value* q = k.arg("q", Type::ptr(DType::F16), 16);
  Value* kp = k.arg("k", Type::ptr(DType::F16), 16);
  Value* c = k.arg("c", Type::ptr(DType::F32), 16);
  Value* qBuf = k.b.create1(OpCode::LocalAlloc, {}, Type::buffer(DType::F16, {64, 64}, 1),
                            {{"storage", std::string("smem")}});
  Value* kBuf = k.b.create1(OpCode::LocalAlloc, {}, Type::buffer(DType::F16, {128, 64}, 1),
                            {{"storage", std::string("smem")}});
  codegen::PtxKernel ptxK = emitQkTransposed(k, q, kp, c, qBuf, kBuf, 64);
  const std::string& ptx = ptxK.ptx;
  EXPECT_EQ(count(ptx, "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16"), 4) << ptx;
  // Both operands K-major: no transpose immediates, LBO field 1 in both descriptors.
  EXPECT_NE(ptx.find(", 1, 1, 0, 0;"), std::string::npos) << ptx;
  EXPECT_EQ(ptx.find(", 1, 1, 0, 1;"), std::string::npos) << ptx;
  uint64_t kMajor = (uint64_t(1) << 62) | (uint64_t(64) << 32) | (uint64_t(1) << 16);
  EXPECT_NE(ptx.find(std::to_string(static_cast<int64_t>(kMajor))), std::string::npos);

  // local_load reads through the transposed view too (the view's layout composed with the
  // buffer's; tests/python/test_tlx_features.py checks the values).
  KernelBuilder transLoad("trans_load", 4);
  Value* out = transLoad.arg("out", Type::ptr(DType::F16), 16);
  Value* buf = transLoad.b.create1(OpCode::LocalAlloc, {}, Type::buffer(DType::F16, {64, 64}, 1),
                                   {{"storage", std::string("smem")}});
  Value* t = transLoad.b.create1(OpCode::LocalTrans, {buf}, Type::buffer(DType::F16, {64, 64}, 1),
                                 {{"order", std::vector<int64_t>{1, 0}}});
  Value* tile = transLoad.b.create1(OpCode::LocalLoad, {t}, Type::tensor(DType::F16, {64, 64}));
  transLoad.b.store(tilePtrs(transLoad, out, tileOffsets(transLoad, 64, 64, 64)), tile);
  transLoad.b.ret();
  codegen::PtxKernel transK = emitAndAssemble(*transLoad.fn, Target::SM90a);
  EXPECT_GT(count(transK.ptx, "ld.shared"), 0) << transK.ptx;
}

/// P V as in attention: A (P) comes from registers, B from an N-major buffer.
TEST(Codegen, TlxAsyncDotTakesAFromRegisters) {
  KernelBuilder k("tlx_pv", 4);
  Value* p = k.arg("p", Type::ptr(DType::F16), 16);
  Value* v = k.arg("v", Type::ptr(DType::F16), 16);
  Value* c = k.arg("c", Type::ptr(DType::F32), 16);
  Value* vBuf = k.b.create1(OpCode::LocalAlloc, {}, Type::buffer(DType::F16, {64, 128}, 1),
                            {{"storage", std::string("smem")}});
  k.b.create(OpCode::LocalStore, {vBuf, k.b.load(tilePtrs(k, v, tileOffsets(k, 64, 128, 128)))},
             {});
  k.b.create(OpCode::Fence, {}, {}, {{"kind", std::string("async_shared")}});
  k.b.create(OpCode::DebugBarrier, {}, {});
  Value* pv = k.b.load(tilePtrs(k, p, tileOffsets(k, 64, 64, 64)));
  Value* zero = k.b.constFloat(0.0, Type::tensor(DType::F32, {64, 128}));
  Value* acc = k.b.create1(OpCode::AsyncDot, {pv, vBuf, zero}, zero->type(),
                           {{"has_use_acc", int64_t(0)}, {"has_pred", int64_t(0)}});
  Value* done = k.b.create1(OpCode::AsyncDotWait, {acc}, acc->type(), {{"pendings", int64_t(0)}});
  k.b.store(tilePtrs(k, c, tileOffsets(k, 64, 128, 128)), done);
  k.b.ret();
  codegen::PtxKernel ptxK = emitAndAssemble(*k.fn, Target::SM90a);
  const std::string& ptx = ptxK.ptx;
  EXPECT_EQ(count(ptx, "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16"), 4) << ptx;
  // Four 32-bit A words, B's descriptor, scale-d, the two scales and B's transpose: no A
  // transpose immediate in the register form.
  std::regex registerA(R"(\}, \{%r\d+, %r\d+, %r\d+, %r\d+\}, %rd\d+, %p\d+, 1, 1, 1;)");
  EXPECT_EQ(std::distance(std::sregex_iterator(ptx.begin(), ptx.end(), registerA),
                          std::sregex_iterator()),
            4)
      << ptx;
}

/// One wgmma descriptor operand as the PTX builds it: the fixed bits (LBO, SBO, swizzle) of the
/// base descriptor it comes from, and the start-address step (16-byte units) added to that base.
struct DescriptorUse {
  int64_t fixedBits;
  int64_t step;
  bool operator==(const DescriptorUse&) const = default;
};

/// The A and B descriptor operands of each wgmma with both operands in shared memory, in
/// emission order. A descriptor is either a base (`or.b64 d, x, fixedBits`) or one
/// `add.s64 d, base, step` from a base; anything else fails the test.
std::vector<std::pair<DescriptorUse, DescriptorUse>> wgmmaDescriptorUses(const std::string& ptx) {
  std::map<std::string, int64_t> bases;
  std::map<std::string, std::pair<std::string, int64_t>> steps;
  std::regex baseRe(R"(or\.b64\s+(%rd\d+),\s*%rd\d+,\s*(-?\d+);)");
  for (std::sregex_iterator it(ptx.begin(), ptx.end(), baseRe), end; it != end; ++it)
    bases[(*it)[1]] = std::stoll((*it)[2]);
  std::regex stepRe(R"(add\.s64\s+(%rd\d+),\s*(%rd\d+),\s*(\d+);)");
  for (std::sregex_iterator it(ptx.begin(), ptx.end(), stepRe), end; it != end; ++it)
    steps[(*it)[1]] = {(*it)[2], std::stoll((*it)[3])};
  auto use = [&](const std::string& reg) {
    if (bases.count(reg)) return DescriptorUse{bases.at(reg), 0};
    auto s = steps.find(reg);
    if (s == steps.end() || !bases.count(s->second.first)) {
      ADD_FAILURE() << reg << " is neither a base descriptor nor one add from one";
      return DescriptorUse{0, -1};
    }
    return DescriptorUse{bases.at(s->second.first), s->second.second};
  };
  std::vector<std::pair<DescriptorUse, DescriptorUse>> uses;
  std::regex wgmmaRe(R"(wgmma\.mma_async[^;]*\}, (%rd\d+), (%rd\d+), )");
  for (std::sregex_iterator it(ptx.begin(), ptx.end(), wgmmaRe), end; it != end; ++it)
    uses.push_back({use((*it)[1]), use((*it)[2])});
  return uses;
}

/// Each async_dot builds one descriptor per operand from the buffer address (for the runtime
/// stage index of the local_view) and reaches every other tile and k step by one 64-bit add
/// to its start-address field, instead of rebuilding a descriptor per wgmma.
TEST(Codegen, TlxAsyncDotStepsDescriptorsFromOneBase) {
  // A [128, 64] K-major in 128-byte rows: element (m, k) at m * 128 + k * 2 bytes. B [64, 128]
  // N-major in two 64-column blocks: element (k, n < 64) at k * 128 + n * 2 bytes.
  int64_t aFixed =
      static_cast<int64_t>((uint64_t(1) << 62) | (uint64_t(64) << 32) | (uint64_t(1) << 16));
  int64_t bFixed =
      static_cast<int64_t>((uint64_t(1) << 62) | (uint64_t(64) << 32) | (uint64_t(512) << 16));
  for (int numWarps : {4, 8}) {
    SCOPED_TRACE(numWarps);
    auto fn = tlxAsyncDotKernel(numWarps);
    codegen::PtxKernel k = emitAndAssemble(*fn, Target::SM90a);
    // The start-address field is masked once per operand, not once per wgmma.
    EXPECT_EQ(count(k.ptx, ", 16383;"), 2) << k.ptx;
    std::vector<std::pair<DescriptorUse, DescriptorUse>> expected;
    // 4 warps: one warp group walks both 64-row tiles; 8 warps: each group has one tile (its
    // rows are in the base descriptor).
    for (int64_t m0 = 0; m0 < (numWarps == 4 ? 128 : 64); m0 += 64)
      for (int64_t k0 = 0; k0 < 64; k0 += 16)
        expected.push_back({{aFixed, (m0 * 128 + k0 * 2) >> 4}, {bFixed, (k0 * 128) >> 4}});
    EXPECT_EQ(wgmmaDescriptorUses(k.ptx), expected) << k.ptx;
  }
}

/// K^T as attention reads it: a local_trans of a [128, 128] buffer is a K-major B whose rows
/// (256 bytes) are two 128-byte swizzle column blocks; k steps past 64 move to the second block.
TEST(Codegen, TlxAsyncDotStepsKMajorDescriptorsAcrossColumnBlocks) {
  KernelBuilder k("tlx_qk_wide", 4);
  Value* q = k.arg("q", Type::ptr(DType::F16), 16);
  Value* kp = k.arg("k", Type::ptr(DType::F16), 16);
  Value* c = k.arg("c", Type::ptr(DType::F32), 16);
  Value* qBuf = k.b.create1(OpCode::LocalAlloc, {}, Type::buffer(DType::F16, {64, 128}, 1),
                            {{"storage", std::string("smem")}});
  Value* kBufs = k.b.create1(OpCode::LocalAlloc, {}, Type::buffer(DType::F16, {128, 128}, 2),
                             {{"storage", std::string("smem")}});
  Value* stage = k.b.binary(OpCode::Rem, k.b.programId(0), k.b.i32(2));
  Value* kBuf =
      k.b.create1(OpCode::LocalView, {kBufs, stage}, Type::buffer(DType::F16, {128, 128}, 1));
  codegen::PtxKernel ptxK = emitQkTransposed(k, q, kp, c, qBuf, kBuf, 128);
  // Both K-major, 128-byte swizzle, SBO 1024 bytes, LBO field 1. A column block of Q is 64 rows
  // x 128 bytes (8 KiB), one of K is 128 rows x 128 bytes (16 KiB).
  int64_t kMajor =
      static_cast<int64_t>((uint64_t(1) << 62) | (uint64_t(64) << 32) | (uint64_t(1) << 16));
  std::vector<std::pair<DescriptorUse, DescriptorUse>> expected;
  for (int64_t k0 = 0; k0 < 128; k0 += 16) {
    int64_t inBlock = (k0 % 64) * 2;
    expected.push_back({{kMajor, ((k0 / 64) * 8192 + inBlock) >> 4},
                        {kMajor, ((k0 / 64) * 16384 + inBlock) >> 4}});
  }
  EXPECT_EQ(wgmmaDescriptorUses(ptxK.ptx), expected) << ptxK.ptx;
  EXPECT_EQ(count(ptxK.ptx, ", 16383;"), 2) << ptxK.ptx;
}

TEST(Codegen, SharedMemoryBeyondTheTargetLimitIsAUserError) {
  KernelBuilder k("too_big", 4);
  k.fn->loc = SourceLoc{0, 3, 1};
  // Two allocations of 8 buffers of 64x64 fp32 = 256 KiB, both live at once: the first is read
  // before and after the second (one allocation past the limit is refused where it is created:
  // reliability_compiler_test; allocations whose lifetimes do not meet share bytes).
  Value* bufs[2];
  for (auto& b : bufs)
    b = k.b.create1(OpCode::LocalAlloc, {}, Type::buffer(DType::F32, {64, 64}, 8),
                    {{"storage", std::string("smem")}});
  for (int i : {0, 1, 0}) {
    Value* view = k.b.create1(OpCode::LocalView, {bufs[i], k.b.i32(0)},
                              Type::buffer(DType::F32, {64, 64}, 1));
    k.b.create1(OpCode::LocalLoad, {view}, Type::tensor(DType::F32, {64, 64}));
  }
  k.b.ret();
  try {
    codegen::emitPtx(*k.fn, optionsFor(Target::SM90a), nullptr);
    FAIL() << "expected a CompileError";
  } catch (const CompileError& e) {
    EXPECT_EQ(e.diagnostic().loc.line, 3u);
    EXPECT_NE(std::string(e.what()).find("262144 bytes of shared memory"), std::string::npos)
        << e.what();
  }
  // 3 of them (48 KiB) fit.
  KernelBuilder ok("fits", 4);
  ok.b.create1(OpCode::LocalAlloc, {}, Type::buffer(DType::F32, {64, 64}, 3),
               {{"storage", std::string("smem")}});
  ok.b.ret();
  EXPECT_EQ(codegen::emitPtx(*ok.fn, optionsFor(Target::SM90a), nullptr).sharedBytes, 49152);
}

/// Warp specialization: a default task (4 warps, 40 registers) and a 4-warp consumer (232
/// registers) each store arange(0, 256) + task id through its own layouts and sync internally.
std::unique_ptr<ir::Function> asyncTasksKernel() {
  KernelBuilder k("ws_tasks", 4);
  Value* out = k.arg("out", Type::ptr(DType::I32), 16);
  ir::Op* tasks = k.b.create(OpCode::AsyncTasks, {}, {});
  ir::Builder tb{tasks->addRegion()};
  for (int64_t id : {0, 1}) {
    ir::Op* task = tb.create(OpCode::AsyncTask, {}, {},
                             {{"default", int64_t(id == 0)},
                              {"num_warps", int64_t(4)},
                              {"num_regs", int64_t(id == 0 ? 40 : 232)},
                              {"replicate", int64_t(1)},
                              {"replica", int64_t(0)},
                              {"warp_group_start_id", int64_t(-1)},
                              {"name", std::string(id == 0 ? "default" : "task")}});
    ir::Builder b{task->addRegion()};
    Value* offs = b.binary(OpCode::Add, b.arange(0, 256), b.splat(b.i32(256 * id), {256}));
    b.create(OpCode::DebugBarrier, {}, {});
    b.store(b.addPtr(b.splat(out, {256}), offs), offs);
  }
  k.b.ret();
  return std::move(k.fn);
}

TEST(Codegen, AsyncTasksRunOnTheirOwnWarps) {
  auto fn = asyncTasksKernel();
  codegen::PtxKernel k = emitAndAssemble(*fn, Target::SM90a);
  const std::string& ptx = k.ptx;
  // 4 default + 4 consumer warps; 65536 / 256 threads caps every thread at 255 registers.
  EXPECT_EQ(k.numWarps, 8);
  EXPECT_NE(ptx.find(".reqntid 256, 1, 1"), std::string::npos) << ptx;
  EXPECT_NE(ptx.find(".maxnreg 248"), std::string::npos) << ptx;
  EXPECT_NE(ptx.find("setmaxnreg.dec.sync.aligned.u32 40"), std::string::npos) << ptx;
  EXPECT_EQ(ptx.find("setmaxnreg.inc"), std::string::npos) << ptx; // 232 < 248: also a dec
  EXPECT_NE(ptx.find("setmaxnreg.dec.sync.aligned.u32 232"), std::string::npos) << ptx;
  // Each task syncs its own 128 threads on its named barrier; the consumer's tid is rebased.
  EXPECT_NE(ptx.find("bar.sync 15, 128"), std::string::npos) << ptx;
  EXPECT_NE(ptx.find("bar.sync 14, 128"), std::string::npos) << ptx;
  EXPECT_NE(ptx.find(", 128;"), std::string::npos);
  // Each task leaves for the join after both (not for the next task's range check), so nothing
  // a later task reads is live through an earlier task's body.
  size_t join = ptx.find("$L_tasks_join_");
  ASSERT_NE(join, std::string::npos) << ptx;
  std::string label = ptx.substr(join, ptx.find(';', join) - join);
  size_t branches = 0;
  for (size_t at = ptx.find("bra.uni " + label + ";"); at != std::string::npos;
       at = ptx.find("bra.uni " + label + ";", at + 1))
    ++branches;
  EXPECT_EQ(branches, 2u) << ptx;
  EXPECT_NE(ptx.find("\n" + label + ":\n"), std::string::npos) << ptx;
  EXPECT_THROW(codegen::emitPtx(*fn, optionsFor(Target::SM80), nullptr), CompileError);
}

// ---------------------------------------------------------------------------------------------
// On the GPU (skipped where no CUDA driver and device are present): the emitted code computes
// the right numbers, checked against references computed here.
// ---------------------------------------------------------------------------------------------

#define SKIP_WITHOUT_GPU()                                                                         \
  do {                                                                                             \
    std::string why;                                                                               \
    if (!cudaAvailable(&why)) GTEST_SKIP() << why;                                                 \
  } while (0)

/// Compiles for sm_90a (the lent H200) and loads the cubin.
GpuKernel loadOnGpu(const ir::Function& fn) {
  codegen::PtxKernel k = codegen::emitPtx(fn, optionsFor(Target::SM90a, fn.numWarps), nullptr);
  runtime::PtxasResult r = runtime::runPtxas(k.ptx, Target::SM90a, k.entry);
  if (!r.ok) throw std::runtime_error("ptxas failed:\n" + r.log);
  CompiledKernel c;
  c.name = k.entry;
  c.target = Target::SM90a;
  c.ptx = k.ptx;
  c.cubin = r.cubin;
  c.params = k.params;
  c.numWarps = k.numWarps;
  c.sharedBytes = k.sharedBytes;
  return GpuKernel(c);
}

template <typename T> struct DeviceArray {
  DeviceBuffer buf;
  size_t n;
  explicit DeviceArray(size_t count, uint8_t poison = 0xCD) : buf(count * sizeof(T)), n(count) {
    buf.fill(poison);
  }
  explicit DeviceArray(const std::vector<T>& host) : buf(host.size() * sizeof(T)), n(host.size()) {
    buf.upload(host.data(), host.size() * sizeof(T));
  }
  std::vector<T> get() const {
    std::vector<T> h(n);
    buf.download(h.data(), n * sizeof(T));
    return h;
  }
  LaunchArg arg() const { return LaunchArg::pointer(buf.address()); }
};

std::vector<float> randomFloats(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::vector<float> v(n);
  uint32_t x = seed * 2654435761u + 1;
  for (auto& f : v) {
    x = x * 1664525u + 1013904223u;
    f = lo + (hi - lo) * static_cast<float>(x >> 8) / static_cast<float>(1u << 24);
  }
  return v;
}

uint32_t floatBits(float f) {
  return std::bit_cast<uint32_t>(f);
}

TEST(CodegenGpu, VectorAddComputesAndRespectsTheMask) {
  SKIP_WITHOUT_GPU();
  GpuKernel kernel = loadOnGpu(*vectorAdd(16));
  const int n = 10000, padded = 10240;
  auto x = randomFloats(padded, 1), y = randomFloats(padded, 2);
  DeviceArray<float> dx(x), dy(y), dout(padded);
  kernel.launch({(n + 1023) / 1024}, nullptr,
                {dx.arg(), dy.arg(), dout.arg(), LaunchArg::integer(n)});
  synchronize();
  auto out = dout.get();
  for (int i = 0; i < padded; ++i) {
    if (i < n)
      ASSERT_EQ(out[i], x[i] + y[i]) << i;
    else
      ASSERT_EQ(floatBits(out[i]), 0xCDCDCDCDu) << "masked-off element " << i << " was written";
  }
}

TEST(CodegenGpu, ShapeOpsMoveTheRightElements) {
  SKIP_WITHOUT_GPU();
  KernelBuilder k("shapes");
  Value* x = k.arg("x", Type::ptr(DType::F32), 16);
  Value* y = k.arg("y", Type::ptr(DType::F32), 16);
  Value* outT = k.arg("out_t", Type::ptr(DType::F32), 16);
  Value* outR = k.arg("out_r", Type::ptr(DType::F32), 16);
  Value* outJ = k.arg("out_j", Type::ptr(DType::F32), 16);
  Value* outS = k.arg("out_s", Type::ptr(DType::F32), 16);
  Value* offs = tileOffsets(k, 32, 64, 64);
  Value* xv = k.b.load(tilePtrs(k, x, offs));
  Value* yv = k.b.load(tilePtrs(k, y, offs));
  Value* t = k.b.create1(OpCode::Permute, {xv}, Type::tensor(DType::F32, {64, 32}),
                         {{"order", std::vector<int64_t>{1, 0}}});
  k.b.store(tilePtrs(k, outT, tileOffsets(k, 64, 32, 32)), t);
  Value* r = k.b.create1(OpCode::Reshape, {xv}, Type::tensor(DType::F32, {2048}));
  k.b.store(k.ptrs(outR, k.b.arange(0, 2048)), r);
  Value* j = k.b.create1(OpCode::Join, {xv, yv}, Type::tensor(DType::F32, {32, 64, 2}));
  Value* jr = k.b.create1(OpCode::Reshape, {j}, Type::tensor(DType::F32, {32, 128}));
  k.b.store(tilePtrs(k, outJ, tileOffsets(k, 32, 128, 128)), jr);
  ir::Op* split = k.b.create(
      OpCode::Split, {j}, {Type::tensor(DType::F32, {32, 64}), Type::tensor(DType::F32, {32, 64})});
  k.b.store(tilePtrs(k, outS, offs), k.b.binary(OpCode::Sub, split->result(1), split->result(0)));
  k.b.ret();
  GpuKernel kernel = loadOnGpu(*k.fn);
  auto hx = randomFloats(2048, 3), hy = randomFloats(2048, 4);
  DeviceArray<float> dx(hx), dy(hy), dt(2048), dr(2048), dj(4096), ds(2048);
  kernel.launch({1}, nullptr, {dx.arg(), dy.arg(), dt.arg(), dr.arg(), dj.arg(), ds.arg()});
  synchronize();
  auto ot = dt.get(), orr = dr.get(), oj = dj.get(), os = ds.get();
  for (int m = 0; m < 32; ++m)
    for (int n = 0; n < 64; ++n) {
      ASSERT_EQ(ot[n * 32 + m], hx[m * 64 + n]) << "transpose at " << m << "," << n;
      ASSERT_EQ(orr[m * 64 + n], hx[m * 64 + n]) << "reshape";
      ASSERT_EQ(oj[m * 128 + 2 * n], hx[m * 64 + n]) << "join a";
      ASSERT_EQ(oj[m * 128 + 2 * n + 1], hy[m * 64 + n]) << "join b";
      ASSERT_EQ(os[m * 64 + n], hy[m * 64 + n] - hx[m * 64 + n]) << "split";
    }
}

TEST(CodegenGpu, ReductionsMatchTheReference) {
  SKIP_WITHOUT_GPU();
  KernelBuilder k("reductions", 8);
  Value* x = k.arg("x", Type::ptr(DType::F32), 16);
  Value* outSum = k.arg("out_sum", Type::ptr(DType::F32), 16);
  Value* outMax = k.arg("out_max", Type::ptr(DType::F32), 16);
  Value* outArg = k.arg("out_arg", Type::ptr(DType::I32), 16);
  Value* outAll = k.arg("out_all", Type::ptr(DType::F32), 16);
  Value* outProd = k.arg("out_prod", Type::ptr(DType::F32), 16);
  Value* offs = tileOffsets(k, 32, 64, 64);
  Value* xv = k.b.load(tilePtrs(k, x, offs));
  Value* rowSum = reduce(k, xv, 1, "sum", DType::F32);
  k.b.store(k.ptrs(outSum, k.b.arange(0, 32)), rowSum);
  k.b.store(k.ptrs(outMax, k.b.arange(0, 64)), reduce(k, xv, 0, "max", DType::F32));
  k.b.store(k.ptrs(outArg, k.b.arange(0, 32)), reduce(k, xv, 1, "argmax", DType::I32));
  k.b.store(outAll, reduce(k, rowSum, 0, "sum", DType::F32));
  ir::Op* custom = k.b.create(OpCode::Reduce, {xv}, {Type::tensor(DType::F32, {64})},
                              {{"axis", int64_t(0)}, {"kind", std::string("custom")}});
  ir::Block* region = custom->addRegion();
  Value* a = region->addArg(Type::scalar(DType::F32));
  Value* b = region->addArg(Type::scalar(DType::F32));
  ir::Builder rb(region);
  rb.create(OpCode::Yield, {rb.binary(OpCode::Mul, a, b)}, {});
  k.b.store(k.ptrs(outProd, k.b.arange(0, 64)), custom->result());
  k.b.ret();
  GpuKernel kernel = loadOnGpu(*k.fn);
  // Values near 1 keep the column products finite; a planted maximum checks argmax.
  auto hx = randomFloats(2048, 5, 0.9f, 1.1f);
  hx[7 * 64 + 41] = 3.0f;
  DeviceArray<float> dx(hx), dsum(32), dmax(64), dall(1), dprod(64);
  DeviceArray<int32_t> darg(32);
  kernel.launch({1}, nullptr,
                {dx.arg(), dsum.arg(), dmax.arg(), darg.arg(), dall.arg(), dprod.arg()});
  synchronize();
  auto osum = dsum.get(), omax = dmax.get(), oall = dall.get(), oprod = dprod.get();
  auto oarg = darg.get();
  double total = 0;
  for (int m = 0; m < 32; ++m) {
    double s = 0;
    int best = 0;
    for (int n = 0; n < 64; ++n) {
      s += hx[m * 64 + n];
      if (hx[m * 64 + n] > hx[m * 64 + best]) best = n;
    }
    total += s;
    EXPECT_NEAR(osum[m], s, 1e-4 * std::abs(s)) << "row " << m;
    EXPECT_EQ(oarg[m], best) << "row " << m;
  }
  EXPECT_NEAR(oall[0], total, 1e-4 * std::abs(total));
  for (int n = 0; n < 64; ++n) {
    float mx = hx[n];
    double prod = 1;
    for (int m = 0; m < 32; ++m) {
      mx = std::max(mx, hx[m * 64 + n]);
      prod *= hx[m * 64 + n];
    }
    EXPECT_EQ(omax[n], mx) << "column " << n;
    EXPECT_NEAR(oprod[n], prod, 1e-4 * std::abs(prod)) << "column " << n;
  }
}

TEST(CodegenGpu, LoopsAndBranches) {
  SKIP_WITHOUT_GPU();
  {
    KernelBuilder k("for_sum");
    Value* x = k.arg("x", Type::ptr(DType::F32), 16);
    Value* out = k.arg("out", Type::ptr(DType::F32), 16);
    Value* n = k.arg("n", Type::scalar(DType::I32));
    Value* offs = k.b.arange(0, 512);
    Value* zero = k.b.constFloat(0.0, Type::tensor(DType::F32, {512}));
    ir::Op* loop = k.b.create(OpCode::For, {k.b.i32(0), n, k.b.i32(1), zero},
                              {Type::tensor(DType::F32, {512})});
    ir::Block* body = loop->addRegion();
    Value* iv = body->addArg(Type::scalar(DType::I32));
    Value* acc = body->addArg(Type::tensor(DType::F32, {512}));
    ir::Builder lb(body);
    Value* o =
        lb.binary(OpCode::Add, offs, lb.splat(lb.binary(OpCode::Mul, iv, lb.i32(512)), {512}));
    Value* v = lb.load(lb.addPtr(lb.splat(x, {512}), o));
    lb.create(OpCode::Yield, {lb.binary(OpCode::Add, acc, v)}, {});
    k.b.store(k.ptrs(out, offs), loop->result());
    k.b.ret();
    GpuKernel kernel = loadOnGpu(*k.fn);
    auto hx = randomFloats(3 * 512, 6);
    DeviceArray<float> dx(hx), dout(512);
    kernel.launch({1}, nullptr, {dx.arg(), dout.arg(), LaunchArg::integer(3)});
    synchronize();
    auto out_ = dout.get();
    for (int i = 0; i < 512; ++i)
      ASSERT_EQ(out_[i], ((0.0f + hx[i]) + hx[512 + i]) + hx[1024 + i]) << i;
  }
  {
    KernelBuilder k("branches");
    Value* x = k.arg("x", Type::ptr(DType::F32), 16);
    Value* out = k.arg("out", Type::ptr(DType::F32), 16);
    Value* cnt = k.arg("count", Type::ptr(DType::I32), 16);
    Value* n = k.arg("n", Type::scalar(DType::I32));
    Value* offs = k.b.arange(0, 256);
    Value* xv = k.b.load(k.ptrs(x, offs));
    Value* first = k.b.cmp("eq", k.b.programId(0), k.b.i32(0));
    ir::Op* branch = k.b.create(OpCode::If, {first}, {Type::tensor(DType::F32, {256})});
    ir::Builder tb(branch->addRegion());
    tb.create(OpCode::Yield, {tb.binary(OpCode::Mul, xv, xv)}, {});
    ir::Builder eb(branch->addRegion());
    eb.create(OpCode::Yield, {eb.create1(OpCode::Neg, {xv}, xv->type())}, {});
    // Each program writes its own 256 outputs.
    Value* base = k.b.binary(OpCode::Mul, k.b.programId(0), k.b.i32(256));
    Value* outOffs = k.b.binary(OpCode::Add, offs, k.b.splat(base, {256}));
    k.b.store(k.ptrs(out, outOffs), branch->result());
    ir::Op* loop = k.b.create(OpCode::While, {k.b.i32(1)}, {Type::scalar(DType::I32)});
    ir::Block* before = loop->addRegion();
    Value* i = before->addArg(Type::scalar(DType::I32));
    ir::Builder bb(before);
    bb.create(OpCode::Condition, {bb.cmp("lt", i, n), i}, {});
    ir::Block* after = loop->addRegion();
    Value* jv = after->addArg(Type::scalar(DType::I32));
    ir::Builder ab(after);
    ab.create(OpCode::Yield,
              {ab.binary(OpCode::Add, ab.binary(OpCode::Mul, jv, ab.i32(2)), ab.i32(1))}, {});
    k.b.store(k.b.addPtr(cnt, k.b.programId(0)), loop->result());
    k.b.ret();
    GpuKernel kernel = loadOnGpu(*k.fn);
    auto hx = randomFloats(256, 7);
    DeviceArray<float> dx(hx), dout(512);
    DeviceArray<int32_t> dcnt(2);
    kernel.launch({2}, nullptr, {dx.arg(), dout.arg(), dcnt.arg(), LaunchArg::integer(10)});
    synchronize();
    auto o = dout.get();
    auto c = dcnt.get();
    for (int e = 0; e < 256; ++e) {
      ASSERT_EQ(o[e], hx[e] * hx[e]) << e;
      ASSERT_EQ(o[256 + e], -hx[e]) << e;
    }
    EXPECT_EQ(c[0], 15); // 1 -> 3 -> 7 -> 15
    EXPECT_EQ(c[1], 15);
  }
}

TEST(CodegenGpu, AtomicsUpdateOncePerElement) {
  SKIP_WITHOUT_GPU();
  KernelBuilder k("atomics");
  Value* acc = k.arg("acc", Type::ptr(DType::F32), 16);
  Value* cnt = k.arg("cnt", Type::ptr(DType::I32), 16);
  Value* old = k.arg("old", Type::ptr(DType::F32), 16);
  Value* lock = k.arg("lock", Type::ptr(DType::I32), 16);
  Value* vals = k.arg("vals", Type::ptr(DType::F32), 16);
  Value* n = k.arg("n", Type::scalar(DType::I32));
  Value* offs = k.offsets(256);
  Value* mask = k.b.cmp("lt", offs, k.b.splat(n, {256}));
  Value* ones = k.b.constFloat(1.0, Type::tensor(DType::F32, {256}));
  k.b.create(OpCode::AtomicRMW, {k.ptrs(acc, offs), ones, mask}, {Type::tensor(DType::F32, {256})},
             {{"kind", std::string("add")}, {"has_mask", int64_t(1)}});
  Value* v = k.b.load(k.ptrs(vals, offs));
  Value* prev =
      k.b.create1(OpCode::AtomicRMW, {k.ptrs(acc, offs), v, mask}, Type::tensor(DType::F32, {256}),
                  {{"kind", std::string("max")}, {"has_mask", int64_t(1)}});
  k.b.store(k.ptrs(old, offs), prev, mask);
  Value* ticket = k.b.create1(OpCode::AtomicRMW, {cnt, k.b.i32(1)}, Type::scalar(DType::I32),
                              {{"kind", std::string("add")}, {"sem", std::string("relaxed")}});
  Value* got = k.b.create1(OpCode::AtomicCas, {lock, ticket, k.b.i32(7)}, Type::scalar(DType::I32));
  k.b.store(k.b.addPtr(cnt, k.b.i32(1)), got);
  k.b.ret();
  GpuKernel kernel = loadOnGpu(*k.fn);
  const int n_ = 200;
  auto hv = randomFloats(256, 8, -3.0f, 3.0f);
  DeviceArray<float> dacc(std::vector<float>(256, 0.0f)), dold(256), dvals(hv);
  DeviceArray<int32_t> dcnt(std::vector<int32_t>{5, 0}), dlock(std::vector<int32_t>{5});
  kernel.launch(
      {1}, nullptr,
      {dacc.arg(), dcnt.arg(), dold.arg(), dlock.arg(), dvals.arg(), LaunchArg::integer(n_)});
  synchronize();
  auto a = dacc.get(), o = dold.get();
  auto c = dcnt.get(), l = dlock.get();
  for (int i = 0; i < 256; ++i) {
    if (i < n_) {
      ASSERT_EQ(o[i], 1.0f) << i; // the add ran exactly once before the max
      ASSERT_EQ(a[i], std::max(1.0f, hv[i])) << i;
    } else {
      ASSERT_EQ(a[i], 0.0f) << i;
    }
  }
  EXPECT_EQ(c[0], 6); // one thread added 1
  EXPECT_EQ(c[1], 5); // the CAS saw the ticket (5) and swapped in 7
  EXPECT_EQ(l[0], 7);
}

float roundToTf32(float f) {
  uint32_t u = floatBits(f);
  u = (u + 0x1000u) & ~0x1FFFu; // round half away on the 13 dropped bits, as cvt.rna
  return std::bit_cast<float>(u);
}
float bf16ToFloat(uint16_t h) {
  return std::bit_cast<float>(static_cast<uint32_t>(h) << 16);
}
uint16_t floatToBf16(float f) {
  uint32_t u = floatBits(f);
  u += 0x7FFFu + ((u >> 16) & 1); // round to nearest even
  return static_cast<uint16_t>(u >> 16);
}

TEST(CodegenGpu, DotMatchesTheReference) {
  SKIP_WITHOUT_GPU();
  struct Case {
    DType in;
    int64_t M, N, K;
    const char* precision;
    int numWarps;
  };
  for (const Case& c :
       {Case{DType::F16, 64, 64, 32, "tf32", 4}, Case{DType::BF16, 64, 64, 32, "tf32", 4},
        Case{DType::F32, 32, 32, 16, "tf32", 4}, Case{DType::F32, 16, 16, 16, "ieee", 4},
        Case{DType::F32, 64, 32, 16, "tf32", 4}, Case{DType::F16, 128, 128, 64, "tf32", 8},
        Case{DType::BF16, 128, 64, 32, "tf32", 4}, Case{DType::F16, 32, 64, 32, "tf32", 4}}) {
    SCOPED_TRACE(std::string(ir::tlName(c.in)) + " " + c.precision + " " + std::to_string(c.M) +
                 "x" + std::to_string(c.N) + "x" + std::to_string(c.K));
    GpuKernel kernel = loadOnGpu(*dotKernel(c.in, c.M, c.N, c.K, c.precision, c.numWarps));
    auto fa = randomFloats(c.M * c.K, 9), fb = randomFloats(c.K * c.N, 10);
    std::vector<float> ra(fa.size()), rb(fb.size()); // the values the GPU sees
    std::unique_ptr<DeviceArray<float>> a32, b32;
    std::unique_ptr<DeviceArray<uint16_t>> a16, b16;
    if (c.in == DType::F32) {
      for (size_t i = 0; i < fa.size(); ++i)
        ra[i] = c.precision == std::string("ieee") ? fa[i] : roundToTf32(fa[i]);
      for (size_t i = 0; i < fb.size(); ++i)
        rb[i] = c.precision == std::string("ieee") ? fb[i] : roundToTf32(fb[i]);
      a32 = std::make_unique<DeviceArray<float>>(fa);
      b32 = std::make_unique<DeviceArray<float>>(fb);
    } else {
      std::vector<uint16_t> ha(fa.size()), hb(fb.size());
      for (size_t i = 0; i < fa.size(); ++i) {
        if (c.in == DType::F16) {
          _Float16 h = static_cast<_Float16>(fa[i]);
          ha[i] = std::bit_cast<uint16_t>(h);
          ra[i] = static_cast<float>(h);
        } else {
          ha[i] = floatToBf16(fa[i]);
          ra[i] = bf16ToFloat(ha[i]);
        }
      }
      for (size_t i = 0; i < fb.size(); ++i) {
        if (c.in == DType::F16) {
          _Float16 h = static_cast<_Float16>(fb[i]);
          hb[i] = std::bit_cast<uint16_t>(h);
          rb[i] = static_cast<float>(h);
        } else {
          hb[i] = floatToBf16(fb[i]);
          rb[i] = bf16ToFloat(hb[i]);
        }
      }
      a16 = std::make_unique<DeviceArray<uint16_t>>(ha);
      b16 = std::make_unique<DeviceArray<uint16_t>>(hb);
    }
    DeviceArray<float> dc(c.M * c.N);
    kernel.launch({1}, nullptr,
                  {a32 ? a32->arg() : a16->arg(), b32 ? b32->arg() : b16->arg(), dc.arg()});
    synchronize();
    auto out = dc.get();
    double err = 0, norm = 0;
    for (int64_t m = 0; m < c.M; ++m)
      for (int64_t n = 0; n < c.N; ++n) {
        double ref = 0;
        for (int64_t kk = 0; kk < c.K; ++kk) ref += double(ra[m * c.K + kk]) * rb[kk * c.N + n];
        ASSERT_FALSE(std::isnan(out[m * c.N + n]));
        err += (out[m * c.N + n] - ref) * (out[m * c.N + n] - ref);
        norm += ref * ref;
      }
    EXPECT_LT(std::sqrt(err / norm), 1e-5);
  }
}

TEST(CodegenGpu, DescriptorCopiesMoveBlocks) {
  SKIP_WITHOUT_GPU();
  GpuKernel kernel = loadOnGpu(*descriptorKernel());
  const int64_t rows = 256, cols = 96; // 4 x 3 blocks
  auto hin = randomFloats(rows * cols, 12);
  DeviceArray<float> din(hin), dout(rows * cols);
  TensorMap inMap =
      encodeTensorMap("fp32", din.buf.address(), {rows, cols}, {cols, 1}, {64, 32}, 0);
  TensorMap outMap =
      encodeTensorMap("fp32", dout.buf.address(), {rows, cols}, {cols, 1}, {64, 32}, 0);
  kernel.launch({4, 3}, nullptr, {LaunchArg::tensor(inMap), LaunchArg::tensor(outMap)});
  synchronize();
  auto out = dout.get();
  for (int64_t i = 0; i < rows * cols; ++i) ASSERT_EQ(out[i], hin[i] + 1.0f) << i;
}

/// Compiles a kernel of kernels/, with the sibling files its relative imports name, through the
/// whole pipeline (front end to cubin) for sm_90a.
CompiledKernel compileLibraryKernel(const std::string& file, const std::string& kernel,
                                    const std::string& signature, int numWarps) {
  CompileRequest req;
  req.files =
      readSourceWithImports(std::string(WW_SOURCE_DIR) + "/python/warpweave/ops/kernels/" + file);
  req.kernel = kernel;
  req.signature = parseSignature(signature);
  req.options.target = Target::SM90a;
  req.options.numWarps = numWarps;
  return compile(req);
}

/// Launch arguments in the kernel's param order, by name.
std::vector<LaunchArg> argsByName(const CompiledKernel& k,
                                  const std::map<std::string, LaunchArg>& values) {
  std::vector<LaunchArg> args;
  for (const KernelParam& p : k.params) args.push_back(values.at(p.name));
  return args;
}

TEST(CodegenGpu, LibraryMatmulThroughTheWholePipeline) {
  SKIP_WITHOUT_GPU();
  CompiledKernel k = compileLibraryKernel(
      "matmul.py", "matmul_kernel",
      "a_ptr:*fp16:16,b_ptr:*fp16:16,c_ptr:*fp16:16,M:i32:16,N:i32:16,K:i32:16,"
      "stride_am:i32:16,stride_ak:i32:1,stride_bk:i32:16,stride_bn:i32:1,stride_cm:i32:16,"
      "stride_cn:i32:1,BLOCK_M=128,BLOCK_N=128,BLOCK_K=64,GROUP_M=8,ACTIVATION=\"\"",
      8);
  EXPECT_EQ(k.spillBytes, 0) << k.ptxasLog;
  GpuKernel kernel(k);
  const int M = 256, N = 384, K = 320;
  auto fa = randomFloats(M * K, 13), fb = randomFloats(K * N, 14);
  std::vector<uint16_t> ha(fa.size()), hb(fb.size());
  std::vector<float> ra(fa.size()), rb(fb.size());
  for (size_t i = 0; i < fa.size(); ++i) {
    _Float16 h = static_cast<_Float16>(fa[i]);
    ha[i] = std::bit_cast<uint16_t>(h);
    ra[i] = static_cast<float>(h);
  }
  for (size_t i = 0; i < fb.size(); ++i) {
    _Float16 h = static_cast<_Float16>(fb[i]);
    hb[i] = std::bit_cast<uint16_t>(h);
    rb[i] = static_cast<float>(h);
  }
  DeviceArray<uint16_t> da(ha), db(hb), dc(M * N);
  auto i = [](int64_t v) { return LaunchArg::integer(v); };
  kernel.launch({(M / 128) * (N / 128)}, nullptr,
                argsByName(k, {{"a_ptr", da.arg()},
                               {"b_ptr", db.arg()},
                               {"c_ptr", dc.arg()},
                               {"M", i(M)},
                               {"N", i(N)},
                               {"K", i(K)},
                               {"stride_am", i(K)},
                               {"stride_ak", i(1)},
                               {"stride_bk", i(N)},
                               {"stride_bn", i(1)},
                               {"stride_cm", i(N)},
                               {"stride_cn", i(1)}}));
  synchronize();
  auto hc = dc.get();
  double err = 0, norm = 0;
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      double ref = 0;
      for (int kk = 0; kk < K; ++kk) ref += double(ra[m * K + kk]) * rb[kk * N + n];
      double got = static_cast<float>(std::bit_cast<_Float16>(hc[m * N + n]));
      ASSERT_FALSE(std::isnan(got)) << m << "," << n;
      err += (got - ref) * (got - ref);
      norm += ref * ref;
    }
  EXPECT_LT(std::sqrt(err / norm), 2e-3);
}

TEST(CodegenGpu, LibrarySoftmaxThroughTheWholePipeline) {
  SKIP_WITHOUT_GPU();
  CompiledKernel k = compileLibraryKernel(
      "softmax.py", "softmax_kernel",
      "out_ptr:*fp32:16,in_ptr:*fp32:16,in_row_stride:i32:16,out_row_stride:i32:16,n_rows:i32,"
      "n_cols:i32,BLOCK=1024",
      4);
  GpuKernel kernel(k);
  const int rows = 37, cols = 1000;
  auto hx = randomFloats(rows * 1024, 15, -5.0f, 5.0f);
  DeviceArray<float> dx(hx), dy(rows * 1024);
  auto i = [](int64_t v) { return LaunchArg::integer(v); };
  kernel.launch({16}, nullptr,
                argsByName(k, {{"out_ptr", dy.arg()},
                               {"in_ptr", dx.arg()},
                               {"in_row_stride", i(1024)},
                               {"out_row_stride", i(1024)},
                               {"n_rows", i(rows)},
                               {"n_cols", i(cols)}}));
  synchronize();
  auto y = dy.get();
  for (int r = 0; r < rows; ++r) {
    double mx = -1e30, sum = 0;
    for (int c = 0; c < cols; ++c) mx = std::max(mx, double(hx[r * 1024 + c]));
    for (int c = 0; c < cols; ++c) sum += std::exp(double(hx[r * 1024 + c]) - mx);
    for (int c = 0; c < cols; ++c) {
      double ref = std::exp(double(hx[r * 1024 + c]) - mx) / sum;
      ASSERT_NEAR(y[r * 1024 + c], ref, 1e-6 + 1e-5 * ref) << r << "," << c;
    }
  }
}

TEST(CodegenGpu, DivisionByAPowerOfTwoTruncatesAndFloors) {
  SKIP_WITHOUT_GPU();
  auto fn = powerOfTwoDivisionKernel(DType::I32);
  GpuKernel kernel = loadOnGpu(*fn);
  std::vector<int32_t> hx(256);
  for (int e = 0; e < 256; ++e) hx[e] = (e - 128) * 37 + (e % 7);
  hx[0] = std::numeric_limits<int32_t>::min();
  hx[1] = std::numeric_limits<int32_t>::max();
  hx[2] = -1;
  DeviceArray<int32_t> dx(hx);
  std::vector<std::unique_ptr<DeviceArray<int32_t>>> outs;
  std::vector<LaunchArg> args{dx.arg()};
  for (int i = 0; i < 6; ++i) {
    outs.push_back(std::make_unique<DeviceArray<int32_t>>(256));
    args.push_back(outs.back()->arg());
  }
  kernel.launch({1}, nullptr, args);
  synchronize();
  int i = 0;
  for (int32_t d : {2, 8}) {
    auto div = outs[i++]->get(), rem = outs[i++]->get(), floorDiv = outs[i++]->get();
    for (int e = 0; e < 256; ++e) {
      int32_t x = hx[e];
      int32_t floored = x / d - ((x % d != 0 && x < 0) ? 1 : 0);
      ASSERT_EQ(div[e], x / d) << x << " / " << d;
      ASSERT_EQ(rem[e], x % d) << x << " % " << d;
      ASSERT_EQ(floorDiv[e], floored) << x << " // " << d;
    }
  }
}

TEST(CodegenGpu, CastsRoundCorrectly) {
  SKIP_WITHOUT_GPU();
  auto fn = elementwiseKernel("casts", {DType::F32}, [](KernelBuilder& k, auto v) {
    return std::vector<Value*>{castTo(k, v[0], DType::F16), castTo(k, v[0], DType::BF16),
                               castTo(k, v[0], DType::I32), castTo(k, v[0], DType::I8),
                               castTo(k, castTo(k, v[0], DType::F8E4M3), DType::F32)};
  });
  GpuKernel kernel = loadOnGpu(*fn);
  auto hx = randomFloats(256, 11, -100.0f, 100.0f);
  hx[0] = 1.0f;
  hx[1] = 0.5f;
  hx[2] = -448.0f; // the largest e4m3 magnitude
  DeviceArray<float> dx(hx), d8(256);
  DeviceArray<uint16_t> dh(256), db(256);
  DeviceArray<int32_t> di(256);
  DeviceArray<int8_t> dc(256);
  kernel.launch({1}, nullptr, {dx.arg(), dh.arg(), db.arg(), di.arg(), dc.arg(), d8.arg()});
  synchronize();
  auto h = dh.get(), bb = db.get();
  auto i32 = di.get();
  auto i8 = dc.get();
  auto f8 = d8.get();
  for (int e = 0; e < 256; ++e) {
    ASSERT_EQ(h[e], std::bit_cast<uint16_t>(static_cast<_Float16>(hx[e]))) << hx[e];
    ASSERT_EQ(bb[e], floatToBf16(hx[e])) << hx[e];
    ASSERT_EQ(i32[e], static_cast<int32_t>(hx[e])) << hx[e];
    ASSERT_EQ(i8[e], static_cast<int8_t>(static_cast<int32_t>(hx[e]))) << hx[e];
    // e4m3 keeps 3 mantissa bits: within 1/16 relative.
    ASSERT_NEAR(f8[e], hx[e], std::abs(hx[e]) / 16 + 1e-2) << hx[e];
  }
  EXPECT_EQ(f8[0], 1.0f);
  EXPECT_EQ(f8[1], 0.5f);
  EXPECT_EQ(f8[2], -448.0f);
}

/// kernels/hopper/gemm_pipelined.py through the whole pipeline to a cubin (ptxas, no GPU):
/// TMA into swizzled TLX buffers, mbarrier phases, wgmma from the buffers. BLOCK_N=64 keeps
/// B's rows within one 128-byte swizzle row (wider TMA boxes are not split yet).
TEST(Codegen, TlxPipelinedGemmCompilesForSm90a) {
  for (int numWarps : {4, 8}) {
    SCOPED_TRACE(numWarps);
    CompiledKernel k = compileLibraryKernel(
        "hopper/gemm_pipelined.py", "gemm_pipelined_kernel",
        "a_desc:desc<fp16,128x64>, b_desc:desc<fp16,64x64>, c_desc:desc<fp16,128x64>, M:i32, "
        "N:i32, K:i32, BLOCK_M=128, BLOCK_N=64, BLOCK_K=64, GROUP_M=8, NUM_STAGES=4",
        numWarps);
    EXPECT_EQ(k.spillBytes, 0) << k.ptxasLog;
    EXPECT_FALSE(k.cubin.empty()) << k.ptxasLog;
    const std::string& ptx = k.ptx;
    EXPECT_EQ(count(ptx, "mbarrier.init.shared::cta.b64"), 4) << ptx;
    EXPECT_GE(count(ptx, "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::"
                         "complete_tx::bytes"),
              2);
    EXPECT_NE(ptx.find("mbarrier.try_wait.parity.shared::cta.b64"), std::string::npos);
    EXPECT_NE(ptx.find("wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16"), std::string::npos);
    EXPECT_NE(ptx.find("wgmma.wait_group.sync.aligned 1"), std::string::npos);
    EXPECT_NE(ptx.find("wgmma.wait_group.sync.aligned 0"), std::string::npos);
    ASSERT_EQ(k.params.size(), 6u);
    EXPECT_NE(k.params[0].type.find("swizzle=128"), std::string::npos) << k.params[0].type;
    EXPECT_NE(k.params[1].type.find("swizzle=128"), std::string::npos) << k.params[1].type;
    // The epilogue's descriptor store stages C in the scratch region, which lies over the dead
    // stages on whole swizzle atoms: the tile goes swizzled (fewer bank conflicts).
    EXPECT_NE(k.params[2].type.find("swizzle=128"), std::string::npos) << k.params[2].type;
    EXPECT_LE(k.sharedBytes, 4 * (128 * 64 + 64 * 64) * 2 + 1024);
  }
}

/// kernels/hopper/gemm_ws.py through the whole pipeline to a cubin: a producer task (4 warps,
/// 40 registers) and two consumer replicas (4 warps, 232 registers each).
TEST(Codegen, TlxWarpSpecializedGemmCompilesForSm90a) {
  CompiledKernel k = compileLibraryKernel(
      "hopper/gemm_ws.py", "gemm_ws_kernel",
      "a_desc:desc<fp16,128x64>, b_desc:desc<fp16,64x64>, c_desc:desc<fp16,128x64>, M:i32, "
      "N:i32, K:i32, BLOCK_M=256, BLOCK_N=64, BLOCK_K=64, GROUP_M=8, NUM_STAGES=4, NUM_SMS=132",
      4);
  EXPECT_EQ(k.spillBytes, 0) << k.ptxasLog;
  EXPECT_FALSE(k.cubin.empty()) << k.ptxasLog;
  const std::string& ptx = k.ptx;
  // 384 threads: 65536 / 384 registers each, rounded down to 168.
  EXPECT_NE(ptx.find(".reqntid 384, 1, 1"), std::string::npos) << ptx;
  EXPECT_NE(ptx.find(".maxnreg 168"), std::string::npos);
  EXPECT_EQ(count(ptx, "setmaxnreg.dec.sync.aligned.u32 40"), 1);
  EXPECT_EQ(count(ptx, "setmaxnreg.inc.sync.aligned.u32 232"), 2);
  // Four stages of A (128x64) and B (64x64) fp16 tiles, plus a separate scratch tile for each
  // consumer's concurrent C store (128x64 fp16): the consumers must not share one.
  EXPECT_GE(k.sharedBytes, 4 * (128 * 64 + 64 * 64) * 2 + 2 * 128 * 64 * 2);
  EXPECT_NE(ptx.find("wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16"), std::string::npos);
}

/// kernels/hopper/attention_ws.py through the whole pipeline to a cubin: K^T through
/// local_trans, P from registers, named barriers between the consumer replicas (64 query rows
/// each, as kernels/ops.py launches it; CAUSAL left at its default).
TEST(Codegen, TlxWarpSpecializedAttentionCompilesForSm90a) {
  CompiledKernel k = compileLibraryKernel(
      "hopper/attention_ws.py", "attention_ws_kernel",
      "q_desc:desc<fp16,64x64>, k_desc:desc<fp16,128x64>, v_desc:desc<fp16,128x64>, "
      "o_desc:desc<fp16,64x64>, lse_ptr:*fp32:16, sm_scale:fp32, N_CTX:i32:16, HEAD_DIM=64, "
      "BLOCK_M=64, BLOCK_N=128, NUM_STAGES=2",
      4);
  EXPECT_EQ(k.spillBytes, 0) << k.ptxasLog;
  EXPECT_FALSE(k.cubin.empty()) << k.ptxasLog;
  const std::string& ptx = k.ptx;
  EXPECT_NE(ptx.find(".reqntid 384, 1, 1"), std::string::npos) << ptx;
  EXPECT_NE(ptx.find("setmaxnreg.dec.sync.aligned.u32 24"), std::string::npos);
  EXPECT_EQ(count(ptx, "setmaxnreg.inc.sync.aligned.u32 240"), 2);
  // The ping-pong turn barriers of the kernel (ids 8 and 9, both consumer groups).
  EXPECT_NE(ptx.find("bar.arrive 8, 256"), std::string::npos) << ptx;
  EXPECT_NE(ptx.find("wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16"), std::string::npos);
  EXPECT_NE(ptx.find("wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16"), std::string::npos);
}

} // namespace
} // namespace ww
