// Liveness-based shared-memory placement (src/layout/SharedMemoryPlan.cpp): buffers whose
// lifetimes do not overlap share bytes, those that overlap do not, a buffer whose asynchronous
// readers or writers (wgmma, cp.async, TMA, tcgen05) no wait is known to drain keeps its bytes,
// and the codegen puts a CTA barrier (and a proxy fence where the async proxy is on one side)
// between the old tenant's last use and the new one's first. Kernels of 192 KiB of stages and a
// 64 KiB C tile compile for sm_90a and sm_100a within a CTA's shared memory; ptxas accepts them.
#include "ir/IR.h"
#include "ir/OpAttrs.h"
#include "layout/LayoutAssignment.h"
#include "warpweave/warpweave.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

namespace ww {
namespace {

using ir::OpCode;
using layout::LayoutMap;
using layout::SharedAllocation;

constexpr int64_t kLimit = 232448; // dynamic shared memory a CTA may use (sm_90a, sm_100a)

const std::string kHeader = "import warpweave as ww\n"
                            "import warpweave.language as tl\n"
                            "from warpweave import tlx\n"
                            "\n"
                            "\n";

std::string readRepoFile(const std::string& path) {
  std::ifstream file(std::string(WW_SOURCE_DIR) + "/" + path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

CompiledKernel compileSource(const std::string& source, const std::string& kernel,
                             const std::string& signature, Target target, Stage stage,
                             int numWarps = 4) {
  CompileRequest req;
  req.files.push_back({"reuse.py", source});
  req.kernel = kernel;
  req.signature = parseSignature(signature);
  req.options.target = target;
  req.options.numWarps = numWarps;
  req.stage = stage;
  return compile(req);
}

/// A compiled kernel's Tile IR with its layouts and shared-memory placement.
struct Placed {
  CompiledKernel kernel;
  const ir::Function* fn = nullptr;
  LayoutMap map;
  std::vector<const ir::Op*> allocs; // shared local_allocs, in program order

  Placed(const std::string& source, const std::string& name, const std::string& signature,
         Target target = Target::SM90a, int numWarps = 4)
      : kernel(compileSource(source, name, signature, target, Stage::TileIR, numWarps)) {
    fn = kernel.module->functions.front().get();
    CompileOptions options;
    options.target = target;
    options.numWarps = fn->numWarps;
    map = layout::assignLayouts(*fn, options);
    ir::walk(fn->body, [&](const ir::Op& op) {
      if (op.code() == OpCode::LocalAlloc && ir::attr::LocalAlloc::storage(op) == "smem")
        allocs.push_back(&op);
    });
  }
  const SharedAllocation& alloc(size_t i) const {
    return *map.sharedAllocation(allocs.at(i)->result());
  }
  bool overlap(size_t i, size_t j) const {
    const SharedAllocation &a = alloc(i), &b = alloc(j);
    return a.offset < b.offset + b.bytes() && b.offset < a.offset + a.bytes();
  }
  /// The n-th op (in program order) with this code.
  const ir::Op* nth(OpCode code, int n = 0) const {
    const ir::Op* found = nullptr;
    ir::walk(fn->body, [&](const ir::Op& op) {
      if (!found && op.code() == code && n-- == 0) found = &op;
    });
    return found;
  }
};

// ---------------------------------------------------------------------------------------------
// Plain loads and stores
// ---------------------------------------------------------------------------------------------

/// a is written and read, then b is: 16 KiB tiles of fp32. With USE_A_LATE, a is read again
/// after b is written, so the two are live together.
const std::string kTwoTiles = kHeader + R"(@ww.jit
def two_tiles(x_ptr, out_ptr, USE_A_LATE: tl.constexpr):
    offs = tl.arange(0, 64)[:, None] * 64 + tl.arange(0, 64)[None, :]
    a = tlx.local_view(tlx.local_alloc((64, 64), tl.float32, 1), 0)
    tlx.local_store(a, tl.load(x_ptr + offs))
    y = tlx.local_load(a)
    b = tlx.local_view(tlx.local_alloc((64, 64), tl.float32, 1), 0)
    tlx.local_store(b, y * 2.0)
    z = tlx.local_load(b)
    if USE_A_LATE:
        z += tlx.local_load(a)
    tl.store(out_ptr + offs, z)
)";

TEST(SharedMemoryReuse, BuffersWhoseLifetimesDoNotMeetShareBytes) {
  Placed p(kTwoTiles, "two_tiles", "x_ptr:*fp32:16,out_ptr:*fp32:16,USE_A_LATE=0");
  ASSERT_EQ(p.allocs.size(), 2u);
  EXPECT_EQ(p.alloc(0).offset, p.alloc(1).offset);
  EXPECT_LE(p.map.sharedBytes(), 64 * 64 * 4 + 1024);
  // A CTA barrier between a's last read and b's first write (no proxy fence: both are plain
  // loads and stores).
  const ir::Op* firstStoreOfB = p.nth(OpCode::LocalStore, 1);
  const layout::ReuseBarrier* barrier = p.map.reuseBarrierBefore(*firstStoreOfB);
  ASSERT_NE(barrier, nullptr);
  EXPECT_FALSE(barrier->proxyFence);
  // In the PTX: a bar.sync between a's last ld.shared and b's first st.shared (local_store's
  // own, which comes before its writes).
  CompiledKernel k =
      compileSource(kTwoTiles, "two_tiles", "x_ptr:*fp32:16,out_ptr:*fp32:16,USE_A_LATE=0",
                    Target::SM90a, Stage::Cubin);
  EXPECT_FALSE(k.cubin.empty());
  const std::string& ptx = k.ptx;
  size_t lastLoadOfA = ptx.find("ld.shared");
  ASSERT_NE(lastLoadOfA, std::string::npos);
  size_t secondStores = ptx.find("st.shared", ptx.find("bar.sync", lastLoadOfA));
  ASSERT_NE(secondStores, std::string::npos);
  size_t lastLoadBefore = ptx.rfind("ld.shared", secondStores);
  EXPECT_NE(ptx.find("bar.sync 0", lastLoadBefore), std::string::npos);
  EXPECT_LT(ptx.find("bar.sync 0", lastLoadBefore), secondStores);
}

TEST(SharedMemoryReuse, BuffersLiveTogetherDoNotShareBytes) {
  Placed p(kTwoTiles, "two_tiles", "x_ptr:*fp32:16,out_ptr:*fp32:16,USE_A_LATE=1");
  ASSERT_EQ(p.allocs.size(), 2u);
  EXPECT_FALSE(p.overlap(0, 1));
  EXPECT_GE(p.map.sharedBytes(), 2 * 64 * 64 * 4);
  EXPECT_EQ(p.map.reuseBarrierBefore(*p.nth(OpCode::LocalStore, 1)), nullptr);
}

TEST(SharedMemoryReuse, BuffersOfOneLoopIterationShareBytesWithBarriersBothWays) {
  // Each iteration allocates a and b anew: they share bytes, b after a in the iteration and a
  // after the iteration before's b.
  std::string source = kHeader + R"(@ww.jit
def per_iteration(x_ptr, out_ptr, n):
    offs = tl.arange(0, 64)[:, None] * 64 + tl.arange(0, 64)[None, :]
    acc = tl.zeros((64, 64), tl.float32)
    for i in range(n):
        a = tlx.local_view(tlx.local_alloc((64, 64), tl.float32, 1), 0)
        tlx.local_store(a, tl.load(x_ptr + i * 4096 + offs))
        y = tlx.local_load(a)
        b = tlx.local_view(tlx.local_alloc((64, 64), tl.float32, 1), 0)
        tlx.local_store(b, y + 1.0)
        acc += tlx.local_load(b)
    tl.store(out_ptr + offs, acc)
)";
  Placed p(source, "per_iteration", "x_ptr:*fp32:16,out_ptr:*fp32:16,n:i32");
  ASSERT_EQ(p.allocs.size(), 2u);
  EXPECT_EQ(p.alloc(0).offset, p.alloc(1).offset);
  EXPECT_NE(p.map.reuseBarrierBefore(*p.nth(OpCode::LocalStore, 0)), nullptr);
  EXPECT_NE(p.map.reuseBarrierBefore(*p.nth(OpCode::LocalStore, 1)), nullptr);
}

/// One buffer in each branch of an if; COND picks what the branch is taken on.
std::string branchTiles(const std::string& cond) {
  return kHeader + R"(@ww.jit
def branch_tiles(x_ptr, out_ptr, n):
    offs = tl.arange(0, 64)[:, None] * 64 + tl.arange(0, 64)[None, :]
    if )" +
         cond + R"(:
        a = tlx.local_view(tlx.local_alloc((64, 64), tl.float32, 1), 0)
        tlx.local_store(a, tl.load(x_ptr + offs))
        tl.store(out_ptr + offs, tlx.local_load(a))
    else:
        b = tlx.local_view(tlx.local_alloc((64, 64), tl.float32, 1), 0)
        tlx.local_store(b, tl.load(x_ptr + offs) * 2.0)
        tl.store(out_ptr + offs, tlx.local_load(b))
)";
}

TEST(SharedMemoryReuse, BuffersOfTheTwoBranchesOfAnIfShareBytes) {
  // Every thread takes the same branch (n is the kernel's argument): the two buffers never
  // meet, and nothing needs a barrier between them.
  Placed p(branchTiles("n > 4"), "branch_tiles", "x_ptr:*fp32:16,out_ptr:*fp32:16,n:i32");
  ASSERT_EQ(p.allocs.size(), 2u);
  EXPECT_EQ(p.alloc(0).offset, p.alloc(1).offset);
  EXPECT_LE(p.map.sharedBytes(), 64 * 64 * 4 + 1024);
  EXPECT_EQ(p.map.reuseBarrierBefore(*p.nth(OpCode::If)), nullptr);
  EXPECT_EQ(p.map.reuseBarrierBefore(*p.nth(OpCode::LocalStore, 1)), nullptr);
  EXPECT_FALSE(compileSource(branchTiles("n > 4"), "branch_tiles",
                             "x_ptr:*fp32:16,out_ptr:*fp32:16,n:i32", Target::SM90a, Stage::Cubin)
                   .cubin.empty());
}

TEST(SharedMemoryReuse, BranchesOnAThreadsOwnValueKeepTheirBytes) {
  // Warps 0-1 take one branch and warps 2-3 the other, at the same time: a thread id, and
  // what is computed from it through a branch's result, does not make the branches exclusive.
  for (const char* cond : {"tlx.thread_id(0) < 64", "(tlx.thread_id(0) if n > 0 else 0) < 64"}) {
    Placed p(branchTiles(cond), "branch_tiles", "x_ptr:*fp32:16,out_ptr:*fp32:16,n:i32");
    ASSERT_EQ(p.allocs.size(), 2u) << cond;
    EXPECT_FALSE(p.overlap(0, 1)) << cond;
  }
}

TEST(SharedMemoryReuse, BranchesTakenInTurnInALoopShareBytesBehindABarrier) {
  // Iteration i may take one branch and i + 1 the other: a barrier before the if keeps the
  // second buffer's writes after the first one's reads of the iteration before.
  std::string source = kHeader + R"(@ww.jit
def branch_turns(x_ptr, out_ptr, n):
    offs = tl.arange(0, 64)[:, None] * 64 + tl.arange(0, 64)[None, :]
    for i in range(n):
        if i % 2 == 0:
            a = tlx.local_view(tlx.local_alloc((64, 64), tl.float32, 1), 0)
            tlx.local_store(a, tl.load(x_ptr + offs))
            tl.store(out_ptr + i * 4096 + offs, tlx.local_load(a))
        else:
            b = tlx.local_view(tlx.local_alloc((64, 64), tl.float32, 1), 0)
            tlx.local_store(b, tl.load(x_ptr + offs) * 2.0)
            tl.store(out_ptr + i * 4096 + offs, tlx.local_load(b))
)";
  Placed p(source, "branch_turns", "x_ptr:*fp32:16,out_ptr:*fp32:16,n:i32");
  ASSERT_EQ(p.allocs.size(), 2u);
  EXPECT_EQ(p.alloc(0).offset, p.alloc(1).offset);
  EXPECT_NE(p.map.reuseBarrierBefore(*p.nth(OpCode::If)), nullptr);
}

TEST(SharedMemoryReuse, ACopyInALoopOverBytesThreadsReadWaitsForThem) {
  // In each iteration threads read a, then a cp.async copy fills b over a's bytes: a barrier of
  // every thread between, inside the loop (a local_store met the CTA first; a copy does not).
  std::string source = kHeader + R"(@ww.jit
def copy_after_reads(x_ptr, out_ptr, n):
    offs = tl.arange(0, 64)[:, None] * 64 + tl.arange(0, 64)[None, :]
    acc = tl.zeros((64, 64), tl.float32)
    for i in range(n):
        a = tlx.local_view(tlx.local_alloc((64, 64), tl.float32, 1), 0)
        tlx.local_store(a, tl.load(x_ptr + i * 4096 + offs))
        acc += tlx.local_load(a)
        b = tlx.local_view(tlx.local_alloc((64, 64), tl.float32, 1), 0)
        t = tlx.async_load(x_ptr + offs, b)
        tlx.async_load_commit_group([t])
        tlx.async_load_wait_group(0)
        acc += tlx.local_load(b)
    tl.store(out_ptr + offs, acc)
)";
  const char* sig = "x_ptr:*fp32:16,out_ptr:*fp32:16,n:i32";
  Placed p(source, "copy_after_reads", sig);
  ASSERT_EQ(p.allocs.size(), 2u);
  EXPECT_EQ(p.alloc(0).offset, p.alloc(1).offset);
  const layout::ReuseBarrier* barrier = p.map.reuseBarrierBefore(*p.nth(OpCode::AsyncLoad));
  ASSERT_NE(barrier, nullptr);
  EXPECT_FALSE(barrier->proxyFence); // cp.async and ld.shared are both the generic proxy
  CompiledKernel k = compileSource(source, "copy_after_reads", sig, Target::SM90a, Stage::Cubin);
  EXPECT_FALSE(k.cubin.empty());
  size_t loop = k.ptx.find("$L_for_");
  ASSERT_NE(loop, std::string::npos);
  size_t copy = k.ptx.find("cp.async.", loop);
  size_t readOfA = k.ptx.rfind("ld.shared", copy);
  ASSERT_GT(readOfA, loop);
  size_t between = k.ptx.find("bar.sync 0", readOfA);
  EXPECT_LT(between, copy);
}

TEST(SharedMemoryReuse, BuffersOfAsyncTasksKeepTheirBytes) {
  std::string source = kHeader + R"(@ww.jit
def tasks(x_ptr, out_ptr):
    offs = tl.arange(0, 64)[:, None] * 64 + tl.arange(0, 64)[None, :]
    a = tlx.local_view(tlx.local_alloc((64, 64), tl.float32, 1), 0)
    tlx.local_store(a, tl.load(x_ptr + offs))
    tl.store(out_ptr + offs, tlx.local_load(a))
    b = tlx.local_view(tlx.local_alloc((64, 64), tl.float32, 1), 0)
    with tlx.async_tasks():
        with tlx.async_task("default"):
            tlx.local_store(b, tl.load(x_ptr + offs))
            tl.store(out_ptr + offs, tlx.local_load(b))
)";
  Placed p(source, "tasks", "x_ptr:*fp32:16,out_ptr:*fp32:16");
  ASSERT_EQ(p.allocs.size(), 2u);
  EXPECT_FALSE(p.overlap(0, 1));
}

// ---------------------------------------------------------------------------------------------
// Asynchronous readers and writers
// ---------------------------------------------------------------------------------------------

/// wgmma reads a and b; c (32 KiB, fp16) comes after. WAIT_FIRST retires the wgmma before c is
/// used; otherwise only after.
const std::string kWgmmaThenTile = kHeader + R"(@ww.jit
def wgmma_then_tile(x_ptr, out_ptr, WAIT_FIRST: tl.constexpr):
    offs = tl.arange(0, 128)[:, None] * 128 + tl.arange(0, 128)[None, :]
    x = tl.load(x_ptr + offs)
    a = tlx.local_view(tlx.local_alloc((128, 128), tl.float16, 1), 0)
    b = tlx.local_view(tlx.local_alloc((128, 128), tl.float16, 1), 0)
    tlx.local_store(a, x)
    tlx.local_store(b, x)
    tlx.fence_async_shared()
    acc = tlx.async_dot(a, b)
    if WAIT_FIRST:
        acc = tlx.async_dot_wait(0, acc)
    c = tlx.local_view(tlx.local_alloc((128, 128), tl.float16, 1), 0)
    tlx.local_store(c, x + 1.0)
    y = tlx.local_load(c)
    acc = tlx.async_dot_wait(0, acc)
    tl.store(out_ptr + offs, acc.to(tl.float16) + y)
)";

TEST(SharedMemoryReuse, BuffersOfARetiredWgmmaAreReused) {
  Placed p(kWgmmaThenTile, "wgmma_then_tile", "x_ptr:*fp16:16,out_ptr:*fp16:16,WAIT_FIRST=1");
  ASSERT_EQ(p.allocs.size(), 3u);
  EXPECT_TRUE(p.overlap(2, 0) || p.overlap(2, 1));
  // wgmma read a and b through the async proxy; c is written by threads: fence and barrier.
  const layout::ReuseBarrier* barrier = p.map.reuseBarrierBefore(*p.nth(OpCode::LocalStore, 2));
  ASSERT_NE(barrier, nullptr);
  EXPECT_TRUE(barrier->proxyFence);
  CompiledKernel k =
      compileSource(kWgmmaThenTile, "wgmma_then_tile",
                    "x_ptr:*fp16:16,out_ptr:*fp16:16,WAIT_FIRST=1", Target::SM90a, Stage::Cubin);
  EXPECT_FALSE(k.cubin.empty());
  size_t wait = k.ptx.find("wgmma.wait_group.sync.aligned 0");
  ASSERT_NE(wait, std::string::npos);
  size_t fence = k.ptx.find("fence.proxy.async.shared::cta", wait);
  size_t store = k.ptx.find("st.shared", wait);
  ASSERT_NE(fence, std::string::npos);
  EXPECT_LT(fence, store);
  EXPECT_LT(k.ptx.find("bar.sync 0", fence), store);
}

TEST(SharedMemoryReuse, BuffersAWgmmaMayStillReadAreNotReused) {
  Placed p(kWgmmaThenTile, "wgmma_then_tile", "x_ptr:*fp16:16,out_ptr:*fp16:16,WAIT_FIRST=0");
  ASSERT_EQ(p.allocs.size(), 3u);
  EXPECT_FALSE(p.overlap(2, 0));
  EXPECT_FALSE(p.overlap(2, 1));
}

/// cp.async copies into a; c comes after. DRAIN: 0 waits only after c's use, 1 commits and
/// waits before it, 2 waits before it without committing the copy.
const std::string kCpAsyncThenTile = kHeader + R"(@ww.jit
def cp_async_then_tile(x_ptr, out_ptr, DRAIN: tl.constexpr):
    offs = tl.arange(0, 64)[:, None] * 64 + tl.arange(0, 64)[None, :]
    a = tlx.local_view(tlx.local_alloc((64, 64), tl.float32, 1), 0)
    t = tlx.async_load(x_ptr + offs, a)
    if DRAIN != 2:
        tlx.async_load_commit_group([t])
    if DRAIN != 0:
        tlx.async_load_wait_group(0)
    c = tlx.local_view(tlx.local_alloc((64, 64), tl.float32, 1), 0)
    tlx.local_store(c, tl.load(x_ptr + offs))
    y = tlx.local_load(c)
    if DRAIN == 0:
        tlx.async_load_wait_group(0)
    tl.store(out_ptr + offs, y + tlx.local_load(a))
)";

TEST(SharedMemoryReuse, CpAsyncCopiesAreDrainedByACommittedWait) {
  Placed drained(kCpAsyncThenTile, "cp_async_then_tile", "x_ptr:*fp32:16,out_ptr:*fp32:16,DRAIN=1");
  ASSERT_EQ(drained.allocs.size(), 2u);
  // a is read at the end: the two meet whatever the copies do.
  EXPECT_FALSE(drained.overlap(0, 1));
}

TEST(SharedMemoryReuse, UndrainedCpAsyncCopiesKeepTheBufferToTheEnd) {
  // Without its last read, a is dead once its copy is drained; c may take its bytes only then.
  auto variant = [](int drain) {
    std::string source = kCpAsyncThenTile;
    source.replace(source.find("y + tlx.local_load(a)"), 21, "y");
    return Placed(source, "cp_async_then_tile",
                  "x_ptr:*fp32:16,out_ptr:*fp32:16,DRAIN=" + std::to_string(drain));
  };
  EXPECT_TRUE(variant(1).overlap(0, 1));
  EXPECT_FALSE(variant(0).overlap(0, 1)); // waited for only after c's use
  EXPECT_FALSE(variant(2).overlap(0, 1)); // never committed: the wait does not cover it
}

/// A TMA copy into a completes on bar; c comes after. WAITED: the copy's barrier is waited on
/// before c is used; otherwise the copy is issued after the last wait on its barrier.
const std::string kTmaThenTile = kHeader + R"(@ww.jit
def tma_then_tile(desc, x_ptr, out_ptr, WAITED: tl.constexpr):
    offs = tl.arange(0, 64)[:, None] * 64 + tl.arange(0, 64)[None, :]
    a = tlx.local_view(tlx.local_alloc((64, 64), tl.float16, 1), 0)
    bar = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    if not WAITED:
        tlx.barrier_wait(bar[0], 1)
    tlx.barrier_expect_bytes(bar[0], 64 * 64 * 2)
    tlx.async_descriptor_load(desc, a, [0, 0], bar[0])
    if WAITED:
        tlx.barrier_wait(bar[0], 0)
        tl.store(out_ptr + offs, tlx.local_load(a))
    c = tlx.local_view(tlx.local_alloc((64, 64), tl.float16, 1), 0)
    tlx.local_store(c, tl.load(x_ptr + offs))
    tl.store(out_ptr + offs, tlx.local_load(c))
)";

TEST(SharedMemoryReuse, TmaCopiesAreDrainedByTheLastWaitOnTheirBarrier) {
  const char* sig = "desc:desc<fp16,64x64>,x_ptr:*fp16:16,out_ptr:*fp16:16,WAITED=";
  Placed waited(kTmaThenTile, "tma_then_tile", std::string(sig) + "1");
  ASSERT_EQ(waited.allocs.size(), 2u);
  EXPECT_TRUE(waited.overlap(0, 1));
  Placed unwaited(kTmaThenTile, "tma_then_tile", std::string(sig) + "0");
  EXPECT_FALSE(unwaited.overlap(0, 1));
}

TEST(SharedMemoryReuse, ATmaCopyOverBytesThreadsReadGetsAFenceAndABarrier) {
  // a is written and read by threads; the TMA copy into b (an async-proxy write) takes its
  // bytes: fence.proxy.async and bar.sync before the copy.
  std::string source = kHeader + R"(@ww.jit
def threads_then_tma(desc, x_ptr, out_ptr):
    offs = tl.arange(0, 64)[:, None] * 64 + tl.arange(0, 64)[None, :]
    a = tlx.local_view(tlx.local_alloc((64, 64), tl.float16, 1), 0)
    tlx.local_store(a, tl.load(x_ptr + offs))
    tl.store(out_ptr + offs, tlx.local_load(a))
    b = tlx.local_view(tlx.local_alloc((64, 64), tl.float16, 1), 0)
    bar = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    tlx.barrier_expect_bytes(bar[0], 64 * 64 * 2)
    tlx.async_descriptor_load(desc, b, [0, 0], bar[0])
    tlx.barrier_wait(bar[0], 0)
    tl.store(out_ptr + 4096 + offs, tlx.local_load(b))
)";
  const char* sig = "desc:desc<fp16,64x64>,x_ptr:*fp16:16,out_ptr:*fp16:16";
  Placed p(source, "threads_then_tma", sig);
  ASSERT_EQ(p.allocs.size(), 2u);
  EXPECT_TRUE(p.overlap(0, 1));
  const layout::ReuseBarrier* barrier = p.map.reuseBarrierBefore(*p.nth(OpCode::AsyncDescLoad));
  ASSERT_NE(barrier, nullptr);
  EXPECT_TRUE(barrier->proxyFence);
  CompiledKernel k = compileSource(source, "threads_then_tma", sig, Target::SM90a, Stage::Cubin);
  EXPECT_FALSE(k.cubin.empty());
  size_t copy = k.ptx.find("cp.async.bulk.tensor");
  size_t lastRead = k.ptx.rfind("ld.shared", copy);
  ASSERT_NE(lastRead, std::string::npos);
  size_t fence = k.ptx.find("fence.proxy.async.shared::cta", lastRead);
  EXPECT_LT(fence, copy);
  EXPECT_LT(k.ptx.find("bar.sync 0", fence), copy);
}

// ---------------------------------------------------------------------------------------------
// Whole kernels: 192 KiB of stages and a 64 KiB C tile
// ---------------------------------------------------------------------------------------------

TEST(SharedMemoryReuse, Sm100aGemmWithACTileAfterItsStagesFits) {
  // tests/python/smem_reuse_kernels.py's tcgen05_gemm_tile at BN 256, BK 64, 4 stages (the
  // configuration of TLX's blackwell_gemm_pipelined.py that needs the stages' bytes reused).
  const std::string sig = "a_desc:desc<fp16,128x64>,b_desc:desc<fp16,64x256>,"
                          "c_desc:desc<fp16,128x256>,K:i32,BM=128,BN=256,BK=64,STAGES=4";
  CompileRequest req;
  req.files.push_back(
      {"tests/python/smem_reuse_kernels.py", readRepoFile("tests/python/smem_reuse_kernels.py")});
  req.kernel = "tcgen05_gemm_tile";
  req.signature = parseSignature(sig);
  req.options.target = Target::SM100a;
  req.options.numWarps = 4;
  req.stage = Stage::Cubin;
  CompiledKernel k = compile(req);
  EXPECT_FALSE(k.cubin.empty()) << k.ptxasLog;
  EXPECT_GE(k.sharedBytes, 4 * 48 * 1024);
  EXPECT_LE(k.sharedBytes, kLimit);
  // The C tile is written by threads after tcgen05 read the stages: fence, then barrier.
  size_t ld = k.ptx.find("tcgen05.ld");
  ASSERT_NE(ld, std::string::npos);
  size_t store = k.ptx.find("st.shared", ld);
  size_t fence = k.ptx.rfind("fence.proxy.async.shared::cta", store);
  ASSERT_NE(fence, std::string::npos);
  EXPECT_GT(fence, ld);
  EXPECT_LT(k.ptx.find("bar.sync 0", fence), store);
}

TEST(SharedMemoryReuse, Sm100aStagesAnMmaMayStillReadAreNotReused) {
  // The MMAs' completion is waited for only after the C tile's use: the stages keep their bytes
  // until then, and the kernel needs 256 KiB.
  std::string source = kHeader + R"(@ww.jit
def late_wait(a_desc, b_desc, x_ptr, out_ptr, BM: tl.constexpr, BN: tl.constexpr,
              BK: tl.constexpr, STAGES: tl.constexpr):
    a_tiles = tlx.local_alloc((BM, BK), tl.float16, STAGES)
    b_tiles = tlx.local_alloc((BK, BN), tl.float16, STAGES)
    loaded = tlx.alloc_barriers(num_barriers=STAGES, arrive_count=1)
    done = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    acc = tlx.local_view(tlx.local_alloc((BM, BN), tl.float32, 1, tlx.storage_kind.tmem), 0)
    for k in range(STAGES):
        bar = tlx.local_view(loaded, k)
        tlx.barrier_expect_bytes(bar, 2 * (BM + BN) * BK)
        tlx.async_descriptor_load(a_desc, tlx.local_view(a_tiles, k), [0, k * BK], bar)
        tlx.async_descriptor_load(b_desc, tlx.local_view(b_tiles, k), [k * BK, 0], bar)
        tlx.barrier_wait(bar, 0)
        tlx.async_dot(tlx.local_view(a_tiles, k), tlx.local_view(b_tiles, k), acc, use_acc=k > 0,
                      force_async=True)
    tlx.tcgen05_commit(tlx.local_view(done, 0))
    offs = tl.arange(0, BM)[:, None] * BN + tl.arange(0, BN)[None, :]
    c = tlx.local_view(tlx.local_alloc((BM, BN), tl.float16, 1), 0)
    tlx.local_store(c, tl.load(x_ptr + offs))
    tl.store(out_ptr + offs, tlx.local_load(c))
    tlx.barrier_wait(tlx.local_view(done, 0), 0)
    tl.store(out_ptr + offs, tlx.local_load(acc).to(tl.float16))
)";
  const std::string sig = "a_desc:desc<fp16,128x64>,b_desc:desc<fp16,64x256>,x_ptr:*fp16:16,"
                          "out_ptr:*fp16:16,BM=128,BN=256,BK=64,STAGES=4";
  Placed p(source, "late_wait", sig, Target::SM100a);
  ASSERT_EQ(p.allocs.size(), 3u);
  EXPECT_FALSE(p.overlap(2, 0));
  EXPECT_FALSE(p.overlap(2, 1));
  try {
    compileSource(source, "late_wait", sig, Target::SM100a, Stage::Ptx);
    FAIL() << "expected the kernel to need more shared memory than a CTA has";
  } catch (const CompileFailure& e) {
    EXPECT_NE(std::string(e.what()).find("bytes of shared memory"), std::string::npos) << e.what();
  }
  // With the wait before the tile, it takes the stages' bytes.
  std::string early = source;
  std::string wait = "    tlx.barrier_wait(tlx.local_view(done, 0), 0)\n";
  early.erase(early.find(wait), wait.size());
  early.insert(early.find("    offs = "), wait);
  Placed q(early, "late_wait", sig, Target::SM100a);
  EXPECT_TRUE(q.overlap(2, 0) || q.overlap(2, 1));
}

TEST(SharedMemoryReuse, Sm90aWgmmaGemmWithACTileAfterItsStagesFits) {
  CompileRequest req;
  req.files.push_back(
      {"tests/python/smem_reuse_kernels.py", readRepoFile("tests/python/smem_reuse_kernels.py")});
  req.kernel = "tma_gemm_tile";
  req.signature = parseSignature("a_desc:desc<fp16,128x64>,b_desc:desc<fp16,64x256>,"
                                 "c_desc:desc<fp16,128x256>,K:i32,BM=128,BN=256,BK=64,STAGES=4");
  req.options.target = Target::SM90a;
  req.options.numWarps = 8;
  req.stage = Stage::Cubin;
  CompiledKernel k = compile(req);
  EXPECT_FALSE(k.cubin.empty()) << k.ptxasLog;
  EXPECT_GE(k.sharedBytes, 4 * 48 * 1024);
  EXPECT_LE(k.sharedBytes, kLimit);
}

} // namespace
} // namespace ww
