"""Expiry and debounce through the whole pipeline, over HTTP, against any target (the embedded runtime by
default)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

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


def created(job: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(str(job["created_at"]).replace("Z", "+00:00"))


def test_five_submits_within_a_second_run_only_the_last_and_cancel_the_others_as_superseded(target: Target) -> None:
    """Each superseded job names the job that runs once its own time has come, when that job was submitted within
    its window (the five submits take well under a second on a quiet machine; on a loaded one they may spread out,
    and a job whose window ended before the last submit names a later job that leads to it)."""
    key = f"e2e-{datetime.now(UTC).timestamp()}"
    ids = []
    for n in range(5):
        answer = target.call(
            "POST", "/jobs", body={"type": "demo.echo", "payload": {"n": n}, "debounce": {"key": key, "seconds": 2}}
        )
        assert answer.status == 202, answer.body
        ids.append(answer.body["job_id"])

    last = target.wait_for_job(ids[-1], FINAL, timeout_s=30)
    assert (last["status"], last["result"], last["attempts"]) == ("SUCCEEDED", {"n": 4}, 1)

    def within_window(job: dict[str, Any]) -> bool:
        return created(last) <= created(job) + timedelta(seconds=2)

    def named() -> list[dict[str, Any]] | None:
        jobs = [target.job(job_id) for job_id in ids[:-1]]
        done = all(job["superseded_by"] == last["job_id"] for job in jobs if within_window(job))
        return jobs if done else None

    jobs = target.wait_for(named, timeout_s=30)
    by_id = {job["job_id"]: job for job in jobs}
    for job in jobs:
        assert (job["status"], job["cancel_reason"], job["attempts"], job["result"]) == (
            "CANCELLED",
            "superseded",
            0,
            None,
        )
        seen = job
        while seen["superseded_by"] in by_id:
            seen = by_id[seen["superseded_by"]]
        assert seen["superseded_by"] == last["job_id"]
