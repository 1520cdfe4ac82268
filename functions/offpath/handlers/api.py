"""The HTTP API (API Gateway HTTP API, payload format 2.0). Thin: parse, call the logic, answer with a model.

The routes are declared in offpath.contract; each is answered by the function registered here for its operation.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from offpath import collector, contract
from offpath.adapters.cloudwatch import CloudWatchAlarms, CloudWatchStats
from offpath.domain.clock import iso
from offpath.domain.errors import (
    BatchConflictError,
    BatchKeyConflictError,
    BatchNotFoundError,
    DeadLetterNotFoundError,
    IdempotencyConflictError,
    InvalidRequestError,
    ItemTooLargeError,
    JobConflictError,
    JobNotFoundError,
    JobTypeForbiddenError,
    MetricsUnavailableError,
    PayloadTooLargeError,
    QueueUnavailableError,
    RedriveInProgressError,
    StoreUnavailableError,
    SwitchUnavailableError,
    TenantRefusedError,
    UnknownScheduleError,
    WebhookNotFoundError,
)
from offpath.domain.job import Job, JobStatus
from offpath.domain.ports import Ports
from offpath.domain.quotas import QuotaExceededError
from offpath.domain.registry import Submitter
from offpath.domain.tags import tag_filter
from offpath.handlers.api_models import (
    ErrorBody,
    ErrorView,
    HoldupView,
    JobPageView,
    JobView,
    SubmitBody,
    parse_body,
)
from offpath.handlers.composition import (
    Overrides,
    WebhookServices,
    build_bulk_services,
    build_limit_reader,
    build_monitor,
    build_pause_store,
    build_ports,
    build_queue_switch,
    build_redriver,
    build_wait_slots,
    build_webhook_services,
    submit_policy,
)
from offpath.handlers.http import (
    Caller,
    ForbiddenError,
    MalformedBodyError,
    Request,
    Response,
    Router,
    UnauthorizedError,
)
from offpath.logic import pause as pausing
from offpath.logic import queries, waiting
from offpath.logic.quotas import CachedQuotaGate
from offpath.logic.schedules import SYSTEM_TENANT, describe_schedules, fire_schedule
from offpath.logic.submit import (
    BODY_KEY,
    HEADER_KEY,
    SubmitPolicy,
    SubmitRequest,
    submit_batch,
    submit_job,
    unknown_job_type,
)
from offpath.observability import bind_invocation, bind_request_id, configure_logging, trace_id_of
from offpath.settings import Settings
from offpath.tenancy import is_admin, tenant_of

if TYPE_CHECKING:
    from offpath.domain.bulk import BulkFilter
    from offpath.domain.limits import LimitStore
    from offpath.domain.operations import AlarmSource, AlarmState, QueueMonitor, Redriver, StatsSource
    from offpath.domain.pauses import PauseKind, Pauses, PauseStore, QueueSwitch
    from offpath.handlers.api_models_more import (
        AlarmsView,
        AlarmView,
        BatchAccepted,
        BatchBody,
        BatchRefused,
        BatchView,
        BulkFilterBody,
        BulkOperationView,
        DeliveriesView,
        HealthView,
        JobTypesView,
        OpenApiDocument,
        PauseView,
        QueuesView,
        QuotasView,
        SchedulesView,
        StatsView,
        WebhookBody,
        WebhookSecretView,
        WebhooksView,
        WebhookView,
    )
    from offpath.logic.bulk import BulkServices

logger = logging.getLogger("offpath.api")

JOB_ID_LENGTH = 32
# Lambda's limit on a synchronous invocation's request (6 MiB): the largest body the function is ever given.
# On AWS a larger one never reaches it; the local runtime's function refuses it here, with the same 413.
MAX_BODY_BYTES = 6 * 1024 * 1024
RETRY_AFTER_S = "2"
STATS_MINUTES_DEFAULT = 60
STATS_MINUTES_MAX = 1440
ALARM_CHANGES_SHOWN = 50


@dataclass
class ApiServices:
    ports: Ports
    policy: SubmitPolicy
    monitor: QueueMonitor
    redriver: Redriver
    settings: Settings
    # GET /stats and GET /alarms (None: not configured, answered 503).
    stats: StatsSource | None = None
    alarms: AlarmSource | None = None
    # The webhook routes (notices): given, or built by `build_webhooks` on the first webhook route's call (their
    # adapters and use cases are imported then, not at a cold start that answers a submit: ~10 ms).
    webhooks: WebhookServices | None = None
    build_webhooks: Callable[[], WebhookServices] | None = None
    # GET /jobs/{id}?wait=N pauses between its reads with these (tests and the local runtime replace them).
    sleep: Callable[[float], None] = time.sleep
    monotonic: Callable[[], float] = time.monotonic
    # Each tenant's open waits, counted across environments: given, or built by `build_wait_slots` at the first
    # wait.
    wait_slots: waiting.WaitSlots | None = None
    build_wait_slots: Callable[[], waiting.WaitSlots] | None = None
    # Bulk operations (POST /jobs/bulk): given, or built by `build_bulk` at the first bulk route's call.
    bulk: BulkServices | None = None
    build_bulk: Callable[[Ports], BulkServices] | None = None
    # Pause and resume: the pause state (the table's item) and what a queue class's pause switches (None: none).
    pauses: PauseStore | None = None
    switch: QueueSwitch | None = None
    # The job types' limits, read (never taken) to tell why a due job waits (GET /jobs/{id}): given, or built by
    # `build_limits` the first time a job of a type that declares a limit is read waiting.
    limits: LimitStore | None = None
    build_limits: Callable[[], LimitStore] | None = None
    # The pause state as the job view's `waiting_on` reads it: cached per environment as the workers' is (a pause
    # shows within PAUSE_FLAGS_TTL_S, as it reaches the workers); the pause routes read the item itself.
    pause_flags: pausing.PauseFlags | None = None


@functools.lru_cache(maxsize=1)
@collector.during_init
def default_services() -> ApiServices:
    settings = Settings.from_env()
    configure_logging("api", settings.log_level)
    return build_services(settings)


def build_services(settings: Settings, overrides: Overrides | None = None) -> ApiServices:
    overrides = overrides or Overrides()  # one SQS client for the queue, the monitor and the redriver
    ports = build_ports(settings, "api", overrides)
    return ApiServices(
        ports=ports,
        pauses=build_pause_store(settings, overrides),
        switch=build_queue_switch(settings, ports.registry, overrides),
        policy=submit_policy(settings),
        monitor=build_monitor(settings, overrides),
        redriver=build_redriver(settings, overrides),
        settings=settings,
        stats=CloudWatchStats(),
        alarms=CloudWatchAlarms(settings.stack_prefix),
        build_webhooks=functools.partial(build_webhook_services, settings, overrides),
        build_wait_slots=functools.partial(build_wait_slots, settings, overrides),
        build_bulk=functools.partial(build_bulk_services, settings, overrides=overrides),
        build_limits=functools.partial(build_limit_reader, settings, overrides),
    )


def handler(event: dict[str, Any], context: Any, services: ApiServices | None = None) -> dict[str, Any]:
    services = services or default_services()
    bind_request_id(event.get("requestContext", {}).get("requestId"))
    bind_invocation(context)
    try:
        return router.resolve(event, services)
    finally:
        services.ports.metrics.flush()


Handler = Callable[[Request, ApiServices], BaseModel | Response]
HANDLERS: dict[str, Handler] = {}


def handles(operation: str) -> Callable[[Handler], Handler]:
    """Register the function that answers the declared route with this operation."""

    def register(function: Handler) -> Handler:
        HANDLERS[operation] = function
        return function

    return register


def _submitter(request: Request) -> Submitter:
    return "admin" if request.is_admin else "tenant"


def _decoded_json(request: Request) -> Any:
    """The body, decoded; over Lambda's request limit it is refused (413) before it is parsed. The payload
    limit is checked on each payload as the store keeps it (logic/submit.py), not on the body, whose
    whitespace and \\u escapes do not count."""
    raw = request.text()
    size = len(raw.encode())
    if size > MAX_BODY_BYTES:
        raise PayloadTooLargeError(size, MAX_BODY_BYTES, what="request body")
    return request.json(raw)


# -- routes -----------------------------------------------------------------------------------


@handles("health")
def health(request: Request, services: ApiServices) -> HealthView:
    from offpath.handlers.api_models_more import HealthView

    return HealthView(status="ok")


@handles("openapi")
def openapi(request: Request, services: ApiServices) -> OpenApiDocument:
    from offpath.handlers.api_models_more import OpenApiDocument
    from offpath.handlers.openapi import openapi_document

    return OpenApiDocument(openapi_document(registry=services.ports.registry))


@handles("submitJob")
def submit(request: Request, services: ApiServices) -> Response:
    body: SubmitBody = parse_body(SubmitBody, _decoded_json(request))
    submit_request = SubmitRequest(
        tenant=request.caller,
        type=body.type,
        payload=body.payload,
        idempotency_key=request.header("idempotency-key"),
        queue=body.queue,
        run_at=body.run_at,
        submitter=_submitter(request),
        tags=body.tags,
        trace_id=trace_id_of(request.header("traceparent")),
        then=body.then_spec(),
        expires_at=body.expires_at,
        debounce=(body.debounce.key, body.debounce.seconds) if body.debounce is not None else None,
    )
    submitted = submit_job(submit_request, services.ports, services.policy)
    # The answer shows the job as GET /jobs/{id} does, payload included (a submit carries one payload: its
    # answer stays within what a response may hold, unlike a batch's or a listing's).
    view = JobView.dumped(submitted.job, with_payload=True)
    if submitted.replayed:
        return Response(200, view, {"Idempotent-Replayed": "true"})
    return Response(202, view, {"Location": f"/jobs/{submitted.job.job_id}"})


@handles("submitBatch")
def submit_many(request: Request, services: ApiServices) -> BatchView:
    from offpath.handlers.api_models_more import BatchAccepted, BatchBody, BatchRefused, BatchView

    body: BatchBody = parse_body(BatchBody, _decoded_json(request))
    submitter = _submitter(request)
    requests = [
        SubmitRequest(
            tenant=request.caller,
            type=item.type,
            payload=item.payload,
            idempotency_key=item.idempotency_key,
            queue=item.queue,
            run_at=item.run_at,
            submitter=submitter,
            tags=item.tags,
            then=item.then_spec(),
            expires_at=item.expires_at,
            debounce=(item.debounce.key, item.debounce.seconds) if item.debounce is not None else None,
        )
        for item in body.jobs
    ]
    results: list[BatchAccepted | BatchRefused] = []
    for item in submit_batch(requests, services.ports, services.policy):
        if item.submitted is not None:
            status = 200 if item.submitted.replayed else 202
            results.append(BatchAccepted(index=item.index, status=status, job=JobView.of(item.submitted.job)))
        else:
            status, error = _error_body(item.error, key_field=BODY_KEY)
            wait = item.error.retry_after_s if isinstance(item.error, QuotaExceededError) else None
            results.append(BatchRefused(index=item.index, status=status, error=error, retry_after_s=wait))
    return BatchView(results=results)


@handles("getQuotas")
def get_quotas(request: Request, services: ApiServices) -> QuotasView:
    from offpath.handlers.api_models_more import QuotaLimitsView, QuotasView, QuotaUsageView

    quota = services.settings.quota_book.for_tenant(request.caller)
    gate = services.ports.quotas
    usage = gate.usage(request.caller) if isinstance(gate, CachedQuotaGate) else None
    return QuotasView(
        tenant=request.caller,
        quotas=QuotaLimitsView(
            submits_per_s=quota.submits_per_s,
            burst=quota.bucket if quota.submits_per_s is not None else None,
            open_jobs=quota.open_jobs,
            delayed_jobs=quota.delayed_jobs,
        ),
        usage=QuotaUsageView(
            open_jobs=usage.open_jobs if usage and quota.open_jobs is not None else None,
            delayed_jobs=usage.delayed_jobs if usage and quota.delayed_jobs is not None else None,
        ),
    )


@handles("getJob")
def get_job(request: Request, services: ApiServices) -> JobView:
    checked = _checked_job_id(request.path_parameters["job_id"])
    wait_text = request.query.get(waiting.WAIT_FIELD)
    wait_s = waiting.parse_wait(wait_text) if wait_text is not None else None
    try:
        job = queries.get_job(checked, tenant=request.caller, store=services.ports.store)
    except JobNotFoundError:
        if not request.is_admin:
            raise
        # Admins also read the jobs that schedules made.
        job = queries.get_job(checked, tenant=SYSTEM_TENANT, store=services.ports.store)
    if wait_s is not None and not job.status.is_final:
        owner = job.tenant
        with waiting.wait_slot(
            wait_slots(services),
            request.caller,
            wait_s,
            cap=services.settings.waits_per_tenant,
            now_s=services.ports.clock.now().timestamp(),
        ):
            job, _ = waiting.wait_for_job(
                job,
                lambda: queries.get_job(checked, tenant=owner, store=services.ports.store),
                wait_s,
                sleep=services.sleep,
                monotonic=services.monotonic,
            )
    view = JobView.of(job, with_payload=True)
    view.waiting_on = _holdup_view(job, services)
    return view


def _holdup_view(job: Job, services: ApiServices) -> HoldupView | None:
    """Why the due job does not start (logic/holdups.py): read only, and only for a job that is due."""
    from offpath.logic.holdups import due, holdup

    now = services.ports.clock.now()
    if not due(job, now):
        return None
    job_type = services.ports.registry.job_type(job.type)
    if job_type is not None and job_type.limits.declared and services.limits is None and services.build_limits:
        services.limits = services.build_limits()
    try:
        found = holdup(
            job,
            job_type,
            pauses=_pauses_of(services),
            limits=services.limits if job_type is not None and job_type.limits.declared else None,
            now=now,
        )
    except StoreUnavailableError:
        logger.warning("why the job waits could not be read; answered without it", exc_info=True)
        return None  # the job itself was read: the answer stands without the why
    if found is None:
        return None
    return HoldupView(reason=found.reason, message=found.message, holders=list(found.holders), until=found.until)


def _pauses_of(services: ApiServices) -> Callable[[], Pauses] | None:
    if services.pause_flags is None and services.pauses is not None:
        services.pause_flags = pausing.PauseFlags(services.pauses, monotonic=services.monotonic)
    return services.pause_flags.current if services.pause_flags is not None else None


def wait_slots(services: ApiServices) -> waiting.WaitSlots:
    """The wait slots, built the first time a wait asks for them."""
    if services.wait_slots is None and services.build_wait_slots is not None:
        services.wait_slots = services.build_wait_slots()
    if services.wait_slots is None:
        raise StoreUnavailableError("no count of waits configured")
    return services.wait_slots


@handles("listJobs")
def list_jobs(request: Request, services: ApiServices) -> JobPageView:
    params = request.query
    status = params.get("status")
    if status is not None and status not in JobStatus.__members__:
        raise InvalidRequestError("status", f"status must be one of {', '.join(JobStatus.__members__)}")
    limit_text = params.get("limit", "20")
    # ASCII digits only, and few: "²".isdigit() and 5,000 digits both make int() raise.
    if not (limit_text.isascii() and limit_text.isdigit() and len(limit_text) <= 3) or not 1 <= int(limit_text) <= 100:
        raise InvalidRequestError("limit", "limit must be a whole number from 1 to 100")
    job_type = params.get("type")
    if job_type is not None and services.ports.registry.job_type(job_type) is None:
        raise unknown_job_type(job_type)
    tag = params.get("tag")
    page = services.ports.store.list_jobs(
        _listed_tenant(request, params.get("tenant")),
        status=JobStatus(status) if status else None,
        job_type=job_type,
        limit=int(limit_text),
        cursor=params.get("cursor"),
        tag=tag_filter(tag) if tag is not None else None,
    )
    return JobPageView(jobs=[JobView.of(job) for job in page.jobs], cursor=page.cursor)


def _listed_tenant(request: Request, named: str | None) -> str:
    """The caller's own jobs; an admin may name `system` for the jobs that schedules made."""
    if named is None or named == request.caller:
        return request.caller
    if named != SYSTEM_TENANT:
        raise InvalidRequestError("tenant", f"tenant may only be {SYSTEM_TENANT} (admin)")
    if not request.is_admin:
        raise ForbiddenError()
    return SYSTEM_TENANT


@handles("cancelJob")
def cancel_job(request: Request, services: ApiServices) -> JobView:
    job = queries.cancel_job(
        _checked_job_id(request.path_parameters["job_id"]),
        tenant=request.caller,
        store=services.ports.store,
        clock=services.ports.clock,
        retention=services.settings.retention,
        scheduler=services.ports.scheduler,
    )
    if job.has_followups:
        from offpath.logic.followups import finish_followups

        finish_followups(job, services.ports)
    return JobView.of(job, with_payload=True)


@handles("retryJob")
def retry_job(request: Request, services: ApiServices) -> JobView:
    checked = _checked_job_id(request.path_parameters["job_id"])
    grace = services.policy.sweep_grace
    now_text = request.query.get("now", "false")
    if now_text not in ("true", "false"):
        raise InvalidRequestError("now", "now must be true or false")
    now_asked = now_text == "true"
    try:
        job = queries.retry_job(
            checked, tenant=request.caller, ports=services.ports, sweep_grace=grace, now_asked=now_asked
        )
    except JobNotFoundError:
        if not request.is_admin:
            raise
        # Admins also retry the jobs that schedules made.
        job = queries.retry_job(
            checked, tenant=SYSTEM_TENANT, ports=services.ports, sweep_grace=grace, now_asked=now_asked
        )
    return JobView.of(job, with_payload=True)


# -- bulk actions -----------------------------------------------------------------------------


def bulk_services(services: ApiServices) -> BulkServices:
    """The bulk routes' services, built the first time a bulk route asks for them."""
    if services.bulk is None and services.build_bulk is not None:
        services.bulk = services.build_bulk(services.ports)
    if services.bulk is None:
        raise StoreUnavailableError("bulk operations are not configured")
    return services.bulk


@handles("bulkJobs")
def bulk_jobs(request: Request, services: ApiServices) -> Response:
    from offpath.domain.bulk import TooManyOperationsError
    from offpath.handlers.api_models_more import (
        BulkBody,
        BulkFilterView,
        BulkOperationView,
        BulkPreviewView,
        BulkSampleView,
    )
    from offpath.logic import bulk

    body: BulkBody = parse_body(BulkBody, _decoded_json(request))
    bulk_filter = _bulk_filter(request, body.filter, services)
    work = bulk_services(services)
    if body.dry_run:
        found = bulk.preview(bulk_filter, services.ports, limit=work.policy.limit)
        return Response(
            200,
            BulkPreviewView(
                action=body.action,
                filter=BulkFilterView.of(bulk_filter),
                count=found.count,
                exact=found.exact,
                limit=found.limit,
                sample=[
                    BulkSampleView(job_id=j.job_id, type=j.type, status=j.status, created_at=j.created_at)
                    for j in found.sample
                ],
            ),
        )
    try:
        operation = bulk.start(request.caller, body.action, bulk_filter, work)
    except TooManyOperationsError:
        raise JobConflictError(None, "too many bulk operations are running; retry when one is over") from None
    return Response(202, BulkOperationView.of(operation))


def _bulk_filter(request: Request, body: BulkFilterBody, services: ApiServices) -> BulkFilter:
    """The jobs a bulk action may touch: the caller's own; an admin may name any tenant's (`system` too)."""
    from offpath.domain.bulk import BulkFilter

    tenant = request.caller
    if body.tenant is not None and body.tenant != request.caller:
        # The tenant id's pattern is the model's; a reserved name other than `system` names no tenant's jobs.
        if not request.is_admin:
            raise ForbiddenError()
        tenant = body.tenant
    if body.type is not None and services.ports.registry.job_type(body.type) is None:
        error = unknown_job_type(body.type)
        raise InvalidRequestError("filter.type", str(error), code=error.code)
    return BulkFilter(
        tenant=tenant,
        status=body.status,
        job_type=body.type,
        tag=tag_filter(body.tag, "filter.tag") if body.tag is not None else None,
    )


@handles("getBulkOperation")
def get_bulk_operation(request: Request, services: ApiServices) -> BulkOperationView | Response:
    from offpath.handlers.api_models_more import BulkOperationView

    operation_id = request.path_parameters["operation_id"]
    found = None
    if len(operation_id) == JOB_ID_LENGTH and all(c in "0123456789abcdef" for c in operation_id):
        found = bulk_services(services).operations.get(request.caller, operation_id)
    if found is None:
        return Response(404, ErrorView.of("not_found", "no such bulk operation"))
    return BulkOperationView.of(found)


@handles("getStats")
def get_stats(request: Request, services: ApiServices) -> StatsView:
    from offpath.handlers.api_models_more import MinuteView, StatsView

    text = request.query.get("minutes", str(STATS_MINUTES_DEFAULT))
    if not (text.isascii() and text.isdigit() and len(text) <= 4) or not 1 <= int(text) <= STATS_MINUTES_MAX:
        raise InvalidRequestError("minutes", f"minutes must be a whole number from 1 to {STATS_MINUTES_MAX}")
    if services.stats is None:
        raise MetricsUnavailableError("no statistics source configured")
    end = services.ports.clock.now()
    start = end - timedelta(minutes=int(text))
    rows = services.stats.minutes(start=start, end=end)
    return StatsView(start=start, end=end, minutes=[MinuteView.of(row) for row in rows])


@handles("listAlarms")
def list_alarms(request: Request, services: ApiServices) -> AlarmsView:
    from offpath.handlers.api_models_more import AlarmChangeView, AlarmsView, AlarmView

    if services.alarms is None:
        raise MetricsUnavailableError("no alarm source configured")
    alarms = services.alarms.alarms()
    muted = _muted_alarms(alarms, services)
    return AlarmsView(
        alarms=[muted.get(alarm.name, AlarmView.of(alarm)) for alarm in alarms],
        changes=[AlarmChangeView.of(change) for change in services.alarms.changes(limit=ALARM_CHANGES_SHOWN)],
    )


def _muted_alarms(alarms: list[AlarmState], services: ApiServices) -> dict[str, AlarmView]:
    """The age alarms of the paused queue classes, shown as PAUSED whatever their state (their actions are
    disabled by the pause: they page nobody)."""
    from offpath.handlers.api_models_more import AlarmView
    from offpath.naming import alarm_name, oldest_age_alarm_id

    shown: dict[str, AlarmView] = {}
    if services.pauses is None:
        return shown
    by_name = {alarm.name: alarm for alarm in alarms}
    for name, pause in _pauses(services).queues.items():
        alarm = by_name.get(alarm_name(services.settings.stack_prefix, oldest_age_alarm_id(name)))
        if alarm is not None:
            since = iso(pause.paused_at)
            reason = f"queue {name} is paused since {since}; its alarm pages nobody until it is resumed"
            shown[alarm.name] = AlarmView.of(alarm).model_copy(update={"state": "PAUSED", "reason": reason})
    return shown


def _pauses(services: ApiServices) -> Pauses:
    from offpath.domain.pauses import Pauses

    return services.pauses.pauses() if services.pauses is not None else Pauses()


@handles("listJobTypes")
def list_job_types(request: Request, services: ApiServices) -> JobTypesView:
    from offpath.handlers.api_models_more import JobTypeLimitsView, JobTypesView, JobTypeView, PauseView

    registry = services.ports.registry
    paused = _pauses(services).job_types
    views = [
        JobTypeView(
            name=job_type.name,
            queue=job_type.queue,
            max_attempts=job_type.max_attempts,
            timeout_s=job_type.timeout_s,
            submitted_by=getattr(job_type, "submitted_by", "tenant"),
            payload_schema=job_type.payload_model.model_json_schema(),
            limits=JobTypeLimitsView(
                concurrency_key=job_type.limits.key_text,
                max_concurrency=job_type.limits.max_concurrency,
                rate_limit=job_type.limits.rate_limit.text if job_type.limits.rate_limit else None,
            )
            if job_type.limits.declared
            else None,
            **PauseView.fields_of(paused.get(job_type.name)),
        )
        for job_type in sorted(registry.job_types.values(), key=lambda jt: jt.name)
    ]
    # Paused ones first (each group by name).
    return JobTypesView(job_types=sorted(views, key=lambda view: not view.paused))


@handles("listQueues")
def list_queues(request: Request, services: ApiServices) -> QueuesView:
    from offpath.handlers.api_models_more import QueuesView, QueueView

    paused = _pauses(services).queues
    views = [
        QueueView.of(stats, services.redriver.latest(stats.name), paused.get(stats.name))
        for stats in services.monitor.stats()
    ]
    # Paused ones first (each group in the monitor's order).
    return QueuesView(queues=sorted(views, key=lambda view: not view.paused))


def _pause_reason(request: Request) -> str | None:
    from offpath.handlers.api_models_more import PauseBody

    if not request.text().strip():
        return None
    body: PauseBody = parse_body(PauseBody, _decoded_json(request))
    return body.reason


def _pause_services(services: ApiServices) -> PauseStore:
    if services.pauses is None:
        raise StoreUnavailableError("no pause store configured")
    return services.pauses


def _pause_view(kind: PauseKind, name: str, pause: Any, changed: bool, services: ApiServices) -> PauseView:
    from offpath.handlers.api_models_more import PauseView

    waiting_jobs = services.ports.queue.depth(name) if kind == "queue" else None
    return PauseView(kind=kind, name=name, changed=changed, waiting=waiting_jobs, **PauseView.fields_of(pause))


def _pause(kind: PauseKind, request: Request, services: ApiServices) -> PauseView:
    name = request.path_parameters["name"]
    reason = _pause_reason(request)
    state, made = pausing.pause(
        kind,
        name,
        reason=reason,
        registry=services.ports.registry,
        store=_pause_services(services),
        switch=services.switch,
        clock=services.ports.clock,
    )
    services.pause_flags = None  # this environment's job views see the change at once (others within the TTL)
    return _pause_view(kind, name, state, made, services)


def _resume(kind: PauseKind, request: Request, services: ApiServices) -> PauseView:
    name = request.path_parameters["name"]
    lifted = pausing.resume(
        kind, name, registry=services.ports.registry, store=_pause_services(services), switch=services.switch
    )
    services.pause_flags = None
    return _pause_view(kind, name, None, lifted is not None, services)


@handles("pauseQueue")
def pause_queue(request: Request, services: ApiServices) -> PauseView:
    return _pause("queue", request, services)


@handles("resumeQueue")
def resume_queue(request: Request, services: ApiServices) -> PauseView:
    return _resume("queue", request, services)


@handles("pauseJobType")
def pause_job_type(request: Request, services: ApiServices) -> PauseView:
    return _pause("job_type", request, services)


@handles("resumeJobType")
def resume_job_type(request: Request, services: ApiServices) -> PauseView:
    return _resume("job_type", request, services)


@handles("redriveQueue")
def redrive_queue(request: Request, services: ApiServices) -> BaseModel | Response:
    from offpath.handlers.api_models_more import RedriveTaskView, RedriveView

    name = request.path_parameters["name"]
    if name not in services.ports.registry.queues:
        return Response(404, ErrorView.of("not_found", "no such queue"))
    rate_text = request.query.get("max_per_second")
    if rate_text is not None and (
        not (rate_text.isascii() and rate_text.isdigit() and len(rate_text) <= 3) or not 1 <= int(rate_text) <= 500
    ):
        raise InvalidRequestError("max_per_second", "max_per_second must be a whole number from 1 to 500")
    task = services.redriver.start(name, max_per_second=int(rate_text) if rate_text else None)
    return RedriveView(redrive=RedriveTaskView.of(task))


@handles("discardDeadLetter")
def discard_dead_letter(request: Request, services: ApiServices) -> JobView:
    name, job_id = request.path_parameters["name"], request.path_parameters["job_id"]
    if name not in services.ports.registry.queues:
        raise InvalidRequestError("name", f"name must be one of {', '.join(sorted(services.ports.registry.queues))}")
    if len(job_id) != JOB_ID_LENGTH or not all(c in "0123456789abcdef" for c in job_id):
        raise InvalidRequestError("job_id", "job_id must be 32 lowercase hexadecimal characters")
    return JobView.of(queries.discard_dead_letter(name, job_id, ports=services.ports), with_payload=True)


@handles("listSchedules")
def list_schedules(request: Request, services: ApiServices) -> SchedulesView:
    from offpath.handlers.api_models_more import SchedulesView

    return SchedulesView.model_validate({"schedules": describe_schedules(services.ports, services.ports.clock.now())})


@handles("triggerSchedule")
def trigger_schedule(request: Request, services: ApiServices) -> Response:
    from offpath.handlers.api_models_more import TriggerView

    name = request.path_parameters["name"]
    now = services.ports.clock.now()
    slot = f"manual:{now.isoformat().replace('+00:00', 'Z')}"
    outcome = fire_schedule(name, slot, services.ports, services.policy)
    firing = outcome.firing
    view = TriggerView(
        schedule=name,
        slot=firing.slot,
        job_id=firing.job_id,
        skipped_reason=firing.skipped_reason,
        job=JobView.of(outcome.job) if outcome.job else None,
    )
    return Response(202 if outcome.job else 200, view)


# -- webhooks (notices) -----------------------------------------------------------------------
# The webhook use cases are imported by these routes, on their first call (with the services, webhook_services).


def webhook_services(services: ApiServices) -> WebhookServices:
    """The webhook routes' services, built the first time a route asks for them."""
    if services.webhooks is None and services.build_webhooks is not None:
        services.webhooks = services.build_webhooks()
    if services.webhooks is None:
        raise QueueUnavailableError("webhooks are not configured")
    return services.webhooks


@handles("putWebhook")
def put_webhook(request: Request, services: ApiServices) -> Response:
    from offpath.handlers.api_models_more import WebhookBody, WebhookSecretView, WebhookView
    from offpath.logic import webhooks

    body: WebhookBody = parse_body(WebhookBody, _decoded_json(request))
    hooks = webhook_services(services)
    outcome = webhooks.put_endpoint(
        request.caller,
        webhooks.EndpointRequest(
            name=request.path_parameters["name"],
            url=body.url,
            events=tuple(kind.value for kind in body.events),
            job_types=tuple(body.job_types or ()),
            include_payload=body.include_payload,
        ),
        store=hooks.store,
        resolver=hooks.resolver,
        policy=hooks.policy,
        known_job_types=set(services.ports.registry.job_types),
        clock=services.ports.clock,
    )
    if outcome.replaced:
        return Response(200, WebhookView.of(outcome.endpoint))
    return Response(201, WebhookSecretView.with_secret(outcome.endpoint))


@handles("listWebhooks")
def list_webhooks(request: Request, services: ApiServices) -> WebhooksView:
    from offpath.handlers.api_models_more import WebhooksView, WebhookView

    endpoints = webhook_services(services).store.endpoints(request.caller)
    return WebhooksView(webhooks=[WebhookView.of(e) for e in sorted(endpoints, key=lambda e: e.name)])


@handles("getWebhook")
def get_webhook(request: Request, services: ApiServices) -> WebhookView:
    from offpath.handlers.api_models_more import WebhookView
    from offpath.logic import webhooks

    store = webhook_services(services).store
    return WebhookView.of(webhooks.get_endpoint(request.caller, request.path_parameters["name"], store))


@handles("deleteWebhook")
def delete_webhook(request: Request, services: ApiServices) -> Response:
    from offpath.handlers.api_models_more import NoContent
    from offpath.logic import webhooks

    webhooks.delete_endpoint(request.caller, request.path_parameters["name"], webhook_services(services).store)
    return Response(204, NoContent())


@handles("rotateWebhookSecret")
def rotate_webhook_secret(request: Request, services: ApiServices) -> WebhookSecretView:
    from offpath.handlers.api_models_more import WebhookSecretView
    from offpath.logic import webhooks

    endpoint = webhooks.rotate_secret(
        request.caller,
        request.path_parameters["name"],
        store=webhook_services(services).store,
        clock=services.ports.clock,
    )
    return WebhookSecretView.with_secret(endpoint)


@handles("testWebhook")
def send_test_webhook(request: Request, services: ApiServices) -> Response:
    from offpath.handlers.api_models_more import WebhookTestView
    from offpath.logic import webhooks

    hooks = webhook_services(services)
    name = request.path_parameters["name"]
    webhooks.get_endpoint(request.caller, name, hooks.store)
    if hooks.queue is None:
        raise QueueUnavailableError("no delivery queue configured")
    delivery = webhooks.send_test(
        request.caller, name, store=hooks.store, queue=hooks.queue, clock=services.ports.clock, rate=hooks.test_rate
    )
    return Response(202, WebhookTestView(event_id=delivery.event_id, type=delivery.type))


@handles("listWebhookDeliveries")
def list_webhook_deliveries(request: Request, services: ApiServices) -> DeliveriesView:
    from offpath.handlers.api_models_more import DeliveriesView, DeliveryAttemptView
    from offpath.logic import webhooks

    log = webhooks.delivery_log(request.caller, request.path_parameters["name"], webhook_services(services).store)
    return DeliveriesView(deliveries=[DeliveryAttemptView.of(a) for a in log.attempts], failing_since=log.failing_since)


# -- batches (fan-out / fan-in) ------------------------------------------------------------------


def _submit_requests(request: Request, jobs: Sequence[SubmitBody]) -> list[SubmitRequest]:
    submitter = _submitter(request)
    trace_id = trace_id_of(request.header("traceparent"))
    return [
        SubmitRequest(
            tenant=request.caller,
            type=item.type,
            payload=item.payload,
            queue=item.queue,
            run_at=item.run_at,
            submitter=submitter,
            tags=item.tags,
            trace_id=trace_id,
        )
        for item in jobs
    ]


def _batch_key(request: Request) -> str | None:
    from offpath.logic.submit import validate_idempotency_key

    return validate_idempotency_key(request.header("idempotency-key"))


@handles("createBatch")
def create_batch(request: Request, services: ApiServices) -> Response:
    from offpath.domain.batch import CallbackSpec
    from offpath.handlers.api_models_batches import BatchCreateBody, BatchDetailView
    from offpath.logic import batches

    body: BatchCreateBody = parse_body(BatchCreateBody, _decoded_json(request))
    callbacks = {
        name: CallbackSpec(type=spec.type, payload=spec.payload)
        for name, spec in (("on_complete", body.on_complete), ("on_success", body.on_success))
        if spec is not None
    }
    submitted = batches.create_batch(
        batches.BatchRequest(
            tenant=request.caller,
            jobs=_submit_requests(request, body.jobs),
            callbacks=callbacks,
            open=body.open,
            idempotency_key=_batch_key(request),
        ),
        services.ports,
        services.policy,
    )
    view = BatchDetailView.of(submitted.batch)
    if submitted.replayed:
        return Response(200, view, {"Idempotent-Replayed": "true"})
    return Response(202, view)


@handles("listBatches")
def list_batches(request: Request, services: ApiServices) -> BaseModel:
    from offpath.handlers.api_models_batches import BatchDetailView, BatchPageView
    from offpath.logic import batches

    listing = batches.list_batches(
        request.caller, limit=_limit(request), cursor=request.query.get("cursor"), ports=services.ports
    )
    return BatchPageView(batches=[BatchDetailView.of(b) for b in listing.batches], cursor=listing.cursor)


@handles("getBatch")
def get_batch(request: Request, services: ApiServices) -> BaseModel:
    from offpath.handlers.api_models_batches import BatchDetailView
    from offpath.logic import batches

    batch = batches.get_batch(request.path_parameters["batch_id"], tenant=request.caller, ports=services.ports)
    return BatchDetailView.of(batch)


@handles("listBatchJobs")
def list_batch_jobs(request: Request, services: ApiServices) -> BaseModel:
    from offpath.handlers.api_models_batches import BatchJobsView
    from offpath.logic import batches

    limit = _limit(request)
    batch = batches.get_batch(request.path_parameters["batch_id"], tenant=request.caller, ports=services.ports)
    jobs, cursor = batches.batch_jobs(batch, limit=limit, cursor=request.query.get("cursor"), ports=services.ports)
    return BatchJobsView(jobs=[JobView.of(job) for job in jobs], cursor=cursor)


@handles("addBatchJobs")
def add_batch_jobs(request: Request, services: ApiServices) -> Response:
    from offpath.handlers.api_models_batches import BatchDetailView, BatchJobsBody
    from offpath.logic import batches

    body: BatchJobsBody = parse_body(BatchJobsBody, _decoded_json(request))
    batch = batches.add_jobs(
        request.path_parameters["batch_id"],
        tenant=request.caller,
        jobs=_submit_requests(request, body.jobs),
        idempotency_key=_batch_key(request),
        ports=services.ports,
        policy=services.policy,
    )
    return Response(202, BatchDetailView.of(batch))


@handles("sealBatch")
def seal_batch(request: Request, services: ApiServices) -> BaseModel:
    from offpath.handlers.api_models_batches import BatchDetailView
    from offpath.logic import batches

    batch = batches.seal_batch(request.path_parameters["batch_id"], tenant=request.caller, ports=services.ports)
    return BatchDetailView.of(batch)


@handles("cancelBatch")
def cancel_batch(request: Request, services: ApiServices) -> BaseModel:
    from offpath.handlers.api_models_batches import BatchDetailView
    from offpath.logic import batches

    batch = batches.cancel_batch(
        request.path_parameters["batch_id"],
        tenant=request.caller,
        ports=services.ports,
        retention=services.settings.retention,
    )
    return BatchDetailView.of(batch)


def _limit(request: Request) -> int:
    limit_text = request.query.get("limit", "20")
    # ASCII digits only, and few: "²".isdigit() and 5,000 digits both make int() raise.
    if not (limit_text.isascii() and limit_text.isdigit() and len(limit_text) <= 3) or not 1 <= int(limit_text) <= 100:
        raise InvalidRequestError("limit", "limit must be a whole number from 1 to 100")
    return int(limit_text)


def _checked_job_id(job_id: str) -> str:
    if len(job_id) != JOB_ID_LENGTH or not all(c in "0123456789abcdef" for c in job_id):
        raise JobNotFoundError("no such job")
    return job_id


# -- errors -----------------------------------------------------------------------------------


def _error_body(error: Exception | None, key_field: str = HEADER_KEY) -> tuple[int, ErrorBody]:
    """`key_field`: where the request carried its idempotency key (the header, or a batch item's field)."""
    if isinstance(error, PayloadTooLargeError):
        return 413, ErrorBody(code="payload_too_large", message=str(error))
    if isinstance(error, QuotaExceededError):
        return 429, ErrorBody(code="quota_exceeded", message=str(error), field=error.field)
    if isinstance(error, ItemTooLargeError):
        return 413, ErrorBody(
            code="payload_too_large", message="the job is too large to store (DynamoDB's 400 KB item limit)"
        )
    if isinstance(error, BatchKeyConflictError):
        return 422, ErrorBody(code="idempotency_key_reused", message=str(error), field=HEADER_KEY)
    if isinstance(error, IdempotencyConflictError):
        return 422, ErrorBody(
            code="idempotency_key_reused",
            message=f"{key_field} was already used with a different type, payload, queue or run_at",
            field=key_field,
        )
    if isinstance(error, JobTypeForbiddenError):
        return 403, ErrorBody(code="job_type_forbidden", message=str(error), field="type")
    if isinstance(error, InvalidRequestError):
        return 422, ErrorBody.of(error)
    if isinstance(error, StoreUnavailableError):
        return 503, ErrorBody(code="unavailable", message="the job store is unavailable; retry this item")
    return 500, ErrorBody(code="internal_error", message="internal error")


def _error(status: int, code: str, message: str, field: str | None = None, **headers: str) -> Response:
    return Response(status, ErrorView.of(code, message, field), headers)


def refusal(error: Exception) -> Response:
    """The answer to an error a route raised."""
    if isinstance(
        error,
        InvalidRequestError
        | PayloadTooLargeError
        | ItemTooLargeError
        | IdempotencyConflictError
        | BatchKeyConflictError
        | JobTypeForbiddenError,
    ):
        status, body = _error_body(error)
        return Response(status, ErrorView(error=body))
    if isinstance(error, QuotaExceededError):
        status, body = _error_body(error)
        return Response(status, ErrorView(error=body), {"Retry-After": str(error.retry_after_s)})
    if isinstance(error, MalformedBodyError):
        return _error(400, "malformed_json", "request body is not valid JSON", "body")
    if isinstance(error, UnauthorizedError):
        return _error(401, "unauthorized", "no authenticated caller in the request")
    if isinstance(error, ForbiddenError):
        return _error(403, "forbidden", "this route is for admins (the admin scope, or a listed IAM principal)")
    if isinstance(error, TenantRefusedError):
        return _error(403, "tenant_refused", str(error))
    if isinstance(error, WebhookNotFoundError):
        return _error(404, "not_found", "no such webhook endpoint")
    if isinstance(error, UnknownScheduleError):
        return _error(404, "not_found", "no such schedule")
    if isinstance(error, pausing.UnknownPauseTargetError):
        return _error(404, "not_found", str(error))
    if isinstance(error, RedriveInProgressError):
        return _error(409, "redrive_in_progress", "a redrive of this queue is already running")
    if isinstance(error, DeadLetterNotFoundError):
        return _error(404, "not_found", "no dead letter of this job in the queue's DLQ")
    if isinstance(error, JobNotFoundError):
        return _error(404, "not_found", "no such job")
    if isinstance(error, BatchNotFoundError):
        return _error(404, "not_found", "no such batch")
    if isinstance(error, BatchConflictError):
        return _error(409, "conflict", str(error))
    if isinstance(error, JobConflictError):
        return _error(409, "conflict", str(error))
    if isinstance(
        error, StoreUnavailableError | QueueUnavailableError | MetricsUnavailableError | SwitchUnavailableError
    ):
        logger.error("dependency unavailable", extra={"reason": str(error)})
        return _error(
            503, "unavailable", "a backing service is unavailable; retry later", **{"Retry-After": RETRY_AFTER_S}
        )
    logger.exception("unexpected error")
    return _error(500, "internal_error", "internal error")


def identify(event: dict[str, Any], services: ApiServices) -> Caller:
    """The caller by the stack's tenancy settings: which claims name the tenant, which IAM principals are admins."""
    settings = services.settings
    return Caller(tenant_of(event, settings.tenant_claims), is_admin(event, settings.admin_principals))


router: Router[ApiServices] = Router(contract.ROUTES, HANDLERS, refusal, identify)

# The init's imports are done: what they made is frozen and the collector runs again (offpath.collector).
collector.settle()
