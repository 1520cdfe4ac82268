"""The worker's logic: claim, run, record the outcome, decide what happens to the message.

It never raises for one record: every record ends as "ack" (delete the message) or "retry"
(leave it on the queue, in the partial batch response). Whatever a record raises (an unreadable
item, a bug) is logged with its job id and counted, and only that record stays on the queue: its
redrive policy moves it to the DLQ after maxReceiveCount receives. The rest of the batch proceeds.

A claim's lease outlives the invocation that holds it, so no second worker can claim the job while
the first can still be running it, even when the job function ignores its timeout.

The message is what brings a job back: while a job is QUEUED, RUNNING or RETRYING its message stays
on the queue (a retry changes its visibility; a worker that dies leaves it to return after its
visibility timeout), so such a job needs no sweep-index entry. Where SQS would stop delivering it,
the worker takes over:
- A message for a job not written yet (the api sends before it writes, logic/submit.py) goes back
  until `UNWRITTEN_BOUND_S` has passed since it was sent, and is then dropped as never accepted.
- On one of the message's last `LAST_RECEIVES` receives (SQS moves it to the DLQ after
  maxReceiveCount), a claim also writes the job's sweep time, so the sweeper finds the job if this
  attempt's worker dies or retries; a message that would go back unclaimed is sent again as a fresh
  copy (a new receive count) and this one acknowledged.

A worker that dies is recovered at its lease's end, not at the queue's visibility timeout (6 x the
worker's timeout): as an invocation starts, one ChangeMessageVisibilityBatch (10 entries a request: one
for the shipped queue classes) sets its messages' visibility to the lease its claims take (the
invocation's end + the lease margin) + `HOLD_MARGIN_S`. A record that then goes back with a time of its
own (a retry's backoff, a job not written yet, a job another worker holds) changes its message's
visibility again; one that goes back without (the store unavailable, an unreadable record) returns at
the lease's end. If the call fails, that is logged and counted (`VisibilityHoldsFailed`) and nothing
else changes: the queue's visibility timeout still brings the messages back.
"""

from __future__ import annotations

import json
import logging
import math
import os
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from offpath.domain.backoff import Backoff
from offpath.domain.batch import BatchStore
from offpath.domain.clock import Clock
from offpath.domain.context import BatchGateway, JobContext
from offpath.domain.errors import (
    JobConflictError,
    JobNotFoundError,
    OffpathError,
    PermanentError,
    QueueUnavailableError,
    StoreUnavailableError,
)
from offpath.domain.ids import new_job_id
from offpath.domain.job import AttemptError, Job, JobStatus
from offpath.domain.limits import LimitStore
from offpath.domain.ports import JobMessage, JobQueue, JobStore, Metrics, Ports
from offpath.domain.quotas import QuotaGate
from offpath.domain.registry import LEASE_MARGIN_S, START_MARGIN_S, UNWRITTEN_BOUND_S, JobType, Registry
from offpath.domain.timeout import JobTimeout, run_with_timeout
from offpath.logic.admission import Done, Wait, admit
from offpath.logic.debounce import name_survivor
from offpath.logic.followups import FOLLOWUP_GRACE, followups_due, settle
from offpath.logic.limits import needs_job, release_slot, slot_attempt
from offpath.logic.pause import PauseFlags
from offpath.observability import bind_attempt, bind_trace_id, bound_job_id, current_trace_id, trace_id_of

logger = logging.getLogger("offpath.worker")

MAX_VISIBILITY_S = 43_200
MAX_SEND_DELAY_S = 900
MAX_ERROR_LENGTH = 1_000
# Results live on the job item (DynamoDB's item limit is 400 KB); larger results belong in S3.
MAX_RESULT_BYTES = 64 * 1024
# Retries of an outcome write through a store outage (full jitter; see _write_outcome).
OUTCOME_BACKOFF = Backoff(base_s=0.2, cap_s=2.0)
UNKNOWN = "unknown"
# A message is on one of its last receives when SQS may deliver it at most this many times more, counting
# this one: two, so that one receive the worker never sees (a throttled invocation of the event source
# mapping still counts a receive) cannot take the message to the DLQ unwatched.
LAST_RECEIVES = 2
# A message whose job is not written yet goes back for this long first (the api's write is usually
# milliseconds behind its send), then until UNWRITTEN_BOUND_S has passed.
UNWRITTEN_FIRST_RETRY_S = 2
# A held message becomes visible this long after the lease ends, so that the claim it meets then finds the
# lease expired (SQS counts whole seconds; a claim's lease is computed a few milliseconds after the hold's).
HOLD_MARGIN_S = 1
# An attempt's traceback keeps the job code's last TRACEBACK_FRAMES frames, at most TRACEBACK_BYTES bytes of them
# (the newest frames kept), one `path:line in function` a frame: what an ordinary failure adds to the job item
# without taking it past a KiB (a write unit); docs/decisions.md, "Tracebacks".
TRACEBACK_FRAMES = 5
TRACEBACK_BYTES = 200
# offpath's own code (its frames are cut from a traceback) and, inside it, the job types' folder (kept).
_FUNCTIONS_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))) + os.sep
_MACHINERY = os.path.join(_FUNCTIONS_ROOT, "offpath", "")
_JOB_CODE = os.path.join(_MACHINERY, "jobs", "")


@dataclass(frozen=True)
class Delivery:
    """One SQS record as the worker sees it."""

    message_id: str
    receipt_handle: str
    body: str
    receive_count: int = 1
    # The message carries the failure reason the worker put on its DLQ copy: it was redriven.
    redriven: bool = False
    # When the message was sent (SQS's SentTimestamp); None when the record does not say.
    sent_at: datetime | None = None
    # The W3C traceparent the message carries (its `traceparent` attribute), if any.
    traceparent: str | None = None


@dataclass(frozen=True)
class WorkerPolicy:
    queue: str
    retention: timedelta = timedelta(days=7)
    # The lease outlives the invocation that takes it by this much (the invocation's end is the
    # earlier of Lambda's remaining time and the worker function's timeout from the registry).
    lease_margin: timedelta = timedelta(seconds=LEASE_MARGIN_S)
    # A record is only started when the invocation has at least its timeout plus this left: the
    # time for its claim and its outcome write (with retries through a store outage).
    start_margin_ms: int = START_MARGIN_S * 1000
    # Retries of an outcome write stop this long before the invocation ends (time to return the
    # rest of the batch).
    finish_reserve_ms: int = 2_000
    sweep_grace: timedelta = timedelta(minutes=2)
    # How long after its send a message's job may still be written (logic/submit.py).
    unwritten_bound: timedelta = timedelta(seconds=UNWRITTEN_BOUND_S)


@dataclass
class WorkerPorts:
    registry: Registry
    store: JobStore
    queue: JobQueue
    clock: Clock
    metrics: Metrics
    rng: random.Random = field(default_factory=random.Random)
    sleep: Callable[[float], None] = time.sleep
    batches: BatchStore | None = None
    # Per-key concurrency slots and rate-limit buckets (None: no job type of the queue declares a limit).
    limits: LimitStore | None = None
    # The pause flags (logic/pause.py), cached; None: nothing is ever paused for this worker.
    pauses: PauseFlags | None = None
    # The tenants' quotas, asked by what a job submits (`ctx.submit`, a chain's next job); None: none configured.
    quotas: QuotaGate | None = None
    # How long a job ended before it ran (EXPIRED) is kept: settings.retention, as WorkerPolicy's.
    retention: timedelta = timedelta(days=7)

    def submit_ports(self) -> Ports:
        """The ports of the submit path, for what a job submits and a final job's follow-ups (logic/children.py,
        logic/followups.py)."""
        return Ports(
            registry=self.registry,
            store=self.store,
            queue=self.queue,
            clock=self.clock,
            metrics=self.metrics,
            quotas=self.quotas,
            batches=self.batches,
        )

    def as_ports(self) -> Ports:
        """The ports a job's follow-ups take (logic/followups.py): the submit path's."""
        return self.submit_ports()


def process_batch(
    deliveries: Sequence[Delivery],
    ports: WorkerPorts,
    policy: WorkerPolicy,
    remaining_ms: Callable[[], int],
) -> list[str]:
    """Returns the message ids to report in `batchItemFailures`."""
    _hold_until_lease_ends(deliveries, ports, policy, _invocation_left(ports, policy, remaining_ms))
    failures: list[str] = []
    for delivery in deliveries:
        if not process_record(delivery, ports, policy, remaining_ms):
            failures.append(delivery.message_id)
    return failures


def _hold_until_lease_ends(
    deliveries: Sequence[Delivery], ports: WorkerPorts, policy: WorkerPolicy, remaining_ms: Callable[[], int]
) -> None:
    """Set the batch's messages to come back when the lease this invocation's claims take has ended (each
    claim's lease is the invocation's end + the lease margin, whenever in the invocation it is taken)."""
    if not deliveries:
        return
    lease = timedelta(milliseconds=remaining_ms()) + policy.lease_margin
    timeout_s = min(MAX_VISIBILITY_S, math.ceil(lease.total_seconds()) + HOLD_MARGIN_S)
    handles = [delivery.receipt_handle for delivery in deliveries]
    try:
        unchanged = ports.queue.change_visibility_batch(policy.queue, handles, timeout_s)
    except Exception:  # never fails a record: the queue's visibility timeout remains the backstop
        logger.exception("the batch's visibility could not be set to the lease")
        unchanged = handles
    if unchanged:
        logger.warning(
            "%d of the batch's messages keep the queue's visibility timeout (not set to the lease)",
            len(unchanged),
            extra={"visibility_s": timeout_s},
        )
        ports.metrics.count("VisibilityHoldsFailed", len(unchanged), queue=policy.queue, job_type=UNKNOWN)


def process_record(
    delivery: Delivery, ports: WorkerPorts, policy: WorkerPolicy, remaining_ms: Callable[[], int]
) -> bool:
    """True: the message may be deleted. False: it stays on the queue."""
    try:
        message = JobMessage.from_body(delivery.body)
    except (ValueError, KeyError, TypeError):
        # Left alone, the queue's redrive policy moves it to the DLQ after maxReceiveCount receives.
        logger.error("message is not an offpath job message", extra={"message_id": delivery.message_id})
        ports.metrics.count("RecordsFailed", queue=policy.queue, job_type=UNKNOWN)
        return False
    with bound_job_id(message.job_id, trace_id_of(delivery.traceparent), message.tenant):
        try:
            return _process(delivery, message, ports, policy, _invocation_left(ports, policy, remaining_ms))
        except Exception:
            logger.exception(
                "the record failed; it stays on the queue (its redrive policy moves it to the DLQ in the end)",
                extra={"message_id": delivery.message_id},
            )
            ports.metrics.count("RecordsFailed", queue=policy.queue, job_type=message.type)
            return False


def _invocation_left(ports: WorkerPorts, policy: WorkerPolicy, remaining_ms: Callable[[], int]) -> Callable[[], int]:
    """What is left of this invocation: Lambda's count, never more than the worker function's timeout
    (the registry's, which the stack deploys), so a direct call without a Lambda context is bounded too."""
    limit_ms = ports.registry.worker_timeout_s(policy.queue) * 1000
    return lambda: min(remaining_ms(), limit_ms)


def _process(
    delivery: Delivery, message: JobMessage, ports: WorkerPorts, policy: WorkerPolicy, remaining_ms: Callable[[], int]
) -> bool:
    job_type = ports.registry.job_type(message.type)
    if job_type is None:
        logger.error("no job type %s in this deployment", message.type)
        ports.metrics.count("RecordsFailed", queue=policy.queue, job_type=message.type)
        return False
    if remaining_ms() < job_type.timeout_s * 1000 + policy.start_margin_ms:
        # Never claimed, so no attempt is spent; visible again at once, so it waits for no visibility timeout.
        logger.info("not enough time left in this invocation to start the job; it goes back at once, unclaimed")
        ports.metrics.count("RecordsReturnedUnrun", queue=policy.queue, job_type=job_type.name)
        if _on_last_receives(delivery, ports, policy):
            return _send_fresh_copy(message, ports, policy)
        ports.queue.change_visibility(policy.queue, delivery.receipt_handle, 0)
        return False
    try:
        admitted, held = _admit(delivery, message, job_type, ports, policy)
        if admitted is not None:
            return admitted
        try:
            return _claim_and_run(delivery, message, job_type, ports, policy, remaining_ms, held)
        except (StoreUnavailableError, QueueUnavailableError):
            # The claim could not be made (or its outcome not known): the job runs on a later delivery, so the
            # slot admission took for it is given back now rather than held idle until its time is up.
            _release_held(held, job_type, ports)
            raise
    except (StoreUnavailableError, QueueUnavailableError):
        logger.exception("store or queue unavailable; the message returns after its visibility timeout")
        if _on_last_receives(delivery, ports, policy):
            return _send_fresh_copy(message, ports, policy)
        return False


def _admit(
    delivery: Delivery, message: JobMessage, job_type: JobType, ports: WorkerPorts, policy: WorkerPolicy
) -> tuple[bool | None, tuple[Job, int] | None]:
    """Admission before the claim (logic/admission.py): (None, the job as admission read it and the attempt a
    concurrency slot was taken for, if one was) when the job may be claimed; else (the record's answer, None): the
    job waits, unclaimed (no attempt spent), its message back after the wait; (True, None) when a step ended the job
    itself (expiry: its message is acknowledged). A type without limits reads and writes nothing here (the expiry
    is on the message)."""
    now = ports.clock.now()
    subject: Job | JobMessage | None = message
    if job_type.limits.declared and needs_job(job_type):
        subject = ports.store.get(message.job_id, tenant=message.tenant)
        if subject is None:
            return None, None  # not written yet (or gone): the claim answers it
    answer = admit(subject, job_type, ports, now=now)
    if answer is None:
        held = job_type.limits.max_concurrency is not None and ports.limits is not None
        attempt = slot_attempt(subject) if held and isinstance(subject, Job) else None
        return None, (subject, attempt) if isinstance(subject, Job) and attempt is not None else None
    if isinstance(answer, Done) or not isinstance(answer, Wait):
        return True, None
    ports.metrics.count("AdmissionWaits", queue=policy.queue, job_type=job_type.name)
    logger.info("job waits (%s); it goes back unclaimed", answer.reason, extra={"retry_in_s": answer.seconds})
    if _on_last_receives(delivery, ports, policy):
        return _send_fresh_copy(message, ports, policy, delay_s=answer.seconds), None
    ports.queue.change_visibility(policy.queue, delivery.receipt_handle, min(MAX_VISIBILITY_S, answer.seconds))
    return False, None


def _on_last_receives(delivery: Delivery, ports: WorkerPorts, policy: WorkerPolicy) -> bool:
    """SQS may deliver this message at most LAST_RECEIVES times more, this one included: left on the
    queue, it may next be moved to the DLQ (maxReceiveCount) rather than delivered."""
    return delivery.receive_count > ports.registry.max_receive_count(policy.queue) - LAST_RECEIVES


def _send_fresh_copy(message: JobMessage, ports: WorkerPorts, policy: WorkerPolicy, *, delay_s: int = 0) -> bool:
    """A message that must go back on one of its last receives is sent again (the copy's receive count
    starts at 0; delayed by `delay_s`, at most SQS's 15 minutes) and this one acknowledged. If the copy cannot be
    sent, this one goes back."""
    try:
        ports.queue.send(policy.queue, message, delay_s=min(MAX_SEND_DELAY_S, delay_s))
    except QueueUnavailableError:
        logger.exception("the fresh copy of a message on its last receives could not be sent; it goes back")
        return False
    ports.metrics.count("MessagesRenewed", queue=policy.queue, job_type=message.type)
    logger.warning("message on its last receives went back as a fresh copy")
    return True


def _claim_and_run(
    delivery: Delivery,
    message: JobMessage,
    job_type: JobType,
    ports: WorkerPorts,
    policy: WorkerPolicy,
    remaining_ms: Callable[[], int],
    held: tuple[Job, int] | None = None,
) -> bool:
    """`held`: the job and the attempt admission took a concurrency slot for; released when no claim follows,
    else after the attempt's outcome write."""
    now = ports.clock.now()
    # The invocation ends within `remaining_ms()`: the lease outlives it, however the job function behaves.
    lease_until = now + timedelta(milliseconds=remaining_ms()) + policy.lease_margin
    # On one of the message's last receives the claim enters the job in the sweep index: if this attempt's
    # worker dies or retries, SQS may move the message to the DLQ, and the sweeper takes the job on.
    sweep_at = lease_until + policy.sweep_grace if _on_last_receives(delivery, ports, policy) else None
    claimed = _claim_or_answer(delivery, message, job_type, ports, policy, now, lease_until, sweep_at)
    if not isinstance(claimed, Job):
        _release_held(held, job_type, ports)  # no claim follows
        return claimed
    job = claimed
    if held is not None and held[1] != job.attempt:
        _release_held(held, job_type, ports)  # held for another attempt than the one claimed
    # The slot is given back after the outcome write (or its last failed try): a retrying job waits for its backoff
    # without one. Not when the worker dies (a BaseException, as a process ending): its slot frees at its time's end.
    try:
        answer = _run_claimed(delivery, job, job_type, ports, policy, remaining_ms)
    except Exception:
        release_slot(job, job_type, ports)
        raise
    release_slot(job, job_type, ports)
    return answer


def _claim_or_answer(
    delivery: Delivery,
    message: JobMessage,
    job_type: JobType,
    ports: WorkerPorts,
    policy: WorkerPolicy,
    now: datetime,
    lease_until: datetime,
    sweep_at: datetime | None,
) -> Job | bool:
    """The claimed job, or the record's answer when the job cannot be claimed."""
    try:
        return _claim(message, ports, now, lease_until, sweep_at)
    except JobNotFoundError:
        return _not_written(delivery, ports, policy, now)
    except JobConflictError as conflict:
        if conflict.job is None:
            return True
        # A redriven copy of a discarded job's message (one its discard did not meet) is acknowledged unrun.
        if not (conflict.job.status is JobStatus.FAILED and delivery.redriven and conflict.job.discarded_at is None):
            return _not_claimed(delivery, conflict.job, ports, policy, now, job_type)
    try:
        return _redrive_and_claim(message, ports, policy, now, lease_until, sweep_at)
    except JobConflictError as again:
        return again.job is None or _not_claimed(delivery, again.job, ports, policy, now)


def _release_held(held: tuple[Job, int] | None, job_type: JobType, ports: WorkerPorts) -> None:
    """Gives back the slot admission took (the job as admission read it names the slot: its id, key and attempt),
    whatever the claim found, even a job gone since."""
    if held is not None:
        release_slot(held[0], job_type, ports, attempt=held[1])


def _run_claimed(
    delivery: Delivery,
    job: Job,
    job_type: JobType,
    ports: WorkerPorts,
    policy: WorkerPolicy,
    remaining_ms: Callable[[], int],
) -> bool:
    # JobsStarted, QueueDelay, JobDuration and the outcomes' counts come from the table's stream (logic.notify).
    queue, job_type_name = job.queue, job.type
    if current_trace_id() is None:
        bind_trace_id(job.trace_id)  # a message sent without its trace: the job's own
    bind_attempt(job.attempt)
    logger.info(
        "job started",
        extra={
            "attempt": job.attempt,
            "job_type": job.type,
            # The attempt as OpenTelemetry's messaging conventions name a consumer's span.
            "span_name": f"process {queue}",
            "messaging.system": "aws_sqs",
            "messaging.operation.type": "process",
            "messaging.operation.name": "process",
            "messaging.destination.name": queue,
            "messaging.message.id": delivery.message_id,
        },
    )

    try:
        result = _run(job, job_type, ports, remaining_ms)
    except PermanentError as error:
        return _fail(job, f"permanent error: {_describe(error)}", ports, policy, remaining_ms, attempt_error(error))
    except (Exception, JobTimeout) as error:  # every other error is retryable by contract
        if isinstance(error, JobTimeout):
            ports.metrics.count("JobsTimedOut", queue=queue, job_type=job_type_name)
        detail = attempt_error(error)
        if job.attempt >= job.max_attempts:
            reason = f"attempts exhausted ({job.attempt}): {_describe(error)}"
            return _fail(job, reason, ports, policy, remaining_ms, detail)
        return _retry(delivery, job, job_type, _describe(error), ports, policy, remaining_ms, detail)

    finished = ports.clock.now()
    result_size = len(json.dumps(result, default=str).encode())
    if result_size > MAX_RESULT_BYTES:
        reason = f"result is {result_size} bytes; the limit is {MAX_RESULT_BYTES} bytes"
        return _fail(job, reason, ports, policy, remaining_ms)
    # A job with follow-ups (a chain's next job) stays in the sweep index until they ran (logic/followups.py).
    followup_at = finished + FOLLOWUP_GRACE if followups_due(job, JobStatus.SUCCEEDED) else None
    next_job_id = (job.next_job_id or new_job_id(finished)) if followup_at is not None and job.then else None
    try:
        _write_outcome(
            lambda: ports.store.record_success(
                job,
                result=result,
                now=finished,
                expires_at=finished + policy.retention,
                followup_at=followup_at,
                next_job_id=next_job_id,
            ),
            job,
            ports,
            policy,
            remaining_ms,
        )
    except JobConflictError:
        logger.warning("a newer attempt owns this job; this attempt's result is discarded")
        return True
    logger.info("job succeeded", extra={"attempt": job.attempt, **_attempt_facts(job, finished)})
    if followup_at is not None or job.has_followups:
        succeeded = job.replace(
            status=JobStatus.SUCCEEDED,
            result=json.loads(json.dumps(result, default=str)),
            finished_at=finished,
            updated_at=finished,
            lease_until=None,
            sweep_at=followup_at if followup_at is not None else job.followup_sweep_at(finished),
            next_job_id=next_job_id,
        )
        settle(succeeded, ports.submit_ports(), now=finished)
    return True


def _after_final(job: Job, ports: WorkerPorts) -> None:
    """A job with follow-ups was written final: run them and clear its sweep time. An error leaves them to the
    sweeper (the job stays in the sweep index), never to the job's message."""
    if not job.has_followups:
        return
    from offpath.logic.followups import finish_followups

    try:
        finish_followups(job, ports.as_ports())
    except Exception:
        logger.exception("follow-ups failed; the sweeper runs them")


def _claim(
    message: JobMessage, ports: WorkerPorts, now: datetime, lease_until: datetime, sweep_at: datetime | None
) -> Job:
    return ports.store.claim(message.job_id, tenant=message.tenant, now=now, lease_until=lease_until, sweep_at=sweep_at)


def _not_written(delivery: Delivery, ports: WorkerPorts, policy: WorkerPolicy, now: datetime) -> bool:
    """A message whose job does not exist. Sent less than `unwritten_bound` ago, its job may still be
    being written (the api sends first): it goes back, first briefly, then until the bound has passed, so
    it is received at most twice before the bound (maxReceiveCount is at least 4: max_attempts + 3). After
    the bound, or when the record does not say when it was sent: dropped (never accepted, or expired)."""
    # A sent time ahead of this clock (skew) counts as just sent.
    waited = max(timedelta(0), now - delivery.sent_at) if delivery.sent_at is not None else None
    if waited is None or waited >= policy.unwritten_bound:
        logger.warning("message for a job that does not exist (expired or never written); dropped")
        ports.metrics.count("MessagesUnwritten", queue=policy.queue, job_type=UNKNOWN)
        return True
    left_s = math.ceil((policy.unwritten_bound - waited).total_seconds())
    wait_s = min(left_s, UNWRITTEN_FIRST_RETRY_S) if delivery.receive_count == 1 else left_s
    logger.info("message for a job not written yet; it goes back", extra={"retry_in_s": wait_s})
    ports.queue.change_visibility(policy.queue, delivery.receipt_handle, wait_s)
    return False


def _redrive_and_claim(
    message: JobMessage,
    ports: WorkerPorts,
    policy: WorkerPolicy,
    now: datetime,
    lease_until: datetime,
    sweep_at: datetime | None,
) -> Job:
    """A redriven message for a FAILED job: a fresh attempt budget (one conditional write, so a
    redrive resets the job once), then the usual claim."""
    reset = ports.store.reset_for_redrive(
        message.job_id, tenant=message.tenant, now=now, sweep_at=now + policy.sweep_grace
    )
    ports.metrics.count("JobsRedriven", queue=reset.queue, job_type=reset.type)
    logger.info("redriven job reset to QUEUED (redrive %d)", reset.redrives)
    return _claim(message, ports, now, lease_until, sweep_at)


def _run(job: Job, job_type: JobType, ports: WorkerPorts, remaining_ms: Callable[[], int]) -> Any:
    from pydantic import ValidationError  # loaded with the payload model's module already (logic/submit.py)

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
        batches=_job_batches(ports) if ports.batches is not None else None,
        children=_Children(ports),
    )
    started = ports.clock.now()
    result = run_with_timeout(lambda: job_type.function(payload, context), job_type.timeout_s)
    if ports.clock.now() - started > timedelta(seconds=job_type.timeout_s):
        # Returned after its deadline (it caught the timeout and carried on): it timed out all the same.
        raise JobTimeout(job_type.timeout_s)
    return result


def _job_batches(ports: WorkerPorts) -> BatchGateway:
    from offpath.logic.batches import JobBatches

    return JobBatches(ports.as_ports())


class _Children:
    """The job's submit port (`ctx.submit`), logic/children.py's: imported at a job's first submit, not at the
    worker's init (tests/unit/test_cold_imports.py)."""

    def __init__(self, ports: WorkerPorts) -> None:
        self._ports = ports

    def submit_child(self, parent: Job, job_type: str, payload: dict[str, Any], *, key: str) -> Job:
        from offpath.logic.children import ChildSubmitter

        return ChildSubmitter(self._ports.submit_ports()).submit_child(parent, job_type, payload, key=key)


def _write_outcome(
    write: Callable[[], None], job: Job, ports: WorkerPorts, policy: WorkerPolicy, remaining_ms: Callable[[], int]
) -> None:
    """An attempt's outcome write, retried through a store outage until shortly before the invocation
    ends, which is inside the attempt's lease: a finished attempt is recorded unless the store stayed
    unavailable for all of that time. Conflicts are not retried (a newer attempt owns the job)."""
    deadline = ports.clock.now() + timedelta(milliseconds=remaining_ms() - policy.finish_reserve_ms)
    retries = 0
    while True:
        try:
            write()
            return
        except StoreUnavailableError:
            retries += 1
            delay_s = OUTCOME_BACKOFF.delay(retries, ports.rng)
            if ports.clock.now() + timedelta(seconds=delay_s) >= deadline:
                logger.error("outcome write failed %d times; giving up before the invocation ends", retries)
                raise
            ports.metrics.count("OutcomeWriteRetries", queue=job.queue, job_type=job.type)
            logger.warning("outcome write failed; retrying", extra={"retry": retries, "retry_in_s": round(delay_s, 3)})
            ports.sleep(delay_s)


def _retry(
    delivery: Delivery,
    job: Job,
    job_type: JobType,
    error: str,
    ports: WorkerPorts,
    policy: WorkerPolicy,
    remaining_ms: Callable[[], int],
    detail: AttemptError | None = None,
) -> bool:
    delay_s = round(job_type.backoff.delay(job.attempt, ports.rng))
    now = ports.clock.now()
    try:
        _write_outcome(
            lambda: ports.store.record_retry(
                job, error=error, now=now, next_attempt_at=now + timedelta(seconds=delay_s), detail=detail
            ),
            job,
            ports,
            policy,
            remaining_ms,
        )
    except JobConflictError:
        logger.warning("a newer attempt owns this job; this attempt's failure is not recorded")
        return True
    ports.queue.change_visibility(job.queue, delivery.receipt_handle, min(MAX_VISIBILITY_S, delay_s))
    logger.warning(
        "job failed; retrying",
        extra={
            "attempt": job.attempt,
            "retry_in_s": delay_s,
            "error": error,
            **_attempt_facts(job, now),
            **_traceback_of(detail),
        },
    )
    return False


def _fail(
    job: Job,
    reason: str,
    ports: WorkerPorts,
    policy: WorkerPolicy,
    remaining_ms: Callable[[], int],
    detail: AttemptError | None = None,
) -> bool:
    """The DLQ copy goes first: if the status write then fails, the message returns and the job is
    failed again (a second DLQ copy is harmless); the other order could lose the DLQ copy."""
    ports.queue.send_to_dlq(job.queue, JobMessage.of(job), reason=reason)
    now = ports.clock.now()
    try:
        _write_outcome(
            lambda: ports.store.record_failure(
                job, error=reason, now=now, expires_at=now + policy.retention, detail=detail
            ),
            job,
            ports,
            policy,
            remaining_ms,
        )
    except JobConflictError:
        logger.warning("a newer attempt owns this job; this attempt's failure is not recorded")
        return True
    logger.error(
        "job failed",
        extra={"attempt": job.attempt, "error": reason, **_attempt_facts(job, now), **_traceback_of(detail)},
    )
    _after_final(job.replace(status=JobStatus.FAILED, sweep_at=job.followup_sweep_at(now)), ports)
    return True


def _not_claimed(
    delivery: Delivery,
    job: Job,
    ports: WorkerPorts,
    policy: WorkerPolicy,
    now: datetime,
    job_type: JobType | None = None,
) -> bool:
    if job.status.is_final or job.status is JobStatus.SCHEDULED:
        ports.metrics.count("DuplicateDeliveries", queue=job.queue, job_type=job.type)
        logger.info("delivery for a %s job; acknowledged without running", job.status.value)
        if job.cancel_reason is not None:
            name_survivor(job, ports.store, ports.metrics, now=now)  # a superseded job's own time came
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
        if job_type is not None:
            release_slot(job, job_type, ports)  # the dead attempt's slot
        logger.error("job failed: its last attempt's lease expired", extra={"job_type": job.type})
        _after_final(job.replace(status=JobStatus.FAILED, sweep_at=job.followup_sweep_at(now)), ports)
        return True
    # Not claimable for a reason that may pass (for example RETRYING with its delay still running
    # after a duplicate delivery): look again later.
    return False


def _describe(error: BaseException) -> str:
    text = str(error) if isinstance(error, OffpathError | JobTimeout) else f"{type(error).__name__}: {error}"
    return text[:MAX_ERROR_LENGTH]


def attempt_error(error: BaseException) -> AttemptError:
    """What ended an attempt: the exception's class name, its message as the job author wrote it (the
    record cuts it to ATTEMPT_ERROR_CHARS) and the job code's frames (see `job_traceback`)."""
    return AttemptError(type=type(error).__name__, message=str(error), traceback=job_traceback(error))


def job_traceback(error: BaseException) -> str | None:
    """The job code's frames of an error's traceback, innermost last, one `path:line in function` a line
    (paths relative to the functions' root): the frames inside offpath's machinery (the worker, the timeout,
    everything in the package but its job types' folder) are cut away, then the last TRACEBACK_FRAMES kept, then
    the oldest dropped until the text fits TRACEBACK_BYTES. Frames are read without their locals
    (`capture_locals=False`) or source lines, so no payload value is in it; the exception's own line is not
    either (the record keeps its type and message apart). None when no frame of the job's code is left."""
    import traceback  # only on the failure path (logging has loaded it: no import at init)

    walked = traceback.walk_tb(error.__traceback__)
    frames = traceback.StackSummary.extract(walked, capture_locals=False, lookup_lines=False)
    lines = [_frame_line(frame) for frame in frames if _is_job_code(frame.filename)][-TRACEBACK_FRAMES:]
    while len(lines) > 1 and len("".join(lines).encode()) > TRACEBACK_BYTES:
        lines.pop(0)
    text = "".join(lines)
    return text.encode()[-TRACEBACK_BYTES:].decode(errors="ignore") or None


def _is_job_code(filename: str) -> bool:
    path = _path_of(filename)
    return not path.startswith(_MACHINERY) or path.startswith(_JOB_CODE)


def _path_of(filename: str) -> str:
    return filename if filename.startswith("<") else os.path.abspath(filename)


def _frame_line(frame: Any) -> str:
    path = _path_of(frame.filename)
    shown = path[len(_FUNCTIONS_ROOT) :] if path.startswith(_FUNCTIONS_ROOT) else path
    return f"{shown}:{frame.lineno} in {frame.name}\n"


def _attempt_facts(job: Job, ended: datetime) -> dict[str, Any]:
    """What an attempt's end line says beside the job's id: its job type and how long it ran (`duration_ms`, from
    the claim), for the saved Logs Insights queries (infra/log_queries.py)."""
    began = job.attempt_started_at or job.started_at
    facts: dict[str, Any] = {"job_type": job.type}
    if began is not None:
        facts["duration_ms"] = round((ended - began).total_seconds() * 1000, 1)
    return facts


def _traceback_of(detail: AttemptError | None) -> dict[str, str]:
    """A log line's `traceback` field (left out when there is none)."""
    return {"traceback": detail.traceback} if detail is not None and detail.traceback else {}
