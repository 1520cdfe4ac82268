"""The `offpath` command line."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    print("offpath: the command line arrives with the embedded runtime", file=sys.stderr)
    return 2
