"""Batches (fan-out / fan-in): a group of ordinary jobs whose callbacks run once every member is final.

A batch is one item with its counts; its members are ordinary jobs that name it (`Job.batch_id`); the ids of its
members are kept on page items, one per page of up to 100 jobs added (nothing unbounded in one item). How the
counts move and why they stay exact: docs/decisions.md, "Batches: counts moved with a per-member mark".
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from offpath.domain.job import Job, JobStatus

# The two callbacks a batch may name.
ON_COMPLETE = "on_complete"
ON_SUCCESS = "on_success"
CALLBACKS = (ON_COMPLETE, ON_SUCCESS)
# Jobs one request adds to a batch (POST /batches, POST /batches/{id}/jobs, ctx.submit_batch).
MAX_PAGE = 100


class BatchStatus(enum.StrEnum):
    OPEN = "OPEN"  # jobs may still be added (created with "open": true, not sealed yet)
    RUNNING = "RUNNING"  # sealed; some members are not final
    COMPLETE = "COMPLETE"  # sealed; every member is final, not all SUCCEEDED
    SUCCEEDED = "SUCCEEDED"  # sealed; every member SUCCEEDED


@dataclass(frozen=True)
class CallbackSpec:
    type: str
    payload: dict[str, Any]


@dataclass(frozen=True)
class Batch:
    batch_id: str
    tenant: str
    created_at: datetime
    updated_at: datetime
    # Members whose page was written (POST /batches/{id}/jobs answered); `open_pages`: pages being added.
    total: int = 0
    open_pages: int = 0
    # Members counted per final state (the state's value -> how many); absent states count 0.
    counts: Mapping[str, int] = field(default_factory=dict)
    sealed_at: datetime | None = None
    cancelled_at: datetime | None = None
    callbacks: Mapping[str, CallbackSpec] = field(default_factory=dict)
    # The callback jobs' ids, once submitted (callback name -> job id).
    callback_jobs: Mapping[str, str] = field(default_factory=dict)
    idempotency_key: str | None = None
    # What a replay under the key must match (the request's digest).
    fingerprint: str = ""
    # The job that submitted the batch (ctx.submit_batch), if any.
    parent_job_id: str | None = None

    def count(self, status: JobStatus) -> int:
        return int(self.counts.get(status.value, 0))

    @property
    def finished(self) -> int:
        """Members counted in a final state (only final states are counted: FINAL_STATES)."""
        return sum(int(n) for n in self.counts.values())

    @property
    def pending(self) -> int:
        return max(0, self.total - self.finished)

    @property
    def sealed(self) -> bool:
        return self.sealed_at is not None

    @property
    def complete(self) -> bool:
        """Sealed with every member final: on_complete is due."""
        return self.sealed and self.open_pages == 0 and self.finished == self.total

    @property
    def succeeded(self) -> bool:
        """Sealed with every member SUCCEEDED: on_success is due."""
        return self.sealed and self.open_pages == 0 and self.count(JobStatus.SUCCEEDED) == self.total

    @property
    def status(self) -> BatchStatus:
        if not self.sealed:
            return BatchStatus.OPEN
        if self.succeeded:
            return BatchStatus.SUCCEEDED
        if self.complete:
            return BatchStatus.COMPLETE
        return BatchStatus.RUNNING


@dataclass(frozen=True)
class BatchPage:
    """One page of a batch's members: the ids of the jobs one request added, in its order."""

    page_id: str
    job_ids: tuple[str, ...]
    written: bool


@dataclass(frozen=True)
class BatchListing:
    batches: list[Batch]
    cursor: str | None


@dataclass(frozen=True)
class MemberIds:
    job_ids: list[str]
    cursor: str | None


class BatchStore(Protocol):
    def create(self, batch: Batch) -> Batch:
        """Write a new batch (create-if-absent): the batch that stands under its id."""

    def record_key(self, batch: Batch) -> Batch:
        """Mark a keyed batch's key (scoped by its tenant) as this batch's: one conditional write. Returns the batch
        the key names (its id, creation time and fingerprint): this one's, or an earlier request's."""

    def get(self, batch_id: str, *, tenant: str) -> Batch | None: ...

    def list_batches(self, tenant: str, *, limit: int, cursor: str | None) -> BatchListing:
        """The tenant's batches, newest first."""

    def reserve_page(self, batch: Batch, page_id: str, job_ids: Sequence[str], *, now: datetime) -> BatchPage:
        """Reserve a page of members on an unsealed batch (the page item and `open_pages` + 1 in one transaction);
        a page already reserved or written under that id is returned as it is. BatchConflictError: sealed."""

    def write_page(self, batch: Batch, page: BatchPage, *, now: datetime) -> None:
        """The page's jobs exist: the page is written and its members join the total (one transaction); a page
        already written is left as it is."""

    def member_ids(self, batch: Batch, *, limit: int, cursor: str | None) -> MemberIds: ...

    def seal(self, batch: Batch, *, now: datetime) -> Batch:
        """Seal the batch (no pages being added); a sealed batch is returned as it is. BatchConflictError: a page
        is still being added."""

    def mark_cancelled(self, batch: Batch, *, now: datetime) -> Batch: ...

    def count_member(self, job: Job, *, now: datetime) -> bool:
        """Count a final member in its batch: the member's mark (`batch_counted`) and the batch's count of its state
        move in one transaction, only while the member is in that state and not counted. True when this call
        counted it; False when it was counted before (or is no longer in that state)."""

    def record_callback(self, batch: Batch, name: str, job_id: str, *, now: datetime) -> Batch: ...

    def get_jobs(self, tenant: str, job_ids: Sequence[str]) -> list[Job]:
        """The tenant's jobs by id, in that order (those that exist)."""


def batch_summary(batch: Batch) -> dict[str, Any]:
    """A batch as its notices carry it (batch.completed, batch.succeeded): its id, status and counts, and its
    callback jobs' ids."""
    return {
        "batch_id": batch.batch_id,
        "status": batch.status.value,
        "total": batch.total,
        "pending": batch.pending,
        "counts": dict(batch.counts),
        "on_complete_job_id": batch.callback_jobs.get(ON_COMPLETE),
        "on_success_job_id": batch.callback_jobs.get(ON_SUCCESS),
    }


def page_id_of(key: str) -> str:
    import hashlib

    return hashlib.sha256(key.encode()).hexdigest()[:32]
