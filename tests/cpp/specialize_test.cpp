// Tests of the specializer: real kernel source through the parser and the specializer, checked
// by the printed Tile IR (key lines, not whole dumps), the Tile IR verifier, and the rendered text
// of user errors.
#include "frontend/Parser.h"
#include "ir/Printer.h"
#include "specialize/Specializer.h"
#include "transforms/Passes.h"
#include "warpweave/warpweave.h"

#include <gtest/gtest.h>

#include <cmath>
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
      {"python/warpweave/ops/kernels/vector_add.py",
       "add_kernel",
       "x_ptr:*fp32:16,y_ptr:*fp32:16,out_ptr:*fp32:16,n:i32,BLOCK=1024",
       4,
       {"= load ", "store "}},
      {"python/warpweave/ops/kernels/vector_add.py",
       "add_kernel_persistent",
       "x_ptr:*fp32:16,y_ptr:*fp32:16,out_ptr:*fp32:16,n:i32,BLOCK=1024",
       4,
       {"  for %", "num_programs"}},
      {"python/warpweave/ops/kernels/softmax.py",
       "softmax_kernel",
       "out_ptr:*fp16:16,in_ptr:*fp16:16,in_row_stride:i32,out_row_stride:i32,n_rows:i32,"
       "n_cols:i32,BLOCK=1024",
       4,
       {"kind = \"max\"", "kind = \"sum\"", "= exp "}},
      {"python/warpweave/ops/kernels/softmax.py",
       "softmax_online_kernel",
       "out_ptr:*fp32:16,in_ptr:*fp32:16,in_row_stride:i32,out_row_stride:i32,n_cols:i32,BLOCK="
       "4096",
       4,
       {"= select ", "_running_max = for "}},
      {"python/warpweave/ops/kernels/layernorm.py",
       "layernorm_fwd_kernel",
       "x_ptr:*fp16:16,y_ptr:*fp16:16,w_ptr:*fp16:16,b_ptr:*fp16:16,mean_ptr:*fp32:16,"
       "rstd_ptr:*fp32:16,stride:i32,n_cols:i32,eps:fp32,BLOCK=1024",
       4,
       {"= sqrt "}},
      {"python/warpweave/ops/kernels/layernorm.py",
       "layernorm_bwd_dx_kernel",
       "dx_ptr:*fp16:16,dy_ptr:*fp16:16,partial_dw_ptr:*fp32:16,partial_db_ptr:*fp32:16,"
       "x_ptr:*fp16:16,w_ptr:*fp16:16,mean_ptr:*fp32:16,rstd_ptr:*fp32:16,stride:i32,n_rows:i32,"
       "n_cols:i32,rows_per_program:i32,BLOCK=1024",
       4,
       {" = for "}},
      {"python/warpweave/ops/kernels/layernorm.py",
       "layernorm_bwd_dwdb_kernel",
       "partial_dw_ptr:*fp32:16,partial_db_ptr:*fp32:16,dw_ptr:*fp16:16,db_ptr:*fp16:16,"
       "n_partials:i32,n_cols:i32,BLOCK_P=32,BLOCK_N=128",
       4,
       {"kind = \"sum\""}},
      {"python/warpweave/ops/kernels/matmul.py",
       "matmul_kernel",
       "a_ptr:*fp16:16,b_ptr:*fp16:16,c_ptr:*fp16:16,M:i32,N:i32,K:i32,stride_am:i32,"
       "stride_ak:i32:1,stride_bk:i32,stride_bn:i32:1,stride_cm:i32,stride_cn:i32:1,"
       "BLOCK_M=128,BLOCK_N=128,BLOCK_K=64,GROUP_M=8,ACTIVATION=\"leaky_relu\"",
       8,
       {"= dot ", "input_precision = \"ieee\"", "tensor<128x128xfp32>", "= select "}},
      {"python/warpweave/ops/kernels/matmul.py",
       "matmul_kernel",
       "a_ptr:*bf16:16,b_ptr:*bf16:16,c_ptr:*bf16:16,M:i32,N:i32,K:i32,stride_am:i32,"
       "stride_ak:i32,stride_bk:i32,stride_bn:i32,stride_cm:i32,stride_cn:i32,"
       "BLOCK_M=64,BLOCK_N=64,BLOCK_K=32,GROUP_M=4,ACTIVATION=\"relu\"",
       4,
       {"= dot ", "= max "}},
      {"python/warpweave/ops/kernels/reduction.py",
       "row_sum_kernel",
       "x_ptr:*fp32:16,out_ptr:*fp32:16,n_rows:i32,n_cols:i32,stride_row:i32,BLOCK_M=4,"
       "BLOCK_N=1024",
       4,
       {"kind = \"sum\""}},
      {"python/warpweave/ops/kernels/reduction.py",
       "row_max_kernel",
       "x_ptr:*fp32:16,out_ptr:*fp32:16,out_index_ptr:*i32:16,n_rows:i32,n_cols:i32,"
       "stride_row:i32,BLOCK_M=4,BLOCK_N=1024",
       4,
       {"kind = \"max\""}},
      {"python/warpweave/ops/kernels/embedding_bag.py",
       "embedding_bag_kernel",
       "weight_ptr:*fp16:16,indices_ptr:*i64:16,offsets_ptr:*i64:16,sample_weights_ptr:*fp32:16,"
       "out_ptr:*fp16:16,D:i32,stride_w:i32,stride_out:i32,BLOCK_I=8,BLOCK_D=128,"
       "HAS_SAMPLE_WEIGHTS=True,MEAN=True",
       4,
       {"= load "}},
      {"python/warpweave/ops/kernels/embedding_bag.py",
       "embedding_bag_kernel",
       "weight_ptr:*fp16:16,indices_ptr:*i32:16,offsets_ptr:*i32:16,sample_weights_ptr:*fp32:16,"
       "out_ptr:*bf16:16,D:i32,stride_w:i32,stride_out:i32,BLOCK_I=8,BLOCK_D=128,"
       "HAS_SAMPLE_WEIGHTS=False,MEAN=False",
       4,
       {"= load "}},
      {"python/warpweave/ops/kernels/attention.py",
       "attention_fwd_kernel",
       "q_ptr:*fp16:16,k_ptr:*fp16:16,v_ptr:*fp16:16,out_ptr:*fp16:16,lse_ptr:*fp32:16,"
       "sm_scale:fp32,stride_qz:i32,stride_qh:i32,stride_qm:i32,stride_kz:i32,stride_kh:i32,"
       "stride_kn:i32,stride_vz:i32,stride_vh:i32,stride_vn:i32,stride_oz:i32,stride_oh:i32,"
       "stride_om:i32,H:i32,N_CTX:i32,HEAD_DIM=128,BLOCK_M=128,BLOCK_N=64,CAUSAL=True",
       8,
       {"= dot ", "= exp2 "}},
      {"python/warpweave/ops/kernels/attention.py",
       "attention_fwd_kernel",
       "q_ptr:*bf16:16,k_ptr:*bf16:16,v_ptr:*bf16:16,out_ptr:*bf16:16,lse_ptr:*fp32:16,"
       "sm_scale:fp32,stride_qz:i32,stride_qh:i32,stride_qm:i32,stride_kz:i32,stride_kh:i32,"
       "stride_kn:i32,stride_vz:i32,stride_vh:i32,stride_vn:i32,stride_oz:i32,stride_oh:i32,"
       "stride_om:i32,H:i32,N_CTX:i32,HEAD_DIM=64,BLOCK_M=128,BLOCK_N=64,CAUSAL=False",
       4,
       {"= dot "}},
      {"python/warpweave/ops/kernels/attention_bwd.py",
       "attention_bwd_dkdv_kernel",
       "q_ptr:*fp16:16,k_ptr:*fp16:16,v_ptr:*fp16:16,do_ptr:*fp16:16,lse_ptr:*fp32:16,"
       "delta_ptr:*fp32:16,dk_ptr:*fp16:16,dv_ptr:*fp16:16,sm_scale:fp32,N_CTX:i32,"
       "HEAD_DIM=64,BLOCK_M=64,BLOCK_N=64,CAUSAL=True",
       4,
       {"= dot ", "= exp2 "}},
      {"python/warpweave/ops/kernels/attention_bwd.py",
       "attention_bwd_dq_kernel",
       "q_ptr:*bf16:16,k_ptr:*bf16:16,v_ptr:*bf16:16,do_ptr:*bf16:16,lse_ptr:*fp32:16,"
       "delta_ptr:*fp32:16,dq_ptr:*bf16:16,sm_scale:fp32,N_CTX:i32,"
       "HEAD_DIM=128,BLOCK_M=64,BLOCK_N=64,CAUSAL=False",
       8,
       {"= dot "}},
      {"python/warpweave/ops/kernels/attention_varlen.py",
       "attention_varlen_fwd_kernel",
       "q_ptr:*fp16:16,k_ptr:*fp16:16,v_ptr:*fp16:16,out_ptr:*fp16:16,lse_ptr:*fp32:16,"
       "cu_seqlens_q:*i32:16,cu_seqlens_k:*i32:16,sm_scale:fp32,stride_qt:i32,stride_qh:i32,"
       "stride_kt:i32,stride_kh:i32,stride_vt:i32,stride_vh:i32,stride_ot:i32,stride_oh:i32,"
       "H:i32,GROUP:i32,total_q:i32,HEAD_DIM=128,BLOCK_M=128,BLOCK_N=64,CAUSAL=True",
       8,
       {"= dot ", "= exp2 "}},
      {"python/warpweave/ops/kernels/scaled_mm.py",
       "scaled_mm_kernel",
       "a_ptr:*fp8e4nv:16,b_ptr:*fp8e4nv:16,c_ptr:*bf16:16,scale_a_ptr:*fp32:16,"
       "scale_b_ptr:*fp32:16,bias_ptr:*bf16:16,M:i32,N:i32,K:i32:16,stride_am:i32:16,"
       "stride_ak:i32:1,stride_bk:i32:1,stride_bn:i32:16,stride_cm:i32:16,stride_cn:i32:1,"
       "BLOCK_M=128,BLOCK_N=256,BLOCK_K=128,GROUP_M=8,ROWWISE_A=True,ROWWISE_B=True,"
       "HAS_BIAS=True",
       8,
       {"= dot "}},
      {"python/warpweave/ops/kernels/scaled_mm.py",
       "scaled_mm_tma_kernel",
       "a_desc:desc<fp8e5,128x128>,bt_desc:desc<fp8e4nv,256x128>,c_ptr:*fp16:16,"
       "scale_a_ptr:*fp32:16,scale_b_ptr:*fp32:16,bias_ptr:*fp16:16,M:i32,N:i32,K:i32:16,"
       "stride_cm:i32:16,stride_cn:i32:1,BLOCK_M=128,BLOCK_N=256,BLOCK_K=128,GROUP_M=8,"
       "ROWWISE_A=False,ROWWISE_B=False,HAS_BIAS=False",
       8,
       {"= desc_load ", "= dot "}},
      {"python/warpweave/ops/kernels/grouped_mm.py",
       "grouped_mm_kernel",
       "a_ptr:*bf16:16,b_ptr:*bf16:16,c_ptr:*bf16:16,offs_ptr:*i32:16,G:i32,M_total:i32,N:i32:16,"
       "K:i32:16,stride_am:i32:16,stride_ak:i32:1,stride_bg:i32:16,stride_bk:i32:16,"
       "stride_bn:i32:1,stride_cm:i32:16,stride_cn:i32:1,BLOCK_M=128,BLOCK_N=256,BLOCK_K=32,"
       "BLOCK_G=16",
       8,
       {"= dot "}},
      {"python/warpweave/ops/kernels/grouped_mm.py",
       "grouped_mm_ragged_k_kernel",
       "a_ptr:*fp16:16,b_ptr:*fp16:16,c_ptr:*fp32:16,offs_ptr:*i32:16,M:i32,N:i32,K_total:i32,"
       "stride_am:i32:1,stride_ak:i32:16,stride_bk:i32:16,stride_bn:i32:1,stride_cg:i32:16,"
       "stride_cm:i32:16,stride_cn:i32:1,BLOCK_M=128,BLOCK_N=256,BLOCK_K=32",
       8,
       {"= dot "}},
      {"python/warpweave/ops/kernels/hopper/gemm_pipelined.py",
       "gemm_pipelined_kernel",
       "a_desc:desc<fp16,128x64>,b_desc:desc<fp16,64x128>,c_desc:desc<fp16,128x128>,M:i32,N:i32,"
       "K:i32,BLOCK_M=128,BLOCK_N=128,BLOCK_K=64,GROUP_M=8,NUM_STAGES=4",
       4,
       {"local_alloc", "alloc_barriers", "async_desc_load", "async_dot", "barrier_wait"}},
      {"python/warpweave/ops/kernels/hopper/gemm_ws.py",
       "gemm_ws_kernel",
       "a_desc:desc<fp16,128x64>,b_desc:desc<fp16,64x128>,c_desc:desc<fp16,128x128>,M:i32,N:i32,"
       "K:i32,BLOCK_M=256,BLOCK_N=128,BLOCK_K=64,GROUP_M=8,NUM_STAGES=4,NUM_SMS=132",
       4,
       {"async_tasks", "async_task {default = 1", "replica = 1", "async_dot"}},
      {"python/warpweave/ops/kernels/hopper/scaled_mm_ws.py",
       "scaled_mm_ws_kernel",
       "a_desc:desc<fp8e4nv,64x128>,bt_desc:desc<fp8e5,256x128>,c_desc:desc<bf16,64x32>,"
       "scale_a_ptr:*fp32:16,scale_b_ptr:*fp32:16,bias_ptr:*bf16:16,M:i32,N:i32,K:i32,"
       "BLOCK_M=128,BLOCK_N=256,BLOCK_K=128,GROUP_M=16,NUM_STAGES=4,EPI_SUBTILE=8,NUM_SMS=132,"
       "ROWWISE_A=True,ROWWISE_B=True,HAS_BIAS=True",
       4,
       {"async_tasks", "replica = 1", "local_trans", "async_dot", "async_desc_store"}},
      {"python/warpweave/ops/kernels/hopper/grouped_mm_ws.py",
       "grouped_mm_ws_kernel",
       "a_desc:desc<bf16,64x64>,b_desc:desc<bf16,64x256>,c_desc:desc<bf16,64x64>,"
       "c_ptr:*bf16:16,offs_ptr:*i32:16,G:i32,M_total:i32,N:i32:16,K:i32:16,BLOCK_M=128,"
       "BLOCK_N=256,BLOCK_K=64,GROUP_M=16,NUM_STAGES=4,NUM_SMS=132,EPI_SUBTILE=4",
       4,
       {"async_tasks", "async_task {default = 1", "replica = 1", "async_dot", "while"}},
      {"python/warpweave/ops/kernels/hopper/gemm_ws_pingpong.py",
       "gemm_ws_pingpong_kernel",
       "a_desc:desc<fp16,128x64>,b_desc:desc<fp16,64x128>,c_desc:desc<fp16,128x128>,M:i32,N:i32,"
       "K:i32,BLOCK_M=128,BLOCK_N=128,BLOCK_K=64,GROUP_M=8,NUM_STAGES=4,NUM_SMS=132",
       4,
       {"async_tasks", "replica = 1", "named_barrier_wait", "async_dot"}},
      {"python/warpweave/ops/kernels/hopper/softmax_tma.py",
       "softmax_tma_kernel",
       "in_desc:desc<fp16,64x64>,out_desc:desc<fp16,64x64>,out_ptr:*fp16:16,n_rows:i32,"
       "TILE_R=64,TILE_C=64,NUM_STAGES=2,TMA_STORE=True",
       4,
       {"alloc_barriers", "async_desc_load", "barrier_wait", "async_desc_store", "exp"}},
      {"python/warpweave/ops/kernels/hopper/layernorm_tma.py",
       "layernorm_fwd_tma_kernel",
       "x_desc:desc<fp16,64x64>,y_desc:desc<fp16,64x64>,y_ptr:*fp16:16,w_ptr:*fp16:16,"
       "b_ptr:*fp16:16,mean_ptr:*fp32:16,rstd_ptr:*fp32:16,n_rows:i32,eps:fp32,TILE_R=64,"
       "TILE_C=64,NUM_STAGES=2",
       4,
       {"async_desc_load", "barrier_wait", "= sqrt", "= reduce"}},
      {"python/warpweave/ops/kernels/hopper/layernorm_tma.py",
       "layernorm_bwd_tma_kernel",
       "x_desc:desc<fp16,64x64>,dy_desc:desc<fp16,64x64>,dx_desc:desc<fp16,64x64>,"
       "dx_ptr:*fp16:16,partial_dw_ptr:*fp32:16,partial_db_ptr:*fp32:16,w_ptr:*fp16:16,"
       "mean_ptr:*fp32:16,rstd_ptr:*fp32:16,n_rows:i32,TILE_R=64,"
       "TILE_C=64,NUM_STAGES=2,"
       "TMA_STORE=True",
       8,
       {"async_desc_load", "async_desc_store", "reduce"}},
      {"python/warpweave/ops/kernels/hopper/layernorm_tma.py",
       "layernorm_bwd_tma_kernel",
       "x_desc:desc<fp16,128x64>,dy_desc:desc<fp16,128x64>,dx_desc:desc<fp16,128x64>,"
       "dx_ptr:*fp16:16,partial_dw_ptr:*fp32:16,partial_db_ptr:*fp32:16,w_ptr:*fp16:16,"
       "mean_ptr:*fp32:16,rstd_ptr:*fp32:16,n_rows:i32,TILE_R=128,"
       "TILE_C=64,NUM_STAGES=3,SPLIT=2,PEERS=2",
       8,
       {"cluster_cta_rank", "async_remote_shmem_store", "async_desc_load"}},
      {"python/warpweave/ops/kernels/hopper/attention_ws.py",
       "attention_ws_kernel",
       "q_desc:desc<fp16,128x128>,k_desc:desc<fp16,128x128>,v_desc:desc<fp16,128x128>,"
       "o_desc:desc<fp16,128x128>,lse_ptr:*fp32:16,sm_scale:fp32,N_CTX:i32:16,HEAD_DIM=128,"
       "BLOCK_M=128,BLOCK_N=128,NUM_STAGES=2",
       4,
       {"async_tasks", "named_barrier_wait", "named_barrier_arrive", "async_dot"}},
      {"python/warpweave/ops/kernels/hopper/attention_bwd_ws.py",
       "attention_bwd_ws_kernel",
       "q_desc:desc<fp16,64x128>,k_desc:desc<fp16,64x128>,v_desc:desc<fp16,64x128>,"
       "do_desc:desc<fp16,64x128>,dq_desc:desc<fp32,64x64>,dk_desc:desc<fp16,64x128>,"
       "dv_desc:desc<fp16,64x128>,lse_ptr:*fp32:16,delta_ptr:*fp32:16,sm_scale:fp32,"
       "N_CTX:i32:16,HEAD_DIM=128,BLOCK_M=64,BLOCK_N=128,NUM_STAGES=2,CAUSAL=True",
       4,
       {"async_tasks", "named_barrier_wait", "async_dot", "async_desc_store"}},
      {"python/warpweave/ops/kernels/hopper/rows_cluster.py",
       "softmax_cluster_kernel",
       "out_ptr:*fp16:16,in_ptr:*fp16:16,scratch_ptr:*fp32:16,in_row_stride:i32,"
       "out_row_stride:i32,n_rows:i32,rows_per_cluster:i32,n_cols:i32,slice_cols:i32:16,"
       "BLOCK=2048,C=2,PEERS=2",
       8,
       {"cluster_cta_rank", "cluster_barrier", "exp"}},
      {"python/warpweave/ops/kernels/hopper/rows_smem.py",
       "softmax_smem_kernel",
       "out_ptr:*fp16:16,in_ptr:*fp16:16,scratch_ptr:*fp32:16,in_row_stride:i32:16,"
       "out_row_stride:i32:16,n_rows:i32,n_cols:i32:16,slice_cols:i32:16,BLOCK=4096,K=13,"
       "NUM_STAGES=2,C=2,PEERS=2",
       8,
       {"cluster_cta_rank", "async_load", "exp"}},
      {"python/warpweave/ops/kernels/blackwell/gemm_ws.py",
       "gemm_ws_kernel",
       "a_desc:desc<fp16,128x64>,b_desc:desc<fp16,64x256>,c_desc:desc<fp16,128x64>,M:i32,N:i32,"
       "K:i32,BLOCK_M=128,BLOCK_N=256,BLOCK_K=64,GROUP_M=8,NUM_STAGES=4",
       4,
       {"async_tasks", "tcgen05_mma", "tcgen05_commit", "clc_try_cancel"}},
      {"python/warpweave/ops/kernels/blackwell/scaled_mm_mx.py",
       "scaled_mm_mx_kernel",
       "a_desc:desc<fp8e4nv,128x128>,bt_desc:desc<fp8e4nv,128x128>,as_desc:desc<u8,1x1x1x2x256>,"
       "bs_desc:desc<u8,1x1x1x2x256>,c_desc:desc<bf16,128x32>,M:i32,N:i32,K:i32,BLOCK_M=128,"
       "BLOCK_N=128,BLOCK_K=128,GROUP_M=8,NUM_STAGES=6",
       4,
       {"async_tasks", "has_scales = 1", "tcgen05_commit"}},
      {"python/warpweave/ops/kernels/blackwell/attention_ws.py",
       "attention_ws_kernel",
       "q_desc:desc<fp16,128x128>,k_desc:desc<fp16,128x128>,v_desc:desc<fp16,128x128>,"
       "o_desc:desc<fp16,128x128>,lse_ptr:*fp32:16,sm_scale:fp32,N_CTX:i32:16,HEAD_DIM=128,"
       "BLOCK_M=128,BLOCK_N=128,NUM_STAGES=2,CAUSAL=True",
       4,
       {"async_tasks", "tcgen05_mma"}},
      {"python/warpweave/ops/kernels/blackwell/attention_bwd_ws.py",
       "attention_bwd_ws_kernel",
       "q_desc:desc<fp16,64x128>,k_desc:desc<fp16,128x128>,v_desc:desc<fp16,128x128>,"
       "do_desc:desc<fp16,64x128>,dq_desc:desc<fp32,64x128>,dk_desc:desc<fp16,128x128>,"
       "dv_desc:desc<fp16,128x128>,lse_ptr:*fp32:16,delta_ptr:*fp32:16,sm_scale:fp32,"
       "N_CTX:i32:16,HEAD_DIM=128,BLOCK_M=64,BLOCK_N=128,NUM_STAGES=2,CAUSAL=True",
       4,
       {"async_tasks", "tcgen05_mma", "tcgen05_commit"}},
  };
  return cases;
}
} // namespace

TEST(SpecializeKernels, EveryKernelFileHasACase) {
  std::set<std::string> covered;
  for (const KernelCase& c : kernelCases()) covered.insert(c.file);
  for (const auto& e : std::filesystem::recursive_directory_iterator(
           std::string(WW_SOURCE_DIR) + "/python/warpweave/ops/kernels")) {
    if (e.path().extension() != ".py") continue;
    std::string rel = std::filesystem::relative(e.path(), WW_SOURCE_DIR).string();
    if (readFile(e.path().string()).find("@ww.jit") == std::string::npos) continue; // host code
    EXPECT_TRUE(covered.count(rel)) << rel << " has no specialization case";
  }
}

TEST(SpecializeKernels, AllSpecializeAndVerify) {
  for (const KernelCase& c : kernelCases()) {
    SCOPED_TRACE(std::string(c.file) + ":" + c.kernel + " [" + c.signature + "]");
    std::vector<SourceFile> files =
        readSourceWithImports(std::string(WW_SOURCE_DIR) + "/" + c.file);
    ASSERT_FALSE(files[0].text.empty());
    std::vector<Extra> imported; // helpers the kernel imports from sibling files
    for (size_t i = 1; i < files.size(); ++i) imported.push_back({files[i].path, files[i].text});
    CompileOptions o;
    o.numWarps = c.numWarps;
    Result r = specializeSource(files[0].text, c.kernel, c.signature, imported, o);
    ASSERT_EQ(r.error, "");
    for (const char* e : c.expect)
      EXPECT_NE(r.ir.find(e), std::string::npos) << "missing '" << e << "' in\n" << r.ir;
    transforms::runCleanupPipeline(*r.fn); // the lead's passes accept what we produce
  }
}

// ---------------------------------------------------------------------------------------------
// Diagnostics: each user error, with its exact FILE:LINE:COL and message
// ---------------------------------------------------------------------------------------------

namespace {
/// Specializes `body` as the body of `k(x_ptr, n, BLOCK: tl.constexpr)`; its first line is line 6.
Result kernelBody(const std::string& body, const std::string& sig = "x_ptr:*fp32,n:i32,BLOCK=128",
                  const std::string& prelude = "") {
  return specializeSource(std::string(kHeader) + prelude +
                              "@ww.jit\ndef k(x_ptr, n, BLOCK: tl.constexpr):\n" + body,
                          "k", sig);
}

struct NegativeCase {
  const char* body;
  const char* error; // the rendered first line
  const char* note;  // a fragment of a later line, or ""
};
} // namespace

TEST(SpecializeDiagnostics, UserErrorsPointAtTheirSource) {
  const NegativeCase cases[] = {
      {"    y = undefined_nme + 1\n", "test.py:6:9: error: undefined name 'undefined_nme'", ""},
      {"    y = tl.arnge(0, BLOCK)\n",
       "test.py:6:12: error: unknown name 'tl.arnge'; did you mean 'tl.arange'?", ""},
      {"    b = tlx.local_aloc((16, 16), tl.float16, 2)\n",
       "test.py:6:13: error: unknown name 'tlx.local_aloc'; did you mean 'tlx.local_alloc'?", ""},
      {"    y = tl.program_id()\n",
       "test.py:6:9: error: tl.program_id() missing required argument 'axis'", ""},
      {"    y = tl.arange(0, BLOCK, 3)\n",
       "test.py:6:29: error: tl.arange() takes at most 2 positional arguments but 3 were given",
       ""},
      {"    y = tl.load(x_ptr, maks=n > 0)\n",
       "test.py:6:24: error: tl.load() got an unexpected keyword argument 'maks'; did you mean "
       "'mask'?",
       ""},
      {"    y = tl.load(n)\n",
       "test.py:6:17: error: tl.load's pointer must be a pointer or a tensor of pointers, got a "
       "scalar (i32)",
       ""},
      {"    y = tl.arange(0, n)\n",
       "test.py:6:22: error: tl.arange's end must be a compile-time constant, but 'n' is a "
       "run-time "
       "value",
       "note: declare the kernel parameter as 'n: tl.constexpr'"},
      {"    m = n * 2\n    y = tl.zeros((m, 16), dtype=tl.float32)\n",
       "test.py:7:18: error: tl.zeros's shape must be a compile-time constant, but this is a "
       "run-time value",
       "'x: tl.constexpr = ...' stays compile-time"},
      {"    for i in tl.static_range(n):\n        pass\n",
       "test.py:6:30: error: tl.static_range's end must be a compile-time constant, but 'n' is a "
       "run-time value",
       "n: tl.constexpr"},
      {"    y = tl.arange(0, 100)\n",
       "test.py:6:9: error: tl.arange's range must have a power-of-2 size, got 100 (end - start)",
       ""},
      {"    y = tl.zeros((100, 16), dtype=tl.float32)\n",
       "test.py:6:18: error: tl.zeros's shape must have power-of-2 dimensions, got 100x16 (100 is "
       "not a power of 2)",
       ""},
      {"    y = tl.arange(0, 128) + tl.arange(0, 64)\n",
       "test.py:6:27: error: cannot broadcast shapes [128] and [64] in '+' (dimension 0: 128 vs "
       "64)",
       ""},
      {"    a = tl.zeros((32, 64), dtype=tl.float16)\n    c = tl.dot(a, a)\n",
       "test.py:7:9: error: tl.dot shape mismatch: 32x64 @ 32x64 (the first operand's K = 64 must "
       "equal the second operand's K = 32)",
       ""},
      {"    k(x_ptr, n, BLOCK)\n",
       "test.py:6:5: error: recursive call to 'k' did not end within 200 nested calls; @jit "
       "helpers are inlined, so recursion must end on compile-time values (e.g. a tl.constexpr "
       "argument that shrinks to a base case under a compile-time 'if')",
       "test.py:6:5: note: in 'k' called from here"},
      {"    with tlx.async_task('default'):\n        pass\n",
       "test.py:6:10: error: tlx.async_task(...) must be directly inside 'with tlx.async_tasks():'",
       ""},
      {"    with tlx.async_tasks():\n        with tlx.async_task('default'):\n            pass\n"
       "        with tlx.async_task('default'):\n            pass\n",
       "test.py:9:14: error: two default async tasks; only one 'tlx.async_task(\"default\")' is "
       "allowed",
       "test.py:7:14: note: the first default task is here"},
      {"    with tlx.async_tasks():\n        z = 1\n        with tlx.async_task('default'):\n"
       "            pass\n",
       "test.py:7:9: error: only 'with tlx.async_task(...):' blocks may appear directly inside "
       "'with tlx.async_tasks():'; move this statement into a task or before the async_tasks block",
       ""},
      {"    with tlx.async_tasks():\n        with tlx.async_task(registers=40):\n"
       "            pass\n",
       "test.py:7:14: error: a non-default async task needs num_warps=N (N > 0): "
       "tlx.async_task(num_warps=1, num_regs=40)",
       ""},
      {"    bufs = tlx.local_alloc((64, 64), tl.float16, 2)\n    tlx.barrier_wait(bufs[0], 0)\n",
       "test.py:7:22: error: tlx.barrier_wait's bar must be a barrier (from tlx.alloc_barriers), "
       "got a buffer (buffer<1x64x64xfp16, smem>)",
       ""},
      {"    bars = tlx.alloc_barriers(2)\n    v = tlx.local_load(bars[0])\n",
       "test.py:7:24: error: tlx.local_load's src must be a shared-memory buffer (from "
       "tlx.local_alloc), got a barrier (barrier<1>)",
       ""},
      {"    bars = tlx.alloc_barriers(2)\n    tlx.barrier_wait(bars, 0)\n",
       "test.py:7:22: error: tlx.barrier_wait needs a single barrier, got barrier<2>; select one "
       "with bars[i] or tlx.local_view(bars, i)",
       ""},
      {"    acc = tl.zeros([BLOCK], dtype=tl.float32)\n    for i in range(n):\n"
       "        acc = acc.to(tl.float16)\n",
       "test.py:8:9: error: loop-carried 'acc' changes type from tensor<128xfp32> to "
       "tensor<128xfp16> in the loop body. Please make sure that the type stays consistent: "
       "cast it (.to(...)) or assign a value of the initial type",
       ""},
      {"    i = 0\n    while i < n:\n        i = i.to(tl.int64) + 1\n",
       "test.py:8:9: error: loop-carried 'i' changes type from i32 to i64 in the loop body. "
       "Please make sure that the type stays consistent: cast it (.to(...)) or assign a value "
       "of the initial type",
       ""},
      {"    for i in range(n):\n        break\n",
       "test.py:7:9: error: 'break' is not supported: loops compile to structured loops without "
       "early exit; use a 'while' loop with the exit condition in its test instead",
       ""},
      {"    for i in range(n):\n        continue\n",
       "test.py:7:9: error: 'continue' is not supported: loops compile to structured loops; guard "
       "the rest of the body with an 'if' instead",
       ""},
      {"    for i in range(n):\n        return\n",
       "test.py:7:9: error: 'return' inside a loop, an async task or a 'with' block is not "
       "supported; return after the loop instead",
       ""},
      {"    tl.static_assert(BLOCK == 64, 'BLOCK must be 64')\n",
       "test.py:6:5: error: static assertion failed: BLOCK must be 64", ""},
      {"    assert BLOCK < 64, 'too big'\n", "test.py:6:18: error: assertion failed: too big", ""},
      {"    tl.static_assert(n > 0)\n",
       "test.py:6:24: error: tl.static_assert's condition must be a compile-time constant, but "
       "this is a run-time value",
       ""},
      {"    y = host_helper(n)\n",
       "test.py:6:9: error: 'host_helper' is not a @jit function; only functions decorated with "
       "@ww.jit (or @triton.jit) can be called from a kernel",
       "'host_helper' is defined here"},
      {"    y = twice(n, factor=2)\n", "test.py:6:18: error: 'twice' has no parameter 'factor'",
       ""},
      {"    y = twice()\n", "test.py:6:9: error: missing argument 'x' in the call to 'twice'", ""},
      {"    if n > 0:\n        y = 1\n    z = y + 1\n",
       "test.py:8:9: error: undefined name 'y'; did you mean 'n'?", ""},
      {"    x = tl.arange(0, BLOCK)\n    if x > 0:\n        pass\n",
       "test.py:7:10: error: the condition of a run-time 'if' must be a scalar, got "
       "tensor<128xi1>; "
       "use tl.where for element-wise choice",
       ""},
      {"    if n > 0:\n        v = 1.0\n    else:\n        v = 1\n",
       "test.py:7:9: error: 'v' has type fp32 after the then-branch but i32 after the else-branch "
       "of a run-time 'if'",
       ""},
      {"    y = tl.sum(tl.arange(0, BLOCK), axis=1)\n",
       "test.py:6:37: error: tl.sum: axis 1 is out of range for a tensor of rank 1", ""},
      {"    y = tl.exp(tl.arange(0, BLOCK))\n",
       "test.py:6:16: error: tl.exp needs a floating-point argument, got tensor<128xi32>; convert "
       "it first (x.to(tl.float32))",
       ""},
      {"    y = tl.arange(0, BLOCK) ** 2\n",
       "test.py:6:29: error: '**' works on compile-time values only; for tensors use tl.exp2 / "
       "tl.exp and tl.log, or multiply explicitly",
       ""},
      {"    y = tl.arange(0, BLOCK).to(tl.float16, bitcast=True)\n",
       "test.py:6:9: error: bitcast needs types of one width: int32 has 32 bits, float16 has 16",
       ""},
      {"    y = x_ptr * 2\n",
       "test.py:6:15: error: unsupported pointer arithmetic '*' between a scalar (ptr<fp32>) and "
       "an "
       "int; pointers support 'ptr + int offsets' and 'ptr - int offsets'",
       ""},
      {"    y = tl.arange(0, BLOCK)[3]\n",
       "test.py:6:29: error: unsupported tensor index: tensor subscripts accept only None and "
       "':' (as in x[:, None]); to pick elements, load them with pointers and offsets",
       ""},
      {"    t: tl.constexpr = (1, 2)\n    y = t[2]\n",
       "test.py:7:11: error: tuple index 2 is out of range for a tuple of 2 elements", ""},
      {"    X: tl.constexpr = n\n",
       "test.py:6:23: error: the value of a tl.constexpr variable must be a compile-time constant, "
       "but 'n' is a run-time value",
       ""},
      {"    with tlx.async_tasks():\n        with tlx.async_task('default'):\n"
       "            r = tlx.async_task_replica_id() + tlx.thread_id(3)\n",
       "test.py:8:61: error: tlx.thread_id's axis must be 0, 1 or 2", ""},
      {"    r = tlx.async_task_replica_id()\n",
       "test.py:6:9: error: tlx.async_task_replica_id() is only meaningful inside 'with "
       "tlx.async_task(...)'",
       ""},
      {"    tlx.named_barrier_wait(16, 256)\n",
       "test.py:6:28: error: named barrier ids run from 0 to 15, got 16", ""},
      {"    y = float('abc')\n", "test.py:6:15: error: cannot convert 'abc' to float", ""},
      {"    y = math.log2(n)\n",
       "test.py:6:19: error: math.log2() works on compile-time numbers only; use tl.log2 for "
       "tensors",
       ""},
      {"    y = torch.zeros(4)\n",
       "test.py:6:15: error: module 'torch' is not available in kernel code (only "
       "warpweave/triton language modules, math and helper modules passed to the compiler are)",
       ""},
  };
  const std::string prelude = "import math\nimport torch\n\n"
                              "def host_helper(n):\n    return n\n\n"
                              "@ww.jit\ndef twice(x, scale: tl.constexpr = 2):\n"
                              "    return x * scale\n\n";
  // The prelude shifts the kernel down; rebase the expected line numbers on it.
  int shift = static_cast<int>(std::count(prelude.begin(), prelude.end(), '\n'));
  for (const NegativeCase& c : cases) {
    SCOPED_TRACE(c.body);
    Result r = kernelBody(c.body, "x_ptr:*fp32,n:i32,BLOCK=128", prelude);
    ASSERT_NE(r.error, "") << r.ir;
    // Rewrite test.py:L:C with L - shift so the table reads as if the kernel had no prelude.
    std::smatch m;
    std::string first = firstLine(r.error);
    ASSERT_TRUE(std::regex_search(first, m, std::regex("^test\\.py:(\\d+):"))) << r.error;
    std::string rebased = "test.py:" + std::to_string(std::stoi(m[1]) - shift) +
                          first.substr(static_cast<size_t>(m.length(0)) - 1);
    EXPECT_EQ(rebased, c.error) << r.error;
    if (*c.note) {
      std::string rest = r.error;
      for (int l = 6 + shift; l < 20 + shift; ++l)
        rest = std::regex_replace(rest, std::regex("test\\.py:" + std::to_string(l) + ":"),
                                  "test.py:" + std::to_string(l - shift) + ":");
      EXPECT_HAS(rest, c.note);
    }
  }
}

TEST(SpecializeDiagnostics, EndlessRecursionIsNotedOnce) {
  Result r = kernelBody("    k(x_ptr, n, BLOCK)\n");
  ASSERT_NE(r.error, "");
  size_t notes = 0;
  for (size_t at = r.error.find("note: in 'k' called from here"); at != std::string::npos;
       at = r.error.find("note: in 'k' called from here", at + 1))
    ++notes;
  EXPECT_EQ(notes, 1u) << r.error.substr(0, 600);
}

TEST(SpecializeDiagnostics, RecursionThatConstexprsEndInlines) {
  const std::string prelude = "@ww.jit\ndef total(x, N: tl.constexpr):\n"
                              "    if N == 1:\n        return x\n"
                              "    return total(x, N // 2) + total(x * 2, N // 2)\n\n";
  Result r = kernelBody("    tl.store(x_ptr, total(tl.load(x_ptr), 8))\n",
                        "x_ptr:*fp32,n:i32,BLOCK=128", prelude);
  ASSERT_EQ(r.error, "");
  // Eight leaves (x, 2x, 2x, 4x, 2x, 4x, 4x, 8x) summed by seven adds.
  size_t adds = 0;
  for (size_t at = r.ir.find(" = add "); at != std::string::npos; at = r.ir.find(" = add ", at + 1))
    ++adds;
  EXPECT_EQ(adds, 7u) << r.ir;
}

TEST(SpecializeDiagnostics, RenderedErrorQuotesTheLineWithACaret) {
  Result r = kernelBody("    y = tl.arange(0, n)\n");
  EXPECT_EQ(r.error,
            "test.py:6:22: error: tl.arange's end must be a compile-time constant, but 'n' is a "
            "run-time value\n"
            "      y = tl.arange(0, n)\n"
            "                       ^\n"
            "test.py:6:22: note: declare the kernel parameter as 'n: tl.constexpr' (and give it as "
            "n=VALUE in the signature) to make it a compile-time value\n"
            "      y = tl.arange(0, n)\n"
            "                       ^");
}

TEST(SpecializeDiagnostics, SignatureErrors) {
  const char* src = "@ww.jit\ndef k(x_ptr, n, BLOCK: tl.constexpr):\n    pass\n";
  std::string full = std::string(kHeader) + src;
  EXPECT_EQ(firstLine(specializeSource(full, "k", "x_ptr:*fp32,BLOCK=4").error),
            "test.py:5:14: error: kernel parameter 'n' is missing from the signature; give it as "
            "'n:TYPE' (a run-time argument) or 'n=VALUE' (a constexpr)");
  EXPECT_EQ(firstLine(specializeSource(full, "k", "x_ptr:*fp32,n:i32,BLOCK:i32").error),
            "test.py:5:17: error: parameter 'BLOCK' is declared tl.constexpr, so the signature "
            "must give its value ('BLOCK=VALUE'), not a type");
  EXPECT_EQ(firstLine(specializeSource(full, "k", "x_ptr:*fp32,n:i32,BLOCK=4,BLOKC=3").error),
            "test.py:5:1: error: the signature names 'BLOKC', which is not a parameter of 'k'; did "
            "you mean 'BLOCK'?");
  EXPECT_EQ(firstLine(specializeSource(full, "k", "x_ptr:*fq32,n:i32,BLOCK=4").error),
            "test.py:5:7: error: bad signature type '*fq32' for parameter 'x_ptr': unknown element "
            "type 'fq32' (expected *fp16, i32, fp32, desc<fp16,128x64> ...)");
  EXPECT_EQ(
      firstLine(specializeSource(full, "k", "x_ptr:*fp32,n:i32,BLOCK=4+").error).substr(0, 60),
      "test.py:5:17: error: bad value '4+' for constexpr 'BLOCK' in");
  // Located at the definition the suggestion names, so editors can jump to it.
  EXPECT_EQ(firstLine(specializeSource(full, "kk", "x_ptr:*fp32,n:i32,BLOCK=4").error),
            "test.py:5:1: error: kernel 'kk' is not defined in test.py; did you mean 'k'?");
}

TEST(SpecializeDiagnostics, ErrorsInsideHelpersNameTheCallSite) {
  Result r = specializeSource(std::string(kHeader) +
                                  "@ww.jit\ndef scale(p, f: tl.constexpr):\n    return p * f\n\n"
                                  "@ww.jit\ndef k(x_ptr):\n    y = scale(x_ptr, 2)\n",
                              "k", "x_ptr:*fp32");
  EXPECT_EQ(r.error, "test.py:6:14: error: unsupported pointer arithmetic '*' between a scalar "
                     "(ptr<fp32>) and an int; pointers support 'ptr + int offsets' and 'ptr - int "
                     "offsets'\n"
                     "      return p * f\n"
                     "               ^\n"
                     "test.py:10:9: note: in 'scale' called from here\n"
                     "      y = scale(x_ptr, 2)\n"
                     "          ^");
}

// ---------------------------------------------------------------------------------------------
// Constructs
// ---------------------------------------------------------------------------------------------

TEST(SpecializeConstexpr, FoldsPythonArithmeticAtCompileTime) {
  Result r = spec(R"(
import math

@ww.jit
def k(x_ptr, BLOCK: tl.constexpr, bias, NAME: tl.constexpr):
    X: tl.constexpr = BLOCK * 2 + 1
    tl.static_assert(X == 257)
    tl.static_assert(-7 // 2 == -4 and -7 % 2 == 1 and 7 / 2 == 3.5 and 2 ** 10 == 1024)
    tl.static_assert(max(3, BLOCK) == BLOCK and min(3, 4.5) == 3 and abs(-3) == 3)
    tl.static_assert(float("inf") > 1e300 and -float("inf") < 0 and int(3.7) == 3)
    tl.static_assert(bool(0) == False and (1 << 4) == 16 and (0xF0 & 0x3C) == 0x30)
    t: tl.constexpr = (1, 2, (3, 4))
    tl.static_assert(len(t) == 3 and t[2][1] == 4 and t[-1][0] == 3 and t[1:] == (2, (3, 4)))
    tl.static_assert(tlx.size_of(tl.float16) == 2 and tl.float16.primitive_bitwidth == 16)
    tl.static_assert(x_ptr.dtype.element_ty == tl.float32 and tlx.dtype_of(x_ptr) == tl.float32)
    tl.static_assert(tl.cdiv(1000, BLOCK) == 8 and ww.cdiv(BLOCK, 3) == 43)
    tl.static_assert(bias is None and NAME == "relu" and NAME != "gelu")
    tl.static_assert(tl.constexpr(5) == 5 and 1 < 2 <= 2 and not (1 < 2 > 3))
    tl.static_assert(math.sqrt(16.0) == 4.0 and math.log2(8) == 3 and math.ceil(2.1) == 3)
    tl.static_assert((BLOCK > 64 and 1) == 1 and (0 or 5) == 5)
    offs = tl.arange(0, X - 1)
    tl.store(x_ptr + offs, 1.0)
)",
                  "x_ptr:*fp32,BLOCK=128,bias=None,NAME='relu'");
  ASSERT_EQ(r.error, "");
  EXPECT_HAS(r.ir, "arange {start = 0, end = 256}");
  EXPECT_LACKS(r.ir, " mul ");
}

TEST(SpecializeConstexpr, PlainAssignmentMakesARunTimeScalar) {
  Result r = spec(R"(
@ww.jit
def k(x_ptr, n):
    phase = 0
    for i in range(n):
        phase = phase ^ 1
    tl.store(x_ptr, phase)
)",
                  "x_ptr:*i32,n:i32");
  ASSERT_EQ(r.error, "");
  EXPECT_HAS(r.ir, "%2_phase = constant {value = 0} : i32");
  EXPECT_HAS(r.ir, "_phase = for %3, %1_n, %4, %2_phase : i32 { ^(%6_i: i32, %7_phase: i32)");
  EXPECT_HAS(r.ir, "_phase = xor %7_phase, %8 : i32");
}

TEST(SpecializeConstexpr, CompileTimeIfSpecializesOnlyTheTakenBranch) {
  const char* src = R"(
@ww.jit
def k(x_ptr, MODE: tl.constexpr):
    v = tl.arange(0, 16)
    if MODE == "exp":
        y = tl.exp(v.to(tl.float32))
    elif MODE == "log":
        y = tl.log(v.to(tl.float32))
    else:
        y = v.to(tl.float32) * undefined_name
    tl.store(x_ptr + v, y)
)";
  Result e = spec(src, "x_ptr:*fp32,MODE='exp'");
  ASSERT_EQ(e.error, "");
  EXPECT_HAS(e.ir, " = exp ");
  EXPECT_LACKS(e.ir, " = log ");
  EXPECT_LACKS(e.ir, " = if ");
  Result l = spec(src, "x_ptr:*fp32,MODE='log'");
  ASSERT_EQ(l.error, "");
  EXPECT_HAS(l.ir, " = log ");
  EXPECT_LACKS(l.ir, " = exp ");
  // The untaken branches are never looked at; the third one is where the error is.
  EXPECT_EQ(firstLine(spec(src, "x_ptr:*fp32,MODE='other'").error),
            "test.py:13:32: error: undefined name 'undefined_name'");
}

TEST(SpecializeConstexpr, GlobalsFromTheCallerOverrideModuleConstants) {
  std::string src = std::string(kHeader) + R"(
SCALE: tl.constexpr = 2
OFFSET = 10
DTYPE = tl.float16

@ww.jit
def k(x_ptr):
    tl.store(x_ptr + OFFSET, SCALE * 1.5)
)";
  Result a = specializeSource(src, "k", "x_ptr:*fp16");
  ASSERT_EQ(a.error, "");
  EXPECT_HAS(a.ir, "constant {value = 10} : i32");
  EXPECT_HAS(a.ir, "constant {value = 3.0} : fp16");
  Result b = specializeSource(src, "k", "x_ptr:*fp16", {}, {}, {{"SCALE", "4"}});
  ASSERT_EQ(b.error, "");
  EXPECT_HAS(b.ir, "constant {value = 6.0} : fp16");
}

TEST(SpecializeControlFlow, RunTimeIfMergesValuesIntoResults) {
  Result r = spec(R"(
@ww.jit
def k(x_ptr, n):
    s = 0.0
    if n > 4:
        s = s + 1.0
        only_here = 5
    else:
        s = s - 1.0
    tl.store(x_ptr, s)
)",
                  "x_ptr:*fp32,n:i32");
  ASSERT_EQ(r.error, "");
  EXPECT_HAS(r.ir, "_s = if %4 : fp32 {");
  EXPECT_HAS(r.ir, "    yield %7_s\n  } {");
  EXPECT_HAS(r.ir, "    yield %10_s\n  }");
  EXPECT_HAS(r.ir, "store %0_x_ptr, %5_s");
}

TEST(SpecializeControlFlow, EarlyReturnMovesTheRestIntoTheElseBranch) {
  Result r = spec(R"(
@ww.jit
def k(x_ptr, n):
    pid = tl.program_id(0)
    if pid >= n:
        return
    tl.store(x_ptr + pid, 1.0)
)",
                  "x_ptr:*fp32,n:i32");
  ASSERT_EQ(r.error, "");
  EXPECT_HAS(r.ir, "  if %3 {\n    yield\n  } {\n");
  EXPECT_HAS(r.ir, "    store %4, %5 {has_mask = 0}\n    yield\n  }\n  return\n}");
}

TEST(SpecializeControlFlow, HelperReturningOnBothRunTimePathsYieldsItsValue) {
  Result r = spec(R"(
@ww.jit
def pick(c, a, b):
    if c > 0:
        return a
    return b

@ww.jit
def k(x_ptr, n):
    tl.store(x_ptr, pick(n, 1.5, 2.5))
)",
                  "x_ptr:*fp32,n:i32");
  ASSERT_EQ(r.error, "");
  EXPECT_HAS(r.ir, " = if %3 : fp32 {");
  EXPECT_EQ(count(r.ir, "yield %"), 2);
}

TEST(SpecializeControlFlow, LoopsCarryTheNamesTheyAssign) {
  Result r = spec(R"(
@ww.jit
def k(x_ptr, n, BLOCK: tl.constexpr):
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    count = 0
    for i in tl.range(0, n, 2, num_stages=3, loop_unroll_factor=2):
        fresh = tl.load(x_ptr + i + tl.arange(0, BLOCK))
        acc += fresh
    for j in tl.static_range(3):
        acc = acc * (j + 1)
    while count < n:
        count += 3
    tl.store(x_ptr + tl.arange(0, BLOCK), acc + count)
)",
                  "x_ptr:*fp32,n:i32,BLOCK=64");
  ASSERT_EQ(r.error, "");
  EXPECT_HAS(r.ir, "_acc = for %4, %1_n, %5, %2_acc {num_stages = 3, unroll = 2} : "
                   "tensor<64xfp32> { ^(%7_i: i32, %8_acc: tensor<64xfp32>)");
  EXPECT_EQ(count(r.ir, " = mul "), 3); // static_range unrolled three times
  EXPECT_HAS(r.ir, "_count = while %3_count : i32 { ^(%");
  EXPECT_HAS(r.ir, "condition %");
  Result bad = spec(R"(
@ww.jit
def k(x_ptr, n):
    for i in range(n):
        fresh = 1
    tl.store(x_ptr, fresh)
)",
                    "x_ptr:*i32,n:i32");
  EXPECT_EQ(firstLine(bad.error), "test.py:9:21: error: undefined name 'fresh'");
}

TEST(SpecializeControlFlow, ListComprehensionsOverRangeAndTuplesBuildTuples) {
  // Triton's subset: one `for` over range() with compile-time arguments or over a tuple; the
  // result is a tuple, which a run-time loop carries leaf by leaf.
  Result r = spec(R"(
@ww.jit
def k(x_ptr, n, BLOCK: tl.constexpr, PARTS: tl.constexpr):
    accs = [tl.zeros([BLOCK], dtype=tl.float32) for _ in range(PARTS)]
    for i in range(n):
        xs = [tl.load(x_ptr + p * BLOCK + tl.arange(0, BLOCK)) for p in range(PARTS)]
        accs = [accs[p] + xs[p] * (p + 1) for p in range(PARTS)]
    scaled = [a * 2.0 for a in accs]
    tl.static_assert([j for j in range(5, 0, -2)][2] == 1 and _ == PARTS - 1)
    tl.static_assert(len([q for q in range(0)]) == 0)
    for p in tl.static_range(PARTS):
        tl.store(x_ptr + p * BLOCK + tl.arange(0, BLOCK), scaled[p])
)",
                  "x_ptr:*fp32,n:i32,BLOCK=64,PARTS=3");
  ASSERT_EQ(r.error, "");
  EXPECT_HAS(r.ir, ": tensor<64xfp32>, tensor<64xfp32>, tensor<64xfp32> { ^(%");
  EXPECT_EQ(count(r.ir, " = load "), 3);
  EXPECT_EQ(count(r.ir, " = store "), 0);
  EXPECT_EQ(count(r.ir, "store "), 3);

  const NegativeCase cases[] = {
      {"    y = [i for i in range(2) for j in range(2)]\n",
       "test.py:6:30: error: a list comprehension in kernel code takes a single 'for' clause; "
       "nest a comprehension in the element ('[[f(i, j) for j in range(M)] for i in range(N)]') "
       "or use tl.static_range loops",
       ""},
      {"    y = [i for i in range(4) if i > 1]\n",
       "test.py:6:30: error: 'if' filters in a list comprehension are not supported in kernel "
       "code (Triton's front end ignores them and keeps every item); choose the elements with a "
       "conditional expression ('[a if c else b for ...]') or a tl.static_range loop",
       ""},
      {"    y = [i async for i in range(4)]\n",
       "test.py:6:12: error: 'async for' is not supported in kernel code; write '[... for x in "
       "...]'",
       ""},
      {"    y = [a for a, b in ((1, 2), (3, 4))]\n",
       "test.py:6:16: error: the target of a list comprehension in kernel code must be a single "
       "name ('for i in ...'), not a tuple of names",
       ""},
      {"    y = [i for i in range(n)]\n",
       "test.py:6:27: error: the end of range() in a list comprehension must be a compile-time "
       "constant, but 'n' is a run-time value",
       ""},
      {"    y = [i for i in tl.static_range(4)]\n",
       "test.py:6:21: error: a list comprehension in kernel code iterates over range(...) with "
       "compile-time arguments or over a tuple, not tl.static_range(...); write range(...)",
       ""},
      {"    y = [i for i in BLOCK]\n",
       "test.py:6:21: error: a list comprehension in kernel code iterates over range(...) with "
       "compile-time arguments or over a tuple, not 128",
       ""},
      {"    y = [i for i in range(0, 4, 0)]\n",
       "test.py:6:33: error: range()'s step must not be zero", ""},
      {"    y = [i for i in range(5000)]\n",
       "test.py:6:21: error: this list comprehension would build 5000 more elements (at most 4096 "
       "per comprehension and 65536 unrolled iterations in a kernel)",
       ""},
  };
  for (const NegativeCase& c : cases) {
    SCOPED_TRACE(c.body);
    Result bad = kernelBody(c.body);
    EXPECT_EQ(firstLine(bad.error), c.error) << bad.error;
  }
}

TEST(SpecializeControlFlow, RunTimeConditionalExpressionBecomesAnIf) {
  Result r = spec("@ww.jit\ndef k(x_ptr, n):\n    tl.store(x_ptr, 1 if n > 2 else 2)\n",
                  "x_ptr:*i32,n:i32");
  ASSERT_EQ(r.error, "");
  EXPECT_HAS(r.ir, " = if %3 : i32 {");
}

TEST(SpecializeHelpers, InlinesWithDefaultsKeywordsAndTuples) {
  Result r = spec(R"(
@ww.jit
def pair(a, b, scale: tl.constexpr = 1):
    if scale == 1:
        return a, b
    return a * scale, b * scale

@ww.jit
def k(x_ptr):
    offs = tl.arange(0, 16)
    p, q = pair(offs, offs + 1, scale=3)
    u, v = pair(b=offs, a=offs)
    tl.store(x_ptr + p + u, (q + v).to(tl.float32))
)",
                  "x_ptr:*fp32");
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(count(r.ir, " = mul "), 2); // only the scale=3 call multiplies
  EXPECT_LACKS(r.ir, " = if ");
}

TEST(SpecializeHelpers, ResolvesHelpersInOtherModules) {
  std::string kernel = std::string(kHeader) + R"(
from .utils import twice
import mylib
from mylib import LIMIT

@ww.jit
def k(x_ptr):
    offs = tl.arange(0, 16)
    tl.store(x_ptr + twice(offs) + mylib.plus(offs, LIMIT), 1.0)
)";
  std::vector<Extra> extra = {
      {"pkg/utils.py", std::string(kHeader) + "@ww.jit\ndef twice(x):\n    return x * 2\n"},
      {"mylib.py", std::string(kHeader) +
                       "LIMIT = 7\n\n@ww.jit\ndef plus(x, y: tl.constexpr):\n    return x + y\n"}};
  Result r = specializeSource(kernel, "k", "x_ptr:*fp32", extra);
  ASSERT_EQ(r.error, "");
  EXPECT_HAS(r.ir, "constant {value = 2} : tensor<16xi32>");
  EXPECT_HAS(r.ir, "constant {value = 7} : tensor<16xi32>");
}

namespace {
/// The dtype `expr` has after `setup`, checked with tl.static_assert inside the kernel.
std::string dtypeOf(const std::string& setup, const std::string& expr) {
  static const char* names[] = {"int1",     "int8",    "int16",  "int32",  "int64",
                                "uint8",    "uint16",  "uint32", "uint64", "float16",
                                "bfloat16", "float32", "float64"};
  for (const char* n : names) {
    std::string body = "@ww.jit\ndef k(i32, f16, bf16, f32, u32, i8, i64):\n" + setup +
                       "    tl.static_assert((" + expr + ").dtype == tl." + n + ")\n";
    Result r = spec(body, "i32:i32,f16:fp16,bf16:bf16,f32:fp32,u32:u32,i8:i8,i64:i64");
    if (r.error.empty()) return n;
    if (r.error.find("static assertion failed") == std::string::npos) return r.error;
  }
  return "?";
}
} // namespace

TEST(SpecializePromotion, FollowsTritonRules) {
  const std::string tensors = "    ti = tl.arange(0, 16)\n"
                              "    th = ti.to(tl.float16)\n"
                              "    tb = ti.to(tl.bfloat16)\n"
                              "    tf = ti.to(tl.float32)\n"
                              "    tu = ti.to(tl.uint32)\n"
                              "    t8 = ti.to(tl.int8)\n";
  EXPECT_EQ(dtypeOf(tensors, "ti + 1"), "int32");
  // A python int the tensor's type cannot hold is an error, as in Triton.
  EXPECT_NE(dtypeOf(tensors, "ti + 2**40")
                .find("Scalar 1099511627776 is out of range for type "
                      "int32"),
            std::string::npos);
  EXPECT_EQ(dtypeOf(tensors, "t8 + 1"), "int8"); // python ints adopt the tensor's type
  EXPECT_EQ(dtypeOf(tensors, "ti + 1.5"), "float32");
  EXPECT_EQ(dtypeOf(tensors, "th * 2.0"), "float16");
  EXPECT_EQ(dtypeOf(tensors, "th + tb"), "float32");
  EXPECT_EQ(dtypeOf(tensors, "th + ti"), "float16");
  EXPECT_EQ(dtypeOf(tensors, "th + tf"), "float32");
  EXPECT_EQ(dtypeOf(tensors, "t8 + ti"), "int32");
  EXPECT_EQ(dtypeOf(tensors, "tu + ti"), "uint32");
  EXPECT_EQ(dtypeOf(tensors, "ti / 2"), "float32");
  EXPECT_EQ(dtypeOf(tensors, "th / 2"), "float32"); // 16-bit floats divide in fp32
  EXPECT_EQ(dtypeOf(tensors, "th / th"), "float32");
  EXPECT_EQ(dtypeOf(tensors, "th % th"), "float32");
  EXPECT_EQ(dtypeOf(tensors, "ti // 2"), "int32");
  EXPECT_EQ(dtypeOf(tensors, "ti < 2"), "int1");
  EXPECT_EQ(dtypeOf(tensors, "tl.exp(th)"), "float16"); // computed in fp32, cast back
  EXPECT_EQ(dtypeOf("", "i32 + f16"), "float16");
  EXPECT_EQ(dtypeOf("", "i8 + i64"), "int64");
  EXPECT_EQ(dtypeOf("", "u32 * 2"), "uint32");
  EXPECT_EQ(dtypeOf("", "f32 + 1"), "float32");
  EXPECT_EQ(dtypeOf("", "bf16 + bf16"), "bfloat16");
  EXPECT_EQ(dtypeOf(tensors, "tl.sum(t8, axis=0)"), "int32");
  EXPECT_EQ(dtypeOf(tensors, "tl.argmax(th, axis=0)"), "int32");
  EXPECT_EQ(dtypeOf(tensors, "tl.where(ti < 3, 1, 2.5)"), "float32");
  EXPECT_EQ(dtypeOf(tensors, "th.to(tl.int16, bitcast=True)"), "int16");
  EXPECT_EQ(firstLine(dtypeOf("", "u32 - 3 // -1")),
            "test.py:6:27: error: '-' between an unsigned tensor and the negative number -3 is not "
            "allowed");
}

TEST(SpecializePromotion, FloatMathOnHalfPrecisionRoundTripsThroughFp32) {
  Result r = spec("@ww.jit\ndef k(x_ptr):\n    x = tl.load(x_ptr + tl.arange(0, 16))\n"
                  "    tl.store(x_ptr + tl.arange(0, 16), tl.exp(x))\n",
                  "x_ptr:*fp16");
  ASSERT_EQ(r.error, "");
  EXPECT_HAS(r.ir, "%8 = cast %4_x : tensor<16xfp32>\n  %9 = exp %8 : tensor<16xfp32>\n"
                   "  %10 = cast %9 : tensor<16xfp16>");
}

TEST(SpecializeTl, ShapesReductionsDotAndMemoryOps) {
  Result r = spec(R"(
@ww.jit
def combine(a, ai, b, bi):
    keep = a >= b
    return tl.where(keep, a, b), tl.where(keep, ai, bi)

@ww.jit
def k(x_ptr, y_ptr, i_ptr, n, BM: tl.constexpr, BN: tl.constexpr):
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    ptrs = x_ptr + rm[:, None] * n + rn[None, :]
    x = tl.load(ptrs, mask=rm[:, None] < n, other=0.0, cache_modifier=".cg",
                eviction_policy="evict_last", volatile=True)
    s = tl.sum(x, axis=1)
    s2 = tl.sum(x, axis=0, keep_dims=True)
    tot = x.sum()
    m, idx = tl.max(x, axis=1, return_indices=True)
    am = tl.argmin(x, 0)
    v, vi = tl.reduce((x, tl.broadcast_to(rn[None, :], (BM, BN))), 1, combine)
    h = x.to(tl.float16)
    d = tl.dot(h, tl.trans(h))
    d2 = tl.dot(x, x.T)
    d3 = tl.dot(h, h.permute(1, 0), acc=d)
    r = tl.reshape(x, BM * BN)
    e = tl.expand_dims(s, 1)
    a, b = tl.split(tl.join(s, m))
    c = tl.cumsum(s, 0)
    old = tl.atomic_add(y_ptr + rm, s, mask=rm < n, sem="relaxed")
    prev = tl.atomic_cas(i_ptr, 0, 1)
    mx = tl.atomic_max(i_ptr + rm, idx, scope="cta")
    tl.store(y_ptr + rm, a + b + c + v + tot + tl.sigmoid(s) + tl.fma(s, s, 1.0),
             mask=rm < n, eviction_policy="evict_first")
    tl.debug_barrier()
    tl.device_print("s = ", s, hex=False)
    tl.device_assert(s == s, "nan")
    desc = tl.make_tensor_descriptor(x_ptr, shape=[n, n], strides=[n, 1], block_shape=[BM, BN])
    blk = desc.load([0, 16])
    desc.store([16, 0], blk + 1.0)
)",
                  "x_ptr:*fp32,y_ptr:*fp32,i_ptr:*i32,n:i32,BM=32,BN=32");
  ASSERT_EQ(r.error, "");
  const std::string& ir = r.ir;
  EXPECT_HAS(ir, "= expand_dims %4_rm {axis = 1} : tensor<32x1xi32>");
  EXPECT_HAS(ir, "= broadcast %10 : tensor<32x32xptr<fp32>>");
  EXPECT_HAS(ir, "{has_mask = 1, has_other = 1, cache = \"cg\", evict = \"evict_last\", volatile = "
                 "1} : tensor<32x32xfp32>");
  EXPECT_HAS(ir, "_s = reduce %20_x {axis = 1, kind = \"sum\"} : tensor<32xfp32>");
  EXPECT_HAS(ir, "_s2 = expand_dims %22 {axis = 0} : tensor<1x32xfp32>");
  EXPECT_HAS(ir, "= reshape %20_x : tensor<1024xfp32>");
  EXPECT_HAS(ir, "_tot = reduce %24 {axis = 0, kind = \"sum\"} : fp32");
  EXPECT_HAS(ir, "_idx = reduce %20_x {axis = 1, kind = \"argmax\"} : tensor<32xi32>");
  EXPECT_HAS(ir, "_am = reduce %20_x {axis = 0, kind = \"argmin\"} : tensor<32xi32>");
  EXPECT_HAS(ir, "_v, %32_vi = reduce %20_x, %30 {axis = 1, kind = \"custom\"} : tensor<32xfp32>, "
                 "tensor<32xi32> { ^(%33: fp32, %34: i32, %35: fp32, %36: i32)");
  EXPECT_HAS(ir, "    yield %38, %39\n  }");
  EXPECT_HAS(ir, "= permute %40_h {order = [1, 0]} : tensor<32x32xfp16>");
  EXPECT_HAS(ir, "_d = dot %40_h, %41, %42 {input_precision = \"ieee\"} : tensor<32x32xfp32>");
  EXPECT_HAS(ir, "{input_precision = \"tf32\"} : tensor<32x32xfp32>"); // fp32 operands
  EXPECT_HAS(ir, "_d3 = dot %40_h, %47, %43_d {input_precision = \"ieee\"}");
  EXPECT_HAS(ir, "= join %21_s, %26_m : tensor<32x2xfp32>");
  EXPECT_HAS(ir, "_a, %53_b = split %51 : tensor<32xfp32>, tensor<32xfp32>");
  EXPECT_HAS(ir, "_c = scan %21_s {axis = 0, reverse = 0, kind = \"sum\"} : tensor<32xfp32>");
  EXPECT_HAS(ir, "{kind = \"add\", has_mask = 1, sem = \"relaxed\", scope = \"gpu\"} : "
                 "tensor<32xfp32>");
  EXPECT_HAS(ir,
             "_prev = atomic_cas %2_i_ptr, %60, %61 {sem = \"acq_rel\", scope = \"gpu\"} : i32");
  EXPECT_HAS(ir, "{kind = \"max\", has_mask = 0, sem = \"acq_rel\", scope = \"cta\"} : "
                 "tensor<32xi32>");
  EXPECT_HAS(ir, "= sigmoid %21_s : tensor<32xfp32>");
  EXPECT_HAS(ir, "= fma %21_s, %21_s, %");
  EXPECT_HAS(ir, "{has_mask = 1, evict = \"evict_first\"}");
  EXPECT_HAS(ir, "  debug_barrier\n  print %21_s {prefix = \"s = \", hex = 0}\n");
  EXPECT_HAS(ir, "assert %");
  EXPECT_HAS(ir, "{message = \"nan\"}");
  EXPECT_HAS(ir, "_desc = make_desc %0_x_ptr, %3_n, %3_n, %");
  EXPECT_HAS(ir, "{block_shape = [32, 32]} : desc<fp32, 32x32, rank=2>");
  EXPECT_HAS(ir, "_blk = desc_load %");
  EXPECT_HAS(ir, "desc_store %");
}

TEST(SpecializeTlx, BuffersBarriersAsyncCopiesAndMma) {
  Result r = spec(R"(
@ww.jit
def k(a_desc, x_ptr, n, BM: tl.constexpr, BK: tl.constexpr, NS: tl.constexpr):
    a = tlx.local_alloc((BM, BK), tlx.dtype_of(a_desc), NS)
    t = tlx.local_alloc((BM, BK), tl.float32, 1, storage=tlx.storage_kind.tmem)
    bars = tlx.alloc_barriers(NS, arrive_count=2)
    wb = tlx.alloc_warp_barrier(2, num_warps=4)
    i = n % NS
    buf = a[i]
    bar = tlx.local_view(bars, i)
    tlx.barrier_expect_bytes(bar, BM * BK * tlx.size_of(tl.float16))
    tlx.async_descriptor_load(a_desc, buf, [0, n], bar, pred=n > 0, multicast_targets=[0, 1])
    tlx.barrier_wait(bar, 0)
    tlx.barrier_arrive(bar, 1, remote_cta_rank=1)
    v = tlx.local_load(buf)
    tlx.local_store(buf, v + 1.0)
    tr = tlx.local_trans(buf)
    sl = tlx.local_slice(buf, [0, 0], [BM // 2, BK])
    re = tlx.local_reinterpret(buf, tl.bfloat16)
    acc = tlx.async_dot(buf, tr, use_acc=False)
    acc = tlx.async_dot_wait(0, acc)
    tlx.fence_async_shared()
    tlx.async_descriptor_store(a_desc, buf, [0, 0])
    tlx.async_descriptor_store_wait(0)
    offs = tl.arange(0, BM)[:, None] * BK + tl.arange(0, BK)[None, :]
    tok = tlx.async_load(x_ptr + offs, a[0], mask=offs < n)
    tlx.async_load_commit_group()
    tlx.async_load_wait_group(0)
    tlx.named_barrier_arrive(1, 256)
    tlx.named_barrier_wait(1, 256)
    c = tlx.clock64()
    rk = tlx.cluster_cta_rank() + tlx.cluster_size_1d() + tlx.thread_id(0)
)",
                  "a_desc:desc<fp16,64x64>,x_ptr:*fp16,n:i32,BM=64,BK=64,NS=3");
  ASSERT_EQ(r.error, "");
  const std::string& ir = r.ir;
  EXPECT_HAS(ir, "_a = local_alloc {storage = \"smem\"} : buffer<3x64x64xfp16, smem>");
  EXPECT_HAS(ir, "_t = local_alloc {storage = \"tmem\"} : buffer<1x64x64xfp32, tmem>");
  EXPECT_HAS(ir, "_bars = alloc_barriers {arrive_count = 2, warp = 0} : barrier<3>");
  EXPECT_HAS(ir, "{arrive_count = 128, warp = 1, num_warps = 4, num_arrivals = 1} : barrier<2>");
  EXPECT_HAS(ir, "_buf = local_view %3_a, %8_i : buffer<1x64x64xfp16, smem>");
  EXPECT_HAS(ir, "_bar = local_view %5_bars, %8_i : barrier<1>");
  EXPECT_HAS(ir,
             "constant {value = 8192} : i32\n  barrier_expect_bytes %10_bar, %11 {has_pred = 0}");
  EXPECT_HAS(ir, "async_desc_load %0_a_desc, %9_buf, %10_bar, %14, %2_n, %13 {has_pred = 1, "
                 "multicast_mask = 3, multicast_operands = 0}");
  EXPECT_HAS(ir, "barrier_wait %10_bar, %15 {has_pred = 0}");
  EXPECT_HAS(ir, "{arrive_count = 1, has_remote_cta_rank = 1, has_pred = 0}");
  EXPECT_HAS(ir, "_v = local_load %9_buf : tensor<64x64xfp16>");
  EXPECT_HAS(ir, "local_store %9_buf, %");
  EXPECT_HAS(ir, "_tr = local_trans %9_buf {order = [1, 0]} : buffer<1x64x64xfp16, smem>");
  EXPECT_HAS(ir, "{offsets = [0, 0], sizes = [32, 64]} : buffer<1x32x64xfp16, smem>");
  EXPECT_HAS(ir, "_re = local_reinterpret %9_buf : buffer<1x64x64xbf16, smem>");
  EXPECT_HAS(ir, "_acc = async_dot %9_buf, %20_tr, %23, %24 {has_use_acc = 1, has_pred = 0} : "
                 "tensor<64x64xfp32>");
  EXPECT_HAS(ir, "_acc = async_dot_wait %25_acc {pendings = 0} : tensor<64x64xfp32>");
  EXPECT_HAS(ir, "fence {kind = \"async_shared\"}");
  EXPECT_HAS(ir, "async_desc_store_wait {pendings = 0}");
  EXPECT_HAS(ir, "_tok = async_load %");
  EXPECT_HAS(ir, "{has_mask = 1, has_other = 0} : token");
  EXPECT_HAS(ir, "= async_commit_group : token\n  async_wait_group {pendings = 0}");
  EXPECT_HAS(ir, "named_barrier_arrive %");
  EXPECT_HAS(ir, "_c = clock64 : i64");
  EXPECT_HAS(ir, "= cluster_size : i32");
}

TEST(SpecializeTlx, AsyncTasksBecomeRegionsWithOneTaskPerReplica) {
  Result r = spec(R"(
@ww.jit
def k(x_ptr, n):
    bars = tlx.alloc_barriers(2)
    base = n * 2
    with tlx.async_tasks():
        with tlx.async_task("default"):
            tlx.barrier_arrive(bars[0])
        with tlx.async_task(num_warps=4, num_regs=232, replicate=2, warp_group_start_id=4):
            rid: tl.constexpr = tlx.async_task_replica_id()
            tl.static_assert(rid < 2)
            tlx.barrier_wait(bars[rid], 0)
            tl.store(x_ptr + base + rid, 1.0)
    tl.store(x_ptr, 2.0)
)",
                  "x_ptr:*fp32,n:i32", [] {
                    CompileOptions o;
                    o.numWarps = 4;
                    return o;
                  }());
  ASSERT_EQ(r.error, "");
  const std::string& ir = r.ir;
  EXPECT_HAS(ir, "  async_tasks {\n    async_task {default = 1, num_warps = 4, num_regs = 0, "
                 "replicate = 1, replica = 0, warp_group_start_id = -1, name = \"default\"} {\n");
  EXPECT_HAS(ir, "async_task {default = 0, num_warps = 4, num_regs = 232, replicate = 2, replica = "
                 "0, warp_group_start_id = 4, name = \"task\"}");
  EXPECT_HAS(ir, "async_task {default = 0, num_warps = 4, num_regs = 232, replicate = 2, replica = "
                 "1, warp_group_start_id = 4, name = \"task\"}");
  // Each replica sees its own id as a constant; the outer `base` is captured by use.
  EXPECT_EQ(count(ir, "constant {value = 1} : i32"), 2);
  EXPECT_EQ(count(ir, "addptr %0_x_ptr, %4_base"), 2);
  EXPECT_HAS(ir, "    }\n  }\n  %21 = constant {value = 2.0} : fp32\n  store %0_x_ptr, %21");
}

TEST(SpecializeRobustness, HostileInputsFailFastWithAnError) {
  // Each of these would loop for ever, exhaust memory or build a huge IR if unchecked.
  EXPECT_EQ(firstLine(kernelBody("    X: tl.constexpr = 3 ** (2 ** 62)\n").error),
            "test.py:6:25: error: compile-time integer overflow in '**' (3, 4611686018427387904)");
  EXPECT_EQ(kernelBody("    X: tl.constexpr = 1 ** (2 ** 62) + 0 ** (2 ** 62)\n"
                       "    tl.static_assert(X == 1)\n")
                .error,
            "");
  EXPECT_EQ(firstLine(kernelBody("    for i in tl.static_range(4000):\n"
                                 "        for j in tl.static_range(4000):\n            pass\n")
                          .error),
            "test.py:7:18: error: tl.static_range would unroll 4000 more iterations (at most 4096 "
            "per loop and 65536 in a kernel)");
  EXPECT_EQ(firstLine(kernelBody("    t: tl.constexpr = (1, 2) * (2 ** 40)\n").error),
            "test.py:6:30: error: tuple repetition would make more than 65536 elements");
  EXPECT_EQ(firstLine(kernelBody("    z = tl.zeros((2048, 1024), dtype=tl.float32)\n").error),
            "test.py:6:18: error: tl.zeros's shape 2048x1024 has more than 1048576 elements, the "
            "most a block tensor may hold");
  EXPECT_EQ(firstLine(kernelBody("    y = int(1e30)\n").error),
            "test.py:6:13: error: cannot convert 1e+30 to a 64-bit int");
}

TEST(SpecializeTl, ScalarsGainDimensionsBySplatting) {
  Result r = kernelBody("    v = n[None]\n    w = tl.expand_dims(n, 0)\n"
                        "    s = tl.sum(tl.arange(0, 16), axis=0, keep_dims=True)\n");
  ASSERT_EQ(r.error, "");
  EXPECT_HAS(r.ir, "_v = splat %1_n : tensor<1xi32>");
  EXPECT_HAS(r.ir, "_w = splat %1_n : tensor<1xi32>");
  EXPECT_HAS(r.ir, "_s = splat %");
  EXPECT_LACKS(r.ir, "expand_dims");
}

TEST(SpecializeHelpers, ReturnsOfDifferentKindsOnRunTimePathsAreAnError) {
  // An explicit `return` (None) on one path and a value on the other.
  Result r = spec(R"(
@ww.jit
def f(c, a):
    if c > 0:
        return a
    return

@ww.jit
def k(x_ptr, n):
    tl.store(x_ptr, f(n, 1.0))
)",
                  "x_ptr:*fp32,n:i32");
  EXPECT_EQ(firstLine(r.error),
            "test.py:7:5: error: 'f' returns 1.0 when this run-time condition "
            "holds but None otherwise; return values of one type on every path");
  EXPECT_HAS(r.error, "test.py:13:21: note: in 'f' called from here");
}

TEST(SpecializeHelpers, APathWithoutReturnGivesPoison) {
  // Triton: a path that ends without `return` in a function returning a value elsewhere returns
  // poison of that value's type; here a zero (any value refines poison).
  Result r = spec(R"(
@ww.jit
def f(c, a):
    if c > 0:
        return a + 1.0

@ww.jit
def k(x_ptr, n):
    tl.store(x_ptr, f(n, tl.load(x_ptr)))
)",
                  "x_ptr:*fp32,n:i32");
  ASSERT_EQ(r.error, "");
  EXPECT_HAS(r.ir, "constant {value = 0.0} : fp32");
}

TEST(SpecializeConstexpr, TritonImportSpellingsResolve) {
  Result r = specializeSource(R"(
import triton
import triton.language as tl
from triton.language.extra import tlx
import triton.language.extra.libdevice as libdevice

@triton.jit
def k(x_ptr, n):
    tl.static_assert(triton.cdiv(10, 4) == 3 and tlx.size_of(tl.int64) == 8)
    x = tl.load(x_ptr + tl.arange(0, 16))
    tl.store(x_ptr + tl.arange(0, 16), libdevice.pow(x, 2.0) + tl.math.exp2(x))
)",
                              "k", "x_ptr:*fp32,n:i32");
  ASSERT_EQ(r.error, "");
  EXPECT_HAS(r.ir, " = pow ");
  EXPECT_HAS(r.ir, " = exp2 ");
}

TEST(SpecializeTl, StaticPrintWritesAtCompileTime) {
  testing::internal::CaptureStderr();
  Result r = kernelBody("    tl.static_print('BLOCK is', BLOCK, tl.float16)\n");
  std::string out = testing::internal::GetCapturedStderr();
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(out, "BLOCK is 128 tl.float16\n");
}

// ---------------------------------------------------------------------------------------------
// End to end: kernels specialized from source run in the interpreter and match a CPU reference.
// These check the meaning of the IR the specializer produces, not just its shape.
// ---------------------------------------------------------------------------------------------

namespace {
CompiledKernel compileFile(const std::string& file, const std::string& kernel,
                           const std::string& sig) {
  CompileRequest req;
  req.files = readSourceWithImports(std::string(WW_SOURCE_DIR) + "/" + file);
  req.kernel = kernel;
  req.signature = parseSignature(sig);
  req.stage = Stage::TileIR;
  return compile(req);
}

template <typename T> InterpArg buf(std::vector<T>& v) {
  return InterpArg::buffer(v.data(), v.size() * sizeof(T));
}

std::vector<float> randomFloats(size_t n, unsigned seed) {
  std::vector<float> v(n);
  uint32_t s = seed * 2654435761u + 1;
  for (float& x : v) {
    s = s * 1664525u + 1013904223u;
    x = static_cast<float>(s >> 8) / float(1 << 24) * 4.0f - 2.0f;
  }
  return v;
}
} // namespace

TEST(SpecializeEndToEnd, VectorAddPersistentMatchesReference) {
  CompiledKernel k =
      compileFile("python/warpweave/ops/kernels/vector_add.py", "add_kernel_persistent",
                  "x_ptr:*fp32:16,y_ptr:*fp32:16,out_ptr:*fp32:16,n:i32,BLOCK=64");
  const int n = 1000;
  std::vector<float> x = randomFloats(n, 1), y = randomFloats(n, 2), out(n, NAN);
  int grid[3] = {3, 1, 1};
  interpret(k, grid, {buf(x), buf(y), buf(out), InterpArg::integer(n)});
  for (int i = 0; i < n; ++i) ASSERT_FLOAT_EQ(out[i], x[i] + y[i]) << i;
}

TEST(SpecializeEndToEnd, OnlineSoftmaxMatchesReference) {
  CompiledKernel k = compileFile("python/warpweave/ops/kernels/softmax.py", "softmax_online_kernel",
                                 "out_ptr:*fp32:16,in_ptr:*fp32:16,in_row_stride:i32,"
                                 "out_row_stride:i32,n_cols:i32,BLOCK=64");
  const int rows = 3, cols = 150, stride = 160;
  std::vector<float> in = randomFloats(rows * stride, 3), out(rows * stride, NAN);
  int grid[3] = {rows, 1, 1};
  interpret(k, grid,
            {buf(out), buf(in), InterpArg::integer(stride), InterpArg::integer(stride),
             InterpArg::integer(cols)});
  for (int r = 0; r < rows; ++r) {
    double m = -INFINITY, s = 0;
    for (int c = 0; c < cols; ++c) m = std::max(m, double(in[r * stride + c]));
    for (int c = 0; c < cols; ++c) s += std::exp(in[r * stride + c] - m);
    for (int c = 0; c < cols; ++c)
      ASSERT_NEAR(out[r * stride + c], std::exp(in[r * stride + c] - m) / s, 1e-6) << r << "," << c;
  }
}

TEST(SpecializeEndToEnd, MatmulWithLeakyReluMatchesReference) {
  CompiledKernel k = compileFile(
      "python/warpweave/ops/kernels/matmul.py", "matmul_kernel",
      "a_ptr:*fp32:16,b_ptr:*fp32:16,c_ptr:*fp32:16,M:i32,N:i32,K:i32,stride_am:i32,"
      "stride_ak:i32:1,stride_bk:i32,stride_bn:i32:1,stride_cm:i32,stride_cn:i32:1,BLOCK_M=16,"
      "BLOCK_N=16,BLOCK_K=16,GROUP_M=2,ACTIVATION=\"leaky_relu\"");
  const int M = 40, N = 24, K = 36;
  std::vector<float> a = randomFloats(M * K, 4), bm = randomFloats(K * N, 5), c(M * N, NAN);
  int grid[3] = {3 * 2, 1, 1};
  interpret(k, grid,
            {buf(a), buf(bm), buf(c), InterpArg::integer(M), InterpArg::integer(N),
             InterpArg::integer(K), InterpArg::integer(K), InterpArg::integer(N),
             InterpArg::integer(N)});
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      double s = 0;
      for (int kk = 0; kk < K; ++kk) s += double(a[i * K + kk]) * bm[kk * N + j];
      double want = s >= 0 ? s : 0.01 * s;
      // fp32 operands default to tf32 in tl.dot, as in Triton: allow its rounding.
      ASSERT_NEAR(c[i * N + j], want, 2e-2 + 2e-3 * std::abs(want)) << i << "," << j;
    }
}

TEST(SpecializeEndToEnd, RowMaxWithIndicesMatchesReference) {
  CompiledKernel k = compileFile("python/warpweave/ops/kernels/reduction.py", "row_max_kernel",
                                 "x_ptr:*fp32:16,out_ptr:*fp32:16,out_index_ptr:*i32:16,"
                                 "n_rows:i32,n_cols:i32,stride_row:i32,BLOCK_M=4,BLOCK_N=32");
  const int rows = 7, cols = 77;
  std::vector<float> x = randomFloats(rows * cols, 6), out(rows, NAN);
  std::vector<int32_t> idx(rows, -1);
  int grid[3] = {2, 1, 1};
  interpret(k, grid,
            {buf(x), buf(out), buf(idx), InterpArg::integer(rows), InterpArg::integer(cols),
             InterpArg::integer(cols)});
  for (int r = 0; r < rows; ++r) {
    int best = 0;
    for (int c = 1; c < cols; ++c)
      if (x[r * cols + c] > x[r * cols + best]) best = c;
    EXPECT_EQ(out[r], x[r * cols + best]) << r;
    EXPECT_EQ(idx[r], best) << r;
  }
}

namespace {
/// C = A @ B through the two TLX GEMM kernels, checked against a double-precision product.
/// `tileRows`: the rows of the A and C descriptor blocks (BLOCK_M, or half of it when two
/// consumers split the tile).
void runTlxGemm(const std::string& file, const std::string& kernel, const std::string& constexprs,
                int gridX, int tileRows, int BN, int BK) {
  auto block = [](int r, int c) {
    return "desc<fp32," + std::to_string(r) + "x" + std::to_string(c) + ">";
  };
  std::string sig = "a_desc:" + block(tileRows, BK) + ",b_desc:" + block(BK, BN) +
                    ",c_desc:" + block(tileRows, BN) + ",M:i32,N:i32,K:i32," + constexprs;
  CompiledKernel k = compileFile(file, kernel, sig);
  const int M = 64, N = 48, K = 80;
  std::vector<float> a = randomFloats(M * K, 7), bm = randomFloats(K * N, 8), c(M * N, NAN);
  int grid[3] = {gridX, 1, 1};
  interpret(k, grid,
            {InterpArg::descriptor(a.data(), a.size() * 4, {M, K}, {K, 1}),
             InterpArg::descriptor(bm.data(), bm.size() * 4, {K, N}, {N, 1}),
             InterpArg::descriptor(c.data(), c.size() * 4, {M, N}, {N, 1}), InterpArg::integer(M),
             InterpArg::integer(N), InterpArg::integer(K)});
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      double s = 0;
      for (int kk = 0; kk < K; ++kk) s += double(a[i * K + kk]) * bm[kk * N + j];
      ASSERT_NEAR(c[i * N + j], s, 2e-2 + 2e-3 * std::abs(s)) << i << "," << j;
    }
}
} // namespace

TEST(SpecializeEndToEnd, TlxPipelinedGemmMatchesReference) {
  // 64x48 in 32x16 tiles: 2 x 3 programs; K = 80 in 16-wide steps through a 3-stage ring.
  runTlxGemm("python/warpweave/ops/kernels/hopper/gemm_pipelined.py", "gemm_pipelined_kernel",
             "BLOCK_M=32,BLOCK_N=16,BLOCK_K=16,GROUP_M=2,NUM_STAGES=3", 6, 32, 16, 16);
}

TEST(SpecializeEndToEnd, TlxWarpSpecializedGemmMatchesReference) {
  // A producer task and two replicated consumers, each owning half of a 32-row tile; two
  // persistent programs walk the 2 x 3 tiles.
  runTlxGemm("python/warpweave/ops/kernels/hopper/gemm_ws.py", "gemm_ws_kernel",
             "BLOCK_M=32,BLOCK_N=16,BLOCK_K=16,GROUP_M=2,NUM_STAGES=3,NUM_SMS=2", 2, 16, 16, 16);
}

TEST(SpecializeEndToEnd, TlxWarpSpecializedAttentionMatchesReference) {
  // Two heads of 64 positions, HEAD_DIM 16; each program owns 2 x 16 query rows.
  const int heads = 2, nctx = 64, d = 16, bm = 16;
  CompiledKernel k =
      compileFile("python/warpweave/ops/kernels/hopper/attention_ws.py", "attention_ws_kernel",
                  "q_desc:desc<fp32,16x16>,k_desc:desc<fp32,16x16>,v_desc:desc<fp32,16x16>,"
                  "o_desc:desc<fp32,16x16>,lse_ptr:*fp32:16,sm_scale:fp32,N_CTX:i32:16,HEAD_DIM=16,"
                  "BLOCK_M=16,BLOCK_N=16,NUM_STAGES=2");
  const size_t n = size_t(heads) * nctx * d;
  std::vector<float> q = randomFloats(n, 9), kk = randomFloats(n, 10), v = randomFloats(n, 11);
  std::vector<float> o(n, NAN), lse(size_t(heads) * nctx, NAN);
  const double scale = 0.25;
  auto desc = [&](std::vector<float>& t) {
    return InterpArg::descriptor(t.data(), t.size() * 4, {heads * nctx, d}, {d, 1});
  };
  int grid[3] = {nctx / (2 * bm), heads, 1};
  interpret(k, grid,
            {desc(q), desc(kk), desc(v), desc(o), buf(lse), InterpArg::real(scale),
             InterpArg::integer(nctx)});
  for (int h = 0; h < heads; ++h)
    for (int i = 0; i < nctx; ++i) {
      std::vector<double> s(nctx);
      double m = -INFINITY;
      for (int j = 0; j < nctx; ++j) {
        double dotp = 0;
        for (int c = 0; c < d; ++c)
          dotp += double(q[(h * nctx + i) * d + c]) * kk[(h * nctx + j) * d + c];
        s[j] = dotp * scale;
        m = std::max(m, s[j]);
      }
      double l = 0;
      for (int j = 0; j < nctx; ++j) l += std::exp(s[j] - m);
      for (int c = 0; c < d; ++c) {
        double acc = 0;
        for (int j = 0; j < nctx; ++j) acc += std::exp(s[j] - m) / l * v[(h * nctx + j) * d + c];
        ASSERT_NEAR(o[(h * nctx + i) * d + c], acc, 2e-2) << h << "," << i << "," << c;
      }
      double wantLse = (m + std::log(l)) / std::log(2.0); // base-2 log-sum-exp of the scores
      ASSERT_NEAR(lse[h * nctx + i], wantLse, 2e-2) << h << "," << i;
    }
}
