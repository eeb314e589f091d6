// The OPERANDS / RESULTS / TYPES / REGIONS lines of Ops.def as ir/OpSignature.h exposes them:
// representative signatures, type rules and regions, the verifier's checks of them on IR built in
// C++, and the shared buffers the Written marks name for the shared-memory barrier pass.
#include "ir/Builder.h"
#include "ir/OpAttrs.h"
#include "ir/OpSignature.h"
#include "ir/OpTraits.h"
#include "transforms/Passes.h"

#include <gtest/gtest.h>

#include <map>
#include <stdexcept>

using namespace ww::ir;

namespace {

TEST(OpSignature, ListsNameEverySlot) {
  EXPECT_EQ(signatureText(OpCode::Load), "(ptr, [mask if has_mask], [other if has_other])");
  EXPECT_EQ(signatureText(OpCode::Load, true), "(value)");
  EXPECT_EQ(signatureText(OpCode::Add), "(a, b)");
  EXPECT_EQ(signatureText(OpCode::Return), "()");
  EXPECT_EQ(signatureText(OpCode::For), "(lb, ub, step, inits...)");
  EXPECT_EQ(signatureText(OpCode::AsyncDescLoad),
            "(desc, buffer, bar, offsets..., [pred if has_pred], multicast_ranks x "
            "multicast_operands)");
  EXPECT_EQ(signatureText(OpCode::AsyncRemoteCopy), "(dst, src, rank, bar)");
  EXPECT_EQ(kindsText(kind::Num), "a scalar or a tensor");
  EXPECT_EQ(kindsText(kind::Buf | kind::Written), "a buffer");
}

TEST(OpSignature, EveryOpHasBothListsEnded) {
  for (size_t i = 0; i < kNumOpCodes; ++i) {
    const OpSignature& s = signatureOf(OpCode(i));
    ASSERT_NE(s.operands, nullptr) << opName(OpCode(i));
    ASSERT_NE(s.results, nullptr) << opName(OpCode(i));
    int variadic = 0;
    for (const Slot* p = s.operands; p->arity != Slot::Arity::End; ++p)
      variadic += p->arity == Slot::Arity::Variadic;
    EXPECT_LE(variadic, 1) << opName(OpCode(i));
  }
}

/// A kernel with one pointer argument whose body `build` fills; returns the verifier's message.
template <class F> std::string verifyError(F build) {
  Function fn;
  fn.name = "k";
  Value* p = fn.body.addArg(Type::ptr(DType::F32), "p");
  Builder b(&fn.body);
  build(b, p);
  b.create(OpCode::Return, {}, {});
  try {
    ww::transforms::verify(fn);
  } catch (const std::logic_error& e) {
    std::string m = e.what();
    return m.substr(0, m.find('\n'));
  }
  return "";
}

TEST(OpSignature, VerifierChecksCountsAndKinds) {
  EXPECT_EQ(verifyError([](Builder& b, Value* p) { b.load(p); }), "");
  // A mask operand without has_mask.
  EXPECT_EQ(verifyError([](Builder& b, Value* p) {
              b.create(OpCode::Load, {p, b.constInt(1, Type::scalar(DType::I1))},
                       {Type::scalar(DType::F32)});
            }),
            "Tile IR verifier: 'load': 2 operands, expected 1: (ptr, [mask if has_mask], "
            "[other if has_other]) with has_mask = 0, has_other = 0");
  // A local_load of a tensor instead of a buffer.
  EXPECT_EQ(verifyError([](Builder& b, Value* p) {
              Value* x = b.load(b.splat(p, {4}));
              b.create(OpCode::LocalLoad, {x}, {x->type()});
            }),
            "Tile IR verifier: 'local_load': operand #0 (buffer) is tensor<4xfp32>, expected a "
            "buffer");
  // A store with a result.
  EXPECT_EQ(verifyError([](Builder& b, Value* p) {
              Value* x = b.load(p);
              b.create(OpCode::Store, {p, x}, {x->type()});
            }),
            "Tile IR verifier: 'store': 1 result, expected 0: ()");
}

std::vector<std::string> ruleTexts(OpCode c) {
  std::vector<std::string> t;
  for (const TypeRule& r : typeRulesOf(c)) t.push_back(ruleText(r));
  return t;
}

TEST(OpSignature, TypeRulesComeFromTheTypesLineAndTheTraits) {
  using V = std::vector<std::string>;
  EXPECT_EQ(ruleTexts(OpCode::Add), V{"its operands and results have one type"});
  EXPECT_EQ(ruleTexts(OpCode::Exp), V{"its operands and results have one type"});
  EXPECT_EQ(ruleTexts(OpCode::MultipleOf), V{"its operands and results have one type"});
  EXPECT_EQ(ruleTexts(OpCode::Cmp),
            (V{"its operands and results have one shape", "SameType(a, b)", "ElemI1(result)"}));
  EXPECT_EQ(ruleTexts(OpCode::Select),
            (V{"its operands and results have one shape", "SameType(a, b)", "ElemI1(cond)"}));
  EXPECT_EQ(ruleTexts(OpCode::AddPtr),
            (V{"its operands and results have one shape", "ElemInt(offset)"}));
  EXPECT_EQ(ruleTexts(OpCode::Load), V{"SameShape(ptr, mask)"});
  EXPECT_EQ(ruleTexts(OpCode::Store), V{"SameShape(ptr, value)"});
  EXPECT_EQ(ruleTexts(OpCode::For), V{"SameType(inits, iters)"});
  EXPECT_EQ(ruleTexts(OpCode::LocalAlloc), V{});
}

TEST(OpSignature, RegionsAreTheRegionsLineOfHasRegionsOpsOnly) {
  for (size_t i = 0; i < kNumOpCodes; ++i) {
    bool has = signatureOf(OpCode(i)).regions[0].name != nullptr;
    EXPECT_EQ(has, hasTraits(OpCode(i), trait::HasRegions)) << opName(OpCode(i));
  }
  const RegionSpec* loop = signatureOf(OpCode::For).regions;
  EXPECT_STREQ(loop[0].name, "body");
  EXPECT_EQ(loop[0].ends, RegionSpec::Ends::Yield);
  EXPECT_EQ(loop[0].argsSkip, 1u);
  EXPECT_STREQ(loop[0].args.name, "iters");
  EXPECT_EQ(loop[1].name, nullptr);
  const RegionSpec* loopW = signatureOf(OpCode::While).regions;
  EXPECT_EQ(loopW[0].ends, RegionSpec::Ends::Condition);
  EXPECT_EQ(loopW[1].ends, RegionSpec::Ends::Yield);
  EXPECT_TRUE(signatureOf(OpCode::Reduce).regions[0].optional);
}

TEST(OpSignature, VerifierChecksTheTypeRules) {
  Value* i = nullptr;
  auto withInt = [&](Builder& b, Value* p) {
    (void)p;
    i = b.i32(3);
  };
  // BinaryArith: one type.
  EXPECT_EQ(verifyError([&](Builder& b, Value* p) {
              withInt(b, p);
              b.create(OpCode::Add, {b.load(p), i}, {Type::scalar(DType::F32)});
            }),
            "Tile IR verifier: 'add': operand #1 (b) has type i32, operand #0 (a) type fp32 "
            "(Ops.def: its operands and results have one type)");
  // Elementwise: one shape.
  EXPECT_EQ(verifyError([&](Builder& b, Value* p) {
              Value* t = b.load(b.splat(p, {4}));
              b.create(OpCode::Exp, {t}, {Type::scalar(DType::F32)});
            }),
            "Tile IR verifier: 'exp': result #0 (result) has type fp32, operand #0 (x) type "
            "tensor<4xfp32> (Ops.def: its operands and results have one type)");
  // TYPES lines.
  EXPECT_EQ(
      verifyError([&](Builder& b, Value* p) {
        withInt(b, p);
        b.create(OpCode::Cmp, {i, i}, {Type::scalar(DType::I32)}, {attr::Cmp::make::pred("lt")});
      }),
      "Tile IR verifier: 'cmp': result #0 (result) is i32, expected i1 elements (Ops.def: "
      "ElemI1(result))");
  EXPECT_EQ(verifyError([&](Builder& b, Value* p) {
              withInt(b, p);
              Value* x = b.load(p);
              b.create(OpCode::Select, {i, x, x}, {x->type()});
            }),
            "Tile IR verifier: 'select': operand #0 (cond) is i32, expected i1 elements (Ops.def: "
            "ElemI1(cond))");
  EXPECT_EQ(verifyError([&](Builder& b, Value* p) {
              b.create(OpCode::AddPtr, {p, b.load(p)}, {p->type()});
            }),
            "Tile IR verifier: 'addptr': operand #1 (offset) is fp32, expected integer elements "
            "(Ops.def: ElemInt(offset))");
  EXPECT_EQ(verifyError([&](Builder& b, Value* p) {
              Value* ptrs = b.splat(p, {4});
              Value* mask = b.constInt(1, Type::scalar(DType::I1));
              b.create(OpCode::Load, {ptrs, mask}, {Type::tensor(DType::F32, {4})},
                       {attr::Load::make::hasMask(true)});
            }),
            "Tile IR verifier: 'load': operand #1 (mask) has shape [], operand #0 (ptr) shape [4] "
            "(Ops.def: SameShape(ptr, mask))");
}

/// A for loop from 0 to 4 carrying one fp32 value, its body as `body` builds it (given the block
/// and its arguments' types), its results as `results`.
Op* loop(Builder& b, Value* init, const std::vector<Type>& bodyArgs,
         const std::vector<Type>& results, bool yieldInt = false) {
  Value* zero = b.i32(0);
  Value* four = b.i32(4);
  Value* one = b.i32(1);
  Op* op = b.create(OpCode::For, {zero, four, one, init}, results);
  Block* body = op->addRegion();
  for (const Type& t : bodyArgs) body->addArg(t);
  Builder in(body);
  in.create(OpCode::Yield, {yieldInt ? body->arg(0) : body->arg(body->numArgs() - 1)}, {});
  return op;
}

TEST(OpSignature, VerifierChecksTheRegions) {
  const Type f32 = Type::scalar(DType::F32), i32 = Type::scalar(DType::I32);
  EXPECT_EQ(verifyError([&](Builder& b, Value* p) { loop(b, b.load(p), {i32, f32}, {f32}); }), "");
  EXPECT_EQ(verifyError([&](Builder& b, Value* p) {
              loop(b, b.load(p), {i32, f32}, {i32});
            }),
            "Tile IR verifier: 'for': result #0 (iters) has type i32, operand #3 (inits) type "
            "fp32 (Ops.def: SameType(inits, iters))");
  EXPECT_EQ(verifyError([&](Builder& b, Value* p) {
              loop(b, b.load(p), {i32, f32, f32}, {f32});
            }),
            "Tile IR verifier: 'for': region 'body' has 3 arguments, expected 2 (1, then one per "
            "value of iters)");
  EXPECT_EQ(verifyError([&](Builder& b, Value* p) {
              loop(b, b.load(p), {i32, i32}, {f32});
            }),
            "Tile IR verifier: 'for': region 'body' argument #1 has type i32, expected fp32, the "
            "type of result #0 (iters)");
  EXPECT_EQ(verifyError([&](Builder& b, Value* p) {
              loop(b, b.load(p), {i32, f32}, {f32}, true);
            }),
            "Tile IR verifier: 'for': region 'body' yields i32 as value #0, expected fp32, the "
            "type of result #0 (iters)");
  // An op whose REGIONS line is absent has none.
  EXPECT_EQ(verifyError([&](Builder& b, Value* p) {
              Value* x = b.load(p);
              b.create(OpCode::Add, {x, x}, {f32})->addRegion();
            }),
            "Tile IR verifier: 'add': 1 region, expected 0: ()");
  // if: then and else.
  EXPECT_EQ(verifyError([&](Builder& b, Value* p) {
              (void)p;
              Op* op = b.create(OpCode::If, {b.constInt(1, Type::scalar(DType::I1))}, {});
              op->addRegion();
            }),
            "Tile IR verifier: 'if': 1 region, expected 2: (then, else)");
}

TEST(OpSignature, WrittenSharedBufferIsTheMarkedOperand) {
  // What the shared-memory barrier pass listed by hand before the Written marks.
  std::map<OpCode, unsigned> written = {{OpCode::AsyncLoad, 1},
                                        {OpCode::AsyncDescLoad, 1},
                                        {OpCode::AsyncBulkLoad, 1},
                                        {OpCode::LocalStore, 0},
                                        {OpCode::LocalScatter, 0},
                                        {OpCode::AsyncRemoteStore, 0},
                                        {OpCode::RemoteStore, 0},
                                        {OpCode::AsyncRemoteCopy, 0},
                                        // Added since: the try_cancel response lands there.
                                        {OpCode::ClcTryCancel, 0}};
  for (size_t i = 0; i < kNumOpCodes; ++i) {
    unsigned at = 0;
    bool marked = false;
    for (const Slot* s = signatureOf(OpCode(i)).operands; s->arity != Slot::Arity::End; ++s, ++at)
      if (s->kinds & kind::Written) {
        marked = true;
        break;
      }
    auto it = written.find(OpCode(i));
    EXPECT_EQ(marked, it != written.end()) << opName(OpCode(i));
    if (marked && it != written.end()) {
      EXPECT_EQ(at, it->second) << opName(OpCode(i));
    }
  }
  Function fn;
  Builder b(&fn.body);
  Type bufT = Type::buffer(DType::F32, {16}, 1);
  Value* buf = b.create1(OpCode::LocalAlloc, {}, bufT);
  Value* x = b.create1(OpCode::LocalLoad, {buf}, Type::tensor(DType::F32, {16}));
  Op* store = b.create(OpCode::LocalStore, {buf, x}, {});
  EXPECT_EQ(writtenSharedBuffer(*store), buf);
  EXPECT_EQ(writtenSharedBuffer(*x->def()), nullptr);
}

} // namespace
