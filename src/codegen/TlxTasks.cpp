// Lowering of tlx.async_tasks: warp-specialized tasks on warp ranges, with setmaxnreg budgets.
#include "codegen/Lowering.h"

#include <algorithm>
#include <bit>
#include <stdexcept>

namespace ww::codegen {

using ir::DType;
using ir::OpCode;
using layout::LinearLayout;

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
      // Replicas of a task sit side by side from its first warp group.
      first = static_cast<int>(t->intAttr("warp_group_start_id")) * 4 +
              static_cast<int>(t->intAttr("replica", 0)) * warps;
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
