"""Small Blackwell kernels of our own for tests/python/test_blackwell_fp4.py: an fp4 GEMM with
tlx.async_dot_scaled on e2m1 operands packed two to a uint8 along K (A [M, K / 2], B [N, K / 2]
read through tlx.local_trans), loaded by TMA with their scales in the cuBLAS block-scaled layout
[1, rows / 128, chunks, 2, 256]: mxfp4 (uint8 e8m0 scales, one per 32 elements of K) or nvfp4
(tl.float8e4nv ue4m3 scales, one per 16), the descriptors' dtype telling which. The scales are
read by the MMA from shared memory or (mxfp4) copied into tensor memory with tlx.tmem_copy.

PLANT = 1: the accumulator is read before the last MMA's commit has completed.

mixed_gemm: mxfp4 x mxfp8 (tcgen05.mma kind::mxf8f6f4), one operand e2m1 packed as above (A
[M, K / 2], or B [N, K / 2] through tlx.local_trans), the other e4m3 / e5m2 (A [M, K], B [K, N]),
uint8 e8m0 scales of 32; the e2m1 tile lies padded in shared memory, which TMA writes."""
import warpweave as ww
import warpweave.language as tl
import warpweave.language.extra.tlx as tlx


@ww.jit
def fp4_gemm(a_desc, b_desc, as_desc, bs_desc, c_ptr, M, N, K, BN: tl.constexpr,
             BK: tl.constexpr, VEC: tl.constexpr, TMEM_SCALES: tl.constexpr,
             PLANT: tl.constexpr):
    BM: tl.constexpr = 128
    # Scale chunks along K a step: BK / VEC scales a row, four to a chunk column.
    RK: tl.constexpr = (BK // VEC + 3) // 4
    RN: tl.constexpr = (BN + 127) // 128
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    a_t = tlx.local_view(tlx.local_alloc((BM, BK // 2), tl.uint8, 1), 0)
    b_t = tlx.local_view(tlx.local_alloc((BN, BK // 2), tl.uint8, 1), 0)
    as_t = tlx.local_view(tlx.local_alloc((1, 1, RK, 2, 256), tlx.dtype_of(as_desc), 1), 0)
    bs_t = tlx.local_view(tlx.local_alloc((1, RN, RK, 2, 256), tlx.dtype_of(bs_desc), 1), 0)
    acc = tlx.local_view(tlx.local_alloc((BM, BN), tl.float32, 1, tlx.storage_kind.tmem), 0)
    loaded = tlx.local_view(tlx.alloc_barriers(num_barriers=1, arrive_count=1), 0)
    done = tlx.local_view(tlx.alloc_barriers(num_barriers=1, arrive_count=1), 0)
    steps = tl.cdiv(K, BK)
    if TMEM_SCALES:
        as_tm = tlx.local_view(tlx.local_alloc((BM, RK * 4), tl.uint8, 1, tlx.storage_kind.tmem), 0)
        bs_tm = tlx.local_view(
            tlx.local_alloc((RN * 128, RK * 4), tl.uint8, 1, tlx.storage_kind.tmem), 0)
    for k in range(steps):
        if k > 0:
            tlx.barrier_wait(done, (k - 1) & 1)  # the previous step's MMA has read its tiles
        tlx.barrier_expect_bytes(loaded, (BM + BN) * (BK // 2) + (1 + RN) * RK * 512)
        tlx.async_descriptor_load(as_desc, as_t, [0, pid_m, k * RK, 0, 0], loaded)
        tlx.async_descriptor_load(bs_desc, bs_t, [0, pid_n * RN, k * RK, 0, 0], loaded)
        tlx.async_descriptor_load(a_desc, a_t, [pid_m * BM, k * (BK // 2)], loaded)
        tlx.async_descriptor_load(b_desc, b_t, [pid_n * BN, k * (BK // 2)], loaded)
        tlx.barrier_wait(loaded, k & 1)
        if TMEM_SCALES:
            tlx.tmem_copy(as_t, as_tm)
            tlx.tmem_copy(bs_t, bs_tm)
            tlx.async_dot_scaled(a_t, tlx.local_trans(b_t), acc, as_tm, "e2m1", bs_tm, "e2m1",
                                 use_acc=k > 0, mBarriers=[done])
        else:
            tlx.async_dot_scaled(a_t, tlx.local_trans(b_t), acc, as_t, "e2m1", bs_t, "e2m1",
                                 use_acc=k > 0, mBarriers=[done])
    if PLANT != 1:
        tlx.barrier_wait(done, (steps - 1) & 1)
    result = tlx.local_load(acc)
    rows = pid_m * BM + tl.arange(0, BM)
    cols = pid_n * BN + tl.arange(0, BN)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    tl.store(c_ptr + rows[:, None] * N + cols[None, :], result, mask=mask)


@ww.jit
def pair_fp4(a_desc, b_desc, as_desc, bs_desc, c_ptr, M, N, K, BN: tl.constexpr,
             BK: tl.constexpr, VEC: tl.constexpr):
    # A CTA pair's fp4 GEMM (256 x BN per K step): each CTA loads its 128 rows of A with their
    # scales, its half of B's BN rows (B is [N, K / 2] bytes) and the scales of all BN of them;
    # the leader issues the block-scaled MMA (tcgen05.mma.cta_group::2), whose scale copies and
    # products cover both CTAs.
    rank = tlx.cluster_cta_rank()
    leads = rank % 2 == 0
    HALF: tl.constexpr = BN // 2
    RK: tl.constexpr = (BK // VEC + 3) // 4
    RN: tl.constexpr = (BN + 127) // 128
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    a_t = tlx.local_view(tlx.local_alloc((128, BK // 2), tl.uint8, 1), 0)
    b_t = tlx.local_view(tlx.local_alloc((HALF, BK // 2), tl.uint8, 1), 0)
    as_t = tlx.local_view(tlx.local_alloc((1, 1, RK, 2, 256), tlx.dtype_of(as_desc), 1), 0)
    bs_t = tlx.local_view(tlx.local_alloc((1, RN, RK, 2, 256), tlx.dtype_of(bs_desc), 1), 0)
    acc = tlx.local_view(tlx.local_alloc((128, BN), tl.float32, 1, tlx.storage_kind.tmem), 0)
    loaded = tlx.local_view(tlx.alloc_barriers(num_barriers=1, arrive_count=1), 0)
    done = tlx.local_view(tlx.alloc_barriers(num_barriers=1, arrive_count=1), 0)
    steps = tl.cdiv(K, BK)
    for k in range(steps):
        if k > 0:
            tlx.barrier_wait(done, (k - 1) & 1)  # the pair's previous MMA has completed
        tlx.barrier_expect_bytes(loaded, 2 * ((128 + HALF) * (BK // 2) + (1 + RN) * RK * 512),
                                 pred=leads)
        tlx.async_descriptor_load(as_desc, as_t, [0, pid_m, k * RK, 0, 0], loaded, two_ctas=True)
        tlx.async_descriptor_load(bs_desc, bs_t, [0, pid_n * RN, k * RK, 0, 0], loaded,
                                  two_ctas=True)
        tlx.async_descriptor_load(a_desc, a_t, [pid_m * 128, k * (BK // 2)], loaded,
                                  two_ctas=True)
        tlx.async_descriptor_load(b_desc, b_t, [pid_n * BN + (rank % 2) * HALF, k * (BK // 2)],
                                  loaded, two_ctas=True)
        if leads:
            tlx.barrier_wait(loaded, k & 1)
            tlx.async_dot_scaled(a_t, tlx.local_trans(b_t), acc, as_t, "e2m1", bs_t, "e2m1",
                                 use_acc=k > 0, mBarriers=[done], two_ctas=True)
    tlx.barrier_wait(done, (steps - 1) & 1)
    result = tlx.local_load(acc)
    rows = pid_m * 128 + tl.arange(0, 128)
    cols = pid_n * BN + tl.arange(0, BN)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    tl.store(c_ptr + rows[:, None] * N + cols[None, :], result, mask=mask)


@ww.jit
def mixed_gemm(a_desc, b_desc, as_desc, bs_desc, c_ptr, M, N, K, A_FMT: tl.constexpr,
               B_FMT: tl.constexpr, A_FP4: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
               TMEM_SCALES: tl.constexpr):
    BM: tl.constexpr = 128
    RK: tl.constexpr = (BK // 32 + 3) // 4
    RN: tl.constexpr = (BN + 127) // 128
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    if A_FP4:
        a_t = tlx.local_view(tlx.local_alloc((BM, BK // 2), tl.uint8, 1), 0)
        b_t = tlx.local_view(tlx.local_alloc((BK, BN), tlx.dtype_of(b_desc), 1), 0)
    else:
        a_t = tlx.local_view(tlx.local_alloc((BM, BK), tlx.dtype_of(a_desc), 1), 0)
        b_t = tlx.local_view(tlx.local_alloc((BN, BK // 2), tl.uint8, 1), 0)
    as_t = tlx.local_view(tlx.local_alloc((1, 1, RK, 2, 256), tl.uint8, 1), 0)
    bs_t = tlx.local_view(tlx.local_alloc((1, RN, RK, 2, 256), tl.uint8, 1), 0)
    acc = tlx.local_view(tlx.local_alloc((BM, BN), tl.float32, 1, tlx.storage_kind.tmem), 0)
    loaded = tlx.local_view(tlx.alloc_barriers(num_barriers=1, arrive_count=1), 0)
    done = tlx.local_view(tlx.alloc_barriers(num_barriers=1, arrive_count=1), 0)
    if TMEM_SCALES:
        as_tm = tlx.local_view(tlx.local_alloc((BM, RK * 4), tl.uint8, 1, tlx.storage_kind.tmem), 0)
        bs_tm = tlx.local_view(
            tlx.local_alloc((RN * 128, RK * 4), tl.uint8, 1, tlx.storage_kind.tmem), 0)
    steps = tl.cdiv(K, BK)
    for k in range(steps):
        if k > 0:
            tlx.barrier_wait(done, (k - 1) & 1)  # the previous step's MMA has read its tiles
        # The e2m1 tile counts its packed bytes (BK / 2 a row), the fp8 one BK a row.
        tlx.barrier_expect_bytes(loaded, (BM + BN) * BK - (BM if A_FP4 else BN) * (BK // 2) +
                                 (1 + RN) * RK * 512)
        tlx.async_descriptor_load(as_desc, as_t, [0, pid_m, k * RK, 0, 0], loaded)
        tlx.async_descriptor_load(bs_desc, bs_t, [0, pid_n * RN, k * RK, 0, 0], loaded)
        if A_FP4:
            tlx.async_descriptor_load(a_desc, a_t, [pid_m * BM, k * (BK // 2)], loaded)
            tlx.async_descriptor_load(b_desc, b_t, [k * BK, pid_n * BN], loaded)
        else:
            tlx.async_descriptor_load(a_desc, a_t, [pid_m * BM, k * BK], loaded)
            tlx.async_descriptor_load(b_desc, b_t, [pid_n * BN, k * (BK // 2)], loaded)
        tlx.barrier_wait(loaded, k & 1)
        if A_FP4:
            b_op = b_t
        else:
            b_op = tlx.local_trans(b_t)
        if TMEM_SCALES:
            tlx.tmem_copy(as_t, as_tm)
            tlx.tmem_copy(bs_t, bs_tm)
            tlx.async_dot_scaled(a_t, b_op, acc, as_tm, A_FMT, bs_tm, B_FMT, use_acc=k > 0,
                                 mBarriers=[done])
        else:
            tlx.async_dot_scaled(a_t, b_op, acc, as_t, A_FMT, bs_t, B_FMT, use_acc=k > 0,
                                 mBarriers=[done])
    tlx.barrier_wait(done, (steps - 1) & 1)
    result = tlx.local_load(acc)
    rows = pid_m * BM + tl.arange(0, BM)
    cols = pid_n * BN + tl.arange(0, BN)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    tl.store(c_ptr + rows[:, None] * N + cols[None, :], result, mask=mask)
