"""A noisy neighbour, end to end in the embedded runtime over HTTP: tenant A floods the `default` queue class with
1,000 `demo.sleep` jobs, then tenant B submits 10. B's jobs carry B as their `MessageGroupId`, so the queue (the
emulator's stand-in for an SQS fair queue, offpath_local/fair_queues.py) hands them out before A's backlog, and
they finish while most of A's jobs are still waiting.

The bound is counted, not timed. The queue's depth (`GET /queues`: its messages not yet deleted, in flight or
not) is read when B's batch has been accepted (its messages all sent) and again as soon as B's last job is seen
finished; what A's backlog lost in between is what A finished in between (a batch's messages are deleted when
its invocation ends). Under the fair-queue rule A can finish only
- the batches it had in flight when B's messages arrived: at most `max_concurrency x batch_size` (50) jobs;
- the batches received while A held fewer than 30 messages in flight (not yet noisy): at most 2 batches, since
  each brings it 10 closer to 30;
- batches received after B's, on other slots, that finish before B's batch does (same job length, so only by
  scheduling noise): at most one batch per slot, 50 jobs at most.
So at most 2 x 50 + 2 x 10 = 120 of A's jobs finish meanwhile. Without fair delivery B's messages would wait
behind A's whole backlog (about 850 jobs when B submits), and all of it would finish first.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from offpath.domain.registry import REGISTRY
from offpath.jobs import load_job_types
from offpath_tools.launcher import OffpathLocal
from tests.e2e.conftest import ROOT, TENANT_A, TENANT_B, TOKEN_A, TOKEN_B, Local, wait_for

A_JOBS = 1_000
B_JOBS = 10
PER_BATCH = 100
SLEEP_MS = 50
QUEUE_CLASS = "default"


def submit_batches(local: Local, token: str, count: int) -> None:
    for start in range(0, count, PER_BATCH):
        jobs = [{"type": "demo.sleep", "payload": {"ms": SLEEP_MS}} for _ in range(min(PER_BATCH, count - start))]
        answer = local.call("POST", "/jobs/batch", token=token, body={"jobs": jobs})
        assert answer.status in {200, 202, 207}, answer.body
        assert all(result["status"] == 202 for result in answer.body["results"]), answer.body


def b_jobs_if_all_finished(local: Local) -> list[dict[str, Any]] | None:
    answer = local.call("GET", f"/jobs?limit={B_JOBS}", token=TOKEN_B)
    assert answer.status == 200, answer.body
    jobs: list[dict[str, Any]] = answer.body["jobs"]
    return jobs if len(jobs) == B_JOBS and all(job["status"] == "SUCCEEDED" for job in jobs) else None


def queue_depth(local: Local) -> int:
    """The queue class's messages not yet deleted: visible, in flight or delayed (an admin's view)."""
    answer = local.call("GET", "/queues", token=TOKEN_A)
    assert answer.status == 200, answer.body
    (queue,) = [q for q in answer.body["queues"] if q["name"] == QUEUE_CLASS]
    return int(queue["visible"]) + int(queue["in_flight"]) + int(queue["delayed"])


def test_a_quiet_tenant_is_served_while_a_noisy_tenants_backlog_waits(tmp_path: Path) -> None:
    load_job_types(demo=True)
    queue_class = REGISTRY.queues[QUEUE_CLASS]
    assert REGISTRY.job_types["demo.sleep"].queue == QUEUE_CLASS
    in_flight = queue_class.max_concurrency * queue_class.batch_size
    batch = queue_class.batch_size
    bound = 2 * in_flight + 2 * batch

    runtime = OffpathLocal.start(
        tmp_path, tokens={TENANT_A: TOKEN_A, TENANT_B: TOKEN_B}, admins=[TENANT_A], args=["--quiet"], cwd=ROOT
    )
    try:
        local = Local(runtime.url, runtime.data_dir, runtime.console)
        submit_batches(local, TOKEN_A, A_JOBS)
        submit_batches(local, TOKEN_B, B_JOBS)
        b_sent = datetime.now(UTC)
        a_waiting_when_b_sent = queue_depth(local) - B_JOBS
        b_jobs = wait_for(lambda: b_jobs_if_all_finished(local), timeout_s=120, interval_s=0.1)
        # B's last messages may not be deleted yet (their batch is ending): the depth is A's backlog and at most B_JOBS.
        depth_when_b_done = queue_depth(local)
    finally:
        runtime.stop()

    a_finished_meanwhile = a_waiting_when_b_sent - (depth_when_b_done - B_JOBS)
    b_done = max(datetime.fromisoformat(job["finished_at"]) for job in b_jobs)
    print(
        f"noisy neighbour: A had {a_waiting_when_b_sent} of {A_JOBS} jobs waiting when B submitted; when B's last job "
        f"finished, {(b_done - b_sent).total_seconds():.2f} s later, A had finished at most {a_finished_meanwhile} "
        f"more and at least {depth_when_b_done - B_JOBS} ({(depth_when_b_done - B_JOBS) / A_JOBS:.0%}) were waiting"
    )
    assert a_finished_meanwhile <= bound
    assert depth_when_b_done - B_JOBS > A_JOBS / 2  # most of A's backlog is still waiting
