"""Every test runs without real AWS credentials: nothing can reach a real account.

The one exception is `make e2e URL=... SIGV4=1`, which exists to reach a real deployment: its requests are
signed with the shell's own AWS credentials, so they are left as they are (tests/e2e/target.py)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections import Counter
from pathlib import Path

import pytest

from offpath_local import aws_calls

ROOT = Path(__file__).resolve().parent.parent

if os.environ.get("OFFPATH_E2E_SIGV4", "").strip().lower() not in {"1", "true", "yes", "on"}:
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

# The functions' AWS calls are recorded by every test process (and every `offpath local` they start) into one
# directory; the session checks them against docs/aws_calls.json at its end (pytest_sessionfinish).
# Only the session that made the directory removes it: a pytest this one starts (tests/e2e/test_targets.py runs the
# suite against a URL in a child process) inherits it, and its end would remove it under the runtimes still writing.
OWNS_RECORD = not os.environ.get(aws_calls.ENV)
if OWNS_RECORD:
    os.environ[aws_calls.ENV] = tempfile.mkdtemp(prefix="offpath-aws-calls-")
aws_calls.install_from_environment()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Groups for `pytest -n auto --dist loadgroup` (`make test`): tests that share an expensive session or module
    fixture run on one worker, so it is made once; every other test goes wherever a worker is free.

    - tests/infra: the synthesized stacks (session fixtures, several seconds each);
    - tests/e2e using `local`, or `target` (which is `local` unless a URL is given): the session's `offpath local`;
    - every other e2e module: the runtime it starts for itself;
    - tests/browser: the package's `offpath local` and Chromium.

    A group is the `@group` suffix of a test's node id, which pytest-xdist's scheduler splits off. pytest-xdist
    writes it from the `xdist_group` mark by assigning `item._nodeid`, which pytest 9 no longer reads (a node id is
    a structured `_id`): the mark alone groups nothing, and each test would be scheduled alone, every worker making
    its own session runtime and stacks and a module's fixtures made again on each worker its tests reach. So the
    suffix is written here (`_rename`), once.
    """
    # In a worker pytest-xdist sets `dist` to "no" and `loadgroup` to whether the run is `--dist loadgroup`.
    grouped = bool(getattr(config.option, "loadgroup", False))
    for item in items:
        label = getattr(item, "operation_label", None)
        if label and not item.nodeid.endswith("]"):
            _rename(item, f"{item.nodeid}[{label}]")
        path = Path(str(item.fspath)).resolve().relative_to(ROOT).as_posix()
        if path.startswith("tests/infra/"):
            group = "cdk"
        elif path.startswith("tests/e2e/"):
            session_runtime = {"local", "target"} & set(getattr(item, "fixturenames", ()))
            group = "e2e-local" if session_runtime else f"e2e-{Path(path).stem}"
        elif path.startswith("tests/browser/"):
            group = "browser"
        else:
            continue
        if grouped and not item.nodeid.endswith(f"@{group}"):
            _rename(item, f"{item.nodeid}@{group}")
    twice = [nodeid for nodeid, count in Counter(item.nodeid for item in items).items() if count > 1]
    if twice:
        raise pytest.UsageError(f"tests share a node id, so pytest-xdist would run only the first: {twice}")


def _rename(item: pytest.Item, nodeid: str) -> None:
    """Under pytest 9, schemathesis gives the items of every API operation of a test one node id (their names
    differ); pytest-xdist schedules by node id and would run the first operation alone."""
    if hasattr(item, "_id"):  # pytest 9: a structured NodeId
        item._id = type(item._id).parse(nodeid)
    else:
        item._nodeid = nodeid


def pytest_sessionstart(session: pytest.Session) -> None:
    """The record's directory exists at every session's start: `make mutation` (mutmut) runs several sessions in one
    process, and the end of each removes the directory the process's recorder writes to."""
    Path(os.environ[aws_calls.ENV]).mkdir(parents=True, exist_ok=True)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Every AWS call a function made in this session must be in docs/aws_calls.json (`make iam-check` proves
    those against the stack's roles): a call missing from it fails the session, naming how to add it."""
    if hasattr(session.config, "workerinput"):
        return  # a pytest-xdist worker: the controller reads every process's record
    from offpath_tools import iam_calls

    directory = Path(os.environ[aws_calls.ENV])
    recorded = {iam_calls.normalise(record) for record in aws_calls.read(directory)}
    committed = iam_calls.load()
    new = iam_calls.missing(recorded, committed)
    if os.environ.get(iam_calls.UPDATE_ENV) == "update":
        if new:
            iam_calls.save(committed | recorded)
        new = []
    if OWNS_RECORD and directory.name.startswith("offpath-aws-calls-"):
        shutil.rmtree(directory, ignore_errors=True)
    if new:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        lines = [f"AWS calls not in {iam_calls.CALLS_FILE.relative_to(ROOT)} ({len(new)}):"]
        lines += [f"  {iam_calls.describe(call)}" for call in new]
        lines.append(f"Add them with: {iam_calls.REGENERATE}; then make iam-check")
        if reporter is not None:
            reporter.ensure_newline()
            reporter.write_line("\n".join(lines), red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
