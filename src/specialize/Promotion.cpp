// Run-time arithmetic: Triton's type promotion (including python scalars that adopt a tensor's
// dtype), casts, numpy broadcasting with splat/broadcast ops, and pointer arithmetic.
#include "specialize/SpecializerImpl.h"
#include "specialize/TlMisc.h"

#include "ir/OpAttrs.h"

#include <cmath>
#include <limits>

namespace ww::specialize {

using ast::BinOpKind;
using ast::CmpOpKind;
using ast::UnaryOpKind;
using ir::DType;
using ir::OpCode;

DType Specializer::pythonScalarDType(const Val& v) {
  switch (v.kind) {
  case Val::Kind::Bool:
    return DType::I1;
  case Val::Kind::Float: {
    // Triton's rule: fp32 unless the magnitude is outside fp32's normal range (then fp64);
    // 0, inf and NaN are fp32.
    double a = std::fabs(v.f);
    if (a == 0 || std::isinf(a) || std::isnan(a) ||
        (a >= 0x1p-126 && a <= static_cast<double>(std::numeric_limits<float>::max())))
      return DType::F32;
    return DType::F64;
  }
  case Val::Kind::Int:
    // Triton's rule: int32, then uint32 up to 2**32 - 1, int64, uint64 from 2**63.
    if (v.isBigUnsigned()) return DType::U64;
    if (v.i >= std::numeric_limits<int32_t>::min() && v.i <= std::numeric_limits<int32_t>::max())
      return DType::I32;
    if (v.i > 0 && v.i <= static_cast<int64_t>(std::numeric_limits<uint32_t>::max()))
      return DType::U32;
    return DType::I64;
  default:
    throw std::logic_error("pythonScalarDType of a non-number");
  }
}

namespace {
/// bool < integer < float, as Triton orders kinds for scalar promotion: a python number of a
/// kind no higher than the tensor's takes the tensor's type (an int with a uint8 tensor too).
int kindRank(DType t) {
  if (t == DType::I1) return 0;
  return ir::isFloat(t) ? 2 : 1;
}
bool is16BitFloat(DType t) {
  return t == DType::F16 || t == DType::BF16;
}

DType integerPromote(DType a, DType b) {
  int ra = ir::bitWidth(a), rb = ir::bitWidth(b);
  bool sa = ir::isSigned(a), sb = ir::isSigned(b);
  if (sa == sb) return ra > rb ? a : b;
  if (!sa) return ra >= rb ? a : b;
  return rb >= ra ? b : a;
}

bool fitsIn(int64_t v, DType t) {
  switch (t) {
  case DType::I1:
    return v == 0 || v == 1;
  case DType::I8:
    return v >= INT8_MIN && v <= INT8_MAX;
  case DType::I16:
    return v >= INT16_MIN && v <= INT16_MAX;
  case DType::I32:
    return v >= INT32_MIN && v <= INT32_MAX;
  case DType::U8:
    return v >= 0 && v <= UINT8_MAX;
  case DType::U16:
    return v >= 0 && v <= UINT16_MAX;
  case DType::U32:
    return v >= 0 && v <= int64_t(UINT32_MAX);
  case DType::U64:
    return v >= 0;
  default:
    return true;
  }
}
} // namespace

DType Specializer::computationType(DType a, bool aIsPython, DType b, bool bIsPython, bool divOrMod,
                                   SourceLoc loc, const char* opSymbol) {
  if (aIsPython != bIsPython) {
    DType scalar = aIsPython ? a : b, tensor = aIsPython ? b : a;
    if (kindRank(scalar) <= kindRank(tensor)) {
      if (divOrMod && is16BitFloat(tensor)) return DType::F32;
      return tensor;
    }
  }
  if (a == DType::F64 || b == DType::F64) return DType::F64;
  if (a == DType::F32 || b == DType::F32) return DType::F32;
  if (is16BitFloat(a) || is16BitFloat(b)) {
    if (is16BitFloat(a) && is16BitFloat(b) && a != b) return DType::F32; // fp16 with bf16
    if (divOrMod) return DType::F32;
    return is16BitFloat(a) ? a : b;
  }
  if (ir::isFp8(a) && ir::isFp8(b)) return a == b ? a : DType::F16;
  if (ir::isFloat(a) || ir::isFloat(b))
    raiseError(loc, std::string("'") + opSymbol + "' between " + std::string(ir::tlName(a)) +
                        " and " + std::string(ir::tlName(b)) +
                        " is not supported; cast the fp8 "
                        "operand to a wider float first");
  if (divOrMod && ir::isSigned(a) != ir::isSigned(b) && a != DType::I1 && b != DType::I1)
    raiseError(loc, std::string("Cannot use '") + opSymbol + "' with " +
                        std::string(ir::tlName(a)) + " and " + std::string(ir::tlName(b)) +
                        " because they have different signedness; cast one operand to the "
                        "other's type first");
  return integerPromote(a, b);
}

/// Triton's checks of a python int operand against the type an operation computes in: no
/// negative number with an unsigned type, and a value the type can hold.
static void checkScalarOperand(const Val& v, DType dt, SourceLoc loc, const char* opSymbol) {
  if (v.kind != Val::Kind::Int || !ir::isInt(dt) || dt == DType::I1) return;
  if (v.isBigUnsigned()) {
    if (dt != DType::U64)
      raiseError(loc, "Scalar " + describe(v) + " is out of range for type " +
                          std::string(ir::tlName(dt)) + " in '" + opSymbol +
                          "'; cast the tensor to a wider type first");
    return;
  }
  if (v.i < 0 && !ir::isSigned(dt))
    raiseError(loc, std::string("'") + opSymbol +
                        "' between an unsigned tensor and the negative "
                        "number " +
                        std::to_string(v.i) + " is not allowed");
  if (!fitsIn(v.i, dt))
    raiseError(loc, "Scalar " + std::to_string(v.i) + " is out of range for type " +
                        std::string(ir::tlName(dt)) + " in '" + opSymbol +
                        "'; cast the tensor to a wider type first");
}

ir::Value* Specializer::constant(const Val& v, const ir::Type& type) {
  if (ir::isFloat(type.elem)) {
    double x = v.kind == Val::Kind::Float ? v.f : static_cast<double>(intValue128(v));
    return b.constFloat(x, type);
  }
  int64_t x = v.kind == Val::Kind::Float  ? static_cast<int64_t>(v.f)
              : v.kind == Val::Kind::Bool ? int64_t(v.b)
                                          : v.i;
  if (type.elem == DType::I1) x = x != 0;
  return b.constInt(x, type);
}

ir::Value* Specializer::toRuntime(const Val& v, SourceLoc loc, std::optional<DType> dtype,
                                  const char* what) {
  if (v.isRuntime()) return v.v;
  if (v.isNumber()) {
    SourceLoc saved = b.loc();
    if (loc.valid()) b.setLoc(loc);
    ir::Value* c = constant(v, ir::Type::scalar(dtype ? *dtype : pythonScalarDType(v)));
    b.setLoc(saved);
    return c;
  }
  raiseError(loc, std::string(what ? what : "this value") + " must be a number or tensor, got " +
                      kindName(v));
}

ir::Value* Specializer::cast(ir::Value* x, DType to, SourceLoc loc, bool bitcast) {
  const ir::Type& t = x->type();
  if (!t.isValue())
    raiseError(loc, "cannot cast " + t.str() + " to " + std::string(ir::tlName(to)));
  if (t.isPointer()) {
    if (to == DType::I64 || to == DType::U64)
      return b.create1(OpCode::PtrToInt, {x}, t.withElem(to));
    raiseError(loc, "a pointer can only be cast to int64 or to another pointer type, not " +
                        std::string(ir::tlName(to)));
  }
  if (t.elem == to) return x;
  if (bitcast) {
    if (ir::bitWidth(t.elem) != ir::bitWidth(to))
      raiseError(loc, "bitcast needs types of one width: " + std::string(ir::tlName(t.elem)) +
                          " has " + std::to_string(ir::bitWidth(t.elem)) + " bits, " +
                          std::string(ir::tlName(to)) + " has " + std::to_string(ir::bitWidth(to)));
    return b.create1(OpCode::Bitcast, {x}, t.withElem(to));
  }
  if (to == DType::I1) {
    ir::Value* zero = constant(Val::integer(0), t.withElem(t.elem));
    return b.cmp("ne", x, zero);
  }
  return b.create1(OpCode::Cast, {x}, t.withElem(to));
}

ir::Value* Specializer::castPtr(ir::Value* x, DType pointee, SourceLoc loc) {
  const ir::Type& t = x->type();
  ir::Type r = t;
  r.elem = pointee;
  r.pointer = true;
  if (t.isPointer()) {
    if (t.elem == pointee) return x;
    return b.create1(OpCode::Bitcast, {x}, r);
  }
  if (t.isValue() && (t.elem == DType::I64 || t.elem == DType::U64))
    return b.create1(OpCode::IntToPtr, {x}, r);
  raiseError(loc,
             "only pointers and 64-bit integers can be cast to a pointer type, not " + t.str());
}

ir::Value* Specializer::toI1(ir::Value* x, SourceLoc loc) {
  if (x->type().isPointer()) raiseError(loc, "a pointer cannot be used as a condition");
  return cast(x, DType::I1, loc);
}

std::vector<int64_t> Specializer::broadcastShapes(const std::vector<int64_t>& a,
                                                  const std::vector<int64_t>& c, SourceLoc loc,
                                                  const char* what) {
  size_t n = std::max(a.size(), c.size());
  std::vector<int64_t> out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t x = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t y = i < n - c.size() ? 1 : c[i - (n - c.size())];
    if (x != y && x != 1 && y != 1)
      raiseError(loc, std::string("cannot broadcast shapes ") + ir::shapeText(a) + " and " +
                          ir::shapeText(c) + " in " + what + " (dimension " + std::to_string(i) +
                          ": " + std::to_string(x) + " vs " + std::to_string(y) + ")");
    out[i] = x == 1 ? y : x;
  }
  return out;
}

ir::Value* Specializer::expandDims(ir::Value* x, int64_t axis, SourceLoc loc) {
  std::vector<int64_t> s = x->type().shape;
  int64_t rank = static_cast<int64_t>(s.size());
  if (axis < 0) axis += rank + 1;
  if (axis < 0 || axis > rank)
    raiseError(loc, "expand_dims axis " + std::to_string(axis) + " is out of range for rank " +
                        std::to_string(rank));
  s.insert(s.begin() + axis, 1);
  if (rank == 0) return b.splat(x, s); // a scalar becomes a 1-element tensor
  return b.create1(OpCode::ExpandDims, {x}, x->type().withShape(s),
                   {ir::attr::ExpandDims::make::axis(axis)});
}

ir::Value* Specializer::reshape(ir::Value* x, std::vector<int64_t> shape, SourceLoc loc) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  if (n != x->type().numElements())
    raiseError(loc, "cannot reshape " + x->type().str() + " to " + ir::shapeText(shape) +
                        ": the number of elements differs");
  if (x->type().shape == shape) return x;
  if (x->type().isScalar()) return b.splat(x, shape);
  // tl.reshape(x, ()) of a one-element tensor: its element, a scalar (as Triton's 0-d tensor).
  if (shape.empty()) return unsplat(*this, x, loc);
  return b.create1(OpCode::Reshape, {x}, x->type().withShape(std::move(shape)));
}

ir::Value* Specializer::broadcastTo(ir::Value* x, const std::vector<int64_t>& shape,
                                    SourceLoc loc) {
  const ir::Type& t = x->type();
  if (t.shape == shape) return x;
  if (t.isScalar()) return b.splat(x, shape);
  if (t.shape.size() > shape.size())
    raiseError(loc,
               "cannot broadcast " + t.str() + " to the smaller rank of " + ir::shapeText(shape));
  while (x->type().shape.size() < shape.size()) x = expandDims(x, 0, loc);
  const std::vector<int64_t>& s = x->type().shape;
  for (size_t i = 0; i < shape.size(); ++i)
    if (s[i] != shape[i] && s[i] != 1)
      raiseError(loc, "cannot broadcast shape " + ir::shapeText(t.shape) + " to " +
                          ir::shapeText(shape));
  if (s == shape) return x;
  return b.create1(OpCode::Broadcast, {x}, x->type().withShape(shape));
}

std::pair<ir::Value*, ir::Value*> Specializer::unify(const Val& a, const Val& c, SourceLoc loc,
                                                     std::optional<DType> dtype, const char* what) {
  std::vector<int64_t> sa = a.isRuntime() ? a.type().shape : std::vector<int64_t>{};
  std::vector<int64_t> sc = c.isRuntime() ? c.type().shape : std::vector<int64_t>{};
  std::vector<int64_t> shape = broadcastShapes(sa, sc, loc, what);
  auto one = [&](const Val& v) -> ir::Value* {
    if (!v.isRuntime()) {
      if (!v.isNumber()) raiseError(loc, std::string(what) + " needs numbers, got " + kindName(v));
      DType d = dtype ? *dtype : pythonScalarDType(v);
      return constant(v, ir::Type::tensor(d, shape).withShape(shape));
    }
    ir::Value* x = v.v;
    if (dtype) x = cast(x, *dtype, loc);
    return broadcastTo(x, shape, loc);
  };
  ir::Value* x = one(a);
  ir::Value* y = one(c);
  return {x, y};
}

/// The element type of an operand for promotion and whether it is a python number.
static std::pair<DType, bool> operandType(const Val& v) {
  if (v.isRuntime()) return {v.type().elem, false};
  return {Specializer::pythonScalarDType(v), true};
}

Val Specializer::runtimeBinary(BinOpKind op, const Val& a, const Val& c, SourceLoc loc) {
  const char* sym = ast::binOpSymbol(op);
  for (const Val* v : {&a, &c})
    if (!(v->isNumber() || (v->isRuntime() && v->type().isValue())))
      raiseError(loc, std::string("unsupported operand for '") + sym + "': " + kindName(*v));
  bool aPtr = a.isRuntime() && a.type().isPointer();
  bool cPtr = c.isRuntime() && c.type().isPointer();
  if (aPtr || cPtr) {
    if ((op == BinOpKind::Add || op == BinOpKind::Sub) && aPtr != cPtr &&
        !(op == BinOpKind::Sub && cPtr)) {
      const Val& p = aPtr ? a : c;
      const Val& off = aPtr ? c : a;
      auto [od, oPy] = operandType(off);
      if (ir::isFloat(od) || (off.isRuntime() && off.type().isPointer()))
        raiseError(loc, std::string("pointer offsets must be integers, got ") + kindName(off));
      std::vector<int64_t> shape = broadcastShapes(
          p.type().shape, off.isRuntime() ? off.type().shape : std::vector<int64_t>{}, loc,
          "pointer arithmetic");
      // A python int offset past int32 is an i64 (not Triton's uint32 for up to 2**32 - 1, which
      // 'ptr - offset' would wrap).
      std::optional<DType> wide;
      if (!off.isRuntime() && (od == DType::U32 || od == DType::U64)) wide = DType::I64;
      ir::Value* offset = off.isRuntime() ? off.v : toRuntime(off, loc, wide);
      if (offset->type().elem == DType::I1) offset = cast(offset, DType::I32, loc);
      if (op == BinOpKind::Sub) offset = b.create1(OpCode::Neg, {offset}, offset->type());
      ir::Value* ptr = broadcastTo(p.v, shape, loc);
      offset = broadcastTo(offset, shape, loc);
      return Val::runtime(b.addPtr(ptr, offset));
    }
    raiseError(loc, std::string("unsupported pointer arithmetic '") + sym + "' between " +
                        kindName(a) + " and " + kindName(c) +
                        "; pointers support 'ptr + int offsets' and 'ptr - int offsets'");
  }
  auto [at, aPy] = operandType(a);
  auto [ct, cPy] = operandType(c);
  if (op == BinOpKind::Pow)
    raiseError(loc, "'**' works on compile-time values only; for tensors use tl.exp2 / tl.exp "
                    "and tl.log, or multiply explicitly");
  DType dt;
  if (op == BinOpKind::Div) {
    // True division promotes as '%' does (16-bit floats and ints divide as fp32, signed and
    // unsigned ints do not mix), then ints divide as fp32.
    dt = computationType(at, aPy, ct, cPy, true, loc, sym);
    checkScalarOperand(a, dt, loc, sym);
    checkScalarOperand(c, dt, loc, sym);
    if (!ir::isFloat(dt)) dt = DType::F32;
    auto [x, y] = unify(a, c, loc, dt, "'/'");
    // Triton divides fp32 with div.full.f32 (its arith.divf lowering), fp64 with IEEE
    // rounding; tl.math.div_rn asks for IEEE rounding at fp32 too.
    std::vector<ir::NamedAttr> attrs;
    if (dt == DType::F32) attrs.push_back(ir::attr::Div::make::approx(true));
    return Val::runtime(b.create1(OpCode::Div, {x, y}, x->type(), std::move(attrs)));
  }
  bool bitwise = op == BinOpKind::BitAnd || op == BinOpKind::BitOr || op == BinOpKind::BitXor ||
                 op == BinOpKind::LShift || op == BinOpKind::RShift;
  if (bitwise && (ir::isFloat(at) || ir::isFloat(ct)))
    raiseError(loc, std::string("invalid operands of type ") + std::string(ir::tlName(at)) +
                        " and " + std::string(ir::tlName(ct)) + " for '" + sym +
                        "': bitwise operators need integers");
  bool divOrMod = op == BinOpKind::FloorDiv || op == BinOpKind::Mod;
  dt = computationType(at, aPy, ct, cPy, divOrMod, loc, sym);
  checkScalarOperand(a, dt, loc, sym);
  checkScalarOperand(c, dt, loc, sym);
  std::string what = std::string("'") + sym + "'";
  auto [x, y] = unify(a, c, loc, dt, what.c_str());
  switch (op) {
  case BinOpKind::Add:
    return Val::runtime(b.binary(OpCode::Add, x, y));
  case BinOpKind::Sub:
    return Val::runtime(b.binary(OpCode::Sub, x, y));
  case BinOpKind::Mul:
    return Val::runtime(b.binary(OpCode::Mul, x, y));
  case BinOpKind::FloorDiv:
    if (ir::isFloat(dt))
      return Val::runtime(b.create1(OpCode::Floor, {b.binary(OpCode::Div, x, y)}, x->type()));
    return Val::runtime(b.binary(OpCode::Div, x, y)); // Triton: truncating on ints
  case BinOpKind::Mod:
    return Val::runtime(b.binary(OpCode::Rem, x, y));
  case BinOpKind::BitAnd:
    return Val::runtime(b.binary(OpCode::And, x, y));
  case BinOpKind::BitOr:
    return Val::runtime(b.binary(OpCode::Or, x, y));
  case BinOpKind::BitXor:
    return Val::runtime(b.binary(OpCode::Xor, x, y));
  case BinOpKind::LShift:
    return Val::runtime(b.binary(OpCode::Shl, x, y));
  case BinOpKind::RShift: {
    // Triton shifts arithmetically when the tensor operand (the left one, unless it is a Python
    // number) is signed, whatever promotion gave: i32 >> u32 shifts u32 bits arithmetically.
    // Shr follows its type's signedness (ir/ScalarNumerics.h), so shift in the same-width type of
    // that signedness; the casts keep the bits.
    bool arithmetic = ir::isSigned(aPy && !cPy ? ct : at);
    if (dt == DType::I1 || arithmetic == ir::isSigned(dt))
      return Val::runtime(b.binary(OpCode::Shr, x, y));
    static const std::pair<DType, DType> kSignedUnsigned[] = {{DType::I8, DType::U8},
                                                              {DType::I16, DType::U16},
                                                              {DType::I32, DType::U32},
                                                              {DType::I64, DType::U64}};
    DType shiftType = dt;
    for (auto [sgn, uns] : kSignedUnsigned)
      if (dt == sgn || dt == uns) shiftType = arithmetic ? sgn : uns;
    ir::Value* r = b.binary(OpCode::Shr, cast(x, shiftType, loc), cast(y, shiftType, loc));
    return Val::runtime(cast(r, dt, loc));
  }
  default:
    break;
  }
  raiseError(loc, std::string("unsupported operator '") + sym + "'");
}

Val Specializer::runtimeCompare(CmpOpKind op, const Val& a, const Val& c, SourceLoc loc) {
  const char* pred = nullptr;
  switch (op) {
  case CmpOpKind::Eq:
    pred = "eq";
    break;
  case CmpOpKind::NotEq:
    pred = "ne";
    break;
  case CmpOpKind::Lt:
    pred = "lt";
    break;
  case CmpOpKind::LtE:
    pred = "le";
    break;
  case CmpOpKind::Gt:
    pred = "gt";
    break;
  case CmpOpKind::GtE:
    pred = "ge";
    break;
  default:
    raiseError(loc, std::string("'") + ast::cmpOpSymbol(op) + "' is not supported here");
  }
  for (const Val* v : {&a, &c})
    if (!(v->isNumber() || (v->isRuntime() && v->type().isValue())))
      raiseError(loc, std::string("cannot compare with '") + ast::cmpOpSymbol(op) +
                          "': " + kindName(*v));
  bool aPtr = a.isRuntime() && a.type().isPointer();
  bool cPtr = c.isRuntime() && c.type().isPointer();
  if (aPtr || cPtr) {
    if (!(aPtr && cPtr)) raiseError(loc, "a pointer can only be compared with another pointer");
    auto [x, y] = unify(a, c, loc, std::nullopt, "a comparison");
    return Val::runtime(b.cmp(pred, x, y));
  }
  auto [at, aPy] = operandType(a);
  auto [ct, cPy] = operandType(c);
  DType dt = computationType(at, aPy, ct, cPy, false, loc, ast::cmpOpSymbol(op));
  checkScalarOperand(a, dt, loc, ast::cmpOpSymbol(op));
  checkScalarOperand(c, dt, loc, ast::cmpOpSymbol(op));
  auto [x, y] = unify(a, c, loc, dt, "a comparison");
  return Val::runtime(b.cmp(pred, x, y));
}

Val Specializer::runtimeUnary(UnaryOpKind op, const Val& a, SourceLoc loc) {
  ir::Value* x = requireTensorOrScalar(a, loc, "the operand of a unary operator");
  if (x->type().isPointer()) raiseError(loc, "unary operators do not apply to pointers");
  switch (op) {
  case UnaryOpKind::Neg:
    return Val::runtime(b.create1(OpCode::Neg, {x}, x->type()));
  case UnaryOpKind::Pos:
    return a;
  case UnaryOpKind::Not: {
    ir::Value* c = toI1(x, loc);
    return Val::runtime(b.create1(OpCode::Not, {c}, c->type()));
  }
  case UnaryOpKind::Invert:
    if (ir::isFloat(x->type().elem))
      raiseError(loc, "'~' needs an integer operand, got " + x->type().str());
    return Val::runtime(b.create1(OpCode::Not, {x}, x->type()));
  }
  return a;
}

ir::Value* Specializer::minMax(bool isMax, const Val& a, const Val& c, SourceLoc loc) {
  const char* name = isMax ? "maximum" : "minimum";
  for (const Val* v : {&a, &c})
    if (!(v->isNumber() || (v->isRuntime() && v->type().isValue() && !v->type().isPointer())))
      raiseError(loc, std::string("tl.") + name + " needs numbers or tensors, got " + kindName(*v));
  auto [at, aPy] = operandType(a);
  auto [ct, cPy] = operandType(c);
  DType dt = computationType(at, aPy, ct, cPy, false, loc, name);
  auto [x, y] = unify(a, c, loc, dt, name);
  return b.binary(isMax ? OpCode::Max : OpCode::Min, x, y);
}

} // namespace ww::specialize
