"""Chains: a job that names the job to submit when it succeeds (`then`), and jobs that submit jobs.

A job spec may carry `then: {"type", "payload", "then"?}`. It is validated whole at submit (every step's type open to
the tenant, every payload its type's model: logic/submit.py `checked_then`) and kept on the job as validated. When the
job succeeds its next job is submitted exactly once (logic/followups.py `chain_next`), carrying the rest of the chain;
when it fails (or is cancelled) the chain stops there. docs/workflows.md tells the whole of it.
"""

from __future__ import annotations

from typing import Any, Literal

from offpath.domain.job import Job, JobStatus

# At most this many steps after the first job (`then` nested this deep at most).
MAX_CHAIN_STEPS = 10
# The whole `then` of a job as the store keeps it (compact JSON, UTF-8): it rides on every write of the job's item.
MAX_THEN_BYTES = 16 * 1024

ChainState = Literal["pending", "continued", "stopped"]


def chain_state(job: Job) -> ChainState | None:
    """Where a job's chain stands: None when the job has no `then`; "continued" once its next job's id is fixed (its
    success wrote it); "stopped" when the job ended otherwise (FAILED or CANCELLED: no next job, unless a hand retry
    makes it succeed after all); "pending" while it has not finished."""
    if job.then is None:
        return None
    if job.next_job_id is not None:
        return "continued"
    return "stopped" if job.status in (JobStatus.FAILED, JobStatus.CANCELLED) else "pending"


def next_step(job: Job) -> tuple[str, dict[str, Any], dict[str, Any] | None]:
    """The type, payload and remaining chain of the job's next step."""
    assert job.then is not None
    rest = job.then.get("then")
    return str(job.then["type"]), dict(job.then.get("payload") or {}), dict(rest) if rest else None
