"""The ports the logic talks to. Adapters implement them; tests use in-memory fakes."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol

from offpath.domain.job import AttemptError, Job, JobStatus, Progress

if TYPE_CHECKING:
    from offpath.domain.batch import BatchStore
    from offpath.domain.clock import Clock
    from offpath.domain.quotas import QuotaGate
    from offpath.domain.registry import Registry


@dataclass(frozen=True)
class JobMessage:
    """What travels on a queue: just enough to claim the job. The payload stays in the store."""

    job_id: str
    type: str
    tenant: str
    # The job's trace, carried beside the body (the queue adapter's `traceparent` message attribute).
    trace_id: str | None = field(default=None, compare=False)
    # The job's expiry (its `start_by`), so the worker's expiry check needs no read; only in the body of a job
    # that has one (logic/expiry.py).
    start_by: datetime | None = field(default=None, compare=False)

    @classmethod
    def of(cls, job: Job) -> JobMessage:
        return cls(job.job_id, job.type, job.tenant, job.trace_id, job.start_by)

    def to_body(self) -> str:
        body = {"job_id": self.job_id, "type": self.type, "tenant": self.tenant}
        if self.start_by is not None:
            body["start_by"] = self.start_by.isoformat()
        return json.dumps(body, separators=(",", ":"))

    @classmethod
    def from_body(cls, body: str) -> JobMessage:
        data = json.loads(body)
        job_id, job_type, tenant = str(data["job_id"]), str(data["type"]), str(data["tenant"])
        start_by = datetime.fromisoformat(data["start_by"]) if isinstance(data.get("start_by"), str) else None
        return cls(job_id=job_id, type=job_type, tenant=tenant, start_by=start_by)


@dataclass(frozen=True)
class CreateOutcome:
    job: Job
    replayed: bool


@dataclass(frozen=True)
class KeyRecord:
    """An idempotency key's record: the job the key was first used for (its id and creation time), what that
    submission asked for (`Job.fingerprint`) and which submission wrote the record."""

    job_id: str
    created_at: datetime
    fingerprint: str
    submission_id: str


@dataclass(frozen=True)
class DebounceRecord:
    """A debounce key's record (per tenant, job type and key): the burst's current survivor, when it was
    submitted, and when its window ends (a later submit before then supersedes it); logic/debounce.py."""

    job_id: str
    submitted_at: datetime
    window_end: datetime


# An idempotency key's record outlives its job's due time by the retention and this much more (logic/submit.py:
# key_record_expiry): a job runs within minutes of being due, and is kept for the retention after it finished.
KEY_RECORD_MARGIN = timedelta(days=1)


def key_record_extension(job: Job, *, now: datetime, expires_at: datetime) -> datetime | None:
    """A keyed job finishing at `now`, its item to expire at `expires_at` (now + the retention): when its key's
    record must expire so that it outlives the job (`expires_at` + KEY_RECORD_MARGIN); None when the record's
    own expiry (due + the retention + KEY_RECORD_MARGIN) already does, as for every job finishing within
    KEY_RECORD_MARGIN of being due (no write then: the worker's path stays as it is)."""
    if job.idempotency_key is None:
        return None
    due = max(job.created_at, job.run_at) if job.run_at is not None else job.created_at
    if now <= due + KEY_RECORD_MARGIN:
        return None
    return expires_at + KEY_RECORD_MARGIN


@dataclass(frozen=True)
class Firing:
    """One firing of a recurring schedule: the job it made, or why it made none."""

    slot: str  # the Scheduler's <aws.scheduler.scheduled-time>, or "manual:<time>" for a trigger
    fired_at: datetime
    job_id: str | None
    skipped_reason: str | None = None


@dataclass(frozen=True)
class ScheduleState:
    name: str
    last_job_id: str | None
    firings: tuple[Firing, ...]
    version: int = 0


@dataclass(frozen=True)
class JobPage:
    jobs: list[Job]
    cursor: str | None


# A filtered listing reads on until `limit` jobs match, passing at most this many times `limit` jobs (its read
# budget); past it the page is short and its cursor goes on after the last job passed.
FILTERED_SCAN_PAGES = 10


class JobStore(Protocol):
    def create(self, job: Job) -> CreateOutcome:
        """One conditional write of a new job: new, replay of the same submission under the same id, or
        IdempotencyConflictError."""

    def record_key(self, job: Job, *, expires_at: datetime) -> KeyRecord:
        """Mark the job's idempotency key (scoped by its tenant) as this job's: one conditional write, the check
        and the mark in one. Returns the record that stands: this job's when the key was new (or this very
        write, met again by an SDK retry), else the one an earlier submission wrote. The record expires (TTL)
        at `expires_at`."""

    def key_record(self, tenant: str, idempotency_key: str) -> KeyRecord | None:
        """The record of a tenant's idempotency key, if any (one read)."""

    def get(self, job_id: str, *, tenant: str) -> Job | None:
        """The tenant's job; another tenant's job is no job."""

    def list_jobs(
        self,
        tenant: str,
        *,
        status: JobStatus | None,
        job_type: str | None,
        limit: int,
        cursor: str | None,
        tag: tuple[str, str] | None = None,
    ) -> JobPage:
        """The tenant's jobs, newest first: up to `limit` matching the filters (a status, a type, a tag's key and
        value), within FILTERED_SCAN_PAGES."""

    def claim(
        self, job_id: str, *, tenant: str, now: datetime, lease_until: datetime, sweep_at: datetime | None = None
    ) -> Job:
        """One conditional write takes the job for its next attempt (within the job's own
        `max_attempts`, fixed when it was accepted) and returns it (no read). With `sweep_at` the same
        write puts the job in the sweep index at that time.
        JobConflictError carries the job as it is when it cannot be claimed."""

    # The outcome writes are fenced by the attempt number of the job they are given.
    def record_success(
        self,
        job: Job,
        *,
        result: Any,
        now: datetime,
        expires_at: datetime,
        followup_at: datetime | None = None,
        next_job_id: str | None = None,
    ) -> None:
        """SUCCEEDED. With `followup_at` the job stays in the sweep index at that time until its follow-ups ran
        (logic/followups.py), and `next_job_id` (a chain's next job) is set unless the job has one already."""

    def clear_followups(self, job: Job) -> None:
        """A final job's follow-ups ran: it leaves the sweep index, fenced on the sweep time in `job`
        (JobConflictError when that no longer stands)."""

    # `detail` (what ended the attempt: type, message, traceback) goes to the attempt's record; `error` to the job.
    def record_retry(
        self, job: Job, *, error: str, now: datetime, next_attempt_at: datetime, detail: AttemptError | None = None
    ) -> None: ...

    def record_failure(
        self, job: Job, *, error: str, now: datetime, expires_at: datetime, detail: AttemptError | None = None
    ) -> None: ...

    def fail_expired_lease(self, job: Job, *, now: datetime, expires_at: datetime) -> None: ...

    def cancel(
        self,
        job_id: str,
        *,
        tenant: str,
        now: datetime,
        expires_at: datetime,
        operation: str | None = None,
        superseded_by: str | None = None,
    ) -> Job:
        """QUEUED, SCHEDULED or RETRYING -> CANCELLED: by its tenant; by the bulk operation `operation`, marked on
        the job by the same write; with `superseded_by`, by a later submit under its debounce key (reason
        "superseded")."""
        ...

    def expire(self, job_id: str, *, tenant: str, now: datetime, expires_at: datetime) -> Job:
        """A waiting job (QUEUED, SCHEDULED, RETRYING) past its `start_by` -> EXPIRED; JobConflictError (with the
        job) otherwise, JobNotFoundError when there is none."""
        ...

    def set_progress(self, job_id: str, *, tenant: str, attempt: int, progress: Progress, now: datetime) -> None: ...

    def mark_once(self, job_id: str, name: str, *, now: datetime, expires_at: datetime) -> bool:
        """True the first time (job_id, name) is marked, False ever after. One conditional write."""

    # -- scheduling, sweeping and redrive ---------------------------------------------------

    def enqueue_scheduled(self, job_id: str, *, tenant: str, now: datetime, sweep_at: datetime) -> Job:
        """SCHEDULED -> QUEUED; JobConflictError carries the job when it is no longer SCHEDULED."""

    def reset_for_redrive(self, job_id: str, *, tenant: str, now: datetime, sweep_at: datetime) -> Job:
        """FAILED -> QUEUED with a fresh attempt budget and the redrive counted."""

    def retry_by_hand(
        self,
        job_id: str,
        *,
        tenant: str,
        now: datetime,
        sweep_at: datetime,
        operation: str | None = None,
        scheduled: bool = False,
    ) -> Job:
        """FAILED, CANCELLED or EXPIRED -> QUEUED with a fresh attempt budget and the hand retry counted
        (`scheduled`: CANCELLED -> SCHEDULED, for a delayed job whose run_at is still ahead); another tenant's job
        is JobNotFoundError, any other state JobConflictError. `operation`: the bulk operation that retries it,
        marked on the job by the same write."""

    def discard(self, job_id: str, *, tenant: str, now: datetime) -> Job:
        """Mark a FAILED job's dead letter discarded (the job stays FAILED); another tenant's job is
        JobNotFoundError, any other state JobConflictError."""

    def requeue_expired_lease(self, job: Job, *, now: datetime, sweep_at: datetime) -> Job: ...

    def due_for_sweep(self, *, now: datetime, limit: int) -> list[Job]:
        """Up to `limit` jobs whose sweep time has passed, through the sparse sweep index (never a scan),
        shared out round-robin across tenants (`domain.job.fair_share`)."""

    def reschedule_sweep(self, job: Job, *, sweep_at: datetime, resent: bool) -> None:
        """Move the job's sweep time on, fenced on the sweep time in `job`; JobConflictError if
        another sweep got there first."""

    def get_schedule_state(self, name: str) -> ScheduleState | None: ...

    def swap_debounce(self, tenant: str, job_type: str, key: str, record: DebounceRecord) -> DebounceRecord | None:
        """One write: `record` becomes the debounce key's record; the record it replaced comes back (None: none)."""
        ...

    def debounce_record(self, tenant: str, job_type: str, key: str) -> DebounceRecord | None:
        """The debounce key's record (a consistent read), None when there is none."""
        ...

    def name_survivor(self, job_id: str, *, tenant: str, seen: str, survivor: str, now: datetime) -> None:
        """A superseded job that named `seen` names `survivor`; JobConflictError when it names another."""
        ...

    def record_firing(self, name: str, firing: Firing, *, keep: int) -> ScheduleState:
        """Add a firing to the schedule's history (newest first, at most `keep`, one per slot)."""


class ChildJobs(Protocol):
    """Jobs a running job submits (`ctx.submit`, logic/children.py)."""

    def submit_child(self, parent: Job, job_type: str, payload: dict[str, Any], *, key: str) -> Job:
        """The parent's child under `key`: made the first time (a submit of the parent's tenant, within its
        quotas), the same job every time after (its id derives from the parent's id and the key)."""


class JobQueue(Protocol):
    def send(self, queue: str, message: JobMessage, *, delay_s: int = 0) -> None: ...

    def send_batch(self, queue: str, messages: list[JobMessage]) -> list[JobMessage]:
        """Send up to any number of messages; returns the ones that could not be sent."""

    def change_visibility(self, queue: str, receipt_handle: str, timeout_s: int) -> None: ...

    def change_visibility_batch(self, queue: str, receipt_handles: Sequence[str], timeout_s: int) -> list[str]:
        """Set the visibility of several received messages at once (up to 10 a request); returns the receipt
        handles whose visibility could not be changed (every one of them when the queue is unavailable)."""

    def depth(self, queue: str) -> int:
        """How many messages wait on the queue, visible or delayed, not in flight (approximate: SQS's
        counts). QueueUnavailableError when it cannot be read."""

    def send_to_dlq(self, queue: str, message: JobMessage, *, reason: str) -> None: ...

    def remove_dead_letter(self, queue: str, job_id: str) -> JobMessage | None:
        """Delete the job's message from the queue's DLQ and return it; None when it is not found within the
        search's bound (a deep DLQ). QueueUnavailableError when the DLQ cannot be read."""


class Metrics(Protocol):
    def count(self, name: str, value: float = 1, *, queue: str, job_type: str) -> None: ...

    def milliseconds(self, name: str, value: float, *, queue: str, job_type: str) -> None: ...

    def flush(self) -> None: ...


class JobScheduler(Protocol):
    """One-time schedules (EventBridge Scheduler `at()`) that enqueue a delayed job when due."""

    def create_one_time(self, job: Job) -> None: ...

    def exists(self, job_id: str) -> bool: ...

    def delete_one_time(self, job_id: str) -> None:
        """Delete a job's one-time schedule; one already gone (fired, or never made) is no error."""
        ...


@dataclass(frozen=True)
class Ports:
    """What every use case is given to work with."""

    registry: Registry
    store: JobStore
    queue: JobQueue
    clock: Clock
    metrics: Metrics
    scheduler: JobScheduler | None = None
    # The tenants' quotas, asked before a job is written (None: no quota configured).
    quotas: QuotaGate | None = None
    # Batches (logic/batches.py); None where no batch store is configured.
    batches: BatchStore | None = None
