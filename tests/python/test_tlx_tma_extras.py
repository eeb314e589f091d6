"""TLX's TMA extras: tlx.prefetch (pointers and tensor maps), async_descriptor_prefetch_tensor,
TMA through descriptors made in the kernel (a tensor map in set_allocator's global scratch) with
L2 cache hints, allocate/make/reinterpret_tensor_descriptor, descriptors captured by async tasks
(async_tasks(warp_specialize=...)) and 1-D bulk copies (async_load(bulk=True), async_store).
The interpreter runs them on NumPy arrays; the PTX backend is checked for the instructions each
lowers to, assembled by ptxas for sm_90a."""

import importlib
import re
from pathlib import Path

import numpy as np
import pytest

import warpweave as ww
from tlx_tma_extras_kernels import (bulk_round_trip, bulk_runtime_size, bulk_then_registers,
                                    captured_by_tasks, prefetch_scalar, prefetch_then_copy,
                                    slot_descriptors, tile_copy_device_desc,
                                    runtime_slots, runtime_slot_read_by_another_index,
                                    tile_copy_host_desc)

native_loader = importlib.import_module("warpweave._native_loader")
pytestmark = pytest.mark.skipif(not native_loader.available(),
                                reason="warpweave._native is not built (pip install .)")

KERNELS = Path(__file__).with_name("tlx_tma_extras_kernels.py")


@pytest.fixture(autouse=True)
def no_disk_cache(monkeypatch):
    monkeypatch.setenv("WARPWEAVE_CACHE_DISABLE", "1")


def compile_here(kernel, signature, target="sm_90a", num_warps=4, stage="cubin"):
    files = [(str(KERNELS), KERNELS.read_text())]
    return native_loader.native().compile(files, kernel, signature, {}, target=target,
                                          num_warps=num_warps, stage=stage)


def compile_error(kernel, signature, target="sm_90a", stage="cubin"):
    with pytest.raises(Exception) as info:
        compile_here(kernel, signature, target=target, stage=stage)
    return str(info.value)


def interp_error(fn, grid, *args, **kwargs):
    with pytest.raises(Exception) as info:
        fn[grid](*args, **kwargs)
    return str(info.value)


# ---------------------------------------------------------------------------------------------
# Interpreter
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("level", ["L1", "L2"])
@pytest.mark.parametrize("masked", [False, True])
def test_prefetch_leaves_values_alone(level, masked):
    n = 1000 if masked else 1024
    x = np.random.default_rng(1).standard_normal(1024).astype(np.float32)
    y = np.zeros_like(x)
    prefetch_then_copy[(1,)](x, y, n, BLOCK=1024, LEVEL=level, MASKED=masked)
    np.testing.assert_array_equal(y[:n], x[:n])
    assert not y[n:].any()


def test_prefetch_of_a_scalar_pointer():
    x = np.array([3.5], dtype=np.float32)
    y = np.zeros(1, dtype=np.float32)
    prefetch_scalar[(1,)](x, y)
    assert y[0] == 7.0


def test_prefetch_outside_the_argument_is_reported():
    # Unmasked, the last 24 elements' addresses lie past the end of x.
    x = np.zeros(1000, dtype=np.float32)
    y = np.zeros(1024, dtype=np.float32)
    msg = interp_error(prefetch_then_copy, (1,), x, y, 1000, BLOCK=1024, LEVEL="L2", MASKED=False)
    assert "tlx.prefetch" in msg and "out-of-bounds" in msg, msg


@pytest.mark.parametrize("prefetch", [False, True])
@pytest.mark.parametrize("hints", [("", ""), ("evict_first", "evict_last"),
                                   ("evict_last", "evict_first")])
def test_tma_through_device_descriptors_interp(prefetch, hints):
    x = np.arange(128 * 128, dtype=np.int16).reshape(128, 128)
    y = np.zeros_like(x)
    tile_copy_device_desc[(2, 2)](x, y, 128, 128, BM=64, BN=64, PREFETCH=prefetch,
                                  MAP_PREFETCH=prefetch, LOAD_HINT=hints[0], STORE_HINT=hints[1])
    np.testing.assert_array_equal(y, x)


def test_tensormap_prefetch_of_host_descriptors_interp():
    x = np.random.default_rng(2).standard_normal((128, 128)).astype(np.float16)
    y = np.zeros_like(x)
    src = ww.TensorDescriptor.from_tensor(x, [64, 64])
    dst = ww.TensorDescriptor.from_tensor(y, [64, 64])
    tile_copy_host_desc[(2, 2)](src, dst, BM=64, BN=64)
    np.testing.assert_array_equal(y, x)


@pytest.mark.parametrize("tma", [False, True])
def test_descriptor_slots_interp(tma):
    x = np.arange(256, dtype=np.int16)
    y = np.zeros_like(x)
    slot_descriptors[(4,)](x, y, 256, B=64, TMA=tma)
    np.testing.assert_array_equal(y, x if tma else x + 1)


@pytest.mark.parametrize("tma", [False, True])
def test_descriptors_captured_by_a_task_interp(tma):
    x = np.arange(256, dtype=np.float32)
    y = np.zeros_like(x)
    captured_by_tasks[(4,)](x, y, 256, B=64, TMA=tma)
    np.testing.assert_array_equal(y, x)


@pytest.mark.parametrize("chunk", [256, 1024])
@pytest.mark.parametrize("explicit", [False, True])
def test_bulk_round_trip_interp(chunk, explicit):
    src = np.random.default_rng(chunk).integers(0, 256, chunk, dtype=np.uint8)
    dst = np.zeros_like(src)
    bulk_round_trip[(1,)](src, dst, CHUNK=chunk, BYTES=chunk, EXPLICIT=explicit, num_warps=1)
    np.testing.assert_array_equal(dst, src)


def test_bulk_copy_of_a_prefix_interp():
    # 96 of the buffer's 128 fp16 elements (192 bytes): the rest of dst stays as it was.
    src = np.arange(128, dtype=np.float16)
    dst = np.full(128, -1, dtype=np.float16)
    bulk_round_trip[(1,)](src, dst, CHUNK=128, BYTES=192, EXPLICIT=True)
    np.testing.assert_array_equal(dst[:96], src[:96])
    assert (dst[96:] == -1).all()


def test_bulk_copy_read_back_through_registers_interp():
    src = np.random.default_rng(5).standard_normal(3 * 64).astype(np.float32)
    dst = np.zeros_like(src)
    bulk_then_registers[(3,)](src, dst, N=64)
    np.testing.assert_array_equal(dst, src * 2)


def test_bulk_copy_checks_its_run_time_size_interp():
    src = np.arange(64, dtype=np.uint8)
    dst = np.zeros_like(src)
    bulk_runtime_size[(1,)](src, dst, 48, N=64)
    np.testing.assert_array_equal(dst[:48], src[:48])
    msg = interp_error(bulk_runtime_size, (1,), src, dst, 40, N=64)
    assert "multiple of 16" in msg, msg
    msg = interp_error(bulk_runtime_size, (1,), src, dst, 80, N=64)
    assert "at most the buffer's 64" in msg, msg


def test_bulk_copy_past_the_argument_is_reported():
    src = np.arange(32, dtype=np.uint8)
    dst = np.zeros(64, dtype=np.uint8)
    msg = interp_error(bulk_runtime_size, (1,), src, dst, 64, N=64)
    assert "tlx.async_load(bulk=True)" in msg and "out-of-bounds" in msg, msg


# ---------------------------------------------------------------------------------------------
# Compile-time errors
# ---------------------------------------------------------------------------------------------


def test_bulk_size_must_be_whole_16_byte_units():
    msg = compile_error("bulk_bad_size", "src:*u8, N=64, BYTES=40")
    assert "bulk_size is 40 bytes" in msg and "multiple of 16" in msg, msg
    msg = compile_error("bulk_bad_size", "src:*u8, N=64, BYTES=128")
    assert "at most the buffer's 64" in msg, msg


def test_bulk_load_refuses_mask_and_needs_a_barrier():
    assert "mask= is refused" in compile_error("bulk_with_mask", "src:*u8, N=64")
    assert "pass barrier=" in compile_error("bulk_without_barrier", "src:*u8, N=64")


def test_prefetch_level_is_checked():
    assert "level must be \"L1\" or \"L2\"" in compile_error("prefetch_bad_level", "src:*fp32")


def test_warp_specialize_must_be_constant():
    msg = compile_error("tasks_with_bad_flag", "src:*i32, flag:i1")
    assert "warp_specialize=...) must be a compile-time bool" in msg, msg


def test_reinterpret_is_checked_against_the_slot():
    msg = compile_error("reinterpret_as_other_dtype", "src:*fp32, B=64")
    assert "reinterpret with the block_shape and dtype it was made with" in msg, msg
    msg = compile_error("reinterpret_empty_slot", "src:*fp32, B=64")
    assert "no tlx.make_tensor_descriptor has made a descriptor" in msg, msg


def test_tma_descriptor_needs_a_constant_unit_inner_stride():
    msg = compile_error("runtime_inner_stride", "x:*fp32, y:*fp32, n:i32, s:i64, B=64")
    assert "innermost stride to be the constant 1" in msg, msg


def test_device_tensor_maps_need_hopper():
    msg = compile_error("tile_copy_device_desc",
                        "x:*i16, y:*i16, M:i32, N:i32, BM=64, BN=64, PREFETCH=False, "
                        "MAP_PREFETCH=False, LOAD_HINT='', STORE_HINT=''", target="sm_80")
    assert "sm_90a or sm_100a" in msg, msg


# ---------------------------------------------------------------------------------------------
# PTX (sm_90a, through ptxas)
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("level", ["L1", "L2"])
@pytest.mark.parametrize("masked", [False, True])
def test_prefetch_ptx(level, masked):
    k = compile_here("prefetch_then_copy",
                     f"src:*fp32, dst:*fp32, n:i32, BLOCK=1024, LEVEL='{level}', MASKED={masked}")
    assert f"prefetch.global.{level} [" in k.ptx
    assert len(k.cubin) > 0


def device_desc_signature(prefetch, load_hint="", store_hint=""):
    return (f"x:*i16, y:*i16, M:i32, N:i32, BM=64, BN=64, PREFETCH={prefetch}, "
            f"MAP_PREFETCH={prefetch}, LOAD_HINT='{load_hint}', STORE_HINT='{store_hint}'")


@pytest.mark.parametrize("prefetch", [False, True])
def test_device_tensor_maps_ptx(prefetch):
    k = compile_here("tile_copy_device_desc", device_desc_signature(prefetch))
    ptx = k.ptx
    # Two tensor maps, each written field by field, released and acquired.
    assert ptx.count("tensormap.replace.tile.global_address.global.b1024.b64") == 2
    assert ptx.count("tensormap.replace.tile.swizzle_mode.global.b1024.b32") == 2
    assert ptx.count("fence.proxy.tensormap::generic.release.gpu") == 2
    assert ptx.count("fence.proxy.tensormap::generic.acquire.gpu") == 2
    assert ptx.count("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier") == 1
    assert ptx.count("cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group") == 1
    assert ptx.count("cp.async.bulk.prefetch.tensor") == (1 if prefetch else 0)
    assert ptx.count("prefetch.tensormap") == (2 if prefetch else 0)
    assert "prefetch.param.tensormap" not in ptx
    assert re.search(r"^\.version 8\.[6-9]", ptx, re.M), ptx[:200]
    # The scratch: 128 bytes per map and program, passed after the arguments.
    assert [p[0] for p in k.params][-1] == "__ww_global_scratch"
    assert k.global_scratch_size == 256
    assert len(k.cubin) > 0


@pytest.mark.parametrize("load_hint,store_hint", [("", ""), ("evict_first", ""),
                                                  ("", "evict_last"),
                                                  ("evict_last", "evict_first")])
def test_l2_cache_hints_ptx(load_hint, store_hint):
    k = compile_here("tile_copy_device_desc",
                     device_desc_signature(True, load_hint, store_hint))
    ptx = k.ptx
    lines = ptx.splitlines()

    def hinted(needle):
        return [ln for ln in lines if needle in ln and "L2::cache_hint" in ln]

    assert len(hinted("cp.async.bulk.tensor.2d.shared::cluster")) == (1 if load_hint else 0)
    assert len(hinted("cp.async.bulk.prefetch.tensor")) == (1 if load_hint else 0)
    assert len(hinted("cp.async.bulk.tensor.2d.global.shared::cta")) == (1 if store_hint else 0)
    for hint in ("evict_first", "evict_last"):
        wanted = hint in (load_hint, store_hint)
        assert (f"createpolicy.fractional.L2::{hint}" in ptx) == wanted
    if not load_hint and not store_hint:
        assert "createpolicy" not in ptx and "L2::cache_hint" not in ptx
    assert len(k.cubin) > 0


def test_host_descriptor_tensormap_prefetch_ptx():
    k = compile_here("tile_copy_host_desc", "src:desc<fp16,64x64>, dst:desc<fp16,64x64>, BM=64, "
                     "BN=64")
    assert k.ptx.count("prefetch.tensormap") == 2
    assert "prefetch.param.tensormap" not in k.ptx
    assert k.global_scratch_size == 0
    assert "__ww_global_scratch" not in [p[0] for p in k.params]
    assert len(k.cubin) > 0


@pytest.mark.parametrize("tma", [False, True])
def test_descriptor_slots_ptx(tma):
    k = compile_here("slot_descriptors", f"src:*i16, dst:*i16, SIZE:i32, B=64, TMA={tma}")
    # TMA copies and plain desc.load / desc.store alike go through a tensor map per descriptor.
    assert k.ptx.count("tensormap.replace.tile.global_address") == 2
    assert k.global_scratch_size == 256
    assert k.ptx.count("cp.async.bulk.tensor.1d.shared::cluster.global") == 1
    assert k.ptx.count("cp.async.bulk.tensor.1d.global.shared::cta") == 1
    assert "ld.global" not in k.ptx
    assert len(k.cubin) > 0


def test_descriptor_slots_without_tma_on_sm80():
    # sm_80 has no TMA: plain loads and stores through pointers, no tensor map.
    k = compile_here("slot_descriptors", "src:*i16, dst:*i16, SIZE:i32, B=64, TMA=False",
                     target="sm_80")
    assert "tensormap" not in k.ptx and "cp.async.bulk" not in k.ptx
    assert k.global_scratch_size == 0
    assert len(k.cubin) > 0


@pytest.mark.parametrize("tma", [False, True])
def test_descriptors_captured_by_a_task_ptx(tma):
    k = compile_here("captured_by_tasks", f"src:*fp32, dst:*fp32, SIZE:i32, B=64, TMA={tma}")
    assert k.ptx.count("cp.async.bulk.prefetch.tensor.1d") == (1 if tma else 0)
    # Both descriptors are tensor maps, made before the tasks; the task's copies (TLX's, or
    # desc.load / desc.store's) use them.
    assert k.global_scratch_size == 256
    assert k.ptx.count("cp.async.bulk.tensor.1d.shared::cluster.global") == 1
    assert len(k.cubin) > 0


@pytest.mark.parametrize("explicit", [False, True])
def test_bulk_copies_ptx(explicit):
    k = compile_here("bulk_round_trip", f"src:*u8, dst:*u8, CHUNK=1024, BYTES=1024, "
                     f"EXPLICIT={explicit}", num_warps=1)
    ptx = k.ptx
    assert ptx.count("cp.async.bulk.shared::cta.global.mbarrier::complete_tx::bytes") == 1
    assert ptx.count("cp.async.bulk.global.shared::cta.bulk_group") == 1
    assert ptx.count("cp.async.bulk.wait_group.read 0") == 1
    assert len(k.cubin) > 0


def test_bulk_copies_are_refused_on_sm80():
    msg = compile_error("bulk_round_trip", "src:*u8, dst:*u8, CHUNK=256, BYTES=256, "
                        "EXPLICIT=False", target="sm_80")
    assert "sm_90a" in msg and "sm_80" in msg, msg


def test_launch_asks_the_allocator_for_scratch(monkeypatch):
    """The GPU launch path of a kernel with tensor maps: scratch_size bytes per program from
    set_allocator's function, 128-byte aligned, passed last. Checked without a GPU by replacing
    the native launch."""
    jit = importlib.import_module("warpweave.jit")
    native = native_loader.native()
    files = [(str(KERNELS), KERNELS.read_text())]
    kernel = native.compile(files, "tile_copy_device_desc", device_desc_signature(False), {},
                            target="sm_90a", num_warps=4, stage="ptx")
    calls = []

    class Buffer:
        def data_ptr(self):
            return 0x7000

    def alloc(size, align, stream):
        calls.append((size, align, stream))
        return Buffer()

    launched = []

    class FakeKernel:
        params = kernel.params
        folded_args = kernel.folded_args
        global_scratch_size = kernel.global_scratch_size

        def launch(self, gx, gy, gz, stream, args, pdl=False):
            launched.append(((gx, gy, gz), args))

    compiled = jit.CompiledKernel(tile_copy_device_desc, FakeKernel(),
                                  device_desc_signature(False),
                                  [(n, jit._Arg.TENSOR if n in "xy" else jit._Arg.INT)
                                   for n in ("x", "y", "M", "N")], False, (4, 3, 1))
    monkeypatch.setattr(jit, "_current_stream", lambda: 0)
    ww.set_allocator(alloc)
    try:
        compiled.launch_gpu((2, 3, 1), [None] * 10, passed=[0x100, 0x200, 128, 128] + [None] * 6)
    finally:
        ww.set_allocator(None)
    assert calls == [(256 * 6, 128, 0)]
    assert launched == [((2, 3, 1), [0x100, 0x200, 128, 128, 0x7000])]


# ---- slots of tlx.allocate_tensor_descriptor chosen at run time (TLX's grouped GEMM) ----


@pytest.mark.parametrize("tma", [False, True])
def test_runtime_chosen_slots_interp(tma):
    x = np.arange(7 * 32, dtype=np.float32)
    y = np.zeros_like(x)
    runtime_slots[(1,)](x, y, x.size, 7, B=32, SLOTS=3, TMA=tma)
    np.testing.assert_array_equal(y, x)


def test_runtime_slot_outside_the_allocation_is_reported_interp():
    x = np.arange(4 * 32, dtype=np.float32)
    y = np.zeros_like(x)
    with pytest.raises(Exception) as e:
        runtime_slots[(1,)](x, y, x.size, 4, B=32, SLOTS=4, TMA=False)
    assert "slot 3 of a tlx.allocate_tensor_descriptor of 3 slots" in str(e.value)


@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_runtime_chosen_slots_share_their_allocation(requires_ptxas, target):
    k = compile_here("runtime_slots", "src:*fp32, dst:*fp32, SIZE:i32, ROUNDS:i32, B=32, SLOTS=3,"
                     " TMA=True", target=target)
    # One tensor map written per round, into the allocation's 3 slots (384 bytes a program),
    # the slot's index scaling the programs' stride; ptxas accepts it.
    assert k.ptx.count("tensormap.replace.tile.global_address") == 1
    assert k.global_scratch_size == 3 * 128
    assert len(k.cubin) > 0


def test_runtime_slot_read_by_another_index_is_refused():
    msg = compile_error("runtime_slot_read_by_another_index", "src:*fp32, i:i32, j:i32, B=32")
    assert "chosen by another run-time index" in msg and "kernels.py:" in msg


# ---------------------------------------------------------------------------------------------
# TMA reductions (store_reduce=) and buffers of a descriptor's block without its leading 1s
# ---------------------------------------------------------------------------------------------

REDUCE_TYPES = {"add": (np.float32, np.float16, np.int32), "min": (np.float16, np.int32),
                "max": (np.int32, np.float16), "and": (np.int32, np.uint32),
                "or": (np.uint32,), "xor": (np.int32,)}


@pytest.mark.parametrize("kind,dtype", [(k, t) for k, ts in REDUCE_TYPES.items() for t in ts])
def test_tma_reduce_combines_into_global_interp(kind, dtype):
    # Four programs (two m-tiles of two z indices... one h) reduce their [32, 16] tiles of src
    # into dst[z, 0]: dst = dst0 op (tile 0) op (tile 1) for each z.
    from tlx_tma_extras_kernels import tile_reduce_4d
    rng = np.random.default_rng(hash((kind, np.dtype(dtype).name)) % 2**32)
    if np.dtype(dtype).kind == "f":
        src = (rng.integers(-8, 9, (2, 1, 64, 16)) / 4).astype(dtype)
        dst = (rng.integers(-8, 9, (2, 1, 32, 16)) / 4).astype(dtype)
    else:
        info = np.iinfo(dtype)
        src = rng.integers(max(info.min, -1000), 1000, (2, 1, 64, 16)).astype(dtype)
        dst = rng.integers(max(info.min, -1000), 1000, (2, 1, 32, 16)).astype(dtype)
    want = dst.copy()
    op = {"add": np.add, "min": np.minimum, "max": np.maximum, "and": np.bitwise_and,
          "or": np.bitwise_or, "xor": np.bitwise_xor}[kind]
    for m in range(2):
        want = op(want, src[:, :, 32 * m:32 * m + 32]).astype(dtype)
    d_src = ww.TensorDescriptor(src, list(src.shape), [s // src.itemsize for s in src.strides],
                                [1, 1, 32, 16])
    d_dst = ww.TensorDescriptor(dst, list(dst.shape), [s // dst.itemsize for s in dst.strides],
                                [1, 1, 32, 16])
    tile_reduce_4d[(2, 2, 1)](d_src, d_dst, BM=32, BN=16, REDUCE=kind)
    np.testing.assert_array_equal(dst, want)


@pytest.mark.parametrize("kind", ["", "add", "min"])
def test_tma_reduce_ptx(ptxas, kind):
    sig = ("src:desc<fp16,1x1x64x64>,dst:desc<fp16,1x1x64x64>,BM=64,BN=64,"
           f"REDUCE='{kind}'")
    ptx = compile_here("tile_reduce_4d", sig, stage="ptx").ptx
    # PTX ISA: cp.reduce.async.bulk.tensor.dim.dst.src.redOp.load_mode.completion [tensorMap,
    # coords], [srcMem]; the plain store without redOp. The [64, 64] buffer fills the 4-D box.
    store = (rf"cp\.reduce\.async\.bulk\.tensor\.4d\.global\.shared::cta\.{kind}\.tile\.bulk_group"
             if kind else r"cp\.async\.bulk\.tensor\.4d\.global\.shared::cta\.tile\.bulk_group")
    assert re.search(store + r" \[%rd\d+, \{%r\d+, %r\d+, %r\d+, %r\d+\}\], \[%r\d+\];", ptx)
    assert "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes" in ptx
    ptxas(ptx, arch="sm_90a")


def test_tma_reduce_type_is_checked():
    msg = compile_error("tile_reduce_bad_type",
                        "src:desc<fp16,64x64>,dst:desc<fp16,64x64>,BM=64,BN=64", stage="ptx")
    assert 'store_reduce="xor" of float16' in msg and "tlx_tma_extras_kernels.py:" in msg
