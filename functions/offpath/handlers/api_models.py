"""The HTTP contract's models: every body the api takes and every body it answers.

Routes name these models (offpath.contract); answers are these models serialised. Each model's schema is built
the first time it is used (`defer_build`), so an invocation pays only for the models its route needs.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, Literal, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PlainSerializer,
    SerializerFunctionWrapHandler,
    StringConstraints,
    ValidationError,
    WithJsonSchema,
    model_serializer,
)

from offpath.domain.chain import chain_state
from offpath.domain.clock import iso
from offpath.domain.errors import InvalidRequestError
from offpath.domain.job import AttemptRecord, Job, JobStatus
from offpath.domain.tags import MAX_TAGS, TAG_KEY_PATTERN, TAG_VALUE_PATTERN
from offpath.handlers.job_json import attempt_error as _attempt_error
from offpath.handlers.job_json import job_json
from offpath.handlers.job_json import lease_until as _lease_until
from offpath.logic.debounce import DEBOUNCE_KEY_PATTERN, MAX_DEBOUNCE_KEY_LENGTH, MAX_DEBOUNCE_S, MIN_DEBOUNCE_S
from offpath.logic.submit import validation_error

if TYPE_CHECKING:
    pass

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
    "lease_until": None,
    "redrives": 0,
    "retries": 0,
    "retried_at": None,
    "payload": {"user_id": "u-42", "email": "ada@example.com"},
    "attempt_history": [],
    "tags": {"plan": "pro", "signup-source": "web"},
    "trace_id": "4bf92f3577b34da6a3ce929d0e0e4736",
    "discarded_at": None,
    "batch_id": None,
    "callback_of": None,
    "parent_job_id": None,
    "next_job_id": None,
    "chain": None,
    "expires_at": None,
    "cancel_reason": None,
    "superseded_by": None,
    "waiting_on": None,
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


# A time in UTC, written as ISO 8601 with a Z.
Timestamp = Annotated[datetime, PlainSerializer(iso, return_type=str)]


# -- requests -----------------------------------------------------------------------------------


# A job's tags as a submit gives them: at most MAX_TAGS `key: value` pairs (domain/tags.py), documented as such.
TagKey = Annotated[str, StringConstraints(pattern=f"^{TAG_KEY_PATTERN}$")]
TagValue = Annotated[str, StringConstraints(pattern=f"^{TAG_VALUE_PATTERN}$")]
Tags = Annotated[
    dict[TagKey, TagValue],
    Field(max_length=MAX_TAGS),
    WithJsonSchema(
        {
            "type": "object",
            "maxProperties": MAX_TAGS,
            "patternProperties": {f"^{TAG_KEY_PATTERN}$": {"type": "string", "pattern": f"^{TAG_VALUE_PATTERN}$"}},
            "additionalProperties": False,
            "description": f"up to {MAX_TAGS} `key: value` tags; `GET /jobs?tag=key:value` lists the jobs with one",
        }
    ),
]


class ThenStep(BaseModel):
    """A chain's next step (docs/workflows.md): submitted once, exactly, when the job before it succeeds, and never
    when it fails. Its `then` is the step after it, of the same shape, at most 10 steps in all; every step is
    validated at submit (a refusal names the field's path, e.g. `then.then.type`)."""

    model_config = ConfigDict(extra="forbid")

    type: str = Field(min_length=1, max_length=64, description="a registered job type open to the caller")
    payload: dict[str, Any] = Field(default_factory=dict, description="the step's payload, as its type's model says")
    then: dict[str, Any] | None = Field(
        default=None, description="the step after this one: `{type, payload, then?}` again"
    )


class Debounce(BaseModel):
    """A later submit of the same type by the same tenant with the same `key` within `seconds` supersedes this
    one (it ends CANCELLED, `cancel_reason` "superseded", `superseded_by` naming the later job); the last one
    runs `seconds` after it was submitted."""

    model_config = ConfigDict(extra="forbid")

    key: str = Field(
        min_length=1, max_length=MAX_DEBOUNCE_KEY_LENGTH, pattern=DEBOUNCE_KEY_PATTERN, description="printable ASCII"
    )
    seconds: int = Field(ge=MIN_DEBOUNCE_S, le=MAX_DEBOUNCE_S, strict=True)


class SubmitBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: str = Field(min_length=1, max_length=64, description="a registered job type")
    payload: dict[str, Any] = Field(default_factory=dict)
    run_at: str | None = Field(default=None, description="ISO 8601 time to run at (delayed job)")
    queue: str | None = Field(default=None, max_length=32)
    tags: Tags | None = None
    then: ThenStep | None = Field(
        default=None, description="the job to submit when this one succeeds (a chain); the chain stops on failure"
    )
    expires_at: str | None = Field(
        default=None,
        description="RFC 3339 time (with a zone) by which the job must have started; a job not started by then "
        "ends EXPIRED without running. In the future, after `run_at` when both are given, at most the retention "
        "ahead",
    )
    debounce: Debounce | None = None

    def then_spec(self) -> dict[str, Any] | None:
        """The chain as the submit path validates it (logic/submit.py `checked_then`)."""
        if self.then is None:
            return None
        step = self.then
        return {"type": step.type, "payload": step.payload, **({"then": step.then} if step.then is not None else {})}


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


class AttemptErrorView(BaseModel):
    """What ended an attempt: `type` the exception's class name (null when no exception did, as for an expired
    lease), `message` its message cut to 200 characters, `traceback` the job code's last frames, innermost last,
    one `path:line in function` a line (offpath's own frames cut away; at most 5 frames and 200 bytes; never a
    value). Only the newest attempt keeps its traceback (the worker's log line has every attempt's); null
    otherwise, or when no frame of the job's code was left."""

    model_config = _LAZY

    type: str | None = None
    message: str
    traceback: str | None = None


class AttemptView(BaseModel):
    """One attempt's end (`outcome`: SUCCEEDED, RETRYING, FAILED or LEASE_EXPIRED) and what ended it (`error`,
    null when it succeeded)."""

    model_config = _LAZY

    attempt: int
    started_at: Timestamp | None
    finished_at: Timestamp
    outcome: str
    error: AttemptErrorView | None = None

    @classmethod
    def of(cls, record: AttemptRecord) -> AttemptView:
        return cls(
            attempt=record.attempt,
            started_at=record.started_at,
            finished_at=record.finished_at,
            outcome=record.outcome,
            error=AttemptErrorView(**error) if (error := _attempt_error(record)) is not None else None,
        )


class HoldupView(BaseModel):
    """Why a job that is due does not start (logic/holdups.py): `paused` (its queue class or its job type),
    `rate_limit` (its type's rate limit has no start free until `until`), `concurrency` (its type allows only so
    many at once, and that many run: `holders` names them when the limit counts per key, the caller's own jobs)."""

    model_config = _LAZY

    reason: Literal["paused", "rate_limit", "concurrency"]
    message: str
    holders: list[str] = Field(default_factory=list)
    until: Timestamp | None = None


class JobView(BaseModel):
    """`payload` is the tenant's own, in the answer about one job (submit, GET /jobs/{job_id}, cancel, retry);
    null in listings and batch answers, which could otherwise grow past what a response may hold.
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
    lease_until: Timestamp | None = Field(
        default=None,
        description="while RUNNING: when the attempt's lease ends; a worker that died is recovered then "
        "(the sweeper requeues the job, or fails it on its last attempt)",
    )
    redrives: int = 0
    retries: int = Field(default=0, description="how often the job was retried by hand (POST /jobs/{id}/retry)")
    retried_at: Timestamp | None = Field(default=None, description="when it was last retried by hand")
    payload: dict[str, Any] | None = None
    attempt_history: list[AttemptView] = Field(default_factory=list)
    tags: dict[str, str] | None = Field(default=None, description="the tags given at submit, if any")
    trace_id: str | None = Field(
        default=None,
        description="the W3C trace the job belongs to: the submitter's `traceparent` trace id, or one of its own; "
        "the worker's log lines for the job carry it",
    )
    discarded_at: Timestamp | None = Field(
        default=None,
        description="when an operator removed the FAILED job's dead letter "
        "(DELETE /queues/{name}/dead-letters/{job_id}); a hand retry clears it",
    )
    batch_id: str | None = Field(default=None, description="the batch the job is a member of (POST /batches)")
    callback_of: str | None = Field(
        default=None, description="the batch whose callback (on_complete or on_success) this job is"
    )
    parent_job_id: str | None = Field(
        default=None,
        description="the job that made this one: the chain step before it, or the job whose `ctx.submit` submitted it",
    )
    next_job_id: str | None = Field(
        default=None, description="the chain's next job, once this job succeeded (submitted exactly once)"
    )
    chain: Literal["pending", "continued", "stopped"] | None = Field(
        default=None,
        description="for a job with `then`: `pending` until it ends, `continued` once it succeeded and its next job "
        "was submitted (`next_job_id`), `stopped` when it failed or was cancelled (no next job; a hand retry that "
        "succeeds continues it); null for a job without `then`",
    )
    expires_at: Timestamp | None = Field(
        default=None,
        description="the submit's expires_at: not started by then, the job ends EXPIRED without running; "
        "a hand retry clears it",
    )
    cancel_reason: str | None = Field(
        default=None,
        description='why a CANCELLED job was cancelled when not by DELETE: "superseded" (a later submit under its '
        "debounce key)",
    )
    superseded_by: str | None = Field(default=None, description="the later job that superseded this one")
    waiting_on: HoldupView | None = Field(
        default=None,
        description="in GET /jobs/{job_id}, for a job that is due but not started: what keeps it waiting now "
        "(a pause, its type's rate limit or concurrency limit); null when nothing does, and in every other answer",
    )

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
            lease_until=_lease_until(job),
            redrives=job.redrives,
            retries=job.retries,
            retried_at=job.retried_at,
            payload=job.payload if with_payload else None,
            attempt_history=[AttemptView.of(record) for record in job.attempt_history],
            tags=dict(job.tags) if job.tags else None,
            trace_id=job.trace_id,
            discarded_at=job.discarded_at,
            batch_id=job.batch_id,
            callback_of=job.callback_of,
            parent_job_id=job.parent_job_id,
            next_job_id=job.next_job_id,
            chain=chain_state(job),
            expires_at=job.start_by,
            cancel_reason=job.cancel_reason,
            superseded_by=job.superseded_by,
        )

    @classmethod
    def dumped(cls, job: Job, *, with_payload: bool = False) -> JobView | Dumped:
        """`JobView.of(job)`'s JSON form, written directly; the model itself when a value needs pydantic's
        conversion (a result or payload that is not plain JSON)."""
        data = job_json(job, with_payload=with_payload)
        return cls.of(job, with_payload=with_payload) if data is None else Dumped(cls, data)


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


# -- the other routes' models ---------------------------------------------------------------------


def __getattr__(name: str) -> Any:
    """Every other route's models (batches, queues, schedules, stats, alarms, quotas, webhooks, ...) live in
    offpath.handlers.api_models_more and are named here too, so the contract and the OpenAPI document find
    every model in this module; that module is imported the first time one of them is asked for. A submit's or
    a job read's cold start builds none of them (~25 ms of CPU; tests/unit/test_cold_imports.py)."""
    if name.startswith("__"):
        raise AttributeError(name)
    from offpath.handlers import api_models_batches, api_models_more

    for module in (api_models_more, api_models_batches):
        if hasattr(module, name):
            return getattr(module, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
