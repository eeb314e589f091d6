// Families of Tile IR opcodes that several stages treat alike (verifier, effects, layouts,
// codegen, interpreter): the one place that says which ops are elementwise, binary, math, views.
#pragma once

#include "ir/IR.h"

namespace ww::ir {

/// add sub mul div rem floordiv and or xor shl shr max min pow: two operands of one type, a result
/// of that type.
bool isBinaryArithmetic(OpCode c);
/// neg not exp exp2 log log2 sqrt rsqrt abs sin cos tanh erf floor ceil sigmoid: one operand, a
/// result of its type.
bool isUnaryMath(OpCode c);
/// multiple_of, max_contiguous: value hints that return their operand.
bool isValueHint(OpCode c);
/// Every op whose result element depends only on the operand elements at the same coordinates:
/// binary and unary arithmetic, cmp, select, fma, umulhi, casts, addptr, value hints.
bool isElementwise(OpCode c);
/// splat broadcast expand_dims reshape permute join split cat: data movement between shapes.
bool isShapeOp(OpCode c);
/// Views of shared buffers that move no data: local_view local_trans local_slice
/// local_reinterpret.
bool isBufferView(OpCode c);
/// Ops the PTX backend always lowers with a bar.sync of every thread of the agent running them
/// (the CTA, or an async task's warps) before their shared-memory effect: debug_barrier,
/// local_store, async_load_wait_group, async_descriptor_store(_wait), alloc_barriers (a cluster
/// barrier in cluster launches), cluster_barrier, descriptor load/store, barrier_arrive
/// except on warp barriers (where every thread arrives for itself: callers check), and the
/// remote shared-memory stores (async_remote_shmem_store, remote_shmem_store). A named
/// barrier wait syncs the agent when its count is the agent's thread count (callers check).
/// Ops whose barrier depends on layouts or targets (cross-warp reductions and scans, layout
/// conversions through shared memory, tl.dot, scalar atomics) are left out. This list must follow
/// src/codegen (FunctionLowering::barrier() callers); the interpreter relies on it to decide
/// when an async_dot retired by one warp group is retired for the whole agent.
bool lowersWithAgentBarrier(OpCode c);

/// Ops that read or write a TLX shared buffer, or retire asynchronous accesses to one:
/// local_load local_store async_load async_descriptor_load/store async_dot async_dot_wait
/// async_load_wait_group async_descriptor_store_wait async_remote_shmem_store remote_shmem_store.
/// A CTA barrier that src/transforms/SharedMemoryBarriers.cpp inserts is redundant when none of
/// them ran since the last barrier (a reduction's, say) in straight-line code.
bool accessesSharedBuffers(OpCode c);

/// The error for tlx.async_remote_shmem_store / remote_shmem_store in a kernel compiled for one
/// CTA per cluster (no cluster launch), which the GPU and the interpreter both refuse.
std::string remoteStoreWithoutClusterMessage(const Op& op);

} // namespace ww::ir
