// Tests of the runtime: ptxas invocation and report parsing, parameter layout and packing,
// kernel metadata, and (on a machine with a CUDA driver and GPU) real launches of PTX kernels.
#include "runtime/Process.h"
#include "runtime/Ptxas.h"
#include "warpweave/runtime.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <random>
#include <thread>

namespace {

using namespace ww;

/// out[i] = x[i] + y[i] for i < n, one element per thread.
std::string addPtx(const char* target, const char* entry = "add_kernel") {
  // PTX ISA 8.6 is the first to know sm_100a.
  const char* version = std::string(target) == "sm_100a" ? "8.7" : "8.0";
  return std::string(".version ") + version + "\n.target " + target + "\n.address_size 64\n" +
         ".visible .entry " + entry + R"((
  .param .u64 x, .param .u64 y, .param .u64 out, .param .u32 n)
{
  .reg .pred %p<2>;
  .reg .b32 %r<6>;
  .reg .f32 %f<4>;
  .reg .b64 %rd<8>;
  ld.param.u64 %rd1, [x];
  ld.param.u64 %rd2, [y];
  ld.param.u64 %rd3, [out];
  ld.param.u32 %r1, [n];
  mov.u32 %r2, %ctaid.x;
  mov.u32 %r3, %ntid.x;
  mov.u32 %r4, %tid.x;
  mad.lo.s32 %r5, %r2, %r3, %r4;
  setp.ge.s32 %p1, %r5, %r1;
  @%p1 bra DONE;
  mul.wide.s32 %rd4, %r5, 4;
  add.s64 %rd5, %rd1, %rd4;
  add.s64 %rd6, %rd2, %rd4;
  add.s64 %rd7, %rd3, %rd4;
  ld.global.f32 %f1, [%rd5];
  ld.global.f32 %f2, [%rd6];
  add.f32 %f3, %f1, %f2;
  st.global.f32 [%rd7], %f3;
DONE:
  ret;
}
)";
}

/// A kernel with 1 KiB of static shared memory: each thread stores its id there and reads back
/// its neighbour's, so ptxas reports "1024 bytes smem".
std::string sharedPtx() {
  return R"(.version 8.0
.target sm_90a
.address_size 64
.visible .entry smem_kernel(.param .u64 out)
{
  .shared .align 4 .b8 buf[1024];
  .reg .b32 %r<8>;
  .reg .b64 %rd<6>;
  ld.param.u64 %rd1, [out];
  mov.u32 %r1, %tid.x;
  shl.b32 %r2, %r1, 2;
  mov.u32 %r3, buf;
  add.u32 %r4, %r3, %r2;
  st.shared.u32 [%r4], %r1;
  bar.sync 0;
  xor.b32 %r5, %r2, 4;
  add.u32 %r6, %r3, %r5;
  ld.shared.u32 %r7, [%r6];
  mul.wide.u32 %rd2, %r1, 4;
  add.s64 %rd3, %rd1, %rd2;
  st.global.u32 [%rd3], %r7;
  ret;
}
)";
}

std::vector<std::string> listDir(const std::string& dir) {
  std::vector<std::string> names;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      std::string n = e->d_name;
      if (n != "." && n != "..") names.push_back(n);
    }
    closedir(d);
  }
  return names;
}

bool isElf(const std::vector<uint8_t>& bytes) {
  return bytes.size() > 4 && bytes[0] == 0x7f && bytes[1] == 'E' && bytes[2] == 'L' &&
         bytes[3] == 'F';
}

// ---------------------------------------------------------------------------------------------
// ptxas
// ---------------------------------------------------------------------------------------------

TEST(Ptxas, FindsTheToolkitPtxas) {
  std::string p = runtime::findPtxas();
  ASSERT_FALSE(p.empty()) << "no ptxas on this machine";
  runtime::ProcessResult r = runtime::runProcess({p, "--version"});
  ASSERT_TRUE(r.started);
  EXPECT_EQ(r.exitCode, 0);
  EXPECT_NE(r.output.find("ptxas"), std::string::npos) << r.output;
}

TEST(Ptxas, EnvOverrideThatIsNotExecutableIsIgnored) {
  const char* old = std::getenv("WARPWEAVE_PTXAS");
  std::string saved = old ? old : "";
  setenv("WARPWEAVE_PTXAS", "/nonexistent/ptxas", 1);
  std::string p = runtime::findPtxas();
  if (old)
    setenv("WARPWEAVE_PTXAS", saved.c_str(), 1);
  else
    unsetenv("WARPWEAVE_PTXAS");
  EXPECT_NE(p, "/nonexistent/ptxas");
  EXPECT_FALSE(p.empty());
}

TEST(Ptxas, AssemblesForEachTargetAndReadsTheReport) {
  struct Case {
    Target target;
    const char* ptxTarget;
  } cases[] = {{Target::SM90a, "sm_90a"}, {Target::SM80, "sm_80"}, {Target::SM100a, "sm_100a"}};
  for (const Case& c : cases) {
    runtime::PtxasResult r = runtime::runPtxas(addPtx(c.ptxTarget), c.target, "add_kernel");
    ASSERT_TRUE(r.ok) << c.ptxTarget << ":\n" << r.log;
    EXPECT_TRUE(isElf(r.cubin)) << c.ptxTarget;
    EXPECT_GT(r.registers, 0) << r.log;
    EXPECT_LT(r.registers, 64) << r.log;
    EXPECT_EQ(r.spillBytes, 0);
    EXPECT_NE(r.log.find(std::string("for '") + c.ptxTarget + "'"), std::string::npos) << r.log;
  }
}

TEST(Ptxas, ReportsStaticSharedMemory) {
  runtime::PtxasResult r = runtime::runPtxas(sharedPtx(), Target::SM90a, "smem_kernel");
  ASSERT_TRUE(r.ok) << r.log;
  EXPECT_EQ(r.sharedBytes, 1024) << r.log;
}

TEST(Ptxas, ReportBelongsToTheNamedEntry) {
  // Two entries: the shared-memory one first, then add_kernel without shared memory.
  std::string two = sharedPtx();
  std::string add = addPtx("sm_90a");
  two += add.substr(add.find(".visible"));
  runtime::PtxasResult a = runtime::runPtxas(two, Target::SM90a, "add_kernel");
  runtime::PtxasResult s = runtime::runPtxas(two, Target::SM90a, "smem_kernel");
  ASSERT_TRUE(a.ok && s.ok) << a.log;
  EXPECT_EQ(a.sharedBytes, 0) << a.log;
  EXPECT_EQ(s.sharedBytes, 1024) << s.log;
}

TEST(Ptxas, RejectedPtxGivesTheLogAndNoCubin) {
  runtime::PtxasResult r = runtime::runPtxas("this is not ptx\n", Target::SM90a, "k");
  EXPECT_FALSE(r.ok);
  EXPECT_TRUE(r.cubin.empty());
  EXPECT_NE(r.log.find("ptxas"), std::string::npos) << r.log;
  EXPECT_NE(r.log.find("error"), std::string::npos) << r.log;

  // A target mismatch is a ptxas error too (sm_90a PTX cannot be assembled for sm_80).
  runtime::PtxasResult m = runtime::runPtxas(addPtx("sm_90a"), Target::SM80, "add_kernel");
  EXPECT_FALSE(m.ok);
  EXPECT_NE(m.log.find("SM version"), std::string::npos) << m.log;
}

TEST(Ptxas, ConcurrentRunsUseSeparateTempDirsAndCleanUp) {
  // A temp root whose name a shell would mangle: arguments go to ptxas without a shell.
  std::string root = std::string(WW_BINARY_DIR) + "/runtime_test tmp $(x) 'q'";
  runtime::runProcess({"/bin/mkdir", "-p", root});
  const char* oldTmp = std::getenv("TMPDIR");
  std::string savedTmp = oldTmp ? oldTmp : "";
  setenv("TMPDIR", root.c_str(), 1);
  for (const std::string& n : listDir(root))
    runtime::runProcess({"/bin/rm", "-rf", root + "/" + n});

  constexpr int kThreads = 6;
  std::atomic<int> good{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      std::string entry = "k" + std::to_string(t);
      runtime::PtxasResult r =
          runtime::runPtxas(addPtx("sm_90a", entry.c_str()), Target::SM90a, entry);
      if (r.ok && isElf(r.cubin) && r.log.find("'" + entry + "'") != std::string::npos) ++good;
    });
  for (auto& th : threads) th.join();
  if (oldTmp)
    setenv("TMPDIR", savedTmp.c_str(), 1);
  else
    unsetenv("TMPDIR");
  EXPECT_EQ(good.load(), kThreads);
  EXPECT_TRUE(listDir(root).empty()) << "temp dirs left behind: " << listDir(root).size();
}

TEST(Process, ReportsExitCodesAndMissingPrograms) {
  runtime::ProcessResult f =
      runtime::runProcess({"/bin/sh", "-c", "echo out; echo err >&2; exit 3"});
  ASSERT_TRUE(f.started);
  EXPECT_EQ(f.exitCode, 3);
  EXPECT_NE(f.output.find("out"), std::string::npos);
  EXPECT_NE(f.output.find("err"), std::string::npos);
  runtime::ProcessResult m = runtime::runProcess({"/nonexistent/tool"});
  EXPECT_FALSE(m.started);
  EXPECT_FALSE(m.output.empty());
}

// ---------------------------------------------------------------------------------------------
// Parameter layout and packing
// ---------------------------------------------------------------------------------------------

std::vector<KernelParam> sampleParams() {
  return {{"x", "ptr<fp32>", 8, 16}, {"n", "i32", 4, 1},    {"y", "ptr<fp16>", 8, 1},
          {"flag", "i1", 1, 1},      {"eps", "fp32", 4, 1}, {"big", "i64", 8, 1}};
}

TEST(Params, LayoutAlignsEachParamNaturally) {
  int total = 0;
  std::vector<ParamSlot> s = layoutParams(sampleParams(), &total);
  ASSERT_EQ(s.size(), 6u);
  EXPECT_EQ(s[0].offset, 0);
  EXPECT_EQ(s[1].offset, 8);
  EXPECT_EQ(s[2].offset, 16);
  EXPECT_EQ(s[3].offset, 24);
  EXPECT_EQ(s[4].offset, 28);
  EXPECT_EQ(s[5].offset, 32);
  EXPECT_EQ(total, 40);
  EXPECT_EQ(s[0].kind, ParamSlot::Kind::Pointer);
  EXPECT_EQ(s[4].kind, ParamSlot::Kind::Float);
}

TEST(Params, TensorDescriptorsAre128BytesAt64ByteAlignment) {
  int total = 0;
  std::vector<ParamSlot> s =
      layoutParams({{"n", "i32", 4, 1}, {"desc", "desc<fp16, 128x64, rank=2>", 128, 1}}, &total);
  EXPECT_EQ(s[1].offset, 64);
  EXPECT_EQ(s[1].size, 128);
  EXPECT_EQ(total, 192);
}

TEST(Params, UnknownTypeAndWrongSizeAreRejected) {
  EXPECT_THROW(layoutParams({{"h", "fp16", 2, 1}}, nullptr), LaunchError);
  EXPECT_THROW(layoutParams({{"n", "i32", 8, 1}}, nullptr), std::logic_error);
}

TEST(Params, PackWritesEachValueAtItsOffset) {
  int total = 0;
  std::vector<ParamSlot> s = layoutParams(sampleParams(), &total);
  alignas(64) uint8_t buf[64];
  std::memset(buf, 0xAB, sizeof buf);
  packArgs(s,
           {LaunchArg::pointer(uint64_t{0x7f0012345670}), LaunchArg::integer(-5),
            LaunchArg::pointer(uint64_t{0x1000}), LaunchArg::integer(1), LaunchArg::floating(0.25),
            LaunchArg::integer(int64_t{1} << 40)},
           buf);
  uint64_t p;
  int32_t n;
  float eps;
  int64_t big;
  std::memcpy(&p, buf + 0, 8);
  std::memcpy(&n, buf + 8, 4);
  std::memcpy(&eps, buf + 28, 4);
  std::memcpy(&big, buf + 32, 8);
  EXPECT_EQ(p, 0x7f0012345670u);
  EXPECT_EQ(n, -5);
  EXPECT_EQ(buf[24], 1);
  EXPECT_EQ(eps, 0.25f);
  EXPECT_EQ(big, int64_t{1} << 40);
}

TEST(Params, PackRejectsWrongCountAndKinds) {
  std::vector<ParamSlot> s = layoutParams(sampleParams(), nullptr);
  alignas(64) uint8_t buf[64];
  try {
    packArgs(s, {LaunchArg::integer(1)}, buf);
    FAIL() << "expected LaunchError";
  } catch (const LaunchError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("expects 6 runtime arguments"), std::string::npos) << msg;
    EXPECT_NE(msg.find("x, n, y, flag, eps, big"), std::string::npos) << msg;
  }
  std::vector<LaunchArg> args = {LaunchArg::pointer(uint64_t{0}), LaunchArg::floating(1.5),
                                 LaunchArg::pointer(uint64_t{0}), LaunchArg::integer(0),
                                 LaunchArg::floating(1),          LaunchArg::integer(0)};
  try {
    packArgs(s, args, buf);
    FAIL() << "expected LaunchError";
  } catch (const LaunchError& e) {
    EXPECT_NE(std::string(e.what()).find("argument 'n' (i32) expects an integer, got a float"),
              std::string::npos)
        << e.what();
  }
}

// ---------------------------------------------------------------------------------------------
// Metadata
// ---------------------------------------------------------------------------------------------

/// The layout kernelMetadataJson writes (see src/driver/Cli.cpp).
const char* kMeta = R"({
  "name": "add_kernel",
  "target": "sm_90a",
  "num_warps": 8,
  "num_ctas": 2,
  "shared_bytes": 65536,
  "registers": 12,
  "spill_bytes": 0,
  "compiler": "warpweave-0.1.0",
  "params": [
    {"name": "x_ptr", "type": "ptr<fp32>", "size": 8, "divisibility": 16},
    {"name": "n", "type": "i32", "size": 4, "divisibility": 1}
  ],
  "folded": ["BLOCK", "one\"q"]
}
)";

TEST(Metadata, ParsesWhatWwcWrites) {
  CompiledKernel k = parseKernelMetadata(kMeta);
  EXPECT_EQ(k.name, "add_kernel");
  EXPECT_EQ(k.target, Target::SM90a);
  EXPECT_EQ(k.numWarps, 8);
  EXPECT_EQ(k.numCtas, 2);
  EXPECT_EQ(k.sharedBytes, 65536);
  EXPECT_EQ(k.registers, 12);
  ASSERT_EQ(k.params.size(), 2u);
  EXPECT_EQ(k.params[0].name, "x_ptr");
  EXPECT_EQ(k.params[0].type, "ptr<fp32>");
  EXPECT_EQ(k.params[0].sizeBytes, 8);
  EXPECT_EQ(k.params[0].divisibility, 16);
  EXPECT_EQ(k.params[1].type, "i32");
  ASSERT_EQ(k.foldedArgs.size(), 2u);
  EXPECT_EQ(k.foldedArgs[1], "one\"q");
}

TEST(Metadata, MalformedInputIsReported) {
  EXPECT_THROW(parseKernelMetadata("{\"name\": \"k\""), std::invalid_argument);
  EXPECT_THROW(parseKernelMetadata("{\"num_warps\": 4}"), std::invalid_argument);
  EXPECT_THROW(parseKernelMetadata("[1, 2]"), std::invalid_argument);
  EXPECT_THROW(parseKernelMetadata("{\"name\": \"k\", \"target\": \"sm_75\"}"),
               std::invalid_argument);
  EXPECT_THROW(parseKernelMetadata("{\"name\": \"k\", \"num_warps\": 0}"), std::invalid_argument);
}

TEST(Metadata, FromFilesNeedsBothFiles) {
  EXPECT_THROW(GpuKernel::fromFiles("/nonexistent.cubin", "/nonexistent.json"),
               std::invalid_argument);
}

// ---------------------------------------------------------------------------------------------
// The driver: absent here (CPU machines), present on the GPU machine
// ---------------------------------------------------------------------------------------------

TEST(Driver, MissingDriverIsAClearErrorNotACrash) {
  std::string reason;
  if (cudaAvailable(&reason)) GTEST_SKIP() << "a CUDA driver and GPU are present";
  EXPECT_FALSE(reason.empty());
  CompiledKernel k;
  k.name = "add_kernel";
  k.ptx = addPtx("sm_90a");
  k.params = {{"x", "ptr<fp32>", 8, 1},
              {"y", "ptr<fp32>", 8, 1},
              {"out", "ptr<fp32>", 8, 1},
              {"n", "i32", 4, 1}};
  GpuKernel kernel(k); // constructing needs no driver
  try {
    kernel.launch({1, 1, 1}, nullptr,
                  {LaunchArg::pointer(uint64_t{0}), LaunchArg::pointer(uint64_t{0}),
                   LaunchArg::pointer(uint64_t{0}), LaunchArg::integer(0)});
    FAIL() << "launch without a driver must throw";
  } catch (const CudaError& e) {
    EXPECT_EQ(std::string(e.what()), reason);
  }
  EXPECT_THROW(DeviceBuffer(16), CudaError);
}

class Gpu : public ::testing::Test {
protected:
  void SetUp() override {
    std::string reason;
    if (!cudaAvailable(&reason)) GTEST_SKIP() << "no CUDA GPU: " << reason;
  }
};

std::vector<float> randomFloats(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<float> v(n);
  for (float& f : v) f = dist(rng);
  return v;
}

void runAdd(const GpuKernel& kernel, int n) {
  std::vector<float> x = randomFloats(n, 1), y = randomFloats(n, 2), out(n + 64);
  DeviceBuffer dx(n * 4), dy(n * 4), dout((n + 64) * 4);
  dx.upload(x.data(), n * 4);
  dy.upload(y.data(), n * 4);
  dout.fill(0xFF); // NaN poison: any element the kernel misses stays NaN
  unsigned blocks = (n + 127) / 128;
  kernel.launch({blocks, 1, 1}, nullptr,
                {LaunchArg::pointer(dx.address()), LaunchArg::pointer(dy.address()),
                 LaunchArg::pointer(dout.address()), LaunchArg::integer(n)});
  synchronize();
  dout.download(out.data(), (n + 64) * 4);
  for (int i = 0; i < n; ++i) ASSERT_EQ(out[i], x[i] + y[i]) << "at " << i;
  for (int i = n; i < n + 64; ++i) ASSERT_TRUE(std::isnan(out[i])) << "wrote past n at " << i;
}

CompiledKernel addKernel() {
  CompiledKernel k;
  k.name = "add_kernel";
  k.numWarps = 4;
  k.params = {{"x", "ptr<fp32>", 8, 1},
              {"y", "ptr<fp32>", 8, 1},
              {"out", "ptr<fp32>", 8, 1},
              {"n", "i32", 4, 1}};
  return k;
}

TEST_F(Gpu, LaunchesACubin) {
  CompiledKernel k = addKernel();
  runtime::PtxasResult r = runtime::runPtxas(addPtx("sm_90a"), Target::SM90a, k.name);
  ASSERT_TRUE(r.ok) << r.log;
  k.cubin = r.cubin;
  GpuKernel kernel(k);
  runAdd(kernel, 1000003);
  runAdd(kernel, 1);
}

TEST_F(Gpu, TimedDriverLaunchesRunTheKernelThroughBothEntryPoints) {
  CompiledKernel k = addKernel();
  runtime::PtxasResult r = runtime::runPtxas(addPtx("sm_90a"), Target::SM90a, k.name);
  ASSERT_TRUE(r.ok) << r.log;
  k.cubin = r.cubin;
  GpuKernel kernel(k);
  const int n = 1000;
  std::vector<float> x = randomFloats(n, 3), y = randomFloats(n, 4), out(n);
  DeviceBuffer dx(n * 4), dy(n * 4), dout(n * 4);
  dx.upload(x.data(), n * 4);
  dy.upload(y.data(), n * 4);
  alignas(64) uint8_t params[64];
  packArgs(kernel.slots(),
           {LaunchArg::pointer(dx.address()), LaunchArg::pointer(dy.address()),
            LaunchArg::pointer(dout.address()), LaunchArg::integer(n)},
           params);
  for (bool launchEx : {false, true}) {
    dout.fill(0xFF);
    double seconds =
        kernel.timeDriverLaunches({(n + 127) / 128, 1, 1}, nullptr, params, 3, launchEx);
    EXPECT_GT(seconds, 0.0);
    synchronize();
    dout.download(out.data(), n * 4);
    for (int i = 0; i < n; ++i)
      ASSERT_EQ(out[i], x[i] + y[i])
          << (launchEx ? "cuLaunchKernelEx" : "cuLaunchKernel") << " at " << i;
  }
}

TEST_F(Gpu, LaunchesPtxThroughTheDriverJit) {
  CompiledKernel k = addKernel();
  k.ptx = addPtx("sm_90a");
  runAdd(GpuKernel(k), 4097);
}

TEST_F(Gpu, BadPtxReportsTheJitLog) {
  CompiledKernel k = addKernel();
  k.ptx =
      ".version 8.0\n.target sm_90a\n.address_size 64\n.visible .entry add_kernel() { bogus; }\n";
  GpuKernel kernel(k);
  try {
    kernel.prepare();
    FAIL() << "bad PTX must not load";
  } catch (const CudaError& e) {
    EXPECT_NE(std::string(e.what()).find("cuModuleLoadDataEx"), std::string::npos) << e.what();
  }
}

TEST_F(Gpu, AotCubinAndMetadataFromFiles) {
  runtime::PtxasResult r = runtime::runPtxas(addPtx("sm_90a"), Target::SM90a, "add_kernel");
  ASSERT_TRUE(r.ok) << r.log;
  runtime::TempDir dir("aot-test");
  std::string meta = R"({"name": "add_kernel", "target": "sm_90a", "num_warps": 4, "num_ctas": 1,
    "shared_bytes": 0, "params": [
    {"name": "x", "type": "ptr<fp32>", "size": 8, "divisibility": 16},
    {"name": "y", "type": "ptr<fp32>", "size": 8, "divisibility": 16},
    {"name": "out", "type": "ptr<fp32>", "size": 8, "divisibility": 16},
    {"name": "n", "type": "i32", "size": 4, "divisibility": 1}], "folded": []})";
  ASSERT_TRUE(runtime::writeFile(dir.path() + "/k.cubin", r.cubin.data(), r.cubin.size()));
  ASSERT_TRUE(runtime::writeFile(dir.path() + "/k.json", meta.data(), meta.size()));
  runAdd(GpuKernel::fromFiles(dir.path() + "/k.cubin", dir.path() + "/k.json"), 777);
}

/// Writes %cluster_ctarank and %cluster_nctarank of each CTA to out[2*ctaid], out[2*ctaid+1];
/// uses 100 KB of dynamic shared memory (touching its last word) so the >48 KB path is exercised.
std::string clusterPtx() {
  return R"(.version 8.0
.target sm_90a
.address_size 64
.extern .shared .align 16 .b8 dyn[];
.visible .entry cluster_kernel(.param .u64 out)
{
  .reg .b32 %r<8>;
  .reg .b64 %rd<4>;
  .reg .pred %p<2>;
  ld.param.u64 %rd1, [out];
  mov.u32 %r1, %ctaid.x;
  mov.u32 %r2, %cluster_ctarank;
  mov.u32 %r3, %cluster_nctarank;
  mov.u32 %r4, dyn;
  add.u32 %r4, %r4, 102396;
  st.shared.u32 [%r4], %r2;
  bar.sync 0;
  ld.shared.u32 %r5, [%r4];
  mov.u32 %r6, %tid.x;
  setp.ne.u32 %p1, %r6, 0;
  @%p1 bra DONE;
  mul.wide.u32 %rd2, %r1, 8;
  add.s64 %rd3, %rd1, %rd2;
  st.global.v2.u32 [%rd3], {%r5, %r3};
DONE:
  ret;
}
)";
}

TEST_F(Gpu, ClusterLaunchWithLargeDynamicSharedMemory) {
  CompiledKernel k;
  k.name = "cluster_kernel";
  k.numWarps = 4;
  k.numCtas = 2;
  k.sharedBytes = 102400;
  k.params = {{"out", "ptr<i32>", 8, 1}};
  runtime::PtxasResult r = runtime::runPtxas(clusterPtx(), Target::SM90a, k.name);
  ASSERT_TRUE(r.ok) << r.log;
  k.cubin = r.cubin;
  GpuKernel kernel(k);
  const unsigned ctas = 8;
  DeviceBuffer out(ctas * 8);
  out.fill(0xFF);
  kernel.launch({ctas, 1, 1}, nullptr, {LaunchArg::pointer(out.address())});
  synchronize();
  std::vector<uint32_t> host(ctas * 2);
  out.download(host.data(), ctas * 8);
  for (unsigned c = 0; c < ctas; ++c) {
    EXPECT_EQ(host[2 * c], c % 2) << "cta " << c;
    EXPECT_EQ(host[2 * c + 1], 2u) << "cta " << c;
  }
  EXPECT_THROW(kernel.launch({3, 1, 1}, nullptr, {LaunchArg::pointer(out.address())}), LaunchError);
}

/// One TMA load of an 8x16 fp32 box at (row 8, col 16) into shared memory (no swizzle), then each
/// of 128 threads copies one element out: checks the descriptor encoding end to end.
const char* kTmaPtx = R"(.version 8.0
.target sm_90a
.address_size 64
.visible .entry tma_kernel(.param .align 64 .b8 desc[128], .param .u64 out)
{
  .shared .align 128 .b8 tile[512];
  .shared .align 8 .b64 bar;
  .reg .pred %p<3>;
  .reg .b32 %r<12>;
  .reg .f32 %f<2>;
  .reg .b64 %rd<8>;
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, tile;
  mov.u32 %r3, bar;
  setp.ne.u32 %p1, %r1, 0;
  @%p1 bra WAIT;
  mbarrier.init.shared::cta.b64 [%r3], 1;
  fence.proxy.async.shared::cta;
  mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r3], 512;
  mov.u32 %r4, 16;
  mov.u32 %r5, 8;
  mov.b64 %rd5, desc;
  cvta.param.u64 %rd6, %rd5;
  cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%r2], [%rd6, {%r4, %r5}], [%r3];
WAIT:
  bar.sync 0;
LOOP:
  mbarrier.try_wait.parity.shared::cta.b64 %p2, [%r3], 0;
  @!%p2 bra LOOP;
  shl.b32 %r6, %r1, 2;
  add.u32 %r7, %r2, %r6;
  ld.shared.f32 %f1, [%r7];
  ld.param.u64 %rd2, [out];
  mul.wide.u32 %rd3, %r1, 4;
  add.s64 %rd4, %rd2, %rd3;
  st.global.f32 [%rd4], %f1;
  ret;
}
)";

TEST_F(Gpu, TmaLoadThroughAnEncodedDescriptor) {
  CompiledKernel k;
  k.name = "tma_kernel";
  k.numWarps = 4;
  k.params = {{"desc", "desc<fp32, 8x16, rank=2>", 128, 1}, {"out", "ptr<fp32>", 8, 1}};
  runtime::PtxasResult r = runtime::runPtxas(kTmaPtx, Target::SM90a, k.name);
  ASSERT_TRUE(r.ok) << r.log;
  k.cubin = r.cubin;
  const int rows = 32, cols = 64;
  std::vector<float> src = randomFloats(rows * cols, 7), got(128);
  DeviceBuffer dsrc(src.size() * 4), dout(128 * 4);
  dsrc.upload(src.data(), src.size() * 4);
  dout.fill(0xFF);
  TensorMap map = encodeTensorMap("fp32", dsrc.address(), {rows, cols}, {cols, 1}, {8, 16}, 0);
  GpuKernel(k).launch({1, 1, 1}, nullptr,
                      {LaunchArg::tensor(map), LaunchArg::pointer(dout.address())});
  synchronize();
  dout.download(got.data(), 128 * 4);
  for (int i = 0; i < 128; ++i)
    ASSERT_EQ(got[i], src[(8 + i / 16) * cols + 16 + i % 16]) << "element " << i;
}

TEST_F(Gpu, EncodesTensorMaps) {
  DeviceBuffer buf(256 * 128 * 2);
  TensorMap m = encodeTensorMap("fp16", buf.address(), {256, 128}, {128, 1}, {64, 64}, 128);
  bool nonzero = false;
  for (uint8_t b : m.bytes) nonzero |= b != 0;
  EXPECT_TRUE(nonzero);
  EXPECT_THROW(encodeTensorMap("fp16", buf.address() + 2, {256, 128}, {128, 1}, {64, 64}, 128),
               LaunchError);
  EXPECT_THROW(encodeTensorMap("fp16", buf.address(), {256, 128}, {128, 1}, {64, 128}, 128),
               LaunchError);
  EXPECT_THROW(encodeTensorMap("fp16", buf.address(), {256, 100}, {100, 1}, {64, 64}, 0),
               LaunchError);
}

} // namespace
