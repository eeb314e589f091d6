// Parses a Python source file into an ast::Module: the kernel-language subset inside function
// definitions, imports and constant assignments at module level; other host code is skipped.
#pragma once

#include "frontend/Ast.h"

namespace ww::frontend {

/// Parses file `file` of `sm`. Throws CompileError on a syntax error inside a function that the
/// kernel language must compile (any top-level `def`), or on unsupported Python there.
/// Precisely: a top-level def decorated with the jit family (ast::isJitDecorator) is parsed
/// strictly; undecorated defs are kept when they parse in the subset and skipped otherwise.
ast::Module parseModule(const SourceManager& sm, uint32_t file);

/// Parses a single expression (constexpr values from signatures and globals: "1024", "tl.float16",
/// "1e-6"). `file` is the SourceManager id holding the text, for diagnostics.
ast::ExprPtr parseExpression(const SourceManager& sm, uint32_t file);

} // namespace ww::frontend
