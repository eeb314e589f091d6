// Codegen and metadata for multi-dimensional clusters (CompileOptions::clusterDims), the grid
// check shared by the launcher and the interpreter, and tl.inline_asm_elementwise's PTX (the
// user's text between the inline asm markers, kept by the dead-instruction elimination).
#include "ir/InlineAsm.h"
#include "ir/Parser.h"
#include "ir/Printer.h"
#include "warpweave/runtime.h"
#include "warpweave/warpweave.h"

#include <gtest/gtest.h>

#include <regex>

namespace ww {
namespace {

const char* kRankSource = "import warpweave as ww\n"
                          "import warpweave.language as tl\n"
                          "from warpweave import tlx\n"
                          "\n"
                          "\n"
                          "@ww.jit\n"
                          "def ranks(out_ptr):\n"
                          "    pid = tl.program_id(0) + 64 * tl.program_id(1)\n"
                          "    tl.store(out_ptr + pid, tlx.cluster_cta_rank())\n";

CompiledKernel compileRanks(std::array<int, 3> dims, int numCtas = 1, Stage stage = Stage::Cubin,
                            Target target = Target::SM90a) {
  CompileRequest req;
  req.files.push_back({"ranks.py", kRankSource});
  req.kernel = "ranks";
  req.signature = parseSignature("out_ptr:*i32");
  req.options.target = target;
  req.options.numCtas = numCtas;
  req.options.clusterDims = dims;
  req.stage = stage;
  return compile(req);
}

std::string errorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

} // namespace

TEST(ClusterNd, HeaderDeclaresTheThreeDimensionalShape) {
  for (auto dims : {std::array<int, 3>{2, 1, 3}, {1, 2, 1}, {2, 2, 2}, {1, 1, 16}}) {
    CompiledKernel k = compileRanks(dims);
    const std::string want = ".explicitcluster\n.reqnctapercluster " + std::to_string(dims[0]) +
                             ", " + std::to_string(dims[1]) + ", " + std::to_string(dims[2]) + "\n";
    EXPECT_NE(k.ptx.find(want), std::string::npos) << k.ptx;
    EXPECT_FALSE(k.cubin.empty()) << k.ptxasLog;
    EXPECT_EQ(k.clusterDims, dims);
    EXPECT_EQ(k.numCtas, dims[0] * dims[1] * dims[2]);
  }
}

TEST(ClusterNd, OneDimensionalShapesAndNumCtasAgree) {
  CompiledKernel a = compileRanks({0, 0, 0}, 4);
  CompiledKernel b = compileRanks({4, 1, 1});
  CompiledKernel c = compileRanks({4, 1, 1}, 4);
  EXPECT_EQ(a.ptx, b.ptx);
  EXPECT_EQ(b.ptx, c.ptx);
  EXPECT_EQ(a.clusterDims, (std::array<int, 3>{4, 1, 1}));
}

TEST(ClusterNd, BadShapesAreLocatedErrors) {
  std::string e = errorOf([] { compileRanks({4, 4, 2}); });
  EXPECT_NE(e.find("ranks.py:7:1"), std::string::npos) << e;
  EXPECT_NE(e.find("ctas_per_cga=(4, 4, 2): a cluster has 1 to 16 CTAs, this one 32"),
            std::string::npos)
      << e;
  e = errorOf([] { compileRanks({2, 2, 1}, 2); });
  EXPECT_NE(e.find("holds 4 CTAs, but num_ctas=2"), std::string::npos) << e;
  e = errorOf([] { compileRanks({2, 0, 1}); });
  EXPECT_NE(e.find("each cluster dimension is 1 to 16"), std::string::npos) << e;
  e = errorOf([] { compileRanks({2, 2, 1}, 1, Stage::Ptx, Target::SM80); });
  EXPECT_NE(e.find("which sm_80 does not have"), std::string::npos) << e;
}

TEST(ClusterNd, TileIrPrintsAndParsesTheShape) {
  CompiledKernel k = compileRanks({2, 1, 3}, 1, Stage::TileIR);
  EXPECT_NE(k.tileIR.find("num_ctas=6 cluster_dims=2x1x3"), std::string::npos) << k.tileIR;
  SourceManager sm;
  std::unique_ptr<ir::Function> fn = ir::parseFunction(sm, sm.addFile("t.tir", k.tileIR));
  EXPECT_EQ(fn->clusterDims, (std::array<int, 3>{2, 1, 3}));
  EXPECT_EQ(fn->numCtas, 6);
  EXPECT_EQ(ir::print(*fn), k.tileIR);
  // 1-D clusters print as before.
  CompiledKernel one = compileRanks({0, 0, 0}, 2, Stage::TileIR);
  EXPECT_EQ(one.tileIR.find("cluster_dims"), std::string::npos) << one.tileIR;
}

TEST(ClusterNd, MetadataCarriesTheShape) {
  CompiledKernel k = compileRanks({1, 2, 1});
  CompiledKernel back = parseKernelMetadata(kernelMetadataJson(k));
  EXPECT_EQ(back.clusterDims, (std::array<int, 3>{1, 2, 1}));
  EXPECT_EQ(back.numCtas, 2);
  // Metadata written before cluster_dims existed: the cluster lies along x.
  CompiledKernel old = parseKernelMetadata(R"({"name": "k", "num_ctas": 4})");
  EXPECT_EQ(old.clusterDims, (std::array<int, 3>{4, 1, 1}));
}

TEST(ClusterNd, GridsMustBeWholeClustersOnEveryAxis) {
  EXPECT_NO_THROW(checkClusterGrid("k", {2, 1, 3}, {4, 5, 9}));
  std::string e = errorOf([] { checkClusterGrid("k", {2, 1, 3}, {4, 5, 8}); });
  EXPECT_EQ(e, "kernel 'k' runs in clusters of 6 CTAs (ctas_per_cga=(2, 1, 3)): grid[2] = 8 "
               "must be a multiple of 3");
  e = errorOf([] { checkClusterGrid("k", {2, 1, 1}, {3, 1, 1}); });
  EXPECT_EQ(e, "kernel 'k' runs in clusters of 2 CTAs (ctas_per_cga): grid[0] = 3 must be a "
               "multiple of 2");
}

TEST(InlineAsm, ConstraintsParse) {
  std::vector<ir::AsmConstraint> c;
  EXPECT_EQ(ir::parseAsmConstraints("=r, =&l,r ,h", c), "");
  ASSERT_EQ(c.size(), 4u);
  EXPECT_TRUE(c[0].output && c[1].output && !c[2].output && !c[3].output);
  EXPECT_EQ(std::string() + c[0].letter + c[1].letter + c[2].letter + c[3].letter, "rlrh");
  EXPECT_NE(ir::parseAsmConstraints("r,=r", c).find("outputs ('=...') come before"),
            std::string::npos);
  EXPECT_NE(ir::parseAsmConstraints("=r,n", c).find("is not one warpweave accepts"),
            std::string::npos);
  EXPECT_EQ(ir::asmElementsPerOperand(ir::DType::I8, false, 4), 4);
  EXPECT_EQ(ir::asmElementsPerOperand(ir::DType::F16, false, 4), 2);
  EXPECT_EQ(ir::asmElementsPerOperand(ir::DType::F32, false, 4), 1);
  EXPECT_EQ(ir::asmOperandBits(ir::DType::I8, false, 2), 16);
}

TEST(InlineAsm, ImpureTextIsKeptAndOperandsSubstituted) {
  CompileRequest req;
  req.files.push_back({"asm.py", "import warpweave as ww\n"
                                 "import warpweave.language as tl\n"
                                 "\n"
                                 "\n"
                                 "@ww.jit\n"
                                 "def poke(x_ptr):\n"
                                 "    v = tl.load(x_ptr + tl.arange(0, 32))\n"
                                 "    tl.inline_asm_elementwise(\n"
                                 "        '.reg .b32 t;\\nadd.u32 t, $1, 1;\\nmov.b32 $0, t;',\n"
                                 "        '=r,r', [v], dtype=tl.int32, is_pure=False, pack=1)\n"});
  req.kernel = "poke";
  req.signature = parseSignature("x_ptr:*i32");
  req.options.numWarps = 1;
  for (Target t : {Target::SM90a, Target::SM80, Target::SM100a}) {
    req.options.target = t;
    CompiledKernel k = compile(req);
    std::smatch m;
    ASSERT_TRUE(std::regex_search(k.ptx, m,
                                  std::regex("// begin inline asm\n\t\\{\n\t\\.reg \\.b32 t;\n\t"
                                             "add\\.u32 t, (%r\\d+), 1;\n\tmov\\.b32 %r\\d+, t;\n"
                                             "\t\\}\n\t// end inline asm")))
        << k.ptx;
    // The input register is the loaded value's, which the elimination kept for the asm.
    EXPECT_NE(k.ptx.find("ld.global.b32 " + m[1].str()), std::string::npos) << k.ptx;
    EXPECT_FALSE(k.cubin.empty()) << k.ptxasLog;
  }
}

} // namespace ww
