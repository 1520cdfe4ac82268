"""Expiry and debounce through the whole pipeline, over HTTP, against any target (the embedded runtime by
default)."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

from tests.e2e.target import Target

FINAL = {"SUCCEEDED", "FAILED", "CANCELLED", "EXPIRED"}


def rfc3339(when: datetime) -> str:
    return when.isoformat().replace("+00:00", "Z")


def test_a_delayed_job_whose_expiry_passes_before_its_message_is_due_ends_expired_without_running(
    target: Target,
) -> None:
    """An SQS delay is whole seconds, rounded up: a job due 1.9 s from now is delivered 2 s after its submit (later
    if the submit took longer), after its expiry 1.901 s from now, so its first delivery meets it expired."""
    now = datetime.now(UTC)
    body = {
        "type": "demo.echo",
        "payload": {"expired": True},
        "run_at": rfc3339(now + timedelta(seconds=1.9)),
        "expires_at": rfc3339(now + timedelta(seconds=1.901)),
    }

    submitted = target.call("POST", "/jobs", body=body)
    assert submitted.status == 202, submitted.body
    job = target.wait_for_job(submitted.body["job_id"], FINAL, timeout_s=30)

    assert job["status"] == "EXPIRED"
    assert (job["attempts"], job["started_at"], job["result"], job["attempt_history"]) == (0, None, None, [])
    assert job["expires_at"] == body["expires_at"]

    retried = target.call("POST", f"/jobs/{job['job_id']}/retry")
    assert retried.status == 202, retried.body
    again = target.wait_for_job(job["job_id"], FINAL, timeout_s=30)
    assert (again["status"], again["result"], again["expires_at"]) == ("SUCCEEDED", {"expired": True}, None)


def test_five_submits_within_a_second_run_only_the_last_and_cancel_the_others_as_superseded(target: Target) -> None:
    key = f"e2e-{datetime.now(UTC).timestamp()}"
    ids = []
    for n in range(5):
        answer = target.call(
            "POST", "/jobs", body={"type": "demo.echo", "payload": {"n": n}, "debounce": {"key": key, "seconds": 2}}
        )
        assert answer.status == 202, answer.body
        ids.append(answer.body["job_id"])

    jobs = [target.wait_for_job(job_id, FINAL, timeout_s=30) for job_id in ids]

    last = jobs[-1]
    assert (last["status"], last["result"], last["attempts"]) == ("SUCCEEDED", {"n": 4}, 1)
    for earlier, later in itertools.pairwise(jobs):
        assert (earlier["status"], earlier["cancel_reason"], earlier["superseded_by"], earlier["attempts"]) == (
            "CANCELLED",
            "superseded",
            later["job_id"],
            0,
        )
    # Following superseded_by from any of them leads to the job that ran.
    by_id = {job["job_id"]: job for job in jobs}
    for job in jobs[:-1]:
        seen = job
        while seen["superseded_by"] is not None:
            seen = by_id[seen["superseded_by"]]
        assert seen["job_id"] == last["job_id"]
