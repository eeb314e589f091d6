// codegen::hoistDyingCombines: an fp32 add / max / min that ends both operands' lives moves up
// to just after the last earlier mention of either, within straight-line code; and a kernel
// whose row sum follows the stores of its elements gets the sum's chain among the conversions
// (assembled by ptxas).
#include "codegen/Lowering.h"
#include "warpweave/warpweave.h"

#include <gtest/gtest.h>

#include <string>

namespace ww {
namespace {

std::string hoisted(std::string body) {
  codegen::hoistDyingCombines(body);
  return body;
}

TEST(HoistCombines, ChainFollowsTheElementsItEnds) {
  const std::string in = "\tex2.approx.ftz.f32 %f1, %f0;\n"
                         "\tcvt.rn.f16.f32 %h1, %f1;\n"
                         "\tex2.approx.ftz.f32 %f2, %f0;\n"
                         "\tcvt.rn.f16.f32 %h2, %f2;\n"
                         "\tmov.b32 %r1, {%h1, %h2};\n"
                         "\tst.shared.b32 [%r9], %r1;\n"
                         "\tbar.sync 1, 128;\n"
                         "\tadd.f32 %f3, %f1, %f2;\n"
                         "\tst.global.f32 [%rd1], %f3;\n";
  EXPECT_EQ(hoisted(in), "\tex2.approx.ftz.f32 %f1, %f0;\n"
                         "\tcvt.rn.f16.f32 %h1, %f1;\n"
                         "\tex2.approx.ftz.f32 %f2, %f0;\n"
                         "\tcvt.rn.f16.f32 %h2, %f2;\n"
                         "\tadd.f32 %f3, %f1, %f2;\n"
                         "\tmov.b32 %r1, {%h1, %h2};\n"
                         "\tst.shared.b32 [%r9], %r1;\n"
                         "\tbar.sync 1, 128;\n"
                         "\tst.global.f32 [%rd1], %f3;\n");
}

TEST(HoistCombines, StepsOfAChainMoveOneAfterAnother) {
  const std::string in = "\tmov.f32 %f1, 0f3F800000;\n"
                         "\tmov.f32 %f2, 0f40000000;\n"
                         "\tst.global.f32 [%rd1], %f9;\n"
                         "\tmov.f32 %f3, 0f40400000;\n"
                         "\tst.global.f32 [%rd2], %f9;\n"
                         "\tmax.f32 %f4, %f1, %f2;\n"
                         "\tmax.f32 %f5, %f4, %f3;\n";
  EXPECT_EQ(hoisted(in), "\tmov.f32 %f1, 0f3F800000;\n"
                         "\tmov.f32 %f2, 0f40000000;\n"
                         "\tmax.f32 %f4, %f1, %f2;\n"
                         "\tst.global.f32 [%rd1], %f9;\n"
                         "\tmov.f32 %f3, 0f40400000;\n"
                         "\tmax.f32 %f5, %f4, %f3;\n"
                         "\tst.global.f32 [%rd2], %f9;\n");
}

TEST(HoistCombines, NothingCrossesControlFlowAsmOrBudgetChanges) {
  for (const char* wall :
       {"$L_for_1:\n", "\t@%p1 bra $L_x;\n", "\tsetmaxnreg.inc.sync.aligned.u32 152;\n",
        "\t// end inline asm\n", "\t{\n", "\t}\n", "\t.reg .b64 %x;\n", "\tret;\n",
        "\twgmma.wait_group.sync.aligned 0;\n", "\ttcgen05.wait::ld.sync.aligned;\n"}) {
    const std::string in = std::string("\tmov.f32 %f1, %f8;\n\tmov.f32 %f2, %f8;\n") + wall +
                           "\tst.global.f32 [%rd1], %f9;\n\tadd.f32 %f3, %f1, %f2;\n";
    EXPECT_EQ(hoisted(in), std::string("\tmov.f32 %f1, %f8;\n\tmov.f32 %f2, %f8;\n") + wall +
                               "\tadd.f32 %f3, %f1, %f2;\n\tst.global.f32 [%rd1], %f9;\n")
        << wall;
  }
}

TEST(HoistCombines, StaysAfterTheWaitOfAnAsynchronousLoad) {
  // tcgen05.ld writes %f1 and %f2 only by its wait: the sum may not go between the two.
  const std::string in = "\ttcgen05.ld.sync.aligned.32x32b.x2.b32 {%f1, %f2}, [%r1];\n"
                         "\tmov.b32 %r2, 1;\n"
                         "\ttcgen05.wait::ld.sync.aligned;\n"
                         "\tst.global.f32 [%rd1], %f9;\n"
                         "\tadd.f32 %f3, %f1, %f2;\n";
  EXPECT_EQ(hoisted(in), "\ttcgen05.ld.sync.aligned.32x32b.x2.b32 {%f1, %f2}, [%r1];\n"
                         "\tmov.b32 %r2, 1;\n"
                         "\ttcgen05.wait::ld.sync.aligned;\n"
                         "\tadd.f32 %f3, %f1, %f2;\n"
                         "\tst.global.f32 [%rd1], %f9;\n");
}

TEST(HoistCombines, StaysWhereItDoesNotEndBothLives) {
  const std::string head = "\tmov.f32 %f1, %f8;\n\tmov.f32 %f2, %f8;\n"
                           "\tst.global.f32 [%rd1], %f9;\n";
  for (const char* line : {
           "\tadd.f32 %f3, %f1, %f2;\n\tst.global.f32 [%rd2], %f1;\n", // %f1 read later
           "\tadd.f32 %f3, %f1, %f1;\n",                               // one operand
           "\tadd.f32 %f3, %f1, 0f3F800000;\n",                        // an immediate
           "\t@%p1 add.f32 %f3, %f1, %f2;\n",                          // guarded
           "\tmul.f32 %f3, %f1, %f2;\n",                               // not a combine
           "\tadd.s32 %r3, %r1, %r2;\n",                               // not fp32
       }) {
    const std::string in = head + line;
    EXPECT_EQ(hoisted(in), in) << line;
  }
  // The result's register is used before (a loop-carried register, say): it stays.
  const std::string carried = "\tmov.f32 %f3, %f8;\n" + head + "\tadd.f32 %f3, %f1, %f2;\n";
  EXPECT_EQ(hoisted(carried), carried);
}

TEST(HoistCombines, RowSumAfterStoresRunsAmongTheConversions) {
  // Attention's softmax order: exp2, the fp16 copy stored, then the row sum of the fp32 values.
  const char* src = R"(
import warpweave.language as tl
import warpweave as ww


@ww.jit
def softmax_rows(X, P, L, ROWS: tl.constexpr, COLS: tl.constexpr):
    rows = tl.arange(0, ROWS)
    cols = tl.arange(0, COLS)
    x = tl.load(X + rows[:, None] * COLS + cols[None, :])
    p = tl.math.exp2(x - tl.max(x, 1)[:, None])
    tl.store(P + rows[:, None] * COLS + cols[None, :], p.to(tl.float16))
    tl.store(L + rows, tl.sum(p, 1))
)";
  // On sm_100a the row sum's steps run among the conversions; sm_90a keeps the order as written
  // (Lowering.cpp applies the placement to sm_100a kernels only).
  for (Target t : {Target::SM90a, Target::SM100a}) {
    CompileRequest req;
    req.files.push_back({"rows.py", src});
    req.kernel = "softmax_rows";
    req.signature = parseSignature("X:*fp32:16, P:*fp16:16, L:*fp32:16, ROWS=128, COLS=64");
    req.options.target = t;
    req.options.numWarps = 4;
    req.stage = Stage::Cubin;
    CompiledKernel k = compile(req);
    ASSERT_FALSE(k.cubin.empty());
    const std::string& ptx = k.ptx;
    size_t firstAdd = ptx.find("\tadd.f32 ");
    size_t firstStore = ptx.find("\tst.global.v4.b16");
    if (firstStore == std::string::npos) firstStore = ptx.find("\tst.global");
    ASSERT_NE(firstAdd, std::string::npos);
    ASSERT_NE(firstStore, std::string::npos);
    if (t == Target::SM100a)
      EXPECT_LT(firstAdd, firstStore) << ptx;
    else
      EXPECT_GT(firstAdd, firstStore) << ptx;
  }
}

} // namespace
} // namespace ww
