// Layout assignment: gives every tensor value of a kernel a distributed LinearLayout, records the
// layout conversions codegen must materialize, picks MMA layouts for dots, and allocates shared
// memory (TLX buffers, barriers, and the scratch used by conversions and reductions). Memory ops
// and dots anchor layouts; cheap values (splats, aranges, broadcasts) take their consumer's.
#pragma once

#include "ir/IR.h"
#include "layout/AxisInfo.h"
#include "layout/Layouts.h"
#include "layout/LinearLayout.h"
#include "layout/SharedMemoryPlan.h"
#include "warpweave/warpweave.h"

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace ww::layout {

/// How a tl.dot / async_dot runs on the target.
enum class MmaKind {
  Fma,     // no tensor-core path for these types/shapes: per-element FMAs in a blocked layout
  MmaSync, // mma.sync.aligned.m16n8kK (sm_80, and sm_100a for now)
  Wgmma,   // wgmma.mma_async.m64nNkK (sm_90a): operands from shared memory (A may be registers)
};

/// The layouts of one dot. Operand layouts in registers are those codegen loads (ldmatrix) or
/// converts to; the shared layouts are where operands are staged (NVMMA swizzle for wgmma).
struct DotLayouts {
  MmaKind kind = MmaKind::Fma;
  int32_t instrM = 1, instrN = 1, instrK = 1; // one MMA instruction's shape
  std::vector<int32_t> warpsPerCTA;           // {warps along M, warps along N}
  LinearLayout acc;                           // accumulator and result
  LinearLayout a, b;                          // register fragments of A and B
  LinearLayout aShared, bShared;              // staging layouts (offset -> coords)
  int swizzleBytesA = 0, swizzleBytesB = 0;   // NVMMA swizzle of aShared/bShared
  /// Contiguous dim first, as nvmmaSharedLayout's order: A {1,0} is K-major; B {1,0} is
  /// N-major (wgmma's transposed-B mode, 16-bit types only), B {0,1} K-major.
  std::vector<int32_t> aOrder, bOrder;
  /// Kind Fma past the straight-line budget (unrollsFmaDot): codegen stages A and B in the
  /// scratch region and loops over K, so the operands stay in the layouts they come in (the
  /// unrolled form needs each thread's whole rows and columns in registers).
  bool fmaLoop = false;
};

/// Products a thread of one dot of per-element FMAs, and of all a kernel's such dots together,
/// that are unrolled into straight-line code; a dot past either (a batched dot counts once per
/// batch element, an unrolled loop once per copy) loops over K instead (DotLayouts::fmaLoop).
/// The unrolled form holds each thread's rows of A and columns of B whole in registers: ptxas
/// (CUDA 13, sm_90a, a busy 2-core host) took 8-9 s and spilled 68-78 KB on single dots of
/// 4,096 products, 94 s and 179 KB on 8,192 (fp32 128x128x64, 4 warps), 345 s and 431 KB on
/// 8,192 fp64 (64x64x128, 2 warps), 77 s on 16 fp64 64x64x64 dots (32,768); the loop form of
/// each single dot took 0.1-0.3 s, spilling 3.5 KB at most (the fp64 one). The kernel-wide
/// budget keeps the unrolled batched dots tests pin (four fp64 64x64x64 ones, 24 s of ptxas).
inline constexpr int64_t kFmaDotProducts = 4096;
inline constexpr int64_t kKernelFmaDotProducts = 8192;

/// Whether an FMA dot of `products` products a thread is unrolled when the kernel's FMA dots
/// before it (in program order, as codegen lowers them) unrolled `unrolled`.
inline bool unrollsFmaDot(int64_t products, int64_t unrolled) {
  return products <= kFmaDotProducts && unrolled + products <= kKernelFmaDotProducts;
}

/// A region of shared memory.
struct SharedAllocation {
  int64_t offset = 0;         // bytes from the start of dynamic shared memory
  int64_t bytesPerBuffer = 0; // one buffer of a multi-buffered allocation
  int64_t count = 1;          // number of buffers
  /// Buffer i lies at offset + i * bytesPerBuffer + (i % groupSize) * groupStepBytes: a member
  /// of a storage_alias_spec whose set_buffer_overlap subtiles it (TLX's index rewriting).
  int64_t groupSize = 1, groupStepBytes = 0;
  int64_t alignment = 16;
  /// For tensor buffers: offset (elements within one buffer) -> coordinates. Empty for barriers.
  LinearLayout layout;
  int swizzleBytes = 0; // NVMMA swizzle of `layout` (0: not an NVMMA layout / none)
  /// A uint8 [rows, cols] buffer of packed e2m1 that a mixed block-scaled MMA reads (.kind::
  /// mxf8f6f4): it takes rows x 2 cols bytes, 8 of every 16 holding data (fp4PaddedSharedLayout).
  bool fp4Padded = false;
  /// The kernel's layout= of the tlx.local_alloc (as it wrote it), empty where the compiler
  /// chose the layout. `layout` is then exactly that one; swizzleBytes is set where it equals
  /// an NVMMA swizzle (TMA and wgmma can use it), 0 otherwise.
  std::string userLayout;
  /// A padded layout= (TLX's padded_shared_layout_encoding.with_identity_for): `layout` is the
  /// row-major one, and element offset x lies at x + sum over pairs of (x / interval) * padding.
  std::vector<std::pair<int64_t, int64_t>> padding;
  int64_t bytes() const { return bytesPerBuffer * count; }
};

/// Where a consumer needs its operand in another layout than the producer gave it. Codegen
/// materializes it right before `user`, as `kind` says: Registers (renaming), WarpShuffle
/// (shfl.sync), SharedMemory (through the scratch region, which is sized for it; pick a swizzle
/// with conversionSharedLayout), or Rematerialize (recompute `remat` in the new layouts; no
/// scratch is reserved for it). src.invertAndCompose(dst) gives, for each source (register,
/// lane, warp), where that element lives in dst.
struct Conversion {
  const ir::Op* user = nullptr;
  unsigned operandIndex = 0;
  const ir::Value* value = nullptr;
  LinearLayout src, dst;
  ConversionKind kind = ConversionKind::SharedMemory;
  /// For kind Rematerialize: the values to compute again, in program order, each with the layout
  /// to compute it in; the last is `value` in `dst`. Every op in it is pure (arange, constant,
  /// splat, elementwise, expand_dims, broadcast, value hints); its operands not in the list are
  /// scalars or other entries of the list.
  std::vector<std::pair<const ir::Value*, LinearLayout>> remat;
  /// Set when `value` is invariant in loops around `user`: the outermost such for/while op.
  /// Converting once right before it, instead of in every iteration, gives the same result.
  const ir::Op* hoistBefore = nullptr;
};

/// The result of layout assignment for one function.
class LayoutMap {
public:
  /// True for tensor values (block shape) the map gives a layout.
  bool hasLayout(const ir::Value* v) const;
  /// The distributed layout `v` is produced in. Throws std::logic_error for values without one.
  const LinearLayout& layout(const ir::Value* v) const;
  /// The layout `user` needs operand `i` in (the producer's layout unless a conversion exists).
  const LinearLayout& operandLayout(const ir::Op& user, unsigned i) const;
  /// True when operand `i` of `user` must be converted before use.
  bool needsConversion(const ir::Op& user, unsigned i) const;
  /// Every conversion, in program order.
  const std::vector<Conversion>& conversions() const { return conversions_; }

  /// Axis facts (contiguity, divisibility, constancy) of every integer/pointer value.
  const AxisInfoAnalysis& axisInfo() const { return *axisInfo_; }
  AxisInfo axisInfo(const ir::Value* v) const { return axisInfo_->get(v); }
  /// Elements per vector access for a Load/Store/AtomicRMW (pointer operand 0): the AxisInfo
  /// bound (alignment, contiguity, mask constancy, 16 bytes) and the layout's consecutive
  /// registers along the dim register bit 0 walks (the last dim for row-major pointers, the
  /// first for column-major ones). 1 for scalar accesses.
  int32_t vectorElems(const ir::Op& memoryOp) const;

  /// The dot's layouts (Dot and AsyncDot ops); null for other ops.
  const DotLayouts* dot(const ir::Op& op) const;

  /// The allocation behind a buffer or barrier value (LocalAlloc, AllocBarriers, and views of
  /// them through LocalView/LocalSlice/LocalTrans/LocalReinterpret resolve to their root).
  const SharedAllocation* sharedAllocation(const ir::Value* bufferOrBarrier) const;
  /// Scratch region for conversions and cross-warp reductions: one region reused by all of
  /// them (codegen separates uses with bar.sync). Offset and size in bytes; buffers dead
  /// wherever scratch is used may lie over it, and a use of more scratch than planned (codegen
  /// sizes some on the fly) reaches only such buffers.
  int64_t scratchOffset() const { return scratchOffset_; }
  int64_t scratchBytes() const { return scratchBytes_; }
  /// Scratch bytes the op needs (Reduce/Scan across warps, a conversion at this op); 0 if none.
  int64_t scratchBytesFor(const ir::Op& op) const;
  /// The op needing the most scratch (the first in the kernel of equals); null if none does.
  const ir::Op* largestScratchUser() const;
  /// Total dynamic shared memory of the kernel.
  int64_t sharedBytes() const { return sharedBytes_; }
  /// Allocations whose live ranges do not meet may share bytes (SharedMemoryPlan.h): before the
  /// op that starts the later tenant, codegen puts this CTA barrier. Null for ops that need
  /// none.
  const ReuseBarrier* reuseBarrierBefore(const ir::Op& op) const;
  /// Whether lowering `op` (not its regions) may use the scratch region (the shared-memory
  /// plan's view of it: conversions, cross-warp reductions, descriptor tiles, staged operands).
  bool mayUseScratch(const ir::Op& op) const { return scratchUsers_.count(&op) != 0; }

  /// Human-readable dump, one line per tensor value with its layout, for debugging and tests.
  std::string str(const ir::Function& fn) const;

private:
  friend class LayoutAssigner;
  std::unordered_map<const ir::Value*, LinearLayout> layouts_;
  std::map<std::pair<const ir::Op*, unsigned>, size_t> conversionIndex_; // -> conversions_
  std::vector<Conversion> conversions_;
  std::unordered_map<const ir::Op*, DotLayouts> dots_;
  std::unordered_map<const ir::Value*, SharedAllocation> allocations_;
  std::unordered_map<const ir::Value*, const ir::Value*> viewRoots_;
  std::unordered_map<const ir::Op*, int64_t> scratchPerOp_;
  std::unordered_map<const ir::Op*, ReuseBarrier> reuseBarriers_;
  std::unordered_set<const ir::Op*> scratchUsers_;
  std::shared_ptr<AxisInfoAnalysis> axisInfo_;
  int64_t scratchOffset_ = 0;
  int64_t scratchBytes_ = 0;
  int64_t sharedBytes_ = 0;
};

/// Assigns layouts for `options.target` and `options.numWarps` warps; inside an async_task, over
/// that task's num_warps (the warp in-dim then counts warps from the task's first warp). Throws
/// CompileError (via raiseError) for tensors the layouts cannot express (non-power-of-two shapes),
/// naming the op.
LayoutMap assignLayouts(const ir::Function& fn, const CompileOptions& options);

} // namespace ww::layout
