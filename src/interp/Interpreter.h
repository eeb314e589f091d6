// Executes Tile IR on the CPU over host memory: the reference semantics of every op.
#pragma once

#include "ir/IR.h"
#include "warpweave/warpweave.h"

namespace ww::interp {

/// Runs `fn` for every program of `grid`. `args` follow fn.args minus folded ones.
/// Throws InterpreterError (formatted with source locations) on out-of-bounds accesses and other
/// faults the kernel commits.
void run(const ir::Function& fn, const SourceManager* sources, const int grid[3],
         const std::vector<InterpArg>& args);

} // namespace ww::interp
