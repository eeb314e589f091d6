"""Kernel names bind as the live Python objects do (issue 16): re-exported, aliased and
conditional imports, modules whose import text an import hook rewrote, helpers reached by
absolute imports, nested kernels with closures; kernel globals are checked at launch, so that a
rebound value recompiles (on the general and the native launch path); and wwc, which has only
the text, follows absolute imports of helper modules."""

import importlib
import importlib.util
import os
import subprocess
import sys
import textwrap
import types

import numpy as np
import pytest

import warpweave as ww
import warpweave.language as tl

jitmod = importlib.import_module("warpweave.jit")
native = pytest.importorskip("warpweave._native")


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


@pytest.fixture
def pkgdir(tmp_path, monkeypatch):
    """A folder on sys.path for the test's modules; they leave sys.modules afterwards."""
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    yield tmp_path
    for name, module in list(sys.modules.items()):
        if str(getattr(module, "__file__", None) or "").startswith(str(tmp_path)):
            del sys.modules[name]


def load(path, name, aliases=None):
    """Imports the file at `path` as module `name`; `aliases` stand in sys.modules while it runs
    (what an import hook that rebinds `triton` in user modules leaves behind: the module's text
    says one thing, its globals hold another)."""
    aliases = aliases or {}
    saved = {k: sys.modules.get(k) for k in aliases}
    sys.modules.update(aliases)
    try:
        spec = importlib.util.spec_from_file_location(name, str(path))
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    finally:
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v
    return module


def double_source(imports):
    """A module: `imports`, then a kernel `double` doubling N floats through tl and ww."""
    return textwrap.dedent(imports) + textwrap.dedent("""


        @ww.jit
        def double(x_ptr, out_ptr, N: tl.constexpr):
            offs = tl.arange(0, N)
            tl.store(out_ptr + offs, tl.load(x_ptr + offs) * 2)
    """)


def run_double(kernel, n=16, **kw):
    x = np.arange(n, dtype=np.float32)
    out = np.zeros(n, np.float32)
    kernel[(1,)](x, out, N=n, **kw)
    return x, out


def test_reexported_tl_from_a_package(pkgdir):
    write(pkgdir / "mypkg" / "__init__.py", """
        import warpweave as ww
        import warpweave.language as tl
    """)
    path = write(pkgdir / "k_reexport.py", double_source("""
        from mypkg import tl, ww
    """))
    mod = load(path, "k_reexport")
    x, out = run_double(mod.double)
    np.testing.assert_array_equal(out, x * 2)
    names = mod.double.environment().names[0]
    assert names["tl"] == ("module", "warpweave.language", -1)
    assert names["ww"] == ("module", "warpweave", -1)


def test_the_import_that_ran_binds_not_the_last_in_the_text(pkgdir):
    # The text's last binding of tl is math (never executed); Python's is the language.
    path = write(pkgdir / "k_cond.py", double_source("""
        try:
            import warpweave_not_installed as ww
        except ImportError:
            import warpweave as ww
        import warpweave.language as tl
        if False:
            import math as tl


        def host_helper():
            import json  # an import inside a host function
            return json
    """))
    mod = load(path, "k_cond")
    x, out = run_double(mod.double)
    np.testing.assert_array_equal(out, x * 2)


def test_several_aliases_in_one_import(pkgdir):
    path = write(pkgdir / "k_alias.py", """
        import warpweave as wv, warpweave.language as lang, math as m


        @wv.jit
        def scaled(x_ptr, out_ptr, N: lang.constexpr):
            offs = lang.arange(0, N)
            lang.store(out_ptr + offs, lang.load(x_ptr + offs) * m.pi)
    """)
    mod = load(path, "k_alias")
    x = np.arange(8, dtype=np.float32)
    out = np.zeros(8, np.float32)
    mod.scaled[(1,)](x, out, N=8)
    np.testing.assert_allclose(out, x * np.float32(np.pi), rtol=1e-6)


TRITON_TEXT = """
    import triton
    import triton.language as tl
    from triton.language.extra import libdevice
    import mylang


    @triton.jit
    def double(x_ptr, out_ptr, N: tl.constexpr):
        offs = mylang.arange(0, N)
        v = tl.load(x_ptr + offs)
        tl.store(out_ptr + offs, v * 2 + libdevice.floor(v * 0.0))
"""


def test_module_whose_text_says_triton_but_whose_globals_hold_warpweave(pkgdir):
    extra = types.ModuleType("warpweave_test_extra")
    libdevice = types.ModuleType("warpweave.language.extra.libdevice")
    extra.libdevice = libdevice
    aliases = {"triton": ww, "triton.language": tl, "triton.language.extra": extra,
               "triton.language.extra.libdevice": libdevice, "mylang": tl}
    mod = load(write(pkgdir / "k_hooked.py", TRITON_TEXT), "k_hooked", aliases)
    assert mod.triton is ww and mod.tl is tl and mod.mylang is tl
    x, out = run_double(mod.double)
    np.testing.assert_array_equal(out, x * 2)
    names = mod.double.environment().names[0]
    assert names["mylang"] == ("module", "warpweave.language", -1)  # text: an unknown module


def test_helpers_reached_by_absolute_imports(pkgdir):
    write(pkgdir / "abs_helpers" / "__init__.py", "")
    write(pkgdir / "abs_helpers" / "ops.py", """
        import warpweave as ww

        FACTOR = 3


        @ww.jit
        def times(x, k):
            return x * k


        @ww.jit
        def triple(x):
            return times(x, FACTOR)
    """)
    path = write(pkgdir / "k_abs.py", """
        import warpweave as ww
        import warpweave.language as tl
        from abs_helpers.ops import triple
        import abs_helpers.ops as hops
        import abs_helpers.ops


        @ww.jit
        def combine(x_ptr, out_ptr, N: tl.constexpr):
            offs = tl.arange(0, N)
            x = tl.load(x_ptr + offs)
            y = triple(x) + hops.times(x, 10) + abs_helpers.ops.times(x, 100)
            tl.store(out_ptr + offs, y)
    """)
    mod = load(path, "k_abs")
    x = np.arange(8, dtype=np.float32)
    out = np.zeros(8, np.float32)
    mod.combine[(1,)](x, out, N=8)
    np.testing.assert_array_equal(out, x * 113)
    env = mod.combine.environment()
    ops = [i for i, (p, _) in enumerate(env.files) if p.endswith("ops.py")]
    assert len(ops) == 1
    assert env.names[ops[0]]["FACTOR"] == ("value", "3", -1)


def test_warpweave_module_holding_helpers_is_a_helper_module(pkgdir):
    # Under warpweave's name, but not a language namespace: its @jit helpers compile from its file.
    path = write(pkgdir / "k_ptxlib.py", """
        import warpweave as ww
        import warpweave.language as tl
        from warpweave.language.extra.cuda import inline_ptx_lib as lib


        @ww.jit
        def mul(x_ptr, out_ptr, N: tl.constexpr):
            offs = tl.arange(0, N)
            x = tl.load(x_ptr + offs)
            tl.store(out_ptr + offs, lib._mul_f32x2(x, x))
    """)
    mod = load(path, "k_ptxlib")
    x = np.arange(8, dtype=np.float32)
    out = np.zeros(8, np.float32)
    mod.mul[(1,)](x, out, N=8)
    np.testing.assert_array_equal(out, x * x)
    assert mod.mul.environment().names[0]["lib"][0] == "helper"


def test_nested_kernel_calls_a_helper_of_its_module_and_its_closure(pkgdir):
    path = write(pkgdir / "k_nested.py", """
        import warpweave as ww
        import warpweave.language as tl


        @ww.jit
        def add_one(x):
            return x + 1


        def make(factor):
            @ww.jit
            def local_scale(x):
                return x * factor

            @ww.jit
            def kernel(x_ptr, out_ptr, N: tl.constexpr):
                offs = tl.arange(0, N)
                tl.store(out_ptr + offs, local_scale(add_one(tl.load(x_ptr + offs))))

            return kernel
    """)
    mod = load(path, "k_nested")
    k5 = mod.make(5)
    x = np.arange(8, dtype=np.float32)
    out = np.zeros(8, np.float32)
    k5[(1,)](x, out, N=8)
    np.testing.assert_array_equal(out, (x + 1) * 5)
    mod.make(7)[(1,)](x, out, N=8)
    np.testing.assert_array_equal(out, (x + 1) * 7)


GLOBAL_TEXT = """
    import warpweave as ww
    import warpweave.language as tl

    SCALE = 2


    @ww.jit
    def scale(x_ptr, out_ptr, N: tl.constexpr):
        offs = tl.arange(0, N)
        tl.store(out_ptr + offs, tl.load(x_ptr + offs) * SCALE)
"""


def test_a_rebound_global_recompiles(pkgdir):
    mod = load(write(pkgdir / "k_global.py", GLOBAL_TEXT), "k_global")
    x = np.arange(8, dtype=np.float32)
    out = np.zeros(8, np.float32)
    mod.scale[(1,)](x, out, N=8)
    np.testing.assert_array_equal(out, x * 2)
    mod.scale[(1,)](x, out, N=8)
    assert mod.scale.compile_count == 1
    mod.SCALE = 5
    mod.scale[(1,)](x, out, N=8)
    np.testing.assert_array_equal(out, x * 5)
    assert mod.scale.compile_count == 2
    mod.SCALE = 5.0  # equal, but another type: another literal, another kernel
    mod.scale[(1,)](x, out, N=8)
    assert mod.scale.compile_count == 3
    mod.scale[(1,)](x, out, N=8)
    assert mod.scale.compile_count == 3
    np.testing.assert_array_equal(out, x * 5)


def test_a_rebound_closure_variable_recompiles(pkgdir):
    path = write(pkgdir / "k_cell.py", """
        import warpweave as ww
        import warpweave.language as tl


        def make():
            factor = 2

            @ww.jit
            def kernel(x_ptr, out_ptr, N: tl.constexpr):
                offs = tl.arange(0, N)
                tl.store(out_ptr + offs, tl.load(x_ptr + offs) * factor)

            def set_factor(v):
                nonlocal factor
                factor = v

            return kernel, set_factor
    """)
    kernel, set_factor = load(path, "k_cell").make()
    x = np.arange(8, dtype=np.float32)
    out = np.zeros(8, np.float32)
    kernel[(1,)](x, out, N=8)
    np.testing.assert_array_equal(out, x * 2)
    set_factor(9)
    kernel[(1,)](x, out, N=8)
    np.testing.assert_array_equal(out, x * 9)
    assert kernel.compile_count == 2


def test_unusable_global_is_a_located_error(pkgdir):
    path = write(pkgdir / "k_opaque.py", """
        import numpy as np
        import warpweave as ww
        import warpweave.language as tl

        TABLE = np.zeros(4)


        @ww.jit
        def uses_table(x_ptr, N: tl.constexpr):
            tl.store(x_ptr + tl.arange(0, N), TABLE)
    """)
    mod = load(path, "k_opaque")
    with pytest.raises(ww.CompilationError) as e:
        mod.uses_table[(1,)](np.zeros(4, np.float32), N=4)
    msg = str(e.value)
    assert "k_opaque.py:11:" in msg
    assert "global 'TABLE' is a numpy.ndarray object, which kernel code cannot use" in msg


def test_non_finite_float_and_tlx_enum_globals(pkgdir):
    path = write(pkgdir / "k_inf.py", """
        import warpweave as ww
        import warpweave.language as tl
        from warpweave import tlx

        NEG_INF = float("-inf")
        KIND = tlx.storage_kind.smem


        @ww.jit
        def clamp_low(x_ptr, out_ptr, N: tl.constexpr):
            offs = tl.arange(0, N)
            x = tl.load(x_ptr + offs)
            tl.static_assert(KIND == tlx.storage_kind.smem)
            tl.store(out_ptr + offs, tl.maximum(tl.where(x > 2, x, NEG_INF), -1.0))
    """)
    mod = load(path, "k_inf")
    x = np.arange(8, dtype=np.float32)
    out = np.zeros(8, np.float32)
    mod.clamp_low[(1,)](x, out, N=8)
    np.testing.assert_array_equal(out, np.where(x > 2, x, -1.0))
    names = mod.clamp_low.environment().names[0]
    assert names["NEG_INF"] == ("value", "float('-inf')", -1)
    assert names["KIND"] == ("value", "tlx.storage_kind.smem", -1)
    mod.clamp_low[(1,)](x, out, N=8)
    assert mod.clamp_low.compile_count == 1


def test_dtype_constexpr_with_tl_bound_to_another_name(pkgdir):
    # The signature's `tl.float16` is the language's, whatever the file calls the module.
    path = write(pkgdir / "k_lang.py", """
        import warpweave as ww
        import warpweave.language as language


        @ww.jit
        def cast(x_ptr, out_ptr, N: language.constexpr, DT: language.constexpr):
            offs = language.arange(0, N)
            language.store(out_ptr + offs, language.load(x_ptr + offs).to(DT))
    """)
    mod = load(path, "k_lang")
    x = np.arange(8, dtype=np.float32) + 0.25
    out = np.zeros(8, np.float16)
    mod.cast[(1,)](x, out, N=8, DT=tl.float16)
    np.testing.assert_array_equal(out, x.astype(np.float16))


# -- the native launch path checks the guards too --------------------------------------------


@pytest.fixture
def fast_env(monkeypatch):
    """test_fast_launch's stand-ins: real native kernels from metadata, recorded launches."""
    import test_fast_launch as fl

    rec = fl.Recorder()
    monkeypatch.setattr(jitmod, "native", lambda: rec)
    monkeypatch.setattr(jitmod, "_tensor_type", fl.StandInTensor)
    rec.device = 0
    monkeypatch.setattr(jitmod, "_stream_source", lambda: (lambda: rec.device, lambda dev: 9))
    monkeypatch.setenv("WARPWEAVE_TARGET", "sm_90a")
    monkeypatch.setenv("WARPWEAVE_CACHE_DISABLE", "1")
    monkeypatch.delenv("WARPWEAVE_INTERPRET", raising=False)
    monkeypatch.delenv("WARPWEAVE_TRAP_HANGS", raising=False)
    slow = []
    real_run = jitmod.JITFunction.run

    def counting_run(self, *a, **k):
        slow.append(1)
        return real_run(self, *a, **k)

    monkeypatch.setattr(jitmod.JITFunction, "run", counting_run)
    native._set_launch_recorder(rec.record)
    yield rec, slow, fl.tensor
    native._set_launch_recorder(None)


def test_fast_path_recompiles_when_a_global_is_rebound(pkgdir, fast_env):
    rec, slow, tensor = fast_env
    mod = load(write(pkgdir / "k_fast.py", GLOBAL_TEXT), "k_fast")
    x, out = tensor(0x1000), tensor(0x2000)
    c1 = mod.scale[(1,)](x, out, N=8)
    c2 = mod.scale[(1,)](x, out, N=8)
    assert c1 is c2 and len(slow) == 1 and len(rec.launches) == 2
    assert rec.requests[0]["names"][0]["SCALE"] == ("value", "2", -1)
    assert c1.used_globals == ((vars(mod), "SCALE", 2),)
    mod.SCALE = 2  # the same value: still the fast path
    mod.scale[(1,)](x, out, N=8)
    assert len(slow) == 1
    mod.SCALE = 3
    c3 = mod.scale[(1,)](x, out, N=8)
    assert c3 is not c1 and len(slow) == 2 and len(rec.requests) == 2
    assert rec.requests[1]["names"][0]["SCALE"] == ("value", "3", -1)
    assert rec.requests[1]["globals"]["SCALE"] == "3"
    mod.scale[(1,)](x, out, N=8)  # fast again, with the new kernel
    assert len(slow) == 2 and len(rec.launches) == 5
    del mod.SCALE  # gone: the general path compiles without it (and the compiler reports it)
    mod.scale[(1,)](x, out, N=8)
    assert len(slow) == 3 and "SCALE" not in rec.requests[-1]["names"][0]


# -- wwc: absolute imports of helper modules --------------------------------------------------


def wwc(*args, env=None, cwd=None):
    return subprocess.run([sys.executable, "-m", "warpweave"] + [str(a) for a in args],
                          capture_output=True, text=True, timeout=120, env=env, cwd=cwd)


WWC_KERNEL = """
    import warpweave as ww
    try:
        import warpweave.language as tl
    except ImportError:
        import triton.language as tl
    from pkg.helpers import triple
    import pkg.helpers
    import pkg.helpers as ph


    @ww.jit
    def kernel(x_ptr, out_ptr, N: tl.constexpr):
        offs = tl.arange(0, N)
        x = tl.load(x_ptr + offs)
        tl.store(out_ptr + offs, triple(x) + pkg.helpers.triple(x) + ph.triple(x))
"""
HELPERS = """
    import warpweave as ww


    @ww.jit
    def triple(x):
        return x * 3
"""
WWC_SIG = ["--kernel", "kernel", "--signature", "x_ptr:*fp32,out_ptr:*fp32,N=16",
           "--emit", "tile-ir"]


def test_wwc_follows_absolute_imports_from_a_folder_above(tmp_path):
    write(tmp_path / "proj" / "pkg" / "__init__.py", "")
    write(tmp_path / "proj" / "pkg" / "helpers.py", HELPERS)
    kernel = write(tmp_path / "proj" / "kernels" / "k.py", WWC_KERNEL)
    r = wwc(kernel, *WWC_SIG, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("mul") >= 1


def test_wwc_follows_absolute_imports_on_pythonpath(tmp_path):
    write(tmp_path / "lib" / "pkg" / "helpers.py", HELPERS)
    kernel = write(tmp_path / "src" / "k.py", WWC_KERNEL)
    r = wwc(kernel, *WWC_SIG, cwd=tmp_path)
    assert r.returncode != 0
    assert "is imported from a module the compiler was not given" in r.stderr
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path / "lib"), env.get("PYTHONPATH", "")])
    r = wwc(kernel, *WWC_SIG, env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
