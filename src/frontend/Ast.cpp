#include "frontend/Ast.h"

#include <stdexcept>

namespace ww::ast {

const char* binOpSymbol(BinOpKind k) {
  switch (k) {
  case BinOpKind::Add:
    return "+";
  case BinOpKind::Sub:
    return "-";
  case BinOpKind::Mul:
    return "*";
  case BinOpKind::Div:
    return "/";
  case BinOpKind::FloorDiv:
    return "//";
  case BinOpKind::Mod:
    return "%";
  case BinOpKind::Pow:
    return "**";
  case BinOpKind::MatMul:
    return "@";
  case BinOpKind::LShift:
    return "<<";
  case BinOpKind::RShift:
    return ">>";
  case BinOpKind::BitAnd:
    return "&";
  case BinOpKind::BitOr:
    return "|";
  case BinOpKind::BitXor:
    return "^";
  }
  throw std::logic_error("binOpSymbol: unknown BinOpKind");
}

const char* cmpOpSymbol(CmpOpKind k) {
  switch (k) {
  case CmpOpKind::Eq:
    return "==";
  case CmpOpKind::NotEq:
    return "!=";
  case CmpOpKind::Lt:
    return "<";
  case CmpOpKind::LtE:
    return "<=";
  case CmpOpKind::Gt:
    return ">";
  case CmpOpKind::GtE:
    return ">=";
  case CmpOpKind::Is:
    return "is";
  case CmpOpKind::IsNot:
    return "is not";
  case CmpOpKind::In:
    return "in";
  case CmpOpKind::NotIn:
    return "not in";
  }
  throw std::logic_error("cmpOpSymbol: unknown CmpOpKind");
}

} // namespace ww::ast

namespace ww::ast {

std::string dottedName(const Expr* e) {
  if (auto* name = dyn_cast<Name>(e)) return name->id;
  if (auto* attr = dyn_cast<Attribute>(e)) {
    std::string base = dottedName(attr->value.get());
    return base.empty() ? std::string() : base + "." + attr->attr;
  }
  return {};
}

std::string decoratorName(const Expr* e) {
  if (auto* call = dyn_cast<Call>(e)) return dottedName(call->func.get());
  return dottedName(e);
}

bool isJitDecorator(const Expr* e) {
  std::string name = decoratorName(e);
  return name == "jit" || (name.size() > 4 && name.compare(name.size() - 4, 4, ".jit") == 0);
}

bool isJitFunction(const FunctionDef& fn) {
  for (const ExprPtr& d : fn.decorators)
    if (isJitDecorator(d.get())) return true;
  return false;
}

} // namespace ww::ast
