// Software pipelining of tl.dot loops for sm_90a: the tl.load operands of a loop's one tl.dot
// (`acc = tl.dot(a, b, acc)` or `acc += tl.dot(a, b)`) become cp.async copies into
// multi-buffered shared memory, issued iterations ahead, and the dot becomes an async wgmma
// straight from those buffers with one MMA left in flight.
//
// For a loop with S = max(num_stages, 2) stages (fewer, down to 2, where the buffers would not
// fit in shared memory), D = S - 1 iterations are loaded ahead, as Triton does:
//
//   prologue:  for j < D: copy iteration j -> slot j (masked / predicated off past the end)
//   loop i:    wait for slot i % S                 (cp.async: async_wait_group(D - 1), whose
//                                                  lowering adds the proxy fence and the CTA
//                                                  barrier; TMA: the slot's mbarrier phase)
//              acc = async_dot(slot i % S, acc)
//              acc = async_dot_wait(1, acc)       the MMA of iteration i - 1 is retired
//              copy iteration i + D -> slot (i + D) % S = (i - 1) % S
//   epilogue:  acc = async_dot_wait(0, acc); async_wait_group(0) for cp.async
//
// Slot (i - 1) % S was last read by the MMA of iteration i - 1, which the waiting warp group
// just retired; with several warp groups the shared-memory hazard pass puts a CTA barrier before
// the copies. The loop-carried values the load addresses come from (pointer tensors advanced
// each iteration) are rotated: they enter the loop holding iteration D's values, the address
// computation is cloned with the induction variable moved D steps ahead, and the original
// computation dies. Loads through host descriptors (Triton's tutorial 09 form) or through
// tensor maps the kernel writes before the loop (tl.make_tensor_descriptor that
// lowerDeviceDescriptors kept, tutorial 09's descriptor-persistent form) become TMA copies of
// both tiles completing on one barrier per slot; the barriers are allocated once, before the
// for loops the K loop sits in (a persistent kernel's tile loop), which carry the ring's slot
// and phase from one pass of the K loop to the next. A dot loop whose loads through in-kernel
// descriptors do not fit the TMA rewrite has them rewritten into pointer loads and is tried
// again (cp.async). A loop that does not fit this shape is left as it is. An fp16 accumulator of
// fp16 operands is taken as an fp32 one is: the async wgmma is the .f16 form, whose registers the
// codegen carries through the loop as packed words (two fp16 each) and unpacks after the last
// wait (the attention and multi-dot forms below, and sm_100a, keep fp32 accumulators only).
// An fp8 dot with max_num_imprecise_acc (Triton's promotion, ir/DotTypes.h) whose one partial
// accumulator spans the tile's K gets the same copies; its MMA sums into a zeroed partial that
// the next iteration, once the MMA retired, adds into the fp32 accumulator (issuePromoted). A
// limit below the tile's K (several partials an iteration) leaves the loop as it is.
//
// Attention loops (`s = tl.dot(q, tl.trans(k))` with q loop-invariant, softmax, then
// `o = tl.dot(p, v, o)`) get the same copies for K and V, with Q stored once into its own
// buffer, S read from K's buffer as a K-major operand and P from registers; see
// rewriteAttention for the schedule. When K and V are desc_loads through host descriptors or
// in-kernel tensor maps (the Hopper forms of Triton's fused-attention tutorial) the copies are
// TMA loads instead, each slot completing on a barrier of its own (expect-bytes, then wait on
// the slot's phase parity), and copies past the end are predicated off rather than masked; Q,
// loaded the same way, is copied by TMA straight into its buffer.
//
// On sm_100a (tensorMemory) the matmul and attention forms are taken, with the same copies, and
// their dots become tcgen05.mma into accumulators in tensor memory (TMEM) instead of registers,
// as upstream Triton lowers tl.dot for Blackwell (see rewriteTcgen05 and
// rewriteAttentionTcgen05 for the schedules). The multi-dot form, and dots tcgen05.mma does not
// take, stay mma.sync from registers there.
//
// Loops with several 16-bit dots whose B operands are two tl.loads of the iteration, read as
// loaded or through tl.trans (attention's backward pass: dK / dV with qT and dO, dQ with kT and
// vT; see analyzeMultiDot) get the same cp.async copies S - 1 iterations ahead; the dots' A
// operands computed before the loop (k and v, q and dO) are stored once into buffers of their
// own before it, A operands computed in the loop stay in registers, and every dot becomes an
// async wgmma, retired where it stood or, for an accumulator the loop only carries (dV, dK,
// dQ), by the next wait (the next iteration's first, for the last dot). A tile loaded [D, N]
// from [N, D] memory is copied transposed (16-byte vectors along D) and read through
// local_trans. The buffers of a block's multi-dot loops, which run one after another, share
// their bytes by role (storage-alias regions: the first invariant operand's, the second's, each
// ring's): the loop's closing async_wait_group(0) meets every thread after its last reads,
// before the next loop writes.
#include "ir/Builder.h"
#include "ir/DotTypes.h"
#include "ir/Limits.h"
#include "ir/OpAttrs.h"
#include "ir/OpTraits.h"
#include "ir/TensorMaps.h"
#include "ir/Uniformity.h"
#include "layout/AxisInfo.h"
#include "support/MathExtras.h"
#include "transforms/Passes.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <optional>
#include <unordered_map>
#include <unordered_set>

namespace ww::transforms {

using ir::Block;
using ir::DType;
using ir::Op;
using ir::OpCode;
using ir::Type;
using ir::Value;

namespace {

using ValueMap = std::unordered_map<const Value*, Value*>;

/// Dynamic shared memory one block may use on sm_90a (227 KB, the opt-in maximum).
constexpr int64_t kSharedBytesPerBlock = ir::kMaxSharedBytes;

/// What a TMA attention loop leaves beside its buffers: barriers, reduction scratch.
constexpr int64_t kTmaLoopSlack = 4096;

bool isTlxAsync(OpCode c) {
  switch (c) {
  case OpCode::AsyncLoad:
  case OpCode::AsyncCommitGroup:
  case OpCode::AsyncWaitGroup:
  case OpCode::AsyncDot:
  case OpCode::AsyncDotWait:
  case OpCode::AsyncTasks:
    return true;
  default:
    return false;
  }
}

/// The integer value of a scalar constant, if `v` is one.
bool constantInt(const Value* v, int64_t& out) {
  if (!v->type().isScalar() || !ir::isInt(v->type().elem)) return false;
  std::optional<int64_t> c = ir::constantInt(v);
  if (!c) return false;
  out = *c;
  return true;
}

/// The shapes the sm_100a rewrite issues as tcgen05.mma (cta_group::1) from the swizzled buffers
/// into a tensor-memory accumulator: fp16 / bf16, or fp8 (e4m3 / e5m2, mixed; not those Triton
/// sends to its MMAv2 path, max_num_imprecise_acc < 32), into fp32. The accumulator takes M of
/// TMEM's 128 lanes (M = 128: row r in lane r; M = 64: the PTX ISA's M = 64 data-path layout)
/// and N of its 512 columns, N a power of two up to 256, the most one instruction takes
/// (wider tiles would need several MMAs per k step: left to mma.sync); tcgen05.ld reads it
/// back by whole warp groups, so num_warps is a multiple of 4. Unlike wgmma, tcgen05.mma reads
/// 8-bit operands MN-major too, so fp8 B needs no transposed copy. Not built yet: tf32 (fp32
/// operands), which stays mma.sync.
bool tcgen05Shaped(const Op& dot, int numWarps) {
  const Type& at = dot.operand(0)->type();
  const Type& bt = dot.operand(1)->type();
  const Type& rt = dot.result()->type();
  if (at.shape.size() != 2 || bt.shape.size() != 2 || rt.shape.size() != 2) return false;
  bool sixteen = (at.elem == DType::F16 || at.elem == DType::BF16) && bt.elem == at.elem;
  bool fp8 = ir::isFp8Dot(at, bt) && !ir::fp8DotAvoidsWgmma(dot);
  if ((!sixteen && !fp8) || rt.elem != DType::F32) return false;
  int64_t M = at.shape[0], K = at.shape[1], N = bt.shape[1];
  return numWarps % 4 == 0 && (M == 128 || M == 64) && N >= 16 && N <= 256 && isPowerOf2(N) &&
         K % (fp8 ? 32 : 16) == 0 && isPowerOf2(K);
}

/// The 2-D transpose `permute(x, (1, 0))` defining `v` in `body` when nothing else reads it.
Op* singleUseTranspose(const Value* v, const Block& body, int uses) {
  Op* def = v->def();
  if (!def || def->code() != OpCode::Permute || def->parentBlock() != &body || uses != 1 ||
      ir::attr::Permute::order(*def) != std::vector<int64_t>{1, 0})
    return nullptr;
  return def;
}

/// One loop that fits the pipelining shape, and what the rewrite needs to know about it.
struct Plan {
  Op* loop = nullptr;
  Op* dot = nullptr;
  Op* loads[2] = {nullptr, nullptr}; // feeding A and B
  unsigned accIter = 0;              // loop-carried index of the accumulator
  /// Loop-carried indices the load addresses depend on (with their yields' dependencies).
  std::vector<unsigned> addressIters;
  /// Body ops computing the load operands and the next values of addressIters.
  std::unordered_set<const Op*> slice;
  int64_t step = 1;
  int stages = 3;
  /// Attention: `dot` is P @ V (loads[1] is V) and scoreDot is Q @ trans(K) (loads[0] is K,
  /// read through kTrans), with Q loop-invariant. Transposed (sm_100a only): scoreDot is
  /// S^T = K @ trans(Q) and `dot` is O^T = trans(V) @ P^T (+ O^T), kTrans then V's transpose.
  Op* scoreDot = nullptr;
  Op* kTrans = nullptr;
  Value* q = nullptr;
  bool transposed = false;
  /// The loads are desc_loads through kernel-parameter (host) descriptors or tensor maps made
  /// before the loop (tmaDescLoad): the copies are TMA loads completing on a barrier per slot
  /// instead of cp.async groups.
  bool tma = false;
  /// TMA (sm_100a): the matmul ring's barriers are allocated before the loop, for each pass of
  /// it, rather than once before the for loops it sits in (a loop nested in a while loop).
  bool tmaRingPerPass = false;
  /// TMA: the index in Pipeliner::tmaRings_ of an earlier loop's buffers this loop reuses,
  /// continuing its slots and phases (-1: new buffers).
  int reuseRing = -1;
  /// B given as the transpose of a loaded [N, K] tile (`tl.load(...).T`): the buffer holds the
  /// tile as loaded and the MMA reads its local_trans, K-major (what fp8 needs).
  Op* bTrans = nullptr;
  /// An fp8 B loaded as [K, N] from K-contiguous memory (tutorial 03's `b.T` operand): the copy
  /// transposes the addresses into an [N, K] buffer, still one vector per run of K, and the MMA
  /// reads its local_trans, K-major.
  bool copyBTransposed = false;
  /// An fp8 dot with max_num_imprecise_acc whose one partial accumulator spans the tile's K
  /// (Triton's promotion; sm_90a): each iteration's MMA sums into a zeroed partial that is then
  /// added into the fp32 accumulator (see rewrite).
  bool promoted = false;
  /// Several dots (analyzeMultiDot): every dot of the body in order, the loop-invariant A
  /// operands stored once before the loop, and the transposes of the two loads that dots read
  /// as B.
  std::vector<Op*> dots;
  std::vector<Value*> invariantA;
  std::vector<Op*> loadTransposes;
  /// Several dots: load i's addresses run along its rows' first dimension (a [D, N] tile of an
  /// [N, D] row-major tensor): the copy transposes the addresses into an [N, D] buffer (one
  /// vector per run of D) and the dots read the transposed view.
  bool copyTransposed[2] = {false, false};
  /// Several dots: the storage-alias ids of the invariant operands' buffers (one per
  /// invariantA, reused ones included) and of the two rings' (ringAlias + i; -1: none).
  std::vector<int64_t> invariantAlias;
  int64_t ringAlias = -1;
};

/// Whether the copy of load `i` of `plan` lands transposed in its buffer.
bool copiesTransposed(const Plan& plan, int i) {
  return (i == 1 && plan.copyBTransposed) || plan.copyTransposed[i];
}

/// Internal switch: whether loops with several dots whose B operands come from two loads
/// (attention's backward pass) are pipelined by analyzeMultiDot / rewriteMultiDot.
constexpr bool kPipelineMultiDotLoops = true;

/// The storage-alias ids (tlx.storage_alias_spec's mechanism, LocalAlloc's `alias`) of the
/// multi-dot rewrite's buffers: invariant operands from kMultiDotAlias, the two rings at
/// kMultiDotAlias + kMultiDotRings (+ 1); far from the small ids TLX kernels number theirs with.
constexpr int64_t kMultiDotAlias = int64_t(1) << 30;
constexpr int64_t kMultiDotRings = 1024;
/// The storage-alias id of the tensor memory of the tcgen05 rewrites: one region, each loop's
/// tiles at their own columns, loops in the two branches of an if over the same ones.
constexpr int64_t kPipelineTmemAlias = kMultiDotAlias + 2 * kMultiDotRings;

/// TLX's Blackwell ops: a kernel that uses tensor memory or tcgen05 itself places its own
/// accumulators (and may need all 512 columns).
bool isTlxTensorMemory(const Op& op) {
  switch (op.code()) {
  case OpCode::Tcgen05Mma:
  case OpCode::Tcgen05Commit:
  case OpCode::TmemCopy:
    return true;
  case OpCode::LocalAlloc:
    return op.result()->type().space == ir::MemorySpace::Tmem;
  default:
    return false;
  }
}

/// Tensor-memory columns of a CTA (128 lanes x 512 columns of 32 bits).
constexpr int64_t kTensorMemoryColumns = 512;

/// What the rewritten loops of a kernel hold of a per-CTA resource (shared-memory bytes, tensor-
/// memory columns), by the block each loop is in. Loops in the two branches of one `if` never run
/// together (ir::exclusiveBranches; the layout pass lets their buffers share bytes), so a new
/// loop competes only with what the loops it can run beside hold at once.
class BranchLedger {
public:
  explicit BranchLedger(const ir::ThreadUniformity& uniformity) : uniformity_(uniformity) {}

  /// The most that entries which can be live beside a loop in `at` hold at once: summed, but
  /// for those in different branches of one `if`, of which the larger counts.
  int64_t heldBeside(const Block* at) const {
    std::vector<std::pair<std::vector<const Block*>, int64_t>> live; // if-branch path, size
    for (const Entry& e : entries_)
      if (!ir::exclusiveBranches(e.block, at, uniformity_))
        live.push_back({branchPath(e.block), e.size});
    return peak(live, 0);
  }
  /// The lowest offset (a multiple of `align`) where `size` units overlap no entry that can be
  /// live beside a loop in `at`.
  int64_t firstFit(const Block* at, int64_t size, int64_t align) const {
    std::vector<std::pair<int64_t, int64_t>> busy;
    for (const Entry& e : entries_)
      if (!ir::exclusiveBranches(e.block, at, uniformity_))
        busy.emplace_back(e.offset, e.offset + e.size);
    return firstFitOffset(std::move(busy), size, align);
  }
  void add(const Block* at, int64_t size, int64_t offset = 0) {
    entries_.push_back({at, offset, size});
  }

private:
  struct Entry {
    const Block* block;
    int64_t offset, size;
  };
  /// The branches of uniform ifs `block` lies in, outermost first.
  std::vector<const Block*> branchPath(const Block* block) const {
    std::vector<const Block*> path;
    for (const Block* b = block; b && b->parentOp(); b = b->parentOp()->parentBlock())
      if (b->parentOp()->code() == OpCode::If && uniformity_.uniform(b->parentOp()->operand(0)))
        path.push_back(b);
    std::reverse(path.begin(), path.end());
    return path;
  }
  /// Entries at `depth` branches add up; deeper ones, by the if of their next branch, take
  /// the larger of that if's branches.
  static int64_t peak(const std::vector<std::pair<std::vector<const Block*>, int64_t>>& es,
                      size_t depth) {
    int64_t sum = 0;
    std::vector<const Op*> ifs;
    for (const auto& [path, size] : es) {
      if (path.size() == depth)
        sum += size;
      else if (std::find(ifs.begin(), ifs.end(), path[depth]->parentOp()) == ifs.end())
        ifs.push_back(path[depth]->parentOp());
    }
    for (const Op* op : ifs) {
      int64_t most = 0;
      for (unsigned r = 0; r < op->numRegions(); ++r) {
        std::vector<std::pair<std::vector<const Block*>, int64_t>> in;
        for (const auto& e : es)
          if (e.first.size() > depth && e.first[depth] == op->region(r)) in.push_back(e);
        most = std::max(most, peak(in, depth + 1));
      }
      sum += most;
    }
    return sum;
  }

  const ir::ThreadUniformity& uniformity_;
  std::vector<Entry> entries_;
};

class Pipeliner {
public:
  Pipeliner(ir::Function& fn, bool tensorMemory, PipelineBudget& budget)
      : fn_(fn), budget_(budget), uniformity_(fn.body), shared_(uniformity_), tmem_(uniformity_),
        tcgen05_(tensorMemory) {}

  int run() {
    bool hasTlxAsync = false;
    walk(fn_.body, [&](Op& op) {
      hasTlxAsync |= isTlxAsync(op.code()) || (tcgen05_ && isTlxTensorMemory(op));
    });
    // A kernel that already schedules its own cp.async groups or wgmmas counts them itself.
    if (hasTlxAsync) return 0;
    std::vector<Op*> loops;
    walk(fn_.body, [&](Op& op) {
      if (op.code() == OpCode::For) loops.push_back(&op);
    });
    int rewritten = 0;
    bool lowered = false;
    for (Op* loop : loops) {
      bool done = pipeline(*loop);
      // A dot loop the rewrites do not take as it is (its TMA form, say: nested in a while
      // loop, a tl.load beside a desc.load, attention's backward pass) gets its loads through
      // descriptors made in the kernel as pointer loads, as sm_80 does, and is tried again
      // with cp.async copies. (Not on sm_100a, whose TMA rewrite takes loops in while loops
      // too: a loop it does not take keeps its TMA loads and its dot stays mma.sync.)
      if (!done && !tcgen05_ && lowerDescLoadsOfDotLoop(*loop)) {
        lowered = true;
        axisInfo_.reset(); // the pointer loads are new values
        done = pipeline(*loop);
      }
      if (done) {
        ++rewritten;
        axisInfo_.reset(); // the rewrite made and erased values
      }
    }
    // Descriptors whose every access became pointer loads write no tensor map.
    if (lowered) eliminateDeadCode(fn_);
    return rewritten;
  }

private:
  /// Rewrites `loop` by the first plan that takes it; false when none does.
  bool pipeline(Op& loop) {
    countUses();
    // sm_100a's tcgen05 rewrites, sm_90a's wgmma ones (the multi-dot form on sm_90a only).
    Plan plan;
    if (analyze(loop, plan)) {
      tcgen05_ ? rewriteTcgen05(plan) : rewrite(plan);
      return true;
    }
    Plan attention;
    if (analyzeAttention(loop, attention)) {
      tcgen05_ ? rewriteAttentionTcgen05(attention) : rewriteAttention(attention);
      return true;
    }
    Plan multi;
    if (tcgen05_ || !analyzeMultiDot(loop, multi)) return false;
    rewriteMultiDot(multi);
    return true;
  }

  /// Rewrites the desc_loads of `loop`'s body through descriptors made in the kernel into
  /// pointer loads when the body holds a dot; whether it rewrote any.
  bool lowerDescLoadsOfDotLoop(Op& loop) {
    Block& body = *loop.region(0);
    bool hasDot = false;
    std::vector<Op*> loads;
    for (auto& op : body.ops()) {
      hasDot |= op->code() == OpCode::Dot;
      const Op* make = op->code() == OpCode::DescLoad ? op->operand(0)->def() : nullptr;
      if (make && make->code() == OpCode::MakeDescriptor) loads.push_back(op.get());
    }
    if (!hasDot) return false;
    for (Op* load : loads) lowerDeviceDescriptorAccess(fn_, *load);
    return !loads.empty();
  }

  void countUses() {
    uses_.clear();
    walk(fn_.body, [&](Op& op) {
      for (Value* v : op.operands()) ++uses_[v];
    });
  }
  int usesOf(const Value* v) const {
    auto it = uses_.find(v);
    return it == uses_.end() ? 0 : it->second;
  }

  // ---------------------------------------------------------------------------------------------
  // analysis
  // ---------------------------------------------------------------------------------------------

  bool analyze(Op& loop, Plan& plan) {
    if (!analyzeLoopHeader(loop, plan)) return false; // num_stages=1 asks for no pipelining
    Block& body = *loop.region(0);
    Op* yield = body.terminator();

    Op* dot = nullptr;
    for (auto& op : body.ops()) {
      if (op->code() == OpCode::Dot) {
        if (dot) return false; // one dot per loop
        dot = op.get();
      }
    }
    if (!dot ||
        !(tcgen05_ ? tcgen05Shaped(*dot, fn_.numWarps) : wgmmaShaped(*dot, fn_.numWarps, true)))
      return false;
    plan.promoted = !tcgen05_ && ir::fp8PartialAccumulatorSpan(*dot) != 0;
    // The accumulators of a kernel's tcgen05 loops each keep their columns of tensor memory
    // (one allocation for the kernel); past 512 columns a dot stays mma.sync.
    const int64_t accColumns = tmemColumns(dot->result()->type().shape[1]);
    if (tcgen05_ && tmemOffset(loop, accColumns) + accColumns > kTensorMemoryColumns) return false;
    plan.dot = dot;

    // The accumulator: a loop-carried value that only the dot reads and that the dot's result
    // (read by nothing else) replaces. (`acc += tl.dot(a, b)` arrives here as tl.dot(a, b, acc):
    // combine-dot-add runs first.)
    Value* acc = dot->operand(2);
    Value* next = dot->result();
    if (usesOf(dot->result()) != 1) return false;
    if (acc->ownerBlock() != &body || acc->index() == 0 || usesOf(acc) != 1) return false;
    plan.accIter = acc->index() - 1;
    if (yield->operand(plan.accIter) != next) return false;

    plan.bTrans = singleUseTranspose(dot->operand(1), body, usesOf(dot->operand(1)));
    // wgmma reads 8-bit operands K-major only: fp8 / int8 B must be the transpose of an [N, K]
    // load, or a [K, N] load whose addresses run along K (copied transposed). tcgen05.mma reads
    // them either way, and takes the transposed copy only for its vector copies.
    if (ir::isMmaEightBit(dot->operand(1)->type().elem) && !plan.bTrans) {
      const Op* load = dot->operand(1)->def();
      bool pointers = load && load->code() == OpCode::Load;
      if (!pointers && !tcgen05_) return false;
      if (pointers) {
        if (!axisInfo_) axisInfo_.emplace(fn_);
        // At least 4 bytes (a cp.async) consecutive along K.
        bool alongK = axisInfo_->get(load->operand(0)).contiguity.at(0) >= 4;
        if (!alongK && !tcgen05_) return false;
        plan.copyBTransposed = alongK;
      }
    }
    for (int i = 0; i < 2; ++i) {
      Value* v = i == 1 && plan.bTrans ? plan.bTrans->operand(0) : dot->operand(i);
      Op* load = v->def();
      if (!load || (load->code() != OpCode::Load && !tmaDescLoad(*load, body)) ||
          load->parentBlock() != &body || usesOf(load->result()) != 1)
        return false;
      plan.loads[i] = load;
    }
    // Both tl.loads (cp.async) or both TMA descriptor loads (TMA, the tiles landing
    // on one barrier per slot). A TMA loop nested in loops carries its ring's slot and phase
    // through them (its barriers live across the outer iterations), which only for loops do.
    plan.tma = plan.loads[0]->code() == OpCode::DescLoad;
    if (plan.loads[1]->code() != plan.loads[0]->code()) return false;
    if (plan.tma && !enclosedByForLoopsOnly(*loop.parentBlock())) {
      // sm_100a: the ring's barriers are initialized again before each pass of the loop
      // instead (rewriteTcgen05 meets the CTA first; every copy a pass issued has landed by its
      // end, those past the end being predicated off).
      if (!tcgen05_) return false;
      plan.tmaRingPerPass = true;
    }
    if (!analyzeAddresses(body, plan, static_cast<int>(plan.accIter))) return false;

    // Fewer stages (down to two) where the buffers would not fit. A loop that computes nothing
    // but its copies' addresses and the dot leaves the stages' bytes to the epilogue after it
    // (the layout pass puts the scratch of the M x N result's conversion or descriptor store
    // over them, dead by then); another keeps room beside them for a 16-bit M x N conversion.
    const Type& at = dot->operand(0)->type();
    int64_t M = at.shape[0], K = at.shape[1], N = dot->operand(1)->type().shape[1];
    int64_t stageBytes = (M * K + K * N) * ir::byteWidth(at.elem);
    int64_t budget = kSharedBytesPerBlock - kTmaLoopSlack - sharedUsedBeside(loop);
    // (sm_100a keeps the room in every case: the layout pass does not yet place the epilogue
    // of a tcgen05 loop over its dead stages, and a dot left mma.sync compiles.)
    if (!onlyPipelinedOps(body, plan) || tcgen05_) budget -= M * N * 2;
    while (plan.stages > 2 && plan.stages * stageBytes > budget) --plan.stages;
    return plan.stages * stageBytes <= budget;
  }

  /// Whether the two loads of `plan` can become copies issued iterations ahead: zero-filled,
  /// with addresses computed from the induction variable, loop invariants and carried values
  /// (not `excludedIter`) whose recurrence closes and that nothing else reads.
  bool analyzeAddresses(Block& body, Plan& plan, int excludedIter) {
    const Op* yield = body.terminator();
    for (Op* load : plan.loads) {
      if (load->code() == OpCode::DescLoad) {
        for (unsigned i = 1; i < load->numOperands(); ++i)
          if (!addToSlice(body, load->operand(i), plan)) return false;
        continue;
      }
      if (ir::attr::Load::isVolatile(*load)) return false;
      bool hasMask = ir::attr::Load::hasMask(*load), hasOther = ir::attr::Load::hasOther(*load);
      if (hasOther && !ir::isPositiveZeroConstant(load->operand(hasMask ? 2 : 1))) return false;
      if (!load->operand(0)->type().isTensor()) return false;
      if (!addToSlice(body, load->operand(0), plan)) return false;
      if (hasMask && !addToSlice(body, load->operand(1), plan)) return false;
    }
    // The address recurrence must close: the next values of the carried addresses depend only
    // on carried addresses, the induction variable and loop invariants.
    for (size_t k = 0; k < plan.addressIters.size(); ++k) {
      unsigned iter = plan.addressIters[k];
      if (static_cast<int>(iter) == excludedIter) return false;
      if (!addToSlice(body, yield->operand(iter), plan)) return false;
    }
    return addressesOnlyFeedLoads(body, plan);
  }

  /// Whether `body` holds only what the rewrite replaces or keeps to compute the copies'
  /// addresses: elementwise and shape ops, which need no scratch memory.
  bool onlyPipelinedOps(const Block& body, const Plan& plan) const {
    for (const auto& op : body.ops()) {
      const Op* o = op.get();
      if (o == plan.dot || o == plan.loads[0] || o == plan.loads[1] || o == plan.bTrans ||
          o == body.terminator())
        continue;
      if (!plan.slice.count(o)) return false;
      switch (o->code()) {
      case OpCode::Constant:
      case OpCode::Arange:
      case OpCode::Splat:
      case OpCode::Broadcast:
      case OpCode::ExpandDims:
      case OpCode::MultipleOf:
      case OpCode::MaxContiguous:
        break;
      default:
        if (!ir::isElementwise(o->code())) return false;
      }
    }
    return true;
  }

  /// The common loop header checks: a constant positive step, an integer induction variable,
  /// num_stages > 1.
  bool analyzeLoopHeader(Op& loop, Plan& plan) {
    Block& body = *loop.region(0);
    Op* yield = body.terminator();
    if (!yield || yield->code() != OpCode::Yield) return false;
    int64_t step = 0;
    if (!constantInt(loop.operand(2), step) || step <= 0) return false;
    const Type& ivType = body.arg(0)->type();
    if (!ivType.isScalar() || !ir::isInt(ivType.elem) || !(loop.operand(0)->type() == ivType) ||
        !(loop.operand(1)->type() == ivType))
      return false;
    int64_t stages =
        loop.hasAttr(ir::attr::For::knumStages) ? ir::attr::For::numStages(loop) : fn_.numStages;
    if (stages <= 1) return false;
    plan.loop = &loop;
    plan.step = step;
    plan.stages = static_cast<int>(std::max<int64_t>(stages, 2));
    return true;
  }

  /// Attention's loop (FlashAttention-2 as in kernels/attention.py): two dots,
  /// `s = tl.dot(q, tl.trans(k))` with q loop-invariant and k a tl.load of this iteration, and
  /// later `o = tl.dot(p, v, o_in)` with p computed in registers and v a tl.load.
  bool analyzeAttention(Op& loop, Plan& plan) {
    if (!analyzeLoopHeader(loop, plan)) return false;
    plan.stages = std::max(plan.stages, 3);
    Block& body = *loop.region(0);
    std::vector<Op*> dots;
    for (auto& op : body.ops())
      if (op->code() == OpCode::Dot) dots.push_back(op.get());
    if (dots.size() != 2) return false;
    Op* scores = dots[0];
    Op* pv = dots[1];
    // fp16 accumulators are taken by the one-dot form only (not built here yet).
    auto shaped = [&](const Op& dot) {
      if (ir::isHalfAccumulateDot(dot.operand(0)->type(), dot.operand(1)->type(),
                                  dot.result()->type()))
        return false;
      return tcgen05_ ? tcgen05Shaped(dot, fn_.numWarps) : wgmmaShaped(dot, fn_.numWarps);
    };
    if (!shaped(*scores) || !shaped(*pv)) return false;
    if (!ir::isPositiveZeroConstant(scores->operand(2))) return false;
    Op* kLoad = nullptr;
    Op* vLoad = nullptr;
    if (Op* trans = singleUseTranspose(scores->operand(1), body, usesOf(scores->operand(1)));
        trans && invariantIn(scores->operand(0), body)) {
      // S = Q K^T: Q from outside the loop, K^T a transpose of this iteration's [N, D] load.
      plan.q = scores->operand(0);
      plan.kTrans = trans;
      kLoad = trans->operand(0)->def();
      // V as loaded ([N, D]) or, K-major as fp8 needs, the transpose of a [D, N] load.
      plan.bTrans = singleUseTranspose(pv->operand(1), body, usesOf(pv->operand(1)));
      if (ir::isMmaEightBit(pv->operand(1)->type().elem) && !plan.bTrans) return false;
      vLoad = (plan.bTrans ? plan.bTrans->operand(0) : pv->operand(1))->def();
      // P from registers (not a load this pass would move).
      if (!pv->operand(0)->type().isTensor()) return false;
    } else if (!tcgen05_ || !matchTransposedAttention(body, *scores, *pv, plan, kLoad, vLoad)) {
      return false;
    }
    Value* q = plan.q;
    if (!q->type().isTensor()) return false;
    for (Op* load : {kLoad, vLoad})
      if (!load || (load->code() != OpCode::Load && !tmaDescLoad(*load, body)) ||
          load->parentBlock() != &body || usesOf(load->result()) != 1)
        return false;
    // Both tl.loads (cp.async) or both TMA descriptor loads (TMA, in a loop that runs once
    // per kernel: its barriers' phases start at 0).
    plan.tma = kLoad->code() == OpCode::DescLoad;
    if (vLoad->code() != kLoad->code()) return false;
    if (plan.tma && nestedInLoop(*loop.parentBlock())) return false;
    plan.dot = pv;
    plan.scoreDot = scores;
    plan.loads[0] = kLoad;
    plan.loads[1] = vLoad;
    if (tcgen05_ && !analyzeAttentionTcgen05(body, plan)) return false;
    // K and V stages beside Q's buffer and the epilogue's 16-bit conversion of the output. The
    // layout pass places the scratch region above every buffer live where it is used, so the
    // conversion lies over the dead stages unless the loop itself uses scratch (sm_100a: the
    // loop's elementwise work between the two MMAs, TLX cross-attention's SiLU form, uses none).
    const Type& kt = kLoad->result()->type();
    const Type& qt = q->type();
    int64_t bytes = ir::byteWidth(kt.elem);
    int64_t stageBytes = 2 * kt.shape[0] * kt.shape[1] * bytes;
    int64_t budget = kSharedBytesPerBlock - qt.shape[0] * qt.shape[1] * (bytes + 2);
    // Only to take a loop at its fewest stages, never for more of them: where the loop uses no
    // scratch, that room is over the dead stages.
    const int64_t epilogueRoom = tcgen05_ && budget_.roomOverDeadStages && !loopMayUseScratch(plan)
                                     ? qt.shape[0] * qt.shape[1] * 2
                                     : 0;
    // The transposed form's P^T, the second MMA's B, in shared memory (B cannot come from
    // tensor memory).
    if (plan.transposed) budget -= pBytes(plan);
    // TMA loops also leave room for the buffers earlier TMA loops took (Q's included, which a
    // loop with the same Q reuses), going down to two slots (one copy ahead) where needed: the
    // second loop of causal attention.
    for (size_t r = 0; plan.tma && r < tmaRings_.size(); ++r)
      if (tmaRings_[r].outer == loop.parentBlock() &&
          tmaRings_[r].types[0] == kLoad->result()->type() &&
          tmaRings_[r].types[1] == vLoad->result()->type()) {
        plan.reuseRing = static_cast<int>(r);
        plan.stages = tmaRings_[r].stages;
        return analyzeAddresses(body, plan, -1);
      }
    int minStages = 3;
    if (plan.tma) {
      minStages = 2;
      budget -= sharedUsedBeside(loop) + kTmaLoopSlack;
      if (tmaQViews_.count(q)) budget += qt.shape[0] * qt.shape[1] * bytes;
    }
    while (plan.stages > minStages && plan.stages * stageBytes > budget) --plan.stages;
    if (plan.stages * stageBytes > budget + epilogueRoom) return false;
    if (!analyzeAddresses(body, plan, -1)) return false;
    budget_.usedRoomOverDeadStages |= plan.stages * stageBytes > budget;
    return true;
  }

  /// Whether `v` is computed outside `body` (before the loop).
  static bool invariantIn(const Value* v, const Block& body) {
    return v->isBlockArg() ? v->ownerBlock() != &body : !definedInside(v->def(), body);
  }

  /// The transposed attention loop (sm_100a): `s_t = tl.dot(k, tl.trans(q))` ([N, M]) with q
  /// loop-invariant and k this iteration's [N, D] load, then `o_t = tl.dot(tl.trans(v), p_t,
  /// o_t)` ([D, M]) with v this iteration's [N, D] load and p_t computed in registers (the
  /// TRANS form of TLX's cross-attention reference kernel). K and V are then the MMAs' A
  /// operands, Q^T the first one's B (a view of Q's buffer) and P^T the second one's, stored to
  /// shared memory.
  bool matchTransposedAttention(const Block& body, const Op& scores, const Op& pv, Plan& plan,
                                Op*& kLoad, Op*& vLoad) {
    const Op* qT = scores.operand(1)->def();
    if (!qT || qT->code() != OpCode::Permute ||
        ir::attr::Permute::order(*qT) != std::vector<int64_t>{1, 0} ||
        !invariantIn(qT->operand(0), body))
      return false;
    Op* vT = singleUseTranspose(pv.operand(0), body, usesOf(pv.operand(0)));
    if (!vT || !pv.operand(1)->type().isTensor()) return false;
    DType e = pv.operand(1)->type().elem;
    if (e != DType::F16 && e != DType::BF16) return false;
    plan.q = qT->operand(0);
    plan.kTrans = vT;
    plan.transposed = true;
    kLoad = scores.operand(0)->def();
    vLoad = vT->operand(0)->def();
    return true;
  }

  /// Whether an sm_100a attention loop may use the scratch region once rewritten: anything but
  /// its K and V loads (copies now), dots, the transposes the MMAs read through shared-memory
  /// views, and elementwise work whose operands need no layout conversion (the row-per-thread
  /// layout of tcgen05.ld takes the aranges and broadcasts of masks as they are). A reduction
  /// may cross threads, a shape change or another load may convert.
  bool loopMayUseScratch(const Plan& plan) const {
    const Block& body = *plan.loop->region(0);
    for (const auto& op : body.ops()) {
      switch (op->code()) {
      case OpCode::Load:
      case OpCode::DescLoad:
        if (op.get() == plan.loads[0] || op.get() == plan.loads[1]) continue;
        return true;
      case OpCode::Dot:
      case OpCode::Constant:
      case OpCode::Arange:
      case OpCode::Splat:
      case OpCode::Broadcast:
      case OpCode::ExpandDims:
      case OpCode::Yield:
      case OpCode::InlineAsm: // per element, in registers (TLX's tanh_approx_fp32)
        continue;
      case OpCode::Permute: // a dot operand's transpose: read through a view of its buffer
        if (op.get() == plan.kTrans || op.get() == plan.bTrans ||
            op->result() == plan.scoreDot->operand(1))
          continue;
        return true;
      default:
        if (ir::isElementwise(op->code()) && op->numRegions() == 0) continue;
        return true;
      }
    }
    return false;
  }

  /// Bytes of P's tile (the P V dot's register operand).
  static int64_t pBytes(const Plan& plan) {
    const Type& t = plan.dot->operand(plan.transposed ? 1 : 0)->type();
    return t.shape[0] * t.shape[1] * ir::byteWidth(t.elem);
  }

  /// Tensor-memory columns a [rows, n] fp32 accumulator takes (tcgen05.alloc grants powers of
  /// two, 32 at least).
  static int64_t tmemColumns(int64_t n) {
    return std::max<int64_t>(32, int64_t(std::bit_ceil(uint64_t(n))));
  }

  /// sm_100a's conditions on an attention loop (rewriteAttentionTcgen05): O is carried in the
  /// loop and only the P V dot's result replaces it; the loop reads O (the softmax's rescale)
  /// only after S's dot; S and O fit in the tensor memory the kernel's other tcgen05 loops left.
  bool analyzeAttentionTcgen05(const Block& body, Plan& plan) {
    const Op* yield = body.terminator();
    const Op* pv = plan.dot;
    if (usesOf(pv->result()) != 1) return false;
    int iter = -1;
    for (unsigned i = 0; i < yield->numOperands(); ++i)
      if (yield->operand(i) == pv->result()) iter = static_cast<int>(i);
    if (iter < 0) return false;
    plan.accIter = static_cast<unsigned>(iter);
    const Value* o = body.arg(plan.accIter + 1);
    const size_t scoreAt = ir::positionOf(body, plan.scoreDot);
    for (size_t i = 0; i < scoreAt; ++i)
      if (reads(*body.ops()[i], o)) return false;
    // The O chain (o * alpha) and P stay elementwise register work: their operands are values.
    if (!pv->operand(2)->type().isTensor()) return false;
    if (reusableAttentionTmem(plan) >= 0) return true;
    const Type& pt = pv->operand(0)->type();
    const int64_t pColumns =
        plan.transposed ? 0 : tmemColumns(pt.shape[1] * ir::byteWidth(pt.elem) / 4);
    const int64_t columns = tmemColumns(plan.scoreDot->result()->type().shape[1]) +
                            tmemColumns(pv->result()->type().shape[1]) + pColumns;
    return tmemOffset(*plan.loop, columns) + columns <= kTensorMemoryColumns;
  }

  /// The index in attentionTmem_ of an attention loop rewritten before (rewriteAttentionTcgen05)
  /// whose tensor memory `plan`'s loop can take over, -1 if none: one of the same block with
  /// the same S, P and O tiles (the two loops of causal attention, which run one after the
  /// other: every thread's last tcgen05.ld of the first precedes its own first tcgen05.st in
  /// the second, and the second's first MMA follows a CTA barrier).
  int reusableAttentionTmem(const Plan& plan) const {
    for (size_t i = 0; i < attentionTmem_.size(); ++i) {
      const AttentionTmem& t = attentionTmem_[i];
      if (t.outer == plan.loop->parentBlock() && t.transposed == plan.transposed &&
          t.s == plan.scoreDot->result()->type() &&
          t.p == plan.dot->operand(plan.transposed ? 1 : 0)->type() &&
          t.o == plan.dot->result()->type())
        return static_cast<int>(i);
    }
    return -1;
  }

  /// A loop with several 16-bit dots (attention's backward pass: dK / dV and dQ loops) whose B
  /// operands are two tl.loads of the iteration, read as loaded or through their transposes:
  /// the loads become copies S - 1 iterations ahead as in `analyze`, the A operands computed
  /// before the loop are stored once into buffers of their own, and each dot becomes an async
  /// wgmma retired in place. A operands computed in the loop (not loaded) stay in registers.
  bool analyzeMultiDot(Op& loop, Plan& plan) {
    if (!kPipelineMultiDotLoops || !analyzeLoopHeader(loop, plan)) return false;
    Block& body = *loop.region(0);
    if (nestedInLoop(*loop.parentBlock())) return false;
    for (auto& op : body.ops())
      if (op->code() == OpCode::Dot) plan.dots.push_back(op.get());
    if (plan.dots.empty()) return false;
    std::vector<Op*> loads;
    for (Op* dot : plan.dots) {
      DType e = dot->operand(0)->type().elem;
      if ((e != DType::F16 && e != DType::BF16) || !wgmmaShaped(*dot, fn_.numWarps)) return false;
      // fp16 accumulators are taken by the one-dot form only (not built here yet).
      if (ir::isHalfAccumulateDot(dot->operand(0)->type(), dot->operand(1)->type(),
                                  dot->result()->type()))
        return false;
      if (ir::attr::Dot::maxNumImpreciseAcc(*dot) != 0) return false;
      Value* a = dot->operand(0);
      // An A loaded in the loop would want copies of its own (not done: such loops stay as
      // they are).
      const Op* aDef = a->def();
      if (aDef && aDef->parentBlock() == &body &&
          (aDef->code() == OpCode::Load || aDef->code() == OpCode::DescLoad))
        return false;
      if (invariantIn(a, body) &&
          std::find(plan.invariantA.begin(), plan.invariantA.end(), a) == plan.invariantA.end())
        plan.invariantA.push_back(a);
      Op* def = dot->operand(1)->def();
      if (def && def->code() == OpCode::Permute && def->parentBlock() == &body &&
          ir::attr::Permute::order(*def) == std::vector<int64_t>{1, 0}) {
        if (std::find(plan.loadTransposes.begin(), plan.loadTransposes.end(), def) ==
            plan.loadTransposes.end())
          plan.loadTransposes.push_back(def);
        def = def->operand(0)->def();
      }
      if (!def || def->code() != OpCode::Load || def->parentBlock() != &body) return false;
      if (std::find(loads.begin(), loads.end(), def) == loads.end()) loads.push_back(def);
    }
    if (loads.size() != 2) return false;
    // Each load is read only as dots' B operands, directly or through transposes that only
    // dots read as B.
    auto bUses = [&](const Value* v) {
      int n = 0;
      for (Op* dot : plan.dots) {
        if (dot->operand(0) == v || dot->operand(2) == v) return -1;
        n += dot->operand(1) == v;
      }
      return n;
    };
    for (Op* t : plan.loadTransposes)
      if (bUses(t->result()) != usesOf(t->result())) return false;
    for (Op* load : loads) {
      int n = bUses(load->result());
      for (Op* t : plan.loadTransposes) n += t->operand(0) == load->result();
      if (n != usesOf(load->result())) return false;
    }
    plan.loads[0] = loads[0];
    plan.loads[1] = loads[1];
    plan.dot = plan.dots.front();
    // A tile whose addresses are consecutive down its columns only (`qT` loaded as [D, M]
    // from [M, D] memory) is copied transposed, a vector per run of the columns, rather than
    // an element at a time.
    for (int i = 0; i < 2; ++i) {
      if (!axisInfo_) axisInfo_.emplace(fn_);
      const std::vector<int64_t>& contiguity = axisInfo_->get(loads[i]->operand(0)).contiguity;
      int64_t vector = 16 / ir::byteWidth(loads[i]->result()->type().elem);
      plan.copyTransposed[i] =
          contiguity.size() == 2 && contiguity[1] < vector && contiguity[0] >= vector;
    }
    // The stages beside the invariant operands' buffers and room for a 16-bit conversion of
    // the largest dot result.
    int64_t largest = 0;
    for (Op* dot : plan.dots) {
      const Type& t = dot->result()->type();
      largest = std::max(largest, t.shape[0] * t.shape[1] * 2);
    }
    // The buffers of the block's multi-dot loops share storage by role (each invariant
    // operand's slot, each ring), the loops running one after another: what this loop adds is
    // what its buffers need beyond the regions' sizes so far.
    Block& outer = *loop.parentBlock();
    int64_t invariantGrowth = 0;
    for (Value* a : plan.invariantA) {
      int64_t id = -1;
      if (const StagedInvariant* done = stagedIn(a, outer)) id = done->alias;
      plan.invariantAlias.push_back(id);
    }
    for (size_t j = 0; j < plan.invariantA.size(); ++j) {
      if (plan.invariantAlias[j] >= 0) continue;
      int64_t id = kMultiDotAlias;
      while (std::find(plan.invariantAlias.begin(), plan.invariantAlias.end(), id) !=
             plan.invariantAlias.end())
        ++id;
      plan.invariantAlias[j] = id;
      const Type& t = plan.invariantA[j]->type();
      invariantGrowth += aliasGrowth(id, t.shape[0] * t.shape[1] * ir::byteWidth(t.elem));
    }
    plan.ringAlias = kMultiDotAlias + kMultiDotRings;
    auto ringGrowth = [&](int stages) {
      int64_t grown = 0;
      for (int i = 0; i < 2; ++i) {
        const Type& t = loads[i]->result()->type();
        grown += aliasGrowth(plan.ringAlias + i,
                             stages * t.shape[0] * t.shape[1] * ir::byteWidth(t.elem));
      }
      return grown;
    };
    int64_t budget =
        kSharedBytesPerBlock - kTmaLoopSlack - sharedUsedBeside(loop) - invariantGrowth - largest;
    while (plan.stages > 2 && ringGrowth(plan.stages) > budget) --plan.stages;
    if (ringGrowth(plan.stages) > budget) return false;
    return analyzeAddresses(body, plan, -1);
  }

  /// Adds the body ops `v` is computed from to the slice; false when one of them is not a pure
  /// op (a load, a dot) or holds regions.
  bool addToSlice(Block& body, Value* v, Plan& plan) {
    if (v->isBlockArg()) {
      if (v->ownerBlock() != &body || v->index() == 0) return true;
      unsigned iter = v->index() - 1;
      if (std::find(plan.addressIters.begin(), plan.addressIters.end(), iter) ==
          plan.addressIters.end())
        plan.addressIters.push_back(iter);
      return true;
    }
    Op* def = v->def();
    if (def->parentBlock() != &body) return !definedInside(def, body);
    if (plan.slice.count(def)) return true;
    if (!isPure(*def) || def->numRegions() != 0 || def->code() == OpCode::Dot) return false;
    plan.slice.insert(def);
    for (Value* o : def->operands())
      if (!addToSlice(body, o, plan)) return false;
    return true;
  }

  /// True when `op` sits in a region nested in `body`.
  static bool definedInside(const Op* op, const Block& body) {
    for (const Block* b = op->parentBlock(); b;
         b = b->parentOp() ? b->parentOp()->parentBlock() : nullptr)
      if (b == &body) return true;
    return false;
  }

  /// Whether `load` is a 2-D desc_load that loop `body` may issue as TMA copies ahead of time:
  /// through a descriptor the kernel takes as a parameter (a host tensor map) or one made in
  /// the kernel before the loop that can be a tensor map (written once for all the copies;
  /// lowerDeviceDescriptors keeps those, as it rewrites the others into pointer loads).
  bool tmaDescLoad(const Op& load, const Block& body) const {
    if (load.code() != OpCode::DescLoad) return false;
    const Value* d = load.operand(0);
    if (d->type().shape.size() != 2) return false;
    if (d->isBlockArg()) return d->ownerBlock() == &fn_.body;
    const Op* make = d->def();
    return make->code() == OpCode::MakeDescriptor && !definedInside(make, body) &&
           ir::tensorMapProblem(*make).empty();
  }

  /// The rotated address values (those carried and everything computed from them) change
  /// meaning: only the slice, the two loads and the yield of the addresses may read them, and
  /// the loop's results for them must be unused.
  bool addressesOnlyFeedLoads(Block& body, const Plan& plan) {
    std::unordered_set<const Value*> rotated;
    for (unsigned iter : plan.addressIters) {
      rotated.insert(body.arg(iter + 1));
      if (usesOf(plan.loop->result(iter)) != 0) return false;
    }
    for (auto& op : body.ops())
      if (plan.slice.count(op.get()))
        for (Value* o : op->operands())
          if (rotated.count(o))
            for (unsigned r = 0; r < op->numResults(); ++r) rotated.insert(op->result(r));
    const Op* yield = body.terminator();
    bool ok = true;
    walk(body, [&](Op& op) {
      if (plan.slice.count(&op) || &op == plan.loads[0] || &op == plan.loads[1]) return;
      for (unsigned i = 0; i < op.numOperands(); ++i) {
        if (!rotated.count(op.operand(i))) continue;
        bool addressYield =
            &op == yield && std::find(plan.addressIters.begin(), plan.addressIters.end(), i) !=
                                plan.addressIters.end();
        if (!addressYield) ok = false;
      }
    });
    return ok;
  }

  // ---------------------------------------------------------------------------------------------
  // rewrite
  // ---------------------------------------------------------------------------------------------

  /// Clones the slice (in body order) with `map` giving the induction variable and the carried
  /// addresses; the map receives every cloned result.
  void cloneSlice(ir::Builder& b, const Plan& plan, ValueMap& map) {
    Block& body = *plan.loop->region(0);
    for (auto& op : body.ops()) {
      if (!plan.slice.count(op.get())) continue;
      std::vector<Value*> operands;
      for (Value* o : op->operands()) {
        auto it = map.find(o);
        operands.push_back(it == map.end() ? o : it->second);
      }
      std::vector<Type> types;
      for (const auto& r : op->results()) types.push_back(r->type());
      b.setLoc(op->loc());
      Op* copy = b.create(op->code(), operands, types, op->attrs());
      for (unsigned r = 0; r < op->numResults(); ++r) {
        copy->result(r)->name = op->result(r)->name;
        map[op->result(r)] = copy->result(r);
      }
    }
  }

  static Value* mapped(const ValueMap& map, Value* v) {
    auto it = map.find(v);
    return it == map.end() ? v : it->second;
  }

  /// Starts the copies of one iteration's A and B tiles into `slot`, masked off unless
  /// `inRange` holds; the map holds that iteration's cloned address values.
  void issueLoads(ir::Builder& b, const Plan& plan, const ValueMap& map, Value* inRange,
                  Value* const buffers[2], Value* const bars[2], Value* slot) {
    if (plan.tma) {
      // Both tiles complete on one barrier when the ring has one per slot (a matmul's A and B
      // are read together): one expect of both tiles' bytes.
      const bool oneBarrier = bars[0] == bars[1];
      Value* bar = nullptr;
      for (int i = 0; i < 2; ++i) {
        const Op* load = plan.loads[i];
        b.setLoc(load->loc());
        if (!oneBarrier || i == 0) {
          bar = b.localView(bars[i], slot);
          int64_t bytes = 0;
          for (int t = oneBarrier ? 0 : i; t <= i + (oneBarrier ? 1 : 0); ++t) {
            const Type& tt = plan.loads[t]->result()->type();
            bytes += tt.shape[0] * tt.shape[1] * ir::byteWidth(tt.elem);
          }
          b.create(OpCode::BarrierExpectBytes, {bar, b.i32(bytes), inRange}, {},
                   {ir::attr::BarrierExpectBytes::make::hasPred(true)});
        }
        std::vector<Value*> operands{load->operand(0), b.localView(buffers[i], slot), bar};
        for (unsigned o = 1; o < load->numOperands(); ++o)
          operands.push_back(mapped(map, load->operand(o)));
        operands.push_back(inRange);
        b.create(OpCode::AsyncDescLoad, operands, {},
                 {ir::attr::AsyncDescLoad::make::hasPred(true)});
      }
      return;
    }
    for (int i = 0; i < 2; ++i) {
      const Op* load = plan.loads[i];
      b.setLoc(load->loc());
      Value* ptr = mapped(map, load->operand(0));
      const std::vector<int64_t>& shape = ptr->type().shape;
      Value* mask = b.splat(inRange, shape);
      if (ir::attr::Load::hasMask(*load))
        mask = b.binary(OpCode::And, mapped(map, load->operand(1)), mask);
      if (copiesTransposed(plan, i)) {
        ptr = transpose(b, ptr);
        mask = transpose(b, mask);
      }
      Value* dst = b.localView(buffers[i], slot);
      b.create1(
          OpCode::AsyncLoad, {ptr, dst, mask}, Type::token(),
          {ir::attr::AsyncLoad::make::hasMask(true), ir::attr::AsyncLoad::make::hasOther(false)});
    }
    b.create1(OpCode::AsyncCommitGroup, {}, Type::token());
  }

  /// Whether `op`, or an op nested in it, reads `v`.
  static bool reads(Op& op, const Value* v) {
    bool found = false;
    for (Value* o : op.operands()) found |= o == v;
    for (unsigned r = 0; r < op.numRegions(); ++r)
      walk(*op.region(r), [&](Op& inner) {
        for (Value* o : inner.operands()) found |= o == v;
      });
    return found;
  }

  /// The multi-buffered copies of a rewritten loop: the two buffers of S slots, the loop's
  /// slot counter, and how many iterations ahead the copies are issued.
  struct Pipeline {
    Value* buffers[2] = {nullptr, nullptr};
    Value* slot = nullptr;
    int ahead = 1;
    /// TMA: a barrier per slot for each buffer, and the parity of the current slot's phase.
    Value* bars[2] = {nullptr, nullptr};
    Value* phase = nullptr;
  };

  /// Allocates the buffers and issues the first `ahead` iterations' copies before the loop,
  /// which then carries the rotated addresses and the slot of the iteration it runs.
  Pipeline startPipeline(const Plan& plan, int ahead, const char* const names[2]) {
    Op& loop = *plan.loop;
    Block& body = *loop.region(0);
    Block& outer = *loop.parentBlock();
    Value* lb = loop.operand(0);
    Value* ub = loop.operand(1);
    Type ivType = body.arg(0)->type();
    Type i32 = Type::scalar(DType::I32);
    const unsigned numIters = loop.numOperands() - 3;
    Pipeline p;
    p.ahead = ahead;

    Block pre;
    ir::Builder b(&pre);
    b.setLoc(loop.loc());
    // A loop reusing an earlier loop's ring starts at the slot and phase that loop ended on:
    // each slot's barrier has completed one phase per copy consumed.
    Value* firstSlot = nullptr;
    Value* firstPhase = nullptr;
    if (plan.reuseRing >= 0) {
      const TmaRing& ring = tmaRings_[plan.reuseRing];
      for (int i = 0; i < 2; ++i) {
        p.buffers[i] = ring.buffers[i];
        p.bars[i] = ring.bars[i];
      }
      firstSlot = ring.loop->result(ring.slotResult);
      firstPhase = ring.loop->result(ring.slotResult + 1);
    }
    // A matmul's TMA ring: one barrier per slot for both tiles, allocated once per kernel
    // before the loops the K loop sits in, which carry the ring's slot and phase from one pass
    // of the K loop to the next (re-initializing barriers in flight is not allowed).
    const bool gemmTma = plan.tma && !plan.scoreDot && !plan.tmaRingPerPass;
    std::vector<Op*> chain; // the enclosing for loops, outermost first
    std::vector<unsigned> chainSlotResults;
    if (gemmTma) {
      for (Op* up = outer.parentOp(); up; up = up->parentBlock()->parentOp())
        chain.insert(chain.begin(), up);
      Block top;
      ir::Builder tb(&top);
      tb.setLoc(loop.loc());
      p.bars[0] = p.bars[1] = tb.create1(OpCode::AllocBarriers, {}, Type::barrier(plan.stages),
                                         {ir::attr::AllocBarriers::make::arriveCount(1)});
      p.bars[0]->name = "pipeline_full";
      Value* slot = tb.i32(0);
      Value* phase = slot;
      Op* anchor = chain.empty() ? &loop : chain.front();
      ir::spliceOps(top, *anchor->parentBlock(), ir::positionOf(*anchor->parentBlock(), anchor));
      for (Op* up : chain) {
        Block& upBody = *up->region(0);
        chainSlotResults.push_back(up->numResults());
        up->addOperand(slot);
        up->addResult(i32, "pipeline_slot");
        slot = upBody.addArg(i32, "pipeline_slot");
        up->addOperand(phase);
        up->addResult(i32, "pipeline_phase");
        phase = upBody.addArg(i32, "pipeline_phase");
      }
      firstSlot = slot;
      firstPhase = phase;
    }
    for (int i = 0; i < 2 && plan.reuseRing < 0; ++i) {
      Type t = plan.loads[i]->result()->type();
      if (copiesTransposed(plan, i)) std::swap(t.shape[0], t.shape[1]);
      std::vector<ir::NamedAttr> attrs = {ir::attr::LocalAlloc::make::storage("smem")};
      if (plan.ringAlias >= 0)
        attrs.push_back(ir::attr::LocalAlloc::make::alias(plan.ringAlias + i));
      p.buffers[i] =
          b.create1(OpCode::LocalAlloc, {}, Type::buffer(t.elem, t.shape, plan.stages), attrs);
      p.buffers[i]->name = names[i];
      if (plan.tmaRingPerPass) {
        if (i == 0) {
          p.bars[0] = p.bars[1] = b.create1(OpCode::AllocBarriers, {}, Type::barrier(plan.stages),
                                            {ir::attr::AllocBarriers::make::arriveCount(1)});
          p.bars[0]->name = "pipeline_full";
        }
      } else if (plan.tma && !gemmTma) {
        p.bars[i] = b.create1(OpCode::AllocBarriers, {}, Type::barrier(plan.stages),
                              {ir::attr::AllocBarriers::make::arriveCount(1)});
        p.bars[i]->name = std::string(names[i]) + "_full";
      }
      // (Alias regions are counted as they grow: growAlias.)
      if (plan.ringAlias < 0)
        shared_.add(&outer, t.shape[0] * t.shape[1] * ir::byteWidth(t.elem) * plan.stages);
    }
    std::vector<Value*> carried;
    for (unsigned k = 0; k < numIters; ++k) carried.push_back(loop.operand(3 + k));
    const Op* yield = body.terminator();
    for (int j = 0; j < ahead; ++j) {
      b.setLoc(loop.loc());
      Value* iv = j == 0 ? lb : b.binary(OpCode::Add, lb, b.constInt(j * plan.step, ivType));
      ValueMap map{{body.arg(0), iv}};
      for (unsigned iter : plan.addressIters) map[body.arg(iter + 1)] = carried[iter];
      cloneSlice(b, plan, map);
      b.setLoc(loop.loc());
      Value* slot = b.i32(j);
      if (firstSlot)
        slot = j == 0 ? firstSlot : wrapSlot(b, plan, b.binary(OpCode::Add, firstSlot, slot));
      issueLoads(b, plan, map, b.cmp("lt", iv, ub), p.buffers, p.bars, slot);
      for (unsigned iter : plan.addressIters) carried[iter] = mapped(map, yield->operand(iter));
    }
    b.setLoc(loop.loc());
    if (!firstSlot) firstSlot = firstPhase = b.i32(0);
    ir::spliceOps(pre, outer, ir::positionOf(outer, &loop));

    for (unsigned iter : plan.addressIters) loop.setOperand(3 + iter, carried[iter]);
    const unsigned slotResult = loop.numResults();
    loop.addOperand(firstSlot);
    loop.addResult(i32, "pipeline_slot");
    p.slot = body.addArg(i32, "pipeline_slot");
    if (plan.tma) {
      loop.addOperand(firstPhase);
      loop.addResult(i32, "pipeline_phase");
      p.phase = body.addArg(i32, "pipeline_phase");
      // Each enclosing loop yields the slot and phase the loop inside it ended on.
      for (size_t k = 0; k < chain.size(); ++k) {
        Op* inner = k + 1 < chain.size() ? chain[k + 1] : &loop;
        unsigned r = k + 1 < chain.size() ? chainSlotResults[k + 1] : slotResult;
        Op* upYield = chain[k]->region(0)->terminator();
        upYield->addOperand(inner->result(r));
        upYield->addOperand(inner->result(r + 1));
      }
      if (gemmTma || plan.tmaRingPerPass) return p;
      TmaRing ring{&outer,
                   {p.buffers[0], p.buffers[1]},
                   {p.bars[0], p.bars[1]},
                   {plan.loads[0]->result()->type(), plan.loads[1]->result()->type()},
                   plan.stages,
                   &loop,
                   slotResult};
      if (plan.reuseRing >= 0)
        tmaRings_[plan.reuseRing] = ring;
      else
        tmaRings_.push_back(ring);
    }
    return p;
  }

  /// `slot` mod S for slot < 2 S, by a compare and subtract (S need not be a power of two,
  /// and a remainder would cost a division every iteration).
  static Value* wrapSlot(ir::Builder& b, const Plan& plan, Value* slot) {
    Value* S = b.i32(plan.stages);
    return b.create1(OpCode::Select, {b.cmp("ge", slot, S), b.binary(OpCode::Sub, slot, S), slot},
                     Type::scalar(DType::I32));
  }

  /// Issues, with `b`, the copies of iteration i + ahead into slot (slot + ahead) mod S; the
  /// map returned holds that iteration's cloned address values.
  ValueMap refill(ir::Builder& b, const Plan& plan, const Pipeline& p, SourceLoc loc) {
    Block& body = *plan.loop->region(0);
    Type ivType = body.arg(0)->type();
    Value* ivAhead = b.binary(OpCode::Add, body.arg(0), b.constInt(p.ahead * plan.step, ivType));
    ValueMap map{{body.arg(0), ivAhead}};
    cloneSlice(b, plan, map);
    b.setLoc(loc);
    Value* writeSlot = wrapSlot(b, plan, b.binary(OpCode::Add, p.slot, b.i32(p.ahead)));
    issueLoads(b, plan, map, b.cmp("lt", ivAhead, plan.loop->operand(1)), p.buffers, p.bars,
               writeSlot);
    b.setLoc(loc);
    return map;
  }

  /// Yields the next slot and the rotated addresses (`map` from refill).
  void yieldPipeline(ir::Builder& b, const Plan& plan, const Pipeline& p, const ValueMap& map) {
    Block& body = *plan.loop->region(0);
    Type i32 = Type::scalar(DType::I32);
    Value* next = b.binary(OpCode::Add, p.slot, b.i32(1));
    Value* wraps = b.cmp("eq", next, b.i32(plan.stages));
    Value* nextSlot = b.create1(OpCode::Select, {wraps, b.i32(0), next}, i32);
    Op* bodyYield = body.terminator();
    std::vector<Value*> addressYields;
    for (unsigned iter : plan.addressIters)
      addressYields.push_back(mapped(map, bodyYield->operand(iter)));
    for (size_t k = 0; k < plan.addressIters.size(); ++k)
      bodyYield->setOperand(plan.addressIters[k], addressYields[k]);
    bodyYield->addOperand(nextSlot);
    if (p.phase)
      bodyYield->addOperand(b.create1(
          OpCode::Select, {wraps, b.binary(OpCode::Xor, p.phase, b.i32(1)), p.phase}, i32));
  }

  /// Waits until buffer `which` of the current slot has landed: the cp.async group of both
  /// buffers (the lowering adds the proxy fence and the CTA barrier), or the slot's TMA
  /// barrier.
  static void waitForSlot(ir::Builder& b, const Pipeline& p, int which) {
    if (!p.phase) {
      b.create(OpCode::AsyncWaitGroup, {}, {},
               {ir::attr::AsyncWaitGroup::make::pendings(p.ahead - 1)});
      return;
    }
    Value* bar = b.localView(p.bars[which], p.slot);
    b.create(OpCode::BarrierWait, {bar, p.phase}, {},
             {ir::attr::BarrierWait::make::hasPred(false)});
  }

  /// The 2-D transpose of tensor `v`.
  static Value* transpose(ir::Builder& b, Value* v) {
    Type t = v->type();
    std::swap(t.shape[0], t.shape[1]);
    return b.create1(OpCode::Permute, {v}, t, {ir::attr::Permute::make::order({1, 0})});
  }

  /// The 2-D local_trans view of buffer view `v`.
  static Value* localTrans(ir::Builder& b, Value* v) {
    Type t = v->type();
    std::swap(t.shape[0], t.shape[1]);
    return b.create1(OpCode::LocalTrans, {v}, t, {ir::attr::LocalTrans::make::order({1, 0})});
  }

  static std::vector<ir::NamedAttr> asyncDotAttrs(const Op& dot, bool hasUseAcc = false) {
    std::vector<ir::NamedAttr> attrs = {ir::attr::AsyncDot::make::hasUseAcc(hasUseAcc),
                                        ir::attr::AsyncDot::make::hasPred(false)};
    if (dot.hasAttr(ir::attr::Dot::kinputPrecision))
      attrs.push_back(ir::attr::AsyncDot::make::inputPrecision(ir::attr::Dot::inputPrecision(dot)));
    return attrs;
  }

  /// Erases the dot the pipeline replaced and its operands' loads (and B's transpose).
  void eraseDotAndLoads(Block& body, const Plan& plan) {
    ir::eraseOp(body, plan.dot);
    if (plan.bTrans) ir::eraseOp(body, plan.bTrans);
    ir::eraseOp(body, plan.loads[0]);
    ir::eraseOp(body, plan.loads[1]);
  }

  /// Whether every op `block` is nested in is a for loop (none for the kernel's body).
  static bool enclosedByForLoopsOnly(const Block& block) {
    for (const Op* up = block.parentOp(); up; up = up->parentBlock()->parentOp())
      if (up->code() != OpCode::For) return false;
    return true;
  }

  /// Whether `block` runs inside a loop. Then a warp group may start the next pass's prologue
  /// (refilling slots, Q's buffer) while another still runs its last MMA of the previous pass
  /// (each warp group retires only its own): the rewrites meet first with a CTA barrier.
  static bool nestedInLoop(const Block& block) {
    for (const Op* up = block.parentOp(); up; up = up->parentBlock()->parentOp())
      if (up->code() == OpCode::For || up->code() == OpCode::While) return true;
    return false;
  }

  /// Before a pipelined loop nested in another loop, all threads meet (behind a proxy fence
  /// for TMA): the epilogue of the previous pass may have used the stages' bytes (layout
  /// conversions share them after the loop) through the generic proxy, and TMA writes them
  /// through the async one.
  static void meetBeforeNestedLoop(const Plan& plan) {
    Op& loop = *plan.loop;
    Block& outer = *loop.parentBlock();
    if (!nestedInLoop(outer)) return;
    Block meet;
    ir::Builder mb(&meet);
    mb.setLoc(loop.loc());
    if (plan.tma) mb.create(OpCode::Fence, {}, {}, {ir::attr::Fence::make::kind("async_shared")});
    mb.create(OpCode::DebugBarrier, {}, {}, {});
    ir::spliceOps(meet, outer, ir::positionOf(outer, &loop));
  }

  void rewrite(const Plan& plan) {
    Op& loop = *plan.loop;
    Block& body = *loop.region(0);
    Block& outer = *loop.parentBlock();
    meetBeforeNestedLoop(plan);
    const char* const names[2] = {"pipeline_a", "pipeline_b"};
    Pipeline p = startPipeline(plan, plan.stages - 1, names);
    Value* acc = body.arg(plan.accIter + 1);
    const Type& accType = plan.dot->result()->type();
    // A promoted fp8 dot: the loop also carries the partial accumulator of the previous
    // iteration's MMA, still in flight (see issuePromoted); it enters as -0.0, which adding
    // leaves every accumulator value as it was (-0.0 included).
    Value* partial = nullptr;
    if (plan.promoted) {
      Block init;
      ir::Builder ib(&init);
      ib.setLoc(loop.loc());
      loop.addOperand(ib.constFloat(-0.0, accType));
      ir::spliceOps(init, outer, ir::positionOf(outer, &loop));
      loop.addResult(accType, "pipeline_partial");
      partial = body.addArg(accType, "pipeline_partial");
    }

    Block mid;
    ir::Builder b(&mid);
    b.setLoc(plan.dot->loc());
    waitForSlot(b, p, 0);
    Value* a = b.localView(p.buffers[0], p.slot);
    Value* bv = b.localView(p.buffers[1], p.slot);
    if (plan.bTrans || plan.copyBTransposed) bv = localTrans(b, bv);
    Value* issued = nullptr;
    if (plan.promoted) {
      issued = issuePromoted(b, plan, a, bv, acc, partial);
    } else {
      issued = b.create1(OpCode::AsyncDot, {a, bv, acc}, accType, asyncDotAttrs(*plan.dot));
      Value* retired = b.create(OpCode::AsyncDotWait, {issued}, {issued->type()},
                                {ir::attr::AsyncDotWait::make::pendings(1)})
                           ->result();
      body.terminator()->setOperand(plan.accIter, retired);
    }
    // The MMA of iteration i - 1 is retired: its slot, (i + S - 1) mod S, takes the copies of
    // iteration i + S - 1.
    ValueMap map = refill(b, plan, p, plan.dot->loc());
    yieldPipeline(b, plan, p, map);
    if (plan.promoted) body.terminator()->addOperand(issued);
    ir::spliceOps(mid, body, ir::positionOf(body, plan.dot));

    // The dot and its loads are replaced; the original address computation is dead now.
    eraseDotAndLoads(body, plan);

    // ---- after the loop: retire the last MMA (adding its partial) and drain the (masked-off)
    // copies ----
    Block post;
    b.setInsertionBlock(&post);
    b.setLoc(loop.loc());
    Value* result = loop.result(plan.accIter);
    Value* last = plan.promoted ? loop.result(loop.numResults() - 1) : result;
    Op* wait = b.create(OpCode::AsyncDotWait, {last}, {last->type()},
                        {ir::attr::AsyncDotWait::make::pendings(0)});
    Value* total = wait->result();
    if (plan.promoted) total = b.binary(OpCode::Add, result, total);
    if (!plan.tma)
      b.create(OpCode::AsyncWaitGroup, {}, {}, {ir::attr::AsyncWaitGroup::make::pendings(0)});
    total->name = result->name;
    replaceAllUses(fn_.body, result, total);
    ir::spliceOps(post, outer, ir::positionOf(outer, &loop) + 1);
  }

  /// The body of a promoted fp8 dot's pipelined iteration (`b` after the wait for the slot), as
  /// Triton's promotion computes it (ir/DotTypes.h): the MMA of each iteration sums into a
  /// zeroed fp32 partial accumulator, which is then added into the fp32 accumulator `acc`. One
  /// MMA stays in flight, as in the fp32 loop, but with the add one step behind:
  ///
  ///   loop i:  wait for slot i % S
  ///            p = async_dot_wait(0, partial)     the MMA of iteration i - 1 is retired
  ///            acc = acc + p                      (iteration 0: partial is -0.0)
  ///            partial = async_dot(slot i % S, p, use_acc=false)
  ///            copy iteration i + D -> slot (i - 1) % S
  ///   after:   acc = acc + async_dot_wait(0, partial)
  ///
  /// The MMA of iteration i runs while the warps issue the next copies and wait for the next
  /// slot. It writes p's registers in place (scale-d = 0 zeroes them first): the loop carries
  /// them without a copy (a copy, or a second partial swapped each iteration, would move the
  /// registers of an MMA in flight, and ptxas would serialize the wgmmas), and an accumulator
  /// and one partial fit the registers where the fp32 loop's accumulator does with room to
  /// spare. Each partial is the plain lowering's (the same k32 wgmma chain from scale-d = 0)
  /// and the adds come in the same order, so the results are the unpipelined loop's bit for
  /// bit. The yield takes the accumulator; the caller yields the partial returned.
  Value* issuePromoted(ir::Builder& b, const Plan& plan, Value* a, Value* bv, Value* acc,
                       Value* partial) {
    Block& body = *plan.loop->region(0);
    const Type& accType = plan.dot->result()->type();
    Value* retired = b.create(OpCode::AsyncDotWait, {partial}, {accType},
                              {ir::attr::AsyncDotWait::make::pendings(0)})
                         ->result();
    Value* sum = b.binary(OpCode::Add, acc, retired);
    Value* fresh = b.constInt(0, Type::scalar(DType::I1));
    Value* issued = b.create1(OpCode::AsyncDot, {a, bv, retired, fresh}, accType,
                              asyncDotAttrs(*plan.dot, true));
    body.terminator()->setOperand(plan.accIter, sum);
    return issued;
  }

  /// The desc_load of a TMA attention loop's Q when TMA can copy it straight into Q's buffer
  /// (Triton's schedule) rather than through registers: a 2-D load through a kernel-argument
  /// descriptor or a tensor map made outside the loop, in the loop's block or one around it,
  /// of the MMA's 16-bit element type. Null otherwise.
  Op* tmaQLoad(const Plan& plan) const {
    if (!plan.tma) return nullptr;
    Value* q = plan.q;
    Op* load = q->def();
    if (!load || !tmaDescLoad(*load, *plan.loop->region(0))) return nullptr;
    if (q->type().elem != DType::F16 && q->type().elem != DType::BF16) return nullptr;
    for (const Block* up = plan.loop->parentBlock(); up;
         up = up->parentOp() ? up->parentOp()->parentBlock() : nullptr)
      if (up == load->parentBlock()) return load;
    return nullptr;
  }

  /// The loop-carried index of the accumulator `dot` yields when its MMA can stay in flight
  /// into the next iteration and be retired there by the wait that follows `before` (Triton's
  /// schedule: the warps go on to the next iteration's copies and MMAs while it runs, and one
  /// wait retires both), -1 otherwise. It can when the loop only yields `dot`'s result and the
  /// next iteration reads the carried value only after `before`: nothing reads the registers
  /// of the MMA in flight.
  static int carriedInFlight(const Op& loop, const Op* dot, const Op* before) {
    const Block& body = *loop.region(0);
    const Op* yield = body.terminator();
    int index = -1;
    for (unsigned i = 0; i < yield->numOperands(); ++i)
      if (yield->operand(i) == dot->result()) {
        if (index >= 0) return -1;
        index = static_cast<int>(i);
      }
    if (index < 0 || static_cast<unsigned>(index) + 1 >= body.numArgs()) return -1;
    const Value* carried = body.arg(static_cast<unsigned>(index) + 1);
    if (carried->type() != dot->result()->type()) return -1;
    const size_t beforeAt = ir::positionOf(body, before);
    for (size_t i = 0; i < body.ops().size(); ++i) {
      Op& op = *body.ops()[i];
      if (&op != yield && reads(op, dot->result())) return -1;
      if (i <= beforeAt && reads(op, carried)) return -1;
    }
    return index;
  }

  /// Whether an MMA left in flight into the next iteration costs no CTA barrier there: with
  /// one warp group the wait retires every thread's MMAs before the copies overwrite the slot
  /// they read; with several, cp.async copies would need a barrier after the wait besides the
  /// one at the top of the iteration (TMA copies have that one barrier either way).
  bool carriesInFlightCheaply(const Plan& plan) const { return plan.tma || fn_.numWarps <= 4; }

  /// Whether the only reader of `v` in `body` is its terminator, once.
  static bool onlyYielded(const Block& body, const Value* v) {
    const Op* yield = body.terminator();
    int n = 0;
    for (const Value* o : yield->operands()) n += o == v;
    if (n != 1) return false;
    for (const auto& op : body.ops())
      if (op.get() != yield && reads(*op, v)) return false;
    return true;
  }

  /// After `loop`: retires the MMA its result `index` may still have in flight.
  void retireAfterLoop(ir::Builder& b, Op& loop, unsigned index) {
    Block& outer = *loop.parentBlock();
    Block post;
    b.setInsertionBlock(&post);
    b.setLoc(loop.loc());
    Value* result = loop.result(index);
    Op* wait = b.create(OpCode::AsyncDotWait, {result}, {result->type()},
                        {ir::attr::AsyncDotWait::make::pendings(0)});
    wait->result()->name = result->name;
    replaceAllUses(fn_.body, result, wait->result());
    ir::spliceOps(post, outer, ir::positionOf(outer, &loop) + 1);
  }

  /// sm_100a: the matmul loop with its dot as tcgen05.mma into a tensor-memory accumulator
  /// (the copies as in `rewrite`). With S slots, D = S - 1 iterations loaded ahead, and the
  /// loop's k-th MMA (k counted from 0 in each pass of the loop) committed to barrier k % 2 of
  /// a pair:
  ///
  ///   kernel start:  acc_tmem = local_alloc tmem [M, N] f32 (tcgen05.alloc of the kernel's
  ///                  columns; dealloc'ed before it returns)
  ///   before loop:   done = alloc_barriers(2); local_store(acc_tmem, init) unless init is 0
  ///                  prologue copies (as `rewrite`)
  ///   loop i (k):    wait for slot i % S
  ///                  tcgen05_mma(slot A, slot B, acc_tmem, use_acc, done[k % 2])
  ///                      use_acc = k > 0 when init is zeros (the first MMA overwrites)
  ///                  barrier_wait(done[(k - 1) % 2], ((k - 1) / 2) % 2) if k > 0
  ///                      MMA k - 1 (and every earlier one) has completed: its slot,
  ///                      (i - 1) mod S, is free
  ///                  copy iteration i + D -> slot (i - 1) mod S
  ///   after loop:    barrier_wait on the last MMA; drain the copies; local_store(acc_tmem,
  ///                  0) if the loop ran no iteration and init is 0; acc = local_load
  ///                  (tcgen05.ld)
  ///
  /// Barrier k % 2 next completes for MMA k + 2, issued only after every thread has passed
  /// its wait for MMA k (cp.async: the slot wait's CTA barrier; TMA: a CTA barrier after the
  /// wait), so no waiter sees a phase of the same parity complete twice. The accumulator leaves
  /// the loop's carried registers: the loop carries the MMA count instead.
  void rewriteTcgen05(const Plan& plan) {
    Op& loop = *plan.loop;
    Block& body = *loop.region(0);
    Block& outer = *loop.parentBlock();
    const Type accType = plan.dot->result()->type();
    const int64_t M = accType.shape[0], N = accType.shape[1];
    const int64_t offset = tmemOffset(loop, tmemColumns(N));
    tmem_.add(&outer, tmemColumns(N), offset);

    // The accumulator's tensor memory, allocated at the kernel's top level (every warp takes
    // part in tcgen05.alloc): one per rewritten loop, its own columns but for loops in the
    // other branch of an if.
    Block top;
    ir::Builder tb(&top);
    tb.setLoc(loop.loc());
    Value* tmem = allocTmem(tb, DType::F32, {M, N}, offset, "dot_acc_tmem");
    ir::spliceOps(top, fn_.body, 0);

    // The meeting also orders the previous pass's tcgen05.ld of the accumulator and its waits
    // on the MMA barriers before this pass re-initializes them and its first MMA overwrites
    // the accumulator.
    meetBeforeNestedLoop(plan);
    Value* init = loop.operand(3 + plan.accIter);
    const bool zeroInit = ir::isPositiveZeroConstant(init);
    Block pre;
    ir::Builder b(&pre);
    b.setLoc(loop.loc());
    Value* done = b.create1(OpCode::AllocBarriers, {}, Type::barrier(2),
                            {ir::attr::AllocBarriers::make::arriveCount(1)});
    done->name = "dot_mma_done";
    if (!zeroInit) b.create(OpCode::LocalStore, {tmem, init}, {}, {});
    ir::spliceOps(pre, outer, ir::positionOf(outer, &loop));

    const char* const names[2] = {"pipeline_a", "pipeline_b"};
    Pipeline p = startPipeline(plan, plan.stages - 1, names);
    auto [count, countResult] = addMmaCounter(loop, "dot_mma_count");

    // The barrier MMA `k` commits to and the parity of that commit's phase.
    auto mmaDone = [&](ir::Builder& at, Value* k) {
      Value* bar = at.localView(done, at.binary(OpCode::And, k, at.i32(1)));
      Value* phase = at.binary(OpCode::And, at.binary(OpCode::Shr, k, at.i32(1)), at.i32(1));
      return std::pair{bar, phase};
    };

    Block mid;
    b.setInsertionBlock(&mid);
    b.setLoc(plan.dot->loc());
    waitForSlot(b, p, 0);
    Value* a = b.localView(p.buffers[0], p.slot);
    Value* bv = b.localView(p.buffers[1], p.slot);
    if (plan.bTrans || plan.copyBTransposed) bv = localTrans(b, bv);
    std::vector<Value*> mmaOperands{a, bv, tmem};
    if (zeroInit) mmaOperands.push_back(b.cmp("ne", count, b.i32(0)));
    mmaOperands.push_back(mmaDone(b, count).first);
    b.create(OpCode::Tcgen05Mma, mmaOperands, {},
             {ir::attr::Tcgen05Mma::make::hasUseAcc(zeroInit),
              ir::attr::Tcgen05Mma::make::hasPred(false)});
    Value* started = b.cmp("gt", count, b.i32(0));
    auto [prevBar, prevPhase] = mmaDone(b, b.binary(OpCode::Sub, count, b.i32(1)));
    b.create(OpCode::BarrierWait, {prevBar, prevPhase, started}, {},
             {ir::attr::BarrierWait::make::hasPred(true)});
    // TMA slot waits do not meet the CTA (cp.async's do): meet here, so that MMA k + 1, which
    // commits to the barrier just waited on, is issued after every thread has seen that phase.
    if (plan.tma) b.create(OpCode::DebugBarrier, {}, {}, {});
    ValueMap map = refill(b, plan, p, plan.dot->loc());
    yieldPipeline(b, plan, p, map);
    body.terminator()->addOperand(b.binary(OpCode::Add, count, b.i32(1)));
    // The accumulator passes through the loop unchanged, and is dropped from it below.
    body.terminator()->setOperand(plan.accIter, body.arg(plan.accIter + 1));
    ir::spliceOps(mid, body, ir::positionOf(body, plan.dot));

    eraseDotAndLoads(body, plan);

    // ---- after the loop: the last MMA has completed; read the accumulator ----
    Block post;
    b.setInsertionBlock(&post);
    b.setLoc(loop.loc());
    Value* issued = loop.result(countResult);
    auto [lastBar, lastPhase] = mmaDone(b, b.binary(OpCode::Sub, issued, b.i32(1)));
    Value* ran = b.cmp("gt", issued, b.i32(0));
    b.create(OpCode::BarrierWait, {lastBar, lastPhase, ran}, {},
             {ir::attr::BarrierWait::make::hasPred(true)});
    if (!plan.tma)
      b.create(OpCode::AsyncWaitGroup, {}, {}, {ir::attr::AsyncWaitGroup::make::pendings(0)});
    if (zeroInit) {
      // A loop that ran no iteration issued no MMA: the accumulator gets the zeros it started
      // from (stored only then, rather than a select over every register of the result; the
      // trip count is the CTA's, as the loop's CTA barriers need).
      Op* none = b.create(OpCode::If, {b.cmp("eq", issued, b.i32(0))}, {});
      ir::Builder then(none->addRegion());
      then.setLoc(loop.loc());
      then.create(OpCode::LocalStore, {tmem, init}, {}, {});
      then.create(OpCode::Yield, {}, {});
      ir::Builder otherwise(none->addRegion());
      otherwise.setLoc(loop.loc());
      otherwise.create(OpCode::Yield, {}, {});
    }
    readAccumulatorAfterLoop(plan, b, post, tmem, accType);
  }

  /// Adds an i32 count of the loop's MMAs, from 0, to `loop`'s carried values: returns its body
  /// argument and the index of the loop result holding the count after the loop (the caller
  /// yields its next value).
  static std::pair<Value*, unsigned> addMmaCounter(Op& loop, const char* name) {
    Block& outer = *loop.parentBlock();
    Block zero;
    ir::Builder b(&zero);
    b.setLoc(loop.loc());
    loop.addOperand(b.i32(0));
    ir::spliceOps(zero, outer, ir::positionOf(outer, &loop));
    const unsigned result = loop.numResults();
    const Type i32 = Type::scalar(DType::I32);
    loop.addResult(i32, name);
    return {loop.region(0)->addArg(i32, name), result};
  }

  /// The accumulator the loop carried (plan.accIter), now in tensor memory `tmem`, read after
  /// the loop: `b` appends the tcgen05.ld to `post`, which goes right after the loop; the loaded
  /// value takes the loop result's uses, and the loop stops carrying it.
  void readAccumulatorAfterLoop(const Plan& plan, ir::Builder& b, Block& post, Value* tmem,
                                const Type& type) {
    Op& loop = *plan.loop;
    Block& outer = *loop.parentBlock();
    Value* result = b.create1(OpCode::LocalLoad, {tmem}, type);
    Value* old = loop.result(plan.accIter);
    result->name = old->name;
    replaceAllUses(fn_.body, old, result);
    ir::spliceOps(post, outer, ir::positionOf(outer, &loop) + 1);
    dropCarried(loop, plan.accIter);
  }

  /// Removes carried value `iter` of for loop `loop`, which its body passes through unread and
  /// nothing reads after the loop: the loop is rebuilt without it (its ops moved over).
  void dropCarried(Op& loop, unsigned iter) {
    // A TMA ring a later loop continues reads its slot from the rebuilt loop's results.
    std::vector<TmaRing*> continued;
    for (TmaRing& ring : tmaRings_)
      if (ring.loop == &loop) continued.push_back(&ring);
    Op* rebuilt = ir::dropCarriedValue(fn_.body, loop, iter);
    for (TmaRing* ring : continued) {
      ring->loop = rebuilt;
      if (ring->slotResult > iter) --ring->slotResult;
    }
  }

  /// Attention's Q in a swizzled buffer of its own, before the loop's prologue: copied by TMA
  /// straight into it where Q is a desc_load (`bar` then the barrier its copy completes on, to
  /// be waited for after the prologue's copies have gone out), else stored from registers (the
  /// first iteration's slot wait fences and meets every thread before an MMA reads it). A TMA
  /// loop after another one of the same block with the same Q (the two loops of causal
  /// attention) reads the buffer that loop stored.
  struct StagedQ {
    Value* view = nullptr;
    Value* bar = nullptr;
  };
  StagedQ stageQ(const Plan& plan) {
    Op& loop = *plan.loop;
    Block& outer = *loop.parentBlock();
    Value* q = plan.q;
    Block pre;
    ir::Builder b(&pre);
    b.setLoc(plan.scoreDot->loc());
    auto stored = tmaQViews_.find(q);
    Value* qView = nullptr;
    // Q copied by TMA straight into its buffer: waited for just before the loop, after the
    // prologue's copies of K and V have gone out.
    Value* qBar = nullptr;
    if (plan.tma && stored != tmaQViews_.end() && stored->second.block == &outer) {
      qView = stored->second.view;
    } else if (Op* qLoad = tmaQLoad(plan)) {
      // Issued where Q's desc_load was, ahead of it: the descriptor's swizzle is then the
      // buffer's, which a desc_load of Q that other users keep alive follows.
      Block issue;
      ir::Builder ib(&issue);
      ib.setLoc(qLoad->loc());
      Value* qBuffer =
          ib.create1(OpCode::LocalAlloc, {}, Type::buffer(q->type().elem, q->type().shape, 1),
                     {ir::attr::LocalAlloc::make::storage("smem")});
      qBuffer->name = "pipeline_q";
      qView = ib.localView(qBuffer, ib.i32(0));
      Value* bars = ib.create1(OpCode::AllocBarriers, {}, Type::barrier(1),
                               {ir::attr::AllocBarriers::make::arriveCount(1)});
      bars->name = "pipeline_q_full";
      qBar = ib.localView(bars, ib.i32(0));
      const Type& qt = q->type();
      ib.create(OpCode::BarrierExpectBytes,
                {qBar, ib.i32(qt.shape[0] * qt.shape[1] * ir::byteWidth(qt.elem))}, {},
                {ir::attr::BarrierExpectBytes::make::hasPred(false)});
      std::vector<Value*> operands{qLoad->operand(0), qView, qBar};
      for (unsigned o = 1; o < qLoad->numOperands(); ++o) operands.push_back(qLoad->operand(o));
      ib.create(OpCode::AsyncDescLoad, operands, {},
                {ir::attr::AsyncDescLoad::make::hasPred(false)});
      Block& at = *qLoad->parentBlock();
      ir::spliceOps(issue, at, ir::positionOf(at, qLoad));
      tmaQViews_[q] = {qView, &outer};
      shared_.add(&outer, qt.shape[0] * qt.shape[1] * ir::byteWidth(qt.elem));
    } else {
      Value* qBuffer =
          b.create1(OpCode::LocalAlloc, {}, Type::buffer(q->type().elem, q->type().shape, 1),
                    {ir::attr::LocalAlloc::make::storage("smem")});
      qBuffer->name = "pipeline_q";
      qView = b.localView(qBuffer, b.i32(0));
      if (nestedInLoop(outer)) b.create(OpCode::DebugBarrier, {}, {}, {});
      b.create(OpCode::LocalStore, {qView, q}, {}, {});
      if (plan.tma) {
        // TMA waits do not fence: the MMAs (async proxy) must see Q's generic stores.
        b.create(OpCode::Fence, {}, {}, {ir::attr::Fence::make::kind("async_shared")});
        b.create(OpCode::DebugBarrier, {}, {}, {});
        tmaQViews_[q] = {qView, &outer};
        shared_.add(&outer,
                    q->type().shape[0] * q->type().shape[1] * ir::byteWidth(q->type().elem));
      }
      ir::spliceOps(pre, outer, ir::positionOf(outer, &loop));
    }
    return {qView, qBar};
  }

  /// Attention: Q is stored once into a swizzled buffer before the loop; K and V tiles are
  /// copied S - 1 iterations ahead (both MMAs of an iteration are retired within it, so only
  /// the slot being read stays off limits). In iteration i:
  ///
  ///   async_wait_group(S - 2)                     K_i and V_i have landed (+ fence, barrier)
  ///   s = async_dot(Q, local_trans(K slot))       K-major B straight from the copy
  ///   s, o_in = async_dot_wait(0, s, o_in)        the softmax reads S; P V of i - 1 retired
  ///   async_load(iteration i + S - 1 -> slot (i - 1) mod S); commit
  ///   ...softmax, o_in * alpha...
  ///   o = async_dot(p, V slot, o_in)              yielded in flight
  ///   after the loop: o = async_dot_wait(0, o)
  ///
  /// Slot (i - 1) mod S was last read by iteration i - 1's MMAs, which the wait for S retired
  /// (with several warp groups the shared-memory hazard pass adds the CTA barrier). Where the
  /// loop reads o before S (carriedInFlight), P V is retired in its own iteration instead,
  /// just before o is first read, and the copies go out right after S's MMA is issued.
  void rewriteAttention(const Plan& plan) {
    Op& loop = *plan.loop;
    Block& body = *loop.region(0);
    Block& outer = *loop.parentBlock();
    auto [qView, qBar] = stageQ(plan);
    Block pre;
    ir::Builder b(&pre);
    b.setLoc(plan.scoreDot->loc());
    const char* const names[2] = {"pipeline_k", "pipeline_v"};
    Pipeline p = startPipeline(plan, plan.stages - 1, names);
    if (qBar) {
      Block qWait;
      b.setInsertionBlock(&qWait);
      b.create(OpCode::BarrierWait, {qBar, b.i32(0)}, {},
               {ir::attr::BarrierWait::make::hasPred(false)});
      ir::spliceOps(qWait, outer, ir::positionOf(outer, &loop));
    }

    Block mid;
    b.setInsertionBlock(&mid);
    b.setLoc(plan.scoreDot->loc());
    waitForSlot(b, p, 0);
    Value* kTrans = localTrans(b, b.localView(p.buffers[0], p.slot));
    Value* s = b.create1(OpCode::AsyncDot, {qView, kTrans, plan.scoreDot->operand(2)},
                         plan.scoreDot->result()->type(), asyncDotAttrs(*plan.scoreDot));
    // P V of the previous iteration, when it is retired here rather than in its own iteration
    // (carriedInFlight): one wait retires both MMAs, and only then may the refill overwrite
    // slot (i - 1) mod S, whose V that MMA read.
    const int deferred =
        carriesInFlightCheaply(plan) ? carriedInFlight(loop, plan.dot, plan.scoreDot) : -1;
    Value* oIn = deferred >= 0 ? body.arg(static_cast<unsigned>(deferred) + 1) : nullptr;
    ValueMap map;
    if (!oIn) map = refill(b, plan, p, plan.scoreDot->loc());
    std::vector<Value*> waited{s};
    if (oIn) waited.push_back(oIn);
    std::vector<Type> waitedTypes;
    for (Value* w : waited) waitedTypes.push_back(w->type());
    Op* sWait = b.create(OpCode::AsyncDotWait, waited, waitedTypes,
                         {ir::attr::AsyncDotWait::make::pendings(0)});
    sWait->result()->name = plan.scoreDot->result()->name;
    replaceAllUses(body, plan.scoreDot->result(), sWait->result());
    if (oIn) {
      sWait->result(1)->name = oIn->name;
      replaceAllUses(body, oIn, sWait->result(1));
      map = refill(b, plan, p, plan.scoreDot->loc());
    }
    yieldPipeline(b, plan, p, map);
    // yieldPipeline's ops (the next slot) may sit here: they read only the slot.
    ir::spliceOps(mid, body, ir::positionOf(body, plan.scoreDot));

    Block late;
    b.setInsertionBlock(&late);
    b.setLoc(plan.dot->loc());
    if (plan.tma) waitForSlot(b, p, 1);
    Value* v = b.localView(p.buffers[1], p.slot);
    if (plan.bTrans) v = localTrans(b, v);
    Value* o = b.create1(OpCode::AsyncDot, {plan.dot->operand(0), v, plan.dot->operand(2)},
                         plan.dot->result()->type(), asyncDotAttrs(*plan.dot));
    if (oIn) {
      // Carried to the next iteration in flight, retired there with S; the last one after the
      // loop.
      body.terminator()->setOperand(static_cast<unsigned>(deferred), o);
      ir::spliceOps(late, body, ir::positionOf(body, plan.dot));
      retireAfterLoop(b, loop, static_cast<unsigned>(deferred));
    }
    if (!oIn) {
      // P V is retired just before its result is first read, so that what comes between (the
      // row sums of P) runs while the MMA does.
      const Op* firstUser = body.terminator();
      for (size_t i = ir::positionOf(body, plan.dot) + 1; i < body.ops().size(); ++i)
        if (reads(*body.ops()[i], plan.dot->result())) {
          firstUser = body.ops()[i].get();
          break;
        }
      Block retire;
      b.setInsertionBlock(&retire);
      Op* oWait = b.create(OpCode::AsyncDotWait, {o}, {o->type()},
                           {ir::attr::AsyncDotWait::make::pendings(0)});
      oWait->result()->name = plan.dot->result()->name;
      replaceAllUses(body, plan.dot->result(), oWait->result());
      ir::spliceOps(retire, body, ir::positionOf(body, firstUser));
      ir::spliceOps(late, body, ir::positionOf(body, plan.dot));
    }

    ir::eraseOp(body, plan.dot);
    ir::eraseOp(body, plan.scoreDot);
    ir::eraseOp(body, plan.kTrans);
    if (plan.bTrans) ir::eraseOp(body, plan.bTrans);
    ir::eraseOp(body, plan.loads[0]);
    ir::eraseOp(body, plan.loads[1]);

    // Drain the (masked-off) copies issued past the end; TMA copies past the end are not
    // issued at all.
    if (plan.tma) return;
    Block post;
    b.setInsertionBlock(&post);
    b.setLoc(loop.loc());
    b.create(OpCode::AsyncWaitGroup, {}, {}, {ir::attr::AsyncWaitGroup::make::pendings(0)});
    ir::spliceOps(post, outer, ir::positionOf(outer, &loop) + 1);
  }

  /// Stores P (the P V dot's register operand) into `buffer` (tensor memory, or shared memory for
  /// the transposed form) as early as `body` allows, but not before position `after` (S's read,
  /// after the wait that frees the buffer): right after P is
  /// computed, its conversion (`p.to(tl.float16)`, which kernels write at the dot) moved up to
  /// its operands, so the fp32 scores die before the loop reads O for its rescale.
  static void storeP(Block& body, Value* buffer, Value* p, size_t after) {
    Op* def = p->isBlockArg() ? nullptr : p->def();
    size_t at = ir::positionOf(body, body.terminator());
    if (def && def->parentBlock() == &body && def->numRegions() == 0 &&
        ir::isElementwise(def->code())) {
      size_t ready = after;
      for (Value* o : def->operands()) {
        const Op* od = o->isBlockArg() ? nullptr : o->def();
        if (od && od->parentBlock() == &body) ready = std::max(ready, ir::positionOf(body, od) + 1);
      }
      if (ready < ir::positionOf(body, def)) ir::moveOp(body, def, ready);
      at = ir::positionOf(body, def) + 1;
    } else if (def && def->parentBlock() == &body) {
      at = std::max(after, ir::positionOf(body, def) + 1);
    } else {
      at = after;
    }
    Block store;
    ir::Builder b(&store);
    b.setLoc(def ? def->loc() : body.terminator()->loc());
    b.create(OpCode::LocalStore, {buffer, p}, {}, {});
    ir::spliceOps(store, body, at);
  }

  /// sm_100a: the attention loop (analyzeAttention) with both dots as tcgen05.mma into tensor
  /// memory, as upstream Triton lowers tl.dot for Blackwell: S = Q K^T into a TMEM tile read
  /// back by tcgen05.ld for the softmax, P stored into TMEM as the second MMA's A operand, and O
  /// accumulated in TMEM across the loop, so no accumulator holds registers between iterations.
  /// Q and the K / V copies as in rewriteAttention. With `done` one barrier, and k the iteration
  /// counted from 0 in each pass of the loop:
  ///
  ///   kernel start:  s_tmem, p_tmem, o_tmem = local_alloc tmem (freed before the kernel
  ///                  returns; a second loop of the block with the same tiles takes them over)
  ///   before loop:   done = alloc_barriers(1); local_store(o_tmem, init)
  ///   loop i (k):    wait for slot i % S
  ///                  tcgen05_mma(Q, trans(K slot), s_tmem, use_acc = false, done)
  ///                  barrier_wait(done, k % 2)     S is there, and every earlier MMA (P V of
  ///                                                i - 1, which read slot (i - 1) % S and
  ///                                                p_tmem, and wrote o_tmem) has completed
  ///                  copy iteration i + S - 1 -> slot (i - 1) % S
  ///                  s = local_load(s_tmem) ...softmax...
  ///                  local_store(p_tmem, p) as soon as P is computed (storeP)
  ///                  o = local_load(o_tmem) where the loop reads O (its rescale), and the
  ///                  rescaled O stored back before the MMA
  ///                  CTA barrier
  ///                  tcgen05_mma(p_tmem, V slot, o_tmem)     (committed by the next S MMA)
  ///   after loop:    tcgen05_commit(done); barrier_wait(done, k % 2); o = local_load(o_tmem)
  ///
  /// The CTA barrier before P V also orders every thread's wait for phase k before MMA k + 1
  /// commits to the barrier again, and every thread's tcgen05.ld of S before the next S MMA
  /// overwrites it. Both MMAs of an iteration complete within the next one: the MMA work does
  /// not overlap the softmax (no Blackwell GPU has timed a deeper schedule), but no register
  /// holds an accumulator across the loop, which the mma.sync fallback could not avoid.
  void rewriteAttentionTcgen05(const Plan& plan) {
    Op& loop = *plan.loop;
    Block& body = *loop.region(0);
    Block& outer = *loop.parentBlock();
    const Type sType = plan.scoreDot->result()->type();
    const Type oType = plan.dot->result()->type();
    Value* pValue = plan.dot->operand(plan.transposed ? 1 : 0);
    const Type pType = pValue->type();

    // S, P and O in tensor memory, allocated at the kernel's top level (every warp takes part
    // in tcgen05.alloc), or those of the loop before this one.
    int reused = reusableAttentionTmem(plan);
    if (reused < 0) {
      Block top;
      ir::Builder tb(&top);
      tb.setLoc(loop.loc());
      const int64_t sColumns = tmemColumns(sType.shape[1]);
      const int64_t pColumns =
          plan.transposed ? 0 : tmemColumns(pType.shape[1] * ir::byteWidth(pType.elem) / 4);
      const int64_t columns = sColumns + pColumns + tmemColumns(oType.shape[1]);
      const int64_t offset = tmemOffset(loop, columns);
      tmem_.add(&outer, columns, offset);
      auto tmemTile = [&](DType elem, const Type& t, int64_t at, const char* name) {
        return tb.localView(allocTmem(tb, elem, t.shape, at, name), tb.i32(0));
      };
      Value* sTile = tmemTile(DType::F32, sType, offset, "attn_s_tmem");
      Value* pTile =
          plan.transposed ? nullptr : tmemTile(pType.elem, pType, offset + sColumns, "attn_p_tmem");
      Value* oTile = tmemTile(DType::F32, oType, offset + sColumns + pColumns, "attn_o_tmem");
      attentionTmem_.push_back({&outer, plan.transposed, sType, pType, oType, sTile, pTile, oTile});
      ir::spliceOps(top, fn_.body, 0);
      reused = static_cast<int>(attentionTmem_.size()) - 1;
    }
    Value* sTmem = attentionTmem_[size_t(reused)].sTmem;
    Value* pTmem = attentionTmem_[size_t(reused)].pTmem;
    Value* oTmem = attentionTmem_[size_t(reused)].oTmem;

    meetBeforeNestedLoop(plan);
    StagedQ q = stageQ(plan);
    Block pre;
    ir::Builder b(&pre);
    b.setLoc(loop.loc());
    Value* bars = b.create1(OpCode::AllocBarriers, {}, Type::barrier(1),
                            {ir::attr::AllocBarriers::make::arriveCount(1)});
    bars->name = "attn_mma_done";
    Value* done = b.localView(bars, b.i32(0));
    b.create(OpCode::LocalStore, {oTmem, loop.operand(3 + plan.accIter)}, {}, {});
    // The transposed form's P^T (the second MMA's B) goes through shared memory.
    Value* pShared = nullptr;
    if (plan.transposed) {
      Value* buffer = b.create1(OpCode::LocalAlloc, {}, Type::buffer(pType.elem, pType.shape, 1),
                                {ir::attr::LocalAlloc::make::storage("smem")});
      buffer->name = "attn_p_t";
      pShared = b.localView(buffer, b.i32(0));
      shared_.add(&outer, pBytes(plan));
    }
    ir::spliceOps(pre, outer, ir::positionOf(outer, &loop));

    const char* const names[2] = {"pipeline_k", "pipeline_v"};
    Pipeline p = startPipeline(plan, plan.stages - 1, names);
    if (q.bar) {
      b.setInsertionBlock(&pre);
      b.create(OpCode::BarrierWait, {q.bar, b.i32(0)}, {},
               {ir::attr::BarrierWait::make::hasPred(false)});
      ir::spliceOps(pre, outer, ir::positionOf(outer, &loop));
    }
    auto [count, countResult] = addMmaCounter(loop, "attn_mma_count");
    auto parity = [&](ir::Builder& at, Value* k) { return at.binary(OpCode::And, k, at.i32(1)); };

    // ---- S = Q K^T, waited for; the refill; S read back ----
    Block mid;
    b.setInsertionBlock(&mid);
    b.setLoc(plan.scoreDot->loc());
    waitForSlot(b, p, 0);
    Value* kSlot = b.localView(p.buffers[0], p.slot);
    Value* overwrite = b.constInt(0, Type::scalar(DType::I1));
    Value* sA = plan.transposed ? kSlot : q.view;
    Value* sB = localTrans(b, plan.transposed ? q.view : kSlot);
    b.create(
        OpCode::Tcgen05Mma, {sA, sB, sTmem, overwrite, done}, {},
        {ir::attr::Tcgen05Mma::make::hasUseAcc(true), ir::attr::Tcgen05Mma::make::hasPred(false)});
    b.create(OpCode::BarrierWait, {done, parity(b, count)}, {},
             {ir::attr::BarrierWait::make::hasPred(false)});
    ValueMap map = refill(b, plan, p, plan.scoreDot->loc());
    yieldPipeline(b, plan, p, map);
    Value* scores = b.create1(OpCode::LocalLoad, {sTmem}, sType);
    scores->name = plan.scoreDot->result()->name;
    replaceAllUses(body, plan.scoreDot->result(), scores);
    ir::spliceOps(mid, body, ir::positionOf(body, plan.scoreDot));

    // ---- O where the loop reads it: loaded before its first reader ----
    Value* oArg = body.arg(plan.accIter + 1);
    const bool oRead = plan.dot->operand(2) != oArg || usesOf(oArg) > 1;
    if (oRead) {
      size_t first = ir::positionOf(body, plan.dot);
      for (size_t i = ir::positionOf(body, scores->def()) + 1; i < first; ++i)
        if (reads(*body.ops()[i], oArg)) {
          first = i;
          break;
        }
      Block load;
      b.setInsertionBlock(&load);
      b.setLoc(plan.dot->loc());
      Value* o = b.create1(OpCode::LocalLoad, {oTmem}, oType);
      o->name = oArg->name;
      replaceAllUses(body, oArg, o);
      ir::spliceOps(load, body, first);
    }

    // ---- P V into O ----
    Block late;
    b.setInsertionBlock(&late);
    b.setLoc(plan.dot->loc());
    if (plan.tma) waitForSlot(b, p, 1);
    if (oRead) b.create(OpCode::LocalStore, {oTmem, plan.dot->operand(2)}, {}, {});
    storeP(body, plan.transposed ? pShared : pTmem, pValue,
           ir::positionOf(body, scores->def()) + 1);
    // P^T written to shared memory by the generic proxy is read by the MMA's async proxy.
    if (plan.transposed)
      b.create(OpCode::Fence, {}, {}, {ir::attr::Fence::make::kind("async_shared")});
    b.create(OpCode::DebugBarrier, {}, {}, {});
    Value* v = b.localView(p.buffers[1], p.slot);
    if (plan.bTrans || plan.transposed) v = localTrans(b, v);
    Value* pvA = plan.transposed ? v : pTmem;
    Value* pvB = plan.transposed ? pShared : v;
    b.create(
        OpCode::Tcgen05Mma, {pvA, pvB, oTmem}, {},
        {ir::attr::Tcgen05Mma::make::hasUseAcc(false), ir::attr::Tcgen05Mma::make::hasPred(false)});
    body.terminator()->addOperand(b.binary(OpCode::Add, count, b.i32(1)));
    ir::spliceOps(late, body, ir::positionOf(body, plan.dot));
    // O passes through the loop's registers unchanged, and is dropped from them below.
    body.terminator()->setOperand(plan.accIter, oArg);

    ir::eraseOp(body, plan.dot);
    ir::eraseOp(body, plan.scoreDot);
    ir::eraseOp(body, plan.kTrans);
    if (plan.bTrans) ir::eraseOp(body, plan.bTrans);
    ir::eraseOp(body, plan.loads[0]);
    ir::eraseOp(body, plan.loads[1]);

    // ---- after the loop: the last P V has completed; read O ----
    Block post;
    b.setInsertionBlock(&post);
    b.setLoc(loop.loc());
    b.create(OpCode::Tcgen05Commit, {done}, {}, {ir::attr::Tcgen05Commit::make::hasPred(false)});
    b.create(OpCode::BarrierWait, {done, parity(b, loop.result(countResult))}, {},
             {ir::attr::BarrierWait::make::hasPred(false)});
    if (!plan.tma)
      b.create(OpCode::AsyncWaitGroup, {}, {}, {ir::attr::AsyncWaitGroup::make::pendings(0)});
    readAccumulatorAfterLoop(plan, b, post, oTmem, oType);
  }

  /// Several dots (analyzeMultiDot). The invariant A operands are stored once before the
  /// prologue; in iteration i:
  ///
  ///   async_wait_group(S - 2)                    both tiles of iteration i have landed
  ///   d0 = async_dot(A0, slot view (or its local_trans), acc0)
  ///   copies of iteration i + S - 1 -> slot (i - 1) mod S; commit
  ///   d0 = async_dot_wait(0, d0)
  ///   ... each later dot: async_dot from the slot, async_dot_wait(0) ...
  ///
  /// Every MMA of iteration i - 1 was retired within it, before the CTA barrier of iteration
  /// i's wait, so slot (i - 1) mod S is free.
  void rewriteMultiDot(const Plan& plan) {
    Op& loop = *plan.loop;
    Block& body = *loop.region(0);
    Block& outer = *loop.parentBlock();

    Block pre;
    ir::Builder b(&pre);
    b.setLoc(loop.loc());
    std::unordered_map<const Value*, Value*> staged;
    for (size_t j = 0; j < plan.invariantA.size(); ++j) {
      Value* a = plan.invariantA[j];
      // An earlier loop of the same block stored it already (the masked and unmasked loops of
      // causal attention's backward pass).
      if (const StagedInvariant* done = stagedIn(a, outer)) {
        staged[a] = done->view;
        continue;
      }
      // The buffer shares its bytes with those of earlier loops' invariants of the same role,
      // which are dead now (the barrier pass orders the new store after their last reads).
      const int64_t id = plan.invariantAlias[j];
      for (auto it = stagedInvariants_.begin(); it != stagedInvariants_.end();)
        it = it->second.alias == id ? stagedInvariants_.erase(it) : std::next(it);
      Value* buffer = b.create1(
          OpCode::LocalAlloc, {}, Type::buffer(a->type().elem, a->type().shape, 1),
          {ir::attr::LocalAlloc::make::storage("smem"), ir::attr::LocalAlloc::make::alias(id)});
      buffer->name = "pipeline_invariant";
      Value* view = b.localView(buffer, b.i32(0));
      b.create(OpCode::LocalStore, {view, a}, {}, {});
      staged[a] = view;
      stagedInvariants_[a] = {view, id};
      growAlias(id, a->type().shape[0] * a->type().shape[1] * ir::byteWidth(a->type().elem));
    }
    ir::spliceOps(pre, outer, ir::positionOf(outer, &loop));

    const char* const names[2] = {"pipeline_b0", "pipeline_b1"};
    Pipeline p = startPipeline(plan, plan.stages - 1, names);
    for (int i = 0; i < 2; ++i) {
      const Type& t = plan.loads[i]->result()->type();
      growAlias(plan.ringAlias + i, plan.stages * t.shape[0] * t.shape[1] * ir::byteWidth(t.elem));
    }

    // Accumulators the loop only yields (dV and dK, dQ) are not retired where they stand: by
    // the next dot's wait in the iteration, or, for the last dot, by the first dot's wait in
    // the next iteration (carriedInFlight; the copies then go out after that wait, since the
    // MMA in flight reads slot (i - 1) mod S) and after the loop.
    // Where the accumulators alone take more than half of a thread's registers (attention's
    // backward at head dim 128: dK and dV 128 each), ptxas serializes the wgmmas anyway and
    // MMAs left in flight only add spills: each is retired where it stands.
    int64_t carriedRegs = 0;
    for (const Op* dot : plan.dots)
      if (onlyYielded(body, dot->result()))
        carriedRegs += dot->result()->type().numElements() / (32 * fn_.numWarps);
    const bool lazy = carriedRegs <= 128;
    const int carried = lazy && plan.dots.size() > 1 && carriesInFlightCheaply(plan)
                            ? carriedInFlight(loop, plan.dots.back(), plan.dots.front())
                            : -1;
    // Which dots are left in flight: a middle one only when a later dot's wait retires it.
    std::vector<bool> leftInFlight(plan.dots.size(), false);
    bool waitFollows = carried < 0;
    for (size_t d = plan.dots.size(); d-- > 1 && lazy;) {
      const bool last = d + 1 == plan.dots.size();
      leftInFlight[d] =
          last ? carried >= 0 : waitFollows && onlyYielded(body, plan.dots[d]->result());
      if (!last && !leftInFlight[d]) waitFollows = true;
    }
    std::vector<Value*> inFlight; // issued, yielded only, retired by the next wait
    for (size_t d = 0; d < plan.dots.size(); ++d) {
      Op* dot = plan.dots[d];
      const bool first = d == 0;
      const bool last = d + 1 == plan.dots.size();
      Block mid;
      b.setInsertionBlock(&mid);
      b.setLoc(dot->loc());
      if (first) waitForSlot(b, p, 0);
      Value* a = dot->operand(0);
      auto it = staged.find(a);
      if (it != staged.end()) a = it->second;
      Value* bOperand = dot->operand(1);
      bool transposed = bOperand->def()->code() == OpCode::Permute;
      const Op* load = transposed ? bOperand->def()->operand(0)->def() : bOperand->def();
      const int which = load == plan.loads[0] ? 0 : 1;
      Value* bv = b.localView(p.buffers[which], p.slot);
      // A transposed copy holds the transpose of the loaded tile.
      if (transposed != plan.copyTransposed[which]) bv = localTrans(b, bv);
      Value* issued = b.create1(OpCode::AsyncDot, {a, bv, dot->operand(2)}, dot->result()->type(),
                                asyncDotAttrs(*dot));
      if (leftInFlight[d]) {
        // The yield names the MMA in flight; the wait that retires it renames it there.
        replaceAllUses(body, dot->result(), issued);
        if (!last) inFlight.push_back(issued);
        ir::spliceOps(mid, body, ir::positionOf(body, dot));
        ir::eraseOp(body, dot);
        continue;
      }
      ValueMap map;
      if (first && carried < 0) map = refill(b, plan, p, dot->loc());
      std::vector<Value*> waited{issued};
      if (first && carried >= 0) waited.push_back(body.arg(static_cast<unsigned>(carried) + 1));
      waited.insert(waited.end(), inFlight.begin(), inFlight.end());
      std::vector<Type> waitedTypes;
      for (Value* w : waited) waitedTypes.push_back(w->type());
      Op* wait = b.create(OpCode::AsyncDotWait, waited, waitedTypes,
                          {ir::attr::AsyncDotWait::make::pendings(0)});
      wait->result()->name = dot->result()->name;
      replaceAllUses(body, dot->result(), wait->result());
      for (unsigned w = 1; w < waited.size(); ++w) {
        wait->result(w)->name = waited[w]->name;
        replaceAllUses(body, waited[w], wait->result(w));
      }
      inFlight.clear();
      if (first && carried >= 0) map = refill(b, plan, p, dot->loc());
      if (first) yieldPipeline(b, plan, p, map);
      ir::spliceOps(mid, body, ir::positionOf(body, dot));
      ir::eraseOp(body, dot);
    }
    if (carried >= 0) retireAfterLoop(b, loop, static_cast<unsigned>(carried));
    for (const Op* t : plan.loadTransposes) ir::eraseOp(body, t);
    ir::eraseOp(body, plan.loads[0]);
    ir::eraseOp(body, plan.loads[1]);
    issueLoadsEarly(body);

    // Drain the (masked-off) copies issued past the end.
    Block post;
    b.setInsertionBlock(&post);
    b.setLoc(loop.loc());
    b.create(OpCode::AsyncWaitGroup, {}, {}, {ir::attr::AsyncWaitGroup::make::pendings(0)});
    ir::spliceOps(post, outer, ir::positionOf(outer, &loop) + 1);
  }

  /// Moves the loads the copies left in a multi-dot loop (attention backward's rows of m and
  /// Di) up to where their addresses are ready, ahead of the wait for the slot and the first
  /// MMAs, so that their latency overlaps them instead of stalling the dot that reads them.
  /// Only in a body that writes no global memory (every op pure, a load, or the pipeline's own
  /// shared-memory traffic), where a load may run earlier with the same result.
  static void issueLoadsEarly(Block& body) {
    for (const auto& op : body.ops()) {
      switch (op->code()) {
      case OpCode::Load:
      case OpCode::AsyncLoad:
      case OpCode::AsyncCommitGroup:
      case OpCode::AsyncWaitGroup:
      case OpCode::AsyncDot:
      case OpCode::AsyncDotWait:
      case OpCode::LocalView:
      case OpCode::LocalTrans:
      case OpCode::Yield:
        continue;
      default:
        if (op->numRegions() != 0 || !isPure(*op)) return;
      }
    }
    auto& ops = body.ops();
    for (size_t i = 0; i < ops.size(); ++i) {
      if (ops[i]->code() != OpCode::Load || ir::attr::Load::isVolatile(*ops[i])) continue;
      // The body ops its operands come from; the pure ones (its address arithmetic) move up
      // with it, to just after the last of the others.
      std::unordered_set<const Op*> deps;
      std::vector<const Value*> work(ops[i]->operands().begin(), ops[i]->operands().end());
      while (!work.empty()) {
        const Op* d = work.back()->def();
        work.pop_back();
        if (!d || d->parentBlock() != &body || !deps.insert(d).second) continue;
        work.insert(work.end(), d->operands().begin(), d->operands().end());
      }
      auto movable = [&](const Op& op) { return op.numRegions() == 0 && isPure(op); };
      size_t to = 0;
      for (size_t j = 0; j < i; ++j)
        if (deps.count(ops[j].get()) && !movable(*ops[j])) to = j + 1;
      std::vector<std::unique_ptr<Op>> moving;
      for (size_t j = to; j <= i; ++j)
        if (j == i || deps.count(ops[j].get())) moving.push_back(std::move(ops[j]));
      if (moving.size() == i - to + 1) { // already in place
        for (size_t j = to; j <= i; ++j) ops[j] = std::move(moving[j - to]);
        continue;
      }
      ops.erase(std::remove(ops.begin() + static_cast<std::ptrdiff_t>(to),
                            ops.begin() + static_cast<std::ptrdiff_t>(i) + 1, nullptr),
                ops.begin() + static_cast<std::ptrdiff_t>(i) + 1);
      ops.insert(ops.begin() + static_cast<std::ptrdiff_t>(to),
                 std::make_move_iterator(moving.begin()), std::make_move_iterator(moving.end()));
    }
  }

  /// Shared memory the rewrites so far hold beside a loop `loop`.
  int64_t sharedUsedBeside(const Op& loop) const { return shared_.heldBeside(loop.parentBlock()); }
  /// Where in the pipeliner's tensor-memory region `columns` more for `loop` would go.
  int64_t tmemOffset(const Op& loop, int64_t columns) const {
    return tmem_.firstFit(loop.parentBlock(), columns, 32);
  }
  /// A tensor-memory tile of the pipeliner's region at column `offset` (the kernel's
  /// tcgen05.alloc takes the region's columns once; codegen/TlxTmem.cpp).
  static Value* allocTmem(ir::Builder& b, DType elem, const std::vector<int64_t>& shape,
                          int64_t offset, const char* name) {
    Value* v =
        b.create1(OpCode::LocalAlloc, {}, Type::buffer(elem, shape, 1, ir::MemorySpace::Tmem),
                  {ir::attr::LocalAlloc::make::storage("tmem"),
                   ir::attr::LocalAlloc::make::alias(kPipelineTmemAlias),
                   ir::attr::LocalAlloc::make::aliasOffset(offset)});
    v->name = name;
    return v;
  }

  ir::Function& fn_;
  PipelineBudget& budget_;
  std::unordered_map<const Value*, int> uses_;
  /// Contiguity of load addresses, computed once before the first rewrite that needs it.
  std::optional<layout::AxisInfoAnalysis> axisInfo_;
  /// Which values and branches every thread agrees on (for the ledgers).
  ir::ThreadUniformity uniformity_;
  /// Shared memory the rewrites allocated so far, and the tensor-memory columns of their
  /// accumulators (placed at offsets in one storage-alias region, kPipelineTmemAlias).
  BranchLedger shared_, tmem_;
  /// sm_100a: tcgen05.mma into tensor memory instead of wgmma (rewriteTcgen05).
  bool tcgen05_ = false;
  /// The K / V buffers of TMA attention loops, which a later loop of the same block with the
  /// same tiles reuses (causal attention's second loop): its results `slotResult` and
  /// `slotResult + 1` are the slot and phase it ended on.
  struct TmaRing {
    Block* outer;
    Value* buffers[2];
    Value* bars[2];
    Type types[2];
    int stages;
    Op* loop;
    unsigned slotResult;
  };
  std::vector<TmaRing> tmaRings_;
  /// The tensor memory of the attention loops rewritten for sm_100a: S, P and O's tiles (their
  /// types, then the TMEM buffers), by the block the loop is in.
  struct AttentionTmem {
    const Block* outer;
    bool transposed;
    Type s, p, o;
    Value *sTmem, *pTmem, *oTmem; // pTmem: null when P goes through shared memory
  };
  std::vector<AttentionTmem> attentionTmem_;
  /// Q's buffer of a TMA attention loop, by Q, with the block it is ready in (the loop's).
  struct QBuffer {
    Value* view;
    const Block* block;
  };
  std::unordered_map<const Value*, QBuffer> tmaQViews_;
  /// The buffers rewriteMultiDot stored loop-invariant dot operands into, by operand, with
  /// their storage-alias ids; and the bytes of each of its alias regions so far.
  struct StagedInvariant {
    Value* view;
    int64_t alias;
  };
  std::unordered_map<const Value*, StagedInvariant> stagedInvariants_;
  std::unordered_map<int64_t, int64_t> aliasBytes_;

  /// The buffer holding `a` that an earlier loop of `outer` stored, if one did.
  const StagedInvariant* stagedIn(const Value* a, const Block& outer) const {
    auto it = stagedInvariants_.find(a);
    return it != stagedInvariants_.end() && it->second.view->def()->parentBlock() == &outer
               ? &it->second
               : nullptr;
  }
  /// What alias region `id` grows by to hold `bytes`.
  int64_t aliasGrowth(int64_t id, int64_t bytes) const {
    auto it = aliasBytes_.find(id);
    return std::max<int64_t>(0, bytes - (it == aliasBytes_.end() ? 0 : it->second));
  }
  void growAlias(int64_t id, int64_t bytes) {
    // An alias region is one tenant however many loops share it: held beside every loop.
    shared_.add(&fn_.body, aliasGrowth(id, bytes));
    aliasBytes_[id] = std::max(aliasBytes_[id], bytes);
  }
};

} // namespace

/// The shapes the sm_90a async_dot lowering takes (wgmma from NVMMA-swizzled buffers): fp16 /
/// bf16 or fp8 (e4m3 / e5m2, mixed) into fp32, the fp8 ones accumulating in place (no
/// max_num_imprecise_acc partial accumulator, see ir/DotTypes.h) or, with `promoted`, into one
/// partial accumulator spanning the whole K, fp16 into fp16 (wgmma's f16 accumulator, packed
/// words), or int8 / uint8 into int32; 8-bit operands read K-major (checked by the callers).
bool wgmmaShaped(const ir::Op& dot, int numWarps, bool promoted) {
  const Type& at = dot.operand(0)->type();
  const Type& bt = dot.operand(1)->type();
  const Type& rt = dot.result()->type();
  if (at.shape.size() != 2 || bt.shape.size() != 2 || rt.shape.size() != 2) return false;
  bool sixteen = (at.elem == DType::F16 || at.elem == DType::BF16) && bt.elem == at.elem;
  const int64_t span = ir::fp8PartialAccumulatorSpan(dot);
  bool fp8 = ir::isFp8Dot(at, bt) && !ir::fp8DotAvoidsWgmma(dot) &&
             (span == 0 || (promoted && span == at.shape.back()));
  bool int8 = ir::isInt8Dot(at, bt, rt);
  bool halfAcc = ir::isHalfAccumulateDot(at, bt, rt);
  if (!int8 && !halfAcc && ((!sixteen && !fp8) || rt.elem != DType::F32)) return false;
  int64_t M = at.shape[0], K = at.shape[1], N = bt.shape[1];
  return numWarps % 4 == 0 && M % 64 == 0 && N % 16 == 0 && K % (sixteen ? 16 : 32) == 0 &&
         isPowerOf2(M) && isPowerOf2(N) && isPowerOf2(K);
}

int pipelineDotLoops(ir::Function& fn, bool tensorMemory, PipelineBudget* budget) {
  PipelineBudget defaults;
  int n = Pipeliner(fn, tensorMemory, budget ? *budget : defaults).run();
  if (n) verify(fn);
  return n;
}

} // namespace ww::transforms
