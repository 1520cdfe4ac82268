"""Bulk actions (POST /jobs/bulk): a retry or a cancel of every job a filter matches, as one operation whose
progress is kept in an item of its own (adapters/dynamodb_bulk.py) and moved on by logic/bulk.py.

An operation walks the tenant's listing (newest first, `JobStore.list_jobs`) a page at a time and keeps the
listing's cursor in its item: each page's end is a checkpoint (the counts and the cursor, one write fenced on
the operation's `step`). A runner holds the operation under a lease; one that dies leaves its lease to run out
and the next runner (the sweeper) starts again from the last checkpoint. The jobs of the page it redoes that the
dead runner had already moved carry the operation's id (`Job.bulk_operation_id`, written by the move itself), so
they count as done once, and are never moved twice.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, Protocol

from offpath.domain.job import Job, JobStatus

Action = Literal["retry", "cancel"]
ACTIONS: tuple[Action, ...] = ("retry", "cancel")
OperationStatus = Literal["running", "finished", "stopped"]

# The most jobs one operation matches; past it the operation finishes with `limit_reached` (a dry run says so).
MAX_MATCHED = 10_000
# How many jobs a dry run shows.
SAMPLE_SIZE = 10
# The most failures an operation keeps (the first ones); `failed` counts them all.
FAILURES_KEPT = 20
# How many bulk operations may be running at once, over all tenants (the open operations' item holds them), and
# of one caller: one caller's operations cannot take every place.
MAX_OPEN_OPERATIONS = 100
MAX_OPEN_PER_OWNER = 5


@dataclass(frozen=True)
class BulkFilter:
    """The jobs an operation acts on: the listing's filters (GET /jobs), of one tenant's jobs."""

    tenant: str
    status: JobStatus | None = None
    job_type: str | None = None
    tag: tuple[str, str] | None = None

    def matches(self, job: Job) -> bool:
        return (
            job.tenant == self.tenant
            and (self.status is None or job.status is self.status)
            and (self.job_type is None or job.type == self.job_type)
            and (self.tag is None or job.tags.get(self.tag[0]) == self.tag[1])
        )


@dataclass(frozen=True)
class Failure:
    job_id: str
    error: str


@dataclass(frozen=True)
class BulkOperation:
    """An operation as its item keeps it. `owner`: the caller who started it (who reads its progress);
    `filter.tenant`: whose jobs it acts on (the owner's, or for an admin any tenant's). The counts are those
    of the pages before `cursor` (and, once the operation is over, of all it went through)."""

    operation_id: str
    owner: str
    action: Action
    filter: BulkFilter
    status: OperationStatus
    created_at: datetime
    updated_at: datetime
    limit: int = MAX_MATCHED
    matched: int = 0
    done: int = 0
    skipped: int = 0
    failed: int = 0
    # How many were skipped, by reason ("job is RUNNING", ...).
    skipped_reasons: Mapping[str, int] = dataclasses.field(default_factory=dict)
    failures: tuple[Failure, ...] = ()
    # The listing's cursor after the last checkpointed page; None before the first (and once over).
    cursor: str | None = None
    # Bumped by every lease taken and every checkpoint: a write of a runner that lost its lease is refused.
    step: int = 0
    lease_until: datetime | None = None
    finished_at: datetime | None = None
    limit_reached: bool = False
    # Why a stopped operation stopped (a quota of the jobs' tenant).
    stop_reason: str | None = None
    pages: int = 0

    def replace(self, **changes: object) -> BulkOperation:
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]

    @property
    def is_over(self) -> bool:
        return self.status != "running"


@dataclass
class Tally:
    """What a runner counted since the operation's last checkpoint."""

    matched: int = 0
    done: int = 0
    skipped: int = 0
    failed: int = 0
    skipped_reasons: dict[str, int] = dataclasses.field(default_factory=dict)
    failures: list[Failure] = dataclasses.field(default_factory=list)

    def skip(self, reason: str) -> None:
        self.skipped += 1
        self.skipped_reasons[reason] = self.skipped_reasons.get(reason, 0) + 1

    def fail(self, job_id: str, error: str) -> None:
        self.failed += 1
        self.failures.append(Failure(job_id, error))

    def added_to(self, operation: BulkOperation) -> BulkOperation:
        reasons = dict(operation.skipped_reasons)
        for reason, count in self.skipped_reasons.items():
            reasons[reason] = reasons.get(reason, 0) + count
        return operation.replace(
            matched=operation.matched + self.matched,
            done=operation.done + self.done,
            skipped=operation.skipped + self.skipped,
            failed=operation.failed + self.failed,
            skipped_reasons=reasons,
            failures=(*operation.failures, *self.failures)[:FAILURES_KEPT],
        )


class BulkOperationConflictError(Exception):
    """Another runner holds the operation (or took it over): this runner's write was refused."""


class TooManyOperationsError(Exception):
    """MAX_OPEN_OPERATIONS bulk operations are running already, or MAX_OPEN_PER_OWNER of the caller's."""


class BulkOperationNotFoundError(Exception):
    pass


class BulkStore(Protocol):
    def create(self, operation: BulkOperation) -> None:
        """Write a new operation and enter it among the open ones (TooManyOperationsError past the cap)."""

    def get(self, owner: str, operation_id: str) -> BulkOperation | None: ...

    def take(self, operation: BulkOperation, *, now: datetime, lease_until: datetime) -> BulkOperation:
        """Hold a running operation whose lease is over (or that has none) until `lease_until`; fenced on its
        step. BulkOperationConflictError when another runner holds it or took it first."""

    def save(self, operation: BulkOperation, *, seen_step: int) -> BulkOperation:
        """Write the operation (a checkpoint, its release or its end) if its step is still `seen_step`; it is
        written with the step after. An operation that is over leaves the open ones.
        BulkOperationConflictError otherwise."""

    def open_operations(self) -> list[tuple[str, str]]:
        """The running operations, as (owner, operation id)."""

    def forget(self, owner: str, operation_id: str) -> None:
        """Remove an operation from the open ones (it is over, or gone)."""
