"""Plain tl.dot GEMMs over host tensor descriptors, as Triton's persistent-matmul tutorial writes
them (no TLX): the sm_90a pipeliner turns their K loops into TMA copies into num_stages swizzled
slots completing on mbarriers, read by async wgmma. Used by tests/python/test_tma_gemm_pipeline.py
(interpreter, Tile IR and PTX) and tests/gpu/test_tma_gemm_pipeline_gpu.py (H200).

- desc_gemm: one BM x BN tile of C per program; B arrives as [BN, BK] tiles of B^T (N x K
  memory) used as `b.T`, or, with B_KN, as [BK, BN] tiles of a K x N B used as they are.
- desc_gemm_persistent: the same K loop inside a loop over tiles (program i takes tiles i,
  i + NUM_PROGRAMS, ...), the ring's slots and barrier phases carried from one tile to the next.
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
