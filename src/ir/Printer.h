// Prints Tile IR as text (`wwc --emit tile-ir`): the form tests match against, and the form
// ir/Parser.h reads back (print(parse(text)) == text for every printed function).
#pragma once

#include "ir/IR.h"

#include <string>
#include <string_view>

namespace ww::ir {

struct PrintOptions {
  /// When set, each op ends in `loc("FILE":LINE:COL)` (after its regions; `loc(unknown)` when it
  /// has none), and the kernel header carries the kernel's, FILE named by this SourceManager.
  /// Off by default: the plain form is what tests match against.
  const SourceManager* locations = nullptr;
};

std::string print(const Function& fn, const PrintOptions& options = {});
std::string print(const Module& module, const PrintOptions& options = {});

/// `"text"` with `"`, `\` and control characters escaped (`\n`, `\t`, `\xHH`): how strings
/// (attributes, file names) appear in Tile IR text; ir::parse reads them back.
std::string quoteString(std::string_view s);

} // namespace ww::ir
