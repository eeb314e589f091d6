"""Small Blackwell kernels of our own for tests/python/test_blackwell_scaled.py: an mxfp8 GEMM with
tlx.async_dot_scaled (A [M, K] and B [N, K] in fp8, one e8m0 scale per 32 elements of K, loaded by
TMA in the cuBLAS block-scaled layout [1, rows / 128, K / 128, 2, 256]), its scales read by the MMA
from shared memory or copied into tensor memory with tlx.tmem_copy, and flags that plant bugs:

PLANT = 1: the next K step's TMA loads overwrite the scales (and operands) before the MMA that
           reads them, and the tcgen05.cp that copies them, have completed (no wait on `done`);
PLANT = 2: the scales in tensor memory are read (local_load) right after tlx.tmem_copy, before
           a commit that tracks the copy has completed;
PLANT = 3: the accumulator is read before the last MMA's commit has completed."""
import warpweave as ww
import warpweave.language as tl
import warpweave.language.extra.tlx as tlx


@ww.jit
def gemm_buffers(a_desc, b_desc, BN: tl.constexpr, BK: tl.constexpr):
    # One buffer each: A [128, BK] and B [BN, BK] tiles, their scale tiles in the cuBLAS layout,
    # the accumulator and the scales in tensor memory.
    RK: tl.constexpr = (BK + 127) // 128
    RN: tl.constexpr = (BN + 127) // 128
    a_t = tlx.local_view(tlx.local_alloc((128, BK), tlx.dtype_of(a_desc), 1), 0)
    b_t = tlx.local_view(tlx.local_alloc((BN, BK), tlx.dtype_of(b_desc), 1), 0)
    as_t = tlx.local_view(tlx.local_alloc((1, 1, RK, 2, 256), tl.uint8, 1), 0)
    bs_t = tlx.local_view(tlx.local_alloc((1, RN, RK, 2, 256), tl.uint8, 1), 0)
    acc = tlx.local_view(tlx.local_alloc((128, BN), tl.float32, 1, tlx.storage_kind.tmem), 0)
    as_tm = tlx.local_view(tlx.local_alloc((128, RK * 4), tl.uint8, 1, tlx.storage_kind.tmem), 0)
    bs_tm = tlx.local_view(
        tlx.local_alloc((RN * 128, RK * 4), tl.uint8, 1, tlx.storage_kind.tmem), 0)
    return a_t, b_t, as_t, bs_t, acc, as_tm, bs_tm


@ww.jit
def scaled_gemm(a_desc, b_desc, as_desc, bs_desc, c_ptr, M, N, K, BN: tl.constexpr,
                BK: tl.constexpr, A_FMT: tl.constexpr, B_FMT: tl.constexpr,
                TMEM_SCALES: tl.constexpr, PLANT: tl.constexpr):
    BM: tl.constexpr = 128
    RK: tl.constexpr = (BK + 127) // 128
    RN: tl.constexpr = (BN + 127) // 128
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    a_t, b_t, as_t, bs_t, acc, as_tm, bs_tm = gemm_buffers(a_desc, b_desc, BN, BK)
    loaded = tlx.local_view(tlx.alloc_barriers(num_barriers=1, arrive_count=1), 0)
    done = tlx.local_view(tlx.alloc_barriers(num_barriers=1, arrive_count=1), 0)
    steps = tl.cdiv(K, BK)
    for k in range(steps):
        if k > 0 and PLANT != 1:
            # the previous step's MMA (and its scale copies) have completed
            tlx.barrier_wait(done, (k - 1) & 1)
        tlx.barrier_expect_bytes(loaded, (BM + BN) * BK + (1 + RN) * RK * 512)
        tlx.async_descriptor_load(as_desc, as_t, [0, pid_m, k * RK, 0, 0], loaded)
        tlx.async_descriptor_load(bs_desc, bs_t, [0, pid_n * RN, k * RK, 0, 0], loaded)
        tlx.async_descriptor_load(a_desc, a_t, [pid_m * BM, k * BK], loaded)
        tlx.async_descriptor_load(b_desc, b_t, [pid_n * BN, k * BK], loaded)
        tlx.barrier_wait(loaded, k & 1)
        if TMEM_SCALES:
            tlx.tmem_copy(as_t, as_tm)
            tlx.tmem_copy(bs_t, bs_tm)
            if PLANT == 2:
                early = tlx.local_load(as_tm)
                tl.store(c_ptr + tl.arange(0, BM)[:, None] * N + tl.arange(0, RK * 4)[None, :],
                         early.to(tl.float32))
            tlx.async_dot_scaled(a_t, tlx.local_trans(b_t), acc, as_tm, A_FMT, bs_tm, B_FMT,
                                 use_acc=k > 0, mBarriers=[done])
        else:
            tlx.async_dot_scaled(a_t, tlx.local_trans(b_t), acc, as_t, A_FMT, bs_t, B_FMT,
                                 use_acc=k > 0, mBarriers=[done])
    if PLANT != 3:
        tlx.barrier_wait(done, (steps - 1) & 1)
    result = tlx.local_load(acc)
    rows = pid_m * BM + tl.arange(0, BM)
    cols = pid_n * BN + tl.arange(0, BN)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    tl.store(c_ptr + rows[:, None] * N + cols[None, :], result, mask=mask)


@ww.jit
def scaled_ws_gemm(a_desc, b_desc, as_desc, bs_desc, c_ptr, M, N, K, BN: tl.constexpr,
                   BK: tl.constexpr, WAIT_COPY: tl.constexpr):
    # Warp-specialized: a 1-warp task copies the scales into tensor memory and commits the copies
    # to `copied`; the MMA task waits for that before its MMA reads them (unless WAIT_COPY is
    # off: the planted bug of an MMA reading scales another thread's tcgen05.cp may still write).
    BM: tl.constexpr = 128
    RK: tl.constexpr = (BK + 127) // 128
    RN: tl.constexpr = (BN + 127) // 128
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    a_t, b_t, as_t, bs_t, acc, as_tm, bs_tm = gemm_buffers(a_desc, b_desc, BN, BK)
    loaded = tlx.local_view(tlx.alloc_barriers(num_barriers=1, arrive_count=1), 0)
    copied = tlx.local_view(tlx.alloc_barriers(num_barriers=1, arrive_count=1), 0)
    done = tlx.local_view(tlx.alloc_barriers(num_barriers=1, arrive_count=1), 0)
    with tlx.async_tasks():
        with tlx.async_task("default"):
            tlx.barrier_wait(done, 0)
            result = tlx.local_load(acc)
            rows = pid_m * BM + tl.arange(0, BM)
            cols = pid_n * BN + tl.arange(0, BN)
            mask = (rows[:, None] < M) & (cols[None, :] < N)
            tl.store(c_ptr + rows[:, None] * N + cols[None, :], result, mask=mask)
        with tlx.async_task(num_warps=1):
            tlx.barrier_expect_bytes(loaded, (BM + BN) * BK + (1 + RN) * RK * 512)
            tlx.async_descriptor_load(as_desc, as_t, [0, pid_m, 0, 0, 0], loaded)
            tlx.async_descriptor_load(bs_desc, bs_t, [0, pid_n * RN, 0, 0, 0], loaded)
            tlx.async_descriptor_load(a_desc, a_t, [pid_m * BM, 0], loaded)
            tlx.async_descriptor_load(b_desc, b_t, [pid_n * BN, 0], loaded)
            tlx.barrier_wait(loaded, 0)
            tlx.tmem_copy(as_t, as_tm)
            tlx.tmem_copy(bs_t, bs_tm)
            tlx.tcgen05_commit(copied)
        with tlx.async_task(num_warps=1):
            if WAIT_COPY:
                tlx.barrier_wait(copied, 0)
            tlx.barrier_wait(loaded, 0)
            tlx.async_dot_scaled(a_t, tlx.local_trans(b_t), acc, as_tm, "e4m3", bs_tm, "e4m3",
                                 use_acc=False, mBarriers=[done])


@ww.jit
def scaled_from_registers(a_ptr, b_desc, sa_ptr, sb_ptr, c_ptr, sa_out_ptr, K: tl.constexpr,
                          BN: tl.constexpr, B_MN: tl.constexpr = False):
    # A (fp8) and both scales come from registers: local_store into tensor memory (A four to a
    # column, the scales in the layout the MMA reads), B by TMA; then one block-scaled MMA with A
    # from tensor memory, and the A scales read back (local_load). B is [BN, K] passed through
    # local_trans (K-major), or with B_MN a [K, BN] buffer (N contiguous: MN-major), as TLX's
    # mxfp8 attention passes V.
    rows = tl.arange(0, 128)
    a = tl.load(a_ptr + rows[:, None] * K + tl.arange(0, K)[None, :])
    sa = tl.load(sa_ptr + rows[:, None] * (K // 32) + tl.arange(0, K // 32)[None, :])
    sb = tl.load(sb_ptr + rows[:, None] * (K // 32) + tl.arange(0, K // 32)[None, :])
    a_tm = tlx.local_view(tlx.local_alloc((128, K), tlx.dtype_of(b_desc), 1, tlx.storage_kind.tmem), 0)
    sa_tm = tlx.local_view(tlx.local_alloc((128, K // 32), tl.uint8, 1, tlx.storage_kind.tmem), 0)
    sb_tm = tlx.local_view(tlx.local_alloc((128, K // 32), tl.uint8, 1, tlx.storage_kind.tmem), 0)
    acc = tlx.local_view(tlx.local_alloc((128, BN), tl.float32, 1, tlx.storage_kind.tmem), 0)
    if B_MN:
        b_t = tlx.local_view(tlx.local_alloc((K, BN), tlx.dtype_of(b_desc), 1), 0)
    else:
        b_t = tlx.local_view(tlx.local_alloc((BN, K), tlx.dtype_of(b_desc), 1), 0)
    bar = tlx.local_view(tlx.alloc_barriers(num_barriers=1, arrive_count=1), 0)
    done = tlx.local_view(tlx.alloc_barriers(num_barriers=1, arrive_count=1), 0)
    tlx.barrier_expect_bytes(bar, BN * K)
    tlx.async_descriptor_load(b_desc, b_t, [0, 0], bar)
    tlx.local_store(a_tm, a.to(tlx.dtype_of(b_desc)))
    tlx.local_store(sa_tm, sa)
    tlx.local_store(sb_tm, sb)
    tlx.barrier_wait(bar, 0)
    if B_MN:
        tlx.async_dot_scaled(a_tm, b_t, acc, sa_tm, "e4m3", sb_tm, "e4m3", use_acc=False,
                             mBarriers=[done])
    else:
        tlx.async_dot_scaled(a_tm, tlx.local_trans(b_t), acc, sa_tm, "e4m3", sb_tm, "e4m3",
                             use_acc=False, mBarriers=[done])
    tlx.barrier_wait(done, 0)
    out = tlx.local_load(acc)
    tl.store(c_ptr + rows[:, None] * BN + tl.arange(0, BN)[None, :], out)
    back = tlx.local_load(sa_tm)
    tl.store(sa_out_ptr + rows[:, None] * (K // 32) + tl.arange(0, K // 32)[None, :], back)
