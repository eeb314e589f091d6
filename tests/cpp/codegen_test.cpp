// PTX codegen tests: kernels built with ir::Builder, lowered to PTX for each target, and
// assembled by ptxas; assertions on the instructions the lowering must choose.
#include "codegen/Codegen.h"
#include "codegen/PtxBuilder.h"
#include "ir/Builder.h"
#include "runtime/Ptxas.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>
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
      std::string s = (ir::isSigned(t) ? "s" : "u") + std::to_string(bits);
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
      if (t != DType::F64) {
        EXPECT_NE(k.ptx.find("max.NaN.f32"), std::string::npos);
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

} // namespace
} // namespace ww
