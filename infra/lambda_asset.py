"""The function asset from the command line (infra/lambda_function.py bundles it for the synth)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from infra.lambda_function import AWS_PLATFORM, FUNCTIONS_DIR, bundle, host_platform, pinned_wheels


def main(argv: Sequence[str] | None = None) -> int:
    """`make lambda-wheels`: fetch the pinned wheels for AWS and for this machine into build/lambda-wheels.
    `--bundle DIR [--source DIR]`: bundle the asset for this machine into DIR (scripts/coldstart.py measures it)."""
    parser = argparse.ArgumentParser(prog="python -m infra.lambda_asset", description=main.__doc__)
    parser.add_argument("--bundle", type=Path, help="an empty directory to bundle the asset for this machine into")
    parser.add_argument("--source", type=Path, default=FUNCTIONS_DIR, help="the functions' source to bundle")
    args = parser.parse_args(argv)
    if args.bundle:
        bundle(args.source, host_platform(), args.bundle)
        return 0
    for target in (AWS_PLATFORM, host_platform()):
        print(f"{len(pinned_wheels(target))} pinned wheels in {target.wheel_dir}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
