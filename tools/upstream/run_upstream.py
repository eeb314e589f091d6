#!/usr/bin/env python3
"""Runs Triton's and TLX's own programs (tutorials and unit tests, from a checkout of the TLX
repository that the caller provides) against warpweave, unchanged but for the word `triton`.

Nothing of theirs lives in this repository: the suites are copied into a scratch folder, run from
there, and the results summarised (one line per test id in a JUnit XML, a count table on stdout).

Two ways to read `triton` as `warpweave`, as a user would:
  --mode replace   every `triton` word in the copied .py files becomes `warpweave` (a sed);
  --mode run       the files stay as they are; `python -m warpweave run -m pytest` binds their
                   `triton` imports to warpweave at load time.

Upstream installs its tutorials as the package `triton.language.extra.tlx.tutorials`; the scratch
folder's conftest.py gives `warpweave.language.extra.tlx` the same subpackage, pointing at the
copied tutorials, as the upstream install does.

    python3 tools/upstream/run_upstream.py --upstream UPSTREAM_DIR --suite tlx-hopper \
        --mode replace --out OUT_DIR [-- extra pytest args]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

TUTORIALS = Path("third_party/tlx/tutorials")
LANG_TESTS = Path("python/test/unit/language")
TRITON_TUTORIALS = Path("python/tutorials")

# The suites: (folder to copy, pytest targets inside it, -k expression or None).
SUITES = {
    # TLX's Hopper tutorials: their correctness tests and the two tutorials that carry their own.
    "tlx-hopper": (TUTORIALS, ["testing/test_correctness.py",
                               "hopper-persistent-gemm-ws-cooperative.py",
                               "hopper-persistent-gemm-ws-pingpong.py"], "hopper"),
    # TLX's unit tests (those that apply to Hopper skip themselves elsewhere).
    "tlx-unit": (LANG_TESTS, ["test_tlx_*.py"], None),
    # Triton's language tests.
    "triton-core": (LANG_TESTS, ["test_core.py", "test_standard.py"], None),
    # Triton's tutorials 01-12: each run as the script it is (its own checks; a generated test
    # per script), and the pytest cases of those that carry them.
    "triton-tutorials": (TRITON_TUTORIALS, ["test_tutorial_scripts.py", "06-fused-attention.py"],
                         None),
}

# The tutorials of the triton-tutorials suite that run as scripts (file-name prefixes).
TUTORIAL_SCRIPTS = [f"{i:02d}-" for i in range(1, 13)]

# Generated into the copied tutorials folder: one test per tutorial script. A script passes when
# it exits 0 and prints none of the tutorials' own mismatch marks. Their benchmark tables run at
# their first WARPWEAVE_BENCH_POINTS sizes only (the checks come before them; the timings are
# perf_triton.py's job).
SCRIPT_TESTS = '''\
import os, re, subprocess, sys, pytest
HERE = os.path.dirname(os.path.abspath(__file__))
PREFIXES = {prefixes!r}
SCRIPTS = sorted(f for f in os.listdir(HERE) if f.endswith(".py") and f[:3] in PREFIXES)


@pytest.mark.parametrize("script", SCRIPTS)
def test_script(script, tmp_path):
    cmd = [sys.executable]
    if os.environ.get("WW_TUTORIAL_MODE") == "run":
        cmd += ["-m", "warpweave", "run"]
    env = dict(os.environ, WARPWEAVE_BENCH_POINTS=os.environ.get("WARPWEAVE_BENCH_POINTS", "2"),
               MPLBACKEND="Agg")
    limit = int(os.environ.get("WW_SCRIPT_TIMEOUT", "240"))
    try:
        p = subprocess.run(cmd + [os.path.join(HERE, script)], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=limit)
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"")[-3000:]
        pytest.fail(f"{{script}} ran past {{limit}} s: {{out!r}}")
    out = p.stdout + p.stderr
    print(out[-6000:])
    assert p.returncode == 0, f"{{script}} exited {{p.returncode}}: {{out[-1500:]}}"
    bad = [line for line in out.splitlines() if "\\u274c" in line or re.search(r"\\bdiffer\\b", line)]
    assert not bad, f"{{script}} reports a mismatch: {{bad[:5]}}"
'''


_WORD = re.compile(r"\btriton\b")

CONFTEST = '''\
# Written by warpweave's tools/upstream/run_upstream.py: the upstream install places the TLX
# tutorials at triton.language.extra.tlx.tutorials; give warpweave's tlx the same subpackage.
import os, sys
import warpweave.language.extra.tlx as _tlx
_here = os.path.dirname(os.path.abspath(__file__))
_tut = os.path.join(_here, "__tlx_tutorials_root__")
if hasattr(_tlx, "__path__") and _tut not in list(_tlx.__path__):
    _tlx.__path__.append(_tut)

# Triton's interpreter runs kernels as Python, so Triton's tests build interpreter kernels by
# exec()ing edited source text. warpweave compiles a kernel from its source text, which Python
# keeps nowhere for exec'd strings: each one is registered in linecache under a name of its own
# (as IPython does for its cells), so that inspect.getsource finds it.
import builtins as _builtins
import itertools as _itertools
import linecache as _linecache

_plain_exec = _builtins.exec
_exec_ids = _itertools.count()


def _exec_keeping_source(source, globals=None, locals=None, *args, **kwargs):
    if globals is None:  # exec's default: the caller's namespaces
        caller = sys._getframe(1)
        globals = caller.f_globals
        locals = caller.f_locals if locals is None else locals
    if isinstance(source, str):
        name = f"<exec-{next(_exec_ids)}>"
        _linecache.cache[name] = (len(source), None, source.splitlines(True), name)
        source = compile(source, name, "exec")
    return _plain_exec(source, globals, locals, *args, **kwargs)


_builtins.exec = _exec_keeping_source

# A CUDA error is sticky: every later test of the process would fail with it. After each test
# the device is synchronized; on an error the worker process ends (pytest-xdist reports the test
# as crashed and starts a fresh worker), so the failure stays with the test that caused it.
import pytest as _pytest


@_pytest.fixture(autouse=True)
def _cuda_error_isolation(request):
    yield
    try:
        import torch
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            torch.cuda.synchronize()
    except Exception as e:  # noqa: BLE001
        print(f"\\n[upstream] CUDA error after {request.node.nodeid}: {e}", flush=True)
        if os.environ.get("PYTEST_XDIST_WORKER"):
            os._exit(3)
'''


# Appended with --stand-in ARCH: the GPU suites on a CPU machine, as on that GPU.
STAND_IN = '''
# --stand-in: the suites' is_hopper() / is_blackwell() skips answer for the GPU named by
# WW_STAND_IN_ARCH; kernels run in the interpreter on CPU tensors (--device cpu), and a kernel's
# asm shows it compiled for that GPU's target (its IR and PTX), as a GPU run's would.
import importlib as _importlib
import warpweave._internal_testing as _testing
import warpweave.compiler as _compiler

_testing._arch = lambda: int(os.environ["WW_STAND_IN_ARCH"])
_jit = _importlib.import_module("warpweave.jit")
_interpreted_asm = _jit.CompiledKernel.asm


def _asm_of_the_gpu_build(self):
    if self.interpret:
        gpu = self._gpu_kernel()
        if gpu is not None:
            forms = self.__dict__.get("_stand_in_forms")
            if forms is None:
                forms = self._stand_in_forms = _compiler.CompiledForms(
                    gpu.tile_ir, gpu.target, ptx=gpu.ptx, cubin=gpu.cubin)
            return forms
    return _interpreted_asm.fget(self)


_jit.CompiledKernel.asm = property(_asm_of_the_gpu_build)
'''


def copy_tree(src: Path, dst: Path, replace: bool) -> int:
    """Copies the .py files (and data files) of `src` to `dst`; with `replace`, rewrites the word
    `triton` in .py files. Returns how many files were rewritten."""
    changed = 0
    for path in src.rglob("*"):
        if path.is_dir():
            continue
        rel = path.relative_to(src)
        out = dst / rel
        out.parent.mkdir(parents=True, exist_ok=True)
        if replace and path.suffix == ".py":
            text = path.read_text(encoding="utf-8", errors="surrogateescape")
            new = _WORD.sub("warpweave", text)
            changed += new != text
            out.write_text(new, encoding="utf-8", errors="surrogateescape")
        else:
            shutil.copy2(path, out)
    return changed


def copy_tree_file(src: Path, dst: Path, replace: bool) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    text = src.read_text(encoding="utf-8", errors="surrogateescape")
    dst.write_text(_WORD.sub("warpweave", text) if replace else text, encoding="utf-8",
                   errors="surrogateescape")


def prepare(upstream: Path, work: Path, suite: str, replace: bool, stand_in: bool = False) -> Path:
    folder, _, _ = SUITES[suite]
    root = work / suite
    if root.exists():
        shutil.rmtree(root)
    # The upstream layout is kept, so that the suites find their own conftest.py files.
    dst = root / folder
    n = copy_tree(upstream / folder, dst, replace)
    for conftest in (Path("python/test/conftest.py"), Path("python/test/unit/conftest.py")):
        if (upstream / conftest).exists() and not (root / conftest).exists():
            copy_tree_file(upstream / conftest, root / conftest, replace)
    # The unit suites take their `device` fixture from python/test/conftest.py: a copy of the
    # upstream tree without it errors every test at setup ("fixture 'device' not found").
    if str(folder).startswith("python/test/") and not (upstream / "python/test/conftest.py").exists():
        print(f"[upstream] warning: {upstream}/python/test/conftest.py is missing; the {suite} "
              f"tests that take the 'device' fixture will error at setup", flush=True)
    # The tutorials, wherever the suite is, as the upstream install lays them out.
    tut_root = root / "__tlx_tutorials_root__" / "tutorials"
    copy_tree(upstream / TUTORIALS, tut_root, replace)
    (tut_root / "__init__.py").touch()
    (root / "conftest.py").write_text(CONFTEST + (STAND_IN if stand_in else ""))
    if suite == "triton-tutorials":
        (dst / "test_tutorial_scripts.py").write_text(
            SCRIPT_TESTS.format(prefixes=TUTORIAL_SCRIPTS))
    print(f"[upstream] {suite}: copied {upstream / folder} to {dst} ({n} files rewritten)",
          flush=True)
    return dst


def summarise(xml_path: Path, table_name: str) -> dict:
    counts = {"passed": 0, "failed": 0, "error": 0, "skipped": 0}
    failures = []
    if not xml_path.exists():
        print(f"[upstream] {table_name}: no JUnit XML (pytest did not finish)")
        return counts
    for case in ET.parse(xml_path).getroot().iter("testcase"):
        name = f"{case.get('classname')}::{case.get('name')}"
        kids = {child.tag for child in case}
        if "failure" in kids:
            counts["failed"] += 1
            el = case.find("failure")
            failures.append((name, (el.get("message") or "")[:200]))
        elif "error" in kids:
            counts["error"] += 1
            el = case.find("error")
            failures.append((name, (el.get("message") or "")[:200]))
        elif "skipped" in kids:
            counts["skipped"] += 1
        else:
            counts["passed"] += 1
    print(f"\n[upstream] {table_name}: " + ", ".join(f"{v} {k}" for k, v in counts.items()))
    for name, msg in failures[:60]:
        print(f"  FAIL {name}: {msg}")
    if len(failures) > 60:
        print(f"  ... {len(failures) - 60} more")
    return counts


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--upstream", required=True, type=Path,
                    help="a checkout of the TLX repository (or its third_party/tlx/tutorials, "
                         "python/test/unit/language and python/tutorials folders)")
    ap.add_argument("--suite", choices=sorted(SUITES), required=True)
    ap.add_argument("--mode", choices=["replace", "run"], default="replace")
    ap.add_argument("--work", type=Path, default=None, help="scratch folder (default: a temp dir)")
    ap.add_argument("--out", type=Path, default=Path("."), help="where the JUnit XML goes")
    ap.add_argument("--timeout", type=int, default=300, help="per-test limit in seconds")
    ap.add_argument("--interpret", action="store_true",
                    help="run in warpweave's CPU interpreter (WARPWEAVE_INTERPRET=1, the suites' "
                         "--device cpu), as Triton's own interpreter runs these tests")
    ap.add_argument("--stand-in", type=int, default=None, metavar="ARCH",
                    help="on a machine without a GPU, run the suite as on the GPU of compute "
                         "capability ARCH (90, 100): its skips answer for that GPU, kernels run "
                         "in the interpreter on CPU tensors and their asm is the ARCH build's. "
                         "Tests that make CUDA tensors themselves fail")
    ap.add_argument("-k", default=None, help="pytest -k expression (overrides the suite's)")
    ap.add_argument("pytest_args", nargs="*", help="more pytest arguments (after --)")
    args = ap.parse_args()

    work = args.work or Path(tempfile.mkdtemp(prefix="ww-upstream-"))
    dst = prepare(args.upstream.resolve(), work.resolve(), args.suite, args.mode == "replace",
                  args.stand_in is not None)
    _, targets, kexpr = SUITES[args.suite]
    files = []
    for t in targets:
        files += sorted(str(p.relative_to(dst)) for p in dst.glob(t))
    args.out.mkdir(parents=True, exist_ok=True)
    xml = (args.out / f"{args.suite}-{args.mode}.xml").resolve()
    pytest = ["-m", "pytest", "-q", "-p", "no:cacheprovider", "-rfE", "--continue-on-collection-errors", f"--junitxml={xml}",
              "-o", "junit_family=xunit1", f"--rootdir={work.resolve() / args.suite}"]
    if args.timeout:
        try:
            import pytest_timeout  # noqa: F401
            # A kernel that hangs blocks in the driver, where a signal cannot interrupt it: the
            # thread method ends the process (with pytest-xdist, the worker, which is replaced).
            pytest += [f"--timeout={args.timeout}", "--timeout-method=thread"]
        except ImportError:
            pass
    k = args.k if args.k is not None else kexpr
    if k:
        pytest += ["-k", k]
    cmd = [sys.executable]
    if args.mode == "run":
        cmd += ["-m", "warpweave", "run"]
    cmd += pytest + files + list(args.pytest_args)
    if (args.interpret and args.suite == "triton-core") or args.stand_in:  # the suites' option
        cmd += ["--device", "cpu"]
    print("[upstream] " + " ".join(cmd), flush=True)
    env = dict(os.environ, PYTHONUNBUFFERED="1", WW_TUTORIAL_MODE=args.mode)
    if args.interpret or args.stand_in:
        env["WARPWEAVE_INTERPRET"] = "1"
    if args.stand_in:
        env["WW_STAND_IN_ARCH"] = str(args.stand_in)
        env["WARPWEAVE_TARGET"] = {90: "sm_90a", 100: "sm_100a"}.get(args.stand_in,
                                                                    f"sm_{args.stand_in}")
    rc = subprocess.call(cmd, cwd=dst, env=env)
    summarise(xml, f"{args.suite} ({args.mode})")
    return rc


if __name__ == "__main__":
    sys.exit(main())
