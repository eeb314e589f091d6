"""tl.dot K loops for the sm_100a tcgen05 path (test_blackwell_tl_dot.py): pointer loads
(cp.async copies), host descriptors (TMA copies), a persistent tile loop around the K loop, and
an accumulator that starts from loaded values rather than zeros."""
import warpweave as ww
import warpweave.language as tl


@ww.jit
def dot_loop(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bk, stride_cm,
             BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, INIT: tl.constexpr,
             B_KN: tl.constexpr):
    # C = A @ B (+ C when INIT) in C's type; B [K, N] (B_KN) or B given as [N, K] rows.
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BM + tl.arange(0, BM)
    offs_n = pid_n * BN + tl.arange(0, BN)
    # Rows and columns past the edge read row / column 0 again (tutorial 03's wrap, with its
    # hints): only K is masked in the loop.
    offs_am = tl.max_contiguous(tl.multiple_of(offs_m % M, BM), BM)
    offs_bn = tl.max_contiguous(tl.multiple_of(offs_n % N, BN), BN)
    offs_k = tl.arange(0, BK)
    a_ptrs = a_ptr + offs_am[:, None] * stride_am + offs_k[None, :]
    if B_KN:
        b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_bn[None, :]
    else:
        b_ptrs = b_ptr + offs_k[:, None] + offs_bn[None, :] * stride_bk
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :]
    c_mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    if INIT:
        acc = tl.load(c_ptrs, mask=c_mask, other=0.0).to(tl.float32)
    else:
        acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        k_left = K - k * BK
        a = tl.load(a_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
        acc += tl.dot(a, b)
        a_ptrs += BK
        if B_KN:
            b_ptrs += BK * stride_bk
        else:
            b_ptrs += BK
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=c_mask)


@ww.jit
def dot_loop_tma(a_desc, b_desc, c_ptr, M, N, K, stride_cm,
                 BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, B_NK: tl.constexpr):
    # Host descriptors (Triton's tutorial 09 form): B as [N, K] tiles read through .T, or [K, N].
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        a = a_desc.load([pid_m * BM, k * BK])
        if B_NK:
            b = b_desc.load([pid_n * BN, k * BK]).T
        else:
            b = b_desc.load([k * BK, pid_n * BN])
        acc = tl.dot(a, b, acc)
    offs_m = pid_m * BM + tl.arange(0, BM)
    offs_n = pid_n * BN + tl.arange(0, BN)
    tl.store(c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :], acc.to(tl.float16),
             mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


@ww.jit
def dot_loop_persistent(a_ptr, b_ptr, c_ptr, M, N, K, NUM_PROGS,
                        BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    # Each program walks tiles pid, pid + NUM_PROGS, ...: the K loop runs once per tile, so the
    # accumulator's tensor memory and the MMA barriers are reused pass after pass.
    pid = tl.program_id(0)
    tiles_n = tl.cdiv(N, BN)
    tiles = tl.cdiv(M, BM) * tiles_n
    for tile in range(pid, tiles, NUM_PROGS):
        offs_m = (tile // tiles_n) * BM + tl.arange(0, BM)
        offs_n = (tile % tiles_n) * BN + tl.arange(0, BN)
        offs_k = tl.arange(0, BK)
        a_ptrs = a_ptr + offs_m[:, None] * K + offs_k[None, :]
        b_ptrs = b_ptr + offs_k[:, None] * N + offs_n[None, :]
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k in range(0, tl.cdiv(K, BK)):
            k_left = K - k * BK
            a = tl.load(a_ptrs, mask=(offs_m[:, None] < M) & (offs_k[None, :] < k_left), other=0.0)
            b = tl.load(b_ptrs, mask=(offs_k[:, None] < k_left) & (offs_n[None, :] < N), other=0.0)
            acc = tl.dot(a, b, acc)
            a_ptrs += BK
            b_ptrs += BK * N
        c_ptrs = c_ptr + offs_m[:, None] * N + offs_n[None, :]
        tl.store(c_ptrs, acc.to(tl.float16), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


@ww.jit
def dot_loop_tma_while(a_desc, b_desc, c_ptr, M, N, K, NUM_PROGS,
                       BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    # A while loop over tiles around a TMA K loop: the ring's barriers (and the MMA barriers)
    # are initialized again for each pass.
    tiles_n = tl.cdiv(N, BN)
    tiles = tl.cdiv(M, BM) * tiles_n
    tile = tl.program_id(0)
    while tile < tiles:
        pid_m = tile // tiles_n
        pid_n = tile % tiles_n
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k in range(0, tl.cdiv(K, BK)):
            a = a_desc.load([pid_m * BM, k * BK])
            b = b_desc.load([pid_n * BN, k * BK]).T
            acc = tl.dot(a, b, acc)
        offs_m = pid_m * BM + tl.arange(0, BM)
        offs_n = pid_n * BN + tl.arange(0, BN)
        tl.store(c_ptr + offs_m[:, None] * N + offs_n[None, :], acc.to(tl.float16),
                 mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))
        tile += NUM_PROGS
