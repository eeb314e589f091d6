"""The native fast launch path of @ww.jit (FastLauncher): it must give exactly the launches of
the general path (same kernel, grid, stream and packed arguments), fall back for anything
unusual, and key on everything that selects a specialization. Kernels are real native objects
built from metadata; tensors are stand-ins (tools/cuda_stub's) and launches are recorded instead
of reaching a GPU."""

import importlib
import json
import os
import sys

import numpy as np
import pytest

import warpweave as ww
import warpweave.language as tl
from cuda_stub import StandInCpuTensor, StandInDType, StandInPinnedTensor, StandInTensor

native = pytest.importorskip("warpweave._native")
jitmod = importlib.import_module("warpweave.jit")
descmod = importlib.import_module("warpweave.tensor_descriptor")
# tools/cuda_stub, which conftest puts on sys.path (for the test's own subprocess).
STUB_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools",
                        "cuda_stub")


F32, F16 = StandInDType("float32"), StandInDType("float16")


def tensor(address, dtype=F32, cuda=True):
    """cuda_stub's stand-in of a CUDA (cuda=False: CPU) torch tensor."""
    return (StandInTensor if cuda else StandInCpuTensor)(address, dtype)


class TensorSubclass(StandInTensor):
    pass


_PARAM_TYPES = {"i1": ("i1", 1), "i32": ("i32", 4), "i64": ("i64", 8), "u64": ("u64", 8),
                "fp32": ("fp32", 4)}


def signature_entries(signature):
    """The signature's entries: split at commas outside `desc<...>`."""
    entries, depth, start = [], 0, 0
    for i, ch in enumerate(signature):
        depth += {"<": 1, ">": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            entries.append(signature[start:i])
            start = i + 1
    return entries + [signature[start:]]


def kernel_for(req):
    """A launchable native kernel with the params and folded args the signature implies;
    descriptor params named sw_* declare a 64-byte swizzle, others none."""
    params, folded = [], []
    for entry in signature_entries(req["signature"]):
        if "=" in entry and "desc<" not in entry:
            folded.append(entry.split("=")[0])
            continue
        name, ty, *hints = entry.split(":")
        if ty.startswith("desc<"):
            dtype, block = ty[5:-1].split(",")
            swizzle = ", swizzle=64" if name.startswith("sw_") else ""
            params.append({"name": name, "size": 128, "type": f"desc<{dtype}, {block}, "
                           f"rank={block.count('x') + 1}{swizzle}>"})
        elif hints == ["1"]:
            folded.append(name)
        elif ty.startswith("*"):
            params.append({"name": name, "type": f"ptr<{ty[1:]}>", "size": 8})
        else:
            t, size = _PARAM_TYPES[ty]
            params.append({"name": name, "type": t, "size": size})
    meta = {"name": req["kernel"], "target": req["target"], "num_warps": req["num_warps"],
            "num_ctas": req["num_ctas"], "params": params, "folded": folded}
    return native.kernel_from_metadata(json.dumps(meta), b"\x7fELF not a real cubin", "")


class InterpretedKernel:
    """Stands in for a Tile IR compile: records interpreter runs."""

    def __init__(self, req):
        self.folded_args = [e.split("=")[0] for e in req["signature"].split(",") if "=" in e]
        self.runs = []

    def interpret(self, grid, args, host_memory=None):
        self.runs.append((grid, args))


class Recorder:
    def __init__(self):
        self.requests = []
        self.launches = []

    def compile(self, **req):
        self.requests.append(req)
        return InterpretedKernel(req) if req["stage"] == "tile-ir" else kernel_for(req)

    def compiler_version(self):
        return "test"

    def record(self, name, grid, stream, values):
        self.launches.append((name, grid, stream, tuple(values)))


@ww.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr, FLAG: tl.constexpr = False):
    pass


@ww.jit
def scalars(x_ptr, a, b, big, MODE: tl.constexpr = "relu"):
    pass


@ww.jit(do_not_specialize=["n"])
def plain_n(x_ptr, n):
    pass


@ww.autotune(configs=[ww.Config({"BLOCK": 64}, num_warps=2)], key=["n"])
@ww.heuristics({"EVEN": lambda args: args["n"] % 2 == 0})
@ww.jit
def tuned(x_ptr, n, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    pass


@ww.jit
def tma_kernel(sw_in, out_desc, x_ptr, scale, BLOCK: tl.constexpr = 8):
    pass


KERNELS = (add_kernel, scalars, plain_n, tuned.fn.fn, tma_kernel)


def fake_map(address, swizzle, block):
    """What the stand-in encode below gives: the inputs that decide a map, in 128 bytes."""
    return repr((address, swizzle, tuple(block))).encode().ljust(128, b"\0")


def tdesc(base, block=(4, 8)):
    """A descriptor over base seen as [64, 8] (or [2, 64, 8] for a 3-D block)."""
    if len(block) == 3:
        return ww.TensorDescriptor(base, [2, 64, 8], [512, 8, 1], list(block))
    return ww.TensorDescriptor(base, [64, 8], [8, 1], list(block))


def grid_of_n(meta):
    return (meta["n"],)


@pytest.fixture
def env(monkeypatch):
    r = Recorder()
    monkeypatch.setattr(jitmod, "native", lambda: r)
    monkeypatch.setattr(jitmod, "_tensor_type", StandInTensor)
    r.device = 3  # torch's current device, as the stand-in stream source reports it
    monkeypatch.setattr(jitmod, "_stream_source", lambda: (lambda: r.device, lambda dev: 74 + dev))
    # TensorDescriptor.encode's own caching, over a stand-in for the driver's encode.
    monkeypatch.setattr(descmod, "_encoded_maps", {})
    monkeypatch.setattr(descmod.TensorDescriptor, "_encode_new",
                        lambda d, address, swizzle: fake_map(address, swizzle, d.block_shape))
    monkeypatch.setenv("WARPWEAVE_TARGET", "sm_90a")
    monkeypatch.setenv("WARPWEAVE_CACHE_DISABLE", "1")
    monkeypatch.delenv("WARPWEAVE_INTERPRET", raising=False)
    monkeypatch.delenv("WARPWEAVE_TRAP_HANGS", raising=False)
    for k in KERNELS:
        k.cache.clear()
        k._launcher = None  # a new launcher picks up the stand-in tensor type and stream
        k._bound.clear()
    slow_calls = []
    real_run = jitmod.JITFunction.run

    def counting_run(self, *a, **k):
        slow_calls.append(k.get("grid"))
        return real_run(self, *a, **k)

    monkeypatch.setattr(jitmod.JITFunction, "run", counting_run)
    native._set_launch_recorder(r.record)
    yield r, slow_calls
    native._set_launch_recorder(None)


def test_second_launch_takes_the_fast_path_with_identical_arguments(env):
    rec, slow = env
    x, y, o = tensor(0x10000), tensor(0x20000), tensor(0x30000)
    grid = lambda m: (ww.cdiv(m["n"], m["BLOCK"]),)
    c1 = add_kernel[grid](x, y, o, 1000, BLOCK=256)
    c2 = add_kernel[grid](x, y, o, 1000, BLOCK=256)
    assert c1 is c2
    assert len(slow) == 1 and len(rec.requests) == 1
    assert rec.requests[0]["signature"] == \
        "x_ptr:*fp32:16,y_ptr:*fp32:16,out_ptr:*fp32:16,n:i32,BLOCK=256,FLAG=False"
    assert rec.launches == [("add_kernel", (4, 1, 1), 77, (0x10000, 0x20000, 0x30000, 1000))] * 2
    c3 = add_kernel[(2, 3)](x, y, o, 999, BLOCK=256)  # new int value, same class: fast
    assert c3 is c1 and len(slow) == 1
    assert rec.launches[-1] == ("add_kernel", (2, 3, 1), 77, (0x10000, 0x20000, 0x30000, 999))
    c4 = add_kernel[(5,)](n=7, out_ptr=o, y_ptr=x, x_ptr=y, BLOCK=256)  # all by keyword
    assert c4 is c1 and len(slow) == 1
    assert rec.launches[-1] == ("add_kernel", (5, 1, 1), 77, (0x20000, 0x10000, 0x30000, 7))


@pytest.mark.parametrize("change", ["misaligned", "dtype", "n16", "n1", "n64", "block", "flag",
                                    "warps", "flag_true_vs_1"])
def test_every_specialization_input_selects_a_new_kernel(env, change):
    rec, slow = env
    x, y, o = tensor(0x10000), tensor(0x20000), tensor(0x30000)
    base = add_kernel[(1,)](x, y, o, 1000, BLOCK=256, FLAG=1)
    args = dict(x=x, n=1000, BLOCK=256, FLAG=1, opts={})
    if change == "misaligned":
        args["x"] = tensor(0x10004)
    elif change == "dtype":
        args["x"] = tensor(0x10000, F16)
    elif change == "n16":
        args["n"] = 1024
    elif change == "n1":
        args["n"] = 1
    elif change == "n64":
        args["n"] = 1 << 40
    elif change == "block":
        args["BLOCK"] = 128
    elif change == "flag":
        args["FLAG"] = 2
    elif change == "warps":
        args["opts"] = {"num_warps": 8}
    else:
        args["FLAG"] = True
    launch = lambda: add_kernel[(1,)](args["x"], y, o, args["n"], BLOCK=args["BLOCK"],
                                      FLAG=args["FLAG"], **args["opts"])
    other = launch()
    assert other is not base
    assert len(rec.requests) == 2
    assert launch() is other and len(slow) == 2  # and it is served fast from then on


def test_folded_int_is_not_passed(env):
    rec, _ = env
    x = tensor(0x10000)
    add_kernel[(1,)](x, x, x, 1, BLOCK=64)
    add_kernel[(1,)](x, x, x, 1, BLOCK=64)
    assert rec.launches[-1][3] == (0x10000, 0x10000, 0x10000)


def test_scalars_are_packed_by_their_param_types(env):
    rec, slow = env
    x = tensor(0x10000)
    for _ in range(2):
        scalars[(1,)](x, 2.5, True, -(1 << 40))
    assert rec.requests[-1]["signature"] == "x_ptr:*fp32:16,a:fp32,b:i1,big:i64:16,MODE='relu'"
    assert rec.launches == [("scalars", (1, 1, 1), 77, (0x10000, 2.5, 1, -(1 << 40)))] * 2
    assert len(slow) == 1
    scalars[(1,)](x, 2.5, False, (1 << 63) + 5)  # beyond i64: u64, a new kernel
    assert rec.requests[-1]["signature"] == "x_ptr:*fp32:16,a:fp32,b:i1,big:u64,MODE='relu'"
    assert rec.launches[-1][3] == (0x10000, 2.5, 0, (1 << 63) + 5)
    scalars[(1,)](x, 1.0, True, 3, MODE="gelu")  # a str constexpr is compared by value
    scalars[(1,)](x, 1.0, True, 3, MODE="".join(["ge", "lu"]))
    assert len(rec.requests) == 3 and len(slow) == 3
    with pytest.raises(OverflowError, match="does not fit in 64 bits"):
        scalars[(1,)](x, 1.0, True, 1 << 64)


def test_do_not_specialize_ignores_alignment_and_ones(env):
    rec, slow = env
    plain_n[(1,)](tensor(0x10000), 1)
    plain_n[(1,)](tensor(0x10000), 32)
    assert rec.requests[-1]["signature"] == "x_ptr:*fp32:16,n:i32"
    assert len(rec.requests) == 1 and len(slow) == 1
    assert rec.launches[0][3] == (0x10000, 1)


def test_grid_functions_see_arguments_defaults_and_options(env):
    rec, slow = env
    x = tensor(0x10000)
    seen = []

    def grid(meta):
        seen.append(dict(meta))
        return (np.int64(meta["n"] // meta["BLOCK"]), meta["num_warps"])

    add_kernel[grid](x, x, x, 512, BLOCK=64, num_warps=8)
    add_kernel[grid](x, x, x, 512, BLOCK=64, num_warps=8)
    assert len(slow) == 1 and seen[0] == seen[1]
    # A grid function without a closure is bound once; one with a closure is not kept.
    assert add_kernel[grid_of_n] is add_kernel[grid_of_n]
    assert add_kernel[grid] is not add_kernel[grid]
    assert seen[1]["FLAG"] is False and seen[1]["n"] == 512 and seen[1]["x_ptr"] is x
    assert (seen[1]["num_warps"], seen[1]["num_stages"], seen[1]["num_ctas"]) == (8, 3, 1)
    assert rec.launches[-1][1] == (8, 8, 1)
    with pytest.raises(ValueError, match=">= 0"):
        add_kernel[lambda m: (-1,)](x, x, x, 512, BLOCK=64, num_warps=8)
    with pytest.raises(ValueError, match="1 to 3 dimensions"):
        add_kernel[lambda m: (1, 1, 1, 1)](x, x, x, 512, BLOCK=64, num_warps=8)
    assert len(slow) == 1  # the kernel was found fast; only its grid was wrong


def test_unusual_calls_fall_back_and_report_errors(env):
    rec, slow = env
    x = tensor(0x10000)
    add_kernel[(1,)](x, x, x, 10, BLOCK=64)
    with pytest.raises(TypeError, match="missing required constexpr 'BLOCK'"):
        add_kernel[(1,)](x, x, x, 10)
    with pytest.raises(TypeError, match="unexpected keyword argument 'BLOK'"):
        add_kernel[(1,)](x, x, x, 10, BLOK=64)
    with pytest.raises(TypeError, match="multiple values for argument 'n'"):
        add_kernel[(1,)](x, x, x, 10, n=10, BLOCK=64)
    cpu = tensor(0x10000, cuda=False)
    with pytest.raises(ValueError, match="'y_ptr' of add_kernel is a CPU tensor"):
        add_kernel[(1,)](x, cpu, x, 10, BLOCK=64)
    # Page-locked host memory is addressable from kernels: launched (by the general path), as
    # Triton launches it (its test_pointer_arguments[cpu_pinned]).
    add_kernel[(1,)](x, StandInPinnedTensor(0x40000, F32), x, 10, BLOCK=64)
    assert rec.launches[-1][3][1] == 0x40000
    with pytest.raises(ValueError, match="1 to 3 dimensions"):
        add_kernel[(1, 1, 1, 1)](x, x, x, 10, BLOCK=64)
    # NumPy arrays go to the interpreter through the general path.
    a = np.zeros(16, np.float32)
    c = add_kernel[(1,)](a, a, a, 16, BLOCK=16)
    assert c.interpret and c.kernel.runs == [((1, 1, 1), [(a.ctypes.data, 64)] * 3 + [16])]
    assert len(slow) == 8
    # A subclass of the tensor type is launched correctly, by the general path.
    sub = TensorSubclass(0x40000, F32)
    add_kernel[(1,)](sub, x, x, 10, BLOCK=64)
    add_kernel[(1,)](sub, x, x, 10, BLOCK=64)
    assert len(slow) == 10 and rec.launches[-1][3] == (0x40000, 0x10000, 0x10000, 10)


def test_clearing_the_kernel_cache_forgets_fast_path_kernels(env):
    rec, slow = env
    x = tensor(0x10000)
    first = add_kernel[(1,)](x, x, x, 10, BLOCK=64)
    assert add_kernel._launcher.num_kernels == 1
    add_kernel.cache.clear()
    assert add_kernel._launcher.num_kernels == 0
    second = add_kernel[(1,)](x, x, x, 10, BLOCK=64)
    assert second is not first and len(rec.requests) == 2 and len(slow) == 2


def test_interpret_env_bypasses_the_fast_path(env, monkeypatch):
    _, slow = env
    x = tensor(0x10000)
    add_kernel[(1,)](x, x, x, 10, BLOCK=64)
    add_kernel[(1,)](x, x, x, 10, BLOCK=64)
    assert len(slow) == 1
    monkeypatch.setenv("WARPWEAVE_INTERPRET", "0")
    add_kernel[(1,)](x, x, x, 10, BLOCK=64)
    assert len(slow) == 2  # any setting takes the general path, which reads it
    monkeypatch.setenv("WARPWEAVE_INTERPRET", "1")
    assert jitmod._interpret_env()


def test_trap_hangs_env_is_not_served_kernels_without_traps(env, monkeypatch):
    rec, slow = env
    x = tensor(0x10000)
    plain = add_kernel[(1,)](x, x, x, 10, BLOCK=64)
    assert add_kernel[(1,)](x, x, x, 10, BLOCK=64) is plain and len(slow) == 1
    monkeypatch.setenv("WARPWEAVE_TRAP_HANGS", "100")
    trapping = add_kernel[(1,)](x, x, x, 10, BLOCK=64)
    assert trapping is not plain and rec.requests[-1]["mbarrier_trap_tries"] == 100
    assert rec.launches[-1] == ("add_kernel", (1, 1, 1), 77, (0x10000, 0x10000, 0x10000, 10))
    monkeypatch.delenv("WARPWEAVE_TRAP_HANGS")
    assert add_kernel[(1,)](x, x, x, 10, BLOCK=64) is plain
    assert len(rec.requests) == 2


def test_a_process_that_launched_exits_without_leaked_objects():
    """Launchers and kernel[grid] objects take part in garbage collection: cycles through grid
    or stream functions (which see the kernel's module) are collected, and nanobind reports no
    leaked instances at exit."""
    import os
    import subprocess
    import sys

    script = f"""
import importlib, os, sys
sys.path[:0] = [{os.path.dirname(__file__)!r}, {STUB_DIR!r}]
os.environ.update(WARPWEAVE_CACHE_DISABLE="1", WARPWEAVE_TARGET="sm_90a")
from warpweave import _native
import test_fast_launch as t
jit = importlib.import_module("warpweave.jit")
rec = t.Recorder()
jit.native = lambda: rec
jit._tensor_type = t.StandInTensor
jit._stream_source = lambda: (lambda: 0, lambda dev: 5)
_native._set_launch_recorder(rec.record)
x = t.tensor(0x10000)
grid = lambda meta: (meta["n"],)
for _ in range(3):
    t.add_kernel[grid](x, x, x, 4, BLOCK=16)
t.descmod.TensorDescriptor._encode_new = \
    lambda d, address, swizzle: t.fake_map(address, swizzle, d.block_shape)
a = t.tensor(0x20000, t.F16)
for _ in range(3):  # entries that hold swizzles and dtypes of descriptor bases
    t.tma_kernel[lambda meta: (meta["BLOCK"],)](t.tdesc(a), t.tdesc(x), x, 1.0)
print(len(rec.launches), len(rec.requests), t.tma_kernel._launcher.num_kernels)
"""
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["6", "2", "1"]
    assert "leaked" not in r.stderr


def test_autotuned_and_heuristic_kernels_launch_through_the_fast_path(env):
    rec, slow = env
    x = tensor(0x10000)
    for n in (10, 11, 11, 12):
        tuned[(1,)](x, n)
    assert len(slow) == 2  # the second n=11 and n=12 (same key as 10) are served fast
    assert [r["signature"] for r in rec.requests] == [
        "x_ptr:*fp32:16,n:i32,BLOCK=64,EVEN=True", "x_ptr:*fp32:16,n:i32,BLOCK=64,EVEN=False"]
    assert {r["num_warps"] for r in rec.requests} == {2}
    assert [launch[3] for launch in rec.launches] == [(0x10000, n) for n in (10, 11, 11, 12)]


def test_the_current_device_is_part_of_the_key_and_picks_the_stream(env):
    rec, slow = env
    x = tensor(0x10000)
    first = add_kernel[(1,)](x, x, x, 10, BLOCK=64)
    rec.device = 5
    # Another device goes through the general path once (which picks the kernel for that
    # device's architecture), then is served fast on its own stream.
    assert add_kernel[(1,)](x, x, x, 10, BLOCK=64) is first and len(slow) == 2
    assert add_kernel[(1,)](x, x, x, 10, BLOCK=64) is first and len(slow) == 2
    assert [launch[2] for launch in rec.launches] == [77, 79, 79]


class SlotTensor:
    """A tensor type read the way torch.Tensor is: data descriptors for is_cuda and dtype, a
    method for data_ptr, no instance dict."""

    __slots__ = ("_ptr",)
    is_cuda = property(lambda self: True)
    dtype = property(lambda self: F32)

    def __init__(self, ptr):
        self._ptr = ptr

    def data_ptr(self):
        return self._ptr


def test_tensor_attributes_follow_changes_to_the_tensor_type(env, monkeypatch):
    rec, slow = env
    monkeypatch.setattr(jitmod, "_tensor_type", SlotTensor)
    add_kernel._launcher = None
    add_kernel._bound.clear()
    x = SlotTensor(0x10000)
    for _ in range(2):
        add_kernel[(1,)](x, x, x, 10, BLOCK=64)
    assert len(slow) == 1 and rec.launches[-1][3] == (0x10000, 0x10000, 0x10000, 10)
    # The launcher looked these up on the type once; a change to the type is seen at once.
    monkeypatch.setattr(SlotTensor, "data_ptr", lambda self: self._ptr + 0x100)
    add_kernel[(1,)](x, x, x, 10, BLOCK=64)
    assert len(slow) == 1 and rec.launches[-1][3] == (0x10100, 0x10100, 0x10100, 10)
    monkeypatch.setattr(SlotTensor, "is_cuda", property(lambda self: False))
    with pytest.raises(ValueError, match="'x_ptr' of add_kernel is a CPU tensor"):
        add_kernel[(1,)](x, x, x, 10, BLOCK=64)
    monkeypatch.setattr(SlotTensor, "is_cuda", property(lambda self: True))
    monkeypatch.setattr(SlotTensor, "dtype", property(lambda self: F16))
    add_kernel[(1,)](x, x, x, 10, BLOCK=64)
    assert rec.requests[-1]["signature"].startswith("x_ptr:*fp16:16,")


def test_kernel_subscript_is_native_and_behaves_as_the_python_one(env):
    rec, slow = env
    x = tensor(0x10000)
    add_kernel[(1,)](x, x, x, 10, BLOCK=64)
    subscript = type(add_kernel).__dict__["__getitem__"]
    assert type(subscript) is native.Subscript
    assert add_kernel.__getitem__((2,)) is add_kernel[(2,)]  # a bound method, as in Python
    assert subscript(add_kernel, (2,)) is add_kernel[(2,)]
    add_kernel[[3, 2]](x, x, x, 10, BLOCK=64)  # unhashable grids are bound, not cached
    assert rec.launches[-1][1] == (3, 2, 1)
    n_blocks = 5
    closure = lambda meta: (n_blocks,)  # noqa: E731
    assert add_kernel[closure] is not add_kernel[closure]
    add_kernel[closure](x, x, x, 10, BLOCK=64)
    assert rec.launches[-1][1] == (5, 1, 1) and len(slow) == 1


def test_alternating_keys_each_find_their_own_kernel(env):
    rec, slow = env
    x32, x16 = tensor(0x10000), tensor(0x20000, F16)
    k32 = add_kernel[(1,)](x32, x32, x32, 10, BLOCK=64)
    k16 = add_kernel[(1,)](x16, x16, x16, 10, BLOCK=64)
    assert k32 is not k16 and len(slow) == 2
    for _ in range(3):  # the last key is checked first: a different one must still be found
        assert add_kernel[(1,)](x16, x16, x16, 10, BLOCK=64) is k16
        assert add_kernel[(1,)](x32, x32, x32, 10, BLOCK=64) is k32
        # num_warps=4 is the default: another key (options given), the same kernel
        assert add_kernel[(1,)](x32, x32, x32, 10, BLOCK=64, num_warps=4) is k32
    assert len(slow) == 3 and len(rec.requests) == 2
    assert [launch[3][0] for launch in rec.launches[-3:]] == [0x20000, 0x10000, 0x10000]


def test_a_forced_target_is_part_of_the_key(env, monkeypatch):
    """WARPWEAVE_TARGET chooses the kernel (as in the compile caches): setting, changing or
    unsetting it mid-process must not launch another target's kernel from the fast path."""
    import os

    rec, slow = env
    monkeypatch.delenv("WARPWEAVE_TARGET")
    monkeypatch.setattr(jitmod, "_gpu_target",
                        lambda: os.environ.get("WARPWEAVE_TARGET") or "sm_90a")  # the device's
    x = tensor(0x10000)
    hopper = add_kernel[(1,)](x, x, x, 10, BLOCK=64)
    assert add_kernel[(1,)](x, x, x, 10, BLOCK=64) is hopper and len(slow) == 1
    monkeypatch.setenv("WARPWEAVE_TARGET", "sm_80")
    ampere = add_kernel[(1,)](x, x, x, 10, BLOCK=64)
    assert ampere is not hopper and ampere.kernel.target == "sm_80" and len(slow) == 2
    assert add_kernel[(1,)](x, x, x, 10, BLOCK=64) is ampere and len(slow) == 2  # fast again
    monkeypatch.setenv("WARPWEAVE_TARGET", "sm_90a")  # set: another key, the same kernel
    assert add_kernel[(1,)](x, x, x, 10, BLOCK=64) is hopper and len(slow) == 3
    assert add_kernel[(1,)](x, x, x, 10, BLOCK=64) is hopper and len(slow) == 3
    monkeypatch.delenv("WARPWEAVE_TARGET")
    assert add_kernel[(1,)](x, x, x, 10, BLOCK=64) is hopper and len(slow) == 3
    assert [r["target"] for r in rec.requests] == ["sm_90a", "sm_80"]
    assert len(rec.launches) == 7


def test_one_visible_gpu_makes_the_device_query_a_constant(monkeypatch):
    """With one visible GPU the current device can only be 0: launches then call a C function
    returning 0 instead of torch's device query (0.13 us on the H200); with more, torch's."""
    import sys
    import types

    cuda = types.SimpleNamespace(device_count=lambda: 1, current_device=lambda: 4)
    fake_torch = types.SimpleNamespace(
        _C=types.SimpleNamespace(_cuda_getDevice=lambda: 5,
                                 _cuda_getCurrentRawStream=lambda dev: 70 + dev),
        cuda=cuda)
    monkeypatch.setitem(sys.modules, "torch", fake_torch)
    monkeypatch.setattr(jitmod, "_torch_cuda", None)
    get_device, get_raw = jitmod._torch_cuda_fns()
    assert get_device() == 0 and type(get_device).__name__ == "builtin_function_or_method"
    assert get_raw(get_device()) == 70
    for count in (2, 0):
        cuda.device_count = lambda: count  # noqa: B023
        monkeypatch.setattr(jitmod, "_torch_cuda", None)
        assert jitmod._torch_cuda_fns()[0]() == 5

    def broken():
        raise RuntimeError("no driver")

    cuda.device_count = broken
    monkeypatch.setattr(jitmod, "_torch_cuda", None)
    assert jitmod._torch_cuda_fns()[0]() == 5


def test_descriptor_kernels_take_the_fast_path_with_the_general_paths_maps(env):
    rec, slow = env
    a, o, x = tensor(0x10000, F16), tensor(0x20000), tensor(0x30000)
    c1 = tma_kernel[(2,)](tdesc(a), tdesc(o), x, 2.0)
    d_in, d_out = tdesc(a), tdesc(o)  # new descriptors, as wrappers make them per call
    c2 = tma_kernel[(2,)](d_in, d_out, x, 0.5)  # (each descriptor keeps its last map)
    refs = sys.getrefcount(F16), sys.getrefcount(d_in), sys.getrefcount(d_out)
    for _ in range(49):
        assert tma_kernel[(2,)](d_in, d_out, x, 0.5) is c2
    assert (sys.getrefcount(F16), sys.getrefcount(d_in), sys.getrefcount(d_out)) == refs
    assert c1 is c2 and len(slow) == 1 and tma_kernel._launcher.num_kernels == 1
    assert rec.requests[0]["signature"] == \
        "sw_in:desc<fp16,4x8>,out_desc:desc<fp32,4x8>,x_ptr:*fp32:16,scale:fp32,BLOCK=8"
    assert c1.swizzles == {"sw_in": 64, "out_desc": None}
    maps = (fake_map(0x10000, 64, (4, 8)), fake_map(0x20000, None, (4, 8)))
    assert rec.launches == [("tma_kernel", (2, 1, 1), 77, maps + (0x30000, 2.0))] + \
        [("tma_kernel", (2, 1, 1), 77, maps + (0x30000, 0.5))] * 50
    # Another tensor (the address is not in the key), by keyword: the same kernel, its own map.
    tma_kernel[(3,)](out_desc=d_out, sw_in=tdesc(tensor(0x50008, F16)), x_ptr=x, scale=1.0)
    assert len(slow) == 1
    assert rec.launches[-1][3] == (fake_map(0x50008, 64, (4, 8)), maps[1], 0x30000, 1.0)


@pytest.mark.parametrize("change", ["block", "dtype", "rank", "mutated_block", "out_dtype"])
def test_descriptor_dtype_and_block_shape_select_a_new_kernel(env, change):
    rec, slow = env
    a, o, x = tensor(0x10000, F16), tensor(0x20000), tensor(0x30000)
    d_in = tdesc(a)
    base = tma_kernel[(1,)](d_in, tdesc(o), x, 1.0)
    d_out = tdesc(o)
    if change == "block":
        d_in = tdesc(a, (8, 8))
    elif change == "dtype":
        d_in = tdesc(tensor(0x10000, F32))
    elif change == "rank":
        d_in = tdesc(a, (1, 4, 8))
    elif change == "mutated_block":
        d_in.block_shape = [2, 8]  # as autotuning does, on the same object
    else:
        d_out = tdesc(tensor(0x20000, F16))
    other = tma_kernel[(1,)](d_in, d_out, x, 1.0)
    assert other is not base and len(rec.requests) == 2 and len(slow) == 2
    assert tma_kernel[(1,)](d_in, d_out, x, 1.0) is other and len(slow) == 2
    assert rec.launches[-1] == rec.launches[-2]
    assert rec.launches[-1][3][0] == fake_map(0x10000, 64, d_in.block_shape)


def test_unusual_descriptors_fall_back_and_report_errors(env, monkeypatch):
    rec, slow = env
    a, o, x = tensor(0x10000, F16), tensor(0x20000), tensor(0x30000)
    tma_kernel[(1,)](tdesc(a), tdesc(o), x, 1.0)
    tma_kernel[(1,)](tdesc(a), tdesc(o), x, 1.0)
    assert len(slow) == 1
    # A CPU base: the general path's error, from the fast path's kernel key as from a new one.
    for block in ((4, 8), (2, 8)):
        with pytest.raises(ValueError, match="'out_desc' of tma_kernel is a CPU tensor"):
            tma_kernel[(1,)](tdesc(a, block), tdesc(tensor(0x20000, cuda=False), block),
                             x, 1.0)
    # NumPy bases run in the interpreter, through the general path.
    h, h32 = np.zeros((64, 8), np.float16), np.zeros((64, 8), np.float32)
    xs = np.zeros(4, np.float32)
    assert tma_kernel[(1,)](tdesc(h), tdesc(h32), xs, 1.0).interpret
    assert len(slow) == 4
    # A block shape that is not a list of ints, and a subclass of TensorDescriptor: launched
    # correctly, by the general path.
    odd = tdesc(a)
    odd.block_shape = [np.int64(4), 8]
    tma_kernel[(1,)](odd, tdesc(o), x, 1.0)

    class MyDescriptor(ww.TensorDescriptor):
        pass

    tma_kernel[(1,)](MyDescriptor(a, [64, 8], [8, 1], [4, 8]), tdesc(o), x, 1.0)
    assert len(slow) == 6 and len(rec.requests) == 2
    assert rec.launches[-1] == rec.launches[-2] == rec.launches[0]

    # An encode that fails raises its error on the fast path, as on the general one.
    def refuse(d, address, swizzle):
        raise native.LaunchError(f"cannot encode a map at {address:#x}")

    monkeypatch.setattr(descmod.TensorDescriptor, "_encode_new", refuse)
    with pytest.raises(native.LaunchError, match="cannot encode a map at 0x60000"):
        tma_kernel[(1,)](tdesc(tensor(0x60000, F16)), tdesc(o), x, 1.0)
    assert len(slow) == 6 and len(rec.launches) == 4
