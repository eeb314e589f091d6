// Warp ranges and register budgets of async tasks (see TaskPlan.h for the rule).
#include "ir/TaskPlan.h"
#include "ir/OpAttrs.h"
#include "support/MathExtras.h"

#include <algorithm>
#include <bit>
#include <stdexcept>

namespace ww::ir {

namespace {

constexpr int kSmRegisters = 65536;
// setmaxnreg takes a multiple of 8 in [24, 256].
constexpr int kMinRegs = 24;
constexpr int kMaxRegs = 256;
// .maxnreg above 255 is ignored by ptxas.
constexpr int kMaxLaunchRegs = 255;

/// 65536 -> "65,536".
std::string withCommas(int64_t v) {
  std::string digits = std::to_string(v < 0 ? -v : v), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return v < 0 ? "-" + out : out;
}

std::string warpsText(int n) {
  return std::to_string(n) + (n == 1 ? " warp" : " warps");
}

/// An async_task op, or one replica of an op that was not expanded per replica.
struct Part {
  const Op* op;
  int replica;
  bool isDefault; // the default task itself (replicas of it beyond the first are partitions)
  int warps;
  int regs;
  int64_t start; // warp_group_start_id, -1 when not given
  int first = 0;
};

std::vector<Part> partsOf(const Function& fn, const Op& block) {
  std::vector<Part> parts;
  for (const auto& t : block.region(0)->ops()) {
    if (t->code() != OpCode::AsyncTask)
      raiseError(t->loc(), std::string("'") + t->name() +
                               "' directly inside tlx.async_tasks; only async_task blocks may "
                               "appear there");
    bool isDefault = attr::AsyncTask::isDefault(*t);
    int64_t warps = isDefault ? fn.numWarps : attr::AsyncTask::numWarps(*t);
    if (warps < 1 || warps > 32 || !std::has_single_bit(static_cast<uint64_t>(warps)))
      raiseError(t->loc(), "async_task num_warps=" + std::to_string(warps) +
                               " is not supported; use a power of two from 1 to 32");
    int64_t regs = attr::AsyncTask::numRegs(*t);
    if (regs != 0 && (regs < kMinRegs || regs > kMaxRegs || regs % 8 != 0))
      raiseError(t->loc(), "a register budget must be a multiple of 8 between 24 and 256, got " +
                               std::to_string(regs));
    int64_t replicate = std::max<int64_t>(1, attr::AsyncTask::replicate(*t));
    bool expanded = t->hasAttr(attr::AsyncTask::kreplica);
    int64_t firstReplica = expanded ? attr::AsyncTask::replica(*t) : 0;
    int64_t count = expanded ? 1 : replicate;
    for (int64_t r = firstReplica; r < firstReplica + count; ++r)
      parts.push_back({t.get(), static_cast<int>(r), isDefault && r == 0, static_cast<int>(warps),
                       static_cast<int>(regs), attr::AsyncTask::warpGroupStartId(*t)});
  }
  return parts;
}

std::string label(const Part& p) {
  return asyncTaskLabel(*p.op, p.replica);
}

/// Places the tasks of one block other than the default task; returns the warp after the last.
int place(const Function& fn, std::vector<Part>& parts) {
  std::vector<Part*> others;
  for (Part& p : parts)
    if (!p.isDefault) others.push_back(&p);
  const Part* named = nullptr;
  const Part* unnamed = nullptr;
  for (const Part* p : others) (p->start >= 0 ? named : unnamed) = p;
  if (named && unnamed)
    raiseError(unnamed->op->loc(),
               "warp_group_start_id is given to some async tasks of this block but not to this "
               "one; give it to all of them or to none",
               {note(named->op->loc(),
                     "this task gives warp_group_start_id=" + std::to_string(named->start))});
  if (named) {
    // A start id counts warps; replicas of the default task start at it, the others' after it.
    for (Part* p : others) {
      int64_t nth = attr::AsyncTask::isDefault(*p->op) ? p->replica - 1 : p->replica;
      int64_t first = p->start + nth * p->warps;
      if (first + p->warps > 32)
        raiseError(p->op->loc(), label(*p) + " would run on warps " + std::to_string(first) + "-" +
                                     std::to_string(first + p->warps - 1) +
                                     "; a CTA has at most 32 warps");
      p->first = static_cast<int>(first);
    }
  } else {
    // The largest tasks first, so each starts at a multiple of its size (warp groups stay whole).
    std::vector<Part*> bySize = others;
    std::stable_sort(bySize.begin(), bySize.end(),
                     [](const Part* a, const Part* b) { return a->warps > b->warps; });
    int next = fn.numWarps;
    for (Part* p : bySize) {
      p->first = next;
      next += p->warps;
    }
  }
  int end = fn.numWarps;
  for (size_t i = 0; i < others.size(); ++i) {
    const Part& p = *others[i];
    if (p.first < fn.numWarps)
      raiseError(p.op->loc(), label(p) + " would run on warps " + std::to_string(p.first) + "-" +
                                  std::to_string(p.first + p.warps - 1) +
                                  ", which overlap the default task's warps 0-" +
                                  std::to_string(fn.numWarps - 1) +
                                  " (num_warps=" + std::to_string(fn.numWarps) +
                                  "); warp_group_start_id counts warps: start at " +
                                  std::to_string(fn.numWarps) + " or later");
    for (size_t j = 0; j < i; ++j) {
      const Part& q = *others[j];
      if (p.first < q.first + q.warps && q.first < p.first + p.warps)
        raiseError(p.op->loc(),
                   label(p) + " would run on warps " + std::to_string(p.first) + "-" +
                       std::to_string(p.first + p.warps - 1) + ", which overlap those of " +
                       label(q) + " (" + std::to_string(q.first) + "-" +
                       std::to_string(q.first + q.warps - 1) + "); adjust warp_group_start_id",
                   {note(q.op->loc(), label(q) + " is here")});
    }
    end = std::max(end, p.first + p.warps);
  }
  return end;
}

/// Assigns the budgets of one block; `total` and `launch` are the kernel's warps and .maxnreg.
void assignRegisters(const Function& fn, const Op& block, std::vector<Part>& parts, int total,
                     int launch, AsyncTasksPlan& out) {
  const int groups = total / 4;
  const int defaultGroups = fn.numWarps / 4;
  // Per warp group: whether a task runs there and the largest budget its tasks name.
  std::vector<bool> used(groups, false);
  std::vector<int> asked(groups, 0);
  const Part* defaultPart = nullptr;
  for (const Part& p : parts) {
    if (p.isDefault) {
      defaultPart = &p;
      continue;
    }
    bool whole = p.warps >= 4 ? p.first % 4 == 0 : p.first / 4 == (p.first + p.warps - 1) / 4;
    if (!whole)
      raiseError(p.op->loc(),
                 label(p) + " runs on warps " + std::to_string(p.first) + "-" +
                     std::to_string(p.first + p.warps - 1) +
                     ", across a warp group boundary; with register budgets (setmaxnreg, one "
                     "per warp group) a task must " +
                     (p.warps >= 4 ? "start at a warp group (a multiple of 4 warps)"
                                   : "sit inside one warp group") +
                     ": adjust warp_group_start_id");
    for (int g = p.first / 4; g <= (p.first + p.warps - 1) / 4; ++g) {
      used[g] = true;
      asked[g] = std::max(asked[g], p.regs);
    }
  }
  const int defaultRegs = defaultPart ? defaultPart->regs : 0;
  const int64_t pool = int64_t(launch) * total * 32;
  int64_t fixed = 0, sharing = 0;
  if (defaultRegs)
    fixed += int64_t(defaultRegs) * fn.numWarps * 32;
  else
    sharing += fn.numWarps * 32;
  for (int g = defaultGroups; g < groups; ++g) {
    if (!used[g])
      fixed += kMinRegs * 128;
    else if (asked[g])
      fixed += int64_t(asked[g]) * 128;
    else
      sharing += 128;
  }
  if (fixed + kMinRegs * sharing > pool) {
    std::string asks;
    std::vector<Diagnostic> notes;
    auto add = [&](const std::string& s) { asks += (asks.empty() ? "" : ", ") + s; };
    if (!defaultPart)
      add("the default warps: " + warpsText(fn.numWarps) + " without a budget (at least 24)");
    for (const Part& p : parts) {
      std::string what =
          warpsText(p.warps) + (p.regs ? " x " + std::to_string(p.regs)
                                       : std::string(" without a budget (at least 24)"));
      add(label(p) + ": " + what);
      // Replicas share their source: one note for them.
      SourceLoc at = p.op->loc();
      if (std::none_of(notes.begin(), notes.end(), [&](const Diagnostic& d) {
            return d.loc.file == at.file && d.loc.line == at.line && d.loc.col == at.col;
          }))
        notes.push_back(note(
            at, (p.regs ? "this task asks " + std::to_string(p.regs) + " registers a thread for "
                        : std::string("this task names no budget for ")) +
                    warpsText(p.warps) +
                    (attr::AsyncTask::replicate(*p.op) > 1 ? " in each replica" : "")));
    }
    int idle = 0;
    for (int g = defaultGroups; g < groups; ++g)
      if (!used[g]) idle += 4;
    if (idle) add(warpsText(idle) + " without a task x 24");
    raiseError(
        block.loc(),
        "the async tasks' register budgets do not fit in the SM's 65,536 registers: " + asks +
            " need at least " + withCommas(fixed + kMinRegs * sharing) +
            " registers, more than the " + withCommas(pool) + " that the CTA's " +
            std::to_string(total * 32) + " threads hold together (" + std::to_string(launch) +
            " each at launch: 65,536 / " + std::to_string(total * 32) +
            " rounded down to a multiple of 8); lower a budget or use fewer warps",
        std::move(notes));
  }
  const int share =
      sharing ? static_cast<int>(std::min<int64_t>(kMaxRegs, (pool - fixed) / sharing / 8 * 8)) : 0;
  auto groupRegs = [&](int g) { return !used[g] ? kMinRegs : asked[g] ? asked[g] : share; };
  for (const Part& p : parts)
    out.tasks.push_back(
        {p.op, p.replica, p.first, p.warps,
         p.isDefault ? (defaultRegs ? defaultRegs : share) : groupRegs(p.first / 4)});
  // Warps that run no task: runs of them inside one warp group.
  std::vector<bool> busy(total, false);
  for (const Part& p : parts)
    for (int w = p.first; w < p.first + p.warps; ++w) busy[w] = true;
  for (int w = 0; w < total;) {
    if (busy[w]) {
      ++w;
      continue;
    }
    int first = w;
    while (w < total && !busy[w] && w / 4 == first / 4) ++w;
    // The default warps without a default task share as the default task would.
    int regs = first < fn.numWarps ? share : groupRegs(first / 4);
    out.idle.push_back({first, w - first, regs});
  }
}

} // namespace

const AsyncTasksPlan& TaskPlan::of(const Op& op) const {
  for (const AsyncTasksPlan& b : blocks)
    if (b.op == &op) return b;
  throw std::logic_error("async_tasks block without a plan");
}

TaskPlan planAsyncTasks(const Function& fn) {
  TaskPlan plan;
  plan.totalWarps = fn.numWarps;
  std::vector<const Op*> blocks;
  walk(fn.body, [&](const Op& op) {
    if (op.code() == OpCode::AsyncTasks) blocks.push_back(&op);
  });
  std::vector<std::vector<Part>> parts;
  std::vector<bool> budgeted;
  const Op* widest = nullptr;
  for (const Op* block : blocks) {
    parts.push_back(partsOf(fn, *block));
    int end = place(fn, parts.back());
    if (end > plan.totalWarps) widest = block;
    plan.totalWarps = std::max(plan.totalWarps, end);
    bool any = false;
    for (const Part& p : parts.back()) any |= p.regs != 0;
    budgeted.push_back(any);
  }
  const bool anyBudget = std::find(budgeted.begin(), budgeted.end(), true) != budgeted.end();
  if (anyBudget) plan.totalWarps = static_cast<int>(alignTo(plan.totalWarps, 4));
  if (plan.totalWarps > 32)
    raiseError(widest->loc(), "the async tasks need " + std::to_string(plan.totalWarps) +
                                  " warps; a CTA has at most 32");
  if (anyBudget) {
    const Op* first = blocks[std::find(budgeted.begin(), budgeted.end(), true) - budgeted.begin()];
    if (fn.numWarps % 4 != 0)
      raiseError(first->loc(), "register budgets (setmaxnreg) apply to whole warp groups, but "
                               "the default task runs on num_warps=" +
                                   std::to_string(fn.numWarps) +
                                   ", part of one; launch with a multiple of 4 warps or drop "
                                   "registers= / num_regs=");
    plan.maxRegisters = std::min(kMaxLaunchRegs, kSmRegisters / (plan.totalWarps * 32)) / 8 * 8;
  }
  for (size_t i = 0; i < blocks.size(); ++i) {
    AsyncTasksPlan b;
    b.op = blocks[i];
    if (budgeted[i]) {
      assignRegisters(fn, *blocks[i], parts[i], plan.totalWarps, plan.maxRegisters, b);
    } else {
      for (const Part& p : parts[i]) b.tasks.push_back({p.op, p.replica, p.first, p.warps, 0});
    }
    plan.blocks.push_back(std::move(b));
  }
  return plan;
}

std::string asyncTaskLabel(const Op& task, int replica) {
  int index = 0;
  const Block* block = task.parentBlock();
  if (block)
    for (const auto& t : block->ops()) {
      if (t->code() != OpCode::AsyncTask) continue;
      if (attr::AsyncTask::replica(*t) == 0 && !attr::AsyncTask::isDefault(*t)) ++index;
      if (t.get() == &task) break;
    }
  std::string name = attr::AsyncTask::name(task);
  std::string label = !name.empty() && name != "task" && name != "default" ? "task '" + name + "'"
                      : attr::AsyncTask::isDefault(task)                   ? "default task"
                                                         : "async task " + std::to_string(index);
  if (attr::AsyncTask::replicate(task) > 1)
    label += " replica " + std::to_string(replica >= 0 ? replica : attr::AsyncTask::replica(task));
  return label;
}

} // namespace ww::ir
