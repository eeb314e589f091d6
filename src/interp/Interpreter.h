// Executes Tile IR on the CPU over host memory: the reference semantics of every op.
#pragma once

#include "ir/IR.h"
#include "warpweave/warpweave.h"

namespace ww::interp {

/// Runs `fn` for every program of `grid`. `args` follow fn.args minus folded ones.
/// Throws InterpreterError (formatted with source locations) on out-of-bounds accesses and other
/// faults the kernel commits.
/// With fn.numCtas > 1 the programs of each cluster (grid[0] must be a multiple of it, else
/// LaunchError) run together, clusters one after another.
/// The environment picks the options: WARPWEAVE_INTERP_SEED (a seeded random interleaving of
/// async tasks and of a cluster's programs; unset or 0: deterministic) and
/// WARPWEAVE_INTERP_SCHEDULES (how many to explore).
void run(const ir::Function& fn, const SourceManager* sources, const int grid[3],
         const std::vector<InterpArg>& args);

struct RunOptions {
  uint64_t seed = 0; // 0: round-robin scheduling of async tasks
  /// Schedules to explore: seeds seed, seed + 1, ... Every run but the last works on copies of
  /// the argument buffers, so only the last one's results land; an error in any is reported
  /// with the seed that found it.
  int schedules = 1;
  /// Host memory reached through addresses the kernel reads (see ww::interpret); none: faults.
  HostMemoryLookup hostMemory;
};
void run(const ir::Function& fn, const SourceManager* sources, const int grid[3],
         const std::vector<InterpArg>& args, const RunOptions& options);

/// Whether the interpreter has a rule for `code` (its dispatch table, Interpreter.cpp).
bool implements(ir::OpCode code);

/// Options from WARPWEAVE_INTERP_SEED and WARPWEAVE_INTERP_SCHEDULES; throws
/// std::invalid_argument on values that are not non-negative integers.
RunOptions runOptionsFromEnvironment();

} // namespace ww::interp
