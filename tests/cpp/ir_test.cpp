// Tile IR core, printer, diagnostics rendering and signature parsing.
#include "frontend/Diagnostics.h"
#include "ir/Builder.h"
#include "ir/Printer.h"
#include "warpweave/warpweave.h"

#include <gtest/gtest.h>

using namespace ww;
using namespace ww::ir;

TEST(Diagnostics, RendersLocationSourceLineAndCaret) {
  SourceManager sm;
  uint32_t f = sm.addFile("k.py", "def k(x):\n    y = x +* 2\n");
  Diagnostic d{Diagnostic::Severity::Error, {f, 2, 11}, "expected an expression after '+'", {}};
  d.notes.push_back(note({f, 1, 1}, "in kernel 'k'"));
  EXPECT_EQ(formatDiagnostic(sm, d), "k.py:2:11: error: expected an expression after '+'\n"
                                     "      y = x +* 2\n"
                                     "            ^\n"
                                     "k.py:1:1: note: in kernel 'k'\n"
                                     "  def k(x):\n"
                                     "  ^");
}

TEST(Diagnostics, CompileErrorRendersOnce) {
  SourceManager sm;
  uint32_t f = sm.addFile("a.py", "x\n");
  try {
    raiseError({f, 1, 1}, "undefined name 'x'");
    FAIL();
  } catch (CompileError& e) {
    EXPECT_STREQ(e.what(), "undefined name 'x'");
    e.render(sm);
    EXPECT_EQ(std::string(e.what()), "a.py:1:1: error: undefined name 'x'\n  x\n  ^");
  }
}

TEST(Types, Printing) {
  EXPECT_EQ(Type::scalar(DType::I32).str(), "i32");
  EXPECT_EQ(Type::ptr(DType::F16).str(), "ptr<fp16>");
  EXPECT_EQ(Type::tensor(DType::F32, {64, 32}).str(), "tensor<64x32xfp32>");
  EXPECT_EQ(Type::ptrTensor(DType::BF16, {128}).str(), "tensor<128xptr<bf16>>");
  EXPECT_EQ(Type::buffer(DType::F16, {128, 64}, 3).str(), "buffer<3x128x64xfp16, smem>");
  EXPECT_EQ(Type::barrier(2).str(), "barrier<2>");
  EXPECT_EQ(Type::descriptor(DType::F16, {128, 64}, 2).str(), "desc<fp16, 128x64, rank=2>");
  EXPECT_EQ(parseSigDType("bf16"), DType::BF16);
  EXPECT_EQ(parseTlDType("float8e4nv"), DType::F8E4M3);
  EXPECT_FALSE(parseSigDType("fp17").has_value());
}

TEST(Printer, PrintsOpsAttributesAndRegions) {
  Function fn;
  fn.name = "k";
  Value* n = fn.body.addArg(Type::scalar(DType::I32), "n");
  fn.args.push_back({"n", n->type(), 16, false, n});
  Builder b(&fn.body);
  Value* zero = b.i32(0);
  Value* one = b.i32(1);
  Op* loop = b.create(OpCode::For, {zero, n, one, zero}, {Type::scalar(DType::I32)});
  Block* body = loop->addRegion();
  Value* iv = body->addArg(Type::scalar(DType::I32), "i");
  Value* acc = body->addArg(Type::scalar(DType::I32), "acc");
  Builder inner(body);
  Value* sum = inner.binary(OpCode::Add, acc, iv);
  inner.create(OpCode::Yield, {sum}, {});
  b.ret();
  EXPECT_EQ(print(fn), "kernel @k(%0_n: i32 {div=16}) num_warps=4 {\n"
                       "  %1 = constant {value = 0} : i32\n"
                       "  %2 = constant {value = 1} : i32\n"
                       "  %3 = for %1, %0_n, %2, %1 : i32 { ^(%4_i: i32, %5_acc: i32)\n"
                       "    %6 = add %5_acc, %4_i : i32\n"
                       "    yield %6\n"
                       "  }\n"
                       "  return\n"
                       "}\n");
}

TEST(Signature, ParsesRuntimeArgsConstexprsAndHints) {
  auto s = parseSignature("x_ptr:*fp32:16, n:i32:16,m:i64:1, d:desc<fp16,128x64>,BLOCK=1024,"
                          "DT=tl.float16");
  ASSERT_EQ(s.size(), 6u);
  EXPECT_EQ(s[0].name, "x_ptr");
  EXPECT_EQ(s[0].type, "*fp32");
  EXPECT_EQ(s[0].divisibility, 16);
  EXPECT_EQ(s[1].type, "i32");
  EXPECT_EQ(s[1].divisibility, 16);
  EXPECT_TRUE(s[2].equalsOne);
  EXPECT_EQ(s[3].type, "desc<fp16,128x64>");
  EXPECT_TRUE(s[4].isConstexpr);
  EXPECT_EQ(s[4].value, "1024");
  EXPECT_EQ(s[5].value, "tl.float16");
  EXPECT_TRUE(parseSignature("").empty());
}

TEST(Signature, RejectsBadEntriesWithTheEntryNamed) {
  auto expectError = [](const std::string& sig, const std::string& fragment) {
    try {
      parseSignature(sig);
      ADD_FAILURE() << "accepted " << sig;
    } catch (const CompileFailure& e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  };
  expectError("x", "missing ':' or '='");
  expectError("x:*fp32:8", "must be ':16' or ':1'");
  expectError("x:*fp32:1", "integers only");
  expectError("1x:i32", "not a parameter name");
  expectError("a:i32,a:i32", "appears twice");
  expectError("B=", "without a value");
}

TEST(Targets, NamesRoundTrip) {
  for (Target t : {Target::SM80, Target::SM90a, Target::SM100a})
    EXPECT_EQ(parseTarget(targetName(t)), t);
  EXPECT_THROW(parseTarget("sm_75"), std::invalid_argument);
}
