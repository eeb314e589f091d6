// Prints Tile IR in the vocabulary of Triton's MLIR dialects (tt, ttg, ttng, arith, scf): what a
// Triton or TLX user reads as `kernel.asm["ttgir"]`. A view of the same ops, not a second IR.
#pragma once

#include "ir/IR.h"

#include <string>

namespace ww::ir {

/// `fn` as a Triton module: each op under the name of its Triton counterpart (ttg.local_alloc,
/// ttng.wait_barrier, arith.addf, ...), async tasks as one ttg.warp_specialize, MLIR's value names
/// (%arg0, %c0_i32, %cst, %0). Ops without a counterpart keep their Tile IR name under `ww.`.
/// Register layouts are not printed (warpweave assigns them in code generation); shared-memory
/// encodings are, where the kernel chose one (a TLX layout object).
/// `target` is the compile target's name (sm_90a ...), printed as Triton's `cuda:90`.
std::string printTritonDialects(const Function& fn, const std::string& target);

} // namespace ww::ir
