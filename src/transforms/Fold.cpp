// Constant folding and algebraic identities on scalars and splat constants. What an op computes
// comes from ir/ScalarNumerics.h, the contract the interpreter and the codegen share, so a folded
// constant is what the op would have computed at run time.
#include "ir/OpAttrs.h"
#include "ir/ScalarNumerics.h"
#include "transforms/Passes.h"

#include <cmath>
#include <optional>

namespace ww::transforms {

using ir::DType;
using ir::Op;
using ir::OpCode;
using ir::Type;
using ir::Value;
namespace num = ir::numerics;

namespace {

struct ConstValue {
  bool isFloat = false;
  int64_t i = 0;
  double f = 0;
};

/// The value of a constant op, canonical for its type: integers wrapped to the type's width and
/// extended by its signedness, floats rounded to the type (hand-written IR may say 0.1 : fp16).
std::optional<ConstValue> constantOf(const Value* v) {
  const Op* def = v->def();
  if (!def || def->code() != OpCode::Constant) return std::nullopt;
  const ir::Attr* a = def->attr(ir::attr::Constant::kvalue);
  if (!a) return std::nullopt;
  DType t = v->type().elem;
  if (!v->type().isValue() || v->type().pointer) return std::nullopt;
  ConstValue c;
  c.isFloat = ir::isFloat(t);
  if (auto* i = std::get_if<int64_t>(a)) {
    if (c.isFloat)
      c.f = num::castIntToFloat(*i, DType::I64, t);
    else
      c.i = num::wrapInt(*i, t);
  } else if (auto* d = std::get_if<double>(a)) {
    if (c.isFloat)
      c.f = num::castFloatToFloat(*d, DType::F64, t);
    else
      c.i = num::castFloatToInt(*d, t);
  } else {
    return std::nullopt;
  }
  return c;
}

/// Floats we fold: those whose ops the codegen computes in a format at least 2p+2 bits wide and
/// rounds once (fp16 and bf16 in fp32), so one rounding of the exact result is what it gives.
/// fp8 has no arithmetic of its own.
bool foldableFloat(DType t) {
  return t == DType::F16 || t == DType::BF16 || t == DType::F32 || t == DType::F64;
}

bool isIntValue(const ConstValue& c, int64_t v) {
  return !c.isFloat && c.i == v;
}

class Folder {
public:
  explicit Folder(ir::Function& fn) : fn_(fn) {}

  bool run() {
    changed_ = false;
    ir::UseMap uses(fn_.body);
    uses_ = &uses;
    foldBlock(fn_.body);
    uses_ = nullptr;
    return changed_;
  }

private:
  void foldBlock(ir::Block& block) {
    auto& ops = block.ops();
    for (size_t i = 0; i < ops.size(); ++i) {
      Op* op = ops[i].get();
      for (unsigned r = 0; r < op->numRegions(); ++r) foldBlock(*op->region(r));
      if (op->numResults() != 1) continue;
      Value* result = op->result();
      if (!uses_->used(result)) continue; // dead: DCE removes it
      if (!result->type().isValue() || result->type().pointer) {
        if (Value* same = simplifyPointer(*op)) replace(result, same);
        continue;
      }
      if (op->code() == OpCode::Constant) continue;
      if (auto c = evaluate(*op)) {
        // Insert the constant before the op so it dominates every use of the result.
        auto k = std::make_unique<Op>(OpCode::Constant, op->loc());
        k->addResult(result->type(), result->name);
        DType re = result->type().elem;
        if (ir::isInt(re))
          ir::attr::Constant::set::value(*k, num::wrapInt(c->i, re));
        else
          ir::attr::Constant::set::value(*k, num::roundToType(c->f, re));
        k->setParentBlock(&block);
        Value* kv = k->result();
        ops.insert(ops.begin() + static_cast<long>(i), std::move(k));
        ++i;
        replace(result, kv);
      } else if (Value* same = simplify(*op)) {
        replace(result, same);
      }
    }
  }

  void replace(Value* from, Value* to) {
    if (from == to) return;
    if (uses_->replace(from, to)) changed_ = true;
  }

  std::optional<ConstValue> evaluate(const Op& op) {
    if (op.numOperands() == 0) return std::nullopt; // sources (program_id, arange): nothing to fold
    // An integer remainder by 1 or -1 is 0 whatever the dividend (TLX's get_bufidx_phase with
    // one buffer: ptxas keeps a whole division sequence for `rem x, 1`).
    if (DType t = op.result()->type().elem; op.code() == OpCode::Rem && ir::isInt(t)) {
      auto d = constantOf(op.operand(1));
      if (d && !d->isFloat && (d->i == 1 || (d->i == -1 && ir::isSigned(t)))) return ConstValue{};
    }
    std::vector<ConstValue> in;
    for (Value* v : op.operands()) {
      auto c = constantOf(v);
      if (!c) return std::nullopt;
      in.push_back(*c);
    }
    const Type& rt = op.result()->type();
    DType re = rt.elem;
    switch (op.code()) {
    case OpCode::Splat:
      return in[0];
    case OpCode::Broadcast:
    case OpCode::ExpandDims:
    case OpCode::Reshape:
      return in[0]; // every element equals the splat value
    case OpCode::Cast: {
      DType from = op.operand(0)->type().elem;
      ConstValue c;
      auto r = ir::attr::Cast::rounding(op) == "rtz" ? num::Rounding::TowardZero
                                                     : num::Rounding::NearestEven;
      if (ir::isInt(re)) {
        c.i = ir::isFloat(from) ? num::castFloatToInt(in[0].f, re) : num::wrapInt(in[0].i, re);
        if (re == DType::I1 && !ir::isFloat(from)) c.i = in[0].i != 0;
        return c;
      }
      if (ir::isFloat(from) ? !foldableFloat(from) : false) return std::nullopt;
      if (!foldableFloat(re)) return std::nullopt;
      c.isFloat = true;
      c.f = ir::isFloat(from) ? num::castFloatToFloat(in[0].f, from, re, r)
                              : num::castIntToFloat(in[0].i, from, re, r);
      return c;
    }
    case OpCode::StochRound: {
      // As for casts, fp8 results stay ops (foldableFloat).
      if (!foldableFloat(re)) return std::nullopt;
      uint32_t bits = num::encodeStochasticRound(re, static_cast<float>(in[0].f),
                                                 static_cast<uint32_t>(in[1].i));
      return ConstValue{true, 0, num::decodeSmallFloat(re, bits)};
    }
    case OpCode::Neg:
    case OpCode::Not: {
      if (ir::isFloat(re)) {
        if (op.code() != OpCode::Neg || !foldableFloat(re)) return std::nullopt;
        return ConstValue{true, 0, -in[0].f};
      }
      ConstValue c;
      c.i = op.code() == OpCode::Neg ? static_cast<int64_t>(uint64_t(0) - uint64_t(in[0].i))
                                     : (re == DType::I1 ? !in[0].i : ~in[0].i);
      return c;
    }
    case OpCode::Cmp:
      return compare(op, in[0], in[1]);
    case OpCode::Select:
      return isIntValue(in[0], 0) ? in[2] : in[1];
    default:
      break;
    }
    if (in.size() != 2) return std::nullopt;
    bool propagateNan = ir::propagatesNan(op);
    if (ir::isFloat(re)) return binaryFloat(op.code(), in[0].f, in[1].f, re, propagateNan);
    if (ir::isSigned(re)) return binaryInt<int64_t>(op.code(), in[0].i, in[1].i, re);
    return binaryInt<uint64_t>(op.code(), uint64_t(in[0].i), uint64_t(in[1].i), re);
  }

  /// The exact result rounded once to `t` (see foldableFloat).
  static std::optional<ConstValue> binaryFloat(OpCode code, double a, double b, DType t,
                                               bool propagateNan) {
    if (!foldableFloat(t)) return std::nullopt;
    ConstValue c;
    c.isFloat = true;
    switch (code) {
    case OpCode::Add:
      c.f = a + b;
      break;
    case OpCode::Sub:
      c.f = a - b;
      break;
    case OpCode::Mul:
      c.f = a * b;
      break;
    case OpCode::Div:
      c.f = a / b;
      break;
    case OpCode::Max:
      c.f = num::floatMax(a, b, propagateNan);
      break;
    case OpCode::Min:
      c.f = num::floatMin(a, b, propagateNan);
      break;
    default:
      return std::nullopt;
    }
    // fp64: one IEEE operation already; narrower types: the double result rounds once more, which
    // for + - * / of operands of at most 24 bits is the correctly rounded result.
    c.f = num::roundToType(c.f, t);
    return c;
  }

  /// Operands canonical for `t` (C is int64_t for signed types, uint64_t for unsigned ones); the
  /// result is wrapped to `t` when it is materialised.
  template <typename C> static std::optional<ConstValue> binaryInt(OpCode code, C a, C b, DType t) {
    int bits = ir::bitWidth(t);
    using U = uint64_t;
    C r;
    switch (code) {
    case OpCode::Add:
      r = C(U(a) + U(b));
      break;
    case OpCode::Sub:
      r = C(U(a) - U(b));
      break;
    case OpCode::Mul:
      r = C(U(a) * U(b));
      break;
    // Division by zero has no value PTX specifies: the op stays, and the hardware decides.
    case OpCode::Div:
      if (num::isDivisionByZero(b)) return std::nullopt;
      r = num::intDiv(a, b);
      break;
    case OpCode::Rem:
      if (num::isDivisionByZero(b)) return std::nullopt;
      r = num::intRem(a, b);
      break;
    case OpCode::FloorDiv:
      if (num::isDivisionByZero(b)) return std::nullopt;
      r = num::intFloorDiv(a, b);
      break;
    case OpCode::And:
      r = a & b;
      break;
    case OpCode::Or:
      r = a | b;
      break;
    case OpCode::Xor:
      r = a ^ b;
      break;
    case OpCode::Shl:
      r = num::shiftLeft(a, b, bits);
      break;
    case OpCode::Shr:
      r = num::shiftRight(a, b, bits);
      break;
    case OpCode::Max:
      r = num::intMax(a, b);
      break;
    case OpCode::Min:
      r = num::intMin(a, b);
      break;
    default:
      return std::nullopt;
    }
    ConstValue c;
    c.i = static_cast<int64_t>(r);
    return c;
  }

  static std::optional<ConstValue> compare(const Op& op, const ConstValue& a, const ConstValue& b) {
    auto p = num::parseCmpPred(ir::attr::Cmp::pred(op));
    if (!p) return std::nullopt;
    DType t = op.operand(0)->type().elem;
    ConstValue c;
    if (ir::isFloat(t)) {
      if (!foldableFloat(t)) return std::nullopt;
      c.i = num::compare(*p, a.f, b.f);
    } else if (ir::isSigned(t)) {
      c.i = num::compare(*p, a.i, b.i);
    } else {
      c.i = num::compare(*p, uint64_t(a.i), uint64_t(b.i));
    }
    return c;
  }

  /// x+0, x*1, x*0 (ints), x|0, x^0, x&0, shifts by 0, select on a constant condition.
  static Value* simplify(Op& op) {
    if (op.numOperands() == 3 && op.code() == OpCode::Select) {
      auto c = constantOf(op.operand(0));
      if (c && op.operand(0)->type().isScalar()) return c->i ? op.operand(1) : op.operand(2);
      if (op.operand(1) == op.operand(2)) return op.operand(1);
      return nullptr;
    }
    if (op.numOperands() != 2) return nullptr;
    Value* a = op.operand(0);
    Value* b = op.operand(1);
    auto ca = constantOf(a);
    auto cb = constantOf(b);
    bool intType = ir::isInt(op.result()->type().elem);
    auto isZero = [&](const std::optional<ConstValue>& c) { return c && !c->isFloat && c->i == 0; };
    auto isOne = [&](const std::optional<ConstValue>& c) {
      return c && (c->isFloat ? c->f == 1.0 : c->i == 1);
    };
    switch (op.code()) {
    case OpCode::Add:
      if (intType && isZero(cb)) return a;
      if (intType && isZero(ca)) return b;
      break;
    case OpCode::Sub:
      if (intType && isZero(cb)) return a;
      break;
    case OpCode::Mul:
      if (isOne(cb)) return a;
      if (isOne(ca)) return b;
      if (intType && isZero(cb)) return b;
      if (intType && isZero(ca)) return a;
      break;
    case OpCode::Div:
    case OpCode::FloorDiv:
      if (intType && isOne(cb)) return a;
      break;
    case OpCode::Or:
    case OpCode::Xor:
      if (isZero(cb)) return a;
      if (isZero(ca)) return b;
      break;
    case OpCode::And:
      if (isZero(cb)) return b;
      if (isZero(ca)) return a;
      break;
    case OpCode::Shl:
    case OpCode::Shr:
      if (isZero(cb)) return a;
      break;
    default:
      break;
    }
    return nullptr;
  }

  static Value* simplifyPointer(Op& op) {
    if (op.code() != OpCode::AddPtr) return nullptr;
    auto c = constantOf(op.operand(1));
    if (c && !c->isFloat && c->i == 0 && op.operand(0)->type() == op.result()->type())
      return op.operand(0);
    return nullptr;
  }

  ir::Function& fn_;
  ir::UseMap* uses_ = nullptr;
  bool changed_ = false;
};

} // namespace

void foldConstants(ir::Function& fn) {
  Folder f(fn);
  while (f.run()) {
  }
}

} // namespace ww::transforms
