// Constructors of the concrete layouts the compiler uses, all as LinearLayouts: blocked and slice
// register layouts, MMA accumulator/operand layouts (mma.sync, wgmma), shared-memory swizzles.
#pragma once

#include "layout/LinearLayout.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ww::layout {

// ---------------------------------------------------------------------------------------------
// Distributed (register) layouts: in dims register, lane, warp (and block when numCtas > 1);
// out dims dim0..dim<rank-1> sized exactly like the tensor shape.
// ---------------------------------------------------------------------------------------------

/// Triton's blocked layout: each thread holds sizePerThread contiguous elements, threads of a
/// warp and warps of the CTA tile the tensor in `order` (order[0] = fastest dim). A tensor larger
/// than the CTA tile repeats it in registers (again in `order`); a smaller one broadcasts (lanes
/// or warps past the shape get zero bases). All sizes are powers of two.
LinearLayout blockedLayout(const std::vector<int64_t>& shape,
                           const std::vector<int32_t>& sizePerThread,
                           const std::vector<int32_t>& threadsPerWarp,
                           const std::vector<int32_t>& warpsPerCTA,
                           const std::vector<int32_t>& order);

/// A blocked layout for `shape` over numWarps warps with the given sizePerThread: lanes, then
/// warps, fill the dims in `order` (order[0] first) as far as the shape has room; leftover lanes
/// and warps go to the slowest dim (they broadcast when the tensor is too small).
LinearLayout blockedLayoutForShape(const std::vector<int64_t>& shape,
                                   const std::vector<int32_t>& sizePerThread,
                                   const std::vector<int32_t>& order, int numWarps);

/// The default blocked layout for `shape` over numWarps warps: `vecElems` contiguous elements per
/// thread along the last dim, lanes then warps along the last dim first (row-major order).
LinearLayout defaultBlockedLayout(const std::vector<int64_t>& shape, int numWarps,
                                  int32_t vecElems = 1);

/// The registers tcgen05.ld / tcgen05.st (shape 32x32b) move between a [128, N] tile of 32-bit
/// elements in Blackwell tensor memory and the threads of `numWarps` warps (a multiple of 4):
/// warp w % 4 of each warp group reaches lanes (rows) 32 (w % 4) to 32 (w % 4) + 31, one row per
/// thread; the warp groups split the columns, each thread holding its row's N / (numWarps / 4)
/// consecutive columns in registers. A [64, N] tile (tcgen05.mma M = 64, the PTX ISA's data path
/// layout F) has rows 16 (w % 4) to 16 (w % 4) + 15 in the first 16 lanes of warp w's quarter;
/// .16x32bx2 gives threads 0-15 the first half of the group's columns and 16-31 the second.
LinearLayout tmemRegisterLayout(const std::vector<int64_t>& shape, int numWarps);

/// The registers of a CTA pair's [64, N] tensor-memory tile (ir/TmemPairs.h), moved as the
/// [128, lanes' columns] tile of lanes it is (tmemRegisterLayout's registers of that tile), named
/// by the [64, N] tile's coordinates: an accumulator (`lhs` false) has lane 64 + r's columns at
/// N / 2 + c of row r; an A operand (`lhs`) has lanes r and 64 + r both row r (warps 2 and 3 of a
/// group hold what warps 0 and 1 do).
LinearLayout tmemPairRegisterLayout(const std::vector<int64_t>& shape, int numWarps, bool lhs);

/// A register layout the kernel gives (tlx.layout's shape / stride, as tlx.local_load's layout=
/// takes it): one flat row-major offset into the tile `shape` (power-of-two dims) per register,
/// lane and warp bit, each offset's coordinates the bit's basis. Throws std::logic_error for an
/// offset outside the tile.
LinearLayout flatOffsetLayout(const std::vector<int64_t>& shape,
                              const std::vector<int64_t>& regOffsets,
                              const std::vector<int64_t>& laneOffsets,
                              const std::vector<int64_t>& warpOffsets);

/// How tcgen05.ld / tcgen05.st .32x32b move a [128, N] tile of tensor memory straight to / from
/// layout `l`: possible when lane i of warp w holds row 32 (w % 4) + i (the rows tcgen05 gives a
/// warp) and the register bits and the warp bits past the first two each pick one column bit
/// (all distinct). 16-bit and 8-bit elements go 2 / 4 to a 32-bit column, so the columns one
/// such column packs must be one thread's registers (register bits for columns 1, and 2 for
/// 8-bit). Then the element columns of the register bits and of the warp-group bits; nullopt
/// otherwise (the copy goes through tmemRegisterLayout and converts).
struct TmemColumnBits {
  std::vector<int32_t> reg;       // per register bit
  std::vector<int32_t> warpGroup; // per warp bit from the third on
};
std::optional<TmemColumnBits> tmemColumnBits(const LinearLayout& l,
                                             const std::vector<int64_t>& shape, int elemBytes);

/// The layout of reduce(x, axis=dim) for x in `parent`: out dim `dim` removed (later dims
/// renamed down), register bits that became duplicates dropped. Lanes/warps that covered `dim`
/// become broadcast (zero bases).
LinearLayout sliceLayout(const LinearLayout& parent, int dim);

/// expand_dims: inserts an out dim of size 1 at `dim` (dims after it are renamed up).
LinearLayout expandDimsLayout(const LinearLayout& layout, int dim);

/// The layout of broadcast(x) to `shape` where x (with size-1 dims) has layout `src`: the same
/// hardware mapping, with register bits added for the stretched dims (as the tensor's new extent
/// is covered in registers). Use when no better layout (e.g. the slice parent) is known.
LinearLayout broadcastLayout(const LinearLayout& src, const std::vector<int64_t>& shape);

/// True when a value in layout `dst` (of the broadcast shape) can be read from a value in layout
/// `src` (size-1 dims) without data movement: every thread's dst elements, with the stretched
/// coordinates zeroed, are elements the same thread holds in src.
bool isBroadcastWithoutMovement(const LinearLayout& src, const LinearLayout& dst);

/// The shape (dim sizes in order) of a distributed layout's outputs.
std::vector<int64_t> layoutShape(const LinearLayout& l);

/// The layout of permute(x, order) (result dim i is x's dim order[i]): no data movement.
LinearLayout permuteLayout(const LinearLayout& layout, const std::vector<int64_t>& order);
/// The layout of reshape(x, shape) keeping row-major element order: no data movement.
LinearLayout reshapeLayout(const LinearLayout& layout, const std::vector<int64_t>& shape);

/// How data must move to convert a tensor from distributed layout `src` to `dst` (same shape).
enum class ConversionKind {
  None,         // identical layouts
  Registers,    // every thread already holds its dst elements: register renaming only
  WarpShuffle,  // data moves only between lanes of the same warp (shfl.sync)
  SharedMemory, // data crosses warps: through shared memory, with bar.sync
  /// Set by layout assignment only (conversionKind never returns it): the value is computed
  /// from aranges, splats and constants alone, so it is recomputed in the new layout instead of
  /// moved (Conversion::remat lists what to recompute).
  Rematerialize,
};
ConversionKind conversionKind(const LinearLayout& src, const LinearLayout& dst);

/// A conversion done with shfl.sync.idx: destination register r of the thread with tid bits t
/// (5 lane bits, then warp bits) is source register srcRegister[r] ^ R(t) of lane
/// L(t) ^ laneXor[r] in the same warp, where L(t) and R(t) are the XORs of laneImages[i] and
/// registerImages[i] over the set bits i of t. Every term is linear over GF(2), so the lane is a
/// few XORs of %tid bits; when R is not zero, each destination register takes one shuffle per
/// register R can give and keeps the one of its thread.
struct WarpShufflePlan {
  std::vector<int32_t> srcRegister;    // per destination register
  std::vector<int32_t> laneXor;        // per destination register
  std::vector<int32_t> laneImages;     // per tid bit: 5 lane bits, then log2(numWarps) warp bits
  std::vector<int32_t> registerImages; // per tid bit, as laneImages
  /// True when no register needs another lane (a renaming within each thread).
  bool isLocal() const;
};

/// The shuffle plan that reads, for every destination hardware index x (register, lane, warp of
/// `gatherMap`), the source element at coordinates gatherMap(x) XOR `constant` of `src`, where
/// both layouts span `numWarps` warps (missing warp bits hold copies); nullopt when some warp
/// needs an element only other warps hold, or when a lane would need different source registers
/// for one destination register.
std::optional<WarpShufflePlan> warpShufflePlan(const LinearLayout& src,
                                               const LinearLayout& gatherMap,
                                               const std::vector<int32_t>& constant, int numWarps);
/// "none", "registers", "shuffle", "shared", "remat".
const char* conversionKindName(ConversionKind k);

// ---------------------------------------------------------------------------------------------
// Tensor-core layouts. Fragment tables: PTX ISA, "Matrix fragments for mma.m16n8k*" and
// "Register fragments for wgmma.mma_async". Shapes are 2-D (M x N, M x K, K x N).
// ---------------------------------------------------------------------------------------------

/// Accumulator of mma.sync.m16n8kK (sm_80): per warp a 16x8 fp32/int32 tile; warpsPerCTA
/// {wm, wn} tile the CTA; the tensor repeats the CTA tile in registers (N first, then M).
LinearLayout mmaSyncAccumulatorLayout(const std::vector<int64_t>& shape,
                                      const std::vector<int32_t>& warpsPerCTA);
/// A (operandIndex 0, M x K) or B (1, K x N) register fragment of mma.sync for elements of
/// `elemBits` (16: m16n8k16, 8: m16n8k32, 32 (tf32): m16n8k8); what ldmatrix(.trans) produces.
/// Warps along the non-K dim follow the accumulator's warpsPerCTA; K repeats in registers.
LinearLayout mmaSyncOperandLayout(int operandIndex, const std::vector<int64_t>& shape,
                                  const std::vector<int32_t>& warpsPerCTA, int elemBits);

/// Where element (row, col) of one mma.sync instruction tile sits in its fragment, in the order
/// of the PTX ISA tables: operand 0 is A (16 x instrK, rows M, cols K): a_i; 1 is B (instrK x 8,
/// rows K, cols N): b_i; 2 the 16 x 8 accumulator: c_i. A and B elements of `elemBits` (8:
/// m16n8k32, 16: m16n8k16, 32 (tf32): m16n8k8) pack 32 / elemBits to a 32-bit word, word w
/// holding elements w * (32 / elemBits) onwards, lowest bits first. Coordinates are taken
/// modulo the tile; the lane that holds the element is the layouts' business.
int mmaSyncFragmentIndex(int operandIndex, int64_t row, int64_t col, int elemBits);

/// Accumulator of wgmma.mma_async m64nNk* (sm_90a): a warp group of 4 warps owns 64 rows (warp w
/// rows 16w..16w+15); instrN columns per instruction. warpsPerCTA {wm, wn} counts warps (wm a
/// multiple of 4); the tensor repeats the instruction tile in registers (N first, then M).
LinearLayout wgmmaAccumulatorLayout(const std::vector<int64_t>& shape, int32_t instrN,
                                    const std::vector<int32_t>& warpsPerCTA);
/// The A operand of wgmma held in registers (M x K): per warp the mma.sync A fragment, warps of
/// the group stacked along M.
LinearLayout wgmmaOperandALayout(const std::vector<int64_t>& shape,
                                 const std::vector<int32_t>& warpsPerCTA, int elemBits);

/// The largest N (multiple of 8, <= 256, dividing shapeN) a wgmma instruction can use for a
/// CTA tile of N columns split over warpsN warp groups along N.
int32_t wgmmaInstrN(int64_t shapeN, int32_t warpsN);

// ---------------------------------------------------------------------------------------------
// Shared-memory layouts: in dim "offset" (element offset within one buffer) -> dim0..dim<rank-1>.
// Invert them for coordinates -> offset.
// ---------------------------------------------------------------------------------------------

/// NVMMA shared layout used by wgmma operands and TMA: a 2-D tile whose contiguous dim is
/// order[0], in rows of swizzleBytes (0 = no swizzle, 32, 64, 128); the 16-byte chunk index within
/// a row is XORed with (row / (128 / swizzleBytes)) % (swizzleBytes / 16) (CUTLASS Swizzle<B,4,3>
/// on byte addresses). A contiguous dim wider than one swizzle row is split into column blocks
/// stored one after another. shape must be powers of two.
LinearLayout nvmmaSharedLayout(const std::vector<int64_t>& shape, int elemBytes, int swizzleBytes,
                               const std::vector<int32_t>& order = {1, 0});
/// The padded shared layout of a [rows, cols] uint8 tile of packed e2m1 (two values a byte) as
/// tcgen05.mma .kind::mxf8f6f4 reads it and TMA's CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN16B writes
/// it: the NVMMA layout (128-byte swizzle) of [rows, 2 cols] bytes, in which each 16-byte chunk
/// holds 8 bytes of the tile and 8 of padding. Offset bit 3 (the padding) maps to no coordinate,
/// so the layout is not injective; cols must be a multiple of 64.
LinearLayout fp4PaddedSharedLayout(int64_t rows, int64_t cols);
/// The widest NVMMA swizzle (128, 64, 32, or 0) whose row fits the contiguous dim.
int nvmmaSwizzleBytes(const std::vector<int64_t>& shape, int elemBytes,
                      const std::vector<int32_t>& order = {1, 0});

/// The alignment (bytes) of a tlx.local_alloc of this tile: 1024 where the tile gets an NVMMA
/// swizzle (whole swizzle atoms, as TMA and wgmma address them), else 128.
int64_t sharedTileAlignment(const std::vector<int64_t>& shape, int elemBytes);

/// Generic XOR-swizzled shared layout (Triton's swizzled_shared: vec, perPhase, maxPhase) over a
/// row-major (order) tile; vec=1, maxPhase=1 is plain row-major.
LinearLayout swizzledSharedLayout(const std::vector<int64_t>& shape, int32_t vec, int32_t perPhase,
                                  int32_t maxPhase, const std::vector<int32_t>& order);

/// A swizzled shared layout for converting between distributed layouts `src` and `dst` of one
/// tensor through shared memory, chosen so that both the writes (vectors of src's contiguous
/// registers) and the reads (dst's) are free of bank conflicts where possible.
LinearLayout conversionSharedLayout(const LinearLayout& src, const LinearLayout& dst,
                                    int elemBytes);

/// How sm_90's stmatrix.m8n8 (16-bit elements) writes `src`'s registers, when they sit as it
/// takes them: register 0 and lanes 0-1 the 8 consecutive elements of a matrix row along the
/// fastest dim, lanes 2-4 the matrix's 8 rows, registers 1-2 (where present) which of up to 4
/// matrices. Returned as the access seen by shared memory: 8-element vectors (register 0, lanes
/// 0-1), one per matrix row, the rows of 4 matrices as the 32 "lanes" (lanes 2-4, registers 1-2),
/// so that conversionSharedLayout and sharedAccessWavefronts judge it as a vector store.
/// std::nullopt when `src` does not fit.
std::optional<LinearLayout> stmatrixAccessLayout(const LinearLayout& src);

/// The most scratch one conversion through shared memory takes at once; larger tensors go
/// through it in rounds (see conversionRounds).
inline constexpr int64_t kMaxConversionScratchBytes = 64 * 1024;

/// A conversion from `src` to `dst` through shared memory in rounds, as Triton's ConvertLayout
/// does for tensors too large for one pass: tensor coordinate bits that both layouts hold in
/// registers (and no other basis of either touches) are fixed per round, so each round moves
/// the elements with one value of those bits through a scratch of `elements()`. `src` / `dst`
/// here are the per-round layouts: without those register bits, and with those coordinate bits
/// removed from their outputs (`project` maps a full coordinate there).
struct ConversionRounds {
  LinearLayout src, dst;
  std::vector<int> srcRegisterBits, dstRegisterBits; // register bit of round bit i, ascending
  std::vector<std::pair<int, int32_t>> dropped;      // (dim, coordinate bit) of round bit i
  int64_t rounds() const { return int64_t(1) << dropped.size(); }
  int64_t elements() const { return src.getTotalOutDimSize(); }
  std::vector<int32_t> project(std::vector<int32_t> coord) const;
  /// The full register index of per-round register `r` of `round` (src: the source layout).
  int32_t fullRegister(int32_t r, int64_t round, bool ofSrc) const;
};

/// Rounds so that one holds at most `maxElements` (when the layouts allow; `constant`: the
/// coordinates XOR'ed into every read, whose bits are never iterated). One round when the
/// whole tensor fits.
ConversionRounds conversionRounds(const LinearLayout& src, const LinearLayout& dst,
                                  const std::vector<int32_t>& constant, int64_t maxElements);

/// Shared-memory wavefronts one warp needs to access `distributed`'s elements through `shared`
/// with vectors of `vecElems` elements of `elemBytes` (register bits 0.. form a vector): lanes
/// are served in phases of 128 bytes, each costing as many wavefronts as the most distinct
/// 4-byte words it asks of one bank. Conflict-free is 32 * vecElems * elemBytes / 128 (at least
/// 1). Every access of every warp costs the same (the maps are linear, so they differ by an XOR
/// that permutes banks), so one is analysed.
int sharedAccessWavefronts(const LinearLayout& distributed, const LinearLayout& shared,
                           int elemBytes, int32_t vecElems);

/// A register layout in CuTe's thread-value form, `(thread modes):(value modes)` with flat
/// row-major offsets into the tile as strides: the thread modes are the lane bits then the warp
/// bits, the value modes the register bits; consecutive bits of one dim whose strides double
/// form one mode (`((_32,_2,_2),_1):((_1,_32,_0),_0)`: 32 lanes of stride 1, a warp bit of
/// stride 32, a broadcast warp bit, one register).
std::string cuteRegisterLayoutText(const LinearLayout& distributed);
/// A shared layout (offset -> coordinates) as CuTe writes a memory layout, coordinates ->
/// element offset: `(_128,_64):(_64,_1)`, or `Sw<B,M,S> o _0 o (..):(..)` where an XOR swizzle
/// (CuTe's Swizzle<B,M,S> on element offsets) is composed with a strided layout. Empty when the
/// layout is neither. `padding` ((interval, padding) pairs in elements, of a padded layout over
/// an unswizzled `shared`) scales the strides as the padding does.
std::string cuteSharedLayoutText(const LinearLayout& shared,
                                 const std::vector<std::pair<int64_t, int64_t>>& padding = {});

} // namespace ww::layout
