// Prints Tile IR in the vocabulary of Triton's MLIR dialects (tt, ttg, ttng, arith, scf): what a
// Triton or TLX user reads as `kernel.asm["ttgir"]`. A view of the same ops, not a second IR.
#pragma once

#include "ir/IR.h"

#include <string>

namespace ww::ir {

/// What layout assignment decided for a kernel, in Triton's attribute syntax (the layout stage
/// provides it: layout/TritonEncodings.h). Empty strings mean "none known".
class TritonEncodings {
public:
  virtual ~TritonEncodings() = default;
  /// A tensor value's register layout (`#ttg.linear<{register = ..., ...}>`).
  virtual std::string tensorEncoding(const Value* v) const = 0;
  /// A buffer's shared-memory encoding (`#ttg.nvmma_shared<...>`, `#ttg.swizzled_shared<...>`).
  virtual std::string sharedEncoding(const Value* buffer) const = 0;
  /// The layout operand `i` of `op` is converted to just before `op`.
  virtual std::string convertedOperand(const Op& op, unsigned i) const = 0;
};

/// `fn` as a Triton module: each op under the name of its Triton counterpart (ttg.local_alloc,
/// ttng.wait_barrier, arith.addf, ...), async tasks as one ttg.warp_specialize, MLIR's value names
/// (%arg0, %c0_i32, %cst, %0). Ops without a counterpart keep their Tile IR name under `ww.`.
/// Without `encodings` (Triton's TTIR) tensors print without a layout and buffers with the
/// encoding a TLX layout object gave them; with them (TTGIR) every tensor has its register
/// layout (as `#linearN` aliases), every buffer its shared encoding, and each conversion code
/// generation makes is a `ttg.convert_layout` before its user. `target` is the compile target's
/// name (sm_90a ...), printed as Triton's `cuda:90`.
std::string printTritonDialects(const Function& fn, const std::string& target,
                                const TritonEncodings* encodings = nullptr);

} // namespace ww::ir
