// Traits of Tile IR ops: the families several stages treat alike (verifier, effects, layouts,
// codegen, interpreter). Each op's traits are the third column of its OP line in ir/Ops.def; this
// header turns that column into a constexpr table indexed by OpCode, so a new op states its traits
// there and nowhere else. OpTraits.cpp checks the table's consistency at compile time.
#pragma once

#include "ir/IR.h"

#include <array>
#include <cstddef>
#include <cstdint>

namespace ww::ir {

/// A set of traits, one bit each (the names Ops.def uses; meanings documented there).
using Traits = uint32_t;

namespace trait {
enum : Traits {
  Pure = 1u << 0,
  PureIfBodyPure = 1u << 1,
  PureIfMarked = 1u << 2,
  ReadsMemory = 1u << 3,
  WritesMemory = 1u << 4,
  Synchronizing = 1u << 5,
  SideEffects = 1u << 6,
  AgentBarrier = 1u << 7,
  SharedBuffers = 1u << 8,
  Elementwise = 1u << 9,
  BinaryArith = 1u << 10,
  UnaryMath = 1u << 11,
  ValueHint = 1u << 12,
  ShapeOp = 1u << 13,
  BufferView = 1u << 14,
  HasRegions = 1u << 15,
  Terminator = 1u << 16,
};
} // namespace trait

namespace detail {
using namespace trait;
inline constexpr std::array<Traits, kNumOpCodes> kOpTraits = {
#define OP(name, str, traits) Traits(traits),
#include "ir/Ops.def"
#undef OP
};
} // namespace detail

/// The traits Ops.def states for `c`.
constexpr Traits traitsOf(OpCode c) {
  return detail::kOpTraits[static_cast<size_t>(c)];
}
/// Whether `c` has every trait in `t`.
constexpr bool hasTraits(OpCode c, Traits t) {
  return (traitsOf(c) & t) == t;
}

/// add sub mul div rem floordiv and or xor shl shr max min pow: two operands of one type, a result
/// of that type.
constexpr bool isBinaryArithmetic(OpCode c) {
  return hasTraits(c, trait::BinaryArith);
}
/// neg not exp exp2 log log2 sqrt rsqrt abs sin cos tanh erf floor ceil sigmoid: one operand, a
/// result of its type.
constexpr bool isUnaryMath(OpCode c) {
  return hasTraits(c, trait::UnaryMath);
}
/// multiple_of, max_contiguous: value hints that return their operand.
constexpr bool isValueHint(OpCode c) {
  return hasTraits(c, trait::ValueHint);
}
/// Every op whose result element depends only on the operand elements at the same coordinates:
/// binary and unary arithmetic, cmp, select, fma, umulhi, casts, addptr, value hints.
constexpr bool isElementwise(OpCode c) {
  return hasTraits(c, trait::Elementwise);
}
/// splat broadcast expand_dims reshape permute join split cat: data movement between shapes.
constexpr bool isShapeOp(OpCode c) {
  return hasTraits(c, trait::ShapeOp);
}
/// Views of shared buffers that move no data: local_view local_trans local_slice
/// local_reinterpret.
constexpr bool isBufferView(OpCode c) {
  return hasTraits(c, trait::BufferView);
}
/// yield, condition, return: the ops that end a region.
constexpr bool isTerminator(OpCode c) {
  return hasTraits(c, trait::Terminator);
}
/// Ops the PTX backend always lowers with a bar.sync of every thread of the agent running them
/// (the CTA, or an async task's warps) before their shared-memory effect (Ops.def's AgentBarrier:
/// debug_barrier, local_store, descriptor and bulk copies out of shared memory, their waits,
/// alloc_barriers, cluster_barrier, the remote shared-memory stores, ...), except where a caller
/// checks: barrier_arrive on warp barriers (every thread arrives for itself) does not sync; a
/// named barrier wait (not listed) syncs the agent when its count is the agent's thread count.
/// Codegen also leaves out a hazard debug_barrier already met, a remote store right after another
/// and one that traps outside a cluster. Ops whose barrier depends on layouts or targets
/// (cross-warp reductions and scans, layout conversions through shared memory, tl.dot, scalar
/// atomics) are left out. Codegen checks every lowering of these ops against this
/// (FunctionLowering::lowerOp), so the list cannot drift from it; the interpreter relies on it to
/// decide when an async_dot retired by one warp group is retired for the whole agent.
constexpr bool lowersWithAgentBarrier(OpCode c) {
  return hasTraits(c, trait::AgentBarrier);
}
/// Ops that read or write a TLX shared buffer, or retire asynchronous accesses to one (Ops.def's
/// SharedBuffers). A CTA barrier that src/transforms/SharedMemoryBarriers.cpp inserts is
/// redundant when none of them ran since the last barrier (a reduction's, say) in straight-line
/// code.
constexpr bool accessesSharedBuffers(OpCode c) {
  return hasTraits(c, trait::SharedBuffers);
}

/// The error for tlx.async_remote_shmem_store / remote_shmem_store in a kernel compiled for one
/// CTA per cluster (no cluster launch), which the GPU and the interpreter both refuse.
std::string remoteStoreWithoutClusterMessage(const Op& op);

/// A TMA box must start 16-byte aligned along its innermost dimension, or the GPU stops the
/// kernel with an illegal instruction: the multiple of `elem` elements that offset must be.
/// The interpreter and the PTX backend both check it.
int64_t tmaOffsetMultiple(DType elem);
/// How a TMA copy (DescLoad / DescStore / AsyncDescLoad / AsyncDescStore) is written in a
/// kernel, for their messages: desc.load, tlx.async_descriptor_load, ...
std::string tmaCopyName(const Op& op);

} // namespace ww::ir
