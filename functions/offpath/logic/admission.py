"""Admission: the checks the worker makes before it claims a job (docs/flow-control.md).

`ADMISSION` runs in a fixed order: expiry, pause, rate limit, concurrency. A step answers None (go on) or a `Wait`:
the job's message comes back after `seconds`, unclaimed, no attempt spent, the job still QUEUED or RETRYING; or
`Done` (the expiry step): the step ended the job itself (EXPIRED), its message is acknowledged.
A job type that declares no limits and no pause costs no read or write here beyond a cached flag lookup.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from offpath.logic.expiry import expired
from offpath.logic.limits import concurrency, rate_limit
from offpath.logic.pause import paused


@dataclass(frozen=True)
class Wait:
    seconds: int  # when the message should come back (SQS visibility, <= 12 h)
    reason: str  # "paused" | "concurrency" | "rate_limit" (shown in logs and metrics)


@dataclass(frozen=True)
class Done:
    """A step ended the job without running it (the expiry step: EXPIRED); its message is acknowledged."""

    reason: str


Step = Callable[..., Any]

ADMISSION: tuple[Step, ...] = (expired, paused, rate_limit, concurrency)


def admit(job_or_message: Any, job_type: Any, ports: Any, *, now: datetime) -> Wait | Done | None:
    for step in ADMISSION:
        verdict = step(job_or_message, job_type, ports, now=now)
        if verdict is not None:
            return verdict  # type: ignore[no-any-return]
    return None
