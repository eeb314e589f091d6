// Software pipelining of tl.dot loops (sm_90a) and the cp.async lowering of async_load: the
// pipelined Tile IR's shape, its results and synchronization in the interpreter, and the PTX
// (cp.async, swizzled wgmma, one MMA in flight) that ptxas must accept.
#include "interp/Numerics.h"
#include "warpweave/warpweave.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <random>
#include <regex>
#include <sstream>

namespace ww {
namespace {

std::string readRepoFile(const std::string& path) {
  std::ifstream file(std::string(WW_SOURCE_DIR) + "/" + path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

int count(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t p = text.find(needle); p != std::string::npos; p = text.find(needle, p + 1)) ++n;
  return n;
}

/// kernels/matmul.py's signature; `aligned` adds the `:16` the JIT gives strides divisible by 16.
std::string matmulSignature(int bm, int bn, int bk, bool aligned) {
  std::string d = aligned ? ":16" : "";
  return "a_ptr:*fp16:16,b_ptr:*fp16:16,c_ptr:*fp16:16,M:i32,N:i32,K:i32" + d + ",stride_am:i32" +
         d + ",stride_ak:i32:1,stride_bk:i32" + d + ",stride_bn:i32:1,stride_cm:i32" + d +
         ",stride_cn:i32:1,BLOCK_M=" + std::to_string(bm) + ",BLOCK_N=" + std::to_string(bn) +
         ",BLOCK_K=" + std::to_string(bk) + ",GROUP_M=8,ACTIVATION=\"\"";
}

/// Compiles `source` (named `path` in diagnostics) for sm_90a with the given signature.
CompiledKernel compileSource(const std::string& path, const std::string& source,
                             const std::string& kernel, const std::string& signature, int numWarps,
                             Stage stage) {
  CompileRequest req;
  req.files.push_back({path, source});
  req.kernel = kernel;
  req.signature = parseSignature(signature);
  req.options.numWarps = numWarps;
  req.stage = stage;
  return compile(req);
}

CompiledKernel compileMatmul(Target target, Stage stage, int bm, int bn, int bk, int numWarps,
                             int numStages, bool aligned = true) {
  CompileRequest req;
  req.files.push_back({"python/warpweave/ops/kernels/matmul.py",
                       readRepoFile("python/warpweave/ops/kernels/matmul.py")});
  req.kernel = "matmul_kernel";
  req.signature = parseSignature(matmulSignature(bm, bn, bk, aligned));
  req.options.target = target;
  req.options.numWarps = numWarps;
  req.options.numStages = numStages;
  req.stage = stage;
  return compile(req);
}

/// Runs the compiled matmul's Tile IR in the interpreter on small-integer fp16 inputs (exact in
/// fp16 and fp32) and compares C with the exact product.
void checkMatmulInInterpreter(const CompiledKernel& k, int M, int N, int K, int bm, int bn) {
  std::mt19937 rng(M * 1000003 + N * 1009 + K);
  std::uniform_int_distribution<int> small(-2, 2);
  std::vector<uint16_t> a(size_t(M) * K), b(size_t(K) * N), c(size_t(M) * N, 0xFFFF);
  std::vector<float> af(a.size()), bf(b.size());
  for (size_t i = 0; i < a.size(); ++i) a[i] = interp::floatToHalf(af[i] = float(small(rng)));
  for (size_t i = 0; i < b.size(); ++i) b[i] = interp::floatToHalf(bf[i] = float(small(rng)));
  auto buffer = [](std::vector<uint16_t>& v) { return InterpArg::buffer(v.data(), v.size() * 2); };
  // The signature folds the unit strides; `aligned` strides are passed.
  std::vector<InterpArg> args = {buffer(a),
                                 buffer(b),
                                 buffer(c),
                                 InterpArg::integer(M),
                                 InterpArg::integer(N),
                                 InterpArg::integer(K),
                                 InterpArg::integer(K),
                                 InterpArg::integer(N),
                                 InterpArg::integer(N)};
  int grid[3] = {((M + bm - 1) / bm) * ((N + bn - 1) / bn), 1, 1};
  interpret(k, grid, args);
  int wrong = 0;
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      float ref = 0;
      for (int kk = 0; kk < K; ++kk) ref += af[size_t(m) * K + kk] * bf[size_t(kk) * N + n];
      float got = interp::halfToFloat(c[size_t(m) * N + n]);
      if (got != ref && wrong++ < 5)
        ADD_FAILURE() << "C[" << m << "][" << n << "] = " << got << ", expected " << ref
                      << " (M=" << M << " N=" << N << " K=" << K << ")";
    }
  EXPECT_EQ(wrong, 0);
}

TEST(SoftwarePipeline, MatmulLoopBecomesCpAsyncAndAsyncWgmma) {
  CompiledKernel k = compileMatmul(Target::SM90a, Stage::TileIR, 128, 128, 64, 8, 4);
  const std::string& ir = k.tileIR;
  // Four stages: four slots per operand, three iterations (num_stages - 1, as Triton) in flight
  // ahead of the MMA.
  EXPECT_EQ(count(ir, "local_alloc {storage = \"smem\"} : buffer<4x128x64xfp16, smem>"), 1) << ir;
  EXPECT_EQ(count(ir, "local_alloc {storage = \"smem\"} : buffer<4x64x128xfp16, smem>"), 1) << ir;
  // Prologue (3 iterations) and loop body (1) each copy A and B and commit one group; the loop
  // waits for the oldest of the three groups in flight.
  EXPECT_EQ(count(ir, "async_load "), 8) << ir;
  EXPECT_EQ(count(ir, "async_commit_group"), 4) << ir;
  EXPECT_EQ(count(ir, "async_wait_group {pendings = 2}"), 1) << ir;
  EXPECT_EQ(count(ir, "async_wait_group {pendings = 0}"), 1) << ir;
  EXPECT_EQ(count(ir, "async_dot "), 1) << ir;
  EXPECT_TRUE(std::regex_search(ir, std::regex("async_dot_wait [^\\n]*\\{pendings = 1\\}"))) << ir;
  EXPECT_TRUE(std::regex_search(ir, std::regex("async_dot_wait [^\\n]*\\{pendings = 0\\}"))) << ir;
  EXPECT_FALSE(std::regex_search(ir, std::regex("= dot "))) << ir;
  EXPECT_FALSE(std::regex_search(ir, std::regex("= load "))) << ir;
}

TEST(SoftwarePipeline, OtherTargetsAndUnfitLoopsAreLeftAlone) {
  {
    CompiledKernel k = compileMatmul(Target::SM80, Stage::TileIR, 128, 128, 64, 8, 4);
    EXPECT_EQ(count(k.tileIR, "async_load"), 0);
    EXPECT_TRUE(std::regex_search(k.tileIR, std::regex("= dot ")));
  }
  // sm_100a: tiles tcgen05.mma does not take (M = 256 or 32 per CTA, 2 warps) stay plain dots.
  for (auto [bm, warps] : {std::pair{256, 8}, std::pair{32, 4}, std::pair{128, 2}}) {
    CompiledKernel k = compileMatmul(Target::SM100a, Stage::TileIR, bm, 64, 32, warps, 3);
    EXPECT_EQ(count(k.tileIR, "async_load"), 0) << bm << " " << warps;
    EXPECT_EQ(count(k.tileIR, "tcgen05_mma"), 0) << bm << " " << warps;
    EXPECT_TRUE(std::regex_search(k.tileIR, std::regex("= dot "))) << bm << " " << warps;
  }
  // num_stages=1 asks for no pipelining; a 32x32 tile has no wgmma form.
  for (auto [bm, stages] : {std::pair{128, 1}, std::pair{32, 3}}) {
    CompiledKernel k = compileMatmul(Target::SM90a, Stage::TileIR, bm, bm, 32, 4, stages);
    EXPECT_EQ(count(k.tileIR, "async_load"), 0) << bm << " " << stages;
    EXPECT_TRUE(std::regex_search(k.tileIR, std::regex("= dot "))) << bm << " " << stages;
  }
}

TEST(SoftwarePipeline, StagesShrinkToFitSharedMemory) {
  // Four stages of 128x64 + 64x256 fp16 tiles (192 KB) and the epilogue's 64 KB conversion do
  // not fit in 227 KB: three stages are used, and the kernel compiles.
  CompiledKernel k = compileMatmul(Target::SM90a, Stage::Cubin, 128, 256, 64, 8, 4);
  EXPECT_EQ(count(k.tileIR, "buffer<3x128x64xfp16, smem>"), 1) << k.tileIR;
  EXPECT_LE(k.sharedBytes, 232448);
  EXPECT_FALSE(k.cubin.empty());
}

TEST(SoftwarePipeline, DotResultReadInsideTheLoopIsLeftAlone) {
  // The accumulator is read in the loop (a running max): an MMA left in flight would race.
  const char* kernel = "import warpweave as ww\n"
                       "import warpweave.language as tl\n"
                       "@ww.jit\n"
                       "def k(a_ptr, b_ptr, out_ptr, n):\n"
                       "    r = tl.arange(0, 64)\n"
                       "    kk = tl.arange(0, 16)\n"
                       "    a_ptrs = a_ptr + r[:, None] * 16 + kk[None, :]\n"
                       "    b_ptrs = b_ptr + kk[:, None] * 16 + kk[None, :]\n"
                       "    acc = tl.zeros((64, 16), dtype=tl.float32)\n"
                       "    m = tl.zeros((64, 16), dtype=tl.float32)\n"
                       "    for i in range(n):\n"
                       "        acc = tl.dot(tl.load(a_ptrs), tl.load(b_ptrs), acc)\n"
                       "        m = tl.maximum(m, acc)\n"
                       "    tl.store(out_ptr + r[:, None] * 16 + kk[None, :], m)\n";
  CompiledKernel k =
      compileSource("k.py", kernel, "k", "a_ptr:*fp16:16,b_ptr:*fp16:16,out_ptr:*fp32:16,n:i32", 4,
                    Stage::TileIR);
  EXPECT_EQ(count(k.tileIR, "async_load"), 0) << k.tileIR;
  EXPECT_TRUE(std::regex_search(k.tileIR, std::regex("= dot "))) << k.tileIR;
}

TEST(SoftwarePipeline, Sm100aMatmulLoopBecomesCpAsyncAndTcgen05Mma) {
  CompiledKernel k = compileMatmul(Target::SM100a, Stage::TileIR, 128, 128, 64, 8, 4);
  const std::string& ir = k.tileIR;
  // The copies as on sm_90a; the accumulator in tensor memory, read back once after the loop.
  EXPECT_EQ(count(ir, "local_alloc {storage = \"smem\"} : buffer<4x128x64xfp16, smem>"), 1) << ir;
  // (At column 0 of the pipeliner's tensor-memory region, a storage-alias id of its own.)
  EXPECT_EQ(count(ir, "local_alloc {storage = \"tmem\", alias = "), 1) << ir;
  EXPECT_EQ(count(ir, "alias_offset = 0} : buffer<1x128x128xfp32, tmem>"), 1) << ir;
  EXPECT_EQ(count(ir, "async_load "), 8) << ir;
  EXPECT_EQ(count(ir, "async_wait_group {pendings = 2}"), 1) << ir;
  EXPECT_EQ(count(ir, "alloc_barriers {arrive_count = 1} : barrier<2>"), 1) << ir;
  EXPECT_EQ(count(ir, "tcgen05_mma "), 1) << ir;
  EXPECT_EQ(count(ir, "{has_use_acc = 1, has_pred = 0}"), 1) << ir;
  EXPECT_EQ(count(ir, "barrier_wait "), 2) << ir; // the previous MMA's, the last one's
  EXPECT_EQ(count(ir, "local_load "), 1) << ir;
  EXPECT_EQ(count(ir, "async_dot"), 0) << ir;
  EXPECT_FALSE(std::regex_search(ir, std::regex("= dot "))) << ir;
  EXPECT_FALSE(std::regex_search(ir, std::regex("= load "))) << ir;
}

TEST(SoftwarePipeline, InterpreterRunsTheSm100aPipelinedMatmul) {
  // The tcgen05 form in the interpreter (an MMA lands at its commit's barrier): the same cases
  // as sm_90a's below, M = 64 tiles.
  struct Case {
    int M, N, K, stages;
  };
  for (Case c :
       {Case{100, 40, 88, 3}, Case{64, 32, 40, 5}, Case{70, 33, 0, 4}, Case{128, 64, 256, 4}}) {
    CompiledKernel k = compileMatmul(Target::SM100a, Stage::TileIR, 64, 32, 32, 4, c.stages,
                                     /*aligned=*/false);
    ASSERT_GT(count(k.tileIR, "tcgen05_mma "), 0) << k.tileIR;
    checkMatmulInInterpreter(k, c.M, c.N, c.K, 64, 32);
  }
}

TEST(SoftwarePipeline, InterpreterRunsThePipelinedMatmul) {
  // Edges in M and N (wrapped rows), K not a multiple of BLOCK_K (the last tile is masked),
  // fewer K tiles than stages ahead (prologue copies past the end are masked off) and K = 0.
  struct Case {
    int M, N, K, stages;
  };
  for (Case c : {Case{100, 40, 88, 3}, Case{100, 40, 88, 4}, Case{64, 32, 40, 5},
                 Case{70, 33, 0, 4}, Case{128, 64, 256, 4}}) {
    CompiledKernel k = compileMatmul(Target::SM90a, Stage::TileIR, 64, 32, 32, 4, c.stages,
                                     /*aligned=*/false);
    ASSERT_GT(count(k.tileIR, "async_dot "), 0) << k.tileIR;
    checkMatmulInInterpreter(k, c.M, c.N, c.K, 64, 32);
  }
}

TEST(SoftwarePipeline, PtxHasCpAsyncSwizzledWgmmaAndOneMmaInFlight) {
  CompiledKernel k = compileMatmul(Target::SM90a, Stage::Cubin, 128, 128, 64, 8, 4);
  const std::string& ptx = k.ptx;
  // A 128x64 fp16 tile is 1024 16-byte copies: 4 per thread of 256, and as many for B; the
  // prologue's three iterations and the loop's one.
  EXPECT_EQ(count(ptx, "cp.async.cg.shared.global"), 4 * 8) << ptx;
  EXPECT_EQ(count(ptx, "cp.async.commit_group"), 4);
  EXPECT_EQ(count(ptx, "cp.async.wait_group 2;"), 1);
  EXPECT_EQ(count(ptx, "wgmma.wait_group.sync.aligned 1;"), 1);
  EXPECT_EQ(count(ptx, "wgmma.wait_group.sync.aligned 0;"), 1);
  EXPECT_EQ(count(ptx, "ld.global"), 0) << "the operands arrive by cp.async only";
  // 128-byte swizzle: mode 1 in descriptor bits 62-63.
  EXPECT_NE(ptx.find("4611686"), std::string::npos) << ptx;
  EXPECT_EQ(k.spillBytes, 0) << k.ptxasLog;
  EXPECT_FALSE(k.cubin.empty());
  // sm_80 still compiles the plain loop; sm_100a the tcgen05 one, as many copies.
  CompiledKernel o = compileMatmul(Target::SM80, Stage::Cubin, 128, 128, 64, 8, 4);
  EXPECT_EQ(count(o.ptx, "cp.async"), 0);
  EXPECT_FALSE(o.cubin.empty());
  CompiledKernel bw = compileMatmul(Target::SM100a, Stage::Cubin, 128, 128, 64, 8, 4);
  EXPECT_EQ(count(bw.ptx, "cp.async.cg.shared.global"), 4 * 8) << bw.ptx;
  EXPECT_EQ(count(bw.ptx, "tcgen05.mma.cta_group::1.kind::f16"), 4) << bw.ptx;
  EXPECT_EQ(count(bw.ptx, "mma.sync"), 0);
  EXPECT_EQ(bw.spillBytes, 0) << bw.ptxasLog;
  EXPECT_FALSE(bw.cubin.empty());
}

const char* kPersistentMatmulSource =
    "import warpweave as ww\n"
    "import warpweave.language as tl\n"
    "@ww.jit\n"
    "def persistent_matmul(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_M: tl.constexpr,\n"
    "                      BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):\n"
    "    tiles_n = tl.cdiv(N, BLOCK_N)\n"
    "    num_tiles = tl.cdiv(M, BLOCK_M) * tiles_n\n"
    "    for tile in range(tl.program_id(0), num_tiles, tl.num_programs(0)):\n"
    "        rm = (tile // tiles_n) * BLOCK_M + tl.arange(0, BLOCK_M)\n"
    "        rn = (tile % tiles_n) * BLOCK_N + tl.arange(0, BLOCK_N)\n"
    "        rk = tl.arange(0, BLOCK_K)\n"
    "        a_ptrs = a_ptr + (rm % M)[:, None] * K + rk[None, :]\n"
    "        b_ptrs = b_ptr + rk[:, None] * N + (rn % N)[None, :]\n"
    "        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)\n"
    "        for k in tl.range(0, K, BLOCK_K, num_stages=4):\n"
    "            a = tl.load(a_ptrs, mask=(k + rk)[None, :] < K, other=0.0)\n"
    "            b = tl.load(b_ptrs, mask=(k + rk)[:, None] < K, other=0.0)\n"
    "            acc = tl.dot(a, b, acc)\n"
    "            a_ptrs += BLOCK_K\n"
    "            b_ptrs += BLOCK_K * N\n"
    "        mask = (rm[:, None] < M) & (rn[None, :] < N)\n"
    "        tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(tl.float16), mask=mask)\n";

TEST(SoftwarePipeline, InnerLoopOfAPersistentKernelIsPipelined) {
  // The K loop (step BLOCK_K, num_stages from tl.range) inside the loop over tiles: its
  // prologue and drain run once per tile, and the slots are reused tile after tile.
  CompiledKernel k = compileSource(
      "persistent.py", kPersistentMatmulSource, "persistent_matmul",
      "a_ptr:*fp16:16,b_ptr:*fp16:16,c_ptr:*fp16:16,M:i32,N:i32,K:i32,BLOCK_M=64,BLOCK_N=32,"
      "BLOCK_K=16",
      4, Stage::TileIR);
  ASSERT_EQ(count(k.tileIR, "async_dot "), 1) << k.tileIR;
  EXPECT_EQ(count(k.tileIR, "local_alloc {storage = \"smem\"} : buffer<4x64x16xfp16, smem>"), 1)
      << k.tileIR;
  // Each tile's prologue starts after a CTA barrier (slots still read by another warp group's
  // last MMA of the previous tile at 8 warps).
  EXPECT_EQ(count(k.tileIR, "debug_barrier"), 1) << k.tileIR;
  // With N and K multiples of 16 (as the JIT specializes them) the copies are 16 bytes wide.
  CompiledKernel cubin = compileSource(
      "persistent.py", kPersistentMatmulSource, "persistent_matmul",
      "a_ptr:*fp16:16,b_ptr:*fp16:16,c_ptr:*fp16:16,M:i32,N:i32:16,K:i32:16,BLOCK_M=64,"
      "BLOCK_N=32,BLOCK_K=16",
      4, Stage::Cubin);
  EXPECT_GT(count(cubin.ptx, "cp.async.cg.shared.global"), 0);
  EXPECT_EQ(count(cubin.ptx, "wgmma.wait_group.sync.aligned 1;"), 1);
  EXPECT_FALSE(cubin.cubin.empty());
  const int M = 150, N = 70, K = 56;
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> small(-2, 2);
  std::vector<uint16_t> a(M * K), b(K * N), c(M * N, 0xFFFF);
  std::vector<float> af(a.size()), bf(b.size());
  for (size_t i = 0; i < a.size(); ++i) a[i] = interp::floatToHalf(af[i] = float(small(rng)));
  for (size_t i = 0; i < b.size(); ++i) b[i] = interp::floatToHalf(bf[i] = float(small(rng)));
  int grid[3] = {2, 1, 1}; // two programs share 9 tiles
  interpret(k, grid,
            {InterpArg::buffer(a.data(), a.size() * 2), InterpArg::buffer(b.data(), b.size() * 2),
             InterpArg::buffer(c.data(), c.size() * 2), InterpArg::integer(M),
             InterpArg::integer(N), InterpArg::integer(K)});
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      float ref = 0;
      for (int kk = 0; kk < K; ++kk) ref += af[m * K + kk] * bf[kk * N + n];
      ASSERT_EQ(interp::halfToFloat(c[m * N + n]), ref) << m << " " << n;
    }
}

TEST(SoftwarePipeline, AccumulatingAddOfADotIsPipelined) {
  // `acc += tl.dot(a, b)`: the add becomes the async dot's own accumulation.
  const char* source = "import warpweave as ww\n"
                       "import warpweave.language as tl\n"
                       "@ww.jit\n"
                       "def k(a_ptr, b_ptr, c_ptr, K):\n"
                       "    r = tl.arange(0, 64)\n"
                       "    kk = tl.arange(0, 16)\n"
                       "    n = tl.arange(0, 32)\n"
                       "    acc = tl.zeros((64, 32), dtype=tl.float32)\n"
                       "    for k0 in range(0, K, 16):\n"
                       "        a = tl.load(a_ptr + r[:, None] * K + (k0 + kk)[None, :],\n"
                       "                    mask=(k0 + kk)[None, :] < K, other=0.0)\n"
                       "        b = tl.load(b_ptr + (k0 + kk)[:, None] * 32 + n[None, :],\n"
                       "                    mask=(k0 + kk)[:, None] < K, other=0.0)\n"
                       "        acc += tl.dot(a, b)\n"
                       "    tl.store(c_ptr + r[:, None] * 32 + n[None, :], acc)\n";
  CompiledKernel k =
      compileSource("acc.py", source, "k", "a_ptr:*fp16:16,b_ptr:*fp16:16,c_ptr:*fp32:16,K:i32", 4,
                    Stage::TileIR);
  EXPECT_EQ(count(k.tileIR, "async_dot "), 1) << k.tileIR;
  EXPECT_FALSE(std::regex_search(k.tileIR, std::regex("= dot "))) << k.tileIR;
  const int K = 72; // four full K steps and a half-masked fifth
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> small(-2, 2);
  std::vector<uint16_t> a(64 * K), b(K * 32);
  std::vector<float> af(a.size()), bf(b.size()), c(64 * 32, NAN);
  for (size_t i = 0; i < a.size(); ++i) a[i] = interp::floatToHalf(af[i] = float(small(rng)));
  for (size_t i = 0; i < b.size(); ++i) b[i] = interp::floatToHalf(bf[i] = float(small(rng)));
  int grid[3] = {1, 1, 1};
  interpret(k, grid,
            {InterpArg::buffer(a.data(), a.size() * 2), InterpArg::buffer(b.data(), b.size() * 2),
             InterpArg::buffer(c.data(), c.size() * 4), InterpArg::integer(K)});
  for (int m = 0; m < 64; ++m)
    for (int n = 0; n < 32; ++n) {
      float ref = 0;
      for (int kk = 0; kk < K; ++kk) ref += af[m * K + kk] * bf[kk * 32 + n];
      ASSERT_EQ(c[m * 32 + n], ref) << m << " " << n;
    }
}

/// kernels/attention.py's kernel with the strides the JIT passes for contiguous [Z, H, N, D]
/// fp16 tensors (the unit strides folded away by the signature).
CompiledKernel compileAttention(Target target, Stage stage, int headDim, bool causal, int numStages,
                                int numWarps = 8) {
  CompileRequest req;
  req.files.push_back({"python/warpweave/ops/kernels/attention.py",
                       readRepoFile("python/warpweave/ops/kernels/attention.py")});
  req.kernel = "attention_fwd_kernel";
  req.signature = parseSignature(
      "q_ptr:*fp16:16,k_ptr:*fp16:16,v_ptr:*fp16:16,out_ptr:*fp16:16,lse_ptr:*fp32:16,"
      "sm_scale:fp32,stride_qz:i32:16,stride_qh:i32:16,stride_qm:i32:16,stride_kz:i32:16,"
      "stride_kh:i32:16,stride_kn:i32:16,stride_vz:i32:16,stride_vh:i32:16,stride_vn:i32:16,"
      "stride_oz:i32:16,stride_oh:i32:16,stride_om:i32:16,H:i32,N_CTX:i32,HEAD_DIM=" +
      std::to_string(headDim) + ",BLOCK_M=128,BLOCK_N=64,CAUSAL=" + (causal ? "True" : "False"));
  req.options.target = target;
  req.options.numWarps = numWarps;
  req.options.numStages = numStages;
  req.stage = stage;
  return compile(req);
}

TEST(AttentionPipeline, LoopBecomesCpAsyncAndTwoAsyncWgmmas) {
  for (int d : {64, 128}) {
    CompiledKernel k = compileAttention(Target::SM90a, Stage::TileIR, d, d == 128, 3);
    const std::string& ir = k.tileIR;
    std::string ds = std::to_string(d);
    // Q once, K and V in three slots each.
    EXPECT_EQ(count(ir, "buffer<1x128x" + ds + "xfp16, smem>"), 2) << ir; // alloc and view
    EXPECT_EQ(count(ir, "local_alloc {storage = \"smem\"} : buffer<3x64x" + ds + "xfp16, smem>"), 2)
        << ir;
    EXPECT_EQ(count(ir, "local_store "), 1) << ir;
    // Two iterations copied ahead in the prologue, one in the loop; K and V each.
    EXPECT_EQ(count(ir, "async_load "), 6) << ir;
    EXPECT_EQ(count(ir, "async_commit_group"), 3) << ir;
    EXPECT_EQ(count(ir, "async_wait_group {pendings = 1}"), 1) << ir;
    EXPECT_EQ(count(ir, "async_wait_group {pendings = 0}"), 1) << ir;
    EXPECT_EQ(count(ir, "local_trans "), 1) << ir;
    EXPECT_EQ(count(ir, "async_dot "), 2) << ir;
    EXPECT_TRUE(std::regex_search(ir, std::regex("async_dot_wait [^\\n]*\\{pendings = 0\\}")))
        << ir;
    EXPECT_FALSE(std::regex_search(ir, std::regex("= dot "))) << ir;
    // Q's load stays (it is stored to the buffer); K and V are only copied.
    EXPECT_EQ(count(ir, "= load "), 1) << ir;
  }
}

TEST(AttentionPipeline, OtherTargetsAndOneStageAreLeftAlone) {
  CompiledKernel k = compileAttention(Target::SM80, Stage::TileIR, 64, false, 3);
  EXPECT_EQ(count(k.tileIR, "async_load"), 0);
  EXPECT_EQ(count(k.tileIR, "= dot "), 2);
  // sm_100a takes the loop too, both dots as tcgen05.mma (test_blackwell_tl_attention.py).
  k = compileAttention(Target::SM100a, Stage::TileIR, 64, false, 3);
  EXPECT_EQ(count(k.tileIR, "tcgen05_mma "), 2) << k.tileIR;
  EXPECT_EQ(count(k.tileIR, "= dot "), 0) << k.tileIR;
  k = compileAttention(Target::SM90a, Stage::TileIR, 64, false, 1);
  EXPECT_EQ(count(k.tileIR, "async_load"), 0);
  EXPECT_EQ(count(k.tileIR, "= dot "), 2);
}

TEST(AttentionPipeline, UnfitAttentionLoopsAreLeftAlone) {
  // K's masked-off keys read as 1 (cp.async can only zero-fill), or Q loaded in the loop:
  // both dots stay plain, and the kernel still runs correctly in the interpreter.
  const char* source = "import warpweave as ww\n"
                       "import warpweave.language as tl\n"
                       "@ww.jit\n"
                       "def k(q_ptr, k_ptr, v_ptr, o_ptr, n, OTHER: tl.constexpr,\n"
                       "      Q_IN_LOOP: tl.constexpr):\n"
                       "    m = tl.arange(0, 64)\n"
                       "    d = tl.arange(0, 16)\n"
                       "    j = tl.arange(0, 16)\n"
                       "    q = tl.load(q_ptr + m[:, None] * 16 + d[None, :])\n"
                       "    acc = tl.zeros((64, 16), dtype=tl.float32)\n"
                       "    for s in range(0, n, 16):\n"
                       "        valid = (s + j) < n\n"
                       "        kt = tl.load(k_ptr + (s + j)[:, None] * 16 + d[None, :],\n"
                       "                     mask=valid[:, None], other=OTHER)\n"
                       "        if Q_IN_LOOP:\n"
                       "            q_now = tl.load(q_ptr + m[:, None] * 16 + d[None, :],\n"
                       "                            mask=(m < 64 + s)[:, None], other=0.0)\n"
                       "            qk = tl.dot(q_now, tl.trans(kt))\n"
                       "        else:\n"
                       "            qk = tl.dot(q, tl.trans(kt))\n"
                       "        vt = tl.load(v_ptr + (s + j)[:, None] * 16 + d[None, :],\n"
                       "                     mask=valid[:, None], other=0.0)\n"
                       "        acc = tl.dot(qk.to(tl.float16), vt, acc)\n"
                       "    tl.store(o_ptr + m[:, None] * 16 + d[None, :], acc)\n";
  for (auto [other, qInLoop, pipelined] :
       {std::tuple{0, false, true}, std::tuple{1, false, false}, std::tuple{0, true, false}}) {
    SCOPED_TRACE(std::to_string(other) + (qInLoop ? " q in loop" : ""));
    CompiledKernel k =
        compileSource("unfit.py", source, "k",
                      "q_ptr:*fp16:16,k_ptr:*fp16:16,v_ptr:*fp16:16,o_ptr:*fp32:16,n:i32,OTHER=" +
                          std::to_string(other) + ",Q_IN_LOOP=" + (qInLoop ? "True" : "False"),
                      4, Stage::TileIR);
    EXPECT_EQ(count(k.tileIR, "async_dot "), pipelined ? 2 : 0) << k.tileIR;
    EXPECT_EQ(count(k.tileIR, "= dot "), pipelined ? 0 : 2) << k.tileIR;
    // Small integers: every product and sum is exact in fp16 and fp32.
    const int n = 40;
    std::mt19937 rng(5);
    std::uniform_int_distribution<int> small(-1, 1);
    std::vector<uint16_t> q(64 * 16), kk(48 * 16), v(48 * 16);
    std::vector<float> qf(q.size()), kf(kk.size()), vf(v.size()), o(64 * 16, NAN);
    for (size_t i = 0; i < q.size(); ++i) q[i] = interp::floatToHalf(qf[i] = float(small(rng)));
    for (size_t i = 0; i < kk.size(); ++i) kk[i] = interp::floatToHalf(kf[i] = float(small(rng)));
    for (size_t i = 0; i < v.size(); ++i) v[i] = interp::floatToHalf(vf[i] = float(small(rng)));
    int grid[3] = {1, 1, 1};
    interpret(k, grid,
              {InterpArg::buffer(q.data(), q.size() * 2),
               InterpArg::buffer(kk.data(), kk.size() * 2),
               InterpArg::buffer(v.data(), v.size() * 2), InterpArg::buffer(o.data(), o.size() * 4),
               InterpArg::integer(n)});
    for (int m = 0; m < 64; ++m)
      for (int d = 0; d < 16; ++d) {
        float ref = 0;
        for (int key = 0; key < 48; ++key) {
          float s = 0;
          for (int e = 0; e < 16; ++e)
            s += qf[m * 16 + e] * (key < n ? kf[key * 16 + e] : float(other));
          ref += s * (key < n ? vf[key * 16 + d] : 0.0f);
        }
        ASSERT_EQ(o[m * 16 + d], ref) << m << " " << d;
      }
  }
}

TEST(AttentionPipeline, LoopInsideALoopOverHeadsMeetsBeforeRefillingQ) {
  // One program walks the heads: Q's buffer and the K/V slots are refilled head after head,
  // after a CTA barrier (the other warp group may still be on its last MMA).
  const char* source = "import warpweave as ww\n"
                       "import warpweave.language as tl\n"
                       "@ww.jit\n"
                       "def k(q_ptr, k_ptr, v_ptr, o_ptr, n, H):\n"
                       "    m = tl.arange(0, 128)\n"
                       "    d = tl.arange(0, 16)\n"
                       "    j = tl.arange(0, 16)\n"
                       "    for h in range(H):\n"
                       "        q = tl.load(q_ptr + h * 2048 + m[:, None] * 16 + d[None, :])\n"
                       "        acc = tl.zeros((128, 16), dtype=tl.float32)\n"
                       "        for s in range(0, n, 16):\n"
                       "            rows = h * n + s + j\n"
                       "            valid = (s + j) < n\n"
                       "            kt = tl.load(k_ptr + rows[:, None] * 16 + d[None, :],\n"
                       "                         mask=valid[:, None], other=0.0)\n"
                       "            qk = tl.dot(q, tl.trans(kt))\n"
                       "            vt = tl.load(v_ptr + rows[:, None] * 16 + d[None, :],\n"
                       "                         mask=valid[:, None], other=0.0)\n"
                       "            acc = tl.dot(qk.to(tl.float16), vt, acc)\n"
                       "        tl.store(o_ptr + h * 2048 + m[:, None] * 16 + d[None, :], acc)\n";
  CompiledKernel k = compileSource("heads.py", source, "k",
                                   "q_ptr:*fp16:16,k_ptr:*fp16:16,v_ptr:*fp16:16,o_ptr:*fp32:16,"
                                   "n:i32,H:i32",
                                   8, Stage::TileIR);
  ASSERT_EQ(count(k.tileIR, "async_dot "), 2) << k.tileIR;
  EXPECT_EQ(count(k.tileIR, "debug_barrier"), 1) << k.tileIR;
  const int n = 40, H = 3;
  std::mt19937 rng(9);
  std::uniform_int_distribution<int> small(-1, 1);
  std::vector<uint16_t> q(H * 128 * 16), kk(H * n * 16), v(H * n * 16);
  std::vector<float> qf(q.size()), kf(kk.size()), vf(v.size()), o(H * 128 * 16, NAN);
  for (size_t i = 0; i < q.size(); ++i) q[i] = interp::floatToHalf(qf[i] = float(small(rng)));
  for (size_t i = 0; i < kk.size(); ++i) kk[i] = interp::floatToHalf(kf[i] = float(small(rng)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = interp::floatToHalf(vf[i] = float(small(rng)));
  int grid[3] = {1, 1, 1};
  interpret(k, grid,
            {InterpArg::buffer(q.data(), q.size() * 2), InterpArg::buffer(kk.data(), kk.size() * 2),
             InterpArg::buffer(v.data(), v.size() * 2), InterpArg::buffer(o.data(), o.size() * 4),
             InterpArg::integer(n), InterpArg::integer(H)});
  for (int h = 0; h < H; ++h)
    for (int m = 0; m < 128; ++m)
      for (int d = 0; d < 16; ++d) {
        float ref = 0;
        for (int key = 0; key < n; ++key) {
          float s = 0;
          for (int e = 0; e < 16; ++e) s += qf[(h * 128 + m) * 16 + e] * kf[(h * n + key) * 16 + e];
          ref += s * vf[(h * n + key) * 16 + d];
        }
        ASSERT_EQ(o[(h * 128 + m) * 16 + d], ref) << h << " " << m << " " << d;
      }
  // And it assembles for sm_90a.
  CompiledKernel cubin = compileSource("heads.py", source, "k",
                                       "q_ptr:*fp16:16,k_ptr:*fp16:16,v_ptr:*fp16:16,"
                                       "o_ptr:*fp32:16,n:i32,H:i32",
                                       8, Stage::Cubin);
  EXPECT_FALSE(cubin.cubin.empty());
}

TEST(AttentionPipeline, InterpreterRunsThePipelinedAttention) {
  // Odd sequence lengths (the last key block partly masked, query rows past the end), one key
  // (every prologue copy but the first masked off), causal or not, D = 64 and 128.
  struct Case {
    int n, d;
    bool causal;
  };
  for (Case c : {Case{200, 64, false}, Case{200, 64, true}, Case{77, 128, false},
                 Case{130, 128, true}, Case{1, 64, true}}) {
    SCOPED_TRACE(std::to_string(c.n) + " " + std::to_string(c.d) + (c.causal ? " causal" : ""));
    CompiledKernel k = compileAttention(Target::SM90a, Stage::TileIR, c.d, c.causal, 3);
    ASSERT_EQ(count(k.tileIR, "async_dot "), 2) << k.tileIR;
    const int H = 2, N = c.n, D = c.d;
    std::mt19937 rng(N * 31 + D + c.causal);
    std::normal_distribution<float> normal;
    size_t elems = size_t(H) * N * D;
    std::vector<uint16_t> q(elems), kk(elems), v(elems), out(elems, 0xFFFF);
    std::vector<float> qf(elems), kf(elems), vf(elems), lse(size_t(H) * N, NAN);
    for (size_t i = 0; i < elems; ++i) {
      q[i] = interp::floatToHalf(normal(rng));
      kk[i] = interp::floatToHalf(normal(rng));
      v[i] = interp::floatToHalf(normal(rng));
      qf[i] = interp::halfToFloat(q[i]);
      kf[i] = interp::halfToFloat(kk[i]);
      vf[i] = interp::halfToFloat(v[i]);
    }
    const double smScale = 1.0 / std::sqrt(double(D));
    auto buf = [](auto& vec) { return InterpArg::buffer(vec.data(), vec.size() * sizeof(vec[0])); };
    std::vector<InterpArg> args = {buf(q),   buf(kk),  buf(v),
                                   buf(out), buf(lse), InterpArg::real(smScale)};
    for (int t = 0; t < 4; ++t) { // q, k, v, out strides: z, h, m
      args.push_back(InterpArg::integer(int64_t(H) * N * D));
      args.push_back(InterpArg::integer(int64_t(N) * D));
      args.push_back(InterpArg::integer(D));
    }
    args.push_back(InterpArg::integer(H));
    args.push_back(InterpArg::integer(N));
    int grid[3] = {(N + 127) / 128, H, 1};
    interpret(k, grid, args);
    double errSq = 0, refSq = 0;
    for (int h = 0; h < H; ++h)
      for (int m = 0; m < N; ++m) {
        size_t row = size_t(h) * N + m;
        std::vector<double> s(N);
        double mx = -INFINITY;
        int keys = c.causal ? m + 1 : N;
        for (int n = 0; n < keys; ++n) {
          double dot = 0;
          for (int d = 0; d < D; ++d)
            dot += double(qf[row * D + d]) * kf[(size_t(h) * N + n) * D + d];
          s[n] = dot * smScale;
          mx = std::max(mx, s[n]);
        }
        double total = 0;
        for (int n = 0; n < keys; ++n) total += std::exp(s[n] - mx);
        double lseRef = (mx + std::log(total)) / std::log(2.0);
        ASSERT_NEAR(lse[row], lseRef, 1e-4 * std::max(1.0, std::abs(lseRef))) << h << " " << m;
        for (int d = 0; d < D; ++d) {
          double ref = 0;
          for (int n = 0; n < keys; ++n)
            ref += std::exp(s[n] - mx) / total * vf[(size_t(h) * N + n) * D + d];
          double got = interp::halfToFloat(out[row * D + d]);
          ASSERT_TRUE(std::isfinite(got)) << h << " " << m << " " << d;
          errSq += (got - ref) * (got - ref);
          refSq += ref * ref;
        }
      }
    EXPECT_LT(std::sqrt(errSq / refSq), 2e-3);
  }
}

TEST(AttentionPipeline, PtxHasCpAsyncWgmmaFromSwizzledBuffersAndNoSpills) {
  for (int d : {64, 128})
    for (bool causal : {false, true}) {
      SCOPED_TRACE(std::to_string(d) + (causal ? " causal" : ""));
      CompiledKernel k = compileAttention(Target::SM90a, Stage::Cubin, d, causal, 3);
      const std::string& ptx = k.ptx;
      // A 64xD fp16 tile is 8D 16-byte copies, D/32 per thread of 256; K and V, in the
      // prologue's two iterations and the loop's one.
      EXPECT_EQ(count(ptx, "cp.async.cg.shared.global"), 3 * 2 * (d / 32)) << ptx;
      EXPECT_EQ(count(ptx, "cp.async.wait_group 1;"), 1);
      // S = Q K^T: 64x64 per warp group, k = D in steps of 16, both operands from buffers;
      // O += P V: 64xD per warp group, k = 64 in steps of 16, P from registers.
      int n64 = count(ptx, "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16");
      if (d == 64) {
        EXPECT_EQ(n64, 4 + 4);
      } else {
        EXPECT_EQ(n64, d / 16);
        EXPECT_EQ(count(ptx, "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16"), 4);
      }
      EXPECT_EQ(count(ptx, "wgmma.wait_group.sync.aligned 0;"), 2);
      // 128-byte swizzle: mode 1 in descriptor bits 62-63.
      EXPECT_NE(ptx.find("4611686"), std::string::npos) << ptx;
      EXPECT_EQ(k.spillBytes, 0) << k.ptxasLog;
      EXPECT_FALSE(k.cubin.empty());
    }
}

const char* kAsyncLoadSource =
    "import warpweave as ww\n"
    "import warpweave.language as tl\n"
    "from warpweave import tlx\n"
    "@ww.jit\n"
    "def copy_kernel(x_ptr, out_ptr, n, OTHER: tl.constexpr):\n"
    "    rows = tl.arange(0, 32)\n"
    "    cols = tl.arange(0, 64)\n"
    "    offs = rows[:, None] * 64 + cols[None, :]\n"
    "    bufs = tlx.local_alloc((32, 64), tl.float16, 2)\n"
    "    view = tlx.local_view(bufs, 1)\n"
    "    tlx.async_load(x_ptr + offs, view, mask=offs < n, other=OTHER)\n"
    "    tlx.async_load_commit_group()\n"
    "    tlx.async_load_wait_group(0)\n"
    "    tl.store(out_ptr + offs, tlx.local_load(view))\n";

CompiledKernel compileAsyncLoad(Stage stage, int other, bool alignedN) {
  return compileSource("copy.py", kAsyncLoadSource, "copy_kernel",
                       std::string("x_ptr:*fp16:16,out_ptr:*fp16:16,n:i32") +
                           (alignedN ? ":16" : "") + ",OTHER=" + std::to_string(other),
                       4, stage);
}

TEST(AsyncLoad, TlxAsyncLoadLowersToCpAsyncAndRunsInTheInterpreter) {
  struct Case {
    int other;
    bool alignedN;
    const char* expect; // the copy instruction in the PTX
  };
  for (Case c : {Case{0, true, "cp.async.cg.shared.global"},
                 Case{3, true, "ld.global.b16"},     // a non-zero `other`: no zero fill
                 Case{0, false, "ld.global.b16"}}) { // n unaligned: masks vary per element
    CompiledKernel k = compileAsyncLoad(Stage::Cubin, c.other, c.alignedN);
    EXPECT_NE(k.ptx.find(c.expect), std::string::npos) << k.ptx;
    EXPECT_EQ(count(k.ptx, "cp.async.wait_group 0;"), 1);
    EXPECT_FALSE(k.cubin.empty());

    CompiledKernel t = compileAsyncLoad(Stage::TileIR, c.other, c.alignedN);
    const int n = c.alignedN ? 1040 : 1037;
    std::vector<uint16_t> x(2048), out(2048, 0xFFFF);
    for (int i = 0; i < 2048; ++i) x[i] = interp::floatToHalf(float(i % 97));
    int grid[3] = {1, 1, 1};
    interpret(t, grid,
              {InterpArg::buffer(x.data(), x.size() * 2), InterpArg::buffer(out.data(), 4096),
               InterpArg::integer(n)});
    for (int i = 0; i < 2048; ++i) {
      float want = i < n ? float(i % 97) : float(c.other);
      ASSERT_EQ(interp::halfToFloat(out[i]), want) << i;
    }
  }
}

} // namespace
} // namespace ww
