// Lowering of one Tile IR function to per-thread PTX (internal to src/codegen): every tensor value
// is the list of registers its LinearLayout gives the thread; shape ops, conversions, reductions,
// memory ops and structured control flow are expressed on those registers.
#pragma once

#include "codegen/Codegen.h"
#include "codegen/PtxBuilder.h"
#include "codegen/ScalarOps.h"
#include "ir/TaskPlan.h"
#include "layout/LayoutAssignment.h"
#include "layout/Layouts.h"
#include "layout/LinearLayout.h"

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace ww::codegen {

/// The registers holding one value in this thread: one entry for a scalar, one per register
/// index of the value's layout for a tensor.
using Regs = std::vector<std::string>;

/// True when `v` is a TLX buffer or a local_view of one (or a run-time choice between such
/// views, see chosenValues): its elements sit where the allocation's layout puts them
/// (local_trans and other views reorder them).
bool isPlainBuffer(const ir::Value* v);

/// The values `v` stands for at run time when control flow picks it: the values the branches of
/// a run-time if yield as its result, or the initial and yielded values of a for loop's carried
/// value (its body argument or its result; a buffer view that advances each iteration, say).
/// Empty for any other value.
std::vector<const ir::Value*> chosenValues(const ir::Value* v);

/// Opt-in dynamic shared memory a block may use on `target`: 227 KiB on sm_90a / sm_100a, 163 KiB
/// on sm_80.
int64_t maxSharedBytes(Target target);

/// The coordinates held by register `reg` of layout `l`: the XOR of the register bases of the
/// set bits of `reg`.
std::vector<int32_t> registerCoords(const layout::LinearLayout& l, int32_t reg);

/// For each register of a tensor in layout `l` whose elements are constant over aligned runs of
/// `constancy[d]` along each dim d (AxisInfo), the lowest register of the same thread whose
/// element lies in the same run block in every dim: the two hold one value for every thread
/// (a block index is the coordinate shifted right, and shifts distribute over the XOR of the
/// register's and the thread's coordinate parts). Registers are their own representative when
/// nothing is constant.
std::vector<int32_t> constancyRepresentatives(const layout::LinearLayout& l,
                                              const std::vector<int64_t>& constancy);

/// ld/st type suffix of an element of type `t` held in its register class (i1 as a u8 byte).
std::string memType(const ir::Type& t);

/// `[address]`: a PTX memory operand.
std::string bracketed(const std::string& address);

/// The barrier array a barrier view comes from (through local_view ops): the alloc_barriers
/// result, or whatever value the views start at.
const ir::Value* barrierArray(const ir::Value* v);

/// Whether `v` is the result of a tlx.async_dot (directly or through async_dot_wait, which
/// renames its registers) that no op of `body` but `user` reads, and `user` reads once: its
/// registers, possibly still written by a wgmma in flight, may become `user`'s own without a
/// copy (TlxAsyncDot.cpp).
bool isUnsharedAsyncDotResult(const ir::Block& body, const ir::Value* v, const ir::Op* user);

/// Whether a dot or async_dot `op` may accumulate straight into its accumulator operand's
/// registers: no op of `body` but `op` reads that value (or, through async_dot_wait, the value
/// it renames) (TlxAsyncDot.cpp).
bool accumulatesInPlace(const ir::Block& body, const ir::Op& op);

/// A user error at the first remote shared-memory store of `fn` when `target` has no clusters
/// (sm_80), raised before anything else is lowered so that it names the store, not the buffers
/// and barriers it needs (TlxRemoteStore.cpp).
void refuseRemoteStoresOn(const ir::Function& fn, Target target);

/// Whether `v` is a buffer in Blackwell tensor memory (TlxTmem.cpp).
bool isTmemValue(const ir::Value* v);
/// Moves each add / max / min of two fp32 registers that ends both their lives up to just after
/// the last earlier mention of either, within straight-line code (HoistCombines.cpp): a
/// reduction's chain then runs as its elements are made instead of keeping them all live.
/// Applied to sm_100a kernels (Lowering.cpp says why).
void hoistDyingCombines(std::string& body);
/// Moves each pure instruction whose result has one use down to just before that use, within
/// straight-line code (SinkSingleUses.cpp): an elementwise chain (a mask's index, compare and
/// select) then runs element by element instead of keeping every element's intermediate live.
/// Applied to sm_100a kernels, as hoistDyingCombines.
void sinkSingleUses(std::string& body);
/// Rewrites each unrounded fp32 / fp64 multiply whose one use is an add into an fma.rn at the
/// add (ContractMulAdd.cpp): Triton's enable_fp_fusion, written out in the PTX.
void contractMulAdd(std::string& body);

/// The 32-bit tcgen05.mma instruction descriptor (kind::f16 / tf32 / f8f6f4) of an M x N MMA of
/// `a` x `b` into `d`, with A / B MN-major as given (TlxTmem.cpp).
uint32_t tcgen05InstrDescriptor(ir::DType a, ir::DType b, ir::DType d, bool aMnMajor, bool bMnMajor,
                                int64_t M, int64_t N);
/// Four 8-bit values (each the low byte of a 16-bit register) as one 32-bit word, x[0] in the
/// lowest byte; and byte `i` of `word` into the 16-bit register `out` (TlxTcgen05Scaled.cpp).
std::string packBytes(PtxBuilder& b, const std::string (&x)[4]);
void unpackByte(PtxBuilder& b, const std::string& word, int i, const std::string& out);

/// The 32-bit instruction descriptor of a block-scaled tcgen05.mma: .kind::mxf8f6f4 of A / B in
/// OCP MX formats `aFormat` / `bFormat` ("e4m3", "e5m2") with e8m0 scales, or .kind::mxf4 /
/// mxf4nvf4 of "e2m1" ones with e8m0 or (`ue4m3Scales`) ue4m3 scales; the scale sub-columns
/// `aScaleId` / `bScaleId` of each 32-bit scale column (TlxTcgen05Scaled.cpp).
uint32_t tcgen05ScaledInstrDescriptor(const std::string& aFormat, const std::string& bFormat,
                                      bool ue4m3Scales, bool aMnMajor, bool bMnMajor, int64_t M,
                                      int64_t N, int aScaleId, int bScaleId);
/// The .kind and block-scale qualifiers of the block-scaled tcgen05_mma `op`
/// ("mxf8f6f4.block_scale.scale_vec::1X", "mxf4.block_scale.scale_vec::2X" or
/// "mxf4nvf4.block_scale.scale_vec::4X"), and how many scales of a row one instruction reads
/// (1, 2, 4) (TlxTcgen05Scaled.cpp).
std::string tcgen05ScaledKind(const ir::Op& op);
int64_t scalesPerScaledMma(const ir::Op& op);

class FunctionLowering {
public:
  FunctionLowering(const ir::Function& fn, const CompileOptions& options,
                   const SourceManager* sources);
  PtxKernel run();

private:
  // ---- driving ----
  void lowerBlock(const ir::Block& block);
  /// Lowers `op` (dispatchOp) and checks Ops.def's AgentBarrier trait against what its lowering
  /// did (ir::lowersWithAgentBarrier, which the interpreter and the shared-memory barrier pass
  /// rely on).
  void lowerOp(const ir::Op& op);
  void dispatchOp(const ir::Op& op);
  /// Operand `i` of `op` in the layout `op` needs it in (converted when the map says so).
  const Regs& operand(const ir::Op& op, unsigned i);
  void bind(const ir::Value* v, Regs regs);
  /// The layout `v` is produced in (the rematerialization's layout while one is lowered).
  const layout::LinearLayout& layoutOf(const ir::Value* v) const;
  /// The layout operand `i` of `op` is needed in.
  const layout::LinearLayout& operandLayoutOf(const ir::Op& op, unsigned i) const;
  /// Recomputes a value in another layout from its arange/splat/constant chain.
  Regs rematerialize(const layout::Conversion& c);
  /// Converts, right before `loop`, the loop-invariant values its body converts (the layout
  /// map's Conversion::hoistBefore), so that each iteration reads the converted registers.
  void convertInvariantsBefore(const ir::Op& loop);
  const Regs& regsOf(const ir::Value* v) const;
  ScalarContext scalarContext(const ir::Op& op) {
    return {b_, options_.target, op.loc(), options_.fpFusion, options_.reflectFtz};
  }

  // ---- thread-index arithmetic ----
  std::string tid();
  /// %tid.x with its lane bits cleared (the task's warp index times 32), computed from a warp
  /// index that ptxas knows is the same in every lane: values built from it live in uniform
  /// registers (wgmma descriptors then need no per-iteration R2UR moves).
  std::string warpTid();
  int numThreads() const { return warps() * 32; }
  /// Warps of the code being lowered: the current async task's, else the kernel's.
  int warps() const { return taskWarps_ ? taskWarps_ : fn_.numWarps; }
  /// XOR of images[i] over the set bits i of %tid.x (lane bits first, then warp bits), as one
  /// register or "0"; `possibleBits` receives the bits the result can have.
  std::string tidLinear(const std::vector<int32_t>& images, int32_t* possibleBits);
  /// Images of the tid bits for output dim `outDim` of a distributed layout.
  std::vector<int32_t> tidImages(const layout::LinearLayout& l, const std::string& outDim) const;
  /// `base` XOR `constant` where `base` can hold only `possibleBits` (add when disjoint).
  std::string xorConst(const std::string& base, int32_t possibleBits, int32_t constant);
  /// Coordinate along out dim `d` of register `reg` of layout `l`.
  std::string coordinate(const layout::LinearLayout& l, int d, int32_t reg);
  /// Predicate: this thread is the canonical holder of its elements (no duplicate lane/warp);
  /// empty when every thread holds distinct data.
  std::string ownerPredicate(const layout::LinearLayout& l);
  /// Registers of `l` that duplicate an earlier register (free register bits set).
  bool isDuplicateRegister(const layout::LinearLayout& l, int32_t reg) const;

  // ---- data movement ----
  /// The dst registers of a value whose element at hardware index x is the src element at
  /// coordinates gatherMap(x) XOR `constant` (gatherMap: register/lane/warp -> src coords).
  /// Registers move within the thread when possible, through shared memory otherwise.
  Regs gather(const Regs& src, const layout::LinearLayout& srcLayout,
              const layout::LinearLayout& gatherMap, const std::vector<int32_t>& constant,
              ir::DType elem, const ir::Op& at);
  Regs convert(const Regs& src, const layout::LinearLayout& from, const layout::LinearLayout& to,
               ir::DType elem, const ir::Op& at);
  /// Whether moving registers with `plan` costs fewer instructions than shared memory.
  bool shufflesAreCheaper(const layout::WarpShufflePlan& plan,
                          const layout::LinearLayout& srcLayout,
                          const layout::LinearLayout& gatherMap, int bytes) const;
  /// The registers of `gatherMap` read from `src` with one shfl.sync.idx each, as `plan` says.
  Regs shuffle(const Regs& src, const layout::WarpShufflePlan& plan,
               const layout::LinearLayout& gatherMap, ir::DType elem);
  /// The independent registers a shuffle plan's thread bits add to source registers.
  static std::vector<int32_t> registerChoices(const layout::WarpShufflePlan& plan);
  /// `x` (of class `c`) as held by lane `lane` of this warp (shfl.sync.idx).
  std::string shuffleFromLane(const std::string& x, RegClass c, const std::string& lane);
  /// A linear map (over GF(2): apply it to bases) from tensor coordinates to an element offset
  /// in a shared-memory region.
  using OffsetFn = std::function<int64_t(const std::vector<int32_t>&)>;
  /// Writes the thread's registers of a value in layout `l` to shared memory at `base` bytes,
  /// element (coords) at offsetOf(coords); vectorized where the offsets allow.
  /// `baseReg`, when given, is a register added to every address (a TLX buffer chosen at run
  /// time). Element offsets are XORed with `constantOffset` (as loadShared's), the part of a
  /// TLX slice's offset that the swizzle mixes into the view's own offset bits.
  /// `padding` (a padded TLX buffer, SharedAllocation::padding): element offset x of offsetOf
  /// (row-major) lies at x + sum (x / interval) * padding; the thread's and each register's
  /// offsets are then added, which needs them on disjoint bits (checked by paddedThreadOffset).
  /// `guard` (a predicate register), when given, predicates every store.
  using Padding = std::vector<std::pair<int64_t, int64_t>>;
  void storeShared(const Regs& regs, const layout::LinearLayout& l, const OffsetFn& offsetOf,
                   int64_t base, ir::DType elem, const std::string& baseReg = {},
                   int64_t constantOffset = 0, const Padding* padding = nullptr,
                   const std::string& guard = {});
  /// The row-major element offsets of a tensor of `shape` (powers of two), as an OffsetFn.
  static OffsetFn rowMajorOffsets(const std::vector<int64_t>& shape);
  /// storeShared through stmatrix (sm_90a, 16-bit elements: one instruction writes up to four
  /// 8x8 matrices, a thread's 32-bit pair per matrix) where `l` and offsetOf put every matrix
  /// row at 16 consecutive bytes (layout::stmatrixAccessLayout). Returns false, having emitted
  /// nothing, where they do not.
  bool matrixRowsFit(const layout::LinearLayout& l, const OffsetFn& offsetOf) const;
  bool storeSharedMatrices(const Regs& regs, const layout::LinearLayout& l,
                           const OffsetFn& offsetOf, int64_t base, ir::DType elem);
  /// `v` consecutive elements of `elem` from shared memory at `address` (`reg+bytes`): one
  /// ld.shared, a vector where v > 1 (16-bit elements as 32-bit words, as loadShared reads).
  Regs loadSharedVector(const std::string& address, int32_t v, ir::DType elem);
  /// Reads the registers of layout `l` back (element offsets XOR `constantOffset`).
  Regs loadShared(const layout::LinearLayout& l, const OffsetFn& offsetOf, int64_t base,
                  int64_t constantOffset, ir::DType elem, const std::string& baseReg = {},
                  const Padding* padding = nullptr);
  /// For a padded buffer: the thread's padded byte offset (a register); `*v` is narrowed to
  /// vectors that stay contiguous and aligned under the padding. The layout's register, lane
  /// and warp bits must reach disjoint element-offset bits (then XOR is addition, and padding
  /// distributes over it): the caller checks (Tlx.cpp).
  std::string paddedThreadOffset(const layout::LinearLayout& l, const OffsetFn& offsetOf,
                                 const Padding& padding, int bytes, int32_t* v);
  static int64_t paddedOffset(int64_t x, const Padding& padding);
  /// How storeShared and loadShared address a value's elements: the thread's offset (`hw`,
  /// swizzled by XOR on `hwBits`, or padded) and the elements moved at once (`vector`).
  struct SharedAccess {
    std::string hw;
    int32_t hwBits = 0;
    int32_t vector = 1;
    const Padding* padding = nullptr;
    int bytes = 0;
  };
  SharedAccess sharedAccess(const layout::LinearLayout& l, const OffsetFn& offsetOf, int bytes,
                            const Padding* padding);
  /// The address register and constant byte offset of the access's elements that start at
  /// register `r` (element offsets XOR `constantOffset`; `baseReg`, when given, added).
  std::pair<std::string, int64_t> sharedElementAddress(const SharedAccess& access,
                                                       const layout::LinearLayout& l,
                                                       const OffsetFn& offsetOf, int32_t r,
                                                       int64_t constantOffset,
                                                       const std::string& baseReg);
  std::vector<int32_t> offsetImages(const layout::LinearLayout& l, const OffsetFn& offsetOf,
                                    int bytes) const;
  /// Elements a thread moves at once to consecutive shared addresses (at most 16 bytes).
  /// `fromRegisters`: the elements pass through registers (st/ld.shared), where 8-bit ones
  /// go at most 4 to a word; copies from global memory (cp.async) have no such limit.
  int32_t sharedVectorWidth(const layout::LinearLayout& l, const OffsetFn& offsetOf, int bytes,
                            bool fromRegisters = true) const;
  /// Shared memory: `.extern .shared` base plus byte offset register.
  std::string sharedAddress(const std::string& byteOffset);
  void barrier();
  /// fence.proxy.async.shared::cta, then barrier(): this thread's shared-memory accesses so far
  /// ordered for the async proxy (wgmma, TMA) as well, for every thread of the agent.
  void proxyFenceAndBarrier();
  /// For lowerOp's check of AgentBarrier ops: the agent synced by other means than barrier()
  /// (barrier.cluster).
  void agentSynced() { ++agentSyncs_; }
  /// The failure path of a device-side check: __assertfail with `message` and loc's FILE:LINE
  /// (the driver adds block and thread; the launch fails with a device-side assert), then trap.
  void assertFailure(SourceLoc loc, const std::string& message);
  /// A TMA copy's innermost offset (`inner`, materialized as `reg`) must be 16-byte aligned, or
  /// the GPU stops the kernel with an illegal instruction: a constant that is not is a compile
  /// error, a value AxisInfo cannot prove aligned is checked at run time (a device-side assert
  /// naming the copy's line) before the copy.
  void checkTmaBoxStart(const ir::Op& op, const ir::Value* inner, const std::string& reg,
                        ir::DType elem);
  /// Whether a plain (not per-warp) barrier_arrive precedes `op` in its block with only pure ops
  /// between: the task's threads met for it and have done nothing since.
  bool followsPlainArrive(const ir::Op& op) const;
  /// For lowerOp's check: an AgentBarrier op that needs no sync where it is (the exceptions
  /// ir::lowersWithAgentBarrier lists: warp-barrier arrives, a hazard barrier already met, a
  /// remote store right after another, a remote store that traps outside a cluster).
  void agentSyncNotNeeded() { ++agentSyncs_; }
  /// Scratch shared memory for one use at `op`: returns its byte offset, grows the kernel's total.
  /// An op claims the region here before it writes: a descriptor store whose tile the TMA may
  /// still be reading (bulkStoreReadPending_) is drained first.
  int64_t scratch(int64_t bytes);
  /// Inside an async task, a descriptor store does not wait for the TMA to read its tile out of
  /// the scratch region: the next claim of the region (scratch()), a return, or the task's end
  /// waits (cp.async.bulk.wait_group.read by the thread that issued it), so the read overlaps
  /// what the task does next (a persistent GEMM's next tile), as CUTLASS's and Triton's pipelined
  /// TMA stores wait before the buffer's next write. Returns whether a wait was emitted.
  bool drainBulkStoreRead();
  /// At the head of a loop with these regions: a descriptor store in them may still be read
  /// there (from the previous iteration), so the read counts as pending. A read pending from
  /// before a loop without stores is drained once, not in every iteration: before the loop where
  /// it claims scratch, else at its exit (returns true: the caller drains there). Drained before
  /// the epilogue that follows a K loop rather than after the epilogue read the accumulators
  /// (ptxas serializes the wgmma of a pipelined K loop before a bulk wait that follows such
  /// reads, warning C7514). After the loop, the read is pending where it was at the head or at
  /// the end.
  bool bulkStoreReadAtLoopHead(std::initializer_list<const ir::Block*> regions);
  /// The CTA barrier (and proxy fence) the layout pass asks for before `op`, where it gives
  /// bytes another tenant used to the one `op` starts (LayoutMap::reuseBarrierBefore).
  void reuseBarrier(const ir::Op& op);

  // ---- ops ----
  void lowerConstant(const ir::Op& op);
  void lowerArange(const ir::Op& op);
  void lowerShapeOp(const ir::Op& op);
  void lowerElementwise(const ir::Op& op);
  void lowerLoad(const ir::Op& op);
  void lowerStore(const ir::Op& op);
  void lowerAtomic(const ir::Op& op);
  /// desc.load / desc.store through a host descriptor or a tensor map written in the kernel:
  /// TMA copies of the block through a shared-memory tile (Memory.cpp).
  void lowerDescriptorCopy(const ir::Op& op);
  /// The NVMMA swizzle (bytes) in which desc.store stages the tiles of `desc` when the kernel
  /// only stores through it (2-D, power-of-two dims, at least 8 rows); 0 otherwise.
  int storeStagingSwizzle(const ir::Value* desc);
  void lowerReduce(const ir::Op& op);
  void lowerFor(const ir::Op& op);
  void lowerIf(const ir::Op& op);
  void lowerWhile(const ir::Op& op);
  void lowerDot(const ir::Op& op);
  /// tl.cumsum / tl.cumprod / tl.associative_scan (Scan.cpp).
  void lowerScan(const ir::Op& op);
  /// tl.device_print, tl.device_assert and run-time assert (Debug.cpp).
  void lowerDebugOp(const ir::Op& op);
  // ---- TLX: buffers and barriers are one register, their byte offset in dynamic shared
  // memory. Buffers in Tlx.cpp, barriers in TlxBarriers.cpp ----
  void lowerTlxBuffer(const ir::Op& op);
  /// tlx.local_gather / tlx.local_scatter: one shared-memory access per element at a run-time
  /// index along one axis (TlxGatherScatter.cpp).
  void lowerLocalGatherScatter(const ir::Op& op);
  /// Element offsets of the buffer view operand `i` of `op` (as local_load uses them), XORed
  /// with `*constant`; a user error when the view's elements are not contiguous (Tlx.cpp).
  /// Bytes between rows of the view a local_view subview indexes (Tlx.cpp).
  int64_t subviewRowBytes(const ir::Op& op);
  /// The byte layout of operand i of `op`, a buffer view, when its bytes are one contiguous
  /// range starting at its register (a bulk copy moves them so): a buffer, or a slice of whole
  /// rows at a multiple of the swizzle period. nullopt otherwise.
  std::optional<layout::LinearLayout> contiguousViewBytes(const ir::Op& op, unsigned i);
  OffsetFn bufferElementOffsets(const ir::Op& op, unsigned i, int64_t* constant);
  void lowerTlxBarrier(const ir::Op& op);
  /// The retry loop of barrier_wait on the mbarrier at `bar` for parity `phase`
  /// (MbarrierWait.cpp).
  void waitForBarrierPhase(const ir::Op& op, const std::string& bar, const std::string& phase);
  /// cp.async async_load with commit and wait groups (TlxAsyncCopy.cpp).
  void lowerTlxAsyncCopy(const ir::Op& op);
  /// Clusters: cluster_cta_rank, cluster_size_1d, cluster_barrier (TlxCluster.cpp).
  void lowerTlxCluster(const ir::Op& op);
  /// Distributed shared memory: async_remote_shmem_store (st.async with complete_tx on the
  /// peer's mbarrier) and remote_shmem_store (st.shared::cluster) (TlxRemoteStore.cpp).
  void lowerTlxRemoteStore(const ir::Op& op);
  /// async_remote_shmem_copy: one cp.async.bulk.shared::cluster (TlxRemoteStore.cpp).
  void lowerTlxRemoteCopy(const ir::Op& op);
  /// tl.inline_asm_elementwise: the user's PTX once per `pack` elements (InlineAsm.cpp).
  void lowerInlineAsm(const ir::Op& op);
  /// tl.gather: the source through shared memory, then one load per result element at its
  /// index (Gather.cpp).
  void lowerGather(const ir::Op& op);
  /// tl.histogram: counters in the scratch region bumped by shared-memory atomics, then read
  /// back in the result's layout (Histogram.cpp).
  void lowerHistogram(const ir::Op& op);
  /// tl.map_elementwise: the region inlined once per `pack` of the thread's elements
  /// (MapElementwise.cpp).
  void lowerMapElementwise(const ir::Op& op);
  /// tlx.vote_ballot_sync: vote.sync.ballot over a per-thread scalar predicate (WarpVote.cpp).
  void lowerVoteBallot(const ir::Op& op);
  /// tlx.stoch_round: cvt.rs.satfinite on sm_100a, two elements an instruction, each rounded
  /// with its own random bits (TlxStochRound.cpp); refused, at the op, on other targets.
  void lowerStochRound(const ir::Op& op);
  /// The shared-memory allocation behind a buffer or barrier operand; a user error if none.
  const layout::SharedAllocation& allocationOf(const ir::Op& op, unsigned operandIndex);
  /// Refuses (at op) a buffer whose kernel-given layout= (SharedAllocation::userLayout) is
  /// not an NVMMA swizzle, for consumers (TMA, wgmma, tcgen05.mma) that read only those;
  /// `rowMajorToo`: an unswizzled row-major layout is accepted as well (TMA's no-swizzle box).
  void requireNvmmaUserLayout(const ir::Op& op, unsigned operandIndex, bool rowMajorToo);
  /// tlx.local_load / local_store of a buffer in a padded layout= (SharedAllocation::padding).
  void lowerPaddedAccess(const ir::Op& op, const layout::SharedAllocation& a);
  /// `[address]` of the barrier view operand `i` of `op`.
  std::string barrierAddress(const ir::Op& op, unsigned i);
  // ---- Blackwell tensor memory and tcgen05 (TlxTmem.cpp) ----
  /// Column offsets of the kernel's TMEM local_allocs (at construction).
  void planTensorMemory();
  /// The TMEM address of the kernel's allocation, allocated at the first TMEM local_alloc `at`.
  std::string tensorMemoryBase(const ir::Op& at);
  /// tcgen05.dealloc before the kernel returns, when it allocated tensor memory.
  void releaseTensorMemory();
  /// local_alloc / local_view / local_slice / local_load / local_store of TMEM buffers.
  void lowerTmemBuffer(const ir::Op& op);
  void lowerTmemCopy(const ir::Op& op);
  /// The TMEM address of op's buffer (operand 0) at the lanes warp `warp` may access.
  std::string warpLanesAddress(const ir::Op& op, const std::string& warp);
  /// A tensor-memory local_load into / local_store from a layout that keeps tcgen05's rows (a
  /// kernel-given one): one tcgen05.ld / tcgen05.st .32x32b message per run of consecutive
  /// 32-bit columns the thread holds.
  void lowerTmemColumns(const ir::Op& op, const layout::TmemColumnBits& bits);
  /// tcgen05_mma and tcgen05_commit.
  void lowerTcgen05(const ir::Op& op);
  /// tlx.tmem_copy of block scales: tcgen05.cp ... 32x128b.warpx4 (TlxTcgen05Scaled.cpp).
  void lowerTmemScaleCopy(const ir::Op& op);
  /// local_load / local_store of tensor-memory block scales, in the layout the MMA reads
  /// (TlxTcgen05Scaled.cpp).
  void lowerTmemScalesLoadStore(const ir::Op& op);
  /// The tcgen05.cp instructions that copy the [rows, cols] block scales of the shared-memory
  /// tile at byte address `smem` (cuBLAS block-scaled layout) to the tensor memory at `tmem`,
  /// in the issuing thread (TlxTcgen05Scaled.cpp).
  void copyScalesToTmem(const std::string& smem, const std::string& tmem, int64_t rows,
                        int64_t cols);
  /// The TMEM addresses of a block-scaled tcgen05_mma's scales and the columns between their
  /// scale words, and the tcgen05.cp of those held in shared memory into the op's own columns:
  /// emitted by the issuing thread before its MMAs (TlxTcgen05Scaled.cpp).
  struct ScaleOperand {
    std::string address;
    int64_t wordColumns = 4;
  };
  std::pair<ScaleOperand, ScaleOperand> scaleOperands(const ir::Op& op);
  /// One tcgen05.commit of the thread's MMAs to the mbarrier at `bar`, guarded by `guard`; in a
  /// kernel of CTA-pair MMAs, multicast to the barrier in both CTAs of the pair.
  void tcgen05Commit(const std::string& bar, const std::string& guard, const std::string& pairMask);
  /// Predicate: this CTA leads its pair (even %cluster_ctarank); and the 16-bit mask of the
  /// pair's two cluster ranks.
  std::string leadsCtaPair();
  std::string ctaPairMask();
  /// clc_try_cancel and clc_query: cluster launch control (TlxClc.cpp).
  void lowerClc(const ir::Op& op);
  /// tlx.async_dot (wgmma from TLX buffers) and tlx.async_dot_wait (TlxAsyncDot.cpp).
  void lowerAsyncDot(const ir::Op& op);
  void lowerAsyncDotWait(const ir::Op& op);
  /// Finds the values that stay wgmma's packed fp16 accumulator words (packedHalfValues_):
  /// results of async_dots into fp16 of fp16 operands, passed on by async_dot_wait and carried
  /// by for loops, as long as every reader takes the words (TlxAsyncDot.cpp).
  void planPackedHalfAccumulators();
  /// The packed words of `v`, one of packedHalfValues_, once lowered: word w holds the
  /// elements of registers 2w (low half) and 2w + 1 of `v`'s layout.
  const Regs& halfWordsOf(const ir::Value* v) const;
  /// Warp specialization (TlxTasks.cpp): each async_task runs on its own warp range (branch on
  /// %tid), with setmaxnreg for its register budget and named barriers for its internal syncs.
  void lowerAsyncTasks(const ir::Op& op);
  /// A user error at `op` when `what` needs more registers a thread than the kernel's .maxnreg:
  /// ptxas compiles every instruction within it, whatever setmaxnreg gives a task.
  void requireLaunchRegisters(const ir::Op& op, int need, const std::string& what);
  /// TMA copies between a descriptor and a TLX buffer (async_descriptor_load/store, store_wait;
  /// TlxTma.cpp).
  void lowerTlxDescriptorCopy(const ir::Op& op);
  /// Records the tensor-map swizzle a descriptor is used with; a user error when two
  /// uses need different ones.
  void requireDescriptorSwizzle(const ir::Op& op, const ir::Value* desc, int swizzleBytes);
  /// Prefetch hints, 1-D bulk copies (TlxTmaExtras.cpp).
  void lowerTlxTmaExtras(const ir::Op& op);
  /// A make_desc that TMA copies, prefetches or desc.load / desc.store use (the descriptor
  /// lowering keeps those it can write, ir/TensorMaps.h): its tensor map, written in this
  /// program's slot of the global scratch (TlxTmaExtras.cpp).
  void lowerDeviceTensorMap(const ir::Op& op);
  /// The createpolicy register for a TMA op's eviction_policy ("" without an L2 hint).
  std::string l2CachePolicy(const ir::Op& op);
  /// The swizzle of the shared tiles the TMA copies through `desc` use: its first TLX copy's
  /// buffer's, else storeStagingSwizzle (0 without any).
  int tmaSwizzleOf(const ir::Value* desc);
  /// How a TMA copy of block `dt` to or from a tile of `swizzle` splits into copies of one box:
  /// at most 256 elements per dim and, where rows are wider than the swizzle span, one span
  /// wide (the tile's column blocks). Each box lands on a contiguous part of the tile: past the
  /// first dim (innermost first) longer than 256 the box is 1 wide. Copies list their
  /// coordinate offsets (row-major dims) and byte offset in the tile; python/warpweave's
  /// box_shape encodes the same box on the host.
  struct TmaBoxes {
    std::vector<int64_t> box;
    std::vector<std::pair<std::vector<int64_t>, int64_t>> copies;
    std::string problem; // why the block cannot be split this way ("" when it can)
  };
  static TmaBoxes tmaBoxes(const ir::Type& dt, int swizzle);
  /// Predicate: this thread is the one that issues single-thread operations (thread 0).
  /// index % groupSize (a buffer's subtile within its storage_alias_spec group).
  const ir::Value* tmemRoot(const ir::Value* v);
  /// Binds the tensor-memory buffers that `task` uses to their addresses computed again at
  /// this point (TlxTmem.cpp); returns the bindings they had, for after the task.
  std::vector<std::pair<const ir::Value*, Regs>> rebindTmemAddresses(const ir::Block& task);
  /// Lowers again, at this point, the scalars computed before the tasks from launch values only
  /// that `task` reads (TlxTasks.cpp); returns the bindings they had, for after the task.
  std::vector<std::pair<const ir::Value*, Regs>> relowerLaunchScalars(const ir::Block& task);
  std::string groupIndex(const std::string& index, int64_t groupSize);
  std::string electedThread();
  /// tl.dot of per-element FMAs past the straight-line budget (layout::unrollsFmaDot): A and B
  /// staged in the scratch region, then a loop over K into the accumulator `acc` (in layout
  /// `D`, the result's).
  void lowerDotFmaLoop(const ir::Op& op, const layout::LinearLayout& D, const Regs& acc);
  /// tl.dot on sm_90a: operands staged in shared memory, wgmma.mma_async per warp group.
  void lowerDotWgmma(const ir::Op& op, const Regs& a, const Regs& b, const Regs& acc);
  /// Inlines a combine region (reduce/scan) on scalar registers; returns the yielded registers.
  Regs inlineCombine(const ir::Op& op, const Regs& lhs, const Regs& rhs);
  /// Fresh registers for each result of `op` (as many as its layout gives a thread), also
  /// appended in order to `flat` and their classes to `classes` (for parallelCopy).
  std::vector<Regs> freshResultRegisters(const ir::Op& op, std::vector<std::string>& flat,
                                         std::vector<RegClass>& classes);
  /// Whether loop `loop` may carry its operand `i` (registers `init`) in those registers
  /// instead of copies: a tlx.async_dot accumulator nothing else reads. Copying it would read
  /// registers a wgmma may still be writing; ptxas then waits there and serializes every wgmma
  /// of the kernel (a main loop after a peeled first k step, as TLX's GEMM tutorials write it).
  bool carriesInitInPlace(const ir::Op& loop, unsigned i, const Regs& init);
  /// Moves `values` into `dst` with parallel-copy semantics (for loop-carried registers).
  void parallelCopy(const std::vector<std::string>& dst, const std::vector<std::string>& values,
                    const std::vector<RegClass>& classes);
  std::string movOpcode(RegClass c) const;

  const ir::Function& fn_;
  CompileOptions options_;
  const SourceManager* sources_;
  PtxBuilder b_;
  layout::LayoutMap layouts_;
  std::unordered_map<const ir::Value*, Regs> values_;
  // An fp16 accumulator the MMA may still be writing is held as its packed words, not as
  // elements: unpacking it would read registers of a wgmma in flight, and ptxas then waits
  // there and serializes every wgmma of the kernel. Such values have words, not values_.
  std::unordered_set<const ir::Value*> packedHalfValues_;
  std::unordered_map<const ir::Value*, Regs> halfWords_;
  // Converted operands, keyed by (user op, operand index).
  std::unordered_map<const ir::Op*, std::unordered_map<unsigned, Regs>> converted_;
  std::unordered_map<const ir::Value*, int> uses_; // operand uses of every value
  // While a rematerialization is lowered: the layouts of the values it recomputes.
  std::unordered_map<const ir::Value*, layout::LinearLayout> rematLayouts_;
  int64_t sharedBytes_ = 0;
  bool usesShared_ = false;
  // Products a thread of the FMA dots unrolled so far (see lowerDot).
  int64_t fmaDotProducts_ = 0;
  // Any dot of per-element FMAs, unrolled or looped (registersPerThreadLimit).
  bool hasFmaDots_ = false;
  // The async task being lowered: its warps (0 outside tasks), first warp, and the named
  // barrier its internal syncs use (-1 outside tasks).
  int taskWarps_ = 0;
  int taskFirstWarp_ = 0;
  std::string warpIndex_; // shfl of %tid.x / 32 from lane 0, emitted at the kernel's entry
  int taskBarrierId_ = -1;
  int totalWarps_ = 0; // warps the kernel launches with (all tasks)
  // Start of the scratch region while lowering an async task that runs concurrently with
  // earlier ones (-1: the layout map's region).
  int64_t scratchBase_ = -1;
  // A descriptor store's TMA read of the scratch region may still be in flight on some path to
  // here (see drainBulkStoreRead; only inside async tasks).
  bool bulkStoreReadPending_ = false;
  int maxRegisters_ = 0;               // .maxnreg when tasks use setmaxnreg
  int taskRegisters_ = 0;              // the setmaxnreg budget of the task being lowered
  int registersPerThreadLimit() const; // .maxnreg of kernels without tasks (sm_100a, FMA dots)
  // Registers of one tcgen05.ld / st (packedStore: a store of 16-bit / 8-bit elements).
  int64_t tmemMessageRegisters(int64_t perThread, bool packedStore = false) const;
  // Tensor maps built in the kernel (128 bytes each per program in the global scratch, which
  // the parameter `scratchParam_` points at), and whether the PTX needs ISA 8.6.
  int deviceTensorMaps_ = 0;
  // tlx.allocate_tensor_descriptor storage id -> its first slot among the device tensor maps.
  std::map<int64_t, int> descriptorStorage_;
  std::string scratchParam_;
  bool needsPtx86_ = false;
  // Whether an op touching TLX shared buffers (ir::accessesSharedBuffers), or a control-flow
  // join, came since the last barrier() in straight-line code: a barrier the shared-memory
  // hazard pass inserted is emitted only then.
  bool sharedSinceBarrier_ = true;
  // The size of the PTX body right after the last barrier(): nothing was emitted since when the
  // body still has that size.
  size_t bodyAtBarrier_ = SIZE_MAX;
  int barrierIdAtBody_ = -1; // the bar.sync id written at bodyAtBarrier_
  // Any shared memory (TLX buffers, and the scratch of conversions and reductions through
  // sharedAddress) accessed, or a join of paths, since the last barrier(); and whether that
  // barrier came right after a proxy fence. A reuse barrier is already met when neither.
  bool anySharedSinceBarrier_ = true;
  bool fencedBarrier_ = false;
  // Agent syncs so far (barrier(), agentSynced(), agentSyncNotNeeded()), for lowerOp's check.
  uint64_t agentSyncs_ = 0;
  // Where the async tasks run and their register budgets (when the kernel has async tasks).
  std::optional<ir::TaskPlan> taskPlan_;
  // Tensor memory: each TMEM local_alloc's first column, the columns all need, the power of
  // two allocated, and the register holding the allocation's address once allocated.
  std::unordered_map<const ir::Value*, int64_t> tmemOffsets_;
  // Members of a tensor-memory storage_alias_spec: buffer i at its first column + i * stride +
  // (i % group) * its own columns (see ir/Ops.def); and each spec's first column.
  struct TmemSpacing {
    int64_t stride = 0, group = 1;
  };
  std::unordered_map<const ir::Value*, TmemSpacing> tmemSpacing_;
  std::unordered_map<int64_t, int64_t> tmemAliasRegions_;
  int64_t tmemColumns_ = 0;
  int64_t tmemAllocColumns_ = 0;
  std::string tmemBase_;
  // Whether the kernel's tcgen05 ops are CTA pairs' (two_ctas=True): cta_group::2 throughout.
  bool pairedMma_ = false;
  // [64, N] allocations a CTA pair's M = 64 MMA accumulates into: 128 lanes of N / 2 columns
  // (ir/TmemPairs.h).
  std::unordered_set<const ir::Op*> pairSplit_;
  bool pairSplit(const ir::Value* v);
  // [64, K] allocations a CTA pair's M = 64 MMA reads its A from: rows in lanes r and 64 + r.
  std::unordered_set<const ir::Op*> pairLhs_;
  bool pairLhs(const ir::Value* v);
  // Block-scaled MMAs with scales in shared memory: the first TMEM column of the op's own copy
  // of its A and B scales (-1 for a scale operand in tensor memory).
  std::unordered_map<const ir::Op*, std::pair<int64_t, int64_t>> scaleColumns_;
  // Descriptor (argument or make_desc) -> swizzle bytes of the shared tiles its TMA copies use.
  std::unordered_map<const ir::Value*, int> descriptorSwizzle_;
  // Descriptor argument -> whether its TMA loads fill padded e2m1 tiles (the host encodes it as
  // CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN16B, declared by ", fp4_padded" in its parameter type).
  std::unordered_map<const ir::Value*, bool> descriptorFp4Padded_;
};

} // namespace ww::codegen
