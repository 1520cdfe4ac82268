"""Per-tenant quotas: the gate the submit path asks before it writes a job, and the counting of open and
delayed jobs as they change (docs/decisions.md, 2026-12-01, for the design and its numbers).

- Submits per second: one conditional write to the tenant's token bucket (`QuotaCounters.take`), no read.
- Open and delayed jobs: counted by `CountingStore` after each write that changes them (a job accepted,
  finished, enqueued, cancelled, redriven or retried by hand); the gate reads a tenant's count at most once
  per `USAGE_CACHE_S` per execution environment and adds what this environment admitted since. Between
  two reads other environments' admissions are not seen: a tenant's open jobs can exceed its quota by at
  most what its token bucket lets through in that time (submits_per_s x USAGE_CACHE_S + its burst).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from offpath.domain.clock import Clock
from offpath.domain.errors import OffpathError
from offpath.domain.job import AttemptError, Job, JobStatus, Progress
from offpath.domain.ports import (
    CreateOutcome,
    DebounceRecord,
    Firing,
    JobPage,
    JobStore,
    KeyRecord,
    ScheduleState,
)
from offpath.domain.quotas import (
    COUNT_RETRY_AFTER_S,
    Quota,
    QuotaBook,
    QuotaCounters,
    QuotaExceededError,
    Usage,
)

logger = logging.getLogger(__name__)

# How long an execution environment trusts a tenant's count it read.
USAGE_CACHE_S = 1.0
OPEN = Usage(open_jobs=1)
CLOSED = Usage(open_jobs=-1)


@dataclass
class _Seen:
    usage: Usage
    read_at: float  # monotonic seconds
    admitted: Usage = field(default_factory=Usage)


class CachedQuotaGate:
    """The quota check of one execution environment (thread-safe: a batch admits from several threads).
    `monotonic`: seconds for the cache's age (replaceable in tests)."""

    def __init__(
        self,
        book: QuotaBook,
        counters: QuotaCounters,
        clock: Clock,
        *,
        cache_s: float = USAGE_CACHE_S,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.book = book
        self.counters = counters
        self.clock = clock
        self.cache_s = cache_s
        self.monotonic = monotonic
        self._seen: dict[str, _Seen] = {}
        self._lock = threading.Lock()

    def admit(self, tenant: str, *, delayed: bool) -> None:
        quota = self.book.for_tenant(tenant)
        if not quota.limited:
            return
        if quota.counts:
            with self._lock:
                self._check_counts(tenant, quota, delayed)
        if quota.submits_per_s is not None:
            wait = self.counters.take(
                tenant, per_s=quota.submits_per_s, bucket=quota.bucket, now_us=_micros(self.clock.now())
            )
            if wait > 0:
                self._release(tenant, quota, delayed)
                raise QuotaExceededError(
                    "submits_per_s",
                    f"over the quota of {quota.submits_per_s:g} submits per second (burst {quota.bucket})",
                    math.ceil(wait),
                )

    def _check_counts(self, tenant: str, quota: Quota, delayed: bool) -> None:
        seen = self._usage(tenant)
        current = seen.usage.plus(seen.admitted)
        if quota.open_jobs is not None and current.open_jobs + 1 > quota.open_jobs:
            raise QuotaExceededError(
                "open_jobs",
                f"over the quota of {quota.open_jobs} open jobs (not final); {current.open_jobs} are open",
                COUNT_RETRY_AFTER_S,
            )
        if delayed and quota.delayed_jobs is not None and current.delayed_jobs + 1 > quota.delayed_jobs:
            raise QuotaExceededError(
                "delayed_jobs",
                f"over the quota of {quota.delayed_jobs} delayed jobs (waiting for their run_at); "
                f"{current.delayed_jobs} are waiting",
                COUNT_RETRY_AFTER_S,
            )
        seen.admitted = seen.admitted.plus(Usage(1, 1 if delayed else 0))

    def _release(self, tenant: str, quota: Quota, delayed: bool) -> None:
        """Undo this environment's admission of a submit the token bucket then refused."""
        if not quota.counts:
            return
        with self._lock:
            seen = self._seen.get(tenant)
            if seen is not None:
                seen.admitted = seen.admitted.plus(Usage(-1, -1 if delayed else 0))

    def _usage(self, tenant: str) -> _Seen:
        now = self.monotonic()
        seen = self._seen.get(tenant)
        if seen is None or now - seen.read_at >= self.cache_s:
            seen = _Seen(self.counters.usage(tenant), now)
            self._seen[tenant] = seen
        return seen

    def usage(self, tenant: str) -> Usage | None:
        """The tenant's counted jobs, read now (None when they are not counted)."""
        if not self.book.for_tenant(tenant).counts:
            return None
        return self.counters.usage(tenant)


def _micros(when: datetime) -> int:
    return int(when.timestamp() * 1_000_000)


class CountingStore:
    """A job store that counts each change of a counted tenant's open and delayed jobs after the store made
    it: one more write per change, never in the way of the job's own (a count that cannot be written is
    logged and left: the job's write stands)."""

    def __init__(self, store: JobStore, book: QuotaBook, counters: QuotaCounters) -> None:
        self.store = store
        self.book = book
        self.counters = counters

    def __getattr__(self, name: str) -> Any:
        # Whatever else the wrapped store offers (an adapter's own attributes) is its own.
        return getattr(self.store, name)

    def _count(self, tenant: str, change: Usage, job_id: str) -> None:
        if not self.book.for_tenant(tenant).counts:
            return
        try:
            self.counters.add(tenant, change, job_id=job_id)
        except OffpathError:
            logger.warning("a quota count was not written", extra={"tenant": tenant})

    def create(self, job: Job) -> CreateOutcome:
        outcome = self.store.create(job)
        if not outcome.replayed and outcome.job.submission_id == job.submission_id:
            self._count(job.tenant, Usage(1, 1 if job.status is JobStatus.SCHEDULED else 0), job.job_id)
        return outcome

    def record_key(self, job: Job, *, expires_at: datetime) -> KeyRecord:
        return self.store.record_key(job, expires_at=expires_at)

    def key_record(self, tenant: str, idempotency_key: str) -> KeyRecord | None:
        return self.store.key_record(tenant, idempotency_key)

    def get(self, job_id: str, *, tenant: str) -> Job | None:
        return self.store.get(job_id, tenant=tenant)

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
        return self.store.list_jobs(tenant, status=status, job_type=job_type, limit=limit, cursor=cursor, tag=tag)

    def claim(
        self, job_id: str, *, tenant: str, now: datetime, lease_until: datetime, sweep_at: datetime | None = None
    ) -> Job:
        return self.store.claim(job_id, tenant=tenant, now=now, lease_until=lease_until, sweep_at=sweep_at)

    def record_success(self, job: Job, *, result: Any, now: datetime, expires_at: datetime, **followups: Any) -> None:
        self.store.record_success(job, result=result, now=now, expires_at=expires_at, **followups)
        self._count(job.tenant, CLOSED, job.job_id)

    def record_retry(
        self, job: Job, *, error: str, now: datetime, next_attempt_at: datetime, detail: AttemptError | None = None
    ) -> None:
        self.store.record_retry(job, error=error, now=now, next_attempt_at=next_attempt_at, detail=detail)

    def record_failure(
        self, job: Job, *, error: str, now: datetime, expires_at: datetime, detail: AttemptError | None = None
    ) -> None:
        self.store.record_failure(job, error=error, now=now, expires_at=expires_at, detail=detail)
        self._count(job.tenant, CLOSED, job.job_id)

    def fail_expired_lease(self, job: Job, *, now: datetime, expires_at: datetime) -> None:
        self.store.fail_expired_lease(job, now=now, expires_at=expires_at)
        self._count(job.tenant, CLOSED, job.job_id)

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
        # The state it leaves decides what it frees: read before (a cancel is rare, and off the submit path).
        before = self.store.get(job_id, tenant=tenant) if self.book.for_tenant(tenant).counts else None
        job = self.store.cancel(
            job_id, tenant=tenant, now=now, expires_at=expires_at, operation=operation, superseded_by=superseded_by
        )
        if before is not None and before.status is not JobStatus.CANCELLED:
            self._count(tenant, Usage(-1, -1 if before.status is JobStatus.SCHEDULED else 0), job_id)
        return job

    def expire(self, job_id: str, *, tenant: str, now: datetime, expires_at: datetime) -> Job:
        # An expired job frees its open-jobs slot as a cancelled one does (read before, as a cancel does).
        before = self.store.get(job_id, tenant=tenant) if self.book.for_tenant(tenant).counts else None
        job = self.store.expire(job_id, tenant=tenant, now=now, expires_at=expires_at)
        if before is not None and not before.status.is_final:
            self._count(tenant, Usage(-1, -1 if before.status is JobStatus.SCHEDULED else 0), job_id)
        return job

    def set_progress(self, job_id: str, *, tenant: str, attempt: int, progress: Progress, now: datetime) -> None:
        self.store.set_progress(job_id, tenant=tenant, attempt=attempt, progress=progress, now=now)

    def mark_once(self, job_id: str, name: str, *, now: datetime, expires_at: datetime) -> bool:
        return self.store.mark_once(job_id, name, now=now, expires_at=expires_at)

    def enqueue_scheduled(self, job_id: str, *, tenant: str, now: datetime, sweep_at: datetime) -> Job:
        job = self.store.enqueue_scheduled(job_id, tenant=tenant, now=now, sweep_at=sweep_at)
        self._count(tenant, Usage(0, -1), job_id)
        return job

    def reset_for_redrive(self, job_id: str, *, tenant: str, now: datetime, sweep_at: datetime) -> Job:
        job = self.store.reset_for_redrive(job_id, tenant=tenant, now=now, sweep_at=sweep_at)
        self._count(tenant, OPEN, job_id)
        return job

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
        job = self.store.retry_by_hand(
            job_id, tenant=tenant, now=now, sweep_at=sweep_at, operation=operation, scheduled=scheduled
        )
        self._count(tenant, Usage(1, 1) if scheduled else OPEN, job_id)
        return job

    def requeue_expired_lease(self, job: Job, *, now: datetime, sweep_at: datetime) -> Job:
        return self.store.requeue_expired_lease(job, now=now, sweep_at=sweep_at)

    def due_for_sweep(self, *, now: datetime, limit: int) -> list[Job]:
        return self.store.due_for_sweep(now=now, limit=limit)

    def reschedule_sweep(self, job: Job, *, sweep_at: datetime, resent: bool) -> None:
        self.store.reschedule_sweep(job, sweep_at=sweep_at, resent=resent)

    def get_schedule_state(self, name: str) -> ScheduleState | None:
        return self.store.get_schedule_state(name)

    def swap_debounce(self, tenant: str, job_type: str, key: str, record: DebounceRecord) -> DebounceRecord | None:
        return self.store.swap_debounce(tenant, job_type, key, record)

    def debounce_record(self, tenant: str, job_type: str, key: str) -> DebounceRecord | None:
        return self.store.debounce_record(tenant, job_type, key)

    def name_survivor(self, job_id: str, *, tenant: str, seen: str, survivor: str, now: datetime) -> None:
        self.store.name_survivor(job_id, tenant=tenant, seen=seen, survivor=survivor, now=now)

    def record_firing(self, name: str, firing: Firing, *, keep: int) -> ScheduleState:
        return self.store.record_firing(name, firing, keep=keep)
