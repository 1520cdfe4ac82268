"""Follow-ups of a job's final state: what must happen exactly once after it (a chain's next job, docs/workflows.md;
a batch member's count and its batch's callbacks, docs/batches.md).

The final-state write of a job that has follow-ups (`followups_due`) keeps it in the sweep index (its sweep time
FOLLOWUP_GRACE ahead) instead of taking it out. After that write the worker runs the follow-ups (`settle`) and takes
the job out of the index with a write fenced on the sweep time it set. A worker that dies in between, or whose
follow-up fails (the store or queue unavailable, the tenant over a quota), leaves the job due: the sweeper, finding a
due job in a final state, settles it the same way. A plain job (no follow-ups) costs nothing here: no extra write, no
extra read.

Each follow-up in FOLLOWUPS is idempotent: whatever it creates has an id fixed before it runs (a chain's next job's
id is written by the parent's SUCCEED write, once ever) and is created only if absent, so a run repeated after a
crash, by an overlapping sweep or after a lost response changes nothing the second time.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from offpath.domain.chain import next_step
from offpath.domain.errors import JobConflictError
from offpath.domain.ids import created_millis
from offpath.domain.job import Job, JobStatus
from offpath.domain.ports import Ports

logger = logging.getLogger("offpath.followups")

# How long a job whose follow-ups are due waits in the sweep index before the sweeper runs them in the worker's stead.
FOLLOWUP_GRACE = timedelta(seconds=30)
# A job a follow-up makes is in the sweep index this long after it was made, unless its message went out first.
MADE_JOB_GRACE = timedelta(minutes=2)

Followup = Callable[[Job, Ports, datetime], None]


def followups_due(job: Job, outcome: JobStatus) -> bool:
    """Whether the job, ending in `outcome`, has follow-ups to run (its final write then keeps it in the sweep
    index). A chain goes on only from a success; a batch member's every final state is counted (`Job.has_followups`,
    which the store's final writes keep in the sweep index themselves)."""
    return (job.then is not None and outcome is JobStatus.SUCCEEDED) or job.has_followups


def chain_next(job: Job, ports: Ports, now: datetime) -> None:
    """A SUCCEEDED job with `then`: its next job, under the id its SUCCEED write fixed, made if absent. It carries the
    rest of the chain, names its parent, and runs with `ctx.parent` (the parent's id and result)."""
    if job.status is not JobStatus.SUCCEEDED or job.then is None:
        return
    if job.next_job_id is None:
        logger.error("a succeeded chain step without its next job's id; the chain stops here")
        return
    # The submit path is imported here, not at the worker's init (tests/unit/test_cold_imports.py): a worker whose
    # jobs end no chain never loads it.
    from offpath.logic.submit import payload_hash, submit_made

    type_name, payload, rest = next_step(job)
    job_type = ports.registry.job_type(type_name)
    if job_type is None:
        # Validated at submit; a deployment since then removed the type. Nothing can run it: the chain stops here.
        logger.error("the chain's next job type %s is not in this deployment; the chain stops here", type_name)
        ports.metrics.count("ChainStepsDropped", queue=job.queue, job_type=type_name)
        return
    made_at = datetime.fromtimestamp(created_millis(job.next_job_id) / 1000, UTC)
    submitted = submit_made(
        Job(
            job_id=job.next_job_id,
            tenant=job.tenant,
            type=job_type.name,
            queue=job_type.queue,
            payload=payload,
            payload_hash=payload_hash(job_type.name, payload),
            status=JobStatus.QUEUED,
            created_at=made_at,
            updated_at=now,
            max_attempts=job_type.max_attempts,
            submission_id=f"then:{job.job_id}",
            sweep_at=now + MADE_JOB_GRACE,
            trace_id=job.trace_id,
            then=rest,
            parent_job_id=job.job_id,
        ),
        ports,
    )
    if not submitted.replayed:
        logger.info("the chain's next job submitted", extra={"next_job_id": job.next_job_id})


def batch_member_final(job: Job, ports: Ports, now: datetime) -> None:
    """A batch member's final state counted, and its batch's callbacks (logic/batches.py), imported when a batch
    member first ends: a worker whose jobs are in no batch never loads it."""
    if job.batch_id is None:
        return
    from offpath.logic.batches import batch_member_final as count_member

    count_member(job, ports, now)


# The follow-ups, in the order they run; each (job, ports, now) -> None and idempotent.
FOLLOWUPS: tuple[Followup, ...] = (chain_next, batch_member_final)


def run_followups(job: Job, ports: Ports, *, now: datetime) -> None:
    """Run every follow-up of a job in a final state (each does nothing when it does not apply)."""
    for followup in FOLLOWUPS:
        followup(job, ports, now)


def settle(job: Job, ports: Ports, *, now: datetime) -> bool:
    """Run a final job's follow-ups, then take it out of the sweep index (fenced on `job.sweep_at`). False when they
    did not all run (logged and counted): the job stays due, and the sweeper settles it later."""
    try:
        run_followups(job, ports, now=now)
    except Exception:
        logger.warning("the job's follow-ups did not run; the sweeper runs them", exc_info=True)
        ports.metrics.count("FollowupsDeferred", queue=job.queue, job_type=job.type)
        return False
    try:
        ports.store.clear_followups(job)
    except JobConflictError:
        # Another settle took it out first, or a hand retry made the job run again (its next end settles it).
        logger.info("the job's follow-ups were already settled")
    except Exception:
        logger.warning("the job's follow-ups ran; it stays in the sweep index until a sweep", exc_info=True)
    return True


def finish_followups(job: Job, ports: Ports) -> None:
    """A job written final by a path that is not the worker's success (a failure, a cancel, an expired lease): its
    follow-ups settled now when it has any (a batch member); the sweeper settles what this does not."""
    if not job.has_followups or not job.status.is_final:
        return
    settle(job, ports, now=ports.clock.now())
