"""Host TensorDescriptors launched the way the TLX tutorials' wrappers launch them: new
descriptors per call, block shapes set by an autotuner config's pre_hook. The tensor map a launch
passes is cached (per descriptor and across descriptors, by dtype, address, shape, strides,
block shape and swizzle): an unchanged descriptor must reuse its map, and any change of its
tensor or block shape must give a new one; the pre_hook's block shapes must take effect on every
call. Driver encodes and launches are stand-ins (recorded); the interpreter runs real kernels."""

import importlib
import json

import numpy as np
import pytest

import warpweave as ww
import warpweave.language as tl
from cuda_stub import StandInDType, StandInTensor

native = pytest.importorskip("warpweave._native")
jitmod = importlib.import_module("warpweave.jit")
descmod = importlib.import_module("warpweave.tensor_descriptor")


F16, F32 = StandInDType("float16"), StandInDType("float32")


def tensor(address, dtype=F16):
    """cuda_stub's stand-in of a CUDA torch tensor."""
    return StandInTensor(address, dtype)


def fake_map(address, dtype, shape, strides, block, swizzle):
    """The stand-in driver encode's 128 bytes: everything that decides a map."""
    return repr((address, dtype, tuple(shape), tuple(strides), tuple(block),
                 swizzle)).encode().ljust(128, b"\0")


@pytest.fixture
def encodes(monkeypatch):
    """TensorDescriptor.encode's caching over a stand-in for the driver's encode; the list
    holds one entry per map actually encoded."""
    done = []

    def encode_new(d, address, swizzle):
        done.append((address, tuple(d.block_shape)))
        return fake_map(address, d.dtype_sig, d.shape, d.strides, d.block_shape, swizzle)

    monkeypatch.setattr(descmod, "_encoded_maps", {})
    monkeypatch.setattr(descmod.TensorDescriptor, "_encode_new", encode_new)
    return done


def desc(t, block=(64, 64), shape=(256, 512), strides=(512, 1)):
    return ww.TensorDescriptor(t, list(shape), list(strides), list(block))


# ---- TensorDescriptor.encode: the map cache ---------------------------------------------------


def test_an_unchanged_descriptor_reuses_its_map(encodes):
    d = desc(tensor(0x10000))
    first = d.encode(128)
    assert d.encode(128) is first and len(encodes) == 1
    # New descriptor objects over the same tensor and geometry (a wrapper's next call) too.
    assert desc(tensor(0x10000)).encode(128) is first and len(encodes) == 1


@pytest.mark.parametrize("change", ["block_shape", "tensor", "dtype", "shape", "strides",
                                    "swizzle", "base_moved"])
def test_any_change_of_what_decides_the_map_encodes_a_new_one(encodes, change):
    t = tensor(0x10000)
    d = desc(t)
    before = d.encode(128)
    swizzle = 128
    if change == "block_shape":
        d.block_shape = [32, 64]  # as a pre_hook does, on the same object
    elif change == "tensor":
        d.base = tensor(0x20000)
    elif change == "dtype":
        d.base = tensor(0x10000, F32)
    elif change == "shape":
        d.shape = [128, 512]
    elif change == "strides":
        d.strides = [1024, 1]
    elif change == "swizzle":
        swizzle = 64
    else:
        t.address = 0x30000  # the same tensor object, now elsewhere (tensor.set_ / storage swap)
    after = d.encode(swizzle)
    assert after != before and len(encodes) == 2
    assert after == fake_map(d.base.data_ptr(), d.dtype_sig, d.shape, d.strides, d.block_shape,
                             swizzle)
    # The block shape mutated in place, too: the map follows the list's contents.
    d.block_shape[0] = 16
    assert d.encode(swizzle) == fake_map(d.base.data_ptr(), d.dtype_sig, d.shape, d.strides,
                                         [16, d.block_shape[1]], swizzle)
    assert len(encodes) == 3


def test_switching_back_serves_the_earlier_map_without_encoding(encodes):
    d = desc(tensor(0x10000))
    m64 = d.encode(128)
    d.block_shape = [128, 64]
    m128 = d.encode(128)
    d.block_shape = [64, 64]
    assert d.encode(128) is m64 and len(encodes) == 2
    d.block_shape = [128, 64]
    assert d.encode(128) is m128 and len(encodes) == 2


def test_descriptor_construction_checks_its_arguments():
    t = tensor(0x10000)
    with pytest.raises(ValueError, match="must be positive"):
        desc(t, block=(64, 0))
    with pytest.raises(ValueError, match="same rank"):
        ww.TensorDescriptor(t, [256, 512], [512, 1], [64])
    with pytest.raises(ValueError, match="rank 6 is not 1..5"):
        ww.TensorDescriptor(t, [2] * 6, [1] * 6, [1] * 6)
    with pytest.raises(TypeError, match="block_shape must be a sequence of ints"):
        ww.TensorDescriptor(t, [256, 512], [512, 1], [64, True])
    with pytest.raises(TypeError, match="shape must be a sequence of ints"):
        ww.TensorDescriptor(t, [256.0, 512], [512, 1], [64, 64])
    # Sequences of ints of other kinds are taken as lists of plain ints.
    d = ww.TensorDescriptor(t, (256, np.int64(512)), range(512, 0, -511), [np.int32(64), 64])
    assert d.shape == [256, 512] and d.strides == [512, 1] and d.block_shape == [64, 64]
    assert all(type(v) is int for v in d.shape + d.strides + d.block_shape)
    # The caller's lists are copied: changing them later changes nothing.
    block = [64, 64]
    d = desc(t, block=block)
    block[0] = 1
    assert d.block_shape == [64, 64]


# ---- autotune + pre_hook through the native launch path -------------------------------------


class Recorder:
    """Stands in for the compiler and the driver: kernels from metadata, launches recorded."""

    def __init__(self):
        self.requests = []
        self.launches = []

    def compile(self, **req):
        self.requests.append(req)
        params = []
        for entry in _signature_entries(req["signature"]):
            name, ty = entry.split(":")[:2]
            if ty.startswith("desc<"):
                dtype, block = ty[5:-1].split(",")
                params.append({"name": name, "size": 128, "type": f"desc<{dtype}, {block}, "
                               f"rank={block.count('x') + 1}, swizzle=128>"})
            else:
                params.append({"name": name, "type": "i32", "size": 4})
        meta = {"name": req["kernel"], "target": req["target"], "num_warps": req["num_warps"],
                "num_ctas": req["num_ctas"], "params": params,
                "folded": [e.split("=")[0] for e in _signature_entries(req["signature"])
                           if "=" in e and "desc<" not in e]}
        return native.kernel_from_metadata(json.dumps(meta), b"\x7fELF not a real cubin", "")

    def compiler_version(self):
        return "test"

    def record(self, name, grid, stream, values):
        self.launches.append((name, grid, tuple(values)))


def _signature_entries(signature):
    entries, depth, start = [], 0, 0
    for i, ch in enumerate(signature):
        depth += {"<": 1, ">": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            entries.append(signature[start:i])
            start = i + 1
    return [e for e in entries + [signature[start:]] if ":" in e]


@ww.jit
def gemm_like(a_desc, b_desc, c_desc, M, N, K, BM: tl.constexpr, BN: tl.constexpr,
              BK: tl.constexpr):
    pass


hook_calls = []


def set_blocks(nargs):
    """The tutorials' pre_hook: block shapes from the config's tile sizes."""
    hook_calls.append(nargs["BM"])
    nargs["a_desc"].block_shape = [nargs["BM"], nargs["BK"]]
    nargs["b_desc"].block_shape = [nargs["BK"], nargs["BN"]]
    nargs["c_desc"].block_shape = [nargs["BM"], nargs["BN"]]


TIMES = {}  # config BM -> the time the stand-in do_bench reports


@pytest.fixture
def launches(monkeypatch, encodes):
    rec = Recorder()
    monkeypatch.setattr(jitmod, "native", lambda: rec)
    monkeypatch.setattr(jitmod, "_tensor_type", StandInTensor)
    monkeypatch.setattr(jitmod, "_stream_source", lambda: (lambda: 0, lambda dev: 77))
    monkeypatch.setenv("WARPWEAVE_TARGET", "sm_90a")
    monkeypatch.setenv("WARPWEAVE_CACHE_DISABLE", "1")
    monkeypatch.delenv("WARPWEAVE_INTERPRET", raising=False)
    monkeypatch.delenv("WARPWEAVE_TRAP_HANGS", raising=False)
    gemm_like.cache.clear()
    gemm_like._launcher = None
    gemm_like._bound.clear()
    hook_calls.clear()
    native._set_launch_recorder(rec.record)
    yield rec
    native._set_launch_recorder(None)


def tuned_kernel():
    """An autotuner over two tile configs, each timed as TIMES says."""
    configs = [ww.Config({"BM": bm, "BN": 128, "BK": 64}, num_warps=4, num_stages=1,
                         pre_hook=set_blocks) for bm in (64, 128)]

    def bench(fn, quantiles=None):
        fn()
        return [TIMES[hook_calls[-1]], 0, 0]

    return ww.autotune(configs=configs, key=["M", "N", "K"], do_bench=bench)(gemm_like)


def wrapper(kernel, a, b, c, M=256, N=256, K=512):
    """The tutorials' wrapper: dummy block shapes, set by the pre_hook."""
    dummy = [1, 1]
    descs = (ww.TensorDescriptor(a, [M, K], [K, 1], dummy),
             ww.TensorDescriptor(b, [K, N], [N, 1], dummy),
             ww.TensorDescriptor(c, [M, N], [N, 1], dummy))
    kernel[lambda meta: (ww.cdiv(M, meta["BM"]) * ww.cdiv(N, meta["BN"]),)](*descs, M, N, K)
    return descs


def maps_for(a, b, c, bm, M=256, N=256, K=512):
    return (fake_map(a.address, "fp16", [M, K], [K, 1], [bm, 64], 128),
            fake_map(b.address, "fp16", [K, N], [N, 1], [64, 128], 128),
            fake_map(c.address, "fp16", [M, N], [N, 1], [bm, 128], 128))


def test_every_call_launches_with_the_pre_hooks_block_shapes(launches, encodes):
    TIMES.update({64: 2.0, 128: 1.0})
    kernel = tuned_kernel()
    a, b, c = tensor(0x10000), tensor(0x20000), tensor(0x30000)
    wrapper(kernel, a, b, c)  # tunes: BM=128 is faster
    assert kernel.best_config.kwargs["BM"] == 128
    tuning_calls = len(hook_calls)
    n, compiles = len(launches.launches), len(launches.requests)
    for _ in range(5):
        descs = wrapper(kernel, a, b, c)
        assert [d.block_shape for d in descs] == [[128, 64], [64, 128], [128, 128]]
    assert hook_calls[tuning_calls:] == [128] * 5  # the pre_hook runs on every call
    want = ("gemm_like", (4, 1, 1), maps_for(a, b, c, 128) + (256, 256, 512))
    assert launches.launches[n:] == [want] * 5
    # Five calls, fifteen new descriptors, no new map or kernel: the maps were encoded while
    # tuning (b's block is the same in both configs: five maps in all).
    assert len(encodes) == 5 and len(launches.requests) == compiles


def test_a_new_tensor_or_a_new_choice_gets_new_maps(launches, encodes):
    TIMES.update({64: 1.0, 128: 2.0})
    kernel = tuned_kernel()
    a, b, c = tensor(0x10000), tensor(0x20000), tensor(0x30000)
    wrapper(kernel, a, b, c)
    assert kernel.best_config.kwargs["BM"] == 64
    assert launches.launches[-1][2][:3] == maps_for(a, b, c, 64)
    # The output elsewhere (the allocator gave another block): its map follows, the others are
    # reused.
    c2 = tensor(0x40000)
    before = len(encodes)
    wrapper(kernel, a, b, c2)
    assert launches.launches[-1][2][:3] == maps_for(a, b, c2, 64)
    assert encodes[before:] == [(0x40000, (64, 128))]
    # Another problem size: tuned again, now BM=128 wins; new maps of the new block shapes.
    TIMES.update({64: 3.0})
    wrapper(kernel, a, b, c, M=512)
    assert kernel.best_config.kwargs["BM"] == 128
    assert launches.launches[-1] == ("gemm_like", (8, 1, 1),
                                     maps_for(a, b, c, 128, M=512) + (512, 256, 512))
    # And back to the first size: its choice and its maps again, with nothing encoded.
    before = len(encodes)
    wrapper(kernel, a, b, c)
    assert launches.launches[-1][2][:3] == maps_for(a, b, c, 64) and len(encodes) == before


def test_the_autotuner_key_holds_tensor_dtypes_not_descriptors(launches):
    kernel = tuned_kernel()
    named = {"a_desc": desc(tensor(1)), "b_desc": tensor(2, F32), "c_desc": None,
             "M": 256, "N": 3.5, "K": True}
    assert kernel._key(named) == (256, 3.5, True, "torch.float32")
    named["M"] = tensor(3, F16)
    assert kernel._key(named) == ("torch.float16", 3.5, True, "torch.float32", "torch.float16")


# ---- the interpreter: real results through the same wrapper -------------------------------


@ww.jit
def copy_tiles(in_desc, out_desc, BM: tl.constexpr, BN: tl.constexpr):
    r = tl.program_id(0) * BM
    c = tl.program_id(1) * BN
    out_desc.store([r, c], in_desc.load([r, c]) + 1.0)


def copy_hook(nargs):
    nargs["in_desc"].block_shape = [nargs["BM"], nargs["BN"]]
    nargs["out_desc"].block_shape = [nargs["BM"], nargs["BN"]]


tuned_copy = ww.autotune(configs=[ww.Config({"BM": 8, "BN": 16}, pre_hook=copy_hook)],
                         key=[])(copy_tiles)


def run_copy(x, block=(1, 1)):
    out = np.zeros_like(x)
    m, n = x.shape
    tuned_copy[lambda meta: (ww.cdiv(m, meta["BM"]), ww.cdiv(n, meta["BN"]))](
        ww.TensorDescriptor.from_tensor(x, list(block)),
        ww.TensorDescriptor.from_tensor(out, list(block)))
    return out


def test_interpreted_wrapper_calls_see_their_own_tensors(monkeypatch):
    monkeypatch.setenv("WARPWEAVE_CACHE_DISABLE", "1")
    rng = np.random.default_rng(0)
    for shape in ((16, 32), (16, 32), (24, 40)):  # ragged: the boxes clip at the edges
        x = rng.standard_normal(shape).astype(np.float32)
        np.testing.assert_array_equal(run_copy(x), x + 1.0)


def test_interpreted_launch_follows_a_mutated_block_shape(monkeypatch):
    monkeypatch.setenv("WARPWEAVE_CACHE_DISABLE", "1")
    x = np.arange(16 * 32, dtype=np.float32).reshape(16, 32)
    out = np.zeros_like(x)
    d_in, d_out = ww.TensorDescriptor.from_tensor(x, [8, 16]), \
        ww.TensorDescriptor.from_tensor(out, [8, 16])
    copy_tiles[(2, 2)](d_in, d_out, BM=8, BN=16)
    np.testing.assert_array_equal(out, x + 1.0)
    # The same descriptor objects with a block of the whole tensor: one program covers it.
    out[:] = 0
    d_in.block_shape = [16, 32]
    d_out.block_shape = [16, 32]
    copy_tiles[(1, 1)](d_in, d_out, BM=16, BN=32)
    np.testing.assert_array_equal(out, x + 1.0)
