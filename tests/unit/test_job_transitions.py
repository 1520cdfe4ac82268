"""The job state machine: the pure transitions are the only way a job changes state."""

from __future__ import annotations

from datetime import timedelta

import pytest

from offpath.domain import job as transitions
from offpath.domain.errors import TransitionError
from offpath.domain.job import CANCEL, CLAIM, FINAL_STATES, JobStatus
from tests.unit.conftest import START, TENANT, a_job

LEASE = timedelta(seconds=60)
RETENTION = timedelta(days=7)
LATER = START + timedelta(seconds=5)
SWEEP_AT = START + timedelta(minutes=2)
ALL = list(JobStatus)


def running(attempt: int = 1, lease_until_s: float = 60):
    return a_job(JobStatus.RUNNING, attempt=attempt, lease_until=START + timedelta(seconds=lease_until_s))


# -- claim --------------------------------------------------------------------------------------


@pytest.mark.parametrize("status", sorted(s for s in CLAIM.from_ if not CLAIM.sources[s]))
def test_claim_takes_a_waiting_job_for_its_next_attempt(status: JobStatus) -> None:
    job = a_job(status, attempt=1, next_attempt_at=START)

    claimed = transitions.claim(job, tenant=TENANT, now=LATER, lease=LEASE)

    assert claimed.status is JobStatus.RUNNING
    assert claimed.attempt == 2
    assert claimed.lease_until == LATER + LEASE
    assert claimed.next_attempt_at is None
    assert claimed.updated_at == LATER


def test_claim_keeps_the_time_of_the_first_start() -> None:
    job = a_job(JobStatus.RETRYING, attempt=1, started_at=START)

    claimed = transitions.claim(job, tenant=TENANT, now=LATER, lease=LEASE)

    assert claimed.started_at == START


def test_claim_takes_over_a_running_job_whose_lease_expired() -> None:
    job = running(attempt=1, lease_until_s=1)

    claimed = transitions.claim(job, tenant=TENANT, now=LATER, lease=LEASE)

    assert (claimed.status, claimed.attempt) == (JobStatus.RUNNING, 2)


def test_claim_refuses_a_running_job_whose_lease_is_held() -> None:
    with pytest.raises(TransitionError):
        transitions.claim(running(lease_until_s=60), tenant=TENANT, now=LATER, lease=LEASE)


@pytest.mark.parametrize("status", [JobStatus.SCHEDULED, *sorted(FINAL_STATES)])
def test_claim_refuses_a_job_that_is_not_waiting_to_run(status: JobStatus) -> None:
    with pytest.raises(TransitionError):
        transitions.claim(a_job(status), tenant=TENANT, now=LATER, lease=LEASE)


def test_claim_refuses_a_job_with_no_attempts_left() -> None:
    with pytest.raises(TransitionError, match="no attempts left"):
        transitions.claim(a_job(JobStatus.RETRYING, attempt=3, max_attempts=3), tenant=TENANT, now=LATER, lease=LEASE)


# -- outcomes, fenced by attempt ----------------------------------------------------------------


def test_success_records_the_result_and_when_it_expires() -> None:
    done = transitions.succeed(running(), attempt=1, result={"ok": 1}, now=LATER, retention=RETENTION)

    assert done.status is JobStatus.SUCCEEDED
    assert done.result == {"ok": 1}
    assert (done.lease_until, done.finished_at, done.expires_at) == (None, LATER, LATER + RETENTION)


def test_retry_records_the_error_and_the_next_attempt_time() -> None:
    waiting = transitions.schedule_retry(running(), attempt=1, error="boom", now=LATER, delay=timedelta(seconds=4))

    assert waiting.status is JobStatus.RETRYING
    assert waiting.error == "boom"
    assert waiting.next_attempt_at == LATER + timedelta(seconds=4)
    assert waiting.lease_until is None


def test_failure_records_the_reason_and_when_it_expires() -> None:
    failed = transitions.fail(running(), attempt=1, error="bad", now=LATER, retention=RETENTION)

    assert failed.status is JobStatus.FAILED
    assert failed.error == "bad"
    assert (failed.finished_at, failed.expires_at) == (LATER, LATER + RETENTION)


OUTCOMES = {
    "succeed": lambda job, attempt: transitions.succeed(job, attempt=attempt, result=1, now=LATER, retention=RETENTION),
    "schedule_retry": lambda job, attempt: transitions.schedule_retry(
        job, attempt=attempt, error="e", now=LATER, delay=LEASE
    ),
    "fail": lambda job, attempt: transitions.fail(job, attempt=attempt, error="e", now=LATER, retention=RETENTION),
}


@pytest.mark.parametrize("outcome", sorted(OUTCOMES))
def test_an_older_attempt_cannot_write_its_outcome(outcome: str) -> None:
    newer = running(attempt=2)

    with pytest.raises(TransitionError, match="attempt 1 no longer holds the job"):
        OUTCOMES[outcome](newer, 1)


@pytest.mark.parametrize("outcome", sorted(OUTCOMES))
@pytest.mark.parametrize("status", [s for s in ALL if s is not JobStatus.RUNNING])
def test_an_outcome_needs_a_running_job(outcome: str, status: JobStatus) -> None:
    with pytest.raises(TransitionError):
        OUTCOMES[outcome](a_job(status, attempt=1), 1)


# -- expired leases -----------------------------------------------------------------------------


def test_an_expired_lease_fails_the_job() -> None:
    failed = transitions.fail_expired_lease(running(lease_until_s=1), attempt=1, now=LATER, retention=RETENTION)

    assert (failed.status, failed.error) == (JobStatus.FAILED, "lease expired")


def test_a_held_lease_cannot_be_failed_as_expired() -> None:
    with pytest.raises(TransitionError, match="lease still held"):
        transitions.fail_expired_lease(running(lease_until_s=60), attempt=1, now=LATER, retention=RETENTION)


def test_an_expired_lease_requeues_the_job_with_its_attempt_count() -> None:
    queued = transitions.requeue_expired_lease(
        running(attempt=2, lease_until_s=1), attempt=2, now=LATER, sweep_at=SWEEP_AT
    )

    assert (queued.status, queued.attempt, queued.lease_until) == (JobStatus.QUEUED, 2, None)
    assert queued.sweep_at == SWEEP_AT


def test_a_held_lease_cannot_be_requeued() -> None:
    with pytest.raises(TransitionError, match="lease still held"):
        transitions.requeue_expired_lease(running(lease_until_s=60), attempt=1, now=LATER, sweep_at=SWEEP_AT)


def test_an_expired_lease_on_the_last_attempt_cannot_be_requeued() -> None:
    with pytest.raises(TransitionError, match="no attempts left"):
        transitions.requeue_expired_lease(running(attempt=3, lease_until_s=1), attempt=3, now=LATER, sweep_at=SWEEP_AT)


# -- cancel, scheduled, redrive -----------------------------------------------------------------


@pytest.mark.parametrize("status", sorted(CANCEL.from_))
def test_a_job_that_has_not_started_can_be_cancelled(status: JobStatus) -> None:
    cancelled = transitions.cancel(a_job(status), tenant=TENANT, now=LATER, retention=RETENTION)

    assert cancelled.status is JobStatus.CANCELLED
    assert cancelled.finished_at == LATER


@pytest.mark.parametrize("status", [JobStatus.RUNNING, *sorted(FINAL_STATES)])
def test_a_running_or_finished_job_cannot_be_cancelled(status: JobStatus) -> None:
    with pytest.raises(TransitionError):
        transitions.cancel(a_job(status), tenant=TENANT, now=LATER, retention=RETENTION)


def test_a_scheduled_job_is_queued_when_its_time_comes() -> None:
    queued = transitions.enqueue_scheduled(a_job(JobStatus.SCHEDULED), tenant=TENANT, now=LATER, sweep_at=SWEEP_AT)

    assert (queued.status, queued.sweep_at) == (JobStatus.QUEUED, SWEEP_AT)


@pytest.mark.parametrize("status", [s for s in ALL if s is not JobStatus.SCHEDULED])
def test_only_a_scheduled_job_is_enqueued_by_its_schedule(status: JobStatus) -> None:
    with pytest.raises(TransitionError):
        transitions.enqueue_scheduled(a_job(status), tenant=TENANT, now=LATER, sweep_at=SWEEP_AT)


def test_redrive_queues_a_failed_job_with_a_fresh_attempt_budget() -> None:
    failed = a_job(JobStatus.FAILED, attempt=3, error="bad", finished_at=START, expires_at=LATER)

    again = transitions.redrive(failed, tenant=TENANT, now=LATER, sweep_at=SWEEP_AT)

    assert (again.status, again.attempt, again.error, again.expires_at) == (JobStatus.QUEUED, 0, None, None)
    assert (again.redrives, again.resends, again.sweep_at) == (1, 0, SWEEP_AT)


@pytest.mark.parametrize("status", [s for s in ALL if s is not JobStatus.FAILED])
def test_only_a_failed_job_is_redriven(status: JobStatus) -> None:
    with pytest.raises(TransitionError):
        transitions.redrive(a_job(status), tenant=TENANT, now=LATER, sweep_at=SWEEP_AT)


def test_a_sweep_moves_the_sweep_time_of_the_job_it_saw() -> None:
    job = a_job(JobStatus.QUEUED, sweep_at=START)

    swept = transitions.reschedule_sweep(job, seen=START, sweep_at=SWEEP_AT, resent=True)

    assert (swept.sweep_at, swept.resends) == (SWEEP_AT, 1)


def test_a_sweep_that_saw_an_older_sweep_time_is_refused() -> None:
    job = a_job(JobStatus.QUEUED, sweep_at=SWEEP_AT)

    with pytest.raises(TransitionError, match="another sweep"):
        transitions.reschedule_sweep(job, seen=START, sweep_at=LATER, resent=False)


@pytest.mark.parametrize("status", sorted(FINAL_STATES))
def test_a_finished_job_is_not_swept(status: JobStatus) -> None:
    with pytest.raises(TransitionError):
        transitions.reschedule_sweep(a_job(status, sweep_at=START), seen=START, sweep_at=SWEEP_AT, resent=False)


@pytest.mark.parametrize("finish", ["succeed", "fail"])
def test_a_finished_job_leaves_the_sweep_index(finish: str) -> None:
    job = running().replace(sweep_at=SWEEP_AT)

    assert OUTCOMES[finish](job, 1).sweep_at is None


def test_final_states_are_exactly_succeeded_failed_cancelled_and_expired() -> None:
    assert {s for s in ALL if s.is_final} == {
        JobStatus.SUCCEEDED,
        JobStatus.FAILED,
        JobStatus.CANCELLED,
        JobStatus.EXPIRED,
    }
