"""Per-key concurrency and rate limits, end to end in the embedded runtime over HTTP (the worker's real adapter
against the emulated DynamoDB): `demo.limited` runs at most 2 jobs of one account at once, `demo.rated` starts at
most 2 a second per account (after the bucket's first 2). Both are on the `critical` queue class, whose worker runs
10 jobs at once, one an invocation: the limits, not the worker pool, bound them.

Everything is computed from the jobs' own views: each attempt's `started_at` and `finished_at`. Every job runs once
(1 attempt): a job over a limit waits without spending one.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest

from offpath.jobs import load_job_types
from offpath_tools.launcher import OffpathLocal
from tests.e2e.conftest import ROOT, TENANT_A, TENANT_B, TOKEN_A, TOKEN_B, Local, wait_for

PER_ACCOUNT = 20
SLEEP_MS = 300
RATED_JOBS = 10
# Start times are recorded by the claim, a few milliseconds after the token was taken: a loaded machine may delay
# one claim more than the next, so the rate is checked with this much slack.
START_SLACK_S = 1.0


@pytest.fixture(scope="module")
def runtime(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Local]:
    started = OffpathLocal.start(
        tmp_path_factory.mktemp("offpath-limits"),
        tokens={TENANT_A: TOKEN_A, TENANT_B: TOKEN_B},
        admins=[TENANT_A],
        args=["--quiet"],
        cwd=ROOT,
    )
    try:
        yield Local(url=started.url, data_dir=started.data_dir, log=started.console)
    finally:
        started.stop()


def submit_all(local: Local, job_type: str, payloads: list[dict[str, Any]]) -> list[str]:
    jobs = [{"type": job_type, "payload": payload} for payload in payloads]
    answer = local.call("POST", "/jobs/batch", body={"jobs": jobs})
    assert answer.status in {200, 202, 207}, answer.body
    assert all(result["status"] == 202 for result in answer.body["results"]), answer.body
    return [result["job"]["job_id"] for result in answer.body["results"]]


def all_finished(local: Local, job_ids: list[str]) -> list[dict[str, Any]] | None:
    views = [local.job(job_id) for job_id in job_ids]
    return views if all(view["status"] in {"SUCCEEDED", "FAILED"} for view in views) else None


def times(view: dict[str, Any]) -> tuple[datetime, datetime]:
    (attempt,) = view["attempt_history"]
    return datetime.fromisoformat(attempt["started_at"]), datetime.fromisoformat(attempt["finished_at"])


def most_at_once(spans: list[tuple[datetime, datetime]]) -> int:
    """The most spans running at one moment (a span ending as another starts does not overlap it)."""
    events = sorted([(start, 1) for start, _ in spans] + [(end, -1) for _, end in spans], key=lambda e: (e[0], e[1]))
    running = most = 0
    for _, change in events:
        running += change
        most = max(most, running)
    return most


def test_the_demo_types_are_limited_not_their_worker_pool() -> None:
    registry = load_job_types(demo=True)
    for name in ("demo.limited", "demo.rated"):
        queue = registry.job_types[name].queue
        assert registry.queues[queue].max_concurrency >= 2 * 2 + 2 and registry.batch_size(queue) == 1


def test_at_most_two_jobs_of_one_account_run_at_once_and_two_accounts_progress_in_parallel(runtime: Local) -> None:
    payloads = [{"account": account, "ms": SLEEP_MS} for _ in range(PER_ACCOUNT) for account in ("acme", "globex")]
    job_ids = submit_all(runtime, "demo.limited", payloads)

    views = wait_for(lambda: all_finished(runtime, job_ids), timeout_s=55, interval_s=0.25)

    assert {(view["status"], view["attempts"]) for view in views} == {("SUCCEEDED", 1)}
    by_account: dict[str, list[tuple[datetime, datetime]]] = {"acme": [], "globex": []}
    for payload, view in zip(payloads, views, strict=True):
        by_account[payload["account"]].append(times(view))
    assert {account: most_at_once(spans) for account, spans in by_account.items()} == {"acme": 2, "globex": 2}
    # Both accounts progressed together: more than two jobs ran at one moment, so neither waited for the other.
    assert most_at_once(by_account["acme"] + by_account["globex"]) > 2


def test_a_rate_limited_accounts_jobs_start_at_most_two_a_second_after_the_first_two(runtime: Local) -> None:
    job_ids = submit_all(runtime, "demo.rated", [{"account": "acme"} for _ in range(RATED_JOBS)])

    views = wait_for(lambda: all_finished(runtime, job_ids), timeout_s=55, interval_s=0.25)

    assert {(view["status"], view["attempts"]) for view in views} == {("SUCCEEDED", 1)}
    starts = sorted(times(view)[0] for view in views)
    # A bucket of 2 (one second of "2/s"), then one start every half second: within any span of d seconds at most
    # 2 + 2 x d starts (with the slack of a late-recorded start).
    for first in range(len(starts)):
        for last in range(first + 1, len(starts)):
            span_s = (starts[last] - starts[first]).total_seconds()
            assert last - first + 1 <= 2 + 2 * (span_s + START_SLACK_S), (first, last, span_s)
    assert (starts[-1] - starts[0]).total_seconds() >= (RATED_JOBS - 2) / 2 - START_SLACK_S
