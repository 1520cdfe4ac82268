"""Every test runs without real AWS credentials: nothing can reach a real account."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

os.environ.update(
    {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_REGION": "us-east-1",
    }
)
os.environ.pop("AWS_PROFILE", None)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Groups for `pytest -n auto --dist loadgroup` (`make test`): tests that share an expensive session or module
    fixture run on one worker, so it is made once; every other test goes wherever a worker is free.

    - tests/infra: the synthesized stacks (session fixtures, several seconds each);
    - tests/e2e using `local`: the session's `offpath local`;
    - every other e2e module: the runtime it starts for itself.
    """
    for item in items:
        path = Path(str(item.fspath)).resolve().relative_to(ROOT).as_posix()
        if path.startswith("tests/infra/"):
            group = "cdk"
        elif path.startswith("tests/e2e/"):
            group = "e2e-local" if "local" in getattr(item, "fixturenames", ()) else f"e2e-{Path(path).stem}"
        else:
            continue
        item.add_marker(pytest.mark.xdist_group(group))
