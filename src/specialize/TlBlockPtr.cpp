// Triton's block pointers: tl.make_block_ptr(base, shape, strides, offsets, block_shape, order),
// tl.advance / p.advance, and tl.load / tl.store through them with boundary_check and
// padding_option.
//
// A block pointer is a specializer value (Val::Kind::BlockPtr), not an IR type: its run-time parts
// (the base pointer and the i64 shape, strides and offsets) are ordinary scalars that loops carry
// and `if`s merge like the elements of a tuple, and its block shape and order are compile-time.
// A load or store through one becomes the pointer arithmetic a hand-written kernel would use,
// base + sum over d of (offsets[d] + arange(block[d])) * strides[d], masked by
// 0 <= offsets[d] + arange(block[d]) < shape[d] on the dimensions of boundary_check. So the
// interpreter runs it unchanged, and AxisInfo sees the same contiguity and divisibility as in the
// equivalent pointer kernel: a stride of 1 (a literal, or an argument specialized == 1) and
// aligned offsets give vector loads on every target.
#include "specialize/TlBlockPtr.h"

#include "ir/OpAttrs.h"
#include "ir/OpTraits.h"
#include "specialize/OpAttrChecks.h"
#include "specialize/SpecializerImpl.h"
#include "support/MathExtras.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <set>

namespace ww::specialize {

using ir::DType;
using ir::OpCode;

namespace {

/// Whether `v` is defined inside `loop` (in one of its regions, at any depth).
bool definedIn(const ir::Value* v, const ir::Op* loop) {
  const ir::Block* blk = v->isBlockArg() ? v->ownerBlock() : v->def()->parentBlock();
  for (; blk; blk = blk->parentOp() ? blk->parentOp()->parentBlock() : nullptr)
    if (blk->parentOp() == loop) return true;
  return false;
}

} // namespace

/// Moves the pure ops appended to `block` from position `first` on out of the loops around it
/// that they do not depend on, each in front of the outermost such loop. A load inside a loop
/// through a block pointer whose offsets the loop advances along one dimension recomputes only
/// that dimension's coordinates each iteration, as the equivalent pointer kernel does (whose
/// other coordinates are computed before the loop).
void hoistLoopInvariants(ir::Block* block, size_t first) {
  auto& ops = block->ops();
  for (size_t i = first; i < ops.size();) {
    ir::Op* op = ops[i].get();
    ir::Block* target = nullptr;
    ir::Op* before = nullptr;
    if (ir::hasTraits(op->code(), ir::trait::Pure) && op->numRegions() == 0) {
      for (ir::Block* blk = block; blk->parentOp();) {
        ir::Op* loop = blk->parentOp();
        if (loop->code() != OpCode::For && loop->code() != OpCode::While) break;
        bool invariant = true;
        for (const ir::Value* v : op->operands()) invariant = invariant && !definedIn(v, loop);
        if (!invariant) break;
        target = loop->parentBlock();
        before = loop;
        blk = target;
      }
    }
    if (!target) {
      ++i;
      continue;
    }
    std::unique_ptr<ir::Op> moved = std::move(ops[i]);
    ops.erase(ops.begin() + static_cast<long>(i));
    moved->setParentBlock(target);
    auto& dst = target->ops();
    dst.insert(dst.begin() + static_cast<long>(ir::positionOf(*target, before)), std::move(moved));
  }
}

namespace {

// Positions in a block pointer's `elts` (Val::blockPtr).
enum Part : size_t { kBase, kShape, kStrides, kOffsets, kBlockShape, kOrder };

using ir::shapeText;

/// A tuple or list argument's entries; a lone value counts as one entry (as in Triton).
std::vector<Val> entries(const Val& v) {
  return v.kind == Val::Kind::Tuple ? v.elts : std::vector<Val>{v};
}

std::string entryCount(size_t n) {
  return std::to_string(n) + (n == 1 ? " entry" : " entries");
}

/// An integer scalar (a python int or a run-time integer) as a run-time i64.
ir::Value* toI64(Specializer& sp, const Val& v, SourceLoc loc, const std::string& what) {
  if (v.isIntLike()) return sp.toRuntime(v, loc, DType::I64);
  if (v.isRuntime() && v.type().isValue() && v.type().isScalar() && !v.type().isPointer() &&
      ir::isInt(v.type().elem))
    return sp.cast(v.v, DType::I64, loc);
  raiseError(loc, what + " must be integer scalars, got " + kindName(v));
}

std::vector<int64_t> ints(const Val& tuple) {
  std::vector<int64_t> r;
  for (const Val& e : tuple.elts) r.push_back(e.i);
  return r;
}

Val intTuple(const std::vector<int64_t>& xs) {
  std::vector<Val> elts;
  for (int64_t x : xs) elts.push_back(Val::integer(x));
  return Val::tuple(std::move(elts));
}

std::vector<ir::Value*> leaves(const Val& tuple) {
  std::vector<ir::Value*> r;
  for (const Val& e : tuple.elts) r.push_back(e.v);
  return r;
}

Val runtimeTuple(const std::vector<ir::Value*>& xs) {
  std::vector<Val> elts;
  for (ir::Value* x : xs) elts.push_back(Val::runtime(x));
  return Val::tuple(std::move(elts));
}

/// The dimensions boundary_check names, checked against the block pointer's rank.
std::set<int64_t> checkedDims(Specializer& sp, const BoundArgs& a, size_t rank,
                              const std::string& fn) {
  std::set<int64_t> dims;
  if (!a.has("boundary_check")) return dims;
  SourceLoc loc = a.loc("boundary_check");
  for (const Val& e : entries(a.get("boundary_check"))) {
    int64_t d = sp.constInt(e, loc, fn + "'s boundary_check", a.expr("boundary_check"));
    if (d < 0 || d >= static_cast<int64_t>(rank))
      raiseError(loc, fn + "'s boundary_check names dimension " + std::to_string(d) +
                          ", but the block pointer has rank " + std::to_string(rank) +
                          " (dimensions 0 to " + std::to_string(rank - 1) + ")");
    if (!dims.insert(d).second)
      raiseError(loc, fn + "'s boundary_check names dimension " + std::to_string(d) + " twice");
  }
  return dims;
}

/// `x` (1-D, along dimension `d` of a rank-`rank` block) with unit dimensions around it.
ir::Value* alongDim(Specializer& sp, ir::Value* x, size_t d, size_t rank, SourceLoc loc) {
  for (size_t i = 0; i < d; ++i) x = sp.expandDims(x, 0, loc);
  for (size_t i = d + 1; i < rank; ++i) x = sp.expandDims(x, static_cast<int64_t>(i), loc);
  return x;
}

/// The block's pointer tensor and, when `checked` is not empty, its in-bounds mask.
std::pair<ir::Value*, ir::Value*> materialize(Specializer& sp, const Val& p,
                                              const std::set<int64_t>& checked, SourceLoc loc) {
  ir::Block* block = sp.b.insertionBlock();
  size_t first = block->ops().size();
  std::vector<int64_t> shape = ints(p.elts[kBlockShape]);
  size_t rank = shape.size();
  Val offset, mask;
  for (size_t d = 0; d < rank; ++d) {
    ir::Value* lane = sp.cast(sp.b.arange(0, shape[d]), DType::I64, loc);
    Val coord =
        sp.evalBinOp(ast::BinOpKind::Add, p.elts[kOffsets].elts[d], Val::runtime(lane), loc);
    Val term = sp.evalBinOp(ast::BinOpKind::Mul, coord, p.elts[kStrides].elts[d], loc);
    term = Val::runtime(alongDim(sp, term.v, d, rank, loc));
    offset = d == 0 ? term : sp.evalBinOp(ast::BinOpKind::Add, offset, term, loc);
    if (!checked.count(static_cast<int64_t>(d))) continue;
    Val lower = sp.evalCompare(ast::CmpOpKind::GtE, coord, Val::integer(0), loc);
    Val upper = sp.evalCompare(ast::CmpOpKind::Lt, coord, p.elts[kShape].elts[d], loc);
    Val inside = sp.evalBinOp(ast::BinOpKind::BitAnd, lower, upper, loc);
    inside = Val::runtime(alongDim(sp, inside.v, d, rank, loc));
    mask = mask.isNone() ? inside : sp.evalBinOp(ast::BinOpKind::BitAnd, mask, inside, loc);
  }
  Val ptr = sp.evalBinOp(ast::BinOpKind::Add, p.elts[kBase], offset, loc);
  ir::Value* m = mask.isNone() ? nullptr : sp.broadcastTo(mask.v, shape, loc);
  ir::Value* ptrs = sp.broadcastTo(ptr.v, shape, loc);
  hoistLoopInvariants(block, first);
  return {ptrs, m};
}

} // namespace

Val tlMakeBlockPtr(Specializer& sp, const std::string& /*name*/, CallSite& call) {
  BoundArgs a(call, {"base", "shape", "strides", "offsets", "block_shape", "order"});
  const Val& base = a.get("base");
  if (!base.isRuntime() || !base.type().isPointer() || !base.type().isScalar())
    raiseError(a.loc("base"),
               "tl.make_block_ptr's base must be a scalar pointer, got " + kindName(base));
  std::vector<int64_t> block =
      sp.constShape(a.get("block_shape"), a.loc("block_shape"), "tl.make_block_ptr's block_shape",
                    a.expr("block_shape"));
  for (int64_t d : block)
    if (!isPowerOf2(d))
      raiseError(a.loc("block_shape"), "tl.make_block_ptr's block_shape " + shapeText(block) +
                                           " must have power-of-two dimensions (the block is a "
                                           "tensor)");
  size_t rank = block.size();
  for (const char* field : {"shape", "strides", "offsets", "order"}) {
    size_t n = entries(a.get(field)).size();
    if (n != rank)
      raiseError(a.loc(field), std::string("tl.make_block_ptr's ") + field + " has " +
                                   entryCount(n) + " but block_shape " + shapeText(block) +
                                   " has rank " + std::to_string(rank) +
                                   "; shape, strides, offsets, block_shape and order need one "
                                   "entry per dimension");
  }
  std::vector<int64_t> order;
  for (const Val& e : entries(a.get("order")))
    order.push_back(sp.constInt(e, a.loc("order"), "tl.make_block_ptr's order", a.expr("order")));
  std::vector<int64_t> sorted = order;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < rank; ++i)
    if (sorted[i] != static_cast<int64_t>(i))
      raiseError(a.loc("order"), "tl.make_block_ptr's order " + shapeText(order) +
                                     " must be a permutation of the dimensions 0 to " +
                                     std::to_string(rank - 1));
  auto dynamic = [&](const char* field) {
    std::vector<ir::Value*> xs;
    for (const Val& e : entries(a.get(field)))
      xs.push_back(toI64(sp, e, a.loc(field), std::string("tl.make_block_ptr's ") + field));
    return runtimeTuple(xs);
  };
  return Val::blockPtr(base, dynamic("shape"), dynamic("strides"), dynamic("offsets"),
                       intTuple(block), intTuple(order));
}

Val tlAdvance(Specializer& sp, const std::string& /*name*/, CallSite& call) {
  BoundArgs a(call, {"base", "offsets"});
  const Val& p = a.get("base");
  if (p.kind != Val::Kind::BlockPtr)
    raiseError(a.loc("base"),
               "tl.advance takes a block pointer made by tl.make_block_ptr, got " + kindName(p));
  std::vector<Val> deltas = entries(a.get("offsets"));
  std::vector<ir::Value*> offsets = leaves(p.elts[kOffsets]);
  if (deltas.size() != offsets.size())
    raiseError(a.loc("offsets"), "tl.advance got " + entryCount(deltas.size()) +
                                     " in offsets for a block pointer of rank " +
                                     std::to_string(offsets.size()) + "; give one per dimension");
  for (size_t d = 0; d < offsets.size(); ++d) {
    if (deltas[d].isIntLike() && deltas[d].i == 0 && deltas[d].kind == Val::Kind::Int) continue;
    ir::Value* delta = toI64(sp, deltas[d], a.loc("offsets"), "tl.advance's offsets");
    offsets[d] = sp.b.binary(OpCode::Add, offsets[d], delta);
  }
  Val r = p;
  r.elts[kOffsets] = runtimeTuple(offsets);
  return r;
}

Val blockPtrLoad(Specializer& sp, const BoundArgs& a, SourceLoc loc) {
  const Val& p = a.get("pointer");
  for (const char* arg : {"mask", "other"})
    if (a.has(arg))
      raiseError(a.loc(arg), std::string("tl.load from a block pointer takes no ") + arg +
                                 "; boundary_check=(dims...) masks the dimensions to check "
                                 "and padding_option= ('', 'zero' or 'nan') fills what lies "
                                 "outside");
  std::vector<int64_t> block = ints(p.elts[kBlockShape]);
  std::set<int64_t> checked = checkedDims(sp, a, block.size(), "tl.load");
  DType elem = p.elts[kBase].type().elem;
  std::string padding;
  if (a.has("padding_option")) {
    const Val& v = a.get("padding_option");
    if (v.kind != Val::Kind::String || (v.s != "" && v.s != "zero" && v.s != "nan"))
      raiseError(a.loc("padding_option"),
                 "tl.load's padding_option must be '', 'zero' or 'nan', got " + describe(v));
    padding = v.s;
  }
  if (padding == "nan" && !ir::isFloat(elem))
    raiseError(a.loc("padding_option"),
               "tl.load's padding_option='nan' needs a floating-point block pointer, this one "
               "points to " +
                   std::string(ir::tlName(elem)));
  auto [ptr, mask] = materialize(sp, p, checked, loc);
  ir::Value* other = nullptr;
  if (mask && padding == "zero")
    other = sp.constant(ir::isFloat(elem) ? Val::real(0.0) : Val::integer(0),
                        ir::Type::tensor(elem, block));
  if (mask && padding == "nan")
    other = sp.constant(Val::real(std::nan("")), ir::Type::tensor(elem, block));
  std::vector<ir::Value*> ops{ptr};
  if (mask) ops.push_back(mask);
  if (other) ops.push_back(other);
  std::vector<ir::NamedAttr> attrs = {ir::attr::Load::make::hasMask(mask != nullptr),
                                      ir::attr::Load::make::hasOther(other != nullptr)};
  std::string cache =
      cacheModifier(a.get("cache_modifier"), a.loc("cache_modifier"), OpCode::Load, "tl.load");
  std::string evict =
      evictionPolicy(a.get("eviction_policy"), a.loc("eviction_policy"), OpCode::Load, "tl.load");
  if (!cache.empty()) attrs.push_back(ir::attr::Load::make::cache(cache));
  if (!evict.empty()) attrs.push_back(ir::attr::Load::make::evict(evict));
  if (a.has("volatile") && sp.constBool(a.get("volatile"), a.loc("volatile"), "volatile"))
    attrs.push_back(ir::attr::Load::make::isVolatile(true));
  return Val::runtime(sp.b.create1(OpCode::Load, ops, ir::Type::tensor(elem, block), attrs));
}

void blockPtrStore(Specializer& sp, const BoundArgs& a, SourceLoc loc) {
  const Val& p = a.get("pointer");
  if (a.has("mask"))
    raiseError(a.loc("mask"), "tl.store to a block pointer takes no mask; boundary_check=(dims...) "
                              "masks the dimensions to check");
  std::vector<int64_t> block = ints(p.elts[kBlockShape]);
  std::set<int64_t> checked = checkedDims(sp, a, block.size(), "tl.store");
  DType elem = p.elts[kBase].type().elem;
  const Val& v = a.get("value");
  ir::Value* value =
      v.isNumber()
          ? sp.constant(v, ir::Type::scalar(elem))
          : sp.cast(sp.requireTensorOrScalar(v, a.loc("value"), "tl.store's value"), elem, loc);
  const std::vector<int64_t>& vs = value->type().shape;
  bool fits = vs.empty() || vs.size() == block.size();
  for (size_t d = 0; fits && d < vs.size(); ++d) fits = vs[d] == block[d] || vs[d] == 1;
  if (!fits)
    raiseError(a.loc("value"), "tl.store to a block pointer of block shape " + shapeText(block) +
                                   " needs a value of that shape (or a scalar, or one with "
                                   "size-1 dimensions that broadcast to it), got " +
                                   value->type().str());
  value = sp.broadcastTo(value, block, loc);
  auto [ptr, mask] = materialize(sp, p, checked, loc);
  std::vector<ir::Value*> ops{ptr, value};
  if (mask) ops.push_back(mask);
  std::vector<ir::NamedAttr> attrs = {ir::attr::Store::make::hasMask(mask != nullptr)};
  std::string cache =
      cacheModifier(a.get("cache_modifier"), a.loc("cache_modifier"), OpCode::Store, "tl.store");
  std::string evict =
      evictionPolicy(a.get("eviction_policy"), a.loc("eviction_policy"), OpCode::Store, "tl.store");
  if (!cache.empty()) attrs.push_back(ir::attr::Store::make::cache(cache));
  if (!evict.empty()) attrs.push_back(ir::attr::Store::make::evict(evict));
  sp.b.create(OpCode::Store, ops, {}, attrs);
}

Val blockPtrAttr(const Val& p, const std::string& name, SourceLoc loc) {
  static const char* const fields[] = {"base",    "shape",       "strides",
                                       "offsets", "block_shape", "order"};
  for (size_t i = 0; i < std::size(fields); ++i)
    if (name == fields[i]) return p.elts[i];
  if (name == "dtype") return Val::dtypeOf(p.elts[kBase].type().elem, /*pointer=*/true);
  if (name == "advance" || name == "load" || name == "store") return Val::method(p, name);
  raiseError(loc, "a block pointer has no attribute '" + name +
                      "'; it has base, shape, strides, offsets, block_shape, order, dtype and the "
                      "methods advance, load and store");
}

} // namespace ww::specialize
