// Applies tl.range(..., loop_unroll_factor=U): a run-time loop becomes a loop whose body is U
// copies of the original (the induction variable advanced by one step in each), followed by the
// original loop over the iterations left (fewer than U), so any trip count stays exact.
#include "ir/Builder.h"
#include "ir/Limits.h"
#include "ir/OpAttrs.h"
#include "transforms/Passes.h"

#include <unordered_map>

namespace ww::transforms {

using ir::Block;
using ir::Op;
using ir::OpCode;
using ir::Value;

namespace {

using ValueMap = std::unordered_map<const Value*, Value*>;

/// Unrolls `loop` (a For with attribute unroll = factor >= 2) in place: the unrolled loop is
/// inserted before it, and `loop` itself, starting where the unrolled one stops and carrying its
/// results, takes the remainder.
void unroll(Op& loop, int64_t factor) {
  Block& outer = *loop.parentBlock();
  Block& body = *loop.region(0);
  Value* lb = loop.operand(0);
  Value* ub = loop.operand(1);
  Value* step = loop.operand(2);
  const ir::Type ivType = lb->type();

  // main_ub = lb + (ub - lb) / (step * U) * (step * U): the unrolled loop runs every whole group
  // of U iterations (none when ub <= lb, as the truncating division leaves main_ub >= ub then).
  Block pre;
  ir::Builder b(&pre);
  b.setLoc(loop.loc());
  Value* stride = b.binary(OpCode::Mul, step, b.constInt(factor, ivType));
  Value* span = b.binary(OpCode::Sub, ub, lb);
  Value* whole = b.binary(OpCode::Mul, b.binary(OpCode::Div, span, stride), stride);
  Value* mainUb = b.binary(OpCode::Add, lb, whole);

  std::vector<Value*> operands{lb, mainUb, stride};
  std::vector<ir::Type> types;
  for (unsigned i = 3; i < loop.numOperands(); ++i) {
    operands.push_back(loop.operand(i));
    types.push_back(loop.operand(i)->type());
  }
  std::vector<ir::NamedAttr> attrs;
  for (const ir::NamedAttr& a : loop.attrs())
    if (a.name != "unroll") attrs.push_back(a);
  Op* unrolled = b.create(OpCode::For, operands, types, attrs);
  Block* copyBody = unrolled->addRegion();
  Value* iv = copyBody->addArg(body.arg(0)->type(), body.arg(0)->name);
  std::vector<Value*> carried;
  for (unsigned i = 1; i < body.numArgs(); ++i)
    carried.push_back(copyBody->addArg(body.arg(i)->type(), body.arg(i)->name));

  b.setInsertionBlock(copyBody);
  for (int64_t copy = 0; copy < factor; ++copy) {
    ValueMap map;
    map[body.arg(0)] = copy == 0 ? iv
                                 : b.binary(OpCode::Add, iv,
                                            b.binary(OpCode::Mul, step, b.constInt(copy, ivType)));
    for (unsigned i = 1; i < body.numArgs(); ++i) map[body.arg(i)] = carried[i - 1];
    const Op* yield = body.terminator();
    for (const auto& op : body.ops())
      if (op.get() != yield) ir::cloneOp(b, *op, map);
    // The next copy starts from this one's yielded values.
    for (unsigned i = 0; i < yield->numOperands(); ++i) {
      auto it = map.find(yield->operand(i));
      carried[i] = it == map.end() ? yield->operand(i) : it->second;
    }
  }
  b.create(OpCode::Yield, carried, {});

  // The original loop takes the remainder, from main_ub, starting from the unrolled results.
  loop.setOperand(0, mainUb);
  for (unsigned i = 3; i < loop.numOperands(); ++i) loop.setOperand(i, unrolled->result(i - 3));
  ir::attr::For::set::unroll(loop, 1);
  ir::spliceOps(pre, outer, ir::positionOf(outer, &loop));
}

} // namespace

int unrollLoops(ir::Function& fn) {
  std::vector<std::pair<Op*, int64_t>> loops;
  ir::walk(fn.body, [&](Op& op) {
    if (op.code() == OpCode::For && ir::attr::For::unroll(op) >= 2)
      loops.push_back({&op, ir::attr::For::unroll(op)});
  });
  auto countOps = [](Block& block) {
    int64_t n = 0;
    ir::walk(block, [&](Op&) { ++n; });
    return n;
  };
  int64_t total = countOps(fn.body);
  // Inner loops first: an outer loop's copies then hold the inner loops already unrolled.
  for (auto it = loops.rbegin(); it != loops.rend(); ++it) {
    // Nested factors multiply: the kernel's size is checked before each loop's copies exist.
    int64_t body = countOps(*it->first->region(0));
    if (body > (ir::kMaxKernelOps - total) / it->second)
      raiseError(it->first->loc(),
                 "loop_unroll_factor=" + std::to_string(it->second) + " copies a body of " +
                     std::to_string(body) + " Tile IR ops (inner loops unrolled): the kernel " +
                     "would pass " + std::to_string(ir::kMaxKernelOps) + " ops; unroll less");
    unroll(*it->first, it->second);
    total += body * it->second;
  }
  return static_cast<int>(loops.size());
}

} // namespace ww::transforms
