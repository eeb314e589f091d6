// Codegen of TLX's TMA extras through the C++ API: tensor maps that in-kernel descriptors write
// into the global scratch (tensormap.replace, proxy fences, the scratch parameter), L2 cache
// hints on TMA copies, prefetch hints and 1-D bulk copies; the PTX of each, assembled by ptxas.
#include "warpweave/warpweave.h"

#include <gtest/gtest.h>

namespace ww {
namespace {

const char* kSource =
    "import warpweave as ww\n"
    "import warpweave.language as tl\n"
    "from warpweave import tlx\n"
    "\n"
    "\n"
    "@ww.jit\n"
    "def tile_copy(x, y, M, N, BM: tl.constexpr, BN: tl.constexpr, HINT: tl.constexpr):\n"
    "    src = tl.make_tensor_descriptor(x, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])\n"
    "    dst = tl.make_tensor_descriptor(y, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])\n"
    "    tlx.prefetch(src, tensormap=True)\n"
    "    tile = tlx.local_alloc((BM, BN), tlx.dtype_of(x), 1)[0]\n"
    "    bar = tlx.alloc_barriers(1)[0]\n"
    "    row = tl.program_id(0) * BM\n"
    "    col = tl.program_id(1) * BN\n"
    "    tlx.async_descriptor_prefetch_tensor(src, [row, col])\n"
    "    tlx.barrier_expect_bytes(bar, BM * BN * tlx.size_of(tlx.dtype_of(x)))\n"
    "    tlx.async_descriptor_load(src, tile, [row, col], bar, eviction_policy=HINT)\n"
    "    tlx.barrier_wait(bar, 0)\n"
    "    tlx.async_descriptor_store(dst, tile, [row, col], eviction_policy=HINT)\n"
    "    tlx.async_descriptor_store_wait(0)\n"
    "\n"
    "\n"
    "@ww.jit\n"
    "def bulk(src, dst, N: tl.constexpr):\n"
    "    buf = tlx.local_alloc((N,), tl.float32, 1)[0]\n"
    "    bar = tlx.alloc_barriers(1)[0]\n"
    "    tlx.barrier_expect_bytes(bar, N * 4)\n"
    "    tlx.async_load(src, buf, bulk=True, barrier=bar)\n"
    "    tlx.barrier_wait(bar, 0)\n"
    "    tlx.prefetch(dst + tl.arange(0, N), level='L1')\n"
    "    tlx.async_store(dst, buf, N * 4)\n"
    "    tlx.async_descriptor_store_wait(0)\n";

CompiledKernel compileKernel(const std::string& kernel, const std::string& signature,
                             Target target = Target::SM90a) {
  CompileRequest req;
  req.files.push_back({"tma_extras.py", kSource});
  req.kernel = kernel;
  req.signature = parseSignature(signature);
  req.options.target = target;
  req.stage = Stage::Cubin;
  return compile(req);
}

int count(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t p = text.find(needle); p != std::string::npos; p = text.find(needle, p + 1)) ++n;
  return n;
}

} // namespace

TEST(TlxTmaExtras, DeviceTensorMapsAreWrittenInGlobalScratch) {
  for (Target t : {Target::SM90a, Target::SM100a}) {
    SCOPED_TRACE(targetName(t));
    CompiledKernel k =
        compileKernel("tile_copy", "x:*fp16, y:*fp16, M:i32, N:i32, BM=64, BN=64, HINT=''", t);
    EXPECT_FALSE(k.cubin.empty()) << k.ptxasLog << k.ptx;
    // Both maps: every field, for rank 2 two of each per-dimension field.
    EXPECT_EQ(count(k.ptx, "tensormap.replace.tile.global_address.global.b1024.b64"), 2);
    EXPECT_EQ(count(k.ptx, "tensormap.replace.tile.rank.global.b1024.b32"), 2);
    EXPECT_EQ(count(k.ptx, "tensormap.replace.tile.box_dim.global.b1024.b32"), 4);
    EXPECT_EQ(count(k.ptx, "tensormap.replace.tile.global_dim.global.b1024.b32"), 4);
    EXPECT_EQ(count(k.ptx, "tensormap.replace.tile.global_stride.global.b1024.b64"), 2);
    EXPECT_EQ(count(k.ptx, "tensormap.replace.tile.elemtype.global.b1024.b32"), 2);
    EXPECT_EQ(count(k.ptx, "fence.proxy.tensormap::generic.release.gpu"), 2);
    EXPECT_EQ(count(k.ptx, "fence.proxy.tensormap::generic.acquire.gpu"), 2);
    // fp16 is element type 6; the rank field holds rank - 1.
    EXPECT_NE(k.ptx.find("tensormap.replace.tile.elemtype.global.b1024.b32 ["), std::string::npos);
    EXPECT_EQ(count(k.ptx, "prefetch.tensormap ["), 1);
    EXPECT_EQ(count(k.ptx, "cp.async.bulk.prefetch.tensor.2d.L2.global.tile"), 1);
    EXPECT_EQ(k.ptx.find("L2::cache_hint"), std::string::npos);
    // The scratch: the last parameter, 128 bytes per map and program.
    ASSERT_FALSE(k.params.empty());
    EXPECT_EQ(k.params.back().name, kGlobalScratchParam);
    EXPECT_EQ(k.params.back().type, "ptr<i8>");
    EXPECT_EQ(k.globalScratchBytes, 256);
    EXPECT_NE(k.ptx.find(".param .u64 tile_copy_param_global_scratch"), std::string::npos);
  }
}

TEST(TlxTmaExtras, EvictionPoliciesBecomeL2CacheHints) {
  for (const char* hint : {"evict_first", "evict_last"}) {
    SCOPED_TRACE(hint);
    CompiledKernel k = compileKernel("tile_copy", std::string("x:*bf16, y:*bf16, M:i32, N:i32, "
                                                              "BM=64, BN=64, HINT='") +
                                                      hint + "'");
    EXPECT_FALSE(k.cubin.empty()) << k.ptxasLog << k.ptx;
    EXPECT_EQ(count(k.ptx, std::string("createpolicy.fractional.L2::") + hint + ".b64"), 1);
    EXPECT_EQ(count(k.ptx, "mbarrier::complete_tx::bytes.L2::cache_hint"), 1) << k.ptx;
    EXPECT_EQ(count(k.ptx, "tile.bulk_group.L2::cache_hint"), 1) << k.ptx;
  }
}

TEST(TlxTmaExtras, BulkCopiesAndPointerPrefetch) {
  CompiledKernel k = compileKernel("bulk", "src:*fp32, dst:*fp32, N=256");
  EXPECT_FALSE(k.cubin.empty()) << k.ptxasLog << k.ptx;
  EXPECT_EQ(count(k.ptx, "cp.async.bulk.shared::cta.global.mbarrier::complete_tx::bytes ["), 1);
  EXPECT_EQ(count(k.ptx, "cp.async.bulk.global.shared::cta.bulk_group ["), 1);
  EXPECT_EQ(count(k.ptx, "cp.async.bulk.commit_group"), 1);
  EXPECT_GE(count(k.ptx, "prefetch.global.L1 ["), 1);
  EXPECT_NE(k.ptx.find(".version 8.6"), std::string::npos);
  EXPECT_EQ(k.globalScratchBytes, 0);
}

TEST(TlxTmaExtras, Sm80RefusesThem) {
  EXPECT_THROW(compileKernel("bulk", "src:*fp32, dst:*fp32, N=256", Target::SM80), CompileFailure);
  EXPECT_THROW(compileKernel("tile_copy", "x:*fp16, y:*fp16, M:i32, N:i32, BM=64, BN=64, HINT=''",
                             Target::SM80),
               CompileFailure);
}

} // namespace ww
