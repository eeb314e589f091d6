"""Kernels whose shared buffers take the bytes of buffers dead before them (the liveness-based
placement of src/layout/SharedMemoryPlan.cpp), for tests/python/test_smem_reuse.py (compiles,
placements, the interpreter) and tests/gpu/test_smem_reuse_gpu.py (the H200):

- tma_gemm_tile: STAGES TMA stages of A and B read by wgmma (sm_90a), then the fp16 C tile
  allocated after the K loop, stored with a TMA store. At 128x256x64 with 4 stages the stages
  take 192 KiB and the tile 64 KiB: it fits in a CTA only in the stages' bytes.
- cp_async_gemm_tile: cp.async stages read by wgmma, then an fp32 C tile written with
  local_store and read back in another layout for a masked tl.store (plain loads and stores over
  bytes that cp.async and wgmma used).
- tcgen05_gemm_tile: the Blackwell form (sm_100a): TMA stages, tcgen05 MMAs into tensor memory
  that complete on barriers, then the C tile for a TMA store.
"""
import warpweave as ww
import warpweave.language as tl
from warpweave import tlx


@ww.jit
def tma_gemm_tile(a_desc, b_desc, c_desc, K, BM: tl.constexpr, BN: tl.constexpr,
                  BK: tl.constexpr, STAGES: tl.constexpr):
    """C[BM, BN] tile (pid_m, pid_n) = A @ B, A [M, K] and B [K, N] fp16 through descriptors of
    [BM, BK] and [BK, BN] blocks, C fp16 through [BM, BN] blocks. K is a multiple of BK, at
    least (STAGES - 1) * BK."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    a_tiles = tlx.local_alloc((BM, BK), tl.float16, STAGES)
    b_tiles = tlx.local_alloc((BK, BN), tl.float16, STAGES)
    ready = tlx.alloc_barriers(num_barriers=STAGES, arrive_count=1)
    steps = K // BK
    for i in tl.static_range(STAGES - 1):
        bar = tlx.local_view(ready, i)
        tlx.barrier_expect_bytes(bar, 2 * (BM + BN) * BK)
        tlx.async_descriptor_load(a_desc, tlx.local_view(a_tiles, i), [pid_m * BM, i * BK], bar)
        tlx.async_descriptor_load(b_desc, tlx.local_view(b_tiles, i), [i * BK, pid_n * BN], bar)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(steps):
        s = k % STAGES
        tlx.barrier_wait(tlx.local_view(ready, s), (k // STAGES) & 1)
        acc = tlx.async_dot(tlx.local_view(a_tiles, s), tlx.local_view(b_tiles, s), acc)
        # The MMA of step k - 1 is done: its stage takes step k + STAGES - 1.
        acc = tlx.async_dot_wait(1, acc)
        ahead = k + STAGES - 1
        if ahead < steps:
            t = ahead % STAGES
            t_bar = tlx.local_view(ready, t)
            tlx.barrier_expect_bytes(t_bar, 2 * (BM + BN) * BK)
            tlx.async_descriptor_load(a_desc, tlx.local_view(a_tiles, t), [pid_m * BM, ahead * BK],
                                      t_bar)
            tlx.async_descriptor_load(b_desc, tlx.local_view(b_tiles, t), [ahead * BK, pid_n * BN],
                                      t_bar)
    acc = tlx.async_dot_wait(0, acc)
    c_tile = tlx.local_view(tlx.local_alloc((BM, BN), tl.float16, 1), 0)
    tlx.local_store(c_tile, acc.to(tl.float16))
    tlx.fence_async_shared()
    tlx.async_descriptor_store(c_desc, c_tile, [pid_m * BM, pid_n * BN])
    tlx.async_descriptor_store_wait(0)


@ww.jit
def cp_async_gemm_tile(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr,
                       BK: tl.constexpr, STAGES: tl.constexpr):
    """C = A @ B, A [M, K], B [K, N] fp16 row-major, C [M, N] fp32 row-major, one [BM, BN] tile
    per program (M fastest); rows and columns past M and N are clipped, K is any size."""
    pid = tl.program_id(0)
    num_m = tl.cdiv(M, BM)
    off_m = (pid % num_m) * BM
    off_n = (pid // num_m) * BN
    rows = (off_m + tl.arange(0, BM)) % M
    cols = (off_n + tl.arange(0, BN)) % N
    ks = tl.arange(0, BK)
    a_ptrs = a_ptr + rows[:, None] * K + ks[None, :]
    b_ptrs = b_ptr + ks[:, None] * N + cols[None, :]
    a_tiles = tlx.local_alloc((BM, BK), tl.float16, STAGES)
    b_tiles = tlx.local_alloc((BK, BN), tl.float16, STAGES)
    steps = tl.cdiv(K, BK)
    for i in tl.static_range(STAGES - 1):
        left = K - i * BK
        ta = tlx.async_load(a_ptrs, tlx.local_view(a_tiles, i), mask=ks[None, :] < left)
        tb = tlx.async_load(b_ptrs, tlx.local_view(b_tiles, i), mask=ks[:, None] < left)
        tlx.async_load_commit_group([ta, tb])
        a_ptrs += BK
        b_ptrs += BK * N
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(steps):
        s = k % STAGES
        tlx.async_load_wait_group(STAGES - 2)
        acc = tlx.async_dot(tlx.local_view(a_tiles, s), tlx.local_view(b_tiles, s), acc)
        acc = tlx.async_dot_wait(1, acc)
        ahead = k + STAGES - 1
        left = K - ahead * BK
        ta = tlx.async_load(a_ptrs, tlx.local_view(a_tiles, ahead % STAGES),
                            mask=ks[None, :] < left)
        tb = tlx.async_load(b_ptrs, tlx.local_view(b_tiles, ahead % STAGES),
                            mask=ks[:, None] < left)
        tlx.async_load_commit_group([ta, tb])
        a_ptrs += BK
        b_ptrs += BK * N
    acc = tlx.async_dot_wait(0, acc)
    tlx.async_load_wait_group(0)
    # The tile goes through shared memory: written in the wgmma's layout, read in the store's.
    c_tile = tlx.local_view(tlx.local_alloc((BM, BN), tl.float32, 1), 0)
    tlx.local_store(c_tile, acc)
    out = tlx.local_load(c_tile)
    out_m = off_m + tl.arange(0, BM)
    out_n = off_n + tl.arange(0, BN)
    mask = (out_m[:, None] < M) & (out_n[None, :] < N)
    tl.store(c_ptr + out_m[:, None] * N + out_n[None, :], out, mask=mask)


@ww.jit
def tcgen05_gemm_tile(a_desc, b_desc, c_desc, K, BM: tl.constexpr, BN: tl.constexpr,
                      BK: tl.constexpr, STAGES: tl.constexpr):
    """tma_gemm_tile's tile on Blackwell: the MMAs accumulate in tensor memory and each frees
    its stage through a barrier; the last commit's barrier says every MMA is done."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    a_tiles = tlx.local_alloc((BM, BK), tl.float16, STAGES)
    b_tiles = tlx.local_alloc((BK, BN), tl.float16, STAGES)
    loaded = tlx.alloc_barriers(num_barriers=STAGES, arrive_count=1)
    freed = tlx.alloc_barriers(num_barriers=STAGES, arrive_count=1)
    done = tlx.alloc_barriers(num_barriers=1, arrive_count=1)
    acc = tlx.local_view(tlx.local_alloc((BM, BN), tl.float32, 1, tlx.storage_kind.tmem), 0)
    steps = K // BK
    for k in range(steps):
        s = k % STAGES
        if k >= STAGES:
            # The MMA that read this stage STAGES steps ago has completed.
            tlx.barrier_wait(tlx.local_view(freed, s), ((k - STAGES) // STAGES) & 1)
        bar = tlx.local_view(loaded, s)
        tlx.barrier_expect_bytes(bar, 2 * (BM + BN) * BK)
        tlx.async_descriptor_load(a_desc, tlx.local_view(a_tiles, s), [pid_m * BM, k * BK], bar)
        tlx.async_descriptor_load(b_desc, tlx.local_view(b_tiles, s), [k * BK, pid_n * BN], bar)
        tlx.barrier_wait(bar, (k // STAGES) & 1)
        tlx.async_dot(tlx.local_view(a_tiles, s), tlx.local_view(b_tiles, s), acc, use_acc=k > 0,
                      mBarriers=[tlx.local_view(freed, s)])
    tlx.tcgen05_commit(tlx.local_view(done, 0))
    tlx.barrier_wait(tlx.local_view(done, 0), 0)
    result = tlx.local_load(acc).to(tl.float16)
    c_tile = tlx.local_view(tlx.local_alloc((BM, BN), tl.float16, 1), 0)
    tlx.local_store(c_tile, result)
    tlx.fence_async_shared()
    tlx.async_descriptor_store(c_desc, c_tile, [pid_m * BM, pid_n * BN])
    tlx.async_descriptor_store_wait(0)


def _descriptor(t, block):
    return ww.TensorDescriptor(t, list(t.shape), list(t.stride()), block)


def check_tma_gemm_tile(m, n, k, BM=128, BN=256, BK=64, STAGES=4, num_warps=8):
    """tma_gemm_tile on the GPU against a float64 product (m, n multiples of the tile)."""
    import torch

    a = torch.randn((m, k), device="cuda", dtype=torch.float16)
    b = torch.randn((k, n), device="cuda", dtype=torch.float16)
    c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float16)
    compiled = tma_gemm_tile[(m // BM, n // BN)](
        _descriptor(a, [BM, BK]), _descriptor(b, [BK, BN]), _descriptor(c, [BM, BN]), k, BM=BM,
        BN=BN, BK=BK, STAGES=STAGES, num_warps=num_warps)
    torch.cuda.synchronize()
    _expect_close(c, a, b, f"tma_gemm_tile {m}x{n}x{k} stages {STAGES}")
    return compiled


def check_cp_async_gemm_tile(m, n, k, BM=128, BN=128, BK=64, STAGES=6, num_warps=4):
    """cp_async_gemm_tile on the GPU against a float64 product (any m, n, k)."""
    import torch

    a = torch.randn((m, k), device="cuda", dtype=torch.float16)
    b = torch.randn((k, n), device="cuda", dtype=torch.float16)
    c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float32)
    grid = (-(-m // BM) * -(-n // BN),)
    compiled = cp_async_gemm_tile[grid](a, b, c, m, n, k, BM=BM, BN=BN, BK=BK, STAGES=STAGES,
                                        num_warps=num_warps)
    torch.cuda.synchronize()
    _expect_close(c, a, b, f"cp_async_gemm_tile {m}x{n}x{k} stages {STAGES}")
    return compiled


def _expect_close(c, a, b, what):
    ref = a.double() @ b.double()
    assert not c.isnan().any(), f"{what}: elements never written"
    err = ((c.double() - ref).norm() / ref.norm()).item()
    assert err <= 2e-3, f"{what}: relative error {err:.3g}"


def check_all():
    """Every configuration the GPU test runs; each asserts its kernel shares bytes (the buffers
    together would not fit)."""
    for m, n, k in [(128, 256, 192), (256, 512, 1024), (1024, 1024, 4096)]:
        kernel = check_tma_gemm_tile(m, n, k)
    assert kernel.kernel.shared_bytes < 4 * 48 * 1024 + 64 * 1024, kernel.kernel.shared_bytes
    for m, n, k in [(100, 60, 40), (300, 200, 1000), (1024, 1024, 4096)]:
        kernel = check_cp_async_gemm_tile(m, n, k)
    assert kernel.kernel.shared_bytes < 6 * 32 * 1024 + 64 * 1024, kernel.kernel.shared_bytes
