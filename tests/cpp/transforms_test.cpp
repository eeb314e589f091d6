// Verifier, constant folding, CSE and DCE on hand-built Tile IR.
#include "ir/Builder.h"
#include "ir/Printer.h"
#include "transforms/Passes.h"

#include <gtest/gtest.h>

using namespace ww::ir;
using namespace ww::transforms;

namespace {

int countOps(const Function& fn, OpCode code) {
  int n = 0;
  walk(fn.body, [&](const Op& op) { n += op.code() == code; });
  return n;
}

struct Kernel {
  Function fn;
  Builder b{&fn.body};
  Value* addArg(const std::string& name, Type t) {
    Value* v = fn.body.addArg(t, name);
    fn.args.push_back({name, t, 1, false, v});
    return v;
  }
};

} // namespace

TEST(Fold, FoldsScalarArithmeticWithWraparound) {
  Kernel k;
  Value* p = k.addArg("p", Type::ptr(DType::I8));
  Type i8 = Type::scalar(DType::I8);
  Value* v = k.b.binary(OpCode::Add, k.b.constInt(100, i8), k.b.constInt(100, i8)); // wraps to -56
  k.b.store(p, v);
  k.b.ret();
  runCleanupPipeline(k.fn);
  EXPECT_EQ(countOps(k.fn, OpCode::Add), 0);
  EXPECT_NE(print(k.fn).find("constant {value = -56} : i8"), std::string::npos) << print(k.fn);
}

TEST(Fold, FoldsSplatsComparisonsAndIdentities) {
  Kernel k;
  Value* p = k.addArg("p", Type::ptr(DType::I32));
  Value* pid = k.b.programId(0);
  Value* x = k.b.binary(OpCode::Mul, pid, k.b.i32(1));                           // x*1 -> pid
  Value* y = k.b.binary(OpCode::Add, x, k.b.i32(0));                             // +0 -> pid
  Value* c = k.b.cmp("lt", k.b.i32(3), k.b.i32(5));                              // true
  Value* s = k.b.create1(OpCode::Select, {c, y, k.b.i32(7)}, y->type());         // -> pid
  Value* offs = k.b.splat(k.b.binary(OpCode::Mul, k.b.i32(6), k.b.i32(7)), {4}); // splat 42
  Value* ptrs = k.b.addPtr(k.b.splat(p, {4}), offs);
  k.b.store(ptrs, k.b.splat(s, {4}));
  k.b.ret();
  runCleanupPipeline(k.fn);
  std::string ir = print(k.fn);
  EXPECT_EQ(countOps(k.fn, OpCode::Mul), 0) << ir;
  EXPECT_EQ(countOps(k.fn, OpCode::Add), 0) << ir;
  EXPECT_EQ(countOps(k.fn, OpCode::Select), 0) << ir;
  EXPECT_EQ(countOps(k.fn, OpCode::Cmp), 0) << ir;
  EXPECT_NE(ir.find("constant {value = 42} : tensor<4xi32>"), std::string::npos) << ir;
}

TEST(Fold, ComparesUnsignedSignedAndFloatConstantsByTheirType) {
  Kernel k;
  Value* p = k.addArg("p", Type::ptr(DType::I32));
  Type i32 = Type::scalar(DType::I32), u64 = Type::scalar(DType::U64);
  Type f32 = Type::scalar(DType::F32);
  auto digit = [&](Value* c, int64_t weight) {
    return k.b.create1(OpCode::Select, {c, k.b.i32(weight), k.b.i32(0)}, i32);
  };
  // 2^64 - 1 > 1 as u64 (100), -1 > 1 as i32 is false (0), 1.5 >= 1.5 (1): 101.
  Value* u = digit(k.b.cmp("gt", k.b.constInt(-1, u64), k.b.constInt(1, u64)), 100);
  Value* i = digit(k.b.cmp("gt", k.b.constInt(-1, i32), k.b.constInt(1, i32)), 10);
  Value* f = digit(k.b.cmp("ge", k.b.constFloat(1.5, f32), k.b.constFloat(1.5, f32)), 1);
  k.b.store(p, k.b.binary(OpCode::Add, k.b.binary(OpCode::Add, u, i), f));
  k.b.ret();
  runCleanupPipeline(k.fn);
  std::string ir = print(k.fn);
  EXPECT_EQ(countOps(k.fn, OpCode::Cmp), 0) << ir;
  EXPECT_NE(ir.find("constant {value = 101} : i32"), std::string::npos) << ir;
}

TEST(Fold, KeepsDivisionByZeroAndNarrowFloats) {
  Kernel k;
  Value* p = k.addArg("p", Type::ptr(DType::I32));
  Value* q = k.addArg("q", Type::ptr(DType::F16));
  k.b.store(p, k.b.binary(OpCode::Div, k.b.i32(1), k.b.i32(0)));
  Type h = Type::scalar(DType::F16);
  k.b.store(q, k.b.binary(OpCode::Add, k.b.constFloat(1.0, h), k.b.constFloat(1e-4, h)));
  k.b.ret();
  runCleanupPipeline(k.fn);
  EXPECT_EQ(countOps(k.fn, OpCode::Div), 1);
  EXPECT_EQ(countOps(k.fn, OpCode::Add), 1);
}

TEST(Cse, MergesEqualPureOpsButNotLoads) {
  Kernel k;
  Value* p = k.addArg("p", Type::ptr(DType::F32));
  Value* n = k.addArg("n", Type::scalar(DType::I32));
  Value* a = k.b.binary(OpCode::Mul, n, n);
  Value* b = k.b.binary(OpCode::Mul, n, n);
  Value* l1 = k.b.load(k.b.addPtr(p, a));
  k.b.store(p, l1);
  Value* l2 = k.b.load(k.b.addPtr(p, b));
  k.b.store(p, l2);
  k.b.ret();
  runCleanupPipeline(k.fn);
  EXPECT_EQ(countOps(k.fn, OpCode::Mul), 1);
  EXPECT_EQ(countOps(k.fn, OpCode::AddPtr), 1);
  EXPECT_EQ(countOps(k.fn, OpCode::Load), 2); // a store sits between them
}

TEST(Cse, OuterValuesReplaceInnerOnesNotTheReverse) {
  Kernel k;
  Value* p = k.addArg("p", Type::ptr(DType::I32));
  Value* n = k.addArg("n", Type::scalar(DType::I32));
  Value* outer = k.b.binary(OpCode::Mul, n, n);
  Op* loop = k.b.create(OpCode::For, {k.b.i32(0), n, k.b.i32(1)}, {});
  Block* body = loop->addRegion();
  body->addArg(Type::scalar(DType::I32), "i");
  Builder in(body);
  Value* inner = in.binary(OpCode::Mul, n, n);
  in.store(p, inner);
  Value* innerOnly = in.binary(OpCode::Sub, n, outer);
  in.store(p, innerOnly);
  in.create(OpCode::Yield, {}, {});
  k.b.store(p, outer);
  k.b.store(p, k.b.binary(OpCode::Sub, n, outer)); // equal to innerOnly but outside: kept
  k.b.ret();
  runCleanupPipeline(k.fn);
  EXPECT_EQ(countOps(k.fn, OpCode::Mul), 1);
  EXPECT_EQ(countOps(k.fn, OpCode::Sub), 2);
}

TEST(Dce, RemovesUnusedPureOpsAndLoadsKeepsStores) {
  Kernel k;
  Value* p = k.addArg("p", Type::ptr(DType::F32));
  Value* n = k.addArg("n", Type::scalar(DType::I32));
  k.b.binary(OpCode::Mul, n, n);
  k.b.load(p);
  k.b.store(p, k.b.constFloat(1.0, Type::scalar(DType::F32)));
  k.b.ret();
  runCleanupPipeline(k.fn);
  EXPECT_EQ(countOps(k.fn, OpCode::Mul), 0);
  EXPECT_EQ(countOps(k.fn, OpCode::Load), 0);
  EXPECT_EQ(countOps(k.fn, OpCode::Store), 1);
}

TEST(Verifier, RejectsUseBeforeDefinitionAndMissingTerminator) {
  {
    Kernel k;
    Value* n = k.addArg("n", Type::scalar(DType::I32));
    Op* loop = k.b.create(OpCode::For, {k.b.i32(0), n, k.b.i32(1)}, {});
    Block* body = loop->addRegion();
    Value* iv = body->addArg(Type::scalar(DType::I32), "i");
    Builder(body).create(OpCode::Yield, {}, {});
    k.b.binary(OpCode::Add, iv, iv); // iv is not visible outside the loop
    k.b.ret();
    EXPECT_THROW(verify(k.fn), std::logic_error);
  }
  {
    Kernel k;
    k.b.programId(0);
    EXPECT_THROW(verify(k.fn), std::logic_error);
  }
  {
    Kernel k;
    Value* a = k.addArg("a", Type::scalar(DType::I32));
    Value* f = k.addArg("f", Type::scalar(DType::F32));
    k.b.create1(OpCode::Add, {a, f}, a->type());
    k.b.ret();
    EXPECT_THROW(verify(k.fn), std::logic_error);
  }
}

TEST(LoopUnroll, CopiesTheBodyAndKeepsTheRemainderLoop) {
  // for i in tl.range(lo, hi, 2, loop_unroll_factor=3): acc += i   (acc carried, i32)
  Kernel k;
  Value* p = k.addArg("p", Type::ptr(DType::I32));
  Value* lo = k.addArg("lo", Type::scalar(DType::I32));
  Value* hi = k.addArg("hi", Type::scalar(DType::I32));
  Op* loop = k.b.create(OpCode::For, {lo, hi, k.b.i32(2), k.b.i32(0)}, {Type::scalar(DType::I32)},
                        {{"unroll", int64_t{3}}});
  Block* body = loop->addRegion();
  Value* iv = body->addArg(Type::scalar(DType::I32), "i");
  Value* acc = body->addArg(Type::scalar(DType::I32), "acc");
  Builder inner(body);
  inner.create(OpCode::Yield, {inner.binary(OpCode::Add, acc, iv)}, {});
  k.b.store(p, loop->result());
  k.b.ret();
  EXPECT_EQ(unrollLoops(k.fn), 1);
  verify(k.fn);
  std::string ir = print(k.fn);
  // The unrolled loop (three adds of the carried value, two advanced induction variables), then
  // the original one over the rest, from where the unrolled loop stops, fed by its result.
  ASSERT_EQ(countOps(k.fn, OpCode::For), 2) << ir;
  const Op* unrolled = nullptr;
  for (const auto& op : k.fn.body.ops())
    if (op->code() == OpCode::For && op.get() != loop) unrolled = op.get();
  ASSERT_NE(unrolled, nullptr) << ir;
  EXPECT_EQ(loop->operand(3), unrolled->result(0)) << ir;
  EXPECT_EQ(loop->operand(0), unrolled->operand(1)) << ir;
  EXPECT_EQ(loop->intAttr("unroll"), 1) << ir;
  int adds = 0;
  walk(*unrolled->region(0), [&](const Op& op) { adds += op.code() == OpCode::Add; });
  EXPECT_EQ(adds, 3 + 2) << ir;
  // Run again: nothing is left to unroll.
  EXPECT_EQ(unrollLoops(k.fn), 0);
}
