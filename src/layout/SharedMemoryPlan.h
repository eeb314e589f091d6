// Shared-memory placement by liveness: where each TLX buffer (and each of the software
// pipeliner's stage rings, which are local_allocs too) holds data that may still be read, and a
// first-fit placement in which buffers whose lifetimes do not meet share bytes, as Triton's
// allocator places them. The scratch region of layout conversions, reductions and descriptor
// tiles is one more tenant, live at the ops that may use it. Where two tenants share bytes, a
// CTA barrier goes between the earlier one's last access and the later one's first (codegen
// emits it; see ReuseBarrier).
#pragma once

#include "ir/IR.h"
#include "ir/Uniformity.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace ww::layout {

/// Ops `first` to `last` (both included) of one block; an op nested in one of them counts as
/// that op. Blocks are the kernel body or bodies of for loops (see SharedLiveness).
struct Span {
  const ir::Block* block = nullptr;
  size_t first = 0, last = 0;
};

/// Where one shared local_alloc must keep its bytes.
struct BufferLiveness {
  /// Live for the whole kernel: used inside async tasks (warp-specialized code runs
  /// concurrently), through a value this analysis cannot follow (a loop-carried view, a remote
  /// view, an op it does not know), or by copies other CTAs take part in.
  bool wholeKernel = false;
  /// From the first op that accesses it (views move no data) to the last one, extended to the
  /// waits that drain its asynchronous users, or to the end of the kernel where none is known
  /// to (a TMA store at the end of a kernel is never waited for).
  Span span;
  /// How it is accessed: by threads (ld/st.shared, cp.async) and through the async proxy (TMA,
  /// wgmma, tcgen05). Bytes passing between the two kinds need a fence.proxy.async.
  bool generic = false, async = false;
  /// Why it is live for the whole kernel, or to its end.
  std::string why;
};

/// The liveness facts of one kernel.
///
/// A buffer's span lies in its home block: the block of its local_alloc, or the innermost block
/// around it that is the kernel body, the body of a for loop or a branch of an if, nested only
/// in for loops with bounds all threads agree on and ifs whose conditions they agree on (a
/// barrier there is met by every thread). Buffers at home in the two branches of one if never
/// meet (ir::exclusiveBranches): the two attention loops of a kernel that picks its tile size
/// by the sequence length share their bytes. A buffer allocated in
/// a loop body is a new buffer in every iteration (as in TLX and Triton): its copies must land
/// and its reads be done within the iteration, since the next one's buffer may take its bytes.
/// Where the waits below are not found in the home block, the home moves out a level.
///
/// Asynchronous users end where they are drained:
///  - wgmma reads (async_dot): the first async_dot_wait(0) of the home block after them;
///  - cp.async writes (async_load): the first async_load_wait_group(0) after them, each copy
///    committed (async_load_commit_group) before it;
///  - TMA and bulk stores out of the buffer: the first async_descriptor_store_wait(0) after them;
///  - TMA and bulk loads into it, which complete on an mbarrier: the last barrier_wait in the
///    home block on that barrier ring (or on a barrier this analysis cannot name), when it comes
///    no earlier than the loads. A kernel must see every copy it issues land (before it exits,
///    or before the iteration that allocated the buffer ends), and only waits on the copy's
///    barrier can see it, so once the last of them is passed every copy has landed;
///  - tcgen05 MMA and tcgen05.cp reads: likewise the last barrier_wait on a barrier any tcgen05
///    commit arrives on (an MMA's mBarriers or tlx.tcgen05_commit; a commit completes every
///    earlier tcgen05 op of its thread), or the last synchronous MMA.
/// The interpreter gives every buffer (every iteration's) storage of its own, so what this
/// assumes of a kernel is what the interpreter checks of it already: a read of a buffer before
/// its copy landed, or of an accumulator before its MMA completed, is reported there.
class SharedLiveness {
public:
  /// The local_alloc or alloc_barriers a buffer or barrier value views (itself when it is one);
  /// another value when unknown.
  using RootOf = std::function<const ir::Value*(const ir::Value*)>;
  /// How the op itself (not counting its regions) may use the scratch region.
  enum class ScratchUse {
    None,
    Threads,   // ld/st.shared of its threads only (conversions, reductions)
    AsyncProxy // TMA or the tensor cores too (descriptor tiles, wgmma's staged operands)
  };
  using UsesScratch = std::function<ScratchUse(const ir::Op&)>;

  SharedLiveness(const ir::Function& fn, RootOf rootOf, UsesScratch usesScratch);

  /// The liveness of a shared-memory local_alloc.
  BufferLiveness analyze(const ir::Op& alloc) const;
  /// The ops that may use the scratch region (for ops inside async tasks: the async_tasks op).
  const std::vector<const ir::Op*>& scratchSites() const { return scratchSites_; }
  /// Whether the scratch use of a site may go through the async proxy.
  bool asyncScratchSite(const ir::Op& site) const { return asyncSites_.count(&site) != 0; }

  /// The whole kernel body.
  Span wholeKernel() const;
  /// An op as a span of one op of its block.
  Span at(const ir::Op& op) const;
  /// The innermost block both blocks lie in (one of them, or a block around both).
  const ir::Block* common(const ir::Block* a, const ir::Block* b) const;
  /// `s` seen from block `to` (s.block or a block around it): the op of `to` it lies in.
  Span project(const Span& s, const ir::Block* to) const;
  /// Whether `a` and `b` lie in different branches of one `if` (ir::exclusiveBranches): no
  /// thread runs both, so their tenants never meet.
  bool exclusive(const Span& a, const Span& b) const;
  /// Whether `block` runs more than once in a kernel (a loop body, or inside one).
  bool repeats(const ir::Block* block) const;
  /// Whether ops [from, to) of `block` hold a CTA barrier every thread meets (a
  /// tl.debug_barrier or the pipeliner's), after a fence.proxy.async when `fence`.
  bool barrierIn(const ir::Block& block, size_t from, size_t to, bool fence) const;

private:
  struct Wait {
    const ir::Op* op;
    const ir::Value* ring; // null: a barrier this analysis cannot name
  };
  size_t positionOf(const ir::Op& op) const { return position_.at(&op); }
  /// The op of `block` that `op` is or lies in; null when `op` is outside `block`.
  const ir::Op* ancestorIn(const ir::Block& block, const ir::Op* op) const;
  /// The home block for an allocation in `block` (see the class comment).
  const ir::Block* homeFor(const ir::Block* block) const;
  bool isKnownRing(const ir::Value* root) const;
  /// Where a block's CTA barriers and async-proxy fences are (positions, ascending): barrierIn
  /// is asked of every pair of tenants that share bytes, so it looks them up.
  struct SyncPoints {
    std::vector<size_t> barriers, fences;
  };
  const SyncPoints& syncPoints(const ir::Block& block) const;
  /// The liveness of `alloc` with its span in `home`; false when a drain is not found there.
  bool analyzeIn(const ir::Op& alloc, const ir::Block* home, BufferLiveness& out) const;

  const ir::Function& fn_;
  RootOf rootOf_;
  std::unordered_map<const ir::Op*, size_t> position_; // every op's index in its block
  std::unordered_map<const ir::Value*, std::vector<std::pair<const ir::Op*, unsigned>>> uses_;
  std::vector<Wait> waits_;                   // every barrier_wait
  std::vector<const ir::Value*> commitRings_; // rings tcgen05 commits arrive on
  bool commitOnUnknownRing_ = false;
  std::vector<const ir::Op*> syncMmas_; // synchronous tcgen05 MMAs
  std::vector<const ir::Op*> scratchSites_;
  std::unordered_set<const ir::Op*> asyncSites_;
  ir::ThreadUniformity uniformity_;
  mutable std::unordered_map<const ir::Block*, SyncPoints> syncPoints_;
};

/// One tenant of shared memory to place.
struct SharedTenant {
  int64_t bytes = 0;
  int64_t alignment = 16;
  bool wholeKernel = true;
  Span span;
  bool generic = true, async = true;
  int64_t offset = -1; // set by placeSharedTenants
};

/// A CTA barrier codegen puts before an op: the op starts a tenant whose bytes another one used
/// before it, or the scratch use of the op comes over bytes a buffer used before it.
struct ReuseBarrier {
  bool proxyFence = false; // fence.proxy.async.shared::cta first: one side used the async proxy
};

struct SharedPlacement {
  int64_t scratchOffset = 0;
  int64_t end = 0; // bytes of shared memory: every tenant and the planned scratch
  std::map<const ir::Op*, ReuseBarrier> barriers;
};

/// Places `tenants` (in the order given: where nothing can share, they lie one after another)
/// and the scratch region. The tenants live at some scratch site lie below the scratch region,
/// packed first-fit; the scratch region starts above all of them (aligned to
/// `scratchAlignment`, and to 1024 bytes where other tenants lie over it), so that a use of more
/// scratch than planned (codegen sizes some on the fly) can only reach bytes that are dead
/// wherever scratch is used; the other tenants are then packed first-fit over every byte whose
/// tenants they do not meet. Records the barriers the sharing needs.
SharedPlacement placeSharedTenants(std::vector<SharedTenant>& tenants, const SharedLiveness& live,
                                   int64_t scratchBytes, int64_t scratchAlignment);

} // namespace ww::layout
