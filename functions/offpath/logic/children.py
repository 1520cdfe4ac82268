"""Jobs that submit jobs: `ctx.submit(type, payload, key=...)` inside a job function.

The child's id derives from the parent's id and the caller's key (`domain.ids.derived_job_id`, its time the parent's
creation), so an attempt retried after a crash that submits again meets the child it made before: no duplicate. The
child is an ordinary job of the parent's tenant: its type must be open to the tenant, its payload its model's, and
it counts against the tenant's quotas like any submit (over one, `ctx.submit` raises QuotaExceededError and the
attempt is retried later).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from offpath.domain.errors import (
    IdempotencyConflictError,
    InvalidRequestError,
    JobTypeForbiddenError,
    PayloadTooLargeError,
    PermanentError,
)
from offpath.domain.ids import derived_job_id
from offpath.domain.job import Job
from offpath.domain.ports import Ports
from offpath.logic.submit import MAX_IDEMPOTENCY_KEY_LENGTH, SubmitPolicy, SubmitRequest, build_job, submit_made


@dataclass(frozen=True)
class ChildSubmitter:
    """The worker's submit port: `ctx.submit` through the submit path's validation, quotas and send-then-write."""

    ports: Ports
    policy: SubmitPolicy = field(default_factory=SubmitPolicy)

    def submit_child(self, parent: Job, job_type: str, payload: dict[str, Any], *, key: str) -> Job:
        if not isinstance(key, str) or not 1 <= len(key) <= MAX_IDEMPOTENCY_KEY_LENGTH:
            raise PermanentError(f"ctx.submit's key must be 1 to {MAX_IDEMPOTENCY_KEY_LENGTH} characters")
        now = self.ports.clock.now()
        request = SubmitRequest(tenant=parent.tenant, type=job_type, payload=payload, trace_id=parent.trace_id)
        try:
            job = build_job(request, self.ports, self.policy, now)
        except (InvalidRequestError, JobTypeForbiddenError, PayloadTooLargeError) as refused:
            # The job's own code asked for what can never be accepted: retrying cannot help.
            raise PermanentError(f"ctx.submit refused: {refused}") from None
        child = job.replace(job_id=derived_job_id(parent.created_at, parent.job_id, key), parent_job_id=parent.job_id)
        try:
            return submit_made(child, self.ports).job
        except IdempotencyConflictError:
            raise PermanentError(
                f"ctx.submit: key {key!r} was used for another type or payload by an earlier attempt"
            ) from None
