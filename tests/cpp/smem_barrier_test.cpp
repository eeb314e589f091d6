// Where the shared-memory hazard pass (src/transforms/SharedMemoryBarriers.cpp) puts CTA
// barriers in Tile IR and PTX, and where it does not: rings of cp.async copies read by wgmma or
// local_load (with and without a wait between the read and the refill), constant slots, if
// branches, warp-specialized code, thread-dependent branches, and barriers that a reduction's
// own scratch barriers make redundant in the PTX.
#include "codegen/Codegen.h"
#include "interp/Interpreter.h"
#include "interp/Numerics.h"
#include "ir/IR.h"
#include "transforms/Passes.h"
#include "warpweave/warpweave.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

namespace ww {
namespace {

const char* const kHazardBarrier = "debug_barrier {smem_hazard = 1}";

int count(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t p = text.find(needle); p != std::string::npos; p = text.find(needle, p + 1)) ++n;
  return n;
}

CompiledKernel compileSource(const std::string& source, const std::string& kernel,
                             const std::string& signature, int numWarps,
                             Stage stage = Stage::TileIR) {
  CompileRequest req;
  req.files.push_back({"smem.py", source});
  req.kernel = kernel;
  req.signature = parseSignature(signature);
  req.options.numWarps = numWarps;
  req.stage = stage;
  return compile(req);
}

/// The lines of `text` in order, for "A comes before B" checks.
size_t lineOf(const std::string& text, const std::string& needle, size_t from = 0) {
  size_t p = text.find(needle, from);
  EXPECT_NE(p, std::string::npos) << needle << "\n" << text;
  return p;
}

/// The 1-based line of `source` that holds `needle`.
int lineNumber(const std::string& source, const std::string& needle) {
  size_t p = source.find(needle);
  EXPECT_NE(p, std::string::npos) << needle;
  return 1 + int(std::count(source.begin(), source.begin() + std::ptrdiff_t(p), '\n'));
}

/// Removes every barrier the pass inserted (at any depth); returns how many.
int eraseHazardBarriers(ir::Block& block) {
  int n = 0;
  auto& ops = block.ops();
  for (size_t i = 0; i < ops.size();) {
    ir::Op& op = *ops[i];
    for (unsigned r = 0; r < op.numRegions(); ++r) n += eraseHazardBarriers(*op.region(r));
    if (op.code() == ir::OpCode::DebugBarrier && op.intAttr("smem_hazard") != 0) {
      ops.erase(ops.begin() + std::ptrdiff_t(i));
      ++n;
    } else {
      ++i;
    }
  }
  return n;
}

const std::string kHeader = "import warpweave as ww\n"
                            "import warpweave.language as tl\n"
                            "from warpweave import tlx\n"
                            "\n"
                            "\n";

// ---------------------------------------------------------------------------------------------
// A pipelined GEMM without warp specialization, the shape of the TLX Hopper tutorial: cp.async
// copies S - 1 steps ahead into a ring, async_dot straight from the ring with one wgmma left in
// flight, and the refill of the slot the previous wgmma read right after async_dot_wait(1).
// ---------------------------------------------------------------------------------------------

const std::string kRingGemm =
    kHeader + "@ww.jit\n"
              "def ring_gemm(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr,\n"
              "              BK: tl.constexpr, S: tl.constexpr):\n"
              "    offs_m = tl.program_id(0) * BM + tl.arange(0, BM)\n"
              "    offs_n = tl.arange(0, BN)\n"
              "    offs_k = tl.arange(0, BK)\n"
              "    a_ptrs = a_ptr + offs_m[:, None] * K + offs_k[None, :]\n"
              "    b_ptrs = b_ptr + offs_k[:, None] * N + offs_n[None, :]\n"
              "    a_bufs = tlx.local_alloc((BM, BK), tl.float16, S)\n"
              "    b_bufs = tlx.local_alloc((BK, BN), tl.float16, S)\n"
              "    for i in tl.static_range(S - 1):\n"
              "        ta = tlx.async_load(a_ptrs + i * BK, tlx.local_view(a_bufs, i))\n"
              "        tb = tlx.async_load(b_ptrs + i * BK * N, tlx.local_view(b_bufs, i))\n"
              "        tlx.async_load_commit_group([ta, tb])\n"
              "    acc = tl.zeros((BM, BN), dtype=tl.float32)\n"
              "    for k in range(0, tl.cdiv(K, BK)):\n"
              "        buf = k % S\n"
              "        tlx.async_load_wait_group(S - 2)\n"
              "        acc = tlx.async_dot(tlx.local_view(a_bufs, buf), tlx.local_view(b_bufs, "
              "buf), acc)\n"
              "        acc = tlx.async_dot_wait(1, acc)\n"
              "        nxt = k + S - 1\n"
              "        ta = tlx.async_load(a_ptrs + nxt * BK, tlx.local_view(a_bufs, nxt % S),\n"
              "                            mask=offs_k[None, :] < K - nxt * BK)\n"
              "        tb = tlx.async_load(b_ptrs + nxt * BK * N, tlx.local_view(b_bufs, nxt % "
              "S),\n"
              "                            mask=offs_k[:, None] < K - nxt * BK)\n"
              "        tlx.async_load_commit_group([ta, tb])\n"
              "    acc = tlx.async_dot_wait(0, acc)\n"
              "    tl.store(c_ptr + offs_m[:, None] * N + offs_n[None, :], acc.to(tl.float16))\n";

std::string ringGemmSignature(int bm, int bn, int bk) {
  return "a_ptr:*fp16:16,b_ptr:*fp16:16,c_ptr:*fp16:16,M:i32,N:i32,K:i32,BM=" + std::to_string(bm) +
         ",BN=" + std::to_string(bn) + ",BK=" + std::to_string(bk) + ",S=3";
}

/// Runs `fn` (ring_gemm at BM=64, BN=32, BK=16) on exact small fp16 values; "" when it ran clean
/// with the exact product, else the interpreter's error.
std::string runRingGemm(const ir::Function& fn, const SourceManager* sources, uint64_t seed = 0) {
  const int M = 64, N = 32, K = 80;
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> small(-3, 3);
  std::vector<uint16_t> a(size_t(M) * K), b(size_t(K) * N), c(size_t(M) * N, 0xFFFF);
  std::vector<float> af(a.size()), bf(b.size());
  for (size_t i = 0; i < a.size(); ++i) a[i] = interp::floatToHalf(af[i] = float(small(rng)));
  for (size_t i = 0; i < b.size(); ++i) b[i] = interp::floatToHalf(bf[i] = float(small(rng)));
  auto buffer = [](std::vector<uint16_t>& v) { return InterpArg::buffer(v.data(), v.size() * 2); };
  int grid[3] = {M / 64, 1, 1};
  interp::RunOptions options;
  options.seed = seed;
  try {
    interp::run(fn, sources, grid,
                {buffer(a), buffer(b), buffer(c), InterpArg::integer(M), InterpArg::integer(N),
                 InterpArg::integer(K)},
                options);
  } catch (const InterpreterError& e) {
    return e.what();
  }
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      float ref = 0;
      for (int k = 0; k < K; ++k) ref += af[size_t(m) * K + k] * bf[size_t(k) * N + n];
      if (interp::halfToFloat(c[size_t(m) * N + n]) != ref)
        return "wrong C[" + std::to_string(m) + "][" + std::to_string(n) + "]";
    }
  return "";
}

TEST(SmemBarriers, RingGemmOfTwoWarpGroupsGetsOneBarrierBeforeTheRefill) {
  CompiledKernel k = compileSource(kRingGemm, "ring_gemm", ringGemmSignature(64, 32, 16), 8);
  const std::string& ir = k.tileIR;
  EXPECT_EQ(count(ir, kHazardBarrier), 1) << ir;
  // In the loop: the wait that retires the previous wgmma, then the barrier, then the refill.
  size_t wait = lineOf(ir, "async_dot_wait %", lineOf(ir, " = for "));
  size_t barrier = lineOf(ir, kHazardBarrier);
  size_t refill = lineOf(ir, " = async_load ", wait);
  EXPECT_LT(wait, barrier);
  EXPECT_LT(barrier, refill);
  EXPECT_EQ(ir.substr(ir.rfind('\n', barrier) + 1, 4), "    ") << "inside the loop body";
  // Running the pass again finds nothing more to do.
  EXPECT_EQ(transforms::insertSharedMemoryBarriers(*k.module->functions.front()), 0);
}

TEST(SmemBarriers, RingGemmOfOneWarpGroupNeedsNone) {
  // async_dot_wait retires the wgmma for the one warp group, which is every thread.
  CompiledKernel k = compileSource(kRingGemm, "ring_gemm", ringGemmSignature(64, 32, 16), 4);
  EXPECT_EQ(count(k.tileIR, kHazardBarrier), 0) << k.tileIR;
}

TEST(SmemBarriers, InterpreterRunsTheRingGemmCleanOnlyWithTheBarrier) {
  CompiledKernel k = compileSource(kRingGemm, "ring_gemm", ringGemmSignature(64, 32, 16), 8);
  ir::Function& fn = *k.module->functions.front();
  for (uint64_t seed : {0, 3}) EXPECT_EQ(runRingGemm(fn, k.module->sources, seed), "");
  // Without it, the refill overwrites a slot the other warp group's wgmma may still read.
  ASSERT_EQ(eraseHazardBarriers(fn.body), 1);
  std::string err = runRingGemm(fn, k.module->sources);
  EXPECT_NE(err.find("smem.py:" +
                     std::to_string(lineNumber(kRingGemm, "ta = tlx.async_load(a_ptrs + nxt")) +
                     ":"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("async_load overwrites shared memory that async_dot by the program may "
                     "still be reading in another warp group"),
            std::string::npos)
      << err;
}

TEST(SmemBarriers, RingGemmPtxMeetsAfterTheWgmmaWaitBeforeTheCopies) {
  CompiledKernel k =
      compileSource(kRingGemm, "ring_gemm", ringGemmSignature(128, 128, 64), 8, Stage::Ptx);
  const std::string& ptx = k.ptx;
  size_t wait = lineOf(ptx, "wgmma.wait_group.sync.aligned 1;");
  size_t barrier = lineOf(ptx, "bar.sync 0;", wait);
  size_t copy = lineOf(ptx, "cp.async.", wait);
  EXPECT_LT(barrier, copy) << ptx;
  // The loop holds two barriers: the wait group's and this one.
  size_t top = lineOf(ptx, "$L_for_0:"), end = lineOf(ptx, "bra.uni $L_for_0;");
  EXPECT_EQ(count(ptx.substr(top, end - top), "bar.sync"), 2) << ptx.substr(top, end - top);
}

// ---------------------------------------------------------------------------------------------
// A ring read by local_load: the refill of slot (k + S - 1) % S writes the slot iteration k - 1
// read. With the wait group between them (its barrier), nothing is needed; with the wait after
// the refill, a barrier goes before the refill.
// ---------------------------------------------------------------------------------------------

std::string ringSumSource(bool waitFirst) {
  std::string body = waitFirst ? "        tlx.async_load_wait_group(S - 2)\n"
                                 "        acc += tlx.local_load(tlx.local_view(bufs, k % S))\n"
                                 "        t = tlx.async_load(x_ptr + (k + S - 1) * 256 + offs, "
                                 "tlx.local_view(bufs, (k + S - 1) % S),\n"
                                 "                           mask=offs < (n - k - S + 1) * 256)\n"
                                 "        tlx.async_load_commit_group([t])\n"
                               : "        t = tlx.async_load(x_ptr + (k + S - 1) * 256 + offs, "
                                 "tlx.local_view(bufs, (k + S - 1) % S),\n"
                                 "                           mask=offs < (n - k - S + 1) * 256)\n"
                                 "        tlx.async_load_commit_group([t])\n"
                                 "        tlx.async_load_wait_group(S - 1)\n"
                                 "        acc += tlx.local_load(tlx.local_view(bufs, k % S))\n";
  return kHeader +
         "@ww.jit\n"
         "def ring_sum(x_ptr, out_ptr, n, S: tl.constexpr):\n"
         "    offs = tl.arange(0, 8)[:, None] * 32 + tl.arange(0, 32)[None, :]\n"
         "    bufs = tlx.local_alloc((8, 32), tl.float32, S)\n"
         "    for i in tl.static_range(S - 1):\n"
         "        t = tlx.async_load(x_ptr + i * 256 + offs, tlx.local_view(bufs, i))\n"
         "        tlx.async_load_commit_group([t])\n"
         "    acc = tl.zeros((8, 32), dtype=tl.float32)\n"
         "    for k in range(0, n):\n" +
         body + "    tlx.async_load_wait_group(0)\n    tl.store(out_ptr + offs, acc)\n";
}

std::vector<float> runRingSum(const CompiledKernel& k, int tiles) {
  std::vector<float> x(size_t(tiles + 3) * 256), out(256, -1.0f);
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(i % 17);
  int grid[3] = {1, 1, 1};
  interp::run(*k.module->functions.front(), k.module->sources, grid,
              {InterpArg::buffer(x.data(), x.size() * 4), InterpArg::buffer(out.data(), 1024),
               InterpArg::integer(tiles)});
  for (int j = 0; j < 256; ++j) {
    float ref = 0;
    for (int t = 0; t < tiles; ++t) ref += x[size_t(t) * 256 + j];
    EXPECT_EQ(out[j], ref) << j;
  }
  return out;
}

TEST(SmemBarriers, LocalLoadRingWithTheWaitBetweenNeedsNone) {
  for (int warps : {4, 8}) {
    CompiledKernel k = compileSource(ringSumSource(true), "ring_sum",
                                     "x_ptr:*fp32:16,out_ptr:*fp32:16,n:i32,S=3", warps);
    EXPECT_EQ(count(k.tileIR, kHazardBarrier), 0) << k.tileIR;
    runRingSum(k, 5);
  }
}

TEST(SmemBarriers, LocalLoadRingRefilledBeforeItsWaitGetsABarrier) {
  // Iteration k refills slot (k + 2) % 3 = (k - 1) % 3, which iteration k - 1's local_load read,
  // and no barrier of all threads came between: one barrier per iteration, before the copy.
  for (int warps : {1, 4}) {
    CompiledKernel k = compileSource(ringSumSource(false), "ring_sum",
                                     "x_ptr:*fp32:16,out_ptr:*fp32:16,n:i32,S=3", warps);
    const std::string& ir = k.tileIR;
    EXPECT_EQ(count(ir, kHazardBarrier), 1) << ir;
    size_t loop = lineOf(ir, " = for ");
    EXPECT_LT(lineOf(ir, kHazardBarrier, loop), lineOf(ir, " = async_load ", loop)) << ir;
    runRingSum(k, 5);
  }
}

// ---------------------------------------------------------------------------------------------
// Slots, branches, warp-specialized code
// ---------------------------------------------------------------------------------------------

/// Fills slot 0, reads it, then `rest` (which may write it again) and stores `x`.
std::string slotsSource(const std::string& rest, const std::string& params = "") {
  return kHeader +
         "@ww.jit\n"
         "def slots(x_ptr, out_ptr, flag" +
         params +
         "):\n"
         "    offs = tl.arange(0, 8)[:, None] * 32 + tl.arange(0, 32)[None, :]\n"
         "    bufs = tlx.local_alloc((8, 32), tl.float32, 2)\n"
         "    t = tlx.async_load(x_ptr + offs, tlx.local_view(bufs, 0))\n"
         "    tlx.async_load_commit_group([t])\n"
         "    tlx.async_load_wait_group(0)\n"
         "    x = tlx.local_load(tlx.local_view(bufs, 0))\n" +
         rest +
         "    tlx.async_load_wait_group(0)\n"
         "    tl.store(out_ptr + offs, x)\n";
}

std::string irOf(const std::string& source, int warps = 4) {
  return compileSource(source, "slots", "x_ptr:*fp32:16,out_ptr:*fp32:16,flag:i32", warps).tileIR;
}

const std::string kRefill0 = "tlx.async_load(x_ptr + offs, tlx.local_view(bufs, 0))\n";
const std::string kRefill1 = "tlx.async_load(x_ptr + offs, tlx.local_view(bufs, 1))\n";

TEST(SmemBarriers, ConstantSlotsAreToldApart) {
  EXPECT_EQ(count(irOf(slotsSource("    " + kRefill1)), kHazardBarrier), 0);
  std::string ir = irOf(slotsSource("    " + kRefill0));
  EXPECT_EQ(count(ir, kHazardBarrier), 1) << ir;
  EXPECT_LT(lineOf(ir, " = local_load "), lineOf(ir, kHazardBarrier));
  // A barrier the user wrote already orders the read.
  EXPECT_EQ(count(irOf(slotsSource("    tl.debug_barrier()\n    " + kRefill0)), kHazardBarrier), 0);
}

TEST(SmemBarriers, AReadOnOneBranchNeedsABarrierAfterTheIf) {
  // Slot 1 is read on one path only; its refill after the if needs the barrier on that path,
  // and it goes after the join, before the refill.
  std::string ir = irOf(slotsSource("    if flag > 0:\n"
                                    "        x += tlx.local_load(tlx.local_view(bufs, 1))\n"
                                    "    " +
                                    kRefill1));
  EXPECT_EQ(count(ir, kHazardBarrier), 1) << ir;
  size_t barrier = lineOf(ir, kHazardBarrier);
  EXPECT_LT(lineOf(ir, " if "), barrier);
  EXPECT_EQ(ir.substr(ir.rfind('\n', barrier) + 1, 3), "  d") << "at the top level";
}

TEST(SmemBarriers, AWriteOnOneBranchGetsTheBarrierInThatBranch) {
  std::string ir = irOf(slotsSource("    if flag > 0:\n"
                                    "        " +
                                    kRefill0 +
                                    "    else:\n"
                                    "        " +
                                    kRefill1));
  EXPECT_EQ(count(ir, kHazardBarrier), 1) << ir;
  size_t inIf = lineOf(ir, " if ");
  size_t barrier = lineOf(ir, kHazardBarrier);
  EXPECT_LT(inIf, barrier);
  EXPECT_EQ(ir.substr(ir.rfind('\n', barrier) + 1, 4), "    ") << "inside the then region";
  EXPECT_LT(barrier, lineOf(ir, "  } {")) << "before the else region";
}

TEST(SmemBarriers, BranchesThatBothMeetLeaveNothingToOrder) {
  std::string ir = irOf(slotsSource("    if flag > 0:\n"
                                    "        tl.debug_barrier()\n"
                                    "    else:\n"
                                    "        tl.debug_barrier()\n"
                                    "    " +
                                    kRefill0));
  EXPECT_EQ(count(ir, kHazardBarrier), 0) << ir;
  // One branch without its barrier: the write after the if needs one.
  ir = irOf(slotsSource("    if flag > 0:\n"
                        "        tl.debug_barrier()\n"
                        "    " +
                        kRefill0));
  EXPECT_EQ(count(ir, kHazardBarrier), 1) << ir;
  EXPECT_LT(lineOf(ir, "if "), lineOf(ir, kHazardBarrier));
}

TEST(SmemBarriers, AThreadDependentBranchGetsItsBarrierBeforeTheIf) {
  // A barrier inside would not be met by the threads that skip the branch.
  std::string ir = irOf(slotsSource("    if tlx.thread_id(0) < 32:\n"
                                    "        " +
                                    kRefill0));
  EXPECT_EQ(count(ir, kHazardBarrier), 1) << ir;
  size_t barrier = lineOf(ir, kHazardBarrier);
  EXPECT_EQ(ir.substr(ir.rfind('\n', barrier) + 1, 3), "  d") << "at the top level";
  EXPECT_LT(barrier, lineOf(ir, " if "));
}

TEST(SmemBarriers, LoopCarriedReadsAreOrderedAcrossTheBackEdge) {
  // Each iteration reads slot 0 and refills it: a barrier in the loop, before the refill.
  std::string ir = irOf(slotsSource("    for i in range(flag):\n"
                                    "        x += tlx.local_load(tlx.local_view(bufs, 0))\n"
                                    "        " +
                                    kRefill0 + "        tlx.async_load_wait_group(0)\n"));
  EXPECT_EQ(count(ir, kHazardBarrier), 1) << ir;
  size_t loop = lineOf(ir, " = for ");
  EXPECT_LT(lineOf(ir, " = local_load ", loop), lineOf(ir, kHazardBarrier)) << ir;
  // Reading slot i % 2 and refilling slot (i + 1) % 2, with no wait in the loop: iteration
  // k + 1 refills slot k % 2, which iteration k read.
  const std::string alternate =
      "        x += tlx.local_load(tlx.local_view(bufs, i % 2))\n"
      "        tlx.async_load(x_ptr + offs, tlx.local_view(bufs, (i + 1) % 2))\n";
  ir = irOf(slotsSource("    for i in range(flag):\n" + alternate));
  EXPECT_EQ(count(ir, kHazardBarrier), 1) << ir;
  EXPECT_LT(lineOf(ir, " = for "), lineOf(ir, kHazardBarrier)) << ir;
  // With the wait group first in the iteration, its barrier orders the previous iteration's
  // read, and the refill of the other slot is no hazard within the iteration.
  ir = irOf(slotsSource("    for i in range(flag):\n"
                        "        tlx.async_load_wait_group(0)\n" +
                        alternate));
  EXPECT_EQ(count(ir, kHazardBarrier), 0) << ir;
}

TEST(SmemBarriers, WarpSpecializedCodeIsLeftAlone) {
  // The consumer reads the slot and refills it itself with no barrier: the user synchronizes
  // async tasks, so nothing is inserted inside them.
  std::string source = kHeader +
                       "@ww.jit\n"
                       "def ws(x_ptr, out_ptr):\n"
                       "    offs = tl.arange(0, 8)[:, None] * 32 + tl.arange(0, 32)[None, :]\n"
                       "    bufs = tlx.local_alloc((8, 32), tl.float32, 1)\n"
                       "    with tlx.async_tasks():\n"
                       "        with tlx.async_task(\"default\"):\n"
                       "            tl.store(out_ptr + 256 + offs, offs.to(tl.float32))\n"
                       "        with tlx.async_task(num_warps=8):\n"
                       "            t = tlx.async_load(x_ptr + offs, tlx.local_view(bufs, 0))\n"
                       "            tlx.async_load_commit_group([t])\n"
                       "            tlx.async_load_wait_group(0)\n"
                       "            x = tlx.local_load(tlx.local_view(bufs, 0))\n"
                       "            t = tlx.async_load(x_ptr + offs, tlx.local_view(bufs, 0))\n"
                       "            tlx.async_load_commit_group([t])\n"
                       "            tlx.async_load_wait_group(0)\n"
                       "            tl.store(out_ptr + offs, x)\n";
  CompiledKernel k = compileSource(source, "ws", "x_ptr:*fp32:16,out_ptr:*fp32:16", 4);
  EXPECT_EQ(count(k.tileIR, kHazardBarrier), 0) << k.tileIR;
}

TEST(SmemBarriers, TasksThatOverwriteWhatTheProgramReadStartAfterABarrier) {
  std::string source = kHeader +
                       "@ww.jit\n"
                       "def ws(x_ptr, out_ptr):\n"
                       "    offs = tl.arange(0, 8)[:, None] * 32 + tl.arange(0, 32)[None, :]\n"
                       "    bufs = tlx.local_alloc((8, 32), tl.float32, 1)\n"
                       "    t = tlx.async_load(x_ptr + offs, tlx.local_view(bufs, 0))\n"
                       "    tlx.async_load_commit_group([t])\n"
                       "    tlx.async_load_wait_group(0)\n"
                       "    x = tlx.local_load(tlx.local_view(bufs, 0))\n"
                       "    with tlx.async_tasks():\n"
                       "        with tlx.async_task(\"default\"):\n"
                       "            tl.store(out_ptr + offs, x)\n"
                       "        with tlx.async_task(num_warps=4):\n"
                       "            tlx.local_store(tlx.local_view(bufs, 0), x + 1)\n";
  CompiledKernel k = compileSource(source, "ws", "x_ptr:*fp32:16,out_ptr:*fp32:16", 4);
  const std::string& ir = k.tileIR;
  EXPECT_EQ(count(ir, kHazardBarrier), 1) << ir;
  EXPECT_LT(lineOf(ir, kHazardBarrier), lineOf(ir, "async_tasks"));
}

TEST(SmemBarriers, ThePipelinersLoopsNeedNoMore) {
  // The library matmul's loop, software-pipelined for sm_90a, orders its refills with the wait
  // group's barrier (one warp group); kernels/hopper/gemm_pipelined.py places its own after the
  // wgmma wait.
  CompileRequest req;
  req.kernel = "matmul_kernel";
  req.signature = parseSignature(
      "a_ptr:*fp16:16,b_ptr:*fp16:16,c_ptr:*fp16:16,M:i32,N:i32,K:i32:16,stride_am:i32:16,"
      "stride_ak:i32:1,stride_bk:i32:16,stride_bn:i32:1,stride_cm:i32:16,stride_cn:i32:1,"
      "BLOCK_M=128,BLOCK_N=128,BLOCK_K=64,GROUP_M=8,ACTIVATION=\"\"");
  req.files = {{"python/warpweave/ops/kernels/matmul.py", [] {
                  std::FILE* f =
                      std::fopen(WW_SOURCE_DIR "/python/warpweave/ops/kernels/matmul.py", "rb");
                  std::string text;
                  char chunk[4096];
                  for (size_t n; f && (n = std::fread(chunk, 1, sizeof chunk, f)) > 0;)
                    text.append(chunk, n);
                  if (f) std::fclose(f);
                  return text;
                }()}};
  req.stage = Stage::TileIR;
  for (int warps : {4, 8}) {
    req.options.numWarps = warps;
    CompiledKernel k = compile(req);
    EXPECT_NE(count(k.tileIR, "async_dot "), 0) << "pipelined: " << k.tileIR;
    // Since the refill follows async_dot_wait(1) (num_stages - 1 ahead), two warp groups may
    // still read the slot it overwrites: one barrier there at 8 warps, as Triton's analysis
    // places; one warp group has retired its own reads.
    EXPECT_EQ(count(k.tileIR, kHazardBarrier), warps == 8 ? 1 : 0) << k.tileIR;
  }
}

// ---------------------------------------------------------------------------------------------
// PTX: a barrier the pass inserted is not emitted when a barrier of the code between the read
// and the write (a cross-warp reduction's scratch barriers) already met after the read.
// ---------------------------------------------------------------------------------------------

std::string reduceBetweenSource(bool reduce) {
  return kHeader +
         "@ww.jit\n"
         "def between(x_ptr, out_ptr):\n"
         "    offs = tl.arange(0, 32)[:, None] * 32 + tl.arange(0, 32)[None, :]\n"
         "    bufs = tlx.local_alloc((32, 32), tl.float32, 1)\n"
         "    t = tlx.async_load(x_ptr + offs, tlx.local_view(bufs, 0))\n"
         "    tlx.async_load_commit_group([t])\n"
         "    tlx.async_load_wait_group(0)\n"
         "    x = tlx.local_load(tlx.local_view(bufs, 0))\n" +
         std::string(reduce ? "    s = tl.sum(x, axis=0)[None, :]\n" : "    s = x\n") +
         "    t = tlx.async_load(x_ptr + 1024 + offs, tlx.local_view(bufs, 0))\n"
         "    tlx.async_load_commit_group([t])\n"
         "    tlx.async_load_wait_group(0)\n"
         "    y = tlx.local_load(tlx.local_view(bufs, 0))\n"
         "    tl.store(out_ptr + offs, y + s)\n";
}

/// The PTX of `k`'s Tile IR as compiled, and with the pass's barriers removed.
std::pair<std::string, std::string> ptxWithAndWithout(CompiledKernel& k) {
  ir::Function& fn = *k.module->functions.front();
  CompileOptions options;
  options.numWarps = fn.numWarps;
  std::string with = codegen::emitPtx(fn, options, k.module->sources).ptx;
  eraseHazardBarriers(fn.body);
  std::string without = codegen::emitPtx(fn, options, k.module->sources).ptx;
  return {with, without};
}

TEST(SmemBarriers, AReductionsBarrierMakesTheInsertedOneRedundantInPtx) {
  for (bool reduce : {true, false}) {
    CompiledKernel k =
        compileSource(reduceBetweenSource(reduce), "between", "x_ptr:*fp32:16,out_ptr:*fp32:16", 8);
    ASSERT_EQ(count(k.tileIR, kHazardBarrier), 1) << k.tileIR;
    auto [with, without] = ptxWithAndWithout(k);
    if (reduce)
      EXPECT_EQ(with, without) << "the reduction's barriers came after the local_load";
    else
      EXPECT_EQ(count(with, "bar.sync"), count(without, "bar.sync") + 1) << with;
  }
}

} // namespace
} // namespace ww
