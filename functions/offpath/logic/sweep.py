"""The sweeper: nothing accepted is lost and nothing stays RUNNING forever.

Every job that is not final carries a sweep time in a sparse index. When it passes, the sweeper
looks at the job and acts on what it finds:
- QUEUED or RETRYING and overdue: the message may never have gone out (the write landed, the send
  failed or the process died) -> send it (again: a duplicate delivery is harmless).
- SCHEDULED and overdue: its one-time schedule is missing or late -> enqueue it.
- RUNNING with an expired lease: attempts left -> QUEUED and re-sent; none -> FAILED
  ("lease expired") with its message in the DLQ.
Before acting it moves the sweep time on with a write fenced on the time it saw, so when two
sweeps overlap only one of them acts on a job.

A sweep of limited size (`max_jobs`) is shared out round-robin across tenants (`domain.job.fair_share`):
one tenant's flood of due jobs does not keep another tenant's due job out of it. The window it is shared out
of is each shard's `max_jobs` oldest due keys (the index holds keys only; a tenant is known once its item is
read), so a flood larger than that delays another tenant's job by the sweeps it takes to move the flood on.

One job never stops a sweep: whatever sweeping it raises is logged with its job id and counted
(`SweepErrors`), the job stays due and the sweep goes on with the next. A query of due jobs that
fails is logged and counted the same way, and the sweep ends without raising.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from offpath.domain.errors import JobConflictError, QueueUnavailableError, StoreUnavailableError
from offpath.domain.job import Job, JobStatus
from offpath.domain.ports import JobMessage, Ports
from offpath.logic.submit import delay_seconds
from offpath.observability import bound_job_id

logger = logging.getLogger("offpath.sweeper")

UNKNOWN = "unknown"


@dataclass(frozen=True)
class SweepPolicy:
    grace: timedelta = timedelta(minutes=2)
    retention: timedelta = timedelta(days=7)
    max_jobs: int = 500
    # Re-sends of one job back off (grace, 2x, 4x, ...) so a long backlog is not flooded with copies.
    max_resend_interval: timedelta = timedelta(hours=1)


@dataclass
class SweepReport:
    resent: int = 0
    enqueued: int = 0
    requeued: int = 0
    failed: int = 0
    deferred: int = 0
    # Jobs whose sweep raised (and the due-jobs query, if it failed): each stays due for the next sweep.
    errors: int = 0

    @property
    def stuck(self) -> int:
        return self.resent + self.enqueued + self.requeued + self.failed


def sweep(ports: Ports, policy: SweepPolicy) -> SweepReport:
    now = ports.clock.now()
    report = SweepReport()
    try:
        due = ports.store.due_for_sweep(now=now, limit=policy.max_jobs)
    except Exception:
        logger.exception("the query of due jobs failed; nothing is swept this time")
        ports.metrics.count("SweepErrors", queue=UNKNOWN, job_type=UNKNOWN)
        report.errors += 1
        due = []
    for job in due:
        with bound_job_id(job.job_id):
            try:
                _sweep_one(job, ports, policy, now, report)
            except JobConflictError:
                logger.info("job changed while being swept; left to its new owner")
            except (StoreUnavailableError, QueueUnavailableError):
                logger.exception("sweep of one job failed; it stays due and is tried next sweep")
            except Exception:
                logger.exception("sweep of one job raised; it stays due and the sweep goes on")
                ports.metrics.count("SweepErrors", queue=job.queue, job_type=job.type)
                report.errors += 1
    for job_type in ports.registry.job_types.values():
        # A zero for every type keeps the stuck-jobs alarm's metric continuous.
        ports.metrics.count("StuckJobsFound", 0, queue=job_type.queue, job_type=job_type.name)
    if report.stuck:
        logger.warning("sweep found stuck jobs", extra=vars(report))
    return report


def _sweep_one(job: Job, ports: Ports, policy: SweepPolicy, now: datetime, report: SweepReport) -> None:
    status = job.status
    if status is JobStatus.RUNNING:
        if not job.lease_expired(now):
            assert job.lease_until is not None
            ports.store.reschedule_sweep(job, sweep_at=job.lease_until + timedelta(seconds=1), resent=False)
            report.deferred += 1
            return
        ports.store.reschedule_sweep(job, sweep_at=now + policy.grace, resent=False)
        _stuck(ports, job)
        if job.attempt < job.max_attempts:
            requeued = ports.store.requeue_expired_lease(job, now=now, sweep_at=now + policy.grace)
            ports.queue.send(requeued.queue, JobMessage.of(requeued))
            report.requeued += 1
            logger.warning("lease expired; job requeued for attempt %d", job.attempt + 1)
        else:
            ports.queue.send_to_dlq(job.queue, JobMessage.of(job), reason="lease expired")
            ports.store.fail_expired_lease(job, now=now, expires_at=now + policy.retention)
            report.failed += 1
            logger.error("lease expired on the last attempt; job failed")
        return
    if status is JobStatus.SCHEDULED:
        due = (job.run_at or now) + policy.grace
        if due > now:
            ports.store.reschedule_sweep(job, sweep_at=due, resent=False)
            report.deferred += 1
            return
        ports.store.reschedule_sweep(job, sweep_at=now + policy.grace, resent=False)
        _stuck(ports, job)
        enqueued = ports.store.enqueue_scheduled(job.job_id, tenant=job.tenant, now=now, sweep_at=now + policy.grace)
        ports.queue.send(enqueued.queue, JobMessage.of(enqueued))
        report.enqueued += 1
        logger.warning("scheduled job overdue (one-time schedule missing or late); enqueued")
        return
    if status is JobStatus.RETRYING and job.next_attempt_at and job.next_attempt_at + policy.grace > now:
        ports.store.reschedule_sweep(job, sweep_at=job.next_attempt_at + policy.grace, resent=False)
        report.deferred += 1
        return
    if status in (JobStatus.QUEUED, JobStatus.RETRYING):
        interval = min(policy.max_resend_interval, policy.grace * 2**job.resends)
        ports.store.reschedule_sweep(job, sweep_at=now + interval, resent=True)
        _stuck(ports, job)
        ports.queue.send(job.queue, JobMessage.of(job), delay_s=delay_seconds(job, now))
        report.resent += 1
        logger.warning("job overdue on its queue; message sent again (resend %d)", job.resends + 1)


def _stuck(ports: Ports, job: Job) -> None:
    ports.metrics.count("StuckJobsFound", queue=job.queue, job_type=job.type)
