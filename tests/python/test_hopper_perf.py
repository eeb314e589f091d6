"""Hopper code quality of TLX constructs (tests/python/hopper_perf_kernels.py): a wgmma
accumulator that enters a loop while its wgmma is still in flight (TLX's GEMM tutorials peel
the first k step) is carried in its own registers; copying it made ptxas wait there and
serialize every wgmma of the kernel (C7517 / C7511). The interpreter against NumPy, the sm_90a
PTX and ptxas' report."""

import importlib
import re
from pathlib import Path

import numpy as np
import pytest

import warpweave as ww

import hopper_perf_kernels as hp

native_loader = importlib.import_module("warpweave._native_loader")
pytestmark = pytest.mark.skipif(not native_loader.available(),
                                reason="warpweave._native is not built (pip install .)")

KERNELS = Path(hp.__file__)


@pytest.fixture(autouse=True)
def no_disk_cache(monkeypatch):
    monkeypatch.setenv("WARPWEAVE_CACHE_DISABLE", "1")


def descriptor(t, block):
    return ww.TensorDescriptor(t, list(t.shape), [int(s) // t.itemsize for s in t.strides], block)


def signature(zero_init, while_loop, keep_first, BM=128, BN=128, BK=64, stages=4):
    return (f"a_desc:desc<fp16,{BM}x{BK}>, b_desc:desc<fp16,{BK}x{BN}>, "
            f"c_desc:desc<fp16,{BM}x{BN}>, M:i32:16, N:i32:16, K:i32:16, BM={BM}, BN={BN}, "
            f"BK={BK}, NUM_STAGES={stages}, ZERO_INIT={int(zero_init)}, "
            f"WHILE_LOOP={int(while_loop)}, KEEP_FIRST={int(keep_first)}")


def compile_ptx(sig):
    return native_loader.native().compile([(str(KERNELS), KERNELS.read_text())], "peeled_ws_gemm",
                                          sig, {}, target="sm_90a", num_warps=4,
                                          stage="ptx").ptx


FLOAT_COPY = re.compile(r"mov\.f32\s+%f\d+,\s*%f\d+;")


@pytest.mark.parametrize("zero_init", [True, False])
@pytest.mark.parametrize("while_loop", [False, True])
@pytest.mark.parametrize("keep_first", [False, True])
def test_peeled_first_step_in_the_interpreter(zero_init, while_loop, keep_first):
    rng = np.random.default_rng(3)
    M, N, K, BM, BN, BK = 128, 64, 160, 64, 32, 32
    a = (rng.integers(-8, 9, (M, K)) / 8).astype(np.float16)
    b = (rng.integers(-8, 9, (K, N)) / 8).astype(np.float16)
    c = np.full((M, N), np.nan, np.float16)
    grid = (M // BM) * (N // BN)
    hp.peeled_ws_gemm[(grid,)](descriptor(a, [BM, BK]), descriptor(b, [BK, BN]),
                               descriptor(c, [BM, BN]), M, N, K, BM=BM, BN=BN, BK=BK,
                               NUM_STAGES=2, ZERO_INIT=zero_init, WHILE_LOOP=while_loop,
                               KEEP_FIRST=keep_first, num_warps=4)
    want = a.astype(np.float64) @ b.astype(np.float64)
    if keep_first:
        want -= a[:, :BK].astype(np.float64) @ b[:BK].astype(np.float64)
    np.testing.assert_array_equal(c, want.astype(np.float16))


@pytest.mark.parametrize("zero_init", [True, False])
@pytest.mark.parametrize("while_loop", [False, True])
def test_in_flight_accumulator_enters_the_loop_without_a_copy(zero_init, while_loop, ptxas):
    ptx = compile_ptx(signature(zero_init, while_loop, keep_first=False))
    # No copy of an fp32 register anywhere: the peeled wgmma's accumulator is the loop's.
    assert not FLOAT_COPY.search(ptx)
    assert "wgmma.wait_group.sync.aligned 1;" in ptx
    log = ptxas(ptx, "sm_90a", verbose=True).log
    assert "serialized" not in log and "C7511" not in log, log
    assert "C7517" not in log, log  # no warpgroup.wait injected by ptxas
    assert re.search(r"0 bytes spill stores, 0 bytes spill loads", log), log


def test_accumulator_read_after_the_loop_is_still_copied():
    # The peeled value is read again after the loop: the loop carries copies of it.
    ptx = compile_ptx(signature(zero_init=True, while_loop=False, keep_first=True))
    assert len(FLOAT_COPY.findall(ptx)) >= 64


def params_of(kernel, sig):
    k = native_loader.native().compile([(str(KERNELS), KERNELS.read_text())], kernel, sig, {},
                                       target="sm_90a", num_warps=4, stage="ptx")
    return dict((p[0], p[1]) for p in k.params), k.ptx


BULK_STORE = re.compile(r"cp\.async\.bulk\.tensor\.2d\.global\.shared::cta\.tile\.bulk_group\s+"
                        r"\[%rd\d+,\s*\{(%r\d+),\s*(%r\d+)\}\],\s*\[(%r\d+)\+(\d+)\];")


@pytest.mark.parametrize("BN,swizzle,boxes", [(128, 128, 2), (64, 128, 1), (32, 64, 1)])
def test_descriptor_store_stages_c_in_the_nvmma_swizzle(BN, swizzle, boxes):
    # Unswizzled rows of 128 bytes put the 8 rows of each 32-bit st.shared in one bank (8-way
    # conflicts in every GEMM epilogue that stores C through its descriptor).
    params, ptx = params_of("peeled_ws_gemm", signature(True, False, False, BN=BN))
    assert params["c_desc"].endswith(f"swizzle={swizzle}>"), params
    stores = BULK_STORE.findall(ptx)
    assert len(stores) == boxes, stores
    # Column blocks of the swizzle's span: BM rows of `swizzle` bytes each, and the second box
    # starts swizzle / 2 fp16 columns further.
    offsets = sorted(int(s[3]) for s in stores)
    assert offsets[0] % 1024 == 0
    assert [o - offsets[0] for o in offsets] == [i * 128 * swizzle for i in range(boxes)]
    if boxes == 2:
        assert re.search(r"add\.s32\s+" + re.escape(stores[1][0]) + r",\s*%r\d+,\s*64;", ptx)
    # Row r of a thread's 32-bit store moves its 16-byte chunk by r % 8 (128-byte swizzle):
    # the first row bit of the accumulator (lane bit 2) is 128 + 16 bytes.
    if swizzle == 128:
        assert re.search(r"selp\.b32\s+%r\d+,\s*144,\s*0,", ptx), ptx


def test_descriptor_loaded_and_stored_keeps_an_unswizzled_tile(ptxas):
    params, ptx = params_of("desc_load_store", "desc:desc<fp16,64x64>, ROWS=64, COLS=64")
    assert params["desc"].endswith("swizzle=0>"), params
    ptxas(ptx, "sm_90a", verbose=True)
