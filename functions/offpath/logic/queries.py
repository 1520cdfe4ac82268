"""Reading and cancelling a caller's jobs. Another tenant's job is indistinguishable from no job."""

from __future__ import annotations

from datetime import timedelta

from offpath.domain.clock import Clock
from offpath.domain.errors import JobNotFoundError
from offpath.domain.job import Job
from offpath.domain.ports import JobStore


def get_job(job_id: str, *, tenant: str, store: JobStore) -> Job:
    job = store.get(job_id)
    if job is None or job.tenant != tenant:
        raise JobNotFoundError(job_id)
    return job


def cancel_job(job_id: str, *, tenant: str, store: JobStore, clock: Clock, retention: timedelta) -> Job:
    """QUEUED, SCHEDULED or RETRYING -> CANCELLED; a later delivery of its message acks without running.
    JobConflictError when the job is running or finished."""
    now = clock.now()
    return store.cancel(job_id, tenant=tenant, now=now, expires_at=now + retention)
