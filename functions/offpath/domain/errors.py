"""Domain errors. No SDK error leaves an adapter: it becomes one of these."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from offpath.domain.job import Job, JobStatus


class OffpathError(Exception):
    """Base of every error offpath raises on purpose."""


class PermanentError(OffpathError):
    """Raised by a job function when retrying cannot help (bad input, like an HTTP 4xx)."""


class TransitionError(OffpathError):
    def __init__(self, current: JobStatus, target: JobStatus, detail: str = "") -> None:
        self.current = current
        self.target = target
        suffix = f": {detail}" if detail else ""
        super().__init__(f"cannot move a {current.value} job to {target.value}{suffix}")


class JobNotFoundError(OffpathError):
    pass


class DeadLetterNotFoundError(OffpathError):
    """No message of that job in the queue's DLQ (within the search's bound)."""


class WebhookNotFoundError(Exception):
    """No webhook endpoint of that name for the tenant (here, not in logic.webhooks: the api's error answers
    name it without importing the webhook use cases, which only the webhook routes need)."""


class IdempotencyConflictError(OffpathError):
    """The idempotency key was used before with another payload."""

    def __init__(self, existing: Job | None) -> None:
        # The job the key was first used for (None when it was never written).
        self.existing = existing
        super().__init__("idempotency key already used with a different payload")


class JobConflictError(OffpathError):
    """A conditional write found the job in a state that does not allow the change."""

    def __init__(self, job: Job | None, detail: str) -> None:
        self.job = job
        super().__init__(detail)


class StoreUnavailableError(OffpathError):
    """The job store kept failing (throttling, 5xx, timeouts) after bounded retries."""


class QueueUnavailableError(OffpathError):
    """The queue kept failing after bounded retries."""


class RegistryError(OffpathError):
    """A job type, queue class or schedule was declared wrongly."""


class InvalidRequestError(OffpathError):
    """A request that can never succeed as sent. `field` names the offending part; `errors` lists every
    (field, message) found when more than one part was checked at once (the first is `field`'s)."""

    def __init__(
        self, field: str, message: str, code: str = "invalid_request", errors: tuple[tuple[str, str], ...] = ()
    ) -> None:
        self.field = field
        self.code = code
        self.errors = errors
        super().__init__(message)


class PayloadTooLargeError(OffpathError):
    """`what` is measured: the payload as the store keeps it, or the request body."""

    def __init__(self, size: int, limit: int, what: str = "payload") -> None:
        self.size = size
        self.limit = limit
        super().__init__(f"{what} is {size} bytes; the limit is {limit} bytes")


class ItemTooLargeError(OffpathError):
    """The store refused a write for its size (DynamoDB's 400 KB item limit): retrying cannot help."""


class RedriveInProgressError(OffpathError):
    """SQS allows one active message move task per queue."""


class UnknownScheduleError(OffpathError):
    pass


class JobTypeForbiddenError(OffpathError):
    """The caller may not submit this job type (it is for admins, or for schedules only)."""

    def __init__(self, job_type: str, submitted_by: str) -> None:
        self.job_type = job_type
        self.submitted_by = submitted_by
        who = "schedules only" if submitted_by == "system" else "admins only"
        super().__init__(f"job type {job_type!r} is submitted by {who}")


class TenantRefusedError(OffpathError):
    """The authorizer named a tenant that can never be one: outside the charset or length, or reserved."""


class MetricsUnavailableError(OffpathError):
    """CloudWatch (metrics or alarms) kept failing after bounded retries."""


class BatchNotFoundError(OffpathError):
    """No batch of that id for the tenant (another tenant's batch is none)."""


class BatchConflictError(OffpathError):
    """The batch cannot take that change now (jobs added to a sealed batch, a seal while a page is being added)."""


class BatchKeyConflictError(OffpathError):
    """An Idempotency-Key reused for another batch request."""


class SwitchUnavailableError(OffpathError):
    """A queue class's switch (its event source mapping, its alarm's actions) could not be set; the pause state in
    the table stands and the next pause or resume of the queue applies the switch again."""
