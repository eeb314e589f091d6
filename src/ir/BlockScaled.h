// The shape of a block-scaled MMA (tlx.async_dot_scaled, a tcgen05_mma with has_scales): how
// many elements of K it multiplies, how many share a scale and how many scales a row holds. The
// specializer, the interpreter and the sm_100a lowering read them here so that they agree.
//
// OCP MX / NVIDIA formats, as TLX takes them:
// - mxfp8: e4m3 / e5m2 operands (one element a byte), uint8 e8m0 scales, one per 32 of K
//   (tcgen05.mma .kind::mxf8f6f4 .scale_vec::1X, K = 32 an instruction);
// - mxfp4: e2m1 operands packed two to a uint8 along K (low nibble the lower K index), uint8
//   e8m0 scales, one per 32 of K (.kind::mxf4 .scale_vec::2X, K = 64 an instruction);
// - nvfp4: e2m1 operands as mxfp4, tl.float8e4nv (ue4m3) scales, one per 16 of K
//   (.kind::mxf4nvf4 .scale_vec::4X, K = 64 an instruction);
// - mixed mxfp4 x mxfp8: one operand e2m1 (packed as for mxfp4: A [M, K / 2], or B the
//   tlx.local_trans of [N, K / 2] bytes), the other e4m3 / e5m2, uint8 e8m0 scales, one per 32
//   of K (.kind::mxf8f6f4 .scale_vec::1X, K = 32 an instruction). That kind reads e2m1 from
//   shared memory padded: 16 values (8 bytes) at the start of each 16-byte chunk, a byte of
//   the tile per value, as TMA's CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN16B writes it; the buffer's
//   shared allocation is marked fp4Padded (layout/LayoutAssignment.h).
#pragma once

#include "ir/IR.h"
#include "ir/OpAttrs.h"

#include <cstdint>

namespace ww::ir {

/// Whether operand `i` (0: A, 1: B) of the block-scaled MMA `op` is packed e2m1 (fp4).
inline bool isFp4Operand(const Op& op, unsigned i) {
  return (i == 0 ? attr::Tcgen05Mma::aFormat(op) : attr::Tcgen05Mma::bFormat(op)) == "e2m1";
}

/// Whether the block-scaled MMA `op` multiplies two e2m1 (fp4) operands: .kind::mxf4 or
/// mxf4nvf4.
inline bool isFp4ScaledMma(const Op& op) {
  return isFp4Operand(op, 0) && isFp4Operand(op, 1);
}

/// Whether `op` multiplies an e2m1 operand with an e4m3 / e5m2 one (.kind::mxf8f6f4, the e2m1
/// one padded in shared memory).
inline bool isMixedFp4ScaledMma(const Op& op) {
  return isFp4Operand(op, 0) != isFp4Operand(op, 1);
}

/// The MMA's K in elements: A is [M, K] fp8, or [M, K / 2] bytes of packed fp4.
inline int64_t scaledMmaK(const Op& op) {
  const int64_t k = op.operand(0)->type().shape.at(1);
  return isFp4Operand(op, 0) ? 2 * k : k;
}

/// Whether the MMA's scales are ue4m3 (nvfp4) rather than e8m0 bytes.
inline bool hasUe4m3Scales(const Op& op) {
  return op.operand(3)->type().elem == DType::F8E4M3;
}

/// Elements of K that share one scale: 16 for nvfp4's ue4m3 scales, 32 for e8m0 ones.
inline int64_t scaleBlock(const Op& op) {
  return hasUe4m3Scales(op) ? 16 : 32;
}

/// Scales a row of the MMA's scale tiles holds: K / block rounded up to four (a 32-bit tensor
/// memory column's worth).
inline int64_t scaleColumns(int64_t k, int64_t block) {
  return (k / block + 3) / 4 * 4;
}
inline int64_t scaleColumns(const Op& op) {
  return scaleColumns(scaledMmaK(op), scaleBlock(op));
}

} // namespace ww::ir
