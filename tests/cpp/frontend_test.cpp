// Lexer, parser and AST dump: every construct of the kernel-language subset, positive and negative.
#include "frontend/AstDump.h"
#include "frontend/Lexer.h"
#include "frontend/Parser.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

using namespace ww;

namespace {

std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string dumpModule(const std::string& text) {
  SourceManager sm;
  uint32_t id = sm.addFile("t.py", text);
  return ast::dump(frontend::parseModule(sm, id));
}

std::string dumpExpr(const std::string& text) {
  SourceManager sm;
  uint32_t id = sm.addFile("e.py", text);
  return ast::dump(*frontend::parseExpression(sm, id));
}

/// The body of the single @jit kernel `k` wrapping `body` (already indented by 4).
std::string dumpKernelBody(const std::string& body) {
  std::string d = dumpModule("@ww.jit\ndef k():\n" + body);
  std::string head = "(module\n  (def k ()\n    (decorators ww.jit)\n";
  EXPECT_EQ(d.substr(0, head.size()), head) << d;
  d = d.substr(std::min(head.size(), d.size()));
  // Drop the two closing parens of def and module and the indentation of the body.
  if (d.size() >= 2) d.resize(d.size() - 2);
  std::string out;
  std::istringstream in(d);
  for (std::string line; std::getline(in, line);) out += (out.empty() ? "" : "\n") + line.substr(4);
  return out;
}

} // namespace

TEST(Frontend, VectorAddExampleParses) {
  SourceManager sm;
  std::string path = std::string(WW_SOURCE_DIR) + "/examples/vector_add.py";
  uint32_t id = sm.addFile(path, readFile(path));
  ast::Module m = frontend::parseModule(sm, id);
  ASSERT_GE(m.functions.size(), 1u);
  const ast::FunctionDef& k = *m.functions[0];
  EXPECT_EQ(k.name, "add_kernel");
  EXPECT_TRUE(ast::isJitFunction(k));
  ASSERT_EQ(k.params.size(), 5u);
  EXPECT_EQ(k.params[4].name, "BLOCK");
  EXPECT_EQ(ast::dump(*k.params[4].annotation), "tl.constexpr");
  EXPECT_EQ(ast::dump(*k.body[0]), "(= pid (call tl.program_id (kw axis 0)))");
  EXPECT_EQ(ast::dump(*k.body.back()),
            "(expr (call tl.store (+ out_ptr offsets) (+ x y) (kw mask mask)))");
  bool hasTl = false;
  for (const auto& imp : m.imports)
    for (const auto& a : imp->names) hasTl |= a.module == "warpweave.language" && a.asName == "tl";
  EXPECT_TRUE(hasTl);
}

TEST(Frontend, VectorAddKernelFullDump) {
  std::string src = R"(import warpweave as ww
import warpweave.language as tl


@ww.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x, mask=mask)
)";
  EXPECT_EQ(dumpModule(src), R"d((module
  (import (warpweave as ww))
  (import (warpweave.language as tl))
  (def add_kernel (x_ptr y_ptr out_ptr n (BLOCK : tl.constexpr))
    (decorators ww.jit)
    (= pid (call tl.program_id (kw axis 0)))
    (= offsets (+ (* pid BLOCK) (call tl.arange 0 BLOCK)))
    (= mask (cmp offsets < n))
    (= x (call tl.load (+ x_ptr offsets) (kw mask mask)))
    (expr (call tl.store (+ out_ptr offsets) x (kw mask mask))))))d");
}

TEST(Frontend, ParseExpressionValues) {
  EXPECT_EQ(dumpExpr("1024"), "1024");
  EXPECT_EQ(dumpExpr("tl.float16"), "tl.float16");
  EXPECT_EQ(dumpExpr("1e-6"), "1e-06");
  EXPECT_EQ(dumpExpr("  -float(\"inf\")"), "(- (call float \"inf\"))");
  EXPECT_EQ(dumpExpr("(1, 2)"), "(tuple 1 2)");
  EXPECT_EQ(dumpExpr("True"), "True");
}

TEST(Frontend, OperatorSymbols) {
  EXPECT_STREQ(ast::binOpSymbol(ast::BinOpKind::FloorDiv), "//");
  EXPECT_STREQ(ast::binOpSymbol(ast::BinOpKind::MatMul), "@");
  EXPECT_STREQ(ast::cmpOpSymbol(ast::CmpOpKind::IsNot), "is not");
  EXPECT_STREQ(ast::cmpOpSymbol(ast::CmpOpKind::NotIn), "not in");
}

TEST(Frontend, KernelBodyStatements) {
  EXPECT_EQ(dumpKernelBody("    a = b = 1\n    x, y = f()\n    (p, q) = g()\n"),
            "(= a b 1)\n(= (tuple x y) (call f))\n(= (tuple p q) (call g))");
}
