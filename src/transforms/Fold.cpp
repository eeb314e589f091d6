// Constant folding and algebraic identities on scalars and splat constants.
#include "transforms/Passes.h"

#include <cmath>
#include <optional>

namespace ww::transforms {

using ir::DType;
using ir::Op;
using ir::OpCode;
using ir::Type;
using ir::Value;

namespace {

struct ConstValue {
  bool isFloat = false;
  int64_t i = 0;
  double f = 0;
};

std::optional<ConstValue> constantOf(const Value* v) {
  const Op* def = v->def();
  if (!def || def->code() != OpCode::Constant) return std::nullopt;
  const ir::Attr* a = def->attr("value");
  if (!a) return std::nullopt;
  ConstValue c;
  if (auto* i = std::get_if<int64_t>(a))
    c.i = *i, c.f = static_cast<double>(*i);
  else if (auto* d = std::get_if<double>(a))
    c.isFloat = true, c.f = *d;
  else
    return std::nullopt;
  return c;
}

/// Wraps an integer to the bit width and signedness of `t`, as the hardware would.
int64_t wrapInt(int64_t v, DType t) {
  int bits = ir::bitWidth(t);
  if (bits >= 64) return v;
  uint64_t mask = (uint64_t(1) << bits) - 1;
  uint64_t u = static_cast<uint64_t>(v) & mask;
  if (t == DType::I1) return static_cast<int64_t>(u);
  if (ir::isSigned(t) && (u >> (bits - 1)) & 1) u |= ~mask;
  return static_cast<int64_t>(u);
}

/// Floats we fold: fp32 (rounded through float) and fp64. Narrower types keep their ops, whose
/// rounding the codegen and interpreter own.
bool foldableFloat(DType t) {
  return t == DType::F32 || t == DType::F64;
}

double roundFloat(double v, DType t) {
  return t == DType::F32 ? static_cast<double>(static_cast<float>(v)) : v;
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
        if (isInt(result->type().elem))
          k->setAttr("value", wrapInt(c->i, result->type().elem));
        else
          k->setAttr("value", roundFloat(c->f, result->type().elem));
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
      if (ir::isInt(re)) {
        if (ir::isFloat(from)) {
          if (!std::isfinite(in[0].f) || std::fabs(in[0].f) > 9.2e18) return std::nullopt;
          c.i = static_cast<int64_t>(in[0].f);
        } else {
          c.i = in[0].i;
        }
        return c;
      }
      if (!foldableFloat(re)) return std::nullopt;
      c.isFloat = true;
      if (ir::isFloat(from))
        c.f = in[0].f;
      else
        c.f = ir::isSigned(from) ? static_cast<double>(in[0].i)
                                 : static_cast<double>(static_cast<uint64_t>(in[0].i));
      return c;
    }
    case OpCode::Neg:
    case OpCode::Not: {
      if (ir::isFloat(re)) {
        if (op.code() != OpCode::Neg || !foldableFloat(re)) return std::nullopt;
        return ConstValue{true, 0, -in[0].f};
      }
      ConstValue c;
      c.i = op.code() == OpCode::Neg ? -in[0].i : (re == DType::I1 ? !in[0].i : ~in[0].i);
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
    if (ir::isFloat(re)) return binaryFloat(op.code(), in[0].f, in[1].f, re);
    return binaryInt(op.code(), in[0].i, in[1].i, re);
  }

  static std::optional<ConstValue> binaryFloat(OpCode code, double a, double b, DType t) {
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
      c.f = (std::isnan(a) || std::isnan(b)) ? NAN : std::fmax(a, b);
      break;
    case OpCode::Min:
      c.f = (std::isnan(a) || std::isnan(b)) ? NAN : std::fmin(a, b);
      break;
    default:
      return std::nullopt;
    }
    return c;
  }

  static std::optional<ConstValue> binaryInt(OpCode code, int64_t a, int64_t b, DType t) {
    bool sgn = ir::isSigned(t);
    int bits = ir::bitWidth(t);
    uint64_t ua = static_cast<uint64_t>(a), ub = static_cast<uint64_t>(b);
    if (bits < 64 && !sgn) {
      uint64_t mask = (uint64_t(1) << bits) - 1;
      ua &= mask;
      ub &= mask;
    }
    ConstValue c;
    switch (code) {
    case OpCode::Add:
      c.i = static_cast<int64_t>(ua + ub);
      break;
    case OpCode::Sub:
      c.i = static_cast<int64_t>(ua - ub);
      break;
    case OpCode::Mul:
      c.i = static_cast<int64_t>(ua * ub);
      break;
    case OpCode::Div:
    case OpCode::Rem:
      if (b == 0 || (sgn && a == INT64_MIN && b == -1)) return std::nullopt; // leave traps alone
      if (sgn)
        c.i = code == OpCode::Div ? a / b : a % b;
      else
        c.i = static_cast<int64_t>(code == OpCode::Div ? ua / ub : ua % ub);
      break;
    case OpCode::And:
      c.i = a & b;
      break;
    case OpCode::Or:
      c.i = a | b;
      break;
    case OpCode::Xor:
      c.i = a ^ b;
      break;
    case OpCode::Shl:
      if (b < 0 || b >= bits) return std::nullopt;
      c.i = static_cast<int64_t>(ua << b);
      break;
    case OpCode::Shr:
      if (b < 0 || b >= bits) return std::nullopt;
      c.i = sgn ? (a >> b) : static_cast<int64_t>(ua >> b);
      break;
    case OpCode::Max:
      c.i = sgn ? std::max(a, b) : static_cast<int64_t>(std::max(ua, ub));
      break;
    case OpCode::Min:
      c.i = sgn ? std::min(a, b) : static_cast<int64_t>(std::min(ua, ub));
      break;
    default:
      return std::nullopt;
    }
    return c;
  }

  static std::optional<ConstValue> compare(const Op& op, const ConstValue& a, const ConstValue& b) {
    std::string p = op.strAttr("pred");
    DType t = op.operand(0)->type().elem;
    // 1 or 0 for the predicate over two values of one C++ type; -1 for an unknown predicate.
    auto evaluate = [&p](auto x, auto y) -> int {
      return p == "eq"   ? x == y
             : p == "ne" ? x != y
             : p == "lt" ? x < y
             : p == "le" ? x <= y
             : p == "gt" ? x > y
             : p == "ge" ? x >= y
                         : -1;
    };
    int r;
    if (ir::isFloat(t)) {
      if (!foldableFloat(t)) return std::nullopt;
      r = evaluate(a.f, b.f);
    } else if (ir::isSigned(t)) {
      r = evaluate(wrapInt(a.i, t), wrapInt(b.i, t));
    } else {
      r = evaluate(static_cast<uint64_t>(wrapInt(a.i, t)), static_cast<uint64_t>(wrapInt(b.i, t)));
    }
    if (r < 0) return std::nullopt;
    ConstValue c;
    c.i = r;
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
