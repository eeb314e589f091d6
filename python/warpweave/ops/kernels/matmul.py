"""Matrix multiplication C = act(A @ B) with tl.dot, A [M, K], B [K, N], C [M, N], any strides.

A and B are fp16 or bf16 (both the same), accumulation is fp32 and C is stored in its own element
type. ACTIVATION is "" (none), "relu" or "leaky_relu" and is fused into the epilogue.

Programs walk the output tiles in groups of GROUP_M tile-rows: consecutive programs share the same
few rows of A and sweep across B, so the tiles they read are still in L2.
    grid = (cdiv(M, BLOCK_M) * cdiv(N, BLOCK_N),)
    constexprs: BLOCK_M, BLOCK_N, BLOCK_K (e.g. 128, 256, 32), GROUP_M (e.g. 8), ACTIVATION
    signature: a_ptr:*fp16:16, b_ptr:*fp16:16, c_ptr:*fp16:16, M:i32, N:i32, K:i32,
               stride_am:i32, stride_ak:i32:1, stride_bk:i32, stride_bn:i32:1,
               stride_cm:i32, stride_cn:i32:1,
               BLOCK_M=128, BLOCK_N=256, BLOCK_K=32, GROUP_M=8, ACTIVATION=""
    launch: num_warps=8, num_stages=5

On sm_90a the compiler software-pipelines the K loop (src/transforms/SoftwarePipeline.cpp): the
two loads become cp.async copies into num_stages shared-memory buffers, num_stages - 2 steps
ahead, and tl.dot an asynchronous wgmma reading them. The loads stay 16-byte copies when the
strides and K are multiples of 8 elements (the JIT's `:16` specialization proves it).
"""
import warpweave as ww
import warpweave.language as tl


@ww.jit
def grouped_tile(tile_id, num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
    """(pid_m, pid_n) of `tile_id` in grouped order: GROUP_M tile-rows at a time, column-major."""
    tiles_per_group = GROUP_M * num_pid_n
    group = tile_id // tiles_per_group
    first_pid_m = group * GROUP_M
    group_rows = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + (tile_id % tiles_per_group) % group_rows
    pid_n = (tile_id % tiles_per_group) // group_rows
    return pid_m, pid_n


@ww.jit
def wrapped_tile(M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr):
    """This program's tile (pid_m, pid_n), in grouped_tile's order, and its rows and columns
    (offs_am, offs_bn) wrapped around (modulo M and N) instead of masked past the edge: the
    loads stay in bounds and unmasked, and the store drops the duplicated results."""
    pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    pid_m, pid_n = grouped_tile(pid, num_pid_m, num_pid_n, GROUP_M)
    offs_am = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    offs_bn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    offs_am = tl.max_contiguous(tl.multiple_of(offs_am, BLOCK_M), BLOCK_M)
    offs_bn = tl.max_contiguous(tl.multiple_of(offs_bn, BLOCK_N), BLOCK_N)
    return pid_m, pid_n, offs_am, offs_bn


@ww.jit
def leaky_relu(x, slope: tl.constexpr = 0.01):
    return tl.where(x >= 0, x, slope * x)


@ww.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                  stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                  GROUP_M: tl.constexpr, ACTIVATION: tl.constexpr):
    pid_m, pid_n, offs_am, offs_bn = wrapped_tile(M, N, BLOCK_M, BLOCK_N, GROUP_M)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + (offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak)
    b_ptrs = b_ptr + (offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn)

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        k_left = K - k * BLOCK_K
        a = tl.load(a_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk

    if ACTIVATION == "relu":
        acc = tl.maximum(acc, 0.0)
    elif ACTIVATION == "leaky_relu":
        acc = leaky_relu(acc)
    c = acc.to(c_ptr.dtype.element_ty)

    offs_cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    c_ptrs = c_ptr + stride_cm * offs_cm[:, None] + stride_cn * offs_cn[None, :]
    c_mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
    tl.store(c_ptrs, c, mask=c_mask)
