"""Accepting jobs: validate, decide on the idempotency key (one conditional write), send, write the job."""

from __future__ import annotations

import hashlib
import json
import logging
import math
import re
import uuid
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from offpath import contract
from offpath.domain.chain import MAX_CHAIN_STEPS, MAX_THEN_BYTES
from offpath.domain.errors import (
    IdempotencyConflictError,
    InvalidRequestError,
    ItemTooLargeError,
    JobTypeForbiddenError,
    OffpathError,
    PayloadTooLargeError,
    QueueUnavailableError,
    StoreUnavailableError,
)
from offpath.domain.ids import new_job_id
from offpath.domain.job import Job, JobStatus, payload_json
from offpath.domain.ports import KEY_RECORD_MARGIN, CreateOutcome, JobMessage, Ports
from offpath.domain.quotas import QuotaExceededError
from offpath.domain.registry import NAME_PATTERN, JobType, Submitter
from offpath.domain.tags import checked_tags
from offpath.logic.debounce import supersede_previous
from offpath.logic.expiry import FIELD as EXPIRES_AT
from offpath.logic.expiry import check_expires_at

logger = logging.getLogger(__name__)

MAX_IDEMPOTENCY_KEY_LENGTH = 255
MAX_BATCH = 100
# Conditional writes of one batch in flight at once.
BATCH_WRITERS = 8
SAFE_FIELD_PART = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$|^[0-9]{1,6}$")
SQS_MAX_DELAY_S = 900
# A time in the past means "now", but only from the Unix epoch on: every time a job carries must round-trip
# through the store's fixed-width text and its epoch-second TTL.
EARLIEST_RUN_AT = datetime(1970, 1, 1, tzinfo=UTC)
# RFC 3339's date-time, the zone optional here so that its absence gets its own message.
RFC3339_DATE_TIME = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,9})?([Zz]|[+-][0-9]{2}:[0-9]{2})?"
)

if TYPE_CHECKING:
    from pydantic import ValidationError


@dataclass(frozen=True)
class SubmitPolicy:
    payload_limit_bytes: int = 64 * 1024
    # How long after a job is due the sweeper first checks that its message went out.
    sweep_grace: timedelta = timedelta(minutes=2)
    max_schedule_ahead: timedelta = timedelta(days=365)
    # How long a finished job is kept (settings.retention): an idempotency key's record is kept as long,
    # counted from when its job is due, plus KEY_RECORD_MARGIN.
    retention: timedelta = timedelta(days=7)


@dataclass(frozen=True)
class SubmitRequest:
    tenant: str
    type: str
    payload: dict[str, Any]
    idempotency_key: str | None = None
    queue: str | None = None
    run_at: str | None = None
    schedule_name: str | None = None
    # Who submits: a tenant, an admin, or the system (a schedule firing). The job type decides who may.
    submitter: Submitter = "tenant"
    tags: Mapping[str, Any] | None = None
    # The caller's trace (from a valid `traceparent`); without one the job starts a trace of its own.
    trace_id: str | None = None
    # The job to submit when this one succeeds, `{"type", "payload", "then"?}` (domain/chain.py).
    then: Mapping[str, Any] | None = None
    # Not started by then, the job ends EXPIRED (logic/expiry.py). RFC 3339 text, as run_at.
    expires_at: str | None = None
    # (key, seconds): a later submit of the type under the key within the window supersedes this one
    # (logic/debounce.py); the job runs `seconds` from now. The api has checked both.
    debounce: tuple[str, int] | None = None


@dataclass(frozen=True)
class Submitted:
    job: Job
    replayed: bool


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def payload_hash(job_type: str, payload: dict[str, Any]) -> str:
    return hashlib.sha256(f"{job_type}\n{canonical_json(payload)}".encode()).hexdigest()


# KEY_RECORD_MARGIN (domain/ports.py): how much longer than the retention after its job is due a key's record
# is kept; a job finishing later than that extends its key's record as it finishes (key_record_extension).


# An idempotency key is printable ASCII without a space at either end: what an HTTP header carries unchanged.
IDEMPOTENCY_KEY = re.compile(contract.IDEMPOTENCY_KEY_PATTERN)
# Where a request carries its key: the `Idempotency-Key` header (POST /jobs), a batch item's `idempotency_key`.
HEADER_KEY = "Idempotency-Key"
BODY_KEY = "idempotency_key"
# Field errors reported with one refusal, at most.
MAX_REPORTED_ERRORS = 100


def validate_idempotency_key(key: str | None, field: str = HEADER_KEY) -> str | None:
    if key is None:
        return None
    if not IDEMPOTENCY_KEY.fullmatch(key):
        raise InvalidRequestError(
            field,
            f"{field} must be 1 to {MAX_IDEMPOTENCY_KEY_LENGTH} printable ASCII characters, the first and last "
            "not a space",
        )
    return key


def unknown_job_type(name: str) -> InvalidRequestError:
    """The refusal of a type no job type is registered under. It names the type when it is a name a job type
    could have; anything else is described, never echoed."""
    shown = repr(name) if NAME_PATTERN.fullmatch(name) else "(not a job type name: a-z, 0-9, '_', '.', '-')"
    return InvalidRequestError(
        "type", f"unknown job type {shown}; GET /job-types lists the registered ones", code="unknown_job_type"
    )


def build_job(
    request: SubmitRequest, ports: Ports, policy: SubmitPolicy, now: datetime, *, key_field: str = HEADER_KEY
) -> Job:
    """Validate a request into a new QUEUED job (not yet written). `key_field`: where the request carried
    its idempotency key, named in a refusal of it."""
    job_type = ports.registry.job_type(request.type)
    if job_type is None:
        raise unknown_job_type(request.type)
    if not job_type.may_be_submitted_by(request.submitter):
        raise JobTypeForbiddenError(job_type.name, job_type.submitted_by)
    if request.queue is not None and request.queue != job_type.queue:
        raise InvalidRequestError("queue", f"this job type runs on queue {job_type.queue!r}")
    key = validate_idempotency_key(request.idempotency_key, key_field)
    tags = checked_tags(request.tags)
    payload = checked_payload(job_type, request.payload, "payload")
    # Measured as the store keeps it (UTF-8), so what is accepted is what fits.
    size = len(payload_json(payload).encode())
    if size > policy.payload_limit_bytes:
        raise PayloadTooLargeError(size, policy.payload_limit_bytes)
    then = checked_then(request.then, ports, request.submitter) if request.then is not None else None
    if request.debounce is not None and request.run_at is not None:
        raise InvalidRequestError("run_at", "run_at and debounce cannot both be given (debounce sets when it runs)")
    run_at = parse_run_at(request.run_at, now, policy) if request.run_at is not None else None
    if request.debounce is not None:
        run_at = now + timedelta(seconds=request.debounce[1])
    start_by = None
    if request.expires_at is not None:
        when = parse_time(request.expires_at, now, EXPIRES_AT)
        start_by = check_expires_at(when, now=now, run_at=run_at, retention=policy.retention)
    due = max(now, run_at) if run_at is not None else now
    scheduled = has_one_time_schedule(run_at, now)
    return Job(
        job_id=new_job_id(now),
        tenant=request.tenant,
        type=job_type.name,
        queue=job_type.queue,
        payload=payload,
        payload_hash=payload_hash(job_type.name, payload),
        status=JobStatus.SCHEDULED if scheduled else JobStatus.QUEUED,
        created_at=now,
        updated_at=now,
        max_attempts=job_type.max_attempts,
        idempotency_key=key,
        submission_id=uuid.uuid4().hex,
        run_at=run_at,
        schedule_name=request.schedule_name,
        sweep_at=due + policy.sweep_grace,
        tags=tags,
        trace_id=request.trace_id or uuid.uuid4().hex,
        then=then,
        start_by=start_by,
        debounce_key=request.debounce[0] if request.debounce is not None else None,
        debounce_s=request.debounce[1] if request.debounce is not None else None,
    )


def checked_payload(job_type: JobType, payload: Any, field: str) -> dict[str, Any]:
    """A payload validated strictly, as JSON, against its type's model (the document's schema is what is accepted:
    no `true` for an integer, no "5" for a number; a date or time field still reads its ISO 8601 text)."""
    # Loaded with the payload model's module already: a function that validates no payload never imports pydantic.
    from pydantic import ValidationError

    try:
        model = job_type.payload_model.model_validate_json(payload_json(payload), strict=True)
        checked: dict[str, Any] = model.model_dump(mode="json")
    except ValidationError as error:
        raise validation_error(error, tuple(field.split(".")), code="invalid_payload") from None
    except (ValueError, RecursionError):  # pydantic refuses data nested deeper than its recursion limit
        raise InvalidRequestError(field, f"{field} is nested too deeply", code="invalid_payload") from None
    return checked


def checked_then(then: Mapping[str, Any], ports: Ports, submitter: Submitter) -> dict[str, Any]:
    """A chain validated whole, as submitted (domain/chain.py): at most MAX_CHAIN_STEPS steps, each
    `{"type", "payload"?, "then"?}` with a type the submitter may submit and a payload its model accepts, the whole
    at most MAX_THEN_BYTES. A refusal names the field's path (`then.then.payload.n`). Returns the chain with each
    payload as its model made it."""
    steps: list[dict[str, Any]] = []
    step: Any = then
    field = "then"
    while step is not None:
        if len(steps) == MAX_CHAIN_STEPS:
            raise InvalidRequestError(field, f"a chain has at most {MAX_CHAIN_STEPS} steps after its first job")
        if not isinstance(step, Mapping):
            raise InvalidRequestError(field, f"{field} must be an object: {{type, payload, then?}}")
        unknown = set(step) - {"type", "payload", "then"}
        if unknown:
            raise InvalidRequestError(field, f"{field}: unknown field (a step has type, payload and then)")
        name = step.get("type")
        if not isinstance(name, str):
            raise InvalidRequestError(f"{field}.type", f"{field}.type must be a job type's name")
        job_type = ports.registry.job_type(name)
        if job_type is None:
            refusal = unknown_job_type(name)
            raise InvalidRequestError(f"{field}.type", str(refusal), code="unknown_job_type")
        if not job_type.may_be_submitted_by(submitter):
            raise InvalidRequestError(
                f"{field}.type", f"job type {job_type.name!r} is not open to this caller", code="job_type_forbidden"
            )
        payload = step.get("payload", {})
        if not isinstance(payload, Mapping):
            raise InvalidRequestError(f"{field}.payload", f"{field}.payload must be an object", code="invalid_payload")
        steps.append({"type": job_type.name, "payload": checked_payload(job_type, payload, f"{field}.payload")})
        step = step.get("then")
        field = f"{field}.then"
    chain: dict[str, Any] | None = None
    for checked in reversed(steps):
        chain = {**checked, "then": chain} if chain is not None else checked
    assert chain is not None
    size = len(payload_json(chain).encode())
    if size > MAX_THEN_BYTES:
        raise InvalidRequestError("then", f"the chain is {size} bytes; at most {MAX_THEN_BYTES} are accepted")
    return chain


def parse_run_at(text: str, now: datetime, policy: SubmitPolicy) -> datetime:
    """An RFC 3339 date-time (ISO 8601 with seconds and a zone: the document's `date-time`); in the past
    means now; at most `max_schedule_ahead` ahead."""
    when = parse_time(text, now, "run_at")
    if when - now > policy.max_schedule_ahead:
        raise InvalidRequestError("run_at", f"run_at may be at most {policy.max_schedule_ahead.days} days ahead")
    return when


def parse_time(text: str, now: datetime, field: str) -> datetime:
    """An RFC 3339 date-time with a zone, from the Unix epoch on, in `now`'s zone; refusals name `field`."""
    written = RFC3339_DATE_TIME.fullmatch(text) if len(text) <= 64 else None
    try:
        if written is None:
            raise ValueError
        when = datetime.fromisoformat(text.upper())
    except ValueError:
        raise InvalidRequestError(
            field, f"{field} must be an RFC 3339 date-time (ISO 8601), e.g. 2026-01-31T09:00:00Z"
        ) from None
    if when.tzinfo is None:
        raise InvalidRequestError(field, f"{field} must carry a time zone (Z or an offset such as +01:00)")
    try:
        when = when.astimezone(now.tzinfo)
    except OverflowError:  # e.g. 0001-01-01T00:00:00+01:00 is before year 1 in UTC
        raise InvalidRequestError(field, f"{field} is outside the range of UTC times") from None
    if when < EARLIEST_RUN_AT:
        raise InvalidRequestError(field, f"{field} must be 1970-01-01T00:00:00Z or later")
    return when


def has_one_time_schedule(run_at: datetime | None, created_at: datetime) -> bool:
    """Due later than an SQS delay reaches: a one-time schedule enqueues the job (SCHEDULED until then)."""
    return run_at is not None and run_at - created_at > timedelta(seconds=SQS_MAX_DELAY_S)


def delay_seconds(job: Job, now: datetime) -> int:
    if job.run_at is None or job.run_at <= now:
        return 0
    return min(SQS_MAX_DELAY_S, math.ceil((job.run_at - now).total_seconds()))


def submit_job(request: SubmitRequest, ports: Ports, policy: SubmitPolicy) -> Submitted:
    """A job for its queue is sent first, then written (send-then-write): once the write lands its
    message is already on the queue, so the job needs no sweep-index entry. When the send fails the job
    is written with its sweep time, as before, and the sweeper sends it. A job due later than an SQS
    delay reaches is written first and gets its one-time schedule (`dispatch`). The tenant's quotas are
    asked before anything is sent or written (`admit`).

    A message whose write never lands (the write failed, or the function died between the two) names
    a job that does not exist: the worker returns it until `UNWRITTEN_BOUND_S` (domain/registry.py) has
    passed since it was sent, then drops it as never accepted (logic/process.py). A replay sends a
    second message for the existing job: a duplicate delivery, acknowledged without running."""
    now = ports.clock.now()
    job = build_job(request, ports, policy, now)
    replay = admit(job, ports)
    taken = take_key(job, ports, policy) if replay is None else Submitted(replay, replayed=True)
    if taken.replayed:
        outcome = CreateOutcome(taken.job, replayed=True)
    else:
        job = taken.job
        if job.status is JobStatus.QUEUED:
            job = _send_first(ports, job, now)
        outcome = ports.store.create(job)
    if outcome.replayed:
        ports.metrics.count("JobsDeduplicated", queue=job.queue, job_type=job.type)
        return Submitted(outcome.job, replayed=True)
    if outcome.job.status is JobStatus.SCHEDULED:
        dispatch(ports, outcome.job)
    supersede_previous(outcome.job, ports, retention=policy.retention)
    return Submitted(outcome.job, replayed=False)


def submit_made(job: Job, ports: Ports) -> Submitted:
    """A job the system makes on a job's behalf (a chain's next job, a child of `ctx.submit`), its id reproducible:
    asked of the tenant's quotas like any submit, sent first, then created if absent. The job already there (a
    replayed follow-up, a retried attempt's submit) is the same job: answered as a replay, nothing new made (its
    message sent again is a duplicate delivery, acknowledged unrun). IdempotencyConflictError when the job there
    was made from another type, payload or chain."""
    admit(job, ports)
    outcome = ports.store.create(_send_first(ports, job, ports.clock.now()))
    if outcome.replayed:
        ports.metrics.count("JobsDeduplicated", queue=job.queue, job_type=job.type)
    return Submitted(outcome.job, outcome.replayed)


def admit(job: Job, ports: Ports) -> Job | None:
    """Ask the tenant's quotas before the job is written (QuotaExceededError: nothing is written). Over a
    quota, a replay of a job already accepted under the same key is still answered as one (one read, off
    the path of a submit within its quotas): returns that job."""
    if ports.quotas is None:
        return None
    try:
        ports.quotas.admit(job.tenant, delayed=job.status is JobStatus.SCHEDULED)
    except QuotaExceededError:
        record = ports.store.key_record(job.tenant, job.idempotency_key) if job.idempotency_key is not None else None
        existing = ports.store.get(record.job_id, tenant=job.tenant) if record is not None else None
        if existing is None:
            raise
        if not existing.same_submission(job):
            raise IdempotencyConflictError(existing) from None
        return existing
    return None


def take_key(job: Job, ports: Ports, policy: SubmitPolicy) -> Submitted:
    """A keyed job's idempotency decision, before anything is sent or written: one conditional write marks the
    key (scoped by the tenant) as this job's, the check and the mark in one. The key new (or this submission's
    own mark, met again by an SDK retry): this job, to be sent and written. The same request under the key
    before: its job, replayed; or, when that job was never written (its submit stopped between the mark and
    the job's write), this submission carries it on under its id and creation time, to be sent and written
    now (the job's write is conditional: if the first one's lands first, this one is its replay). Another
    request under the key: IdempotencyConflictError. A job without a key passes as it is."""
    if job.idempotency_key is None:
        return Submitted(job, replayed=False)
    record = ports.store.record_key(job, expires_at=key_record_expiry(job, policy))
    if record.submission_id == job.submission_id:
        return Submitted(job, replayed=False)
    existing = ports.store.get(record.job_id, tenant=job.tenant)
    if record.fingerprint != job.fingerprint:
        raise IdempotencyConflictError(existing)
    if existing is not None:
        return Submitted(existing, replayed=True)
    return Submitted(job.replace(job_id=record.job_id, created_at=record.created_at), replayed=False)


def key_record_expiry(job: Job, policy: SubmitPolicy) -> datetime:
    """When a key's record expires (TTL): the retention after its job is due, and a margin."""
    due = max(job.created_at, job.run_at) if job.run_at is not None else job.created_at
    return due + policy.retention + KEY_RECORD_MARGIN


def _send_first(ports: Ports, job: Job, now: datetime) -> Job:
    """Send a new job's message before it is written. Sent: the job is written without a sweep time.
    Not sent: it keeps its sweep time, and the sweeper sends it once that has passed."""
    try:
        ports.queue.send(job.queue, JobMessage.of(job), delay_s=delay_seconds(job, now))
    except QueueUnavailableError:
        logger.warning("send failed; the job is written for the sweeper to send", extra={"job_id": job.job_id})
        ports.metrics.count("SendFailed", queue=job.queue, job_type=job.type)
        return job
    return job.replace(sweep_at=None)


def dispatch(ports: Ports, job: Job) -> None:
    """Send a newly accepted job's message, or create its one-time schedule. A failure here loses
    nothing: the job is durable and the sweeper sends (or enqueues) it when it is overdue."""
    if job.status is JobStatus.SCHEDULED:
        if ports.scheduler is None:
            logger.error("no scheduler configured; the sweeper will enqueue the job when due")
            return
        try:
            ports.scheduler.create_one_time(job)
        except OffpathError:
            logger.warning("one-time schedule not created; the sweeper will enqueue the job when due")
            ports.metrics.count("ScheduleCreateFailed", queue=job.queue, job_type=job.type)
        return
    try:
        ports.queue.send(job.queue, JobMessage.of(job), delay_s=delay_seconds(job, ports.clock.now()))
    except QueueUnavailableError:
        logger.warning("send failed; the sweeper will send the job", extra={"job_id": job.job_id})
        ports.metrics.count("SendFailed", queue=job.queue, job_type=job.type)


@dataclass(frozen=True)
class BatchItemResult:
    index: int
    submitted: Submitted | None = None
    error: OffpathError | None = None


def submit_batch(requests: Sequence[SubmitRequest], ports: Ports, policy: SubmitPolicy) -> list[BatchItemResult]:
    """Each item is validated and written on its own (a bad item fails alone); sends go out in batches."""
    if len(requests) > MAX_BATCH:
        raise InvalidRequestError("jobs", f"a batch holds at most {MAX_BATCH} jobs")
    now = ports.clock.now()

    def write(index: int) -> BatchItemResult:
        try:
            job = build_job(requests[index], ports, policy, now, key_field=BODY_KEY)
            replay = admit(job, ports)
            if replay is not None:
                return BatchItemResult(index, Submitted(replay, replayed=True))
            taken = take_key(job, ports, policy)
            if taken.replayed:
                return BatchItemResult(index, taken)
            outcome = ports.store.create(taken.job)
            if not outcome.replayed:
                supersede_previous(outcome.job, ports, retention=policy.retention)
            return BatchItemResult(index, Submitted(outcome.job, outcome.replayed))
        except (
            InvalidRequestError,
            JobTypeForbiddenError,
            PayloadTooLargeError,
            ItemTooLargeError,
            IdempotencyConflictError,
            StoreUnavailableError,
            QuotaExceededError,
        ) as error:
            # One item's failure stays that item's: the others were written and are reported as such.
            return BatchItemResult(index, error=error)

    with ThreadPoolExecutor(max_workers=BATCH_WRITERS) as pool:
        results = list(pool.map(write, range(len(requests))))

    new_jobs = [r.submitted.job for r in results if r.submitted and not r.submitted.replayed]
    for r in results:
        if r.submitted and r.submitted.replayed:
            ports.metrics.count("JobsDeduplicated", queue=r.submitted.job.queue, job_type=r.submitted.job.type)
    by_queue: dict[str, list[JobMessage]] = {}
    for job in new_jobs:
        if job.status is JobStatus.SCHEDULED or job.run_at is not None:
            dispatch(ports, job)
        else:
            by_queue.setdefault(job.queue, []).append(JobMessage.of(job))
    for queue_name, messages in by_queue.items():
        try:
            unsent = ports.queue.send_batch(queue_name, messages)
        except QueueUnavailableError:
            unsent = messages
        for message in unsent:
            ports.metrics.count("SendFailed", queue=queue_name, job_type=message.type)
    return results


def validation_error(error: ValidationError, prefix: tuple[str, ...], code: str) -> InvalidRequestError:
    """A model's validation error as a refusal: the first failing field in `field` and `message`, and every
    failing field (up to MAX_REPORTED_ERRORS) in `errors`. A part of a path the caller made up (an unexpected
    key) is not echoed."""
    found = []
    for detail in error.errors()[:MAX_REPORTED_ERRORS]:
        parts = [str(part) if SAFE_FIELD_PART.match(str(part)) else "?" for part in detail["loc"]]
        field = ".".join([*prefix, *parts]) or "body"
        found.append((field, "unknown field" if detail["type"] == "extra_forbidden" else detail["msg"]))
    field, message = found[0]
    return InvalidRequestError(field, f"{field}: {message}", code=code, errors=tuple(found))
