"""The Python side of @ww.jit without the compiler: argument binding, signatures, literals,
compile-environment collection, and the in-memory specialization cache (with the native compile
replaced by a recorder, so that what is sent to the compiler can be asserted exactly)."""

import numpy as np
import pytest

import warpweave as ww
import warpweave.language as tl
import importlib

jitmod = importlib.import_module("warpweave.jit")

from kernels_for_tests import copy_kernel, scale_helper

LOCAL_FACTOR = 7
LOCAL_DTYPE = tl.bfloat16
UNUSED_GLOBAL = 99


@ww.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) * LOCAL_FACTOR, mask=mask)


@ww.jit
def uses_helper(x_ptr, n, DT: tl.constexpr = tl.float32, FLAG: tl.constexpr = True):
    v = scale_helper(tl.load(x_ptr)).to(LOCAL_DTYPE)
    tl.store(x_ptr, v)


@ww.jit(do_not_specialize=["n"])
def no_spec(x_ptr, n):
    pass


class FakeKernel:
    def __init__(self, req):
        self.req = req
        self.folded_args = [e.split("=")[0] for e in req["signature"].split(",") if "=" in e]
        self.folded_args += [e.split(":")[0] for e in req["signature"].split(",")
                             if e.endswith(":1")]
        self.params = []
        self.interpreted = []

    def interpret(self, grid, args, host_memory=None):
        self.interpreted.append((grid, args))


class Recorder:
    """Stands in for warpweave._native: records compile requests."""

    def __init__(self):
        self.requests = []

    def compile(self, **req):
        self.requests.append(req)
        return FakeKernel(req)

    def compiler_version(self):
        return "test"


@pytest.fixture
def recorder(monkeypatch):
    r = Recorder()
    monkeypatch.setattr(jitmod, "native", lambda: r)
    monkeypatch.setenv("WARPWEAVE_CACHE_DISABLE", "1")
    for k in (add_kernel, uses_helper, no_spec, copy_kernel):
        k.cache.clear()
        k._env = None
    return r


def sig_of(kernel, *args, **kwargs):
    values = kernel.bind(args, kwargs)
    key, kinds = kernel.specialization(values)
    return kernel.signature_string(values, kinds, key)


# -- binding -------------------------------------------------------------------------------------


def test_bind_positional_keyword_and_defaults():
    x = np.zeros(4, np.float32)
    assert uses_helper.bind((x, 5), {}) == [x, 5, tl.float32, True]
    assert uses_helper.bind((x,), {"n": 5, "FLAG": False}) == [x, 5, tl.float32, False]


def test_bind_errors_name_the_problem():
    x = np.zeros(4, np.float32)
    with pytest.raises(TypeError, match=r"takes 5 arguments .* but 6 were given"):
        add_kernel.bind((x, x, x, 1, 2, 3), {})
    with pytest.raises(TypeError, match="unexpected keyword argument 'BLOK'"):
        add_kernel.bind((x, x, x, 1), {"BLOK": 2})
    with pytest.raises(TypeError, match="multiple values for argument 'n'"):
        add_kernel.bind((x, x, x, 1), {"n": 2})
    with pytest.raises(TypeError, match="missing required argument 'out_ptr'"):
        add_kernel.bind((x, x), {"n": 1, "BLOCK": 4})
    with pytest.raises(TypeError, match="missing required constexpr 'BLOCK'"):
        add_kernel.bind((x, x, x, 1), {})


def test_calling_a_kernel_directly_is_an_error():
    with pytest.raises(RuntimeError, match=r"add_kernel\[grid\]"):
        add_kernel(1, 2, 3, 4, 5)


def test_tl_functions_outside_kernels_raise():
    with pytest.raises(RuntimeError, match=r"tl.program_id\(\) can only be called inside"):
        tl.program_id(0)
    with pytest.raises(RuntimeError, match=r"tlx.local_alloc\(\)"):
        ww.tlx.local_alloc((64, 64), tl.float16, 2)


# -- signatures ----------------------------------------------------------------------------------


def test_signature_of_arrays_ints_and_constexprs():
    buf = np.zeros(64, np.float32)
    assert buf.ctypes.data % 16 == 0
    s = sig_of(add_kernel, buf, buf[1:], buf, 1000, BLOCK=1024)
    assert s == "x_ptr:*fp32:16,y_ptr:*fp32,out_ptr:*fp32:16,n:i32,BLOCK=1024"


@pytest.mark.parametrize("n,expected", [
    (1, "i32:1"), (32, "i32:16"), (0, "i32:16"), (7, "i32"), (-16, "i32:16"),
    (2**31, "i64:16"), (2**40 + 3, "i64"), (2**63, "u64:16"), (-(2**31) - 1, "i64"),
])
def test_integer_specialization(n, expected):
    x = np.zeros(4, np.float16)
    assert sig_of(add_kernel, x, x, x, n, BLOCK=4).split(",")[3] == f"n:{expected}"


def test_scalar_kinds_and_none():
    x = np.zeros(4, np.int8)
    assert sig_of(add_kernel, x, x, None, 2.5, BLOCK=4) == \
        "x_ptr:*i8:16,y_ptr:*i8:16,out_ptr=None,n:fp32,BLOCK=4"
    assert sig_of(add_kernel, x, x, x, True, BLOCK=4).split(",")[3] == "n:i1"


def test_do_not_specialize_drops_hints():
    x = np.zeros(4, np.float64)
    assert sig_of(no_spec, x, 16) == "x_ptr:*fp64:16,n:i32"
    assert sig_of(no_spec, x, 1) == "x_ptr:*fp64:16,n:i32"


@pytest.mark.parametrize("dtype,sig", [
    (np.float16, "fp16"), (np.float32, "fp32"), (np.float64, "fp64"), (np.int32, "i32"),
    (np.int64, "i64"), (np.uint8, "u8"), (np.bool_, "i1"),
])
def test_numpy_dtypes(dtype, sig):
    x = np.zeros(8, dtype)
    assert sig_of(no_spec, x, 3) == f"x_ptr:*{sig}:16,n:i32"


def test_unsupported_argument_and_dtype_are_named():
    with pytest.raises(TypeError, match=r"argument 'x_ptr' has NumPy dtype complex64"):
        sig_of(no_spec, np.zeros(4, np.complex64), 3)
    with pytest.raises(TypeError, match=r"argument 'n' of type builtins.str cannot be passed"):
        sig_of(no_spec, np.zeros(4, np.float32), "seven")


def test_constexpr_literals():
    assert jitmod.literal(True) == "True"
    assert jitmod.literal(3) == "3"
    assert jitmod.literal(1e-6) == "1e-06"
    assert jitmod.literal("fast") == "'fast'"
    assert jitmod.literal(tl.float16) == "tl.float16"
    assert jitmod.literal((64, 32)) == "(64, 32)"
    assert jitmod.literal((8,)) == "(8,)"
    assert jitmod.literal(np.dtype("float32")) == "tl.float32"
    assert jitmod.literal(np.float16) == "tl.float16"
    assert jitmod.literal(tl.constexpr(5)) == "5"
    with pytest.raises(ValueError, match="finite"):
        jitmod.literal(float("inf"), "EPS")
    with pytest.raises(TypeError, match="constexpr 'X'"):
        jitmod.literal(object(), "X")


# -- compile environment -------------------------------------------------------------------------


def test_environment_has_the_file_referenced_globals_and_foreign_helpers():
    env = jitmod.collect_environment(uses_helper)
    paths = [p for p, _ in env.files]
    assert paths[0] == __file__
    assert "def uses_helper" in env.files[0][1]
    assert any(p.endswith("kernels_for_tests.py") for p in paths[1:])
    # The kernel's globals and the foreign helper's globals, as literal text.
    assert env.globals["LOCAL_DTYPE"] == "tl.bfloat16"
    assert env.globals["SCALE"] == "3"
    assert "UNUSED_GLOBAL" not in env.globals
    assert "EPS" not in env.globals  # scale_helper does not use it


def test_nested_kernel_keeps_line_numbers():
    @ww.jit
    def inner(x_ptr):
        tl.store(x_ptr, 1)

    env = jitmod.collect_environment(inner)
    path, text = env.files[0]
    lines = text.splitlines()
    import inspect

    first = inspect.getsourcelines(inner.fn)[1]
    assert lines[first - 1].startswith("@ww.jit")
    assert lines[first].startswith("def inner(x_ptr):")
    # The module's imports stay (at their own lines) so that `tl` resolves; other code is blank.
    file_lines = open(__file__).read().splitlines()
    i = file_lines.index("import warpweave.language as tl")
    assert lines[i] == "import warpweave.language as tl"
    assert "def add_kernel" not in text


# -- in-memory cache and interpreter dispatch ----------------------------------------------------


def test_same_specialization_compiles_once(recorder):
    x = np.zeros(256, np.float32)
    y = np.zeros(256, np.float32)
    out = np.zeros(256, np.float32)
    grid = lambda meta: (ww.cdiv(256, meta["BLOCK"]),)
    add_kernel[grid](x, y, out, 256, BLOCK=64)
    add_kernel[grid](y, x, out, 256, BLOCK=64)
    assert len(recorder.requests) == 1
    req = recorder.requests[0]
    assert req["stage"] == "tile-ir"  # NumPy arrays run in the interpreter
    assert req["kernel"] == "add_kernel"
    assert req["signature"] == "x_ptr:*fp32:16,y_ptr:*fp32:16,out_ptr:*fp32:16,n:i32:16,BLOCK=64"
    assert req["globals"]["LOCAL_FACTOR"] == "7"
    assert (req["num_warps"], req["num_stages"], req["num_ctas"]) == (4, 3, 1)

    add_kernel[grid](x, y, out, 250, BLOCK=64)  # n no longer divisible by 16
    add_kernel[grid](x, y, out, 256, BLOCK=128)  # another constexpr
    add_kernel[grid](x, y, out, 256, BLOCK=64, num_warps=8)  # another option
    add_kernel[grid](x[1:], y, out, 255, BLOCK=64)  # misaligned pointer
    assert len(recorder.requests) == 5
    assert add_kernel.compile_count == 5


def test_interpreter_receives_buffers_and_grid(recorder):
    x = np.arange(100, dtype=np.float32)
    out = np.zeros(100, np.float32)
    compiled = add_kernel[lambda m: (ww.cdiv(100, m["BLOCK"]), 1)](x, x, out, 100, BLOCK=32)
    (grid, args), = compiled.kernel.interpreted
    assert grid == (4, 1, 1)
    assert args[0] == (x.ctypes.data, 400)
    assert args[2] == (out.ctypes.data, 400)
    assert args[3] == 100
    assert len(args) == 4  # BLOCK is folded


def test_strided_view_passes_its_base_allocation(recorder):
    base = np.zeros((8, 8), np.float32)
    col = base[:, 3]  # stride 32 bytes, starts 12 bytes into the allocation
    compiled = no_spec[(1,)](col, 8)
    (grid, args), = compiled.kernel.interpreted
    assert args[0] == (base.ctypes.data + 12, 256 - 12)


def test_grid_forms(recorder):
    x = np.zeros(16, np.float32)
    for grid, expected in [((3,), (3, 1, 1)), (5, (5, 1, 1)), ((2, 3, 4), (2, 3, 4)),
                           (lambda m: (m["n"] // 4,), (4, 1, 1))]:
        compiled = no_spec[grid](x, 16)
        assert compiled.kernel.interpreted[-1][0] == expected
    with pytest.raises(ValueError, match="1 to 3 dimensions"):
        no_spec[(1, 1, 1, 1)](x, 16)
    with pytest.raises(ValueError, match=">= 0"):
        no_spec[(-1,)](x, 16)


def test_launch_option_errors(recorder):
    x = np.zeros(16, np.float32)
    with pytest.raises(ValueError, match="power of 2"):
        no_spec[(1,)](x, 16, num_warps=3)
    with pytest.raises(ValueError, match="a cluster holds 1 to 16 CTAs"):
        no_spec[(1,)](x, 16, ctas_per_cga=(4, 4, 4))


def test_cpu_torch_tensor_to_gpu_launch_is_refused(recorder):
    torch = pytest.importorskip("torch")
    x = torch.zeros(16)
    with pytest.raises(ValueError, match="'x_ptr' of no_spec is a CPU tensor"):
        no_spec[(1,)](x, 16)


def test_interpret_env_forces_the_interpreter(recorder, monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setenv("WARPWEAVE_INTERPRET", "1")
    x = torch.arange(16, dtype=torch.float32)
    compiled = no_spec[(1,)](x, 16)
    assert recorder.requests[-1]["stage"] == "tile-ir"
    assert compiled.kernel.interpreted[-1][1][0][1] == 64


def test_autotune_in_the_interpreter_uses_the_first_config(recorder):
    @ww.autotune(configs=[ww.Config({"BLOCK": 32}, num_warps=2), ww.Config({"BLOCK": 64})],
                 key=["n"])
    @ww.jit
    def tuned(x_ptr, n, BLOCK: tl.constexpr):
        pass

    x = np.zeros(64, np.float32)
    tuned[lambda m: (ww.cdiv(m["n"], m["BLOCK"]),)](x, 64)
    assert recorder.requests[-1]["signature"].endswith("BLOCK=32")
    assert recorder.requests[-1]["num_warps"] == 2
    assert tuned.best_config.kwargs == {"BLOCK": 32}


def test_heuristics_compute_constexprs(recorder):
    @ww.heuristics({"EVEN": lambda a: a["n"] % a["BLOCK"] == 0})
    @ww.jit
    def h(x_ptr, n, BLOCK: tl.constexpr, EVEN: tl.constexpr):
        pass

    x = np.zeros(64, np.float32)
    h[(1,)](x, 64, BLOCK=32)
    assert recorder.requests[-1]["signature"].endswith("BLOCK=32,EVEN=True")
    h[(1,)](x, 60, BLOCK=32)
    assert recorder.requests[-1]["signature"].endswith("BLOCK=32,EVEN=False")


def test_cdiv_and_next_power_of_2():
    assert ww.cdiv(10, 4) == 3 and ww.cdiv(8, 4) == 2 and ww.cdiv(0, 4) == 0
    assert [ww.next_power_of_2(n) for n in (0, 1, 2, 3, 17, 64)] == [1, 1, 2, 4, 32, 64]
