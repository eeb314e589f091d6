// The traits column of Ops.def as ir/OpTraits.h exposes it (representative ops and whole families,
// so a change of an op's traits is a visible decision), purity as the passes read it, and
// attribute reads checked per op (ir::Op::attr and the typed accessors).
#include "ir/Builder.h"
#include "ir/OpAttrs.h"
#include "ir/OpTraits.h"
#include "transforms/Passes.h"

#include <gtest/gtest.h>

#include <set>

using namespace ww::ir;

namespace {

// The table is constexpr: stages may use it in constant expressions.
static_assert(isBinaryArithmetic(OpCode::Add) && isElementwise(OpCode::Add));
static_assert(!isElementwise(OpCode::Load) && lowersWithAgentBarrier(OpCode::DebugBarrier));

/// Every opcode that has all of `t`.
std::set<OpCode> opsWith(Traits t) {
  std::set<OpCode> out;
  for (size_t i = 0; i < kNumOpCodes; ++i)
    if (hasTraits(OpCode(i), t)) out.insert(OpCode(i));
  return out;
}

std::string names(const std::set<OpCode>& ops) {
  std::string out;
  for (OpCode c : ops) out += std::string(out.empty() ? "" : " ") + opName(c);
  return out;
}

TEST(OpTraits, LoadReadsMemoryAndIsNotPure) {
  EXPECT_TRUE(hasTraits(OpCode::Load, trait::ReadsMemory));
  EXPECT_FALSE(hasTraits(OpCode::Load, trait::WritesMemory));
  EXPECT_FALSE(hasTraits(OpCode::Load, trait::Pure));
  EXPECT_FALSE(isElementwise(OpCode::Load));
  EXPECT_TRUE(hasTraits(OpCode::Store, trait::WritesMemory));
  EXPECT_FALSE(hasTraits(OpCode::Store, trait::ReadsMemory));
  EXPECT_TRUE(hasTraits(OpCode::AtomicRMW, trait::ReadsMemory | trait::WritesMemory));
  EXPECT_TRUE(hasTraits(OpCode::LocalLoad, trait::ReadsMemory | trait::SharedBuffers));
  EXPECT_TRUE(hasTraits(OpCode::AsyncRemoteStore, trait::WritesMemory | trait::SharedBuffers));
}

TEST(OpTraits, AddIsPureElementwiseBinaryArithmetic) {
  EXPECT_TRUE(hasTraits(OpCode::Add, trait::Pure | trait::Elementwise | trait::BinaryArith));
  EXPECT_FALSE(isUnaryMath(OpCode::Add));
  EXPECT_TRUE(hasTraits(OpCode::Exp, trait::Pure | trait::Elementwise | trait::UnaryMath));
  EXPECT_FALSE(isBinaryArithmetic(OpCode::Exp));
  // Elementwise but neither binary nor unary arithmetic.
  for (OpCode c : {OpCode::Cmp, OpCode::Select, OpCode::Fma, OpCode::Cast, OpCode::AddPtr}) {
    EXPECT_TRUE(isElementwise(c)) << opName(c);
    EXPECT_FALSE(isBinaryArithmetic(c) || isUnaryMath(c)) << opName(c);
  }
  EXPECT_TRUE(isValueHint(OpCode::MultipleOf) && isElementwise(OpCode::MultipleOf));
  EXPECT_TRUE(isShapeOp(OpCode::Broadcast) && hasTraits(OpCode::Broadcast, trait::Pure));
  EXPECT_TRUE(isBufferView(OpCode::LocalTrans) && hasTraits(OpCode::LocalTrans, trait::Pure));
}

TEST(OpTraits, BarrierOpsSynchronize) {
  for (OpCode c : {OpCode::DebugBarrier, OpCode::ClusterBarrier, OpCode::BarrierArrive,
                   OpCode::AsyncWaitGroup, OpCode::AsyncDescStoreWait}) {
    EXPECT_TRUE(hasTraits(c, trait::Synchronizing)) << opName(c);
    EXPECT_TRUE(lowersWithAgentBarrier(c)) << opName(c);
    EXPECT_FALSE(hasTraits(c, trait::Pure)) << opName(c);
  }
  // Waits of one thread or warp group, not of the agent.
  for (OpCode c :
       {OpCode::BarrierWait, OpCode::NamedBarrierWait, OpCode::AsyncDotWait, OpCode::Fence}) {
    EXPECT_TRUE(hasTraits(c, trait::Synchronizing)) << opName(c);
    EXPECT_FALSE(lowersWithAgentBarrier(c)) << opName(c);
  }
}

TEST(OpTraits, RegionsAndTerminators) {
  EXPECT_EQ(names(opsWith(trait::HasRegions)),
            "reduce scan map_elementwise for if while async_tasks async_task");
  EXPECT_EQ(names(opsWith(trait::Terminator)), "yield condition return");
  EXPECT_TRUE(isTerminator(OpCode::Yield));
  EXPECT_FALSE(isTerminator(OpCode::Add));
}

// The families as whole sets: the interpreter, codegen and the barrier pass all rely on them.
TEST(OpTraits, FamiliesAreTheDocumentedOnes) {
  EXPECT_EQ(names(opsWith(trait::BinaryArith)),
            "add sub mul div rem floordiv and or xor shl shr max min pow");
  EXPECT_EQ(names(opsWith(trait::UnaryMath)),
            "neg not exp exp2 log log2 sqrt rsqrt abs sin cos tanh erf floor ceil sigmoid");
  EXPECT_EQ(names(opsWith(trait::ShapeOp)),
            "splat broadcast expand_dims reshape permute join split cat");
  EXPECT_EQ(names(opsWith(trait::BufferView)),
            "local_view local_trans local_slice local_reinterpret");
  EXPECT_EQ(names(opsWith(trait::AgentBarrier)),
            "desc_load desc_store debug_barrier local_store local_scatter alloc_barriers "
            "barrier_arrive cluster_barrier async_desc_store async_desc_store_wait "
            "async_wait_group async_bulk_store async_remote_shmem_store remote_shmem_store "
            "async_remote_shmem_copy");
}

TEST(OpTraits, EveryOpStatesItsEffectsAndPureOpsHaveNone) {
  const Traits effects =
      trait::ReadsMemory | trait::WritesMemory | trait::Synchronizing | trait::SideEffects;
  for (size_t i = 0; i < kNumOpCodes; ++i) {
    Traits t = traitsOf(OpCode(i));
    EXPECT_NE(t & (trait::Pure | trait::PureIfBodyPure | trait::PureIfMarked | effects |
                   trait::HasRegions | trait::Terminator),
              0u)
        << opName(OpCode(i));
    if (t & trait::Pure) {
      EXPECT_EQ(t & effects, 0u) << opName(OpCode(i));
    }
  }
}

TEST(OpTraits, PurityFollowsTheTable) {
  Function fn;
  Builder b(&fn.body);
  Value* p = fn.body.addArg(Type::ptr(DType::F32), "p");
  Value* x = b.load(p);
  Value* sum = b.binary(OpCode::Add, x, x);
  EXPECT_FALSE(ww::transforms::isPure(*x->def()));
  EXPECT_TRUE(ww::transforms::isPure(*sum->def()));

  // Inline asm: pure when marked so.
  Op* asmOp = b.create(OpCode::InlineAsm, {x}, {x->type()},
                       {{attr::InlineAsm::kasmText, std::string("mov.b32 $0, $1;")},
                        {attr::InlineAsm::kconstraints, std::string("=r,r")}});
  EXPECT_FALSE(ww::transforms::isPure(*asmOp));
  asmOp->setAttr(attr::InlineAsm::kpure, int64_t(1));
  EXPECT_TRUE(ww::transforms::isPure(*asmOp));

  // Reduce: pure when its combine region is.
  Value* t = b.splat(x, {4});
  Op* red = b.create(OpCode::Reduce, {t}, {Type::scalar(DType::F32)},
                     {{attr::Reduce::kaxis, int64_t(0)}, {attr::Reduce::kkind, "custom"}});
  Block* body = red->addRegion();
  Value* l = body->addArg(Type::scalar(DType::F32));
  Value* r = body->addArg(Type::scalar(DType::F32));
  Builder rb(body);
  Value* m = rb.binary(OpCode::Max, l, r);
  rb.create(OpCode::Yield, {m}, {});
  EXPECT_TRUE(ww::transforms::isPure(*red));
  body->ops().pop_back(); // the yield, replaced by an op with an effect
  rb.create(OpCode::Print, {m}, {});
  EXPECT_FALSE(ww::transforms::isPure(*red));
}

TEST(OpAttrLookups, AreCheckedAgainstTheOpsOwnDeclarations) {
  Op load(OpCode::Load, {});
  load.setAttr(attr::Load::khasMask, int64_t(1));
  EXPECT_EQ(load.intAttr("has_mask"), 1);
  EXPECT_TRUE(attr::Load::hasMask(load));
  EXPECT_FALSE(load.hasAttr("volatile"));

  // A name other ops declare is not readable on an op that does not.
  try {
    (void)load.strAttr("pred");
    FAIL() << "reading 'pred' on a load did not throw";
  } catch (const std::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("attribute 'pred' is not declared for 'load'"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("'cmp'"), std::string::npos) << e.what();
  }
  // The typed accessor of another op reads its name on this op: checked the same way.
  Op add(OpCode::Add, {});
  EXPECT_THROW((void)attr::Max::propagateNan(add), std::logic_error);
  EXPECT_FALSE(propagatesNan(add)); // asks max / min only
  // A name no op declares.
  try {
    (void)load.intAttr("has_maks");
    FAIL() << "reading a misspelled name did not throw";
  } catch (const std::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown attribute 'has_maks'"), std::string::npos)
        << e.what();
  }
}

TEST(OpAttrLookups, UndeclaredMessagesNameTheDeclaringOps) {
  EXPECT_EQ(undeclaredAttrMessage(OpCode::Add, "propagate_nan"),
            "attribute 'propagate_nan' is not declared for 'add' (Ops.def declares it for "
            "'max', 'min'; for 'add': none)");
  EXPECT_EQ(undeclaredAttrMessage(OpCode::Cmp, "bogus"),
            "unknown attribute 'bogus' (Ops.def declares pred)");
}

} // namespace
