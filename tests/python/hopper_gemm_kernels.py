"""Kernels of the Hopper GEMM feature tests (tests/python/test_hopper_gemm_features.py in the
interpreter and for sm_90a, tests/gpu/test_hopper_gemm_features_gpu.py on the H200):

- ws_gemm: a warp-specialized TMA GEMM whose operands may arrive column-major (A held as [K, M]
  and B as [N, K] tiles, read by async_dot through tlx.local_trans), in fp16, bf16 or fp8; with
  NUM_CTAS=2 the two CTAs of a cluster share the B tile: each loads one half and multicasts it to
  both, the targets and the half's buffer view chosen at run time from the CTA's rank.
- tile_dot: one async_dot of whole [M, K] x [K, N] tiles loaded with tl.load (any layout the
  transposes allow), for the sm_90a compile checks and small interpreter cases.
- pipelined_gemm: a cp.async (tlx.async_load) software-pipelined GEMM over pointer tensors with
  wrapped (% M, % N) offsets and K masks, at BLOCK 128x256x64 on 8 warps for the no-spill check.
"""
import warpweave as ww
import warpweave.language as tl
from warpweave import tlx


@ww.jit
def ws_gemm(a_desc, b_desc, c_desc, M, N, K, BM: tl.constexpr, BN: tl.constexpr,
            BK: tl.constexpr, NUM_STAGES: tl.constexpr, A_ROW_MAJOR: tl.constexpr,
            B_ROW_MAJOR: tl.constexpr, NUM_CTAS: tl.constexpr, CONSUMERS: tl.constexpr):
    """One BM x BN tile of C per program. The NUM_CTAS CTAs of a cluster (consecutive
    programs) take M-neighbour tiles of one N column and share its B tile; with an odd number of
    M tiles the last cluster of a column has a CTA past the edge (TMA zero-fills its loads and
    drops its stores), which still loads its part of B for its peer.
    a_desc's block is [BM // CONSUMERS, BK] ([BK, BM // CONSUMERS] for a column-major A, whose
    descriptor describes A^T); b_desc's is [BK, BN // NUM_CTAS] ([BN // NUM_CTAS, BK] for B^T);
    c_desc's [BM // CONSUMERS, BN]."""
    SUB_M: tl.constexpr = BM // CONSUMERS
    dtype: tl.constexpr = tlx.dtype_of(a_desc)
    A_BYTES: tl.constexpr = SUB_M * BK * tlx.size_of(dtype)
    B_BYTES: tl.constexpr = BN * BK * tlx.size_of(tlx.dtype_of(b_desc))
    if A_ROW_MAJOR:
        a_bufs = tlx.local_alloc((SUB_M, BK), dtype, NUM_STAGES * CONSUMERS)
    else:
        a_bufs = tlx.local_alloc((BK, SUB_M), dtype, NUM_STAGES * CONSUMERS)
    if B_ROW_MAJOR:
        b_bufs = tlx.local_alloc((BK, BN), tlx.dtype_of(b_desc), NUM_STAGES)
    else:
        b_bufs = tlx.local_alloc((BN, BK), tlx.dtype_of(b_desc), NUM_STAGES)
    a_full = tlx.alloc_barriers(num_barriers=NUM_STAGES * CONSUMERS, arrive_count=1)
    a_free = tlx.alloc_barriers(num_barriers=NUM_STAGES * CONSUMERS, arrive_count=1)
    b_full = tlx.alloc_barriers(num_barriers=NUM_STAGES, arrive_count=1)
    b_free = tlx.alloc_barriers(num_barriers=NUM_STAGES, arrive_count=CONSUMERS)
    # A stage's B half may be multicast only once both CTAs have freed that stage.
    peers_ready = tlx.alloc_barriers(num_barriers=NUM_STAGES, arrive_count=NUM_CTAS)

    pid = tl.program_id(0)
    cluster = pid // NUM_CTAS
    clusters_m = tl.cdiv(tl.cdiv(M, BM), NUM_CTAS)
    off_m = ((cluster % clusters_m) * NUM_CTAS + pid % NUM_CTAS) * BM
    off_n = (cluster // clusters_m) * BN
    num_k = tl.cdiv(K, BK)
    with tlx.async_tasks():
        with tlx.async_task("default"):
            for k in range(0, num_k):
                s = k % NUM_STAGES
                phase = (k // NUM_STAGES) & 1
                off_k = k * BK
                for c in tl.static_range(CONSUMERS):
                    tlx.barrier_wait(tlx.local_view(a_free, s + c * NUM_STAGES), phase ^ 1)
                    full = tlx.local_view(a_full, s + c * NUM_STAGES)
                    tlx.barrier_expect_bytes(full, A_BYTES)
                    a_tile = tlx.local_view(a_bufs, s + c * NUM_STAGES)
                    if A_ROW_MAJOR:
                        tlx.async_descriptor_load(a_desc, a_tile, [off_m + c * SUB_M, off_k], full)
                    else:
                        tlx.async_descriptor_load(a_desc, a_tile, [off_k, off_m + c * SUB_M], full)
                tlx.barrier_wait(tlx.local_view(b_free, s), phase ^ 1)
                full_b = tlx.local_view(b_full, s)
                tlx.barrier_expect_bytes(full_b, B_BYTES)
                b_tile = tlx.local_view(b_bufs, s)
                if NUM_CTAS == 1:
                    if B_ROW_MAJOR:
                        tlx.async_descriptor_load(b_desc, b_tile, [off_k, off_n], full_b)
                    else:
                        tlx.async_descriptor_load(b_desc, b_tile, [off_n, off_k], full_b)
                else:
                    rank = tlx.cluster_cta_rank()
                    ready = tlx.local_view(peers_ready, s)
                    tlx.barrier_arrive(ready, 1)
                    tlx.barrier_arrive(ready, 1, remote_cta_rank=rank ^ 1)
                    tlx.barrier_wait(ready, phase)
                    HALF: tl.constexpr = BN // 2
                    # This CTA's half of the B tile, into its place in both CTAs' buffers.
                    if B_ROW_MAJOR:
                        if rank == 0:
                            half = tlx.local_slice(b_tile, [0, 0], [BK, HALF])
                        else:
                            half = tlx.local_slice(b_tile, [0, HALF], [BK, HALF])
                        tlx.async_descriptor_load(b_desc, half, [off_k, off_n + rank * HALF],
                                                  full_b, multicast_targets=[rank, rank ^ 1])
                    else:
                        if rank == 0:
                            half = tlx.local_slice(b_tile, [0, 0], [HALF, BK])
                        else:
                            half = tlx.local_slice(b_tile, [HALF, 0], [HALF, BK])
                        tlx.async_descriptor_load(b_desc, half, [off_n + rank * HALF, off_k],
                                                  full_b, multicast_targets=[rank, rank ^ 1])
        with tlx.async_task(num_warps=4, replicate=CONSUMERS):
            c = tlx.async_task_replica_id()
            acc = tl.zeros([SUB_M, BN], dtype=tl.float32)
            for k in range(0, num_k):
                s = k % NUM_STAGES
                phase = (k // NUM_STAGES) & 1
                tlx.barrier_wait(tlx.local_view(a_full, s + c * NUM_STAGES), phase)
                tlx.barrier_wait(tlx.local_view(b_full, s), phase)
                a_tile = tlx.local_view(a_bufs, s + c * NUM_STAGES)
                b_tile = tlx.local_view(b_bufs, s)
                if A_ROW_MAJOR:
                    a_op = a_tile
                else:
                    a_op = tlx.local_trans(a_tile)
                if B_ROW_MAJOR:
                    b_op = b_tile
                else:
                    b_op = tlx.local_trans(b_tile)
                acc = tlx.async_dot(a_op, b_op, acc)
                acc = tlx.async_dot_wait(0, acc)
                tlx.barrier_arrive(tlx.local_view(a_free, s + c * NUM_STAGES))
                tlx.barrier_arrive(tlx.local_view(b_free, s))
            c_desc.store([off_m + c * SUB_M, off_n], acc.to(tlx.dtype_of(c_desc)))


@ww.jit
def tile_dot(a_ptr, b_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr,
             A_ROW_MAJOR: tl.constexpr, B_ROW_MAJOR: tl.constexpr):
    """c[M, N] (fp32, row-major) = a @ b for one tile. a is stored [M, K] row-major, or
    [K, M] row-major (a column-major A) when not A_ROW_MAJOR; b [K, N], or [N, K]."""
    rm = tl.arange(0, M)
    rn = tl.arange(0, N)
    rk = tl.arange(0, K)
    if A_ROW_MAJOR:
        a_buf = tlx.local_alloc((M, K), tlx.dtype_of(a_ptr), 1)
        a_tile = tlx.local_view(a_buf, 0)
        tlx.local_store(a_tile, tl.load(a_ptr + rm[:, None] * K + rk[None, :]))
        a_op = a_tile
    else:
        a_buf = tlx.local_alloc((K, M), tlx.dtype_of(a_ptr), 1)
        a_tile = tlx.local_view(a_buf, 0)
        tlx.local_store(a_tile, tl.load(a_ptr + rk[:, None] * M + rm[None, :]))
        a_op = tlx.local_trans(a_tile)
    if B_ROW_MAJOR:
        b_buf = tlx.local_alloc((K, N), tlx.dtype_of(b_ptr), 1)
        b_tile = tlx.local_view(b_buf, 0)
        tlx.local_store(b_tile, tl.load(b_ptr + rk[:, None] * N + rn[None, :]))
        b_op = b_tile
    else:
        b_buf = tlx.local_alloc((N, K), tlx.dtype_of(b_ptr), 1)
        b_tile = tlx.local_view(b_buf, 0)
        tlx.local_store(b_tile, tl.load(b_ptr + rn[:, None] * K + rk[None, :]))
        b_op = tlx.local_trans(b_tile)
    tlx.fence_async_shared()
    acc = tlx.async_dot(a_op, b_op)
    acc = tlx.async_dot_wait(0, acc)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc)


@ww.jit
def pipelined_gemm(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                   stride_cm, stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                   BLOCK_K: tl.constexpr, NUM_STAGES: tl.constexpr):
    """C = A @ B (fp16 out) with NUM_STAGES cp.async stages and one wgmma in flight; a program
    per BLOCK_M x BLOCK_N tile, M fastest."""
    pid = tl.program_id(0)
    num_m = tl.cdiv(M, BLOCK_M)
    rows = ((pid % num_m) * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    cols = ((pid // num_m) * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    ks = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + rows[:, None] * stride_am + ks[None, :] * stride_ak
    b_ptrs = b_ptr + ks[:, None] * stride_bk + cols[None, :] * stride_bn
    a_bufs = tlx.local_alloc((BLOCK_M, BLOCK_K), tlx.dtype_of(a_ptr), NUM_STAGES)
    b_bufs = tlx.local_alloc((BLOCK_K, BLOCK_N), tlx.dtype_of(b_ptr), NUM_STAGES)
    num_k = tl.cdiv(K, BLOCK_K)
    # Stages 0 .. NUM_STAGES - 2 start loading before the first MMA.
    for i in tl.static_range(NUM_STAGES - 1):
        left = K - i * BLOCK_K
        ta = tlx.async_load(a_ptrs, tlx.local_view(a_bufs, i), mask=ks[None, :] < left)
        tb = tlx.async_load(b_ptrs, tlx.local_view(b_bufs, i), mask=ks[:, None] < left)
        tlx.async_load_commit_group([ta, tb])
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, num_k):
        s = k % NUM_STAGES
        tlx.async_load_wait_group(NUM_STAGES - 2)
        acc = tlx.async_dot(tlx.local_view(a_bufs, s), tlx.local_view(b_bufs, s), acc)
        # The MMA of step k - 1 is done: its stage takes the tile NUM_STAGES - 1 steps ahead.
        acc = tlx.async_dot_wait(1, acc)
        ahead = k + NUM_STAGES - 1
        left = K - ahead * BLOCK_K
        ta = tlx.async_load(a_ptrs, tlx.local_view(a_bufs, ahead % NUM_STAGES),
                            mask=ks[None, :] < left)
        tb = tlx.async_load(b_ptrs, tlx.local_view(b_bufs, ahead % NUM_STAGES),
                            mask=ks[:, None] < left)
        tlx.async_load_commit_group([ta, tb])
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    acc = tlx.async_dot_wait(0, acc)
    out_m = (pid % num_m) * BLOCK_M + tl.arange(0, BLOCK_M)
    out_n = (pid // num_m) * BLOCK_N + tl.arange(0, BLOCK_N)
    c_ptrs = c_ptr + out_m[:, None] * stride_cm + out_n[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(tl.float16), mask=(out_m[:, None] < M) & (out_n[None, :] < N))


@ww.jit
def multicast_halves_runtime(in_desc, out_desc, HALF: tl.constexpr, COLS: tl.constexpr,
                             PEER_STEP: tl.constexpr):
    """Each CTA of a 2-CTA cluster loads half r (its rank) of its cluster's [2 * HALF, COLS] tile
    into rows [r * HALF, (r + 1) * HALF) of a [2 * HALF, COLS] buffer, a slice chosen at run time,
    multicast to ranks [r, r + PEER_STEP] (PEER_STEP=1 names rank 2 from rank 1: outside the
    cluster). Program p then stores the whole tile to out rows [p * 2 * HALF, (p + 1) * 2 * HALF).
    in_desc's block is [HALF, COLS], out_desc's [2 * HALF, COLS]."""
    dtype: tl.constexpr = tlx.dtype_of(in_desc)
    tiles = tlx.local_alloc((2 * HALF, COLS), dtype, 1)
    bars = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    tile = tlx.local_view(tiles, 0)
    full = tlx.local_view(bars, 0)
    rank = tlx.cluster_cta_rank()
    tlx.barrier_expect_bytes(full, 2 * HALF * COLS * tlx.size_of(dtype))
    # Both CTAs' barriers are initialized before either multicast may complete on them.
    tlx.cluster_barrier()
    if rank == 0:
        mine = tlx.local_slice(tile, [0, 0], [HALF, COLS])
    else:
        mine = tlx.local_slice(tile, [HALF, 0], [HALF, COLS])
    if PEER_STEP == 1:
        peer = rank + 1
    else:
        peer = rank ^ 1
    tlx.async_descriptor_load(in_desc, mine, [(tl.program_id(0) // 2) * 2 * HALF + rank * HALF, 0],
                              full, multicast_targets=[rank, peer])
    tlx.barrier_wait(full, 0)
    tlx.async_descriptor_store(out_desc, tile, [tl.program_id(0) * 2 * HALF, 0])
    tlx.async_descriptor_store_wait(0)
    # Neither CTA leaves while the other's multicast may still write into it.
    tlx.cluster_barrier()


@ww.jit
def runtime_view_load(in_desc, out_desc, which, ROWS: tl.constexpr, COLS: tl.constexpr,
                      CUT: tl.constexpr):
    """TMA-loads in's [ROWS, COLS // 2] block at (0, 0) into the left or right half (which = 0
    or 1, a run-time value) of a zeroed [ROWS, COLS] buffer and stores the whole buffer. With
    CUT, the halves are ROWS // 2 x COLS // 4 slices that cut the swizzle rows (refused)."""
    dtype: tl.constexpr = tlx.dtype_of(in_desc)
    bufs = tlx.local_alloc((ROWS, COLS), dtype, 1)
    bars = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    tile = tlx.local_view(bufs, 0)
    full = tlx.local_view(bars, 0)
    tlx.local_store(tile, tl.zeros([ROWS, COLS], dtype))
    tlx.fence_async_shared()
    if CUT:
        if which == 0:
            dst = tlx.local_slice(tile, [0, 0], [ROWS // 2, COLS // 4])
        else:
            dst = tlx.local_slice(tile, [0, COLS // 4], [ROWS // 2, COLS // 4])
        tlx.barrier_expect_bytes(full, ROWS // 2 * COLS // 4 * tlx.size_of(dtype))
    else:
        if which == 0:
            dst = tlx.local_slice(tile, [0, 0], [ROWS, COLS // 2])
        else:
            dst = tlx.local_slice(tile, [0, COLS // 2], [ROWS, COLS // 2])
        tlx.barrier_expect_bytes(full, ROWS * COLS // 2 * tlx.size_of(dtype))
    tlx.async_descriptor_load(in_desc, dst, [0, 0], full)
    tlx.barrier_wait(full, 0)
    tlx.async_descriptor_store(out_desc, tile, [0, 0])
    tlx.async_descriptor_store_wait(0)


@ww.jit
def runtime_stage_load(in_desc, out_desc, which, ROWS: tl.constexpr, COLS: tl.constexpr):
    """TMA-loads in's [ROWS, COLS] block into buffer `which` (0 or 1, a run-time value) of a
    pair, completing one of two separately allocated barriers, both chosen by one run-time if,
    and stores that buffer to out."""
    dtype: tl.constexpr = tlx.dtype_of(in_desc)
    bufs = tlx.local_alloc((ROWS, COLS), dtype, 2)
    first = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    second = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    if which == 0:
        bar = tlx.local_view(first, 0)
        dst = tlx.local_view(bufs, 0)
    else:
        bar = tlx.local_view(second, 0)
        dst = tlx.local_view(bufs, 1)
    tlx.barrier_expect_bytes(bar, ROWS * COLS * tlx.size_of(dtype))
    tlx.async_descriptor_load(in_desc, dst, [0, 0], bar)
    tlx.barrier_wait(bar, 0)
    tlx.async_descriptor_store(out_desc, dst, [0, 0])
    tlx.async_descriptor_store_wait(0)

# ------------------------------------------------------------------------------------------------
# Checks on the GPU (tests/gpu/test_hopper_gemm_features_gpu.py runs each in a subprocess with
# WARPWEAVE_TRAP_HANGS set); each raises AssertionError on a wrong result.
# ------------------------------------------------------------------------------------------------

def _descriptor(t, block):
    return ww.TensorDescriptor(t, list(t.shape), list(t.stride()), block)


def _operand(torch, shape, dtype_name):
    dtype = getattr(torch, dtype_name)
    if dtype_name.startswith("float8"):
        # Small integers / 8 are exact in both fp8 formats.
        return (torch.randint(-8, 9, shape, device="cuda") / 8).to(dtype)
    return torch.randn(shape, device="cuda", dtype=dtype)


def check_ws_gemm(m, n, k, a_dtype, b_dtype, a_row_major, b_row_major, ctas, BM=128, BN=256,
                  BK=64, stages=3):
    """ws_gemm on [m, k] x [k, n] operands handed over row- or column-major, in clusters of
    `ctas`, against a float64 product (fp8: exact, fp32 out; else a relative error bound)."""
    import torch

    a = _operand(torch, (m, k), a_dtype)
    b = _operand(torch, (k, n), b_dtype)
    fp8 = a_dtype.startswith("float8")
    c = torch.full((m, n), float("nan"), device="cuda",
                   dtype=torch.float32 if fp8 else a.dtype)
    sub = BM // 2
    # A column-major A [m, k] is A^T [k, m] row-major in memory; likewise B.
    A = a if a_row_major else a.t().contiguous()
    B = b if b_row_major else b.t().contiguous()
    a_desc = _descriptor(A, [sub, BK] if a_row_major else [BK, sub])
    b_desc = _descriptor(B, [BK, BN // ctas] if b_row_major else [BN // ctas, BK])
    clusters_m = -(-(-(-m // BM)) // ctas)
    grid = clusters_m * ctas * -(-n // BN)
    extra = {"ctas_per_cga": (ctas, 1, 1)} if ctas > 1 else {}
    ws_gemm[(grid,)](a_desc, b_desc, _descriptor(c, [sub, BN]), m, n, k, BM=BM, BN=BN, BK=BK,
                     NUM_STAGES=stages, A_ROW_MAJOR=a_row_major, B_ROW_MAJOR=b_row_major,
                     NUM_CTAS=ctas, CONSUMERS=2, num_warps=4, **extra)
    torch.cuda.synchronize()
    ref = a.double() @ b.double()
    what = f"ws_gemm {m}x{n}x{k} {a_dtype}/{b_dtype} A_ROW_MAJOR={a_row_major} " \
           f"B_ROW_MAJOR={b_row_major} NUM_CTAS={ctas}"
    err = ((c.double() - ref).norm() / ref.norm()).item()
    # fp8 products of eighths are exact; wgmma's fp8 accumulation keeps fewer bits than fp32.
    bound = 1e-3 if fp8 else 2e-3 if a.dtype == torch.float16 else 1e-2
    assert err <= bound, f"{what}: relative error {err:.3g}"


def check_ws_gemms(a_row_major, b_row_major, ctas, dtype="float16"):
    """check_ws_gemm over shapes with partial tiles and odd tile counts, and a large one."""
    for m, n, k in [(128, 256, 64), (1000, 776, 328), (640, 1792, 256), (4096, 4096, 4096)]:
        check_ws_gemm(m, n, k, dtype, dtype, a_row_major, b_row_major, ctas)


def check_fp8_ws_gemms(a_dtype, b_dtype, ctas):
    for m, n, k in [(128, 256, 128), (384, 512, 320), (2048, 2048, 2048)]:
        check_ws_gemm(m, n, k, a_dtype, b_dtype, True, False, ctas)


def check_tile_dot(a_dtype, b_dtype, a_row_major, b_row_major, M=64, N=64, K=64):
    import torch

    a = _operand(torch, (M, K), a_dtype)
    b = _operand(torch, (K, N), b_dtype)
    c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.float32)
    tile_dot[(1,)](a if a_row_major else a.t().contiguous(),
                   b if b_row_major else b.t().contiguous(), c, M=M, N=N, K=K,
                   A_ROW_MAJOR=a_row_major, B_ROW_MAJOR=b_row_major, num_warps=4)
    torch.cuda.synchronize()
    ref = a.double() @ b.double()
    err = ((c.double() - ref).norm() / ref.norm()).item()
    assert err <= (1e-3 if a_dtype.startswith("float8") else 2e-3), (
        f"tile_dot {a_dtype}/{b_dtype} A_ROW_MAJOR={a_row_major} B_ROW_MAJOR={b_row_major}: "
        f"relative error {err:.3g}")


def check_multicast_halves_runtime(clusters, cols):
    import torch

    half = 64
    x = torch.randn(clusters * 2 * half, cols, device="cuda", dtype=torch.float16)
    out = torch.full((clusters * 2 * 2 * half, cols), float("nan"), device="cuda",
                     dtype=torch.float16)
    multicast_halves_runtime[(clusters * 2,)](_descriptor(x, [half, cols]),
                                              _descriptor(out, [2 * half, cols]), HALF=half,
                                              COLS=cols, PEER_STEP=2, ctas_per_cga=(2, 1, 1))
    torch.cuda.synchronize()
    tiles = x.reshape(clusters, 2 * half, cols)
    assert torch.equal(out, torch.stack([tiles, tiles], 1).reshape(-1, cols)), \
        "a CTA's tile differs from its cluster's input rows"


def check_runtime_view_load(which):
    import torch

    rows, cols = 64, 128
    x = torch.randn(rows, cols, device="cuda", dtype=torch.float16)
    out = torch.full((rows, cols), float("nan"), device="cuda", dtype=torch.float16)
    runtime_view_load[(1,)](_descriptor(x, [rows, cols // 2]), _descriptor(out, [rows, cols]),
                            which, ROWS=rows, COLS=cols, CUT=False)
    torch.cuda.synchronize()
    expect = torch.zeros_like(x)
    expect[:, which * cols // 2:(which + 1) * cols // 2] = x[:, :cols // 2]
    assert torch.equal(out, expect), f"which={which}: the copy missed its half"


def check_runtime_stage_load(which):
    import torch

    x = torch.randn(64, 64, device="cuda", dtype=torch.float16)
    out = torch.full((64, 64), float("nan"), device="cuda", dtype=torch.float16)
    runtime_stage_load[(1,)](_descriptor(x, [64, 64]), _descriptor(out, [64, 64]), which, ROWS=64,
                             COLS=64)
    torch.cuda.synchronize()
    assert torch.equal(out, x), f"which={which}: the copy missed its buffer"


def check_pipelined_gemm(m, n, k, num_warps=8):
    import torch

    a = torch.randn(m, k, device="cuda", dtype=torch.float16)
    b = torch.randn(k, n, device="cuda", dtype=torch.float16)
    c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float16)
    grid = (-(-m // 128) * -(-n // 256),)
    pipelined_gemm[grid](a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                         c.stride(0), c.stride(1), BLOCK_M=128, BLOCK_N=256, BLOCK_K=64,
                         NUM_STAGES=3, num_warps=num_warps)
    torch.cuda.synchronize()
    ref = a.double() @ b.double()
    err = ((c.double() - ref).norm() / ref.norm()).item()
    assert err <= 2e-3, f"pipelined_gemm {m}x{n}x{k} num_warps={num_warps}: relative error {err:.3g}"
