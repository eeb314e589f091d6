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
#include <set>
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

// ---------------------------------------------------------------------------------------------
// Every kernel in kernels/ specializes with a realistic signature
// ---------------------------------------------------------------------------------------------

namespace {
struct KernelCase {
  const char* file;
  const char* kernel;
  const char* signature;
  int numWarps;
  std::vector<const char*> expect; // IR fragments that must appear
};

std::string readFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

const std::vector<KernelCase>& kernelCases() {
  static const std::vector<KernelCase> cases = {
      {"kernels/vector_add.py", "add_kernel",
       "x_ptr:*fp32:16,y_ptr:*fp32:16,out_ptr:*fp32:16,n:i32,BLOCK=1024", 4, {"= load ", "store "}},
      {"kernels/vector_add.py", "add_kernel_persistent",
       "x_ptr:*fp32:16,y_ptr:*fp32:16,out_ptr:*fp32:16,n:i32,BLOCK=1024", 4, {"  for %", "num_programs"}},
      {"kernels/softmax.py", "softmax_kernel",
       "out_ptr:*fp16:16,in_ptr:*fp16:16,in_row_stride:i32,out_row_stride:i32,n_rows:i32,"
       "n_cols:i32,BLOCK=1024", 4, {"kind = \"max\"", "kind = \"sum\"", "= exp "}},
      {"kernels/softmax.py", "softmax_online_kernel",
       "out_ptr:*fp32:16,in_ptr:*fp32:16,in_row_stride:i32,out_row_stride:i32,n_cols:i32,BLOCK=4096",
       4, {"= select ", "_running_max = for "}},
      {"kernels/layernorm.py", "layernorm_fwd_kernel",
       "x_ptr:*fp16:16,y_ptr:*fp16:16,w_ptr:*fp16:16,b_ptr:*fp16:16,mean_ptr:*fp32:16,"
       "rstd_ptr:*fp32:16,stride:i32,n_cols:i32,eps:fp32,BLOCK=1024", 4, {"= sqrt "}},
      {"kernels/layernorm.py", "layernorm_bwd_dx_kernel",
       "dx_ptr:*fp16:16,dy_ptr:*fp16:16,partial_dw_ptr:*fp32:16,partial_db_ptr:*fp32:16,"
       "x_ptr:*fp16:16,w_ptr:*fp16:16,mean_ptr:*fp32:16,rstd_ptr:*fp32:16,stride:i32,n_rows:i32,"
       "n_cols:i32,ROWS_PER_PROGRAM=32,BLOCK=1024", 4, {" = for "}},
      {"kernels/layernorm.py", "layernorm_bwd_dwdb_kernel",
       "partial_dw_ptr:*fp32:16,partial_db_ptr:*fp32:16,dw_ptr:*fp16:16,db_ptr:*fp16:16,"
       "n_partials:i32,n_cols:i32,BLOCK_P=32,BLOCK_N=128", 4, {"kind = \"sum\""}},
      {"kernels/matmul.py", "matmul_kernel",
       "a_ptr:*fp16:16,b_ptr:*fp16:16,c_ptr:*fp16:16,M:i32,N:i32,K:i32,stride_am:i32,"
       "stride_ak:i32:1,stride_bk:i32,stride_bn:i32:1,stride_cm:i32,stride_cn:i32:1,"
       "BLOCK_M=128,BLOCK_N=128,BLOCK_K=64,GROUP_M=8,ACTIVATION=\"leaky_relu\"", 8,
       {"= dot ", "input_precision = \"ieee\"", "tensor<128x128xfp32>", "= select "}},
      {"kernels/matmul.py", "matmul_kernel",
       "a_ptr:*bf16:16,b_ptr:*bf16:16,c_ptr:*bf16:16,M:i32,N:i32,K:i32,stride_am:i32,"
       "stride_ak:i32,stride_bk:i32,stride_bn:i32,stride_cm:i32,stride_cn:i32,"
       "BLOCK_M=64,BLOCK_N=64,BLOCK_K=32,GROUP_M=4,ACTIVATION=\"relu\"", 4, {"= dot ", "= max "}},
      {"kernels/reduction.py", "row_sum_kernel",
       "x_ptr:*fp32:16,out_ptr:*fp32:16,n_rows:i32,n_cols:i32,stride_row:i32,BLOCK_M=4,"
       "BLOCK_N=1024", 4, {"kind = \"sum\""}},
      {"kernels/reduction.py", "row_max_kernel",
       "x_ptr:*fp32:16,out_ptr:*fp32:16,out_index_ptr:*i32:16,n_rows:i32,n_cols:i32,"
       "stride_row:i32,BLOCK_M=4,BLOCK_N=1024", 4, {"kind = \"max\""}},
      {"kernels/embedding_bag.py", "embedding_bag_kernel",
       "weight_ptr:*fp16:16,indices_ptr:*i64:16,offsets_ptr:*i64:16,sample_weights_ptr:*fp32:16,"
       "out_ptr:*fp16:16,D:i32,stride_w:i32,stride_out:i32,BLOCK_I=8,BLOCK_D=128,"
       "HAS_SAMPLE_WEIGHTS=True,MEAN=True", 4, {"= load "}},
      {"kernels/embedding_bag.py", "embedding_bag_kernel",
       "weight_ptr:*fp16:16,indices_ptr:*i32:16,offsets_ptr:*i32:16,sample_weights_ptr:*fp32:16,"
       "out_ptr:*bf16:16,D:i32,stride_w:i32,stride_out:i32,BLOCK_I=8,BLOCK_D=128,"
       "HAS_SAMPLE_WEIGHTS=False,MEAN=False", 4, {"= load "}},
      {"kernels/attention.py", "attention_fwd_kernel",
       "q_ptr:*fp16:16,k_ptr:*fp16:16,v_ptr:*fp16:16,out_ptr:*fp16:16,lse_ptr:*fp32:16,"
       "sm_scale:fp32,stride_qz:i32,stride_qh:i32,stride_qm:i32,stride_kz:i32,stride_kh:i32,"
       "stride_kn:i32,stride_vz:i32,stride_vh:i32,stride_vn:i32,stride_oz:i32,stride_oh:i32,"
       "stride_om:i32,H:i32,N_CTX:i32,HEAD_DIM=128,BLOCK_M=128,BLOCK_N=64,CAUSAL=True", 8,
       {"= dot ", "= exp2 "}},
      {"kernels/attention.py", "attention_fwd_kernel",
       "q_ptr:*bf16:16,k_ptr:*bf16:16,v_ptr:*bf16:16,out_ptr:*bf16:16,lse_ptr:*fp32:16,"
       "sm_scale:fp32,stride_qz:i32,stride_qh:i32,stride_qm:i32,stride_kz:i32,stride_kh:i32,"
       "stride_kn:i32,stride_vz:i32,stride_vh:i32,stride_vn:i32,stride_oz:i32,stride_oh:i32,"
       "stride_om:i32,H:i32,N_CTX:i32,HEAD_DIM=64,BLOCK_M=128,BLOCK_N=64,CAUSAL=False", 4,
       {"= dot "}},
      {"kernels/hopper/gemm_pipelined.py", "gemm_pipelined_kernel",
       "a_desc:desc<fp16,128x64>,b_desc:desc<fp16,64x128>,c_desc:desc<fp16,128x128>,M:i32,N:i32,"
       "K:i32,BLOCK_M=128,BLOCK_N=128,BLOCK_K=64,GROUP_M=8,NUM_STAGES=4", 4,
       {"local_alloc", "alloc_barriers", "async_desc_load", "async_dot", "barrier_wait"}},
      {"kernels/hopper/gemm_ws.py", "gemm_ws_kernel",
       "a_desc:desc<fp16,128x64>,b_desc:desc<fp16,64x128>,c_desc:desc<fp16,128x128>,M:i32,N:i32,"
       "K:i32,BLOCK_M=256,BLOCK_N=128,BLOCK_K=64,GROUP_M=8,NUM_STAGES=4,NUM_SMS=132", 4,
       {"async_tasks", "async_task {default = 1", "replica = 1", "async_dot"}},
      {"kernels/hopper/attention_ws.py", "attention_ws_kernel",
       "q_desc:desc<fp16,128x128>,k_desc:desc<fp16,128x128>,v_desc:desc<fp16,128x128>,"
       "o_desc:desc<fp16,128x128>,lse_ptr:*fp32:16,sm_scale:fp32,N_CTX:i32:16,HEAD_DIM=128,"
       "BLOCK_M=128,BLOCK_N=128,NUM_STAGES=2", 4,
       {"async_tasks", "named_barrier_wait", "named_barrier_arrive", "async_dot"}},
  };
  return cases;
}
} // namespace

TEST(SpecializeKernels, EveryKernelFileHasACase) {
  std::set<std::string> covered;
  for (const KernelCase& c : kernelCases()) covered.insert(c.file);
  for (const auto& e :
       std::filesystem::recursive_directory_iterator(std::string(WW_SOURCE_DIR) + "/kernels")) {
    if (e.path().extension() != ".py") continue;
    std::string rel = std::filesystem::relative(e.path(), WW_SOURCE_DIR).string();
    EXPECT_TRUE(covered.count(rel)) << rel << " has no specialization case";
  }
}

TEST(SpecializeKernels, AllSpecializeAndVerify) {
  for (const KernelCase& c : kernelCases()) {
    SCOPED_TRACE(std::string(c.file) + ":" + c.kernel + " [" + c.signature + "]");
    std::string src = readFile(std::string(WW_SOURCE_DIR) + "/" + c.file);
    ASSERT_FALSE(src.empty());
    CompileOptions o;
    o.numWarps = c.numWarps;
    Result r = specializeSource(src, c.kernel, c.signature, {}, o);
    ASSERT_EQ(r.error, "");
    for (const char* e : c.expect)
      EXPECT_NE(r.ir.find(e), std::string::npos) << "missing '" << e << "' in\n" << r.ir;
    transforms::runCleanupPipeline(*r.fn); // the lead's passes accept what we produce
  }
}
