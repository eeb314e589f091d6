// Renders the AST as s-expressions, one statement per line, so that tests can compare whole trees
// as text and developers can see what the parser built.
#pragma once

#include "frontend/Ast.h"

#include <string>

namespace ww::ast {

/// `(+ a (* b c))`, `tl.load`, `(call f x (kw mask m))`, `(cmp a < b <= c)`, `(sub x (tuple _
/// None))`.
std::string dump(const Expr& expr);

/// One line per statement; nested bodies indented by two spaces and closed on their last line.
std::string dump(const Stmt& stmt);

/// `(module` then imports, constants and functions in that order, each indented, then `)`.
std::string dump(const Module& module);

} // namespace ww::ast
