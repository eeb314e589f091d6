"""Kernels of the Hopper code-quality tests (tests/python/test_hopper_perf.py): constructs that
TLX programs write and that once made ptxas serialize every wgmma of a kernel.

- peeled_ws_gemm: a warp-specialized TMA GEMM, one BM x BN tile per program, whose consumer
  issues the first k step's async_dot before its main loop (onto zeros, or without an
  accumulator) and enters the loop with that wgmma still in flight; the loop keeps one wgmma in
  flight (async_dot_wait(1)) and frees each stage after the wgmma that read it. WHILE_LOOP
  writes the main loop as a while loop. KEEP_FIRST stores C minus the first k step's product:
  the peeled accumulator is read again after the loop, so the loop must carry a copy of it.
  c_desc's block is [BM, BN].
"""
import warpweave as ww
import warpweave.language as tl
from warpweave import tlx


@ww.jit
def peeled_ws_gemm(a_desc, b_desc, c_desc, M, N, K, BM: tl.constexpr, BN: tl.constexpr,
                   BK: tl.constexpr, NUM_STAGES: tl.constexpr, ZERO_INIT: tl.constexpr,
                   WHILE_LOOP: tl.constexpr, KEEP_FIRST: tl.constexpr):
    a_bufs = tlx.local_alloc((BM, BK), tlx.dtype_of(a_desc), NUM_STAGES)
    b_bufs = tlx.local_alloc((BK, BN), tlx.dtype_of(b_desc), NUM_STAGES)
    full = tlx.alloc_barriers(num_barriers=NUM_STAGES, arrive_count=1)
    free = tlx.alloc_barriers(num_barriers=NUM_STAGES, arrive_count=1)
    off_m = (tl.program_id(0) % tl.cdiv(M, BM)) * BM
    off_n = (tl.program_id(0) // tl.cdiv(M, BM)) * BN
    num_k = tl.cdiv(K, BK)
    with tlx.async_tasks():
        with tlx.async_task("default"):
            for k in range(0, num_k):
                s = k % NUM_STAGES
                tlx.barrier_wait(tlx.local_view(free, s), ((k // NUM_STAGES) & 1) ^ 1)
                bar = tlx.local_view(full, s)
                tlx.barrier_expect_bytes(bar, (BM * BK + BK * BN) * 2)
                tlx.async_descriptor_load(a_desc, tlx.local_view(a_bufs, s), [off_m, k * BK], bar)
                tlx.async_descriptor_load(b_desc, tlx.local_view(b_bufs, s), [k * BK, off_n], bar)
        with tlx.async_task(num_warps=4, registers=232):
            # Step 0, peeled: its wgmma is still running when the loop takes its accumulator.
            tlx.barrier_wait(tlx.local_view(full, 0), 0)
            if ZERO_INIT:
                acc = tl.zeros([BM, BN], dtype=tl.float32)
                acc = tlx.async_dot(tlx.local_view(a_bufs, 0), tlx.local_view(b_bufs, 0), acc)
            else:
                acc = tlx.async_dot(tlx.local_view(a_bufs, 0), tlx.local_view(b_bufs, 0))
            first = acc
            if WHILE_LOOP:
                k = 1
                while k < num_k:
                    s = k % NUM_STAGES
                    tlx.barrier_wait(tlx.local_view(full, s), (k // NUM_STAGES) & 1)
                    acc = tlx.async_dot(tlx.local_view(a_bufs, s), tlx.local_view(b_bufs, s), acc)
                    acc = tlx.async_dot_wait(1, acc)
                    tlx.barrier_arrive(tlx.local_view(free, (k - 1) % NUM_STAGES))
                    k += 1
            else:
                for k in range(1, num_k):
                    s = k % NUM_STAGES
                    tlx.barrier_wait(tlx.local_view(full, s), (k // NUM_STAGES) & 1)
                    acc = tlx.async_dot(tlx.local_view(a_bufs, s), tlx.local_view(b_bufs, s), acc)
                    acc = tlx.async_dot_wait(1, acc)
                    tlx.barrier_arrive(tlx.local_view(free, (k - 1) % NUM_STAGES))
            acc = tlx.async_dot_wait(0, acc)
            tlx.barrier_arrive(tlx.local_view(free, (num_k - 1) % NUM_STAGES))
            if KEEP_FIRST:
                acc = acc - first
            c_desc.store([off_m, off_n], acc.to(tlx.dtype_of(c_desc)))


def check_peeled_ws_gemm(M, N, K, BM, BN, BK, stages, zero_init, while_loop, keep_first):
    """On the GPU (tests/gpu/test_hopper_perf_gpu.py): peeled_ws_gemm against PyTorch, with C
    stored through a swizzled staging tile (BN * 2 bytes wider than 128: column blocks)."""
    import torch

    a = (torch.randint(-8, 9, (M, K), device="cuda") / 8).half()
    b = (torch.randint(-8, 9, (K, N), device="cuda") / 8).half()
    c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.float16)

    def desc(t, block):
        return ww.TensorDescriptor(t, list(t.shape), list(t.stride()), block)

    grid = (_cdiv(M, BM) * _cdiv(N, BN),)
    peeled_ws_gemm[grid](desc(a, [BM, BK]), desc(b, [BK, BN]), desc(c, [BM, BN]), M, N, K,
                         BM=BM, BN=BN, BK=BK, NUM_STAGES=stages, ZERO_INIT=zero_init,
                         WHILE_LOOP=while_loop, KEEP_FIRST=keep_first, num_warps=4)
    torch.cuda.synchronize()
    want = a.double() @ b.double()
    if keep_first:
        want -= a[:, :BK].double() @ b[:BK].double()
    assert torch.equal(c, want.half()), (c.double() - want).abs().max().item()


def _cdiv(x, y):
    return (x + y - 1) // y


@ww.jit
def desc_load_store(desc, ROWS: tl.constexpr, COLS: tl.constexpr):
    """Reads a [ROWS, COLS] block through `desc` and writes it back plus one: a descriptor both
    loaded and stored through keeps the unswizzled staging tile of its loads."""
    x = desc.load([0, 0])
    desc.store([0, 0], x + 1)
