// Structured control flow: for / if / while over per-thread registers. Loop-carried values live
// in fixed registers updated by a parallel copy at the end of each iteration.
#include "codegen/Lowering.h"
#include "codegen/Wgmma.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <string_view>

namespace ww::codegen {

using ir::DType;
using ir::OpCode;

namespace {

/// The class of each register of a value of type `t` carried by a loop or chosen by an if: a
/// TLX buffer or barrier view is one register, its byte offset in shared memory; a tensor
/// descriptor one register, its tensor map's generic address.
RegClass carriedClass(const ir::Type& t) {
  if (t.kind == ir::TypeKind::Buffer || t.kind == ir::TypeKind::Barrier) return RegClass::B32;
  if (t.kind == ir::TypeKind::Descriptor) return RegClass::B64;
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

bool isRegChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
}

/// The registers (`%name`, not `%tid.x` and the like) on `line`, each with its offset.
std::vector<std::pair<size_t, std::string>> registersOn(std::string_view line) {
  std::vector<std::pair<size_t, std::string>> regs;
  for (size_t i = 0; i < line.size(); ++i) {
    if (line[i] != '%') continue;
    size_t j = i + 1;
    while (j < line.size() && isRegChar(line[j])) ++j;
    if (j > i + 1 && (j == line.size() || line[j] != '.'))
      regs.emplace_back(i, std::string(line.substr(i, j - i)));
    i = j - 1;
  }
  return regs;
}

/// Whether register `reg` occurs in `text` before offset `end`.
bool occursBefore(const std::string& text, const std::string& reg, size_t end) {
  for (size_t at = text.find(reg); at != std::string::npos && at < end; at = text.find(reg, at + 1))
    if (at + reg.size() >= text.size() || !isRegChar(text[at + reg.size()])) return true;
  return false;
}

/// Whether `line` is `\tmov.T %x, %x;` (a copy of a register onto itself).
bool isSelfMove(std::string_view line) {
  size_t at = line.find_first_not_of(" \t");
  if (at == std::string_view::npos || line.compare(at, 4, "mov.") != 0) return false;
  std::vector<std::string> regs;
  for (const auto& [off, reg] : registersOn(line)) regs.push_back(reg);
  size_t semi = line.find(';');
  std::string_view operands =
      line.substr(at, semi == std::string_view::npos ? line.size() - at : semi - at);
  return regs.size() == 2 && regs[0] == regs[1] && operands.find('{') == std::string_view::npos;
}

/// Whether some inline asm in `text` from `from` on may hold a label, a branch or register
/// declarations of its own, which coalesceCarried's reading of the lines and its renames do not
/// follow. Straight-line asm (a cvt.rn.bf16x2.f32 packing an epilogue's pairs) reads and writes
/// the registers its operands were substituted with, on lines like the compiler's own.
bool hasOpaqueInlineAsm(std::string_view text, size_t from) {
  for (size_t at = text.find(kInlineAsmBegin, from); at != std::string_view::npos;
       at = text.find(kInlineAsmBegin, at + 1)) {
    size_t start = at + kInlineAsmBegin.size();
    size_t end = text.find(kInlineAsmEnd, start);
    std::string_view body = text.substr(start, end == std::string_view::npos ? end : end - start);
    if (body.find(':') != std::string_view::npos || body.find("bra") != std::string_view::npos ||
        body.find(".reg") != std::string_view::npos)
      return true;
  }
  return false;
}

/// Loop-carried values without copies: where the body (the text from `from` on) computes the
/// next value of carried register dst[i] (an `eligible` one) into a register of its own, renames
/// that register to dst[i] in the body, so that the end-of-iteration copy is not needed (the
/// accumulator of attention's P V, scaled by alpha, then accumulated by wgmma: 128 movs ptxas would
/// not always coalesce, and a spill). A rename keeps the meaning when the register is the body's
/// own (not used before it), yielded once, and dst[i] is not read after the register is first
/// written: not on a later line, nor around a loop (a backward branch after the first write
/// to a label at or before dst[i]'s last use). Returns the values to copy, renamed ones now
/// equal to their destination.
std::vector<std::string> coalesceCarried(std::string& text, size_t from,
                                         const std::vector<std::string>& dst,
                                         const std::vector<bool>& eligible,
                                         std::vector<std::string> next) {
  // Inline asm may hold labels and branches of its own: leave such bodies as they are.
  if (hasOpaqueInlineAsm(text, from)) return next;
  std::vector<size_t> lineStart;
  for (size_t at = from; at < text.size();) {
    lineStart.push_back(at);
    size_t nl = text.find('\n', at);
    at = nl == std::string::npos ? text.size() : nl + 1;
  }
  auto lineOf = [&](size_t i) {
    size_t end = i + 1 < lineStart.size() ? lineStart[i + 1] : text.size();
    return std::string_view(text).substr(lineStart[i], end - lineStart[i]);
  };
  std::map<std::string, std::pair<size_t, size_t>> span; // first and last line of each register
  std::map<std::string, size_t> labels;
  std::vector<std::pair<size_t, std::string>> branches; // line, target
  for (size_t i = 0; i < lineStart.size(); ++i) {
    std::string_view line = lineOf(i);
    for (const auto& [off, reg] : registersOn(line)) {
      auto [it, fresh] = span.emplace(reg, std::make_pair(i, i));
      if (!fresh) it->second.second = i;
    }
    size_t colon = line.find(':');
    if (!line.empty() && line[0] != '\t' && colon != std::string_view::npos)
      labels[std::string(line.substr(0, colon))] = i;
    size_t bra = line.find("bra");
    if (bra != std::string_view::npos && line[0] == '\t') {
      size_t t = line.find_first_not_of(" \t", line.find_first_of(" \t", bra));
      size_t e = line.find(';', t);
      if (t != std::string_view::npos && e != std::string_view::npos)
        branches.emplace_back(i, std::string(line.substr(t, e - t)));
    }
  }
  // A pointer's advance (`add.s64 %next, %ptr, step`) computed before the iteration's last read
  // of %ptr (its cp.async copies) can move to just after that read and then write %ptr itself:
  // otherwise both live through the copies and ptxas shuffles them with moves that wait on
  // every copy's operand read (a fifth of a 4-warp GEMM's stalls). It moves when its line writes
  // only %next, nothing between it and the read is a label or a branch or reads %next or writes
  // what it reads, and what it reads is not itself a moved advance.
  auto firstRegWritten = [&](size_t i) -> std::string {
    std::string_view line = lineOf(i);
    auto regs = registersOn(line);
    if (regs.empty() || line.empty() || line[0] != '\t') return {};
    size_t off = regs[0].first;
    if (off > 0 && line[off - 1] == '[') return {};
    return regs[0].second;
  };
  std::set<std::string> sunkSources;
  std::map<size_t, std::vector<size_t>> sinkAfter; // line -> moved lines emitted after it
  std::set<size_t> sunk;
  auto canSink = [&](size_t def, size_t last, const std::string& src) {
    std::string_view line = lineOf(def);
    if (firstRegWritten(def) != src || line.find("bra") != std::string_view::npos ||
        line.find('{') != std::string_view::npos || sunk.count(def) || sunk.count(last))
      return false;
    std::vector<std::string> reads;
    auto operands = registersOn(line);
    for (size_t r = 1; r < operands.size(); ++r) { // operands[0] is the one written
      const std::string& reg = operands[r].second;
      if (reg == src || sunkSources.count(reg)) return false;
      reads.push_back(reg);
    }
    for (size_t i = def + 1; i <= last; ++i) {
      std::string_view l = lineOf(i);
      if (l.empty() || l[0] != '\t' || l.find("bra") != std::string_view::npos) return false;
      for (const auto& [off, reg] : registersOn(l))
        if (reg == src) return false;
      std::string written = firstRegWritten(i);
      if (l.find('{') != std::string_view::npos && l.find("st.") == std::string_view::npos &&
          l.find("cp.async") == std::string_view::npos)
        return false; // a destination list (wgmma, vector loads): leave it be
      if (!written.empty() && std::count(reads.begin(), reads.end(), written)) return false;
    }
    return true;
  };
  std::map<std::string, std::string> rename;
  std::set<std::string> dsts(dst.begin(), dst.end());
  for (size_t k = 0; k < dst.size(); ++k) {
    const std::string& src = next[k];
    bool pointer = src.rfind("%rd", 0) == 0 && dst[k].rfind("%rd", 0) == 0;
    if (!(eligible[k] || pointer) || src == dst[k] || src.empty() || src[0] != '%' ||
        dsts.count(src))
      continue;
    if (std::count(next.begin(), next.end(), src) != 1) continue;
    auto s = span.find(src);
    if (s == span.end() || occursBefore(text, src, from)) continue;
    size_t firstWrite = s->second.first;
    auto d = span.find(dst[k]);
    if (d != span.end()) {
      size_t lastRead = d->second.second;
      size_t sinkTo = 0;
      bool sinks = false;
      if (lastRead > firstWrite) {
        if (!pointer || (s->second.second != firstWrite && s->second.second <= lastRead) ||
            !canSink(firstWrite, lastRead, src))
          continue;
        sinks = true;
        sinkTo = lastRead;
      }
      // Not around a loop: a branch after the write back to a label at or before the last read.
      size_t written = sinks ? sinkTo : firstWrite;
      bool aroundLoop = false;
      for (const auto& [line, target] : branches) {
        auto l = labels.find(target);
        aroundLoop |= line >= written && l != labels.end() && l->second <= lastRead;
      }
      if (aroundLoop) continue;
      if (sinks) {
        sunk.insert(firstWrite);
        sinkAfter[sinkTo].push_back(firstWrite);
        sunkSources.insert(src);
      }
    }
    rename[src] = dst[k];
    next[k] = dst[k];
  }
  if (rename.empty()) return next;
  std::string out = text.substr(0, from);
  auto emit = [&](size_t i) {
    std::string_view line = lineOf(i);
    std::string renamed;
    size_t done = 0;
    for (const auto& [off, reg] : registersOn(line)) {
      auto r = rename.find(reg);
      if (r == rename.end()) continue;
      renamed.append(line.substr(done, off - done));
      renamed += r->second;
      done = off + reg.size();
    }
    renamed.append(line.substr(done));
    // A copy the rename turned into `mov %x, %x` goes: it would still read %x, and when %x is
    // a wgmma accumulator in flight ptxas serializes every wgmma of the kernel for it.
    if (!isSelfMove(renamed)) out += renamed;
  };
  for (size_t i = 0; i < lineStart.size(); ++i) {
    if (!sunk.count(i)) emit(i);
    auto moved = sinkAfter.find(i);
    if (moved != sinkAfter.end())
      for (size_t m : moved->second) emit(m);
  }
  text = std::move(out);
  return next;
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
  convertInvariantsBefore(op);
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
  // Which carried values are wgmma's packed fp16 accumulator words (packedHalfValues_): the
  // loop carries the words, packing an init that comes as elements and unpacking the result
  // after the loop where its readers want elements.
  auto carriesWords = [&](unsigned k) { return packedHalfValues_.count(body.arg(1 + k)) != 0; };
  for (unsigned k = 0; k < numIters; ++k) {
    const ir::Value* initValue = op.operand(3 + k);
    Regs packedInit;
    bool packedHere = false;
    if (carriesWords(k)) {
      packedHere = !packedHalfValues_.count(initValue);
      packedInit =
          packedHere ? packHalfAccumulator(b_, operand(op, 3 + k)) : halfWordsOf(initValue);
    }
    const Regs& init = carriesWords(k) ? packedInit : operand(op, 3 + k);
    RegClass c = carriesWords(k) ? RegClass::B32 : carriedClass(op.result(k)->type());
    // Words packed here are fresh registers; the others, like elements, are carried in place
    // only as an accumulator nothing else reads.
    bool reuse = packedHere || (carriesWords(k) ? isUnsharedAsyncDotResult(fn_.body, initValue, &op)
                                                : carriesInitInPlace(op, 3 + k, init));
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
  // Before the head: a drain here runs once, and before a loop that runs no iteration too.
  const bool drainAtExit = bulkStoreReadAtLoopHead({&body});
  const bool pendingAtHead = bulkStoreReadPending_;
  b_.pushScope();
  b_.label(head);
  // Negative constant steps count down; others up (as range() does).
  bool down = isImmediate(step) && std::stoll(step) < 0;
  std::string done = b_.newReg(RegClass::Pred);
  b_.inst(std::string(down ? "setp.le." : "setp.ge.") + it, {done, iv, ub});
  b_.inst("bra", {exit}, done);
  bind(body.arg(0), {iv});
  for (unsigned k = 0; k < numIters; ++k) {
    if (carriesWords(k))
      halfWords_[body.arg(1 + k)] = carried[k];
    else
      bind(body.arg(1 + k), carried[k]);
  }
  const size_t bodyStart = b_.mutableBody().size();
  for (const auto& inner : body.ops())
    if (inner.get() != body.terminator()) lowerOp(*inner);
  const ir::Op* yield = terminatorOf(body, OpCode::Yield);
  b_.setLoc(yield->loc());
  std::vector<std::string> next;
  std::vector<bool> accumulator;
  for (unsigned k = 0; k < numIters; ++k) {
    // Renamed: wgmma accumulators, and pointers whose advance can move after their last read
    // (coalesceCarried). For other values ptxas coalesces the copies itself, and longer live
    // ranges can cost registers where a kernel has few (64 at 32 warps).
    bool acc = isUnsharedAsyncDotResult(body, yield->operand(k), yield);
    for (const auto& x : carriesWords(k) ? halfWordsOf(yield->operand(k)) : operand(*yield, k)) {
      next.push_back(x);
      accumulator.push_back(acc);
    }
  }
  next = coalesceCarried(b_.mutableBody(), bodyStart, flat.regs, accumulator, std::move(next));
  parallelCopy(flat.regs, next, flat.classes);
  b_.inst("add." + it, {iv, iv, step});
  b_.inst("bra.uni", {head});
  b_.popScope();
  b_.label(exit);
  bulkStoreReadPending_ = bulkStoreReadPending_ || pendingAtHead;
  if (drainAtExit) drainBulkStoreRead();
  for (unsigned k = 0; k < numIters; ++k) {
    if (!carriesWords(k))
      bind(op.result(k), carried[k]);
    else if (packedHalfValues_.count(op.result(k)))
      halfWords_[op.result(k)] = carried[k];
    else
      bind(op.result(k), unpackHalfAccumulator(b_, carried[k]));
  }
}

void FunctionLowering::lowerIf(const ir::Op& op) {
  std::string cond = b_.materialize(operand(op, 0).at(0), RegClass::Pred);
  FlatRegs flat;
  std::vector<Regs> results = freshResultRegisters(op, flat.regs, flat.classes);
  std::string elseLabel = b_.newLabel("else"), endLabel = b_.newLabel("endif");
  b_.inst("bra", {elseLabel}, cond, /*negateGuard=*/true);
  // A descriptor store's read is pending after the if where it is after either branch.
  const bool pendingBefore = bulkStoreReadPending_;
  bool pendingAfter = false;
  auto lowerBranch = [&](const ir::Block& region) {
    bulkStoreReadPending_ = pendingBefore;
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
    pendingAfter = pendingAfter || bulkStoreReadPending_;
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
    pendingAfter = pendingAfter || pendingBefore;
  }
  bulkStoreReadPending_ = pendingAfter;
  for (unsigned k = 0; k < op.numResults(); ++k) bind(op.result(k), results[k]);
}

void FunctionLowering::lowerWhile(const ir::Op& op) {
  convertInvariantsBefore(op);
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
  const bool drainAtExit = bulkStoreReadAtLoopHead({&before, &after});
  const bool pendingAtHead = bulkStoreReadPending_;
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
  bulkStoreReadPending_ = bulkStoreReadPending_ || pendingAtHead;
  if (drainAtExit) drainBulkStoreRead();
  for (unsigned k = 0; k < op.numResults(); ++k) bind(op.result(k), passed[k]);
}

} // namespace ww::codegen
