"""The job record, its states, and the one declaration of how a job may change.

`TRANSITIONS` declares every conditional change of a job: the states it may start from and the
guards that must hold (the caller names the job's tenant, holds its current attempt, the lease has
expired, attempts are left, the sweep time is the one the caller saw). Everything else is derived
from it: the pure functions below check a transition's declaration and return the changed job (the
in-memory store of the tests applies them), and the DynamoDB store renders the same declaration into
its condition expressions (`offpath.adapters.dynamodb_store.condition_of`).
tests/integration/test_store_contract.py checks both stores against the declaration, state by state
and guard by guard.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from types import MappingProxyType
from typing import Any, TypeVar

from offpath.domain.errors import TransitionError

_T = TypeVar("_T")


class JobStatus(enum.StrEnum):
    QUEUED = "QUEUED"
    SCHEDULED = "SCHEDULED"
    RUNNING = "RUNNING"
    RETRYING = "RETRYING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    # Not started by its `start_by` (the submit's `expires_at`): ended without running.
    EXPIRED = "EXPIRED"

    @property
    def is_final(self) -> bool:
        return self in FINAL_STATES


# How long a finished job with follow-ups stays in the sweep index: the sweeper runs its follow-ups when the worker
# that finished it did not clear it by then (it died between the final write and the follow-ups).
FOLLOWUP_GRACE = timedelta(seconds=30)
# A cancelled job's `cancel_reason` when a later submit under its debounce key took its place (logic/debounce.py).
SUPERSEDED = "superseded"

# The outcome an attempt's record carries when its worker vanished and its lease ran out.
LEASE_EXPIRED_OUTCOME = "LEASE_EXPIRED"

FINAL_STATES = frozenset({JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELLED, JobStatus.EXPIRED})
UNFINISHED_STATES = frozenset(JobStatus) - FINAL_STATES


@dataclass(frozen=True)
class Progress:
    fraction: float
    message: str = ""


@dataclass(frozen=True)
class AttemptRecord:
    """How one attempt ended, kept on the job (the last ATTEMPTS_KEPT of them) by the write that
    records the outcome: no write of its own."""

    attempt: int
    started_at: datetime | None
    finished_at: datetime
    outcome: str  # SUCCEEDED, RETRYING, FAILED or LEASE_EXPIRED
    error: str | None = None  # the error's message
    error_type: str | None = None  # the exception's class name; None when no exception ended the attempt
    traceback: str | None = None  # the job code's frames, bounded (logic/failure.py)


@dataclass(frozen=True)
class AttemptError:
    """What ended an attempt, as the worker saw it: the exception's class name, its message (the job
    author's own text) and the job code's frames."""

    type: str | None
    message: str
    traceback: str | None = None


# The attempt history is bounded so the job item (and every write unit it costs) stays small.
ATTEMPTS_KEPT = 10
ATTEMPT_ERROR_CHARS = 200


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
    # How often the tenant retried the job by hand (POST /jobs/{id}/retry).
    retries: int = 0
    # When the attempt now holding the job (or the last one) started.
    attempt_started_at: datetime | None = None
    attempt_history: tuple[AttemptRecord, ...] = ()
    # The caller's `key: value` tags (domain/tags.py), sorted by key; empty for most jobs.
    tags: Mapping[str, str] = dataclasses.field(default_factory=dict)
    # The W3C trace the job belongs to (32 hex): the submitter's, or one of its own. None for a job from before.
    trace_id: str | None = None
    # When an operator discarded the FAILED job's dead letter (DELETE /queues/{name}/dead-letters/{job_id}): a
    # redriven copy of its message does not run it. A hand retry clears it.
    discarded_at: datetime | None = None
    # The batch the job is a member of (logic/batches.py); None for a job submitted on its own.
    batch_id: str | None = None
    # The final state the batch's counts hold for this member (written with the count, in one transaction);
    # None while it is not counted (unfinished, or retried by hand since).
    batch_counted: JobStatus | None = None
    # The batch whose callback (on_complete / on_success) this job is: its `ctx.batch` reads that batch.
    callback_of: str | None = None

    @property
    def has_followups(self) -> bool:
        """Whether the job's final state has follow-ups (logic/followups.py): then its final write keeps it in the
        sweep index for FOLLOWUP_GRACE, and a plain job costs nothing extra."""
        return self.batch_id is not None

    def followup_sweep_at(self, now: datetime) -> datetime | None:
        """The sweep time a final write gives the job: now + FOLLOWUP_GRACE with follow-ups, else none."""
        return now + FOLLOWUP_GRACE if self.has_followups else None

    # A chain (docs/workflows.md): the job to submit when this one succeeds, `{"type", "payload", "then"?}` as
    # validated at submit (domain/chain.py); None for a job that ends no chain.
    then: Mapping[str, Any] | None = None
    # The job whose success (a chain) or whose `ctx.submit` made this one; None for a job a caller submitted.
    parent_job_id: str | None = None
    # The chain's next job: its id is fixed by this job's SUCCEED write (once ever), the job made right after.
    next_job_id: str | None = None
    # The bulk operation (POST /jobs/bulk) whose retry or cancel last moved the job, written by that same write:
    # a resumed operation knows the jobs it already moved (logic/bulk.py). None for every other job.
    bulk_operation_id: str | None = None
    # The submit's `expires_at`: a job not started by then ends EXPIRED without running (logic/expiry.py). Not
    # `expires_at`, which is the item's TTL once the job is final.
    start_by: datetime | None = None
    # Why a CANCELLED job was cancelled, when not by its tenant's DELETE: "superseded" (a later submit under its
    # debounce key, logic/debounce.py), with the job that took its place in `superseded_by`.
    cancel_reason: str | None = None
    superseded_by: str | None = None
    # The submit's debounce: its key (per tenant and type) and window in seconds.
    debounce_key: str | None = None
    debounce_s: int | None = None
    retried_at: datetime | None = None  # the last hand retry (POST /jobs/{id}/retry); absent before it was kept

    def replace(self, **changes: Any) -> Job:
        return dataclasses.replace(self, **changes)

    def lease_expired(self, now: datetime) -> bool:
        return self.status is JobStatus.RUNNING and Guard.LEASE_EXPIRED.holds(self, Facts(now=now))

    def history_with(
        self, outcome: str, now: datetime, error: str | None = None, detail: AttemptError | None = None
    ) -> tuple[AttemptRecord, ...]:
        """The attempt history with this attempt's end added (the newest ATTEMPTS_KEPT). With `detail` the
        record keeps its type, message and traceback rather than `error`. Only the newest record keeps a
        traceback (the item's size: docs/decisions.md, "Tracebacks")."""
        if detail is not None:
            error = detail.message
        record = AttemptRecord(
            attempt=self.attempt,
            started_at=self.attempt_started_at,
            finished_at=now,
            outcome=outcome,
            error=error[:ATTEMPT_ERROR_CHARS] if error is not None else None,
            error_type=detail.type if detail is not None else None,
            traceback=detail.traceback if detail is not None else None,
        )
        earlier = (dataclasses.replace(r, traceback=None) if r.traceback else r for r in self.attempt_history)
        return (*earlier, record)[-ATTEMPTS_KEPT:]

    def same_submission(self, other: Job) -> bool:
        """Whether two submissions under one idempotency key asked for the same job: the tenant, the
        type and payload (their hash), the queue and the run_at. Anything else reuses the key."""
        return self.tenant == other.tenant and self.fingerprint == other.fingerprint

    @property
    def fingerprint(self) -> str:
        """What a replay under the job's idempotency key must match besides the tenant (the key's scope): the
        type and payload (their hash), the queue, the run_at and the tags (only when there are some: an untagged
        job's fingerprint is what it was before tags). Kept on the key's record (one text). A debounced job's run_at
        follows from its submit's time: its debounce (key and seconds) stands in for it; an expiry is added when
        there is one."""
        run_at = self.run_at.astimezone(UTC).isoformat() if self.run_at is not None else ""
        if self.debounce_key is not None:
            run_at = "debounce:" + json.dumps([self.debounce_key, self.debounce_s], separators=(",", ":"))
        tags = "|" + json.dumps(dict(sorted(self.tags.items())), separators=(",", ":")) if self.tags else ""
        # A chain's steps, hashed (only when there are some: a job without one keeps the fingerprint it had before).
        then = "|then:" + _digest(json.dumps(self.then, sort_keys=True, separators=(",", ":"))) if self.then else ""
        expiry = f"|expires:{self.start_by.astimezone(UTC).isoformat()}" if self.start_by is not None else ""
        return f"{self.payload_hash}|{self.queue}|{run_at}{tags}{then}{expiry}"


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def payload_json(payload: Any) -> str:
    """A payload as the store keeps it, and as its size is measured: compact JSON, UTF-8 (non-ASCII
    characters as themselves, not \\u escapes, which would take up to 3 times the bytes)."""
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False)


def fair_share(due: list[Job], limit: int) -> list[Job]:
    """Up to `limit` of `due` (oldest sweep time first), taken round-robin across tenants: one tenant's
    flood of due jobs cannot crowd another tenant's out of a sweep. Within a tenant, oldest first; the
    tenant whose oldest job is oldest goes first."""
    queues: dict[str, list[Job]] = {}
    for job in sorted(due, key=lambda j: (j.sweep_at or j.created_at, j.job_id)):
        queues.setdefault(job.tenant, []).append(job)
    chosen: list[Job] = []
    depth = 0
    while len(chosen) < limit and any(depth < len(jobs) for jobs in queues.values()):
        chosen.extend(jobs[depth] for jobs in queues.values() if depth < len(jobs))
        depth += 1
    return chosen[:limit]


# -- the declaration ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Facts:
    """What the caller of a transition brings for the guards to compare with the job."""

    now: datetime | None = None
    tenant: str | None = None  # the tenant the caller names
    attempt: int | None = None  # the attempt the caller holds
    seen_sweep_at: datetime | None = None  # the sweep time the caller saw
    seen_survivor: str | None = None  # the job a superseded job named when the caller read it


class Guard(enum.Enum):
    """A condition on the job and the caller's facts. The DynamoDB store renders each one into a
    condition expression fragment (`dynamodb_store.GUARD_CONDITIONS`)."""

    SAME_TENANT = "the job is another tenant's"
    ATTEMPT_FENCE = "no longer holds the job"
    ATTEMPTS_LEFT = "no attempts left"
    LEASE_EXPIRED = "lease still held"
    SWEEP_FENCE = "another sweep handled the job"
    START_BY_PASSED = "the job's expiry has not come"
    SURVIVOR_FENCE = "the superseded job names another survivor"

    def holds(self, job: Job, facts: Facts) -> bool:
        match self:
            case Guard.SAME_TENANT:
                return job.tenant == _given(facts.tenant, self)
            case Guard.ATTEMPT_FENCE:
                return job.attempt == _given(facts.attempt, self)
            case Guard.ATTEMPTS_LEFT:
                return job.attempt < job.max_attempts
            case Guard.LEASE_EXPIRED:
                return job.lease_until is None or job.lease_until <= _given(facts.now, self)
            case Guard.SWEEP_FENCE:
                return job.sweep_at is not None and job.sweep_at == facts.seen_sweep_at
            case Guard.START_BY_PASSED:
                return job.start_by is not None and job.start_by <= _given(facts.now, self)
            case Guard.SURVIVOR_FENCE:
                return job.cancel_reason == SUPERSEDED and job.superseded_by == _given(facts.seen_survivor, self)

    def refusal(self, facts: Facts) -> str:
        if self is Guard.ATTEMPT_FENCE:
            return f"attempt {facts.attempt} {self.value}"
        return str(self.value)


def _given(fact: _T | None, guard: Guard) -> _T:
    if fact is None:
        raise ValueError(f"the {guard.name} guard needs a fact the caller did not give")
    return fact


@dataclass(frozen=True)
class Transition:
    """One declared change of a job: from which states, under which guards, to which state."""

    name: str
    # The status the job moves to; None: the status stays (the change is to other attributes).
    to: JobStatus | None
    # The states it may start from, each with the guards that hold only from that state.
    sources: Mapping[JobStatus, tuple[Guard, ...]]
    # The guards that hold from every source state.
    guards: tuple[Guard, ...] = ()

    @property
    def from_(self) -> frozenset[JobStatus]:
        return frozenset(self.sources)

    @property
    def all_guards(self) -> frozenset[Guard]:
        return frozenset(self.guards).union(*self.sources.values())

    def refusal(self, job: Job, facts: Facts) -> str | None:
        """Why the declaration refuses this change of `job`, or None when it allows it."""
        if job.status not in self.sources:
            return f"{self.name} does not start from {job.status.value}"
        for guard in (*self.guards, *self.sources[job.status]):
            if not guard.holds(job, facts):
                return guard.refusal(facts)
        return None

    def allows(self, job: Job, facts: Facts) -> bool:
        return self.refusal(job, facts) is None

    def check(self, job: Job, facts: Facts) -> None:
        reason = self.refusal(job, facts)
        if reason is not None:
            raise TransitionError(job.status, self.to or job.status, reason)


def _from(*states: JobStatus, guards: tuple[Guard, ...] = ()) -> Mapping[JobStatus, tuple[Guard, ...]]:
    return MappingProxyType(dict.fromkeys(states, guards))


_RUNNING_ONLY = _from(JobStatus.RUNNING)

# A worker takes a waiting job, or a running one whose worker's lease ran out, for its next attempt.
CLAIM = Transition(
    "claim",
    to=JobStatus.RUNNING,
    sources=MappingProxyType(
        {
            JobStatus.QUEUED: (),
            JobStatus.RETRYING: (),
            JobStatus.RUNNING: (Guard.LEASE_EXPIRED,),
        }
    ),
    guards=(Guard.SAME_TENANT, Guard.ATTEMPTS_LEFT),
)
# The outcomes of an attempt, written only while that attempt still holds the job.
SUCCEED = Transition("succeed", to=JobStatus.SUCCEEDED, sources=_RUNNING_ONLY, guards=(Guard.ATTEMPT_FENCE,))
RETRY = Transition("retry", to=JobStatus.RETRYING, sources=_RUNNING_ONLY, guards=(Guard.ATTEMPT_FENCE,))
FAIL = Transition("fail", to=JobStatus.FAILED, sources=_RUNNING_ONLY, guards=(Guard.ATTEMPT_FENCE,))
RECORD_PROGRESS = Transition("record_progress", to=None, sources=_RUNNING_ONLY, guards=(Guard.ATTEMPT_FENCE,))
# A worker vanished holding the job: failed on its last attempt, otherwise queued for another.
FAIL_EXPIRED_LEASE = Transition(
    "fail_expired_lease",
    to=JobStatus.FAILED,
    sources=_RUNNING_ONLY,
    guards=(Guard.ATTEMPT_FENCE, Guard.LEASE_EXPIRED),
)
REQUEUE_EXPIRED_LEASE = Transition(
    "requeue_expired_lease",
    to=JobStatus.QUEUED,
    sources=_RUNNING_ONLY,
    guards=(Guard.ATTEMPT_FENCE, Guard.LEASE_EXPIRED, Guard.ATTEMPTS_LEFT),
)
# By the job's tenant, by id.
CANCEL = Transition(
    "cancel",
    to=JobStatus.CANCELLED,
    sources=_from(JobStatus.QUEUED, JobStatus.SCHEDULED, JobStatus.RETRYING),
    guards=(Guard.SAME_TENANT,),
)
ENQUEUE_SCHEDULED = Transition(
    "enqueue_scheduled", to=JobStatus.QUEUED, sources=_from(JobStatus.SCHEDULED), guards=(Guard.SAME_TENANT,)
)
REDRIVE = Transition("redrive", to=JobStatus.QUEUED, sources=_from(JobStatus.FAILED), guards=(Guard.SAME_TENANT,))
# A waiting job not started by its `start_by` ends without running (the worker before a claim, or the sweeper).
EXPIRE = Transition(
    "expire",
    to=JobStatus.EXPIRED,
    sources=_from(JobStatus.QUEUED, JobStatus.SCHEDULED, JobStatus.RETRYING),
    guards=(Guard.SAME_TENANT, Guard.START_BY_PASSED),
)
# A superseded job names a later survivor of its burst (logic/debounce.py), fenced on the one it named.
NAME_SURVIVOR = Transition(
    "name_survivor", to=None, sources=_from(JobStatus.CANCELLED), guards=(Guard.SAME_TENANT, Guard.SURVIVOR_FENCE)
)
# By the job's tenant, by id (POST /jobs/{id}/retry): a failed, cancelled or expired job runs again.
RETRY_BY_HAND = Transition(
    "retry_by_hand",
    to=JobStatus.QUEUED,
    sources=_from(JobStatus.FAILED, JobStatus.CANCELLED, JobStatus.EXPIRED),
    guards=(Guard.SAME_TENANT,),
)
# A CANCELLED job that was delayed, retried by hand while its run_at is still further off than an SQS delay
# reaches: SCHEDULED again (its one-time schedule is made again), unless the caller asked for now.
RETRY_BY_HAND_SCHEDULED = Transition(
    "retry_by_hand_scheduled",
    to=JobStatus.SCHEDULED,
    sources=_from(JobStatus.CANCELLED),
    guards=(Guard.SAME_TENANT,),
)
# An operator removed the FAILED job's dead letter (by the job's tenant, as its message names it): it stays FAILED.
DISCARD = Transition("discard", to=None, sources=_from(JobStatus.FAILED), guards=(Guard.SAME_TENANT,))
# A finished job's follow-ups ran (logic/followups.py): it leaves the sweep index, fenced on the sweep time its final
# write (or the sweep that ran them) saw.
# The sweeper moves an unfinished job's next look on, fenced on the sweep time it saw, so two
# overlapping sweeps act on a job once.
RESCHEDULE_SWEEP = Transition(
    "reschedule_sweep", to=None, sources=_from(*sorted(UNFINISHED_STATES)), guards=(Guard.SWEEP_FENCE,)
)
# A final job's follow-ups ran (logic/followups.py): it leaves the sweep index, fenced on the sweep time its final
# write (or the sweep that ran them) saw, so a hand retry's newer entry is never removed.
FOLLOWED_UP = Transition("followed_up", to=None, sources=_from(*sorted(FINAL_STATES)), guards=(Guard.SWEEP_FENCE,))

TRANSITIONS = (
    CLAIM,
    SUCCEED,
    RETRY,
    FAIL,
    RECORD_PROGRESS,
    FAIL_EXPIRED_LEASE,
    REQUEUE_EXPIRED_LEASE,
    CANCEL,
    EXPIRE,
    NAME_SURVIVOR,
    ENQUEUE_SCHEDULED,
    REDRIVE,
    RETRY_BY_HAND,
    RETRY_BY_HAND_SCHEDULED,
    DISCARD,
    RESCHEDULE_SWEEP,
    FOLLOWED_UP,
)


# -- the pure transitions, each checked against its declaration --------------------------------


def claim(job: Job, *, tenant: str, now: datetime, lease: timedelta, sweep_at: datetime | None = None) -> Job:
    """QUEUED/RETRYING (or RUNNING with an expired lease) -> RUNNING with the next attempt number.
    `sweep_at`: the claim also puts the job in the sweep index (a claim on one of its message's last
    receives, see logic/process.py); otherwise the job's sweep time is left as it is."""
    CLAIM.check(job, Facts(now=now, tenant=tenant))
    return job.replace(
        status=JobStatus.RUNNING,
        attempt=job.attempt + 1,
        lease_until=now + lease,
        started_at=job.started_at or now,
        attempt_started_at=now,
        updated_at=now,
        next_attempt_at=None,
        sweep_at=sweep_at if sweep_at is not None else job.sweep_at,
    )


def succeed(
    job: Job,
    *,
    attempt: int,
    result: Any,
    now: datetime,
    retention: timedelta,
    followup_at: datetime | None = None,
    next_job_id: str | None = None,
) -> Job:
    """RUNNING -> SUCCEEDED. `followup_at`: the job has follow-ups (logic/followups.py) and stays in the sweep index
    until then; `next_job_id`: its chain's next job's id, kept if the job has one already (once ever)."""
    SUCCEED.check(job, Facts(now=now, attempt=attempt))
    return job.replace(
        next_job_id=job.next_job_id or next_job_id,
        status=JobStatus.SUCCEEDED,
        attempt_history=job.history_with(JobStatus.SUCCEEDED.value, now),
        result=result,
        error=None,
        lease_until=None,
        finished_at=now,
        updated_at=now,
        expires_at=now + retention,
        sweep_at=followup_at if followup_at is not None else job.followup_sweep_at(now),
    )


def schedule_retry(
    job: Job, *, attempt: int, error: str, now: datetime, delay: timedelta, detail: AttemptError | None = None
) -> Job:
    RETRY.check(job, Facts(now=now, attempt=attempt))
    return job.replace(
        status=JobStatus.RETRYING,
        attempt_history=job.history_with(JobStatus.RETRYING.value, now, error, detail),
        error=error,
        lease_until=None,
        next_attempt_at=now + delay,
        updated_at=now,
    )


def fail(
    job: Job, *, attempt: int, error: str, now: datetime, retention: timedelta, detail: AttemptError | None = None
) -> Job:
    FAIL.check(job, Facts(now=now, attempt=attempt))
    return _failed(job, error=error, now=now, retention=retention, outcome=JobStatus.FAILED.value, detail=detail)


def record_progress(job: Job, *, attempt: int, progress: Progress, now: datetime) -> Job:
    RECORD_PROGRESS.check(job, Facts(now=now, attempt=attempt))
    return job.replace(progress=progress, updated_at=now)


def fail_expired_lease(job: Job, *, attempt: int, now: datetime, retention: timedelta) -> Job:
    """A RUNNING job whose lease ran out on the last attempt: FAILED, fenced on its attempt."""
    FAIL_EXPIRED_LEASE.check(job, Facts(now=now, attempt=attempt))
    return _failed(job, error="lease expired", now=now, retention=retention, outcome=LEASE_EXPIRED_OUTCOME)


def _failed(
    job: Job, *, error: str, now: datetime, retention: timedelta, outcome: str, detail: AttemptError | None = None
) -> Job:
    return job.replace(
        status=JobStatus.FAILED,
        attempt_history=job.history_with(outcome, now, error, detail),
        error=error,
        lease_until=None,
        finished_at=now,
        updated_at=now,
        expires_at=now + retention,
        sweep_at=job.followup_sweep_at(now),
    )


def requeue_expired_lease(job: Job, *, attempt: int, now: datetime, sweep_at: datetime) -> Job:
    """A RUNNING job whose worker vanished, with attempts left: back to QUEUED for another try.
    The requeue sends the job's message again, so it counts as a resend."""
    REQUEUE_EXPIRED_LEASE.check(job, Facts(now=now, attempt=attempt))
    return job.replace(
        status=JobStatus.QUEUED,
        attempt_history=job.history_with(LEASE_EXPIRED_OUTCOME, now, "lease expired"),
        lease_until=None,
        updated_at=now,
        sweep_at=sweep_at,
        resends=job.resends + 1,
    )


def cancel(
    job: Job,
    *,
    tenant: str,
    now: datetime,
    retention: timedelta,
    operation: str | None = None,
    superseded_by: str | None = None,
) -> Job:
    """By its tenant, or by the bulk operation `operation` (marked on the job); or superseded by the later job
    `superseded_by` under the same debounce key."""
    CANCEL.check(job, Facts(now=now, tenant=tenant))
    return job.replace(
        bulk_operation_id=operation or job.bulk_operation_id,
        status=JobStatus.CANCELLED,
        cancel_reason=SUPERSEDED if superseded_by is not None else job.cancel_reason,
        superseded_by=superseded_by if superseded_by is not None else job.superseded_by,
        lease_until=None,
        finished_at=now,
        updated_at=now,
        expires_at=now + retention,
        sweep_at=job.followup_sweep_at(now),
    )


def expire(job: Job, *, tenant: str, now: datetime, retention: timedelta) -> Job:
    """QUEUED, SCHEDULED or RETRYING past its `start_by` -> EXPIRED, never having run this time."""
    EXPIRE.check(job, Facts(now=now, tenant=tenant))
    return job.replace(
        status=JobStatus.EXPIRED,
        lease_until=None,
        next_attempt_at=None,
        finished_at=now,
        updated_at=now,
        expires_at=now + retention,
        sweep_at=None,
    )


def name_survivor(job: Job, *, tenant: str, seen: str, survivor: str, now: datetime) -> Job:
    """A superseded job that named `seen` names `survivor`, a later job of its burst; it stays CANCELLED."""
    NAME_SURVIVOR.check(job, Facts(now=now, tenant=tenant, seen_survivor=seen))
    return job.replace(superseded_by=survivor)


def enqueue_scheduled(job: Job, *, tenant: str, now: datetime, sweep_at: datetime) -> Job:
    """SCHEDULED -> QUEUED when its time has come."""
    ENQUEUE_SCHEDULED.check(job, Facts(now=now, tenant=tenant))
    return job.replace(status=JobStatus.QUEUED, updated_at=now, sweep_at=sweep_at)


def redrive(job: Job, *, tenant: str, now: datetime, sweep_at: datetime) -> Job:
    """FAILED -> QUEUED with a fresh attempt budget; the redrive is counted on the job."""
    REDRIVE.check(job, Facts(now=now, tenant=tenant))
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


def retry_by_hand(
    job: Job, *, tenant: str, now: datetime, sweep_at: datetime, operation: str | None = None, scheduled: bool = False
) -> Job:
    """FAILED, CANCELLED or EXPIRED -> QUEUED with a fresh attempt budget; the hand retry is counted on the job.
    Its history of attempts is kept; its expiry, cancel reason and debounce are not. `scheduled`: a CANCELLED job
    goes back to SCHEDULED instead (its run_at is still ahead). `operation`: the bulk operation that retries it
    (marked on the job)."""
    transition = RETRY_BY_HAND_SCHEDULED if scheduled else RETRY_BY_HAND
    transition.check(job, Facts(now=now, tenant=tenant))
    return job.replace(
        bulk_operation_id=operation or job.bulk_operation_id,
        status=JobStatus.SCHEDULED if scheduled else JobStatus.QUEUED,
        attempt=0,
        error=None,
        finished_at=None,
        expires_at=None,
        lease_until=None,
        next_attempt_at=None,
        updated_at=now,
        retries=job.retries + 1,
        retried_at=now,
        sweep_at=sweep_at,
        resends=0,
        discarded_at=None,
        start_by=None,
        cancel_reason=None,
        superseded_by=None,
    )


def discard(job: Job, *, tenant: str, now: datetime) -> Job:
    """A FAILED job whose dead letter was removed: marked discarded, still FAILED."""
    DISCARD.check(job, Facts(now=now, tenant=tenant))
    return job.replace(discarded_at=now, updated_at=now)


def reschedule_sweep(job: Job, *, seen: datetime | None, sweep_at: datetime, resent: bool) -> Job:
    """The sweeper looked at the job: when to look again."""
    RESCHEDULE_SWEEP.check(job, Facts(seen_sweep_at=seen))
    return job.replace(sweep_at=sweep_at, resends=job.resends + (1 if resent else 0))


def followed_up(job: Job, *, seen: datetime | None) -> Job:
    """A final job whose follow-ups ran: out of the sweep index."""
    FOLLOWED_UP.check(job, Facts(seen_sweep_at=seen))
    return job.replace(sweep_at=None)
