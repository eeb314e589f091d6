// Codegen for cluster launches (ctas_per_cga > 1): the cluster shape in the kernel header and the
// scope of barrier waits that other CTAs signal, checked in the PTX and assembled by ptxas.
#include "warpweave/warpweave.h"

#include <gtest/gtest.h>

#include <regex>

namespace ww {
namespace {

/// `relay` waits on `remote`, which the previous CTA of the cluster arrives on, and on `local`,
/// which only its own threads arrive on (lines 14 and 16).
const char* kRelaySource =
    "import warpweave as ww\n"                                                  // 1
    "import warpweave.language as tl\n"                                         // 2
    "from warpweave import tlx\n"                                               // 3
    "\n"                                                                        // 4
    "\n"                                                                        // 5
    "@ww.jit\n"                                                                 // 6
    "def relay(out_ptr, BLOCK: tl.constexpr):\n"                                // 7
    "    remote = tlx.alloc_barriers(num_barriers=2, arrive_count=1)\n"         // 8
    "    local = tlx.alloc_barriers(num_barriers=1, arrive_count=1)\n"          // 9
    "    rank = tlx.cluster_cta_rank()\n"                                       // 10
    "    size = tlx.cluster_size_1d()\n"                                        // 11
    "    offs = tl.arange(0, BLOCK)\n"                                          // 12
    "    tlx.barrier_arrive(remote[1], 1, remote_cta_rank=(rank + 1) % size)\n" // 13
    "    tlx.barrier_wait(tlx.local_view(remote, 1), 0)\n"                      // 14
    "    tlx.barrier_arrive(local[0], 1)\n"                                     // 15
    "    tlx.barrier_wait(local[0], 0)\n"                                       // 16
    "    tl.store(out_ptr + tl.program_id(0) * BLOCK + offs, offs + rank)\n";   // 17

/// Each CTA multicasts half a tile into both CTAs of the cluster; no remote arrive.
const char* kMulticastSource =
    "import warpweave as ww\n"
    "import warpweave.language as tl\n"
    "from warpweave import tlx\n"
    "\n"
    "\n"
    "@ww.jit\n"
    "def halves(in_desc, out_desc):\n"
    "    bufs = tlx.local_alloc((64, 64), tl.float16, 2)\n"
    "    bars = tlx.alloc_barriers(num_barriers=1, arrive_count=1)\n"
    "    rank = tlx.cluster_cta_rank()\n"
    "    tlx.barrier_expect_bytes(bars[0], 2 * 64 * 64 * 2)\n"
    "    tlx.async_descriptor_load(in_desc, bufs[rank], [rank * 64, 0], bars[0],\n"
    "                              multicast_targets=[0, 1])\n"
    "    tlx.barrier_wait(bars[0], 0)\n"
    "    tlx.async_descriptor_store(out_desc, bufs[1 - rank], [tl.program_id(0) * 64, 0])\n"
    "    tlx.async_descriptor_store_wait(0)\n"
    "    tlx.cluster_barrier()\n";

/// No cluster ops: only the header says the kernel runs in clusters.
const char* kPlainSource = "import warpweave as ww\n"
                           "import warpweave.language as tl\n"
                           "\n"
                           "\n"
                           "@ww.jit\n"
                           "def fill(out_ptr, BLOCK: tl.constexpr):\n"
                           "    offs = tl.arange(0, BLOCK)\n"
                           "    tl.store(out_ptr + tl.program_id(0) * BLOCK + offs, offs)\n";

CompiledKernel compileSource(const char* text, const std::string& kernel, Target target,
                             int numCtas, int trapTries = 0,
                             const std::string& signature = "out_ptr:*i32, BLOCK=128") {
  CompileRequest req;
  req.files.push_back({"cluster.py", text});
  req.kernel = kernel;
  req.signature = parseSignature(signature);
  req.options.target = target;
  req.options.numCtas = numCtas;
  req.options.mbarrierTrapTries = trapTries;
  req.stage = Stage::Cubin;
  return compile(req);
}

int count(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t p = text.find(needle); p != std::string::npos; p = text.find(needle, p + 1)) ++n;
  return n;
}

/// The directives between the entry's parameter list and its body.
std::string header(const std::string& ptx) {
  size_t entry = ptx.find(".visible .entry");
  size_t close = ptx.find(")\n", entry);
  size_t body = ptx.find("{\n", close);
  return ptx.substr(close + 2, body - close - 2);
}

const char* kClusterWait = "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64";
const char* kCtaWait = "mbarrier.try_wait.parity.shared::cta.b64";

} // namespace

TEST(ClusterCodegen, HeaderDeclaresTheLaunchersOneDimensionalClusterShape) {
  for (Target t : {Target::SM90a, Target::SM100a})
    for (int ctas : {2, 4, 16}) {
      SCOPED_TRACE(std::string(targetName(t)) + " ctas " + std::to_string(ctas));
      CompiledKernel k = compileSource(kPlainSource, "fill", t, ctas);
      EXPECT_FALSE(k.cubin.empty()) << k.ptxasLog << k.ptx;
      EXPECT_EQ(k.numCtas, ctas);
      // sm_100a kernels without task budgets also declare the registers a thread may take.
      std::string registers = t == Target::SM100a ? ".maxnreg 255\n" : "";
      EXPECT_EQ(header(k.ptx), ".reqntid 128, 1, 1\n.explicitcluster\n.reqnctapercluster " +
                                   std::to_string(ctas) + ", 1, 1\n" + registers)
          << k.ptx;
    }
}

TEST(ClusterCodegen, NoClusterDirectivesWithoutClusters) {
  for (Target t : {Target::SM90a, Target::SM80, Target::SM100a}) {
    CompiledKernel k = compileSource(kPlainSource, "fill", t, 1);
    EXPECT_FALSE(k.cubin.empty()) << k.ptxasLog;
    std::string registers = t == Target::SM100a ? ".maxnreg 255\n" : "";
    EXPECT_EQ(header(k.ptx), ".reqntid 128, 1, 1\n" + registers) << k.ptx;
  }
}

TEST(ClusterCodegen, ClustersOnSm80AreAClearError) {
  try {
    compileSource(kPlainSource, "fill", Target::SM80, 2);
    FAIL() << "compiled for clusters on sm_80";
  } catch (const CompileFailure& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("clusters of 2 CTAs"), std::string::npos) << msg;
    EXPECT_NE(msg.find("sm_90a or sm_100a"), std::string::npos) << msg;
    EXPECT_NE(msg.find("cluster.py:6"), std::string::npos) << msg;
  }
}

TEST(ClusterCodegen, RemoteArrivesAndTheirWaitsTakeTritonsDefaultSemantics) {
  // As Triton lowers TLX's barriers (and CUTLASS's cluster pipelines release their stages): at
  // cluster scope each remote arrive had a MEMBAR.ALL.GPU before it and each wait an L1
  // invalidation after it, which made the 2-CTA GEMMs 2.7x slower on an H100.
  for (Target t : {Target::SM90a, Target::SM100a}) {
    SCOPED_TRACE(targetName(t));
    CompiledKernel k = compileSource(kRelaySource, "relay", t, 2);
    EXPECT_FALSE(k.cubin.empty()) << k.ptxasLog << k.ptx;
    // Line 14's barrier gets the peer's arrive, line 16's only this CTA's: both waits alike.
    EXPECT_EQ(count(k.ptx, kClusterWait), 0) << k.ptx;
    EXPECT_EQ(count(k.ptx, kCtaWait), 2) << k.ptx;
    EXPECT_EQ(count(k.ptx, ".release.cluster.shared::cluster"), 0) << k.ptx;
    size_t remoteArrive = k.ptx.find("mbarrier.arrive.shared::cluster.b64 _, [%r");
    size_t localArrive = k.ptx.find("mbarrier.arrive.shared::cta.b64");
    ASSERT_NE(remoteArrive, std::string::npos) << k.ptx;
    ASSERT_NE(localArrive, std::string::npos);
    EXPECT_LT(k.ptx.find("mapa.shared::cluster.u32"), remoteArrive);
    EXPECT_LT(remoteArrive, k.ptx.find(kCtaWait));
    EXPECT_LT(localArrive, k.ptx.rfind(kCtaWait));
  }
}

TEST(ClusterCodegen, WaitsOnMulticastCopiesStayCtaScoped) {
  // The copy completes each destination CTA's own barrier: nothing for a cluster-scope acquire
  // to add but an L1 invalidation.
  for (Target t : {Target::SM90a, Target::SM100a}) {
    SCOPED_TRACE(targetName(t));
    CompiledKernel k = compileSource(kMulticastSource, "halves", t, 2, 0,
                                     "in_desc:desc<fp16,64x64>, out_desc:desc<fp16,64x64>");
    EXPECT_FALSE(k.cubin.empty()) << k.ptxasLog << k.ptx;
    EXPECT_NE(k.ptx.find(".multicast::cluster"), std::string::npos) << k.ptx;
    EXPECT_EQ(count(k.ptx, kClusterWait), 0) << k.ptx;
    EXPECT_EQ(count(k.ptx, kCtaWait), 1) << k.ptx;
    EXPECT_NE(header(k.ptx).find(".reqnctapercluster 2, 1, 1\n"), std::string::npos) << k.ptx;
  }
}

TEST(ClusterCodegen, WithoutAClusterLaunchEveryWaitIsCtaScoped) {
  // A remote arrive in a one-CTA "cluster" reaches this CTA's own barrier.
  CompiledKernel k = compileSource(kRelaySource, "relay", Target::SM90a, 1);
  EXPECT_FALSE(k.cubin.empty()) << k.ptxasLog << k.ptx;
  EXPECT_EQ(count(k.ptx, kClusterWait), 0) << k.ptx;
  EXPECT_EQ(count(k.ptx, kCtaWait), 2) << k.ptx;
}

} // namespace ww
