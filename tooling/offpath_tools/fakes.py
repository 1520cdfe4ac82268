"""In-memory fakes of the ports (offpath.domain.ports) and other test doubles.

The fakes decide exactly as the real adapters do: `InMemoryJobStore` applies the pure transitions of
`offpath.domain.job`, which check the same declaration (`TRANSITIONS`) that `DynamoDbJobStore` renders
into its condition expressions; tests/integration/test_store_contract.py runs the same checks against
both, and checks both against the declaration state by state and guard by guard.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import random
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from offpath.adapters.dynamodb_quotas import usage_shard
from offpath.domain import job as transitions
from offpath.domain.backoff import Backoff
from offpath.domain.context import JobContext
from offpath.domain.errors import (
    IdempotencyConflictError,
    InvalidRequestError,
    JobConflictError,
    JobNotFoundError,
    QueueUnavailableError,
    StoreUnavailableError,
    TransitionError,
)
from offpath.domain.job import AttemptError, Job, JobStatus, Progress
from offpath.domain.ports import (
    FILTERED_SCAN_PAGES,
    CreateOutcome,
    DebounceRecord,
    Firing,
    JobMessage,
    JobPage,
    KeyRecord,
    ScheduleState,
)
from offpath.domain.quotas import Usage
from offpath.domain.registry import REGISTRY, JobType, Registry

# -- the job store ------------------------------------------------------------------------------


class InMemoryJobStore:
    """A thread-safe JobStore. Every write is recorded in `writes` (by operation name), whether it
    changes anything or not, and `fail_next` makes the next call of an operation raise."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        # By (tenant, job id), as the table keys them: another tenant's job is not found.
        self._jobs: dict[tuple[str, str], Job] = {}
        self._keys: dict[tuple[str, str], KeyRecord] = {}
        self._once: set[tuple[str, str]] = set()
        self._debounce: dict[tuple[str, str, str], DebounceRecord] = {}
        self._schedules: dict[str, ScheduleState] = {}
        self._faults: dict[str, list[Exception]] = {}
        self.writes: list[str] = []
        self.reads: list[str] = []

    # -- test controls ----------------------------------------------------------------------

    def fail_next(self, operation: str, error: Exception) -> None:
        """The next call of `operation` (a method name) raises `error` and changes nothing."""
        with self._lock:
            self._faults.setdefault(operation, []).append(error)

    def drop_debounce_records(self) -> None:
        """Every debounce record is gone, as DynamoDB's time to live removes one after its window."""
        with self._lock:
            self._debounce.clear()

    def put(self, job: Job) -> Job:
        """Store a job as it is, bypassing every rule (to set up a test's starting state)."""
        with self._lock:
            self._jobs[job.tenant, job.job_id] = job
            return job

    def jobs(self) -> list[Job]:
        with self._lock:
            return list(self._jobs.values())

    def _enter(self, operation: str, *, write: bool) -> None:
        (self.writes if write else self.reads).append(operation)
        faults = self._faults.get(operation)
        if faults:
            raise faults.pop(0)

    # -- JobStore ---------------------------------------------------------------------------

    def create(self, job: Job) -> CreateOutcome:
        with self._lock:
            self._enter("create", write=True)
            existing = self._jobs.get((job.tenant, job.job_id))
            if existing is None:
                self._jobs[job.tenant, job.job_id] = job
                return CreateOutcome(job, replayed=False)
            if existing.submission_id == job.submission_id:
                # A retry of this very write, which had landed: the job is ours, and new.
                return CreateOutcome(existing, replayed=False)
            if not existing.same_submission(job):
                raise IdempotencyConflictError(existing)
            return CreateOutcome(existing, replayed=True)

    def record_key(self, job: Job, *, expires_at: datetime) -> KeyRecord:
        if job.idempotency_key is None:
            raise ValueError("a job without an idempotency key has no key record")
        with self._lock:
            self._enter("record_key", write=True)
            record = KeyRecord(job.job_id, job.created_at, job.fingerprint, job.submission_id)
            return self._keys.setdefault((job.tenant, job.idempotency_key), record)

    def key_record(self, tenant: str, idempotency_key: str) -> KeyRecord | None:
        with self._lock:
            self._enter("key_record", write=False)
            return self._keys.get((tenant, idempotency_key))

    def get(self, job_id: str, *, tenant: str) -> Job | None:
        with self._lock:
            self._enter("get", write=False)
            return self._jobs.get((tenant, job_id))

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
        """Like the store's listing, newest first: jobs are passed until `limit` match the filters, or
        FILTERED_SCAN_PAGES x `limit` were passed (a filtered page can then be short and still have a cursor)."""
        with self._lock:
            self._enter("list_jobs", write=False)
            indexed = sorted((j for j in self._jobs.values() if j.tenant == tenant), key=_sort_key, reverse=True)
            if cursor is not None:
                after = _decode_cursor(cursor, tenant)
                indexed = [j for j in indexed if _sort_key(j) < after]
            budget = limit if status is None and job_type is None and tag is None else limit * FILTERED_SCAN_PAGES
            jobs: list[Job] = []
            passed = 0
            for j in indexed[:budget]:
                passed += 1
                if (
                    (status is None or j.status is status)
                    and (job_type is None or j.type == job_type)
                    and (tag is None or j.tags.get(tag[0]) == tag[1])
                ):
                    jobs.append(j)
                    if len(jobs) == limit:
                        break
            more = len(indexed) > passed
            next_cursor = _encode_cursor(tenant, _sort_key(indexed[passed - 1])) if more and passed else None
            return JobPage(jobs, next_cursor)

    def claim(
        self, job_id: str, *, tenant: str, now: datetime, lease_until: datetime, sweep_at: datetime | None = None
    ) -> Job:
        with self._lock:
            self._enter("claim", write=True)
            current = self._jobs.get((tenant, job_id))
            if current is None:
                raise JobNotFoundError(job_id)
            try:
                claimed = transitions.claim(current, tenant=tenant, now=now, lease=lease_until - now, sweep_at=sweep_at)
            except TransitionError:
                raise JobConflictError(current, f"job is {current.status.value}") from None
            self._jobs[tenant, job_id] = claimed
            return claimed

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
        stored = json.loads(json.dumps(result, default=str))
        self._fenced(
            "record_success",
            job,
            lambda current: transitions.succeed(
                current,
                attempt=job.attempt,
                result=stored,
                now=now,
                retention=expires_at - now,
                followup_at=followup_at,
                next_job_id=next_job_id,
            ),
        )

    def clear_followups(self, job: Job) -> None:
        with self._lock:
            self._enter("clear_followups", write=True)
            if job.sweep_at is None:
                raise JobConflictError(job, "the job has no sweep time")
            current = self._jobs.get((job.tenant, job.job_id))
            if current is None:
                raise JobConflictError(None, "the job's follow-ups were cleared, or it runs again")
            try:
                self._jobs[job.tenant, job.job_id] = transitions.followed_up(current, seen=job.sweep_at)
            except TransitionError:
                raise JobConflictError(None, "the job's follow-ups were cleared, or it runs again") from None

    def record_retry(
        self, job: Job, *, error: str, now: datetime, next_attempt_at: datetime, detail: AttemptError | None = None
    ) -> None:
        self._fenced(
            "record_retry",
            job,
            lambda current: transitions.schedule_retry(
                current, attempt=job.attempt, error=error, now=now, delay=next_attempt_at - now, detail=detail
            ),
        )

    def record_failure(
        self, job: Job, *, error: str, now: datetime, expires_at: datetime, detail: AttemptError | None = None
    ) -> None:
        self._fenced(
            "record_failure",
            job,
            lambda current: transitions.fail(
                current, attempt=job.attempt, error=error, now=now, retention=expires_at - now, detail=detail
            ),
        )

    def fail_expired_lease(self, job: Job, *, now: datetime, expires_at: datetime) -> None:
        self._fenced(
            "fail_expired_lease",
            job,
            lambda current: transitions.fail_expired_lease(
                current, attempt=job.attempt, now=now, retention=expires_at - now
            ),
        )

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
        with self._lock:
            self._enter("cancel", write=True)
            current = self._jobs.get((tenant, job_id))
            if current is None:
                raise JobNotFoundError(job_id)
            try:
                cancelled = transitions.cancel(
                    current,
                    tenant=tenant,
                    now=now,
                    retention=expires_at - now,
                    operation=operation,
                    superseded_by=superseded_by,
                )
            except TransitionError:
                raise JobConflictError(current, f"a {current.status.value} job cannot be cancelled") from None
            self._jobs[tenant, job_id] = cancelled
            return cancelled

    def set_progress(self, job_id: str, *, tenant: str, attempt: int, progress: Progress, now: datetime) -> None:
        with self._lock:
            self._enter("set_progress", write=True)
            current = self._jobs.get((tenant, job_id))
            if current is None:
                raise JobConflictError(None, f"attempt {attempt} no longer holds the job")
            try:
                self._jobs[tenant, job_id] = transitions.record_progress(
                    current, attempt=attempt, progress=progress, now=now
                )
            except TransitionError:
                raise JobConflictError(None, f"attempt {attempt} no longer holds the job") from None

    def mark_once(self, job_id: str, name: str, *, now: datetime, expires_at: datetime) -> bool:
        with self._lock:
            self._enter("mark_once", write=True)
            if (job_id, name) in self._once:
                return False
            self._once.add((job_id, name))
            return True

    # -- scheduling, sweeping and redrive ---------------------------------------------------

    def enqueue_scheduled(self, job_id: str, *, tenant: str, now: datetime, sweep_at: datetime) -> Job:
        return self._owned(
            "enqueue_scheduled",
            job_id,
            tenant,
            lambda current: transitions.enqueue_scheduled(current, tenant=tenant, now=now, sweep_at=sweep_at),
        )

    def reset_for_redrive(self, job_id: str, *, tenant: str, now: datetime, sweep_at: datetime) -> Job:
        return self._owned(
            "reset_for_redrive",
            job_id,
            tenant,
            lambda current: transitions.redrive(current, tenant=tenant, now=now, sweep_at=sweep_at),
        )

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
        return self._owned(
            "retry_by_hand",
            job_id,
            tenant,
            lambda current: transitions.retry_by_hand(
                current, tenant=tenant, now=now, sweep_at=sweep_at, operation=operation, scheduled=scheduled
            ),
        )

    def expire(self, job_id: str, *, tenant: str, now: datetime, expires_at: datetime) -> Job:
        with self._lock:
            self._enter("expire", write=True)
            current = self._jobs.get((tenant, job_id))
            if current is None:
                raise JobNotFoundError(job_id)
            try:
                expired = transitions.expire(current, tenant=tenant, now=now, retention=expires_at - now)
            except TransitionError:
                raise JobConflictError(current, f"a {current.status.value} job does not expire now") from None
            self._jobs[tenant, job_id] = expired
            return expired

    def swap_debounce(self, tenant: str, job_type: str, key: str, record: DebounceRecord) -> DebounceRecord | None:
        with self._lock:
            self._enter("swap_debounce", write=True)
            previous = self._debounce.get((tenant, job_type, key))
            self._debounce[tenant, job_type, key] = record
            return previous

    def name_survivor(self, job_id: str, *, tenant: str, seen: str, survivor: str, now: datetime) -> None:
        self._owned(
            "name_survivor",
            job_id,
            tenant,
            lambda current: transitions.name_survivor(current, tenant=tenant, seen=seen, survivor=survivor, now=now),
        )

    def debounce_record(self, tenant: str, job_type: str, key: str) -> DebounceRecord | None:
        with self._lock:
            self._enter("debounce_record", write=False)
            return self._debounce.get((tenant, job_type, key))

    def discard(self, job_id: str, *, tenant: str, now: datetime) -> Job:
        return self._owned(
            "discard", job_id, tenant, lambda current: transitions.discard(current, tenant=tenant, now=now)
        )

    def requeue_expired_lease(self, job: Job, *, now: datetime, sweep_at: datetime) -> Job:
        return self._fenced(
            "requeue_expired_lease",
            job,
            lambda current: transitions.requeue_expired_lease(current, attempt=job.attempt, now=now, sweep_at=sweep_at),
            refusal="the job's lease is no longer expired at that attempt",
        )

    def due_for_sweep(self, *, now: datetime, limit: int) -> list[Job]:
        with self._lock:
            self._enter("due_for_sweep", write=False)
            due = [j for j in self._jobs.values() if j.sweep_at is not None and j.sweep_at <= now]
            return transitions.fair_share(due, limit)

    def reschedule_sweep(self, job: Job, *, sweep_at: datetime, resent: bool) -> None:
        with self._lock:
            self._enter("reschedule_sweep", write=True)
            if job.sweep_at is None:
                raise JobConflictError(job, "the job has no sweep time")
            current = self._jobs.get((job.tenant, job.job_id))
            if current is None:
                raise JobConflictError(None, "another sweep handled the job")
            try:
                self._jobs[job.tenant, job.job_id] = transitions.reschedule_sweep(
                    current, seen=job.sweep_at, sweep_at=sweep_at, resent=resent
                )
            except TransitionError:
                raise JobConflictError(None, "another sweep handled the job") from None

    def get_schedule_state(self, name: str) -> ScheduleState | None:
        with self._lock:
            self._enter("get_schedule_state", write=False)
            return self._schedules.get(name)

    def record_firing(self, name: str, firing: Firing, *, keep: int) -> ScheduleState:
        with self._lock:
            self._enter("record_firing", write=True)
            current = self._schedules.get(name) or ScheduleState(name, None, (), version=0)
            others = tuple(f for f in current.firings if f.slot != firing.slot)
            updated = ScheduleState(
                name, firing.job_id or current.last_job_id, (firing, *others)[:keep], version=current.version + 1
            )
            self._schedules[name] = updated
            return updated

    # -- plumbing ---------------------------------------------------------------------------

    def _owned(self, operation: str, job_id: str, tenant: str, change: Callable[[Job], Job]) -> Job:
        """A change by id on the caller's own job: another tenant's job is no job."""
        with self._lock:
            self._enter(operation, write=True)
            current = self._jobs.get((tenant, job_id))
            if current is None:
                raise JobNotFoundError(job_id)
            try:
                changed = change(current)
            except TransitionError:
                raise JobConflictError(current, f"job is {current.status.value}") from None
            self._jobs[tenant, job_id] = changed
            return changed

    def _fenced(self, operation: str, job: Job, change: Callable[[Job], Job], *, refusal: str = "") -> Job:
        """A change fenced on the attempt `job` holds."""
        refusal = refusal or f"attempt {job.attempt} no longer holds the job"
        with self._lock:
            self._enter(operation, write=True)
            current = self._jobs.get((job.tenant, job.job_id))
            if current is None:
                raise JobConflictError(None, refusal)
            try:
                changed = change(current)
            except TransitionError:
                raise JobConflictError(current, refusal) from None
            self._jobs[job.tenant, job.job_id] = changed
            return changed


def _sort_key(job: Job) -> tuple[datetime, str]:
    # The table sorts a tenant's jobs by id, which starts with the creation time in milliseconds.
    return (job.created_at.replace(microsecond=job.created_at.microsecond // 1000 * 1000), job.job_id)


def _encode_cursor(tenant: str, key: tuple[datetime, str]) -> str:
    text = json.dumps({"tenant": tenant, "created_at": key[0].isoformat(), "job_id": key[1]})
    return base64.urlsafe_b64encode(text.encode()).decode()


def _decode_cursor(cursor: str, tenant: str) -> tuple[datetime, str]:
    try:
        data = json.loads(base64.urlsafe_b64decode(cursor.encode()))
        if data["tenant"] != tenant:
            raise ValueError("cursor belongs to another listing")
        return (datetime.fromisoformat(data["created_at"]), str(data["job_id"]))
    except (ValueError, TypeError, KeyError):
        raise InvalidRequestError("cursor", "cursor is not one this listing returned", code="invalid_cursor") from None


# -- the job queue ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Sent:
    queue: str
    message: JobMessage
    delay_s: int = 0


@dataclass(frozen=True)
class VisibilityChange:
    queue: str
    receipt_handle: str
    timeout_s: int


@dataclass(frozen=True)
class DeadLetter:
    queue: str
    message: JobMessage
    reason: str


class InMemoryJobQueue:
    """A JobQueue that records what it was asked to do. `fail_sends()` makes sends fail."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.sent: list[Sent] = []
        self.batches: list[tuple[str, list[JobMessage]]] = []
        self.visibility_changes: list[VisibilityChange] = []
        self.dead_letters: list[DeadLetter] = []
        self._failing_sends: int | None = 0
        self.visibility_batches: list[tuple[str, list[str], int]] = []
        self._failing_visibility_batches = 0
        self.depths: dict[str, int] = {}
        self.failing_depths: set[str] = set()
        self.depth_reads: list[str] = []
        self.failing_dead_letter_removals = False

    def fail_sends(self, times: int | None = None) -> None:
        """The next `times` sends fail (None: every send from now on); DLQ sends are not affected."""
        self._failing_sends = times

    def _send_fails(self) -> bool:
        if self._failing_sends is None:
            return True
        if self._failing_sends > 0:
            self._failing_sends -= 1
            return True
        return False

    def send(self, queue: str, message: JobMessage, *, delay_s: int = 0) -> None:
        with self._lock:
            if self._send_fails():
                raise QueueUnavailableError("SQS unavailable (injected)")
            self.sent.append(Sent(queue, message, delay_s))

    def send_batch(self, queue: str, messages: list[JobMessage]) -> list[JobMessage]:
        with self._lock:
            if self._send_fails():
                return list(messages)
            self.batches.append((queue, list(messages)))
            self.sent.extend(Sent(queue, m) for m in messages)
            return []

    def change_visibility(self, queue: str, receipt_handle: str, timeout_s: int) -> None:
        with self._lock:
            self.visibility_changes.append(VisibilityChange(queue, receipt_handle, timeout_s))

    def change_visibility_batch(self, queue: str, receipt_handles: Sequence[str], timeout_s: int) -> list[str]:
        """Recorded in `visibility_batches`, one entry a request of up to 10 (not in `visibility_changes`,
        which holds the changes of one message each); `fail_visibility_batches()` makes them fail."""
        with self._lock:
            handles = list(receipt_handles)
            if self._failing_visibility_batches:
                self._failing_visibility_batches -= 1
                return handles
            for start in range(0, len(handles), 10):
                self.visibility_batches.append((queue, handles[start : start + 10], timeout_s))
            return []

    def fail_visibility_batches(self, times: int = 1) -> None:
        """The next `times` calls of change_visibility_batch change nothing (every handle is returned)."""
        self._failing_visibility_batches = times

    def depth(self, queue: str) -> int:
        """`depths[queue]` (set by a test: the messages waiting on the queue), 0 by default; a queue named in
        `failing_depths` is unavailable."""
        with self._lock:
            self.depth_reads.append(queue)
            if queue in self.failing_depths:
                raise QueueUnavailableError("SQS unavailable (injected)")
            return self.depths.get(queue, 0)

    def send_to_dlq(self, queue: str, message: JobMessage, *, reason: str) -> None:
        with self._lock:
            self.dead_letters.append(DeadLetter(queue, message, reason))

    def remove_dead_letter(self, queue: str, job_id: str) -> JobMessage | None:
        """Removes every dead letter of the job on `queue`'s DLQ; `failing_dead_letter_removals` makes it fail."""
        with self._lock:
            if self.failing_dead_letter_removals:
                raise QueueUnavailableError("SQS unavailable (injected)")
            found = [d for d in self.dead_letters if d.queue == queue and d.message.job_id == job_id]
            self.dead_letters = [d for d in self.dead_letters if d not in found]
            return found[0].message if found else None


class InMemoryScheduler:
    """A JobScheduler: the one-time schedules by job id; `failing` makes every call fail as the service would."""

    def __init__(self) -> None:
        self.schedules: dict[str, Job] = {}
        self.failing = False

    def create_one_time(self, job: Job) -> None:
        if self.failing:
            raise QueueUnavailableError("EventBridge Scheduler unavailable (injected)")
        self.schedules[job.job_id] = job

    def exists(self, job_id: str) -> bool:
        return job_id in self.schedules

    def delete_one_time(self, job_id: str) -> None:
        if self.failing:
            raise QueueUnavailableError("EventBridge Scheduler unavailable (injected)")
        self.schedules.pop(job_id, None)


# -- metrics ------------------------------------------------------------------------------------


class RecordingMetrics:
    """Metrics summed by name (all dimensions together), and by name, queue and job type (`dimensioned`, what a
    dashboard's per-queue and per-type graphs show); thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.counts: dict[str, float] = {}
        self.dimensioned: dict[tuple[str, str, str], float] = {}
        self.timings: dict[str, list[float]] = {}
        self.flushes = 0

    def count(self, name: str, value: float = 1, *, queue: str, job_type: str) -> None:
        with self._lock:
            self.counts[name] = self.counts.get(name, 0) + value
            key = (name, queue, job_type)
            self.dimensioned[key] = self.dimensioned.get(key, 0) + value

    def milliseconds(self, name: str, value: float, *, queue: str, job_type: str) -> None:
        with self._lock:
            self.timings.setdefault(name, []).append(value)

    def flush(self) -> None:
        with self._lock:
            self.flushes += 1


# -- randomness ---------------------------------------------------------------------------------


class NoJitter(random.Random):
    """Backoff delays of zero, so retries are visible at once and tests need not wait."""

    def uniform(self, a: float, b: float) -> float:
        return 0.0


class CeilingJitter(random.Random):
    """Full jitter's largest draw: every backoff delay is its ceiling."""

    def uniform(self, a: float, b: float) -> float:
        return b


# -- job types for tests ------------------------------------------------------------------------


class AnyPayload(BaseModel):
    model_config = ConfigDict(extra="allow")


class StrictPayload(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(max_length=20)
    count: int = Field(default=0, ge=0)


@dataclass
class ScriptedJob:
    """A job function whose behaviour a test sets (`action`); it records every call."""

    action: Callable[[BaseModel, JobContext], Any] = field(default=lambda payload, ctx: {"done": True})
    calls: list[tuple[str, int]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __call__(self, payload: BaseModel, ctx: JobContext) -> Any:
        with self._lock:
            self.calls.append((ctx.job_id, ctx.attempt))
        return self.action(payload, ctx)

    def runs_of(self, job_id: str) -> int:
        with self._lock:
            return sum(1 for called_id, _ in self.calls if called_id == job_id)


SCRIPTED_TYPE = "test.scripted"
STRICT_TYPE = "test.strict"
SCRIPTED_MAX_ATTEMPTS = 3
SCRIPTED_TIMEOUT_S = 10
SCRIPTED_BACKOFF = Backoff(base_s=2.0, cap_s=5.0)


def registry_with(scripted: ScriptedJob, base: Registry | None = None) -> Registry:
    """A copy of `base` (by default the project's registry with its job types loaded) plus
    `test.scripted` (runs `scripted`) and `test.strict` (a payload model that forbids extra keys),
    both on the default queue. The project's registry itself is left unchanged."""
    if base is None:
        from offpath.jobs import load_job_types

        base = load_job_types(demo=True)
    registry = Registry(queues=dict(base.queues), job_types=dict(base.job_types), schedules=dict(base.schedules))
    registry.add_job_type(
        JobType(
            name=SCRIPTED_TYPE,
            function=scripted,
            payload_model=AnyPayload,
            queue="default",
            max_attempts=SCRIPTED_MAX_ATTEMPTS,
            timeout_s=SCRIPTED_TIMEOUT_S,
            backoff=SCRIPTED_BACKOFF,
        )
    )
    registry.add_job_type(
        JobType(
            name=STRICT_TYPE,
            function=lambda payload, ctx: None,
            payload_model=StrictPayload,
            queue="default",
            max_attempts=1,
            timeout_s=SCRIPTED_TIMEOUT_S,
            backoff=Backoff(),
        )
    )
    return registry


def queue_classes_only() -> Registry:
    """A registry with the project's queue classes and no job types."""
    return Registry(queues=dict(REGISTRY.queues))


class InMemoryQuotaCounters:
    """The quota counters (offpath.domain.quotas.QuotaCounters) in memory: the same token bucket (GCRA, one
    number per tenant) and counts as adapters/dynamodb_quotas.py keeps in the table, and the calls made."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.tat: dict[str, int] = {}
        self.counts: dict[str, Usage] = {}
        self.shards: dict[str, dict[int, Usage]] = {}
        self.reads = 0
        self.failing_adds = 0

    def take(self, tenant: str, *, per_s: float, bucket: int, now_us: int) -> float:
        interval = max(1, round(1_000_000 / per_s))
        tolerance = (bucket - 1) * interval
        with self._lock:
            tat = max(self.tat.get(tenant, now_us), now_us)
            if tat - now_us > tolerance:
                return (tat - tolerance - now_us) / 1_000_000
            self.tat[tenant] = tat + interval
            return 0.0

    def usage(self, tenant: str) -> Usage:
        with self._lock:
            self.reads += 1
            counted = self.counts.get(tenant, Usage())
            return Usage(max(0, counted.open_jobs), max(0, counted.delayed_jobs))

    def add(self, tenant: str, change: Usage, *, job_id: str) -> None:
        with self._lock:
            if self.failing_adds:
                self.failing_adds -= 1
                raise StoreUnavailableError("injected: the count is not written")
            shards = self.shards.setdefault(tenant, {})
            shard = shards.get(usage_shard(job_id), Usage())
            # As the table's counts: a decrement of a shard's count at 0 changes nothing.
            shard = Usage(
                shard.open_jobs + change.open_jobs if shard.open_jobs + change.open_jobs >= 0 else shard.open_jobs,
                shard.delayed_jobs + change.delayed_jobs
                if shard.delayed_jobs + change.delayed_jobs >= 0
                else shard.delayed_jobs,
            )
            shards[usage_shard(job_id)] = shard
            total = Usage()
            for counted in shards.values():
                total = total.plus(counted)
            self.counts[tenant] = total


class InMemoryLimits:
    """A LimitStore (offpath.domain.limits) deciding as adapters/dynamodb_limits.py does: slots held per scope by
    (attempt, until), a holder whose time is up taken over, a release fenced by its attempt; a GCRA token bucket per
    scope. tests/integration/test_limits_store.py runs the same checks against both."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.slots: dict[str, dict[str, tuple[int, int]]] = {}
        self.tats: dict[str, int] = {}
        self.acquires = 0
        self.releases = 0

    def held(self, scope: str) -> dict[str, int]:
        """The scope's holders: job id -> attempt."""
        return {job_id: attempt for job_id, (attempt, _) in self.slots.get(scope, {}).items()}

    def holders(self, scope: str) -> dict[str, tuple[int, int]]:
        with self._lock:
            return dict(self.slots.get(scope, {}))

    def next_start_s(self, scope: str, *, per_s: float, bucket: int, now_us: int) -> float:
        with self._lock:
            interval = max(1, round(1_000_000 / per_s))
            tolerance = (bucket - 1) * interval
            return max(0, self.tats.get(scope, 0) - tolerance - now_us) / 1_000_000

    def acquire(self, scope: str, *, job_id: str, attempt: int, until_us: int, now_us: int, limit: int) -> float:
        with self._lock:
            self.acquires += 1
            holders = self.slots.setdefault(scope, {})
            own = holders.get(job_id)
            if own is not None:
                if own == (attempt, until_us):
                    return 0.0
                if own[1] > now_us:
                    return (own[1] - now_us) / 1_000_000
                holders[job_id] = (attempt, until_us)
                return 0.0
            if len(holders) < limit:
                holders[job_id] = (attempt, until_us)
                return 0.0
            dead = sorted((until, held) for held, (_, until) in holders.items() if until <= now_us)
            if dead:
                del holders[dead[0][1]]
                holders[job_id] = (attempt, until_us)
                return 0.0
            return max(1, min(until for _, until in holders.values()) - now_us) / 1_000_000

    def release(self, scope: str, *, job_id: str, attempt: int) -> None:
        with self._lock:
            self.releases += 1
            holders = self.slots.get(scope, {})
            if job_id in holders and holders[job_id][0] == attempt:
                del holders[job_id]

    def take(self, scope: str, *, per_s: float, bucket: int, now_us: int) -> float:
        with self._lock:
            interval = max(1, round(1_000_000 / per_s))
            tolerance = (bucket - 1) * interval
            tat = max(self.tats.get(scope, 0), now_us)
            if tat - now_us > tolerance:
                return (tat - tolerance - now_us) / 1_000_000
            self.tats[scope] = tat + interval
            return 0.0


# -- bulk operations ----------------------------------------------------------------------------


class InMemoryBulkStore:
    """The bulk operations' store (offpath.domain.bulk.BulkStore) in memory, fenced on the step as
    adapters/dynamodb_bulk.py fences it; `saves` counts the checkpoints and ends written."""

    def __init__(self) -> None:
        from offpath.domain.bulk import BulkOperation

        self._lock = threading.Lock()
        self.operations: dict[tuple[str, str], BulkOperation] = {}
        self.open: set[tuple[str, str]] = set()
        self.saves = 0

    def create(self, operation: Any) -> None:
        with self._lock:
            self.open.add((operation.owner, operation.operation_id))
            self.operations[operation.owner, operation.operation_id] = operation

    def get(self, owner: str, operation_id: str) -> Any:
        with self._lock:
            return self.operations.get((owner, operation_id))

    def take(self, operation: Any, *, now: datetime, lease_until: datetime) -> Any:
        from offpath.domain.bulk import BulkOperationConflictError

        with self._lock:
            current = self.operations.get((operation.owner, operation.operation_id))
            if (
                current is None
                or current.is_over
                or current.step != operation.step
                or (current.lease_until is not None and current.lease_until > now)
            ):
                raise BulkOperationConflictError()
            taken = current.replace(lease_until=lease_until, step=current.step + 1)
            self.operations[operation.owner, operation.operation_id] = taken
            return taken

    def save(self, operation: Any, *, seen_step: int) -> Any:
        from offpath.domain.bulk import BulkOperationConflictError

        with self._lock:
            current = self.operations.get((operation.owner, operation.operation_id))
            if current is None or current.step != seen_step:
                raise BulkOperationConflictError()
            written = operation.replace(step=seen_step + 1)
            self.operations[operation.owner, operation.operation_id] = written
            self.saves += 1
            if written.is_over:
                self.open.discard((written.owner, written.operation_id))
            return written

    def open_operations(self) -> list[tuple[str, str]]:
        with self._lock:
            return sorted(self.open)

    def forget(self, owner: str, operation_id: str) -> None:
        with self._lock:
            self.open.discard((owner, operation_id))


# -- batches ------------------------------------------------------------------------------------


class InMemoryBatchStore:
    """The batch store (offpath.domain.batch.BatchStore) in memory, over `jobs`' members. As
    adapters/dynamodb_batches.py: a page is reserved only on an open batch (a page reserved before is returned as it
    is), a seal waits for no open page, and a member's count marks the job (`batch_counted`) and moves the batch's
    count together, once."""

    def __init__(self, jobs: InMemoryJobStore) -> None:
        from offpath.domain.batch import Batch, BatchPage

        self.jobs = jobs
        self._lock = threading.RLock()
        self.batches: dict[tuple[str, str], Batch] = {}
        self.keys: dict[tuple[str, str], Batch] = {}
        self.pages: dict[tuple[str, str], dict[str, BatchPage]] = {}

    def create(self, batch: Any) -> Any:
        with self._lock:
            return self.batches.setdefault((batch.tenant, batch.batch_id), batch)

    def record_key(self, batch: Any) -> Any:
        if batch.idempotency_key is None:
            raise ValueError("a batch without a key has no key record")
        with self._lock:
            first = self.keys.setdefault((batch.tenant, batch.idempotency_key), batch)
        return dataclasses.replace(
            batch,
            batch_id=first.batch_id,
            created_at=first.created_at,
            updated_at=first.created_at,
            fingerprint=first.fingerprint,
        )

    def get(self, batch_id: str, *, tenant: str) -> Any:
        with self._lock:
            return self.batches.get((tenant, batch_id))

    def list_batches(self, tenant: str, *, limit: int, cursor: str | None) -> Any:
        from offpath.domain.batch import BatchListing

        with self._lock:
            ids = sorted((i for t, i in self.batches if t == tenant), reverse=True)
        if cursor is not None:
            ids = [i for i in ids if i < cursor]
        shown = ids[:limit]
        following = shown[-1] if len(ids) > limit else None
        return BatchListing([self.batches[tenant, i] for i in shown], following)

    def _changed(self, batch: Any, **changes: Any) -> Any:
        from offpath.domain.errors import BatchConflictError

        key = (batch.tenant, batch.batch_id)
        current = self.batches.get(key)
        if current is None:
            raise BatchConflictError("no such batch")
        changed = dataclasses.replace(current, **changes)
        self.batches[key] = changed
        return changed

    def seal(self, batch: Any, *, now: datetime) -> Any:
        from offpath.domain.errors import BatchConflictError

        with self._lock:
            current = self.batches.get((batch.tenant, batch.batch_id))
            if current is None:
                raise BatchConflictError("no such batch")
            if current.open_pages != 0:
                raise BatchConflictError("a page of jobs is still being added to the batch")
            return self._changed(current, sealed_at=current.sealed_at or now, updated_at=now)

    def mark_cancelled(self, batch: Any, *, now: datetime) -> Any:
        with self._lock:
            current = self.batches[batch.tenant, batch.batch_id]
            return self._changed(current, cancelled_at=current.cancelled_at or now, updated_at=now)

    def record_callback(self, batch: Any, name: str, job_id: str, *, now: datetime) -> Any:
        with self._lock:
            current = self.batches[batch.tenant, batch.batch_id]
            # The first job recorded under a name stays (the adapter's if_not_exists).
            return self._changed(current, callback_jobs={name: job_id, **current.callback_jobs}, updated_at=now)

    def reserve_page(self, batch: Any, page_id: str, job_ids: Sequence[str], *, now: datetime) -> Any:
        from offpath.domain.batch import BatchPage
        from offpath.domain.errors import BatchConflictError

        with self._lock:
            pages = self.pages.setdefault((batch.tenant, batch.batch_id), {})
            if page_id in pages:
                return pages[page_id]
            current = self.batches.get((batch.tenant, batch.batch_id))
            if current is None or current.sealed or current.cancelled_at is not None:
                raise BatchConflictError("the batch is sealed or cancelled: no more jobs can be added")
            page = pages[page_id] = BatchPage(page_id, tuple(job_ids), written=False)
            self._changed(current, open_pages=current.open_pages + 1, updated_at=now)
            return page

    def write_page(self, batch: Any, page: Any, *, now: datetime) -> None:
        with self._lock:
            pages = self.pages[batch.tenant, batch.batch_id]
            if page.written or pages[page.page_id].written:
                return
            pages[page.page_id] = dataclasses.replace(pages[page.page_id], written=True)
            current = self.batches[batch.tenant, batch.batch_id]
            self._changed(
                current, total=current.total + len(page.job_ids), open_pages=current.open_pages - 1, updated_at=now
            )

    def member_ids(self, batch: Any, *, limit: int, cursor: str | None) -> Any:
        from offpath.domain.batch import MemberIds

        with self._lock:
            pages = self.pages.get((batch.tenant, batch.batch_id), {})
            ids = [job_id for _, page in sorted(pages.items()) for job_id in page.job_ids]
        start = int(cursor) if cursor is not None else 0
        end = start + limit
        return MemberIds(ids[start:end], str(end) if end < len(ids) else None)

    def count_member(self, job: Job, *, now: datetime) -> bool:
        if job.batch_id is None or not job.status.is_final:
            return False
        with self._lock:
            current = self.jobs.get(job.job_id, tenant=job.tenant)
            batch = self.batches.get((job.tenant, job.batch_id))
            if current is None or batch is None or current.status is not job.status or current.batch_counted:
                return False
            self.jobs.put(current.replace(batch_counted=job.status))
            counts = {**batch.counts, job.status.value: batch.counts.get(job.status.value, 0) + 1}
            self._changed(batch, counts=counts, updated_at=now)
            return True

    def get_jobs(self, tenant: str, job_ids: Sequence[str]) -> list[Job]:
        found = (self.jobs.get(job_id, tenant=tenant) for job_id in dict.fromkeys(job_ids))
        return [job for job in found if job is not None]
