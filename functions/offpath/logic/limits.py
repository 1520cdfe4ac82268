"""The rate-limit and concurrency steps of admission (logic/admission.py) and the release of a job's slot.

- Rate limit: one start taken from the key's token bucket (one conditional write); none there, the job waits until
  one is due.
- Concurrency: one of the key's slots held for the attempt the claim is about to take (the job's attempt + 1, its
  fencing token) until the latest a lease of its queue can end; all held, the job looks again later: after 1 or 2
  seconds at first (sooner is not possible: SQS counts visibility in whole seconds), after longer the longer it has
  waited (`look_again_s`), or when the earliest holder's time is up if that comes first. The slot is released after
  the attempt's outcome write (succeeded, retrying, failed), and when
  the claim does not happen. A worker that dies keeps its slot until its time is up: then the next job of the key
  takes it over (fenced: a later attempt's slot is never freed by an earlier one).

A step answers None (go on) or a Wait. The job is read before admission only for a type that needs its payload
(a keyed limit) or its attempt (a concurrency limit); any other type's step reads nothing.
"""

from __future__ import annotations

import hashlib
import logging
import math
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from offpath.domain.errors import StoreUnavailableError
from offpath.domain.job import Job, JobStatus
from offpath.domain.registry import LEASE_MARGIN_S

if TYPE_CHECKING:
    from offpath.domain.registry import JobType
    from offpath.logic.admission import Wait

logger = logging.getLogger("offpath.worker")

# A job over its key's concurrency looks again after uniform(1, ceiling) seconds (jittered, so waiting jobs do not
# come back in step), never later than the earliest holder's time is up. The ceiling is a quarter of how long the job
# has waited, at least 2 s and at most 30 s: a job looks ~8·ln(T/8) times over a wait of T seconds (~29 looks in 5
# minutes, against ~200 at a fixed 1-2 s), and a backlog of W waiting jobs asks ~W/15 looks a second once it has
# waited 2 minutes (against W/1.5). The price is paid by a long wait's end: a freed slot may stay free until the
# next look, at most the ceiling, ~ceiling/(W+1) on average.
LOOK_AGAIN_FIRST_S = 1
LOOK_AGAIN_CEILING_S = (2, 30)
LOOK_AGAIN_GROWTH = 0.25
# How often a release is tried (each try is the SDK's call with its own retries). A slot not given back is held idle
# until its time is up (the queue's worker timeout + ~30 s), so a release is worth another call: it is conditional on
# the attempt, so a second try after a first that landed is refused and changes nothing.
RELEASE_TRIES = 3
# SQS's longest visibility.
MAX_WAIT_S = 43_200
# A slot outlives the lease its claim takes by this much (the lease is computed a few milliseconds after it).
SLOT_MARGIN_S = 1


def needs_job(job_type: JobType) -> bool:
    """Whether admission must read the job first: for the key (in its payload) or the attempt (a slot's token)."""
    limits = job_type.limits
    return limits.keyed or limits.max_concurrency is not None


def scope_of(job_type: JobType, job: Job | None) -> str:
    """What one bucket or one set of slots counts: the type's jobs of one tenant and key, or (unkeyed) all the
    type's jobs. The key is hashed: any text, any length, makes a short partition key."""
    limits = job_type.limits
    if not limits.keyed or job is None:
        return job_type.name
    try:
        key = limits.key_of(
            job.payload if isinstance(limits.concurrency_key, str) else job_type.parse_payload(job.payload)
        )
    except Exception:  # a payload the model no longer takes, or a key function that fails: the key ""
        logger.warning("the job's concurrency key could not be computed; it counts under the key ''")
        key = ""
    digest = hashlib.sha256(f"{job.tenant}\x00{key}".encode()).hexdigest()[:32]
    return f"{job_type.name}#{digest}"


def rate_limit(job_or_message: Any, job_type: JobType, ports: Any, now: datetime) -> Wait | None:
    rule = job_type.limits.rate_limit
    store = getattr(ports, "limits", None)
    if rule is None or store is None:
        return None
    job = _job_of(job_or_message, job_type, ports)
    waited = store.take(scope_of(job_type, job), per_s=rule.rate_per_s, bucket=rule.bucket, now_us=_us(now))
    if waited <= 0:
        return None
    return _wait(math.ceil(waited), "rate_limit")


def concurrency(job_or_message: Any, job_type: JobType, ports: Any, now: datetime) -> Wait | None:
    limit = job_type.limits.max_concurrency
    store = getattr(ports, "limits", None)
    if limit is None or store is None:
        return None
    job = _job_of(job_or_message, job_type, ports)
    attempt = slot_attempt(job)
    if job is None or attempt is None:
        return None  # nothing to run: the claim answers it (not written, or final)
    until = now + timedelta(seconds=lease_bound_s(job_type, ports))
    waited = store.acquire(
        scope_of(job_type, job),
        job_id=job.job_id,
        attempt=attempt,
        until_us=_us(until),
        now_us=_us(now),
        limit=limit,
    )
    if waited <= 0:
        return None
    return _wait(min(math.ceil(waited), look_again_s(job, now, ports.rng)), "concurrency")


def look_again_s(job: Job, now: datetime, rng: Any) -> int:
    """How long a job refused a slot waits before it looks again: longer the longer it has waited."""
    low, high = LOOK_AGAIN_CEILING_S
    waited_s = max(0.0, (now - waiting_since(job)).total_seconds())
    ceiling = min(high, max(low, LOOK_AGAIN_GROWTH * waited_s))
    return round(float(rng.uniform(LOOK_AGAIN_FIRST_S, ceiling)))


def waiting_since(job: Job) -> datetime:
    """When the job became ready to run: its last write (its submit, or the outcome that set its retry), or the
    time it was due, if that is later. A job that waits is never written, so this does not move while it waits."""
    return max(moment for moment in (job.updated_at, job.run_at, job.next_attempt_at) if moment is not None)


def slot_attempt(job: Job | None) -> int | None:
    """The attempt a slot is held for: the one the claim takes (the job's attempt + 1; a FAILED job's next claim
    follows a redrive, which starts its attempts again: 1). None when no claim follows."""
    if job is None or job.status is JobStatus.SCHEDULED:
        return None
    if job.status is JobStatus.FAILED:
        return 1
    if job.status.is_final:
        return None
    return job.attempt + 1


def lease_bound_s(job_type: JobType, ports: Any) -> int:
    """The longest a claim made now can hold its job: the queue's worker timeout plus the lease margin."""
    return int(ports.registry.worker_timeout_s(job_type.queue)) + LEASE_MARGIN_S + SLOT_MARGIN_S


def release_slot(job: Job, job_type: JobType, ports: Any, *, attempt: int | None = None) -> None:
    """Free the slot the job's attempt holds (after its outcome write, or a claim that did not happen). A release
    that fails RELEASE_TRIES times is logged: the slot frees when its time is up."""
    store = getattr(ports, "limits", None)
    if job_type.limits.max_concurrency is None or store is None:
        return
    held = job.attempt if attempt is None else attempt
    scope = scope_of(job_type, job)
    for tries_left in reversed(range(RELEASE_TRIES)):
        try:
            store.release(scope, job_id=job.job_id, attempt=held)
            return
        except StoreUnavailableError:
            if not tries_left:
                logger.exception("the job's concurrency slot could not be released; it frees when its time is up")


def _job_of(job_or_message: Any, job_type: JobType, ports: Any) -> Job | None:
    if isinstance(job_or_message, Job):
        return job_or_message
    if not needs_job(job_type):
        return None
    job: Job | None = ports.store.get(job_or_message.job_id, tenant=job_or_message.tenant)
    return job


def _wait(seconds: int, reason: str) -> Wait:
    from offpath.logic.admission import Wait  # the frame imports this module

    return Wait(seconds=max(1, min(MAX_WAIT_S, seconds)), reason=reason)


def _us(moment: datetime) -> int:
    return int(moment.timestamp() * 1_000_000)
