// codegen::contractMulAdd: a float multiply whose one use is an add becomes an fma.rn at the add
// where that lengthens no register's life, and a kernel's `x * 1.5 + 1.0` reads as one fma.rn
// with fusion on (Triton's enable_fp_fusion) and as mul.rn / add.rn with it off.
#include "codegen/Lowering.h"
#include "warpweave/warpweave.h"

#include <gtest/gtest.h>

#include <string>

namespace ww {
namespace {

std::string contracted(std::string body) {
  codegen::contractMulAdd(body);
  return body;
}

TEST(ContractMulAdd, AdjacentPairBecomesOneFma) {
  EXPECT_EQ(contracted("\tmul.f32 %f1, %f0, 0f3FC00000;\n"
                       "\t.loc 1 7 40\n"
                       "\tadd.f32 %f2, %f1, 0f3F800000;\n"
                       "\tst.global.f32 [%rd1], %f2;\n"),
            "\t.loc 1 7 40\n"
            "\tfma.rn.f32 %f2, %f0, 0f3FC00000, 0f3F800000;\n"
            "\tst.global.f32 [%rd1], %f2;\n");
  // The product as the add's second operand, and f64.
  EXPECT_EQ(contracted("\tmul.f64 %fd3, %fd1, %fd2;\n\tadd.f64 %fd4, %fd9, %fd3;\n"),
            "\tfma.rn.f64 %fd4, %fd1, %fd2, %fd9;\n");
}

TEST(ContractMulAdd, DistantPairWhoseOperandsLiveOn) {
  // Other work between them, but the factors are read after the add anyway.
  EXPECT_EQ(contracted("\tmul.f32 %f3, %f1, %f2;\n"
                       "\tld.shared.f32 %f4, [%r1];\n"
                       "\tadd.f32 %f5, %f3, %f4;\n"
                       "\tst.global.v2.f32 [%rd1], {%f1, %f2};\n"
                       "\tst.global.f32 [%rd2], %f5;\n"),
            "\tld.shared.f32 %f4, [%r1];\n"
            "\tfma.rn.f32 %f5, %f1, %f2, %f4;\n"
            "\tst.global.v2.f32 [%rd1], {%f1, %f2};\n"
            "\tst.global.f32 [%rd2], %f5;\n");
}

TEST(ContractMulAdd, LeftToPtxasWhereContractingWouldBeWrongOrCostly) {
  for (const char* lines : {
           // rounded (fusion off), guarded, or not a float add
           "\tmul.rn.f32 %f3, %f1, %f2;\n\tadd.rn.f32 %f4, %f3, %f9;\n",
           "\t@%p1 mul.f32 %f3, %f1, %f2;\n\tadd.f32 %f4, %f3, %f9;\n",
           "\tmul.f32 %f3, %f1, %f2;\n\t@%p1 add.f32 %f4, %f3, %f9;\n",
           "\tmul.f32 %f3, %f1, %f2;\n\tsub.f32 %f4, %f3, %f9;\n",
           "\tmul.f32 %f3, %f1, %f2;\n\tadd.rn.f32 %f4, %f3, %f9;\n",
           "\tmul.lo.s32 %r3, %r1, %r2;\n\tadd.s32 %r4, %r3, %r9;\n",
           "\tmul.f32 %f3, %f1, %f2;\n\tadd.f64 %fd4, %fd3, %fd9;\n",
           // the product squared, or read twice
           "\tmul.f32 %f3, %f1, %f2;\n\tadd.f32 %f4, %f3, %f3;\n",
           "\tmul.f32 %f3, %f1, %f2;\n\tadd.f32 %f4, %f3, %f9;\n\tst.global.f32 [%rd1], %f3;\n",
           // a factor rewritten in between (a loop-carried register), also by a vector load
           "\tmul.f32 %f3, %f1, %f2;\n\tmov.f32 %f1, %f8;\n\tadd.f32 %f4, %f3, %f9;\n"
           "\tst.global.f32 [%rd1], %f1;\n",
           "\tmul.f32 %f3, %f1, %f2;\n\tld.shared.v2.f32 {%f1, %f7}, [%r8];\n"
           "\tadd.f32 %f4, %f3, %f9;\n\tst.global.f32 [%rd1], %f1;\n",
           // control flow between them
           "\tmul.f32 %f3, %f1, %f2;\n$L_x:\n\tadd.f32 %f4, %f3, %f9;\n",
           "\tmul.f32 %f3, %f1, %f2;\n\t@%p1 bra $L_x;\n\tadd.f32 %f4, %f3, %f9;\n",
           // a kernel's own inline asm
           "\t// begin inline asm\n\tmul.f32 %f3, %f1, %f2;\n\tadd.f32 %f4, %f3, %f9;\n"
           "\t// end inline asm\n",
           // a factor's life would grow past other work (it ends at the multiply)
           "\tmul.f32 %f3, %f1, %f2;\n\tld.shared.f32 %f9, [%r1];\n\tadd.f32 %f4, %f3, %f9;\n",
       }) {
    EXPECT_EQ(contracted(lines), lines) << lines;
  }
}

CompiledKernel compileMulAdd(bool fpFusion) {
  const char* src = R"(
import warpweave.language as tl
import warpweave as ww


@ww.jit
def mul_add(data):
    ptrs = data + tl.arange(0, 128)
    tl.store(ptrs, tl.load(ptrs) * 1.5 + 1.0)
)";
  CompileRequest req;
  req.files.push_back({"mul_add.py", src});
  req.kernel = "mul_add";
  req.signature = parseSignature("data:*fp32:16");
  req.options.target = Target::SM90a;
  req.options.numWarps = 4;
  req.options.fpFusion = fpFusion;
  req.stage = Stage::Ptx;
  return compile(req);
}

TEST(ContractMulAdd, FusionDecidesWhatThePtxSays) {
  std::string fused = compileMulAdd(true).ptx;
  EXPECT_NE(fused.find("fma.rn.f32"), std::string::npos) << fused;
  EXPECT_EQ(fused.find("mul.f32"), std::string::npos) << fused;
  std::string separate = compileMulAdd(false).ptx;
  EXPECT_EQ(separate.find("fma."), std::string::npos) << separate;
  EXPECT_NE(separate.find("mul.rn.f32"), std::string::npos) << separate;
  EXPECT_NE(separate.find("add.rn.f32"), std::string::npos) << separate;
}

} // namespace
} // namespace ww
