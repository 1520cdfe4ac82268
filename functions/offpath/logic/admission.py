"""The checks a worker makes before it claims a job (docs/flow-control.md), in a fixed order: expiry, pause,
rate limit, concurrency. A step answers None (the job may go on), `Wait` (the job waits: no attempt is spent,
its message comes back after `seconds`) or `Done` (the step ended the job itself: its message is acknowledged).
A job type that declares no flow control costs no extra read or write here. Each step lives in its own module
and is one element of ADMISSION."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING

from offpath.domain.admission import Done, Wait
from offpath.logic.expiry import expiry_step

if TYPE_CHECKING:
    from offpath.domain.ports import JobMessage
    from offpath.domain.registry import JobType
    from offpath.logic.process import WorkerPorts

__all__ = ["ADMISSION", "Done", "Step", "Wait", "admit"]

Step = Callable[["JobMessage", "JobType", "WorkerPorts", datetime], "Wait | Done | None"]

ADMISSION: tuple[Step, ...] = (expiry_step,)


def admit(message: JobMessage, job_type: JobType, ports: WorkerPorts, *, now: datetime) -> Wait | Done | None:
    """ADMISSION's steps in order; the first that answers decides."""
    for step in ADMISSION:
        verdict = step(message, job_type, ports, now)
        if verdict is not None:
            return verdict
    return None
