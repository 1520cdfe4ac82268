"""What keeps a job that is due from starting now: a pause, its rate limit or its concurrency limit.

The worker's admission (logic/admission.py) makes the decision and writes nothing on the job when a job waits
(a wait costs no write). This module answers the operator's question "why does this job not run?" when the job is
read (GET /jobs/{id}, the console's job page, `offpath status`): the same checks in the same order, read only
(the pause item; the key's slots item or token bucket, for a type that declares a limit), never taking a slot or
a start. A job that is not due (SCHEDULED, RETRYING before its next attempt) or not waiting (RUNNING, final) has no
holdup and costs no read.

The holders of a keyed concurrency limit are the caller's own jobs (a key counts per tenant): they are named.
An unkeyed limit counts every tenant's jobs of the type: only how many run is told.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Literal

from offpath.domain.job import Job, JobStatus
from offpath.logic.limits import scope_of

if TYPE_CHECKING:
    from collections.abc import Callable

    from offpath.domain.limits import LimitStore
    from offpath.domain.pauses import Pauses
    from offpath.domain.registry import JobType

HoldupReason = Literal["paused", "rate_limit", "concurrency"]


@dataclass(frozen=True)
class Holdup:
    reason: HoldupReason
    message: str
    holders: tuple[str, ...] = ()  # the jobs holding the key's slots (a keyed concurrency limit)
    until: datetime | None = None  # when the rate limit has a start again


def due(job: Job, now: datetime) -> bool:
    """Whether the worker would run the job now but for admission: QUEUED, or RETRYING past its next attempt."""
    if job.status is JobStatus.QUEUED:
        return True
    return job.status is JobStatus.RETRYING and (job.next_attempt_at is None or job.next_attempt_at <= now)


def holdup(
    job: Job,
    job_type: JobType | None,
    *,
    pauses: Callable[[], Pauses] | None,
    limits: LimitStore | None,
    now: datetime,
) -> Holdup | None:
    """The first thing that keeps the due `job` waiting, in admission's order (pause, rate limit, concurrency);
    None when nothing does (or the job is not due). `pauses` reads the pause state (called only for a due job)."""
    if job_type is None or not due(job, now):
        return None
    if pauses is not None:
        view = pauses()
        for kind, pause in (("queue", view.queues.get(job.queue)), ("job type", view.job_types.get(job.type))):
            if pause is not None:
                name = job.queue if kind == "queue" else job.type
                why = f" ({pause.reason})" if pause.reason else ""
                return Holdup("paused", f"{kind} {name} is paused{why}; it runs once resumed")
    if limits is None:
        return None
    rules = job_type.limits
    per_key = " for its key" if rules.keyed else ""
    now_us = int(now.timestamp() * 1_000_000)
    if rules.rate_limit is not None:
        rule = rules.rate_limit
        wait = limits.next_start_s(scope_of(job_type, job), per_s=rule.rate_per_s, bucket=rule.bucket, now_us=now_us)
        if wait > 0:
            return Holdup(
                "rate_limit",
                f"rate limit {rule.text}{per_key}: the next start is free in {math.ceil(wait)} s",
                until=now + timedelta(seconds=wait),
            )
    if rules.max_concurrency is not None:
        held = limits.holders(scope_of(job_type, job))
        live = sorted(job_id for job_id, (_, until) in held.items() if until > now_us and job_id != job.job_id)
        if len(live) >= rules.max_concurrency:
            return Holdup(
                "concurrency",
                f"{len(live)} of the {rules.max_concurrency} allowed at once{per_key} are running",
                holders=tuple(live) if rules.keyed else (),
            )
    return None
