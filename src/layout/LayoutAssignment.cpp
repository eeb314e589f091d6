// Layout assignment in two walks over the function. A backward walk collects, for values whose
// layout is free to choose (constants, aranges, splats and the elementwise ops over them), the
// layout their consumers want (coalesced memory layouts, MMA accumulators). A forward walk then
// fixes every tensor's layout: anchors (memory ops, dots, reductions) decide theirs, everything
// else inherits from operands or takes its preference, and a Conversion is recorded wherever a
// consumer needs another layout than its operand has.
#include "layout/LayoutAssignment.h"

#include "frontend/Diagnostics.h"
#include "ir/BlockScaled.h"
#include "ir/DotTypes.h"
#include "ir/OpAttrs.h"
#include "ir/OpTraits.h"
#include "ir/TmemPairs.h"
#include "layout/Layouts.h"
#include "layout/SharedMemoryPlan.h"
#include "support/MathExtras.h"

#include <algorithm>
#include <optional>
#include <sstream>
#include <stdexcept>

namespace ww::layout {

using ir::isElementwise;
using ir::OpCode;

namespace {

bool isTensor(const ir::Value* v) {
  return v && v->type().isTensor();
}

int64_t numElements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

/// The mask operand of a load, store, atomic_rmw, async_load or prefetch; null when it has none.
const ir::Value* maskOf(const ir::Op& op) {
  switch (op.code()) {
  // The verifier holds the operand counts to the has_mask flags (Ops.def's OPERANDS lines).
  case OpCode::Load: // (ptrs, mask)
    return ir::attr::Load::hasMask(op) ? op.operand(1) : nullptr;
  case OpCode::Prefetch: // (ptrs, mask)
    return ir::attr::Prefetch::hasMask(op) ? op.operand(1) : nullptr;
  case OpCode::AsyncLoad: // (ptrs, buffer, mask, other)
    return ir::attr::AsyncLoad::hasMask(op) ? op.operand(2) : nullptr;
  case OpCode::Store: // (ptrs, value, mask)
    return ir::attr::Store::hasMask(op) ? op.operand(2) : nullptr;
  case OpCode::AtomicRMW: // (ptrs, value, mask)
    return ir::attr::AtomicRMW::hasMask(op) ? op.operand(2) : nullptr;
  default:
    return nullptr;
  }
}

/// Bits of one element as an MMA operand.
int elemBits(const ir::Type& t) {
  return ir::bitWidth(t.elem);
}

} // namespace

class LayoutAssigner {
public:
  LayoutAssigner(const ir::Function& fn, const CompileOptions& options, LayoutMap& map)
      : fn_(fn), options_(options), map_(map) {}

  void run() {
    map_.axisInfo_ = std::make_shared<AxisInfoAnalysis>(fn_);
    pairSplit_ = ir::pairSplitAllocs(fn_.body);
    pairLhs_ = ir::pairLhsAllocs(fn_.body);
    // Every tensor first: the preferences below already build layouts of their shapes.
    ir::walk(fn_.body, [&](const ir::Op& op) {
      for (unsigned i = 0; i < op.numResults(); ++i) checkShape(op, op.result(i));
    });
    int64_t unrolledFmaProducts = 0;
    planFmaDots(fn_.body, unrolledFmaProducts);
    // Twice, so that preferences flow around loop back edges.
    preferBlock(fn_.body);
    preferBlock(fn_.body);
    assignBlock(fn_.body);
    // Values no consumer constrained (unused ones) take their natural layouts.
    for (const ir::Value* v : deferredOrder_)
      if (isDeferred(v)) resolve(v, naturalLayout(v));
    allocateShared();
  }

private:
  // ---------------------------------------------------------------------------------------
  // anchors
  // ---------------------------------------------------------------------------------------

  /// Warps the layouts being assigned spread over: the kernel's, or inside an async_task that
  /// task's (its warp in-dim then counts from the task's first warp).
  int numWarps() const { return taskWarps_ > 0 ? taskWarps_ : std::max(1, options_.numWarps); }

  /// The registers tcgen05.ld / st move for the tensor-memory buffer `buf` (a view of it): a CTA
  /// pair's [64, N] accumulator or A tile in its 128 lanes (ir/TmemPairs.h), else its rows.
  LinearLayout tmemLayoutOf(const ir::Value* buf) const {
    const std::vector<int64_t>& shape = buf->type().shape;
    const ir::Op* alloc = ir::tmemAllocOf(buf);
    if (alloc && shape.size() == 2 && shape[0] == 64 &&
        (pairSplit_.count(alloc) || pairLhs_.count(alloc)))
      return tmemPairRegisterLayout(shape, numWarps(), pairLhs_.count(alloc) != 0);
    return tmemRegisterLayout(shape, numWarps());
  }
  std::unordered_set<const ir::Op*> pairSplit_, pairLhs_;

  /// Runs `walk` over the task's region with the task's warp count.
  template <typename F> void inTask(const ir::Op& task, F walk) {
    int saved = taskWarps_;
    int64_t warps = ir::attr::AsyncTask::numWarps(task); // 0: the kernel's (the default task)
    if (warps > 0) taskWarps_ = static_cast<int>(warps);
    for (unsigned r = 0; r < task.numRegions(); ++r) walk(*task.region(r));
    taskWarps_ = saved;
  }

  /// Which dots of per-element FMAs are unrolled and which loop over K (DotLayouts::fmaLoop),
  /// in program order, as codegen lowers them and counts the products it unrolled.
  void planFmaDots(const ir::Block& block, int64_t& unrolled) {
    for (const auto& op : block.ops()) {
      if (op->code() == OpCode::AsyncTask) {
        inTask(*op, [&](const ir::Block& b) { planFmaDots(b, unrolled); });
        continue;
      }
      if (op->code() == OpCode::Dot && dotLayouts(*op).kind == MmaKind::Fma) {
        DotLayouts& dl = map_.dots_.at(op.get());
        int64_t products =
            int64_t(dl.acc.getInDimSize(kRegister)) * op->operand(0)->type().shape.at(1);
        dl.fmaLoop = !unrollsFmaDot(products, unrolled);
        if (!dl.fmaLoop) unrolled += products;
      }
      for (unsigned r = 0; r < op->numRegions(); ++r) planFmaDots(*op->region(r), unrolled);
    }
  }

  void checkShape(const ir::Op& op, const ir::Value* v) {
    if (!isTensor(v)) return;
    for (int64_t s : v->type().shape)
      if (!isPowerOf2(s))
        raiseError(op.loc(), std::string("'") + op.name() + "' produces a tensor of shape " +
                                 v->type().str() +
                                 "; block dimensions must be powers of two (round the block up "
                                 "to a power of two and mask the extra elements)");
  }

  /// The coalesced blocked layout of a memory op whose operand 0 is a pointer tensor: threads
  /// along the most contiguous dim first, each with the widest vector AxisInfo allows, as
  /// Triton's coalescing does.
  const LinearLayout& coalesced(const ir::Op& op) {
    auto it = coalesced_.find(&op);
    if (it != coalesced_.end()) return it->second;
    const ir::Value* ptr = op.operand(0);
    const std::vector<int64_t>& shape = ptr->type().shape;
    int rank = static_cast<int>(shape.size());
    AxisInfo info = map_.axisInfo_->get(ptr);
    std::vector<int32_t> order;
    for (int d = rank - 1; d >= 0; --d) order.push_back(d);
    std::stable_sort(order.begin(), order.end(),
                     [&](int32_t a, int32_t b) { return info.contiguity[a] > info.contiguity[b]; });
    const ir::Value* mask = maskOf(op);
    int64_t vec = map_.axisInfo_->vectorElems(ptr, mask, order[0]);
    int64_t perThread = std::max<int64_t>(1, numElements(shape) / (int64_t(numWarps()) * 32));
    vec = std::min(vec, perThread);
    std::vector<int32_t> spt(rank, 1);
    spt[order[0]] = static_cast<int32_t>(vec);
    return coalesced_[&op] = blockedLayoutForShape(shape, spt, order, numWarps());
  }

  static bool isMemoryAnchor(const ir::Op& op) {
    // An atomic_cas's compare and new values follow its pointers as an atomic_rmw's value does
    // (its lowering reads them register by register beside the pointers).
    bool memory = op.code() == OpCode::Load || op.code() == OpCode::Store ||
                  op.code() == OpCode::AtomicRMW || op.code() == OpCode::AtomicCas ||
                  op.code() == OpCode::AsyncLoad || op.code() == OpCode::Prefetch;
    return memory && op.numOperands() > 0 && isTensor(op.operand(0));
  }

  /// The dot's layouts for the target; cached per op.
  const DotLayouts& dotLayouts(const ir::Op& op) {
    auto it = map_.dots_.find(&op);
    if (it != map_.dots_.end()) return it->second;
    const ir::Type& at = op.operand(0)->type();
    const ir::Type& bt = op.operand(1)->type();
    const ir::Type& ct = op.result()->type();
    // Triton lowers batched dots (3-D, and more leading dims merged into one) to batched MMA
    // layouts; ours are 2-D only. The interpreter runs them.
    if (ct.shape.size() != 2)
      raiseError(op.loc(), std::string("'") + op.name() + "' of " +
                               std::to_string(ct.shape.size()) + "-D operands (a batch of " +
                               ir::shapeDims(ct.shape) +
                               ") is not supported by the GPU backends yet (the interpreter runs "
                               "it); use 2-D tiles, one dot per batch element");
    int64_t M = ct.shape.at(0), N = ct.shape.at(1), K = at.shape.at(1);
    if (!isPowerOf2(M) || !isPowerOf2(N) || !isPowerOf2(K))
      raiseError(op.loc(), std::string("'") + op.name() + "' of shape " + std::to_string(M) + "x" +
                               std::to_string(N) + "x" + std::to_string(K) +
                               ": dot dimensions must be powers of two");
    int bits = elemBits(at);
    // wgmma multiplies e4m3 by e5m2 as well, and wgmma / mma.sync int8 by uint8.
    bool sameType = at.elem == bt.elem || ir::isFp8Dot(at, bt) || ir::isInt8Dot(at, bt, ct);
    bool tf32 = at.elem == ir::DType::F32 && ir::attr::Dot::inputPrecision(op) != "ieee";
    bool sixteen = at.elem == ir::DType::F16 || at.elem == ir::DType::BF16;
    bool eight = ir::isMmaEightBit(at.elem);
    int instrK = bits == 0 ? 0 : 256 / bits; // 16 x 16-bit, 32 x 8-bit, 8 x tf32 per k-step
    bool mmaTypes = sameType && (sixteen || eight || tf32);
    DotLayouts dl;
    bool fp8 = ir::isMmaFp8(at.elem);
    bool hopper = options_.target == Target::SM90a;
    // max_num_imprecise_acc < 32 keeps an fp8 dot off wgmma (ir/DotTypes.h).
    if (hopper && mmaTypes && M >= 64 && numWarps() % 4 == 0 && K >= instrK &&
        !ir::fp8DotAvoidsWgmma(op)) {
      int32_t wm = 4;
      while (wm * 2 <= numWarps() && M >= int64_t(wm) * 2 * 16) wm *= 2;
      int32_t wn = numWarps() / wm;
      int32_t instrN = wgmmaInstrN(N, wn);
      if (instrN != 0) {
        dl.kind = MmaKind::Wgmma;
        dl.instrM = 64;
        dl.instrN = instrN;
        dl.instrK = instrK;
        dl.warpsPerCTA = {wm, wn};
        dl.acc = wgmmaAccumulatorLayout({M, N}, instrN, dl.warpsPerCTA);
        dl.a = wgmmaOperandALayout({M, K}, dl.warpsPerCTA, bits);
        dl.aOrder = {1, 0};
        // wgmma reads B transposed (N-major) only for 16-bit types.
        dl.bOrder = sixteen ? std::vector<int32_t>{1, 0} : std::vector<int32_t>{0, 1};
      }
    }
    // mma.sync multiplies an fp8 dot's fp16 upcasts (Triton's MMAv2 rule); sm_80 has no
    // fp8e4nv (the codegen reports it).
    bool fp8OnSm80 = fp8 && options_.target == Target::SM80 &&
                     (at.elem == ir::DType::F8E4M3 || bt.elem == ir::DType::F8E4M3);
    bool ampereTypes = mmaTypes && !fp8OnSm80 && !(fp8 && ct.elem != ir::DType::F32);
    if (fp8) {
      bits = 16;
      instrK = 16;
    }
    if (dl.kind == MmaKind::Fma && ampereTypes && M >= 16 && N >= 8 && K >= instrK) {
      int32_t wm = 1, wn = 1;
      while (wm * wn < numWarps()) {
        bool roomM = M >= int64_t(wm) * 2 * 16, roomN = N >= int64_t(wn) * 2 * 8;
        if (roomM && (!roomN || M / (16 * wm) >= N / (8 * wn)))
          wm *= 2;
        else if (roomN)
          wn *= 2;
        else
          wm *= 2; // more warps than tiles: the extra warps hold copies
      }
      dl.kind = MmaKind::MmaSync;
      dl.instrM = 16;
      dl.instrN = 8;
      dl.instrK = instrK;
      dl.warpsPerCTA = {wm, wn};
      dl.acc = mmaSyncAccumulatorLayout({M, N}, dl.warpsPerCTA);
      dl.a = mmaSyncOperandLayout(0, {M, K}, dl.warpsPerCTA, bits);
      dl.b = mmaSyncOperandLayout(1, {K, N}, dl.warpsPerCTA, bits);
      dl.aOrder = {1, 0};
      dl.bOrder = {1, 0};
    }
    if (dl.kind == MmaKind::Fma) {
      LinearLayout parent = defaultBlockedLayout({M, N}, numWarps(), 1);
      dl.acc = parent;
      dl.a = broadcastLayout(expandDimsLayout(sliceLayout(parent, 1), 1), {M, K});
      dl.b = broadcastLayout(expandDimsLayout(sliceLayout(parent, 0), 0), {K, N});
      dl.warpsPerCTA = {numWarps(), 1};
    }
    if (dl.kind != MmaKind::Fma) {
      int ab = ir::byteWidth(at.elem), bb = ir::byteWidth(bt.elem);
      dl.swizzleBytesA = nvmmaSwizzleBytes({M, K}, ab, dl.aOrder);
      dl.swizzleBytesB = nvmmaSwizzleBytes({K, N}, bb, dl.bOrder);
      dl.aShared = nvmmaSharedLayout({M, K}, ab, dl.swizzleBytesA, dl.aOrder);
      dl.bShared = nvmmaSharedLayout({K, N}, bb, dl.swizzleBytesB, dl.bOrder);
    }
    return map_.dots_[&op] = std::move(dl);
  }

  // ---------------------------------------------------------------------------------------
  // backward walk: preferences
  // ---------------------------------------------------------------------------------------

  /// How strongly a consumer wants a layout. An MMA accumulator is costly to convert (and sits
  /// in a loop), a memory access only once: a dot's wish overrides a load's or store's.
  enum Priority { kMemory = 1, kMma = 2 };
  struct Preference {
    LinearLayout layout;
    int priority = 0;
  };

  /// Records that a consumer wants `v` in `l`; an earlier wish of at least equal priority stays.
  void prefer(const ir::Value* v, const LinearLayout& l, int priority) {
    if (!isTensor(v) || layoutShape(l) != v->type().shape) return;
    auto it = pref_.find(v);
    if (it != pref_.end() && it->second.priority >= priority) return;
    pref_[v] = Preference{l, priority};
  }
  /// Passes the wish on `from` to `to` (an operand feeding it without data movement).
  void preferLike(const ir::Value* to, const ir::Value* from) {
    auto it = pref_.find(from);
    if (it != pref_.end()) prefer(to, it->second.layout, it->second.priority);
  }
  int priorityOf(const ir::Value* v) const {
    auto it = pref_.find(v);
    return it == pref_.end() ? 0 : it->second.priority;
  }

  const LinearLayout* preferred(const ir::Value* v) const {
    auto it = pref_.find(v);
    return it == pref_.end() ? nullptr : &it->second.layout;
  }

  void preferBlock(const ir::Block& block) {
    for (auto it = block.ops().rbegin(); it != block.ops().rend(); ++it) preferOp(**it);
  }

  void preferOp(const ir::Op& op) {
    if (op.code() == OpCode::AsyncTask) {
      inTask(op, [&](const ir::Block& b) { preferBlock(b); });
      return;
    }
    if (isMemoryAnchor(op)) {
      const LinearLayout& l = coalesced(op);
      for (const ir::Value* v : op.operands()) prefer(v, l, kMemory);
      return;
    }
    switch (op.code()) {
    case OpCode::Dot:
      prefer(op.operand(2), dotLayouts(op).acc, kMma);
      return;
    case OpCode::LocalStore:
      if (op.operand(0)->type().space == ir::MemorySpace::Tmem && isTensor(op.operand(1)))
        prefer(op.operand(1), tmemLayoutOf(op.operand(0)), kMma);
      return;
    case OpCode::AsyncDot:
      if (!isTensor(op.result())) return;
      if (op.numOperands() > 2) prefer(op.operand(2), dotLayouts(op).acc, kMma);
      // wgmma's A from registers: produce it directly in the fragment layout.
      if (isTensor(op.operand(0))) prefer(op.operand(0), dotLayouts(op).a, kMma);
      return;
    case OpCode::Broadcast:
      if (const LinearLayout* p = preferred(op.result()); p && isTensor(op.operand(0))) {
        LinearLayout collapsed = *p;
        const auto& from = op.operand(0)->type().shape;
        for (size_t d = 0; d < from.size(); ++d)
          if (from[d] == 1 && collapsed.getOutDimSize(dimName(static_cast<int>(d))) != 1)
            collapsed =
                expandDimsLayout(sliceLayout(collapsed, static_cast<int>(d)), static_cast<int>(d));
        prefer(op.operand(0), collapsed, priorityOf(op.result()));
      }
      return;
    case OpCode::ExpandDims:
      if (const LinearLayout* p = preferred(op.result()))
        prefer(op.operand(0), sliceLayout(*p, static_cast<int>(ir::attr::ExpandDims::axis(op))),
               priorityOf(op.result()));
      return;
    case OpCode::Permute:
      if (const LinearLayout* p = preferred(op.result())) {
        std::vector<int64_t> order = ir::attr::Permute::order(op), inverse(order.size());
        for (size_t i = 0; i < order.size(); ++i) inverse[order[i]] = static_cast<int64_t>(i);
        prefer(op.operand(0), permuteLayout(*p, inverse), priorityOf(op.result()));
      }
      return;
    case OpCode::Reshape:
      if (const LinearLayout* p = preferred(op.result()); p && isTensor(op.operand(0)))
        prefer(op.operand(0), reshapeLayout(*p, op.operand(0)->type().shape),
               priorityOf(op.result()));
      return;
    case OpCode::AsyncDotWait:
      for (unsigned i = 0; i < op.numResults() && i < op.numOperands(); ++i)
        preferLike(op.operand(i), op.result(i));
      return;
    case OpCode::For: {
      const ir::Block& body = *op.region(0);
      const ir::Op* yield = body.terminator();
      unsigned numIters = op.numOperands() - 3;
      // What consumers after the loop want does not flow into the body: converting once after
      // the loop is cheaper than converting in every iteration.
      for (unsigned i = 0; yield && i < numIters && i < yield->numOperands(); ++i)
        preferLike(yield->operand(i), body.arg(i + 1));
      preferBlock(body);
      for (unsigned i = 0; i < numIters; ++i) preferLike(op.operand(3 + i), body.arg(i + 1));
      return;
    }
    case OpCode::If:
      for (unsigned r = 0; r < op.numRegions(); ++r) {
        const ir::Op* yield = op.region(r)->terminator();
        for (unsigned i = 0; yield && i < op.numResults() && i < yield->numOperands(); ++i)
          preferLike(yield->operand(i), op.result(i));
        preferBlock(*op.region(r));
      }
      return;
    default:
      break;
    }
    if (isElementwise(op.code())) {
      if (op.numResults())
        for (const ir::Value* v : op.operands())
          if (isTensor(v) && v->type().shape == op.result()->type().shape)
            preferLike(v, op.result());
      return;
    }
    for (unsigned r = 0; r < op.numRegions(); ++r) preferBlock(*op.region(r));
  }

  // ---------------------------------------------------------------------------------------
  // forward walk: layouts and conversions
  // ---------------------------------------------------------------------------------------

  void setLayout(const ir::Value* v, LinearLayout l) {
    if (!isTensor(v)) return;
    if (layoutShape(l) != v->type().shape)
      throw std::logic_error("layout assignment: layout of shape mismatch for a " +
                             v->type().str() + " value:\n" + l.str());
    map_.layouts_[v] = std::move(l);
  }

  /// The layout of `v`; a deferred value is fixed to its natural layout first.
  const LinearLayout* layoutOf(const ir::Value* v) {
    if (isDeferred(v)) resolve(v, naturalLayout(v));
    auto it = map_.layouts_.find(v);
    return it == map_.layouts_.end() ? nullptr : &it->second;
  }

  // Deferred values. A value whose layout nothing constrains (a splat, constant or arange without
  // a preference, a broadcast, elementwise ops over only such values, a loop variable
  // initialized by one) gets no layout when it is defined: its first consumer fixes it to the
  // layout that consumer wants, so no conversion is needed. `deferredBy_` holds the op whose
  // operands must follow when the value is fixed (null for sources and loop variables).

  bool isDeferred(const ir::Value* v) const { return deferredBy_.count(v) != 0; }

  void defer(const ir::Value* v, const ir::Op* op) {
    deferredBy_[v] = op;
    deferredOrder_.push_back(v);
  }

  /// The layout a deferred value takes when its consumer has no wish.
  LinearLayout naturalLayout(const ir::Value* v) {
    if (const LinearLayout* p = preferred(v)) return *p;
    const ir::Op* op = deferredBy_.count(v) ? deferredBy_.at(v) : nullptr;
    if (op && op->code() == OpCode::Broadcast && isTensor(op->operand(0)))
      return broadcastLayout(*layoutOf(op->operand(0)), v->type().shape);
    if (op && isElementwise(op->code()))
      for (const ir::Value* o : op->operands())
        if (isTensor(o) && o->type().shape == v->type().shape) return *layoutOf(o);
    return freeLayout(v);
  }

  /// Fixes deferred `v` to `l`, and the operands it was computed from to match.
  void resolve(const ir::Value* v, const LinearLayout& l) {
    auto it = deferredBy_.find(v);
    if (it == deferredBy_.end()) return;
    const ir::Op* op = it->second;
    deferredBy_.erase(it);
    setLayout(v, l);
    if (!op) return;
    if (op->code() == OpCode::Broadcast) {
      const ir::Value* src = op->operand(0);
      if (!isTensor(src)) return;
      LinearLayout collapsed = l;
      for (size_t d = 0; d < src->type().shape.size(); ++d)
        if (src->type().shape[d] == 1 && v->type().shape[d] != 1)
          collapsed =
              expandDimsLayout(sliceLayout(collapsed, static_cast<int>(d)), static_cast<int>(d));
      // Free when the source already holds, per thread, what the broadcast reads.
      if (!isDeferred(src) && isBroadcastWithoutMovement(*layoutOf(src), l)) return;
      require(*op, 0, collapsed);
      return;
    }
    for (unsigned i = 0; i < op->numOperands(); ++i)
      if (isTensor(op->operand(i)) && op->operand(i)->type().shape == v->type().shape)
        require(*op, i, l);
  }

  /// Records that `user` needs operand `i` in layout `wanted`.
  void require(const ir::Op& user, unsigned i, const LinearLayout& wanted) {
    const ir::Value* v = user.operand(i);
    if (isDeferred(v)) {
      resolve(v, wanted);
      return;
    }
    const LinearLayout* have = layoutOf(v);
    if (!isTensor(v) || !have || *have == wanted) return;
    Conversion c;
    c.user = &user;
    c.operandIndex = i;
    c.value = v;
    c.src = *have;
    c.dst = wanted;
    c.kind = conversionKind(c.src, c.dst);
    if (c.kind != ConversionKind::Registers && planRemat(v, wanted, c.remat))
      c.kind = ConversionKind::Rematerialize;
    else
      c.remat.clear();
    c.hoistBefore = invariantLoop(v, user);
    if (c.kind == ConversionKind::SharedMemory) {
      int64_t bytes = v->type().elemBytes();
      ConversionRounds rounds =
          conversionRounds(c.src, c.dst, std::vector<int32_t>(c.src.numOutDims(), 0),
                           kMaxConversionScratchBytes / std::max<int64_t>(bytes, 1));
      needScratch(user, rounds.elements() * bytes);
    }
    map_.conversionIndex_[{&user, i}] = map_.conversions_.size();
    map_.conversions_.push_back(std::move(c));
  }

  /// The outermost for/while around `user` (through ifs) that `v` is defined outside of.
  static const ir::Op* invariantLoop(const ir::Value* v, const ir::Op& user) {
    const ir::Block* defBlock = v->isBlockArg() ? v->ownerBlock() : v->def()->parentBlock();
    auto encloses = [](const ir::Op* op, const ir::Block* b) {
      for (; b && b->parentOp(); b = b->parentOp()->parentBlock())
        if (b->parentOp() == op) return true;
      return false;
    };
    const ir::Op* best = nullptr;
    for (const ir::Block* b = user.parentBlock(); b && b->parentOp();
         b = b->parentOp()->parentBlock()) {
      const ir::Op* p = b->parentOp();
      bool loop = p->code() == OpCode::For || p->code() == OpCode::While;
      if ((!loop && p->code() != OpCode::If) || encloses(p, defBlock)) break;
      if (loop) best = p;
    }
    return best;
  }

  /// Plans recomputing `v` in layout `l` from cheap sources (see Conversion::remat); false when
  /// its computation involves anything else (loads, loop variables, reductions) or is long.
  bool planRemat(const ir::Value* v, const LinearLayout& l,
                 std::vector<std::pair<const ir::Value*, LinearLayout>>& plan) {
    constexpr size_t kMaxOps = 16;
    for (const auto& [planned, layout] : plan)
      if (planned == v) return layout == l; // one layout per recomputed value
    const ir::Op* op = v->def();
    if (!op || !isTensor(v) || op->numResults() != 1 || plan.size() >= kMaxOps) return false;
    auto operandsIn = [&](auto layoutFor) {
      for (const ir::Value* o : op->operands()) {
        if (!isTensor(o)) continue;
        if (!planRemat(o, layoutFor(o), plan)) return false;
      }
      return true;
    };
    bool ok = false;
    switch (op->code()) {
    case OpCode::Arange:
    case OpCode::Constant:
      ok = true;
      break;
    case OpCode::Splat:
      ok = !isTensor(op->operand(0));
      break;
    case OpCode::ExpandDims:
      ok = operandsIn([&](const ir::Value*) {
        return sliceLayout(l, static_cast<int>(ir::attr::ExpandDims::axis(*op)));
      });
      break;
    case OpCode::Broadcast:
      ok = operandsIn([&](const ir::Value* o) {
        LinearLayout collapsed = l;
        for (size_t d = 0; d < o->type().shape.size(); ++d)
          if (o->type().shape[d] == 1 && v->type().shape[d] != 1)
            collapsed =
                expandDimsLayout(sliceLayout(collapsed, static_cast<int>(d)), static_cast<int>(d));
        return collapsed;
      });
      break;
    default:
      ok = isElementwise(op->code()) && op->code() != OpCode::IntToPtr &&
           operandsIn([&](const ir::Value*) { return l; });
      break;
    }
    if (!ok) return false;
    plan.emplace_back(v, l);
    return true;
  }

  void needScratch(const ir::Op& op, int64_t bytes) {
    bytes = alignTo(bytes, 16);
    int64_t& s = map_.scratchPerOp_[&op];
    s = std::max(s, bytes);
  }

  /// The layout a value without layout-relevant operands takes: its preference or a default.
  LinearLayout freeLayout(const ir::Value* v, int32_t vecElems = 1) const {
    if (const LinearLayout* p = preferred(v)) return *p;
    return defaultBlockedLayout(v->type().shape, numWarps(), vecElems);
  }

  void assignBlock(const ir::Block& block) {
    for (const auto& op : block.ops()) assignOp(*op);
  }

  /// True for values computed from aranges, constants and splats of scalars alone (through
  /// elementwise ops, expand_dims and broadcasts): they are recomputed rather than moved, so they
  /// should not decide their consumers' layouts.
  bool isCheap(const ir::Value* v, int depth = 0) {
    auto known = cheap_.find(v);
    if (known != cheap_.end()) return known->second;
    const ir::Op* op = v->def();
    bool cheap = false;
    if (op && op->numResults() == 1 && depth < 16) {
      switch (op->code()) {
      case OpCode::Arange:
      case OpCode::Constant:
        cheap = true;
        break;
      case OpCode::Splat:
        cheap = !isTensor(op->operand(0));
        break;
      default:
        cheap = op->code() == OpCode::ExpandDims || op->code() == OpCode::Broadcast ||
                (isElementwise(op->code()) && op->code() != OpCode::IntToPtr);
        for (const ir::Value* o : op->operands())
          if (cheap && isTensor(o)) cheap = isCheap(o, depth + 1);
        break;
      }
    }
    cheap_[v] = cheap;
    return cheap;
  }

  /// The layouts of `op`'s tensor operands that have one already (not deferred); values that
  /// are cheap to recompute only count when no operand is expensive to move.
  std::vector<const LinearLayout*> operandLayouts(const ir::Op& op) {
    std::vector<const LinearLayout*> have, strong;
    for (const ir::Value* v : op.operands()) {
      if (!isTensor(v) || isDeferred(v) || !layoutOf(v)) continue;
      have.push_back(layoutOf(v));
      if (!isCheap(v)) strong.push_back(layoutOf(v));
    }
    return strong.empty() ? have : strong;
  }

  void assignElementwise(const ir::Op& op) {
    const ir::Value* r = op.result();
    std::vector<const LinearLayout*> have = operandLayouts(op);
    LinearLayout chosen;
    if (have.empty() && !preferred(r)) {
      defer(r, &op);
      return;
    }
    if (have.empty()) {
      chosen = *preferred(r);
    } else if (std::all_of(have.begin(), have.end(), [&](auto* l) { return *l == *have[0]; })) {
      chosen = *have[0];
    } else if (const LinearLayout* p = preferred(r);
               p && std::any_of(have.begin(), have.end(), [&](auto* l) { return *l == *p; })) {
      chosen = *p;
    } else {
      chosen = *have[0];
    }
    for (unsigned i = 0; i < op.numOperands(); ++i)
      if (isTensor(op.operand(i)) && op.operand(i)->type().shape == r->type().shape)
        require(op, i, chosen);
    for (unsigned i = 0; i < op.numResults(); ++i) setLayout(op.result(i), chosen);
  }

  void assignOp(const ir::Op& op) {
    if (op.code() == OpCode::AsyncTask) {
      inTask(op, [&](const ir::Block& b) { assignBlock(b); });
      return;
    }
    if (isMemoryAnchor(op)) {
      const LinearLayout& l = coalesced(op);
      for (unsigned i = 0; i < op.numOperands(); ++i)
        if (isTensor(op.operand(i))) require(op, i, l);
      if (op.numResults() && isTensor(op.result())) setLayout(op.result(), l);
      return;
    }
    if (isElementwise(op.code()) && op.numResults() == 1 && isTensor(op.result())) {
      assignElementwise(op);
      return;
    }
    switch (op.code()) {
    case OpCode::Constant:
    case OpCode::Arange:
    case OpCode::Splat:
      // Cheap to produce in any layout: the first consumer decides (see naturalLayout).
      if (isTensor(op.result())) defer(op.result(), nullptr);
      return;
    case OpCode::Broadcast:
      // The consumer decides: a layout the source reaches without data movement, or else the
      // (smaller) source is converted before it is broadcast.
      defer(op.result(), &op);
      return;
    case OpCode::ExpandDims:
      if (const LinearLayout* s = layoutOf(op.operand(0)))
        setLayout(op.result(),
                  expandDimsLayout(*s, static_cast<int>(ir::attr::ExpandDims::axis(op))));
      else
        setLayout(op.result(), freeLayout(op.result()));
      return;
    case OpCode::Permute:
      if (const LinearLayout* s = layoutOf(op.operand(0)))
        setLayout(op.result(), permuteLayout(*s, ir::attr::Permute::order(op)));
      return;
    case OpCode::Reshape:
      if (const LinearLayout* s = layoutOf(op.operand(0)))
        setLayout(op.result(), reshapeLayout(*s, op.result()->type().shape));
      return;
    case OpCode::Join: {
      const LinearLayout* a = layoutOf(op.operand(0));
      if (!a) return;
      require(op, 1, *a);
      int rank = static_cast<int>(op.operand(0)->type().shape.size());
      setLayout(op.result(), *a * LinearLayout::identity1D(2, kRegister, dimName(rank)));
      return;
    }
    case OpCode::Split:
      assignSplit(op);
      return;
    case OpCode::InlineAsm:
    case OpCode::MapElementwise: {
      // Elementwise over several results: every operand and result in one layout, the first
      // operand's that has one (as for other elementwise ops, a deferred one, such as a
      // broadcast constant, takes the others' rather than making them convert to its natural
      // layout: TLX's _fma_f32x2(c1, x, c0)); else the first operand's natural layout. A
      // map_elementwise region computes on scalars.
      for (unsigned r = 0; r < op.numRegions(); ++r) assignBlock(*op.region(r));
      if (op.numResults() == 0 || !isTensor(op.result(0))) return;
      LinearLayout chosen;
      bool found = false;
      if (std::vector<const LinearLayout*> have = operandLayouts(op); !have.empty()) {
        chosen = *have[0];
        found = true;
      }
      for (const ir::Value* v : op.operands())
        if (!found && isTensor(v))
          if (const LinearLayout* l = layoutOf(v)) {
            chosen = *l;
            found = true;
          }
      if (!found)
        chosen = preferred(op.result(0)) ? *preferred(op.result(0)) : freeLayout(op.result(0));
      for (unsigned i = 0; i < op.numOperands(); ++i)
        if (isTensor(op.operand(i))) require(op, i, chosen);
      for (unsigned i = 0; i < op.numResults(); ++i) setLayout(op.result(i), chosen);
      return;
    }
    case OpCode::Cat: {
      const LinearLayout* a = layoutOf(op.operand(0));
      if (!a) return;
      require(op, 1, *a);
      LinearLayout r = *a * LinearLayout::identity1D(2, kRegister, dimName(0));
      setLayout(op.result(), r.transposeOuts(dimNames(a->numOutDims())));
      return;
    }
    case OpCode::Reduce:
    case OpCode::Scan:
      assignReduceOrScan(op);
      return;
    case OpCode::VoteBallot:
      // A tensor vote: each thread votes with its own elements of pred and holds the ballot in
      // their places, so the result lies as pred does.
      if (isTensor(op.result())) {
        LinearLayout l =
            layoutOf(op.operand(1)) ? *layoutOf(op.operand(1)) : freeLayout(op.operand(1));
        require(op, 1, l);
        setLayout(op.result(), l);
      }
      return;
    case OpCode::Dot: {
      const DotLayouts& dl = dotLayouts(op);
      if (dl.fmaLoop) {
        // Codegen stores both operands to the scratch region as they come, row-major.
        for (unsigned i : {0u, 1u}) {
          const LinearLayout* l = layoutOf(op.operand(i));
          require(op, i, l ? *l : freeLayout(op.operand(i)));
        }
        const ir::Type& at = op.operand(0)->type();
        const ir::Type& bt = op.operand(1)->type();
        needScratch(op, alignTo(numElements(at.shape) * at.elemBytes(), 16) +
                            numElements(bt.shape) * bt.elemBytes());
      } else if (dl.kind != MmaKind::Wgmma) {
        require(op, 0, dl.a);
        require(op, 1, dl.b);
      } else {
        // wgmma reads both operands from shared memory: codegen stores them there (scratch).
        const ir::Type& at = op.operand(0)->type();
        const ir::Type& bt = op.operand(1)->type();
        needScratch(op, alignTo(numElements(at.shape) * at.elemBytes(), 1024) +
                            numElements(bt.shape) * bt.elemBytes());
        wgmmaStaging_ = true;
      }
      require(op, 2, dl.acc);
      setLayout(op.result(), dl.acc);
      return;
    }
    case OpCode::AsyncDot: {
      if (!isTensor(op.result())) return;
      const DotLayouts& dl = dotLayouts(op);
      if (isTensor(op.operand(0))) require(op, 0, dl.a);
      if (isTensor(op.operand(1)) && dl.kind != MmaKind::Wgmma) require(op, 1, dl.b);
      if (op.numOperands() > 2) require(op, 2, dl.acc);
      setLayout(op.result(), dl.acc);
      return;
    }
    case OpCode::AsyncDotWait:
      for (unsigned i = 0; i < op.numResults() && i < op.numOperands(); ++i)
        if (const LinearLayout* l = layoutOf(op.operand(i))) setLayout(op.result(i), *l);
      return;
    case OpCode::AsyncRemoteStore:
    case OpCode::RemoteStore: {
      const ir::Value* v = op.operand(1);
      if (!isTensor(v)) return;
      const std::vector<int64_t>& shape = v->type().shape;
      int64_t eb = v->type().elemBytes(), n = numElements(shape);
      // A value of at most 16 bytes (a pair of partial statistics) goes from one thread as one
      // vector store: each remote store also updates the peer's mbarrier, so fewer is faster.
      if (n >= 2 && n * eb <= 16 && n == shape.back() && isPowerOf2(n)) {
        require(op, 1, defaultBlockedLayout(shape, numWarps(), static_cast<int32_t>(n)));
        return;
      }
      // st.async stores 32-bit units at least: a 16-bit value goes as packed pairs, so each
      // thread holds consecutive elements along the last dim (16 bytes where the shape allows).
      if (eb != 2) return;
      const LinearLayout* have = layoutOf(v);
      int last = static_cast<int>(shape.size()) - 1;
      if (have && have->numConsecutiveInOut(dimName(last)) >= 2) return;
      require(op, 1, defaultBlockedLayout(shape, numWarps(), 8));
      return;
    }
    case OpCode::Gather: {
      // Each result element is read at its index's element, after the whole source went through
      // shared memory (row-major, one element each).
      const ir::Type& st = op.operand(0)->type();
      needScratch(op, numElements(st.shape) * std::max(1, st.elemBytes()));
      const LinearLayout* s = layoutOf(op.operand(0));
      require(op, 0, s ? *s : freeLayout(op.operand(0)));
      const LinearLayout* l = layoutOf(op.operand(1));
      LinearLayout chosen = l                        ? *l
                            : preferred(op.result()) ? *preferred(op.result())
                                                     : freeLayout(op.result());
      require(op, 1, chosen);
      setLayout(op.result(), chosen);
      return;
    }
    case OpCode::Histogram: {
      // Each thread adds its own elements into bins in shared memory (the mask beside them),
      // then reads the bins its result registers hold.
      needScratch(op, ir::attr::Histogram::bins(op) * 4);
      const LinearLayout* in = layoutOf(op.operand(0));
      LinearLayout inLayout = in ? *in : freeLayout(op.operand(0));
      require(op, 0, inLayout);
      if (op.numOperands() > 1) require(op, 1, inLayout);
      setLayout(op.result(),
                preferred(op.result()) ? *preferred(op.result()) : freeLayout(op.result()));
      return;
    }
    case OpCode::LocalGather: // each element of the result is read at its index's element
      if (const LinearLayout* l = layoutOf(op.operand(1))) {
        setLayout(op.result(), *l);
        return;
      }
      break;
    case OpCode::LocalScatter:
      if (const LinearLayout* l = layoutOf(op.operand(2))) require(op, 1, *l);
      return;
    case OpCode::LocalStore:
      // tcgen05.st takes each thread's row of the tile (Blackwell tensor memory): a value in a
      // layout that keeps those rows (a kernel-given one, tmemColumnBits) is stored as it is,
      // in messages per run of its columns; others convert to tcgen05's layout first.
      if (op.operand(0)->type().space == ir::MemorySpace::Tmem && isTensor(op.operand(1))) {
        const ir::Value* v = op.operand(1);
        const LinearLayout* have = isDeferred(v) ? nullptr : layoutOf(v);
        if (have && !ir::isTmemScaleTile(op.operand(0)->type()) &&
            tmemColumnBits(*have, v->type().shape, v->type().elemBytes()))
          return;
        require(op, 1, tmemLayoutOf(op.operand(0)));
        return;
      }
      break;
    case OpCode::LocalLoad:
      if (isTensor(op.result()) && ir::attr::LocalLoad::hasLayout(op)) {
        assignKernelLayout(op);
        return;
      }
      // tcgen05.ld gives each thread one row of the tile (Blackwell tensor memory).
      if (isTensor(op.result()) && op.operand(0)->type().space == ir::MemorySpace::Tmem) {
        setLayout(op.result(), tmemLayoutOf(op.operand(0)));
        return;
      }
      [[fallthrough]];
    case OpCode::DescLoad:
      if (isTensor(op.result()))
        setLayout(op.result(),
                  freeLayout(op.result(), std::max(1, 16 / op.result()->type().elemBytes())));
      return;
    case OpCode::For:
      assignFor(op);
      return;
    case OpCode::If:
      assignIf(op);
      return;
    case OpCode::While:
      assignWhile(op);
      return;
    default:
      break;
    }
    for (unsigned r = 0; r < op.numRegions(); ++r) assignBlock(*op.region(r));
    for (unsigned i = 0; i < op.numResults(); ++i)
      if (isTensor(op.result(i)) && !layoutOf(op.result(i)))
        setLayout(op.result(i), freeLayout(op.result(i)));
  }

  /// tlx.local_load(..., layout=): the kernel's register layout is the result's (consumers
  /// wanting another convert from it). Shared memory is read in any layout; tensor memory by
  /// tcgen05.ld messages per column run where the layout keeps tcgen05's rows (tmemColumnBits),
  /// else in tcgen05's layout and converted at the load, its scratch planned now.
  void assignKernelLayout(const ir::Op& op) {
    const std::vector<int64_t> warpOffsets = ir::attr::LocalLoad::warpOffsets(op);
    const int warps = numWarps();
    if ((int64_t(1) << warpOffsets.size()) != warps)
      raiseError(op.loc(), "tlx.local_load's layout= spans " +
                               std::to_string(int64_t(1) << (warpOffsets.size() + 5)) +
                               " threads (" + std::to_string(int64_t(1) << warpOffsets.size()) +
                               " warps) but the code runs on " + std::to_string(warps) +
                               " warps; its thread modes must give 32 x the warps' threads");
    const std::vector<int64_t>& shape = op.result()->type().shape;
    LinearLayout pinned = flatOffsetLayout(shape, ir::attr::LocalLoad::regOffsets(op),
                                           ir::attr::LocalLoad::laneOffsets(op), warpOffsets);
    setLayout(op.result(), pinned);
    if (op.operand(0)->type().space != ir::MemorySpace::Tmem) return;
    if (ir::isTmemScaleTile(op.operand(0)->type()))
      raiseError(op.loc(), "tlx.local_load's layout= of a tensor-memory block-scale tile (" +
                               op.operand(0)->type().str() +
                               ") is not supported; layout= takes shared-memory tiles and the "
                               "other tensor-memory tiles");
    if (tmemColumnBits(pinned, shape, op.result()->type().elemBytes())) return; // tcgen05.ld
    LinearLayout tmem = tmemLayoutOf(op.operand(0));
    if (conversionKind(tmem, pinned) != ConversionKind::SharedMemory) return;
    int64_t bytes = std::max(1, op.result()->type().elemBytes());
    ConversionRounds rounds = conversionRounds(tmem, pinned, std::vector<int32_t>(shape.size(), 0),
                                               kMaxConversionScratchBytes / bytes);
    needScratch(op, rounds.elements() * bytes);
  }

  void assignSplit(const ir::Op& op) {
    const LinearLayout* s = layoutOf(op.operand(0));
    if (!s) return;
    int rank = s->numOutDims();
    std::string last = dimName(rank - 1);
    // The split dim must be held in registers: find the register bit selecting it.
    auto findBit = [&](const LinearLayout& l) {
      for (int bit = 0; bit < l.getInDimSizeLog2(kRegister); ++bit) {
        const auto& b = l.getBasis(kRegister, bit);
        bool unit = b[rank - 1] == 1;
        for (int d = 0; d < rank - 1; ++d) unit &= b[d] == 0;
        if (unit) return bit;
      }
      return -1;
    };
    LinearLayout src = *s;
    if (findBit(src) < 0) {
      src = expandDimsLayout(sliceLayout(src, rank - 1), rank - 1) *
            LinearLayout::identity1D(2, kRegister, last);
      require(op, 0, src);
    }
    int bit = findBit(src);
    LinearLayout::Bases bases;
    for (auto& [inDim, dimBases] : src.getBases()) {
      std::vector<std::vector<int32_t>> kept;
      for (size_t b = 0; b < dimBases.size(); ++b) {
        if (inDim == kRegister && static_cast<int>(b) == bit) continue;
        kept.push_back(dimBases[b]);
      }
      bases.emplace_back(inDim, std::move(kept));
    }
    LinearLayout::NamedSizes outs;
    for (int d = 0; d < rank; ++d)
      outs.emplace_back(dimName(d), d == rank - 1 ? 1 : src.getOutDimSize(dimName(d)));
    for (auto& [inDim, dimBases] : bases)
      for (auto& b : dimBases) b[rank - 1] = 0;
    LinearLayout half = LinearLayout(std::move(bases), std::move(outs))
                            .sublayout({kRegister, kLane, kWarp, kBlock}, dimNames(rank - 1));
    for (unsigned i = 0; i < op.numResults(); ++i) setLayout(op.result(i), half);
  }

  void assignReduceOrScan(const ir::Op& op) {
    const LinearLayout* l0 = layoutOf(op.operand(0));
    if (!l0) {
      for (unsigned r = 0; r < op.numRegions(); ++r) assignBlock(*op.region(r));
      return;
    }
    LinearLayout src = *l0;
    for (unsigned i = 1; i < op.numOperands(); ++i) require(op, i, src);
    for (unsigned r = 0; r < op.numRegions(); ++r) assignBlock(*op.region(r));
    int axis = static_cast<int>(op.code() == OpCode::Scan ? ir::attr::Scan::axis(op)
                                                          : ir::attr::Reduce::axis(op));
    const std::vector<int64_t>& shape = op.operand(0)->type().shape;
    // Warps holding different parts of the reduced axis combine partials through shared memory.
    int warpsAlong = 1;
    for (int bit = 0; bit < src.getInDimSizeLog2(kWarp); ++bit)
      if (src.getBasis(kWarp, bit)[axis] != 0) warpsAlong *= 2;
    if (warpsAlong > 1) {
      int64_t bytes = 0;
      for (const ir::Value* v : op.operands())
        bytes += numElements(shape) / shape[axis] * warpsAlong * v->type().elemBytes();
      needScratch(op, bytes);
    }
    for (unsigned i = 0; i < op.numResults(); ++i) {
      if (!isTensor(op.result(i))) continue;
      setLayout(op.result(i), op.code() == OpCode::Scan ? src : sliceLayout(src, axis));
    }
  }

  void assignFor(const ir::Op& op) {
    const ir::Block& body = *op.region(0);
    unsigned numIters = op.numOperands() - 3;
    for (unsigned i = 0; i < numIters && i + 1 < body.numArgs(); ++i) {
      const ir::Value* init = op.operand(3 + i);
      const ir::Value* arg = body.arg(i + 1);
      if (!isTensor(arg)) continue;
      if (const LinearLayout* p = preferred(arg))
        setLayout(arg, *p);
      else if (isDeferred(init))
        defer(arg, nullptr); // the body's first consumer decides, and the init follows
      else
        setLayout(arg, *layoutOf(init));
    }
    assignBlock(body);
    const ir::Op* yield = body.terminator();
    for (unsigned i = 0; i < numIters && i + 1 < body.numArgs(); ++i) {
      const ir::Value* arg = body.arg(i + 1);
      if (!isTensor(arg)) continue;
      if (isDeferred(arg)) {
        const ir::Value* next = yield && i < yield->numOperands() ? yield->operand(i) : nullptr;
        resolve(arg,
                next && next != arg && !isDeferred(next) ? *layoutOf(next) : naturalLayout(arg));
      }
      LinearLayout l = *layoutOf(arg);
      if (yield && i < yield->numOperands()) require(*yield, i, l);
      require(op, 3 + i, l);
      if (i < op.numResults()) setLayout(op.result(i), l);
    }
  }

  void assignIf(const ir::Op& op) {
    for (unsigned r = 0; r < op.numRegions(); ++r) assignBlock(*op.region(r));
    for (unsigned i = 0; i < op.numResults(); ++i) {
      if (!isTensor(op.result(i))) continue;
      std::vector<const LinearLayout*> have;
      for (unsigned r = 0; r < op.numRegions(); ++r) {
        const ir::Op* y = op.region(r)->terminator();
        if (y && i < y->numOperands() && !isDeferred(y->operand(i)) && layoutOf(y->operand(i)))
          have.push_back(layoutOf(y->operand(i)));
      }
      LinearLayout l = have.empty() ? freeLayout(op.result(i)) : *have[0];
      if (const LinearLayout* p = preferred(op.result(i)))
        if (std::any_of(have.begin(), have.end(), [&](auto* h) { return *h == *p; })) l = *p;
      for (unsigned r = 0; r < op.numRegions(); ++r) {
        const ir::Op* y = op.region(r)->terminator();
        if (y && i < y->numOperands()) require(*y, i, l);
      }
      setLayout(op.result(i), l);
    }
  }

  void assignWhile(const ir::Op& op) {
    // Operands: init...; region 0 (before) args = iters, ends in condition(cond, values...);
    // region 1 (after) args = values, yields the next iters.
    const ir::Block& before = *op.region(0);
    for (unsigned i = 0; i < op.numOperands() && i < before.numArgs(); ++i) {
      const ir::Value* arg = before.arg(i);
      if (!isTensor(arg)) continue;
      const ir::Value* init = op.operand(i);
      LinearLayout l = layoutOf(init) ? *layoutOf(init) : freeLayout(arg);
      setLayout(arg, l);
    }
    assignBlock(before);
    const ir::Op* cond = before.terminator();
    if (op.numRegions() > 1) {
      const ir::Block& after = *op.region(1);
      for (unsigned i = 0; cond && i + 1 < cond->numOperands(); ++i) {
        const LinearLayout* l = layoutOf(cond->operand(i + 1));
        if (!l) continue;
        if (i < after.numArgs()) setLayout(after.arg(i), *l);
        if (i < op.numResults()) setLayout(op.result(i), *l);
      }
      assignBlock(after);
      const ir::Op* yield = after.terminator();
      for (unsigned i = 0; yield && i < yield->numOperands() && i < before.numArgs(); ++i)
        if (const LinearLayout* l = layoutOf(before.arg(i))) require(*yield, i, *l);
    }
  }

  // ---------------------------------------------------------------------------------------
  // shared memory
  // ---------------------------------------------------------------------------------------

  const ir::Value* rootOf(const ir::Value* v) const {
    auto it = map_.viewRoots_.find(v);
    return it == map_.viewRoots_.end() ? v : it->second;
  }

  /// The e2m1 operand of a mixed block-scaled MMA (tcgen05.mma .kind::mxf8f6f4) is read padded:
  /// its buffer takes twice its bytes in fp4PaddedSharedLayout (ir/BlockScaled.h).
  void padMixedFp4Operands() {
    walk(fn_.body, [&](const ir::Op& op) {
      if (op.code() != OpCode::Tcgen05Mma || !ir::attr::Tcgen05Mma::hasScales(op) ||
          !ir::isMixedFp4ScaledMma(op))
        return;
      const unsigned i = ir::isFp4Operand(op, 0) ? 0 : 1;
      const ir::Value* root = rootOf(op.operand(i));
      auto it = map_.allocations_.find(root);
      const ir::Op* alloc = root->def();
      if (it == map_.allocations_.end() || !alloc || alloc->code() != OpCode::LocalAlloc)
        return; // the lowering names what it cannot read
      const ir::Type& t = root->type();
      if (alloc->hasAttr(ir::attr::LocalAlloc::kalias) || t.shape.size() != 2 ||
          t.elem != ir::DType::U8 || t.shape[1] % 64 != 0 || !isPowerOf2(t.shape[0]) ||
          !isPowerOf2(t.shape[1]))
        raiseError(op.loc(), "tlx.async_dot_scaled reads its e2m1 operand " + t.str() +
                                 " padded (tcgen05.mma kind::mxf8f6f4): its tlx.local_alloc "
                                 "must be a [rows, K / 2] uint8 buffer of its own (no "
                                 "storage_alias_spec), both powers of two, K / 2 a multiple of "
                                 "64");
      SharedAllocation& a = it->second;
      if (a.fp4Padded) return;
      a.fp4Padded = true;
      a.swizzleBytes = 128;
      a.layout = fp4PaddedSharedLayout(t.shape[0], t.shape[1]);
      a.alignment = 1024;
      a.bytesPerBuffer = alignTo(2 * numElements(t.shape), a.alignment);
    });
  }

  /// The kernel's layout= of a shared tlx.local_alloc (specialize/TlxLayouts.cpp resolved it
  /// for the shape): a swizzled_shared layout is the buffer's layout exactly, and where it is
  /// one of the NVMMA swizzles it is marked as that (TMA and wgmma read it then).
  void userSharedLayout(const ir::Op& op, SharedAllocation& a) {
    namespace A = ir::attr::LocalAlloc;
    const ir::Type& t = op.result()->type();
    a.userLayout = A::layoutDesc(op);
    a.swizzleBytes = 0;
    a.alignment = 128;
    const std::vector<int64_t> intervals = A::padIntervals(op), pads = A::padAmounts(op);
    if (!intervals.empty()) {
      std::vector<int32_t> rowMajor;
      for (int d = static_cast<int>(t.shape.size()) - 1; d >= 0; --d) rowMajor.push_back(d);
      a.layout = swizzledSharedLayout(t.shape, 1, 1, 1, rowMajor);
      for (size_t i = 0; i < intervals.size(); ++i)
        if (pads[i]) a.padding.push_back({intervals[i], pads[i]});
      return;
    }
    std::vector<int32_t> order;
    for (int64_t d : A::sharedOrder(op)) order.push_back(static_cast<int32_t>(d));
    a.layout = swizzledSharedLayout(t.shape, static_cast<int32_t>(A::sharedVec(op)),
                                    static_cast<int32_t>(A::sharedPerPhase(op)),
                                    static_cast<int32_t>(A::sharedMaxPhase(op)), order);
    const int eb = ir::byteWidth(t.elem);
    if (t.shape.size() == 2 && t.shape[0] >= 8)
      for (int sw : {128, 64, 32})
        if (t.shape[size_t(order[0])] * eb >= sw &&
            nvmmaSharedLayout(t.shape, eb, sw, order) == a.layout) {
          a.swizzleBytes = sw;
          a.alignment = 1024;
          break;
        }
  }

  /// Sizes and layouts of every shared allocation, then their offsets by liveness
  /// (SharedMemoryPlan.h): buffers whose live ranges do not meet share bytes, and the scratch
  /// region lies over buffers that are dead wherever scratch is used.
  void allocateShared() {
    std::vector<const ir::Op*> allocs; // shared-memory allocations, in program order
    walk(fn_.body, [&](const ir::Op& op) {
      switch (op.code()) {
      case OpCode::LocalAlloc: {
        const ir::Type& t = op.result()->type();
        if (t.space == ir::MemorySpace::Tmem) return;
        SharedAllocation a;
        int eb = ir::byteWidth(t.elem);
        std::vector<int32_t> order;
        for (int d = static_cast<int>(t.shape.size()) - 1; d >= 0; --d) order.push_back(d);
        bool pow2 = std::all_of(t.shape.begin(), t.shape.end(), isPowerOf2);
        if (pow2 && t.shape.size() == 2 && t.shape[0] >= 8) {
          a.swizzleBytes = nvmmaSwizzleBytes(t.shape, eb);
          a.layout = nvmmaSharedLayout(t.shape, eb, a.swizzleBytes);
        } else if (pow2 && !t.shape.empty()) {
          a.layout = swizzledSharedLayout(t.shape, 1, 1, 1, order);
        }
        a.alignment = sharedTileAlignment(t.shape, eb);
        int64_t elems = numElements(t.shape);
        if (op.hasAttr(ir::attr::LocalAlloc::klayoutDesc)) userSharedLayout(op, a);
        for (const auto& [interval, pad] : a.padding) elems += elems / interval * pad;
        a.bytesPerBuffer = alignTo(elems * eb, a.alignment);
        a.count = t.count;
        if (op.hasAttr(ir::attr::LocalAlloc::kalias)) {
          if (int64_t stride = ir::attr::LocalAlloc::aliasStride(op)) a.bytesPerBuffer = stride;
          // Subtiles of a set_buffer_overlap group (TLX's index rewriting) lie a tile further.
          a.groupSize = ir::attr::LocalAlloc::aliasGroup(op);
          if (a.groupSize > 1) a.groupStepBytes = numElements(t.shape) * eb;
        }
        map_.allocations_[op.result()] = std::move(a);
        allocs.push_back(&op);
        return;
      }
      case OpCode::AllocBarriers: {
        SharedAllocation a;
        a.alignment = 8;
        a.bytesPerBuffer = 8;
        a.count = op.result()->type().count;
        map_.allocations_[op.result()] = std::move(a);
        allocs.push_back(&op);
        return;
      }
      case OpCode::LocalView:
      case OpCode::LocalSlice:
      case OpCode::LocalTrans:
      case OpCode::LocalReinterpret:
        if (op.numOperands() && op.numResults())
          map_.viewRoots_[op.result()] = rootOf(op.operand(0));
        return;
      case OpCode::For:
        // A loop-carried buffer or barrier view (its body argument and the loop's result)
        // views what its initial value views; the values the body yields are checked alike
        // in chooseViewRoots.
        for (unsigned i = 0; i < op.numResults(); ++i) {
          const ir::Type& t = op.result(i)->type();
          if (t.kind != ir::TypeKind::Buffer && t.kind != ir::TypeKind::Barrier) continue;
          const ir::Value* root = rootOf(op.operand(3 + i));
          map_.viewRoots_[op.result(i)] = root;
          map_.viewRoots_[op.region(0)->arg(1 + i)] = root;
        }
        return;
      case OpCode::Yield:
        chooseViewRoots(op);
        return;
      default:
        return;
      }
    });
    padMixedFp4Operands();
    int64_t scratch = 0;
    for (const auto& [op, bytes] : map_.scratchPerOp_) scratch = std::max(scratch, bytes);
    map_.scratchBytes_ = scratch;

    SharedLiveness live(
        fn_, [&](const ir::Value* v) { return rootOf(v); },
        [&](const ir::Op& op) {
          SharedLiveness::ScratchUse use = mayUseScratch(op);
          if (use != SharedLiveness::ScratchUse::None) map_.scratchUsers_.insert(&op);
          return use;
        });
    // One tenant per allocation, and one per storage_alias_spec region (its members lie in it).
    std::vector<SharedTenant> tenants;
    std::vector<const ir::Op*> tenantOf; // the allocation of each tenant (an alias region's first)
    std::map<int64_t, size_t> aliasTenant;
    for (const ir::Op* op : allocs) {
      const SharedAllocation& a = map_.allocations_.at(op->result());
      SharedTenant t;
      t.bytes = a.bytes();
      t.alignment = a.alignment;
      t.span = live.wholeKernel();
      if (op->code() == OpCode::LocalAlloc && op->hasAttr(ir::attr::LocalAlloc::kalias)) {
        int64_t id = ir::attr::LocalAlloc::alias(*op);
        if (aliasTenant.count(id)) continue;
        aliasTenant[id] = tenants.size();
        t.bytes = alignTo(aliasRegionBytes(id), 128);
        t.alignment = 1024;
      } else if (op->code() == OpCode::LocalAlloc) {
        BufferLiveness l = live.analyze(*op);
        t.wholeKernel = l.wholeKernel;
        t.span = l.span;
        t.generic = l.generic;
        t.async = l.async;
      }
      tenants.push_back(t);
      tenantOf.push_back(op);
    }
    // wgmma reads staged operands in whole swizzle atoms; conversions store vectors.
    int64_t scratchAlignment = wgmmaStaging_ ? 1024 : scratch ? 128 : 1;
    SharedPlacement placed = placeSharedTenants(tenants, live, scratch, scratchAlignment);
    for (size_t i = 0; i < tenants.size(); ++i)
      map_.allocations_.at(tenantOf[i]->result()).offset = tenants[i].offset;
    for (const ir::Op* op : allocs)
      if (op->code() == OpCode::LocalAlloc && op->hasAttr(ir::attr::LocalAlloc::kalias))
        placeAliasMember(*op, tenants[aliasTenant.at(ir::attr::LocalAlloc::alias(*op))].offset);
    map_.scratchOffset_ = placed.scratchOffset;
    map_.sharedBytes_ = placed.end;
    for (const auto& [op, barrier] : placed.barriers) map_.reuseBarriers_[op] = barrier;
  }

  /// How lowering `op` (not its regions) may use the scratch region: a conversion of an operand
  /// between threads (the plan says shuffles or shared memory; codegen may take shared memory
  /// for either), a reduction or dot it planned scratch for, the tensor-memory ops that pass
  /// values through it, and every op not known to leave it alone. Descriptor copies (TMA),
  /// tl.dot on wgmma (staged operands) and the tcgen05 ops use the async proxy there too.
  SharedLiveness::ScratchUse mayUseScratch(const ir::Op& op) const {
    using Use = SharedLiveness::ScratchUse;
    auto tmem = [](const ir::Value* v) {
      return v->type().kind == ir::TypeKind::Buffer && v->type().space == ir::MemorySpace::Tmem;
    };
    bool uses = map_.scratchPerOp_.count(&op) != 0;
    for (unsigned i = 0; i < op.numOperands() && !uses; ++i)
      if (auto it = map_.conversionIndex_.find({&op, i}); it != map_.conversionIndex_.end()) {
        ConversionKind kind = map_.conversions_[it->second].kind;
        uses = kind == ConversionKind::SharedMemory || kind == ConversionKind::WarpShuffle;
      }
    bool async = false;
    switch (op.code()) {
    case OpCode::LocalAlloc: // the first tensor-memory allocation returns its address there
      async = tmem(op.result());
      uses = uses || async;
      break;
    case OpCode::LocalLoad: // 8-bit tensor-memory tiles (block scales) go through it
    case OpCode::LocalStore:
      uses = uses || (tmem(op.operand(0)) && ir::byteWidth(op.operand(0)->type().elem) == 1);
      break;
    case OpCode::Tcgen05Mma: // the synchronous MMA waits on an mbarrier there
      async = ir::attr::Tcgen05Mma::sync(op);
      uses = uses || async;
      break;
    case OpCode::Dot: { // wgmma reads the operands it staged there; an FMA loop reads its own
      auto dl = map_.dots_.find(&op);
      async = dl != map_.dots_.end() && dl->second.kind == MmaKind::Wgmma;
      uses = true;
      break;
    }
    case OpCode::DescLoad: // the tile goes through there by TMA
    case OpCode::DescStore:
      async = true;
      uses = true;
      break;
    case OpCode::Reduce: // only across warps, which assignReduceOrScan planned scratch for:
      break;             // within a warp it shuffles (a wgmma accumulator's row max and sum)
    default:
      uses = uses || !neverUsesScratch(op.code());
      break;
    }
    return !uses ? Use::None : async ? Use::AsyncProxy : Use::Threads;
  }

  /// Ops whose lowering never uses the scratch region (conversions at their operands are
  /// checked apart).
  static bool neverUsesScratch(OpCode c) {
    switch (c) {
    case OpCode::Constant:
    case OpCode::ProgramId:
    case OpCode::NumPrograms:
    case OpCode::Arange:
    case OpCode::Splat:
    case OpCode::Broadcast:
    case OpCode::ExpandDims:
    case OpCode::MultipleOf:
    case OpCode::MaxContiguous:
    case OpCode::Load:
    case OpCode::Store:
    case OpCode::For:
    case OpCode::If:
    case OpCode::Yield:
    case OpCode::LocalAlloc:
    case OpCode::AllocBarriers:
    case OpCode::LocalView:
    case OpCode::LocalTrans:
    case OpCode::LocalSlice:
    case OpCode::LocalLoad:
    case OpCode::LocalStore:
    case OpCode::AsyncLoad:
    case OpCode::AsyncCommitGroup:
    case OpCode::AsyncWaitGroup:
    case OpCode::AsyncDescLoad:
    case OpCode::AsyncDescStore:
    case OpCode::AsyncDescStoreWait:
    case OpCode::AsyncBulkLoad:
    case OpCode::AsyncBulkStore:
    case OpCode::AsyncDot:
    case OpCode::AsyncDotWait:
    case OpCode::Tcgen05Commit:
    case OpCode::TmemCopy:
    case OpCode::BarrierExpectBytes:
    case OpCode::BarrierWait:
    case OpCode::BarrierArrive:
    case OpCode::NamedBarrierWait:
    case OpCode::NamedBarrierArrive:
    case OpCode::ClusterBarrier:
    case OpCode::DebugBarrier:
    case OpCode::Fence:
    case OpCode::Prefetch:
    case OpCode::PrefetchTensormap:
    case OpCode::AsyncDescPrefetch:
    case OpCode::ThreadId:
    case OpCode::ReplicaId:
    case OpCode::ClusterCtaRank:
    case OpCode::ClusterSize:
    case OpCode::Clock64:
    case OpCode::Condition:
    case OpCode::Return:
    case OpCode::InlineAsm: // the user's instructions on registers (codegen/InlineAsm.cpp)
      return true;
    default:
      return isElementwise(c);
    }
  }

  /// Bytes of a tlx.storage_alias_spec's region: alias_bytes, and each member's last buffer
  /// (buffer i at alias_offset + i * alias_stride + (i % alias_group) * its tile).
  int64_t aliasRegionBytes(int64_t id) const {
    int64_t bytes = 0;
    walk(fn_.body, [&](const ir::Op& m) {
      if (m.code() != OpCode::LocalAlloc || ir::attr::LocalAlloc::alias(m) != id) return;
      const ir::Type& t = m.result()->type();
      int64_t eb = ir::byteWidth(t.elem), tile = numElements(t.shape) * eb;
      int64_t stride = ir::attr::LocalAlloc::aliasStride(m);
      if (stride == 0) stride = alignTo(tile, sharedTileAlignment(t.shape, int(eb)));
      const int64_t group = ir::attr::LocalAlloc::aliasGroup(m);
      bytes = std::max(bytes, ir::attr::LocalAlloc::aliasBytes(m));
      for (int64_t i = 0; i < t.count; ++i)
        bytes = std::max(bytes, ir::attr::LocalAlloc::aliasOffset(m) + i * stride +
                                    (i % group) * tile + tile);
    });
    return bytes;
  }

  /// A member of a tlx.storage_alias_spec lies at its alias_offset in the spec's region (placed
  /// at `region`, 1024-aligned), its buffers alias_stride bytes apart (0: its own buffer size).
  void placeAliasMember(const ir::Op& op, int64_t region) {
    SharedAllocation& a = map_.allocations_.at(op.result());
    a.offset = region + ir::attr::LocalAlloc::aliasOffset(op);
    if (a.offset % a.alignment != 0)
      raiseError(op.loc(), "this tlx.local_alloc of " + op.result()->type().str() +
                               " would start at byte " + std::to_string(a.offset - region) +
                               " of its storage_alias_spec's region, not a multiple of its "
                               "alignment " +
                               std::to_string(a.alignment));
  }

  /// A run-time if that yields buffer or barrier views (a CTA's half of a tile, chosen by its
  /// cluster rank): its result views the allocation its branches' views come from; so does a
  /// for loop's carried view (a ring buffer's slot advanced each iteration). Views of two
  /// allocations are chosen between only when the allocations lie alike.
  void chooseViewRoots(const ir::Op& yield) {
    const ir::Block* block = yield.parentBlock();
    const ir::Op* parent = block ? block->parentOp() : nullptr;
    if (!parent || (parent->code() != OpCode::If && parent->code() != OpCode::For)) return;
    for (unsigned i = 0; i < yield.numOperands() && i < parent->numResults(); ++i) {
      const ir::Type& t = yield.operand(i)->type();
      if (t.kind != ir::TypeKind::Buffer && t.kind != ir::TypeKind::Barrier) continue;
      const ir::Value* root = rootOf(yield.operand(i));
      auto [it, fresh] = map_.viewRoots_.emplace(parent->result(i), root);
      if (fresh || it->second == root) continue;
      auto a = map_.allocations_.find(it->second), b = map_.allocations_.find(root);
      bool alike = a != map_.allocations_.end() && b != map_.allocations_.end() &&
                   a->second.layout == b->second.layout &&
                   a->second.swizzleBytes == b->second.swizzleBytes &&
                   a->second.padding == b->second.padding &&
                   a->second.bytesPerBuffer == b->second.bytesPerBuffer &&
                   a->second.groupSize == b->second.groupSize &&
                   a->second.groupStepBytes == b->second.groupStepBytes;
      if (!alike)
        raiseError(parent->loc(), std::string("this ") + parent->name() +
                                      " chooses between views of two allocations that lie "
                                      "differently in shared memory (" +
                                      t.str() +
                                      "); choose between views of one tlx.local_alloc, "
                                      "or of allocations of one shape and dtype");
    }
  }

  const ir::Function& fn_;
  const CompileOptions& options_;
  LayoutMap& map_;
  std::unordered_map<const ir::Value*, Preference> pref_;
  std::unordered_map<const ir::Op*, LinearLayout> coalesced_;
  std::unordered_map<const ir::Value*, const ir::Op*> deferredBy_;
  std::vector<const ir::Value*> deferredOrder_;
  std::unordered_map<const ir::Value*, bool> cheap_;
  bool wgmmaStaging_ = false;
  int taskWarps_ = 0;
};

// -------------------------------------------------------------------------------------------
// LayoutMap
// -------------------------------------------------------------------------------------------

bool LayoutMap::hasLayout(const ir::Value* v) const {
  return layouts_.count(v) != 0;
}

const LinearLayout& LayoutMap::layout(const ir::Value* v) const {
  auto it = layouts_.find(v);
  if (it == layouts_.end())
    throw std::logic_error("layout map: no layout for a value of type " +
                           (v ? v->type().str() : std::string("<null>")));
  return it->second;
}

const LinearLayout& LayoutMap::operandLayout(const ir::Op& user, unsigned i) const {
  auto it = conversionIndex_.find({&user, i});
  if (it != conversionIndex_.end()) return conversions_[it->second].dst;
  return layout(user.operand(i));
}

bool LayoutMap::needsConversion(const ir::Op& user, unsigned i) const {
  return conversionIndex_.count({&user, i}) != 0;
}

int32_t LayoutMap::vectorElems(const ir::Op& op) const {
  if (op.numOperands() == 0 || !isTensor(op.operand(0))) return 1;
  const ir::Value* ptr = op.operand(0);
  const LinearLayout& l = operandLayout(op, 0);
  int rank = l.numOutDims();
  // The dim register bit 0 walks along is the one a thread's vector runs along.
  int dim = rank - 1;
  if (l.getInDimSizeLog2(kRegister) > 0) {
    const auto& b = l.getBasis(kRegister, 0);
    for (int d = 0; d < rank; ++d)
      if (b[d] == 1) dim = d;
  }
  int64_t axis = axisInfo_->vectorElems(ptr, maskOf(op), dim);
  return static_cast<int32_t>(std::min<int64_t>(axis, l.numConsecutiveInOut(dimName(dim))));
}

const DotLayouts* LayoutMap::dot(const ir::Op& op) const {
  auto it = dots_.find(&op);
  return it == dots_.end() ? nullptr : &it->second;
}

const SharedAllocation* LayoutMap::sharedAllocation(const ir::Value* v) const {
  auto root = viewRoots_.find(v);
  if (root != viewRoots_.end()) v = root->second;
  auto it = allocations_.find(v);
  return it == allocations_.end() ? nullptr : &it->second;
}

const ReuseBarrier* LayoutMap::reuseBarrierBefore(const ir::Op& op) const {
  auto it = reuseBarriers_.find(&op);
  return it == reuseBarriers_.end() ? nullptr : &it->second;
}

int64_t LayoutMap::scratchBytesFor(const ir::Op& op) const {
  auto it = scratchPerOp_.find(&op);
  return it == scratchPerOp_.end() ? 0 : it->second;
}

const ir::Op* LayoutMap::largestScratchUser() const {
  const ir::Op* best = nullptr;
  int64_t bytes = 0;
  for (const auto& [op, n] : scratchPerOp_) {
    bool earlier =
        best && (op->loc().line < best->loc().line ||
                 (op->loc().line == best->loc().line && op->loc().col < best->loc().col));
    if (n > bytes || (n == bytes && earlier)) best = op, bytes = n;
  }
  return best;
}

std::string LayoutMap::str(const ir::Function& fn) const {
  std::ostringstream os;
  auto show = [&](const ir::Value* v, const std::string& what) {
    if (!hasLayout(v)) return;
    os << what << (v->name.empty() ? "" : " %" + v->name) << " : " << v->type().str() << "\n"
       << layout(v).str() << "\n";
  };
  walk(fn.body, [&](const ir::Op& op) {
    for (unsigned r = 0; r < op.numRegions(); ++r)
      for (unsigned a = 0; a < op.region(r)->numArgs(); ++a)
        show(op.region(r)->arg(a), std::string(op.name()) + " region arg");
    for (unsigned i = 0; i < op.numResults(); ++i) show(op.result(i), op.name());
    for (unsigned i = 0; i < op.numOperands(); ++i)
      if (needsConversion(op, i))
        os << "  convert operand " << i << " of " << op.name() << " ("
           << conversionKindName(conversions_[conversionIndex_.at({&op, i})].kind) << ") to:\n"
           << operandLayout(op, i).str() << "\n";
  });
  os << "shared memory: " << sharedBytes_ << " bytes (scratch " << scratchBytes_ << " at "
     << scratchOffset_ << ")\n";
  return os.str();
}

LayoutMap assignLayouts(const ir::Function& fn, const CompileOptions& options) {
  LayoutMap map;
  LayoutAssigner(fn, options, map).run();
  return map;
}

} // namespace ww::layout
