"""TLX views, clusters and replica ids on the GPU (tests/python/tlx_feature_kernels.py): plain
barrier arrivals counted once per task, 2-CTA clusters (rank, size, an arrive on the peer CTA's
barrier, cluster_barrier ordering global writes), local_slice / local_reinterpret / local_trans round trips through shared memory, and
slices read and written by TMA and async_dot, against PyTorch."""

import os
import sys

import pytest

from gpu_requirements import require_cuda

torch = require_cuda()

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))

import tlx_feature_kernels as kern  # noqa: E402

import warpweave as ww  # noqa: E402

DEV = "cuda"


@pytest.fixture(autouse=True)
def trap_instead_of_hanging(monkeypatch):
    # A barrier that never completes traps with a report instead of hanging the run.
    monkeypatch.setenv("WARPWEAVE_TRAP_HANGS", "4000000")
    torch.manual_seed(1234)


def rand16(*shape):
    return torch.randn(*shape, device=DEV, dtype=torch.float16)


def poisoned(*shape, dtype):
    if dtype.is_floating_point:
        return torch.full(shape, float("nan"), device=DEV, dtype=dtype)
    return torch.full(shape, -7, device=DEV, dtype=dtype)


@pytest.mark.parametrize("clusters", [1, 3])
def test_cluster_rank_size_and_remote_arrive(clusters):
    out = poisoned(clusters * 2, 2, dtype=torch.int32)
    kern.cluster_info[(clusters * 2,)](out, ctas_per_cga=(2, 1, 1))
    torch.cuda.synchronize()
    expect = torch.tensor([[r, 2] for _ in range(clusters) for r in (0, 1)], dtype=torch.int32)
    assert torch.equal(out.cpu(), expect), out


def test_plain_arrive_counts_once_per_task():
    # 8 warps complete a count-1 barrier; an 8-warp task and a 4-warp one a count-2 barrier.
    out = poisoned(64, dtype=torch.int32)
    kern.arrive_once_per_task[(1,)](out, N=64, COUNT=1, num_warps=8)
    torch.cuda.synchronize()
    assert (out == 1).all().item(), out
    out = poisoned(64, dtype=torch.int32)
    kern.arrive_from_wide_task[(1,)](out, N=64, num_warps=4)
    torch.cuda.synchronize()
    assert (out == 1).all().item(), out


def test_cluster_barrier_orders_global_writes():
    n, ctas = 256, 8
    x = torch.randint(0, 100, (n,), device=DEV, dtype=torch.int32)
    out = poisoned(ctas, n, dtype=torch.int32)
    kern.cluster_exchange[(ctas,)](x, out, N=n, ctas_per_cga=(2, 1, 1))
    torch.cuda.synchronize()
    pid = torch.arange(ctas, device=DEV, dtype=torch.int32)[:, None]
    peer = pid ^ 1
    expect = (x[None, :] + pid) * 1000 + (x[None, :] + peer)
    assert torch.equal(out, expect)


@pytest.mark.parametrize("r,c,orow,ocol,sr,sc", [
    (64, 64, 32, 0, 32, 64), (64, 64, 0, 32, 64, 32), (64, 128, 16, 64, 16, 64),
    (32, 64, 8, 48, 8, 16)])
def test_slice_load(r, c, orow, ocol, sr, sc):
    x = rand16(r, c)
    out = poisoned(sr, sc, dtype=torch.float16)
    kern.slice_load[(1,)](x, out, R=r, C=c, OR=orow, OC=ocol, SR=sr, SC=sc)
    assert torch.equal(out, x[orow:orow + sr, ocol:ocol + sc])


def quadrants_swapped(x):
    r, c = x.shape
    top, bottom = x[:r // 2], x[r // 2:]
    return torch.cat([torch.cat([bottom[:, c // 2:], bottom[:, :c // 2]], 1),
                      torch.cat([top[:, c // 2:], top[:, :c // 2]], 1)], 0)


# Quadrants of whole 128-byte swizzle rows, and quadrants that cut them (32 or 16 fp16 columns:
# the store XORs the slice's swizzle constant into its addresses as the load does).
@pytest.mark.parametrize("r,c", [(64, 128), (64, 64), (32, 32)])
def test_slice_store(r, c):
    x = rand16(r, c)
    out = poisoned(r, c, dtype=torch.float16)
    kern.slice_store[(1,)](x, out, R=r, C=c, SR=r // 2, SC=c // 2)
    assert torch.equal(out, quadrants_swapped(x))


def test_reinterpret_and_trans():
    x = torch.randn(32, 32, device=DEV, dtype=torch.float32)
    for shape in [(32, 64), (64, 32)]:
        out = poisoned(*shape, dtype=torch.int16)
        kern.reinterpret_load[(1,)](x, out, R=32, C=32, R2=shape[0], C2=shape[1])
        assert torch.equal(out, x.view(torch.int16).reshape(shape)), shape
    xi = torch.randint(-2**31, 2**31 - 1, (16, 32), device=DEV, dtype=torch.int32)
    outi = poisoned(16, 32, dtype=torch.int32)
    kern.reinterpret_store[(1,)](xi.view(torch.float32), outi, R=16, C=32)
    assert torch.equal(outi, xi)
    xt = rand16(32, 64)
    outt = poisoned(64, 32, dtype=torch.float16)
    kern.trans_load[(1,)](xt, outt, R=32, C=64)
    assert torch.equal(outt, xt.T)


def test_view_zoo():
    x = rand16(64, 64)
    row = poisoned(1, 64, dtype=torch.float16)
    wide = poisoned(64, 16, dtype=torch.float64)
    flat = poisoned(8192, dtype=torch.int8)
    kern.view_zoo[(1,)](x, row, wide, flat, ROW=5)
    assert torch.equal(row[0], x[5])
    assert torch.equal(wide.view(torch.int64), x.view(torch.int64).reshape(64, 16))
    assert torch.equal(flat, x.view(torch.int8).reshape(-1))
    x3 = torch.randn(4, 16, 16, device=DEV)
    out = poisoned(16, 2, 8, dtype=torch.float32)
    kern.slice_of_3d_transposed[(1,)](x3, out)
    assert torch.equal(out, x3[2:4, 8:16, :].permute(2, 0, 1))


@pytest.mark.parametrize("r,c,orow,ocol,sr,sc", [
    (64, 64, 0, 32, 64, 32), (64, 128, 32, 64, 32, 64), (128, 64, 64, 0, 64, 64)])
def test_tma_load_then_slice_load(r, c, orow, ocol, sr, sc):
    x = rand16(r, c)
    desc = ww.TensorDescriptor(x, [r, c], [c, 1], [r, c])
    out = poisoned(sr, sc, dtype=torch.float16)
    kern.tma_then_slice_load[(1,)](desc, out, R=r, C=c, OR=orow, OC=ocol, SR=sr, SC=sc)
    assert torch.equal(out, x[orow:orow + sr, ocol:ocol + sc])


def test_slice_store_then_tma_store():
    x = rand16(64, 128)
    out = poisoned(64, 128, dtype=torch.float16)
    desc = ww.TensorDescriptor(out, [64, 128], [128, 1], [64, 128])
    kern.slice_store_then_tma[(1,)](x, desc, R=64, C=128, SR=32, SC=64)
    assert torch.equal(out, quadrants_swapped(x))


@pytest.mark.parametrize("r,c,orow,ocol,sr,sc", [
    (128, 64, 64, 0, 64, 64), (64, 128, 0, 64, 64, 64), (128, 128, 64, 64, 64, 64)])
def test_tma_into_and_out_of_a_slice(r, c, orow, ocol, sr, sc):
    x = rand16(sr, sc)
    out = poisoned(sr, sc, dtype=torch.float16)
    din = ww.TensorDescriptor(x, [sr, sc], [sc, 1], [sr, sc])
    dout = ww.TensorDescriptor(out, [sr, sc], [sc, 1], [sr, sc])
    kern.tma_through_slice[(1,)](din, dout, R=r, C=c, OR=orow, OC=ocol, SR=sr, SC=sc)
    assert torch.equal(out, x)


def test_async_dot_from_a_slice():
    m = n = k = 64
    a, b = rand16(m, k), rand16(k, n)
    c = poisoned(m, n, dtype=torch.float32)
    da = ww.TensorDescriptor(a, [m, k], [k, 1], [m, k])
    db = ww.TensorDescriptor(b, [k, n], [n, 1], [k, n])
    kern.async_dot_rows_of_a[(1,)](da, db, c, M=m, N=n, K=k)
    ref = a.double() @ b.double()
    err = (c.double() - ref).norm() / ref.norm()
    assert err < 1e-3, err


def test_replica_ids():
    out = poisoned(3, 16, dtype=torch.int32)
    kern.replica_ids[(1,)](out, N=16)
    expect = torch.tensor([[1] * 16, [11] * 16, [21] * 16], dtype=torch.int32)
    assert torch.equal(out.cpu(), expect)
