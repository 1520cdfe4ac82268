"""The OpenAPI document of the HTTP API, built from pydantic models of every body it sends and takes.

Kept apart from api_models so that only a request for /openapi.json pays for building these models.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel

from offpath.domain.job import JobStatus
from offpath.handlers.api_models import BatchBody, SubmitBody


class ProgressView(BaseModel):
    fraction: float
    message: str


class JobView(BaseModel):
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
    run_at: datetime | None = None
    created_at: datetime
    updated_at: datetime
    started_at: datetime | None = None
    finished_at: datetime | None = None
    next_attempt_at: datetime | None = None
    redrives: int = 0


class JobPageView(BaseModel):
    jobs: list[JobView]
    cursor: str | None


class BatchItemView(BaseModel):
    index: int
    status: int
    job: JobView | None = None
    error: ErrorBody | None = None


class BatchView(BaseModel):
    results: list[BatchItemView]


class ErrorBody(BaseModel):
    code: str
    message: str
    field: str | None = None


class ErrorView(BaseModel):
    error: ErrorBody


class GatewayErrorView(BaseModel):
    """API Gateway's own answer, given before or instead of the function's (authorizer, throttling, a body
    over 10 MB, the 30 s integration timeout), e.g. {"message": "Unauthorized"}."""

    message: str


class QueueView(BaseModel):
    name: str
    visible: int
    in_flight: int
    delayed: int
    oldest_age_s: float | None
    dlq_depth: int
    redrive: RedriveTaskView | None = None


class QueuesView(BaseModel):
    queues: list[QueueView]


class RedriveTaskView(BaseModel):
    queue: str
    status: str
    moved: int | None = None
    to_move: int | None = None
    task_id: str | None = None


class RedriveView(BaseModel):
    redrive: RedriveTaskView


class FiringView(BaseModel):
    slot: str
    fired_at: datetime
    job_id: str | None
    skipped_reason: str | None


class ScheduleView(BaseModel):
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
    schedules: list[ScheduleView]


class TriggerView(BaseModel):
    schedule: str
    slot: str
    job_id: str | None
    skipped_reason: str | None
    job: JobView | None


class HealthView(BaseModel):
    status: Literal["ok"]


BatchItemView.model_rebuild()


def openapi_document(server_url: str | None = None) -> dict[str, Any]:
    """The OpenAPI 3.1 document of the HTTP API, with schemas generated from the models above."""
    schemas: dict[str, Any] = {}
    for model in (
        SubmitBody,
        BatchBody,
        JobView,
        JobPageView,
        BatchView,
        ErrorView,
        GatewayErrorView,
        QueuesView,
        RedriveView,
        SchedulesView,
        TriggerView,
        HealthView,
    ):
        schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
        schemas.update(schema.pop("$defs", {}))
        schemas[model.__name__] = schema

    def ref(name: str) -> dict[str, Any]:
        return {"$ref": f"#/components/schemas/{name}"}

    def answer(description: str, schema: str, headers: dict[str, Any] | None = None) -> dict[str, Any]:
        answered: dict[str, Any] = {
            "description": description,
            "content": {"application/json": {"schema": ref(schema)}},
        }
        if headers:
            answered["headers"] = headers
        return answered

    def refused(description: str, headers: dict[str, Any] | None = None) -> dict[str, Any]:
        """An error the function answers (ErrorView) or API Gateway answers itself (GatewayErrorView)."""
        refusal = answer(description, "ErrorView", headers)
        refusal["content"]["application/json"]["schema"] = {"anyOf": [ref("ErrorView"), ref("GatewayErrorView")]}
        return refusal

    def header(description: str, schema: dict[str, Any], required: bool = True) -> dict[str, Any]:
        return {"description": description, "required": required, "schema": schema}

    retry_after = header("seconds to wait before retrying", {"type": "string", "pattern": "^[0-9]+$"}, False)
    throttled = refused("API Gateway's throttling of the stage (GatewayErrorView)")
    errors = {
        "401": refused("no or invalid credentials (a JWT authorizer, or the embedded runtime's bearer tokens)"),
        "403": refused(
            "IAM authorisation: no or a refused SigV4 signature; tenant_refused: the authorizer names a tenant "
            "outside the documented charset or length, or a reserved one; forbidden: an admin route and the caller "
            "is not an admin; job_type_forbidden (submits): the job type is for admins or for schedules only"
        ),
        "429": throttled,
        "503": refused(
            "a backing service is unavailable (retry after Retry-After seconds), or API Gateway's 30 s timeout",
            {"Retry-After": retry_after},
        ),
    }
    too_large = refused("over the limit: the payload (ErrorView, the limit in its message) or 10 MB (API Gateway)")
    job_id = {
        "name": "job_id",
        "in": "path",
        "required": True,
        "schema": {"type": "string", "pattern": "^[0-9a-f]{32}$"},
    }
    idempotency = {"name": "Idempotency-Key", "in": "header", "required": False, "schema": {"type": "string"}}
    document: dict[str, Any] = {
        "openapi": "3.1.0",
        "info": {"title": "offpath", "version": "1.0.0", "description": "Background jobs on AWS serverless."},
        "paths": {
            "/jobs": {
                "post": {
                    "operationId": "submitJob",
                    "parameters": [idempotency],
                    "requestBody": {"required": True, "content": {"application/json": {"schema": ref("SubmitBody")}}},
                    "responses": {
                        "202": answer(
                            "accepted",
                            "JobView",
                            {
                                "Location": header(
                                    "the job's path, /jobs/{job_id}", {"type": "string", "pattern": "^/jobs/"}
                                )
                            },
                        ),
                        "200": answer(
                            "replay of an earlier submission with the same key",
                            "JobView",
                            {
                                "Idempotent-Replayed": header(
                                    "always true on a replay", {"type": "string", "enum": ["true"]}
                                )
                            },
                        ),
                        "400": answer("malformed JSON", "ErrorView"),
                        "413": too_large,
                        "422": answer("invalid body, unknown type, payload mismatch, key reuse", "ErrorView"),
                        **errors,
                    },
                },
                "get": {
                    "operationId": "listJobs",
                    "parameters": [
                        {
                            "name": "status",
                            "in": "query",
                            "schema": {"type": "string", "enum": [s.value for s in JobStatus]},
                        },
                        {"name": "type", "in": "query", "schema": {"type": "string"}},
                        {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 100}},
                        {"name": "cursor", "in": "query", "schema": {"type": "string"}},
                    ],
                    "responses": {
                        "200": answer("a page of jobs, newest first", "JobPageView"),
                        "422": answer("bad query", "ErrorView"),
                        **errors,
                    },
                },
            },
            "/jobs/batch": {
                "post": {
                    "operationId": "submitBatch",
                    "requestBody": {"required": True, "content": {"application/json": {"schema": ref("BatchBody")}}},
                    "responses": {
                        "207": answer("one result per item", "BatchView"),
                        "400": answer("malformed JSON", "ErrorView"),
                        "413": too_large,
                        "422": answer("invalid body", "ErrorView"),
                        **errors,
                    },
                }
            },
            "/jobs/{job_id}": {
                "get": {
                    "operationId": "getJob",
                    "parameters": [job_id],
                    "responses": {
                        "200": answer("the job", "JobView"),
                        "404": answer("no such job", "ErrorView"),
                        **errors,
                    },
                }
            },
            "/jobs/{job_id}/cancel": {
                "post": {
                    "operationId": "cancelJob",
                    "parameters": [job_id],
                    "responses": {
                        "200": answer("cancelled", "JobView"),
                        "404": answer("no such job", "ErrorView"),
                        "409": answer("running or finished", "ErrorView"),
                        **errors,
                    },
                }
            },
            "/queues": {
                "get": {
                    "operationId": "listQueues",
                    "description": "Admin: depths, ages and the latest redrive of every queue.",
                    "responses": {"200": answer("queue depths", "QueuesView"), **errors},
                }
            },
            "/queues/{name}/redrive": {
                "post": {
                    "operationId": "redriveQueue",
                    "description": "Admin: move the queue's DLQ messages back; their jobs get fresh attempts.",
                    "parameters": [
                        {"name": "name", "in": "path", "required": True, "schema": {"type": "string"}},
                        {
                            "name": "max_per_second",
                            "in": "query",
                            "schema": {"type": "integer", "minimum": 1, "maximum": 500},
                        },
                    ],
                    "responses": {
                        "202": answer("redrive started", "RedriveView"),
                        "404": answer("no such queue", "ErrorView"),
                        "409": answer("a redrive is already running", "ErrorView"),
                        "422": answer("max_per_second is not a whole number from 1 to 500", "ErrorView"),
                        **errors,
                    },
                }
            },
            "/schedules": {
                "get": {
                    "operationId": "listSchedules",
                    "description": "Admin: the schedules with their next firing and their last firings (job ids).",
                    "responses": {
                        "200": answer("schedules with next firing and last firings", "SchedulesView"),
                        **errors,
                    },
                }
            },
            "/schedules/{name}/trigger": {
                "post": {
                    "operationId": "triggerSchedule",
                    "description": "Admin: fire the schedule now (its overlap policy applies).",
                    "parameters": [{"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}],
                    "responses": {
                        "202": answer("a job was made", "TriggerView"),
                        "200": answer("skipped by the overlap policy", "TriggerView"),
                        "404": answer("no such schedule", "ErrorView"),
                        **errors,
                    },
                }
            },
            "/openapi.json": {
                "get": {
                    "operationId": "openapi",
                    "responses": {
                        "200": {
                            "description": "this document",
                            "content": {"application/json": {"schema": {"type": "object"}}},
                        },
                        **errors,
                    },
                }
            },
            "/health": {
                "get": {
                    "operationId": "health",
                    "security": [],
                    "responses": {"200": answer("alive", "HealthView"), "429": throttled},
                }
            },
        },
        "components": {
            "schemas": schemas,
            "securitySchemes": {
                "jwt": {
                    "type": "http",
                    "scheme": "bearer",
                    "bearerFormat": "JWT",
                    "description": "With a JWT authorizer: the tenant is the token's tenant claim (the stack's "
                    "tenant_claims); admin routes need the offpath/admin scope. The embedded runtime checks its own "
                    "bearer tokens.",
                },
                "iam": {
                    "type": "apiKey",
                    "in": "header",
                    "name": "Authorization",
                    "description": "The default on AWS: a SigV4 signature (service execute-api); the tenant is the "
                    "caller's IAM principal; admins are the principals the stack lists (admin_principals), and "
                    "admin routes are also granted by IAM policy.",
                    "x-amazon-apigateway-authtype": "awsSigv4",
                },
            },
        },
        "security": [{"jwt": []}, {"iam": []}],
    }
    if server_url:
        document["servers"] = [{"url": server_url}]
    return document
