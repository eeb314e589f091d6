// Lowering of tlx.vote_ballot_sync: each thread of the warp contributes its predicate and gets
// the warp's ballot (bit i set when lane i's predicate holds), over the lanes in `mask`.
#include "codegen/Lowering.h"

namespace ww::codegen {

void FunctionLowering::lowerVoteBallot(const ir::Op& op) {
  if (!op.operand(1)->type().isScalar())
    raiseError(op.loc(), "tlx.vote_ballot_sync needs a per-thread scalar predicate (e.g. from "
                         "tlx.thread_id); a tensor's elements are spread over threads, so which "
                         "element a lane votes with is not defined: reduce the tensor first");
  std::string mask = b_.materialize(operand(op, 0).at(0), RegClass::B32);
  std::string pred = b_.materialize(operand(op, 1).at(0), RegClass::Pred);
  std::string ballot = b_.newReg(RegClass::B32);
  // Not a pure instruction: it synchronizes the lanes in the mask, so it stays where it is.
  b_.inst("vote.sync.ballot.b32", {ballot, pred, mask});
  bind(op.result(), {ballot});
}

} // namespace ww::codegen
