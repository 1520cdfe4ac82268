"""What a job function gets besides its payload."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from offpath.domain.clock import Clock
from offpath.domain.job import Job, Progress
from offpath.domain.ports import JobStore
from offpath.tenancy import SYSTEM_TENANT

ONCE_RETENTION = timedelta(days=30)
ACROSS_JOBS_RETENTION = timedelta(days=400)


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
    ) -> None:
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
