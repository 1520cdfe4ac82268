"""Expiry: a job not started by its `start_by` (the submit's `expires_at`) ends EXPIRED without running.

The submit checks the time (`parse_expires_at`); the job's message carries it, so the worker's first check
before a claim (`expired`, the first of logic/admission.py's ADMISSION) needs no read: a message whose time
has passed gets one conditional write QUEUED/SCHEDULED/RETRYING -> EXPIRED (guarded by `start_by <= now` on the
item, so a stale message of a job retried by hand since, or a job that started, is left to the claim), and its
message is acknowledged. A job without an expiry costs nothing here. The sweeper expires a due job whose expiry
has passed rather than sending its message again (logic/sweep.py)."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from offpath.domain.errors import InvalidRequestError, JobConflictError, JobNotFoundError

if TYPE_CHECKING:
    from offpath.domain.ports import JobMessage
    from offpath.domain.registry import JobType
    from offpath.logic.admission import Done
    from offpath.logic.process import WorkerPorts

logger = logging.getLogger("offpath.worker")

FIELD = "expires_at"
REASON = "expired"


def check_expires_at(when: datetime, *, now: datetime, run_at: datetime | None, retention: timedelta) -> datetime:
    """A submit's expires_at (already read as an RFC 3339 time): in the future, after run_at when both are given,
    at most the retention ahead (the job's item would be gone before it could expire otherwise)."""
    if when <= now:
        raise InvalidRequestError(FIELD, "expires_at must be in the future")
    if run_at is not None and when <= run_at:
        raise InvalidRequestError(FIELD, "expires_at must be after run_at (the job could never start)")
    if when - now > retention:
        raise InvalidRequestError(FIELD, f"expires_at may be at most {retention.days} days ahead (the retention)")
    return when


def expired(message: JobMessage, job_type: JobType, ports: WorkerPorts, *, now: datetime) -> Done | None:
    """Before a claim: a message whose job's expiry has passed ends the job EXPIRED (one conditional write) and is
    acknowledged. None (the claim goes on) when the job has no expiry, it has not come, or the job is no longer
    waiting (the claim then decides as it always does)."""
    if message.start_by is None or message.start_by > now:
        return None
    try:
        job = ports.store.expire(message.job_id, tenant=message.tenant, now=now, expires_at=now + ports.retention)
    except (JobConflictError, JobNotFoundError):
        return None
    logger.info("job expired before it started; acknowledged without running", extra={"expired_at": now.isoformat()})
    ports.metrics.count("JobsExpiredUnrun", queue=job.queue, job_type=job.type)
    from offpath.logic.admission import Done  # admission imports this module: imported when first needed

    return Done(REASON)
