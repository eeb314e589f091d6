// Moves loop-invariant shape ops and scalar arithmetic out of for loops, as Triton's loop-invariant
// code motion does on its IR. The case that matters: a row statistic loaded before a loop and
// broadcast against the loop's tiles inside it (`qk - m`, `dp - Di[:, None]` in attention's
// backward pass). Left in the loop, its expand_dims / broadcast are where the layout pass puts
// the conversion to the tile's layout, through shared memory with two CTA barriers, in every
// iteration; before the loop they and their conversion run once.
//
// First, a value a loop carries but never changes (its body yields the argument it got, as
// for a variable assigned only in a branch a constexpr ruled out) is the value it entered with:
// uses of the argument and of the loop's result read that instead, and the loop stops carrying
// it. Left carried, what is computed from it varies with the loop for every later pass (the
// layout pass cannot recompute a mask of `offs_m[None, :] < n` in the tile's layout, and
// converts it through shared memory in each iteration instead).
//
// Only ops that hold no more registers across the loop than their operands do are moved: shape
// ops of tensors (broadcast, expand_dims, reshape, permute: the same elements, renamed) and value
// hints. Splats, constants, aranges, scalar and elementwise arithmetic stay where they are:
// recomputed in each iteration they cost a few instructions, held across the loop registers
// (the 32-warp layer-norm backward, with 64 registers a thread, spilled when scalars moved).
#include "ir/OpTraits.h"
#include "transforms/Passes.h"

#include <unordered_set>
#include <utility>

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

/// Forwards the carried values of for loop `loop` that its body yields unchanged (see the top)
/// and drops them from the loop; returns the loop (rebuilt where any was dropped) and how many.
std::pair<Op*, int> forwardUnchangedCarries(Block& root, Op* loop) {
  int n = 0;
  for (unsigned k = 0; k < loop->numResults();) {
    Block& body = *loop->region(0);
    ir::Value* arg = body.arg(k + 1);
    if (body.terminator()->operand(k) != arg) {
      ++k;
      continue;
    }
    ir::Value* init = loop->operand(3 + k);
    ir::replaceAllUses(body, arg, init);
    ir::replaceAllUses(root, loop->result(k), init);
    loop = ir::dropCarriedValue(root, *loop, k);
    ++n;
  }
  return {loop, n};
}

int hoistIn(Block& root, Block& block) {
  int n = 0;
  for (size_t i = 0; i < block.ops().size(); ++i) {
    Op* op = block.ops()[i].get();
    if (op->code() == OpCode::For) {
      auto [rebuilt, forwarded] = forwardUnchangedCarries(root, op);
      op = rebuilt;
      n += forwarded;
    }
    for (unsigned r = 0; r < op->numRegions(); ++r) n += hoistIn(root, *op->region(r));
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
  int n = hoistIn(fn.body, fn.body);
  if (n) verify(fn);
  return n;
}

} // namespace ww::transforms
