"""Triton's block pointers (issue 17): tl.make_block_ptr, tl.advance and the .advance method,
tl.load with boundary_check / padding_option and tl.store with boundary_check, in the interpreter
against NumPy (1-D, 2-D and 3-D blocks, checks on some dimensions only, zero / nan / no padding,
negative and 64-bit offsets, block pointers carried by for and while loops, merged by `if`s and
passed to helpers, a matmul whose K loop advances two of them); their located errors; and the
compiled form: a 2-D block-pointer copy gets the same vector loads and stores as the equivalent
pointer kernel, and the kernels pass ptxas for sm_90a and sm_80."""

import re

import numpy as np
import pytest

import warpweave as ww
import warpweave.language as tl

import tl_block_ptr_kernels as kern

pytest.importorskip("warpweave._native")

TARGETS = [(90, "sm_90a"), (80, "sm_80")]


# ---- 1-D ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype,pad", [
    (dtype, pad) for dtype in (np.bool_, np.int16, np.int32, np.float16, np.float32)
    for pad in (None, "", "zero", "nan")
    if pad != "nan" or np.issubdtype(dtype, np.floating)  # nan padding of ints: an error test
])
@pytest.mark.parametrize("n", [64, 256, 1024])
@pytest.mark.parametrize("start", ["pid", "lower", "upper"])
def test_copy_1d(dtype, pad, n, start):
    rng = np.random.default_rng(n)
    if np.issubdtype(dtype, np.floating):
        a = rng.standard_normal(n).astype(dtype)
    else:
        a = rng.integers(0, 2, n).astype(dtype)
    b = np.zeros(n, dtype)
    kern.copy_1d[(n // 64,)](a, b, n, BLOCK=64, PAD=pad, START=start)
    if start != "pid":
        assert not b.any()  # every block lies outside both tensors: nothing is stored
        return
    np.testing.assert_array_equal(b[:n // 2], a[:n // 2])
    if pad == "zero":
        assert not b[n // 2:].any()
    elif pad == "nan":
        assert np.isnan(b[n // 2:]).all()


# ---- 2-D ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("check", [(0, 1), (1, 0), (0,), (1,), ()])
@pytest.mark.parametrize("pad", ["zero", "nan", ""])
def test_copy_2d_checks_only_the_named_dims(check, pad):
    M, N, BM, BN = 48, 40, 32, 16
    rng = np.random.default_rng(3)
    big = rng.standard_normal((64, 64)).astype(np.float32)
    x = big[:M, :N]  # a view: rows 64 apart; past column N or row M lies more data
    y_full = np.full((64, 64), -7.0, np.float32)
    y = y_full[:M, :N]
    grid = ((M + BM - 1) // BM, (N + BN - 1) // BN)
    kern.copy_2d[grid](x, y, M, N, 64, 1, 64, 1, BM=BM, BN=BN, CHECK=check, PAD=pad)
    np.testing.assert_array_equal(y, x)
    rows_out = 0 not in check  # unchecked dims read and write past the edge (x's neighbours)
    cols_out = 1 not in check
    GM, GN = grid[0] * BM, grid[1] * BN
    expect = np.full((64, 64), -7.0, np.float32)
    r = GM if rows_out else M
    c = GN if cols_out else N
    expect[:r, :c] = big[:r, :c]
    np.testing.assert_array_equal(y_full, expect)


def test_copy_2d_matches_the_pointer_kernel():
    M, N = 100, 72
    x = np.random.default_rng(0).standard_normal((M, N)).astype(np.float16)
    y1 = np.zeros_like(x)
    y2 = np.zeros_like(x)
    grid = (2, 2)
    kern.copy_2d[grid](x, y1, M, N, N, 1, N, 1, BM=64, BN=64, CHECK=(0, 1), PAD="zero")
    kern.copy_2d_pointers[grid](x, y2, M, N, N, 1, N, 1, BM=64, BN=64)
    np.testing.assert_array_equal(y1, x)
    np.testing.assert_array_equal(y2, x)


def test_transposed_view_with_column_major_order():
    M, N = 40, 24
    x = np.arange(M * N, dtype=np.float32).reshape(M, N)
    y = np.zeros((N, M), np.float32)
    kern.transpose_view[(2, 3)](x, y, M, N, BM=16, BN=16)
    np.testing.assert_array_equal(y, x.T)


# ---- matmul ------------------------------------------------------------------------------------


@pytest.mark.parametrize("k", [16, 32, 64])
def test_matmul_with_negative_advances(k):
    m = n = 64
    rng = np.random.default_rng(k)
    a = rng.integers(-3, 4, (m, k)).astype(np.float16)
    b = rng.integers(-3, 4, (k, n)).astype(np.float16)
    c = np.zeros((m, n), np.float32)
    # The last advance leaves a at column -BK: the checked dim 1 reads zeros, so c is 0.
    kern.matmul_no_loop[(1,)](a, b, c, m, n, k, k, 1, n, 1, n, 1, BM=m, BN=n, BK=k)
    assert not c.any()


@pytest.mark.parametrize("M,N,K", [(64, 64, 64), (100, 72, 88), (33, 17, 40)])
def test_matmul_k_loop_advances_two_block_pointers(M, N, K):
    rng = np.random.default_rng(M + N + K)
    a = rng.integers(-3, 4, (M, K)).astype(np.float16)
    b = rng.integers(-3, 4, (K, N)).astype(np.float16)
    c = np.full((M, N), 99.0, np.float32)
    BM, BN, BK = 32, 32, 16
    grid = ((M + BM - 1) // BM, (N + BN - 1) // BN)
    kern.matmul[grid](a, b, c, M, N, K, K, 1, N, 1, N, 1, BM=BM, BN=BN, BK=BK)
    np.testing.assert_array_equal(c, a.astype(np.float32) @ b.astype(np.float32))


def test_matmul_with_transposed_operand_strides():
    # b given as the transpose of a row-major (N, K) array: strides (1, K).
    M, N, K = 64, 48, 32
    rng = np.random.default_rng(5)
    a = rng.integers(-3, 4, (M, K)).astype(np.float16)
    bt = rng.integers(-3, 4, (N, K)).astype(np.float16)
    c = np.zeros((M, N), np.float32)
    kern.matmul[(2, 2)](a, bt, c, M, N, K, K, 1, 1, K, N, 1, BM=32, BN=32, BK=16)
    np.testing.assert_array_equal(c, a.astype(np.float32) @ bt.T.astype(np.float32))


# ---- other shapes and values -------------------------------------------------------------------


def test_rank_3_checked_on_two_dims():
    src = np.arange(3 * 4 * 5, dtype=np.float32).reshape(3, 4, 5)
    dst = np.zeros_like(src)
    kern.copy_3d[(1,)](src, dst, 3, 4, 5, 20, 5, 1, B0=2, B1=4, B2=4)
    expect = np.zeros_like(src)
    expect[2:3, 0:4, 3:5] = src[2:3, 0:4, 3:5]
    np.testing.assert_array_equal(dst, expect)


def test_dtype_element_ty_and_block_shape():
    src = np.arange(16, dtype=np.float16)
    dst = np.zeros_like(src)
    kern.element_ty[(1,)](src, dst, 16, BLOCK=16)
    np.testing.assert_array_equal(dst, src)


def test_whole_tensor_without_boundary_check_then_reshape():
    x = np.arange(32 * 32, dtype=np.int32).reshape(32, 32)
    out = np.zeros(32 * 32, np.int32)
    kern.trans_reshape[(1,)](x, out, S0=32, S1=32)
    np.testing.assert_array_equal(out.reshape(32, 32), x.T)


@pytest.mark.parametrize("step", [8, 16])
def test_while_loop_if_and_helpers_carry_block_pointers(step):
    M, N, BM, BN = 64, 16, 8, 16
    x = np.random.default_rng(step).integers(-5, 5, (M, N)).astype(np.float32)
    out = np.zeros(N, np.float32)
    kern.row_sums[(1,)](x, out, M, N, step, BM=BM, BN=BN)
    # Iterations alternate: even ones move `step` rows, odd ones BM rows; each sums BM rows
    # (rows past M read zeros).
    expect = np.zeros(N, np.float32)
    row, i = 0, 0
    while i < M:
        expect += x[row:row + BM].sum(axis=0)
        row += step if i % 2 == 0 else BM
        i += BM
    np.testing.assert_array_equal(out, expect)


@pytest.mark.parametrize("M,N", [(64, 64), (40, 56)])
def test_nested_loops_and_block_pointers_remade_in_a_loop(M, N):
    BM, BN = 16, 16
    x = np.random.default_rng(M).integers(-4, 5, (M, N)).astype(np.float32)
    out = np.zeros((2, BM, BN), np.float32)
    kern.tile_sums[(1,)](x, out, M, N, BM=BM, BN=BN)
    pad = np.zeros(((M + BM - 1) // BM * BM, (N + BN - 1) // BN * BN), np.float32)
    pad[:M, :N] = x
    tiles = pad.reshape(pad.shape[0] // BM, BM, pad.shape[1] // BN, BN)
    np.testing.assert_array_equal(out[0], tiles.sum(axis=(0, 2)))
    np.testing.assert_array_equal(out[1], tiles[:, :, 0, :].sum(axis=0))


def test_64_bit_offsets_and_shapes():
    BLOCK = 32
    x = np.arange(1, 65, dtype=np.float32)
    y = np.full(3 * BLOCK, -1.0, np.float32)
    kern.wide_offsets[(1,)](x, y, 64, 2**33, BLOCK=BLOCK)
    assert not y[:BLOCK].any()  # 2**32 elements past the start: outside, zeros
    np.testing.assert_array_equal(y[BLOCK:2 * BLOCK], x[:BLOCK])
    np.testing.assert_array_equal(y[2 * BLOCK:], x[64 - BLOCK:])  # shape 2**33 holds it


def test_scalar_and_row_values_broadcast_to_the_block():
    M, N = 12, 10
    y = np.zeros((M, N), np.float32)
    kern.fill[(1,)](y, M, N, VALUE=3.5, BM=8, BN=16)
    expect = np.zeros((M, N), np.float32)
    expect[:8] = 3.5
    expect[8:] = np.arange(N, dtype=np.float32)
    np.testing.assert_array_equal(y, expect)


# ---- errors ------------------------------------------------------------------------------------


@ww.jit
def bad_kernel(x_ptr, n, CASE: tl.constexpr):
    p = tl.make_block_ptr(x_ptr, (n, n), (n, 1), (0, 0), (16, 16), (1, 0))
    if CASE == 0:
        q = tl.make_block_ptr(x_ptr, (n, n), (1,), (0, 0), (16, 16), (1, 0))
    elif CASE == 1:
        q = tl.make_block_ptr(x_ptr, (n,), (n, 1), (0, 0), (16, 16), (1, 0))
    elif CASE == 2:
        q = tl.make_block_ptr(x_ptr, (n, n), (n, 1), (0, 0, 0), (16, 16), (1, 0))
    elif CASE == 3:
        q = tl.make_block_ptr(x_ptr, (n, n), (n, 1), (0, 0), (16, 16), (0,))
    elif CASE == 4:
        q = tl.make_block_ptr(x_ptr, (n, n), (n, 1), (0, 0), (16, 16), (0, 0))
    elif CASE == 5:
        q = tl.load(p, boundary_check=(2,))
    elif CASE == 6:
        q = tl.load(p, boundary_check=(0, 0))
    elif CASE == 7:
        q = tl.load(p, boundary_check=(0,), padding_option="inf")
    elif CASE == 8:
        tl.store(p, tl.zeros((16, 8), tl.float32))
    elif CASE == 9:
        q = tl.load(p, mask=tl.full((16, 16), 1, tl.int1))
    elif CASE == 10:
        q = tl.advance(p, (16,))
    elif CASE == 11:
        q = tl.advance(x_ptr, (16, 0))
    elif CASE == 12:
        q = tl.make_block_ptr(x_ptr, (n, n), (n, 1), (0, 0), (16, 12), (1, 0))
    elif CASE == 13:
        q = tl.make_block_ptr(x_ptr + tl.arange(0, 4), (n,), (1,), (0,), (4,), (0,))
    elif CASE == 14:
        q = tl.store(p, tl.zeros((16, 16), tl.float32), mask=tl.full((16, 16), 1, tl.int1))
    elif CASE == 15:
        q = tl.load(p, boundary_check=(-1,))
    elif CASE == 16:
        for i in range(n):
            p = tl.make_block_ptr(x_ptr, (n, n), (n, 1), (0, 0), (16, 32), (1, 0))
    elif CASE == 17:
        q = p.offset
    elif CASE == 18:
        tl.store(p, tl.zeros((16,), tl.float32))
    elif CASE == 19:
        q = tl.make_block_ptr(x_ptr, (n, 1.5), (n, 1), (0, 0), (16, 16), (1, 0))
    elif CASE == 20:
        q = tl.load(x_ptr, boundary_check=(0,))


@ww.jit
def bad_int_nan(x_ptr, n):
    p = tl.make_block_ptr(x_ptr, (n,), (1,), (0,), (16,), (0,))
    tl.load(p, boundary_check=(0,), padding_option="nan")


ERRORS = [
    (0, "tl.make_block_ptr's strides has 1 entry but block_shape [16, 16] has rank 2; shape, "
        "strides, offsets, block_shape and order need one entry per dimension"),
    (1, "tl.make_block_ptr's shape has 1 entry but block_shape [16, 16] has rank 2"),
    (2, "tl.make_block_ptr's offsets has 3 entries but block_shape [16, 16] has rank 2"),
    (3, "tl.make_block_ptr's order has 1 entry but block_shape [16, 16] has rank 2"),
    (4, "tl.make_block_ptr's order [0, 0] must be a permutation of the dimensions 0 to 1"),
    (5, "tl.load's boundary_check names dimension 2, but the block pointer has rank 2 "
        "(dimensions 0 to 1)"),
    (6, "tl.load's boundary_check names dimension 0 twice"),
    (7, "tl.load's padding_option must be '', 'zero' or 'nan', got 'inf'"),
    (8, "tl.store to a block pointer of block shape [16, 16] needs a value of that shape (or a "
        "scalar, or one with size-1 dimensions that broadcast to it), got tensor<16x8xfp32>"),
    (9, "tl.load from a block pointer takes no mask; boundary_check=(dims...) masks the "
        "dimensions to check and padding_option= ('', 'zero' or 'nan') fills what lies outside"),
    (10, "tl.advance got 1 entry in offsets for a block pointer of rank 2; give one per "
         "dimension"),
    (11, "tl.advance takes a block pointer made by tl.make_block_ptr, got a scalar"),
    (12, "tl.make_block_ptr's block_shape [16, 12] must have power-of-two dimensions"),
    (13, "tl.make_block_ptr's base must be a scalar pointer, got a tensor"),
    (14, "tl.store to a block pointer takes no mask; boundary_check=(dims...) masks the "
         "dimensions to check"),
    (15, "tl.load's boundary_check names dimension -1, but the block pointer has rank 2"),
    (16, "loop-carried 'p' changes from block pointer (float32, block 16x16) to block pointer "
         "(float32, block 16x32) in the loop body"),
    (17, "a block pointer has no attribute 'offset'; it has base, shape, strides, offsets, "
         "block_shape, order, dtype and the methods advance, load and store"),
    (18, "tl.store to a block pointer of block shape [16, 16] needs a value of that shape"),
    (19, "tl.make_block_ptr's shape must be integer scalars, got a float"),
    (20, "boundary_check applies to block pointers (tl.make_block_ptr); with a tensor of "
         "pointers use a mask"),
]


@pytest.mark.parametrize("case,message", ERRORS)
def test_errors_are_located_and_say_what_is_accepted(case, message):
    x = np.zeros((16, 16), np.float32)
    with pytest.raises(Exception) as info:
        bad_kernel[(1,)](x, 16, CASE=case)
    text = str(info.value)
    assert message in text
    assert re.search(r"test_tl_block_ptr\.py:\d+:\d+: error", text), text


def test_nan_padding_of_integers_is_an_error():
    with pytest.raises(Exception) as info:
        bad_int_nan[(1,)](np.zeros(16, np.int32), 16)
    text = str(info.value)
    assert ("tl.load's padding_option='nan' needs a floating-point block pointer, this one "
            "points to int32") in text
    assert re.search(r"test_tl_block_ptr\.py:\d+:\d+: error", text), text


# ---- compiled ----------------------------------------------------------------------------------


def compile_for(kernel, signature, constexprs, cap, **options):
    from warpweave.backends.compiler import GPUTarget

    src = ww.compiler.ASTSource(kernel, signature=signature, constexprs=constexprs)
    return ww.compiler.compile(src, target=GPUTarget("cuda", cap, 32), options=options)


COPY_SIG = {"x_ptr": "*fp16", "y_ptr": "*fp16", "M": "i32", "N": "i32", "sxm": "i32",
            "sxn": "i32", "sym": "i32", "syn": "i32"}


def vector_accesses(ptx):
    return (len(re.findall(r"ld\.global(?:\.\w+)*\.v4\.b32", ptx)),
            len(re.findall(r"st\.global(?:\.\w+)*\.v4\.b32", ptx)))


@pytest.mark.parametrize("cap,target", TARGETS)
def test_2d_block_pointer_copy_vectorizes_like_the_pointer_kernel(cap, target):
    # Pointers 16-byte aligned, the dims and row strides multiples of 16, the inner strides 1:
    # what Triton's launcher specializes on. Both kernels then move 8 fp16 per access.
    sig = dict(COPY_SIG)
    for name in ("x_ptr", "y_ptr", "M", "N", "sxm", "sym"):
        sig[name] += ":16"
    sig["sxn"] += ":1"
    sig["syn"] += ":1"
    blk = compile_for(kern.copy_2d, sig, {"BM": 64, "BN": 64, "CHECK": (0, 1), "PAD": "zero"},
                      cap, num_warps=4)
    ptrs = compile_for(kern.copy_2d_pointers, sig, {"BM": 64, "BN": 64}, cap, num_warps=4)
    assert f".target {target}" in blk.asm["ptx"]
    loads, stores = vector_accesses(blk.asm["ptx"])
    assert loads > 0 and stores > 0
    assert (loads, stores) == vector_accesses(ptrs.asm["ptx"])
    assert "ld.global.b16" not in blk.asm["ptx"] and "ld.global.u16" not in blk.asm["ptx"]
    assert blk.asm["cubin"], "ptxas rejected the kernel"


@pytest.mark.parametrize("cap,target", TARGETS)
def test_matmul_compiles_to_tensor_cores(cap, target):
    sig = {"a_ptr": "*fp16:16", "b_ptr": "*fp16:16", "c_ptr": "*fp32:16", "M": "i32:16",
           "N": "i32:16", "K": "i32:16", "sam": "i32:16", "sak": "i32:1", "sbk": "i32:16",
           "sbn": "i32:1", "scm": "i32:16", "scn": "i32:1"}
    k = compile_for(kern.matmul, sig, {"BM": 128, "BN": 128, "BK": 64}, cap, num_warps=8)
    ptx = k.asm["ptx"]
    assert f".target {target}" in ptx
    if cap == 90:
        assert "wgmma.mma_async" in ptx
        assert "cp.async" in ptx  # the K loop is software-pipelined as the pointer form is
    else:
        assert "mma.sync.aligned" in ptx
    assert k.asm["cubin"], "ptxas rejected the kernel"


@pytest.mark.parametrize("cap,target", TARGETS)
def test_other_kernels_pass_ptxas(cap, target):
    cases = [
        (kern.copy_1d, {"a_ptr": "*fp32", "b_ptr": "*fp32", "N": "i32"},
         {"BLOCK": 64, "PAD": "nan", "START": "pid"}),
        (kern.copy_3d, {"src_ptr": "*fp32", "dst_ptr": "*fp32", "d0": "i32", "d1": "i32",
                        "d2": "i32", "s0": "i32", "s1": "i32", "s2": "i32"},
         {"B0": 2, "B1": 4, "B2": 4}),
        (kern.row_sums, {"x_ptr": "*fp32", "out_ptr": "*fp32", "M": "i32", "N": "i32",
                         "step": "i32"}, {"BM": 8, "BN": 16}),
        (kern.wide_offsets, {"x_ptr": "*fp32", "y_ptr": "*fp32", "N": "i32", "BIG": "i64"},
         {"BLOCK": 32}),
        (kern.fill, {"y_ptr": "*fp32", "M": "i32", "N": "i32"}, {"VALUE": 2.0, "BM": 8, "BN": 16}),
        (kern.tile_sums, {"x_ptr": "*fp32", "out_ptr": "*fp32", "M": "i32", "N": "i32"},
         {"BM": 16, "BN": 16}),
        (kern.transpose_view, {"x_ptr": "*fp32", "y_ptr": "*fp32", "M": "i32", "N": "i32"},
         {"BM": 16, "BN": 16}),
    ]
    for kernel, sig, consts in cases:
        k = compile_for(kernel, sig, consts, cap, num_warps=4)
        assert f".target {target}" in k.asm["ptx"]
        assert k.asm["cubin"], f"ptxas rejected {kernel.__name__}"


def test_a_loop_carries_only_the_offsets_it_advances():
    # base, shape and strides stay loop invariants (a stride of 1 folds away); only the offsets
    # that tl.advance moves are carried, and the coordinates and masks of the dimensions the loop
    # does not advance are computed before it.
    sig = {"a_ptr": "*fp16:16", "b_ptr": "*fp16:16", "c_ptr": "*fp32:16", "M": "i32:16",
           "N": "i32:16", "K": "i32:16", "sam": "i32:16", "sak": "i32:1", "sbk": "i32:16",
           "sbn": "i32:1", "scm": "i32:16", "scn": "i32:1"}
    k = compile_for(kern.matmul, sig, {"BM": 64, "BN": 64, "BK": 32}, 80, num_warps=4,
                    num_stages=1)
    ir = k.asm["tile_ir"]
    loop = next(line for line in ir.splitlines() if " = for " in line)
    carried = loop.split(" : ", 1)[1].split(" {", 1)[0]
    assert carried == "tensor<64x64xfp32>, i64, i64", loop
    lines = ir.splitlines()
    start = lines.index(loop)
    body = lines[start + 1:lines.index("  }", start)]
    assert not [op for op in body if "arange" in op], body
    # Per load, the K coordinate's two bounds; M's (for a) and N's (for b) are loop invariants.
    assert len([op for op in body if " = cmp " in op]) == 4, body
