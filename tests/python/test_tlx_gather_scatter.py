"""tlx.local_gather / tlx.local_scatter (torch.gather / Tensor.scatter_ along one axis of a
shared-memory buffer): the interpreter against NumPy, the sm_90a PTX through ptxas, and the
compile errors for what they refuse. The GPU runs the same kernels in
tests/gpu/test_tlx_gather_scatter_gpu.py."""

import importlib
import re
from pathlib import Path

import numpy as np
import pytest

import warpweave as ww
from tlx_gather_scatter_kernels import (gather_1d, gather_2d, scatter_2d, scatter_gather_3d,
                                        tma_then_gather)

native_loader = importlib.import_module("warpweave._native_loader")
pytestmark = pytest.mark.skipif(not native_loader.available(),
                                reason="warpweave._native is not built (pip install .)")

KERNELS = Path(__file__).with_name("tlx_gather_scatter_kernels.py")


def compile_here(kernel, signature, num_warps=4, stage="cubin"):
    files = [(str(KERNELS), KERNELS.read_text())]
    return native_loader.native().compile(files, kernel, signature, {}, target="sm_90a",
                                          num_warps=num_warps, stage=stage)


def shifted_indices(shape, axis, extent, reverse=False):
    """Index arrays that permute along `axis` differently at each position."""
    grids = np.indices(shape)
    base = grids.sum(axis=0) - grids[axis]
    idx = (base + grids[axis]) % extent
    return ((extent - 1 - idx) % extent if reverse else idx).astype(np.int32)


# ---------------------------------------------------------------------------------------------
# Interpreter against NumPy
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("r,c,ir,ic,axis", [(32, 32, 32, 32, 0), (32, 32, 32, 32, 1),
                                            (64, 16, 8, 16, 0), (16, 64, 8, 16, 1)])
def test_gather_2d_interp(r, c, ir, ic, axis):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((r, c)).astype(np.float32)
    extent = (r, c)[axis]
    idx = rng.integers(0, extent, (ir, ic)).astype(np.int32)
    out = np.zeros((ir, ic), np.float32)
    gather_2d[(1,)](x, idx, out, R=r, C=c, IR=ir, IC=ic, AXIS=axis, num_warps=2)
    src = x[:, :ic] if axis == 0 else x[:ir, :]  # the other axis: the indices' extent
    np.testing.assert_array_equal(out, np.take_along_axis(src, idx, axis))


def test_gather_1d_diagonal_interp():
    n, m = 32, 32
    x = np.arange(n * m, dtype=np.float32)
    idx = (np.arange(n) * (m + 1)).astype(np.int32)
    out = np.zeros(n, np.float32)
    gather_1d[(1,)](x, idx, out, N=n * m, K=n, num_warps=1)
    np.testing.assert_array_equal(out, x[idx])


def test_gather_int64_indices_interp():
    x = np.arange(64, dtype=np.float16)
    idx = np.arange(63, -1, -1, dtype=np.int64)[:16]
    out = np.zeros(16, np.float16)
    gather_1d[(1,)](x, idx, out, N=64, K=16)
    np.testing.assert_array_equal(out, x[idx])


@pytest.mark.parametrize("axis", [0, 1])
def test_scatter_2d_interp(axis):
    r, c = 32, 64
    rng = np.random.default_rng(1)
    x = rng.standard_normal((r, c)).astype(np.float32)
    v = rng.standard_normal((r, c)).astype(np.float32)
    idx = shifted_indices((r, c), axis, (r, c)[axis], reverse=True)
    out = np.zeros((r, c), np.float32)
    scatter_2d[(1,)](x, idx, v, out, R=r, C=c, IR=r, IC=c, AXIS=axis)
    want = x.copy()
    np.put_along_axis(want, idx, v, axis)
    np.testing.assert_array_equal(out, want)


def test_scatter_fewer_rows_than_the_buffer_interp():
    x = np.zeros((32, 16), np.int32)
    idx = np.tile(np.arange(16, dtype=np.int32)[::-1], (8, 1))
    v = np.arange(8 * 16, dtype=np.int32).reshape(8, 16) + 1
    out = np.zeros_like(x)
    scatter_2d[(1,)](x, idx, v, out, R=32, C=16, IR=8, IC=16, AXIS=1)
    want = x.copy()
    want[:8, ::-1] = v
    np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_scatter_then_gather_3d_interp(axis):
    shape = (16, 8, 4)
    x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape) + 200
    idx = shifted_indices(shape, axis, shape[axis], reverse=True)
    out = np.zeros((2,) + shape, np.float32)
    scatter_gather_3d[(1,)](x, idx, out, N=16, M=8, P=4, AXIS=axis, num_warps=1)
    tile = np.zeros(shape, np.float32)
    np.put_along_axis(tile, idx, x, axis)
    np.testing.assert_array_equal(out[0], x)
    np.testing.assert_array_equal(out[1], tile)


def test_gather_index_out_of_range_is_reported():
    x = np.arange(64, dtype=np.float32)
    idx = np.arange(16, dtype=np.int32)
    idx[5] = 64
    with pytest.raises(Exception, match=r"local_gather index 64 at \[5\] is out of range for "
                                        r"axis 0 of extent 64"):
        gather_1d[(1,)](x, idx, np.zeros(16, np.float32), N=64, K=16)


def test_gather_from_a_tma_tile_interp():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((64, 64)).astype(np.float16)
    idx = rng.integers(0, 64, (64, 64)).astype(np.int32)
    out = np.zeros((64, 64), np.float16)
    tma_then_gather[(1,)](ww.TensorDescriptor.from_tensor(x, [64, 64]), idx, out, R=64, C=64)
    np.testing.assert_array_equal(out, np.take_along_axis(x, idx, 0))


# ---------------------------------------------------------------------------------------------
# PTX for sm_90a (ptxas)
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("num_warps", [1, 4])
def test_gather_ptx(num_warps):
    k = compile_here("gather_2d", "x_ptr:*fp32:16, idx_ptr:*i32:16, out_ptr:*fp32:16, R=64, "
                     "C=64, IR=64, IC=64, AXIS=1", num_warps=num_warps)
    assert k.cubin
    # One scalar shared load per gathered element of the thread.
    assert len(re.findall(r"ld\.shared\.f32 ", k.ptx)) == 64 * 64 // (32 * num_warps)


def test_scatter_ptx_is_bracketed_by_barriers():
    k = compile_here("scatter_2d", "x_ptr:*fp16:16, idx_ptr:*i64:16, v_ptr:*fp16:16, "
                     "out_ptr:*fp16:16, R=32, C=64, IR=32, IC=64, AXIS=0", num_warps=4)
    assert k.cubin
    body = k.ptx[k.ptx.index("{"):]
    stores = [m.start() for m in re.finditer(r"st\.shared\.b16 ", body)]
    assert len(stores) >= 32 * 64 // 128
    assert "cvt.u32.u64" in body  # 64-bit indices narrowed for the address
    first, last = stores[0], stores[-1]
    assert "bar.sync" in body[:first] and "bar.sync" in body[last:]


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_scatter_gather_3d_ptx(axis):
    k = compile_here("scatter_gather_3d", "x_ptr:*fp32:16, idx_ptr:*i32:16, out_ptr:*fp32:16, "
                     f"N=16, M=8, P=4, AXIS={axis}", num_warps=1)
    assert k.cubin and "ld.shared.f32" in k.ptx and "st.shared.f32" in k.ptx


# ---------------------------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------------------------


def compile_error(kernel, signature):
    with pytest.raises(Exception) as info:
        compile_here(kernel, signature)
    return str(info.value)


def test_axis_out_of_range():
    msg = compile_error("gather_2d", "x_ptr:*fp32:16, idx_ptr:*i32:16, out_ptr:*fp32:16, R=32, "
                        "C=32, IR=32, IC=32, AXIS=2")
    assert ("tlx.local_gather's axis 2 is out of range for buffer<1x32x32xfp32, smem> "
            "(valid: 0..1)") in msg
    assert "tlx_gather_scatter_kernels.py:" in msg


def test_float_indices_refused():
    msg = compile_error("gather_1d", "x_ptr:*fp32:16, idx_ptr:*fp32:16, out_ptr:*fp32:16, "
                        "N=64, K=16")
    assert "tlx.local_gather's indices must be an integer tensor, got tensor<16xfp32>" in msg


def test_indices_wider_than_the_buffer_refused():
    msg = compile_error("gather_2d", "x_ptr:*fp32:16, idx_ptr:*i32:16, out_ptr:*fp32:16, R=32, "
                        "C=16, IR=32, IC=32, AXIS=0")
    assert "larger than the buffer buffer<1x32x16xfp32, smem> along axis 1" in msg


def test_values_of_another_type_refused():
    msg = compile_error("scatter_2d", "x_ptr:*fp32:16, idx_ptr:*i32:16, v_ptr:*fp16:16, "
                        "out_ptr:*fp32:16, R=32, C=32, IR=32, IC=32, AXIS=0")
    assert "tlx.local_scatter: the values are tensor<32x32xfp16> but the buffer holds " \
           "float32" in msg


def test_gather_from_a_swizzled_tile_ptx():
    # TMA's 128-byte swizzle: row r of a 64x64 fp16 tile starts at r * 128 XOR (r % 8) * 16, so
    # the index's bits select XORed row bases (row 1: 144, row 2: 288, row 4: 576, row 8: 1024).
    k = compile_here("tma_then_gather", "desc:desc<fp16,64x64>, idx_ptr:*i32:16, "
                     "out_ptr:*fp16:16, R=64, C=64", num_warps=4)
    assert k.cubin
    for base in (144, 288, 576, 1024, 2048, 4096):
        assert re.search(rf"selp\.b32 %r\d+, {base}, 0, %p\d+;", k.ptx), base
    assert k.ptx.count("ld.shared.b16") == 64 * 64 // 128
