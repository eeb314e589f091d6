// Regression tests for what the compiler fuzzer (tools/fuzz, issue 20) found: each input once
// crashed, hung, exhausted memory, compiled to PTX that ptxas rejects, or failed without a
// FILE:LINE:COL. Each must now compile, or fail with a located error that names the construct.
#include "FuzzCore.h"
#include "warpweave/warpweave.h"

#include <gtest/gtest.h>

#include <cstdlib>

using namespace ww;

namespace {

const char* kHeader = "import warpweave as ww\n"
                      "import warpweave.language as tl\n"
                      "from warpweave import tlx\n"
                      "\n"
                      "\n";

struct Outcome {
  bool ok = false;
  std::string message; // the rendered error
  CompiledKernel kernel;
};

Outcome compileText(const std::string& text, const std::string& kernel, const std::string& sig,
                    Stage stage = Stage::Ptx, CompileOptions options = {}) {
  Outcome o;
  CompileRequest req;
  req.files = {{"k.py", text}};
  req.kernel = kernel;
  req.signature = parseSignature(sig);
  req.options = options;
  req.stage = stage;
  try {
    o.kernel = compile(req);
    o.ok = true;
  } catch (const CompileFailure& e) {
    o.message = e.what();
  }
  return o;
}

/// The error must be located inside k.py and mention `part`.
void expectLocatedError(const Outcome& o, const std::string& text, const std::string& part,
                        int line = 0) {
  ASSERT_FALSE(o.ok) << "compiled, expected an error mentioning: " << part;
  EXPECT_EQ(fuzz::checkLocated(o.message, {{"k.py", text}}), "") << o.message;
  EXPECT_NE(o.message.find(part), std::string::npos) << o.message;
  if (line != 0) {
    EXPECT_EQ(o.message.rfind("k.py:" + std::to_string(line) + ":", 0), 0u) << o.message;
  }
}

std::string kernelWith(const std::string& body, const std::string& params = "x_ptr") {
  return std::string(kHeader) + "@ww.jit\ndef k(" + params + "):\n" + body;
}

} // namespace

// ---------------------------------------------------------------------------------------------
// Line endings and other lexical edge cases
// ---------------------------------------------------------------------------------------------

TEST(ReliabilityCompiler, CarriageReturnLineEndingsCompile) {
  std::string lf = kernelWith("    tl.store(x_ptr + tl.arange(0, 64), 1.0)\n");
  for (const char* eol : {"\r", "\r\n"}) {
    std::string text;
    for (char c : lf) text += c == '\n' ? std::string(eol) : std::string(1, c);
    Outcome o = compileText(text, "k", "x_ptr:*fp32");
    EXPECT_TRUE(o.ok) << o.message;
  }
}

TEST(ReliabilityCompiler, CarriageReturnLinesCountForLocations) {
  // Line 9 holds the bad name whichever line ending the file uses.
  std::string lf = kernelWith("    y = 1\n    tl.store(x_ptr, undefined_name)\n");
  for (const char* eol : {"\n", "\r", "\r\n"}) {
    std::string text;
    for (char c : lf) text += c == '\n' ? std::string(eol) : std::string(1, c);
    Outcome o = compileText(text, "k", "x_ptr:*fp32");
    expectLocatedError(o, text, "undefined_name", 9);
  }
  // A lone CR inside a one-line string ends the line, as Python reads it.
  std::string text = kernelWith("    s = 'a\rb'\n");
  expectLocatedError(compileText(text, "k", "x_ptr:*fp32"), text, "unterminated string", 8);
}

TEST(ReliabilityCompiler, FormFeedInIndentationResetsTheColumn) {
  std::string text = kernelWith("    y = 1\n\f    tl.store(x_ptr + tl.arange(0, 64), 1.0)\n");
  Outcome o = compileText(text, "k", "x_ptr:*fp32");
  EXPECT_TRUE(o.ok) << o.message;
}

TEST(ReliabilityCompiler, NulBytesAreLocatedErrors) {
  // Python refuses a NUL anywhere in the file, comments and strings included.
  std::string text = kernelWith("    # comment ? here\n    pass\n");
  text[text.find('?')] = '\0';
  expectLocatedError(compileText(text, "k", "x_ptr:*fp32"), text, "null bytes", 8);
}

TEST(ReliabilityCompiler, InvalidUtf8IsALocatedError) {
  std::string text = kernelWith("    s = 'caf\xff'\n");
  expectLocatedError(compileText(text, "k", "x_ptr:*fp32"), text, "invalid UTF-8", 8);
  text = kernelWith("    y\xc0\x80 = 1\n");
  expectLocatedError(compileText(text, "k", "x_ptr:*fp32"), text, "invalid UTF-8", 8);
}

TEST(ReliabilityCompiler, NonIdentifierCharactersAreNamed) {
  std::string nbsp = kernelWith("    y =\xc2\xa0"
                                "1\n");
  expectLocatedError(compileText(nbsp, "k", "x_ptr:*fp32"), nbsp,
                     "invalid non-printable character U+00A0", 8);
  std::string arrow = kernelWith("    y = 1 \xe2\x86\x92 2\n");
  expectLocatedError(compileText(arrow, "k", "x_ptr:*fp32"), arrow,
                     "invalid character '\xe2\x86\x92' (U+2192)", 8);
  // Letters of other scripts stay identifiers, in strings anything UTF-8 goes.
  std::string letters =
      kernelWith("    caf\xc3\xa9: tl.constexpr = 64\n    s = '\xe2\x86\x92'\n    tl.store(x_ptr + "
                 "tl.arange(0, caf\xc3\xa9), 1.0)\n");
  Outcome o = compileText(letters, "k", "x_ptr:*fp32");
  EXPECT_TRUE(o.ok) << o.message;
}

TEST(ReliabilityCompiler, UndefinedKernelIsLocated) {
  std::string text = kernelWith("    pass\n");
  Outcome o = compileText(text, "kernel_that_is_not_there", "x_ptr:*fp32");
  expectLocatedError(o, text, "kernel 'kernel_that_is_not_there' is not defined", 1);
  // A near miss points at the def it probably meant.
  o = compileText(text, "kk", "x_ptr:*fp32");
  expectLocatedError(o, text, "did you mean 'k'", 7);
}

// ---------------------------------------------------------------------------------------------
// Huge constants: refused where they are asked for, before anything is allocated
// ---------------------------------------------------------------------------------------------

TEST(ReliabilityCompiler, SharedMemoryPastFourGigabytesIsRefusedNotWrapped) {
  // 8388608 buffers of 16x16 fp16 are 2**32 bytes: in 32 bits that was shared_bytes 0.
  std::string text =
      kernelWith("    buf = tlx.local_alloc((16, 16), tl.float16, 8388608)\n"
                 "    offs = tl.arange(0, 16)[:, None] * 16 + tl.arange(0, 16)[None, :]\n"
                 "    tlx.local_store(tlx.local_view(buf, 0), tl.load(x_ptr + offs))\n");
  Outcome o = compileText(text, "k", "x_ptr:*fp16");
  expectLocatedError(o, text,
                     "tlx.local_alloc of 8388608 buffers of 16x16 float16 needs "
                     "4294967296 bytes",
                     8);
  EXPECT_NE(o.message.find("232448"), std::string::npos) << o.message;
}

TEST(ReliabilityCompiler, KernelSharedMemoryIsCheckedAgainstTheTarget) {
  // Two allocations of 128 KiB fit one by one but not together (227 KiB on sm_90a): a is read
  // after b is written, so their lifetimes meet and they cannot share bytes.
  std::string text =
      kernelWith("    a = tlx.local_alloc((128, 128), tl.float32, 2)\n"
                 "    b = tlx.local_alloc((128, 128), tl.float32, 2)\n"
                 "    offs = tl.arange(0, 128)[:, None] * 128 + tl.arange(0, 128)[None, :]\n"
                 "    v = tl.load(x_ptr + offs)\n"
                 "    tlx.local_store(tlx.local_view(a, 0), v)\n"
                 "    tlx.local_store(tlx.local_view(b, 1), v)\n"
                 "    tl.store(x_ptr + offs, tlx.local_load(tlx.local_view(a, 0)))\n");
  Outcome o = compileText(text, "k", "x_ptr:*fp32");
  expectLocatedError(o, text, "needs 262144 bytes of shared memory, more than the 232448", 7);
}

TEST(ReliabilityCompiler, HugeBarrierCountsAreRefused) {
  for (const char* count : {"2**24", "2**31", "2**63 - 1"}) {
    std::string text =
        kernelWith(std::string("    bars = tlx.alloc_barriers(num_barriers=") + count +
                   ", arrive_count=1)\n    tlx.barrier_arrive(tlx.local_view(bars, 0))\n");
    expectLocatedError(compileText(text, "k", "x_ptr:*fp32"), text, "num_barriers=", 8);
  }
}

TEST(ReliabilityCompiler, HugeStageCountsAreRefused) {
  std::string src = std::string(kHeader) +
                    "@ww.jit\n"
                    "def k(x_ptr, STAGES: tl.constexpr):\n"
                    "    bufs = tlx.local_alloc((64, 64), tl.float16, STAGES)\n"
                    "    bars = tlx.alloc_barriers(num_barriers=STAGES, arrive_count=1)\n"
                    "    offs = tl.arange(0, 64)[:, None] * 64 + tl.arange(0, 64)[None, :]\n"
                    "    tlx.local_store(tlx.local_view(bufs, 0), tl.load(x_ptr + offs))\n";
  Outcome o = compileText(src, "k", "x_ptr:*fp16,STAGES=2**24");
  expectLocatedError(o, src, "tlx.local_alloc of 16777216 buffers of 64x64", 8);
}

TEST(ReliabilityCompiler, HugeReplicateIsRefused) {
  std::string text = kernelWith("    with tlx.async_tasks():\n"
                                "        with tlx.async_task('default'):\n"
                                "            pass\n"
                                "        with tlx.async_task(num_warps=1, replicate=2**24):\n"
                                "            pass\n");
  expectLocatedError(compileText(text, "k", "x_ptr:*fp32"), text, "replicate=16777216", 11);
}

TEST(ReliabilityCompiler, HugeBlocksAreRefused) {
  // The matmul of the library with BLOCK_K = 2**20: a 128 x 2**20 tile.
  std::string text =
      kernelWith("    offs_k = tl.arange(0, BLOCK_K)\n"
                 "    a = tl.load(x_ptr + tl.arange(0, 128)[:, None] * BLOCK_K + offs_k[None, :])\n"
                 "    tl.store(x_ptr + offs_k, tl.sum(a, axis=0))\n",
                 "x_ptr, BLOCK_K: tl.constexpr");
  Outcome o = compileText(text, "k", "x_ptr:*fp16,BLOCK_K=1048576");
  expectLocatedError(o, text, "a block tensor has at most 1048576 (2**20)", 9);
  for (const char* shape : {"(2**16, 2**16)", "(2**40, 2**40)", "(2**62, 4)"}) {
    text = kernelWith(std::string("    z = tl.zeros(") + shape +
                      ", dtype=tl.float32)\n    tl.store(x_ptr, tl.sum(tl.sum(z, 0), 0))\n");
    expectLocatedError(compileText(text, "k", "x_ptr:*fp32"), text, "1048576", 8);
  }
  // Broadcasting two allowed tensors can ask for too many elements too.
  text = kernelWith("    a = tl.arange(0, 2**20)\n    b = a[:, None] + a[None, :]\n"
                    "    tl.store(x_ptr + a, tl.sum(b, 1))\n");
  expectLocatedError(compileText(text, "k", "x_ptr:*fp32"), text, "1048576", 9);
}

TEST(ReliabilityCompiler, HugeLoopFactorsAreRefused) {
  std::string text = kernelWith("    for i in tl.range(0, 10, 1, loop_unroll_factor=2**24):\n"
                                "        tl.store(x_ptr + i, 1.0)\n");
  expectLocatedError(compileText(text, "k", "x_ptr:*fp32"), text, "loop_unroll_factor=16777216", 8);
  text = kernelWith("    for i in tl.range(0, 10, 1, num_stages=2**62):\n"
                    "        tl.store(x_ptr + i, 1.0)\n");
  expectLocatedError(compileText(text, "k", "x_ptr:*fp32"), text, "num_stages=", 8);
  // Nested unrolling multiplies: the kernel's size is what is bounded.
  text = kernelWith("    for i in tl.range(0, 10, 1, loop_unroll_factor=4096):\n"
                    "        for j in tl.range(0, 10, 1, loop_unroll_factor=4096):\n"
                    "            tl.store(x_ptr + i + j, 1.0)\n");
  expectLocatedError(compileText(text, "k", "x_ptr:*fp32"), text, "would pass 131072 ops", 8);
  // tl.static_range's trip count over the whole int64 range does not overflow.
  text = kernelWith("    for i in tl.static_range(-9223372036854775807 - 1, "
                    "9223372036854775807, 4611686018427387904):\n"
                    "        tl.store(x_ptr, 1.0)\n");
  Outcome o = compileText(text, "k", "x_ptr:*fp32");
  EXPECT_TRUE(o.ok) << o.message; // 4 trips
}

TEST(ReliabilityCompiler, LaunchOptionsOutOfRangeAreLocatedAtTheKernel) {
  std::string text = kernelWith("    tl.store(x_ptr, 1.0)\n");
  CompileOptions o;
  o.numWarps = 64;
  expectLocatedError(compileText(text, "k", "x_ptr:*fp32", Stage::Ptx, o), text, "num_warps=64", 7);
  o = {};
  o.numCtas = 1 << 20;
  expectLocatedError(compileText(text, "k", "x_ptr:*fp32", Stage::Ptx, o), text, "num_ctas=", 7);
  o = {};
  o.numStages = 1 << 30;
  expectLocatedError(compileText(text, "k", "x_ptr:*fp32", Stage::Ptx, o), text, "num_stages=", 7);
}

// ---------------------------------------------------------------------------------------------
// Deep and long inputs
// ---------------------------------------------------------------------------------------------

TEST(ReliabilityCompiler, LongChainsAreRefusedBeforeTheyOverflowTheStack) {
  // 20000 chained subscripts or attributes crashed the specializer (stack overflow).
  for (const char* link : {"[0]", ".T", "(1)"}) {
    std::string chain = "a";
    for (int i = 0; i < 20000; ++i) chain += link;
    std::string text = kernelWith("    a = tl.arange(0, 64)\n    y = " + chain + "\n");
    expectLocatedError(compileText(text, "k", "x_ptr:*fp32"), text, "nested too deeply", 9);
  }
  // Chains and parentheses add up: 150 levels of parentheses around chains of 100 operators.
  std::string expr = "a";
  for (int i = 0; i < 150; ++i) {
    std::string inner = "(" + expr + ")";
    expr = inner;
    for (int j = 0; j < 100; ++j) expr += " + a";
  }
  std::string text = kernelWith("    a = tl.arange(0, 64)\n    y = " + expr + "\n");
  expectLocatedError(compileText(text, "k", "x_ptr:*fp32"), text, "nested too deeply", 9);
  // Below the limit a long chain still compiles.
  std::string ok = "a";
  for (int i = 0; i < 3000; ++i) ok += " + a";
  text = kernelWith("    a = tl.arange(0, 64)\n    tl.store(x_ptr + a, " + ok + ")\n");
  Outcome o = compileText(text, "k", "x_ptr:*i32", Stage::TileIR);
  EXPECT_TRUE(o.ok) << o.message.substr(0, 300);
}

TEST(ReliabilityCompiler, DeepHelperChainsAreRefused) {
  std::string text = kHeader;
  for (int i = 0; i < 300; ++i)
    text += "@ww.jit\ndef h" + std::to_string(i) + "(x):\n    return h" + std::to_string(i + 1) +
            "(x)\n\n";
  text += "@ww.jit\ndef h300(x):\n    return x\n\n@ww.jit\ndef k(x_ptr):\n"
          "    tl.store(x_ptr, h0(1.0))\n";
  Outcome o = compileText(text, "k", "x_ptr:*fp32");
  ASSERT_FALSE(o.ok);
  EXPECT_EQ(fuzz::checkLocated(o.message, {{"k.py", text}}), "") << o.message.substr(0, 300);
  EXPECT_NE(o.message.find("nest more than 200 deep"), std::string::npos)
      << o.message.substr(0, 300);
}

TEST(ReliabilityCompiler, KernelsGrownPastTheOpBudgetAreRefused) {
  // 20000 inlined calls of a helper (one line of a kernel repeated): minutes in the backend.
  std::string text = std::string(kHeader) +
                     "@ww.jit\ndef h(x):\n    return (x * 2 + 1) * (x - 3) ^ (x // 5)\n\n"
                     "@ww.jit\ndef k(x_ptr):\n    a = tl.arange(0, 64)\n";
  for (int i = 0; i < 20000; ++i) text += "    a = h(a)\n";
  text += "    tl.store(x_ptr + a, a)\n";
  Outcome o = compileText(text, "k", "x_ptr:*i32");
  expectLocatedError(o, text, "a kernel may have at most 131072");
  // A static_range nest of 65536 trips of a few ops each, the most it may unroll, hits it too.
  text = kernelWith("    a = tl.arange(0, 64)\n"
                    "    for i in tl.static_range(4096):\n"
                    "        for j in tl.static_range(16):\n"
                    "            a = a * 3 + i + j\n"
                    "    tl.store(x_ptr + a, a)\n");
  expectLocatedError(compileText(text, "k", "x_ptr:*i32"), text, "Tile IR ops here");
}

TEST(ReliabilityCompiler, HugeFilesAreRefusedAtTheirStart) {
  std::string text = kernelWith("    pass\n") + std::string(size_t(17) << 20, '#') + "\n";
  expectLocatedError(compileText(text, "k", "x_ptr:*fp32"), text, "at most 16777216", 1);
}

TEST(ReliabilityCompiler, LongLinesAreQuotedAroundTheColumn) {
  std::string text = kernelWith("    y = " + std::string(100000, 'a') + "\n");
  Outcome o = compileText(text, "k", "x_ptr:*fp32");
  expectLocatedError(o, text, "undefined name", 8);
  // The quoted line is a window of the source, and the caret still points at column 9.
  std::string quoted = o.message.substr(o.message.find('\n') + 1);
  quoted = quoted.substr(0, quoted.find('\n'));
  EXPECT_LT(quoted.size(), 200u) << quoted;
  EXPECT_EQ(quoted.rfind("      y = aaaa", 0), 0u) << quoted;
  EXPECT_NE(quoted.find("..."), std::string::npos) << quoted;
}

TEST(ReliabilityCompiler, FoldedNamedBarrierIdsAreChecked) {
  // The id is a run-time expression until the clean-up passes fold it (ptxas refused
  // bar.arrive 1048584).
  std::string text = kernelWith("    me = tl.program_id(0) * 0\n"
                                "    tlx.named_barrier_arrive(8 + 2**20 - me, 256)\n");
  expectLocatedError(compileText(text, "k", "x_ptr:*fp32"), text,
                     "named barrier ids run from 0 to 15, got 1048584", 9);
}

// ---------------------------------------------------------------------------------------------
// PTX that ptxas refused after the compiler said OK
// ---------------------------------------------------------------------------------------------

TEST(ReliabilityCompiler, Fp8ScalarParametersAreOneByteParams) {
  // Declared .u32 but loaded into a 16-bit register: ptxas "Arguments mismatch for 'ld'".
  std::string text = kernelWith("    tl.store(x_ptr, a.to(tl.float32))\n", "x_ptr, a");
  for (const char* t : {"fp8e4nv", "fp8e5"}) {
    Outcome o = compileText(text, "k", std::string("x_ptr:*fp32,a:") + t);
    ASSERT_TRUE(o.ok) << o.message;
    EXPECT_NE(o.kernel.ptx.find(".param .b8 k_param_1"), std::string::npos) << o.kernel.ptx;
    EXPECT_EQ(o.kernel.params.at(1).sizeBytes, 1);
    fuzz::PtxasCheck p = fuzz::checkPtx(o.kernel.ptx, Target::SM90a, 60);
    EXPECT_TRUE(p.ok) << p.log;
  }
}

// ---------------------------------------------------------------------------------------------
// Signatures
// ---------------------------------------------------------------------------------------------

TEST(ReliabilityCompiler, DescriptorBlockShapesAreCheckedNotThrown) {
  // std::stoll threw out_of_range on 99999999999999999999 (an internal compiler error).
  std::string text = kernelWith("    pass\n", "d");
  for (const char* type :
       {"desc<fp16,99999999999999999999x2>", "desc<fp16,0x64>", "desc<fp16,64x64,rank=9999999999>",
        "desc<fp16,1x1x1x1x1x1>", "desc<fp16,64x64,rank=0>"}) {
    Outcome o = compileText(text, "k", std::string("d:") + type);
    expectLocatedError(o, text, "bad signature type", 7);
  }
}

TEST(ReliabilityCompiler, NarrowGatherIndicesAreWidened) {
  // i8 / i16 indices live in 16-bit registers: and.b32 on them was refused by ptxas.
  std::string text =
      kernelWith("    io = tl.arange(0, 64)[:, None] * 64 + tl.arange(0, 64)[None, :]\n"
                 "    buf = tlx.local_alloc((64, 64), tl.float16, 1)\n"
                 "    tlx.local_store(buf[0], tl.load(x_ptr + io))\n"
                 "    tl.store(x_ptr + io, tlx.local_gather(buf[0], tl.load(idx_ptr + io), 0))\n",
                 "x_ptr, idx_ptr");
  for (const char* t : {"i8", "u8", "i16", "i64"}) {
    Outcome o = compileText(text, "k", std::string("x_ptr:*fp16,idx_ptr:*") + t);
    ASSERT_TRUE(o.ok) << t << ": " << o.message;
    fuzz::PtxasCheck p = fuzz::checkPtx(o.kernel.ptx, Target::SM90a, 60);
    EXPECT_TRUE(p.ok) << t << ": " << p.log;
  }
}

TEST(ReliabilityCompiler, PtxasFailuresAreLocatedAtTheKernel) {
  // A ptxas that refuses everything: the compile's error still points into the source.
  std::string text = kernelWith("    tl.store(x_ptr, 1.0)\n");
  const char* old = std::getenv("WARPWEAVE_PTXAS");
  std::string saved = old ? old : "";
  setenv("WARPWEAVE_PTXAS", "/bin/false", 1);
  Outcome o = compileText(text, "k", "x_ptr:*fp32", Stage::Cubin);
  if (old)
    setenv("WARPWEAVE_PTXAS", saved.c_str(), 1);
  else
    unsetenv("WARPWEAVE_PTXAS");
  expectLocatedError(o, text, "ptxas rejected kernel 'k'", 7);
}
