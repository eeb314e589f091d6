// Which ops have side effects: the one table fold, CSE and DCE consult.
#include "ir/OpAttrs.h"
#include "ir/OpTraits.h"
#include "transforms/Passes.h"

namespace ww::transforms {

using ir::OpCode;

bool isPure(const ir::Op& op) {
  OpCode c = op.code();
  if (ir::isElementwise(c) || ir::isShapeOp(c) || ir::isBufferView(c)) return true;
  switch (c) {
  case OpCode::Constant:
  case OpCode::ProgramId:
  case OpCode::NumPrograms:
  case OpCode::Arange:
  case OpCode::Dot:
  case OpCode::ReplicaId:
  case OpCode::ThreadId:
  case OpCode::ClusterCtaRank:
  case OpCode::ClusterSize:
  case OpCode::MakeDescriptor: // only describes memory; the accesses through it are the effects
    return true;
  case OpCode::InlineAsm:
    return ir::attr::InlineAsm::pure(op);
  case OpCode::Reduce:
  case OpCode::Scan:
    // Pure when the combine region is (it only ever holds arithmetic and a yield).
    for (unsigned r = 0; r < op.numRegions(); ++r)
      for (const auto& inner : op.region(r)->ops())
        if (inner->code() != OpCode::Yield && !isPure(*inner)) return false;
    return true;
  default:
    return false;
  }
}

} // namespace ww::transforms
