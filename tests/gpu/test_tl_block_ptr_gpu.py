"""Triton's block pointers on the GPU (tests/python/tl_block_ptr_kernels.py, the kernels the
interpreter tests run in tests/python/test_tl_block_ptr.py), against PyTorch: 1-D copies with
every padding, 2-D copies checked on some dimensions only, rank 3, transposed views, negative and
64-bit offsets, a while loop / `if` / helpers carrying a block pointer, and matmuls whose K loop
advances two block pointers (pipelined with wgmma on sm_90a)."""

import os
import sys

import pytest

from gpu_requirements import require_cuda

torch = require_cuda()

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))

import tl_block_ptr_kernels as kern  # noqa: E402

DEV = "cuda"


def cdiv(a, b):
    return (a + b - 1) // b


@pytest.mark.parametrize("dtype,pad", [
    (dtype, pad) for dtype in (torch.bool, torch.int16, torch.int32, torch.float16,
                               torch.bfloat16, torch.float32)
    for pad in (None, "", "zero", "nan") if pad != "nan" or dtype.is_floating_point
])
@pytest.mark.parametrize("n", [64, 256, 1024])
@pytest.mark.parametrize("start", ["pid", "lower", "upper"])
def test_copy_1d(dtype, pad, n, start):
    if dtype.is_floating_point:
        a = torch.randn(n, device=DEV).to(dtype)
    else:
        a = torch.randint(0, 2, (n,), device=DEV).to(dtype)
    b = torch.zeros(n, device=DEV, dtype=dtype)
    kern.copy_1d[(n // 64,)](a, b, n, BLOCK=64, PAD=pad, START=start)
    if start != "pid":
        assert not b.any()
        return
    assert torch.equal(b[:n // 2], a[:n // 2])
    if pad == "zero":
        assert not b[n // 2:].any()
    elif pad == "nan":
        assert torch.isnan(b[n // 2:]).all()


@pytest.mark.parametrize("check", [(0, 1), (1, 0), (0,), (1,), ()])
@pytest.mark.parametrize("pad", ["zero", "nan", ""])
def test_copy_2d_checks_only_the_named_dims(check, pad):
    M, N, BM, BN = 48, 40, 32, 16
    big = torch.randn(64, 64, device=DEV)
    y_full = torch.full((64, 64), -7.0, device=DEV)
    x, y = big[:M, :N], y_full[:M, :N]
    grid = ((M + BM - 1) // BM, (N + BN - 1) // BN)
    kern.copy_2d[grid](x, y, M, N, 64, 1, 64, 1, BM=BM, BN=BN, CHECK=check, PAD=pad)
    expect = torch.full((64, 64), -7.0, device=DEV)
    r = grid[0] * BM if 0 not in check else M
    c = grid[1] * BN if 1 not in check else N
    expect[:r, :c] = big[:r, :c]
    assert torch.equal(y_full, expect)


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32])
@pytest.mark.parametrize("M,N", [(100, 72), (256, 192)])
def test_copy_2d_aligned_and_ragged(dtype, M, N):
    x = torch.randn(M, N, device=DEV).to(dtype)
    y = torch.zeros_like(x)
    kern.copy_2d[(cdiv(M, 64), cdiv(N, 64))](x, y, M, N, N, 1, N, 1, BM=64, BN=64,
                                             CHECK=(0, 1), PAD="zero")
    assert torch.equal(y, x)


def test_transposed_view_with_column_major_order():
    M, N = 40, 24
    x = torch.arange(M * N, device=DEV, dtype=torch.float32).reshape(M, N)
    y = torch.zeros(N, M, device=DEV)
    kern.transpose_view[(2, 3)](x, y, M, N, BM=16, BN=16)
    assert torch.equal(y, x.T)


@pytest.mark.parametrize("k", [16, 32, 64])
@pytest.mark.parametrize("num_warps", [4, 8])
def test_matmul_with_negative_advances(k, num_warps):
    m = n = 64
    a = torch.randn(m, k, device=DEV, dtype=torch.float16)
    b = torch.randn(k, n, device=DEV, dtype=torch.float16)
    c = torch.full((m, n), 5.0, device=DEV)
    kern.matmul_no_loop[(1,)](a, b, c, m, n, k, k, 1, n, 1, n, 1, BM=m, BN=n, BK=k,
                              num_warps=num_warps)
    assert not c.any()


@pytest.mark.parametrize("M,N,K", [(64, 64, 64), (100, 72, 88), (512, 512, 512),
                                   (300, 200, 136)])
@pytest.mark.parametrize("blocks,num_warps", [((32, 32, 16), 4), ((128, 128, 64), 8)])
def test_matmul_k_loop_advances_two_block_pointers(M, N, K, blocks, num_warps):
    BM, BN, BK = blocks
    a = torch.randn(M, K, device=DEV, dtype=torch.float16)
    b = torch.randn(K, N, device=DEV, dtype=torch.float16)
    c = torch.full((M, N), float("nan"), device=DEV)
    grid = (cdiv(M, BM), cdiv(N, BN))
    kern.matmul[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                      c.stride(0), c.stride(1), BM=BM, BN=BN, BK=BK, num_warps=num_warps)
    torch.testing.assert_close(c, a.float() @ b.float(), atol=1e-2, rtol=1e-3)


def test_matmul_with_transposed_operand_strides():
    M, N, K = 256, 192, 128
    a = torch.randn(M, K, device=DEV, dtype=torch.float16)
    bt = torch.randn(N, K, device=DEV, dtype=torch.float16)
    c = torch.zeros(M, N, device=DEV)
    kern.matmul[(4, 3)](a, bt, c, M, N, K, K, 1, 1, K, N, 1, BM=64, BN=64, BK=32)
    torch.testing.assert_close(c, a.float() @ bt.float().T, atol=1e-2, rtol=1e-3)


def test_rank_3_checked_on_two_dims():
    src = torch.arange(3 * 4 * 5, device=DEV, dtype=torch.float32).reshape(3, 4, 5)
    dst = torch.zeros_like(src)
    kern.copy_3d[(1,)](src, dst, 3, 4, 5, 20, 5, 1, B0=2, B1=4, B2=4)
    expect = torch.zeros_like(src)
    expect[2:3, 0:4, 3:5] = src[2:3, 0:4, 3:5]
    assert torch.equal(dst, expect)


def test_dtype_element_ty_and_whole_tensor_reshape():
    src = torch.arange(16, device=DEV, dtype=torch.float16)
    dst = torch.zeros_like(src)
    kern.element_ty[(1,)](src, dst, 16, BLOCK=16)
    assert torch.equal(dst, src)
    x = torch.arange(32 * 32, device=DEV, dtype=torch.int32).reshape(32, 32)
    out = torch.zeros(32 * 32, device=DEV, dtype=torch.int32)
    kern.trans_reshape[(1,)](x, out, S0=32, S1=32)
    assert torch.equal(out.reshape(32, 32), x.T)


@pytest.mark.parametrize("step", [8, 16])
def test_while_loop_if_and_helpers_carry_block_pointers(step):
    M, N, BM, BN = 64, 16, 8, 16
    x = torch.randint(-5, 5, (M, N), device=DEV).float()
    out = torch.zeros(N, device=DEV)
    kern.row_sums[(1,)](x, out, M, N, step, BM=BM, BN=BN)
    expect = torch.zeros(N, device=DEV)
    row, i = 0, 0
    while i < M:
        expect += x[row:row + BM].sum(dim=0)
        row += step if i % 2 == 0 else BM
        i += BM
    assert torch.equal(out, expect)


@pytest.mark.parametrize("M,N", [(64, 64), (40, 56)])
def test_nested_loops_and_block_pointers_remade_in_a_loop(M, N):
    BM, BN = 16, 16
    x = torch.randint(-4, 5, (M, N), device=DEV).float()
    out = torch.zeros(2, BM, BN, device=DEV)
    kern.tile_sums[(1,)](x, out, M, N, BM=BM, BN=BN)
    pad = torch.zeros(cdiv(M, BM) * BM, cdiv(N, BN) * BN, device=DEV)
    pad[:M, :N] = x
    tiles = pad.reshape(pad.shape[0] // BM, BM, pad.shape[1] // BN, BN)
    assert torch.equal(out[0], tiles.sum(dim=(0, 2)))
    assert torch.equal(out[1], tiles[:, :, 0, :].sum(dim=0))


def test_64_bit_offsets_and_shapes():
    BLOCK = 32
    x = torch.arange(1, 65, device=DEV, dtype=torch.float32)
    y = torch.full((3 * BLOCK,), -1.0, device=DEV)
    kern.wide_offsets[(1,)](x, y, 64, 2**33, BLOCK=BLOCK)
    assert not y[:BLOCK].any()
    assert torch.equal(y[BLOCK:2 * BLOCK], x[:BLOCK])
    assert torch.equal(y[2 * BLOCK:], x[64 - BLOCK:])


def test_scalar_and_row_values_broadcast_to_the_block():
    M, N = 12, 10
    y = torch.zeros(M, N, device=DEV)
    kern.fill[(1,)](y, M, N, VALUE=3.5, BM=8, BN=16)
    expect = torch.zeros(M, N, device=DEV)
    expect[:8] = 3.5
    expect[8:] = torch.arange(N, device=DEV, dtype=torch.float32)
    assert torch.equal(y, expect)
