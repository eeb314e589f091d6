// Folds `x + tl.dot(a, b)` into `tl.dot(a, b, x)`, as Triton's combine pass does: the sum is then
// the MMA's own accumulation (wgmma / mma.sync add into their C registers), with no separate
// add and no second accumulator-sized tensor alive beside the first. The attention backward
// (`dv += tl.dot(p, do)`) kept both: 128 extra fp32 adds per iteration and 4 KB of spills.
#include "ir/OpAttrs.h"
#include "transforms/Passes.h"

#include <unordered_map>

namespace ww::transforms {

using ir::Op;
using ir::OpCode;
using ir::Value;

namespace {

/// The dot whose result is `v`, when `v` has that one use and the dot adds nothing else to its
/// product (a +0 accumulator, full-precision accumulation).
Op* foldableDot(Value* v, const std::unordered_map<const Value*, int>& uses) {
  Op* dot = v->def();
  if (!dot || dot->code() != OpCode::Dot) return nullptr;
  if (auto it = uses.find(v); it == uses.end() || it->second != 1) return nullptr;
  if (!ir::isPositiveZeroConstant(dot->operand(2))) return nullptr;
  // fp8 MMAs that accumulate in reduced precision between promotions keep their own sum.
  if (ir::attr::Dot::maxNumImpreciseAcc(*dot) != 0) return nullptr;
  return dot;
}

int combineIn(ir::Block& block, ir::Block& root,
              const std::unordered_map<const Value*, int>& uses) {
  int combined = 0;
  auto& ops = block.ops();
  for (size_t i = 0; i < ops.size(); ++i) {
    Op& op = *ops[i];
    for (unsigned r = 0; r < op.numRegions(); ++r) combined += combineIn(*op.region(r), root, uses);
    if (op.code() != OpCode::Add || op.numOperands() != 2) continue;
    for (unsigned side = 0; side < 2; ++side) {
      Op* dot = foldableDot(op.operand(side), uses);
      Value* other = op.operand(1 - side);
      if (!dot || dot->parentBlock() != &block || other->type() != op.result()->type() ||
          dot->result()->type() != op.result()->type())
        continue;
      // The dot moves down to the add, where `other` is defined; its own operands were defined
      // before it, so they still are.
      size_t at = ir::positionOf(block, dot);
      std::unique_ptr<Op> moved = std::move(ops[at]);
      ops.erase(ops.begin() + static_cast<std::ptrdiff_t>(at));
      --i; // the add moved up by one
      moved->setOperand(2, other);
      Value* sum = moved->result();
      ops.insert(ops.begin() + static_cast<std::ptrdiff_t>(i), std::move(moved));
      ++i;
      // The add's users take the dot's result; the add is left unused for DCE.
      ir::replaceAllUses(root, op.result(), sum);
      ++combined;
      break;
    }
  }
  return combined;
}

} // namespace

int combineDotAdd(ir::Function& fn) {
  std::unordered_map<const Value*, int> uses;
  ir::walk(fn.body, [&](Op& op) {
    for (const Value* v : op.operands()) ++uses[v];
  });
  int combined = combineIn(fn.body, fn.body, uses);
  if (combined) eliminateDeadCode(fn);
  return combined;
}

} // namespace ww::transforms
