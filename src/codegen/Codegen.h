// Tile IR to PTX: layout assignment, then per-thread code through the PtxBuilder, per target.
#pragma once

#include "ir/IR.h"
#include "warpweave/warpweave.h"

#include <string>

namespace ww::codegen {

struct PtxKernel {
  std::string ptx;
  std::string entry;          // the .entry name
  int numWarps = 4;           // total warps, async tasks included
  int sharedBytes = 0;        // dynamic shared memory
  int globalScratchBytes = 0; // per program, behind the kGlobalScratchParam parameter
  std::vector<KernelParam> params;
};

/// Throws CompileError for kernels the target cannot run (with the op's location).
PtxKernel emitPtx(const ir::Function& fn, const CompileOptions& options,
                  const SourceManager* sources);

} // namespace ww::codegen
