"""Reading, cancelling and retrying a caller's jobs. Another tenant's job is indistinguishable from no job."""

from __future__ import annotations

import logging
from datetime import timedelta

from offpath.domain.clock import Clock
from offpath.domain.errors import DeadLetterNotFoundError, JobNotFoundError, OffpathError, QueueUnavailableError
from offpath.domain.job import LEASE_EXPIRED_OUTCOME, Job, JobStatus
from offpath.domain.ports import JobMessage, JobScheduler, JobStore, Ports
from offpath.logic.submit import delay_seconds, dispatch, has_one_time_schedule

logger = logging.getLogger(__name__)

# How an attempt ends that puts its job's message in the DLQ (logic/process.py `_fail`, the expired lease paths).
DEAD_LETTER_OUTCOMES = frozenset({JobStatus.FAILED.value, LEASE_EXPIRED_OUTCOME})


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
    operation: str | None = None,
) -> Job:
    """QUEUED, SCHEDULED or RETRYING -> CANCELLED; a later delivery of its message acks without running.
    JobConflictError when the job is running or finished. `operation`: the bulk operation cancelling it.

    A delayed job's one-time schedule is deleted with it. If that delete fails the cancel still stands:
    the schedule then fires into a cancelled job, which the enqueue function leaves alone."""
    now = clock.now()
    job = store.cancel(job_id, tenant=tenant, now=now, expires_at=now + retention, operation=operation)
    if scheduler is not None and has_one_time_schedule(job.run_at, job.created_at):
        try:
            scheduler.delete_one_time(job.job_id)
        except OffpathError:
            logger.warning(
                "one-time schedule of a cancelled job not deleted; it will fire into nothing",
                extra={"job_id": job.job_id},
            )
    return job


def retry_job(
    job_id: str,
    *,
    tenant: str,
    ports: Ports,
    sweep_grace: timedelta,
    operation: str | None = None,
    now_asked: bool = False,
) -> Job:
    """FAILED, CANCELLED or EXPIRED -> QUEUED with a fresh attempt budget (one conditional write), then the send.
    Its expiry (and a superseded job's cancel reason) is cleared.
    A send that fails loses nothing: the job carries a sweep time, and the sweeper sends it when it is
    overdue. JobConflictError from any other state.

    A CANCELLED job that was delayed keeps its run_at while it is still ahead (unless `now_asked`): further off
    than an SQS delay reaches it is SCHEDULED again and its one-time schedule is made again (as a submit does);
    nearer, it is QUEUED and its message sent with the delay left. A run_at that has passed, a FAILED job, or
    `now_asked`: the job runs now.

    Between the write and the send, the job's dead letter is removed (best effort: `_remove_dead_letter`), so
    the DLQ depth and its alarm come down; no new copy can be there yet, as the job is QUEUED until this send.
    A FAILED job's message the removal missed (a deep DLQ, SQS unavailable) stays in its DLQ. Redriven later,
    it finds the job QUEUED (it runs the job once; this send then finds it running or finished), RUNNING or
    SUCCEEDED (acknowledged as a duplicate): the worker resets only a FAILED job for a redriven message.

    A retry opens a job again, so it counts as a submit: the tenant's quotas (submits per second, open jobs)
    are asked first, and over one it raises QuotaExceededError with nothing written. An admin's redrive of a
    queue's dead letters does not come this way and is not limited. `operation`: the bulk operation retrying it
    (marked on the job by the same write: logic/bulk.py)."""
    now = ports.clock.now()
    before = None if now_asked else ports.store.get(job_id, tenant=tenant)
    run_at = before.run_at if before is not None and before.status is JobStatus.CANCELLED else None
    later = run_at is not None and run_at > now
    scheduled = later and has_one_time_schedule(run_at, now)
    if ports.quotas is not None:
        ports.quotas.admit(tenant, delayed=scheduled)
    due = run_at if later and run_at is not None else now
    job = ports.store.retry_by_hand(
        job_id, tenant=tenant, now=now, sweep_at=due + sweep_grace, operation=operation, scheduled=scheduled
    )
    ports.metrics.count("JobsRetriedByHand", queue=job.queue, job_type=job.type)
    if scheduled:
        dispatch(ports, job)
        return job
    _remove_dead_letter(job, ports)
    try:
        ports.queue.send(job.queue, JobMessage.of(job), delay_s=delay_seconds(job, now) if later else 0)
    except QueueUnavailableError:
        logger.warning("send failed; the sweeper will send the job", extra={"job_id": job.job_id})
        ports.metrics.count("SendFailed", queue=job.queue, job_type=job.type)
    return job


def _remove_dead_letter(job: Job, ports: Ports) -> None:
    """The retried job's dead letter, if it has one, is deleted. Never fails the retry: what is left is
    acknowledged as a duplicate when it is redriven. A job whose last attempt did not fail it (a CANCELLED job
    retried) has none: its retry does not search the DLQ."""
    history = job.attempt_history
    if not history or history[-1].outcome not in DEAD_LETTER_OUTCOMES:
        return
    try:
        removed = ports.queue.remove_dead_letter(job.queue, job.job_id)
    except Exception:  # whatever the removal meets, the retry stands
        logger.warning("dead letter of a retried job not removed", extra={"job_id": job.job_id})
        ports.metrics.count("DeadLetterRemovalFailed", queue=job.queue, job_type=job.type)
        return
    if removed is not None:
        ports.metrics.count("DeadLettersRemoved", queue=job.queue, job_type=job.type)


def discard_dead_letter(queue: str, job_id: str, *, ports: Ports) -> Job:
    """Remove the job's message from the queue's DLQ and mark the job (which stays FAILED) discarded: a
    redrive no longer runs it. The message names the job's tenant (the caller is an operator).
    DeadLetterNotFoundError when the DLQ holds no message of the job (within the search's bound);
    JobNotFoundError when the message named a job that no longer exists (its message is gone all the same);
    JobConflictError when the job is no longer FAILED (a stale copy, removed)."""
    message = ports.queue.remove_dead_letter(queue, job_id)
    if message is None:
        raise DeadLetterNotFoundError(job_id)
    job = ports.store.discard(job_id, tenant=message.tenant, now=ports.clock.now())
    ports.metrics.count("DeadLettersDiscarded", queue=job.queue, job_type=job.type)
    return job
