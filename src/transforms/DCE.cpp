// Dead-code elimination: removes ops whose results are unused and that have no side effects.
#include "ir/OpAttrs.h"
#include "ir/OpTraits.h"
#include "transforms/Passes.h"

#include <unordered_map>

namespace ww::transforms {

using ir::Op;
using ir::OpCode;

namespace {

/// Unused results of these can go: pure ops, reads whose only effect is their result, and
/// buffers nothing uses (their only effect is the memory they take, as MLIR counts an
/// allocation's effect on its own result; Triton drops an unused local_alloc so).
bool removableWhenUnused(const Op& op) {
  if (isPure(op)) return true;
  switch (op.code()) {
  case OpCode::Load:
    return !ir::attr::Load::isVolatile(op);
  case OpCode::LocalLoad:
  case OpCode::LocalGather:
  case OpCode::DescLoad:
  case OpCode::LocalAlloc:
    return true;
  default:
    return false;
  }
}

void countUses(ir::Block& block, std::unordered_map<const ir::Value*, int>& uses) {
  ir::walk(block, [&](Op& op) {
    for (const ir::Value* v : op.operands()) ++uses[v];
  });
}

bool sweep(ir::Block& block, std::unordered_map<const ir::Value*, int>& uses) {
  bool changed = false;
  auto& ops = block.ops();
  for (size_t i = ops.size(); i-- > 0;) {
    Op& op = *ops[i];
    for (unsigned r = 0; r < op.numRegions(); ++r) changed |= sweep(*op.region(r), uses);
    if (op.numResults() == 0 || !removableWhenUnused(op)) continue;
    // A hint whose result is unused still describes its operand while anything else uses it
    // (layout/AxisInfo.cpp applies it to the operand, as Triton's hints annotate the value).
    if (ir::isValueHint(op.code()) && op.numOperands() == 1 && uses[op.operand(0)] > 1) continue;
    bool dead = true;
    for (unsigned r = 0; r < op.numResults(); ++r)
      if (uses[op.result(r)] > 0) dead = false;
    if (!dead) continue;
    for (const ir::Value* v : op.operands()) --uses[v];
    ops.erase(ops.begin() + static_cast<long>(i));
    changed = true;
  }
  return changed;
}

} // namespace

void eliminateDeadCode(ir::Function& fn) {
  std::unordered_map<const ir::Value*, int> uses;
  countUses(fn.body, uses);
  while (sweep(fn.body, uses)) {
  }
}

} // namespace ww::transforms
