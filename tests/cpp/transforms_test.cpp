// Verifier, constant folding, CSE and DCE on hand-built Tile IR. The folds checked on printed IR
// (wraparound, identities, comparisons by type) are lit tests: tests/lit/fold/arith.tir.
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

// Division by zero has no value PTX specifies: the op stays. fp16 folds with one rounding
// (ir/ScalarNumerics.h): 1 + 1e-4 is 1 in fp16.
TEST(Fold, KeepsDivisionByZeroFoldsNarrowFloats) {
  Kernel k;
  Value* p = k.addArg("p", Type::ptr(DType::I32));
  Value* q = k.addArg("q", Type::ptr(DType::F16));
  k.b.store(p, k.b.binary(OpCode::Div, k.b.i32(1), k.b.i32(0)));
  Type h = Type::scalar(DType::F16);
  k.b.store(q, k.b.binary(OpCode::Add, k.b.constFloat(1.0, h), k.b.constFloat(1e-4, h)));
  k.b.ret();
  runCleanupPipeline(k.fn);
  EXPECT_EQ(countOps(k.fn, OpCode::Div), 1);
  EXPECT_EQ(countOps(k.fn, OpCode::Add), 0);
  bool one = false;
  walk(k.fn.body, [&](const Op& op) {
    if (op.code() == OpCode::Constant && op.result()->type() == h)
      one = std::get<double>(*op.attr("value")) == 1.0;
  });
  EXPECT_TRUE(one);
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
