// Lowering of tlx.async_tasks: warp-specialized tasks on the warp ranges of the kernel's task
// plan (ir/TaskPlan.h), with their setmaxnreg budgets.
#include "codegen/Lowering.h"
#include "ir/OpTraits.h"
#include "support/MathExtras.h"

#include <algorithm>
#include <functional>
#include <map>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>

namespace ww::codegen {

using ir::OpCode;

namespace {

/// Whether code other than the kernel's return runs after `op` (all warps run it, so they
/// must hold the launch's registers again).
bool codeFollows(const ir::Op& op, const ir::Function& fn) {
  const ir::Block* block = op.parentBlock();
  if (block != &fn.body) return true;
  size_t at = ir::positionOf(*block, &op);
  for (size_t i = at + 1; i < block->ops().size(); ++i)
    if (block->ops()[i]->code() != OpCode::Return) return true;
  return false;
}

/// Whether `v` is a scalar computed from launch values only: the kernel's parameters, constants,
/// program ids and counts, through scalar arithmetic, comparisons, selects and casts. Such a value
/// is the same in every thread and costs a few instructions to compute again.
bool fromLaunchValues(const ir::Value* v, std::unordered_map<const ir::Value*, bool>& memo) {
  const ir::Op* def = v->def();
  if (!def) return true; // a kernel parameter
  if (auto it = memo.find(v); it != memo.end()) return it->second;
  OpCode c = def->code();
  bool ok =
      v->type().isScalar() && def->numRegions() == 0 &&
      (c == OpCode::Constant || c == OpCode::ProgramId || c == OpCode::NumPrograms ||
       c == OpCode::Cast || c == OpCode::Cmp || c == OpCode::Select || ir::isBinaryArithmetic(c));
  for (const ir::Value* o : def->operands())
    if (ok) ok = fromLaunchValues(o, memo);
  memo[v] = ok;
  return ok;
}

} // namespace

// A value computed before the tasks and read by a task is held from there through the task
// dispatch into the task's budget: where it was not a value ptxas can rematerialize (a cdiv of a
// parameter, say), TLX's mxfp8 attention forward spilled num_pid_m for its 24-register tasks.
// The scalars computed from launch values alone are lowered again at the top of each task that
// reads them (outside the hash-consing table, which would hand back the earlier registers);
// parameters themselves stay where they are (ptxas reads them from the constant bank).
std::vector<std::pair<const ir::Value*, Regs>>
FunctionLowering::relowerLaunchScalars(const ir::Block& task) {
  std::vector<std::pair<const ir::Value*, Regs>> saved;
  std::unordered_map<const ir::Value*, bool> memo;
  std::vector<const ir::Op*> chain; // defining ops, operands first
  std::unordered_set<const ir::Op*> taken;
  std::function<void(const ir::Value*)> take = [&](const ir::Value* v) {
    const ir::Op* def = v->def();
    if (!def || def->code() == OpCode::Constant || def->parentBlock() != &fn_.body ||
        !values_.count(v) || !taken.insert(def).second)
      return;
    for (const ir::Value* o : def->operands()) take(o);
    chain.push_back(def);
  };
  ir::walk(task, [&](const ir::Op& op) {
    for (const ir::Value* v : op.operands())
      if (v->def() && v->def()->parentBlock() == &fn_.body && fromLaunchValues(v, memo)) take(v);
  });
  if (chain.empty()) return saved;
  std::map<std::string, std::string> outer = b_.takePureTable();
  for (const ir::Op* def : chain) {
    saved.emplace_back(def->result(), values_.at(def->result()));
    lowerOp(*def);
  }
  b_.mergePureTable(std::move(outer));
  return saved;
}

void FunctionLowering::lowerAsyncTasks(const ir::Op& op) {
  if (options_.target == Target::SM80)
    raiseError(op.loc(), "tlx.async_tasks needs sm_90a or sm_100a (setmaxnreg, warp-group "
                         "barriers)");
  if (taskWarps_) raiseError(op.loc(), "tlx.async_tasks cannot be nested inside an async task");
  if (!taskPlan_) throw std::logic_error("codegen: async_tasks without the kernel's task plan");
  const ir::AsyncTasksPlan& plan = taskPlan_->of(op);
  if (plan.tasks.size() > 8)
    raiseError(op.loc(), "more than 8 async tasks are not supported (each takes a named "
                         "barrier from 15 down)");
  // Every thread starts with the launch's registers (.maxnreg): warp groups above it take
  // registers with setmaxnreg.inc, those below give theirs back with .dec (the increases wait
  // until the decreases have freed enough). Where code follows, each goes back at its end.
  const int launch = taskPlan_->maxRegisters;
  const bool restore = launch && codeFollows(op, fn_);
  auto setRegisters = [&](int from, int to) {
    if (!from || !to || from == to) return;
    b_.inst(std::string("setmaxnreg.") + (to > from ? "inc" : "dec") + ".sync.aligned.u32",
            {immInt(to)});
  };
  std::string threadId = b_.pure("mov.u32", RegClass::B32, {"%tid.x"});
  // Each warp runs one task (their warp ranges are disjoint), and it leaves the task for the
  // join after all of them, not for the next task's range check: falling through, a value
  // defined before the tasks and used by a later task would be live across every earlier
  // task's body, within that task's setmaxnreg budget (a 24-register MMA task spilled the
  // persistent tile id that the load and epilogue tasks read).
  std::string join = b_.newLabel("tasks_join");
  // Runs `body` on warps [first, first + warps) only (unsigned wrap-around below them).
  auto onWarps = [&](int first, int warps, const std::function<void()>& body) {
    std::string skip = b_.newLabel("task_end");
    std::string rel = b_.pure("sub.u32", RegClass::B32, {threadId, immInt(first * 32)});
    std::string outside = b_.pure("setp.ge.u32", RegClass::Pred, {rel, immInt(warps * 32)});
    b_.inst("bra", {skip}, outside);
    b_.pushScope();
    body();
    b_.popScope();
    b_.inst("bra.uni", {join});
    b_.label(skip);
  };
  // Warps without a task give their registers up first: the tasks' increases wait for them.
  b_.setLoc(op.loc());
  for (const ir::IdleWarps& idle : plan.idle)
    if (idle.regs != launch)
      onWarps(idle.firstWarp, idle.numWarps, [&] {
        setRegisters(launch, idle.regs);
        if (restore) setRegisters(idle.regs, launch);
      });
  for (size_t i = 0; i < plan.tasks.size(); ++i) {
    const ir::TaskPlacement& t = plan.tasks[i];
    b_.setLoc(t.task->loc());
    onWarps(t.firstWarp, t.numWarps, [&] {
      taskWarps_ = t.numWarps;
      taskFirstWarp_ = t.firstWarp;
      taskBarrierId_ = 15 - static_cast<int>(i);
      // Tasks run concurrently: each later task's scratch (conversions, reductions, descriptor
      // copies) starts after everything the earlier tasks used.
      if (i > 0) scratchBase_ = alignTo(std::max(sharedBytes_, layouts_.scratchOffset()), 1024);
      setRegisters(launch, t.regs);
      taskRegisters_ = t.regs;
      auto heldScalars = relowerLaunchScalars(*t.task->region(0));
      auto heldTmem = rebindTmemAddresses(*t.task->region(0));
      lowerBlock(*t.task->region(0));
      for (auto& [v, regs] : heldTmem) bind(v, std::move(regs));
      for (auto& [v, regs] : heldScalars) bind(v, std::move(regs));
      drainBulkStoreRead(); // before the task's threads give up their shared memory
      taskRegisters_ = 0;
      if (restore) setRegisters(t.regs, launch);
      taskWarps_ = 0;
      taskFirstWarp_ = 0;
      taskBarrierId_ = -1;
      scratchBase_ = -1;
    });
  }
  b_.label(join);
  // Warps meet again after their tasks (the code after async_tasks runs on every warp).
  barrier();
}

void FunctionLowering::requireLaunchRegisters(const ir::Op& op, int need, const std::string& what) {
  if (!maxRegisters_ || need <= maxRegisters_) return;
  raiseError(op.loc(), what + " needs " + std::to_string(need) +
                           " registers a thread, but ptxas compiles every instruction within the "
                           "kernel's .maxnreg of " +
                           std::to_string(maxRegisters_) + " (65,536 registers over the " +
                           std::to_string(totalWarps_ * 32) + " threads of its " +
                           std::to_string(totalWarps_) +
                           " warps, rounded down to a multiple of 8), even where setmaxnreg "
                           "raises a task's registers; launch fewer warps (num_warps=" +
                           std::to_string(fn_.numWarps) + " here) or use a narrower tile");
}

} // namespace ww::codegen
