// The abstract syntax tree of the kernel language: the Python subset of LANGUAGE.md, with exact
// source locations on every node. Produced by the Parser, consumed by the specializer.
#pragma once

#include "frontend/Diagnostics.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace ww::ast {

// ---------------------------------------------------------------------------------------------
// Expressions
// ---------------------------------------------------------------------------------------------

enum class ExprKind {
  Name,      // x
  Constant,  // 1, 2.0, True, None, "str"
  BinOp,     // a + b
  UnaryOp,   // -a, not a, ~a
  BoolOp,    // a and b and c
  Compare,   // a < b <= c
  IfExp,     // a if c else b
  Call,      // f(a, k=v)
  Attribute, // a.b
  Subscript, // a[i, None, :]
  Slice,     // lo:hi:step, only inside a Subscript
  Tuple,     // (a, b) or a, b
  List,      // [a, b]
  ListComp,  // [elt for x in it]: parsed whole; the specializer accepts Triton's subset
};

enum class BinOpKind {
  Add,
  Sub,
  Mul,
  Div,
  FloorDiv,
  Mod,
  Pow,
  MatMul,
  LShift,
  RShift,
  BitAnd,
  BitOr,
  BitXor
};
enum class UnaryOpKind { Neg, Pos, Not, Invert };
enum class BoolOpKind { And, Or };
enum class CmpOpKind { Eq, NotEq, Lt, LtE, Gt, GtE, Is, IsNot, In, NotIn };

const char* binOpSymbol(BinOpKind k);
const char* cmpOpSymbol(CmpOpKind k);

// Locations (set by the Parser): infix nodes (BinOp, BoolOp, Compare, IfExp) sit at their first
// operator token (`+`, `and`, `<`, `if`), so a caret tells `a + b * c` apart; every other node sits
// at its first token (a Call, Subscript or Attribute at the start of the callee or base; a
// parenthesized Tuple at its `(`). Statements sit at their first token, FunctionDef at `def`.
struct Expr {
  explicit Expr(ExprKind k, SourceLoc l) : kind(k), loc(l) {}
  virtual ~Expr() = default;
  const ExprKind kind;
  SourceLoc loc;
};
using ExprPtr = std::unique_ptr<Expr>;

struct Name : Expr {
  static constexpr ExprKind Kind = ExprKind::Name;
  Name(SourceLoc l, std::string id) : Expr(Kind, l), id(std::move(id)) {}
  std::string id;
};

struct Constant : Expr {
  static constexpr ExprKind Kind = ExprKind::Constant;
  enum class Type { None, Bool, Int, Float, String };
  explicit Constant(SourceLoc l) : Expr(Kind, l) {}
  Type type = Type::None;
  bool boolValue = false;
  int64_t intValue = 0;     // Int; literals past 2**64 - 1 are a parse error
  bool intUnsigned = false; // Int from 2**63 to 2**64 - 1: intValue holds its bits
  double floatValue = 0;    // Float
  std::string stringValue;
};

struct BinOp : Expr {
  static constexpr ExprKind Kind = ExprKind::BinOp;
  BinOp(SourceLoc l, BinOpKind op, ExprPtr lhs, ExprPtr rhs)
      : Expr(Kind, l), op(op), lhs(std::move(lhs)), rhs(std::move(rhs)) {}
  BinOpKind op;
  ExprPtr lhs, rhs;
};

struct UnaryOp : Expr {
  static constexpr ExprKind Kind = ExprKind::UnaryOp;
  UnaryOp(SourceLoc l, UnaryOpKind op, ExprPtr operand)
      : Expr(Kind, l), op(op), operand(std::move(operand)) {}
  UnaryOpKind op;
  ExprPtr operand;
};

struct BoolOp : Expr {
  static constexpr ExprKind Kind = ExprKind::BoolOp;
  BoolOp(SourceLoc l, BoolOpKind op) : Expr(Kind, l), op(op) {}
  BoolOpKind op;
  std::vector<ExprPtr> values; // two or more
};

struct Compare : Expr {
  static constexpr ExprKind Kind = ExprKind::Compare;
  explicit Compare(SourceLoc l) : Expr(Kind, l) {}
  ExprPtr left;
  std::vector<CmpOpKind> ops;       // a < b <= c: ops = {Lt, LtE}
  std::vector<ExprPtr> comparators; // {b, c}
};

struct IfExp : Expr {
  static constexpr ExprKind Kind = ExprKind::IfExp;
  IfExp(SourceLoc l, ExprPtr test, ExprPtr body, ExprPtr orelse)
      : Expr(Kind, l), test(std::move(test)), body(std::move(body)), orelse(std::move(orelse)) {}
  ExprPtr test, body, orelse;
};

struct Keyword {
  SourceLoc loc;
  std::string name;
  ExprPtr value;
};

struct Call : Expr {
  static constexpr ExprKind Kind = ExprKind::Call;
  explicit Call(SourceLoc l) : Expr(Kind, l) {}
  ExprPtr func;
  std::vector<ExprPtr> args;
  std::vector<Keyword> keywords;
};

struct Attribute : Expr {
  static constexpr ExprKind Kind = ExprKind::Attribute;
  Attribute(SourceLoc l, ExprPtr value, std::string attr, SourceLoc attrLoc)
      : Expr(Kind, l), value(std::move(value)), attr(std::move(attr)), attrLoc(attrLoc) {}
  ExprPtr value;
  std::string attr;
  SourceLoc attrLoc; // location of the attribute name, for "unknown function" carets
};

struct Slice : Expr {
  static constexpr ExprKind Kind = ExprKind::Slice;
  explicit Slice(SourceLoc l) : Expr(Kind, l) {}
  ExprPtr lower, upper, step; // each may be null
};

struct Subscript : Expr {
  static constexpr ExprKind Kind = ExprKind::Subscript;
  Subscript(SourceLoc l, ExprPtr value, ExprPtr index)
      : Expr(Kind, l), value(std::move(value)), index(std::move(index)) {}
  ExprPtr value;
  ExprPtr index; // a Tuple when there are several indices: x[i, None, :]
};

struct Tuple : Expr {
  static constexpr ExprKind Kind = ExprKind::Tuple;
  explicit Tuple(SourceLoc l) : Expr(Kind, l) {}
  std::vector<ExprPtr> elts;
};

struct List : Expr {
  static constexpr ExprKind Kind = ExprKind::List;
  explicit List(SourceLoc l) : Expr(Kind, l) {}
  std::vector<ExprPtr> elts;
};

/// One `for target in iter if cond ...` clause of a comprehension.
struct Comprehension {
  SourceLoc loc; // the `for` (the `async` of `async for`)
  bool isAsync = false;
  ExprPtr target;                // a name, or a tuple of targets (`for a, b in ...`)
  ExprPtr iter;                  // an or-test: `range(4)`, a tuple
  std::vector<ExprPtr> ifs;      // filter conditions
  std::vector<SourceLoc> ifLocs; // the `if` keyword of each
};

struct ListComp : Expr {
  static constexpr ExprKind Kind = ExprKind::ListComp;
  explicit ListComp(SourceLoc l) : Expr(Kind, l) {} // at the `[`
  ExprPtr elt;
  std::vector<Comprehension> generators; // one or more, in source order
};

// ---------------------------------------------------------------------------------------------
// Statements
// ---------------------------------------------------------------------------------------------

enum class StmtKind {
  FunctionDef,
  Assign,
  AugAssign,
  AnnAssign,
  ExprStmt,
  If,
  For,
  While,
  Break,
  Continue,
  Return,
  Pass,
  Assert,
  With,
  Import, // import a.b as c / from a import b as c: only meaningful at module level
};

struct Stmt {
  explicit Stmt(StmtKind k, SourceLoc l) : kind(k), loc(l) {}
  virtual ~Stmt() = default;
  const StmtKind kind;
  SourceLoc loc;
};
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct Param {
  SourceLoc loc;
  std::string name;
  ExprPtr annotation;   // may be null; `tl.constexpr` marks a compile-time parameter
  ExprPtr defaultValue; // may be null
};

struct FunctionDef : Stmt {
  static constexpr StmtKind Kind = StmtKind::FunctionDef;
  explicit FunctionDef(SourceLoc l) : Stmt(Kind, l) {}
  std::string name;
  std::vector<Param> params;
  std::vector<ExprPtr> decorators; // e.g. ww.jit, triton.jit, ww.autotune(...)
  ExprPtr returns;                 // return annotation, may be null
  Body body;
};

struct Assign : Stmt {
  static constexpr StmtKind Kind = StmtKind::Assign;
  explicit Assign(SourceLoc l) : Stmt(Kind, l) {}
  std::vector<ExprPtr> targets; // a = b = value: two targets; a, b = value: one Tuple target
  ExprPtr value;
};

struct AugAssign : Stmt {
  static constexpr StmtKind Kind = StmtKind::AugAssign;
  AugAssign(SourceLoc l, ExprPtr target, BinOpKind op, ExprPtr value)
      : Stmt(Kind, l), target(std::move(target)), op(op), value(std::move(value)) {}
  ExprPtr target;
  BinOpKind op;
  ExprPtr value;
};

struct AnnAssign : Stmt {
  static constexpr StmtKind Kind = StmtKind::AnnAssign;
  explicit AnnAssign(SourceLoc l) : Stmt(Kind, l) {}
  ExprPtr target;
  ExprPtr annotation;
  ExprPtr value; // may be null
};

struct ExprStmt : Stmt {
  static constexpr StmtKind Kind = StmtKind::ExprStmt;
  ExprStmt(SourceLoc l, ExprPtr value) : Stmt(Kind, l), value(std::move(value)) {}
  ExprPtr value;
};

struct If : Stmt {
  static constexpr StmtKind Kind = StmtKind::If;
  explicit If(SourceLoc l) : Stmt(Kind, l) {}
  ExprPtr test;
  Body body;
  Body orelse; // `elif` becomes a nested If as the only statement of orelse
};

struct For : Stmt {
  static constexpr StmtKind Kind = StmtKind::For;
  explicit For(SourceLoc l) : Stmt(Kind, l) {}
  ExprPtr target; // Name or Tuple
  ExprPtr iter;   // range(...), tl.range(...), tl.static_range(...)
  Body body;
  Body orelse; // parsed so that it can be rejected with a clear message
};

struct While : Stmt {
  static constexpr StmtKind Kind = StmtKind::While;
  explicit While(SourceLoc l) : Stmt(Kind, l) {}
  ExprPtr test;
  Body body;
  Body orelse;
};

struct Break : Stmt {
  static constexpr StmtKind Kind = StmtKind::Break;
  explicit Break(SourceLoc l) : Stmt(Kind, l) {}
};

struct Continue : Stmt {
  static constexpr StmtKind Kind = StmtKind::Continue;
  explicit Continue(SourceLoc l) : Stmt(Kind, l) {}
};

struct Return : Stmt {
  static constexpr StmtKind Kind = StmtKind::Return;
  explicit Return(SourceLoc l) : Stmt(Kind, l) {}
  ExprPtr value; // may be null
};

struct Pass : Stmt {
  static constexpr StmtKind Kind = StmtKind::Pass;
  explicit Pass(SourceLoc l) : Stmt(Kind, l) {}
};

struct Assert : Stmt {
  static constexpr StmtKind Kind = StmtKind::Assert;
  explicit Assert(SourceLoc l) : Stmt(Kind, l) {}
  ExprPtr test;
  ExprPtr msg; // may be null
};

struct WithItem {
  ExprPtr context;     // tlx.async_tasks(), tlx.async_task("default"), ...
  ExprPtr optionalVar; // `as x`, may be null
};

struct With : Stmt {
  static constexpr StmtKind Kind = StmtKind::With;
  explicit With(SourceLoc l) : Stmt(Kind, l) {}
  std::vector<WithItem> items;
  Body body;
};

struct ImportAlias {
  SourceLoc loc;
  std::string module; // "triton.language" for `import triton.language as tl`
  std::string name;   // "" for `import m`; "tlx" for `from triton.language.extra import tlx`
  std::string asName; // the bound name ("tl"); defaults to the last component / name
  // (for `import a.b` without `as`, Python binds the top package: asName = "a", module = "a.b")
};

struct Import : Stmt {
  static constexpr StmtKind Kind = StmtKind::Import;
  explicit Import(SourceLoc l) : Stmt(Kind, l) {}
  std::vector<ImportAlias> names;
};

// ---------------------------------------------------------------------------------------------
// A source file, as far as the compiler cares about it
// ---------------------------------------------------------------------------------------------

/// What the front end keeps of a Python file: its imports, module-level constant assignments that
/// it could parse, and its function definitions. Other top-level code (a `__main__` block, classes,
/// host-side functions it cannot parse) is skipped without error: it is host code, not kernel code.
struct Module {
  uint32_t file = 0; // SourceManager id
  // Imports at the top level and under top-level if/try/with.
  std::vector<std::unique_ptr<Import>> imports;
  std::vector<StmtPtr> constants; // Assign / AnnAssign at module level
  std::vector<std::unique_ptr<FunctionDef>> functions;
};

/// "a.b.c" for a Name or a chain of Attributes ending in a Name; "" for any other expression.
std::string dottedName(const Expr* e);

/// The dotted name a decorator refers to, looking through one call: "ww.autotune" for
/// `@ww.autotune(configs=...)`; "" when it is neither a dotted name nor a call of one.
std::string decoratorName(const Expr* e);

/// True for a decorator of the jit family: its dotted name ends in `jit` (ww.jit, triton.jit, jit).
bool isJitDecorator(const Expr* e);

/// True when `fn` is kernel code: it carries a jit-family decorator.
bool isJitFunction(const FunctionDef& fn);

// ---------------------------------------------------------------------------------------------
// isa / cast / dyn_cast in the LLVM style
// ---------------------------------------------------------------------------------------------

template <typename T, typename N> bool isa(const N* n) {
  return n && n->kind == T::Kind;
}
template <typename T, typename N> T* cast(N* n) {
  return static_cast<T*>(n);
}
template <typename T, typename N> const T* cast(const N* n) {
  return static_cast<const T*>(n);
}
template <typename T, typename N> T* dyn_cast(N* n) {
  return isa<T>(n) ? static_cast<T*>(n) : nullptr;
}
template <typename T, typename N> const T* dyn_cast(const N* n) {
  return isa<T>(n) ? static_cast<const T*>(n) : nullptr;
}

} // namespace ww::ast
