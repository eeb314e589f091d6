// The OPERANDS / RESULTS lines of Ops.def as ir/OpSignature.h exposes them: representative
// signatures, the verifier's count and kind checks on IR built in C++, and the shared buffers the
// Written marks name for the shared-memory barrier pass.
#include "ir/Builder.h"
#include "ir/OpSignature.h"
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

TEST(OpSignature, WrittenSharedBufferIsTheMarkedOperand) {
  // What the shared-memory barrier pass listed by hand before the Written marks.
  std::map<OpCode, unsigned> written = {{OpCode::AsyncLoad, 1},     {OpCode::AsyncDescLoad, 1},
                                        {OpCode::AsyncBulkLoad, 1}, {OpCode::LocalStore, 0},
                                        {OpCode::LocalScatter, 0},  {OpCode::AsyncRemoteStore, 0},
                                        {OpCode::RemoteStore, 0},   {OpCode::AsyncRemoteCopy, 0}};
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
