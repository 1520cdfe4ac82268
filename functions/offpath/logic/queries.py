"""Reading, cancelling and retrying a caller's jobs. Another tenant's job is indistinguishable from no job."""

from __future__ import annotations

import logging
from datetime import timedelta

from offpath.domain.clock import Clock
from offpath.domain.errors import JobNotFoundError, OffpathError, QueueUnavailableError
from offpath.domain.job import Job
from offpath.domain.ports import JobMessage, JobScheduler, JobStore, Ports
from offpath.logic.submit import has_one_time_schedule

logger = logging.getLogger(__name__)


def get_job(job_id: str, *, tenant: str, store: JobStore) -> Job:
    job = store.get(job_id, tenant=tenant)
    if job is None:
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


def retry_job(job_id: str, *, tenant: str, ports: Ports, sweep_grace: timedelta) -> Job:
    """FAILED or CANCELLED -> QUEUED with a fresh attempt budget (one conditional write), then the send.
    A send that fails loses nothing: the job carries a sweep time, and the sweeper sends it when it is
    overdue. The job runs now, whatever its run_at. JobConflictError from any other state.

    A FAILED job's message may still sit in its DLQ. Redriven later, it finds the job QUEUED (it runs the
    job once; this send then finds it running or finished), RUNNING or SUCCEEDED (acknowledged as a
    duplicate): the worker resets only a FAILED job for a redriven message.

    A retry opens a job again, so it counts as a submit: the tenant's quotas (submits per second, open jobs)
    are asked first, and over one it raises QuotaExceededError with nothing written. An admin's redrive of a
    queue's dead letters does not come this way and is not limited."""
    if ports.quotas is not None:
        ports.quotas.admit(tenant, delayed=False)
    now = ports.clock.now()
    job = ports.store.retry_by_hand(job_id, tenant=tenant, now=now, sweep_at=now + sweep_grace)
    ports.metrics.count("JobsRetriedByHand", queue=job.queue, job_type=job.type)
    try:
        ports.queue.send(job.queue, JobMessage.of(job))
    except QueueUnavailableError:
        logger.warning("send failed; the sweeper will send the job", extra={"job_id": job.job_id})
        ports.metrics.count("SendFailed", queue=job.queue, job_type=job.type)
    return job
