// Which pointer and descriptor parameters a kernel may write global memory through: the
// interpreter's callers refuse read-only host arrays for those before the run (a NumPy array
// over an immutable `bytes` must never be written), and pass the others read-only.
//
// A forward provenance analysis over the Tile IR: each pointer or descriptor value carries the
// set of parameters it may point into; stores, atomics and descriptor stores mark their
// pointer's set written. It over-approximates (a pointer of unknown origin, from int_to_ptr or a
// load of pointers, may point into any parameter), so a read-only array is only ever refused
// for a kernel that could write it.
#include "ir/IR.h"
#include "warpweave/warpweave.h"

#include <unordered_map>

namespace ww {

namespace {

using ir::OpCode;

/// Parameters a value may point into: one bit per parameter (parameters from the 64th on,
/// rare, count as `any`), and `any` for pointers of unknown origin.
struct Origins {
  uint64_t bits = 0;
  bool any = false;

  bool empty() const { return bits == 0 && !any; }
  /// Adds `o`; true when that changed anything.
  bool merge(const Origins& o) {
    const Origins before = *this;
    bits |= o.bits;
    any = any || o.any;
    return bits != before.bits || any != before.any;
  }
};

bool carriesAddress(const ir::Type& t) {
  return t.isPointer() || t.kind == ir::TypeKind::Descriptor;
}

class Provenance {
public:
  explicit Provenance(const ir::Function& fn) {
    for (size_t i = 0; i < fn.args.size(); ++i) {
      const ir::KernelArg& a = fn.args[i];
      if (!a.value || !carriesAddress(a.type)) continue;
      Origins o;
      if (i < 64)
        o.bits = uint64_t(1) << i;
      else
        o.any = true;
      origins_[a.value] = o;
    }
    // Loop-carried values reach their loop's arguments through its yield: repeat to a fixpoint
    // (each round only grows sets of at most 64 bits, so this ends).
    while (visit(fn.body)) {
    }
  }

  /// The union of what `op`'s global writes go through (none for other ops).
  Origins written(const ir::Block& block) const {
    Origins out;
    ir::walk(block, [&](const ir::Op& op) {
      switch (op.code()) {
      case OpCode::Store:
      case OpCode::AtomicRMW:
      case OpCode::AtomicCas:
      case OpCode::DescStore:
      case OpCode::AsyncDescStore:
      case OpCode::AsyncBulkStore:
        out.merge(of(op.operand(0)));
        break;
      default:
        break;
      }
    });
    return out;
  }

private:
  Origins of(const ir::Value* v) const {
    auto it = origins_.find(v);
    return it == origins_.end() ? Origins{} : it->second;
  }
  bool add(const ir::Value* v, const Origins& o) {
    if (o.empty() || !carriesAddress(v->type())) return false;
    return origins_[v].merge(o);
  }
  static const ir::Op* terminatorOf(const ir::Block* b) { return b ? b->terminator() : nullptr; }
  /// Operand `i` of `b`'s terminator, if it has one.
  Origins yielded(const ir::Block* b, unsigned i) const {
    const ir::Op* t = terminatorOf(b);
    return t && i < t->numOperands() ? of(t->operand(i)) : Origins{};
  }

  bool visit(const ir::Block& block) {
    bool changed = false;
    for (const auto& op : block.ops()) {
      changed |= visitOp(*op);
      for (unsigned r = 0; r < op->numRegions(); ++r) changed |= visit(*op->region(r));
    }
    return changed;
  }

  bool visitOp(const ir::Op& op) {
    bool changed = false;
    switch (op.code()) {
    case OpCode::For: { // (lb, ub, step, init...) ; region(iv, iters...) ; results iters
      const ir::Block* body = op.region(0);
      for (unsigned j = 0; j < op.numResults(); ++j) {
        Origins o = 3 + j < op.numOperands() ? of(op.operand(3 + j)) : Origins{};
        o.merge(yielded(body, j));
        if (j + 1 < body->numArgs()) changed |= add(body->arg(j + 1), o);
        changed |= add(op.result(j), o);
      }
      return changed;
    }
    case OpCode::If: // (cond) ; regions then, else ; results: either yield
      for (unsigned j = 0; j < op.numResults(); ++j)
        for (unsigned r = 0; r < op.numRegions(); ++r)
          changed |= add(op.result(j), yielded(op.region(r), j));
      return changed;
    case OpCode::While: { // (init...) ; before(iters...) -> condition(c, values...) ; after
      const ir::Block* before = op.region(0);
      const ir::Block* after = op.numRegions() > 1 ? op.region(1) : nullptr;
      for (unsigned j = 0; j < before->numArgs(); ++j) {
        Origins o = j < op.numOperands() ? of(op.operand(j)) : Origins{};
        o.merge(yielded(after, j));
        changed |= add(before->arg(j), o);
      }
      for (unsigned j = 0; j < op.numResults(); ++j) {
        Origins o = yielded(before, j + 1); // the condition's values follow its flag
        if (after && j < after->numArgs()) changed |= add(after->arg(j), o);
        changed |= add(op.result(j), o);
      }
      return changed;
    }
    default:
      break;
    }
    // Any other op: its address results may point wherever its operands (and, for ops with
    // regions, what those regions yield) do; addresses from integers or memory anywhere.
    Origins o;
    for (const ir::Value* v : op.operands()) o.merge(of(v));
    for (unsigned r = 0; r < op.numRegions(); ++r)
      if (const ir::Op* t = terminatorOf(op.region(r)))
        for (const ir::Value* v : t->operands()) o.merge(of(v));
    if (op.code() == OpCode::IntToPtr || op.code() == OpCode::Load || o.empty()) o.any = true;
    for (const auto& res : op.results()) changed |= add(res.get(), o);
    for (unsigned r = 0; r < op.numRegions(); ++r)
      for (const auto& a : op.region(r)->args()) changed |= add(a.get(), o);
    return changed;
  }

  std::unordered_map<const ir::Value*, Origins> origins_;
};

} // namespace

std::vector<std::string> writtenParams(const CompiledKernel& kernel) {
  std::vector<std::string> out;
  const ir::Function* fn = kernel.module && !kernel.module->functions.empty()
                               ? kernel.module->functions.front().get()
                               : nullptr;
  if (!fn) { // no Tile IR to look at: every address parameter may be written
    for (const KernelParam& p : kernel.params)
      if (p.type.rfind("ptr<", 0) == 0 || p.type.rfind("desc<", 0) == 0) out.push_back(p.name);
    return out;
  }
  const Origins w = Provenance(*fn).written(fn->body);
  for (size_t i = 0; i < fn->args.size(); ++i) {
    const ir::KernelArg& a = fn->args[i];
    if (a.value && carriesAddress(a.type) && (w.any || (i < 64 && (w.bits >> i) & 1)))
      out.push_back(a.name);
  }
  return out;
}

} // namespace ww
