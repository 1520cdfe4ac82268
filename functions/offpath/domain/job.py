"""The job record, its states, and the transitions that are the only way to change them.

The functions here are pure: they take a job and the current time and return the changed job,
or raise `TransitionError`. The in-memory store applies them directly; the DynamoDB store turns the
same preconditions (the `*_FROM` sets) into conditional writes.
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from offpath.domain.errors import TransitionError


class JobStatus(enum.StrEnum):
    QUEUED = "QUEUED"
    SCHEDULED = "SCHEDULED"
    RUNNING = "RUNNING"
    RETRYING = "RETRYING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"

    @property
    def is_final(self) -> bool:
        return self in FINAL_STATES


FINAL_STATES = frozenset({JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELLED})
CLAIMABLE_FROM = frozenset({JobStatus.QUEUED, JobStatus.RETRYING})
CANCELLABLE_FROM = frozenset({JobStatus.QUEUED, JobStatus.SCHEDULED, JobStatus.RETRYING})
ENQUEUE_FROM = frozenset({JobStatus.SCHEDULED})


@dataclass(frozen=True)
class Progress:
    fraction: float
    message: str = ""


@dataclass(frozen=True)
class Job:
    job_id: str
    tenant: str
    type: str
    queue: str
    payload: dict[str, Any]
    payload_hash: str
    status: JobStatus
    created_at: datetime
    updated_at: datetime
    max_attempts: int
    attempt: int = 0
    idempotency_key: str | None = None
    submission_id: str = ""
    run_at: datetime | None = None
    lease_until: datetime | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    next_attempt_at: datetime | None = None
    progress: Progress | None = None
    result: Any = None
    error: str | None = None
    expires_at: datetime | None = None
    schedule_name: str | None = None
    redrives: int = 0
    # When the sweeper should next look at this job (None once it is final); see logic/sweep.py.
    sweep_at: datetime | None = None
    resends: int = 0

    def replace(self, **changes: Any) -> Job:
        return dataclasses.replace(self, **changes)

    def lease_expired(self, now: datetime) -> bool:
        return self.status is JobStatus.RUNNING and (self.lease_until is None or self.lease_until <= now)


def claim(job: Job, *, now: datetime, lease: timedelta) -> Job:
    """QUEUED/RETRYING (or RUNNING with an expired lease) -> RUNNING with the next attempt number."""
    if not (job.status in CLAIMABLE_FROM or job.lease_expired(now)):
        raise TransitionError(job.status, JobStatus.RUNNING)
    if job.attempt >= job.max_attempts:
        raise TransitionError(job.status, JobStatus.RUNNING, "no attempts left")
    return job.replace(
        status=JobStatus.RUNNING,
        attempt=job.attempt + 1,
        lease_until=now + lease,
        started_at=job.started_at or now,
        updated_at=now,
        next_attempt_at=None,
    )


def _require_attempt(job: Job, attempt: int, target: JobStatus) -> None:
    if job.status is not JobStatus.RUNNING or job.attempt != attempt:
        raise TransitionError(job.status, target, f"attempt {attempt} no longer holds the job")


def succeed(job: Job, *, attempt: int, result: Any, now: datetime, retention: timedelta) -> Job:
    _require_attempt(job, attempt, JobStatus.SUCCEEDED)
    return job.replace(
        status=JobStatus.SUCCEEDED,
        result=result,
        error=None,
        lease_until=None,
        finished_at=now,
        updated_at=now,
        expires_at=now + retention,
        sweep_at=None,
    )


def schedule_retry(job: Job, *, attempt: int, error: str, now: datetime, delay: timedelta) -> Job:
    _require_attempt(job, attempt, JobStatus.RETRYING)
    return job.replace(
        status=JobStatus.RETRYING,
        error=error,
        lease_until=None,
        next_attempt_at=now + delay,
        updated_at=now,
    )


def fail(job: Job, *, attempt: int, error: str, now: datetime, retention: timedelta) -> Job:
    _require_attempt(job, attempt, JobStatus.FAILED)
    return job.replace(
        status=JobStatus.FAILED,
        error=error,
        lease_until=None,
        finished_at=now,
        updated_at=now,
        expires_at=now + retention,
        sweep_at=None,
    )


def fail_expired_lease(job: Job, *, now: datetime, retention: timedelta) -> Job:
    """A RUNNING job whose lease ran out with no attempts left: FAILED, fenced on its attempt."""
    if not job.lease_expired(now):
        raise TransitionError(job.status, JobStatus.FAILED, "lease still held")
    return job.replace(
        status=JobStatus.FAILED,
        error="lease expired",
        lease_until=None,
        finished_at=now,
        updated_at=now,
        expires_at=now + retention,
        sweep_at=None,
    )


def cancel(job: Job, *, now: datetime, retention: timedelta) -> Job:
    if job.status not in CANCELLABLE_FROM:
        raise TransitionError(job.status, JobStatus.CANCELLED)
    return job.replace(
        status=JobStatus.CANCELLED,
        lease_until=None,
        finished_at=now,
        updated_at=now,
        expires_at=now + retention,
        sweep_at=None,
    )


def enqueue_scheduled(job: Job, *, now: datetime, sweep_at: datetime) -> Job:
    """SCHEDULED -> QUEUED when its time has come."""
    if job.status not in ENQUEUE_FROM:
        raise TransitionError(job.status, JobStatus.QUEUED)
    return job.replace(status=JobStatus.QUEUED, updated_at=now, sweep_at=sweep_at)


def requeue_expired_lease(job: Job, *, now: datetime, sweep_at: datetime) -> Job:
    """A RUNNING job whose worker vanished, with attempts left: back to QUEUED for another try."""
    if not job.lease_expired(now):
        raise TransitionError(job.status, JobStatus.QUEUED, "lease still held")
    if job.attempt >= job.max_attempts:
        raise TransitionError(job.status, JobStatus.QUEUED, "no attempts left")
    return job.replace(status=JobStatus.QUEUED, lease_until=None, updated_at=now, sweep_at=sweep_at)


def redrive(job: Job, *, now: datetime, sweep_at: datetime) -> Job:
    """FAILED -> QUEUED with a fresh attempt budget; the redrive is counted on the job."""
    if job.status is not JobStatus.FAILED:
        raise TransitionError(job.status, JobStatus.QUEUED, "only a failed job is redriven")
    return job.replace(
        status=JobStatus.QUEUED,
        attempt=0,
        error=None,
        finished_at=None,
        expires_at=None,
        updated_at=now,
        redrives=job.redrives + 1,
        sweep_at=sweep_at,
        resends=0,
    )


def reschedule_sweep(job: Job, *, seen: datetime | None, sweep_at: datetime, resent: bool) -> Job:
    """The sweeper looked at the job: when to look again. Fenced on the sweep time it saw, so two
    overlapping sweeps act on a job once."""
    if job.status.is_final or job.sweep_at != seen:
        raise TransitionError(job.status, job.status, "another sweep handled the job")
    return job.replace(sweep_at=sweep_at, resends=job.resends + (1 if resent else 0))
