#!/usr/bin/env python3
"""Runs the lit tests under tests/lit against one ww-opt (ctest's `lit` test).

Exits 77, which ctest reports as skipped, with a message when lit or FileCheck is missing
(scripts/lib/setup.sh installs both).
"""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from lit_tools import find_filecheck  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--ww-opt", required=True, help="the ww-opt binary to test")
    ap.add_argument("--exec-root", required=True, help="where lit writes its Output folders")
    ap.add_argument("lit_args", nargs="*", help="more arguments for lit (tests to run, -v ...)")
    args = ap.parse_args()
    try:
        from lit.main import main as lit_main
    except ImportError:
        print("lit tests skipped: the Python package 'lit' is not installed (pip install lit)")
        return 77
    if find_filecheck() is None:
        print("lit tests skipped: FileCheck not found (apt-get install llvm-14-tools)")
        return 77
    os.environ["WW_OPT"] = os.path.abspath(args.ww_opt)
    os.environ["WW_LIT_EXEC_ROOT"] = os.path.abspath(args.exec_root)
    sys.argv = ["lit", "-sv", HERE] + args.lit_args
    lit_main()  # exits
    return 0


if __name__ == "__main__":
    sys.exit(main())
