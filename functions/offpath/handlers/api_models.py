"""The HTTP contract's models: every body the api takes and every body it answers.

Routes name these models (offpath.contract); answers are these models serialised. Each model's schema is built
the first time it is used (`defer_build`), so an invocation pays only for the models its route needs.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PlainSerializer,
    RootModel,
    SerializerFunctionWrapHandler,
    ValidationError,
    model_serializer,
)

from offpath.domain.errors import InvalidRequestError
from offpath.domain.job import Job, JobStatus
from offpath.domain.ports import QueueStats, RedriveTask

SAFE_FIELD_PART = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$|^[0-9]{1,6}$")

_LAZY = ConfigDict(defer_build=True)


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
    idempotency_key: str | None = Field(default=None, max_length=255)


class BatchBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    jobs: list[BatchItemBody] = Field(min_length=1, max_length=100)


def parse_body(model: type[BaseModel], data: Any) -> Any:
    """Validate a decoded JSON body; the error names the field, never echoes the value."""
    if not isinstance(data, dict):
        raise InvalidRequestError("body", "body must be a JSON object")
    try:
        return model.model_validate(data)
    except ValidationError as error:
        first = error.errors()[0]
        parts = [str(p) if SAFE_FIELD_PART.match(str(p)) else "?" for p in first["loc"]]
        field = ".".join(parts) or "body"
        message = "unknown field" if first["type"] == "extra_forbidden" else first["msg"]
        raise InvalidRequestError(field, f"{field}: {message}") from None


# -- answers ------------------------------------------------------------------------------------


class ProgressView(BaseModel):
    model_config = _LAZY

    fraction: float
    message: str


class JobView(BaseModel):
    model_config = ConfigDict(
        defer_build=True,
        json_schema_extra={
            "examples": [
                {
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
                }
            ]
        },
    )

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

    @classmethod
    def of(cls, job: Job) -> JobView:
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
        )


class JobPageView(BaseModel):
    model_config = _LAZY

    jobs: list[JobView]
    cursor: str | None


class ErrorBody(BaseModel):
    """`field` names the part of the request at fault; it is left out when no one part is."""

    model_config = _LAZY

    code: str
    message: str
    field: str | None = None

    @model_serializer(mode="wrap")
    def _without_absent_field(self, serialize: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = serialize(self)
        if self.field is None:
            data.pop("field", None)
        return data


class ErrorView(BaseModel):
    model_config = _LAZY

    error: ErrorBody

    @classmethod
    def of(cls, code: str, message: str, field: str | None = None) -> ErrorView:
        return cls(error=ErrorBody(code=code, message=message, field=field))


class GatewayErrorView(BaseModel):
    """API Gateway's own answer, given before or instead of the function's (no such route, authorizer,
    throttling, a body over 10 MB, the 30 s integration timeout), e.g. {"message": "Not Found"}."""

    model_config = _LAZY

    message: str


class BatchAccepted(BaseModel):
    model_config = _LAZY

    index: int
    status: Literal[200, 202]
    job: JobView


class BatchRefused(BaseModel):
    model_config = _LAZY

    index: int
    status: int
    error: ErrorBody


class BatchView(BaseModel):
    model_config = _LAZY

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
    model_config = _LAZY

    queues: list[QueueView]


class RedriveView(BaseModel):
    model_config = _LAZY

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
    last_firings: list[FiringView]


class SchedulesView(BaseModel):
    model_config = _LAZY

    schedules: list[ScheduleView]


class TriggerView(BaseModel):
    model_config = _LAZY

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
    model_config = _LAZY

    job_types: list[JobTypeView]


class HealthView(BaseModel):
    model_config = _LAZY

    status: Literal["ok"]


class OpenApiDocument(RootModel[dict[str, Any]]):
    """An OpenAPI 3.1 document."""

    model_config = _LAZY
