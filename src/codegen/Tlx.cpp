// Lowering of TLX shared-memory buffers and barriers (sm_90a and later): local_alloc/local_view/
// local_load/local_store, mbarriers, named barriers and proxy fences.
#include "codegen/Lowering.h"

#include <algorithm>
#include <bit>
#include <stdexcept>

namespace ww::codegen {

using ir::DType;
using ir::OpCode;
using layout::LinearLayout;

namespace {

/// The op that created the barriers a barrier view comes from (through local_view ops).
const ir::Op* barrierRoot(const ir::Value* v) {
  const ir::Op* def = v->def();
  while (def && def->code() == OpCode::LocalView && def->numOperands())
    def = def->operand(0)->def();
  return def;
}

/// `[address]`, built by appending (GCC 12 warns falsely on "[" + temporary string).
std::string bracketed(const std::string& address) {
  std::string out = "[";
  out += address;
  out += ']';
  return out;
}

} // namespace

bool isPlainBuffer(const ir::Value* v) {
  const ir::Op* def = v->def();
  while (def && def->code() == OpCode::LocalView) def = def->operand(0)->def();
  return def && def->code() == OpCode::LocalAlloc;
}

const layout::SharedAllocation& FunctionLowering::allocationOf(const ir::Op& op,
                                                               unsigned operandIndex) {
  const layout::SharedAllocation* a = layouts_.sharedAllocation(op.operand(operandIndex));
  if (!a)
    raiseError(op.loc(), std::string("'") + op.name() +
                             "' needs a shared-memory buffer or barrier from tlx.local_alloc or "
                             "tlx.alloc_barriers; tensor-memory buffers are not supported on " +
                             targetName(options_.target));
  return *a;
}

std::string FunctionLowering::electedThread() {
  return b_.pure("setp.eq.u32", RegClass::Pred, {tid(), "0"});
}

std::string FunctionLowering::barrierAddress(const ir::Op& op, unsigned i) {
  allocationOf(op, i);
  std::string offset = b_.materialize(regsOf(op.operand(i)).at(0), RegClass::B32);
  return bracketed(sharedAddress(offset));
}

void FunctionLowering::lowerTlxBuffer(const ir::Op& op) {
  if (options_.target == Target::SM80)
    raiseError(op.loc(), std::string("'") + op.name() +
                             "' is supported on sm_90a and sm_100a only; on sm_80 stage data "
                             "with tl.load/tl.store");
  switch (op.code()) {
  case OpCode::LocalAlloc: {
    const layout::SharedAllocation* a = layouts_.sharedAllocation(op.result());
    if (!a)
      raiseError(op.loc(), "local_alloc in tensor memory is not supported on " +
                               std::string(targetName(options_.target)) +
                               "; use tlx.storage_kind.smem");
    usesShared_ = true;
    return bind(op.result(), {immInt(a->offset)});
  }
  case OpCode::LocalView: {
    const layout::SharedAllocation& a = allocationOf(op, 0);
    std::string base = b_.materialize(regsOf(op.operand(0)).at(0), RegClass::B32);
    std::string index = b_.materialize(operand(op, 1).at(0), RegClass::B32);
    // Views of one buffer of a multi-buffered allocation: base + index * bytesPerBuffer.
    return bind(op.result(),
                {b_.pure("mad.lo.s32", RegClass::B32, {index, immInt(a.bytesPerBuffer), base})});
  }
  case OpCode::LocalTrans: {
    // Same bytes, transposed indexing: only async_dot reads through it (as a K-major B).
    allocationOf(op, 0);
    if (op.intsAttr("order") != std::vector<int64_t>{1, 0})
      raiseError(op.loc(), "local_trans is supported for 2-D buffers (order [1, 0]) only");
    return bind(op.result(), regsOf(op.operand(0)));
  }
  case OpCode::LocalLoad:
  case OpCode::LocalStore: {
    if (!isPlainBuffer(op.operand(0)))
      raiseError(op.loc(), std::string("'") + op.name() +
                               "' through a transposed, sliced or reinterpreted view is not "
                               "supported by the " +
                               targetName(options_.target) +
                               " PTX backend yet; load or store the buffer itself");
    const layout::SharedAllocation& a = allocationOf(op, 0);
    if (a.layout.getTotalOutDimSize() == 0 || a.layout.numOutDims() == 0)
      raiseError(op.loc(), std::string("'") + op.name() + "' of a buffer of shape " +
                               op.operand(0)->type().str() +
                               " is not supported; use power-of-two dims");
    LinearLayout coordsToOffset = a.layout.invert();
    OffsetFn offsetOf = [&coordsToOffset](const std::vector<int32_t>& c) -> int64_t {
      return coordsToOffset.apply(c).at(0);
    };
    std::string base = b_.materialize(regsOf(op.operand(0)).at(0), RegClass::B32);
    DType elem = op.operand(0)->type().elem;
    if (op.code() == OpCode::LocalLoad)
      return bind(op.result(), loadShared(layoutOf(op.result()), offsetOf, 0, 0, elem, base));
    return storeShared(operand(op, 1), operandLayoutOf(op, 1), offsetOf, 0, elem, base);
  }
  default:
    throw std::logic_error("codegen: not a TLX buffer op");
  }
}

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
    int64_t arriveCount = op.intAttr("arrive_count", 1);
    if (arriveCount < 1 || arriveCount >= (int64_t(1) << 20))
      raiseError(op.loc(), "alloc_barriers arrive_count " + std::to_string(arriveCount) +
                               " is out of range; use 1 to 2^20-1");
    std::string leader = electedThread();
    std::string base = sharedAddress("0");
    for (int64_t i = 0; i < a->count; ++i)
      b_.inst("mbarrier.init.shared::cta.b64",
              {"[" + base + "+" + std::to_string(a->offset + i * a->bytesPerBuffer) + "]",
               immInt(arriveCount)},
              leader);
    // The initialized barriers become visible to the async proxy (TMA complete_tx) and to the
    // other threads before anyone uses them.
    b_.inst("fence.mbarrier_init.release.cluster", {});
    b_.inst("fence.proxy.async.shared::cta", {});
    barrier();
    return bind(op.result(), {immInt(a->offset)});
  }
  case OpCode::BarrierExpectBytes: {
    std::string bar = barrierAddress(op, 0);
    std::string bytes = operand(op, 1).at(0);
    std::string pred = guarded(electedThread(), 2, op.intAttr("has_pred") != 0);
    return b_.inst("mbarrier.arrive.expect_tx.shared::cta.b64", {"_", bar, bytes}, pred);
  }
  case OpCode::BarrierWait: {
    std::string bar = barrierAddress(op, 0);
    std::string phase = operand(op, 1).at(0);
    bool hasPred = op.intAttr("has_pred") != 0;
    std::string skip = b_.newLabel("wait_done");
    if (hasPred) {
      std::string p = b_.materialize(operand(op, 2).at(0), RegClass::Pred);
      b_.inst("bra", {skip}, p, /*negateGuard=*/true);
    }
    // try_wait suspends for a system-dependent time; retry until the phase with this parity
    // has completed.
    std::string retry = b_.newLabel("wait_retry");
    std::string done = b_.newReg(RegClass::Pred);
    b_.label(retry);
    b_.inst("mbarrier.try_wait.parity.shared::cta.b64", {done, bar, phase});
    b_.inst("bra", {retry}, done, /*negateGuard=*/true);
    b_.label(skip);
    return;
  }
  case OpCode::BarrierArrive: {
    if (op.intAttr("has_remote_cta_rank"))
      raiseError(op.loc(), "barrier_arrive on a remote CTA's barrier is not supported by the " +
                               std::string(targetName(options_.target)) +
                               " PTX backend yet; arrive on a local barrier");
    std::string bar = barrierAddress(op, 0);
    const ir::Op* root = barrierRoot(op.operand(0));
    bool warpBarrier = root && root->code() == OpCode::AllocBarriers && root->intAttr("warp");
    int64_t count = op.intAttr("arrive_count", 1);
    std::vector<std::string> operands = {"_", bar};
    if (count != 1) operands.push_back(immInt(count));
    unsigned predIndex = 1;
    if (warpBarrier)
      return b_.inst("mbarrier.arrive.shared::cta.b64", operands,
                     guarded({}, predIndex, op.intAttr("has_pred") != 0));
    // Every thread's earlier work is done before the one elected thread arrives.
    barrier();
    return b_.inst("mbarrier.arrive.shared::cta.b64", operands,
                   guarded(electedThread(), predIndex, op.intAttr("has_pred") != 0));
  }
  case OpCode::NamedBarrierWait:
  case OpCode::NamedBarrierArrive: {
    // Immediates or i32 registers: both forms are valid bar operands.
    std::string id = operand(op, 0).at(0);
    std::string count = operand(op, 1).at(0);
    return b_.inst(op.code() == OpCode::NamedBarrierWait ? "bar.sync" : "bar.arrive", {id, count});
  }
  case OpCode::Fence: {
    std::string kind = op.strAttr("kind");
    if (kind == "async_shared") return b_.inst("fence.proxy.async.shared::cta", {});
    if (kind == "mbarrier_init_cluster") return b_.inst("fence.mbarrier_init.release.cluster", {});
    raiseError(op.loc(), "fence kind '" + kind +
                             "' is not supported; use \"async_shared\" or "
                             "\"mbarrier_init_cluster\"");
  }
  default:
    throw std::logic_error("codegen: not a TLX barrier op");
  }
}

void FunctionLowering::requireDescriptorSwizzle(const ir::Op& op, const ir::Value* desc,
                                                int swizzleBytes) {
  auto [it, inserted] = descriptorSwizzle_.emplace(desc, swizzleBytes);
  if (!inserted && it->second != swizzleBytes)
    raiseError(op.loc(), "one descriptor is used by TMA copies with shared tiles of " +
                             std::to_string(it->second) + "-byte and " +
                             std::to_string(swizzleBytes) +
                             "-byte swizzle; use a separate descriptor for each kind of tile");
}

void FunctionLowering::lowerTlxDescriptorCopy(const ir::Op& op) {
  if (options_.target == Target::SM80)
    raiseError(op.loc(), std::string("'") + op.name() +
                             "' needs the Tensor Memory Accelerator of sm_90a or sm_100a");
  if (op.code() == OpCode::AsyncDescStoreWait) {
    // Only the issuing thread tracks its bulk groups; the others wait for it at the barrier
    // before they may overwrite the source buffers.
    b_.inst("cp.async.bulk.wait_group.read", {immInt(op.intAttr("pendings"))}, electedThread());
    barrier();
    return;
  }
  bool isLoad = op.code() == OpCode::AsyncDescLoad;
  const ir::Type& dt = op.operand(0)->type();
  if (dt.kind != ir::TypeKind::Descriptor)
    throw std::logic_error("codegen: TMA copy without a descriptor operand");
  if (!isPlainBuffer(op.operand(1)))
    raiseError(op.loc(), std::string("'") + op.name() +
                             "' needs a buffer from tlx.local_alloc or its local_view, not a "
                             "transposed, sliced or reinterpreted view");
  const layout::SharedAllocation& a = allocationOf(op, 1);
  const ir::Type& bt = op.operand(1)->type();
  int rank = static_cast<int>(dt.shape.size());
  unsigned firstOffset = isLoad ? 3 : 2;
  bool hasPred = isLoad && op.intAttr("has_pred") != 0;
  if (rank < 1 || rank > 5 || op.numOperands() != firstOffset + rank + (hasPred ? 1 : 0))
    raiseError(op.loc(), std::string("'") + op.name() + "' through a descriptor of block rank " +
                             std::to_string(rank) + " takes " + std::to_string(rank) + " offsets");
  if (bt.shape != dt.shape || bt.elem != dt.elem)
    raiseError(op.loc(), std::string("'") + op.name() + "' between " + dt.str() + " and " +
                             bt.str() + ": the buffer must have the descriptor's block shape " +
                             "and element type");
  int64_t innerBytes = dt.shape.back() * ir::byteWidth(dt.elem);
  if (a.swizzleBytes && innerBytes > a.swizzleBytes)
    raiseError(op.loc(), std::string("'") + op.name() + "' of a " + dt.str() + " block: rows of " +
                             std::to_string(innerBytes) + " bytes wider than the buffer's " +
                             std::to_string(a.swizzleBytes) +
                             "-byte swizzle are not supported yet; use a block whose innermost "
                             "dim spans at most " +
                             std::to_string(a.swizzleBytes) + " bytes");
  if (isLoad && op.intAttr("multicast_mask"))
    raiseError(op.loc(), "multicast TMA loads are not supported by the " +
                             std::string(targetName(options_.target)) +
                             " PTX backend yet; load without multicast_mask");
  requireDescriptorSwizzle(op, op.operand(0), a.swizzleBytes);
  std::string tmap = operand(op, 0).at(0);
  std::string coords = "{";
  for (int d = rank - 1; d >= 0; --d) {
    std::string c = b_.materialize(operand(op, firstOffset + d).at(0), RegClass::B32);
    coords += c + (d ? ", " : "}");
  }
  std::string buffer = b_.materialize(regsOf(op.operand(1)).at(0), RegClass::B32);
  std::string tile = bracketed(sharedAddress(buffer));
  std::string dims = std::to_string(rank) + "d";
  std::string leader = electedThread();
  if (isLoad) {
    if (hasPred) {
      std::string p = b_.materialize(operand(op, firstOffset + rank).at(0), RegClass::Pred);
      leader = b_.pure("and.pred", RegClass::Pred, {leader, p});
    }
    std::string bar = barrierAddress(op, 2);
    return b_.inst("cp.async.bulk.tensor." + dims +
                       ".shared::cluster.global.tile.mbarrier::complete_tx::bytes",
                   {tile, "[" + tmap + ", " + coords + "]", bar}, leader);
  }
  // Every thread's generic-proxy writes of the buffer are visible to the bulk copy.
  b_.inst("fence.proxy.async.shared::cta", {});
  barrier();
  b_.inst("cp.async.bulk.tensor." + dims + ".global.shared::cta.tile.bulk_group",
          {"[" + tmap + ", " + coords + "]", tile}, leader);
  b_.inst("cp.async.bulk.commit_group", {}, leader);
}

void FunctionLowering::lowerAsyncTasks(const ir::Op& op) {
  if (options_.target == Target::SM80)
    raiseError(op.loc(), "tlx.async_tasks needs sm_90a or sm_100a (setmaxnreg, warp-group "
                         "barriers)");
  if (taskWarps_) raiseError(op.loc(), "tlx.async_tasks cannot be nested inside an async task");
  struct Task {
    const ir::Op* op;
    int firstWarp, warps, regs;
  };
  // The default task runs on warps [0, num_warps); the others follow in program order unless
  // they name their first warp group.
  std::vector<Task> tasks;
  int nextWarp = fn_.numWarps;
  for (const auto& t : op.region(0)->ops()) {
    if (t->code() != OpCode::AsyncTask)
      raiseError(t->loc(), std::string("'") + t->name() +
                               "' directly inside tlx.async_tasks; only async_task blocks may "
                               "appear there");
    bool isDefault = t->intAttr("default") != 0;
    int warps = isDefault ? fn_.numWarps : static_cast<int>(t->intAttr("num_warps"));
    int first = isDefault ? 0 : nextWarp;
    if (!isDefault && t->intAttr("warp_group_start_id", -1) >= 0)
      first = static_cast<int>(t->intAttr("warp_group_start_id")) * 4;
    if (!isDefault) nextWarp = std::max(nextWarp, first + warps);
    if (warps < 1 || !std::has_single_bit(static_cast<unsigned>(warps)) || warps > 32)
      raiseError(t->loc(), "async_task num_warps=" + std::to_string(warps) +
                               " is not supported; use a power of two from 1 to 32");
    int regs = static_cast<int>(t->intAttr("num_regs"));
    if (regs && (warps % 4 != 0 || first % 4 != 0))
      raiseError(t->loc(), "an async_task with a register budget must cover whole warp groups "
                           "(num_warps a multiple of 4 starting at a warp group), got " +
                               std::to_string(warps) + " warps from warp " + std::to_string(first));
    tasks.push_back({t.get(), first, warps, regs});
  }
  for (size_t i = 0; i < tasks.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (tasks[i].firstWarp < tasks[j].firstWarp + tasks[j].warps &&
          tasks[j].firstWarp < tasks[i].firstWarp + tasks[i].warps)
        raiseError(tasks[i].op->loc(), "this async_task's warps overlap another task's; adjust "
                                       "warp_group_start_id");
  for (const Task& t : tasks) totalWarps_ = std::max(totalWarps_, t.firstWarp + t.warps);
  if (totalWarps_ > 32)
    raiseError(op.loc(), "the async tasks need " + std::to_string(totalWarps_) +
                             " warps; a CTA has at most 32");
  if (tasks.size() > 8)
    raiseError(op.loc(), "more than 8 async tasks are not supported (each takes a named "
                         "barrier from 15 down)");
  // Registers the launch grants each thread (64K per SM, in steps of 8): tasks above it
  // take registers with setmaxnreg.inc, tasks below give theirs back with .dec.
  int budget = std::min(255, 65536 / (totalWarps_ * 32)) / 8 * 8;
  bool anyRegs = false;
  for (const Task& t : tasks) anyRegs |= t.regs != 0;
  if (anyRegs) maxRegisters_ = budget;

  std::string threadId = b_.pure("mov.u32", RegClass::B32, {"%tid.x"});
  for (size_t i = 0; i < tasks.size(); ++i) {
    const Task& t = tasks[i];
    std::string skip = b_.newLabel("task_end");
    b_.setLoc(t.op->loc());
    // Threads outside [first, first + warps) * 32 skip the task (unsigned wrap-around below).
    std::string rel = b_.pure("sub.u32", RegClass::B32, {threadId, immInt(t.firstWarp * 32)});
    std::string outside = b_.pure("setp.ge.u32", RegClass::Pred, {rel, immInt(t.warps * 32)});
    b_.inst("bra", {skip}, outside);
    b_.pushScope();
    taskWarps_ = t.warps;
    taskFirstWarp_ = t.firstWarp;
    taskBarrierId_ = 15 - static_cast<int>(i);
    // Tasks run concurrently: each later task's scratch (conversions, reductions, descriptor
    // copies) starts after everything the earlier tasks used.
    if (i > 0)
      scratchBase_ = (std::max(sharedBytes_, layouts_.scratchOffset()) + 1023) / 1024 * 1024;
    if (t.regs && t.regs != budget)
      b_.inst(std::string("setmaxnreg.") + (t.regs > budget ? "inc" : "dec") + ".sync.aligned.u32",
              {immInt(t.regs)});
    lowerBlock(*t.op->region(0));
    taskWarps_ = 0;
    taskFirstWarp_ = 0;
    taskBarrierId_ = -1;
    scratchBase_ = -1;
    b_.popScope();
    b_.label(skip);
  }
  // Warps meet again after their tasks (the code after async_tasks runs on every warp).
  barrier();
}

} // namespace ww::codegen
