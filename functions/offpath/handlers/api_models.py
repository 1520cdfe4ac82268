"""The HTTP contract's models: every body the api takes and every body it answers.

Routes name these models (offpath.contract); answers are these models serialised. Each model's schema is built
the first time it is used (`defer_build`), so an invocation pays only for the models its route needs.
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, Literal, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PlainSerializer,
    RootModel,
    SerializerFunctionWrapHandler,
    ValidationError,
    WithJsonSchema,
    model_serializer,
)

from offpath.domain.errors import InvalidRequestError
from offpath.domain.events import EventType
from offpath.domain.job import Job, JobStatus
from offpath.domain.ports import QueueStats, RedriveTask
from offpath.logic.submit import validation_error

if TYPE_CHECKING:
    from offpath.domain.webhooks import Endpoint

_LAZY = ConfigDict(defer_build=True)


def _examples(*examples: dict[str, Any]) -> ConfigDict:
    """A lazily built answer model with examples of its JSON (the document shows the first)."""
    return ConfigDict(defer_build=True, json_schema_extra={"examples": list(examples)})


def example_of(model: type[BaseModel]) -> Any:
    """The first example of a model's JSON, or None."""
    extra = model.model_config.get("json_schema_extra")
    examples = extra.get("examples") if isinstance(extra, dict) else None
    return examples[0] if isinstance(examples, list) and examples else None


JOB_EXAMPLE: dict[str, Any] = {
    "job_id": "3f2a9c0e5b7d4e1f8a6c2b9d0e4f7a1c",
    "type": "send_welcome_email",
    "queue": "default",
    "status": "QUEUED",
    "attempts": 0,
    "max_attempts": 5,
    "progress": None,
    "result": None,
    "error": None,
    "idempotency_key": "signup-42",
    "run_at": None,
    "created_at": "2026-12-01T09:00:00Z",
    "updated_at": "2026-12-01T09:00:00Z",
    "started_at": None,
    "finished_at": None,
    "next_attempt_at": None,
    "redrives": 0,
    "retries": 0,
    "payload": {"user_id": "u-42", "email": "ada@example.com"},
    "attempt_history": [],
}
_DONE_EXAMPLE = {
    **JOB_EXAMPLE,
    "status": "SUCCEEDED",
    "attempts": 1,
    "result": {"user_id": "u-42", "sent": True},
    "started_at": "2026-12-01T09:00:01Z",
    "finished_at": "2026-12-01T09:00:02Z",
    "updated_at": "2026-12-01T09:00:02Z",
    "payload": None,
    "attempt_history": [
        {
            "attempt": 1,
            "started_at": "2026-12-01T09:00:01Z",
            "finished_at": "2026-12-01T09:00:02Z",
            "outcome": "SUCCEEDED",
            "error": None,
        }
    ],
}
_REDRIVE_EXAMPLE = {"queue": "default", "status": "RUNNING", "moved": 0, "to_move": 12, "task_id": "a1b2c3"}


def iso(when: datetime) -> str:
    return when.isoformat().replace("+00:00", "Z")


# A time in UTC, written as ISO 8601 with a Z.
Timestamp = Annotated[datetime, PlainSerializer(iso, return_type=str)]


# -- requests -----------------------------------------------------------------------------------


class SubmitBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: str = Field(min_length=1, max_length=64, description="a registered job type")
    payload: dict[str, Any] = Field(default_factory=dict)
    run_at: str | None = Field(default=None, description="ISO 8601 time to run at (delayed job)")
    queue: str | None = Field(default=None, max_length=32)


class BatchItemBody(SubmitBody):
    model_config = _LAZY

    idempotency_key: str | None = Field(default=None, max_length=255)


class BatchBody(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    jobs: list[BatchItemBody] = Field(min_length=1, max_length=100)


def parse_body(model: type[BaseModel], data: Any) -> Any:
    """Validate a decoded JSON body; the error names every failing field, never echoes a value."""
    if not isinstance(data, dict):
        raise InvalidRequestError("body", "body must be a JSON object")
    try:
        return model.model_validate(data)
    except ValidationError as error:
        raise validation_error(error, (), code="invalid_request") from None


# -- answers ------------------------------------------------------------------------------------


class Dumped:
    """A model's JSON form, written without building the model: for the hottest answer (a submitted job)
    the first request of a cold start would otherwise build the model's validator and serializer (~5 ms of CPU).
    `JobView.dumped` writes it; tests/unit/test_api_models.py holds it equal to `JobView.of(...)`'s dump."""

    def __init__(self, model: type[BaseModel], data: dict[str, Any]) -> None:
        self.model = model
        self.data = data

    def model_dump(self, *, mode: str = "json") -> dict[str, Any]:
        return self.data


def _plain_json(value: Any) -> bool:
    """Whether a value is already what pydantic's JSON mode makes of it (strings, whole numbers, finite
    floats, booleans, None, and lists and string-keyed objects of these)."""
    if value is None or isinstance(value, str | bool | int):
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, list):
        return all(_plain_json(item) for item in value)
    if isinstance(value, dict):
        return all(isinstance(key, str) and _plain_json(item) for key, item in value.items())
    return False


def _iso_or_none(when: datetime | None) -> str | None:
    return iso(when) if when is not None else None


class ProgressView(BaseModel):
    model_config = _LAZY

    fraction: float
    message: str


class Projection(BaseModel):
    """A view whose fields are the same-named attributes of a port's record: `of` reads them (pydantic's
    `from_attributes`) rather than copying them field by field."""

    @classmethod
    def of(cls, source: object) -> Self:
        return cls.model_validate(source, from_attributes=True)


class AttemptView(Projection):
    """One attempt's end (`outcome`: SUCCEEDED, RETRYING, FAILED or LEASE_EXPIRED); the error cut to 200
    characters."""

    model_config = _LAZY

    attempt: int
    started_at: Timestamp | None
    finished_at: Timestamp
    outcome: str
    error: str | None = None


class JobView(BaseModel):
    """`payload` is the tenant's own, in the answer about one job (GET /jobs/{job_id}, cancel, retry);
    null in listings and submit answers, which could otherwise grow past what a response may hold.
    `attempt_history`: the last 10 attempts' ends, oldest first, across redrives and retries."""

    model_config = _examples(JOB_EXAMPLE)

    job_id: str
    type: str
    queue: str
    status: JobStatus
    attempts: int
    max_attempts: int
    progress: ProgressView | None = None
    result: Any = None
    error: str | None = None
    idempotency_key: str | None = None
    run_at: Timestamp | None = None
    created_at: Timestamp
    updated_at: Timestamp
    started_at: Timestamp | None = None
    finished_at: Timestamp | None = None
    next_attempt_at: Timestamp | None = None
    redrives: int = 0
    retries: int = Field(default=0, description="how often the job was retried by hand (POST /jobs/{id}/retry)")
    payload: dict[str, Any] | None = None
    attempt_history: list[AttemptView] = Field(default_factory=list)

    @classmethod
    def of(cls, job: Job, *, with_payload: bool = False) -> JobView:
        progress = job.progress
        return cls(
            job_id=job.job_id,
            type=job.type,
            queue=job.queue,
            status=job.status,
            attempts=job.attempt,
            max_attempts=job.max_attempts,
            progress=ProgressView(fraction=progress.fraction, message=progress.message) if progress else None,
            result=job.result,
            error=job.error,
            idempotency_key=job.idempotency_key,
            run_at=job.run_at,
            created_at=job.created_at,
            updated_at=job.updated_at,
            started_at=job.started_at,
            finished_at=job.finished_at,
            next_attempt_at=job.next_attempt_at,
            redrives=job.redrives,
            retries=job.retries,
            payload=job.payload if with_payload else None,
            attempt_history=[AttemptView.of(record) for record in job.attempt_history],
        )

    @classmethod
    def dumped(cls, job: Job, *, with_payload: bool = False) -> JobView | Dumped:
        """`JobView.of(job)`'s JSON form, written directly; the model itself when a value needs pydantic's
        conversion (a result or payload that is not plain JSON)."""
        payload = job.payload if with_payload else None
        if not (_plain_json(job.result) and _plain_json(payload)):
            return cls.of(job, with_payload=with_payload)
        progress = job.progress
        data: dict[str, Any] = {
            "job_id": job.job_id,
            "type": job.type,
            "queue": job.queue,
            "status": JobStatus(job.status).value,
            "attempts": int(job.attempt),
            "max_attempts": int(job.max_attempts),
            "progress": {"fraction": float(progress.fraction), "message": progress.message} if progress else None,
            "result": job.result,
            "error": job.error,
            "idempotency_key": job.idempotency_key,
            "run_at": _iso_or_none(job.run_at),
            "created_at": iso(job.created_at),
            "updated_at": iso(job.updated_at),
            "started_at": _iso_or_none(job.started_at),
            "finished_at": _iso_or_none(job.finished_at),
            "next_attempt_at": _iso_or_none(job.next_attempt_at),
            "redrives": int(job.redrives),
            "retries": int(job.retries),
            "payload": payload,
            "attempt_history": [
                {
                    "attempt": int(record.attempt),
                    "started_at": _iso_or_none(record.started_at),
                    "finished_at": iso(record.finished_at),
                    "outcome": record.outcome,
                    "error": record.error,
                }
                for record in job.attempt_history
            ],
        }
        return Dumped(cls, data)


class JobPageView(BaseModel):
    """`cursor` is null on the last page. (The example shows the last page: a cursor is only accepted by the
    listing that handed it out, so the document shows none that a reader might send.)"""

    model_config = _examples({"jobs": [_DONE_EXAMPLE], "cursor": None})

    jobs: list[JobView]
    cursor: str | None


class FieldErrorView(BaseModel):
    """One part of the request that failed validation, and why."""

    model_config = _LAZY

    field: str
    message: str


class ErrorBody(BaseModel):
    """`field` names the part of the request at fault; it is left out when no one part is. `errors` lists
    every part that failed validation (up to 100; `field` and `message` are the first's); it is left out
    for any other error."""

    model_config = _LAZY

    code: str
    message: str
    field: str | None = None
    errors: list[FieldErrorView] | None = None

    @model_serializer(mode="wrap")
    def _without_absent_fields(self, serialize: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = serialize(self)
        for name in ("field", "errors"):
            if getattr(self, name) is None:
                data.pop(name, None)
        return data

    @classmethod
    def of(cls, error: InvalidRequestError) -> ErrorBody:
        errors = [FieldErrorView(field=f, message=m) for f, m in error.errors] if error.errors else None
        return cls(code=error.code, message=str(error), field=error.field, errors=errors)


class ErrorView(BaseModel):
    model_config = _examples({"error": {"code": "not_found", "message": "no such job"}})

    error: ErrorBody

    @classmethod
    def of(cls, code: str, message: str, field: str | None = None) -> ErrorView:
        return cls(error=ErrorBody(code=code, message=message, field=field))


class GatewayErrorView(BaseModel):
    """API Gateway's own answer, given before or instead of the function's (no such route, authorizer,
    throttling, a body over 10 MB, the 30 s integration timeout), e.g. {"message": "Not Found"}."""

    model_config = _examples({"message": "Not Found"})

    message: str


class BatchAccepted(BaseModel):
    model_config = _LAZY

    index: int
    status: Literal[200, 202]
    job: JobView


class BatchRefused(BaseModel):
    """`retry_after_s`: an item over a quota (429) may be sent again after that many seconds."""

    model_config = _LAZY

    index: int
    status: int
    error: ErrorBody
    retry_after_s: int | None = None

    @model_serializer(mode="wrap")
    def _without_absent_fields(self, serialize: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = serialize(self)
        if self.retry_after_s is None:
            data.pop("retry_after_s", None)
        return data


class BatchView(BaseModel):
    model_config = _examples(
        {
            "results": [
                {"index": 0, "status": 202, "job": {**JOB_EXAMPLE, "payload": None}},
                {
                    "index": 1,
                    "status": 422,
                    "error": {"code": "unknown_job_type", "message": "unknown job type", "field": "type"},
                },
            ]
        }
    )

    results: list[BatchAccepted | BatchRefused]


class RedriveTaskView(BaseModel):
    model_config = ConfigDict(defer_build=True, from_attributes=True)

    queue: str
    status: str
    moved: int | None = None
    to_move: int | None = None
    task_id: str | None = None

    @classmethod
    def of(cls, task: RedriveTask) -> RedriveTaskView:
        return cls.model_validate(task)


class QueueView(BaseModel):
    model_config = _LAZY

    name: str
    visible: int
    in_flight: int
    delayed: int
    oldest_age_s: float | None
    dlq_depth: int
    redrive: RedriveTaskView | None = None

    @classmethod
    def of(cls, stats: QueueStats, redrive: RedriveTask | None) -> QueueView:
        return cls(
            name=stats.name,
            visible=stats.visible,
            in_flight=stats.in_flight,
            delayed=stats.delayed,
            oldest_age_s=stats.oldest_age_s,
            dlq_depth=stats.dlq_depth,
            redrive=RedriveTaskView.of(redrive) if redrive else None,
        )


class QueuesView(BaseModel):
    model_config = _examples(
        {
            "queues": [
                {
                    "name": "default",
                    "visible": 3,
                    "in_flight": 1,
                    "delayed": 0,
                    "oldest_age_s": 4.2,
                    "dlq_depth": 12,
                    "redrive": _REDRIVE_EXAMPLE,
                }
            ]
        }
    )

    queues: list[QueueView]


class RedriveView(BaseModel):
    model_config = _examples({"redrive": _REDRIVE_EXAMPLE})

    redrive: RedriveTaskView


class FiringView(BaseModel):
    model_config = _LAZY

    slot: str
    fired_at: Timestamp
    job_id: str | None
    skipped_reason: str | None


class ScheduleView(BaseModel):
    model_config = _LAZY

    name: str
    expression: str
    timezone: str
    job: str
    overlap: str
    enabled: bool
    flexible_window_min: int | None
    next_firing: str | None
    next_firings: list[str] = Field(
        default_factory=list, description="the next five firings, in the schedule's time zone"
    )
    last_firings: list[FiringView]


class SchedulesView(BaseModel):
    model_config = _examples(
        {
            "schedules": [
                {
                    "name": "nightly-cleanup",
                    "expression": "cron(0 3 * * ? *)",
                    "timezone": "Europe/Prague",
                    "job": "maintenance.nightly_cleanup",
                    "overlap": "skip",
                    "enabled": True,
                    "flexible_window_min": 15,
                    "next_firing": "2026-12-02T03:00:00+01:00",
                    "next_firings": [
                        "2026-12-02T03:00:00+01:00",
                        "2026-12-03T03:00:00+01:00",
                        "2026-12-04T03:00:00+01:00",
                        "2026-12-05T03:00:00+01:00",
                        "2026-12-06T03:00:00+01:00",
                    ],
                    "last_firings": [
                        {
                            "slot": "2026-12-01T02:00:00Z",
                            "fired_at": "2026-12-01T02:04:10Z",
                            "job_id": "9d1c0b7a6e5f4a3b2c1d0e9f8a7b6c5d",
                            "skipped_reason": None,
                        }
                    ],
                }
            ]
        }
    )

    schedules: list[ScheduleView]


class TriggerView(BaseModel):
    model_config = _examples(
        {
            "schedule": "nightly-cleanup",
            "slot": "manual:2026-12-01T10:15:00Z",
            "job_id": JOB_EXAMPLE["job_id"],
            "skipped_reason": None,
            "job": {
                **JOB_EXAMPLE,
                "type": "maintenance.nightly_cleanup",
                "queue": "bulk",
                "idempotency_key": None,
                "payload": None,
            },
        }
    )

    schedule: str
    slot: str
    job_id: str | None
    skipped_reason: str | None
    job: JobView | None


class JobTypeView(BaseModel):
    model_config = _LAZY

    name: str
    queue: str
    max_attempts: int
    timeout_s: int
    submitted_by: str = Field(description="who may submit it: tenant (any caller), admin, or system (schedules)")
    payload_schema: dict[str, Any] = Field(description="the JSON Schema of the job type's payload")


class JobTypesView(BaseModel):
    model_config = _examples(
        {
            "job_types": [
                {
                    "name": "demo.sleep",
                    "queue": "default",
                    "max_attempts": 3,
                    "timeout_s": 60,
                    "submitted_by": "tenant",
                    "payload_schema": {
                        "properties": {"ms": {"maximum": 600000, "minimum": 0, "title": "Ms", "type": "integer"}},
                        "required": ["ms"],
                        "title": "SleepPayload",
                        "type": "object",
                    },
                }
            ]
        }
    )

    job_types: list[JobTypeView]


class MinuteView(Projection):
    """One minute of one queue class and job type; the percentiles in seconds (null: nothing ran)."""

    model_config = _LAZY

    minute: Timestamp
    queue: str
    job_type: str
    submitted: int
    succeeded: int
    failed: int
    retried: int = Field(description="failed attempts given another try (automatic retries)")
    dead_lettered: int
    duration_p50_s: float | None
    duration_p95_s: float | None
    queue_wait_p50_s: float | None
    queue_wait_p95_s: float | None


class StatsView(BaseModel):
    model_config = _examples(
        {
            "start": "2026-12-01T08:00:00Z",
            "end": "2026-12-01T09:00:00Z",
            "minutes": [
                {
                    "minute": "2026-12-01T08:59:00Z",
                    "queue": "default",
                    "job_type": "send_welcome_email",
                    "submitted": 12,
                    "succeeded": 11,
                    "failed": 1,
                    "retried": 2,
                    "dead_lettered": 1,
                    "duration_p50_s": 0.21,
                    "duration_p95_s": 0.94,
                    "queue_wait_p50_s": 0.05,
                    "queue_wait_p95_s": 0.4,
                }
            ],
        }
    )

    start: Timestamp
    end: Timestamp
    minutes: list[MinuteView]


class AlarmView(Projection):
    model_config = _LAZY

    name: str
    state: str
    reason: str
    updated_at: Timestamp | None
    description: str


class AlarmChangeView(Projection):
    model_config = _LAZY

    time: Timestamp
    alarm: str
    old_state: str
    new_state: str
    reason: str


class AlarmsView(BaseModel):
    model_config = _examples(
        {
            "alarms": [
                {
                    "name": "offpath-default-dlq-depth",
                    "state": "ALARM",
                    "reason": "Threshold Crossed: 1 datapoint [3.0] was greater than or equal to the threshold (1.0).",
                    "updated_at": "2026-12-01T09:01:00Z",
                    "description": "Messages in the DLQ of queue class default: jobs that failed for good.",
                }
            ],
            "changes": [
                {
                    "time": "2026-12-01T09:01:00Z",
                    "alarm": "offpath-default-dlq-depth",
                    "old_state": "OK",
                    "new_state": "ALARM",
                    "reason": "Threshold Crossed: 1 datapoint [3.0] was greater than or equal to the threshold (1.0).",
                }
            ],
        }
    )

    alarms: list[AlarmView]
    changes: list[AlarmChangeView] = Field(description="the most recent state changes, newest first")


class HealthView(BaseModel):
    model_config = _examples({"status": "ok"})

    status: Literal["ok"]


class OpenApiDocument(RootModel[dict[str, Any]]):
    """An OpenAPI 3.1 document."""

    model_config = _examples({"openapi": "3.1.0", "info": {"title": "offpath", "version": "1.0.0"}, "paths": {}})


class QuotaLimitsView(BaseModel):
    """A tenant's quotas; null is unlimited."""

    model_config = _LAZY

    submits_per_s: float | None = Field(description="submits a second, as a token bucket refilled at this rate")
    burst: int | None = Field(description="the token bucket's size: submits at once after a pause")
    open_jobs: int | None = Field(description="jobs not final (QUEUED, SCHEDULED, RUNNING, RETRYING) at once")
    delayed_jobs: int | None = Field(description="jobs waiting for a run_at more than 15 minutes ahead (SCHEDULED)")


class QuotaUsageView(BaseModel):
    """The caller's counted jobs (null when neither open nor delayed jobs are limited, so not counted)."""

    model_config = _LAZY

    open_jobs: int | None
    delayed_jobs: int | None


class QuotasView(BaseModel):
    model_config = _examples(
        {
            "tenant": "acme",
            "quotas": {"submits_per_s": 50.0, "burst": 100, "open_jobs": 10000, "delayed_jobs": 1000},
            "usage": {"open_jobs": 12, "delayed_jobs": 3},
        }
    )

    tenant: str
    quotas: QuotaLimitsView
    usage: QuotaUsageView


# -- webhooks (notices) -------------------------------------------------------------------------


# A receiver's URL as the document states it (what else is refused depends on where its host resolves).
WEBHOOK_URL_PATTERN = r"^https?://[!-~]+$"
# A registered job type's name, documented as the document's JobTypeName (the registry's names).
JobTypeNameText = Annotated[str, Field(max_length=64), WithJsonSchema({"$ref": "#/components/schemas/JobTypeName"})]


class WebhookBody(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    url: str = Field(
        min_length=1,
        max_length=2048,
        pattern=WEBHOOK_URL_PATTERN,
        description="https (locally also http://127.0.0.1:PORT); its host must resolve to public addresses only",
    )
    events: list[EventType] = Field(min_length=1, max_length=20, description="job event types, e.g. job.succeeded")
    job_types: list[JobTypeNameText] | None = Field(
        default=None, max_length=50, description="only these job types (default: all)"
    )
    include_payload: bool = Field(
        default=False, strict=True, description="a delivery's data also holds the job's payload"
    )


WEBHOOK_EXAMPLE: dict[str, Any] = {
    "name": "orders",
    "url": "https://example.com/hooks/offpath",
    "events": ["job.succeeded", "job.failed"],
    "job_types": [],
    "include_payload": False,
    "enabled": True,
    "disabled_reason": None,
    "disabled_at": None,
    "created_at": "2026-12-01T09:00:00Z",
    "updated_at": "2026-12-01T09:00:00Z",
    "previous_secret_expires_at": None,
}


class WebhookView(BaseModel):
    """An endpoint; `enabled` false with `disabled_reason` once a 410 or 5 days of failures disabled it (a PUT
    enables it again)."""

    model_config = _examples(WEBHOOK_EXAMPLE)

    name: str
    url: str
    events: list[str]
    job_types: list[str]
    include_payload: bool
    enabled: bool
    disabled_reason: str | None = None
    disabled_at: Timestamp | None = None
    created_at: Timestamp | None = None
    updated_at: Timestamp | None = None
    # While a secret's rotation overlaps: when the previous secret stops signing.
    previous_secret_expires_at: Timestamp | None = None

    @classmethod
    def of(cls, endpoint: Endpoint) -> WebhookView:
        previous = [s.expires_at for s in endpoint.secrets[1:] if s.expires_at is not None]
        return cls(
            name=endpoint.name,
            url=endpoint.url,
            events=list(endpoint.events),
            job_types=list(endpoint.job_types),
            include_payload=endpoint.include_payload,
            enabled=endpoint.enabled,
            disabled_reason=endpoint.disabled_reason,
            disabled_at=endpoint.disabled_at,
            created_at=endpoint.created_at,
            updated_at=endpoint.updated_at,
            previous_secret_expires_at=max(previous) if previous else None,
        )


class WebhookSecretView(WebhookView):
    """The endpoint with its signing secret: shown at creation and on rotation only."""

    model_config = _examples({**WEBHOOK_EXAMPLE, "secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"})

    secret: str = Field(description="whsec_…: verify deliveries with it (Standard Webhooks)")

    @classmethod
    def with_secret(cls, endpoint: Endpoint) -> WebhookSecretView:
        return cls(**WebhookView.of(endpoint).model_dump(), secret=endpoint.secret)


class WebhooksView(BaseModel):
    model_config = _examples({"webhooks": [WEBHOOK_EXAMPLE]})

    webhooks: list[WebhookView]


class DeliveryAttemptView(Projection):
    model_config = _LAZY

    event_id: str
    type: str
    attempt: int
    at: Timestamp
    status_code: int | None = None
    latency_ms: int
    error: str | None = None
    next_retry_at: Timestamp | None = None


class DeliveriesView(BaseModel):
    """The latest attempts, newest first; `failing_since`: the first failure since the last success."""

    model_config = _examples(
        {
            "deliveries": [
                {
                    "event_id": "evt_5b0c3f8e2a1d4c6b9e7f0a2d4c6b8e1f",
                    "type": "job.succeeded",
                    "attempt": 2,
                    "at": "2026-12-01T09:00:05Z",
                    "status_code": 200,
                    "latency_ms": 84,
                    "error": None,
                    "next_retry_at": None,
                },
                {
                    "event_id": "evt_5b0c3f8e2a1d4c6b9e7f0a2d4c6b8e1f",
                    "type": "job.succeeded",
                    "attempt": 1,
                    "at": "2026-12-01T09:00:00Z",
                    "status_code": 503,
                    "latency_ms": 31,
                    "error": "HTTP 503",
                    "next_retry_at": "2026-12-01T09:00:05Z",
                },
            ],
            "failing_since": None,
        }
    )

    deliveries: list[DeliveryAttemptView]
    failing_since: Timestamp | None = None


class WebhookTestView(BaseModel):
    model_config = _examples({"event_id": "evt_test_0f1e2d3c4b5a69788796a5b4c3d2e1f0", "type": "webhook.test"})

    event_id: str
    type: str


class NoContent(BaseModel):
    """No body (204)."""

    model_config = _examples({})
