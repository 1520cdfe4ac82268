"""The api's models that `POST /jobs` and `GET /jobs/{job_id}` do not use: the batch route's, the operator's
(queues, redrives, schedules, job types, stats, alarms, health, the OpenAPI document), quotas' and webhooks'.
Imported on first use, through offpath.handlers.api_models (which names them too), so the hot routes' cold
start does not build them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    RootModel,
    SerializerFunctionWrapHandler,
    StrictBool,
    WithJsonSchema,
    model_serializer,
)

from offpath.domain.bulk import BulkFilter, BulkOperation
from offpath.domain.events import EventType
from offpath.domain.job import JobStatus
from offpath.domain.operations import QueueStats, RedriveTask
from offpath.domain.pauses import MAX_REASON_CHARS, Pause
from offpath.domain.tags import TAG_FILTER_PATTERN
from offpath.handlers.api_models import (
    _LAZY,
    _REDRIVE_EXAMPLE,
    JOB_EXAMPLE,
    ErrorBody,
    JobView,
    Projection,
    SubmitBody,
    Timestamp,
    _examples,
)
from offpath.tenancy import TENANT_PATTERN

if TYPE_CHECKING:
    from offpath.domain.webhooks import Endpoint


class BatchItemBody(SubmitBody):
    model_config = _LAZY

    idempotency_key: str | None = Field(default=None, max_length=255)


class BatchBody(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    jobs: list[BatchItemBody] = Field(min_length=1, max_length=100)


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
    paused: bool = Field(default=False, description="paused: its jobs wait, unpolled, no attempt spent")
    paused_at: Timestamp | None = Field(default=None, description="since when it is paused")
    pause_reason: str | None = Field(default=None, description="the reason given with the pause")

    @classmethod
    def of(cls, stats: QueueStats, redrive: RedriveTask | None, pause: Pause | None = None) -> QueueView:
        return cls(
            name=stats.name,
            visible=stats.visible,
            in_flight=stats.in_flight,
            delayed=stats.delayed,
            oldest_age_s=stats.oldest_age_s,
            dlq_depth=stats.dlq_depth,
            redrive=RedriveTaskView.of(redrive) if redrive else None,
            **PauseView.fields_of(pause),
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
                    "paused": True,
                    "paused_at": "2026-12-02T10:00:00Z",
                    "pause_reason": "database migration",
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


class JobTypeLimitsView(BaseModel):
    """A job type's flow limits (docs/flow-control.md); a limit not declared is null."""

    model_config = _LAZY

    concurrency_key: str | None = Field(
        description="the payload field path the limits count per (per tenant too), 'function' for a function of "
        "the payload; null: the whole type"
    )
    max_concurrency: int | None = Field(description="at most this many of one key's jobs RUNNING at once")
    rate_limit: str | None = Field(description="at most this many of one key's jobs started per second, minute or hour")


class JobTypeView(BaseModel):
    model_config = _LAZY

    name: str
    queue: str
    max_attempts: int
    timeout_s: int
    submitted_by: str = Field(description="who may submit it: tenant (any caller), admin, or system (schedules)")
    payload_schema: dict[str, Any] = Field(description="the JSON Schema of the job type's payload")
    limits: JobTypeLimitsView | None = Field(default=None, description="its flow limits; null: none declared")
    paused: bool = Field(default=False, description="paused: its jobs wait, unclaimed, no attempt spent")
    paused_at: Timestamp | None = Field(default=None, description="since when it is paused")
    pause_reason: str | None = Field(default=None, description="the reason given with the pause")


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
                    "limits": None,
                    "paused": False,
                    "paused_at": None,
                    "pause_reason": None,
                },
                {
                    "name": "demo.rated",
                    "queue": "critical",
                    "max_attempts": 3,
                    "timeout_s": 10,
                    "submitted_by": "tenant",
                    "payload_schema": {
                        "properties": {
                            "account": {"maxLength": 100, "minLength": 1, "title": "Account", "type": "string"}
                        },
                        "required": ["account"],
                        "title": "AccountPayload",
                        "type": "object",
                    },
                    "limits": {"concurrency_key": "account", "max_concurrency": None, "rate_limit": "2/s"},
                    "paused": False,
                    "paused_at": None,
                    "pause_reason": None,
                },
            ]
        }
    )

    job_types: list[JobTypeView]


class PauseBody(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    reason: str | None = Field(
        default=None, min_length=1, max_length=MAX_REASON_CHARS, description="why (shown with the pause)"
    )


class PauseView(BaseModel):
    """A queue class's or a job type's pause state after a pause or a resume; `changed`: false when it already was
    so (a repeated pause keeps the first one's `paused_at` and reason)."""

    model_config = _examples(
        {
            "kind": "queue",
            "name": "default",
            "paused": True,
            "paused_at": "2026-12-02T10:00:00Z",
            "pause_reason": "database migration",
            "changed": True,
            "waiting": 3,
        }
    )

    kind: Literal["queue", "job_type"]
    name: str
    paused: bool
    paused_at: Timestamp | None = None
    pause_reason: str | None = None
    changed: bool
    waiting: int | None = Field(default=None, description="a queue class's visible and delayed messages")

    @staticmethod
    def fields_of(pause: Pause | None) -> dict[str, Any]:
        if pause is None:
            return {"paused": False, "paused_at": None, "pause_reason": None}
        return {"paused": True, "paused_at": pause.paused_at, "pause_reason": pause.reason}


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
    expired: int = Field(default=0, description="jobs not started by their expires_at, ended EXPIRED without running")
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
                    "expired": 0,
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
    """One attempt to deliver an event: `type` the event's type (job.succeeded...), `job_id` the job it is about
    (null for a `webhook.test` event)."""

    model_config = _LAZY

    event_id: str
    type: str
    job_id: str | None = None
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
                    "job_id": "3f2a9c0e5b7d4e1f8a6c2b9d0e4f7a1c",
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
                    "job_id": "3f2a9c0e5b7d4e1f8a6c2b9d0e4f7a1c",
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


# -- bulk actions (POST /jobs/bulk, GET /jobs/bulk/{operation_id}) ---------------------------------------------


class BulkFilterBody(BaseModel):
    """The listing's filters (GET /jobs). `tenant`: whose jobs (admins only, for another tenant's; a tenant may
    name only itself)."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    status: JobStatus | None = None
    type: Annotated[
        str | None,
        WithJsonSchema(
            {"anyOf": [{"$ref": "#/components/schemas/JobTypeName"}, {"type": "null"}], "description": "a job type"}
        ),
    ] = Field(default=None, min_length=1, max_length=64)
    tag: str | None = Field(
        default=None, pattern=f"^{TAG_FILTER_PATTERN}$", description="`key:value`: the jobs tagged so at submit"
    )
    tenant: str | None = Field(
        default=None,
        pattern=f"^{TENANT_PATTERN.pattern}$",
        description="admin: another tenant's jobs (`system`: the schedules'); a tenant may name only itself",
    )


class BulkBody(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    action: Literal["retry", "cancel"]
    filter: BulkFilterBody = Field(default_factory=BulkFilterBody)
    # Strict: `0` or `"yes"` is no answer to "only a preview?" (the document says boolean).
    dry_run: StrictBool = False


class BulkFilterView(BaseModel):
    model_config = _LAZY

    tenant: str
    status: JobStatus | None = None
    type: str | None = None
    tag: str | None = None

    @classmethod
    def of(cls, bulk_filter: BulkFilter) -> BulkFilterView:
        tag = f"{bulk_filter.tag[0]}:{bulk_filter.tag[1]}" if bulk_filter.tag is not None else None
        return cls(tenant=bulk_filter.tenant, status=bulk_filter.status, type=bulk_filter.job_type, tag=tag)


class BulkSampleView(BaseModel):
    model_config = _LAZY

    job_id: str
    type: str
    status: JobStatus
    created_at: Timestamp


_BULK_FILTER_EXAMPLE = {"tenant": "tenant-a", "status": "FAILED", "type": "send_welcome_email", "tag": None}


class BulkPreviewView(BaseModel):
    """A dry run: `count` jobs match now (`exact`: false when it is a lower bound: past `limit`, the most one
    operation matches, or past the 10 listing pages of 100 jobs a dry run reads); `sample`: the first 10, newest
    first."""

    model_config = _examples(
        {
            "dry_run": True,
            "action": "retry",
            "filter": _BULK_FILTER_EXAMPLE,
            "count": 25,
            "exact": True,
            "limit": 10000,
            "sample": [
                {
                    "job_id": JOB_EXAMPLE["job_id"],
                    "type": "send_welcome_email",
                    "status": "FAILED",
                    "created_at": "2026-12-01T09:00:00Z",
                }
            ],
        }
    )

    dry_run: Literal[True] = True
    action: Literal["retry", "cancel"]
    filter: BulkFilterView
    count: int
    exact: bool
    limit: int
    sample: list[BulkSampleView]


class BulkFailureView(BaseModel):
    model_config = _LAZY

    job_id: str
    error: str


class BulkOperationView(BaseModel):
    """A bulk operation. `status`: running, finished (every matched job went through, or `limit_reached`), or
    stopped (`stop_reason`: over a quota of the jobs' tenant; the jobs after it untouched). `matched`: the jobs
    the filter matched so far (created before the operation, at most `limit`); each is `done`, `skipped` (the
    action does not apply to its state: `skipped_reasons` counts them by reason) or `failed` (`failures`: the
    first 20, with the error). A running operation's counts are those of the pages it finished."""

    model_config = _examples(
        {
            "operation_id": "5d1c0e3f9a7b4c2e8f6a1b3d5c7e9f0a",
            "action": "retry",
            "filter": _BULK_FILTER_EXAMPLE,
            "status": "finished",
            "matched": 26,
            "done": 25,
            "skipped": 1,
            "failed": 0,
            "skipped_reasons": {"job is RUNNING": 1},
            "failures": [],
            "limit": 10000,
            "limit_reached": False,
            "stop_reason": None,
            "created_at": "2026-12-01T09:00:00Z",
            "updated_at": "2026-12-01T09:00:01Z",
            "finished_at": "2026-12-01T09:00:01Z",
        }
    )

    operation_id: str
    action: Literal["retry", "cancel"]
    filter: BulkFilterView
    status: Literal["running", "finished", "stopped"]
    matched: int
    done: int
    skipped: int
    failed: int
    skipped_reasons: dict[str, int]
    failures: list[BulkFailureView]
    limit: int
    limit_reached: bool
    stop_reason: str | None = None
    created_at: Timestamp
    updated_at: Timestamp
    finished_at: Timestamp | None = None

    @classmethod
    def of(cls, operation: BulkOperation) -> BulkOperationView:
        return cls(
            operation_id=operation.operation_id,
            action=operation.action,
            filter=BulkFilterView.of(operation.filter),
            status=operation.status,
            matched=operation.matched,
            done=operation.done,
            skipped=operation.skipped,
            failed=operation.failed,
            skipped_reasons=dict(operation.skipped_reasons),
            failures=[BulkFailureView(job_id=f.job_id, error=f.error) for f in operation.failures],
            limit=operation.limit,
            limit_reached=operation.limit_reached,
            stop_reason=operation.stop_reason,
            created_at=operation.created_at,
            updated_at=operation.updated_at,
            finished_at=operation.finished_at,
        )
