"""Accepting jobs: validate, write once (the idempotency decision), then send."""

from __future__ import annotations

import hashlib
import json
import logging
import re
import uuid
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from offpath.domain.clock import Clock
from offpath.domain.errors import (
    IdempotencyConflictError,
    InvalidRequestError,
    OffpathError,
    PayloadTooLargeError,
    QueueUnavailableError,
)
from offpath.domain.job import Job, JobStatus
from offpath.domain.ports import JobMessage, JobQueue, JobStore, Metrics
from offpath.domain.registry import Registry

logger = logging.getLogger(__name__)

MAX_IDEMPOTENCY_KEY_LENGTH = 255
MAX_BATCH = 100
SAFE_FIELD_PART = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$|^[0-9]{1,6}$")
SQS_MAX_DELAY_S = 900


@dataclass(frozen=True)
class SubmitPolicy:
    payload_limit_bytes: int = 64 * 1024


@dataclass(frozen=True)
class SubmitRequest:
    tenant: str
    type: str
    payload: dict[str, Any]
    idempotency_key: str | None = None
    queue: str | None = None


@dataclass(frozen=True)
class Submitted:
    job: Job
    replayed: bool


@dataclass(frozen=True)
class Ports:
    registry: Registry
    store: JobStore
    queue: JobQueue
    clock: Clock
    metrics: Metrics


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def payload_hash(job_type: str, payload: dict[str, Any]) -> str:
    return hashlib.sha256(f"{job_type}\n{canonical_json(payload)}".encode()).hexdigest()


def job_id_for(tenant: str, idempotency_key: str | None) -> str:
    """A key-derived id makes the job item itself the idempotency record, scoped by tenant."""
    if idempotency_key is None:
        return uuid.uuid4().hex
    return hashlib.sha256(f"{tenant}\x00{idempotency_key}".encode()).hexdigest()[:32]


def validate_idempotency_key(key: str | None) -> str | None:
    if key is None:
        return None
    if not key or len(key) > MAX_IDEMPOTENCY_KEY_LENGTH or not key.isprintable():
        raise InvalidRequestError(
            "Idempotency-Key",
            f"Idempotency-Key must be 1 to {MAX_IDEMPOTENCY_KEY_LENGTH} printable characters",
        )
    return key


def build_job(request: SubmitRequest, ports: Ports, policy: SubmitPolicy, now: datetime) -> Job:
    """Validate a request into a new QUEUED job (not yet written)."""
    job_type = ports.registry.job_type(request.type)
    if job_type is None:
        raise InvalidRequestError("type", "unknown job type", code="unknown_job_type")
    if request.queue is not None and request.queue != job_type.queue:
        raise InvalidRequestError("queue", f"this job type runs on queue {job_type.queue!r}")
    key = validate_idempotency_key(request.idempotency_key)
    try:
        model = job_type.parse_payload(request.payload)
    except ValidationError as error:
        raise InvalidRequestError(_field_of(error), _message_of(error), code="invalid_payload") from None
    payload = model.model_dump(mode="json")
    size = len(canonical_json(payload).encode())
    if size > policy.payload_limit_bytes:
        raise PayloadTooLargeError(size, policy.payload_limit_bytes)
    return Job(
        job_id=job_id_for(request.tenant, key),
        tenant=request.tenant,
        type=job_type.name,
        queue=job_type.queue,
        payload=payload,
        payload_hash=payload_hash(job_type.name, payload),
        status=JobStatus.QUEUED,
        created_at=now,
        updated_at=now,
        max_attempts=job_type.max_attempts,
        idempotency_key=key,
        submission_id=uuid.uuid4().hex,
    )


def submit_job(request: SubmitRequest, ports: Ports, policy: SubmitPolicy) -> Submitted:
    job = build_job(request, ports, policy, ports.clock.now())
    outcome = ports.store.create(job)
    if outcome.replayed:
        ports.metrics.count("JobsDeduplicated", queue=job.queue, job_type=job.type)
        return Submitted(outcome.job, replayed=True)
    ports.metrics.count("JobsSubmitted", queue=job.queue, job_type=job.type)
    _send_or_leave_to_sweeper(ports, outcome.job)
    return Submitted(outcome.job, replayed=False)


def _send_or_leave_to_sweeper(ports: Ports, job: Job) -> None:
    try:
        ports.queue.send(job.queue, JobMessage.of(job))
    except QueueUnavailableError:
        # The job is durable; the sweeper sends what was accepted but never sent.
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
            job = build_job(requests[index], ports, policy, now)
            outcome = ports.store.create(job)
            return BatchItemResult(index, Submitted(outcome.job, outcome.replayed))
        except (InvalidRequestError, PayloadTooLargeError, IdempotencyConflictError) as error:
            return BatchItemResult(index, error=error)

    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(write, range(len(requests))))

    new_jobs = [r.submitted.job for r in results if r.submitted and not r.submitted.replayed]
    for job in new_jobs:
        ports.metrics.count("JobsSubmitted", queue=job.queue, job_type=job.type)
    for r in results:
        if r.submitted and r.submitted.replayed:
            ports.metrics.count("JobsDeduplicated", queue=r.submitted.job.queue, job_type=r.submitted.job.type)
    by_queue: dict[str, list[JobMessage]] = {}
    for job in new_jobs:
        by_queue.setdefault(job.queue, []).append(JobMessage.of(job))
    for queue_name, messages in by_queue.items():
        try:
            unsent = ports.queue.send_batch(queue_name, messages)
        except QueueUnavailableError:
            unsent = messages
        for message in unsent:
            ports.metrics.count("SendFailed", queue=queue_name, job_type=message.type)
    return results


def _field_of(error: ValidationError) -> str:
    """The failing field's path; a part the caller made up (an unexpected key) is not echoed."""
    first = error.errors()[0]
    parts = [str(part) if SAFE_FIELD_PART.match(str(part)) else "?" for part in first["loc"]]
    return ".".join(["payload", *parts])


def _message_of(error: ValidationError) -> str:
    first = error.errors()[0]
    return f"{_field_of(error)}: {first['msg']}"
