"""Operating the pipeline: DLQ alarm, redrive, schedules fired by the clock, queue metrics."""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.conftest import PREFLIGHT, Local, wait_for
from tests.e2e.local_schedules import E2E_SCHEDULE
from tests.e2e.target import Target

DLQ_ALARM = "offpath-default-dlq-depth"


def _default_queue(local: Local | Target) -> dict[str, object]:
    answer = local.call("GET", "/queues")
    assert answer.status == 200
    return next(q for q in answer.body["queues"] if q["name"] == "default")


def test_a_poison_job_puts_the_dlq_alarm_in_alarm(local: Local) -> None:
    job_id = local.submit("demo.poison", {"reason": "alarm check"}).body["job_id"]
    local.wait_for_job(job_id, {"FAILED"})

    state = wait_for(lambda: "ALARM" if local.alarm_state(DLQ_ALARM) == "ALARM" else None)

    assert state == "ALARM"
    change = next(c for c in reversed(local.alarm_changes()) if c["alarm"] == DLQ_ALARM)
    assert change["new_state"] == "ALARM"
    assert change["value"] >= 1
    assert _default_queue(local)["dlq_depth"] >= 1


def others_dead_letters(target: Target) -> int:
    """How many dead letters on `default` are not the suite's own: before the suite ran, and now beyond the jobs
    it parked there itself (a poison job of another tenant landing during the run is counted too)."""
    before = PREFLIGHT.dlq_depths.get("default", 0)
    now = int(str(_default_queue(target)["dlq_depth"]))
    return max(before, now - len(target.parked))


def _dead_letters(count: int) -> str:
    return f"{count} dead letter" + ("" if count == 1 else "s")


@pytest.mark.needs("admin")
def test_redrive_sends_dead_jobs_back_through_the_worker(target: Target) -> None:
    """A redrive moves every dead letter of the queue: against a shared target it runs only when all of them are
    the suite's own, else it is not applicable (another tenant's parked jobs would run again)."""
    if target.shared and (others := others_dead_letters(target)):
        pytest.skip(f"not applicable: DLQ not empty ({_dead_letters(others)} on default not this run's own)")
    # Fails its first run only: redriven, it succeeds and leaves the DLQ as it found it.
    job_id = target.submit("demo.poison", {"reason": "redrive check", "first_run_only": True}).body["job_id"]
    target.parked.add(job_id)
    target.wait_for_job(job_id, {"FAILED"})
    target.wait_for(lambda: _default_queue(target)["dlq_depth"] or None)
    if target.shared and (others := others_dead_letters(target)):
        pytest.skip(f"not applicable: DLQ not empty ({_dead_letters(others)} on default not this run's own)")

    answer = target.call("POST", "/queues/default/redrive")

    assert answer.status == 202, answer.body
    target.parked.discard(job_id)

    def redriven() -> dict[str, object] | None:
        job = target.job(job_id)
        return job if job["redrives"] >= 1 and job["status"] == "SUCCEEDED" else None

    def completed() -> dict[str, object] | None:
        queue = _default_queue(target)
        redrive = queue["redrive"]
        return redrive if isinstance(redrive, dict) and redrive["status"] == "COMPLETED" else None

    # The job runs again with a fresh attempt budget, and succeeds.
    job = target.wait_for(redriven)
    assert job["attempts"] == 1
    assert job["result"] == {"recovered": True}
    task = target.wait_for(completed)
    assert task["moved"] >= 1


@pytest.mark.needs("clock")
def test_a_declared_schedule_is_fired_by_the_clock(local: Local) -> None:
    def fired() -> dict[str, object] | None:
        answer = local.call("GET", "/schedules")
        assert answer.status == 200, answer.body
        schedule = next(s for s in answer.body["schedules"] if s["name"] == E2E_SCHEDULE)
        return next((f for f in schedule["last_firings"] if f["job_id"]), None)

    firing = wait_for(fired, timeout_s=20)

    # Jobs made by schedules belong to the system tenant, which admins can read.
    job = local.wait_for_job(str(firing["job_id"]), {"SUCCEEDED", "FAILED"})
    assert job["status"] == "SUCCEEDED"
    assert job["result"] == {"from": "e2e-schedule"}
    assert firing["slot"].endswith("Z")


def test_queue_metrics_show_the_oldest_message_age(local: Local) -> None:
    # The evaluator publishes AWS/SQS metrics: a queue with messages has an age; an empty one has none
    # (tests/e2e/test_runtime_state.py follows one message from its age to none). The counts are read when asked,
    # the ages at the last evaluation: they agree within an evaluation or two.
    def consistent() -> list[dict[str, Any]] | None:
        queues = list(local.call("GET", "/queues").body["queues"])
        agree = all((q["oldest_age_s"] is not None) == (q["visible"] + q["in_flight"] > 0) for q in queues)
        return queues if agree else None

    queues = wait_for(consistent, timeout_s=10)

    assert {q["name"] for q in queues} >= {"critical", "default", "bulk"}
