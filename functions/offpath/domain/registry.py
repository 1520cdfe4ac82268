"""The registry: the single source of truth for queue classes and job types.

The worker, the api, the CDK stack and the local runtime all read it. A job type is registered by
decorating a function in `offpath/jobs/`; nothing else needs an edit.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, TypeVar, get_args

from offpath.domain.backoff import Backoff
from offpath.domain.cron import CronExpression, RateExpression, load_zone, parse_cron, parse_rate
from offpath.domain.errors import RegistryError
from offpath.domain.limits import KeyFunction, Limits, LimitSpecError, limits_of

if TYPE_CHECKING:
    # Payload models are pydantic's; the registry only names them, so a function that reads it without validating
    # a payload (the notifier, the delivery function) does not import pydantic.
    from pydantic import BaseModel

    from offpath.domain.context import JobContext

NAME_PATTERN = re.compile(r"^[a-z][a-z0-9_.-]{0,62}$")
QUEUE_NAME_PATTERN = re.compile(r"^[a-z][a-z0-9-]{0,30}$")
SCHEDULE_NAME_PATTERN = re.compile(r"^[a-z][a-z0-9-]{0,47}$")
# Declared schedules share their group with these.
RESERVED_SCHEDULE_PREFIX = "job-"
RESERVED_SCHEDULE_SUFFIX = "-sweeper"

# The Lambda hard limit; a worker's timeout must stay under it with room for bookkeeping.
MAX_WORKER_TIMEOUT_S = 900
# Each record of a batch gets its job type's timeout plus this for its claim and outcome write (and
# the outcome write's retries through a store outage).
WORKER_TIMEOUT_MARGIN_S = 10
# A record starts only with its job type's timeout plus this left in the invocation: less than the margin
# above, so every record of a full batch of the slowest type starts even when the batch began late.
START_MARGIN_S = 5
# A worker's lease on a job outlives the invocation that holds it by this much.
LEASE_MARGIN_S = 30
# maxReceiveCount is a safety net for crashes, kept above every job type's max_attempts.
RECEIVE_COUNT_HEADROOM = 3
# The longest a function that submits (the api, the enqueue function) runs, so the longest it can take
# between a job's send and its write (logic/submit.py sends first); the stack holds its functions to it.
SUBMITTER_TIMEOUT_S = 30
# A message whose job is still not written this long after it was sent was never accepted.
UNWRITTEN_BOUND_S = SUBMITTER_TIMEOUT_S + 30

# Who may submit a job type, least authority first: any tenant, admins, or the system (schedules) only.
Submitter = Literal["tenant", "admin", "system"]
SUBMITTERS: tuple[Submitter, ...] = get_args(Submitter)

JobFunction = Callable[[Any, "JobContext"], Any]
F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class QueueClass:
    """A class of work with its own queue, DLQ, worker and concurrency."""

    name: str
    batch_size: int = 10
    batching_window_s: int = 0
    max_concurrency: int = 5
    retention_days: int = 4
    dlq_retention_days: int = 14
    oldest_age_alarm_s: int = 300

    def __post_init__(self) -> None:
        if not QUEUE_NAME_PATTERN.match(self.name):
            raise RegistryError(f"queue class {self.name!r}: name must match {QUEUE_NAME_PATTERN.pattern}")
        if not 1 <= self.batch_size <= 10_000:
            raise RegistryError(f"queue class {self.name!r}: batch_size must be 1..10000")
        if self.batch_size > 10 and self.batching_window_s < 1:
            raise RegistryError(f"queue class {self.name!r}: batch_size over 10 needs a batching window")
        if not 0 <= self.batching_window_s <= 300:
            raise RegistryError(f"queue class {self.name!r}: batching_window_s must be 0..300")
        if not 2 <= self.max_concurrency <= 1000:
            raise RegistryError(f"queue class {self.name!r}: max_concurrency must be 2..1000")
        if self.dlq_retention_days <= self.retention_days or self.dlq_retention_days > 14:
            raise RegistryError(
                f"queue class {self.name!r}: DLQ retention must be longer than the queue's and at most 14 days"
            )


@dataclass(frozen=True)
class JobType:
    name: str
    function: JobFunction
    payload_model: type[BaseModel]
    queue: str
    max_attempts: int
    timeout_s: int
    backoff: Backoff
    submitted_by: Submitter = "tenant"
    # Per-key concurrency and rate limits (domain/limits.py); none by default.
    limits: Limits = field(default_factory=Limits)

    def may_be_submitted_by(self, submitter: Submitter) -> bool:
        """A submitter may submit the job types that ask for its authority or less."""
        return SUBMITTERS.index(submitter) >= SUBMITTERS.index(self.submitted_by)

    @property
    def shared_across_tenants(self) -> bool:
        """Admin and system job types act for the deployment, not for the tenant that ran them."""
        return self.submitted_by != "tenant"

    def parse_payload(self, payload: dict[str, Any]) -> BaseModel:
        return self.payload_model.model_validate(payload)


OVERLAP_POLICIES = ("skip", "allow")


@dataclass(frozen=True)
class Schedule:
    """A recurring job, fired by EventBridge Scheduler (never by cron on a server)."""

    name: str
    expression: str  # "cron(...)" or "rate(...)", as EventBridge Scheduler takes it
    timezone: str
    job: str
    payload: dict[str, Any]
    overlap: str = "skip"
    flexible_window_min: int | None = None
    enabled: bool = True
    parsed: CronExpression | RateExpression | None = field(default=None, compare=False, repr=False)

    def next_after(self, after: datetime, anchor: datetime | None = None) -> datetime | None:
        """The next slot after `after` (UTC); a rate counts from `anchor` (when it was created)."""
        if isinstance(self.parsed, RateExpression):
            return self.parsed.next_after(after, anchor or after)
        assert isinstance(self.parsed, CronExpression)
        return self.parsed.next_after(after, load_zone(self.timezone))


@dataclass
class Registry:
    queues: dict[str, QueueClass] = field(default_factory=dict)
    job_types: dict[str, JobType] = field(default_factory=dict)
    schedules: dict[str, Schedule] = field(default_factory=dict)

    def add_schedule(self, schedule: Schedule) -> Schedule:
        where = f"schedule {schedule.name!r}"
        if not SCHEDULE_NAME_PATTERN.match(schedule.name):
            raise RegistryError(f"{where}: name must match {SCHEDULE_NAME_PATTERN.pattern}")
        if schedule.name in self.schedules:
            raise RegistryError(f"{where} is declared twice")
        if schedule.name.startswith(RESERVED_SCHEDULE_PREFIX) or schedule.name.endswith(RESERVED_SCHEDULE_SUFFIX):
            raise RegistryError(
                f"{where}: names starting with {RESERVED_SCHEDULE_PREFIX!r} (one-time schedules of delayed jobs) "
                f"or ending with {RESERVED_SCHEDULE_SUFFIX!r} (the sweeper) are reserved"
            )
        if schedule.overlap not in OVERLAP_POLICIES:
            raise RegistryError(f"{where}: overlap must be one of {', '.join(OVERLAP_POLICIES)}")
        if schedule.flexible_window_min is not None and not 1 <= schedule.flexible_window_min <= 1440:
            raise RegistryError(f"{where}: flexible_window_min must be 1..1440")
        load_zone(schedule.timezone)
        job_type = self.job_types.get(schedule.job)
        if job_type is None:
            raise RegistryError(f"{where}: job type {schedule.job!r} is not registered (register it first)")
        try:
            job_type.parse_payload(schedule.payload)
        except ValueError as error:
            raise RegistryError(f"{where}: payload does not match {schedule.job!r}: {error}") from None
        self.schedules[schedule.name] = schedule
        return schedule

    def add_queue(self, queue: QueueClass) -> QueueClass:
        if queue.name in self.queues and self.queues[queue.name] != queue:
            raise RegistryError(f"queue class {queue.name!r} is declared twice with different settings")
        self.queues[queue.name] = queue
        return queue

    def add_job_type(self, job_type: JobType) -> JobType:
        if not NAME_PATTERN.match(job_type.name):
            raise RegistryError(f"job type {job_type.name!r}: name must match {NAME_PATTERN.pattern}")
        existing = self.job_types.get(job_type.name)
        if existing is not None and existing.function is not job_type.function:
            raise RegistryError(f"job type {job_type.name!r} is registered twice")
        if job_type.queue not in self.queues:
            raise RegistryError(
                f"job type {job_type.name!r}: queue class {job_type.queue!r} is not declared "
                f"(declared: {', '.join(sorted(self.queues))})"
            )
        if job_type.submitted_by not in SUBMITTERS:
            raise RegistryError(f"job type {job_type.name!r}: submitted_by must be one of {', '.join(SUBMITTERS)}")
        if not 1 <= job_type.max_attempts <= 100:
            raise RegistryError(f"job type {job_type.name!r}: max_attempts must be 1..100")
        if not 1 <= job_type.timeout_s <= MAX_WORKER_TIMEOUT_S - WORKER_TIMEOUT_MARGIN_S:
            raise RegistryError(
                f"job type {job_type.name!r}: timeout_s must be 1..{MAX_WORKER_TIMEOUT_S - WORKER_TIMEOUT_MARGIN_S}"
            )
        limits = job_type.limits
        try:
            limits_of(
                concurrency_key=limits.concurrency_key,
                max_concurrency=limits.max_concurrency,
                rate_limit=limits.rate_limit.text if limits.rate_limit is not None else None,
                payload_fields=closed_fields(job_type.payload_model),
            )
        except LimitSpecError as error:
            raise RegistryError(f"job type {job_type.name!r}: {error}") from None
        self.job_types[job_type.name] = job_type
        return job_type

    def job_type(self, name: str) -> JobType | None:
        return self.job_types.get(name)

    def without(self, excluded: Callable[[JobType], bool]) -> Registry:
        """A copy without the job types `excluded` picks and the schedules that fire them."""
        kept = {name: jt for name, jt in self.job_types.items() if not excluded(jt)}
        return Registry(
            queues=dict(self.queues),
            job_types=kept,
            schedules={name: s for name, s in self.schedules.items() if s.job in kept},
        )

    def job_types_on(self, queue: str) -> Iterable[JobType]:
        return (jt for jt in self.job_types.values() if jt.queue == queue)

    def slowest_s(self, queue: str) -> int:
        """The longest timeout of a job type on a queue class (30 s for a queue class without any)."""
        return max((jt.timeout_s for jt in self.job_types_on(queue)), default=30)

    def batch_size(self, queue: str) -> int:
        """The batch size of the queue class's worker: the queue class's own, lowered until a full batch of
        its slowest job type fits in Lambda's 15 minutes."""
        per_record = self.slowest_s(queue) + WORKER_TIMEOUT_MARGIN_S
        return max(1, min(self.queues[queue].batch_size, MAX_WORKER_TIMEOUT_S // per_record))

    def worker_timeout_s(self, queue: str) -> int:
        """The worker function's timeout for a queue class: a full batch of its slowest job type, each
        record with its margin, so no record of a batch has to go back unrun for lack of time."""
        return self.batch_size(queue) * (self.slowest_s(queue) + WORKER_TIMEOUT_MARGIN_S)

    def visibility_timeout_s(self, queue: str) -> int:
        """AWS guidance: at least six times the function timeout (SQS caps it at 12 hours)."""
        return min(43_200, 6 * self.worker_timeout_s(queue))

    def max_receive_count(self, queue: str) -> int:
        most = max((jt.max_attempts for jt in self.job_types_on(queue)), default=1)
        return most + RECEIVE_COUNT_HEADROOM


REGISTRY = Registry()

for _queue in (
    QueueClass("critical", batch_size=1, max_concurrency=10, oldest_age_alarm_s=60),
    QueueClass("default", batch_size=10, max_concurrency=5),
    QueueClass("bulk", batch_size=10, batching_window_s=5, max_concurrency=2, oldest_age_alarm_s=3600),
):
    REGISTRY.add_queue(_queue)


def queue_class(name: str, **settings: Any) -> QueueClass:
    """Declare a new queue class (its queue, DLQ, worker and alarms follow from this)."""
    return REGISTRY.add_queue(QueueClass(name, **settings))


def job(
    name: str,
    *,
    payload: type[BaseModel],
    queue: str = "default",
    max_attempts: int = 5,
    timeout_s: int = 60,
    backoff_base_s: float = 2.0,
    backoff_cap_s: float = 900.0,
    submitted_by: Submitter = "tenant",
    concurrency_key: str | KeyFunction | None = None,
    max_concurrency: int | None = None,
    rate_limit: str | None = None,
) -> Callable[[F], F]:
    """Register a job function with its payload model and policy.

    `submitted_by`: who may submit it through the API: `"tenant"` (any caller, the default), `"admin"`
    (admins only) or `"system"` (its schedules only; an admin fires them with the trigger route). Others
    are refused with 403 `job_type_forbidden`.

    `max_concurrency`: at most that many of its jobs RUNNING at once per `concurrency_key` (a payload field path
    such as "account" or "customer.id", or a function of the payload; without one, for the whole type).
    `rate_limit` ("10/s", "100/m", "3600/h"): at most that many starts per the same key (docs/flow-control.md).
    """
    try:
        limits = limits_of(
            concurrency_key=concurrency_key,
            max_concurrency=max_concurrency,
            rate_limit=rate_limit,
            payload_fields=closed_fields(payload),
        )
    except LimitSpecError as error:
        raise RegistryError(f"job type {name!r}: {error}") from None

    def register(function: F) -> F:
        REGISTRY.add_job_type(
            JobType(
                name=name,
                function=function,
                payload_model=payload,
                queue=queue,
                max_attempts=max_attempts,
                timeout_s=timeout_s,
                backoff=Backoff(base_s=backoff_base_s, cap_s=backoff_cap_s),
                submitted_by=submitted_by,
                limits=limits,
            )
        )
        return function

    return register


def closed_fields(model: type[BaseModel]) -> set[str] | None:
    """The payload model's fields when it takes no others (None when it allows extra fields)."""
    if model.model_config.get("extra") == "allow":
        return None
    return set(model.model_fields)


def schedule(
    name: str,
    *,
    job: str,
    cron: str | None = None,
    rate: str | None = None,
    timezone: str = "UTC",
    payload: dict[str, Any] | None = None,
    overlap: str = "skip",
    flexible_window_min: int | None = None,
    enabled: bool = True,
) -> Schedule:
    """Declare a recurring job next to its job type. The expression is checked now, at import time.

    `cron` takes EventBridge Scheduler's six fields ("0 3 * * ? *"); `rate` takes "5 minutes".
    """
    if (cron is None) == (rate is None):
        raise RegistryError(f"schedule {name!r}: give exactly one of cron= and rate=")
    parsed: CronExpression | RateExpression
    try:
        parsed = parse_cron(cron) if cron is not None else parse_rate(rate or "")
    except ValueError as error:
        raise RegistryError(f"schedule {name!r}: {error}") from None
    return REGISTRY.add_schedule(
        Schedule(
            name=name,
            expression=parsed.text,
            timezone=timezone,
            job=job,
            payload=dict(payload or {}),
            overlap=overlap,
            flexible_window_min=flexible_window_min,
            enabled=enabled,
            parsed=parsed,
        )
    )
