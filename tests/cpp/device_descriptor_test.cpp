// In-kernel tensor descriptors (tl.make_tensor_descriptor): on sm_80, and on sm_90a where the
// descriptor cannot be a tensor map (a run-time innermost stride), lowered to masked pointer
// accesses; on sm_90a otherwise kept as TMA copies through a tensor map the kernel writes. The
// Tile IR compiled for each, run in the interpreter, must match the descriptor semantics (zero
// fill outside the tensor on load, nothing written outside it on store) at partial and negative
// boxes.
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

// The same kernel with the inner stride a run-time argument S (the tensor has N columns).
const char* kStridedSource = R"(
import warpweave as ww
import warpweave.language as tl

@ww.jit
def shifted_scale(x_ptr, y_ptr, M, N, SHIFT, S, BM: tl.constexpr, BN: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    src = tl.make_tensor_descriptor(x_ptr, shape=[M, N], strides=[N * S, S], block_shape=[BM, BN])
    dst = tl.make_tensor_descriptor(y_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    t = src.load([pid_m * BM - SHIFT, pid_n * BN])
    dst.store([pid_m * BM, pid_n * BN], t * 2.0 + 1.0)
)";

CompiledKernel compileStage(Stage stage, Target target = Target::SM80, bool strided = false) {
  CompileRequest req;
  req.files = {{"shifted_scale.py", strided ? kStridedSource : kSource}};
  req.kernel = "shifted_scale";
  req.signature =
      parseSignature(std::string("x_ptr:*fp32:16,y_ptr:*fp32:16,M:i32,N:i32,SHIFT:i32,") +
                     (strided ? "S:i32," : "") + "BM=32,BN=16");
  req.stage = stage;
  req.options.target = target;
  return compile(req);
}

int count(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

int countOps(const CompiledKernel& k, ir::OpCode code) {
  int n = 0;
  ir::walk(k.module->functions.front()->body, [&](const ir::Op& op) { n += op.code() == code; });
  return n;
}

std::vector<float> run(const CompiledKernel& k, int M, int N, int shift, bool strided = false) {
  std::vector<float> x(static_cast<size_t>(M) * N), y(x.size(), -7.0f);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 97) * 0.5f - 3.0f;
  // The last boxes hang over the edges, so the grid covers more than the tensor.
  int grid[3] = {(M + 31) / 32 + 1, (N + 15) / 16 + 1, 1};
  std::vector<InterpArg> args = {InterpArg::buffer(x.data(), x.size() * 4),
                                 InterpArg::buffer(y.data(), y.size() * 4), InterpArg::integer(M),
                                 InterpArg::integer(N), InterpArg::integer(shift)};
  if (strided) args.push_back(InterpArg::integer(1));
  interpret(k, grid, args);
  return y;
}

/// y as the kernel must leave it: rows shifted in from outside the tensor read as zero, so
/// y = 2 * 0 + 1 there.
void expectShiftedScale(const std::vector<float>& y, int M, int N, int shift) {
  for (int r = 0; r < M; ++r)
    for (int c = 0; c < N; ++c) {
      int box = r / 32 * 32, src = box - shift + r % 32;
      float x = src >= 0 && src < M ? static_cast<float>((src * N + c) % 97) * 0.5f - 3.0f : 0;
      ASSERT_EQ(y[r * N + c], 2 * x + 1) << "at " << r << "," << c << " shift " << shift;
    }
}

} // namespace

TEST(DeviceDescriptors, RewrittenAccessesMatchDescriptorSemantics) {
  // sm_80 has no TMA: every access becomes pointer loads and stores.
  CompiledKernel original = compileStage(Stage::TileIR);
  CompiledKernel lowered = compileStage(Stage::Ptx);
  EXPECT_EQ(countOps(original, ir::OpCode::DescLoad), 1);
  EXPECT_EQ(countOps(lowered, ir::OpCode::DescLoad), 0);
  EXPECT_EQ(countOps(lowered, ir::OpCode::DescStore), 0);
  EXPECT_EQ(countOps(lowered, ir::OpCode::MakeDescriptor), 0);
  EXPECT_NE(lowered.ptx.find("ld.global"), std::string::npos);
  EXPECT_EQ(lowered.ptx.find("tensormap"), std::string::npos);
  EXPECT_EQ(lowered.globalScratchBytes, 0);
  for (int shift : {0, 5, -3}) {
    const int M = 70, N = 40;
    std::vector<float> a = run(original, M, N, shift), b = run(lowered, M, N, shift);
    ASSERT_EQ(a, b) << "shift " << shift;
    expectShiftedScale(b, M, N, shift);
  }
}

TEST(DeviceDescriptors, TensorMapsOnHopper) {
  // sm_90a: both descriptors stay (tensor maps the kernel writes), their accesses TMA copies.
  CompiledKernel kept = compileStage(Stage::Ptx, Target::SM90a);
  EXPECT_EQ(countOps(kept, ir::OpCode::MakeDescriptor), 2);
  EXPECT_EQ(countOps(kept, ir::OpCode::DescLoad), 1);
  EXPECT_EQ(countOps(kept, ir::OpCode::DescStore), 1);
  EXPECT_EQ(countOps(kept, ir::OpCode::Load), 0);
  const std::string& ptx = kept.ptx;
  EXPECT_EQ(count(ptx, "tensormap.replace.tile.global_address"), 2) << ptx;
  EXPECT_EQ(count(ptx, "fence.proxy.tensormap::generic.release.gpu"), 2);
  EXPECT_EQ(count(ptx, "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier"), 1);
  EXPECT_EQ(count(ptx, "cp.async.bulk.tensor.2d.global.shared::cta"), 1);
  EXPECT_EQ(ptx.find("ld.global"), std::string::npos);
  EXPECT_EQ(kept.globalScratchBytes, 2 * 128);
  ASSERT_FALSE(kept.params.empty());
  EXPECT_EQ(kept.params.back().name, kGlobalScratchParam);
  // The Tile IR it keeps runs in the interpreter with the descriptors' semantics.
  for (int shift : {0, 5, -3}) expectShiftedScale(run(kept, 70, 40, shift), 70, 40, shift);
}

TEST(DeviceDescriptors, RunTimeInnerStrideIsPointerAccesses) {
  // A run-time innermost stride cannot be checked at compile time: the source's loads become
  // pointer loads; the destination (stride 1) still stores through its tensor map.
  CompiledKernel k = compileStage(Stage::Ptx, Target::SM90a, /*strided=*/true);
  EXPECT_EQ(countOps(k, ir::OpCode::MakeDescriptor), 1);
  EXPECT_EQ(countOps(k, ir::OpCode::DescLoad), 0);
  EXPECT_EQ(countOps(k, ir::OpCode::DescStore), 1);
  EXPECT_NE(k.ptx.find("ld.global"), std::string::npos);
  EXPECT_EQ(count(k.ptx, "tensormap.replace.tile.global_address"), 1);
  EXPECT_EQ(k.globalScratchBytes, 128);
  for (int shift : {0, 5, -3}) expectShiftedScale(run(k, 70, 40, shift, true), 70, 40, shift);
}
