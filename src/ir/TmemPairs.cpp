// Tensor-memory tiles of CTA pairs' M = 64 MMAs (ir/TmemPairs.h).
#include "ir/TmemPairs.h"

#include "ir/OpAttrs.h"

namespace ww::ir {

const Op* tmemAllocOf(const Value* v) {
  for (int guard = 0; v && guard < 1000; ++guard) {
    const Op* def = v->def();
    if (!def) return nullptr;
    if (def->code() == OpCode::LocalAlloc) return def;
    if (def->code() != OpCode::LocalView && def->code() != OpCode::LocalSlice) return nullptr;
    v = def->operand(0);
  }
  return nullptr;
}

std::unordered_set<const Op*> pairSplitAllocs(const Block& body) {
  std::unordered_set<const Op*> split;
  walk(body, [&](const Op& op) {
    if (op.code() != OpCode::Tcgen05Mma || !attr::Tcgen05Mma::twoCtas(op)) return;
    const Type& acc = op.operand(2)->type();
    if (acc.space != MemorySpace::Tmem || acc.shape.size() != 2 || acc.shape[0] != 64) return;
    if (const Op* alloc = tmemAllocOf(op.operand(2))) split.insert(alloc);
  });
  return split;
}

std::unordered_set<const Op*> pairLhsAllocs(const Block& body) {
  std::unordered_set<const Op*> lhs;
  walk(body, [&](const Op& op) {
    if (op.code() != OpCode::Tcgen05Mma || !attr::Tcgen05Mma::twoCtas(op)) return;
    const Type& acc = op.operand(2)->type();
    if (acc.shape.size() != 2 || acc.shape[0] != 64 ||
        op.operand(0)->type().space != MemorySpace::Tmem)
      return;
    if (const Op* alloc = tmemAllocOf(op.operand(0))) lhs.insert(alloc);
  });
  return lhs;
}

int64_t tmemColumns(const Type& t, bool pairSplit) {
  const int64_t cols = tmemColumns(t);
  return pairSplit ? cols / 2 : cols;
}

} // namespace ww::ir
