// Tile IR passes: verification and clean-up (constant folding, CSE, DCE).
#pragma once

#include "ir/IR.h"

namespace ww::transforms {

/// Checks structural invariants (operand types, terminators, region arguments, dominance).
/// Throws std::logic_error naming the op: a failure is a compiler bug, not a user error.
void verify(const ir::Function& fn);

/// Folds constant arithmetic, comparisons and casts; simplifies x+0, x*1, x*0 and friends.
void foldConstants(ir::Function& fn);
/// Merges identical pure ops.
void eliminateCommonSubexpressions(ir::Function& fn);
/// Removes pure ops whose results are unused.
void eliminateDeadCode(ir::Function& fn);

/// fold, CSE, DCE to a fixed point, verifying after each pass.
void runCleanupPipeline(ir::Function& fn);

/// Rewrites desc.load / desc.store through descriptors made in the kernel
/// (tl.make_tensor_descriptor) into masked loads and stores of pointer tensors: out-of-bounds
/// elements read as zero and are not written, as with TMA. With `tensorMaps` (a target with
/// TMA) the accesses through descriptors that can be tensor maps (ir/TensorMaps.h) stay: the
/// kernel writes their maps and copies with TMA. Runs before the loop passes.
void lowerDeviceDescriptors(ir::Function& fn, bool tensorMaps);
/// The same rewrite of one desc_load / desc_store through a make_desc, in place (the pipeliner's
/// fallback for loops its TMA rings do not take).
void lowerDeviceDescriptorAccess(ir::Function& fn, ir::Op& access);

/// Folds `x + dot(a, b)` (a +0 accumulator, the product used once) into `dot(a, b, x)`, as
/// Triton's combine pass does. Returns how many adds it folded.
int combineDotAdd(ir::Function& fn);

/// Splits each batched tl.dot (3-D or more) into one 2-D dot per batch element, its operands
/// sliced and its products joined by shape ops, for the GPU targets' 2-D MMA lowerings. Returns
/// how many dots it split.
int decomposeBatchedDots(ir::Function& fn);

/// Moves loop-invariant shape ops of tensors (broadcast, expand_dims, reshape, permute) and value
/// hints out of for loops (nested loops first, so an op can leave several levels), after
/// forwarding the values a loop carries unchanged to their uses and dropping them from the loop.
/// Returns how many ops moved and carried values went.
int hoistLoopInvariants(ir::Function& fn);

/// Carries a for loop's value in the type it is always cast to: where every use of a carried
/// value in the loop and of its result after the loop is a cast to one type (one rounding), the
/// cast moves to where the yielded value is made and before the loop, and the loop carries the
/// cast value (TLX's pipelined attention loops carry P in fp32 to cast it to fp16 in the next
/// iteration). Returns how many carried values it narrowed.
int narrowCarriedCasts(ir::Function& fn);

/// Software-pipelines (for sm_90a) each for loop whose body feeds two tl.loads into its one
/// fp16/bf16 tl.dot: the loads become cp.async copies into S = max(num_stages, 3) shared buffers
/// (fewer where they would not fit), issued S - 2 iterations ahead, and the dot an async wgmma
/// from them. Two desc.loads through host descriptors or tensor maps made before the loop
/// become TMA copies into such buffers instead. Loops of other shapes are left alone. Returns
/// how many loops were rewritten.
///
/// With `tensorMemory` (sm_100a) the matmul and attention forms are taken, their dots becoming
/// tcgen05.mma into tensor memory instead (see SoftwarePipeline.cpp); other loops are left as
/// they are.
///
/// `budget` (optional) says whether an sm_100a attention loop that seems to use no scratch may
/// be taken at its fewest stages by counting the epilogue's conversion over its dead stages,
/// and reports whether one was. A guess: if shared memory then overflows, the driver compiles
/// again without it.
struct PipelineBudget {
  bool roomOverDeadStages = true;
  bool usedRoomOverDeadStages = false;
};
int pipelineDotLoops(ir::Function& fn, bool tensorMemory = false, PipelineBudget* budget = nullptr);

/// Warp-specializes (sm_90a) the loop tl.range(..., warp_specialize=True) marked when it is a
/// tl.dot K loop over two descriptors TMA can copy, or a persistent tile loop around one: a
/// one-warp producer task issues the TMA copies into a ring of shared buffers guarded by full /
/// empty mbarriers, and the default task (the consumers, num_warps warps) runs the loop with
/// async wgmma from the ring and the epilogue after it (see WarpSpecialize.cpp). Other marked
/// loops are left as they are. Runs before pipelineDotLoops, which then leaves the kernel to
/// its tasks. Returns how many loops were rewritten (at most one per kernel).
///
/// With `oneTileLoops` false, a marked K loop that is the kernel's whole loop (one tile per
/// program) is left to the software pipeliner too: the compiler's pipeline asks for that, since
/// on the H200 such a split ran about 10% slower than the pipeline (docs/status.md, session
/// 20); ww-opt rewrites them, the rewrite's smallest form.
int warpSpecializeDotLoops(ir::Function& fn, bool oneTileLoops = true);

/// Whether `dot` (with num_warps warps) has a shape the sm_90a async_dot lowering takes: wgmma
/// from NVMMA-swizzled buffers, fp16 / bf16, or fp8 that accumulates in place and whose operands
/// the caller reads K-major; M a multiple of 64, powers of two (SoftwarePipeline.cpp). With
/// `promoted`, also an fp8 dot whose max_num_imprecise_acc makes one partial accumulator span
/// its whole K (the async_dot then sums into that partial, which the caller adds in fp32).
bool wgmmaShaped(const ir::Op& dot, int numWarps, bool promoted = false);

/// Rewrites each pointer tensor a for loop carries, advances by a loop-invariant splat and reads
/// with cp.async (async_load) into its value at loop entry plus one i64 element offset the loop
/// carries (one per distinct advance), the addresses computed before their first reader in each
/// iteration (see LoopPointerOffsets.cpp). Returns how many pointer tensors it rewrote.
int offsetLoopPointers(ir::Function& fn);

/// Unrolls each for loop that tl.range(..., loop_unroll_factor=U) marked (U >= 2): U copies of
/// the body per iteration of a new loop over the whole groups of U iterations, then the original
/// loop over the rest. Returns how many loops were unrolled.
int unrollLoops(ir::Function& fn);

/// Inserts a CTA barrier (debug_barrier {smem_hazard = 1}) before each cp.async or TMA load
/// outside async tasks that may overwrite shared memory other threads read since the last barrier
/// of every thread: a local_load, or an async_dot retired for one warp group only (num_warps > 4).
/// Runs last on Tile IR, so the interpreter and the PTX backend see the same barriers. Returns how
/// many it inserted.
int insertSharedMemoryBarriers(ir::Function& fn);

/// True for ops without side effects (safe to CSE and DCE).
bool isPure(const ir::Op& op);

} // namespace ww::transforms
