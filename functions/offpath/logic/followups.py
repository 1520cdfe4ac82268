"""Follow-ups of a job's final state (a batch member's count and its batch's callbacks), never lost nor doubled.

A job with follow-ups (`Job.has_followups`) keeps its place in the sweep index through its final write (its sweep
time then FOLLOWUP_GRACE ahead). The worker (or the api, for a cancel) that wrote it then runs its follow-ups and
clears the sweep time, fenced on the one it wrote; if it dies in between, the sweeper finds the finished job due and
does the same. Each follow-up is idempotent (deterministic ids, conditional writes): a second run changes nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime

from offpath.domain.errors import JobConflictError
from offpath.domain.job import Job
from offpath.domain.ports import Ports
from offpath.logic.batches import batch_member_final

logger = logging.getLogger(__name__)

FollowUp = Callable[[Job, Ports, datetime], None]

FOLLOWUPS: tuple[FollowUp, ...] = (batch_member_final,)


def run_followups(job: Job, ports: Ports, *, now: datetime) -> None:
    """Every follow-up of the finished job, in order; an error stops here (the sweeper runs them again)."""
    for followup in FOLLOWUPS:
        followup(job, ports, now)


def finish_followups(job: Job, ports: Ports) -> None:
    """Run a finished job's follow-ups, then take it out of the sweep index (fenced on the sweep time `job` carries:
    a sweep that got there first has done the same)."""
    if not job.has_followups or not job.status.is_final:
        return
    run_followups(job, ports, now=ports.clock.now())
    try:
        ports.store.clear_followups(job)
    except JobConflictError:
        logger.info("follow-ups already cleared", extra={"job_id": job.job_id})
