"""Admission: the checks the worker makes before it claims a job, in a fixed order (expiry, pause, rate limit,
concurrency). A job that must wait spends no attempt, stays QUEUED or RETRYING, and its message comes back after
`Wait.seconds` (logic/process.py changes its visibility). A job type without any of them costs no read or write
here beyond a cached flag lookup.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from offpath.logic.limits import concurrency, rate_limit


@dataclass(frozen=True)
class Wait:
    seconds: int  # when the message should come back (SQS visibility, <= 12 h)
    reason: str  # "paused" | "concurrency" | "rate_limit" (shown in logs/metrics; may be kept on the job)


Step = Callable[..., Any]

# Order fixed: expiry, pause, rate limit, concurrency.
ADMISSION: tuple[Step, ...] = (
    rate_limit,
    concurrency,
)


def admit(job_or_message: Any, job_type: Any, ports: Any, *, now: datetime) -> Any:
    """The first step's answer that is not None (a Wait, or a step's own marker), else None: the job may run."""
    for step in ADMISSION:
        answer = step(job_or_message, job_type, ports, now=now)
        if answer is not None:
            return answer
    return None
