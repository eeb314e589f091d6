// Liveness of shared buffers and their first-fit placement (see SharedMemoryPlan.h).
//
// Two tenants are compared in the innermost block around both of their spans: a span in a loop
// nested in that block counts as the loop op. They share bytes only when their spans do not
// meet there; the later one's first op then gets a CTA barrier (after the earlier one's last
// access and the waits that drained its copies), with fence.proxy.async where one side used the
// async proxy (TMA, wgmma, tcgen05) and the other ordinary loads and stores. In a block that
// runs repeatedly, the earlier one's first op gets one too: the later one's accesses of the last
// iteration come before it.
#include "layout/SharedMemoryPlan.h"

#include "ir/OpAttrs.h"
#include "support/MathExtras.h"

#include <algorithm>
#include <unordered_set>
#include <utility>

namespace ww::layout {

using ir::OpCode;

namespace {

bool isBuffer(const ir::Value* v) {
  return v && v->type().kind == ir::TypeKind::Buffer;
}

bool isBarrier(const ir::Value* v) {
  return v && v->type().kind == ir::TypeKind::Barrier;
}

bool inAsyncTasks(const ir::Op& op) {
  for (const ir::Op* at = &op; at; at = at->parentBlock() ? at->parentBlock()->parentOp() : nullptr)
    if (at->code() == OpCode::AsyncTask || at->code() == OpCode::AsyncTasks) return true;
  return false;
}

/// The outermost async_tasks op around `op`, or `op` itself outside them.
const ir::Op* outsideTasks(const ir::Op& op) {
  const ir::Op* out = &op;
  for (const ir::Op* at = &op; at; at = at->parentBlock() ? at->parentBlock()->parentOp() : nullptr)
    if (at->code() == OpCode::AsyncTasks) out = at;
  return out;
}

} // namespace

SharedLiveness::SharedLiveness(const ir::Function& fn, RootOf rootOf, UsesScratch usesScratch)
    : fn_(fn), rootOf_(std::move(rootOf)), uniformity_(fn.body) {
  std::unordered_set<const ir::Op*> sites;
  auto visitBlock = [&](const ir::Block& block, auto& self) -> void {
    const auto& ops = block.ops();
    for (size_t i = 0; i < ops.size(); ++i) {
      const ir::Op& op = *ops[i];
      position_[&op] = i;
      if (ScratchUse use = usesScratch(op); use != ScratchUse::None) {
        const ir::Op* site = outsideTasks(op);
        if (sites.insert(site).second) scratchSites_.push_back(site);
        // Inside async tasks, or of the async proxy: a fence beside a barrier.
        if (use == ScratchUse::AsyncProxy || site != &op) asyncSites_.insert(site);
      }
      for (unsigned k = 0; k < op.numOperands(); ++k)
        if (isBuffer(op.operand(k))) uses_[rootOf_(op.operand(k))].emplace_back(&op, k);
      switch (op.code()) {
      case OpCode::BarrierWait: {
        const ir::Value* ring = rootOf_(op.operand(0));
        waits_.push_back({&op, isKnownRing(ring) ? ring : nullptr});
        break;
      }
      case OpCode::Tcgen05Mma:
      case OpCode::Tcgen05Commit:
        if (op.code() == OpCode::Tcgen05Mma && ir::attr::Tcgen05Mma::sync(op))
          syncMmas_.push_back(&op);
        for (const ir::Value* v : op.operands())
          if (isBarrier(v)) {
            const ir::Value* ring = rootOf_(v);
            if (isKnownRing(ring))
              commitRings_.push_back(ring);
            else
              commitOnUnknownRing_ = true;
          }
        break;
      default:
        break;
      }
      for (unsigned r = 0; r < op.numRegions(); ++r) self(*op.region(r), self);
    }
  };
  visitBlock(fn.body, visitBlock);
}

bool SharedLiveness::isKnownRing(const ir::Value* root) const {
  return root && root->def() && root->def()->code() == OpCode::AllocBarriers;
}

const ir::Block* SharedLiveness::homeFor(const ir::Block* block) const {
  std::vector<const ir::Block*> chain; // from `block` out to the kernel body (excluded)
  for (const ir::Block* b = block; b != &fn_.body; b = b->parentOp()->parentBlock())
    chain.push_back(b);
  const ir::Block* home = &fn_.body;
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
    const ir::Op& op = *(*it)->parentOp();
    const bool uniformLoop = op.code() == OpCode::For && uniformity_.uniform(op.operand(0)) &&
                             uniformity_.uniform(op.operand(1)) &&
                             uniformity_.uniform(op.operand(2));
    const bool uniformBranch = op.code() == OpCode::If && uniformity_.uniform(op.operand(0));
    if (!uniformLoop && !uniformBranch) break;
    home = *it;
  }
  return home;
}

bool SharedLiveness::exclusive(const Span& a, const Span& b) const {
  return ir::exclusiveBranches(a.block, b.block, uniformity_);
}

const ir::Op* SharedLiveness::ancestorIn(const ir::Block& block, const ir::Op* op) const {
  while (op && op->parentBlock() != &block)
    op = op->parentBlock() ? op->parentBlock()->parentOp() : nullptr;
  return op;
}

Span SharedLiveness::wholeKernel() const {
  size_t n = fn_.body.ops().size();
  return {&fn_.body, 0, n ? n - 1 : 0};
}

Span SharedLiveness::at(const ir::Op& op) const {
  size_t p = positionOf(op);
  return {op.parentBlock(), p, p};
}

const ir::Block* SharedLiveness::common(const ir::Block* a, const ir::Block* b) const {
  if (a == b) return a; // asked of every pair of tenants: most share their block
  std::unordered_set<const ir::Block*> around;
  for (const ir::Block* x = a;; x = x->parentOp()->parentBlock()) {
    around.insert(x);
    if (x == &fn_.body) break;
  }
  for (const ir::Block* x = b;; x = x->parentOp()->parentBlock())
    if (around.count(x) || x == &fn_.body) return x;
}

Span SharedLiveness::project(const Span& s, const ir::Block* to) const {
  if (s.block == to) return s;
  const ir::Op* op = ancestorIn(*to, s.block->parentOp());
  size_t p = positionOf(*op);
  return {to, p, p};
}

bool SharedLiveness::repeats(const ir::Block* block) const {
  for (const ir::Block* b = block; b != &fn_.body; b = b->parentOp()->parentBlock())
    if (b->parentOp()->code() == OpCode::For || b->parentOp()->code() == OpCode::While) return true;
  return false;
}

const SharedLiveness::SyncPoints& SharedLiveness::syncPoints(const ir::Block& block) const {
  auto [it, fresh] = syncPoints_.try_emplace(&block);
  if (fresh) {
    const auto& ops = block.ops();
    for (size_t i = 0; i < ops.size(); ++i) {
      const ir::Op& op = *ops[i];
      if (op.code() == OpCode::Fence && ir::attr::Fence::kind(op) == "async_shared")
        it->second.fences.push_back(i);
      // A hazard barrier is left out where codegen finds it met; a plain one always syncs.
      if (op.code() == OpCode::DebugBarrier && !ir::attr::DebugBarrier::smemHazard(op))
        it->second.barriers.push_back(i);
    }
  }
  return it->second;
}

bool SharedLiveness::barrierIn(const ir::Block& block, size_t from, size_t to, bool fence) const {
  const SyncPoints& points = syncPoints(block);
  // With `fence`, the barrier must come after a fence of the range.
  if (fence) {
    auto f = std::lower_bound(points.fences.begin(), points.fences.end(), from);
    if (f == points.fences.end()) return false;
    from = *f;
  }
  auto b = std::lower_bound(points.barriers.begin(), points.barriers.end(), from);
  return b != points.barriers.end() && *b < to;
}

BufferLiveness SharedLiveness::analyze(const ir::Op& alloc) const {
  BufferLiveness out;
  const ir::Block* home = homeFor(alloc.parentBlock());
  while (!analyzeIn(alloc, home, out) && home != &fn_.body)
    home = homeFor(home->parentOp()->parentBlock());
  if (out.wholeKernel) out.span = wholeKernel();
  return out;
}

bool SharedLiveness::analyzeIn(const ir::Op& alloc, const ir::Block* home,
                               BufferLiveness& out) const {
  out = BufferLiveness();
  size_t allocAt = project(at(alloc), home).first;
  out.span = {home, allocAt, allocAt};
  auto whole = [&](const ir::Op& op, const std::string& why) {
    out.wholeKernel = true;
    out.why = std::string(op.name()) + ": " + why;
    return true;
  };
  auto found = uses_.find(alloc.result());
  if (found == uses_.end()) return true;
  const auto& ops = home->ops();
  auto pos = [&](const ir::Op& op) { return positionOf(*ancestorIn(*home, &op)); };
  bool accessed = false;
  // The last position of each kind of asynchronous user, + 1 (0: none).
  size_t lastWgmma = 0, lastCpAsync = 0, lastBulkRead = 0, lastTcgen05 = 0;
  std::map<const ir::Value*, size_t> lastTmaOnRing;
  std::vector<const ir::Op*> cpAsyncCopies;
  for (const auto& [opPtr, operand] : found->second) {
    const ir::Op& op = *opPtr;
    if (inAsyncTasks(op)) return whole(op, "used inside async tasks");
    bool access = true, async = false;
    switch (op.code()) {
    case OpCode::LocalView:
      if (ir::attr::LocalView::remoteView(op)) return whole(op, "a view into another CTA");
      access = false;
      break;
    case OpCode::LocalTrans:
    case OpCode::LocalSlice:
    case OpCode::LocalReinterpret:
      access = false;
      break;
    case OpCode::Yield: {
      // An if choosing between views: its result is a view of this allocation only when the
      // layout pass resolved it so (then the result's uses are among these).
      const ir::Op* parent = op.parentBlock()->parentOp();
      if (!parent || parent->code() != OpCode::If || operand >= parent->numResults() ||
          rootOf_(parent->result(operand)) != alloc.result())
        return whole(op, "a view leaves through a region's results");
      access = false;
      break;
    }
    case OpCode::LocalLoad:
    case OpCode::LocalStore:
    case OpCode::LocalGather:
    case OpCode::LocalScatter:
      break;
    case OpCode::AsyncDot:
      async = true;
      lastWgmma = std::max(lastWgmma, pos(op) + 1);
      break;
    case OpCode::AsyncLoad:
      lastCpAsync = std::max(lastCpAsync, pos(op) + 1);
      cpAsyncCopies.push_back(&op);
      break;
    case OpCode::AsyncDescStore:
    case OpCode::AsyncBulkStore:
      async = true;
      lastBulkRead = std::max(lastBulkRead, pos(op) + 1);
      break;
    case OpCode::AsyncDescLoad:
    case OpCode::AsyncBulkLoad: {
      if (op.code() == OpCode::AsyncDescLoad &&
          (ir::attr::AsyncDescLoad::multicastMask(op) != 0 ||
           ir::attr::AsyncDescLoad::multicastOperands(op) != 0 ||
           ir::attr::AsyncDescLoad::twoCtas(op)))
        return whole(op, "a copy other CTAs take part in");
      async = true;
      const ir::Value* ring = rootOf_(op.operand(2));
      if (!isKnownRing(ring)) return whole(op, "a copy completing on a barrier not followed");
      size_t& last = lastTmaOnRing[ring];
      last = std::max(last, pos(op) + 1);
      break;
    }
    case OpCode::Tcgen05Mma:
      if (ir::attr::Tcgen05Mma::twoCtas(op)) return whole(op, "an MMA of a CTA pair");
      async = true;
      if (!ir::attr::Tcgen05Mma::sync(op)) lastTcgen05 = std::max(lastTcgen05, pos(op) + 1);
      break;
    case OpCode::TmemCopy:
      async = true;
      lastTcgen05 = std::max(lastTcgen05, pos(op) + 1);
      break;
    default:
      return whole(op, "a use this analysis does not follow");
    }
    if (!access) continue;
    (async ? out.async : out.generic) = true;
    size_t p = pos(op);
    out.span.first = accessed ? std::min(out.span.first, p) : p;
    out.span.last = accessed ? std::max(out.span.last, p) : p;
    accessed = true;
  }
  if (!accessed) return true;
  size_t last = out.span.last;
  bool top = home == &fn_.body;
  // Asynchronous users no wait is known to drain: look further out, and at the kernel body
  // keep the bytes to the end of the kernel.
  bool drained = true;
  auto undrained = [&](const std::string& why) {
    drained = false;
    out.why = why;
    last = ops.size() - 1;
  };
  auto firstWaitAfter = [&](size_t after, auto isWait) {
    for (size_t p = after; p < ops.size(); ++p)
      if (isWait(*ops[p])) return p;
    return ops.size();
  };
  if (lastWgmma) {
    size_t w = firstWaitAfter(lastWgmma, [](const ir::Op& op) {
      return op.code() == OpCode::AsyncDotWait && ir::attr::AsyncDotWait::pendings(op) == 0;
    });
    if (w == ops.size())
      undrained("no async_dot_wait(0) retires its wgmma reads");
    else
      last = std::max(last, w);
  }
  if (lastCpAsync) {
    size_t w = firstWaitAfter(lastCpAsync, [](const ir::Op& op) {
      return op.code() == OpCode::AsyncWaitGroup && ir::attr::AsyncWaitGroup::pendings(op) == 0;
    });
    // Each copy needs a commit after it, in its block or one around it, before the wait.
    auto committed = [&](const ir::Op& copy) {
      for (const ir::Op* op = &copy;;) {
        const ir::Block& block = *op->parentBlock();
        const auto& in = block.ops();
        size_t end = &block == home ? w : in.size();
        for (size_t i = positionOf(*op) + 1; i < end; ++i)
          if (in[i]->code() == OpCode::AsyncCommitGroup) return true;
        if (&block == home) return false;
        op = block.parentOp();
      }
    };
    if (w == ops.size())
      undrained("no async_load_wait_group(0) drains its cp.async copies");
    else if (!std::all_of(cpAsyncCopies.begin(), cpAsyncCopies.end(),
                          [&](const ir::Op* c) { return committed(*c); }))
      undrained("a cp.async copy no commit group puts before the wait");
    else
      last = std::max(last, w);
  }
  if (lastBulkRead) {
    size_t w = firstWaitAfter(lastBulkRead, [](const ir::Op& op) {
      return op.code() == OpCode::AsyncDescStoreWait &&
             ir::attr::AsyncDescStoreWait::pendings(op) == 0;
    });
    if (w == ops.size())
      undrained("no async_descriptor_store_wait(0) retires its bulk stores");
    else
      last = std::max(last, w);
  }
  // The last wait in the home block (+ 1; 0: none) that `counts`.
  auto lastWait = [&](auto counts) {
    size_t seen = 0;
    for (const Wait& w : waits_)
      if (counts(w))
        if (const ir::Op* in = ancestorIn(*home, w.op)) seen = std::max(seen, positionOf(*in) + 1);
    return seen;
  };
  for (const auto& [ring, lastCopy] : lastTmaOnRing) {
    size_t seen = lastWait([&](const Wait& w) { return !w.ring || w.ring == ring; });
    if (seen < lastCopy)
      undrained("no barrier_wait on its TMA copies' barrier after them");
    else
      last = std::max(last, seen - 1);
  }
  if (lastTcgen05) {
    size_t seen = lastWait([&](const Wait& w) {
      return !w.ring || commitOnUnknownRing_ ||
             std::find(commitRings_.begin(), commitRings_.end(), w.ring) != commitRings_.end();
    });
    for (const ir::Op* mma : syncMmas_)
      if (const ir::Op* in = ancestorIn(*home, mma)) seen = std::max(seen, positionOf(*in) + 1);
    if (seen < lastTcgen05)
      undrained("no barrier_wait on a tcgen05 commit's barrier after its MMAs");
    else
      last = std::max(last, seen - 1);
  }
  out.span.last = last;
  return drained || top;
}

// ---- placement ----

namespace {

class Placer {
public:
  Placer(std::vector<SharedTenant>& tenants, const SharedLiveness& live)
      : tenants_(tenants), live_(live) {}

  SharedPlacement run(int64_t scratchBytes, int64_t scratchAlignment) {
    SharedPlacement out;
    const auto& sites = live_.scratchSites();
    // In the order given (program order): where nothing can share, the tenants lie one after
    // another as they are allocated.
    std::vector<const SharedTenant*> placed;
    int64_t below = 0;
    for (int pass = 0; pass < 2; ++pass) {
      for (SharedTenant& t : tenants_) {
        if (liveAtScratch(t) != (pass == 0)) continue;
        t.offset = firstFit(t, placed);
        placed.push_back(&t);
        below = std::max(below, t.offset + t.bytes);
      }
      // Without scratch users the region goes after everything, as a backstop.
      if (pass == 0 || sites.empty())
        out.scratchOffset = alignTo(below, std::max<int64_t>(1, scratchAlignment));
    }
    // Where buffers lie over it, it starts on whole swizzle atoms (descriptor stores stage their
    // tiles swizzled there where it does); they are dead wherever it is used, so it may move up.
    if (std::any_of(tenants_.begin(), tenants_.end(), [&](const SharedTenant& t) {
          return !sites.empty() && !liveAtScratch(t) && t.offset + t.bytes > out.scratchOffset;
        }))
      out.scratchOffset = alignTo(out.scratchOffset, 1024);
    out.end = out.scratchOffset + scratchBytes;
    for (const SharedTenant& t : tenants_) out.end = std::max(out.end, t.offset + t.bytes);

    for (const SharedTenant& a : tenants_)
      for (const SharedTenant& b : tenants_)
        if (&a < &b && a.offset < b.offset + b.bytes && b.offset < a.offset + a.bytes &&
            !meet(a, b)) {
          auto [x, y] = inCommon(a.span, b.span);
          // Exclusive branches need no barrier between them, unless they take turns in a loop.
          if (live_.exclusive(a.span, b.span) && !live_.repeats(x.block)) continue;
          bool fence = (a.generic && b.async) || (a.async && b.generic);
          if (y.last < x.first) std::swap(x, y);
          separate(x, y, fence, out);
        }
    // Scratch may grow past its plan at codegen: every tenant above its start shares bytes with
    // it. Its users write and read it with threads, and some also through the async proxy (TMA
    // for descriptor tiles, wgmma for staged operands). The sites before a tenant, and those
    // after it, seen from each block around both, are separated from it as one span each.
    struct Side {
      Span span;
      bool async = false;
    };
    for (const SharedTenant& t : tenants_) {
      if (sites.empty() || t.offset + t.bytes <= out.scratchOffset || liveAtScratch(t)) continue;
      std::map<const ir::Block*, std::pair<Side, Side>> around; // before, after (null: none)
      for (const ir::Op* site : sites) {
        auto [x, s] = inCommon(t.span, live_.at(*site));
        auto& [before, after] = around[x.block];
        Side& side = s.first < x.first ? before : after;
        if (!side.span.block)
          side.span = s;
        else
          side.span = {s.block, std::min(side.span.first, s.first),
                       std::max(side.span.last, s.last)};
        side.async = side.async || live_.asyncScratchSite(*site);
      }
      // Threads always use the scratch region; the async proxy where a site says so.
      auto fence = [&](const Side& side) { return t.async || (t.generic && side.async); };
      for (const auto& [block, sides] : around) {
        Span x = live_.project(t.span, block);
        if (sides.first.span.block) separate(sides.first.span, x, fence(sides.first), out);
        if (sides.second.span.block) separate(x, sides.second.span, fence(sides.second), out);
      }
    }
    return out;
  }

private:
  /// `a` and `b` seen from the innermost block around both.
  std::pair<Span, Span> inCommon(const Span& a, const Span& b) const {
    const ir::Block* c = live_.common(a.block, b.block);
    return {live_.project(a, c), live_.project(b, c)};
  }

  bool meet(const SharedTenant& a, const SharedTenant& b) const {
    if (a.wholeKernel || b.wholeKernel) return true;
    if (live_.exclusive(a.span, b.span)) return false;
    auto [x, y] = inCommon(a.span, b.span);
    return x.first <= y.last && y.first <= x.last;
  }

  bool liveAtScratch(const SharedTenant& t) const {
    const auto& sites = live_.scratchSites();
    if (t.wholeKernel) return !sites.empty();
    for (const ir::Op* site : sites) {
      auto [x, s] = inCommon(t.span, live_.at(*site));
      if (x.block == t.span.block && x.first <= s.first && s.first <= x.last) return true;
    }
    return false;
  }

  /// The lowest offset (a multiple of t.alignment) where `t` overlaps no placed tenant it meets.
  int64_t firstFit(const SharedTenant& t, const std::vector<const SharedTenant*>& placed) const {
    std::vector<std::pair<int64_t, int64_t>> busy;
    for (const SharedTenant* p : placed)
      if (meet(t, *p)) busy.emplace_back(p->offset, p->offset + p->bytes);
    return firstFitOffset(std::move(busy), t.bytes, t.alignment);
  }

  /// Barriers between spans `x` and `y` of one block, x before y, whose tenants share bytes:
  /// before y's first op, and, where the block repeats, before x's first op (y's accesses of
  /// the iteration before come first). Left out where a barrier already lies between.
  void separate(const Span& x, const Span& y, bool fence, SharedPlacement& out) const {
    const ir::Block& block = *x.block;
    size_t n = block.ops().size();
    auto barrierAt = [&](size_t position) {
      ReuseBarrier& r = out.barriers[block.ops()[position].get()];
      r.proxyFence = r.proxyFence || fence;
    };
    if (!live_.barrierIn(block, x.last + 1, y.first, fence)) barrierAt(y.first);
    if (live_.repeats(&block) && !live_.barrierIn(block, y.last + 1, n, fence) &&
        !live_.barrierIn(block, 0, x.first, fence))
      barrierAt(x.first);
  }

  std::vector<SharedTenant>& tenants_;
  const SharedLiveness& live_;
};

} // namespace

SharedPlacement placeSharedTenants(std::vector<SharedTenant>& tenants, const SharedLiveness& live,
                                   int64_t scratchBytes, int64_t scratchAlignment) {
  return Placer(tenants, live).run(scratchBytes, scratchAlignment);
}

} // namespace ww::layout
