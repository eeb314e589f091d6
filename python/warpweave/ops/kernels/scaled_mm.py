"""Scaled fp8 GEMM, torch._scaled_mm's semantics: C = (A @ B) * scale_a * scale_b (+ bias).

A [M, K] and B [K, N] are fp8 (e4m3 = tl.float8e4nv or e5m2 = tl.float8e5, mixed allowed), the
products are summed in fp32, the scales applied to the fp32 sum, the bias (fp16 / bf16 / fp32,
[N]) added in fp32, and C is stored once in its own element type (fp16, bf16 or fp32).

Scales are fp32: per tensor (one value each: ROWWISE_A / ROWWISE_B False) or per row of A
(scale_a [M]) and per column of B (scale_b [N]); torch's "rowwise" recipe is both.

B is read through its strides as [BLOCK_N, BLOCK_K] tiles of B^T, K contiguous when B is
column-major (torch._scaled_mm's layout: B = Bt.t() for a row-major Bt [N, K]), and multiplied
as the tile's transpose: wgmma reads 8-bit operands K-major only, so on sm_90a the copies of
both operands stay K-major and the K loop is software-pipelined (cp.async stages, async wgmma
...k32.f32.e4m3/e5m2), as for tests/python/eight_bit_dot_kernels.py's matmul.

Accumulation (FAST_ACCUM, torch._scaled_mm's use_fast_accum): Hopper's fp8 wgmma sums its k32
steps with reduced precision. FAST_ACCUM=False (the default) promotes: each BLOCK_K step's dot
has max_num_imprecise_acc=BLOCK_K, so its wgmma chain sums into zeroed partial registers that are
added to the fp32 accumulator (ir/DotTypes.h). The loop is software-pipelined as well: each
step's wgmma chain runs into the partial while the next copies are issued, and the next step adds
it (one partial an iteration, SoftwarePipeline.cpp's issuePromoted); promoted configurations take
128x128 tiles (the partial beside the accumulator). FAST_ACCUM=True accumulates in the wgmma
registers across the whole K loop.

Programs walk the output tiles in groups of GROUP_M tile-rows (kernels/matmul.py's order).
    grid = (cdiv(M, BLOCK_M) * cdiv(N, BLOCK_N),)
    constexprs: BLOCK_M, BLOCK_N, BLOCK_K (128, 256, 128 on the H200), GROUP_M (8),
                ROWWISE_A, ROWWISE_B, HAS_BIAS
    signature: a_ptr:*fp8e4nv:16, b_ptr:*fp8e4nv:16, c_ptr:*bf16:16, scale_a_ptr:*fp32,
               scale_b_ptr:*fp32, bias_ptr:*bf16, M:i32, N:i32, K:i32,
               stride_am:i32, stride_ak:i32:1, stride_bk:i32:1, stride_bn:i32,
               stride_cm:i32, stride_cn:i32:1,
               BLOCK_M=128, BLOCK_N=256, BLOCK_K=128, GROUP_M=8, ROWWISE_A=0, ROWWISE_B=0,
               HAS_BIAS=0, FAST_ACCUM=1
    launch: num_warps=8, num_stages=4
"""
import warpweave as ww
import warpweave.language as tl

from .matmul import grouped_tile, wrapped_tile


@ww.jit
def scaled_mm_kernel(a_ptr, b_ptr, c_ptr, scale_a_ptr, scale_b_ptr, bias_ptr, M, N, K,
                     stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                     GROUP_M: tl.constexpr, ROWWISE_A: tl.constexpr, ROWWISE_B: tl.constexpr,
                     HAS_BIAS: tl.constexpr, FAST_ACCUM: tl.constexpr = False):
    pid_m, pid_n, offs_am, offs_bn = wrapped_tile(M, N, BLOCK_M, BLOCK_N, GROUP_M)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + (offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak)
    # [BLOCK_N, BLOCK_K] tiles of B^T: K-major, as wgmma wants 8-bit operands.
    bt_ptrs = b_ptr + (offs_bn[:, None] * stride_bn + offs_k[None, :] * stride_bk)

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        k_left = K - k * BLOCK_K
        a = tl.load(a_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
        bt = tl.load(bt_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
        if FAST_ACCUM:
            acc = tl.dot(a, bt.T, acc)
        else:
            acc = tl.dot(a, bt.T, acc, max_num_imprecise_acc=BLOCK_K)
        a_ptrs += BLOCK_K * stride_ak
        bt_ptrs += BLOCK_K * stride_bk

    offs_cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    if ROWWISE_A:
        acc = acc * tl.load(scale_a_ptr + offs_am)[:, None]
    else:
        acc = acc * tl.load(scale_a_ptr)
    if ROWWISE_B:
        acc = acc * tl.load(scale_b_ptr + offs_bn)[None, :]
    else:
        acc = acc * tl.load(scale_b_ptr)
    if HAS_BIAS:
        acc = acc + tl.load(bias_ptr + offs_bn).to(tl.float32)[None, :]
    c = acc.to(c_ptr.dtype.element_ty)

    c_ptrs = c_ptr + stride_cm * offs_cm[:, None] + stride_cn * offs_cn[None, :]
    c_mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
    tl.store(c_ptrs, c, mask=c_mask)


@ww.jit
def scaled_mm_tma_kernel(a_desc, bt_desc, c_ptr, scale_a_ptr, scale_b_ptr, bias_ptr, M, N, K,
                         stride_cm, stride_cn,
                         BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                         GROUP_M: tl.constexpr, ROWWISE_A: tl.constexpr,
                         ROWWISE_B: tl.constexpr, HAS_BIAS: tl.constexpr,
                         FAST_ACCUM: tl.constexpr = False):
    """scaled_mm_kernel with A and B^T read through host TMA descriptors (a_desc over A [M, K],
    block [BLOCK_M, BLOCK_K]; bt_desc over B^T [N, K], block [BLOCK_N, BLOCK_K]): on sm_90a the
    K loop's copies become TMA loads into a ring of shared-memory stages, each completing on a
    barrier (src/transforms/SoftwarePipeline.cpp), and the edges are zero-filled by TMA. K must
    be a multiple of 16 (16-byte rows)."""
    pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    pid_m, pid_n = grouped_tile(pid, num_pid_m, num_pid_n, GROUP_M)
    off_m = pid_m * BLOCK_M
    off_n = pid_n * BLOCK_N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = a_desc.load([off_m, k * BLOCK_K])
        bt = bt_desc.load([off_n, k * BLOCK_K])
        if FAST_ACCUM:
            acc = tl.dot(a, bt.T, acc)
        else:
            acc = tl.dot(a, bt.T, acc, max_num_imprecise_acc=BLOCK_K)

    offs_cm = off_m + tl.arange(0, BLOCK_M)
    offs_cn = off_n + tl.arange(0, BLOCK_N)
    if ROWWISE_A:
        acc = acc * tl.load(scale_a_ptr + offs_cm, mask=offs_cm < M, other=0.0)[:, None]
    else:
        acc = acc * tl.load(scale_a_ptr)
    if ROWWISE_B:
        acc = acc * tl.load(scale_b_ptr + offs_cn, mask=offs_cn < N, other=0.0)[None, :]
    else:
        acc = acc * tl.load(scale_b_ptr)
    if HAS_BIAS:
        acc = acc + tl.load(bias_ptr + offs_cn, mask=offs_cn < N, other=0.0).to(tl.float32)[None, :]
    c = acc.to(c_ptr.dtype.element_ty)
    c_ptrs = c_ptr + stride_cm * offs_cm[:, None] + stride_cn * offs_cn[None, :]
    tl.store(c_ptrs, c, mask=(offs_cm[:, None] < M) & (offs_cn[None, :] < N))
