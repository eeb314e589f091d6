"""The generated fast launch path of @ww.jit: it must give exactly the launches of the general
path (same kernel, grid, arguments), fall back for anything unusual, and key on everything that
selects a specialization. GPU tensors and the native kernel are replaced by recorders."""

import importlib

import numpy as np
import pytest

import warpweave as ww
import warpweave.language as tl

jitmod = importlib.import_module("warpweave.jit")


class FakeDType:
    def __init__(self, name):
        self.name = name

    def __str__(self):
        return f"torch.{self.name}"


F32, F16 = FakeDType("float32"), FakeDType("float16")


class FakeCudaTensor:
    is_cuda = True

    def __init__(self, ptr, dtype=F32, cuda=True):
        self.ptr = ptr
        self.dtype = dtype
        self.is_cuda = cuda

    def data_ptr(self):
        return self.ptr


class FakeKernel:
    def __init__(self, req):
        self.req = req
        entries = req["signature"].split(",")
        self.folded_args = [e.split("=")[0] for e in entries if "=" in e]
        self.folded_args += [e.split(":")[0] for e in entries if e.endswith(":1")]
        self.params = [(e.split(":")[0], "ptr<fp32>" if "*" in e else "i32", 8, 1)
                       for e in entries if "=" not in e and not e.endswith(":1")]
        self.launches = []

    def launch(self, gx, gy, gz, stream, args):
        self.launches.append(((gx, gy, gz), stream, tuple(args)))

    def interpret(self, grid, args):
        self.launches.append((grid, "interpreter", tuple(args)))


class Recorder:
    def __init__(self):
        self.requests = []

    def compile(self, **req):
        self.requests.append(req)
        return FakeKernel(req)

    def compiler_version(self):
        return "test"


@ww.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr, FLAG: tl.constexpr = False):
    pass


@pytest.fixture
def env(monkeypatch):
    r = Recorder()
    monkeypatch.setattr(jitmod, "native", lambda: r)
    monkeypatch.setattr(jitmod, "_tensor_type", FakeCudaTensor)
    monkeypatch.setattr(jitmod, "_current_stream", lambda: 77)
    monkeypatch.setenv("WARPWEAVE_TARGET", "sm_90a")
    monkeypatch.setenv("WARPWEAVE_CACHE_DISABLE", "1")
    monkeypatch.delenv("WARPWEAVE_INTERPRET", raising=False)
    add_kernel.cache.clear()
    add_kernel._fast_cache.clear()
    add_kernel._fast = None
    add_kernel._tuple_launchers.clear()
    slow_calls = []
    real_run = jitmod.JITFunction.run

    def counting_run(self, *a, **k):
        slow_calls.append(k.get("grid"))
        return real_run(self, *a, **k)

    monkeypatch.setattr(jitmod.JITFunction, "run", counting_run)
    return r, slow_calls


def test_second_launch_takes_the_fast_path_with_identical_arguments(env):
    rec, slow = env
    x, y, o = FakeCudaTensor(0x10000), FakeCudaTensor(0x20000), FakeCudaTensor(0x30000)
    grid = lambda m: (ww.cdiv(m["n"], m["BLOCK"]),)
    c1 = add_kernel[grid](x, y, o, 1000, BLOCK=256)
    c2 = add_kernel[grid](x, y, o, 1000, BLOCK=256)
    assert c1 is c2
    assert len(slow) == 1 and len(rec.requests) == 1
    assert rec.requests[0]["signature"] == \
        "x_ptr:*fp32:16,y_ptr:*fp32:16,out_ptr:*fp32:16,n:i32,BLOCK=256,FLAG=False"
    assert c1.kernel.launches == [((4, 1, 1), 77, (0x10000, 0x20000, 0x30000, 1000))] * 2
    c3 = add_kernel[(2, 3)](x, y, o, 999, BLOCK=256)  # new int value, same class: fast
    assert c3 is c1 and len(slow) == 1
    assert c1.kernel.launches[-1] == ((2, 3, 1), 77, (0x10000, 0x20000, 0x30000, 999))


@pytest.mark.parametrize("change", ["misaligned", "dtype", "n16", "n1", "block", "flag",
                                    "warps", "flag_true_vs_1"])
def test_every_specialization_input_selects_a_new_kernel(env, change):
    rec, _ = env
    x, y, o = FakeCudaTensor(0x10000), FakeCudaTensor(0x20000), FakeCudaTensor(0x30000)
    base = add_kernel[(1,)](x, y, o, 1000, BLOCK=256, FLAG=1)
    args = dict(x=x, n=1000, BLOCK=256, FLAG=1, opts={})
    if change == "misaligned":
        args["x"] = FakeCudaTensor(0x10004)
    elif change == "dtype":
        args["x"] = FakeCudaTensor(0x10000, F16)
    elif change == "n16":
        args["n"] = 1024
    elif change == "n1":
        args["n"] = 1
    elif change == "block":
        args["BLOCK"] = 128
    elif change == "flag":
        args["FLAG"] = 2
    elif change == "warps":
        args["opts"] = {"num_warps": 8}
    else:
        args["FLAG"] = True
    other = add_kernel[(1,)](args["x"], y, o, args["n"], BLOCK=args["BLOCK"], FLAG=args["FLAG"],
                             **args["opts"])
    assert other is not base
    assert len(rec.requests) == 2


def test_folded_int_is_not_passed(env):
    rec, _ = env
    x = FakeCudaTensor(0x10000)
    c = add_kernel[(1,)](x, x, x, 1, BLOCK=64)
    add_kernel[(1,)](x, x, x, 1, BLOCK=64)
    assert c.kernel.launches[-1][2] == (0x10000, 0x10000, 0x10000)


def test_unusual_calls_fall_back_and_report_errors(env):
    _, slow = env
    x = FakeCudaTensor(0x10000)
    add_kernel[(1,)](x, x, x, 10, BLOCK=64)
    with pytest.raises(TypeError, match="missing required constexpr 'BLOCK'"):
        add_kernel[(1,)](x, x, x, 10)
    with pytest.raises(TypeError, match="unexpected keyword argument 'BLOK'"):
        add_kernel[(1,)](x, x, x, 10, BLOK=64)
    cpu = FakeCudaTensor(0x10000, cuda=False)
    with pytest.raises(ValueError, match="'y_ptr' of add_kernel is a CPU tensor"):
        add_kernel[(1,)](x, cpu, x, 10, BLOCK=64)
    # NumPy arrays go to the interpreter through the general path.
    a = np.zeros(16, np.float32)
    c = add_kernel[(1,)](a, a, a, 16, BLOCK=16)
    assert c.interpret
    assert len(slow) == 5


def test_interpret_env_bypasses_the_fast_path(env, monkeypatch):
    _, slow = env
    x = FakeCudaTensor(0x10000)
    add_kernel[(1,)](x, x, x, 10, BLOCK=64)
    add_kernel[(1,)](x, x, x, 10, BLOCK=64)
    assert len(slow) == 1
    monkeypatch.setenv("WARPWEAVE_INTERPRET", "0")
    add_kernel[(1,)](x, x, x, 10, BLOCK=64)
    assert len(slow) == 1  # "0" does not force the interpreter
    monkeypatch.setenv("WARPWEAVE_INTERPRET", "1")
    assert jitmod._interpret_env()


def test_trap_hangs_env_is_not_served_kernels_without_traps(env, monkeypatch):
    rec, slow = env
    monkeypatch.delenv("WARPWEAVE_TRAP_HANGS", raising=False)
    x = FakeCudaTensor(0x10000)
    plain = add_kernel[(1,)](x, x, x, 10, BLOCK=64)
    assert add_kernel[(1,)](x, x, x, 10, BLOCK=64) is plain and len(slow) == 1
    monkeypatch.setenv("WARPWEAVE_TRAP_HANGS", "100")
    trapping = add_kernel[(1,)](x, x, x, 10, BLOCK=64)
    assert trapping is not plain and rec.requests[-1]["mbarrier_trap_tries"] == 100
    assert trapping.kernel.launches == [((1, 1, 1), 77, (0x10000, 0x10000, 0x10000, 10))]
    monkeypatch.delenv("WARPWEAVE_TRAP_HANGS")
    assert add_kernel[(1,)](x, x, x, 10, BLOCK=64) is plain
    assert len(rec.requests) == 2
