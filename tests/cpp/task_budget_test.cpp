// Register budgets and warp placement of async tasks (ir/TaskPlan.h), from kernel source to PTX:
// the setmaxnreg each task executes, .maxnreg and .reqntid, ptxas accepting the result, and the
// errors for budgets that cannot fit. Also the barrier_wait phase checks and masks.
#include "ir/TaskPlan.h"
#include "runtime/Ptxas.h"
#include "warpweave/warpweave.h"

#include <gtest/gtest.h>

#include <regex>
#include <string>
#include <vector>

namespace ww {
namespace {

const char* kHeader = "import warpweave as ww\n"
                      "import warpweave.language as tl\n"
                      "from warpweave import tlx\n";

CompiledKernel compileSource(const std::string& body, const std::string& kernel,
                             const std::string& signature, int numWarps, Stage stage = Stage::Ptx) {
  CompileRequest req;
  req.files = {{"budgets.py", std::string(kHeader) + body}};
  req.kernel = kernel;
  req.signature = parseSignature(signature);
  req.options.target = Target::SM90a;
  req.options.numWarps = numWarps;
  req.stage = stage;
  return compile(req);
}

/// The rendered error of a compile that must fail (empty, and a test failure, when it succeeds).
std::string compileError(const std::string& body, const std::string& kernel,
                         const std::string& signature, int numWarps, Stage stage = Stage::Ptx) {
  try {
    compileSource(body, kernel, signature, numWarps, stage);
  } catch (const CompileFailure& e) {
    return e.what();
  }
  ADD_FAILURE() << "compiled without an error";
  return {};
}

int count(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t p = text.find(needle); p != std::string::npos; p = text.find(needle, p + 1)) ++n;
  return n;
}

std::string setmaxnreg(const std::string& dir, int regs) {
  return "setmaxnreg." + dir + ".sync.aligned.u32 " + std::to_string(regs) + ";";
}

/// ptxas accepts the PTX (skipped where no ptxas is installed); no spills.
void expectPtxasAccepts(const CompiledKernel& k) {
  if (runtime::findPtxas().empty()) {
    std::cout << "[ skipped ] no ptxas: the PTX is not assembled\n";
    return;
  }
  runtime::PtxasResult r = runtime::runPtxas(k.ptx, Target::SM90a, k.name);
  EXPECT_TRUE(r.ok) << r.log << "\n" << k.ptx;
  EXPECT_EQ(r.spillBytes, 0) << r.log;
  // ptxas drops a .maxnreg it cannot honour ("will be ignored"): then setmaxnreg would not hold.
  EXPECT_EQ(r.log.find("ignored"), std::string::npos) << r.log;
}

/// A kernel with a default task and the tasks `tasks` (each "num_warps=..., ..."), each storing
/// a row of `out` per replica; `after` is code after the async_tasks block.
std::string tasksKernel(const std::string& defaultArgs, const std::vector<std::string>& tasks,
                        const std::string& after = "") {
  std::string s = "@ww.jit\n"
                  "def ws(out_ptr, N: tl.constexpr):\n"
                  "    with tlx.async_tasks():\n"
                  "        with tlx.async_task(" +
                  defaultArgs +
                  "):\n"
                  "            tl.store(out_ptr + tl.arange(0, N), tl.full([N], 1, tl.int32))\n";
  for (size_t i = 0; i < tasks.size(); ++i)
    s += "        with tlx.async_task(" + tasks[i] +
         "):\n"
         "            r: tl.constexpr = tlx.async_task_replica_id()\n"
         "            row: tl.constexpr = " +
         std::to_string(4 * i + 1) +
         " + r\n"
         "            tl.store(out_ptr + row * N + tl.arange(0, N), tl.full([N], row, tl.int32))\n";
  s += after;
  return s;
}

const char* kSig = "out_ptr:*i32:16, N=128";

// ---------------------------------------------------------------------------------------------
// The budgets
// ---------------------------------------------------------------------------------------------

// TLX's Hopper tutorials: the producer names no budget, two consumer warp groups ask 232.
// 12 warps: 65,536 / 384 = 170 -> .maxnreg 168, 64,512 in all; the consumers take 2 x 128 x 232
// = 59,392, leaving 5,120 for the producer's 128 threads: 40 each.
TEST(TaskBudgets, DefaultTaskWithoutBudgetTakesTheEvenShare) {
  CompiledKernel k = compileSource(
      tasksKernel("\"default\"", {"num_warps=4, registers=232, replicate=2"}), "ws", kSig, 4);
  EXPECT_EQ(k.numWarps, 12);
  EXPECT_NE(k.ptx.find(".reqntid 384, 1, 1"), std::string::npos);
  EXPECT_NE(k.ptx.find(".maxnreg 168"), std::string::npos);
  EXPECT_EQ(count(k.ptx, setmaxnreg("dec", 40)), 1) << k.ptx;
  EXPECT_EQ(count(k.ptx, setmaxnreg("inc", 232)), 2) << k.ptx;
  EXPECT_EQ(count(k.ptx, "setmaxnreg"), 3) << k.ptx; // nothing follows: no restores
  expectPtxasAccepts(k);
}

// The planner's numbers for the same pattern, and the consumers' warps.
TEST(TaskBudgets, PlanPlacesReplicasAfterTheDefaultWarps) {
  CompiledKernel k =
      compileSource(tasksKernel("\"default\"", {"num_warps=4, registers=232, replicate=2"}), "ws",
                    kSig, 4, Stage::TileIR);
  ir::TaskPlan plan = ir::planAsyncTasks(*k.module->functions.front());
  EXPECT_EQ(plan.totalWarps, 12);
  EXPECT_EQ(plan.maxRegisters, 168);
  ASSERT_EQ(plan.blocks.size(), 1u);
  const ir::AsyncTasksPlan& b = plan.blocks[0];
  ASSERT_EQ(b.tasks.size(), 3u);
  EXPECT_EQ(b.tasks[0].firstWarp, 0);
  EXPECT_EQ(b.tasks[0].regs, 40);
  EXPECT_EQ(b.tasks[1].firstWarp, 4);
  EXPECT_EQ(b.tasks[2].firstWarp, 8);
  EXPECT_EQ(b.tasks[1].regs, 232);
  EXPECT_EQ(b.tasks[2].regs, 232);
  EXPECT_TRUE(b.idle.empty());
}

// Every budget given (kernels/hopper/gemm_ws.py's): used as asked.
TEST(TaskBudgets, AllBudgetsGiven) {
  CompiledKernel k = compileSource(
      tasksKernel("\"default\", registers=40", {"num_warps=4, registers=232, replicate=2"}), "ws",
      kSig, 4);
  EXPECT_NE(k.ptx.find(".maxnreg 168"), std::string::npos);
  EXPECT_EQ(count(k.ptx, setmaxnreg("dec", 40)), 1) << k.ptx;
  EXPECT_EQ(count(k.ptx, setmaxnreg("inc", 232)), 2) << k.ptx;
  expectPtxasAccepts(k);
}

// Budgets below the launch's: 24 for the producer, 160 for the consumers (all decreases).
TEST(TaskBudgets, BudgetsBelowTheLaunchBudgetAreDecreases) {
  CompiledKernel k = compileSource(
      tasksKernel("\"default\", registers=24", {"num_warps=4, registers=160, replicate=2"}), "ws",
      kSig, 4);
  EXPECT_EQ(count(k.ptx, setmaxnreg("dec", 24)), 1) << k.ptx;
  EXPECT_EQ(count(k.ptx, setmaxnreg("dec", 160)), 2) << k.ptx;
  EXPECT_EQ(count(k.ptx, "setmaxnreg.inc"), 0) << k.ptx;
  expectPtxasAccepts(k);
}

// A budget equal to the launch's needs no setmaxnreg.
TEST(TaskBudgets, BudgetEqualToTheLaunchBudgetIsNoInstruction) {
  CompiledKernel k = compileSource(
      tasksKernel("\"default\", registers=168", {"num_warps=4, registers=168, replicate=2"}), "ws",
      kSig, 4);
  EXPECT_NE(k.ptx.find(".maxnreg 168"), std::string::npos);
  EXPECT_EQ(count(k.ptx, "setmaxnreg"), 0) << k.ptx;
}

// 240 leaves exactly 24 for the producer (64,512 - 61,440 = 3,072 over 128 threads).
TEST(TaskBudgets, ShareOfExactly24Fits) {
  CompiledKernel k = compileSource(
      tasksKernel("\"default\"", {"num_warps=4, registers=240, replicate=2"}), "ws", kSig, 4);
  EXPECT_EQ(count(k.ptx, setmaxnreg("dec", 24)), 1) << k.ptx;
  EXPECT_EQ(count(k.ptx, setmaxnreg("inc", 240)), 2) << k.ptx;
  expectPtxasAccepts(k);
}

// A task without a budget beside one with: both it and the default task share what is left.
// 12 warps, .maxnreg 168: 64,512 - 128 x 232 = 34,816 over 256 threads = 136.
TEST(TaskBudgets, TasksWithoutABudgetShareWithTheDefaultTask) {
  CompiledKernel k = compileSource(
      tasksKernel("\"default\"", {"num_warps=4, registers=232", "num_warps=4"}), "ws", kSig, 4);
  EXPECT_EQ(count(k.ptx, setmaxnreg("dec", 136)), 2) << k.ptx;
  EXPECT_EQ(count(k.ptx, setmaxnreg("inc", 232)), 1) << k.ptx;
  expectPtxasAccepts(k);
}

// Code after the block runs on every warp at the launch budget: each task goes back to it.
TEST(TaskBudgets, TasksRestoreTheLaunchBudgetWhenCodeFollows) {
  std::string after =
      "    tl.store(out_ptr + 16 * N + tl.arange(0, N), tl.full([N], 7, tl.int32))\n";
  CompiledKernel k =
      compileSource(tasksKernel("\"default\"", {"num_warps=4, registers=232, replicate=2"}, after),
                    "ws", kSig, 4);
  EXPECT_EQ(count(k.ptx, setmaxnreg("dec", 40)), 1) << k.ptx;
  EXPECT_EQ(count(k.ptx, setmaxnreg("inc", 232)), 2) << k.ptx;
  EXPECT_EQ(count(k.ptx, setmaxnreg("inc", 168)), 1) << k.ptx; // the producer, back up
  EXPECT_EQ(count(k.ptx, setmaxnreg("dec", 168)), 2) << k.ptx; // the consumers, back down
  expectPtxasAccepts(k);
}

// Tasks of one warp share a warp group, padded with idle warps that give their registers up too.
// 8 warps: 65,536 / 256 = 256 -> .maxnreg 248 (ptxas ignores 256), 63,488 in all; warp group 1
// holds the two 24-register tasks and two idle warps (3,072); the default task's share is
// 60,416 / 128 = 472, held to setmaxnreg's 256.
TEST(TaskBudgets, OneWarpTasksArePaddedToAWarpGroup) {
  CompiledKernel k = compileSource(
      tasksKernel("\"default\"", {"num_warps=1, num_regs=24", "num_warps=1, num_regs=24"}), "ws",
      kSig, 4);
  EXPECT_EQ(k.numWarps, 8);
  EXPECT_NE(k.ptx.find(".reqntid 256, 1, 1"), std::string::npos);
  EXPECT_NE(k.ptx.find(".maxnreg 248"), std::string::npos);
  EXPECT_EQ(count(k.ptx, setmaxnreg("inc", 256)), 1) << k.ptx;
  // The two tasks and one run of two idle warps (6 and 7: threads 192-255).
  EXPECT_EQ(count(k.ptx, setmaxnreg("dec", 24)), 3) << k.ptx;
  EXPECT_TRUE(std::regex_search(
      k.ptx, std::regex(R"(sub\.u32\s+%r\d+, %r\d+, 192;\s+setp\.ge\.u32\s+%p\d+, %r\d+, 64;)")))
      << k.ptx;
  expectPtxasAccepts(k);
}

// Larger tasks first (TLX's order), so that the 4-warp task starts at a warp group; the 1-warp
// task's group takes its budget, its idle warps too. 12 warps, .maxnreg 168: 64,512 - 128 x 232
// - 128 x 24 = 31,744 for the default task's 128 threads: 248.
TEST(TaskBudgets, LargestTasksArePlacedFirst) {
  CompiledKernel k = compileSource(
      tasksKernel("\"default\"", {"num_warps=1, num_regs=24", "num_warps=4, registers=232"}), "ws",
      kSig, 4, Stage::TileIR);
  ir::TaskPlan plan = ir::planAsyncTasks(*k.module->functions.front());
  EXPECT_EQ(plan.totalWarps, 12);
  EXPECT_EQ(plan.maxRegisters, 168);
  const ir::AsyncTasksPlan& b = plan.blocks.at(0);
  ASSERT_EQ(b.tasks.size(), 3u);
  EXPECT_EQ(b.tasks[0].regs, 248);
  EXPECT_EQ(b.tasks[1].firstWarp, 8); // the 1-warp task, after the 4-warp one
  EXPECT_EQ(b.tasks[1].regs, 24);
  EXPECT_EQ(b.tasks[2].firstWarp, 4);
  EXPECT_EQ(b.tasks[2].regs, 232);
  ASSERT_EQ(b.idle.size(), 1u);
  EXPECT_EQ(b.idle[0].firstWarp, 9);
  EXPECT_EQ(b.idle[0].numWarps, 3);
  EXPECT_EQ(b.idle[0].regs, 24);
  CompiledKernel ptx = compileSource(
      tasksKernel("\"default\"", {"num_warps=1, num_regs=24", "num_warps=4, registers=232"}), "ws",
      kSig, 4);
  EXPECT_EQ(count(ptx.ptx, setmaxnreg("inc", 248)), 1) << ptx.ptx;
  EXPECT_EQ(count(ptx.ptx, setmaxnreg("dec", 24)), 2) << ptx.ptx;
  EXPECT_EQ(count(ptx.ptx, setmaxnreg("inc", 232)), 1) << ptx.ptx;
  expectPtxasAccepts(ptx);
}

// 8 default warps: 16 warps in all, .maxnreg 128 (65,536 / 512), 65,536 in all; the consumers
// take 59,392 and the default task's 256 threads share 6,144: 24 each.
TEST(TaskBudgets, EightDefaultWarps) {
  CompiledKernel k = compileSource(
      tasksKernel("\"default\"", {"num_warps=4, registers=232, replicate=2"}), "ws", kSig, 8);
  EXPECT_NE(k.ptx.find(".reqntid 512, 1, 1"), std::string::npos);
  EXPECT_NE(k.ptx.find(".maxnreg 128"), std::string::npos);
  EXPECT_EQ(count(k.ptx, setmaxnreg("dec", 24)), 1) << k.ptx;
  EXPECT_EQ(count(k.ptx, setmaxnreg("inc", 232)), 2) << k.ptx;
  expectPtxasAccepts(k);
}

// ---------------------------------------------------------------------------------------------
// Budgets that cannot fit, and budgets setmaxnreg cannot take
// ---------------------------------------------------------------------------------------------

TEST(TaskBudgets, BudgetsThatCannotFitAreAnErrorAtTheBlock) {
  std::string src = tasksKernel("\"default\"", {"num_warps=4, registers=248, replicate=2"});
  std::string e = compileError(src, "ws", kSig, 4);
  EXPECT_NE(e.find("budgets.py:6:5: error: the async tasks' register budgets do not fit in the "
                   "SM's 65,536 registers: default task: 4 warps without a budget (at least "
                   "24), async task 1 replica 0: 4 warps x 248, async task 1 replica 1: 4 warps "
                   "x 248 need at least 66,560 registers, more than the 64,512 that the CTA's "
                   "384 threads hold together (168 each at launch: 65,536 / 384 rounded down to "
                   "a multiple of 8)"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("budgets.py:9:9: note: this task asks 248 registers a thread for 4 warps in "
                   "each replica"),
            std::string::npos)
      << e;
  // The interpreter compiles through the same specializer: the same error.
  EXPECT_EQ(compileError(src, "ws", kSig, 4, Stage::TileIR), e);
}

// The tutorials' budgets with num_warps=16 (issue 20): 24 warps leave 80 registers a thread at
// launch, 61,440 in all, less than the consumers' 59,392 and 24 for each of 512 default threads.
TEST(TaskBudgets, TutorialBudgetsWithSixteenDefaultWarpsAreAnError) {
  std::string e = compileError(
      tasksKernel("\"default\"", {"num_warps=4, registers=232, replicate=2"}), "ws", kSig, 16);
  EXPECT_NE(e.find("default task: 16 warps without a budget (at least 24)"), std::string::npos)
      << e;
  EXPECT_NE(e.find("need at least 71,680 registers, more than the 61,440 that the CTA's 768 "
                   "threads hold together (80 each at launch"),
            std::string::npos)
      << e;
}

TEST(TaskBudgets, AllBudgetsGivenThatCannotFit) {
  std::string e = compileError(
      tasksKernel("\"default\", registers=56", {"num_warps=4, registers=232, replicate=2"}), "ws",
      kSig, 4);
  EXPECT_NE(e.find("default task: 4 warps x 56, async task 1 replica 0: 4 warps x 232, async task "
                   "1 replica 1: 4 warps x 232 need at least 66,560 registers"),
            std::string::npos)
      << e;
}

TEST(TaskBudgets, BudgetsOutsideWhatSetmaxnregTakes) {
  for (const char* regs : {"20", "260", "100"}) {
    std::string e = compileError(
        tasksKernel("\"default\"", {std::string("num_warps=4, registers=") + regs}), "ws", kSig, 4);
    EXPECT_NE(e.find("budgets.py:9:42: error: a register budget must be a multiple of 8 between "
                     "24 and 256, got " +
                     std::string(regs)),
              std::string::npos)
        << e;
  }
}

TEST(TaskBudgets, BudgetsNeedWholeDefaultWarpGroups) {
  std::string e =
      compileError(tasksKernel("\"default\"", {"num_warps=4, registers=232"}), "ws", kSig, 2);
  EXPECT_NE(e.find("budgets.py:6:5: error: register budgets (setmaxnreg) apply to whole warp "
                   "groups, but the default task runs on num_warps=2"),
            std::string::npos)
      << e;
}

// ptxas holds every instruction to .maxnreg, even where setmaxnreg raised the task above it
// (issue 20: "(C7602) Insufficient registers (80)"): a 64x128 wgmma needs 90 registers.
std::string dotKernel(int regs) {
  return "@ww.jit\n"
         "def ws_dot(a_ptr, b_ptr, c_ptr, BN: tl.constexpr):\n"
         "    with tlx.async_tasks():\n"
         "        with tlx.async_task(\"default\"):\n"
         "            pass\n"
         "        with tlx.async_task(num_warps=4, registers=" +
         std::to_string(regs) +
         ", replicate=2):\n"
         "            r: tl.constexpr = tlx.async_task_replica_id()\n"
         "            m = tl.arange(0, 64)\n"
         "            n = tl.arange(0, BN)\n"
         "            k = tl.arange(0, 16)\n"
         "            a = tl.load(a_ptr + m[:, None] * 16 + k[None, :])\n"
         "            b = tl.load(b_ptr + k[:, None] * BN + n[None, :])\n"
         "            c = tl.dot(a, b)\n"
         "            tl.store(c_ptr + r * 64 * BN + m[:, None] * BN + n[None, :], c)\n";
}

TEST(TaskBudgets, WgmmaAboveTheLaunchBudgetIsAnError) {
  const char* sig = "a_ptr:*fp16:16, b_ptr:*fp16:16, c_ptr:*fp32:16, BN=128";
  std::string e = compileError(dotKernel(160), "ws_dot", sig, 16);
  EXPECT_NE(e.find("budgets.py:16:17: error: tl.dot's m64n128 wgmma needs 90 registers a thread, "
                   "but ptxas compiles every instruction within the kernel's .maxnreg of 80 "
                   "(65,536 registers over the 768 threads of its 24 warps"),
            std::string::npos)
      << e;
  // 64 columns need 58: it compiles, and ptxas takes it at .maxnreg 80.
  CompiledKernel k = compileSource(dotKernel(160), "ws_dot",
                                   "a_ptr:*fp16:16, b_ptr:*fp16:16, c_ptr:*fp32:16, BN=64", 16);
  EXPECT_NE(k.ptx.find(".maxnreg 80"), std::string::npos);
  EXPECT_EQ(count(k.ptx, setmaxnreg("dec", 40)), 1) << k.ptx;
  EXPECT_EQ(count(k.ptx, setmaxnreg("inc", 160)), 2) << k.ptx;
  expectPtxasAccepts(k);
  // With the default 4 warps, 128 columns compile as well.
  CompiledKernel four = compileSource(dotKernel(232), "ws_dot", sig, 4);
  expectPtxasAccepts(four);
}

// ---------------------------------------------------------------------------------------------
// Placement
// ---------------------------------------------------------------------------------------------

TEST(TaskPlacement, NonPowerOfTwoWarpsIsAnErrorAtNumWarps) {
  std::string e =
      compileError(tasksKernel("\"default\"", {"num_warps=7, replicate=2"}), "ws", kSig, 4);
  EXPECT_NE(e.find("budgets.py:9:29: error: async_task num_warps=7 is not supported; use a power "
                   "of two from 1 to 32"),
            std::string::npos)
      << e;
}

// warp_group_start_id counts warps, as in TLX: replicas of 4 warps from warp 8 run on warps
// 8-11 and 12-15 (threads 256 and 384 on).
TEST(TaskPlacement, WarpGroupStartIdCountsWarps) {
  CompiledKernel k =
      compileSource(tasksKernel("\"default\"", {"num_warps=4, replicate=2, warp_group_start_id=8"}),
                    "ws", kSig, 4);
  EXPECT_NE(k.ptx.find(".reqntid 512, 1, 1"), std::string::npos) << k.ptx;
  for (int first : {256, 384})
    EXPECT_TRUE(std::regex_search(
        k.ptx, std::regex("sub\\.u32\\s+%r\\d+, %r\\d+, " + std::to_string(first) + ";")))
        << first;
}

TEST(TaskPlacement, StartIdInsideTheDefaultWarpsIsAnError) {
  std::string e = compileError(tasksKernel("\"default\"", {"num_warps=4, warp_group_start_id=2"}),
                               "ws", kSig, 4);
  EXPECT_NE(e.find("budgets.py:9:9: error: async task 1 would run on warps 2-5, which overlap "
                   "the default task's warps 0-3 (num_warps=4); warp_group_start_id counts "
                   "warps: start at 4 or later"),
            std::string::npos)
      << e;
}

TEST(TaskPlacement, StartIdsForSomeTasksOnlyIsAnError) {
  std::string e = compileError(
      tasksKernel("\"default\"", {"num_warps=4, warp_group_start_id=4", "num_warps=4"}), "ws", kSig,
      4);
  EXPECT_NE(e.find("budgets.py:13:9: error: warp_group_start_id is given to some async tasks of "
                   "this block but not to this one"),
            std::string::npos)
      << e;
}

TEST(TaskPlacement, BudgetedTaskAcrossAWarpGroupIsAnError) {
  std::string e = compileError(
      tasksKernel("\"default\"", {"num_warps=4, registers=160, warp_group_start_id=6"}), "ws", kSig,
      4);
  EXPECT_NE(e.find("async task 1 runs on warps 6-9, across a warp group boundary"),
            std::string::npos)
      << e;
}

// ---------------------------------------------------------------------------------------------
// barrier_wait phases
// ---------------------------------------------------------------------------------------------

std::string waitKernel(const std::string& phase) {
  return "@ww.jit\n"
         "def wait(out_ptr, p, N: tl.constexpr):\n"
         "    bars = tlx.alloc_barriers(num_barriers=1, arrive_count=1)\n"
         "    tlx.barrier_arrive(bars[0])\n"
         "    tlx.barrier_wait(bars[0], " +
         phase +
         ")\n"
         "    tl.store(out_ptr + tl.arange(0, N), tl.full([N], 1, tl.int32))\n";
}

TEST(BarrierWaitPhase, ConstantOtherThanZeroOrOneIsAnError) {
  std::string e = compileError(waitKernel("7"), "wait", "out_ptr:*i32:16, p:i32, N=128", 4);
  EXPECT_NE(e.find("budgets.py:8:31: error: tlx.barrier_wait's phase is the parity of the phase "
                   "to wait for: 0 or 1, got 7"),
            std::string::npos)
      << e;
}

// A run-time phase waits for the parity of its lowest bit (as in the interpreter); a value
// known to be 0 or 1 is used as it is.
TEST(BarrierWaitPhase, RunTimePhaseIsMaskedToItsParity) {
  const char* sig = "out_ptr:*i32:16, p:i32, N=128";
  CompiledKernel k = compileSource(waitKernel("p"), "wait", sig, 4);
  EXPECT_TRUE(std::regex_search(
      k.ptx,
      std::regex(
          R"(and\.b32\s+(%r\d+), %r\d+, 1;[\s\S]*try_wait\.parity\S*\s+%p\d+, \[%r\d+\], \1;)")))
      << k.ptx;
  expectPtxasAccepts(k);
  CompiledKernel masked = compileSource(waitKernel("(p // 2) & 1 ^ 1"), "wait", sig, 4);
  // Only the kernel's own `& 1`; the xor's result goes to try_wait as it is.
  EXPECT_EQ(count(masked.ptx, "and.b32"), 1) << masked.ptx;
  EXPECT_TRUE(std::regex_search(
      masked.ptx,
      std::regex(
          R"(xor\.b32\s+(%r\d+), %r\d+, 1;\s+\$L_wait_retry_\d+:\s+(\.loc[^\n]*\s+)?mbarrier\.try_wait\.parity\S*\s+%p\d+, \[%r\d+\], \1;)")))
      << masked.ptx;
  CompiledKernel one = compileSource(waitKernel("1"), "wait", sig, 4);
  EXPECT_TRUE(
      std::regex_search(one.ptx, std::regex(R"(try_wait\.parity\S*\s+%p\d+, \[%r\d+\], 1;)")))
      << one.ptx;
  expectPtxasAccepts(one);
}

} // namespace
} // namespace ww
