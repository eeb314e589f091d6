// Compile-time checks of the traits column of Ops.def (one static_assert per op, naming it), and
// the messages shared by the stages that read the traits.
#include "ir/OpTraits.h"

namespace ww::ir {

namespace {

using namespace trait;

constexpr Traits kEffects = ReadsMemory | WritesMemory | Synchronizing | SideEffects;
constexpr Traits kStatesEffects =
    Pure | PureIfBodyPure | PureIfMarked | kEffects | HasRegions | Terminator;

constexpr bool implies(Traits t, Traits ifAll, Traits thenAll) {
  return (t & ifAll) != ifAll || (t & thenAll) == thenAll;
}

/// Why an op's traits are inconsistent, or null when they are not.
constexpr const char* inconsistency(Traits t) {
  if (!(t & kStatesEffects))
    return "states none of Pure, PureIf*, a memory / synchronizing / side effect, HasRegions or "
           "Terminator";
  if ((t & Pure) && (t & (kEffects | PureIfBodyPure | PureIfMarked | AgentBarrier)))
    return "is Pure and has an effect";
  for (Traits sub : {BinaryArith, UnaryMath, ValueHint})
    if (!implies(t, sub, Elementwise | Pure)) return "is arithmetic or a hint but not Elementwise";
  if ((t & BinaryArith) && (t & UnaryMath)) return "is both binary and unary";
  if (!implies(t, Elementwise, Pure) || !implies(t, ShapeOp, Pure) || !implies(t, BufferView, Pure))
    return "moves values or views but is not Pure";
  if ((t & SharedBuffers) && !(t & (ReadsMemory | WritesMemory | Synchronizing)))
    return "accesses shared buffers without a memory or synchronizing effect";
  if ((t & AgentBarrier) && !(t & (kEffects))) return "lowers with a barrier but has no effect";
  if ((t & PureIfBodyPure) && !(t & HasRegions)) return "has no body to be pure with";
  return nullptr;
}

#define OP(name, str, traits)                                                                      \
  static_assert(inconsistency(detail::kOpTraits[static_cast<size_t>(OpCode::name)]) == nullptr,    \
                "Ops.def: the traits of " #name " are inconsistent (see ir/OpTraits.cpp)");
#include "ir/Ops.def"
#undef OP

} // namespace

std::string remoteStoreWithoutClusterMessage(const Op& op) {
  return std::string("tlx.") + op.name() +
         " needs a cluster launch: launch with ctas_per_cga=(n, 1, 1), n >= 2, or another shape "
         "of 2 or more CTAs (the GPU refuses distributed shared memory stores outside a cluster, "
         "even into the CTA's own shared memory, which tlx.local_store writes)";
}

int64_t tmaOffsetMultiple(DType elem) {
  return 128 / bitWidth(elem);
}

std::string tmaCopyName(const Op& op) {
  switch (op.code()) {
  case OpCode::AsyncDescLoad:
    return "tlx.async_descriptor_load";
  case OpCode::AsyncDescStore:
    return "tlx.async_descriptor_store";
  case OpCode::DescStore:
    return "desc.store";
  default:
    return "desc.load";
  }
}

} // namespace ww::ir
