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

/// What the error of a kernel that needs more shared memory than a block may use says, between
/// the bytes it needs and the limit (the driver recognises it: see compile()).
inline constexpr const char* kSharedMemoryOverflow = " bytes of shared memory, more than the ";

/// Throws CompileError for kernels the target cannot run (with the op's location).
PtxKernel emitPtx(const ir::Function& fn, const CompileOptions& options,
                  const SourceManager* sources);

} // namespace ww::codegen
