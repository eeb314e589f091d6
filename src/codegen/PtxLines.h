// The PTX text of a function body as lines, for the passes that reorder instructions over it
// (HoistCombines.cpp, SinkSingleUses.cpp): which registers a line mentions, and which lines no
// instruction may move across.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ww::codegen {

/// `body` split after each newline (each line keeps its '\n').
std::vector<std::string> splitPtxLines(const std::string& body);
/// The lines joined back.
std::string joinPtxLines(const std::vector<std::string>& lines);
/// The registers (`%name`, not `%tid.x` and the like) on `line`, in order.
std::vector<std::string_view> registersIn(std::string_view line);
/// Whether no instruction may move across `line`: a label, a branch or return, a scope brace, a
/// declaration, an inline asm's bounds (whose text the passes do not read), a change of the
/// register budget, or an instruction whose registers are written after it issues (wgmma,
/// tcgen05.ld and its wait).
bool isBarrierLine(std::string_view line);
/// The instruction of `line` without its leading whitespace; empty for labels, directives other
/// than instructions, and blank lines. `guarded` tells whether it has an `@p` guard (then
/// removed from the result).
std::string_view ptxInstruction(std::string_view line, bool* guarded = nullptr);

} // namespace ww::codegen
