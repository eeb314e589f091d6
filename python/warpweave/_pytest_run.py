"""The pytest plugin of `python -m warpweave run -m pytest ...` (loaded with `-p`, so pytest-xdist
workers load it too): before pytest imports any conftest or test file, it installs the compat
rewrite for the paths among pytest's arguments and puts it ahead of pytest's own
assertion-rewriting import hook (pytest puts that hook first on sys.meta_path early in its
start-up). Test files then get both rewrites: triton imports, then pytest's asserts."""

from __future__ import annotations

import os
import sys

import pytest

from . import compat


def _ensure(args):
    if compat._installed:
        finder = compat._installed[-1]
    else:
        roots = compat._module_roots([str(a) for a in args])
        finder = compat.install(roots, compat.find_tutorials(roots))
        for r in roots:
            finder.add_conftest_dirs(r)
        if os.getcwd() not in sys.path:
            sys.path.insert(0, os.getcwd())
    if finder in sys.meta_path:
        sys.meta_path.remove(finder)
    sys.meta_path.insert(0, finder)
    return finder


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config, parser, args):
    _ensure(args)


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    _ensure(config.args)
