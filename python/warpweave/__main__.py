"""`python -m warpweave ...` is the `wwc` command line (see `wwc --help`)."""

import sys


def main() -> int:
    from ._native_loader import native

    return native().run_cli(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
