"""`python -m warpweave ...` is the `wwc` command line (see `wwc --help`), plus

    python -m warpweave run SCRIPT.py [ARGS]      run a Triton / TLX script with its `triton`
    python -m warpweave run -m MODULE [ARGS]      imports bound to warpweave (see compat.py)
"""

import sys


def main() -> int:
    argv = sys.argv[1:]
    if argv and argv[0] == "run":
        from . import compat

        return compat.main(argv[1:])
    from ._native_loader import native

    return native().run_cli(argv)


if __name__ == "__main__":
    sys.exit(main())
