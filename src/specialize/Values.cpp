// The value model's helpers (truth, equality, descriptions) and the binding of builtin arguments.
#include "specialize/SpecializerImpl.h"
#include "specialize/TlxLayouts.h"
#include "specialize/TypeObjects.h"

#include <cmath>
#include <sstream>
#include <stdexcept>

namespace ww::specialize {

bool Val::isConstexpr() const {
  if (kind == Kind::Runtime) return false;
  if (isAggregate())
    for (const Val& e : elts)
      if (!e.isConstexpr()) return false;
  if (kind == Kind::Method) return elts[0].isConstexpr();
  return true;
}

bool truthy(const Val& v) {
  switch (v.kind) {
  case Val::Kind::None:
    return false;
  case Val::Kind::Bool:
    return v.b;
  case Val::Kind::Int:
    return v.i != 0;
  case Val::Kind::Float:
    return v.f != 0;
  case Val::Kind::String:
    return !v.s.empty();
  case Val::Kind::Tuple:
    return !v.elts.empty();
  case Val::Kind::Runtime:
    throw std::logic_error("truthy() of a run-time value");
  default:
    return true;
  }
}

static double asDouble(const Val& v) {
  return v.kind == Val::Kind::Float ? v.f : static_cast<double>(intValue128(v));
}

bool constexprEqual(const Val& a, const Val& b) {
  if (a.isNumber() && b.isNumber()) {
    if (a.kind == Val::Kind::Float || b.kind == Val::Kind::Float) return asDouble(a) == asDouble(b);
    return intValue128(a) == intValue128(b);
  }
  if (a.kind != b.kind) return false;
  switch (a.kind) {
  case Val::Kind::None:
    return true;
  case Val::Kind::String:
  case Val::Kind::Enum:
  case Val::Kind::Namespace:
  case Val::Kind::Builtin:
    return a.s == b.s;
  case Val::Kind::DType:
    return a.dtype == b.dtype && a.dtypeIsPointer == b.dtypeIsPointer;
  case Val::Kind::Tuple:
    if (a.elts.size() != b.elts.size()) return false;
    for (size_t i = 0; i < a.elts.size(); ++i)
      if (!constexprEqual(a.elts[i], b.elts[i])) return false;
    return true;
  case Val::Kind::Function:
    return a.fn.def == b.fn.def;
  case Val::Kind::Runtime:
    return a.v == b.v;
  case Val::Kind::Object:
    return isTypeObject(a) && isTypeObject(b) && typeObjectsEqual(a, b);
  default:
    return false;
  }
}

bool sameBlockPtrLayout(const Val& a, const Val& b) {
  return a.kind == Val::Kind::BlockPtr && b.kind == Val::Kind::BlockPtr &&
         constexprEqual(a.elts[4], b.elts[4]) && constexprEqual(a.elts[5], b.elts[5]) &&
         a.elts[0].type() == b.elts[0].type();
}

std::string describe(const Val& v) {
  std::ostringstream os;
  switch (v.kind) {
  case Val::Kind::None:
    return "None";
  case Val::Kind::Bool:
    return v.b ? "True" : "False";
  case Val::Kind::Int:
    return v.isBigUnsigned() ? std::to_string(static_cast<uint64_t>(v.i)) : std::to_string(v.i);
  case Val::Kind::Float: {
    if (std::isinf(v.f)) return v.f > 0 ? "inf" : "-inf";
    os.precision(17);
    os << v.f;
    std::string s = os.str();
    if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
    return s;
  }
  case Val::Kind::String:
    return "'" + v.s + "'";
  case Val::Kind::DType:
    if (v.dtypeIsPointer) return "tl.pointer_type(tl." + std::string(ir::tlName(v.dtype)) + ")";
    return "tl." + std::string(ir::tlName(v.dtype));
  case Val::Kind::Tuple: {
    os << "(";
    for (size_t i = 0; i < v.elts.size(); ++i) os << (i ? ", " : "") << describe(v.elts[i]);
    if (v.elts.size() == 1) os << ",";
    os << ")";
    return os.str();
  }
  case Val::Kind::Runtime:
    return v.v ? v.v->type().str() : "a run-time value";
  case Val::Kind::Function:
    return "function '" + v.fn.def->name + "'";
  case Val::Kind::Namespace:
    return "module '" + v.s + "'";
  case Val::Kind::Builtin:
    return "'" + v.s + "'";
  case Val::Kind::Method:
    return "method '" + v.s + "'";
  case Val::Kind::Enum:
    return "storage kind '" + v.s + "'";
  case Val::Kind::Slice:
    return "a slice";
  case Val::Kind::Object:
    if (isTypeObject(v)) return describeTypeObject(v);
    if (isSharedLayoutObject(v)) return describeSharedLayout(v);
    if (v.s == "reuse_group")
      return std::string("tlx.reuse_group (") + (v.b ? "distinct" : "shared") + ", " +
             std::to_string(v.elts.size()) + " members)";
    return "tlx." + v.s;
  case Val::Kind::BlockPtr: {
    os << "block pointer (" << (v.elts[0].v ? ir::tlName(v.elts[0].type().elem) : "?")
       << ", block ";
    for (size_t i = 0; i < v.elts[4].elts.size(); ++i) os << (i ? "x" : "") << v.elts[4].elts[i].i;
    os << ")";
    return os.str();
  }
  }
  return "?";
}

std::string kindName(const Val& v) {
  switch (v.kind) {
  case Val::Kind::None:
    return "None";
  case Val::Kind::Bool:
    return "a bool";
  case Val::Kind::Int:
    return "an int";
  case Val::Kind::Float:
    return "a float";
  case Val::Kind::String:
    return "a string";
  case Val::Kind::DType:
    return "a dtype";
  case Val::Kind::Tuple:
    return "a tuple";
  case Val::Kind::BlockPtr:
    return "a " + describe(v);
  case Val::Kind::Runtime: {
    const ir::Type& t = v.v->type();
    switch (t.kind) {
    case ir::TypeKind::Buffer:
      return "a buffer (" + t.str() + ")";
    case ir::TypeKind::Barrier:
      return "a barrier (" + t.str() + ")";
    case ir::TypeKind::Descriptor:
      return "a tensor descriptor (" + t.str() + ")";
    case ir::TypeKind::Token:
      return "a token";
    default:
      return t.isScalar() ? "a scalar (" + t.str() + ")" : "a tensor (" + t.str() + ")";
    }
  }
  default:
    return describe(v);
  }
}

// ---------------------------------------------------------------------------------------------
// BoundArgs
// ---------------------------------------------------------------------------------------------

BoundArgs::BoundArgs(const CallSite& call, std::initializer_list<const char*> params)
    : call_(call) {
  std::string varargs;
  std::vector<std::string> required;
  for (const char* p : params) {
    std::string s(p);
    Slot slot;
    if (s[0] == '*') {
      varargs = s.substr(1);
      slot.name = varargs;
    } else if (s.back() == '=') {
      slot.name = s.substr(0, s.size() - 1);
    } else {
      slot.name = s;
      required.push_back(s);
    }
    slot.loc = call.loc;
    slots_.push_back(std::move(slot));
  }
  size_t pos = 0;
  for (size_t i = 0; i < call.args.size(); ++i) {
    if (pos < slots_.size() && slots_[pos].name == varargs && !varargs.empty()) {
      // `f(x, 4, 8)` and `f(x, (4, 8))` mean the same: collect the rest into a tuple.
      Slot& s = slots_[pos];
      s.given = true;
      s.loc = call.argLocs[i];
      if (call.args.size() - i == 1 && call.args[i].kind == Val::Kind::Tuple) {
        s.val = call.args[i];
        s.expr = call.argExprs[i];
      } else {
        std::vector<Val> rest(call.args.begin() + static_cast<long>(i), call.args.end());
        s.val = Val::tuple(std::move(rest));
      }
      pos = slots_.size();
      break;
    }
    if (pos >= slots_.size())
      raiseError(call.argLocs[i], call.callee + "() takes at most " +
                                      std::to_string(slots_.size()) + " positional arguments but " +
                                      std::to_string(call.args.size()) + " were given");
    Slot& s = slots_[pos++];
    s.given = true;
    s.val = call.args[i];
    s.loc = call.argLocs[i];
    s.expr = call.argExprs[i];
  }
  for (size_t k = 0; k < call.kwNames.size(); ++k) {
    Slot* s = nullptr;
    for (Slot& x : slots_)
      if (x.name == call.kwNames[k]) s = &x;
    if (!s) {
      std::vector<std::string> names;
      for (const Slot& x : slots_) names.push_back(x.name);
      std::string msg =
          call.callee + "() got an unexpected keyword argument '" + call.kwNames[k] + "'";
      std::string near = closestMatch(call.kwNames[k], names);
      if (!near.empty())
        msg += "; did you mean '" + near + "'?";
      else {
        msg += " (accepted:";
        for (size_t i = 0; i < names.size(); ++i) msg += (i ? ", " : " ") + names[i];
        msg += ")";
      }
      raiseError(call.kwLocs[k], msg);
    }
    if (s->given)
      raiseError(call.kwLocs[k],
                 call.callee + "() got multiple values for argument '" + s->name + "'");
    s->given = true;
    s->val = call.kwVals[k];
    s->loc = call.kwLocs[k];
    s->expr = call.kwExprs[k];
  }
  for (const std::string& r : required)
    if (!find(r)->given)
      raiseError(call.loc, call.callee + "() missing required argument '" + r + "'");
}

const BoundArgs::Slot* BoundArgs::find(const std::string& name) const {
  for (const Slot& s : slots_)
    if (s.name == name) return &s;
  throw std::logic_error("BoundArgs: no parameter '" + name + "'");
}

bool BoundArgs::has(const std::string& name) const {
  const Slot* s = find(name);
  return s->given && !s->val.isNone();
}

const Val& BoundArgs::get(const std::string& name) const {
  return find(name)->val;
}
SourceLoc BoundArgs::loc(const std::string& name) const {
  return find(name)->loc;
}
const ast::Expr* BoundArgs::expr(const std::string& name) const {
  return find(name)->expr;
}

} // namespace ww::specialize
