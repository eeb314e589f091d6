// The wait loop of tlx.barrier_wait: try_wait.parity until the phase with the wanted parity has
// completed; with CompileOptions::mbarrierTrapTries, a bounded loop that reports and traps.
#include "codegen/Lowering.h"

namespace ww::codegen {

namespace {

/// "barrier 'full'" for the alloc_barriers value behind `v` (through local_view), or "barrier".
std::string barrierName(const ir::Value* v) {
  const ir::Value* root = barrierArray(v);
  return root->name.empty() ? std::string("barrier") : "barrier '" + root->name + "'";
}

/// The async task `op` runs in, named as the interpreter names it ("task 'producer'", "default
/// task", "async task 1 replica 0"); empty outside async tasks.
std::string taskLabel(const ir::Op& op) {
  const ir::Op* task = op.parentBlock() ? op.parentBlock()->parentOp() : nullptr;
  while (task && task->code() != ir::OpCode::AsyncTask)
    task = task->parentBlock() ? task->parentBlock()->parentOp() : nullptr;
  return task && task->parentBlock() ? ir::asyncTaskLabel(*task) : std::string();
}

} // namespace

void FunctionLowering::waitForBarrierPhase(const ir::Op& op, const std::string& bar,
                                           const std::string& phase) {
  // try_wait suspends for a system-dependent time; retry until the phase with this parity
  // has completed.
  std::string retry = b_.newLabel("wait_retry");
  std::string done = b_.newReg(RegClass::Pred);
  // PTX's default semantics (acquire at CTA scope), as Triton lowers TLX's barrier_wait, also
  // where a peer CTA arrives remotely or multicasts into the barrier's stage: an explicit
  // .acquire.cluster invalidates L1 (CCTL.IVALL) after every wait, and TLX programs get their
  // cross-CTA ordering from the barrier's arrivals and transaction counts, not from the scope.
  const std::string tryWait = "mbarrier.try_wait.parity.shared::cta.b64";
  const int64_t maxTries = options_.mbarrierTrapTries;
  if (maxTries <= 0) {
    b_.label(retry);
    b_.inst(tryWait, {done, bar, phase});
    b_.inst("bra", {retry}, done, /*negateGuard=*/true);
    return;
  }
  // Bounded: after maxTries failed rounds the wait can only be a hang (a phase nobody will
  // complete), so lane 0 of every waiting warp prints what it waited for, then all trap.
  std::string tries = b_.newReg(RegClass::B32);
  std::string more = b_.newReg(RegClass::Pred);
  std::string passed = b_.newLabel("wait_passed");
  b_.inst("mov.u32", {tries, "0"});
  b_.label(retry);
  // A suspend-time hint of 1 us bounds each round (the default limit is system-dependent);
  // on the H200 a round of a hung wait took at most ~4.6 us (2^20 rounds: 4.8 s).
  b_.inst(tryWait, {done, bar, phase, "1000"});
  b_.inst("bra", {passed}, done);
  b_.inst("add.u32", {tries, tries, "1"});
  b_.inst("setp.lt.u32", {more, tries, immInt(std::min<int64_t>(maxTries, 0xFFFFFFFFll))});
  b_.inst("bra", {retry}, more);

  // The report path ends in trap: nothing it computes may be reused after the wait.
  b_.pushScope();
  // Each async task runs on its own warps; outside tasks, all warps wait.
  std::string task = "(warps 0-" + std::to_string(fn_.numWarps - 1) + ")";
  if (taskBarrierId_ >= 0)
    task = taskLabel(op) + " (warps " + std::to_string(taskFirstWarp_) + "-" +
           std::to_string(taskFirstWarp_ + warps() - 1) + ")";
  std::string where = "?";
  SourceLoc loc = op.loc();
  if (loc.valid() && sources_ && loc.file < sources_->numFiles())
    where = sources_->path(loc.file) + ":" + std::to_string(loc.line);
  std::string format = "warpweave: barrier_wait timed out: block (%u,%u,%u) thread %u " + task +
                       " " + PtxBuilder::escapePrintf(barrierName(op.operand(0))) +
                       " at smem offset %u phase %u at " + PtxBuilder::escapePrintf(where) + "\n";
  std::string offset = b_.materialize(regsOf(op.operand(0)).at(0), RegClass::B32);
  std::string parity = b_.materialize(phase, RegClass::B32);
  std::vector<PtxBuilder::PrintArg> args;
  for (const char* dim : {"%ctaid.x", "%ctaid.y", "%ctaid.z"}) {
    std::string r = b_.newReg(RegClass::B32);
    b_.inst("mov.u32", {r, dim});
    args.push_back({r, RegClass::B32});
  }
  std::string thread = b_.newReg(RegClass::B32);
  b_.inst("mov.u32", {thread, "%tid.x"});
  args.push_back({thread, RegClass::B32});
  args.push_back({offset, RegClass::B32});
  args.push_back({parity, RegClass::B32});
  std::string lane = b_.newReg(RegClass::B32);
  b_.inst("and.b32", {lane, thread, "31"});
  std::string leader = b_.newReg(RegClass::Pred);
  b_.inst("setp.eq.u32", {leader, lane, "0"});
  b_.printf(format, args, leader);
  b_.inst("trap", {});
  b_.popScope();
  b_.label(passed);
}

} // namespace ww::codegen
