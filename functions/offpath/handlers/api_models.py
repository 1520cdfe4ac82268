"""The HTTP contract: request bodies, the job view, errors, and the OpenAPI document built from them."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from offpath.domain.errors import InvalidRequestError
from offpath.domain.job import Job, JobStatus

SAFE_FIELD_PART = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$|^[0-9]{1,6}$")


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


class QueueView(BaseModel):
    name: str
    visible: int
    in_flight: int
    delayed: int
    oldest_age_s: float | None
    dlq_depth: int


class QueuesView(BaseModel):
    queues: list[QueueView]


class HealthView(BaseModel):
    status: Literal["ok"]


BatchItemView.model_rebuild()


def job_view(job: Job) -> dict[str, Any]:
    view: dict[str, Any] = {
        "job_id": job.job_id,
        "type": job.type,
        "queue": job.queue,
        "status": job.status.value,
        "attempts": job.attempt,
        "max_attempts": job.max_attempts,
        "progress": ({"fraction": job.progress.fraction, "message": job.progress.message} if job.progress else None),
        "result": job.result,
        "error": job.error,
        "idempotency_key": job.idempotency_key,
        "run_at": _iso(job.run_at),
        "created_at": _iso(job.created_at),
        "updated_at": _iso(job.updated_at),
        "started_at": _iso(job.started_at),
        "finished_at": _iso(job.finished_at),
        "next_attempt_at": _iso(job.next_attempt_at),
        "redrives": job.redrives,
    }
    return view


def _iso(when: datetime | None) -> str | None:
    return when.isoformat().replace("+00:00", "Z") if when else None


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


def openapi_document(server_url: str | None = None) -> dict[str, Any]:
    """The OpenAPI 3.1 document of the HTTP API, with schemas generated from the models above."""
    schemas: dict[str, Any] = {}
    for model in (SubmitBody, BatchBody, JobView, JobPageView, BatchView, ErrorView, QueuesView, HealthView):
        schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
        schemas.update(schema.pop("$defs", {}))
        schemas[model.__name__] = schema

    def ref(name: str) -> dict[str, Any]:
        return {"$ref": f"#/components/schemas/{name}"}

    def answer(description: str, schema: str) -> dict[str, Any]:
        return {"description": description, "content": {"application/json": {"schema": ref(schema)}}}

    errors = {
        "401": answer("no or invalid credentials", "ErrorView"),
        "503": answer("the job store is unavailable; retry after Retry-After seconds", "ErrorView"),
    }
    job_id = {"name": "job_id", "in": "path", "required": True, "schema": {"type": "string"}}
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
                        "202": answer("accepted", "JobView"),
                        "200": answer("replay of an earlier submission with the same key", "JobView"),
                        "400": answer("malformed JSON", "ErrorView"),
                        "413": answer("payload over the limit", "ErrorView"),
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
                        "413": answer("body over the limit", "ErrorView"),
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
                    "responses": {"200": answer("queue depths", "QueuesView"), **errors},
                }
            },
            "/health": {
                "get": {"operationId": "health", "security": [], "responses": {"200": answer("alive", "HealthView")}}
            },
        },
        "components": {"schemas": schemas},
    }
    if server_url:
        document["servers"] = [{"url": server_url}]
    return document
