"""What a job function gets besides its payload."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Protocol

from offpath.domain.batch import Batch
from offpath.domain.clock import Clock
from offpath.domain.errors import OffpathError
from offpath.domain.job import Job, Progress
from offpath.domain.ports import ChildJobs, JobStore
from offpath.tenancy import SYSTEM_TENANT

ONCE_RETENTION = timedelta(days=30)


class BatchGateway(Protocol):
    """What a job's context asks of batches (logic/batches.py:JobBatches gives it)."""

    def read(self, batch_id: str, *, tenant: str) -> Batch: ...

    def jobs(self, batch: Batch, *, cursor: str | None) -> tuple[list[Job], str | None]: ...

    def submit(
        self,
        parent: Job,
        jobs: Sequence[Mapping[str, Any]],
        *,
        on_complete: Mapping[str, Any] | None,
        on_success: Mapping[str, Any] | None,
        key: str,
    ) -> Batch: ...


class BatchContext:
    """`ctx.batch`: the batch a callback is for (or a member's own batch): its id and counts as they were read, and
    its jobs a page at a time (their results stay on them)."""

    def __init__(self, batch: Batch, gateway: BatchGateway) -> None:
        self.batch = batch
        self.batch_id = batch.batch_id
        self.total = batch.total
        self.pending = batch.pending
        self.counts = dict(batch.counts)
        self._gateway = gateway

    def count(self, status: str) -> int:
        return int(self.counts.get(status, 0))

    @property
    def succeeded(self) -> int:
        return self.count("SUCCEEDED")

    @property
    def failed(self) -> int:
        return self.count("FAILED")

    @property
    def cancelled(self) -> int:
        return self.count("CANCELLED")

    def jobs(self) -> Iterator[Job]:
        """Every job of the batch, read a page (100) at a time."""
        cursor: str | None = None
        while True:
            page, cursor = self._gateway.jobs(self.batch, cursor=cursor)
            yield from page
            if cursor is None:
                return

    def results(self) -> Iterator[tuple[str, str, Any]]:
        """(job id, status, result) of every job of the batch, a page at a time."""
        for job in self.jobs():
            yield job.job_id, job.status.value, job.result


ACROSS_JOBS_RETENTION = timedelta(days=400)


@dataclass(frozen=True)
class Parent:
    """The job that made this one: a chain's previous step (its `result` what it returned), or the job whose
    `ctx.submit` submitted this one (its `result` None while it runs)."""

    job_id: str
    result: Any = None


class NoSubmitPortError(OffpathError):
    """`ctx.submit` where the job's context was built without a submit port."""


class JobContext:
    def __init__(
        self,
        job: Job,
        *,
        store: JobStore,
        clock: Clock,
        remaining_ms: Callable[[], int],
        logger: logging.LoggerAdapter[Any] | Any,
        shared_across_tenants: bool = False,
        batches: BatchGateway | None = None,
        children: ChildJobs | None = None,
    ) -> None:
        self._job = job
        self._batches = batches
        self._children = children
        self._parent: Parent | None = None
        self.parent_job_id = job.parent_job_id
        self.job_id = job.job_id
        self.attempt = job.attempt
        self.max_attempts = job.max_attempts
        self.tenant = job.tenant
        self.created_at = job.created_at
        self.logger = logger
        self._store = store
        self._clock = clock
        self._remaining_ms = remaining_ms
        # Admin and system job types act for the deployment: their across-jobs marks are the system
        # tenant's whoever submitted the job (the scope scheduled jobs' marks always had).
        self._marks_tenant = SYSTEM_TENANT if shared_across_tenants else job.tenant

    @property
    def remaining_time_s(self) -> float:
        return self._remaining_ms() / 1000.0

    def progress(self, fraction: float, message: str = "") -> None:
        """Persist how far the job is (0.0 to 1.0) so `GET /jobs/{id}` shows it."""
        clamped = min(1.0, max(0.0, float(fraction)))
        self._store.set_progress(
            self.job_id,
            tenant=self.tenant,
            attempt=self.attempt,
            progress=Progress(clamped, message[:200]),
            now=self._clock.now(),
        )

    def once(self, name: str, *, across_jobs: bool = False) -> bool:
        """True exactly once per job and name, however often the job runs: guard a side effect with it.
        With `across_jobs=True` the mark belongs to the tenant instead, so no other job of the tenant
        passes the same name again either (e.g. "charge:customer-42:2026-12"). For a job type submitted
        by admins or the system only, the mark is global: no other job of the deployment passes it.

        The mark is written before the side effect (at most once): a crash between the mark and
        the effect loses the effect rather than repeating it.
        """
        now = self._clock.now()
        scope = f"tenant:{self._marks_tenant}" if across_jobs else self.job_id
        retention = ACROSS_JOBS_RETENTION if across_jobs else ONCE_RETENTION
        return self._store.mark_once(scope, name, now=now, expires_at=now + retention)

    @property
    def batch(self) -> BatchContext | None:
        """The batch this job is a callback of (or a member of), read now; None for a job of no batch."""
        batch_id = self._job.callback_of or self._job.batch_id
        if batch_id is None or self._batches is None:
            return None
        return BatchContext(self._batches.read(batch_id, tenant=self.tenant), self._batches)

    def submit_batch(
        self,
        jobs: Sequence[Mapping[str, Any]],
        *,
        key: str,
        on_complete: Mapping[str, Any] | None = None,
        on_success: Mapping[str, Any] | None = None,
    ) -> BatchContext:
        """Submit a batch of up to 100 jobs (each `{"type", "payload"}`) with its callbacks, idempotently: its id
        derives from this job and `key`, so a retried attempt gets the same batch and no job twice."""
        if self._batches is None:
            raise RuntimeError("no batch store configured")
        batch = self._batches.submit(self._job, jobs, on_complete=on_complete, on_success=on_success, key=key)
        return BatchContext(batch, self._batches)

    @property
    def parent(self) -> Parent | None:
        """The job that made this one (its id and result), or None for a job a caller submitted. Read from the store
        the first time it is asked for (one read), never on a job that does not ask. A parent past its retention
        reads as its id with no result."""
        if self.parent_job_id is None:
            return None
        if self._parent is None:
            found = self._store.get(self.parent_job_id, tenant=self.tenant)
            self._parent = Parent(self.parent_job_id, found.result if found is not None else None)
        return self._parent

    def submit(self, type: str, payload: dict[str, Any] | None = None, *, key: str) -> str:
        """Submit a job of this job's tenant, once per `key`: an attempt retried after a crash that submits again
        under the same key gets the same job (its id derives from this job's id and the key), never a second one.
        Returns the child's job id; its view names this job as `parent_job_id`. Counts against the tenant's quotas
        like any submit (over one: QuotaExceededError, and the attempt is retried); a type not open to the tenant or
        a payload its model refuses is a PermanentError."""
        if self._children is None:
            raise NoSubmitPortError("this job's context has no submit port")
        return self._children.submit_child(self._job, type, dict(payload or {}), key=key).job_id
