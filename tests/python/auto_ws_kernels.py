"""Kernels of the automatic warp specialization tests (tests/python/test_auto_warp_specialize.py
for sm_90a and in the interpreter, tests/gpu/test_auto_warp_specialize_gpu.py on the H200): the
shapes of Triton's tutorial 09 whose K loop or tile loop is marked
`tl.range(..., warp_specialize=WARP_SPECIALIZE)`.

- tma_gemm_ws: one C tile per program, A [M, K] and B^T [N, K] through host descriptors, the
  K loop marked (tutorial 09's matmul_kernel_tma).
- tma_persistent_ws: persistent over the tiles (tile_id = pid, pid + NUM_SMS, ...), host
  descriptors, the tile loop marked (matmul_kernel_tma_persistent).
- descriptor_persistent_ws: the same over descriptors the kernel makes with
  tl.make_tensor_descriptor (matmul_kernel_descriptor_persistent), optionally storing C in two
  column halves (EPILOGUE_SUBTILE).
- tma_gemm_ws_pointer_epilogue: tma_gemm_ws storing C through masked pointers whose offsets are
  computed before the loop (tensors the consumers read from outside their task).
- inner_marked_persistent_ws: a persistent tile loop whose inner K loop is the one marked (the
  tile loop is split).
- pointer_gemm_ws: the K loop marked but its operands loaded through pointers: not taken (runs
  as if the flag were not given).
"""
import warpweave as ww
import warpweave.language as tl


@ww.jit
def tile_of(tile_id, num_pid_m, num_pid_n, GROUP_SIZE_M: tl.constexpr):
    """Grouped ordering of the output tiles, GROUP_SIZE_M tile-rows at a time."""
    num_pid_in_group = GROUP_SIZE_M * num_pid_n
    group_id = tile_id // num_pid_in_group
    first_pid_m = group_id * GROUP_SIZE_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
    pid_m = first_pid_m + (tile_id % group_size_m)
    pid_n = (tile_id % num_pid_in_group) // group_size_m
    return pid_m, pid_n


@ww.jit
def tma_gemm_ws(a_desc, b_desc, c_desc, M, N, K, BLOCK_SIZE_M: tl.constexpr,
                BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
                GROUP_SIZE_M: tl.constexpr, WARP_SPECIALIZE: tl.constexpr):
    dtype = c_desc.dtype
    pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_SIZE_M)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    pid_m, pid_n = tile_of(pid, num_pid_m, num_pid_n, GROUP_SIZE_M)
    k_tiles = tl.cdiv(K, BLOCK_SIZE_K)
    offs_am = pid_m * BLOCK_SIZE_M
    offs_bn = pid_n * BLOCK_SIZE_N
    accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k in tl.range(k_tiles, warp_specialize=WARP_SPECIALIZE):
        offs_k = k * BLOCK_SIZE_K
        a = a_desc.load([offs_am, offs_k])
        b = b_desc.load([offs_bn, offs_k])
        accumulator = tl.dot(a, b.T, accumulator)
    c = accumulator.to(dtype)
    c_desc.store([offs_am, offs_bn], c)


@ww.jit
def tma_persistent_ws(a_desc, b_desc, c_desc, M, N, K, BLOCK_SIZE_M: tl.constexpr,
                      BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
                      GROUP_SIZE_M: tl.constexpr, EPILOGUE_SUBTILE: tl.constexpr,
                      NUM_SMS: tl.constexpr, WARP_SPECIALIZE: tl.constexpr):
    """The tile loop also carries the epilogue's own tile index (tile_id_c), as the tutorial's
    does; with EPILOGUE_SUBTILE, c_desc's block is [BLOCK_SIZE_M, BLOCK_SIZE_N // 2]."""
    dtype = c_desc.dtype
    start_pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_SIZE_M)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    k_tiles = tl.cdiv(K, BLOCK_SIZE_K)
    num_tiles = num_pid_m * num_pid_n
    tile_id_c = start_pid - NUM_SMS
    for tile_id in tl.range(start_pid, num_tiles, NUM_SMS, flatten=True,
                            warp_specialize=WARP_SPECIALIZE):
        pid_m, pid_n = tile_of(tile_id, num_pid_m, num_pid_n, GROUP_SIZE_M)
        offs_am = pid_m * BLOCK_SIZE_M
        offs_bn = pid_n * BLOCK_SIZE_N
        accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
        for ki in range(k_tiles):
            offs_k = ki * BLOCK_SIZE_K
            a = a_desc.load([offs_am, offs_k])
            b = b_desc.load([offs_bn, offs_k])
            accumulator = tl.dot(a, b.T, accumulator)
        tile_id_c += NUM_SMS
        pid_m, pid_n = tile_of(tile_id_c, num_pid_m, num_pid_n, GROUP_SIZE_M)
        offs_am_c = pid_m * BLOCK_SIZE_M
        offs_bn_c = pid_n * BLOCK_SIZE_N
        if EPILOGUE_SUBTILE:
            acc = tl.reshape(accumulator, (BLOCK_SIZE_M, 2, BLOCK_SIZE_N // 2))
            acc = tl.permute(acc, (0, 2, 1))
            acc0, acc1 = tl.split(acc)
            c_desc.store([offs_am_c, offs_bn_c], acc0.to(dtype))
            c_desc.store([offs_am_c, offs_bn_c + BLOCK_SIZE_N // 2], acc1.to(dtype))
        else:
            c_desc.store([offs_am_c, offs_bn_c], accumulator.to(dtype))


@ww.jit
def descriptor_persistent_ws(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_SIZE_M: tl.constexpr,
                             BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
                             GROUP_SIZE_M: tl.constexpr, EPILOGUE_SUBTILE: tl.constexpr,
                             NUM_SMS: tl.constexpr, WARP_SPECIALIZE: tl.constexpr):
    dtype = c_ptr.dtype.element_ty
    start_pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_SIZE_M)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    k_tiles = tl.cdiv(K, BLOCK_SIZE_K)
    num_tiles = num_pid_m * num_pid_n
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1],
                                       block_shape=[BLOCK_SIZE_M, BLOCK_SIZE_K])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[N, K], strides=[K, 1],
                                       block_shape=[BLOCK_SIZE_N, BLOCK_SIZE_K])
    CN: tl.constexpr = BLOCK_SIZE_N // 2 if EPILOGUE_SUBTILE else BLOCK_SIZE_N
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1],
                                       block_shape=[BLOCK_SIZE_M, CN])
    for tile_id in tl.range(start_pid, num_tiles, NUM_SMS, flatten=False,
                            warp_specialize=WARP_SPECIALIZE):
        pid_m, pid_n = tile_of(tile_id, num_pid_m, num_pid_n, GROUP_SIZE_M)
        offs_am = pid_m * BLOCK_SIZE_M
        offs_bn = pid_n * BLOCK_SIZE_N
        accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
        for ki in range(k_tiles):
            offs_k = ki * BLOCK_SIZE_K
            a = a_desc.load([offs_am, offs_k])
            b = b_desc.load([offs_bn, offs_k])
            accumulator = tl.dot(a, b.T, accumulator)
        if EPILOGUE_SUBTILE:
            acc = tl.reshape(accumulator, (BLOCK_SIZE_M, 2, BLOCK_SIZE_N // 2))
            acc = tl.permute(acc, (0, 2, 1))
            acc0, acc1 = tl.split(acc)
            c_desc.store([offs_am, offs_bn], acc0.to(dtype))
            c_desc.store([offs_am, offs_bn + BLOCK_SIZE_N // 2], acc1.to(dtype))
        else:
            c_desc.store([offs_am, offs_bn], accumulator.to(dtype))


@ww.jit
def tma_gemm_ws_pointer_epilogue(a_desc, b_desc, c_ptr, M, N, K, BLOCK_SIZE_M: tl.constexpr,
                                 BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr):
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    offs_am = (tl.program_id(0) // num_pid_n) * BLOCK_SIZE_M
    offs_bn = (tl.program_id(0) % num_pid_n) * BLOCK_SIZE_N
    rows = offs_am + tl.arange(0, BLOCK_SIZE_M)
    cols = offs_bn + tl.arange(0, BLOCK_SIZE_N)
    c_ptrs = c_ptr + rows[:, None] * N + cols[None, :]
    c_mask = (rows[:, None] < M) & (cols[None, :] < N)
    accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k in tl.range(tl.cdiv(K, BLOCK_SIZE_K), warp_specialize=True):
        a = a_desc.load([offs_am, k * BLOCK_SIZE_K])
        b = b_desc.load([offs_bn, k * BLOCK_SIZE_K])
        accumulator = tl.dot(a, b.T, accumulator)
    tl.store(c_ptrs, accumulator.to(tl.float16), mask=c_mask)


@ww.jit
def inner_marked_persistent_ws(a_desc, b_desc, c_desc, M, N, K, BLOCK_SIZE_M: tl.constexpr,
                               BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
                               NUM_SMS: tl.constexpr):
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    num_tiles = tl.cdiv(M, BLOCK_SIZE_M) * num_pid_n
    for tile_id in range(tl.program_id(0), num_tiles, NUM_SMS):
        offs_am = (tile_id // num_pid_n) * BLOCK_SIZE_M
        offs_bn = (tile_id % num_pid_n) * BLOCK_SIZE_N
        accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
        for ki in tl.range(tl.cdiv(K, BLOCK_SIZE_K), warp_specialize=True):
            a = a_desc.load([offs_am, ki * BLOCK_SIZE_K])
            b = b_desc.load([offs_bn, ki * BLOCK_SIZE_K])
            accumulator = tl.dot(a, b.T, accumulator)
        c_desc.store([offs_am, offs_bn], accumulator.to(c_desc.dtype))


@ww.jit
def pointer_gemm_ws(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_SIZE_M: tl.constexpr,
                    BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr):
    """A [M, K], B [K, N], C [M, N] row-major, loaded through masked pointers."""
    offs_m = tl.program_id(0) * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    offs_n = tl.program_id(1) * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    offs_k = tl.arange(0, BLOCK_SIZE_K)
    acc = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k in tl.range(0, K, BLOCK_SIZE_K, warp_specialize=True):
        a = tl.load(a_ptr + offs_m[:, None] * K + (k + offs_k)[None, :],
                    mask=(offs_m[:, None] < M) & ((k + offs_k)[None, :] < K), other=0.0)
        b = tl.load(b_ptr + (k + offs_k)[:, None] * N + offs_n[None, :],
                    mask=((k + offs_k)[:, None] < K) & (offs_n[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + offs_m[:, None] * N + offs_n[None, :], acc.to(tl.float16),
             mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))
