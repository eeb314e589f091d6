// Tests of the specializer: real kernel source through the parser and the specializer, checked
// by the printed Tile IR (key lines, not whole dumps), the Tile IR verifier, and the rendered text
// of user errors.
#include "frontend/Parser.h"
#include "ir/Printer.h"
#include "specialize/Specializer.h"
#include "transforms/Passes.h"
#include "warpweave/warpweave.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

using namespace ww;

namespace {

struct Result {
  std::string ir;    // printed Tile IR when specialization succeeded
  std::string error; // rendered diagnostic otherwise
  std::unique_ptr<ir::Function> fn;
};

struct Extra {
  std::string path;
  std::string text;
};

const char* kHeader = "import warpweave as ww\n"
                      "import warpweave.language as tl\n"
                      "from warpweave import tlx\n";

Result specializeSource(const std::string& src, const std::string& kernel, const std::string& sig,
                        std::vector<Extra> extra = {}, CompileOptions options = {},
                        std::map<std::string, std::string> globals = {}) {
  SourceManager sm;
  Result r;
  std::vector<ast::Module> modules;
  modules.reserve(1 + extra.size());
  try {
    modules.push_back(frontend::parseModule(sm, sm.addFile("test.py", src)));
    for (const Extra& e : extra)
      modules.push_back(frontend::parseModule(sm, sm.addFile(e.path, e.text)));
    specialize::SpecializeInput in;
    in.sources = &sm;
    for (const auto& m : modules) in.modules.push_back(&m);
    in.kernel = kernel;
    in.signature = parseSignature(sig);
    in.globals = globals;
    for (const auto& [name, text] : globals)
      in.globalFiles[name] = sm.addFile("<global " + name + ">", text);
    in.options = options;
    r.fn = specialize::specialize(in);
    r.ir = ir::print(*r.fn);
    transforms::verify(*r.fn); // the IR we produce must satisfy Ops.def's contracts
  } catch (CompileError& e) {
    e.render(sm);
    r.error = e.what();
  }
  return r;
}

Result spec(const std::string& body, const std::string& sig, CompileOptions options = {}) {
  return specializeSource(std::string(kHeader) + body, "k", sig, {}, options);
}

/// The error's first line, `test.py:LINE:COL: error: ...`.
std::string firstLine(const std::string& s) {
  return s.substr(0, s.find('\n'));
}

int count(const std::string& hay, const std::string& needle) {
  int n = 0;
  for (size_t p = hay.find(needle); p != std::string::npos; p = hay.find(needle, p + 1)) ++n;
  return n;
}

#define EXPECT_HAS(text, needle) EXPECT_NE((text).find(needle), std::string::npos) << (text)
#define EXPECT_LACKS(text, needle) EXPECT_EQ((text).find(needle), std::string::npos) << (text)

} // namespace

// ---------------------------------------------------------------------------------------------
// Milestone: vector add
// ---------------------------------------------------------------------------------------------

TEST(Specialize, VectorAddExample) {
  std::ifstream f(std::string(WW_SOURCE_DIR) + "/examples/vector_add.py");
  std::stringstream ss;
  ss << f.rdbuf();
  Result r = specializeSource(ss.str(), "add_kernel",
                              "x_ptr:*fp32:16,y_ptr:*fp32:16,out_ptr:*fp32:16,n:i32:16,BLOCK=1024");
  ASSERT_EQ(r.error, "");
  const std::string& ir = r.ir;
  EXPECT_HAS(ir, "kernel @add_kernel(%0_x_ptr: ptr<fp32> {div=16}, %1_y_ptr: ptr<fp32> {div=16}, "
                 "%2_out_ptr: ptr<fp32> {div=16}, %3_n: i32 {div=16}) num_warps=4");
  EXPECT_HAS(ir, "= program_id {axis = 0} : i32");
  EXPECT_HAS(ir, "= constant {value = 1024} : i32");
  EXPECT_HAS(ir, "= mul %4_pid, %5 : i32");
  EXPECT_HAS(ir, "= arange {start = 0, end = 1024} : tensor<1024xi32>");
  EXPECT_HAS(ir, "= splat %6 : tensor<1024xi32>");
  EXPECT_HAS(ir, "_offsets = add");
  EXPECT_HAS(ir, "= splat %3_n : tensor<1024xi32>");
  EXPECT_HAS(ir, "_mask = cmp %9_offsets, %10 {pred = \"lt\"} : tensor<1024xi1>");
  EXPECT_HAS(ir, "= splat %0_x_ptr : tensor<1024xptr<fp32>>");
  EXPECT_HAS(ir, "= addptr %12, %9_offsets : tensor<1024xptr<fp32>>");
  EXPECT_HAS(ir, "_x = load %13, %11_mask {has_mask = 1, has_other = 0} : tensor<1024xfp32>");
  EXPECT_HAS(ir, "= add %14_x, %17_y : tensor<1024xfp32>");
  EXPECT_HAS(ir, "store %19, %20, %11_mask {has_mask = 1}");
  EXPECT_HAS(ir, "  return\n}");
  EXPECT_EQ(count(ir, " load "), 2);
}

TEST(Specialize, KernelParametersFromSignature) {
  Result r = spec("@ww.jit\ndef k(a, n, one, D: tl.constexpr, flag=None):\n"
                  "    tl.store(a + n * one, D)\n",
                  "a:*fp16,n:i64:16,one:i32:1,D=3");
  ASSERT_EQ(r.error, "");
  EXPECT_HAS(r.ir, "kernel @k(%0_a: ptr<fp16>, %1_n: i64 {div=16}, <folded one>: i32 {==1})");
  EXPECT_HAS(r.ir, "constant {value = 1} : i32");
  EXPECT_HAS(r.ir, "constant {value = 3.0} : fp16"); // D converted to the pointee type
  ASSERT_EQ(r.fn->args.size(), 3u);
  EXPECT_EQ(r.fn->args[2].value, nullptr);
  EXPECT_TRUE(r.fn->args[2].equalsOne);
}

TEST(Specialize, LaunchOptionsReachTheFunction) {
  CompileOptions o;
  o.numWarps = 8;
  o.numStages = 4;
  o.numCtas = 2;
  Result r = spec("@ww.jit\ndef k(x):\n    pass\n", "x:*fp32", o);
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.fn->numWarps, 8);
  EXPECT_EQ(r.fn->numStages, 4);
  EXPECT_EQ(r.fn->numCtas, 2);
}
