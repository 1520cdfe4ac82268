"""Reading and cancelling a caller's jobs. Another tenant's job is indistinguishable from no job."""

from __future__ import annotations

import logging
from datetime import timedelta

from offpath.domain.clock import Clock
from offpath.domain.errors import JobNotFoundError, OffpathError
from offpath.domain.job import Job
from offpath.domain.ports import JobScheduler, JobStore
from offpath.logic.submit import has_one_time_schedule

logger = logging.getLogger(__name__)


def get_job(job_id: str, *, tenant: str, store: JobStore) -> Job:
    job = store.get(job_id)
    if job is None or job.tenant != tenant:
        raise JobNotFoundError(job_id)
    return job


def cancel_job(
    job_id: str,
    *,
    tenant: str,
    store: JobStore,
    clock: Clock,
    retention: timedelta,
    scheduler: JobScheduler | None = None,
) -> Job:
    """QUEUED, SCHEDULED or RETRYING -> CANCELLED; a later delivery of its message acks without running.
    JobConflictError when the job is running or finished.

    A delayed job's one-time schedule is deleted with it. If that delete fails the cancel still stands:
    the schedule then fires into a cancelled job, which the enqueue function leaves alone."""
    now = clock.now()
    job = store.cancel(job_id, tenant=tenant, now=now, expires_at=now + retention)
    if scheduler is not None and has_one_time_schedule(job.run_at, job.created_at):
        try:
            scheduler.delete_one_time(job.job_id)
        except OffpathError:
            logger.warning(
                "one-time schedule of a cancelled job not deleted; it will fire into nothing",
                extra={"job_id": job.job_id},
            )
    return job
