// Thread uniformity as a forward fixpoint over the kernel (see Uniformity.h).
#include "ir/Uniformity.h"

#include <unordered_map>

namespace ww::ir {

namespace {

/// Ops whose results may differ between the threads of a CTA whatever their operands.
bool perThread(OpCode code) {
  switch (code) {
  case OpCode::ThreadId:
  case OpCode::VoteBallot:
  case OpCode::Clock64:
  case OpCode::ReplicaId:
    return true;
  default:
    return false;
  }
}

} // namespace

ThreadUniformity::ThreadUniformity(const Block& body) {
  // An op with regions passes anything thread-dependent that reaches it (an operand, or a value
  // its regions yield) to its results and to its regions' arguments: loop-carried values and
  // branch results. Coarse for loops (a dependent init makes the induction variable dependent
  // too), and it only ever errs towards "dependent".
  bool changed = true;
  auto mark = [&](const Value* v) { changed |= dependent_.insert(v).second; };
  while (changed) {
    changed = false;
    walk(body, [&](const Op& op) {
      bool dependent = perThread(op.code());
      for (const Value* o : op.operands()) dependent = dependent || !uniform(o);
      for (unsigned r = 0; r < op.numRegions(); ++r)
        if (const Op* end = op.region(r)->terminator())
          for (const Value* y : end->operands()) dependent = dependent || !uniform(y);
      if (!dependent) return;
      for (const auto& v : op.results()) mark(v.get());
      for (unsigned r = 0; r < op.numRegions(); ++r)
        for (const auto& a : op.region(r)->args()) mark(a.get());
    });
  }
}

bool exclusiveBranches(const Block* a, const Block* b, const ThreadUniformity& uniformity) {
  if (a == b) return false;
  std::unordered_map<const Op*, const Block*> aRegions; // each `if` around a: a's region of it
  for (const Block* x = a; x && x->parentOp(); x = x->parentOp()->parentBlock())
    if (x->parentOp()->code() == OpCode::If) aRegions[x->parentOp()] = x;
  for (const Block* x = b; x && x->parentOp(); x = x->parentOp()->parentBlock()) {
    const Op* op = x->parentOp();
    auto it = aRegions.find(op);
    if (it != aRegions.end()) return it->second != x && uniformity.uniform(op->operand(0));
  }
  return false;
}

} // namespace ww::ir
