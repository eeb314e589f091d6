// Structured control flow: for / if / while over per-thread registers. Loop-carried values live
// in fixed registers updated by a parallel copy at the end of each iteration.
#include "codegen/Lowering.h"

#include <set>

namespace ww::codegen {

using ir::DType;
using ir::OpCode;

namespace {

/// The class of each register of a value of type `t` carried by a loop or chosen by an if: a
/// TLX buffer or barrier view is one register, its byte offset in shared memory.
RegClass carriedClass(const ir::Type& t) {
  if (t.kind == ir::TypeKind::Buffer || t.kind == ir::TypeKind::Barrier) return RegClass::B32;
  return regClassOf(t.elem, t.pointer);
}

/// Lowers every op of `block` but its terminator, which it returns.
const ir::Op* terminatorOf(const ir::Block& block, OpCode expected) {
  const ir::Op* t = block.terminator();
  if (!t || t->code() != expected)
    throw std::logic_error(std::string("codegen: region does not end in ") +
                           (expected == OpCode::Yield ? "yield" : "condition"));
  return t;
}

} // namespace

void FunctionLowering::parallelCopy(const std::vector<std::string>& dst,
                                    const std::vector<std::string>& values,
                                    const std::vector<RegClass>& classes) {
  std::set<std::string> targets(dst.begin(), dst.end());
  std::vector<std::string> sources = values;
  // A value that is itself a destination of this copy is read before anything is written.
  for (size_t i = 0; i < dst.size(); ++i)
    if (targets.count(sources[i]) && sources[i] != dst[i]) {
      std::string tmp = b_.newReg(classes[i]);
      b_.inst(movOpcode(classes[i]), {tmp, sources[i]});
      sources[i] = tmp;
    }
  for (size_t i = 0; i < dst.size(); ++i)
    if (sources[i] != dst[i]) b_.inst(movOpcode(classes[i]), {dst[i], sources[i]});
}

bool FunctionLowering::carriesInitInPlace(const ir::Op& loop, unsigned i, const Regs& init) {
  // Only a wgmma accumulator, and only as its own registers (not a layout conversion of them).
  if (!isUnsharedAsyncDotResult(fn_.body, loop.operand(i), &loop)) return false;
  if (&init != &regsOf(loop.operand(i))) return false;
  for (const auto& x : init)
    if (x.empty() || x[0] != '%') return false;
  return true;
}

namespace {

struct FlatRegs {
  std::vector<std::string> regs;
  std::vector<RegClass> classes;
};

} // namespace

std::vector<Regs> FunctionLowering::freshResultRegisters(const ir::Op& op,
                                                         std::vector<std::string>& flat,
                                                         std::vector<RegClass>& classes) {
  std::vector<Regs> results(op.numResults());
  for (unsigned k = 0; k < op.numResults(); ++k) {
    const ir::Type& t = op.result(k)->type();
    int32_t n = t.isTensor() ? layoutOf(op.result(k)).getInDimSize(layout::kRegister) : 1;
    RegClass c = carriedClass(t);
    for (int32_t r = 0; r < n; ++r) {
      results[k].push_back(b_.newReg(c));
      flat.push_back(results[k].back());
      classes.push_back(c);
    }
  }
  return results;
}

void FunctionLowering::lowerFor(const ir::Op& op) {
  const ir::Block& body = *op.region(0);
  const ir::Type& ivType = op.operand(0)->type();
  std::string it = arithType(ivType.elem);
  RegClass ivClass = regClassOf(ivType.elem);
  std::string lb = operand(op, 0).at(0), ub = operand(op, 1).at(0), step = operand(op, 2).at(0);
  unsigned numIters = op.numOperands() - 3;

  // Loop-carried registers, initialised from the init operands.
  std::vector<Regs> carried(numIters);
  FlatRegs flat;
  std::vector<std::string> initFlat;
  for (unsigned k = 0; k < numIters; ++k) {
    const Regs& init = operand(op, 3 + k);
    RegClass c = carriedClass(op.result(k)->type());
    bool reuse = carriesInitInPlace(op, 3 + k, init);
    for (const auto& x : init) {
      carried[k].push_back(reuse ? x : b_.newReg(c));
      flat.regs.push_back(carried[k].back());
      flat.classes.push_back(c);
      initFlat.push_back(x);
    }
  }
  parallelCopy(flat.regs, initFlat, flat.classes);
  std::string iv = b_.newReg(ivClass);
  b_.inst(movOpcode(ivClass), {iv, lb});

  std::string head = b_.newLabel("for"), exit = b_.newLabel("endfor");
  b_.pushScope();
  b_.label(head);
  // Negative constant steps count down; others up (as range() does).
  bool down = isImmediate(step) && std::stoll(step) < 0;
  std::string done = b_.newReg(RegClass::Pred);
  b_.inst(std::string(down ? "setp.le." : "setp.ge.") + it, {done, iv, ub});
  b_.inst("bra", {exit}, done);
  bind(body.arg(0), {iv});
  for (unsigned k = 0; k < numIters; ++k) bind(body.arg(1 + k), carried[k]);
  for (const auto& inner : body.ops())
    if (inner.get() != body.terminator()) lowerOp(*inner);
  const ir::Op* yield = terminatorOf(body, OpCode::Yield);
  b_.setLoc(yield->loc());
  std::vector<std::string> next;
  for (unsigned k = 0; k < numIters; ++k)
    for (const auto& x : operand(*yield, k)) next.push_back(x);
  parallelCopy(flat.regs, next, flat.classes);
  b_.inst("add." + it, {iv, iv, step});
  b_.inst("bra.uni", {head});
  b_.popScope();
  b_.label(exit);
  for (unsigned k = 0; k < numIters; ++k) bind(op.result(k), carried[k]);
}

void FunctionLowering::lowerIf(const ir::Op& op) {
  std::string cond = b_.materialize(operand(op, 0).at(0), RegClass::Pred);
  FlatRegs flat;
  std::vector<Regs> results = freshResultRegisters(op, flat.regs, flat.classes);
  std::string elseLabel = b_.newLabel("else"), endLabel = b_.newLabel("endif");
  b_.inst("bra", {elseLabel}, cond, /*negateGuard=*/true);
  auto lowerBranch = [&](const ir::Block& region) {
    b_.pushScope();
    for (const auto& inner : region.ops())
      if (inner.get() != region.terminator()) lowerOp(*inner);
    const ir::Op* t = region.terminator();
    if (t && t->code() == OpCode::Yield) {
      std::vector<std::string> vals;
      for (unsigned k = 0; k < t->numOperands(); ++k)
        for (const auto& x : operand(*t, k)) vals.push_back(x);
      if (vals.size() != flat.regs.size())
        throw std::logic_error("codegen: if yields a different number of registers");
      parallelCopy(flat.regs, vals, flat.classes);
    } else if (t) {
      lowerOp(*t);
    }
    b_.popScope();
  };
  lowerBranch(*op.region(0));
  if (op.numRegions() > 1) {
    b_.inst("bra.uni", {endLabel});
    b_.label(elseLabel);
    lowerBranch(*op.region(1));
    b_.label(endLabel);
  } else {
    if (op.numResults() > 0)
      throw std::logic_error("codegen: if with results but without an else region");
    b_.label(elseLabel);
  }
  for (unsigned k = 0; k < op.numResults(); ++k) bind(op.result(k), results[k]);
}

void FunctionLowering::lowerWhile(const ir::Op& op) {
  const ir::Block& before = *op.region(0);
  const ir::Block& after = *op.region(1);
  unsigned numIters = op.numOperands();
  std::vector<Regs> carried(numIters);
  FlatRegs flat;
  std::vector<std::string> initFlat;
  for (unsigned k = 0; k < numIters; ++k) {
    RegClass c = carriedClass(before.arg(k)->type());
    const Regs& init = operand(op, k);
    bool reuse = carriesInitInPlace(op, k, init);
    for (const auto& x : init) {
      carried[k].push_back(reuse ? x : b_.newReg(c));
      flat.regs.push_back(carried[k].back());
      flat.classes.push_back(c);
      initFlat.push_back(x);
    }
  }
  parallelCopy(flat.regs, initFlat, flat.classes);
  std::string head = b_.newLabel("while"), exit = b_.newLabel("endwhile");
  b_.pushScope();
  b_.label(head);
  for (unsigned k = 0; k < numIters; ++k) bind(before.arg(k), carried[k]);
  for (const auto& inner : before.ops())
    if (inner.get() != before.terminator()) lowerOp(*inner);
  const ir::Op* condOp = terminatorOf(before, OpCode::Condition);
  b_.setLoc(condOp->loc());
  std::string cond = b_.materialize(operand(*condOp, 0).at(0), RegClass::Pred);
  // The values passed on by `condition` are the loop's results (when it exits) and the after
  // region's arguments (when it continues). A loop-carried value passed on once, as it is, stays
  // in its registers: nothing writes them again before the yield, when the after region's
  // arguments are dead. (A copy of a wgmma accumulator in flight would serialize the wgmmas.)
  FlatRegs passedFlat;
  std::vector<Regs> passed = freshResultRegisters(op, passedFlat.regs, passedFlat.classes);
  passedFlat.regs.clear();
  for (unsigned k = 0; k < op.numResults(); ++k) {
    const ir::Value* v = condOp->operand(1 + k);
    unsigned times = 0;
    for (unsigned i = 1; i < condOp->numOperands(); ++i) times += condOp->operand(i) == v;
    for (unsigned j = 0; j < numIters; ++j)
      if (times == 1 && v == before.arg(j) && &operand(*condOp, 1 + k) == &regsOf(v) &&
          carried[j].size() == passed[k].size())
        passed[k] = carried[j];
    passedFlat.regs.insert(passedFlat.regs.end(), passed[k].begin(), passed[k].end());
  }
  std::vector<std::string> vals;
  for (unsigned k = 1; k < condOp->numOperands(); ++k)
    for (const auto& x : operand(*condOp, k)) vals.push_back(x);
  if (vals.size() != passedFlat.regs.size())
    throw std::logic_error("codegen: while condition passes a different number of registers");
  parallelCopy(passedFlat.regs, vals, passedFlat.classes);
  b_.inst("bra", {exit}, cond, /*negateGuard=*/true);
  for (unsigned k = 0; k < after.numArgs(); ++k) bind(after.arg(k), passed.at(k));
  for (const auto& inner : after.ops())
    if (inner.get() != after.terminator()) lowerOp(*inner);
  const ir::Op* yield = terminatorOf(after, OpCode::Yield);
  std::vector<std::string> next;
  for (unsigned k = 0; k < yield->numOperands(); ++k)
    for (const auto& x : operand(*yield, k)) next.push_back(x);
  parallelCopy(flat.regs, next, flat.classes);
  b_.inst("bra.uni", {head});
  b_.popScope();
  b_.label(exit);
  for (unsigned k = 0; k < op.numResults(); ++k) bind(op.result(k), passed[k]);
}

} // namespace ww::codegen
