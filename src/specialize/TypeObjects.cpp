// `x.type` in kernels, with Triton's values: a compile-time value's type is
// `constexpr_type(value)` (equal when the values are), a scalar's is its dtype (tl.int32,
// tl.pointer_type(tl.float16)), a tensor's a block type (element type and shape), and a tuple's
// the tuple of its elements' types. They are compile-time objects (Val::Kind::Object, named by
// `s`, their parts in `elts`) that `==`, tl.static_assert and their attributes read.
#include "specialize/TypeObjects.h"
#include "specialize/SpecializerImpl.h"

namespace ww::specialize {

bool isTypeObject(const Val& v) {
  return v.kind == Val::Kind::Object &&
         (v.s == "constexpr_type" || v.s == "block_type" || v.s == "tuple_type");
}

Val typeOf(const Val& v, SourceLoc loc) {
  if (v.kind == Val::Kind::Tuple) {
    std::vector<Val> types;
    for (const Val& e : v.elts) types.push_back(typeOf(e, loc));
    return Val::object("tuple_type", 0, std::move(types));
  }
  if (v.isRuntime()) {
    const ir::Type& t = v.type();
    if (!t.isValue())
      raiseError(loc, kindName(v) + " has no attribute 'type' (numbers, pointers and tensors do)");
    Val elem = Val::dtypeOf(t.elem, t.isPointer());
    if (t.isScalar()) return elem;
    std::vector<Val> dims;
    for (int64_t d : t.shape) dims.push_back(Val::integer(d));
    return Val::object("block_type", 0, {elem, Val::tuple(std::move(dims))});
  }
  if (v.kind == Val::Kind::BlockPtr || v.kind == Val::Kind::Object || v.kind == Val::Kind::Method)
    raiseError(loc, describe(v) + " has no attribute 'type'");
  return Val::object("constexpr_type", 0, {v});
}

Val typeObjectAttr(const Val& t, const std::string& name, SourceLoc loc) {
  if (t.s == "constexpr_type" && name == "value") return t.elts[0];
  if (t.s == "block_type") {
    if (name == "element_ty" || name == "scalar") return t.elts[0];
    if (name == "shape") return t.elts[1];
    if (name == "numel") {
      int64_t n = 1;
      for (const Val& d : t.elts[1].elts) n *= d.i;
      return Val::integer(n);
    }
    if (name == "is_block" || name == "is_ptr") return Val::method(t, name);
  }
  if (t.s == "tuple_type" && name == "types") return Val::tuple(t.elts);
  raiseError(loc, describeTypeObject(t) + " has no attribute '" + name + "'");
}

Val typeObjectMethod(const Val& t, const std::string& name, const CallSite& call) {
  if (!call.args.empty() || !call.kwNames.empty())
    raiseError(call.loc, "block_type." + name + "() takes no arguments");
  if (name == "is_block") return Val::boolean(true);
  if (name == "is_ptr") return Val::boolean(false); // a block of pointers is not a pointer type
  raiseError(call.loc, describeTypeObject(t) + " has no method '" + name + "'");
}

bool typeObjectsEqual(const Val& a, const Val& b) {
  if (a.s != b.s || a.elts.size() != b.elts.size()) return false;
  for (size_t i = 0; i < a.elts.size(); ++i) {
    const Val& x = a.elts[i];
    const Val& y = b.elts[i];
    bool same = isTypeObject(x) ? isTypeObject(y) && typeObjectsEqual(x, y)
                                : x.kind == y.kind && constexprEqual(x, y);
    // constexpr_type(1) == constexpr_type(True) in Python (1 == True); other kinds must agree
    if (a.s == "constexpr_type") same = constexprEqual(x, y);
    if (!same) return false;
  }
  return true;
}

std::string describeTypeObject(const Val& t) {
  if (t.s == "constexpr_type") return "constexpr_type[" + describe(t.elts[0]) + "]";
  if (t.s == "block_type") {
    std::string dims;
    for (const Val& d : t.elts[1].elts) dims += (dims.empty() ? "" : ", ") + std::to_string(d.i);
    return "<[" + dims + "], " + describe(t.elts[0]) + ">";
  }
  std::string parts;
  for (const Val& e : t.elts)
    parts += (parts.empty() ? "" : ", ") + (isTypeObject(e) ? describeTypeObject(e) : describe(e));
  return "tuple_type(" + parts + ")";
}

} // namespace ww::specialize
