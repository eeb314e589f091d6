"""Big tiles: a tl.dot whose 512x512 result is converted through shared memory in rounds (a
bounded scratch) before its store, and TMA copies of blocks longer than 256 elements along a
dimension, split into several boxes (one mbarrier, expect_tx counting all of them). The
interpreter runs the kernels on NumPy arrays; the PTX backend is checked for the copies it
emits, the tensor-map boxes, and that ptxas accepts it for sm_90a within the shared memory a
block may use."""

import importlib
import re
from pathlib import Path

import numpy as np
import pytest

import warpweave as ww
from big_tiles_kernels import (plain_dot, row_gather_device_desc, staged_dot,
                               tile_round_trip_device_desc, tile_round_trip_host_desc,
                               transpose_copy)

native_loader = importlib.import_module("warpweave._native_loader")
pytestmark = pytest.mark.skipif(not native_loader.available(),
                                reason="warpweave._native is not built (pip install .)")

KERNELS = Path(__file__).with_name("big_tiles_kernels.py")
SM90_SHARED_LIMIT = 232448


@pytest.fixture(autouse=True)
def no_disk_cache(monkeypatch):
    monkeypatch.setenv("WARPWEAVE_CACHE_DISABLE", "1")


def compile_here(kernel, signature, stage="cubin", num_warps=4):
    files = [(str(KERNELS), KERNELS.read_text())]
    return native_loader.native().compile(files, kernel, signature, {}, target="sm_90a",
                                          num_warps=num_warps, stage=stage)


def count(ptx, needle):
    return sum(1 for ln in ptx.splitlines() if needle in ln)


# ---------------------------------------------------------------------------------------------
# Interpreter
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("K", [16, 32, 64])
def test_staged_dot_interp(K):
    rng = np.random.default_rng(K)
    a = rng.standard_normal((512, K)).astype(np.float16)
    b = rng.standard_normal((K, 512)).astype(np.float16)
    c = np.zeros((512, 512), dtype=np.float16)
    staged_dot[(1,)](a, b, c, BM=512, BN=512, BK=K)
    want = a.astype(np.float32) @ b.astype(np.float32)
    np.testing.assert_allclose(c.astype(np.float32), want, rtol=1e-2, atol=1e-2)


def test_transpose_copy_interp():
    x = np.arange(512 * 256, dtype=np.float32).reshape(512, 256)
    y = np.zeros((256, 512), dtype=np.float32)
    transpose_copy[(1,)](x, y, M=512, N=256)
    np.testing.assert_array_equal(y, x.T)


@pytest.fixture
def scratch_allocator():
    def alloc(size, align, stream):
        assert align == 128
        return np.zeros(size, dtype=np.int8)

    ww.set_allocator(alloc)
    yield
    ww.set_allocator(None)


def test_row_gather_of_8192_elements_interp(scratch_allocator):
    M, N, BM, BN = 256, 128, 64, 128
    x = np.arange(M * N, dtype=np.int16).reshape(M, N) % 1000
    y = np.zeros_like(x)
    row_gather_device_desc[(M // BM, N // BN)](x, y, M, N, BM=BM, BN=BN)
    np.testing.assert_array_equal(y, 2 * x)


@pytest.mark.parametrize("BM,BN", [(512, 64), (64, 512), (512, 128), (4, 1024)])
def test_tile_round_trip_device_desc_interp(BM, BN, scratch_allocator):
    M, N = 2 * BM, 2 * BN
    x = (np.arange(M * N) % 251).astype(np.float16).reshape(M, N)
    y = np.zeros_like(x)
    tile_round_trip_device_desc[(2, 2)](x, y, M, N, BM=BM, BN=BN)
    np.testing.assert_array_equal(y, x + 1)


@pytest.mark.parametrize("BM,BN", [(512, 64), (64, 512), (4, 1024)])
def test_tile_round_trip_host_desc_interp(BM, BN):
    M, N = 2 * BM, 2 * BN
    x = (np.arange(M * N) % 251).astype(np.float16).reshape(M, N)
    y = np.zeros_like(x)
    src = ww.TensorDescriptor.from_tensor(x, [BM, BN])
    dst = ww.TensorDescriptor.from_tensor(y, [BM, BN])
    tile_round_trip_host_desc[(2, 2)](src, dst, BM=BM, BN=BN)
    np.testing.assert_array_equal(y, x + 1)


def test_host_box_shapes():
    from warpweave.tensor_descriptor import box_shape

    assert box_shape([1, 8192], "i16", 0) == [1, 256]
    assert box_shape([1, 8192], "i16", None) == [1, 256]
    assert box_shape([512, 64], "fp16", 128) == [256, 64]
    assert box_shape([64, 512], "fp16", 128) == [64, 64]
    assert box_shape([4, 1024], "fp16", 0) == [1, 256]
    assert box_shape([512, 4, 64], "fp16", 128) == [256, 4, 64]
    assert box_shape([64, 64], "fp16", 128) == [64, 64]


def test_block_not_a_multiple_of_256_is_refused():
    x = np.zeros((8, 300), dtype=np.float16)
    with pytest.raises(Exception) as info:
        ww.TensorDescriptor.from_tensor(x, [1, 300]).check_tma_rules("x")
    assert "multiple of 256" in str(info.value)


# ---------------------------------------------------------------------------------------------
# PTX for sm_90a
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("K", [16, 32])
def test_staged_dot_512_fits_shared_memory(K):
    k = compile_here("staged_dot", f"a:*fp16, b:*fp16, c:*fp16, BM=512, BN=512, BK={K}",
                     stage="ptx")
    assert k.shared_bytes <= SM90_SHARED_LIMIT
    # The fp16 result goes through 64 KiB of scratch in rounds, not 512 KiB at once.
    assert count(k.ptx, "wgmma.mma_async") > 0
    assert count(k.ptx, "bar.sync") >= 8


def test_conversion_rounds_reuse_one_scratch_region():
    # A 128x256 fp32 result (128 KiB) stored through a coalesced layout: two rounds through
    # 64 KiB of scratch, each between a pair of barriers.
    k = compile_here("plain_dot", "a:*fp16, b:*fp16, c:*fp32, BM=128, BN=256, BK=32",
                     num_warps=8)
    assert k.shared_bytes == 64 * 1024
    assert k.spill_bytes == 0


def test_small_conversions_stay_one_pass():
    k = compile_here("plain_dot", "a:*fp16, b:*fp16, c:*fp16, BM=128, BN=128, BK=32",
                     stage="ptx")
    # Operand staging (2 x 8 KiB) and the 32 KiB fp16 result in one pass.
    assert k.shared_bytes == 32 * 1024


def test_row_gather_splits_into_boxes_of_256():
    k = compile_here("row_gather_device_desc", "x:*i16, y:*i16, M:i32, N:i32, BM=64, BN=128")
    ptx = k.ptx
    assert count(ptx, "cp.async.bulk.tensor.2d.shared::cluster.global") == 32
    assert count(ptx, "cp.async.bulk.tensor.2d.global.shared::cta") == 32
    boxes = re.findall(r"tensormap\.replace\.tile\.box_dim\.global\.b1024\.b32 \[%\w+\], (\d), "
                       r"(\d+);", ptx)
    assert boxes == [("0", "256"), ("1", "1")] * 2
    # One bulk group for the store (the other two are the tensor maps' acquire guards).
    assert count(ptx, "cp.async.bulk.commit_group") == 3
    assert k.spill_bytes == 0


@pytest.mark.parametrize("BM,BN,copies", [(512, 64, 2), (64, 512, 8), (512, 128, 4),
                                          (4, 1024, 16)])
def test_tile_boxes_device_desc(BM, BN, copies):
    k = compile_here("tile_round_trip_device_desc",
                     f"x:*fp16, y:*fp16, M:i32, N:i32, BM={BM}, BN={BN}")
    assert count(k.ptx, "cp.async.bulk.tensor.2d.shared::cluster.global") == copies
    assert count(k.ptx, "cp.async.bulk.tensor.2d.global.shared::cta") == copies
    if BM * BN <= 32768:  # larger tiles spill their register round trip (+1), not the copies
        assert k.spill_bytes == 0


def test_rows_past_256_land_one_box_apart():
    # [512, 64] fp16 with a 128-byte swizzle: two boxes of 256 rows, 32 KiB apart in the tile,
    # the second 256 rows further in the tensor.
    k = compile_here("tile_round_trip_host_desc", "src:desc<fp16,512x64>, dst:desc<fp16,512x64>, "
                     "BM=512, BN=64", stage="ptx")
    assert "add.s32" in k.ptx and ", 32768;" in k.ptx and ", 256;" in k.ptx
    assert count(k.ptx, "cp.async.bulk.tensor.2d.shared::cluster.global") == 2
