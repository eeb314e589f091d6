// Where the tasks of each tlx.async_tasks block run and how many registers their threads hold:
// warp ranges of the CTA and setmaxnreg budgets, as TLX assigns them (Triton's
// AllocateWarpGroups). The specializer plans a kernel once to report the user's errors at their
// source; codegen lowers by the same plan, and the interpreter checks it, so all three agree.
#pragma once

#include "ir/IR.h"

#include <string>
#include <vector>

namespace ww::ir {

/// One async task (one replica of it) on its warps.
struct TaskPlacement {
  const Op* task = nullptr;
  int replica = 0;
  int firstWarp = 0;
  int numWarps = 0;
  /// Registers a thread holds inside the task: its setmaxnreg target. 0 when no task of the
  /// block names a budget (every thread keeps what the launch gave it).
  int regs = 0;
};

/// Warps no task of a block runs on. With budgets they still give registers up (setmaxnreg is
/// per warp group, and the increases of the other warp groups count on it).
struct IdleWarps {
  int firstWarp = 0;
  int numWarps = 0;
  int regs = 0;
};

struct AsyncTasksPlan {
  const Op* op = nullptr;
  std::vector<TaskPlacement> tasks; // in the block's order
  std::vector<IdleWarps> idle;      // empty without budgets
};

struct TaskPlan {
  /// The warps the CTA launches with: the kernel's num_warps, the tasks' warps beyond them, and
  /// with register budgets, up to a whole warp group.
  int totalWarps = 0;
  /// `.maxnreg`: what the launch gives each thread (65,536 / threads, down to a multiple of 8,
  /// at most 248); 0 when no task names a budget.
  int maxRegisters = 0;
  std::vector<AsyncTasksPlan> blocks;

  /// The plan of async_tasks op `op`; throws std::logic_error for an op not planned.
  const AsyncTasksPlan& of(const Op& op) const;
};

/// Places every async task of `fn` and assigns the register budgets; raises a CompileError at
/// the task or async_tasks block when they cannot be placed or the budgets do not fit.
///
/// The rule (TLX's): the default task runs on warps [0, num_warps); the other tasks (and
/// replicas of the default task) follow, largest first, in block order among equals, unless they
/// all name warp_group_start_id (a warp index; replica r of a task of W warps starts W * r warps
/// after it). With a budget anywhere in the kernel, the CTA is padded to whole warp groups and
/// every warp group takes the largest budget of its tasks; warp groups whose tasks name none, and
/// the default task unless it names one, share what is left of the launch's registers evenly
/// (down to a multiple of 8, at most 256, at least 24); warp groups without a task take 24.
TaskPlan planAsyncTasks(const Function& fn);

/// How diagnostics name an async_task op: "default task", "task 'loader'", "async task 2"
/// (numbered in block order, replicas counted once), with " replica R" for replicated tasks
/// (`replica` for an op not expanded per replica, else its replica attribute).
std::string asyncTaskLabel(const Op& task, int replica = -1);

} // namespace ww::ir
