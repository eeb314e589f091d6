"""`python -m warpweave run`: Triton scripts, their sibling modules, TLX tutorial packages and
pytest files run with `triton` bound to warpweave, line numbers intact; other modules untouched."""

import ast
import importlib
import os
import subprocess
import sys
import textwrap

import pytest

import warpweave as ww

compat = importlib.import_module("warpweave.compat")
native_loader = importlib.import_module("warpweave._native_loader")
needs_native = pytest.mark.skipif(not native_loader.available(),
                                  reason="warpweave._native is not built (pip install .)")


# ------------------------------------------------------------------------------------------------
# The rewrite itself
# ------------------------------------------------------------------------------------------------


def _run_rewritten(src):
    ns = {}
    exec(compat.compile_source(textwrap.dedent(src), "<t>"), ns)
    return ns


def test_import_forms_bind_warpweave_objects():
    ns = _run_rewritten("""
        import triton
        import triton.language as tl
        import triton.language.extra.tlx as tlx
        from triton.language.extra import tlx as tlx2
        from triton.tools.tensor_descriptor import TensorDescriptor
        from triton import language
        import os, triton.testing, sys
        """)
    assert ns["triton"] is ww and ns["tl"] is ww.language and ns["language"] is ww.language
    assert ns["tlx"] is ww.tlx and ns["tlx2"] is ww.tlx
    assert ns["TensorDescriptor"] is ww.TensorDescriptor
    assert ns["os"] is os and ns["sys"] is sys


def test_import_of_a_submodule_binds_the_top_package():
    ns = _run_rewritten("""
        import triton.runtime.driver
        def f():
            import triton.language
            return triton
        """)
    assert ns["triton"] is ww
    assert ns["f"]() is ww


def test_string_imports_and_other_modules():
    ns = _run_rewritten("""
        import importlib
        m = importlib.import_module("triton.language")
        spec = importlib.util.find_spec("triton.testing")
        other = importlib.import_module("json")
        """)
    assert ns["m"] is ww.language and ns["spec"].name == "warpweave.testing"
    assert ns["other"].__name__ == "json"


def test_line_numbers_and_future_imports_are_kept():
    src = "from __future__ import annotations\nimport triton\n\n\nx = 1\nraise ValueError(x)\n"
    tree = compat.rewrite_source(src)
    assert isinstance(tree.body[0], ast.ImportFrom) and tree.body[0].module == "__future__"
    with pytest.raises(ValueError) as e:
        exec(compat.compile_source(src, "<t>"), {})
    assert e.traceback[-1].lineno + 1 == 6


def test_relative_and_unrelated_imports_are_untouched():
    tree = compat.rewrite_source("from . import triton\nimport tritonx\nfrom tritonx import a\n")
    assert tree.body[0].module is None and tree.body[0].level == 1
    assert tree.body[1].names[0].name == "tritonx"
    assert tree.body[2].module == "tritonx"


# ------------------------------------------------------------------------------------------------
# python -m warpweave run
# ------------------------------------------------------------------------------------------------


def _env():
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WARPWEAVE_", "TRITON_"))}
    env["PYTHONPATH"] = os.pathsep.join(
        [os.path.dirname(os.path.dirname(ww.__file__))] +
        [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    env["WARPWEAVE_CACHE_DISABLE"] = "1"
    return env


def _ww_run(args, cwd, env=None):
    return subprocess.run([sys.executable, "-m", "warpweave", "run", *args], cwd=cwd,
                          env=env or _env(), capture_output=True, text=True, timeout=300)


def _write(root, files):
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


def test_run_script_with_sibling_modules_and_arguments(tmp_path):
    _write(tmp_path, {
        "proj/helper.py": """
            import triton
            WHO = triton.__name__
            """,
        "proj/pkg/__init__.py": "",
        "proj/pkg/deep.py": """
            import triton.language.extra.tlx as tlx
            from triton.testing import do_bench
            NAME = tlx.__name__
            """,
        "elsewhere/outside.py": """
            try:
                import triton
                WHO = triton.__name__
            except ImportError:
                WHO = None
            """,
        "proj/main.py": """
            import sys
            import triton
            import triton.language as tl
            import helper
            from pkg import deep
            import outside
            print("argv", sys.argv[1:], __name__)
            print("names", triton.__name__, tl.__name__, helper.WHO, deep.NAME)
            print("outside", outside.WHO)
            raise SystemExit(3)
            """,
    })
    env = _env()
    env["PYTHONPATH"] += os.pathsep + str(tmp_path / "elsewhere")
    r = _ww_run([str(tmp_path / "proj" / "main.py"), "a", "--b"], cwd=tmp_path, env=env)
    assert r.returncode == 3, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "argv ['a', '--b'] __main__"
    assert lines[1] == "names warpweave warpweave.language warpweave warpweave.tlx"
    # A module outside the script's tree keeps its own `triton` (the real one, or none).
    assert lines[2] in ("outside None", "outside triton")
    assert not list(tmp_path.rglob("__pycache__"))  # rewritten code is never cached


def test_run_reports_errors_at_the_scripts_own_lines(tmp_path):
    _write(tmp_path, {"s.py": "import triton\n\n\ndef f():\n    return 1 / 0\n\n\nf()\n"})
    r = _ww_run([str(tmp_path / "s.py")], cwd=tmp_path)
    assert r.returncode == 1
    assert f'File "{tmp_path / "s.py"}", line 5, in f' in r.stderr
    assert "return 1 / 0" in r.stderr and "ZeroDivisionError" in r.stderr


@needs_native
def test_run_script_launches_triton_kernels_in_the_interpreter(tmp_path):
    _write(tmp_path, {
        "kernels_lib.py": """
            import triton
            import triton.language as tl

            @triton.jit
            def twice(x):
                return x * 2
            """,
        "main.py": """
            import inspect
            import numpy as np
            import triton
            import triton.language as tl
            from triton.language.extra.tlx.warp_spec import get_bufidx_phase
            from kernels_lib import twice

            @triton.jit
            def k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
                offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
                slot, phase = get_bufidx_phase(offs, 4)
                x = tl.load(x_ptr + offs, mask=offs < n)
                tl.store(y_ptr + offs, twice(x) + slot * 100 + phase * 1000, mask=offs < n)

            x = np.arange(20, dtype=np.int32)
            y = np.zeros(20, np.int32)
            k[(triton.cdiv(20, 8),)](x, y, 20, BLOCK=8)
            want = x * 2 + (x % 4) * 100 + ((x // 4) & 1) * 1000
            assert (y == want).all(), y
            assert "get_bufidx_phase(offs, 4)" in inspect.getsource(k.fn)
            print("ok")
            """,
    })
    r = _ww_run([str(tmp_path / "main.py")], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok"


def test_scripts_loading_siblings_by_path_get_them_rewritten(tmp_path):
    _write(tmp_path, {
        "my-tutorial.py": "import triton\nWHO = triton.__name__\n",
        "main.py": """
            import importlib.util, os
            path = os.path.join(os.path.dirname(__file__), "my-tutorial.py")
            spec = importlib.util.spec_from_file_location("my_tutorial", path)
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            print(mod.WHO)
            """,
    })
    r = _ww_run([str(tmp_path / "main.py")], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "warpweave"


def test_tutorials_folder_is_the_tlx_tutorials_package(tmp_path):
    _write(tmp_path, {
        "tutorials/gemm_a.py": """
            import triton
            VALUE = 42
            NAME = __name__
            """,
        "tutorials/testing/run_me.py": """
            from triton.language.extra.tlx.tutorials.gemm_a import VALUE, NAME
            import triton.language.extra.tlx.tutorials.gemm_a as same
            print(VALUE, NAME, same.VALUE)
            """,
        "other/script.py": """
            from triton.language.extra.tlx.tutorials import gemm_a
            print(gemm_a.VALUE)
            """,
    })
    r = _ww_run([str(tmp_path / "tutorials" / "testing" / "run_me.py")], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["42", "warpweave.language.extra.tlx.tutorials.gemm_a", "42"]
    r = _ww_run([str(tmp_path / "other" / "script.py")], cwd=tmp_path)
    assert r.returncode == 1 and "--tlx-tutorials" in r.stderr
    r = _ww_run(["--tlx-tutorials", str(tmp_path / "tutorials"),
                 str(tmp_path / "other" / "script.py")], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "42"
    # A folder put on tlx's package path (as a conftest can do) serves too, rewritten.
    _write(tmp_path, {"other/setup_path.py": f"""
        import warpweave.language.extra.tlx as tlx
        tlx.__path__.append({str(tmp_path)!r})
        """})
    (tmp_path / "other" / "script.py").write_text(
        "import setup_path\n" + (tmp_path / "other" / "script.py").read_text())
    r = _ww_run([str(tmp_path / "other" / "script.py")], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "42"


def test_run_m_pytest_rewrites_tests_and_conftest_and_keeps_assertion_messages(tmp_path):
    _write(tmp_path, {
        "t/conftest.py": """
            import pytest
            import triton

            @pytest.fixture
            def pkg():
                return triton.__name__
            """,
        "t/test_x.py": """
            import triton
            from triton._internal_testing import is_hopper

            def test_pkg(pkg):
                assert pkg == "warpweave"
                assert triton.cdiv(7, 2) == 4

            def test_message():
                x = triton.cdiv(7, 2)
                assert x == 5
            """,
    })
    r = _ww_run(["-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path / "t")],
                cwd=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "1 failed, 1 passed" in r.stdout
    assert "assert 4 == 5" in r.stdout  # pytest's assertion rewriting still applies
    r = _ww_run(["-m", "pytest", "-q", "-p", "no:cacheprovider",
                 str(tmp_path / "t" / "test_x.py") + "::test_pkg"], cwd=tmp_path)
    assert r.returncode == 0 and "1 passed" in r.stdout, r.stdout + r.stderr


def test_the_pytest_plugin_alone_rewrites_as_in_a_worker(tmp_path):
    # pytest-xdist workers get `-p warpweave._pytest_run` from the command line, not `run`.
    _write(tmp_path, {
        "t/conftest.py": "import triton\nNAME = triton.__name__\n",
        "t/test_y.py": """
            import triton
            import conftest

            def test_names():
                assert conftest.NAME == "warpweave" and triton.__name__ == "warpweave"
            """,
    })
    r = subprocess.run([sys.executable, "-m", "pytest", "-p", "warpweave._pytest_run", "-q",
                        "-p", "no:cacheprovider", str(tmp_path / "t")], cwd=tmp_path, env=_env(),
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "1 passed" in r.stdout, r.stdout + r.stderr


def test_run_m_runs_other_modules_and_usage_errors(tmp_path):
    _write(tmp_path, {"mymod.py": "import sys, triton\nprint(triton.__name__, sys.argv[1:])\n"})
    r = _ww_run(["-m", "mymod", "x"], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "warpweave ['x']"
    assert _ww_run([], cwd=tmp_path).returncode == 2
    assert _ww_run(["--bogus", "x.py"], cwd=tmp_path).returncode == 2
    assert "usage" in _ww_run(["--help"], cwd=tmp_path).stdout
