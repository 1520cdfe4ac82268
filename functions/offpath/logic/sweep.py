"""The sweeper: nothing accepted is lost and nothing stays RUNNING forever.

Every job that is not final carries a sweep time in a sparse index. When it passes, the sweeper
looks at the job and acts on what it finds:
- QUEUED or RETRYING and overdue: the message may never have gone out (the write landed, the send
  failed or the process died) -> send it (again: a duplicate delivery is harmless).
- SCHEDULED and overdue: its one-time schedule is missing or late -> enqueue it.
- RUNNING with an expired lease: attempts left -> QUEUED and re-sent; none -> FAILED
  ("lease expired") with its message in the DLQ.
- QUEUED, SCHEDULED or RETRYING past its expiry (`start_by`, the submit's `expires_at`) -> EXPIRED, rather
  than sent or enqueued again (logic/expiry.py).
Before acting it moves the sweep time on with a write fenced on the time it saw, so when two
sweeps overlap only one of them acts on a job.

A queue backlog is not a lost message. Since the api sends before it writes, an overdue QUEUED job in
the sweep index is one whose send failed, or one written before it was sent (a batch submit, a delayed
job enqueued, a job requeued, redriven or retried by hand): most of them are on their queue, waiting
behind others. So before re-sending a queue's overdue QUEUED or RETRYING jobs the sweeper reads how many
messages wait on the queue (visible or delayed: one GetQueueAttributes per queue per sweep, and only for
a queue with such a job) and ranks those jobs by the time they went on the queue, oldest first. The k-th
is deferred while at least k messages wait (enough for its own to be among them, behind older ones) and
it has waited less than its queue class's `oldest_age_alarm_s` (a backlog older than that is not
healthy: its alarm fires, and re-sends go on as before, backing off). Messages in flight are not
counted: they are being worked on (or wait for a retry's backoff, or for a dead worker's lease to end),
and a queue that keeps up holds some at any time; a backlog is what waits. So a job whose send failed
is re-sent at once on a queue that keeps up, and at the latest once it has waited its queue class's
oldest-age alarm threshold behind a backlog. A deferred job is looked at again after as long as it has
waited so far (at least the grace, never past that threshold): a few writes per job of a long backlog,
not one a sweep. A queue whose size cannot be read defers nothing.

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
from offpath.logic.followups import settle
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
    # Re-sends wait while the queue holds enough messages for the job's own to be among them (above).
    backlog_aware: bool = True


@dataclass
class SweepReport:
    resent: int = 0
    enqueued: int = 0
    requeued: int = 0
    failed: int = 0
    # Waiting jobs past their expiry, ended EXPIRED.
    expired: int = 0
    deferred: int = 0
    # Of `deferred`: overdue QUEUED or RETRYING jobs not re-sent because their queue holds a backlog.
    backlog: int = 0
    # Jobs whose sweep raised (and the due-jobs query, if it failed): each stays due for the next sweep.
    errors: int = 0
    # Final jobs whose follow-ups (logic/followups.py) the sweeper ran in their worker's stead.
    followed_up: int = 0

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
    backlog = Backlog(ports, _ranks(due, policy, now)) if policy.backlog_aware else None
    for job in due:
        with bound_job_id(job.job_id):
            try:
                _sweep_one(job, ports, policy, now, report, backlog)
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


def _resend_due(job: Job, policy: SweepPolicy, now: datetime) -> bool:
    """An overdue QUEUED or RETRYING job: its message may be missing."""
    if job.status is JobStatus.QUEUED:
        return True
    return job.status is JobStatus.RETRYING and not (job.next_attempt_at and job.next_attempt_at + policy.grace > now)


def _on_queue_since(job: Job) -> datetime:
    """When the job's message went (or should have gone) on its queue: its retry's end, or its last change."""
    return job.next_attempt_at if job.status is JobStatus.RETRYING and job.next_attempt_at else job.updated_at


def _ranks(due: list[Job], policy: SweepPolicy, now: datetime) -> dict[str, int]:
    """Each overdue QUEUED or RETRYING job's rank on its queue among this sweep's: 1 for the oldest."""
    by_queue: dict[str, list[Job]] = {}
    for job in due:
        if _resend_due(job, policy, now):
            by_queue.setdefault(job.queue, []).append(job)
    ranks: dict[str, int] = {}
    for jobs in by_queue.values():
        for rank, job in enumerate(sorted(jobs, key=lambda j: (_on_queue_since(j), j.job_id)), start=1):
            ranks[job.job_id] = rank
    return ranks


class Backlog:
    """The sizes of the queues this sweep re-sends to, each read once (when first needed)."""

    def __init__(self, ports: Ports, ranks: dict[str, int]) -> None:
        self.ports = ports
        self.ranks = ranks
        self._depths: dict[str, int | None] = {}

    def depth(self, queue: str) -> int | None:
        if queue not in self._depths:
            try:
                self._depths[queue] = self.ports.queue.depth(queue)
            except Exception:
                logger.exception("the size of queue %s could not be read; its overdue jobs are re-sent", queue)
                self.ports.metrics.count("QueueDepthUnread", queue=queue, job_type=UNKNOWN)
                self._depths[queue] = None
        return self._depths[queue]

    def healthy_until(self, job: Job) -> datetime:
        """Until when the job's message may still be waiting in a healthy backlog: its queue class's
        oldest-age alarm threshold after it went on the queue."""
        queue_class = self.ports.registry.queues.get(job.queue)
        alarm_s = queue_class.oldest_age_alarm_s if queue_class is not None else 0
        return _on_queue_since(job) + timedelta(seconds=alarm_s)

    def holds(self, job: Job, now: datetime) -> bool:
        """Whether the job's message is likely on its queue behind older ones (module docstring)."""
        if now >= self.healthy_until(job):
            return False
        depth = self.depth(job.queue)
        return depth is not None and depth >= self.ranks.get(job.job_id, depth + 1)

    def look_again(self, job: Job, now: datetime, policy: SweepPolicy) -> datetime:
        """When to look at a deferred job again: after as long again as it has waited (at least the grace),
        so a long backlog costs each of its jobs a few deferrals, and never after its healthy time."""
        waited = max(policy.grace, now - _on_queue_since(job))
        return min(now + waited, max(now + timedelta(seconds=1), self.healthy_until(job)))


def _sweep_one(
    job: Job, ports: Ports, policy: SweepPolicy, now: datetime, report: SweepReport, backlog: Backlog | None = None
) -> None:
    status = job.status
    if status.is_final:
        # Its worker wrote the final state but did not settle its follow-ups (it died, or they failed): run them.
        if settle(job, ports, now=now):
            report.followed_up += 1
            logger.warning("a final job's follow-ups were run by the sweeper")
        return
    if status is not JobStatus.RUNNING and job.start_by is not None and job.start_by <= now:
        ports.store.expire(job.job_id, tenant=job.tenant, now=now, expires_at=now + policy.retention)
        report.expired += 1
        logger.info("job past its expiry; expired")
        return
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
            if job.has_followups:
                from offpath.logic.followups import finish_followups

                finish_followups(job.replace(status=JobStatus.FAILED, sweep_at=job.followup_sweep_at(now)), ports)
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
        if backlog is not None and backlog.holds(job, now):
            ports.store.reschedule_sweep(job, sweep_at=backlog.look_again(job, now, policy), resent=False)
            report.deferred += 1
            report.backlog += 1
            return
        interval = min(policy.max_resend_interval, policy.grace * 2**job.resends)
        ports.store.reschedule_sweep(job, sweep_at=now + interval, resent=True)
        _stuck(ports, job)
        ports.queue.send(job.queue, JobMessage.of(job), delay_s=delay_seconds(job, now))
        report.resent += 1
        logger.warning("job overdue on its queue; message sent again (resend %d)", job.resends + 1)


def _stuck(ports: Ports, job: Job) -> None:
    ports.metrics.count("StuckJobsFound", queue=job.queue, job_type=job.type)
