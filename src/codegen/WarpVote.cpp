// Lowering of tlx.vote_ballot_sync: each thread of the warp contributes its predicate and gets
// the warp's ballot (bit i set when lane i's predicate holds), over the lanes in `mask`. With a
// tensor predicate (TLX's rule) a thread votes with the OR of the elements it holds and every one
// of them gets the ballot: the result lies as the predicate does (LayoutAssignment.cpp).
#include "codegen/Lowering.h"

#include <stdexcept>

namespace ww::codegen {

void FunctionLowering::lowerVoteBallot(const ir::Op& op) {
  std::string mask = b_.materialize(operand(op, 0).at(0), RegClass::B32);
  const Regs preds = operand(op, 1);
  if (preds.empty()) throw std::logic_error("codegen: a vote without a predicate");
  std::string pred = b_.materialize(preds[0], RegClass::Pred);
  for (size_t i = 1; i < preds.size(); ++i)
    pred = b_.pure("or.pred", RegClass::Pred, {pred, b_.materialize(preds[i], RegClass::Pred)});
  std::string ballot = b_.newReg(RegClass::B32);
  // Not a pure instruction: it synchronizes the lanes in the mask, so it stays where it is.
  b_.inst("vote.sync.ballot.b32", {ballot, pred, mask});
  bind(op.result(), Regs(op.result()->type().isTensor() ? preds.size() : 1, ballot));
}

} // namespace ww::codegen
