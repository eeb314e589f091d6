// Compile-time arithmetic on constexprs with Python's semantics (floor division, modulo sign,
// int/float mixing), and the `math` module's functions on constexprs.
#include "specialize/SpecializerImpl.h"

#include <cmath>
#include <limits>

namespace ww::specialize {

using ast::BinOpKind;
using ast::CmpOpKind;
using ast::UnaryOpKind;

static double asReal(const Val& v) {
  return v.kind == Val::Kind::Float ? v.f : static_cast<double>(intValue128(v));
}

Val Specializer::constBinary(BinOpKind op, const Val& a, const Val& c, SourceLoc loc) {
  auto unsupported = [&]() -> Val {
    raiseError(loc, std::string("unsupported operand types for ") + ast::binOpSymbol(op) + ": " +
                        kindName(a) + " and " + kindName(c));
  };
  if (a.kind == Val::Kind::String && c.kind == Val::Kind::String && op == BinOpKind::Add)
    return Val::string(a.s + c.s);
  if (!a.isNumber() || !c.isNumber()) unsupported();
  auto overflow = [&]() -> Val {
    raiseError(loc, std::string("compile-time integer overflow in '") + ast::binOpSymbol(op) +
                        "' (" + describe(a) + ", " + describe(c) + ")");
  };
  if (a.kind == Val::Kind::Float || c.kind == Val::Kind::Float) {
    double x = asReal(a), y = asReal(c);
    switch (op) {
    case BinOpKind::Add:
      return Val::real(x + y);
    case BinOpKind::Sub:
      return Val::real(x - y);
    case BinOpKind::Mul:
      return Val::real(x * y);
    case BinOpKind::Div:
      if (y == 0) raiseError(loc, "division by zero in a compile-time expression");
      return Val::real(x / y);
    case BinOpKind::FloorDiv:
      if (y == 0) raiseError(loc, "division by zero in a compile-time expression");
      return Val::real(std::floor(x / y));
    case BinOpKind::Mod: {
      if (y == 0) raiseError(loc, "modulo by zero in a compile-time expression");
      double r = std::fmod(x, y);
      if (r != 0 && ((r < 0) != (y < 0))) r += y;
      return Val::real(r);
    }
    case BinOpKind::Pow:
      return Val::real(std::pow(x, y));
    default:
      unsupported();
    }
  }
  // Ints are Python's, kept in [-2**63, 2**64) (the span of Triton's int64 and uint64
  // constants): computed in 128 bits, a result outside that span is an overflow.
  __int128 x = intValue128(a), y = intValue128(c);
  bool bothBool = a.kind == Val::Kind::Bool && c.kind == Val::Kind::Bool;
  auto result = [&](__int128 r) -> Val {
    Val v;
    if (!intFromInt128(r, v)) overflow();
    return v;
  };
  auto bitwise = [&](__int128 r) { return bothBool ? Val::boolean(r != 0) : result(r); };
  __int128 r = 0;
  switch (op) {
  case BinOpKind::Add:
    return result(x + y);
  case BinOpKind::Sub:
    return result(x - y);
  case BinOpKind::Mul:
    if (__builtin_mul_overflow(x, y, &r)) overflow();
    return result(r);
  case BinOpKind::Div:
    if (y == 0) raiseError(loc, "division by zero in a compile-time expression");
    return Val::real(static_cast<double>(x) / static_cast<double>(y));
  case BinOpKind::FloorDiv: {
    if (y == 0) raiseError(loc, "division by zero in a compile-time expression");
    __int128 q = x / y;
    if ((x % y != 0) && ((x < 0) != (y < 0))) --q;
    return result(q);
  }
  case BinOpKind::Mod: {
    if (y == 0) raiseError(loc, "modulo by zero in a compile-time expression");
    __int128 m = x % y;
    if (m != 0 && ((m < 0) != (y < 0))) m += y;
    return result(m);
  }
  case BinOpKind::Pow: {
    if (y < 0) return Val::real(std::pow(asReal(a), asReal(c)));
    // By squaring: a huge exponent (of 0, 1 or -1) must not loop for ever. A base squared past
    // 128 bits is only needed by a result past 2**64.
    __int128 p = 1, base = x;
    Val inRange;
    for (__int128 e = y; e > 0; e >>= 1) {
      if ((e & 1) && (__builtin_mul_overflow(p, base, &p) || !intFromInt128(p, inRange)))
        overflow();
      if (e > 1 && __builtin_mul_overflow(base, base, &base)) overflow();
    }
    return result(p);
  }
  case BinOpKind::LShift:
    if (y < 0) raiseError(loc, "negative shift count");
    if (x == 0) return Val::integer(0);
    if (y > 64 || __builtin_mul_overflow(x, static_cast<__int128>(1) << static_cast<int>(y), &r))
      overflow();
    return result(r);
  case BinOpKind::RShift:
    if (y < 0) raiseError(loc, "negative shift count");
    return result(y >= 127 ? (x < 0 ? -1 : 0) : x >> static_cast<int>(y));
  case BinOpKind::BitAnd:
    return bitwise(x & y);
  case BinOpKind::BitOr:
    return bitwise(x | y);
  case BinOpKind::BitXor:
    return bitwise(x ^ y);
  default:
    unsupported();
  }
  return Val::none();
}

Val Specializer::constCompare(CmpOpKind op, const Val& a, const Val& c, SourceLoc loc) {
  bool eqOnly = op == CmpOpKind::Eq || op == CmpOpKind::NotEq;
  if (a.isNumber() && c.isNumber()) {
    bool useReal = a.kind == Val::Kind::Float || c.kind == Val::Kind::Float;
    auto cmp = [&](auto x, auto y) {
      switch (op) {
      case CmpOpKind::Eq:
        return x == y;
      case CmpOpKind::NotEq:
        return x != y;
      case CmpOpKind::Lt:
        return x < y;
      case CmpOpKind::LtE:
        return x <= y;
      case CmpOpKind::Gt:
        return x > y;
      case CmpOpKind::GtE:
        return x >= y;
      default:
        return false;
      }
    };
    return Val::boolean(useReal ? cmp(asReal(a), asReal(c)) : cmp(intValue128(a), intValue128(c)));
  }
  if (a.kind == Val::Kind::String && c.kind == Val::Kind::String && !eqOnly) {
    int r = a.s.compare(c.s);
    switch (op) {
    case CmpOpKind::Lt:
      return Val::boolean(r < 0);
    case CmpOpKind::LtE:
      return Val::boolean(r <= 0);
    case CmpOpKind::Gt:
      return Val::boolean(r > 0);
    default:
      return Val::boolean(r >= 0);
    }
  }
  if (!eqOnly)
    raiseError(loc, std::string("'") + ast::cmpOpSymbol(op) + "' is not supported between " +
                        kindName(a) + " and " + kindName(c));
  bool eq = constexprEqual(a, c);
  return Val::boolean(op == CmpOpKind::Eq ? eq : !eq);
}

Val Specializer::constUnary(UnaryOpKind op, const Val& a, SourceLoc loc) {
  if (op == UnaryOpKind::Not) return Val::boolean(!truthy(a));
  if (!a.isNumber()) raiseError(loc, "bad operand for a unary operator: " + kindName(a));
  switch (op) {
  case UnaryOpKind::Neg: {
    if (a.kind == Val::Kind::Float) return Val::real(-a.f);
    Val r;
    if (!intFromInt128(-intValue128(a), r))
      raiseError(loc, "compile-time integer overflow in unary '-' (" + describe(a) + ")");
    return r;
  }
  case UnaryOpKind::Pos:
    return a.kind == Val::Kind::Bool ? Val::integer(a.b) : a;
  case UnaryOpKind::Invert: {
    if (a.kind == Val::Kind::Float) raiseError(loc, "bad operand for '~': a float");
    Val r;
    if (!intFromInt128(~intValue128(a), r))
      raiseError(loc, "compile-time integer overflow in unary '~' (" + describe(a) + ")");
    return r;
  }
  default:
    return a;
  }
}

Val Specializer::mathConstFunction(const std::string& name, const CallSite& call) {
  std::vector<double> xs;
  for (size_t i = 0; i < call.args.size(); ++i) {
    const Val& v = call.args[i];
    if (!v.isNumber()) {
      if (v.isRuntime())
        raiseError(call.argLocs[i], "math." + name +
                                        "() works on compile-time numbers only; use "
                                        "tl." +
                                        name + " for tensors");
      raiseError(call.argLocs[i], "math." + name + "() needs a number, got " + describe(v));
    }
    xs.push_back(asReal(v));
  }
  if (!call.kwNames.empty())
    raiseError(call.kwLocs[0], "math." + name + "() takes no keyword arguments");
  auto arity = [&](size_t n) {
    if (xs.size() != n)
      raiseError(call.loc, "math." + name + "() takes " + std::to_string(n) + " argument" +
                               (n == 1 ? "" : "s") + ", got " + std::to_string(xs.size()));
  };
  auto domain = [&](bool ok) {
    if (!ok) raiseError(call.loc, "math domain error in math." + name + "()");
  };
  if (name == "sqrt") {
    arity(1);
    domain(xs[0] >= 0);
    return Val::real(std::sqrt(xs[0]));
  }
  if (name == "exp") {
    arity(1);
    return Val::real(std::exp(xs[0]));
  }
  if (name == "exp2") {
    arity(1);
    return Val::real(std::exp2(xs[0]));
  }
  if (name == "log") {
    if (xs.size() == 2) {
      domain(xs[0] > 0 && xs[1] > 0 && xs[1] != 1);
      return Val::real(std::log(xs[0]) / std::log(xs[1]));
    }
    arity(1);
    domain(xs[0] > 0);
    return Val::real(std::log(xs[0]));
  }
  if (name == "log2") {
    arity(1);
    domain(xs[0] > 0);
    return Val::real(std::log2(xs[0]));
  }
  if (name == "log10") {
    arity(1);
    domain(xs[0] > 0);
    return Val::real(std::log10(xs[0]));
  }
  if (name == "pow") {
    arity(2);
    return Val::real(std::pow(xs[0], xs[1]));
  }
  if (name == "sin") {
    arity(1);
    return Val::real(std::sin(xs[0]));
  }
  if (name == "cos") {
    arity(1);
    return Val::real(std::cos(xs[0]));
  }
  if (name == "tanh") {
    arity(1);
    return Val::real(std::tanh(xs[0]));
  }
  if (name == "fabs") {
    arity(1);
    return Val::real(std::fabs(xs[0]));
  }
  if (name == "ceil" || name == "floor" || name == "trunc") {
    arity(1);
    double r = name == "ceil"    ? std::ceil(xs[0])
               : name == "floor" ? std::floor(xs[0])
                                 : std::trunc(xs[0]);
    domain(std::isfinite(r));
    return Val::integer(static_cast<int64_t>(r));
  }
  if (name == "isinf") {
    arity(1);
    return Val::boolean(std::isinf(xs[0]));
  }
  if (name == "isnan") {
    arity(1);
    return Val::boolean(std::isnan(xs[0]));
  }
  raiseError(call.loc, "math." + name + "() is not supported in kernels");
}

} // namespace ww::specialize
