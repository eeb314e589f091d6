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
  EXPECT_STREQ(loop[0].args[0].name, "iters");
  EXPECT_EQ(loop[1].name, nullptr);
  const RegionSpec* loopW = signatureOf(OpCode::While).regions;
  EXPECT_EQ(loopW[0].ends, RegionSpec::Ends::Condition);
  EXPECT_STREQ(loopW[0].args[0].name, "inits");
  EXPECT_STREQ(loopW[0].yields.name, "results");
  EXPECT_EQ(loopW[1].ends, RegionSpec::Ends::Yield);
  EXPECT_STREQ(loopW[1].args[0].name, "results");
  EXPECT_STREQ(loopW[1].yields.name, "inits");
  // A reduce's combine region: only for kind "custom", (a..., b...) of the inputs' elements.
  for (OpCode c : {OpCode::Reduce, OpCode::Scan}) {
    const RegionSpec& combine = signatureOf(c).regions[0];
    EXPECT_TRUE(combine.optional) << opName(c);
    EXPECT_STREQ(combine.when.attr, "kind") << opName(c);
    EXPECT_STREQ(combine.when.value, "\"custom\"") << opName(c);
    for (const SlotRef& ref : combine.args) {
      EXPECT_STREQ(ref.name, "inputs") << opName(c);
      EXPECT_TRUE(ref.elems) << opName(c);
    }
    EXPECT_TRUE(combine.yields.elems) << opName(c);
  }
  using V = std::vector<std::string>;
  EXPECT_EQ(
      ruleTexts(OpCode::Reduce),
      (V{"DropAxis(inputs, reduced, axis)",
         "SameType(Elems(inputs), Elems(reduced)) when kind = \"custom\"",
         "ElemI32(reduced) when kind = \"argmax\"", "ElemI32(reduced) when kind = \"argmin\""}));
  EXPECT_EQ(ruleTexts(OpCode::Scan), (V{"HasAxis(inputs, axis)", "SameType(inputs, scanned)"}));
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

/// A reduce (or scan) of `inputs` along axis 0 of kind `kind`, with results `results` and, when
/// `args` is given, a combine region taking those arguments and yielding `yields` of them (by
/// index).
Op* reduction(Builder& b, OpCode code, const std::vector<Value*>& inputs,
              const std::vector<Type>& results, const std::string& kind,
              const std::vector<Type>* args = nullptr, const std::vector<unsigned>& yields = {}) {
  std::vector<NamedAttr> attrs =
      code == OpCode::Scan
          ? std::vector<NamedAttr>{attr::Scan::make::axis(0), attr::Scan::make::kind(kind)}
          : std::vector<NamedAttr>{attr::Reduce::make::axis(0), attr::Reduce::make::kind(kind)};
  Op* op = b.create(code, inputs, results, attrs);
  if (args) {
    Block* region = op->addRegion();
    for (const Type& t : *args) region->addArg(t);
    std::vector<Value*> ys;
    for (unsigned i : yields) ys.push_back(region->arg(i));
    Builder(region).create(OpCode::Yield, ys, {});
  }
  return op;
}

TEST(OpSignature, VerifierChecksReduceScanAndWhileRegions) {
  const Type f32 = Type::scalar(DType::F32), i32 = Type::scalar(DType::I32);
  const Type tf32 = Type::tensor(DType::F32, {4}), ti32 = Type::tensor(DType::I32, {4});
  const std::vector<Type> ab = {f32, f32};
  auto vals = [](Builder& b, Value* p) { return b.load(b.splat(p, {4})); };
  // Well formed: a custom reduce and scan with their regions, a max without one, an argmax.
  EXPECT_EQ(verifyError([&](Builder& b, Value* p) {
              Value* x = vals(b, p);
              reduction(b, OpCode::Reduce, {x}, {f32}, "custom", &ab, {0});
              reduction(b, OpCode::Scan, {x}, {tf32}, "custom", &ab, {1});
              reduction(b, OpCode::Reduce, {x}, {f32}, "max");
              reduction(b, OpCode::Reduce, {x}, {i32}, "argmax");
            }),
            "");
  // The combine region is there exactly for kind "custom".
  EXPECT_EQ(verifyError([&](Builder& b, Value* p) {
              reduction(b, OpCode::Reduce, {vals(b, p)}, {f32}, "custom");
            }),
            "Tile IR verifier: 'reduce': region 'combine' is missing (Ops.def: OptRegion, present "
            "when kind = \"custom\")");
  EXPECT_EQ(verifyError([&](Builder& b, Value* p) {
              reduction(b, OpCode::Scan, {vals(b, p)}, {tf32}, "sum", &ab, {0});
            }),
            "Tile IR verifier: 'scan': region 'combine' is present, but Ops.def gives it only when "
            "kind = \"custom\" (OptRegion)");
  // Its arguments: a scalar of each input's element type, twice.
  EXPECT_EQ(
      verifyError([&](Builder& b, Value* p) {
        const std::vector<Type> three = {f32, f32, f32};
        reduction(b, OpCode::Reduce, {vals(b, p)}, {f32}, "custom", &three, {0});
      }),
      "Tile IR verifier: 'reduce': region 'combine' has 3 arguments, expected 2 (a scalar per "
      "value of inputs, then a scalar per value of inputs)");
  EXPECT_EQ(verifyError([&](Builder& b, Value* p) {
              const std::vector<Type> tensors = {tf32, tf32};
              reduction(b, OpCode::Reduce, {vals(b, p)}, {f32}, "custom", &tensors, {0});
            }),
            "Tile IR verifier: 'reduce': region 'combine' argument #0 has type tensor<4xfp32>, "
            "expected fp32, the element type of operand #0 (inputs)");
  // What it yields: one per input, of its element type.
  EXPECT_EQ(verifyError([&](Builder& b, Value* p) {
              Value* x = vals(b, p);
              Value* i = b.splat(b.i32(1), {4});
              const std::vector<Type> args = {f32, i32, f32, i32};
              reduction(b, OpCode::Reduce, {x, i}, {f32, i32}, "custom", &args, {1, 0});
            }),
            "Tile IR verifier: 'reduce': region 'combine' yields i32 as value #0, expected fp32, "
            "the element type of operand #0 (inputs)");
  EXPECT_EQ(verifyError([&](Builder& b, Value* p) {
              reduction(b, OpCode::Scan, {vals(b, p)}, {tf32}, "custom", &ab, {0, 1});
            }),
            "Tile IR verifier: 'scan': region 'combine' yields 2 values, expected 1 (a scalar per "
            "value of inputs)");
  // Results: a custom reduce keeps the inputs' element types, a scan their types.
  EXPECT_EQ(verifyError([&](Builder& b, Value* p) {
              reduction(b, OpCode::Reduce, {vals(b, p)}, {i32}, "custom", &ab, {0});
            }),
            "Tile IR verifier: 'reduce': result #0 (reduced) has i32 elements, operand #0 (inputs) "
            "fp32 elements (Ops.def: SameType(Elems(inputs), Elems(reduced)) when kind = "
            "\"custom\")");
  EXPECT_EQ(verifyError([&](Builder& b, Value* p) {
              reduction(b, OpCode::Scan, {vals(b, p)}, {ti32}, "sum");
            }),
            "Tile IR verifier: 'scan': result #0 (scanned) has type tensor<4xi32>, operand #0 "
            "(inputs) type tensor<4xfp32> (Ops.def: SameType(inputs, scanned))");
  // A reduce's results have its inputs' shape less the axis; argmax / argmin give i32.
  EXPECT_EQ(verifyError([&](Builder& b, Value* p) {
              reduction(b, OpCode::Reduce, {vals(b, p)}, {tf32}, "max");
            }),
            "Tile IR verifier: 'reduce': result #0 (reduced) has shape [4], expected []: operand "
            "#0 (inputs) shape [4] less axis 0 (Ops.def: DropAxis(inputs, reduced, axis))");
  EXPECT_EQ(verifyError([&](Builder& b, Value* p) {
              reduction(b, OpCode::Reduce, {vals(b, p)}, {f32}, "argmin");
            }),
            "Tile IR verifier: 'reduce': result #0 (reduced) is fp32, expected i32 elements "
            "(Ops.def: ElemI32(reduced) when kind = \"argmin\")");
  EXPECT_EQ(verifyError([&](Builder& b, Value* p) {
              Value* x = vals(b, p);
              reduction(b, OpCode::Scan, {x, x}, {tf32}, "sum");
            }),
            "Tile IR verifier: 'scan': 1 scanned for 2 inputs (Ops.def: SameType(inputs, "
            "scanned))");
  // while: before(inits...) -> condition(cond, results...); after(results...) -> yield(inits...).
  auto whileLoop = [&](Builder& b, Value* p, const std::vector<Type>& afterArgs, bool swapYield) {
    Value* n = b.i32(4);
    Value* x = b.load(p);
    Op* op = b.create(OpCode::While, {n, x}, {i32, f32});
    Block* before = op->addRegion();
    Block* after = op->addRegion();
    Value* bn = before->addArg(i32);
    Value* bx = before->addArg(f32);
    Builder bb(before);
    Value* go =
        bb.create1(OpCode::Cmp, {bn, n}, Type::scalar(DType::I1), {attr::Cmp::make::pred("lt")});
    bb.create(OpCode::Condition, {go, bn, bx}, {});
    for (const Type& t : afterArgs) after->addArg(t);
    Builder inAfter(after);
    inAfter.create(
        OpCode::Yield,
        {after->arg(swapYield ? 1 : 0), after->arg(afterArgs.size() > 1 && !swapYield ? 1 : 0)},
        {});
  };
  EXPECT_EQ(verifyError([&](Builder& b, Value* p) { whileLoop(b, p, {i32, f32}, false); }), "");
  EXPECT_EQ(
      verifyError([&](Builder& b, Value* p) { whileLoop(b, p, {i32}, false); }),
      "Tile IR verifier: 'while': region 'after' has 1 argument, expected 2 (one per value of "
      "results)");
  EXPECT_EQ(
      verifyError([&](Builder& b, Value* p) {
        whileLoop(b, p, {f32, f32}, false);
      }),
      "Tile IR verifier: 'while': region 'after' argument #0 has type fp32, expected i32, the "
      "type of result #0 (results)");
  EXPECT_EQ(verifyError([&](Builder& b, Value* p) {
              whileLoop(b, p, {i32, f32}, true);
            }),
            "Tile IR verifier: 'while': region 'after' yields fp32 as value #0, expected i32, the "
            "type of operand #0 (inits)");
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
