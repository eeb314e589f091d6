// In-kernel tensor descriptors (tl.make_tensor_descriptor) lowered to masked pointer accesses:
// the rewritten Tile IR, run in the interpreter, must match the descriptor semantics (zero fill
// outside the tensor on load, nothing written outside it on store) at partial and negative boxes.
#include "ir/IR.h"
#include "warpweave/warpweave.h"

#include <gtest/gtest.h>

#include <vector>

using namespace ww;

namespace {

const char* kSource = R"(
import warpweave as ww
import warpweave.language as tl

@ww.jit
def shifted_scale(x_ptr, y_ptr, M, N, SHIFT, BM: tl.constexpr, BN: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    src = tl.make_tensor_descriptor(x_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    dst = tl.make_tensor_descriptor(y_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    t = src.load([pid_m * BM - SHIFT, pid_n * BN])
    dst.store([pid_m * BM, pid_n * BN], t * 2.0 + 1.0)
)";

CompiledKernel compileStage(Stage stage) {
  CompileRequest req;
  req.files = {{"shifted_scale.py", kSource}};
  req.kernel = "shifted_scale";
  req.signature = parseSignature("x_ptr:*fp32:16,y_ptr:*fp32:16,M:i32,N:i32,SHIFT:i32,BM=32,BN=16");
  req.stage = stage;
  return compile(req);
}

int countOps(const CompiledKernel& k, ir::OpCode code) {
  int n = 0;
  ir::walk(k.module->functions.front()->body, [&](const ir::Op& op) { n += op.code() == code; });
  return n;
}

std::vector<float> run(const CompiledKernel& k, int M, int N, int shift) {
  std::vector<float> x(static_cast<size_t>(M) * N), y(x.size(), -7.0f);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 97) * 0.5f - 3.0f;
  // The last boxes hang over the edges, so the grid covers more than the tensor.
  int grid[3] = {(M + 31) / 32 + 1, (N + 15) / 16 + 1, 1};
  interpret(k, grid,
            {InterpArg::buffer(x.data(), x.size() * 4), InterpArg::buffer(y.data(), y.size() * 4),
             InterpArg::integer(M), InterpArg::integer(N), InterpArg::integer(shift)});
  return y;
}

} // namespace

TEST(DeviceDescriptors, RewrittenAccessesMatchDescriptorSemantics) {
  CompiledKernel original = compileStage(Stage::TileIR);
  CompiledKernel lowered = compileStage(Stage::Ptx);
  EXPECT_EQ(countOps(original, ir::OpCode::DescLoad), 1);
  EXPECT_EQ(countOps(lowered, ir::OpCode::DescLoad), 0);
  EXPECT_EQ(countOps(lowered, ir::OpCode::DescStore), 0);
  EXPECT_EQ(countOps(lowered, ir::OpCode::MakeDescriptor), 0);
  EXPECT_NE(lowered.ptx.find("ld.global"), std::string::npos);
  for (int shift : {0, 5, -3}) {
    const int M = 70, N = 40;
    std::vector<float> a = run(original, M, N, shift), b = run(lowered, M, N, shift);
    ASSERT_EQ(a, b) << "shift " << shift;
    // Rows shifted in from outside the tensor read as zero: y = 2 * 0 + 1 there.
    for (int r = 0; r < M; ++r)
      for (int c = 0; c < N; ++c) {
        int box = r / 32 * 32, src = box - shift + r % 32;
        float x = src >= 0 && src < M ? static_cast<float>((src * N + c) % 97) * 0.5f - 3.0f : 0;
        ASSERT_EQ(b[r * N + c], 2 * x + 1) << "at " << r << "," << c << " shift " << shift;
      }
  }
}
