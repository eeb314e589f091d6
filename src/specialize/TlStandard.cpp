// Triton's standard-library shape functions (tl.flip, tl.interleave, tl.squeeze, tl.unsqueeze,
// tl.sort, tl.topk, tl.assume) built from the Tile IR ops other builtins already use (reshape,
// permute, split, join, compare, reduce), so that every back end runs them without ops of their
// own; and tl.histogram, which is its own op (counted with shared-memory atomics on the GPU).
#include "specialize/TlStandard.h"

#include "ir/OpAttrs.h"
#include "specialize/SpecializerImpl.h"
#include "support/MathExtras.h"

#include <numeric>

namespace ww::specialize {

using ir::DType;
using ir::OpCode;

namespace {

using ir::shapeText;

/// `dim` of a tensor of `rank`, negative counting from the end, checked.
int64_t normalizeDim(int64_t dim, size_t rank, SourceLoc loc, const std::string& fn) {
  int64_t r = static_cast<int64_t>(rank);
  if (dim < -r || dim >= r)
    raiseError(loc, fn + "'s dim " + std::to_string(dim) +
                        " is out of range for a tensor of rank " + std::to_string(r));
  return dim < 0 ? dim + r : dim;
}

ir::Value* permute(Specializer& sp, ir::Value* x, const std::vector<int64_t>& order) {
  bool identity = true;
  for (size_t i = 0; i < order.size(); ++i) identity = identity && order[i] == int64_t(i);
  if (identity) return x;
  std::vector<int64_t> shape;
  for (int64_t d : order) shape.push_back(x->type().shape[static_cast<size_t>(d)]);
  return sp.b.create1(OpCode::Permute, {x}, x->type().withShape(shape),
                      {ir::attr::Permute::make::order(order)});
}

/// Swaps the two halves of axis `axis` (of size 2) of `x`: the axis is moved last, split into
/// its halves, joined the other way round and moved back.
ir::Value* swapPair(Specializer& sp, ir::Value* x, int64_t axis) {
  size_t rank = x->type().shape.size();
  std::vector<int64_t> order;
  for (size_t i = 0; i < rank; ++i)
    if (int64_t(i) != axis) order.push_back(int64_t(i));
  order.push_back(axis);
  ir::Value* moved = permute(sp, x, order);
  std::vector<int64_t> half(moved->type().shape.begin(), moved->type().shape.end() - 1);
  ir::Op* halves = sp.b.create(OpCode::Split, {moved},
                               {moved->type().withShape(half), moved->type().withShape(half)});
  ir::Value* swapped =
      sp.b.create1(OpCode::Join, {halves->result(1), halves->result(0)}, moved->type());
  std::vector<int64_t> inverse(rank);
  for (size_t i = 0; i < rank; ++i) inverse[static_cast<size_t>(order[i])] = int64_t(i);
  return permute(sp, swapped, inverse);
}

/// arange(0, 2) along axis rank-1-j of a rank-`rank` shape of ones, as i1: whether an element
/// sits in the upper half of its pair along that axis.
ir::Value* upperHalf(Specializer& sp, size_t rank, int64_t j, SourceLoc loc) {
  std::vector<int64_t> shape(rank, 1);
  shape[rank - 1 - static_cast<size_t>(j)] = 2;
  return sp.toI1(sp.reshape(sp.b.arange(0, 2), shape, loc), loc);
}

/// One compare-and-swap step of a bitonic network on a [2, 2, ..., 2] tensor, between the pairs
/// of its i-th innermost axis: a pair ends ascending where `flip` is false, descending where it
/// is true.
ir::Value* compareAndSwap(Specializer& sp, ir::Value* x, ir::Value* flip, int64_t i,
                          SourceLoc loc) {
  const std::vector<int64_t>& shape = x->type().shape;
  size_t rank = shape.size();
  ir::Value* y = swapPair(sp, x, static_cast<int64_t>(rank) - 1 - i);
  ir::Value* right = sp.broadcastTo(upperHalf(sp, rank, i, loc), shape, loc);
  ir::Value* order = sp.b.binary(OpCode::Xor, sp.broadcastTo(flip, shape, loc), right);
  ir::Value* take = sp.b.binary(OpCode::Xor, sp.b.cmp("gt", x, y), order);
  return sp.b.create1(OpCode::Select, {take, y, x}, x->type());
}

/// The bitonic merge of `stage` levels; order 0 ascending, 1 descending, 2 alternating by the
/// bit above the merged ones.
ir::Value* bitonicMerge(Specializer& sp, ir::Value* h, int64_t stage, int order, SourceLoc loc) {
  size_t rank = h->type().shape.size();
  ir::Value* flip = order == 2 ? upperHalf(sp, rank, stage, loc)
                               : sp.b.constInt(order, ir::Type::scalar(DType::I1));
  for (int64_t i = 0; i < stage; ++i) h = compareAndSwap(sp, h, flip, stage - 1 - i, loc);
  return h;
}

int64_t log2Exact(int64_t n) {
  int64_t r = 0;
  while ((int64_t(1) << r) < n) ++r;
  return r;
}

} // namespace

Val tlSortTopk(Specializer& sp, const std::string& name, CallSite& call) {
  SourceLoc loc = call.loc;
  const std::string& fn = call.callee;
  bool topk = name == "topk";
  BoundArgs a = topk ? BoundArgs(call, {"x", "k", "dim=", "descending="})
                     : BoundArgs(call, {"x", "dim=", "descending="});
  ir::Value* x = sp.requireTensorOrScalar(a.get("x"), a.loc("x"), fn + "'s input");
  std::vector<int64_t> shape = x->type().shape;
  if (shape.empty()) raiseError(loc, fn + " needs a tensor, got a scalar");
  int64_t last = static_cast<int64_t>(shape.size()) - 1;
  if (a.has("dim")) {
    int64_t dim =
        normalizeDim(sp.constInt(a.get("dim"), a.loc("dim"), fn + "'s dim", a.expr("dim")),
                     shape.size(), a.loc("dim"), fn);
    if (dim != last)
      raiseError(a.loc("dim"), fn + " sorts along the last dimension only (dim " +
                                   std::to_string(last) + "), got dim " + std::to_string(dim));
  }
  bool descending = topk;
  if (a.has("descending")) {
    const Val& d = a.get("descending");
    descending = d.kind == Val::Kind::Int
                     ? d.i != 0
                     : sp.constBool(d, a.loc("descending"), fn + "'s descending");
  }
  int64_t numel = x->type().numElements();
  for (int64_t d : shape)
    if (!isPowerOf2(d))
      raiseError(loc, fn + " needs power-of-2 dimensions, got " + shapeText(shape));
  int64_t n = shape.back();
  int64_t logN = log2Exact(n), dims = log2Exact(numel);
  int64_t logK = logN;
  if (topk) {
    int64_t k = sp.constInt(a.get("k"), a.loc("k"), fn + "'s k", a.expr("k"));
    if (k < 1 || k > n || !isPowerOf2(k))
      raiseError(a.loc("k"), fn + "'s k must be a power of 2 from 1 to " + std::to_string(n) +
                                 ", got " + std::to_string(k));
    logK = log2Exact(k);
  }
  // Bitonic sort on the tensor viewed as a hypercube of log2(numel) axes of size 2: the first
  // log2(k) merges sort runs of k; each further level keeps the larger (smaller) half of a pair
  // of runs and merges it again (bitonic top-k).
  ir::Value* h =
      sp.reshape(x, dims ? std::vector<int64_t>(size_t(dims), 2) : std::vector<int64_t>{1}, loc);
  int order = descending ? 1 : 0;
  for (int64_t i = 1; i <= logK; ++i) h = bitonicMerge(sp, h, i, i < logN ? 2 : order, loc);
  for (int64_t i = logK + 1; i <= logN; ++i) {
    std::vector<int64_t> hs = h->type().shape;
    int64_t axis = static_cast<int64_t>(hs.size()) - 1 - logK;
    hs.erase(hs.begin() + axis);
    h = sp.b.create1(OpCode::Reduce, {h}, h->type().withShape(hs),
                     {ir::attr::Reduce::make::axis(axis),
                      ir::attr::Reduce::make::kind(descending ? "max" : "min")});
    h = bitonicMerge(sp, h, logK, i < logN ? 2 : order, loc);
  }
  std::vector<int64_t> out = shape;
  out.back() = int64_t(1) << logK;
  return Val::runtime(sp.reshape(h, out, loc));
}

Val tlFlip(Specializer& sp, const std::string& /*name*/, CallSite& call) {
  SourceLoc loc = call.loc;
  const std::string& fn = call.callee;
  BoundArgs a(call, {"x", "dim="});
  ir::Value* x = sp.requireTensorOrScalar(a.get("x"), a.loc("x"), fn + "'s input");
  std::vector<int64_t> shape = x->type().shape;
  if (shape.empty()) raiseError(loc, fn + " needs a tensor, got a scalar");
  int64_t dim = static_cast<int64_t>(shape.size()) - 1;
  if (a.has("dim")) dim = sp.constInt(a.get("dim"), a.loc("dim"), fn + "'s dim", a.expr("dim"));
  dim = normalizeDim(dim, shape.size(), a.loc("dim"), fn);
  int64_t n = shape[static_cast<size_t>(dim)];
  if (!isPowerOf2(n))
    raiseError(loc, fn + " needs a power-of-2 size along dim " + std::to_string(dim) + ", got " +
                        shapeText(shape));
  if (n == 1) return Val::runtime(x);
  // Element i of the axis goes to n-1-i: with the axis viewed as log2(n) axes of size 2 (a
  // leading 1 keeps every split above rank 0), that complements each bit, i.e. swaps each pair.
  int64_t steps = 0;
  while ((int64_t(1) << steps) < n) ++steps;
  std::vector<int64_t> bits = {1};
  bits.insert(bits.end(), shape.begin(), shape.begin() + dim);
  for (int64_t i = 0; i < steps; ++i) bits.push_back(2);
  bits.insert(bits.end(), shape.begin() + dim + 1, shape.end());
  ir::Value* y = sp.reshape(x, bits, loc);
  for (int64_t i = 0; i < steps; ++i) y = swapPair(sp, y, 1 + dim + i);
  return Val::runtime(sp.reshape(y, shape, loc));
}

Val tlInterleave(Specializer& sp, const std::string& /*name*/, CallSite& call) {
  SourceLoc loc = call.loc;
  BoundArgs a(call, {"a", "b"});
  const Val &va = a.get("a"), &vb = a.get("b");
  for (const Val* v : {&va, &vb})
    if (!(v->isNumber() || (v->isRuntime() && v->type().isValue())))
      raiseError(loc, "tl.interleave needs numbers or tensors, got " + kindName(*v));
  DType ta = va.isRuntime() ? va.type().elem : Specializer::pythonScalarDType(va);
  DType tb = vb.isRuntime() ? vb.type().elem : Specializer::pythonScalarDType(vb);
  DType dt =
      sp.computationType(ta, !va.isRuntime(), tb, !vb.isRuntime(), false, loc, "tl.interleave");
  auto [x, y] = sp.unify(va, vb, loc, dt, "tl.interleave");
  std::vector<int64_t> shape = x->type().shape;
  if (shape.empty()) {
    // Two scalars interleave into a [2] tensor.
    x = sp.reshape(x, {1}, loc);
    y = sp.reshape(y, {1}, loc);
  }
  std::vector<int64_t> joined = x->type().shape;
  joined.push_back(2);
  ir::Value* j = sp.b.create1(OpCode::Join, {x, y}, x->type().withShape(joined));
  std::vector<int64_t> out(joined.begin(), joined.end() - 1);
  out.back() *= 2;
  return Val::runtime(sp.reshape(j, out, loc));
}

Val tlSqueezeUnsqueeze(Specializer& sp, const std::string& name, CallSite& call) {
  SourceLoc loc = call.loc;
  const std::string& fn = call.callee;
  BoundArgs a(call, {"x", "dim"});
  ir::Value* x = sp.requireTensorOrScalar(a.get("x"), a.loc("x"), fn + "'s input");
  int64_t dim = sp.constInt(a.get("dim"), a.loc("dim"), fn + "'s dim", a.expr("dim"));
  std::vector<int64_t> shape = x->type().shape;
  if (name == "unsqueeze") return Val::runtime(sp.expandDims(x, dim, loc));
  if (shape.empty()) raiseError(loc, fn + " needs a tensor, got a scalar");
  dim = normalizeDim(dim, shape.size(), a.loc("dim"), fn);
  if (shape[static_cast<size_t>(dim)] != 1)
    raiseError(loc, fn + " can only remove a dimension of size 1; dim " + std::to_string(dim) +
                        " of " + shapeText(shape) + " has size " +
                        std::to_string(shape[static_cast<size_t>(dim)]));
  shape.erase(shape.begin() + dim);
  return Val::runtime(sp.reshape(x, shape, loc));
}

Val tlHistogram(Specializer& sp, const std::string& /*name*/, CallSite& call) {
  SourceLoc loc = call.loc;
  const std::string& fn = call.callee;
  BoundArgs a(call, {"input", "num_bins", "mask="});
  ir::Value* x = sp.requireTensorOrScalar(a.get("input"), a.loc("input"), fn + "'s input");
  if (x->type().shape.size() != 1 || !ir::isInt(x->type().elem) || x->type().elem == DType::I1)
    raiseError(a.loc("input"), fn + " needs a 1-D tensor of integers, got " + x->type().str());
  int64_t bins =
      sp.constInt(a.get("num_bins"), a.loc("num_bins"), fn + "'s num_bins", a.expr("num_bins"));
  if (bins < 1 || !isPowerOf2(bins))
    raiseError(a.loc("num_bins"),
               fn + "'s num_bins must be a power of 2, got " + std::to_string(bins));
  std::vector<ir::Value*> operands = {x};
  std::vector<ir::NamedAttr> attrs = {ir::attr::Histogram::make::bins(bins)};
  if (a.has("mask")) {
    ir::Value* mask =
        sp.toI1(sp.requireTensorOrScalar(a.get("mask"), a.loc("mask"), fn + "'s mask"), loc);
    operands.push_back(sp.broadcastTo(mask, x->type().shape, loc));
    attrs.push_back(ir::attr::Histogram::make::hasMask(true));
  }
  return Val::runtime(
      sp.b.create1(OpCode::Histogram, operands, ir::Type::tensor(DType::I32, {bins}), attrs));
}

Val tlSwizzle2d(Specializer& sp, const std::string& /*name*/, CallSite& call) {
  // Row-major (i, j) of a size_i x size_j grid renumbered column-major within each group of
  // size_g rows (the last group may be shorter), as Triton's standard library computes it; each
  // step folds when its operands are compile-time values and is a run-time op otherwise.
  using ast::BinOpKind;
  SourceLoc loc = call.loc;
  const std::string& fn = call.callee;
  BoundArgs a(call, {"i", "j", "size_i", "size_j", "size_g"});
  for (const char* p : {"i", "j", "size_i", "size_j", "size_g"}) {
    const Val& v = a.get(p);
    bool ok = v.isIntLike() || (v.isRuntime() && v.type().isValue() && !v.type().isPointer() &&
                                ir::isInt(v.type().elem));
    if (!ok)
      raiseError(a.loc(p),
                 fn + "'s " + p + " must be an integer or an integer tensor, got " + kindName(v));
  }
  auto op = [&](BinOpKind k, const Val& x, const Val& y) { return sp.evalBinOp(k, x, y, loc); };
  Val sizeJ = a.get("size_j"), sizeG = a.get("size_g");
  Val ij = op(BinOpKind::Add, op(BinOpKind::Mul, a.get("i"), sizeJ), a.get("j"));
  Val sizeGJ = op(BinOpKind::Mul, sizeG, sizeJ);
  Val offI = op(BinOpKind::Mul, op(BinOpKind::FloorDiv, ij, sizeGJ), sizeG);
  Val rows = op(BinOpKind::Sub, a.get("size_i"), offI);
  // The last group may have fewer rows.
  Val groupRows =
      rows.isConstexpr() && sizeG.isConstexpr()
          ? (truthy(sp.constCompare(ast::CmpOpKind::Lt, rows, sizeG, loc)) ? rows : sizeG)
          : Val::runtime(sp.minMax(false, rows, sizeG, loc));
  Val inGroup = op(BinOpKind::Mod, ij, sizeGJ);
  Val newI = op(BinOpKind::Add, offI, op(BinOpKind::Mod, inGroup, groupRows));
  Val newJ = op(BinOpKind::FloorDiv, inGroup, groupRows);
  return Val::tuple({newI, newJ});
}

Val tlAssume(Specializer& sp, const std::string& /*name*/, CallSite& call) {
  // A promise to the optimizer; warpweave checks that it is a condition and otherwise ignores it.
  // As in Triton (whose assume op takes an i1), a condition is a boolean: a comparison, a bool
  // tensor or a constexpr bool (False is accepted, as Triton does: a broken promise, not a check).
  (void)sp;
  BoundArgs a(call, {"cond"});
  const Val& c = a.get("cond");
  bool boolean = c.isRuntime() ? c.type().elem == DType::I1 : c.kind == Val::Kind::Bool;
  if (!boolean)
    raiseError(a.loc("cond"),
               "tl.assume expects a boolean condition (a comparison), got " + kindName(c));
  return Val::none();
}

Val tlCondition(Specializer& sp, const std::string& /*name*/, CallSite& call) {
  // Triton's wrapper of a while loop's condition, the `while` form of tl.range: its options are
  // hints to Triton's loop passes (disable_licm: LLVM's loop-invariant code motion). warpweave
  // neither pipelines while loops nor hoists out of them what those hints control, so the
  // options must be compile-time values and change nothing; the wrapper is its condition.
  (void)sp;
  static const char* const kOptions[] = {
      "num_stages", "loop_unroll_factor", "disallow_acc_multi_buffer",
      "flatten",    "warp_specialize",    "disable_licm"};
  BoundArgs a(call, {"arg1", "num_stages=", "loop_unroll_factor=", "disallow_acc_multi_buffer=",
                     "flatten=", "warp_specialize=", "disable_licm="});
  for (const char* k : kOptions)
    if (a.has(k) && !a.get(k).isConstexpr())
      raiseError(a.loc(k), std::string("tl.condition's ") + k +
                               "= must be a compile-time value, got " + kindName(a.get(k)));
  return a.get("arg1");
}

} // namespace ww::specialize
