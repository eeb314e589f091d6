// Strength reduction of pointer inductions: a for loop carrying a pointer tensor that each
// iteration advances by one scalar for all its elements (`a_ptrs += BLOCK_K * stride_ak`)
// carries that scalar's running sum instead, and the tensor is recomputed from its value before
// the loop in each iteration:
//
//   for (p = p0) { use(p); yield addptr(p, splat(s)) }
//   ->  for (off = 0) { q = addptr(p0, splat(off)); use(q); yield off + s }
//
// This is what LLVM's loop strength reduction leaves in Triton's kernels. It matters for
// cp.async: the copy's address registers are read by the copy well after it issues, so an
// address register advanced in place (the carried form) makes the next write of it wait for the
// copy, and ptxas, holding each 64-bit address in a lo / hi pair it updates in place, also
// moves the pairs into fresh registers before each copy. Addresses recomputed each iteration
// from loop-invariant ones are written to registers no copy is still reading. The offset is
// 64-bit, so the sum cannot wrap where the per-iteration additions to 64-bit pointers did not.
#include "ir/Builder.h"
#include "ir/OpAttrs.h"
#include "transforms/Passes.h"

#include <map>

namespace ww::transforms {

using ir::Block;
using ir::DType;
using ir::Op;
using ir::OpCode;
using ir::Type;
using ir::Value;

namespace {

/// The scalar a uniform offset tensor adds to every element: a splat's operand, or a constant's
/// value (as a new i64 constant built by `b`). Null when the tensor is not uniform.
Value* uniformStep(Value* offset, ir::Builder& b) {
  Op* def = offset->def();
  if (!def) return nullptr;
  if (def->code() == OpCode::Splat) return def->operand(0);
  if (def->code() == OpCode::Constant)
    if (auto v = ir::constantInt(offset)) return b.constInt(*v, Type::scalar(DType::I64));
  return nullptr;
}

/// One carried pointer tensor and the scalars its yielded value adds to it.
struct Induction {
  unsigned iter;             // index among the loop's carried values
  std::vector<Value*> steps; // added in this order (scalars of the body or before it)
};

/// The carried pointer tensors of `loop` whose yielded value is the block argument advanced by
/// a chain of uniform addptrs in the body itself (the unrolled copies of an increment chain
/// them). Steps are built by `b` (constants) in a scratch block.
std::vector<Induction> findInductions(Op& loop, ir::Builder& b) {
  Block& body = *loop.region(0);
  Op* yield = body.terminator();
  std::vector<Induction> out;
  for (unsigned i = 0; i + 1 < body.numArgs() && i < yield->numOperands(); ++i) {
    Value* arg = body.arg(i + 1);
    if (!arg->type().isPointer() || !arg->type().isTensor()) continue;
    Induction ind{i, {}};
    Value* v = yield->operand(i);
    bool ok = v != arg;
    while (ok && v != arg) {
      Op* def = v->def();
      ok = def && def->code() == OpCode::AddPtr && def->parentBlock() == &body;
      Value* step = ok ? uniformStep(def->operand(1), b) : nullptr;
      ok = ok && step && step->type().isScalar() && ir::isInt(step->type().elem);
      if (ok) {
        ind.steps.insert(ind.steps.begin(), step);
        v = def->operand(0);
      }
    }
    if (ok) out.push_back(std::move(ind));
  }
  return out;
}

bool rewriteLoop(Op& loop, ir::Function& fn) {
  Block& body = *loop.region(0);
  Block& outer = *loop.parentBlock();
  Block constants; // i64 steps made from constant tensors, placed before the loop
  ir::Builder cb(&constants);
  cb.setLoc(loop.loc());
  std::vector<Induction> inds = findInductions(loop, cb);
  if (inds.empty()) return false;
  std::map<unsigned, const Induction*> byIter;
  for (const Induction& ind : inds) byIter[ind.iter] = &ind;

  const Type i64 = Type::scalar(DType::I64);
  Block pre;
  ir::Builder b(&pre);
  b.setLoc(loop.loc());
  Value* zero = b.constInt(0, i64);
  std::vector<Value*> operands{loop.operand(0), loop.operand(1), loop.operand(2)};
  std::vector<Type> types;
  for (unsigned i = 0; i < loop.numResults(); ++i)
    if (!byIter.count(i)) {
      operands.push_back(loop.operand(3 + i));
      types.push_back(loop.result(i)->type());
    }
  for (size_t k = 0; k < inds.size(); ++k) {
    operands.push_back(zero);
    types.push_back(i64);
  }
  Op* rebuilt = b.create(OpCode::For, operands, types, loop.attrs());
  Block* newBody = rebuilt->addRegion();
  std::vector<std::pair<Value*, Value*>> renamed;
  renamed.emplace_back(body.arg(0), newBody->addArg(body.arg(0)->type(), body.arg(0)->name));
  for (unsigned i = 0; i < loop.numResults(); ++i)
    if (!byIter.count(i))
      renamed.emplace_back(body.arg(i + 1),
                           newBody->addArg(body.arg(i + 1)->type(), body.arg(i + 1)->name));
  std::vector<Value*> offsets;
  for (const Induction& ind : inds)
    offsets.push_back(newBody->addArg(i64, body.arg(ind.iter + 1)->name + "_off"));

  // Each induction's tensor, recomputed at the top of the body from its value before the loop.
  Block head;
  ir::Builder hb(&head);
  hb.setLoc(loop.loc());
  for (size_t k = 0; k < inds.size(); ++k) {
    Value* old = body.arg(inds[k].iter + 1);
    Value* init = loop.operand(3 + inds[k].iter);
    Value* q = hb.addPtr(init, hb.splat(offsets[k], old->type().shape));
    q->name = old->name;
    renamed.emplace_back(old, q);
  }

  // The yield carries the other values and each offset advanced by its steps.
  Op* yield = body.terminator();
  Block tail;
  ir::Builder tb(&tail);
  tb.setLoc(yield->loc());
  std::vector<Value*> yields;
  for (unsigned i = 0; i < yield->numOperands(); ++i)
    if (!byIter.count(i)) yields.push_back(yield->operand(i));
  for (size_t k = 0; k < inds.size(); ++k) {
    Value* off = offsets[k];
    for (Value* s : inds[k].steps) {
      if (s->type().elem != DType::I64) s = tb.create1(OpCode::Cast, {s}, i64);
      off = tb.binary(OpCode::Add, off, s);
    }
    yields.push_back(off);
  }
  yield->setOperands(std::move(yields));
  ir::spliceOps(tail, body, ir::positionOf(body, yield));
  ir::spliceOps(body, *newBody, 0);
  ir::spliceOps(head, *newBody, 0);
  for (const auto& [from, to] : renamed) replaceAllUses(*newBody, from, to);

  // After the loop: the other results as they were, each pointer from its final offset.
  Block post;
  ir::Builder pb(&post);
  pb.setLoc(loop.loc());
  unsigned kept = 0;
  for (unsigned i = 0; i < loop.numResults(); ++i) {
    Value* old = loop.result(i);
    Value* now = nullptr;
    if (!byIter.count(i)) {
      now = rebuilt->result(kept++);
    } else {
      size_t k = 0;
      while (inds[k].iter != i) ++k;
      Value* fin = rebuilt->result(static_cast<unsigned>(types.size() - inds.size() + k));
      now = pb.addPtr(loop.operand(3 + i), pb.splat(fin, old->type().shape));
    }
    now->name = old->name;
    replaceAllUses(fn.body, old, now);
  }
  size_t at = ir::positionOf(outer, &loop);
  auto& ops = outer.ops();
  ops.erase(ops.begin() + static_cast<std::ptrdiff_t>(at));
  ir::spliceOps(post, outer, at);
  ir::spliceOps(pre, outer, at);
  ir::spliceOps(constants, outer, at);
  return true;
}

int rewriteIn(Block& block, ir::Function& fn) {
  int n = 0;
  for (size_t i = 0; i < block.ops().size(); ++i) {
    Op* op = block.ops()[i].get();
    for (unsigned r = 0; r < op->numRegions(); ++r) n += rewriteIn(*op->region(r), fn);
    if (op->code() == OpCode::For && rewriteLoop(*op, fn)) {
      ++n;
      // The rebuilt loop sits where the old one was, after the ops placed before it.
      while (block.ops()[i]->code() != OpCode::For) ++i;
    }
  }
  return n;
}

} // namespace

int reducePointerInductions(ir::Function& fn) {
  return rewriteIn(fn.body, fn);
}

} // namespace ww::transforms
