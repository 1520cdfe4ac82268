"""The HTTP API (API Gateway HTTP API, payload format 2.0). Thin: parse, call the logic, map the result."""

from __future__ import annotations

import functools
import json
import logging
from dataclasses import dataclass
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response

from offpath.adapters.sqs_queue import SqsJobQueue, SqsQueueMonitor, SqsRedriver
from offpath.domain.errors import (
    IdempotencyConflictError,
    InvalidRequestError,
    JobConflictError,
    JobNotFoundError,
    JobTypeForbiddenError,
    PayloadTooLargeError,
    QueueUnavailableError,
    RedriveInProgressError,
    StoreUnavailableError,
    TenantRefusedError,
    UnknownScheduleError,
)
from offpath.domain.job import JobStatus
from offpath.domain.ports import QueueMonitor, Redriver
from offpath.domain.registry import Submitter
from offpath.handlers.api_models import (
    BatchBody,
    SubmitBody,
    job_view,
    parse_body,
)
from offpath.handlers.composition import build_ports, submit_policy
from offpath.logic import queries
from offpath.logic.schedules import SYSTEM_TENANT, describe_schedules, fire_schedule
from offpath.logic.submit import Ports, SubmitPolicy, SubmitRequest, submit_batch, submit_job
from offpath.observability import bind_request_id, configure_logging
from offpath.settings import Settings
from offpath.tenancy import is_admin, tenant_of

logger = logging.getLogger("offpath.api")

JOB_ID_LENGTH = 32
# Room for the envelope around a payload ({"type": ..., "run_at": ...}).
ENVELOPE_ALLOWANCE_BYTES = 4 * 1024
RETRY_AFTER_S = "2"


@dataclass
class ApiServices:
    ports: Ports
    policy: SubmitPolicy
    monitor: QueueMonitor
    redriver: Redriver
    settings: Settings


@functools.lru_cache(maxsize=1)
def default_services() -> ApiServices:
    settings = Settings.from_env()
    configure_logging("api", settings.log_level)
    ports = build_ports(settings, "api")
    sqs = ports.queue.client if isinstance(ports.queue, SqsJobQueue) else None
    return ApiServices(
        ports=ports,
        policy=submit_policy(settings),
        monitor=SqsQueueMonitor(settings.queue_urls, settings.dlq_urls, client=sqs),
        redriver=SqsRedriver(settings.queue_urls, settings.dlq_urls, mode=settings.redrive_mode, client=sqs),
        settings=settings,
    )


app = APIGatewayHttpResolver()


def handler(event: dict[str, Any], context: Any, services: ApiServices | None = None) -> dict[str, Any]:
    services = services or default_services()
    bind_request_id(event.get("requestContext", {}).get("requestId"))
    app.append_context(services=services)
    try:
        return app.resolve(event, context)
    finally:
        services.ports.metrics.flush()


def _services() -> ApiServices:
    services: ApiServices = app.context["services"]
    return services


def _json(status: int, body: Any, headers: dict[str, str] | None = None) -> Response[str]:
    return Response(
        status_code=status,
        content_type="application/json",
        body=json.dumps(body, separators=(",", ":"), default=str),
        headers=headers,
    )


def _error(status: int, code: str, message: str, field: str | None = None, **headers: str) -> Response[str]:
    error: dict[str, Any] = {"code": code, "message": message}
    if field:
        error["field"] = field
    return _json(status, {"error": error}, headers or None)


def _tenant() -> str:
    tenant = tenant_of(app.current_event.raw_event, _services().settings.tenant_claims)
    if tenant is None:
        raise _Unauthorized()
    return tenant


def _is_admin() -> bool:
    return is_admin(app.current_event.raw_event, _services().settings.admin_principals)


def _submitter() -> Submitter:
    return "admin" if _is_admin() else "tenant"


def _decoded_json(limit_bytes: int, payload_limit_bytes: int | None = None) -> Any:
    """`payload_limit_bytes`: the limit the caller knows, named in the 413 instead of the body's."""
    try:
        raw = app.current_event.decoded_body or ""
    except ValueError:  # a base64 body whose bytes are not UTF-8 (UnicodeDecodeError)
        raise _MalformedJson() from None
    size = len(raw.encode()) if isinstance(raw, str) else len(raw)
    if size > limit_bytes:
        raise PayloadTooLargeError(size, payload_limit_bytes or limit_bytes)
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):  # RecursionError: arrays or objects nested thousands deep
        raise _MalformedJson() from None


class _Unauthorized(Exception):
    pass


class _Forbidden(Exception):
    pass


def _require_admin() -> None:
    _tenant()
    if not _is_admin():
        raise _Forbidden()


class _MalformedJson(Exception):
    pass


# -- routes -----------------------------------------------------------------------------------


@app.get("/health")
def health() -> Response[str]:
    return _json(200, {"status": "ok"})


@app.get("/openapi.json")
def openapi() -> Response[str]:
    from offpath.handlers.openapi import openapi_document

    return _json(200, openapi_document())


@app.post("/jobs")
def submit() -> Response[str]:
    services = _services()
    tenant = _tenant()
    body: SubmitBody = parse_body(
        SubmitBody,
        _decoded_json(
            services.policy.payload_limit_bytes + ENVELOPE_ALLOWANCE_BYTES, services.policy.payload_limit_bytes
        ),
    )
    request = SubmitRequest(
        tenant=tenant,
        type=body.type,
        payload=body.payload,
        idempotency_key=app.current_event.headers.get("idempotency-key"),
        queue=body.queue,
        run_at=body.run_at,
        submitter=_submitter(),
    )
    submitted = submit_job(request, services.ports, services.policy)
    if submitted.replayed:
        return _json(200, job_view(submitted.job), {"Idempotent-Replayed": "true"})
    return _json(202, job_view(submitted.job), {"Location": f"/jobs/{submitted.job.job_id}"})


@app.post("/jobs/batch")
def submit_many() -> Response[str]:
    services = _services()
    tenant = _tenant()
    limit = 100 * (services.policy.payload_limit_bytes + ENVELOPE_ALLOWANCE_BYTES)
    body: BatchBody = parse_body(BatchBody, _decoded_json(limit))
    submitter = _submitter()
    requests = [
        SubmitRequest(
            tenant=tenant,
            type=item.type,
            payload=item.payload,
            idempotency_key=item.idempotency_key,
            queue=item.queue,
            run_at=item.run_at,
            submitter=submitter,
        )
        for item in body.jobs
    ]
    results = []
    for item in submit_batch(requests, services.ports, services.policy):
        if item.submitted is not None:
            status = 200 if item.submitted.replayed else 202
            results.append({"index": item.index, "status": status, "job": job_view(item.submitted.job)})
        else:
            status, error = _error_body(item.error)
            results.append({"index": item.index, "status": status, "error": error})
    return _json(207, {"results": results})


@app.get("/jobs/<job_id>")
def get_job(job_id: str) -> Response[str]:
    services = _services()
    tenant = _tenant()
    checked = _checked_job_id(job_id)
    try:
        job = queries.get_job(checked, tenant=tenant, store=services.ports.store)
    except JobNotFoundError:
        if not _is_admin():
            raise
        # Admins also read the jobs that schedules made.
        job = queries.get_job(checked, tenant=SYSTEM_TENANT, store=services.ports.store)
    return _json(200, job_view(job))


@app.get("/jobs")
def list_jobs() -> Response[str]:
    services = _services()
    tenant = _tenant()
    params = app.current_event.query_string_parameters or {}
    status = params.get("status")
    if status is not None and status not in JobStatus.__members__:
        raise InvalidRequestError("status", f"status must be one of {', '.join(JobStatus.__members__)}")
    limit_text = params.get("limit", "20")
    # ASCII digits only, and few: "²".isdigit() and 5,000 digits both make int() raise.
    if not (limit_text.isascii() and limit_text.isdigit() and len(limit_text) <= 3) or not 1 <= int(limit_text) <= 100:
        raise InvalidRequestError("limit", "limit must be a whole number from 1 to 100")
    job_type = params.get("type")
    if job_type is not None and services.ports.registry.job_type(job_type) is None:
        raise InvalidRequestError("type", "unknown job type", code="unknown_job_type")
    page = services.ports.store.list_jobs(
        tenant,
        status=JobStatus(status) if status else None,
        job_type=job_type,
        limit=int(limit_text),
        cursor=params.get("cursor"),
    )
    return _json(200, {"jobs": [job_view(job) for job in page.jobs], "cursor": page.cursor})


@app.post("/jobs/<job_id>/cancel")
def cancel_job(job_id: str) -> Response[str]:
    services = _services()
    job = queries.cancel_job(
        _checked_job_id(job_id),
        tenant=_tenant(),
        store=services.ports.store,
        clock=services.ports.clock,
        retention=services.settings.retention,
        scheduler=services.ports.scheduler,
    )
    return _json(200, job_view(job))


@app.get("/queues")
def list_queues() -> Response[str]:
    services = _services()
    _require_admin()
    views = []
    for stats in services.monitor.stats():
        task = services.redriver.latest(stats.name)
        views.append({**vars(stats), "redrive": vars(task) if task else None})
    return _json(200, {"queues": views})


@app.post("/queues/<name>/redrive")
def redrive_queue(name: str) -> Response[str]:
    services = _services()
    _require_admin()
    if name not in services.ports.registry.queues:
        return _error(404, "not_found", "no such queue")
    params = app.current_event.query_string_parameters or {}
    rate_text = params.get("max_per_second")
    if rate_text is not None and (
        not (rate_text.isascii() and rate_text.isdigit() and len(rate_text) <= 3) or not 1 <= int(rate_text) <= 500
    ):
        raise InvalidRequestError("max_per_second", "max_per_second must be a whole number from 1 to 500")
    task = services.redriver.start(name, max_per_second=int(rate_text) if rate_text else None)
    return _json(202, {"redrive": vars(task)})


@app.get("/schedules")
def list_schedules() -> Response[str]:
    services = _services()
    _require_admin()
    return _json(200, {"schedules": describe_schedules(services.ports, services.ports.clock.now())})


@app.post("/schedules/<name>/trigger")
def trigger_schedule(name: str) -> Response[str]:
    services = _services()
    _require_admin()
    now = services.ports.clock.now()
    slot = f"manual:{now.isoformat().replace('+00:00', 'Z')}"
    outcome = fire_schedule(name, slot, services.ports, services.policy)
    firing = outcome.firing
    body = {
        "schedule": name,
        "slot": firing.slot,
        "job_id": firing.job_id,
        "skipped_reason": firing.skipped_reason,
        "job": job_view(outcome.job) if outcome.job else None,
    }
    return _json(202 if outcome.job else 200, body)


def _checked_job_id(job_id: str) -> str:
    if len(job_id) != JOB_ID_LENGTH or not all(c in "0123456789abcdef" for c in job_id):
        raise JobNotFoundError("no such job")
    return job_id


# -- errors -----------------------------------------------------------------------------------


def _error_body(error: Exception | None) -> tuple[int, dict[str, Any]]:
    if isinstance(error, PayloadTooLargeError):
        return 413, {"code": "payload_too_large", "message": str(error)}
    if isinstance(error, IdempotencyConflictError):
        return 422, {
            "code": "idempotency_key_reused",
            "message": "Idempotency-Key was already used with a different payload",
            "field": "Idempotency-Key",
        }
    if isinstance(error, JobTypeForbiddenError):
        return 403, {"code": "job_type_forbidden", "message": str(error), "field": "type"}
    if isinstance(error, InvalidRequestError):
        return 422, {"code": error.code, "message": str(error), "field": error.field}
    if isinstance(error, StoreUnavailableError):
        return 503, {"code": "unavailable", "message": "the job store is unavailable; retry this item"}
    return 500, {"code": "internal_error", "message": "internal error"}


@app.exception_handler([InvalidRequestError, PayloadTooLargeError, IdempotencyConflictError, JobTypeForbiddenError])
def on_rejected(error: Exception) -> Response[str]:
    status, body = _error_body(error)
    return _json(status, {"error": body})


@app.exception_handler(_MalformedJson)
def on_malformed(error: Exception) -> Response[str]:
    return _error(400, "malformed_json", "request body is not valid JSON", "body")


@app.exception_handler(_Unauthorized)
def on_unauthorized(error: Exception) -> Response[str]:
    return _error(401, "unauthorized", "no authenticated caller in the request")


@app.exception_handler(_Forbidden)
def on_forbidden(error: Exception) -> Response[str]:
    return _error(403, "forbidden", "this route is for admins (the admin scope, or a listed IAM principal)")


@app.exception_handler(TenantRefusedError)
def on_tenant_refused(error: Exception) -> Response[str]:
    return _error(403, "tenant_refused", str(error))


@app.exception_handler(UnknownScheduleError)
def on_unknown_schedule(error: Exception) -> Response[str]:
    return _error(404, "not_found", "no such schedule")


@app.exception_handler(RedriveInProgressError)
def on_redrive_running(error: Exception) -> Response[str]:
    return _error(409, "redrive_in_progress", "a redrive of this queue is already running")


@app.exception_handler(JobNotFoundError)
def on_not_found(error: Exception) -> Response[str]:
    return _error(404, "not_found", "no such job")


@app.exception_handler(JobConflictError)
def on_conflict(error: Exception) -> Response[str]:
    return _error(409, "conflict", str(error))


@app.exception_handler([StoreUnavailableError, QueueUnavailableError])
def on_unavailable(error: Exception) -> Response[str]:
    logger.error("dependency unavailable", extra={"reason": str(error)})
    return _error(503, "unavailable", "a backing service is unavailable; retry later", **{"Retry-After": RETRY_AFTER_S})


@app.not_found
def on_no_route(error: Exception) -> Response[str]:
    return _error(404, "no_route", "no such route")


@app.exception_handler(Exception)
def on_unexpected(error: Exception) -> Response[str]:
    logger.exception("unexpected error")
    return _error(500, "internal_error", "internal error")
