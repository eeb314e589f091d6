// Loops that advance a tensor of pointers by a loop-invariant step (`a_ptrs += BLOCK_K *
// stride_ak`) carry one scalar offset instead: each iteration computes its addresses as
// `p0 + offset` into fresh registers, and only the offset is updated in place.
//
// Why: carried in place, the pointers are rewritten right after the iteration's loads issue, and
// a load (cp.async above all) reads its address registers late, so each rewrite waits for the
// copy to take its operands (ncu: "wait" stalls on the pointer increments, a fifth of the
// samples of the pipelined GEMM's K loop). Triton's loops compute their addresses from a carried
// offset too (LLVM's loop strength reduction leaves them in that form).
#include "ir/Builder.h"
#include "transforms/Passes.h"

namespace ww::transforms {

using ir::Block;
using ir::DType;
using ir::Op;
using ir::OpCode;
using ir::Type;
using ir::Value;

namespace {

/// True when `v` is defined outside `body` (an outer value, or a kernel argument).
bool definedOutside(const Value* v, const Block& body) {
  const Block* b = v->isBlockArg() ? v->ownerBlock() : v->def()->parentBlock();
  for (; b; b = b->parentOp() ? b->parentOp()->parentBlock() : nullptr)
    if (b == &body) return false;
  return true;
}

/// The scalar step (elements) of `step`, a loop-invariant splat of a scalar or a splat
/// constant, built as an i64 by `b`; null when `step` is neither.
Value* scalarStep(ir::Builder& b, Value* step, const Block& body) {
  if (!definedOutside(step, body) || !step->def()) return nullptr;
  const Op& def = *step->def();
  Type i64 = Type::scalar(DType::I64);
  if (def.code() == OpCode::Splat && ir::isInt(def.operand(0)->type().elem)) {
    Value* x = def.operand(0);
    return x->type().elem == DType::I64 ? x : b.create1(OpCode::Cast, {x}, i64);
  }
  if (def.code() == OpCode::Constant && ir::isInt(step->type().elem)) {
    const ir::Attr* value = def.attr("value");
    if (const auto* v = value ? std::get_if<int64_t>(value) : nullptr) return b.constInt(*v, i64);
  }
  return nullptr;
}

/// Rewrites the carried values of `loop` (in `outer`) that qualify; returns how many.
int rewriteLoop(Op& loop, Block& outer) {
  Block& body = *loop.region(0);
  Op* yield = body.terminator();
  if (!yield || yield->code() != OpCode::Yield) return 0;
  int n = 0;
  unsigned numIters = loop.numOperands() - 3;
  for (unsigned i = 0; i < numIters && i < yield->numOperands(); ++i) {
    Value* arg = body.arg(i + 1);
    const Type pointers = arg->type();
    if (!pointers.isTensor() || !pointers.pointer) continue;
    Value* next = yield->operand(i);
    if (!next->def() || next->def()->code() != OpCode::AddPtr || next->def()->operand(0) != arg ||
        next->def()->parentBlock() != &body)
      continue;
    // Before the loop: the i64 step and a zero offset.
    Block before;
    ir::Builder pre(&before);
    pre.setLoc(loop.loc());
    Value* step = scalarStep(pre, next->def()->operand(1), body);
    if (!step) continue;
    Value* p0 = loop.operand(3 + i);
    Type i64 = Type::scalar(DType::I64);
    Value* zero = pre.constInt(0, i64);
    ir::spliceOps(before, outer, ir::positionOf(outer, &loop));
    loop.setOperand(3 + i, zero);
    // In the body: the iteration's pointers from the carried offset, in fresh registers.
    arg->setType(i64);
    Block head;
    ir::Builder in(&head);
    in.setLoc(next->def()->loc());
    Value* offsets = in.create1(OpCode::Splat, {arg}, pointers.withElem(DType::I64));
    Value* current = in.create1(OpCode::AddPtr, {p0, offsets}, pointers);
    current->name = arg->name;
    Op* splat = offsets->def();
    ir::spliceOps(head, body, 0);
    ir::replaceAllUses(body, arg, current);
    splat->setOperand(0, arg); // the one use that stays
    // The yield advances the offset; the old pointer increment is left to dead-code elimination.
    Block tail;
    ir::Builder out(&tail);
    out.setLoc(next->def()->loc());
    Value* advanced = out.create1(OpCode::Add, {arg, step}, i64);
    ir::spliceOps(tail, body, ir::positionOf(body, yield));
    yield->setOperand(i, advanced);
    // After the loop: the final pointers where the result is used.
    Value* result = loop.result(i);
    result->setType(i64);
    Block after;
    ir::Builder post(&after);
    post.setLoc(loop.loc());
    Value* finalOffsets = post.create1(OpCode::Splat, {result}, pointers.withElem(DType::I64));
    Value* final = post.create1(OpCode::AddPtr, {p0, finalOffsets}, pointers);
    final->name = result->name;
    Op* finalSplat = finalOffsets->def();
    ir::spliceOps(after, outer, ir::positionOf(outer, &loop) + 1);
    ir::replaceAllUses(outer, result, final);
    finalSplat->setOperand(0, result);
    ++n;
  }
  return n;
}

int rewriteIn(Block& block) {
  int n = 0;
  for (size_t i = 0; i < block.ops().size(); ++i) {
    Op* op = block.ops()[i].get();
    for (unsigned r = 0; r < op->numRegions(); ++r) n += rewriteIn(*op->region(r));
    if (op->code() == OpCode::For && rewriteLoop(*op, block)) {
      ++n;
      i = ir::positionOf(block, op); // ops went in before and after the loop
    }
  }
  return n;
}

} // namespace

int carryPointerOffsets(ir::Function& fn) {
  int n = rewriteIn(fn.body);
  if (n) verify(fn);
  return n;
}

} // namespace ww::transforms
