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
#include <utility>

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

// Scales in tensor memory (ir::isTmemScaleTile): a [rows, cols] tile (rows 64 or a multiple of
// 128) keeps scale c of row r in byte c % 4 of 32-bit column (c / 4 * rows + r) / 32, lane
// r % 32 of all four lane quarters: word after word, each word's rows 32 to a column (the
// layout tcgen05.cp.32x128b.warpx4 makes of the cuBLAS layout's 512-byte chunks, and TLX's
// tensor_memory_scales_encoding). An MMA reads its scale word w at column w * R / 32 of its
// scale address, R the rows it takes the tile to have: the hardware reads columns, not shapes.

/// The column of scale `c` of row `r` in a [rows, cols] tensor-memory scale tile.
inline int64_t scaleTileColumn(int64_t rows, int64_t r, int64_t c) {
  return (c / 4 * rows + r) / 32;
}

/// The (row, scale) of a [rows, cols] tensor-memory scale tile that byte `byte` of column `col`
/// holds in lane `lane` (0-31) of every lane quarter; the inverse of scaleTileColumn.
inline std::pair<int64_t, int64_t> scaleTileElement(int64_t rows, int64_t col, int64_t lane,
                                                    int64_t byte) {
  const int64_t perWord = rows / 32;
  return {col % perWord * 32 + lane, col / perWord * 4 + byte};
}

/// The rows R of the [R, cols] tile an MMA reading `cols` scales a row finds in the columns of
/// the tensor-memory scale tile `t` (R x cols = the tile's rows x cols, as TLX's MMA strides its
/// scale words by the allocation's columns over the words it reads); 0 when that is no tile
/// (R not 64 or a multiple of 128).
inline int64_t tmemScaleViewRows(const Type& t, int64_t cols) {
  const int64_t n = t.shape.at(0) * t.shape.at(1);
  if (cols <= 0 || n % cols != 0) return 0;
  const int64_t rows = n / cols;
  return rows == 64 || rows % 128 == 0 ? rows : 0;
}

/// The scales tlx.tmem_copy of `src` (shared memory) into `dst` (a tensor-memory scale tile)
/// writes: {rows, cols}, the first `cols` scales of each of `rows` rows. Every form of the
/// cuBLAS layout fills `dst` but TLX's unit-test form [32 n, 16] into a [128, 16 n] tile, whose
/// n chunks of 128 rows x 4 scales are its first n scale words.
inline std::pair<int64_t, int64_t> tmemCopiedScales(const Type& src, const Type& dst) {
  if (src.shape.size() == 2 && src.shape[1] == 16) return {128, src.shape[0] / 32 * 4};
  return {dst.shape.at(0), dst.shape.at(1)};
}

} // namespace ww::ir
