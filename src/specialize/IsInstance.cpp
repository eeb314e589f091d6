#include "specialize/IsInstance.h"

#include "frontend/Diagnostics.h"

namespace ww::specialize {

namespace {

/// Whether x is an instance of the type object a kernel spells `cls` (Python's builtins bare, the
/// language's with "tl."); nullopt when `cls` names no type isinstance accepts.
std::optional<bool> instanceOf(const Val& x, const std::string& cls) {
  using K = Val::Kind;
  bool descriptor = x.isRuntime() && x.type().kind == ir::TypeKind::Descriptor;
  if (cls == "int") return x.kind == K::Int || x.kind == K::Bool; // bool is an int in Python
  if (cls == "bool") return x.kind == K::Bool;
  if (cls == "float") return x.kind == K::Float;
  if (cls == "tuple") return x.kind == K::Tuple;
  if (cls == "tl.dtype") return x.kind == K::DType;
  if (cls == "tl.pointer_type") return x.kind == K::DType && x.dtypeIsPointer;
  // Unwrapped by the builtin, as in Triton: no argument reaches isinstance as a constexpr.
  if (cls == "tl.constexpr") return false;
  if (cls == "tl.tensor_descriptor") return descriptor;
  if (cls == "tl.tensor") return x.isRuntime() && !descriptor;
  return std::nullopt;
}

} // namespace

std::optional<Val> tlTypeObject(const std::string& name) {
  if (name == "tensor" || name == "tensor_descriptor" || name == "dtype" || name == "pointer_type")
    return Val::builtin("tl." + name);
  return std::nullopt;
}

bool kernelIsInstance(const Val& x, const Val& classinfo, SourceLoc loc) {
  if (classinfo.kind == Val::Kind::Tuple) {
    bool any = false;
    for (const Val& c : classinfo.elts) any = kernelIsInstance(x, c, loc) || any;
    return any;
  }
  if (classinfo.kind == Val::Kind::Builtin)
    if (std::optional<bool> answer = instanceOf(x, classinfo.s)) return *answer;
  raiseError(loc, "isinstance's second argument must be a type or a tuple of types: int, float, "
                  "bool, tuple, tl.tensor, tl.tensor_descriptor, tl.dtype, tl.pointer_type or "
                  "tl.constexpr; got " +
                      describe(classinfo));
}

} // namespace ww::specialize
