"""Running Triton / TLX scripts unmodified: `python -m warpweave run SCRIPT.py [ARGS]` and
`python -m warpweave run -m MODULE [ARGS]` (e.g. `-m pytest tests/test_x.py`).

The script (and every .py module of its own folder tree, the paths given to `-m`, and the TLX
tutorials folder) is compiled through an AST rewrite that turns `import triton...` and
`from triton... import` into the same imports of `warpweave...`, keeping every line number, so
tracebacks and `inspect.getsource` line up with the file. Other packages are not rewritten: when
the real Triton is installed, PyTorch (inductor) and the like keep importing it.

Where the files live decides what is rewritten ("roots"): the script's folder and everything below
it; for `-m`, each path argument that exists (a file's folder, or the folder) and the conftest.py
files above them; and the TLX tutorials folder, which is also importable as
`triton.language.extra.tlx.tutorials` (Triton installs it there). That folder is found from
--tlx-tutorials DIR, else WARPWEAVE_TLX_TUTORIALS, else `third_party/tlx/tutorials` under one of
the script's (or path's) enclosing folders (the Triton repository's layout), else the nearest
enclosing folder named `tutorials`, else a `tutorials` folder on tlx's package path. Modules
under the interpreter's own prefix (site-packages, the standard library) and warpweave's package
are never rewritten, nor files that do not mention triton. Rewritten modules are compiled in
memory (no .pyc is written for them).
"""

from __future__ import annotations

import ast
import importlib._bootstrap_external
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
import sysconfig
import types

__all__ = ["rewrite_source", "compile_source", "install", "uninstall", "RewritingFinder",
           "run_script", "run_module", "main", "TUTORIALS_PACKAGE"]

SOURCE_PACKAGE = "triton"
TARGET_PACKAGE = "warpweave"
# Where Triton installs the TLX tutorials, under its rewritten name.
TUTORIALS_PACKAGE = TARGET_PACKAGE + ".language.extra.tlx.tutorials"


def map_module(name):
    """'triton[.x]' -> 'warpweave[.x]'; None for any other module name."""
    if name == SOURCE_PACKAGE or (name or "").startswith(SOURCE_PACKAGE + "."):
        return TARGET_PACKAGE + name[len(SOURCE_PACKAGE):]
    return None


_IMPORT_CALLS = ("import_module", "__import__", "find_spec")


class _ImportRewriter(ast.NodeTransformer):
    """triton imports -> warpweave imports, each new node at the line of the one it replaces."""

    def __init__(self):
        self.changed = False

    def visit_Import(self, node):
        out = []
        group = []

        def flush():
            if group:
                out.append(ast.copy_location(ast.Import(names=list(group)), node))
                group.clear()

        for a in node.names:
            mapped = map_module(a.name)
            if mapped is None:
                group.append(a)
                continue
            self.changed = True
            if a.asname:
                group.append(ast.copy_location(ast.alias(name=mapped, asname=a.asname), a))
                continue
            # `import triton.x` binds the name `triton` (to the top package) after importing
            # triton.x: `triton = __import__("warpweave.x")` does the same with warpweave.
            flush()
            call = ast.Call(func=ast.Name(id="__import__", ctx=ast.Load()),
                            args=[ast.Constant(value=mapped)], keywords=[])
            top = a.name.split(".")[0]
            out.append(ast.copy_location(
                ast.Assign(targets=[ast.Name(id=top, ctx=ast.Store())], value=call), node))
        flush()
        return out if len(out) != 1 else out[0]

    def visit_ImportFrom(self, node):
        if node.level == 0:
            mapped = map_module(node.module)
            if mapped is not None:
                self.changed = True
                node.module = mapped
        return node

    def visit_Call(self, node):
        self.generic_visit(node)
        f = node.func
        name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
        if name in _IMPORT_CALLS and node.args and isinstance(node.args[0], ast.Constant):
            arg = node.args[0]
            mapped = map_module(arg.value) if isinstance(arg.value, str) else None
            if mapped is not None:
                self.changed = True
                node.args[0] = ast.copy_location(ast.Constant(value=mapped), arg)
        return node


def rewrite_source(source, filename="<string>") -> ast.Module:
    """The AST of `source` with its triton imports turned into warpweave imports (line numbers
    unchanged)."""
    tree = ast.parse(source, filename=filename)
    _ImportRewriter().visit(tree)
    ast.fix_missing_locations(tree)
    return tree


def compile_source(source, filename, assertion_config=None):
    """Code object of `source` after the rewrite; with `assertion_config` (a pytest Config) the
    asserts are rewritten as pytest does for test files."""
    tree = rewrite_source(source, filename)
    if assertion_config is not None:
        from _pytest.assertion.rewrite import rewrite_asserts

        raw = source if isinstance(source, bytes) else source.encode("utf-8")
        rewrite_asserts(tree, raw, filename, assertion_config)
    return compile(tree, filename, "exec", dont_inherit=True)


# ------------------------------------------------------------------------------------------------
# Import hook
# ------------------------------------------------------------------------------------------------


def _real(path: str) -> str:
    return os.path.realpath(os.path.abspath(path))


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _never_rewritten() -> list:
    """Folders whose modules are never rewritten: the interpreter's installation and warpweave."""
    dirs = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        try:
            dirs.add(sysconfig.get_paths()[key])
        except KeyError:
            pass
    for p in sys.path:
        if p and os.path.basename(p) in ("site-packages", "dist-packages"):
            dirs.add(p)
    dirs.add(os.path.dirname(os.path.abspath(__file__)))
    return [_real(d) for d in dirs if d]


class _RewritingLoader(importlib.machinery.SourceFileLoader):
    """Loads a source file through the rewrite; never reads or writes bytecode caches (a cached
    .pyc could hold the unrewritten code, and must not receive the rewritten)."""

    def __init__(self, fullname, path, assertion_config=None):
        super().__init__(fullname, path)
        self.assertion_config = assertion_config

    def get_code(self, fullname):
        path = self.get_filename(fullname)
        return compile_source(self.get_data(path), path, self.assertion_config)

    def set_data(self, path, data, *, _mode=0o666):
        pass


class _EmptyPackageLoader(importlib.abc.Loader):
    """The TLX tutorials package when its folder has no __init__.py."""

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        pass


class RewritingFinder(importlib.abc.MetaPathFinder):
    """Finds modules as Python's path finder does, and loads those whose files lie under a root
    through the rewrite."""

    def __init__(self, roots, tutorials=None):
        self.roots = []
        for r in roots:
            self.add_root(r)
        self.tutorials = _real(tutorials) if tutorials else None
        if self.tutorials:
            self.add_root(self.tutorials)
        self.conftest_dirs = set()  # folders whose conftest.py is rewritten too
        self._excluded = _never_rewritten()

    def add_root(self, path):
        path = _real(path)
        if path not in self.roots:
            self.roots.append(path)

    def add_conftest_dirs(self, root):
        """The folders above `root` (up to the file system's root): their conftest.py files are
        loaded by pytest for tests under `root`."""
        d = _real(root)
        while True:
            self.conftest_dirs.add(d)
            parent = os.path.dirname(d)
            if parent == d:
                break
            d = parent

    def wants(self, path) -> bool:
        """Whether the source file `path` is rewritten."""
        if not path or not path.endswith(".py"):
            return False
        real = _real(path)
        in_root = any(_under(real, r) for r in self.roots)
        if not in_root and not (os.path.basename(real) == "conftest.py"
                                and os.path.dirname(real) in self.conftest_dirs):
            return False
        # A root that holds an installation (a script at /) still leaves installed packages alone,
        # unless the root itself lies inside that installation.
        for ex in self._excluded:
            if _under(real, ex) and not any(_under(r, ex) for r in self.roots):
                return False
        try:
            with open(real, "rb") as f:
                return SOURCE_PACKAGE.encode() in f.read()
        except OSError:
            return False

    def find_spec(self, fullname, path=None, target=None):
        if fullname == TUTORIALS_PACKAGE:
            return self._tutorials_spec(path)
        if fullname.startswith(TARGET_PACKAGE + ".") and not fullname.startswith(
                TUTORIALS_PACKAGE + "."):
            return None  # warpweave's own modules, wherever its source tree lies
        spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
        # Modules left alone are left to the finders after this one (pytest's assertion
        # rewriter among them), as if this finder were not there.
        if spec is None or not isinstance(spec.loader, importlib.machinery.SourceFileLoader):
            return None
        if not self.wants(spec.origin):
            return None
        loader = _RewritingLoader(fullname, spec.origin, _pytest_assertion_config(fullname, path))
        new = importlib.util.spec_from_file_location(
            fullname, spec.origin, loader=loader,
            submodule_search_locations=spec.submodule_search_locations)
        return new

    def _tutorials_spec(self, path=None):
        if not self.tutorials:
            # A `tutorials` folder on tlx's package path (a conftest may put one there, as
            # Triton's install does) serves, and is rewritten like the others.
            found = importlib.machinery.PathFinder.find_spec(TUTORIALS_PACKAGE, path)
            if found is not None and found.submodule_search_locations:
                self.tutorials = _real(list(found.submodule_search_locations)[0])
                self.add_root(self.tutorials)
        if not self.tutorials:
            raise ModuleNotFoundError(
                f"{TUTORIALS_PACKAGE} (triton.language.extra.tlx.tutorials): no TLX tutorials "
                f"folder was found for this run; pass `python -m warpweave run --tlx-tutorials "
                f"DIR ...` or set WARPWEAVE_TLX_TUTORIALS=DIR", name=TUTORIALS_PACKAGE)
        init = os.path.join(self.tutorials, "__init__.py")
        if os.path.isfile(init):
            return importlib.util.spec_from_file_location(
                TUTORIALS_PACKAGE, init, loader=_RewritingLoader(TUTORIALS_PACKAGE, init),
                submodule_search_locations=[self.tutorials])
        spec = importlib.util.spec_from_loader(TUTORIALS_PACKAGE, _EmptyPackageLoader(),
                                               is_package=True)
        spec.submodule_search_locations = [self.tutorials]
        return spec


def _pytest_assertion_config(fullname, path):
    """pytest's Config when pytest's assertion rewriter would rewrite this module (a test file or
    a conftest), so that both rewrites apply; else None."""
    if "_pytest.assertion.rewrite" not in sys.modules:
        return None
    from _pytest.assertion.rewrite import AssertionRewritingHook

    for finder in sys.meta_path:
        if isinstance(finder, AssertionRewritingHook):
            try:
                if finder.find_spec(fullname, path) is not None:
                    return finder.config
            except Exception:
                return None
    return None


_installed = []
# spec_from_file_location's "not given" marker for submodule_search_locations.
_POPULATE = getattr(importlib._bootstrap_external, "_POPULATE", None)
_plain_spec_from_file_location = importlib.util.spec_from_file_location


def _spec_from_file_location(name, location=None, *, loader=None,
                             submodule_search_locations=_POPULATE):
    """importlib.util.spec_from_file_location while a finder is installed: a file under its roots
    (a script loading a sibling by path, e.g. a tutorial whose name has hyphens) gets the
    rewriting loader, as an import of it would."""
    if loader is None and location is not None:
        path = os.fspath(location)
        for finder in _installed:
            if finder.wants(path):
                loader = _RewritingLoader(name, path)
                break
    return _plain_spec_from_file_location(name, location, loader=loader,
                                          submodule_search_locations=submodule_search_locations)


def install(roots, tutorials=None) -> RewritingFinder:
    """Puts a RewritingFinder for `roots` first on sys.meta_path (returned; see uninstall), and
    routes importlib.util.spec_from_file_location of files under the roots to it."""
    finder = RewritingFinder(roots, tutorials)
    sys.meta_path.insert(0, finder)
    _installed.append(finder)
    importlib.util.spec_from_file_location = _spec_from_file_location
    return finder


def uninstall(finder) -> None:
    if finder in sys.meta_path:
        sys.meta_path.remove(finder)
    if finder in _installed:
        _installed.remove(finder)
    if not _installed:
        importlib.util.spec_from_file_location = _plain_spec_from_file_location


# ------------------------------------------------------------------------------------------------
# Locating the TLX tutorials folder
# ------------------------------------------------------------------------------------------------


def find_tutorials(start_paths, explicit=None):
    """The TLX tutorials folder for a run (see the module docstring), or None."""
    if explicit:
        return explicit
    env = os.environ.get("WARPWEAVE_TLX_TUTORIALS") or os.environ.get("TRITON_TLX_TUTORIALS")
    if env:
        return env

    def ancestors(p):
        d = _real(p if os.path.isdir(p) else os.path.dirname(p) or ".")
        while True:
            yield d
            parent = os.path.dirname(d)
            if parent == d:
                return
            d = parent

    # A Triton checkout's third_party/tlx/tutorials first (its python/tutorials folder holds
    # Triton's own tutorials), then the nearest enclosing folder named `tutorials`.
    for p in start_paths:
        for d in ancestors(p):
            candidate = os.path.join(d, "third_party", "tlx", "tutorials")
            if os.path.isdir(candidate):
                return candidate
    for p in start_paths:
        for d in ancestors(p):
            if os.path.basename(d) == "tutorials":
                return d
    return None


# ------------------------------------------------------------------------------------------------
# Running
# ------------------------------------------------------------------------------------------------


def run_script(path, args, tutorials=None) -> None:
    """Runs the file `path` as __main__ with sys.argv = [path, *args], rewritten, with its folder
    first on sys.path (as `python path` does)."""
    from . import _env

    _env.mirror()
    path = os.path.abspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"warpweave run: no such script: {path}")
    folder = os.path.dirname(path)
    install([folder], find_tutorials([path], tutorials))
    sys.argv = [path] + list(args)
    sys.path.insert(0, folder)
    with open(path, "rb") as f:
        source = f.read()
    code = compile_source(source, path)
    main = types.ModuleType("__main__")
    main.__file__ = path
    main.__builtins__ = __builtins__
    main.__loader__ = _RewritingLoader("__main__", path)
    main.__spec__ = None
    sys.modules["__main__"] = main
    exec(code, main.__dict__)


def _module_roots(args):
    """The existing paths among `args` (pytest node ids lose their ::suffix); the current folder
    when there are none."""
    roots = []
    for a in args:
        if a.startswith("-"):
            continue
        p = a.split("::", 1)[0]
        if p and os.path.exists(p):
            roots.append(p if os.path.isdir(p) else os.path.dirname(os.path.abspath(p)))
    return roots or [os.getcwd()]


def run_module(module, args, tutorials=None) -> int:
    """Runs `module` as `python -m module args` does, with the modules under the given paths (and
    the tutorials folder) rewritten. pytest runs through pytest.main with the plugin
    warpweave._pytest_run, which keeps the rewrite ahead of pytest's own import hook (in
    pytest-xdist workers too); returns the exit code."""
    from . import _env

    _env.mirror()
    roots = _module_roots(args)
    tutorials = find_tutorials(roots, tutorials)
    if tutorials:  # pytest-xdist workers find it here
        os.environ["WARPWEAVE_TLX_TUTORIALS"] = os.path.abspath(tutorials)
    finder = install(roots, tutorials)
    for r in roots:
        finder.add_conftest_dirs(r)
    sys.path.insert(0, os.getcwd())
    if module in ("pytest", "py.test"):
        import pytest

        sys.argv = ["pytest"] + list(args)
        return int(pytest.main(["-p", "warpweave._pytest_run"] + list(args)))
    import runpy

    sys.argv = [module] + list(args)
    runpy.run_module(module, run_name="__main__", alter_sys=True)
    return 0


USAGE = """usage: python -m warpweave run [--tlx-tutorials DIR] SCRIPT.py [ARGS...]
       python -m warpweave run [--tlx-tutorials DIR] -m MODULE [ARGS...]

Runs a Triton / TLX script (or module, e.g. pytest) with its `triton` imports bound to warpweave.
The script's folder tree (or, for -m, the paths among ARGS) is rewritten; --tlx-tutorials names
the folder importable as triton.language.extra.tlx.tutorials (found automatically when the
script lies in a folder named `tutorials` or in a Triton checkout)."""


def main(argv) -> int:
    """`python -m warpweave run ...` (argv without 'run')."""
    argv = list(argv)
    tutorials = None
    while argv and argv[0].startswith("-") and argv[0] != "-m":
        opt = argv.pop(0)
        if opt in ("-h", "--help"):
            print(USAGE)
            return 0
        if opt == "--tlx-tutorials" and argv:
            tutorials = argv.pop(0)
        elif opt.startswith("--tlx-tutorials="):
            tutorials = opt.split("=", 1)[1]
        else:
            print(f"warpweave run: unknown option {opt}\n{USAGE}", file=sys.stderr)
            return 2
    if not argv:
        print(USAGE, file=sys.stderr)
        return 2
    if argv[0] == "-m":
        if len(argv) < 2:
            print(f"warpweave run: -m needs a module name\n{USAGE}", file=sys.stderr)
            return 2
        return run_module(argv[1], argv[2:], tutorials)
    run_script(argv[0], argv[1:], tutorials)  # the script's SystemExit passes through
    return 0
