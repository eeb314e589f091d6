// Carries the cp.async address tensors of a loop as one scalar offset instead of a pointer
// tensor: a pointer tensor the loop advances by a loop-invariant splat (`b_ptrs += BK * stride`,
// moved ahead by the software pipeliner) becomes its value at loop entry plus an i64 offset the
// loop carries (in bytes), each copy's addresses computed just before it. It is the form Triton's K
// loops reach after LLVM's loop strength reduction, and it is what ptxas compiles well: advanced in
// place, each 64-bit pointer became an IMAD.WIDE (half-rate) that waited for the LDGSTS reading
// it, or register-pair moves before each copy. On the H200 the rewrite measured 0.92x -> 0.97x
// (4096^3) and 0.93x -> 1.01x (8192^3) of cuBLAS for tutorial 03's 128x256x64 3-stage kernel,
// the speed Triton 3.6 reaches with the same source (docs/status.md, session 21).
#include "ir/Builder.h"
#include "transforms/Passes.h"

#include <algorithm>
#include <unordered_map>

namespace ww::transforms {

using ir::Block;
using ir::DType;
using ir::Op;
using ir::OpCode;
using ir::Type;
using ir::Value;

namespace {

bool usedBy(const Block& block, const Value* v, OpCode code) {
  bool found = false;
  ir::walk(block, [&](const Op& op) {
    if (op.code() != code) return;
    for (const Value* o : op.operands()) found = found || o == v;
  });
  return found;
}

unsigned countUses(const Block& block, const Value* v) {
  unsigned n = 0;
  ir::walk(block, [&](const Op& op) {
    for (const Value* o : op.operands()) n += o == v;
  });
  return n;
}

/// The op of `block`'s own list that is or contains the first use of `v`; null when none.
Op* firstUser(Block& block, const Value* v) {
  for (auto& op : block.ops()) {
    bool uses = false;
    for (const Value* o : op->operands()) uses = uses || o == v;
    for (unsigned r = 0; !uses && r < op->numRegions(); ++r) uses = countUses(*op->region(r), v);
    if (uses) return op.get();
  }
  return nullptr;
}

/// The loop-invariant scalar a splat advance adds, or a constant's value, and the pointee's
/// size: pointers advanced by the same amount share one offset.
struct Advance {
  Value* scalar = nullptr; // defined outside the loop
  int64_t constant = 0;    // when scalar is null
  int elemBytes = 0;       // of the pointee: the offset counts bytes
  bool operator==(const Advance& o) const {
    return scalar == o.scalar && constant == o.constant && elemBytes == o.elemBytes;
  }
};

/// Whether scalar `v` is invariant in `loop`: defined outside it, or in its body (at the top
/// level) by pure scalar arithmetic of invariants (`ROWS * stride` written in the loop), which
/// the rewrite then computes before the loop.
bool invariantScalar(const Value* v, const Op& loop, int depth = 0) {
  if (!ir::definedInside(v, loop)) return true;
  const Op* def = v->def();
  if (!def || depth > 8 || def->parentBlock() != loop.region(0) || def->numRegions() ||
      !isPure(*def) || def->numResults() != 1 || !def->result()->type().shape.empty())
    return false;
  for (const Value* o : def->operands())
    if (!invariantScalar(o, loop, depth + 1)) return false;
  return true;
}

/// `v` (invariantScalar) as a value of the block `b` builds before `loop`: itself, or a copy of
/// the body's ops computing it.
Value* beforeLoop(ir::Builder& b, Value* v, const Op& loop,
                  std::unordered_map<const Value*, Value*>& copies) {
  if (!ir::definedInside(v, loop)) return v;
  if (auto it = copies.find(v); it != copies.end()) return it->second;
  const Op* def = v->def();
  for (Value* o : def->operands()) beforeLoop(b, o, loop, copies);
  return ir::cloneOp(b, *def, copies)->result();
}

bool advanceOf(const Value* offset, const Op& loop, Advance* out) {
  const Op* def = offset->def();
  if (!def) return false;
  if (def->code() == OpCode::Splat && ir::isInt(def->operand(0)->type().elem) &&
      invariantScalar(def->operand(0), loop)) {
    out->scalar = def->operand(0);
    return true;
  }
  if (def->code() == OpCode::Constant && ir::isInt(offset->type().elem)) {
    out->constant = def->intAttr("value");
    return true;
  }
  return false;
}

/// `ptrs` moved by `bytes` (an i64 scalar): through i8 pointers, so that the offset the loop
/// carries counts bytes and each address is one 64-bit add (an element offset's multiply, seen
/// by ptxas, became an IMAD.WIDE per address again, all hoisted to the loop's top).
Value* movedBy(ir::Builder& b, Value* ptrs, Value* bytes) {
  Type raw = ptrs->type();
  raw.elem = DType::I8;
  Value* moved = b.addPtr(b.create1(OpCode::Bitcast, {ptrs}, raw), b.splat(bytes, raw.shape));
  return b.create1(OpCode::Bitcast, {moved}, ptrs->type());
}

int rewriteLoop(Op& loop, Block& outer) {
  Block& body = *loop.region(0);
  Op* yield = body.terminator();
  if (!yield || yield->code() != OpCode::Yield) return 0;
  const Type i64 = Type::scalar(DType::I64);

  // Iter args eligible: pointer tensors yielded as addptr(arg, advance), that addptr used only
  // by the yield, the arg read by a cp.async copy.
  // In iter-arg order (not by address), so that the rewritten IR is the same in every run.
  std::vector<std::pair<Advance, std::vector<unsigned>>> groups;
  for (unsigned i = 0; i < yield->numOperands(); ++i) {
    Value* arg = body.arg(1 + i);
    if (!arg->type().pointer || !arg->type().isTensor()) continue;
    Op* next = yield->operand(i)->def();
    if (!next || next->code() != OpCode::AddPtr || next->parentBlock() != &body ||
        next->operand(0) != arg || countUses(body, next->result()) != 1)
      continue;
    Advance adv;
    if (!advanceOf(next->operand(1), loop, &adv) || !usedBy(body, arg, OpCode::AsyncLoad)) continue;
    adv.elemBytes = Type::scalar(arg->type().elem).elemBytes();
    auto same = [&](const auto& g) { return g.first == adv; };
    if (auto it = std::find_if(groups.begin(), groups.end(), same); it != groups.end())
      it->second.push_back(i);
    else
      groups.push_back({adv, {i}});
  }
  if (groups.empty()) return 0;

  int rewritten = 0;
  for (const auto& [adv, iters] : groups) {
    // Before the loop: a zero offset and the advance in bytes.
    Block pre;
    ir::Builder b(&pre);
    b.setLoc(loop.loc());
    Value* zero = b.constInt(0, i64);
    std::unordered_map<const Value*, Value*> copies;
    Value* step =
        adv.scalar ? beforeLoop(b, adv.scalar, loop, copies) : b.constInt(adv.constant, i64);
    if (step->type().elem != DType::I64) step = b.create1(OpCode::Cast, {step}, i64);
    step = b.binary(OpCode::Mul, step, b.constInt(adv.elemBytes, i64));
    ir::spliceOps(pre, outer, ir::positionOf(outer, &loop));

    const unsigned offsetResult = loop.numResults();
    loop.addOperand(zero);
    loop.addResult(i64, "ptr_offset");
    Value* offset = body.addArg(i64, "ptr_offset");

    for (unsigned i : iters) {
      Value* arg = body.arg(1 + i);
      Op* next = yield->operand(i)->def();
      // The arg keeps its entry value (yielded unchanged, its advance gone); its readers take
      // entry + offset, computed before the first of them (the advance, often first, is gone by
      // then: the addresses stay beside the copies).
      yield->setOperand(i, arg);
      ir::eraseOp(body, next);
      Op* user = firstUser(body, arg);
      Block at;
      ir::Builder ab(&at);
      ab.setLoc(user->loc());
      Value* addresses = movedBy(ab, arg, offset);
      ir::replaceAllUses(body, arg, addresses);
      yield->setOperand(i, arg); // replaceAllUses rewrote the yield's use too
      ir::spliceOps(at, body, ir::positionOf(body, user));
      // After the loop, whatever read the advanced pointers reads entry + final offset.
      Value* result = loop.result(i);
      if (countUses(outer, result)) {
        Block post;
        ir::Builder pb(&post);
        pb.setLoc(loop.loc());
        Value* last = movedBy(pb, result, loop.result(offsetResult));
        ir::replaceAllUses(outer, result, last);
        ir::spliceOps(post, outer, ir::positionOf(outer, &loop) + 1);
      }
      ++rewritten;
    }
    Block inc;
    ir::Builder ib(&inc);
    ib.setLoc(yield->loc());
    yield->addOperand(ib.binary(OpCode::Add, offset, step));
    ir::spliceOps(inc, body, ir::positionOf(body, yield));
  }
  return rewritten;
}

int rewriteIn(Block& block) {
  int n = 0;
  for (size_t i = 0; i < block.ops().size(); ++i) {
    Op* op = block.ops()[i].get();
    for (unsigned r = 0; r < op->numRegions(); ++r) n += rewriteIn(*op->region(r));
    if (op->code() != OpCode::For) continue;
    n += rewriteLoop(*op, block);
    i = ir::positionOf(block, op); // past the ops placed before it
  }
  return n;
}

} // namespace

int offsetLoopPointers(ir::Function& fn) {
  return rewriteIn(fn.body);
}

} // namespace ww::transforms
