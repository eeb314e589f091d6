// Codegen of the debugging aids: tl.device_print (vprintf), tl.device_assert (__assertfail) and
// the bounded barrier_wait of CompileOptions::mbarrierTrapTries / wwc --trap-hangs, checked in
// the PTX and assembled by ptxas for every target.
#include "codegen/PtxBuilder.h"
#include "warpweave/warpweave.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <regex>
#include <sstream>

namespace ww {
namespace {

const Target kAllTargets[] = {Target::SM90a, Target::SM80, Target::SM100a};

CompiledKernel compileSource(const std::string& text, const std::string& kernel,
                             const std::string& signature, Target target, int trapTries = 0,
                             int numCtas = 1) {
  CompileRequest req;
  req.files.push_back({"dbg.py", text});
  req.kernel = kernel;
  req.signature = parseSignature(signature);
  req.options.target = target;
  req.options.mbarrierTrapTries = trapTries;
  req.options.numCtas = numCtas;
  req.stage = Stage::Cubin;
  return compile(req);
}

/// The NUL-terminated `.global .b8` string constants of a PTX module, decoded.
std::vector<std::string> stringConstants(const std::string& ptx) {
  std::vector<std::string> out;
  std::regex decl(R"(\.global \.align 1 \.b8 __ww_str\d+\[\d+\] = \{([0-9, ]*)\};)");
  for (std::sregex_iterator it(ptx.begin(), ptx.end(), decl), end; it != end; ++it) {
    std::string text;
    std::stringstream bytes((*it)[1].str());
    for (std::string b; std::getline(bytes, b, ',');)
      if (int v = std::stoi(b)) text += char(v);
    out.push_back(text);
  }
  return out;
}

bool hasString(const std::string& ptx, const std::string& s) {
  for (const std::string& c : stringConstants(ptx))
    if (c == s) return true;
  return false;
}

int count(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t p = text.find(needle); p != std::string::npos; p = text.find(needle, p + 1)) ++n;
  return n;
}

const char* kPrintSource = "import warpweave as ww\n"
                           "import warpweave.language as tl\n"
                           "\n"
                           "\n"
                           "@ww.jit\n"
                           "def show(x_ptr, i_ptr, BLOCK: tl.constexpr):\n"
                           "    offs = tl.arange(0, BLOCK)\n"
                           "    x = tl.load(x_ptr + offs)\n"
                           "    tl.device_print(\"x\", x)\n"
                           "    tl.device_print(\"bits\", x, hex=True)\n"
                           "    tl.device_print(\"n\", tl.load(i_ptr))\n"
                           "    tl.device_assert(x > 0, \"x must be positive\")\n";

} // namespace

TEST(PtxBuilderPrintf, DeclaresOnceAndSharesStringConstants) {
  codegen::PtxBuilder b;
  std::string a = b.stringConstant("hello %d\n");
  b.printf("hello %d\n", {{"7", codegen::RegClass::B32}});
  b.declare(".extern .func foo ();");
  b.declare(".extern .func foo ();");
  std::string decls = b.regDeclarations();
  EXPECT_EQ(count(decls, "__ww_str"), 1) << decls;
  EXPECT_EQ(count(decls, ".extern .func foo ();"), 1) << decls;
  EXPECT_EQ(count(decls, "vprintf"), 1) << decls;
  EXPECT_NE(decls.find(".local .align 8 .b8 __ww_printf_args[4];"), std::string::npos) << decls;
  EXPECT_NE(b.body().find("st.local.b32 [__ww_printf_args+0]"), std::string::npos) << b.body();
  EXPECT_NE(b.body().find("call.uni (vprintf_result), vprintf, (vprintf_format, vprintf_valist)"),
            std::string::npos)
      << b.body();
}

TEST(DebugCodegen, DevicePrintPrintsEveryElementOnceAndAssembles) {
  for (Target t : kAllTargets) {
    CompiledKernel k = compileSource(kPrintSource, "show", "x_ptr:*fp32, i_ptr:*i32, BLOCK=256", t);
    SCOPED_TRACE(targetName(t));
    EXPECT_FALSE(k.cubin.empty()) << k.ptxasLog << k.ptx;
    // The same lines as the interpreter: pid, index, prefix, value (floats widened to double).
    EXPECT_TRUE(hasString(k.ptx, "pid (%u, %u, %u) idx [%d] x: %g\n")) << k.ptx;
    EXPECT_TRUE(hasString(k.ptx, "pid (%u, %u, %u) idx [%d] bits: 0x%x\n")) << k.ptx;
    EXPECT_TRUE(hasString(k.ptx, "pid (%u, %u, %u) idx () n: %d\n")) << k.ptx;
    // One call per register of x a thread holds, for each of the two prints of x, and one for
    // the scalar (printed by one thread). The GPU test checks that every element prints once.
    int calls = count(k.ptx, "call.uni (vprintf_result), vprintf");
    EXPECT_GE(calls, 3) << k.ptx;
    EXPECT_EQ(calls % 2, 1) << k.ptx;
    EXPECT_NE(k.ptx.find("cvt.f64.f32"), std::string::npos) << k.ptx;
  }
}

TEST(DebugCodegen, DevicePrintFormatsEveryElementType) {
  const char* source = "import warpweave as ww\n"
                       "import warpweave.language as tl\n"
                       "\n"
                       "\n"
                       "@ww.jit\n"
                       "def types(h_ptr, b_ptr, c_ptr, l_ptr, BLOCK: tl.constexpr):\n"
                       "    offs = tl.arange(0, BLOCK)\n"
                       "    h = tl.load(h_ptr + offs)\n"
                       "    b = tl.load(b_ptr + offs)\n"
                       "    c = tl.load(c_ptr + offs)\n"
                       "    l = tl.load(l_ptr + offs)\n"
                       "    tl.device_print(\"h\", h)\n"
                       "    tl.device_print(\"b\", b, hex=True)\n"
                       "    tl.device_print(\"bf\", b)\n"
                       "    tl.device_print(\"c\", c, c > 0)\n"
                       "    tl.device_print(\"l\", l, hex=True)\n"
                       "    tl.device_print(\"l\", l)\n"
                       "    tl.device_print(\"hello\")\n";
  for (Target t : kAllTargets) {
    SCOPED_TRACE(targetName(t));
    CompiledKernel k = compileSource(
        source, "types", "h_ptr:*fp16, b_ptr:*bf16, c_ptr:*i8, l_ptr:*u64, BLOCK=32", t);
    EXPECT_FALSE(k.cubin.empty()) << k.ptxasLog << k.ptx;
    for (const char* format :
         {"pid (%u, %u, %u) idx [%d] h: %g\n", "pid (%u, %u, %u) idx [%d] b: 0x%x\n",
          "pid (%u, %u, %u) idx [%d] bf: %g\n", "pid (%u, %u, %u) idx [%d] c (operand 0): %d\n",
          "pid (%u, %u, %u) idx [%d] c (operand 1): %d\n", "pid (%u, %u, %u) idx [%d] l: 0x%llx\n",
          "pid (%u, %u, %u) idx [%d] l: %llu\n", "pid (%u, %u, %u) hello\n"})
      EXPECT_TRUE(hasString(k.ptx, format)) << format << "\n" << k.ptx;
    // Booleans print as 0 or 1, as the interpreter prints them.
    EXPECT_NE(k.ptx.find("selp.b32"), std::string::npos) << k.ptx;
  }
}

TEST(DebugCodegen, DeviceAssertCallsAssertfailWithMessageAndLine) {
  for (Target t : kAllTargets) {
    CompiledKernel k = compileSource(kPrintSource, "show", "x_ptr:*fp32, i_ptr:*i32, BLOCK=256", t);
    SCOPED_TRACE(targetName(t));
    EXPECT_FALSE(k.cubin.empty()) << k.ptxasLog << k.ptx;
    EXPECT_NE(k.ptx.find(".extern .func __assertfail"), std::string::npos) << k.ptx;
    EXPECT_EQ(count(k.ptx, "call.uni __assertfail"), 1) << k.ptx;
    EXPECT_TRUE(hasString(k.ptx, "x must be positive")) << k.ptx;
    EXPECT_TRUE(hasString(k.ptx, "dbg.py")) << k.ptx;
    EXPECT_TRUE(hasString(k.ptx, "show")) << k.ptx;
    EXPECT_NE(k.ptx.find("st.param.b32 [assert_line], 12;"), std::string::npos) << k.ptx;
  }
}

namespace {

/// A producer task arrives on `ready`; the default task waits for it (line 15).
const char* kWaitSource =
    "import warpweave as ww\n"                                                        // 1
    "import warpweave.language as tl\n"                                               // 2
    "from warpweave import tlx\n"                                                     // 3
    "\n"                                                                              // 4
    "\n"                                                                              // 5
    "@ww.jit\n"                                                                       // 6
    "def handoff(out_ptr, BLOCK: tl.constexpr):\n"                                    // 7
    "    buf = tlx.local_alloc((BLOCK,), tl.float32, 1)\n"                            // 8
    "    ready = tlx.alloc_barriers(num_barriers=1, arrive_count=1)\n"                // 9
    "    offs = tl.arange(0, BLOCK)\n"                                                // 10
    "    with tlx.async_tasks():\n"                                                   // 11
    "        with tlx.async_task(\"default\"):\n"                                     // 12
    "            pass\n"                                                              // 13
    "        with tlx.async_task(num_warps=4):\n"                                     // 14
    "            tlx.barrier_wait(tlx.local_view(ready, 0), 0)\n"                     // 15
    "            tl.store(out_ptr + offs, tlx.local_load(tlx.local_view(buf, 0)))\n"; // 16

} // namespace

TEST(DebugCodegen, TrapHangsBoundsBarrierWaitsAndReportsTheFacts) {
  CompiledKernel plain =
      compileSource(kWaitSource, "handoff", "out_ptr:*fp32, BLOCK=128", Target::SM90a);
  EXPECT_EQ(plain.ptx.find("trap;"), std::string::npos) << plain.ptx;
  EXPECT_EQ(plain.ptx.find("vprintf"), std::string::npos) << plain.ptx;
  for (Target t : {Target::SM90a, Target::SM100a}) {
    SCOPED_TRACE(targetName(t));
    CompiledKernel k = compileSource(kWaitSource, "handoff", "out_ptr:*fp32, BLOCK=128", t, 5000);
    EXPECT_FALSE(k.cubin.empty()) << k.ptxasLog << k.ptx;
    EXPECT_NE(k.ptx.find("setp.lt.u32"), std::string::npos) << k.ptx;
    EXPECT_NE(k.ptx.find(", 5000;"), std::string::npos) << k.ptx;
    EXPECT_EQ(count(k.ptx, "trap;"), 1) << k.ptx;
    // No cluster: the bounded wait acquires at CTA scope, with its suspend-time hint.
    EXPECT_TRUE(std::regex_search(
        k.ptx, std::regex(R"(mbarrier\.try_wait\.parity\.shared::cta\.b64 %p\d+, \[%r\d+\], )"
                          R"([^;]+, 1000;)")))
        << k.ptx;
    // The waiting task is async task 1 on warps 4-7 (the default task has the first 4), named
    // as the interpreter names it.
    EXPECT_TRUE(hasString(k.ptx, "warpweave: barrier_wait timed out: block (%u,%u,%u) thread %u "
                                 "async task 1 (warps 4-7) barrier 'ready' at smem offset %u "
                                 "phase %u at dbg.py:15\n"))
        << k.ptx;
  }
}

TEST(DebugCodegen, TrapReportsNameReplicasAndTheDefaultTaskAsTheInterpreterDoes) {
  const char* source = "import warpweave as ww\n"
                       "import warpweave.language as tl\n"
                       "from warpweave import tlx\n"
                       "\n"
                       "\n"
                       "@ww.jit\n"
                       "def pingpong(out_ptr, BLOCK: tl.constexpr):\n"
                       "    bars = tlx.alloc_barriers(num_barriers=2, arrive_count=1)\n"
                       "    offs = tl.arange(0, BLOCK)\n"
                       "    with tlx.async_tasks():\n"
                       "        with tlx.async_task(\"default\"):\n"
                       "            tlx.barrier_wait(tlx.local_view(bars, 1), 0)\n"
                       "        with tlx.async_task(num_warps=4, replicate=2):\n"
                       "            r = tlx.async_task_replica_id()\n"
                       "            tlx.barrier_wait(tlx.local_view(bars, 0), 0)\n"
                       "            tl.store(out_ptr + r * BLOCK + offs, offs)\n";
  CompiledKernel k = compileSource(source, "pingpong", "out_ptr:*i32, BLOCK=128", Target::SM90a, 9);
  EXPECT_FALSE(k.cubin.empty()) << k.ptxasLog << k.ptx;
  EXPECT_TRUE(hasString(k.ptx, "warpweave: barrier_wait timed out: block (%u,%u,%u) thread %u "
                               "default task (warps 0-3) barrier 'bars' at smem offset %u phase "
                               "%u at dbg.py:12\n"))
      << k.ptx;
  for (int r : {0, 1})
    EXPECT_TRUE(hasString(k.ptx, "warpweave: barrier_wait timed out: block (%u,%u,%u) thread %u "
                                 "async task 1 replica " +
                                     std::to_string(r) + " (warps " + std::to_string(4 + 4 * r) +
                                     "-" + std::to_string(7 + 4 * r) +
                                     ") barrier 'bars' at smem offset %u phase %u at dbg.py:15\n"))
        << k.ptx;
  EXPECT_EQ(count(k.ptx, "trap;"), 3) << k.ptx;
}

TEST(DebugCodegen, TrapHangsBoundsWaitsOnRemoteArrivals) {
  // The peer CTA arrives on `ready` (line 10): the bounded wait is the plain one's try_wait
  // (PTX's default semantics, as Triton's) with a suspend-time hint.
  const char* source = "import warpweave as ww\n"
                       "import warpweave.language as tl\n"
                       "from warpweave import tlx\n"
                       "\n"
                       "\n"
                       "@ww.jit\n"
                       "def ring(out_ptr):\n"
                       "    ready = tlx.alloc_barriers(num_barriers=1, arrive_count=1)\n"
                       "    rank = tlx.cluster_cta_rank()\n"
                       "    tlx.barrier_arrive(ready[0], 1, remote_cta_rank=(rank + 1) % 2)\n"
                       "    tlx.barrier_wait(ready[0], 0)\n"
                       "    tl.store(out_ptr + tl.program_id(0), rank)\n";
  std::regex bounded(R"(mbarrier\.try_wait\.parity\.shared::cta\.b64 )"
                     R"(%p\d+, \[%r\d+\], [^;]+, 1000;)");
  for (Target t : {Target::SM90a, Target::SM100a}) {
    SCOPED_TRACE(targetName(t));
    CompiledKernel plain = compileSource(source, "ring", "out_ptr:*i32", t, 0, 2);
    EXPECT_FALSE(plain.cubin.empty()) << plain.ptxasLog << plain.ptx;
    EXPECT_EQ(count(plain.ptx, "mbarrier.try_wait.parity.shared::cta.b64"), 1) << plain.ptx;
    EXPECT_EQ(plain.ptx.find("trap;"), std::string::npos) << plain.ptx;
    CompiledKernel k = compileSource(source, "ring", "out_ptr:*i32", t, 300, 2);
    EXPECT_FALSE(k.cubin.empty()) << k.ptxasLog << k.ptx;
    EXPECT_TRUE(std::regex_search(k.ptx, bounded)) << k.ptx;
    EXPECT_EQ(count(k.ptx, "mbarrier.try_wait"), 1) << k.ptx;
    EXPECT_NE(k.ptx.find(", 300;"), std::string::npos) << k.ptx;
    EXPECT_EQ(count(k.ptx, "trap;"), 1) << k.ptx;
    EXPECT_TRUE(hasString(k.ptx, "warpweave: barrier_wait timed out: block (%u,%u,%u) thread %u "
                                 "(warps 0-3) barrier 'ready' at smem offset %u phase %u at "
                                 "dbg.py:11\n"))
        << k.ptx;
  }
}

TEST(DebugCodegen, WwcTrapHangsOption) {
  std::string dir = ::testing::TempDir();
  std::string src = dir + "/ww_trap_src.py", out = dir + "/ww_trap.ptx";
  std::ofstream(src) << kWaitSource;
  ASSERT_EQ(runCli({src, "--kernel", "handoff", "--signature", "out_ptr:*fp32, BLOCK=128",
                    "--trap-hangs", "--emit", "ptx", "-o", out}),
            0);
  std::stringstream text;
  text << std::ifstream(out).rdbuf();
  EXPECT_NE(text.str().find("setp.lt.u32"), std::string::npos);
  EXPECT_NE(text.str().find(", 131072;"), std::string::npos) << text.str();
  EXPECT_EQ(count(text.str(), "trap;"), 1);
  ASSERT_EQ(runCli({src, "--kernel", "handoff", "--signature", "out_ptr:*fp32, BLOCK=128",
                    "--trap-hangs=77", "--emit", "ptx", "-o", out}),
            0);
  std::stringstream again;
  again << std::ifstream(out).rdbuf();
  EXPECT_NE(again.str().find(", 77;"), std::string::npos);
  EXPECT_EQ(runCli({src, "--kernel", "handoff", "--signature", "out_ptr:*fp32, BLOCK=128",
                    "--trap-hangs=0", "--emit", "ptx", "-o", out}),
            1);
  std::remove(src.c_str());
  std::remove(out.c_str());
}

} // namespace ww
