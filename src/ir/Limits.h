// Upper bounds on what one kernel may ask of the compiler. Each is checked where the construct is
// created (the specializer, the Builder), before anything is allocated for it, and named in the
// located error: a request past them would otherwise take gigabytes and minutes, then fail.
#pragma once

#include <cstdint>

namespace ww::ir {

/// Elements of one block tensor (Triton's TRITON_MAX_TENSOR_NUMEL).
constexpr int64_t kMaxTensorElements = int64_t(1) << 20;
/// Shared memory one block may use on the largest target (sm_90a, sm_100a: 227 KiB opt-in).
constexpr int64_t kMaxSharedBytes = 232448;
/// Tensor memory of one CTA (sm_100a: 128 lanes x 512 columns x 4 bytes).
constexpr int64_t kMaxTensorMemoryBytes = int64_t(128) * 512 * 4;
/// Copies of a loop body: tl.static_range iterations per loop, tl.range's loop_unroll_factor.
constexpr int64_t kMaxUnrollPerLoop = 4096;
/// Tile IR ops one kernel may have, specialized (helpers inlined, static loops unrolled) and
/// after loop unrolling: the library's largest kernels have about 500; this many take the backend
/// seconds already.
constexpr int64_t kMaxKernelOps = int64_t(1) << 17;
/// Warps of one CTA (1024 threads) and CTAs of one cluster (sm_90's non-portable maximum).
constexpr int64_t kMaxWarpsPerCta = 32;
constexpr int64_t kMaxCtasPerCluster = 16;
/// Software-pipeline stages (num_stages): far past what shared memory holds for any loop.
constexpr int64_t kMaxPipelineStages = 64;

/// Ops the ir::Builders of this thread have created so far (the specializer measures the kernel
/// it grows with it).
int64_t opsCreatedOnThisThread();

} // namespace ww::ir
