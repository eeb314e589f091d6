// Codegen of distributed-shared-memory stores (tlx.async_remote_shmem_store,
// tlx.remote_shmem_store) through the C++ API: the PTX each lowers to, assembled by ptxas.
#include "warpweave/warpweave.h"

#include <gtest/gtest.h>

namespace ww {
namespace {

/// Every CTA stores N elements of out's dtype into slot `rank` of every CTA of the cluster (line
/// 16 or 18), then waits for the C stores it receives.
const char* kExchangeSource =
    "import warpweave as ww\n"                                                       // 1
    "import warpweave.language as tl\n"                                              // 2
    "from warpweave import tlx\n"                                                    // 3
    "\n"                                                                             // 4
    "\n"                                                                             // 5
    "@ww.jit\n"                                                                      // 6
    "def exchange(out_ptr, C: tl.constexpr, SYNC: tl.constexpr, N: tl.constexpr):\n" // 7
    "    DT: tl.constexpr = tlx.dtype_of(out_ptr)\n"                                 // 8
    "    rank = tlx.cluster_cta_rank()\n"                                            // 9
    "    slots = tlx.local_alloc((N,), DT, C)\n"                                     // 10
    "    bars = tlx.alloc_barriers(num_barriers=1, arrive_count=1)\n"                // 11
    "    value = (tl.arange(0, N) + rank).to(DT)\n"                                  // 12
    "    tlx.barrier_expect_bytes(bars[0], C * N * tlx.size_of(DT))\n"               // 13
    "    for peer in tl.static_range(C):\n"                                          // 14
    "        if SYNC:\n"                                                             // 15
    "            tlx.remote_shmem_store(slots[rank], value, peer)\n"                 // 16
    "        else:\n"                                                                // 17
    "            tlx.async_remote_shmem_store(slots[rank], value, peer, bars[0])\n"  // 18
    "    if SYNC:\n"                                                                 // 19
    "        tlx.cluster_barrier()\n"                                                // 20
    "    else:\n"                                                                    // 21
    "        tlx.barrier_wait(bars[0], 0)\n"                                         // 22
    "    got = tlx.local_load(slots[(rank + 1) % C])\n"                              // 23
    "    tl.store(out_ptr + tl.program_id(0) * N + tl.arange(0, N), got)\n";         // 24

CompiledKernel compileExchange(Target target, int numCtas, bool sync, const std::string& dtype,
                               int n) {
  CompileRequest req;
  req.files.push_back({"exchange.py", kExchangeSource});
  req.kernel = "exchange";
  req.signature =
      parseSignature("out_ptr:*" + dtype + ", C=" + std::to_string(numCtas) +
                     ", SYNC=" + (sync ? "True" : "False") + ", N=" + std::to_string(n));
  req.options.target = target;
  req.options.numCtas = numCtas;
  req.options.numWarps = 8;
  req.stage = Stage::Cubin;
  return compile(req);
}

int count(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t p = text.find(needle); p != std::string::npos; p = text.find(needle, p + 1)) ++n;
  return n;
}

const char* kStAsync = "st.async.shared::cluster.mbarrier::complete_tx::bytes";

} // namespace

TEST(RemoteStoreCodegen, PairGoesAsOneVectorStAsyncPerPeer) {
  for (Target t : {Target::SM90a, Target::SM100a})
    for (int ctas : {2, 4}) {
      SCOPED_TRACE(std::string(targetName(t)) + " ctas " + std::to_string(ctas));
      CompiledKernel k = compileExchange(t, ctas, false, "fp32", 2);
      EXPECT_FALSE(k.cubin.empty()) << k.ptxasLog << k.ptx;
      EXPECT_EQ(count(k.ptx, std::string(kStAsync) + ".v2.f32 ["), ctas) << k.ptx;
      EXPECT_EQ(count(k.ptx, std::string(kStAsync)), ctas) << k.ptx;
      // The buffer's and the barrier's peer addresses, per peer.
      EXPECT_EQ(count(k.ptx, "mapa.shared::cluster.u32"), 2 * ctas) << k.ptx;
      // One bar.sync before the first store covers the stores that follow it.
      size_t first = k.ptx.find(kStAsync);
      size_t sync = k.ptx.rfind("bar.sync 0;", first);
      ASSERT_NE(sync, std::string::npos) << k.ptx;
      EXPECT_EQ(k.ptx.find("bar.sync", first), std::string::npos) << k.ptx;
    }
}

TEST(RemoteStoreCodegen, SixteenBitValuesGoAsPackedWords) {
  CompiledKernel k = compileExchange(Target::SM90a, 2, false, "fp16", 8);
  EXPECT_FALSE(k.cubin.empty()) << k.ptxasLog << k.ptx;
  EXPECT_EQ(count(k.ptx, std::string(kStAsync) + ".v4.b32 ["), 2) << k.ptx;
}

TEST(RemoteStoreCodegen, SynchronousFormIsAClusterSharedStore) {
  for (Target t : {Target::SM90a, Target::SM100a}) {
    SCOPED_TRACE(targetName(t));
    CompiledKernel k = compileExchange(t, 2, true, "fp32", 2);
    EXPECT_FALSE(k.cubin.empty()) << k.ptxasLog << k.ptx;
    EXPECT_EQ(count(k.ptx, "st.shared::cluster.v2.f32 ["), 2) << k.ptx;
    EXPECT_EQ(count(k.ptx, kStAsync), 0) << k.ptx;
  }
}

TEST(RemoteStoreCodegen, Sm80IsRefusedAtTheStore) {
  for (bool sync : {false, true}) {
    try {
      compileExchange(Target::SM80, 1, sync, "fp32", 2);
      FAIL() << "compiled a remote store for sm_80";
    } catch (const CompileFailure& e) {
      std::string msg = e.what();
      EXPECT_NE(msg.find(sync ? "tlx.remote_shmem_store needs sm_90 or later"
                              : "tlx.async_remote_shmem_store needs sm_90 or later"),
                std::string::npos)
          << msg;
      EXPECT_NE(msg.find(sync ? "exchange.py:16:" : "exchange.py:18:"), std::string::npos) << msg;
    }
  }
}

namespace {

/// A bulk copy of an [R, 64] fp16 buffer into a slice of a [2R, 64] tile (128-byte swizzle) of
/// the peer: rows R..2R (line 13), or with COLS columns 0..32 of rows 0..R (line 15).
const char* kSliceCopySource =
    "import warpweave as ww\n"                                        // 1
    "import warpweave.language as tl\n"                               // 2
    "from warpweave import tlx\n"                                     // 3
    "\n"                                                              // 4
    "\n"                                                              // 5
    "@ww.jit\n"                                                       // 6
    "def slice_copy(out_ptr, R: tl.constexpr, COLS: tl.constexpr):\n" // 7
    "    tile = tlx.local_alloc((2 * R, 64), tl.float16, 1)\n"        // 8
    "    half = tlx.local_alloc((R, 64), tl.float16, 1)\n"            // 9
    "    bars = tlx.alloc_barriers(num_barriers=1, arrive_count=1)\n" // 10
    "    if not COLS:\n"                                              // 11
    "        dst = tlx.local_slice(tile[0], [R, 0], [R, 64])\n"       // 12
    "        tlx.async_remote_shmem_copy(dst, half[0], 1, bars[0])\n" // 13
    "    else:\n"                                                     // 14
    "        tlx.async_remote_shmem_copy(tlx.local_slice(tile[0], [0, 0], [2 * R, 32]), "
    "half[0], 1, bars[0])\n"; // 15

CompiledKernel compileSliceCopy(int rows, bool cols) {
  CompileRequest req;
  req.files.push_back({"slice_copy.py", kSliceCopySource});
  req.kernel = "slice_copy";
  req.signature = parseSignature("out_ptr:*fp16, R=" + std::to_string(rows) +
                                 ", COLS=" + (cols ? "True" : "False"));
  req.options.target = Target::SM100a;
  req.options.numCtas = 2;
  req.stage = Stage::Cubin;
  return compile(req);
}

} // namespace

TEST(RemoteStoreCodegen, BulkCopyIntoARowSliceStartsAtTheSlice) {
  for (int rows : {8, 64, 128}) {
    CompiledKernel k = compileSliceCopy(rows, false);
    const std::string bytes = std::to_string(rows * 64 * 2);
    // One copy of the half's bytes, to the tile's address plus the slice's R rows of 128 bytes.
    EXPECT_EQ(count(k.ptx, "cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::"
                           "bytes"),
              1)
        << k.ptx;
    EXPECT_NE(k.ptx.find("], " + bytes + ", ["), std::string::npos) << k.ptx;
    EXPECT_NE(k.ptx.find(", " + bytes + ";"), std::string::npos) << k.ptx; // the slice's offset
    EXPECT_FALSE(k.cubin.empty()) << k.ptxasLog;
  }
}

TEST(RemoteStoreCodegen, BulkCopyIntoAColumnSliceIsRefused) {
  try {
    compileSliceCopy(64, true);
    FAIL() << "compiled a bulk copy into a column slice";
  } catch (const CompileFailure& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("slice_copy.py:15:"), std::string::npos) << msg;
    EXPECT_NE(msg.find("is not one contiguous range of shared memory"), std::string::npos) << msg;
  }
}

} // namespace ww
