// Reads Tile IR text as ir::print writes it (the IR-in half of ww-opt and of IR-in / IR-out tests):
// print(parse(print(f))) == print(f). Generic over ops: an op's printed name selects its OpCode
// from Ops.def, and attributes are read by their printed form (int, float, string, int list), so
// the parser needs no per-op knowledge. Structural rules (types of operands, terminators) are the
// verifier's; the parser checks only what it needs to build the IR: known op names, values
// defined before use and visible there, one type per result.
#pragma once

#include "frontend/Diagnostics.h"
#include "ir/IR.h"

#include <memory>
#include <optional>
#include <string_view>

namespace ww::ir {

/// Parses every kernel in file `file` of `sources` (registered by the caller). An op without a
/// `loc(...)` gets its position in this text as its location, so later errors point into it.
/// Errors in the text throw a CompileError at their FILE:LINE:COL (render it against `sources`).
/// The module's `sources` is set to `sources`, which must outlive it.
Module parseModule(SourceManager& sources, uint32_t file);

/// The same for text holding exactly one kernel.
std::unique_ptr<Function> parseFunction(SourceManager& sources, uint32_t file);

/// A type in its printed form (`tensor<64x64xptr<fp16>>`, `buffer<2x128x64xfp16, smem>` ...), as
/// Type::str() writes it; nullopt when `text` is not one whole type.
std::optional<Type> parseType(std::string_view text);

/// The OpCode printed as `name` (`local_alloc` -> LocalAlloc); nullopt for no op.
std::optional<OpCode> opCodeByName(std::string_view name);

} // namespace ww::ir
