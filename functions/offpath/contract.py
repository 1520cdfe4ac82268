"""The HTTP contract: every route of the API, declared once.

Everything else is derived from `ROUTES`: the api function's router (`handlers/api.py`), the OpenAPI document
(`handlers/openapi.py`), the stack's routes and their authorization (`infra/api.py`) and the local gateway's
route table (`offpath_local/gateway.py`). Models are named, not imported (they live in `handlers/api_models.py`),
so the stack and the local gateway read this module without loading pydantic.

A route is answered by the api function's handler registered under its `operation` (also its operationId).
`function`: which Lambda function runs that handler for the route: the api function, or the read function
for `GET /jobs/{id}`, whose waits (`?wait=N`, up to 20 s each) hold an execution environment apiece: a function
of their own, with its own reserved concurrency on AWS and its own pool of environments locally, so no number
of waits can take the environments that submits and the other routes need (API Gateway routes on the method
and path only, not on the query string, so every read of one job goes there).
`access`: "public" needs no credentials; "tenant" needs an authenticated caller; "admin" also needs the admin
scope (JWT) or an IAM policy that grants that route.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal

from offpath.domain.tags import TAG_FILTER_PATTERN

Access = Literal["public", "tenant", "admin"]
API_FUNCTION = "api"
READ_FUNCTION = "read"

JOB_ID_PATTERN = "^[0-9a-f]{32}$"
# Printable ASCII, without a space at either end (HTTP would trim it from the header).
IDEMPOTENCY_KEY_PATTERN = "^[!-~]([ -~]{0,253}[!-~])?$"
# A listing's cursor: base64url without padding (what the store hands out).
CURSOR_PATTERN = "^[A-Za-z0-9_-]{1,2048}$"


@dataclass(frozen=True)
class Answer:
    """A status the route answers with a body of `model` (a model in api_models); `headers` are names in
    RESPONSE_HEADERS."""

    status: int
    model: str
    description: str
    headers: tuple[str, ...] = ()


@dataclass(frozen=True)
class Refusal:
    """An error the api function answers on this route, and an example of its envelope (code and message)."""

    status: int
    description: str
    code: str
    message: str
    field: str | None = None


@dataclass(frozen=True)
class Parameter:
    name: str
    where: Literal["path", "query", "header"]
    schema: dict[str, Any] = field(default_factory=lambda: {"type": "string"})
    required: bool = False
    description: str = ""


@dataclass(frozen=True)
class Route:
    method: str
    path: str  # API Gateway's template: /jobs/{job_id}
    operation: str
    access: Access
    summary: str
    answers: tuple[Answer, ...]
    refusals: tuple[Refusal, ...] = ()
    request: str | None = None  # the request body's model in api_models
    parameters: tuple[Parameter, ...] = ()
    function: str = API_FUNCTION  # the Lambda function that answers it (API_FUNCTION or READ_FUNCTION)

    def __post_init__(self) -> None:
        stray = {p.name for p in self.parameters if p.where == "path"} - set(self.path_parameters)
        if stray:
            raise ValueError(f"{self.method} {self.path}: path parameters {sorted(stray)} are not in the path")

    @property
    def key(self) -> str:
        """API Gateway's route key: `GET /jobs/{job_id}`."""
        return f"{self.method} {self.path}"

    @property
    def path_parameters(self) -> tuple[str, ...]:
        return tuple(re.findall(r"\{(\w+)\}", self.path))

    def documented_parameters(self) -> list[Parameter]:
        """Every path parameter (a string unless declared otherwise), then the declared query and headers."""
        declared = {p.name: p for p in self.parameters if p.where == "path"}
        path = [declared.get(name) or Parameter(name, "path", required=True) for name in self.path_parameters]
        return path + [p for p in self.parameters if p.where != "path"]


# Headers a route may answer with.
RESPONSE_HEADERS: dict[str, tuple[str, dict[str, Any]]] = {
    "Location": ("the job's path, /jobs/{job_id}", {"type": "string", "pattern": "^/jobs/"}),
    "Idempotent-Replayed": ("always true on a replay", {"type": "string", "enum": ["true"]}),
}

_JOB_ID = Parameter("job_id", "path", {"type": "string", "pattern": JOB_ID_PATTERN}, required=True)
_MALFORMED = Refusal(400, "malformed JSON", "malformed_json", "request body is not valid JSON", "body")
_TOO_LARGE = Refusal(
    413,
    "over a limit: a payload as stored (the limit in the message), the body over Lambda's 6 MB, or the body "
    "over 10 MB (API Gateway's own answer)",
    "payload_too_large",
    "payload is 300000 bytes; the limit is 262144 bytes",
)
_NO_JOB = Refusal(404, "no such job", "not_found", "no such job")
_OVER_QUOTA = Refusal(
    429,
    "over one of the caller's quotas (`field`: submits_per_s, open_jobs or delayed_jobs; nothing was written; "
    "retry after Retry-After seconds), or API Gateway's throttling of the stage (GatewayErrorView)",
    "quota_exceeded",
    "over the quota of 10 submits per second (burst 10)",
    "submits_per_s",
)

# -- webhooks (notices): a tenant's endpoints; another tenant's are not found ----------------------------
WEBHOOK_NAME_PATTERN = "^[a-z0-9][a-z0-9_-]{0,63}$"
_WEBHOOK_NAME = Parameter("name", "path", {"type": "string", "pattern": WEBHOOK_NAME_PATTERN}, required=True)
_NO_WEBHOOK = Refusal(404, "no such endpoint (or another tenant's)", "not_found", "no such webhook endpoint")
WEBHOOK_ROUTES: tuple[Route, ...] = (
    Route(
        "PUT",
        "/webhooks/{name}",
        "putWebhook",
        "tenant",
        "Register or replace a webhook endpoint; its signing secret is shown at creation only",
        answers=(
            Answer(201, "WebhookSecretView", "registered, with its secret"),
            Answer(200, "WebhookView", "replaced (its secret unchanged, enabled again)"),
        ),
        refusals=(
            _MALFORMED,
            Refusal(
                422,
                "invalid body, a refused receiver address, or too many endpoints",
                "invalid_request",
                "url is refused: 10.0.0.1 is private",
                "url",
            ),
        ),
        request="WebhookBody",
        parameters=(_WEBHOOK_NAME,),
    ),
    Route(
        "GET",
        "/webhooks",
        "listWebhooks",
        "tenant",
        "The caller's webhook endpoints",
        answers=(Answer(200, "WebhooksView", "every endpoint of the caller"),),
    ),
    Route(
        "GET",
        "/webhooks/{name}",
        "getWebhook",
        "tenant",
        "One webhook endpoint (disabled ones say why)",
        answers=(Answer(200, "WebhookView", "the endpoint"),),
        refusals=(_NO_WEBHOOK,),
        parameters=(_WEBHOOK_NAME,),
    ),
    Route(
        "DELETE",
        "/webhooks/{name}",
        "deleteWebhook",
        "tenant",
        "Delete a webhook endpoint",
        answers=(Answer(204, "NoContent", "deleted"),),
        refusals=(_NO_WEBHOOK,),
        parameters=(_WEBHOOK_NAME,),
    ),
    Route(
        "POST",
        "/webhooks/{name}/rotate-secret",
        "rotateWebhookSecret",
        "tenant",
        "A new signing secret; the previous one also signs for 24 hours",
        answers=(Answer(200, "WebhookSecretView", "the endpoint with its new secret"),),
        refusals=(_NO_WEBHOOK,),
        parameters=(_WEBHOOK_NAME,),
    ),
    Route(
        "POST",
        "/webhooks/{name}/test",
        "testWebhook",
        "tenant",
        "Send a webhook.test event to the endpoint",
        answers=(Answer(202, "WebhookTestView", "queued for delivery"),),
        refusals=(
            _NO_WEBHOOK,
            Refusal(
                429,
                "over the caller's test deliveries (6 a minute, burst 3; `field`: test); retry after Retry-After "
                "seconds",
                "quota_exceeded",
                "over the limit of 6 test deliveries a minute (burst 3)",
                "test",
            ),
            Refusal(503, "no delivery queue configured", "unavailable", "a backing service is unavailable"),
        ),
        parameters=(_WEBHOOK_NAME,),
    ),
    Route(
        "GET",
        "/webhooks/{name}/deliveries",
        "listWebhookDeliveries",
        "tenant",
        "The endpoint's latest delivery attempts, newest first",
        answers=(Answer(200, "DeliveriesView", "latest attempts"),),
        refusals=(_NO_WEBHOOK,),
        parameters=(_WEBHOOK_NAME,),
    ),
)

# -- batches (fan-out / fan-in): a tenant's own; another tenant's batch is not found -------------------------
_BATCH_ID = Parameter("batch_id", "path", {"type": "string", "pattern": JOB_ID_PATTERN}, required=True)
_NO_BATCH = Refusal(404, "no such batch (or another tenant's)", "not_found", "no such batch")
_BATCH_KEY = Parameter(
    "Idempotency-Key",
    "header",
    {"type": "string", "pattern": IDEMPOTENCY_KEY_PATTERN},
    description="1 to 255 printable ASCII characters, the first and last not a space; the same key and request "
    "give the same batch (or page of jobs)",
)
_BATCH_INVALID = Refusal(
    422,
    "invalid body, unknown type, a job's payload mismatch (`field`: jobs.<i>.payload...), key reuse",
    "invalid_payload",
    "jobs.0: payload.email: Field required",
    "jobs.0.payload.email",
)
_BATCH_CONFLICT = Refusal(
    409,
    "the batch is sealed or cancelled (no more jobs), or a page of jobs is still being added (no seal yet)",
    "conflict",
    "the batch is sealed or cancelled: no more jobs can be added",
)
_BATCH_CURSOR = Parameter(
    "cursor",
    "query",
    {"type": "string", "pattern": CURSOR_PATTERN},
    description="the cursor of the previous page (only a cursor this listing returned is accepted)",
)
_BATCH_LIMIT = Parameter("limit", "query", {"type": "integer", "minimum": 1, "maximum": 100})
BATCH_ROUTES: tuple[Route, ...] = (
    Route(
        "POST",
        "/batches",
        "createBatch",
        "tenant",
        "Submit a batch of up to 100 jobs with callbacks when all are final (`on_complete`) or all SUCCEEDED "
        "(`on_success`); `open` batches take more pages of jobs until sealed",
        answers=(
            Answer(202, "BatchDetailView", "accepted"),
            Answer(200, "BatchDetailView", "replay of an earlier request with the same key", ("Idempotent-Replayed",)),
        ),
        refusals=(_MALFORMED, _TOO_LARGE, _OVER_QUOTA, _BATCH_INVALID),
        request="BatchCreateBody",
        parameters=(_BATCH_KEY,),
    ),
    Route(
        "GET",
        "/batches",
        "listBatches",
        "tenant",
        "The caller's batches, newest first, a page at a time",
        answers=(Answer(200, "BatchPageView", "a page of batches, newest first"),),
        refusals=(Refusal(422, "bad query", "invalid_request", "limit must be a whole number from 1 to 100", "limit"),),
        parameters=(_BATCH_LIMIT, _BATCH_CURSOR),
    ),
    Route(
        "GET",
        "/batches/{batch_id}",
        "getBatch",
        "tenant",
        "One batch: its counts, status and callback jobs",
        answers=(Answer(200, "BatchDetailView", "the batch"),),
        refusals=(_NO_BATCH,),
        parameters=(_BATCH_ID,),
    ),
    Route(
        "GET",
        "/batches/{batch_id}/jobs",
        "listBatchJobs",
        "tenant",
        "The batch's jobs (with their results), a page at a time",
        answers=(Answer(200, "BatchJobsView", "a page of the batch's jobs"),),
        refusals=(
            _NO_BATCH,
            Refusal(422, "bad query", "invalid_request", "limit must be a whole number from 1 to 100", "limit"),
        ),
        parameters=(_BATCH_ID, _BATCH_LIMIT, _BATCH_CURSOR),
    ),
    Route(
        "POST",
        "/batches/{batch_id}/jobs",
        "addBatchJobs",
        "tenant",
        "Add a page of up to 100 jobs to an open batch",
        answers=(Answer(202, "BatchDetailView", "added (a replay with the same key adds nothing)"),),
        refusals=(_MALFORMED, _NO_BATCH, _BATCH_CONFLICT, _TOO_LARGE, _OVER_QUOTA, _BATCH_INVALID),
        request="BatchJobsBody",
        parameters=(_BATCH_ID, _BATCH_KEY),
    ),
    Route(
        "POST",
        "/batches/{batch_id}/seal",
        "sealBatch",
        "tenant",
        "Seal an open batch: no more jobs; its callbacks run when due (sealing again is harmless)",
        answers=(Answer(200, "BatchDetailView", "sealed"),),
        refusals=(_NO_BATCH, _BATCH_CONFLICT),
        parameters=(_BATCH_ID,),
    ),
    Route(
        "POST",
        "/batches/{batch_id}/cancel",
        "cancelBatch",
        "tenant",
        "Cancel a batch: its jobs not started are cancelled, no more are added; the callbacks follow their rules",
        answers=(Answer(200, "BatchDetailView", "cancelled"),),
        refusals=(_NO_BATCH,),
        parameters=(_BATCH_ID,),
    ),
)


# -- pause and resume (docs/flow-control.md): admin; a paused queue class or job type keeps its jobs queued ------
_PAUSE_REASON = Refusal(
    422, 'the body is not {} or {"reason": 1 to 200 characters}', "invalid_request", "reason: ...", "reason"
)
_SWITCH_FAILED = Refusal(
    503,
    "the queue's polling could not be switched (the pause state in the table stands; the same call again applies it)",
    "unavailable",
    "a backing service is unavailable; retry later",
)


def _pause_routes(kind: str, path: str, what: str) -> tuple[Route, ...]:
    missing = Refusal(404, f"no such {what}", "not_found", f"no such {what}")
    name = Parameter("name", "path", {"type": "string", "minLength": 1, "maxLength": 128}, required=True)
    return (
        Route(
            "POST",
            f"{path}/{{name}}/pause",
            f"pause{kind}",
            "admin",
            f"Admin: pause a {what}: its jobs stay queued (no attempt spent) until it is resumed; pausing a paused "
            f"{what} changes nothing",
            answers=(Answer(200, "PauseView", "paused (or already paused: its original paused_at and reason)"),),
            refusals=(_MALFORMED, missing, _PAUSE_REASON, _SWITCH_FAILED),
            request="PauseBody",
            parameters=(name,),
        ),
        Route(
            "POST",
            f"{path}/{{name}}/resume",
            f"resume{kind}",
            "admin",
            f"Admin: resume a paused {what}: its waiting jobs run; resuming one not paused changes nothing",
            answers=(Answer(200, "PauseView", "resumed (or was not paused)"),),
            refusals=(missing, _SWITCH_FAILED),
            parameters=(name,),
        ),
    )


PAUSE_ROUTES: tuple[Route, ...] = (
    *_pause_routes("Queue", "/queues", "queue"),
    *_pause_routes("JobType", "/job-types", "job type"),
)

ROUTES: tuple[Route, ...] = (
    Route(
        "POST",
        "/jobs",
        "submitJob",
        "tenant",
        "Submit a job",
        answers=(
            Answer(202, "JobView", "accepted", ("Location",)),
            Answer(200, "JobView", "replay of an earlier submission with the same key", ("Idempotent-Replayed",)),
        ),
        refusals=(
            _MALFORMED,
            Refusal(
                403,
                "the job type is not open to the caller (admin or schedule-only)",
                "job_type_forbidden",
                "job type billing.monthly_invoices is submitted by schedules only",
                "type",
            ),
            _TOO_LARGE,
            _OVER_QUOTA,
            Refusal(
                422,
                "invalid body, unknown type, payload mismatch, key reuse",
                "invalid_payload",
                "payload.email: Field required",
                "payload.email",
            ),
        ),
        request="SubmitBody",
        parameters=(
            Parameter(
                "Idempotency-Key",
                "header",
                {"type": "string", "pattern": IDEMPOTENCY_KEY_PATTERN},
                description="1 to 255 printable ASCII characters, the first and last not a space; the same key "
                "and request give the same job",
            ),
        ),
    ),
    Route(
        "POST",
        "/jobs/batch",
        "submitBatch",
        "tenant",
        "Submit up to 100 jobs, each answered on its own",
        answers=(Answer(207, "BatchView", "one result per item"),),
        refusals=(
            _MALFORMED,
            _TOO_LARGE,
            Refusal(
                422,
                "invalid body",
                "invalid_request",
                "jobs: List should have at most 100 items after validation, not 101",
                "jobs",
            ),
        ),
        request="BatchBody",
    ),
    Route(
        "GET",
        "/jobs",
        "listJobs",
        "tenant",
        "The caller's jobs, newest first, a page at a time",
        answers=(Answer(200, "JobPageView", "a page of jobs, newest first"),),
        refusals=(Refusal(422, "bad query", "invalid_request", "limit must be a whole number from 1 to 100", "limit"),),
        parameters=(
            Parameter("status", "query", {"$ref": "#/components/schemas/JobStatus"}),
            Parameter("type", "query", {"$ref": "#/components/schemas/JobTypeName"}),
            Parameter("limit", "query", {"type": "integer", "minimum": 1, "maximum": 100}),
            Parameter(
                "cursor",
                "query",
                {"type": "string", "pattern": CURSOR_PATTERN},
                description="the cursor of the previous page (only a cursor this listing returned is accepted)",
            ),
            Parameter(
                "tenant",
                "query",
                {"type": "string", "enum": ["system"]},
                description="admin: `system` lists the jobs that schedules made (403 for a tenant)",
            ),
            Parameter(
                "tag",
                "query",
                {"type": "string", "pattern": f"^{TAG_FILTER_PATTERN}$"},
                description="`key:value`: the jobs tagged so at submit",
            ),
        ),
    ),
    Route(
        "POST",
        "/jobs/bulk",
        "bulkJobs",
        "tenant",
        "Retry or cancel every job a filter matches (the listing's filters), at most 10,000; with `dry_run`, only "
        "count them and show a sample",
        answers=(
            Answer(
                202,
                "BulkOperationView",
                "the operation, started (a small one may be finished already); follow it at "
                "GET /jobs/bulk/{operation_id}",
            ),
            Answer(200, "BulkPreviewView", "dry run: how many jobs match (exact, or a lower bound) and a sample"),
        ),
        refusals=(
            _MALFORMED,
            Refusal(
                403,
                "`filter.tenant` names another tenant and the caller is not an admin",
                "forbidden",
                "this route is for admins (the admin scope, or a listed IAM principal)",
            ),
            Refusal(
                409,
                "too many bulk operations are running (5 of the caller's, or 100 over all callers)",
                "conflict",
                "too many bulk operations are running; retry when one is over",
            ),
            Refusal(
                422,
                "invalid body: an unknown action, status or job type, a malformed tag or tenant",
                "invalid_request",
                "action: Input should be 'retry' or 'cancel'",
                "action",
            ),
        ),
        request="BulkBody",
    ),
    Route(
        "GET",
        "/jobs/bulk/{operation_id}",
        "getBulkOperation",
        "tenant",
        "A bulk operation's progress: matched, done, skipped (by reason), failed; running, finished or stopped",
        answers=(Answer(200, "BulkOperationView", "the operation as far as it got"),),
        refusals=(Refusal(404, "no such operation (or another caller's)", "not_found", "no such bulk operation"),),
        parameters=(Parameter("operation_id", "path", {"type": "string", "pattern": JOB_ID_PATTERN}, required=True),),
    ),
    Route(
        "GET",
        "/jobs/{job_id}",
        "getJob",
        "tenant",
        "One job; with `wait`, as soon as it is final or when the wait is over",
        answers=(Answer(200, "JobView", "the job (with `wait`: final, or as it is when the wait is over)"),),
        refusals=(
            _NO_JOB,
            Refusal(
                422,
                "wait is not a number of seconds above 0 and at most 20",
                "invalid_request",
                "wait must be a number of seconds above 0 and at most 20",
                "wait",
            ),
            Refusal(
                429,
                "over the caller's waits at once (`field`: wait); retry after Retry-After seconds, or follow many "
                "jobs with webhooks or the job event stream",
                "quota_exceeded",
                "over the limit of 5 waits at once per tenant",
                "wait",
            ),
        ),
        parameters=(
            _JOB_ID,
            Parameter(
                "wait",
                "query",
                {"type": "number", "exclusiveMinimum": 0, "maximum": 20},
                description="seconds to wait for the job to be final (long-poll); the answer comes as soon as it "
                "is, or when the wait is over with the job as it is then; at most 5 waits at once per tenant "
                "(429 past them)",
            ),
        ),
        function=READ_FUNCTION,
    ),
    Route(
        "POST",
        "/jobs/{job_id}/cancel",
        "cancelJob",
        "tenant",
        "Cancel a job that has not started",
        answers=(Answer(200, "JobView", "cancelled"),),
        refusals=(_NO_JOB, Refusal(409, "running or finished", "conflict", "cannot move a RUNNING job to CANCELLED")),
        parameters=(_JOB_ID,),
    ),
    Route(
        "POST",
        "/jobs/{job_id}/retry",
        "retryJob",
        "tenant",
        "Run a FAILED, CANCELLED or EXPIRED job again, with a fresh attempt budget (without its expiry). A CANCELLED "
        "job whose `run_at` is still ahead keeps it (SCHEDULED again, or QUEUED with its message delayed) unless "
        "`now=true`",
        answers=(
            Answer(
                202,
                "JobView",
                "back to QUEUED, its message sent (delayed to its run_at, if ahead); or back to SCHEDULED (a "
                "cancelled job's run_at further ahead than 15 minutes)",
            ),
        ),
        refusals=(
            _NO_JOB,
            Refusal(409, "not failed, cancelled or expired", "conflict", "job is RUNNING"),
            Refusal(422, "now is not true or false", "invalid_request", "now must be true or false", "now"),
            _OVER_QUOTA,
        ),
        parameters=(
            _JOB_ID,
            Parameter(
                "now",
                "query",
                {"type": "boolean", "default": False},
                description="true: run now, even if the cancelled job's run_at is still ahead",
            ),
        ),
    ),
    Route(
        "GET",
        "/quotas",
        "getQuotas",
        "tenant",
        "The caller's quotas (per second, open and delayed jobs) and its usage of them",
        answers=(Answer(200, "QuotasView", "the caller's quotas and usage"),),
    ),
    Route(
        "GET",
        "/job-types",
        "listJobTypes",
        "tenant",
        "The registered job types, each with its queue, policy and payload schema",
        answers=(Answer(200, "JobTypesView", "every registered job type"),),
    ),
    Route(
        "GET",
        "/queues",
        "listQueues",
        "admin",
        "Admin: queue depths (every tenant's traffic)",
        answers=(Answer(200, "QueuesView", "queue depths"),),
    ),
    Route(
        "POST",
        "/queues/{name}/redrive",
        "redriveQueue",
        "admin",
        "Admin: move the queue's DLQ messages back; their jobs get fresh attempts",
        answers=(Answer(202, "RedriveView", "redrive started"),),
        refusals=(
            Refusal(404, "no such queue", "not_found", "no such queue"),
            Refusal(
                409, "a redrive is already running", "redrive_in_progress", "a redrive of this queue is already running"
            ),
            Refusal(
                422,
                "max_per_second is not a whole number from 1 to 500",
                "invalid_request",
                "max_per_second must be a whole number from 1 to 500",
                "max_per_second",
            ),
        ),
        parameters=(Parameter("max_per_second", "query", {"type": "integer", "minimum": 1, "maximum": 500}),),
    ),
    *PAUSE_ROUTES,
    Route(
        "DELETE",
        "/queues/{name}/dead-letters/{job_id}",
        "discardDeadLetter",
        "admin",
        "Admin: remove a FAILED job's dead letter from the queue's DLQ; the job stays FAILED, marked discarded, "
        "and a later redrive does not run it",
        answers=(Answer(200, "JobView", "removed; the job, FAILED, with its `discarded_at`"),),
        refusals=(
            Refusal(
                404,
                "no such job, or no message of the job in the queue's DLQ (among the first 100 it searches)",
                "not_found",
                "no dead letter of this job in the queue's DLQ",
            ),
            Refusal(409, "the job is no longer FAILED (its stale message is removed)", "conflict", "job is QUEUED"),
            Refusal(
                422,
                "the queue name or the job id is not a valid one",
                "invalid_request",
                "name must be one of the queue classes",
                "name",
            ),
        ),
        parameters=(Parameter("name", "path", {"$ref": "#/components/schemas/QueueName"}, required=True), _JOB_ID),
    ),
    Route(
        "GET",
        "/schedules",
        "listSchedules",
        "admin",
        "Admin: schedules with their next firing and last firings",
        answers=(Answer(200, "SchedulesView", "schedules with next firing and last firings"),),
    ),
    Route(
        "POST",
        "/schedules/{name}/trigger",
        "triggerSchedule",
        "admin",
        "Admin: fire the schedule now (its overlap policy applies)",
        answers=(
            Answer(202, "TriggerView", "a job was made"),
            Answer(200, "TriggerView", "skipped by the overlap policy"),
        ),
        refusals=(Refusal(404, "no such schedule", "not_found", "no such schedule"),),
    ),
    Route(
        "GET",
        "/stats",
        "getStats",
        "admin",
        "Admin: per queue class and job type, per minute: jobs submitted, succeeded, failed, retried and "
        "dead-lettered, run time and queue wait percentiles",
        answers=(Answer(200, "StatsView", "one row per minute, queue class and job type that counted anything"),),
        refusals=(
            Refusal(
                422,
                "minutes is not a whole number from 1 to 1440",
                "invalid_request",
                "minutes must be a whole number from 1 to 1440",
                "minutes",
            ),
        ),
        parameters=(
            Parameter(
                "minutes",
                "query",
                {"type": "integer", "minimum": 1, "maximum": 1440, "default": 60},
                description="how many minutes back from now",
            ),
        ),
    ),
    Route(
        "GET",
        "/alarms",
        "listAlarms",
        "admin",
        "Admin: the stack's alarms with their states, and their recent state changes",
        answers=(Answer(200, "AlarmsView", "alarms and recent changes"),),
    ),
    Route(
        "GET",
        "/openapi.json",
        "openapi",
        "tenant",
        "This document",
        answers=(Answer(200, "OpenApiDocument", "this document"),),
    ),
    Route("GET", "/health", "health", "public", "Liveness", answers=(Answer(200, "HealthView", "alive"),)),
    *WEBHOOK_ROUTES,
    *BATCH_ROUTES,
)
