// The PTX text of a function body as lines, for the passes that rewrite instructions over it
// (HoistCombines.cpp, SinkSingleUses.cpp, ContractMulAdd.cpp): which registers a line mentions
// and may write, and which lines no instruction may move across.
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
/// The registers `line` may write: its first operand's (after a guard; `%p|%q` both), or every
/// register of a line with braces (vector destinations). Conservative: a store's address
/// registers count too.
std::vector<std::string_view> registersWrittenBy(std::string_view line);
/// Whether `reg` is one of the registers PtxBuilder declares (%p, %h, %r, %rd, %f, %fd and a
/// number), not a special register (%clock64, %globaltimer, %laneid ...), whose reads must stay
/// where the kernel put them.
bool isBuilderRegister(std::string_view reg);
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
