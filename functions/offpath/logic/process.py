"""The worker's logic: claim, run, record the outcome, decide what happens to the message.

It never raises for one record: every record ends as "ack" (delete the message) or "retry"
(leave it on the queue, in the partial batch response).
"""

from __future__ import annotations

import json
import logging
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from pydantic import ValidationError

from offpath.domain.clock import Clock
from offpath.domain.context import JobContext
from offpath.domain.errors import (
    JobConflictError,
    JobNotFoundError,
    OffpathError,
    PermanentError,
    QueueUnavailableError,
    StoreUnavailableError,
)
from offpath.domain.job import Job, JobStatus
from offpath.domain.ports import JobMessage, JobQueue, JobStore, Metrics
from offpath.domain.registry import JobType, Registry
from offpath.domain.timeout import run_with_timeout
from offpath.observability import bound_job_id

logger = logging.getLogger("offpath.worker")

MAX_VISIBILITY_S = 43_200
MAX_ERROR_LENGTH = 1_000
# Results live on the job item (DynamoDB's item limit is 400 KB); larger results belong in S3.
MAX_RESULT_BYTES = 64 * 1024


@dataclass(frozen=True)
class Delivery:
    """One SQS record as the worker sees it."""

    message_id: str
    receipt_handle: str
    body: str
    receive_count: int = 1
    # The message carries the failure reason the worker put on its DLQ copy: it was redriven.
    redriven: bool = False


@dataclass(frozen=True)
class WorkerPolicy:
    queue: str
    retention: timedelta = timedelta(days=7)
    # The lease outlives the job's timeout by this much, so a slow outcome write is not mistaken
    # for a dead worker.
    lease_margin: timedelta = timedelta(seconds=30)
    # A record is only started when the invocation has at least its timeout plus this left.
    start_margin_ms: int = 2_000
    sweep_grace: timedelta = timedelta(minutes=2)


@dataclass
class WorkerPorts:
    registry: Registry
    store: JobStore
    queue: JobQueue
    clock: Clock
    metrics: Metrics
    rng: random.Random = field(default_factory=random.Random)


def process_batch(
    deliveries: Sequence[Delivery],
    ports: WorkerPorts,
    policy: WorkerPolicy,
    remaining_ms: Callable[[], int],
) -> list[str]:
    """Returns the message ids to report in `batchItemFailures`."""
    failures: list[str] = []
    for delivery in deliveries:
        if not process_record(delivery, ports, policy, remaining_ms):
            failures.append(delivery.message_id)
    return failures


def process_record(
    delivery: Delivery, ports: WorkerPorts, policy: WorkerPolicy, remaining_ms: Callable[[], int]
) -> bool:
    """True: the message may be deleted. False: it stays on the queue."""
    try:
        message = JobMessage.from_body(delivery.body)
    except (ValueError, KeyError, TypeError):
        # Left alone, the queue's redrive policy moves it to the DLQ after maxReceiveCount receives.
        logger.error("message is not an offpath job message", extra={"message_id": delivery.message_id})
        return False
    with bound_job_id(message.job_id):
        job_type = ports.registry.job_type(message.type)
        if job_type is None:
            logger.error("no job type %s in this deployment", message.type)
            return False
        if remaining_ms() < job_type.timeout_s * 1000 + policy.start_margin_ms:
            logger.info("not enough time left in this invocation to start the job; it goes back untouched")
            return False
        try:
            return _claim_and_run(delivery, message, job_type, ports, policy, remaining_ms)
        except (StoreUnavailableError, QueueUnavailableError):
            logger.exception("store or queue unavailable; the message returns after its visibility timeout")
            return False


def _claim_and_run(
    delivery: Delivery,
    message: JobMessage,
    job_type: JobType,
    ports: WorkerPorts,
    policy: WorkerPolicy,
    remaining_ms: Callable[[], int],
) -> bool:
    now = ports.clock.now()
    try:
        job = _claim(message, job_type, ports, policy, now)
    except JobNotFoundError:
        logger.warning("message for a job that does not exist (expired or never written); dropped")
        return True
    except JobConflictError as conflict:
        if conflict.job is None:
            return True
        if conflict.job.status is JobStatus.FAILED and delivery.redriven:
            try:
                job = _redrive_and_claim(message, job_type, ports, policy, now)
            except JobConflictError as again:
                return again.job is None or _not_claimed(delivery, again.job, ports, policy, now)
        else:
            return _not_claimed(delivery, conflict.job, ports, policy, now)

    queue, job_type_name = job.queue, job.type
    ports.metrics.count("JobsStarted", queue=queue, job_type=job_type_name)
    if job.attempt == 1:
        ports.metrics.milliseconds("QueueDelay", _ms(now - job.created_at), queue=queue, job_type=job_type_name)
    logger.info("job started", extra={"attempt": job.attempt, "job_type": job.type})

    started = ports.clock.now()
    try:
        result = _run(job, job_type, ports, remaining_ms)
    except PermanentError as error:
        return _fail(job, f"permanent error: {_describe(error)}", ports, policy)
    except Exception as error:  # every other error is retryable by contract
        ports.metrics.milliseconds("JobDuration", _ms(ports.clock.now() - started), queue=queue, job_type=job_type_name)
        if job.attempt >= job.max_attempts:
            return _fail(job, f"attempts exhausted ({job.attempt}): {_describe(error)}", ports, policy)
        return _retry(delivery, job, job_type, _describe(error), ports)

    finished = ports.clock.now()
    ports.metrics.milliseconds("JobDuration", _ms(finished - started), queue=queue, job_type=job_type_name)
    result_size = len(json.dumps(result, default=str).encode())
    if result_size > MAX_RESULT_BYTES:
        return _fail(job, f"result is {result_size} bytes; the limit is {MAX_RESULT_BYTES} bytes", ports, policy)
    try:
        ports.store.record_success(job, result=result, now=finished, expires_at=finished + policy.retention)
    except JobConflictError:
        logger.warning("a newer attempt owns this job; this attempt's result is discarded")
        return True
    ports.metrics.count("JobsSucceeded", queue=queue, job_type=job_type_name)
    logger.info("job succeeded", extra={"attempt": job.attempt})
    return True


def _claim(message: JobMessage, job_type: JobType, ports: WorkerPorts, policy: WorkerPolicy, now: datetime) -> Job:
    return ports.store.claim(
        message.job_id,
        tenant=message.tenant,
        now=now,
        lease_until=now + timedelta(seconds=job_type.timeout_s) + policy.lease_margin,
    )


def _redrive_and_claim(
    message: JobMessage, job_type: JobType, ports: WorkerPorts, policy: WorkerPolicy, now: datetime
) -> Job:
    """A redriven message for a FAILED job: a fresh attempt budget (one conditional write, so a
    redrive resets the job once), then the usual claim."""
    reset = ports.store.reset_for_redrive(
        message.job_id, tenant=message.tenant, now=now, sweep_at=now + policy.sweep_grace
    )
    ports.metrics.count("JobsRedriven", queue=reset.queue, job_type=reset.type)
    logger.info("redriven job reset to QUEUED (redrive %d)", reset.redrives)
    return _claim(message, job_type, ports, policy, now)


def _run(job: Job, job_type: JobType, ports: WorkerPorts, remaining_ms: Callable[[], int]) -> Any:
    try:
        payload = job_type.parse_payload(job.payload)
    except ValidationError as error:
        raise PermanentError(
            f"stored payload no longer matches the job type's model: {error.error_count()} errors"
        ) from None
    context = JobContext(
        job,
        store=ports.store,
        clock=ports.clock,
        remaining_ms=remaining_ms,
        logger=logging.getLogger(f"offpath.jobs.{job.type}"),
        shared_across_tenants=job_type.shared_across_tenants,
    )
    return run_with_timeout(lambda: job_type.function(payload, context), job_type.timeout_s)


def _retry(delivery: Delivery, job: Job, job_type: JobType, error: str, ports: WorkerPorts) -> bool:
    delay_s = round(job_type.backoff.delay(job.attempt, ports.rng))
    now = ports.clock.now()
    try:
        ports.store.record_retry(job, error=error, now=now, next_attempt_at=now + timedelta(seconds=delay_s))
    except JobConflictError:
        logger.warning("a newer attempt owns this job; this attempt's failure is not recorded")
        return True
    ports.queue.change_visibility(job.queue, delivery.receipt_handle, min(MAX_VISIBILITY_S, delay_s))
    ports.metrics.count("JobsRetried", queue=job.queue, job_type=job.type)
    logger.warning("job failed; retrying", extra={"attempt": job.attempt, "retry_in_s": delay_s, "error": error})
    return False


def _fail(job: Job, reason: str, ports: WorkerPorts, policy: WorkerPolicy) -> bool:
    """The DLQ copy goes first: if the status write then fails, the message returns and the job is
    failed again (a second DLQ copy is harmless); the other order could lose the DLQ copy."""
    ports.queue.send_to_dlq(job.queue, JobMessage.of(job), reason=reason)
    now = ports.clock.now()
    try:
        ports.store.record_failure(job, error=reason, now=now, expires_at=now + policy.retention)
    except JobConflictError:
        logger.warning("a newer attempt owns this job; this attempt's failure is not recorded")
        return True
    ports.metrics.count("JobsFailed", queue=job.queue, job_type=job.type)
    ports.metrics.count("JobsDeadLettered", queue=job.queue, job_type=job.type)
    logger.error("job failed", extra={"attempt": job.attempt, "error": reason})
    return True


def _not_claimed(delivery: Delivery, job: Job, ports: WorkerPorts, policy: WorkerPolicy, now: datetime) -> bool:
    if job.status.is_final or job.status is JobStatus.SCHEDULED:
        ports.metrics.count("DuplicateDeliveries", queue=job.queue, job_type=job.type)
        logger.info("delivery for a %s job; acknowledged without running", job.status.value)
        return True
    if job.status is JobStatus.RUNNING and not job.lease_expired(now):
        # Another worker holds the job. Look again when its lease ends, in case that worker dies.
        assert job.lease_until is not None
        wait_s = max(1, int((job.lease_until - now).total_seconds()) + 1)
        ports.queue.change_visibility(job.queue, delivery.receipt_handle, min(MAX_VISIBILITY_S, wait_s))
        ports.metrics.count("DuplicateDeliveries", queue=job.queue, job_type=job.type)
        return False
    if job.status is JobStatus.RUNNING and job.attempt >= job.max_attempts:
        ports.queue.send_to_dlq(job.queue, JobMessage.of(job), reason="lease expired")
        try:
            ports.store.fail_expired_lease(job, now=now, expires_at=now + policy.retention)
        except JobConflictError:
            return True
        ports.metrics.count("JobsFailed", queue=job.queue, job_type=job.type)
        ports.metrics.count("JobsDeadLettered", queue=job.queue, job_type=job.type)
        logger.error("job failed: its last attempt's lease expired")
        return True
    # Not claimable for a reason that may pass (for example RETRYING with its delay still running
    # after a duplicate delivery): look again later.
    return False


def _describe(error: BaseException) -> str:
    text = f"{type(error).__name__}: {error}" if not isinstance(error, OffpathError) else str(error)
    return text[:MAX_ERROR_LENGTH]


def _ms(delta: timedelta) -> float:
    return round(delta.total_seconds() * 1000.0, 3)
