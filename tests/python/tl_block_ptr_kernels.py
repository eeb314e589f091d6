"""Kernels for test_tl_block_ptr.py and tests/gpu/test_tl_block_ptr_gpu.py: Triton's block
pointers (tl.make_block_ptr, tl.advance / .advance, tl.load / tl.store with boundary_check and
padding_option)."""

import warpweave as ww
import warpweave.language as tl


@ww.jit
def copy_1d(a_ptr, b_ptr, N, BLOCK: tl.constexpr, PAD: tl.constexpr, START: tl.constexpr):
    # Reads a[0 : N // 2] through a block pointer of shape N // 2 and writes b[0 : N]: with a
    # boundary check on the load, b's upper half is the padding. START moves every program's
    # block to -N ("lower") or N ("upper"), wholly outside both tensors.
    offset = tl.program_id(0) * BLOCK
    if START == "lower":
        offset = -N
    elif START == "upper":
        offset = N
    a = tl.make_block_ptr(base=a_ptr, shape=(N // 2,), strides=(1,), offsets=(offset,),
                          block_shape=(BLOCK,), order=(0,))
    b = tl.make_block_ptr(base=b_ptr, shape=(N,), strides=(1,), offsets=(offset,),
                          block_shape=(BLOCK,), order=(0,))
    if PAD is None:
        x = tl.load(a, boundary_check=(0,))
    else:
        x = tl.load(a, boundary_check=(0,), padding_option=PAD)
    tl.store(b, x, boundary_check=(0,))


@ww.jit
def copy_2d(x_ptr, y_ptr, M, N, sxm, sxn, sym, syn, BM: tl.constexpr, BN: tl.constexpr,
            CHECK: tl.constexpr, PAD: tl.constexpr):
    # y[tile] = x[tile] for the (BM, BN) tile of each program, checking the dims in CHECK.
    pm = tl.program_id(0)
    pn = tl.program_id(1)
    x = tl.make_block_ptr(x_ptr, (M, N), (sxm, sxn), (pm * BM, pn * BN), (BM, BN), (1, 0))
    y = tl.make_block_ptr(y_ptr, (M, N), (sym, syn), (pm * BM, pn * BN), (BM, BN), (1, 0))
    tl.store(y, tl.load(x, boundary_check=CHECK, padding_option=PAD), boundary_check=CHECK)


@ww.jit
def copy_2d_pointers(x_ptr, y_ptr, M, N, sxm, sxn, sym, syn, BM: tl.constexpr,
                     BN: tl.constexpr):
    # copy_2d with CHECK=(0, 1) written with a tensor of pointers and a mask, for comparison.
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    x = tl.load(x_ptr + rm[:, None] * sxm + rn[None, :] * sxn, mask=mask, other=0.0)
    tl.store(y_ptr + rm[:, None] * sym + rn[None, :] * syn, x, mask=mask)


@ww.jit
def matmul_no_loop(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
                   BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    # One tile; a's block pointer moves away and back with negative offsets first.
    a = tl.make_block_ptr(base=a_ptr, shape=(M, K), strides=(sam, sak), offsets=(0, 0),
                          block_shape=(BM, BK), order=(1, 0))
    b = tl.make_block_ptr(base=b_ptr, shape=(K, N), strides=(sbk, sbn), offsets=(0, 0),
                          block_shape=(BK, BN), order=(1, 0))
    a = tl.advance(a, (BM, -BK))
    a = tl.advance(a, (-BM, BK))
    a = tl.advance(a, (0, -BK))
    x = tl.load(a, boundary_check=(1,), padding_option="zero")
    y = tl.load(b, boundary_check=(0,), padding_option="zero")
    c = tl.dot(x, y)
    offs_m = tl.arange(0, BM)
    offs_n = tl.arange(0, BN)
    tl.store(c_ptr + offs_m[:, None] * scm + offs_n[None, :] * scn, c)


@ww.jit
def matmul(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
           BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    # The K loop advances two block pointers (one with tl.advance, one with the method); edges
    # of every dimension are checked and read as zeros.
    pm = tl.program_id(0)
    pn = tl.program_id(1)
    a = tl.make_block_ptr(a_ptr, (M, K), (sam, sak), (pm * BM, 0), (BM, BK), (1, 0))
    b = tl.make_block_ptr(b_ptr, (K, N), (sbk, sbn), (0, pn * BN), (BK, BN), (1, 0))
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        x = tl.load(a, boundary_check=(0, 1), padding_option="zero")
        y = tl.load(b, boundary_check=(0, 1), padding_option="zero")
        acc += tl.dot(x, y)
        a = tl.advance(a, (0, BK))
        b = b.advance((BK, 0))
    c = tl.make_block_ptr(c_ptr, (M, N), (scm, scn), (pm * BM, pn * BN), (BM, BN), (1, 0))
    tl.store(c, acc, boundary_check=(0, 1))


@ww.jit
def copy_3d(src_ptr, dst_ptr, d0, d1, d2, s0, s1, s2, B0: tl.constexpr, B1: tl.constexpr,
            B2: tl.constexpr):
    # A block at (d0 - 1, 0, d2 - 2) that overhangs dims 0 and 2, checked on those only.
    src = tl.make_block_ptr(base=src_ptr, shape=(d0, d1, d2), strides=(s0, s1, s2),
                            offsets=(d0 - 1, 0, d2 - 2), block_shape=(B0, B1, B2),
                            order=(2, 1, 0))
    dst = tl.make_block_ptr(base=dst_ptr, shape=(d0, d1, d2), strides=(s0, s1, s2),
                            offsets=(d0 - 1, 0, d2 - 2), block_shape=(B0, B1, B2),
                            order=(2, 1, 0))
    tl.store(dst, tl.load(src, boundary_check=(0, 2), padding_option="zero"),
             boundary_check=(0, 2))


@ww.jit
def element_ty(src_ptr, dst_ptr, N, BLOCK: tl.constexpr):
    p = tl.make_block_ptr(base=src_ptr, shape=(N,), strides=(1,), offsets=(0,),
                          block_shape=(BLOCK,), order=(0,))
    x = tl.load(p, boundary_check=(0,), padding_option="zero").to(p.dtype.element_ty)
    tl.static_assert(p.block_shape == (BLOCK,))
    tl.store(dst_ptr + tl.arange(0, BLOCK), x)


@ww.jit
def trans_reshape(in_ptr, out_ptr, S0: tl.constexpr, S1: tl.constexpr):
    # A whole (S0, S1) tensor without boundary checks, then reshaped and permuted.
    p = tl.make_block_ptr(base=in_ptr, shape=(S0, S1), strides=(S1, 1), offsets=(0, 0),
                          block_shape=(S0, S1), order=(1, 0))
    x = tl.load(p)
    x = tl.reshape(x, (32, 4, 4, 2))
    x = tl.permute(x, (1, 2, 3, 0))
    x = tl.reshape(x, (S0 * S1,))
    tl.store(out_ptr + tl.arange(0, S0 * S1), x)


@ww.jit
def transpose_view(x_ptr, y_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
    # x is (M, N) row-major; the block pointer reads it as its transpose (N, M) with swapped
    # strides and order=(0, 1), and y (N, M) gets x.T.
    pn = tl.program_id(0)
    pm = tl.program_id(1)
    xt = tl.make_block_ptr(x_ptr, (N, M), (1, N), (pn * BN, pm * BM), (BN, BM), (0, 1))
    y = tl.make_block_ptr(y_ptr, (N, M), (M, 1), (pn * BN, pm * BM), (BN, BM), (1, 0))
    tl.store(y, tl.load(xt, boundary_check=(0, 1)), boundary_check=(0, 1))


@ww.jit
def _load_row(p, ROWS: tl.constexpr):
    return tl.load(p, boundary_check=(0, 1), padding_option="zero") * ROWS


@ww.jit
def _next(p, step):
    return p.advance((step, 0))


@ww.jit
def row_sums(x_ptr, out_ptr, M, N, step, BM: tl.constexpr, BN: tl.constexpr):
    # Sums, for each of BN columns, the rows a block pointer visits: a while loop and an `if`
    # carry and merge it, and @jit helpers take and return it.
    p = tl.make_block_ptr(x_ptr, (M, N), (N, 1), (0, 0), (BM, BN), (1, 0))
    acc = tl.zeros((BN,), dtype=tl.float32)
    i = 0
    while i < M:
        acc += tl.sum(_load_row(p, 1), axis=0)
        if i % 2 == 0:
            p = _next(p, step)
        else:
            p = tl.advance(p, (BM, 0))
        i += BM
    tl.store(out_ptr + tl.arange(0, BN), acc)


@ww.jit
def wide_offsets(x_ptr, y_ptr, N, BIG, BLOCK: tl.constexpr):
    # Offsets and shapes are 64-bit: advancing by 2**32 leaves the block outside the tensor
    # (zeros), and advancing back returns to the data; BIG (2**33, an int64) as a shape.
    p = tl.make_block_ptr(x_ptr, (N,), (1,), (0,), (BLOCK,), (0,))
    far = tl.advance(p, (4294967296,))
    y = tl.make_block_ptr(y_ptr, (3 * BLOCK,), (1,), (0,), (BLOCK,), (0,))
    tl.store(y, tl.load(far, boundary_check=(0,), padding_option="zero"))
    back = tl.advance(far, (-4294967296,))
    tl.store(y.advance((BLOCK,)), tl.load(back, boundary_check=0))
    n64 = N.to(tl.int64)
    q = tl.make_block_ptr(x_ptr, (BIG,), (n64 // n64,), (n64 - BLOCK,), (BLOCK,), (0,))
    tl.store(tl.advance(y, (2 * BLOCK,)), tl.load(q, boundary_check=(0,), padding_option="nan"))


@ww.jit
def fill(y_ptr, M, N, VALUE: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr):
    # A scalar and a (1, BN) row stored through a block pointer broadcast to the block.
    y = tl.make_block_ptr(y_ptr, (M, N), (N, 1), (0, 0), (BM, BN), (1, 0))
    tl.store(y, VALUE, boundary_check=(0, 1))
    row = tl.arange(0, BN)[None, :].to(tl.float32)
    tl.store(tl.advance(y, (BM, 0)), row, boundary_check=(0, 1), cache_modifier=".cg",
             eviction_policy="evict_first")


@ww.jit
def tile_sums(x_ptr, out_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
    # out[0] = the sum of x's (BM, BN) tiles, out[1] = the sum of its first BN columns' tiles
    # again. Loops nest: the outer one advances `rows` down, the inner one a block pointer made
    # from it across the columns; a third loop re-makes its block pointer every iteration.
    acc = tl.zeros((BM, BN), tl.float32)
    rows = tl.make_block_ptr(x_ptr, (M, N), (N, 1), (0, 0), (BM, BN), (1, 0))
    for i in tl.range(0, M, BM, num_stages=2):
        p = rows
        for j in range(0, N, BN):
            acc += tl.load(p, boundary_check=(0, 1), padding_option="zero")
            p = tl.advance(p, (0, BN))
        rows = tl.advance(rows, (BM, 0))
    again = tl.zeros((BM, BN), tl.float32)
    q = tl.make_block_ptr(x_ptr, (M, N), (N, 1), (0, 0), (BM, BN), (1, 0))
    for i in range(0, M, BM):
        q = tl.make_block_ptr(x_ptr + i * N, (M - i, N), (N, 1), (0, 0), (BM, BN), (1, 0))
        again += tl.load(q, boundary_check=(0, 1), padding_option="zero")
    o = tl.arange(0, BM)[:, None] * BN + tl.arange(0, BN)[None, :]
    tl.store(out_ptr + o, acc)
    tl.store(out_ptr + BM * BN + o, again)
