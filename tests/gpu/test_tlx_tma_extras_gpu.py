"""TLX's TMA extras on the GPU (tests/python/tlx_tma_extras_kernels.py): TMA through tensor maps
the kernel writes into set_allocator's global scratch (with prefetches and L2 cache hints),
descriptor slots, descriptors captured by async tasks, and 1-D bulk copies."""

import os
import sys

import pytest

from gpu_requirements import require_cuda

torch = require_cuda((9, 0), "TMA and bulk copies need Hopper")

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))

import tlx_tma_extras_kernels as kern  # noqa: E402

import warpweave as ww  # noqa: E402

DEV = "cuda"


@pytest.fixture(autouse=True)
def scratch_allocator(monkeypatch):
    monkeypatch.setenv("WARPWEAVE_TRAP_HANGS", "4000000")
    calls = []

    def alloc(size, align, stream):
        calls.append((size, align, stream))
        return torch.empty(size, dtype=torch.int8, device=DEV)

    ww.set_allocator(alloc)
    yield calls
    ww.set_allocator(None)


@pytest.mark.parametrize("prefetch", [False, True])
@pytest.mark.parametrize("hints", [("", ""), ("evict_first", "evict_last")])
def test_tma_through_device_tensor_maps(prefetch, hints, scratch_allocator):
    x = torch.randint(-1000, 1000, (256, 192), dtype=torch.int16, device=DEV)
    y = torch.zeros_like(x)
    kern.tile_copy_device_desc[(4, 3)](x, y, 256, 192, BM=64, BN=64, PREFETCH=prefetch,
                                       MAP_PREFETCH=prefetch, LOAD_HINT=hints[0],
                                       STORE_HINT=hints[1])
    torch.testing.assert_close(y, x)
    # Two tensor maps of 128 bytes for each of the 12 programs.
    assert scratch_allocator[-1][:2] == (2 * 128 * 12, 128)


def test_device_tensor_maps_at_the_edge_of_the_tensor():
    # 100 x 72 elements: the edge tiles are clipped by TMA (loads fill zeros, stores drop).
    x = torch.randn(100, 72, device=DEV).to(torch.float16)
    y = torch.zeros_like(x)
    kern.tile_copy_device_desc[(2, 2)](x, y, 100, 72, BM=64, BN=64, PREFETCH=True,
                                       MAP_PREFETCH=True, LOAD_HINT="", STORE_HINT="")
    torch.testing.assert_close(y, x)


def test_host_descriptor_tensormap_prefetch():
    x = torch.randn(128, 128, device=DEV).to(torch.float16)
    y = torch.zeros_like(x)
    kern.tile_copy_host_desc[(2, 2)](ww.TensorDescriptor.from_tensor(x, [64, 64]),
                                     ww.TensorDescriptor.from_tensor(y, [64, 64]), BM=64, BN=64)
    torch.testing.assert_close(y, x)


@pytest.mark.parametrize("tma", [False, True])
def test_descriptor_slots(tma):
    x = torch.arange(256, dtype=torch.int16, device=DEV)
    y = torch.zeros_like(x)
    kern.slot_descriptors[(4,)](x, y, 256, B=64, TMA=tma)
    torch.testing.assert_close(y, x if tma else x + 1)


@pytest.mark.parametrize("tma", [False, True])
def test_descriptors_captured_by_a_task(tma):
    x = torch.arange(256, dtype=torch.float32, device=DEV)
    y = torch.zeros_like(x)
    kern.captured_by_tasks[(4,)](x, y, 256, B=64, TMA=tma)
    torch.testing.assert_close(y, x)


@pytest.mark.parametrize("chunk", [256, 1024])
@pytest.mark.parametrize("explicit", [False, True])
def test_bulk_round_trip(chunk, explicit):
    src = torch.randint(0, 256, (chunk,), dtype=torch.uint8, device=DEV)
    dst = torch.zeros_like(src)
    kern.bulk_round_trip[(1,)](src, dst, CHUNK=chunk, BYTES=chunk, EXPLICIT=explicit, num_warps=1)
    torch.testing.assert_close(dst, src)


def test_bulk_copy_of_a_prefix_and_through_registers():
    src = torch.arange(128, dtype=torch.float16, device=DEV)
    dst = torch.full((128,), -1.0, dtype=torch.float16, device=DEV)
    kern.bulk_round_trip[(1,)](src, dst, CHUNK=128, BYTES=192, EXPLICIT=True)
    torch.testing.assert_close(dst[:96], src[:96])
    assert (dst[96:] == -1).all()
    a = torch.randn(3 * 64, device=DEV)
    b = torch.zeros_like(a)
    kern.bulk_then_registers[(3,)](a, b, N=64)
    torch.testing.assert_close(b, a * 2)


@pytest.mark.parametrize("level", ["L1", "L2"])
def test_prefetch(level):
    x = torch.randn(1000, device=DEV)
    y = torch.zeros(1024, device=DEV)
    kern.prefetch_then_copy[(1,)](x, y, 1000, BLOCK=1024, LEVEL=level, MASKED=True)
    torch.testing.assert_close(y[:1000], x)
