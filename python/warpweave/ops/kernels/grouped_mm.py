"""Grouped GEMM for mixture-of-experts layers, torch._grouped_mm's semantics, one launch over
all groups. `offs` [G] (int32) holds the cumulative ends of the groups along the ragged
dimension: group g spans [offs[g-1], offs[g]) (offs[-1] read as 0); empty groups are allowed.

grouped_mm_kernel, ragged M (2-D A x 3-D B, the MoE forward and dA):
    C [M_total, N]: rows of group g = A[rows of g] @ B[g], A [M_total, K], B [G, K, N].
  Rows from offs[G-1] to M_total belong to no group: they are written as zeros (torch leaves
  them uninitialized), so the result and the gradients built from it are defined everywhere.
  Tile scheduling without a host read of offs: the grid covers an upper bound on the tile-rows
  that the groups need, cdiv(M_total, BLOCK_M) + G (each group adds at most one partial
  tile-row; the tail is group G), times the tile-columns. Each program loads the G + 1 groups'
  bounds, counts their tile-rows (cdiv of the sizes), finds its own group with a cumulative sum
  and the tile-row within it; programs past the last tile-row run no K steps and store nothing.
  Rows of a partial tile wrap around inside their group (modulo its size) so the loads stay in
  bounds and unmasked; the store keeps the group's rows. tile-columns vary fastest, so programs
  that run together share A's rows and one expert's B (in L2).
    grid = ((cdiv(M_total, BLOCK_M) + G) * cdiv(N, BLOCK_N),)
    constexprs: BLOCK_M, BLOCK_N, BLOCK_K (128, 256, 32 on the H200), BLOCK_G (a power of two
                > G)
    launch: num_warps=8, num_stages=5 (the K loop is software-pipelined on sm_90a as
            kernels/matmul.py's)

grouped_mm_ragged_k_kernel, ragged K (2-D A x 2-D B -> 3-D C, the MoE weight gradient dB):
    C [G, M, N]: C[g] = A[:, cols of g] @ B[rows of g], A [M, K_total], B [K_total, N];
  an empty group gives zeros.
    grid = (cdiv(M, BLOCK_M) * cdiv(N, BLOCK_N), G)

PRECISION: tl.dot's input_precision (None: the default; "ieee" for fp32 operands, as torch
multiplies fp32 in full precision).
"""
import warpweave as ww
import warpweave.language as tl


@ww.jit
def group_bounds(offs_ptr, G, total, BLOCK_G: tl.constexpr):
    """(starts, ends) of groups 0..BLOCK_G-1: group g < G spans [offs[g-1], offs[g]), group G
    the tail [offs[G-1], total), groups past G are empty at `total`."""
    gs = tl.arange(0, BLOCK_G)
    ends = tl.load(offs_ptr + gs, mask=gs < G, other=0)
    ends = tl.minimum(tl.maximum(tl.where(gs < G, ends, total), 0), total)
    prev = tl.load(offs_ptr + gs - 1, mask=(gs > 0) & (gs <= G), other=0)
    starts = tl.minimum(tl.maximum(tl.where(gs > G, total, prev), 0), total)
    # Offsets are clamped to [0, total] and a group ending before it starts is empty: no
    # access outside the arrays whatever offs holds (decreasing offsets are undefined, as for
    # torch: groups may overlap).
    return starts, tl.maximum(ends, starts)


@ww.jit
def grouped_mm_kernel(a_ptr, b_ptr, c_ptr, offs_ptr, G, M_total, N, K,
                      stride_am, stride_ak, stride_bg, stride_bk, stride_bn,
                      stride_cm, stride_cn,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                      BLOCK_G: tl.constexpr, PRECISION: tl.constexpr = None):
    pid = tl.program_id(axis=0)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    tile_m = pid // num_pid_n
    pid_n = pid % num_pid_n

    # Which group this tile-row belongs to, and where it starts inside it.
    starts, ends = group_bounds(offs_ptr, G, M_total, BLOCK_G)
    tiles = (ends - starts + BLOCK_M - 1) // BLOCK_M
    last = tl.cumsum(tiles, 0)  # tile-rows of groups 0..g
    group = tl.sum((last <= tile_m).to(tl.int32), 0)
    mine = tl.arange(0, BLOCK_G) == group
    row_start = tl.sum(tl.where(mine, starts, 0), 0)
    row_end = tl.sum(tl.where(mine, ends, 0), 0)
    first_tile = tl.sum(tl.where(mine, last - tiles, 0), 0)
    live = group <= G  # a tile-row past the last group's has no work
    size = tl.maximum(row_end - row_start, 1)
    # The tail (group G) only stores zeros: it runs no K steps.
    k_steps = tl.where(group < G, tl.cdiv(K, BLOCK_K), 0)
    expert = tl.minimum(group, G - 1)

    offs_local = (tile_m - first_tile) * BLOCK_M + tl.arange(0, BLOCK_M)
    # (programs without K steps load nothing; their rows point at row 0 all the same)
    offs_am = tl.where(group < G, row_start + offs_local % size, 0)
    offs_bn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    offs_bn = tl.max_contiguous(tl.multiple_of(offs_bn, BLOCK_N), BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + (offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak)
    b_ptrs = (b_ptr + expert.to(tl.int64) * stride_bg
              + (offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn))

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, k_steps):
        k_left = K - k * BLOCK_K
        a = tl.load(a_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
        acc = tl.dot(a, b, acc, input_precision=PRECISION)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c = acc.to(c_ptr.dtype.element_ty)

    offs_cm = row_start + offs_local
    offs_cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    c_ptrs = c_ptr + stride_cm * offs_cm[:, None] + stride_cn * offs_cn[None, :]
    c_mask = live & (offs_local[:, None] < row_end - row_start) & (offs_cn[None, :] < N)
    tl.store(c_ptrs, c, mask=c_mask)


@ww.jit
def grouped_mm_ragged_k_kernel(a_ptr, b_ptr, c_ptr, offs_ptr, M, N, K_total,
                               stride_am, stride_ak, stride_bk, stride_bn,
                               stride_cg, stride_cm, stride_cn,
                               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                               BLOCK_K: tl.constexpr, PRECISION: tl.constexpr = None):
    pid = tl.program_id(axis=0)
    g = tl.program_id(axis=1)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    pid_m = pid // num_pid_n
    pid_n = pid % num_pid_n
    k_end = tl.minimum(tl.maximum(tl.load(offs_ptr + g), 0), K_total)
    k_start = tl.where(g > 0, tl.load(offs_ptr + tl.maximum(g - 1, 0)), 0)
    k_start = tl.minimum(tl.maximum(k_start, 0), k_end)

    offs_am = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    offs_bn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + (offs_am[:, None] * stride_am + (k_start + offs_k)[None, :] * stride_ak)
    b_ptrs = b_ptr + ((k_start + offs_k)[:, None] * stride_bk + offs_bn[None, :] * stride_bn)

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(k_end - k_start, BLOCK_K)):
        k_left = k_end - k_start - k * BLOCK_K
        a = tl.load(a_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
        acc = tl.dot(a, b, acc, input_precision=PRECISION)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c = acc.to(c_ptr.dtype.element_ty)

    offs_cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    c_ptrs = (c_ptr + g.to(tl.int64) * stride_cg
              + stride_cm * offs_cm[:, None] + stride_cn * offs_cn[None, :])
    tl.store(c_ptrs, c, mask=(offs_cm[:, None] < M) & (offs_cn[None, :] < N))
