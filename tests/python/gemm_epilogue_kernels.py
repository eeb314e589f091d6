"""Kernels of the GEMM epilogue tests (tests/python/test_gemm_epilogue.py for sm_90a and in the
interpreter, tests/gpu/test_gemm_epilogue_gpu.py on the H200):

- dot_gemm: the plain tl.dot K loop over pointer tensors (grouped tile order, wrapped row and
  column offsets, K masks), which the compiler software-pipelines with cp.async for sm_90a; C is
  stored as fp16 under an M / N mask, through the conversion from the wgmma accumulator's layout
  to the coalesced one that the epilogue tests look at.

The TLX form of the same loop is tests/python/hopper_gemm_kernels.py's pipelined_gemm.
"""
import warpweave as ww
import warpweave.language as tl


@ww.jit
def dot_gemm(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm,
             stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
             GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    # GROUP_M tile rows at a time, column by column, so that neighbouring programs share tiles.
    per_group = GROUP_M * tiles_n
    first_m = (pid // per_group) * GROUP_M
    rows_here = min(tiles_m - first_m, GROUP_M)
    tile_m = first_m + (pid % per_group) % rows_here
    tile_n = (pid % per_group) // rows_here
    rm = (tile_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    rn = (tile_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    rk = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + rm[:, None] * stride_am + rk[None, :] * stride_ak
    b_ptrs = b_ptr + rk[:, None] * stride_bk + rn[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        left = K - k * BLOCK_K
        a = tl.load(a_ptrs, mask=rk[None, :] < left, other=0.0)
        b = tl.load(b_ptrs, mask=rk[:, None] < left, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    cm = tile_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cn = tile_n * BLOCK_N + tl.arange(0, BLOCK_N)
    c_ptrs = c_ptr + cm[:, None] * stride_cm + cn[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(tl.float16), mask=(cm[:, None] < M) & (cn[None, :] < N))


def check_exact_gemm(kernel, m, n, k, bm, bn, bk, num_warps, num_stages):
    """Runs dot_gemm ("dot") or hopper_gemm_kernels.pipelined_gemm ("tlx") on the GPU with
    operands of -1, 0, 1, whose products are exact (K <= 2048): C must equal the float64
    product rounded to fp16 element for element."""
    import torch

    a = torch.randint(-1, 2, (m, k), device="cuda").to(torch.float16)
    b = torch.randint(-1, 2, (k, n), device="cuda").to(torch.float16)
    want = (a.double() @ b.double()).to(torch.float16)
    c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float16)
    grid = (-(-m // bm) * -(-n // bn),)
    args = (a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0),
            c.stride(1))
    if kernel == "dot":
        dot_gemm[grid](*args, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8,
                       num_warps=num_warps, num_stages=num_stages)
    else:
        from hopper_gemm_kernels import pipelined_gemm

        pipelined_gemm[grid](*args, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, NUM_STAGES=num_stages,
                             num_warps=num_warps)
    torch.cuda.synchronize()
    bad = int((c != want).sum())
    assert bad == 0, f"{kernel} {m}x{n}x{k} {bm}x{bn}x{bk}: {bad} of {m * n} elements differ"
