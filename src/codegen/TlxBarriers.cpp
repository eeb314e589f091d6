// Lowering of TLX barriers (sm_90a and later): mbarrier init, expect-bytes, wait and arrive,
// named barriers and proxy fences.
#include "codegen/Lowering.h"
#include "ir/OpAttrs.h"
#include "ir/OpTraits.h"

#include <algorithm>
#include <bit>
#include <stdexcept>

namespace ww::codegen {

using ir::DType;
using ir::OpCode;
using layout::LinearLayout;

namespace {

/// Whether `v` is known to be 0 or 1: a constant, `x & 1`, or `^` / `|` of two such.
bool isParity(const ir::Value* v, int depth = 0) {
  if (std::optional<int64_t> c = ir::constantInt(v)) return *c == 0 || *c == 1;
  const ir::Op* def = v->def();
  if (!def || depth > 4 || def->numOperands() != 2) return false;
  if (def->code() == OpCode::And)
    return isParity(def->operand(0), depth + 1) || isParity(def->operand(1), depth + 1);
  if (def->code() == OpCode::Xor || def->code() == OpCode::Or)
    return isParity(def->operand(0), depth + 1) && isParity(def->operand(1), depth + 1);
  return false;
}

/// The op that created the barriers a barrier view comes from.
const ir::Op* barrierRoot(const ir::Value* v) {
  return barrierArray(v)->def();
}

} // namespace

const ir::Value* barrierArray(const ir::Value* v) {
  while (v->def() && v->def()->code() == OpCode::LocalView && v->def()->numOperands())
    v = v->def()->operand(0);
  return v;
}

namespace {

/// Whether `bar` is (a view of) a barrier array of alloc_warp_barrier: each thread arrives for
/// itself, with no meeting of the task first.
bool isWarpBarrier(const ir::Value* bar) {
  const ir::Op* root = barrierRoot(bar);
  return root && root->code() == OpCode::AllocBarriers && ir::attr::AllocBarriers::warp(*root);
}

} // namespace

bool FunctionLowering::followsPlainArrive(const ir::Op& op) const {
  const ir::Block* block = op.parentBlock();
  size_t at = ir::positionOf(*block, &op);
  while (at-- > 0) {
    const ir::Op& prev = *block->ops()[at];
    // Its lowering met the task's threads (or followed one that did).
    if (prev.code() == OpCode::BarrierArrive) return !isWarpBarrier(prev.operand(0));
    if (!ir::hasTraits(prev.code(), ir::trait::Pure) || prev.numRegions()) return false;
  }
  return false;
}

namespace {

/// Whether another alloc_barriers follows `op` in its block with only allocations, constants and
/// other pure ops between them (none of which can use a barrier).
bool anotherBarrierInitFollows(const ir::Op& op) {
  const ir::Block* block = op.parentBlock();
  if (!block) return false;
  const auto& ops = block->ops();
  for (size_t i = ir::positionOf(*block, &op) + 1; i < ops.size(); ++i) {
    OpCode c = ops[i]->code();
    if (c == OpCode::AllocBarriers) return true;
    if (c != OpCode::LocalAlloc && !ir::hasTraits(c, ir::trait::Pure)) return false;
  }
  return false;
}

} // namespace

void FunctionLowering::lowerTlxBarrier(const ir::Op& op) {
  if (options_.target == Target::SM80 && op.code() != OpCode::NamedBarrierWait &&
      op.code() != OpCode::NamedBarrierArrive)
    raiseError(op.loc(), std::string("'") + op.name() +
                             "' needs the mbarriers and async proxy of sm_90a or sm_100a");
  auto guarded = [&](const std::string& pred, unsigned predIndex, bool has) {
    if (!has) return pred;
    std::string p = b_.materialize(operand(op, predIndex).at(0), RegClass::Pred);
    if (pred.empty()) return p;
    return b_.pure("and.pred", RegClass::Pred, {pred, p});
  };
  switch (op.code()) {
  case OpCode::AllocBarriers: {
    const layout::SharedAllocation* a = layouts_.sharedAllocation(op.result());
    if (!a) throw std::logic_error("codegen: alloc_barriers without an allocation");
    int64_t arriveCount = ir::attr::AllocBarriers::arriveCount(op);
    if (arriveCount < 1 || arriveCount >= (int64_t(1) << 20))
      raiseError(op.loc(), "alloc_barriers arrive_count " + std::to_string(arriveCount) +
                               " is out of range; use 1 to 2^20-1");
    std::string leader = electedThread();
    std::string base = sharedAddress("0");
    // Each barrier's address in a register of its own (as Triton's PTX has it): tools that
    // match the inits in the PTX tell barriers apart by register.
    for (int64_t i = 0; i < a->count; ++i)
      b_.inst("mbarrier.init.shared::cta.b64",
              {bracketed(b_.pure("add.s32", RegClass::B32,
                                 {base, immInt(a->offset + i * a->bytesPerBuffer)})),
               immInt(arriveCount)},
              leader);
    // Kernels allocate their barriers one group after another: the last group's fence and
    // meeting publish them all (as Triton initializes every barrier before one fence), so a group
    // that another follows, with nothing between that could use a barrier, leaves them to it.
    if (anotherBarrierInitFollows(op)) {
      agentSyncNotNeeded(); // the following group's meeting comes before any use
      return bind(op.result(), {immInt(a->offset)});
    }
    // The initialized barriers become visible to the async proxy (TMA complete_tx) and to the
    // other threads before anyone uses them: the release fence, then a meeting. In a cluster
    // launch the other CTAs may arrive on them remotely, so every CTA of the cluster meets (the
    // cluster barrier, as CUTLASS's cluster pipelines have it); within one CTA the CTA's barrier
    // (as CUTLASS's one-CTA pipelines, Triton and the tl TMA path have it: no proxy fence, whose
    // first use TLX's cluster-launch-control kernels expect after the CLC query).
    b_.inst("fence.mbarrier_init.release.cluster", {});
    if (fn_.numCtas > 1 && !taskWarps_) {
      std::string aligned = op.parentBlock() == &fn_.body ? ".aligned" : "";
      b_.inst("barrier.cluster.arrive.release" + aligned, {});
      b_.inst("barrier.cluster.wait.acquire" + aligned, {});
      agentSynced();
    } else {
      barrier();
    }
    return bind(op.result(), {immInt(a->offset)});
  }
  case OpCode::BarrierExpectBytes: {
    std::string bar = barrierAddress(op, 0);
    std::string bytes = operand(op, 1).at(0);
    std::string pred = guarded(electedThread(), 2, ir::attr::BarrierExpectBytes::hasPred(op));
    return b_.inst("mbarrier.arrive.expect_tx.shared::cta.b64", {"_", bar, bytes}, pred);
  }
  case OpCode::BarrierWait: {
    std::string bar = barrierAddress(op, 0);
    // The parity to wait for is the phase's lowest bit, as the interpreter reads it (the
    // specializer refuses constants other than 0 and 1; try_wait.parity takes only those).
    std::string phase = operand(op, 1).at(0);
    if (std::optional<int64_t> c = ir::constantInt(op.operand(1)))
      phase = immInt(*c & 1);
    else if (!isParity(op.operand(1)))
      phase = b_.pure("and.b32", RegClass::B32, {b_.materialize(phase, RegClass::B32), "1"});
    bool hasPred = ir::attr::BarrierWait::hasPred(op);
    std::string skip = b_.newLabel("wait_done");
    if (hasPred) {
      std::string p = b_.materialize(operand(op, 2).at(0), RegClass::Pred);
      b_.inst("bra", {skip}, p, /*negateGuard=*/true);
    }
    waitForBarrierPhase(op, bar, phase);
    b_.label(skip);
    return;
  }
  case OpCode::BarrierArrive: {
    bool remote = ir::attr::BarrierArrive::hasRemoteCtaRank(op);
    std::string bar = barrierAddress(op, 0);
    bool warpBarrier = isWarpBarrier(op.operand(0));
    int64_t count = ir::attr::BarrierArrive::arriveCount(op);
    unsigned predIndex = remote ? 2 : 1;
    bool hasPred = ir::attr::BarrierArrive::hasPred(op);
    std::string opcode = "mbarrier.arrive.shared::cta.b64";
    if (remote) {
      // The peer CTA's barrier at the same offset of its shared memory (mapa), arrived on with
      // PTX's default semantics, as Triton lowers TLX's remote arrive and CUTLASS's cluster
      // pipelines release a stage: an explicit .release.cluster puts MEMBAR.ALL.GPU before every
      // arrive in the SASS, which made the 2-CTA GEMMs 2.7x slower on an H100 (session 34).
      std::string rank = b_.materialize(operand(op, 1).at(0), RegClass::B32);
      std::string local = sharedAddress(b_.materialize(regsOf(op.operand(0)).at(0), RegClass::B32));
      std::string peer = b_.pure("mapa.shared::cluster.u32", RegClass::B32, {local, rank});
      bar = bracketed(peer);
      opcode = "mbarrier.arrive.shared::cluster.b64";
    }
    std::vector<std::string> operands = {"_", bar};
    if (count != 1) operands.push_back(immInt(count));
    if (warpBarrier) {
      agentSyncNotNeeded(); // every thread arrives for itself
      return b_.inst(opcode, operands, guarded({}, predIndex, hasPred));
    }
    // A plain barrier counts one arrival per task (per CTA outside async tasks), as TLX lowers
    // it: the task's threads meet, so all their earlier work is done, then its first thread
    // arrives. Straight after another such arrive (pure ops between: the next barrier's view)
    // the threads have done nothing since they met: a consumer releasing its A and B stages
    // meets once, not twice.
    if (followsPlainArrive(op))
      agentSynced(); // the previous arrive's meeting stands for this one
    else
      barrier();
    std::string leader = electedThread();
    return b_.inst(opcode, operands, guarded(leader, predIndex, hasPred));
  }
  case OpCode::NamedBarrierWait:
  case OpCode::NamedBarrierArrive: {
    // An id or count the clean-up passes folded to a constant is checked as the specializer
    // checks literals (ptxas refuses bar.sync 1048584, ...).
    std::optional<int64_t> constId = ir::constantInt(op.operand(0));
    std::optional<int64_t> constCount = ir::constantInt(op.operand(1));
    if (constId && (*constId < 0 || *constId > 15))
      raiseError(op.loc(), "named barrier ids run from 0 to 15, got " + std::to_string(*constId));
    if (constCount && (*constCount <= 0 || *constCount % 32 != 0 || *constCount > 1024))
      raiseError(op.loc(), "a named barrier's num_threads must be a multiple of 32 (whole warps) "
                           "from 32 to 1024 (a CTA's threads), got " +
                               std::to_string(*constCount));
    // Immediates or i32 registers: both forms are valid bar operands.
    std::string id = operand(op, 0).at(0);
    std::string count = operand(op, 1).at(0);
    return b_.inst(op.code() == OpCode::NamedBarrierWait ? "bar.sync" : "bar.arrive", {id, count});
  }
  case OpCode::Fence: {
    std::string kind = ir::attr::Fence::kind(op);
    if (kind == "async_shared") return b_.inst("fence.proxy.async.shared::cta", {});
    if (kind == "mbarrier_init_cluster") return b_.inst("fence.mbarrier_init.release.cluster", {});
    // tlx.fence("gpu") / ("sys"): orders this thread's memory accesses for the device or the
    // whole system (CUDA's __threadfence / __threadfence_system).
    if (kind == "gpu" || kind == "sys") return b_.inst("fence.acq_rel." + kind, {});
    raiseError(op.loc(), "fence kind '" + kind +
                             "' is not supported; use \"async_shared\" or "
                             "\"mbarrier_init_cluster\"");
  }
  default:
    throw std::logic_error("codegen: not a TLX barrier op");
  }
}

} // namespace ww::codegen
