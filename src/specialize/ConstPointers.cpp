// Pointers to constant data (Triton's `tl.const` parameter annotation). Constness is part of a
// pointer's type in Triton: a store or an atomic through one is refused, and the places that need
// one type on every path (an `if`'s results, `a if c else b`, a helper's returns, loop-carried
// values) refuse a const and a non-const pointer. Tile IR types carry no such flag (nothing after
// the specializer needs it), so the specializer keeps it on the side: the kernel arguments
// annotated tl.const are recorded; a value computed from a const pointer by a pointer-preserving
// op (pointer arithmetic, splat, broadcast, reshape, select...) is const, and so are an `if`'s
// results whose then-branch yields const pointers and a loop's carried values and results whose
// initial values are const (the merges check that every path agrees).
#include "specialize/SpecializerImpl.h"

namespace ww::specialize {

namespace {

bool preservesPointer(ir::OpCode c) {
  switch (c) {
  case ir::OpCode::AddPtr:
  case ir::OpCode::Splat:
  case ir::OpCode::Broadcast:
  case ir::OpCode::ExpandDims:
  case ir::OpCode::Reshape:
  case ir::OpCode::Permute:
  case ir::OpCode::Join:
  case ir::OpCode::Split:
  case ir::OpCode::Cat:
  case ir::OpCode::Select:
  case ir::OpCode::MultipleOf:
  case ir::OpCode::MaxContiguous:
    return true;
  default:
    return false;
  }
}

/// The value a control-flow result or region argument takes its type from: a loop's initial
/// value, the then-branch's yield of an `if`; null for anything else.
const ir::Value* mergedFrom(const ir::Value* v) {
  if (const ir::Op* op = v->def()) {
    unsigned i = v->index();
    switch (op->code()) {
    case ir::OpCode::For:
      return op->operand(3 + i);
    case ir::OpCode::While:
      return op->operand(i);
    case ir::OpCode::If: {
      const ir::Op* yield = op->region(0)->terminator();
      return yield && i < yield->numOperands() ? yield->operand(i) : nullptr;
    }
    default:
      return nullptr;
    }
  }
  const ir::Block* block = v->ownerBlock();
  const ir::Op* loop = block ? block->parentOp() : nullptr;
  if (!loop) return nullptr;
  if (loop->code() == ir::OpCode::For) // (iv, iters...)
    return v->index() == 0 ? nullptr : loop->operand(3 + v->index() - 1);
  if (loop->code() == ir::OpCode::While) return loop->operand(v->index());
  return nullptr;
}

} // namespace

bool Specializer::isConstPointer(const ir::Value* v) {
  if (!v || !v->type().isPointer() || constPointers.empty()) return false;
  if (constPointers.count(v)) return true;
  auto memo = constPointerMemo.find(v);
  if (memo != constPointerMemo.end()) return memo->second;
  bool isConst = false;
  if (const ir::Value* from = mergedFrom(v)) {
    isConst = isConstPointer(from);
  } else if (const ir::Op* op = v->def(); op && preservesPointer(op->code())) {
    for (const ir::Value* x : op->operands())
      if (x->type().isPointer() && isConstPointer(x)) isConst = true;
  }
  constPointerMemo[v] = isConst;
  return isConst;
}

std::string Specializer::typeText(const ir::Value* v) {
  return (isConstPointer(v) ? "const " : "") + v->type().str();
}

void Specializer::checkStoreTarget(const ir::Value* ptr, SourceLoc loc) {
  // Triton's words (test_const checks them).
  if (isConstPointer(ptr))
    raiseError(loc, "Cannot store to a constant pointer (" + typeText(ptr) +
                        ", from a tl.const argument)");
}

void Specializer::checkLoopConstness(const std::vector<std::string>& names,
                                     const std::vector<ir::Value*>& inits,
                                     const std::vector<ir::Value*>& yields, SourceLoc loc) {
  for (size_t i = 0; i < inits.size() && i < yields.size(); ++i)
    if (isConstPointer(inits[i]) != isConstPointer(yields[i]))
      raiseError(loc, "loop-carried '" + (i < names.size() ? names[i] : inits[i]->name) +
                          "' changes type from " + typeText(inits[i]) + " to " +
                          typeText(yields[i]) +
                          " in the loop body (a tl.const pointer and a writable one)");
}

} // namespace ww::specialize
