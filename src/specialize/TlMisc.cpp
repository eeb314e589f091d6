// tl.gather, tl.map_elementwise, tensor.item() and Python's getattr / hasattr in kernels, with
// Triton's argument checks as located errors.
//
// tl.gather is one Tile IR op (gather): the interpreter indexes the source directly, the PTX
// backend goes through shared memory (codegen/Gather.cpp). tl.map_elementwise specializes the
// @jit scalar function once, on scalar block arguments, into the region of a map_elementwise op
// that every back end runs once per element (or per `pack` elements), so the function may branch
// on its scalars as ordinary kernel code does.
#include "specialize/TlMisc.h"

#include "frontend/Diagnostics.h"
#include "ir/OpAttrs.h"
#include "specialize/SpecializerImpl.h"

#include <algorithm>

namespace ww::specialize {

using ir::DType;
using ir::OpCode;

namespace {

using ir::shapeText;

/// The dtype predicates a kernel may call (`x.dtype.is_fp16()`).
bool isDTypePredicate(const std::string& name) {
  static const char* const names[] = {"is_ptr",          "is_floating", "is_int", "is_int_signed",
                                      "is_int_unsigned", "is_bool",     "is_fp8", "is_fp16",
                                      "is_bf16",         "is_fp32",     "is_fp64"};
  return std::find(std::begin(names), std::end(names), name) != std::end(names);
}

} // namespace

Val tlGather(Specializer& sp, const std::string& /*name*/, CallSite& call) {
  const std::string& fn = call.callee;
  BoundArgs a(call, {"src", "index", "axis"});
  const Val &vs = a.get("src"), &vi = a.get("index");
  if (!vs.isRuntime() || !vs.type().isTensor() || vs.type().isPointer())
    raiseError(a.loc("src"), fn + "'s src must be a tensor of numbers, got " + kindName(vs));
  if (!vi.isRuntime() || !vi.type().isTensor() || vi.type().isPointer() ||
      !ir::isInt(vi.type().elem) || vi.type().elem == DType::I1)
    raiseError(a.loc("index"), fn + "'s index must be a tensor of integers, got " + kindName(vi));
  ir::Value* src = vs.v;
  ir::Value* index = vi.v;
  const std::vector<int64_t>& ss = src->type().shape;
  const std::vector<int64_t>& is = index->type().shape;
  if (ss.size() != is.size())
    raiseError(a.loc("index"), fn + "'s src and index must have the same rank, got " +
                                   shapeText(ss) + " and " + shapeText(is));
  int64_t rank = static_cast<int64_t>(ss.size());
  int64_t axis = sp.constInt(a.get("axis"), a.loc("axis"), fn + "'s axis", a.expr("axis"));
  if (axis < -rank || axis >= rank)
    raiseError(a.loc("axis"), fn + "'s axis " + std::to_string(axis) +
                                  " is out of range for tensors of rank " + std::to_string(rank));
  if (axis < 0) axis += rank;
  for (int64_t d = 0; d < rank; ++d)
    if (d != axis && ss[size_t(d)] != is[size_t(d)])
      raiseError(a.loc("index"),
                 fn + "'s index must match src in every dimension but the gathered axis " +
                     std::to_string(axis) + ": dimension " + std::to_string(d) + " is " +
                     std::to_string(is[size_t(d)]) + " in index " + shapeText(is) + " and " +
                     std::to_string(ss[size_t(d)]) + " in src " + shapeText(ss));
  return Val::runtime(sp.b.create1(OpCode::Gather, {src, index}, src->type().withShape(is),
                                   {ir::attr::Gather::make::axis(axis)}));
}

ir::Value* unsplat(Specializer& sp, ir::Value* x, SourceLoc loc) {
  // A max over the one element (exact; every thread gets it), as tl.split of a [2] tensor does.
  ir::Value* row = sp.reshape(x, {1}, loc);
  return sp.b.create1(OpCode::Reduce, {row}, ir::Type::tensor(x->type().elem, {}),
                      {ir::attr::Reduce::make::axis(0), ir::attr::Reduce::make::kind("max")});
}

Val tlItem(Specializer& sp, const std::string& /*name*/, CallSite& call) {
  BoundArgs a(call, {"input"});
  ir::Value* x = sp.requireTensorOrScalar(a.get("input"), a.loc("input"), "item()'s tensor");
  if (x->type().isScalar()) return Val::runtime(x);
  if (x->type().numElements() != 1)
    raiseError(call.loc, "item() needs a tensor of one element, got " + x->type().str());
  return Val::runtime(unsplat(sp, x, call.loc));
}

Val tlMapElementwise(Specializer& sp, const std::string& /*name*/, CallSite& call) {
  SourceLoc loc = call.loc;
  const std::string& fn = call.callee;
  BoundArgs a(call, {"scalar_fn", "*args", "pack="});
  const Val& f = a.get("scalar_fn");
  if (f.kind != Val::Kind::Function)
    raiseError(a.loc("scalar_fn"), fn + "'s scalar_fn must be a @jit function, got " + describe(f));
  int64_t pack = 1;
  if (a.has("pack")) pack = sp.constInt(a.get("pack"), a.loc("pack"), fn + "'s pack");
  if (pack < 1) raiseError(a.loc("pack"), fn + "'s pack must be >= 1, got " + std::to_string(pack));
  const std::vector<Val>& args = a.get("args").elts;
  if (args.empty()) raiseError(loc, fn + " needs at least one input tensor");
  const std::vector<SourceLoc>& locs = call.argLocs;
  auto argLoc = [&](size_t i) { return i + 1 < locs.size() ? locs[i + 1] : loc; };

  // The inputs as run-time values of one shape (Python numbers take their usual types).
  std::vector<ir::Value*> inputs;
  std::vector<int64_t> shape;
  for (size_t i = 0; i < args.size(); ++i) {
    const Val& v = args[i];
    if (!(v.isNumber() || (v.isRuntime() && v.type().isValue() && !v.type().isPointer())))
      raiseError(argLoc(i), fn + "'s inputs must be numbers or tensors of numbers; input " +
                                std::to_string(i) + " is " + kindName(v));
    inputs.push_back(sp.toRuntime(v, argLoc(i)));
    shape = sp.broadcastShapes(shape, inputs.back()->type().shape, argLoc(i), fn.c_str());
  }
  for (ir::Value*& v : inputs) v = sp.broadcastTo(v, shape, loc);

  ir::Op* op =
      sp.b.create(OpCode::MapElementwise, inputs, {}, {ir::attr::MapElementwise::make::pack(pack)});
  ir::Block* region = op->addRegion();
  CallSite cs;
  cs.loc = loc;
  cs.callee = f.fn.def->name;
  for (ir::Value* v : inputs)
    for (int64_t j = 0; j < pack; ++j) {
      cs.args.push_back(Val::runtime(region->addArg(ir::Type::scalar(v->type().elem))));
      cs.argLocs.push_back(loc);
      cs.argExprs.push_back(nullptr);
    }
  ir::Block* outer = sp.b.insertionBlock();
  sp.b.setInsertionBlock(region);
  Val r = sp.callFunction(f.fn, cs);
  std::vector<Val> rs = r.kind == Val::Kind::Tuple ? r.elts : std::vector<Val>{r};
  std::vector<ir::Value*> yields;
  for (size_t k = 0; k < rs.size(); ++k) {
    const Val& v = rs[k];
    if (!(v.isNumber() ||
          (v.isRuntime() && v.type().isValue() && v.type().isScalar() && !v.type().isPointer())))
      raiseError(loc, fn + "'s scalar_fn '" + f.fn.def->name +
                          "' must return scalars (one value, or a tuple of them); value " +
                          std::to_string(k) + " is " + kindName(v));
    yields.push_back(sp.toRuntime(v, loc));
  }
  if (yields.empty() || yields.size() % size_t(pack) != 0)
    raiseError(loc, fn + "'s scalar_fn '" + f.fn.def->name + "' returns " +
                        std::to_string(yields.size()) +
                        " values, which is not a multiple of pack=" + std::to_string(pack) +
                        " (with pack=N it returns N values per result)");
  const size_t numResults = yields.size() / size_t(pack);
  for (size_t k = 0; k < numResults; ++k)
    for (int64_t j = 1; j < pack; ++j)
      if (yields[k * size_t(pack) + size_t(j)]->type().elem !=
          yields[k * size_t(pack)]->type().elem)
        raiseError(loc,
                   fn + "'s scalar_fn '" + f.fn.def->name + "' returns result " +
                       std::to_string(k) + " as " +
                       std::string(ir::tlName(yields[k * size_t(pack)]->type().elem)) + " and as " +
                       std::string(ir::tlName(yields[k * size_t(pack) + size_t(j)]->type().elem)) +
                       " within one pack; the " + std::to_string(pack) +
                       " values of a result must have one type");
  sp.b.create(OpCode::Yield, yields, {});
  sp.b.setInsertionBlock(outer);
  std::vector<Val> out;
  for (size_t k = 0; k < numResults; ++k)
    out.push_back(Val::runtime(
        op->addResult(ir::Type::tensor(yields[k * size_t(pack)]->type().elem, shape))));
  return out.size() == 1 ? out[0] : Val::tuple(std::move(out));
}

Val pythonGetAttr(Specializer& sp, const std::string& name, CallSite& call) {
  const bool has = name == "hasattr";
  if (!call.kwNames.empty()) raiseError(call.kwLocs[0], name + "() takes no keyword arguments");
  size_t n = call.args.size();
  if (n < 2 || n > (has ? 2u : 3u))
    raiseError(call.loc,
               has ? "hasattr() takes 2 arguments (object, name), got " + std::to_string(n)
                   : "getattr() takes 2 or 3 arguments (object, name[, default]), got " +
                         std::to_string(n));
  const Val& obj = call.args[0];
  const Val& attr = call.args[1];
  if (attr.kind != Val::Kind::String)
    raiseError(call.argLocs[1],
               name + "()'s attribute name must be a compile-time string, got " + kindName(attr));
  // A dtype answers any is_* name with a method that checks the name when called.
  if (has && obj.kind == Val::Kind::DType && attr.s.starts_with("is_"))
    return Val::boolean(isDTypePredicate(attr.s));
  try {
    Val v = sp.getAttr(obj, attr.s, call.argLocs[1]);
    return has ? Val::boolean(true) : v;
  } catch (const CompileError&) {
    if (has) return Val::boolean(false);
    if (n == 3) return call.args[2];
    throw;
  }
}

} // namespace ww::specialize
