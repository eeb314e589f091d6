"""Plain tl.dot GEMMs over host tensor descriptors, as Triton's persistent-matmul tutorial writes
them (no TLX): the sm_90a pipeliner turns their K loops into TMA copies into num_stages swizzled
slots completing on mbarriers, read by async wgmma. Used by tests/python/test_tma_gemm_pipeline.py
(interpreter, Tile IR and PTX) and tests/gpu/test_tma_gemm_pipeline_gpu.py (H200).

- desc_gemm: one BM x BN tile of C per program; B arrives as [BN, BK] tiles of B^T (N x K
  memory) used as `b.T`, or, with B_KN, as [BK, BN] tiles of a K x N B used as they are.
- desc_gemm_persistent: the same K loop inside a loop over tiles (program i takes tiles i,
  i + NUM_PROGRAMS, ...), the ring's slots and barrier phases carried from one tile to the next.
- device_desc_gemm, device_desc_gemm_persistent: the same with the descriptors made in the
  kernel (tl.make_tensor_descriptor, tensor maps the kernel writes; tutorial 09's
  matmul_kernel_descriptor_persistent form), and the forms whose descriptor loads the TMA ring
  does not take (made in the K loop, beside a tl.load, a run-time innermost stride) and a loop
  that makes new descriptors each step (tests/python/test_device_descriptor_tma.py,
  tests/gpu/test_device_descriptor_tma_gpu.py).
"""
import warpweave as ww
import warpweave.language as tl


@ww.jit
def _tile_coords(tile, tiles_m, tiles_n, GROUP: tl.constexpr):
    # Tiles in groups of GROUP rows of tiles, column by column inside a group.
    per_group = GROUP * tiles_n
    first_m = (tile // per_group) * GROUP
    rows = min(tiles_m - first_m, GROUP)
    tm = first_m + (tile % per_group) % rows
    tn = (tile % per_group) // rows
    return tm, tn


@ww.jit
def desc_gemm(a_desc, b_desc, c_desc, M, N, K, BM: tl.constexpr, BN: tl.constexpr,
              BK: tl.constexpr, GROUP: tl.constexpr, B_KN: tl.constexpr, WS: tl.constexpr):
    tiles_m = tl.cdiv(M, BM)
    tiles_n = tl.cdiv(N, BN)
    tm, tn = _tile_coords(tl.program_id(0), tiles_m, tiles_n, GROUP)
    row = tm * BM
    col = tn * BN
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for kk in tl.range(tl.cdiv(K, BK), warp_specialize=WS):
        k0 = kk * BK
        a = a_desc.load([row, k0])
        if B_KN:
            b = b_desc.load([k0, col])
            acc = tl.dot(a, b, acc)
        else:
            b = b_desc.load([col, k0])
            acc = tl.dot(a, b.T, acc)
    c_desc.store([row, col], acc.to(tl.float16))


@ww.jit
def desc_gemm_persistent(a_desc, b_desc, c_desc, M, N, K, BM: tl.constexpr, BN: tl.constexpr,
                         BK: tl.constexpr, GROUP: tl.constexpr, NUM_PROGRAMS: tl.constexpr,
                         WS: tl.constexpr):
    tiles_m = tl.cdiv(M, BM)
    tiles_n = tl.cdiv(N, BN)
    k_steps = tl.cdiv(K, BK)
    for tile in tl.range(tl.program_id(0), tiles_m * tiles_n, NUM_PROGRAMS, flatten=True,
                         warp_specialize=WS):
        tm, tn = _tile_coords(tile, tiles_m, tiles_n, GROUP)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for kk in range(k_steps):
            a = a_desc.load([tm * BM, kk * BK])
            b = b_desc.load([tn * BN, kk * BK])
            acc = tl.dot(a, b.T, acc)
        c_desc.store([tm * BM, tn * BN], acc.to(tl.float16))


@ww.jit
def device_desc_gemm(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr,
                     BK: tl.constexpr, GROUP: tl.constexpr):
    """desc_gemm with the descriptors made in the kernel (tutorial 09's
    matmul_kernel_descriptor_persistent form): A [M, K], B^T [N, K], C [M, N], row-major."""
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BM, BK])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[N, K], strides=[K, 1], block_shape=[BN, BK])
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    tm, tn = _tile_coords(tl.program_id(0), tl.cdiv(M, BM), tl.cdiv(N, BN), GROUP)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for kk in range(tl.cdiv(K, BK)):
        a = a_desc.load([tm * BM, kk * BK])
        b = b_desc.load([tn * BN, kk * BK])
        acc = tl.dot(a, b.T, acc)
    c_desc.store([tm * BM, tn * BN], acc.to(tl.float16))


@ww.jit
def device_desc_gemm_persistent(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr,
                                BN: tl.constexpr, BK: tl.constexpr, GROUP: tl.constexpr,
                                NUM_PROGRAMS: tl.constexpr, SUBTILE: tl.constexpr):
    """desc_gemm_persistent over descriptors made once, before the tile loop (tutorial 09's
    descriptor-persistent form): A [M, K], B^T [N, K], C [M, N], row-major. With SUBTILE each C
    tile goes out as its two [BM, BN // 2] halves through one descriptor."""
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BM, BK])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[N, K], strides=[K, 1], block_shape=[BN, BK])
    CN: tl.constexpr = BN // 2 if SUBTILE else BN
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, CN])
    tiles_m = tl.cdiv(M, BM)
    tiles_n = tl.cdiv(N, BN)
    k_steps = tl.cdiv(K, BK)
    for tile in tl.range(tl.program_id(0), tiles_m * tiles_n, NUM_PROGRAMS, flatten=True):
        tm, tn = _tile_coords(tile, tiles_m, tiles_n, GROUP)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for kk in range(k_steps):
            a = a_desc.load([tm * BM, kk * BK])
            b = b_desc.load([tn * BN, kk * BK])
            acc = tl.dot(a, b.T, acc)
        if SUBTILE:
            left, right = tl.split(tl.permute(tl.reshape(acc, (BM, 2, BN // 2)), (0, 2, 1)))
            c_desc.store([tm * BM, tn * BN], left.to(c_ptr.dtype.element_ty))
            c_desc.store([tm * BM, tn * BN + BN // 2], right.to(c_ptr.dtype.element_ty))
        else:
            c_desc.store([tm * BM, tn * BN], acc.to(c_ptr.dtype.element_ty))


@ww.jit
def device_desc_gemm_made_in_loop(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr,
                                  BN: tl.constexpr, BK: tl.constexpr):
    """device_desc_gemm with A's and B's descriptors made anew in each K step: the TMA ring
    cannot issue their copies ahead, so the loop is pipelined over pointer loads."""
    row = tl.program_id(0) * BM
    col = tl.program_id(1) * BN
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for kk in range(tl.cdiv(K, BK)):
        a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1],
                                           block_shape=[BM, BK])
        b_desc = tl.make_tensor_descriptor(b_ptr, shape=[N, K], strides=[K, 1],
                                           block_shape=[BN, BK])
        acc = tl.dot(a_desc.load([row, kk * BK]), b_desc.load([col, kk * BK]).T, acc)
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    c_desc.store([row, col], acc.to(tl.float16))


@ww.jit
def device_desc_gemm_mixed(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr,
                           BK: tl.constexpr):
    """A through a descriptor made in the kernel, B^T [N, K] through tl.load: the TMA ring takes
    two descriptor loads only, so A's loads become pointer loads and the loop is pipelined with
    cp.async."""
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BM, BK])
    row = tl.program_id(0) * BM
    cols = tl.program_id(1) * BN + tl.arange(0, BN)
    ks = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for kk in range(tl.cdiv(K, BK)):
        a = a_desc.load([row, kk * BK])
        b_mask = (cols[:, None] < N) & (kk * BK + ks[None, :] < K)
        b = tl.load(b_ptr + cols[:, None] * K + kk * BK + ks[None, :], mask=b_mask, other=0.0)
        acc = tl.dot(a, b.T, acc)
    rows = row + tl.arange(0, BM)
    tl.store(c_ptr + rows[:, None] * N + cols[None, :], acc.to(tl.float16),
             mask=(rows[:, None] < M) & (cols[None, :] < N))


@ww.jit
def device_desc_gemm_strided(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak,
                             BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """A through a descriptor whose strides are both run-time values (A may be a transposed
    view): not a tensor map the compiler can vouch for, so its loads are pointer loads."""
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[stride_am, stride_ak],
                                       block_shape=[BM, BK])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[N, K], strides=[K, 1], block_shape=[BN, BK])
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    row = tl.program_id(0) * BM
    col = tl.program_id(1) * BN
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for kk in range(tl.cdiv(K, BK)):
        acc = tl.dot(a_desc.load([row, kk * BK]), b_desc.load([col, kk * BK]).T, acc)
    c_desc.store([row, col], acc.to(tl.float16))


@ww.jit
def batched_copy_new_desc_each_step(x_ptr, y_ptr, M, N, BATCH, BM: tl.constexpr,
                                    BN: tl.constexpr):
    """y[s] = 2 * x[s] + s for each [M, N] matrix s of the batch, through descriptors made anew
    in each step of the loop over s (their tensor maps rewritten there)."""
    row = tl.program_id(0) * BM
    col = tl.program_id(1) * BN
    for s in range(BATCH):
        src = tl.make_tensor_descriptor(x_ptr + s * M * N, shape=[M, N], strides=[N, 1],
                                        block_shape=[BM, BN])
        dst = tl.make_tensor_descriptor(y_ptr + s * M * N, shape=[M, N], strides=[N, 1],
                                        block_shape=[BM, BN])
        dst.store([row, col], src.load([row, col]) * 2 + s)


@ww.jit
def device_desc_gemm_row_sums(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr,
                              BK: tl.constexpr):
    """C = A @ B plus, in every column, the row sums of A's first BK columns, read by a desc.load
    after the K loop through A's descriptor, whose map the TMA ring's swizzled slots fixed: that
    tile is read swizzled too."""
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BM, BK])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[N, K], strides=[K, 1], block_shape=[BN, BK])
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    row = tl.program_id(0) * BM
    col = tl.program_id(1) * BN
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for kk in range(tl.cdiv(K, BK)):
        acc = tl.dot(a_desc.load([row, kk * BK]), b_desc.load([col, kk * BK]).T, acc)
    first = a_desc.load([row, 0]).to(tl.float32)
    acc += tl.sum(first, axis=1)[:, None]
    c_desc.store([row, col], acc.to(tl.float16))


@ww.jit
def carried_descriptor(x_ptr, y_ptr, out_ptr, N, SWITCH, B: tl.constexpr):
    """out = 1 + x for the blocks before block SWITCH, 1 + y from it on: one descriptor variable,
    made again over y in the loop, so that the loop carries it and an if chooses it."""
    d = tl.make_tensor_descriptor(x_ptr, shape=[N], strides=[1], block_shape=[B])
    for i in range(tl.cdiv(N, B)):
        if i == SWITCH:
            d = tl.make_tensor_descriptor(y_ptr, shape=[N], strides=[1], block_shape=[B])
        offs = i * B + tl.arange(0, B)
        tl.store(out_ptr + offs, d.load([i * B]) + 1, mask=offs < N)
