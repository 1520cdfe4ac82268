"""`make test`'s groups hold: under `pytest -n 2 --dist loadgroup`, the tests of a group (here an e2e module's,
which share its fixtures) all run on one worker, each named with its group (tests/conftest.py). pytest-xdist's own
`xdist_group` mark grouped nothing under pytest 9, and every module fixture was made again on each worker its
tests reached: the fault ledger ran twice, and both workers started the session's runtime."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections import defaultdict

from tests.conftest import ROOT

# Tests of the gateway alone (an in-process fixture, no runtime), and unit tests for the other worker to take.
GROUPED = "tests/e2e/test_gateway.py"
UNGROUPED = "tests/unit/test_settings.py"
SELECTION = "chunk_size or content_length or test_settings"
RESULT = re.compile(r"^\[(?P<worker>gw\d+)\] .*?(?:PASSED|FAILED|ERROR) (?P<nodeid>.+?) *$", re.MULTILINE)


def test_the_tests_of_a_group_run_on_one_worker_named_with_their_group() -> None:
    xdist = ["-n", "2", "--dist", "loadgroup", "-o", "addopts=", "-v", "-p", "no:cacheprovider"]
    run = subprocess.run(
        [sys.executable, "-m", "pytest", *xdist, GROUPED, UNGROUPED, "-k", SELECTION],
        cwd=ROOT,
        env={**os.environ, "COLUMNS": "1000"},  # node ids whole, not cut to the terminal's width
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    workers: dict[str, set[str]] = defaultdict(set)
    for found in RESULT.finditer(run.stdout):
        workers[found["nodeid"].partition("::")[0]].add(found["worker"])
    grouped = [found["nodeid"] for found in RESULT.finditer(run.stdout) if found["nodeid"].startswith(GROUPED)]

    assert len(grouped) >= 10
    assert [nodeid for nodeid in grouped if not nodeid.endswith("@e2e-test_gateway")] == []
    assert len(workers[GROUPED]) == 1, workers
    assert workers[UNGROUPED], workers
