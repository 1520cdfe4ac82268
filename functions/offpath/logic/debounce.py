"""Debounce: a later submit of the same type by the same tenant under the same debounce key, within the earlier
one's window, supersedes it. The superseded job ends CANCELLED (`cancel_reason` "superseded", `superseded_by`
naming the job that took its place); the last job of a burst runs `seconds` after its own submit (its run_at).

Race-free with one record per tenant, type and key (`DEBOUNCE#...`, adapters/dynamodb_store.py) naming the burst's
current survivor: each debounced submit, once its job is accepted, puts itself in the record in one write that
hands back the record it replaced (PutItem, ReturnValues ALL_OLD). Puts are atomic, so concurrent submits form one
order, each seeing exactly its predecessor; each cancels its predecessor when that one's window had not ended (a
conditional CANCEL: it loses harmlessly to a job that already started or was cancelled). Only the last put's job
is left waiting.

A superseded job names the job that superseded it; when its own message comes (its run_at: `seconds` after its
submit, acknowledged without running) the worker reads the key's record once and, if a later job of the same burst
has taken the place since, names that one (`name_survivor`: one write, fenced on the name it replaces). Every
submit of a burst that falls within the first one's window thus names the job that runs. A later job counts as the
same burst only when it was submitted within the superseded job's window (all submits between lie within one
window, so none of their gaps ended the burst); otherwise the name stays (following the names leads to the job
that ran).

What it costs: one record write per debounced submit (1 write unit: the record is ~200 bytes) and, for a submit
that supersedes, the predecessor's cancel (one job-item write); per superseded job, one read of the record when its
message comes and, when the burst went on, one write; nothing for a submit without debounce."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from offpath.domain.errors import JobConflictError, JobNotFoundError, OffpathError
from offpath.domain.job import SUPERSEDED, Job
from offpath.domain.ports import DebounceRecord, JobStore, Metrics, Ports

logger = logging.getLogger(__name__)

MAX_DEBOUNCE_KEY_LENGTH = 128
# Printable ASCII, no space at either end (as an idempotency key).
DEBOUNCE_KEY_PATTERN = r"^[!-~]([ -~]*[!-~])?$"
MIN_DEBOUNCE_S = 1
# At most an SQS delay (logic/submit.py SQS_MAX_DELAY_S): a debounced job is a delayed message, never a one-time
# schedule, so superseding one is its cancel alone.
MAX_DEBOUNCE_S = 900


def supersede_previous(job: Job, ports: Ports, *, retention: timedelta) -> Job | None:
    """After a debounced job was accepted: make it the survivor of its key, and cancel the job it replaced when
    that one's window had not ended. Returns the superseded job (None when there was none to supersede).
    A failure here leaves the earlier job to run as well (logged): never the new job's refusal."""
    if job.debounce_key is None or job.debounce_s is None:
        return None
    now = ports.clock.now()
    record = DebounceRecord(job.job_id, now, now + timedelta(seconds=job.debounce_s))
    try:
        previous = ports.store.swap_debounce(job.tenant, job.type, job.debounce_key, record)
    except OffpathError:
        logger.warning("debounce record not written; an earlier job under the key may run too")
        ports.metrics.count("DebounceFailed", queue=job.queue, job_type=job.type)
        return None
    if previous is None or previous.job_id == job.job_id or previous.window_end <= now:
        return None
    try:
        superseded = ports.store.cancel(
            previous.job_id, tenant=job.tenant, now=now, expires_at=now + retention, superseded_by=job.job_id
        )
    except (JobConflictError, JobNotFoundError):
        # It started (or finished, or was cancelled) already: nothing to supersede.
        return None
    except OffpathError:
        logger.warning("the superseded job was not cancelled; it may run too", extra={"superseded": previous.job_id})
        ports.metrics.count("DebounceFailed", queue=job.queue, job_type=job.type)
        return None
    ports.metrics.count("JobsSuperseded", queue=job.queue, job_type=job.type)
    logger.info("debounced job superseded", extra={"superseded": superseded.job_id, "superseded_by": job.job_id})
    return superseded


def name_survivor(job: Job, store: JobStore, metrics: Metrics, *, now: datetime) -> None:
    """A superseded job's message came (its run_at): name the burst's survivor if a later job of its burst took the
    place of the one it names. Never fails the delivery: whatever it meets is logged."""
    if job.cancel_reason != SUPERSEDED or job.superseded_by is None:
        return
    if job.debounce_key is None or job.debounce_s is None:
        return
    try:
        record = store.debounce_record(job.tenant, job.type, job.debounce_key)
        if record is None or record.job_id in (job.job_id, job.superseded_by):
            return
        if record.submitted_at > job.created_at + timedelta(seconds=job.debounce_s):
            return  # submitted after this job's window: perhaps another burst; the name stays
        store.name_survivor(job.job_id, tenant=job.tenant, seen=job.superseded_by, survivor=record.job_id, now=now)
    except (JobConflictError, JobNotFoundError):
        return
    except OffpathError:
        logger.warning("a superseded job's survivor was not named", exc_info=True)
        metrics.count("DebounceFailed", queue=job.queue, job_type=job.type)
