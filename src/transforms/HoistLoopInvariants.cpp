// Moves loop-invariant shape ops and scalar arithmetic out of for loops, as Triton's loop-invariant
// code motion does on its IR. The case that matters: a row statistic loaded before a loop and
// broadcast against the loop's tiles inside it (`qk - m`, `dp - Di[:, None]` in attention's
// backward pass). Left in the loop, its expand_dims / broadcast are where the layout pass puts
// the conversion to the tile's layout, through shared memory with two CTA barriers, in every
// iteration; before the loop they and their conversion run once.
//
// Only ops that hold no more registers across the loop than their operands do are moved: shape
// ops of tensors (broadcast, expand_dims, reshape, permute: the same elements, renamed) and value
// hints. Splats, constants, aranges, scalar and elementwise arithmetic stay where they are:
// recomputed in each iteration they cost a few instructions, held across the loop registers
// (the 32-warp layer-norm backward, with 64 registers a thread, spilled when scalars moved).
#include "ir/OpTraits.h"
#include "transforms/Passes.h"

#include <unordered_set>

namespace ww::transforms {

using ir::Block;
using ir::Op;
using ir::OpCode;

namespace {

bool cheapToHold(const Op& op) {
  switch (op.code()) {
  case OpCode::Broadcast:
  case OpCode::ExpandDims:
  case OpCode::Reshape:
  case OpCode::Permute:
    return true;
  default:
    break;
  }
  return ir::isValueHint(op.code());
}

/// Hoists from the body of `loop` (which sits in `outer`) every op whose operands are all
/// defined outside it; returns how many moved.
int hoistFrom(Op& loop, Block& outer) {
  Block& body = *loop.region(0);
  // Values of the body (its arguments, then the results of ops that stay).
  std::unordered_set<const ir::Value*> variant;
  for (unsigned a = 0; a < body.numArgs(); ++a) variant.insert(body.arg(a));
  Block hoisted;
  auto& ops = body.ops();
  for (size_t i = 0; i < ops.size();) {
    Op& op = *ops[i];
    bool invariant =
        op.numRegions() == 0 && !ir::isTerminator(op.code()) && isPure(op) && cheapToHold(op);
    for (const ir::Value* v : op.operands()) invariant = invariant && !variant.count(v);
    if (!invariant) {
      for (unsigned r = 0; r < op.numResults(); ++r) variant.insert(op.result(r));
      // Values defined in nested regions are never read outside them.
      ++i;
      continue;
    }
    hoisted.ops().push_back(std::move(ops[i]));
    hoisted.ops().back()->setParentBlock(&hoisted);
    ops.erase(ops.begin() + static_cast<std::ptrdiff_t>(i));
  }
  int n = static_cast<int>(hoisted.ops().size());
  if (n) ir::spliceOps(hoisted, outer, ir::positionOf(outer, &loop));
  return n;
}

int hoistIn(Block& block) {
  int n = 0;
  for (size_t i = 0; i < block.ops().size(); ++i) {
    Op* op = block.ops()[i].get();
    for (unsigned r = 0; r < op->numRegions(); ++r) n += hoistIn(*op->region(r));
    if (op->code() == OpCode::For) {
      int moved = hoistFrom(*op, block);
      n += moved;
      i += static_cast<size_t>(moved); // the loop moved down by as many ops
    }
  }
  return n;
}

} // namespace

int hoistLoopInvariants(ir::Function& fn) {
  int n = hoistIn(fn.body);
  if (n) verify(fn);
  return n;
}

} // namespace ww::transforms
