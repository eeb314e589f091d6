// Assembles PTX to a cubin with the CUDA toolkit's ptxas, and reads its resource report.
#pragma once

#include "warpweave/warpweave.h"

#include <cstdint>
#include <string>
#include <vector>

namespace ww::runtime {

struct PtxasResult {
  bool ok = false;
  std::vector<uint8_t> cubin;
  std::string log; // ptxas stderr/stdout (warnings, errors, -v report)
  int registers = 0;
  int spillBytes = 0;  // spill stores + loads, bytes
  int sharedBytes = 0; // static shared memory
};

/// The ptxas to use: $WARPWEAVE_PTXAS, $CUDA_HOME/bin/ptxas, /usr/local/cuda/bin/ptxas, PATH.
/// Empty when none is found.
std::string findPtxas();

/// Runs ptxas -O3 -v for `target` on `ptx`. Never throws for a ptxas failure: see `ok` and `log`.
PtxasResult runPtxas(const std::string& ptx, Target target, const std::string& kernelName);

} // namespace ww::runtime
