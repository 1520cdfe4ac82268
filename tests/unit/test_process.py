"""The worker's logic for one record: claim, run, record the outcome, and say what happens to the message."""

from __future__ import annotations

import dataclasses
import inspect
import io
import json
import logging
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest

from offpath.domain.backoff import Backoff
from offpath.domain.errors import PermanentError, StoreUnavailableError
from offpath.domain.job import Job, JobStatus
from offpath.domain.ports import Ports
from offpath.domain.registry import JobType, Registry
from offpath.logic.process import (
    MAX_RESULT_BYTES,
    OUTCOME_BACKOFF,
    TRACEBACK_BYTES,
    TRACEBACK_FRAMES,
    Delivery,
    WorkerPolicy,
    WorkerPorts,
    job_traceback,
    process_batch,
    process_record,
)
from offpath.logic.sweep import SweepPolicy, sweep
from offpath.observability import JsonFormatter
from offpath_tools.clocks import ManualClock
from offpath_tools.fakes import (
    SCRIPTED_MAX_ATTEMPTS,
    SCRIPTED_TIMEOUT_S,
    SCRIPTED_TYPE,
    STRICT_TYPE,
    AnyPayload,
    DeadLetter,
    InMemoryJobQueue,
    InMemoryJobStore,
    RecordingMetrics,
    ScriptedJob,
    VisibilityChange,
)
from tests.unit.conftest import delivery_of, fails, submitted, unbounded


def failed_for_good(ports: Ports, worker_ports: WorkerPorts, policy: WorkerPolicy, scripted: ScriptedJob) -> Job:
    """A job whose first attempt failed with a PermanentError: FAILED, its message acknowledged."""
    scripted.action = fails(PermanentError("bad input"))
    job = submitted(ports)
    run(delivery_of(job), worker_ports, policy)
    return job


def run(delivery: Delivery, worker_ports: WorkerPorts, policy: WorkerPolicy) -> bool:
    return process_record(delivery, worker_ports, policy, unbounded)


def stored(store: InMemoryJobStore, job: Job) -> Job:
    current = store.get(job.job_id, tenant=job.tenant)
    assert current is not None
    return current


def another_worker_claims(store: InMemoryJobStore, job: Job, clock: ManualClock, lease_s: float) -> Job:
    """Another worker takes the job now, with a lease of `lease_s` seconds."""
    now = clock.now()
    return store.claim(job.job_id, tenant=job.tenant, now=now, lease_until=now + timedelta(seconds=lease_s))


def lease_length_s(worker_ports: WorkerPorts, policy: WorkerPolicy) -> float:
    """The lease a claim takes in an invocation with all its time left: the worker function's timeout
    (from the registry) plus the lease margin."""
    return worker_ports.registry.worker_timeout_s(policy.queue) + policy.lease_margin.total_seconds()


class Invocation:
    """A Lambda invocation of `timeout_s`, its remaining time counted on the test's clock."""

    def __init__(self, clock: ManualClock, timeout_s: float) -> None:
        self.clock = clock
        self.ends: datetime = clock.now() + timedelta(seconds=timeout_s)

    def remaining_ms(self) -> int:
        return max(0, int((self.ends - self.clock.now()).total_seconds() * 1000))


SLOW_TYPE = "test.slow"
OUTCOME_BACKOFF_CAP_MS = OUTCOME_BACKOFF.cap_s * 1000


def add_slow_type(registry: Registry, scripted: ScriptedJob, timeout_s: int) -> JobType:
    """A job type on the default queue, slower than any other there."""
    return registry.add_job_type(
        JobType(
            name=SLOW_TYPE,
            function=scripted,
            payload_model=AnyPayload,
            queue="default",
            max_attempts=3,
            timeout_s=timeout_s,
            backoff=Backoff(),
        )
    )


@pytest.fixture
def worker_log() -> Iterator[io.StringIO]:
    """The worker's log lines, as JSON."""
    lines = io.StringIO()
    handler = logging.StreamHandler(lines)
    handler.setFormatter(JsonFormatter("worker"))
    worker_logger = logging.getLogger("offpath.worker")
    worker_logger.addHandler(handler)
    try:
        yield lines
    finally:
        worker_logger.removeHandler(handler)


# -- outcomes -----------------------------------------------------------------------------------


def test_a_successful_job_is_acked_and_stores_its_result(
    ports: Ports, worker_ports: WorkerPorts, policy: WorkerPolicy, store: InMemoryJobStore, metrics: RecordingMetrics
) -> None:
    job = submitted(ports, payload={"n": 1})

    assert run(delivery_of(job), worker_ports, policy) is True

    done = stored(store, job)
    assert (done.status, done.attempt, done.result) == (JobStatus.SUCCEEDED, 1, {"done": True})
    # The lifecycle counts come from the table's stream (the notifier), not from the worker's hot path.
    assert "JobsStarted" not in metrics.counts and "JobsSucceeded" not in metrics.counts


def test_a_failed_attempt_stays_on_the_queue_for_the_backoff_delay(
    ports: Ports,
    worker_ports: WorkerPorts,
    policy: WorkerPolicy,
    store: InMemoryJobStore,
    queue: InMemoryJobQueue,
    scripted: ScriptedJob,
    clock: ManualClock,
) -> None:
    scripted.action = fails(RuntimeError("boom"))
    job = submitted(ports)

    assert run(delivery_of(job), worker_ports, policy) is False

    waiting = stored(store, job)
    assert (waiting.status, waiting.error) == (JobStatus.RETRYING, "RuntimeError: boom")
    assert waiting.next_attempt_at == clock.now() + timedelta(seconds=2)
    assert queue.visibility_changes == [VisibilityChange("default", "rh-m-1", 2)]


def test_each_failed_attempt_waits_up_to_a_larger_delay(
    ports: Ports, worker_ports: WorkerPorts, policy: WorkerPolicy, queue: InMemoryJobQueue, scripted: ScriptedJob
) -> None:
    scripted.action = fails(RuntimeError("boom"))
    job = submitted(ports)

    for _ in range(SCRIPTED_MAX_ATTEMPTS - 1):
        run(delivery_of(job), worker_ports, policy)

    assert [c.timeout_s for c in queue.visibility_changes] == [2, 4]


def test_the_last_failed_attempt_fails_the_job_into_the_dlq(
    ports: Ports,
    worker_ports: WorkerPorts,
    policy: WorkerPolicy,
    store: InMemoryJobStore,
    queue: InMemoryJobQueue,
    scripted: ScriptedJob,
) -> None:
    scripted.action = fails(RuntimeError("boom"))
    job = submitted(ports)

    acks = [run(delivery_of(job), worker_ports, policy) for _ in range(SCRIPTED_MAX_ATTEMPTS)]

    assert acks == [False, False, True]
    failed = stored(store, job)
    reason = "attempts exhausted (3): RuntimeError: boom"
    assert (failed.status, failed.attempt, failed.error) == (JobStatus.FAILED, 3, reason)
    assert [(d.message.job_id, d.reason) for d in queue.dead_letters] == [(job.job_id, reason)]


def test_a_permanent_error_fails_the_job_at_once_into_the_dlq(
    ports: Ports,
    worker_ports: WorkerPorts,
    policy: WorkerPolicy,
    store: InMemoryJobStore,
    queue: InMemoryJobQueue,
    scripted: ScriptedJob,
) -> None:
    scripted.action = fails(PermanentError("bad input"))
    job = submitted(ports)

    assert run(delivery_of(job), worker_ports, policy) is True

    failed = stored(store, job)
    assert (failed.status, failed.attempt, failed.error) == (JobStatus.FAILED, 1, "permanent error: bad input")
    assert queue.visibility_changes == []
    assert queue.dead_letters == [DeadLetter("default", queue.dead_letters[0].message, "permanent error: bad input")]


def test_a_stored_payload_that_no_longer_fits_its_model_fails_permanently(
    ports: Ports, worker_ports: WorkerPorts, policy: WorkerPolicy, store: InMemoryJobStore
) -> None:
    job = store.put(submitted(ports, job_type=STRICT_TYPE, payload={"name": "ok"}).replace(payload={"name": 5}))

    assert run(delivery_of(job), worker_ports, policy) is True

    failed = stored(store, job)
    assert failed.status is JobStatus.FAILED
    assert failed.error is not None and "no longer matches" in failed.error


# -- deliveries that do not run the job ---------------------------------------------------------


def test_a_duplicate_delivery_of_a_finished_job_is_acked_without_running(
    ports: Ports, worker_ports: WorkerPorts, policy: WorkerPolicy, scripted: ScriptedJob, metrics: RecordingMetrics
) -> None:
    job = submitted(ports)
    run(delivery_of(job), worker_ports, policy)

    assert run(delivery_of(job, "m-2"), worker_ports, policy) is True

    assert scripted.runs_of(job.job_id) == 1
    assert metrics.dimensioned[("DuplicateDeliveries", "default", SCRIPTED_TYPE)] == 1


def test_a_delivery_while_another_worker_holds_the_lease_waits_until_the_lease_ends(
    ports: Ports,
    worker_ports: WorkerPorts,
    policy: WorkerPolicy,
    store: InMemoryJobStore,
    queue: InMemoryJobQueue,
    scripted: ScriptedJob,
    clock: ManualClock,
    metrics: RecordingMetrics,
) -> None:
    job = submitted(ports)
    another_worker_claims(store, job, clock, lease_s=60)

    assert run(delivery_of(job), worker_ports, policy) is False

    assert queue.visibility_changes == [VisibilityChange("default", "rh-m-1", 61)]
    assert scripted.calls == []
    assert stored(store, job).attempt == 1
    assert metrics.dimensioned == {("DuplicateDeliveries", "default", SCRIPTED_TYPE): 1}


def test_an_expired_lease_with_attempts_left_is_taken_over_by_the_next_attempt(
    ports: Ports,
    worker_ports: WorkerPorts,
    policy: WorkerPolicy,
    store: InMemoryJobStore,
    scripted: ScriptedJob,
    clock: ManualClock,
) -> None:
    job = submitted(ports)
    another_worker_claims(store, job, clock, lease_s=0)
    clock.advance(1)

    assert run(delivery_of(job), worker_ports, policy) is True

    assert scripted.calls == [(job.job_id, 2)]
    assert stored(store, job).status is JobStatus.SUCCEEDED


def test_an_expired_lease_on_the_last_attempt_fails_the_job_into_the_dlq(
    ports: Ports,
    worker_ports: WorkerPorts,
    policy: WorkerPolicy,
    store: InMemoryJobStore,
    queue: InMemoryJobQueue,
    scripted: ScriptedJob,
    clock: ManualClock,
) -> None:
    job = submitted(ports)
    store.put(job.replace(status=JobStatus.RUNNING, attempt=3, lease_until=clock.now() - timedelta(seconds=1)))

    assert run(delivery_of(job), worker_ports, policy) is True

    failed = stored(store, job)
    assert (failed.status, failed.error) == (JobStatus.FAILED, "lease expired")
    assert [d.reason for d in queue.dead_letters] == ["lease expired"]
    assert scripted.calls == []


def test_a_record_without_time_to_finish_goes_back_at_once_unclaimed(
    ports: Ports,
    worker_ports: WorkerPorts,
    policy: WorkerPolicy,
    store: InMemoryJobStore,
    queue: InMemoryJobQueue,
    scripted: ScriptedJob,
    metrics: RecordingMetrics,
) -> None:
    job = submitted(ports)
    store.writes.clear()
    almost_enough = SCRIPTED_TIMEOUT_S * 1000 + policy.start_margin_ms - 1

    assert process_record(delivery_of(job), worker_ports, policy, lambda: almost_enough) is False

    # No write: the job was not claimed, so no attempt is spent; visible again at once, not after its timeout.
    assert store.writes == []
    assert (stored(store, job).status, stored(store, job).attempt) == (JobStatus.QUEUED, 0)
    assert queue.visibility_changes == [VisibilityChange("default", "rh-m-1", 0)]
    assert (queue.dead_letters, scripted.calls) == ([], [])
    assert metrics.counts["RecordsReturnedUnrun"] == 1


def test_a_record_with_just_enough_time_is_started(
    ports: Ports, worker_ports: WorkerPorts, policy: WorkerPolicy, scripted: ScriptedJob
) -> None:
    job = submitted(ports)
    enough = SCRIPTED_TIMEOUT_S * 1000 + policy.start_margin_ms

    assert process_record(delivery_of(job), worker_ports, policy, lambda: enough) is True

    assert len(scripted.calls) == 1


@pytest.mark.parametrize("body", ["not json", "[]", "null", '{"job_id": "x"}'])
def test_a_message_that_is_not_a_job_message_stays_for_the_redrive_policy(
    worker_ports: WorkerPorts, policy: WorkerPolicy, store: InMemoryJobStore, body: str
) -> None:
    assert run(Delivery("m-1", "rh-1", body), worker_ports, policy) is False

    assert store.writes == []


def test_a_message_for_a_job_type_this_deployment_lacks_stays_on_the_queue(
    ports: Ports, worker_ports: WorkerPorts, policy: WorkerPolicy
) -> None:
    job = submitted(ports).replace(type="removed.type")

    assert run(delivery_of(job), worker_ports, policy) is False


def test_a_message_for_a_job_that_does_not_exist_is_dropped(
    ports: Ports, worker_ports: WorkerPorts, policy: WorkerPolicy, store: InMemoryJobStore
) -> None:
    job = submitted(ports).replace(job_id="f" * 32)

    assert run(delivery_of(job), worker_ports, policy) is True


def test_a_message_naming_another_tenant_is_dropped_without_running(
    ports: Ports, worker_ports: WorkerPorts, policy: WorkerPolicy, scripted: ScriptedJob
) -> None:
    job = submitted(ports)

    assert run(delivery_of(job.replace(tenant="tenant-b")), worker_ports, policy) is True

    assert scripted.calls == []


# -- the store or a newer attempt in the way ----------------------------------------------------


def test_a_store_outage_at_the_claim_leaves_the_message_for_later(
    ports: Ports, worker_ports: WorkerPorts, policy: WorkerPolicy, store: InMemoryJobStore, scripted: ScriptedJob
) -> None:
    job = submitted(ports)
    store.fail_next("claim", StoreUnavailableError("DynamoDB ThrottlingException"))

    assert run(delivery_of(job), worker_ports, policy) is False

    assert scripted.calls == []
    assert stored(store, job).status is JobStatus.QUEUED


def test_a_result_written_after_a_newer_attempt_took_over_is_discarded(
    ports: Ports,
    worker_ports: WorkerPorts,
    policy: WorkerPolicy,
    store: InMemoryJobStore,
    scripted: ScriptedJob,
    clock: ManualClock,
) -> None:
    job = submitted(ports)

    def slow_first_attempt(payload: Any, ctx: Any) -> Any:
        # While this attempt runs, its lease expires and another worker runs attempt 2 to the end.
        clock.advance(lease_length_s(worker_ports, policy) + 1)
        newer = another_worker_claims(store, job, clock, lease_s=60)
        store.record_success(newer, result="attempt 2", now=clock.now(), expires_at=clock.now())
        return "attempt 1"

    scripted.action = slow_first_attempt

    assert run(delivery_of(job), worker_ports, policy) is True

    final = stored(store, job)
    assert (final.status, final.attempt, final.result) == (JobStatus.SUCCEEDED, 2, "attempt 2")


def test_a_failure_reported_after_a_newer_attempt_took_over_changes_nothing(
    ports: Ports,
    worker_ports: WorkerPorts,
    policy: WorkerPolicy,
    store: InMemoryJobStore,
    queue: InMemoryJobQueue,
    scripted: ScriptedJob,
    clock: ManualClock,
) -> None:
    job = submitted(ports)

    def overtaken(payload: Any, ctx: Any) -> Any:
        clock.advance(lease_length_s(worker_ports, policy) + 1)
        another_worker_claims(store, job, clock, lease_s=3600)
        raise RuntimeError("late")

    scripted.action = overtaken

    assert run(delivery_of(job), worker_ports, policy) is True

    assert (stored(store, job).status, stored(store, job).attempt) == (JobStatus.RUNNING, 2)
    assert queue.visibility_changes == []


# -- redrive and batches ------------------------------------------------------------------------


def test_a_redriven_message_for_a_failed_job_runs_it_with_a_fresh_budget(
    ports: Ports, worker_ports: WorkerPorts, policy: WorkerPolicy, store: InMemoryJobStore, scripted: ScriptedJob
) -> None:
    job = failed_for_good(ports, worker_ports, policy, scripted)
    scripted.action = lambda payload, ctx: "fixed"

    redriven = Delivery("m-2", "rh-m-2", delivery_of(job).body, redriven=True)
    assert run(redriven, worker_ports, policy) is True

    final = stored(store, job)
    assert (final.status, final.attempt, final.redrives, final.result) == (JobStatus.SUCCEEDED, 1, 1, "fixed")


def test_a_plain_duplicate_of_a_failed_jobs_message_does_not_run_it_again(
    ports: Ports, worker_ports: WorkerPorts, policy: WorkerPolicy, scripted: ScriptedJob
) -> None:
    job = failed_for_good(ports, worker_ports, policy, scripted)

    assert run(delivery_of(job, "m-2"), worker_ports, policy) is True

    assert len(scripted.calls) == 1


def test_a_batch_reports_only_the_records_that_stay_on_the_queue(
    ports: Ports, worker_ports: WorkerPorts, policy: WorkerPolicy
) -> None:
    good = [submitted(ports, payload={"n": i}) for i in range(3)]
    deliveries = [
        delivery_of(good[0], "m-0"),
        Delivery("m-bad", "rh-bad", "garbage"),
        delivery_of(good[1], "m-1"),
        delivery_of(good[2], "m-2"),
    ]

    assert process_batch(deliveries, worker_ports, policy, unbounded) == ["m-bad"]


# -- one record never fails the batch (TESTPLAN 31) ---------------------------------------------


def test_a_record_whose_job_cannot_be_read_fails_alone_and_the_batch_goes_on(
    ports: Ports,
    worker_ports: WorkerPorts,
    policy: WorkerPolicy,
    store: InMemoryJobStore,
    metrics: RecordingMetrics,
    worker_log: io.StringIO,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    good = [submitted(ports, payload={"n": n}) for n in range(3)]
    unreadable = submitted(ports, payload={"n": "unreadable"}, tenant="tenant-b")
    claim = store.claim

    def claim_that_cannot_parse_one_item(job_id: str, **kwargs: Any) -> Job:
        if job_id == unreadable.job_id:
            raise ValueError("time data '999-01-01T00:00:00.000000Z' does not match format '%Y-%m-%dT%H:%M:%S.%fZ'")
        return claim(job_id, **kwargs)

    monkeypatch.setattr(store, "claim", claim_that_cannot_parse_one_item)
    deliveries = [
        delivery_of(good[0], "m-0"),
        delivery_of(unreadable, "m-unreadable"),
        delivery_of(good[1], "m-1"),
        delivery_of(good[2], "m-2"),
    ]

    assert process_batch(deliveries, worker_ports, policy, unbounded) == ["m-unreadable"]

    assert [stored(store, job).status for job in good] == [JobStatus.SUCCEEDED] * 3
    assert metrics.counts["RecordsFailed"] == 1
    logged = [json.loads(line) for line in worker_log.getvalue().splitlines()]
    failed = [line for line in logged if line["level"] == "ERROR"]
    assert [(line["job_id"], line["message_id"]) for line in failed] == [(unreadable.job_id, "m-unreadable")]
    assert "does not match format" in failed[0]["exception"]


# -- a batch of slow jobs fits its invocation (issue 10, item 7) --------------------------------


def test_a_full_batch_of_the_slowest_job_type_runs_to_the_end_within_the_workers_timeout(
    ports: Ports,
    worker_ports: WorkerPorts,
    policy: WorkerPolicy,
    registry: Registry,
    store: InMemoryJobStore,
    queue: InMemoryJobQueue,
    scripted: ScriptedJob,
    clock: ManualClock,
) -> None:
    slow = add_slow_type(registry, scripted, timeout_s=120)
    # The batch reaches the worker a second into its invocation (a cold start, the handler's imports).
    invocation = Invocation(clock, registry.worker_timeout_s("default") - 1)

    def uses_its_whole_timeout(payload: Any, ctx: Any) -> str:
        clock.advance(slow.timeout_s)
        return "done"

    scripted.action = uses_its_whole_timeout
    jobs = [submitted(ports, job_type=SLOW_TYPE, payload={"n": n}) for n in range(registry.batch_size("default"))]
    deliveries = [delivery_of(job, f"m-{n}") for n, job in enumerate(jobs)]

    assert process_batch(deliveries, worker_ports, policy, invocation.remaining_ms) == []

    assert [stored(store, job).status for job in jobs] == [JobStatus.SUCCEEDED] * len(jobs)
    assert queue.visibility_changes == []
    assert invocation.remaining_ms() > 0


def test_records_a_batch_has_no_time_for_go_back_at_once_without_spending_an_attempt(
    ports: Ports,
    worker_ports: WorkerPorts,
    policy: WorkerPolicy,
    registry: Registry,
    store: InMemoryJobStore,
    queue: InMemoryJobQueue,
    scripted: ScriptedJob,
    clock: ManualClock,
) -> None:
    slow = add_slow_type(registry, scripted, timeout_s=120)
    # An invocation with time for one slow job only (its batch was slowed down by something else).
    invocation = Invocation(clock, slow.timeout_s + policy.start_margin_ms / 1000)

    def uses_its_whole_timeout(payload: Any, ctx: Any) -> str:
        clock.advance(slow.timeout_s)
        return "done"

    scripted.action = uses_its_whole_timeout
    jobs = [submitted(ports, job_type=SLOW_TYPE, payload={"n": n}) for n in range(3)]
    deliveries = [delivery_of(job, f"m-{n}") for n, job in enumerate(jobs)]

    assert process_batch(deliveries, worker_ports, policy, invocation.remaining_ms) == ["m-1", "m-2"]

    assert [(stored(store, job).status, stored(store, job).attempt) for job in jobs] == [
        (JobStatus.SUCCEEDED, 1),
        (JobStatus.QUEUED, 0),
        (JobStatus.QUEUED, 0),
    ]
    assert queue.visibility_changes == [
        VisibilityChange("default", "rh-m-1", 0),
        VisibilityChange("default", "rh-m-2", 0),
    ]


# -- a timeout cannot be swallowed, and no second claim while the first can run (TESTPLAN 33) ---


def test_no_second_attempt_is_claimed_while_the_first_invocation_can_still_run(
    ports: Ports,
    worker_ports: WorkerPorts,
    policy: WorkerPolicy,
    registry: Registry,
    store: InMemoryJobStore,
    queue: InMemoryJobQueue,
    scripted: ScriptedJob,
    clock: ManualClock,
) -> None:
    job = submitted(ports)
    first = Invocation(clock, registry.worker_timeout_s("default"))
    seen: list[tuple[JobStatus, int]] = []

    def swallows_its_timeout(payload: Any, ctx: Any) -> str:
        if ctx.attempt > 1:
            return "a second attempt ran"
        try:
            # It runs on past its own timeout to the last second of its invocation. Meanwhile, at every
            # second, the sweeper runs and the job's message is delivered again to another worker.
            while first.remaining_ms() > 0:
                clock.advance(1)
                sweep(ports, SweepPolicy())
                process_record(delivery_of(job, "m-again"), worker_ports, policy, unbounded)
                now = stored(store, job)
                seen.append((now.status, now.attempt))
        except Exception:  # what a job function must not do
            pass
        return "the first attempt carried on"

    scripted.action = swallows_its_timeout

    assert process_record(delivery_of(job), worker_ports, policy, first.remaining_ms) is False

    assert len(seen) >= registry.worker_timeout_s("default")
    assert set(seen) == {(JobStatus.RUNNING, 1)}
    assert scripted.calls == [(job.job_id, 1)]
    assert len(queue.sent) == 1  # the submit's own message: nothing was requeued
    # It returned after its deadline: timed out, whatever it returned.
    timed_out = stored(store, job)
    assert (timed_out.status, timed_out.attempt) == (JobStatus.RETRYING, 1)
    assert timed_out.error == f"job ran past its timeout of {SCRIPTED_TIMEOUT_S} s"


def test_a_job_that_returns_after_its_timeout_counts_as_timed_out(
    ports: Ports,
    worker_ports: WorkerPorts,
    policy: WorkerPolicy,
    store: InMemoryJobStore,
    scripted: ScriptedJob,
    clock: ManualClock,
    metrics: RecordingMetrics,
) -> None:
    def overruns(payload: Any, ctx: Any) -> str:
        clock.advance(SCRIPTED_TIMEOUT_S + 1)
        return "late"

    scripted.action = overruns
    job = submitted(ports)

    assert run(delivery_of(job), worker_ports, policy) is False

    late = stored(store, job)
    assert (late.status, late.result, late.error) == (
        JobStatus.RETRYING,
        None,
        f"job ran past its timeout of {SCRIPTED_TIMEOUT_S} s",
    )
    assert metrics.counts["JobsTimedOut"] == 1


def test_the_lease_outlives_the_invocation_that_takes_it(
    ports: Ports,
    worker_ports: WorkerPorts,
    policy: WorkerPolicy,
    store: InMemoryJobStore,
    scripted: ScriptedJob,
    clock: ManualClock,
) -> None:
    job = submitted(ports)
    invocation = Invocation(clock, 100)
    leases: list[datetime | None] = []

    def notes_its_lease(payload: Any, ctx: Any) -> None:
        leases.append(stored(store, job).lease_until)

    scripted.action = notes_its_lease

    process_record(delivery_of(job), worker_ports, policy, invocation.remaining_ms)

    assert leases == [invocation.ends + policy.lease_margin]


# -- outcome writes through a store outage (issue 10, item 8) -----------------------------------


def test_a_success_write_that_meets_a_store_outage_is_retried_until_it_lands(
    ports: Ports,
    worker_ports: WorkerPorts,
    policy: WorkerPolicy,
    store: InMemoryJobStore,
    metrics: RecordingMetrics,
) -> None:
    job = submitted(ports)
    for _ in range(8):
        store.fail_next("record_success", StoreUnavailableError("DynamoDB ServiceUnavailable"))

    assert run(delivery_of(job), worker_ports, policy) is True

    done = stored(store, job)
    assert (done.status, done.result) == (JobStatus.SUCCEEDED, {"done": True})
    assert metrics.counts["OutcomeWriteRetries"] == 8


def test_a_success_on_the_last_attempt_during_a_store_outage_is_never_reported_as_a_failure(
    ports: Ports,
    worker_ports: WorkerPorts,
    policy: WorkerPolicy,
    store: InMemoryJobStore,
    queue: InMemoryJobQueue,
    clock: ManualClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    job = store.put(submitted(ports).replace(attempt=SCRIPTED_MAX_ATTEMPTS - 1))
    outage_ends = clock.now() + timedelta(seconds=30)
    record_success = store.record_success

    def during_the_outage(*args: Any, **kwargs: Any) -> None:
        if clock.now() < outage_ends:
            raise StoreUnavailableError("DynamoDB ServiceUnavailable")
        record_success(*args, **kwargs)

    monkeypatch.setattr(store, "record_success", during_the_outage)

    assert run(delivery_of(job), worker_ports, policy) is True
    clock.advance(lease_length_s(worker_ports, policy) + SweepPolicy().grace.total_seconds() + 1)
    sweep(ports, SweepPolicy())

    done = stored(store, job)
    assert (done.status, done.attempt, done.error) == (JobStatus.SUCCEEDED, SCRIPTED_MAX_ATTEMPTS, None)
    assert queue.dead_letters == []


def test_outcome_write_retries_stop_before_the_invocation_ends_and_inside_the_lease(
    ports: Ports,
    worker_ports: WorkerPorts,
    policy: WorkerPolicy,
    registry: Registry,
    store: InMemoryJobStore,
    clock: ManualClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    job = submitted(ports)
    invocation = Invocation(clock, registry.worker_timeout_s("default"))

    def store_down(*args: Any, **kwargs: Any) -> None:
        raise StoreUnavailableError("DynamoDB ServiceUnavailable")

    monkeypatch.setattr(store, "record_success", store_down)

    assert process_record(delivery_of(job), worker_ports, policy, invocation.remaining_ms) is False

    # It kept trying for nearly all the invocation had left, and stopped in time to return the batch.
    assert 0 < invocation.remaining_ms() <= policy.finish_reserve_ms + OUTCOME_BACKOFF_CAP_MS
    unrecorded = stored(store, job)
    assert unrecorded.status is JobStatus.RUNNING
    assert unrecorded.lease_until is not None and clock.now() < unrecorded.lease_until


# -- where SQS would stop bringing a job back (the api sends before it writes) --------------------


def delivered(job: Job, *, receive_count: int = 1, sent_at: datetime | None = None) -> Delivery:
    return dataclasses.replace(delivery_of(job), receive_count=receive_count, sent_at=sent_at)


def last_receive(worker_ports: WorkerPorts, policy: WorkerPolicy) -> int:
    """The receive count of the last delivery SQS makes before it moves the message to the DLQ."""
    return worker_ports.registry.max_receive_count(policy.queue)


def test_a_message_whose_job_is_not_written_yet_goes_back_briefly_then_until_the_bound(
    ports: Ports, worker_ports: WorkerPorts, policy: WorkerPolicy, queue: InMemoryJobQueue, clock: ManualClock
) -> None:
    unwritten = submitted(ports).replace(job_id="e" * 32)
    sent_at = clock.now()

    first = run(delivered(unwritten, sent_at=sent_at), worker_ports, policy)
    clock.advance(2)
    second = run(delivered(unwritten, receive_count=2, sent_at=sent_at), worker_ports, policy)

    assert (first, second) == (False, False)
    bound_left_s = int(policy.unwritten_bound.total_seconds()) - 2
    assert [v.timeout_s for v in queue.visibility_changes] == [2, bound_left_s]


def test_a_message_whose_job_is_written_while_it_waits_runs_the_job_once(
    ports: Ports,
    worker_ports: WorkerPorts,
    policy: WorkerPolicy,
    store: InMemoryJobStore,
    scripted: ScriptedJob,
    clock: ManualClock,
) -> None:
    job = submitted(ports)
    written = stored(store, job)
    store._jobs.clear()  # as if the api's write had not landed yet
    sent_at = clock.now()

    assert run(delivered(job, sent_at=sent_at), worker_ports, policy) is False
    store.put(written)  # the write lands
    clock.advance(2)

    assert run(delivered(job, receive_count=2, sent_at=sent_at), worker_ports, policy) is True
    assert stored(store, job).status is JobStatus.SUCCEEDED
    assert len(scripted.calls) == 1


def test_a_message_whose_job_was_never_written_is_dropped_once_the_bound_has_passed(
    ports: Ports,
    worker_ports: WorkerPorts,
    policy: WorkerPolicy,
    queue: InMemoryJobQueue,
    metrics: RecordingMetrics,
    clock: ManualClock,
) -> None:
    unwritten = submitted(ports).replace(job_id="e" * 32)
    sent_at = clock.now()
    clock.advance(policy.unwritten_bound.total_seconds())

    assert run(delivered(unwritten, receive_count=3, sent_at=sent_at), worker_ports, policy) is True

    assert queue.visibility_changes == []
    assert metrics.counts["MessagesUnwritten"] == 1


def test_a_claim_before_the_messages_last_receives_writes_no_sweep_time(
    ports: Ports, worker_ports: WorkerPorts, policy: WorkerPolicy, store: InMemoryJobStore, scripted: ScriptedJob
) -> None:
    scripted.action = fails(RuntimeError("transient"))
    job = submitted(ports)

    run(delivered(job, receive_count=last_receive(worker_ports, policy) - 2), worker_ports, policy)

    assert stored(store, job).status is JobStatus.RETRYING
    assert stored(store, job).sweep_at is None  # its message comes back after the backoff


@pytest.mark.parametrize("from_the_end", [0, 1])
def test_a_claim_on_the_messages_last_receives_enters_the_job_in_the_sweep_index(
    ports: Ports,
    worker_ports: WorkerPorts,
    policy: WorkerPolicy,
    store: InMemoryJobStore,
    scripted: ScriptedJob,
    clock: ManualClock,
    from_the_end: int,
) -> None:
    scripted.action = fails(RuntimeError("transient"))
    job = submitted(ports)

    run(delivered(job, receive_count=last_receive(worker_ports, policy) - from_the_end), worker_ports, policy)

    # SQS moves the message to the DLQ rather than deliver it again: the sweeper takes the job on.
    retrying = stored(store, job)
    assert retrying.status is JobStatus.RETRYING
    assert retrying.sweep_at is not None and retrying.sweep_at > clock.now()
    assert retrying.next_attempt_at is not None
    clock.set(max(retrying.sweep_at, retrying.next_attempt_at + SweepPolicy().grace) + timedelta(seconds=1))
    report = sweep(ports, SweepPolicy())
    assert report.resent == 1


def test_a_worker_that_dies_on_the_messages_last_receive_leaves_the_job_to_the_sweeper(
    ports: Ports,
    worker_ports: WorkerPorts,
    policy: WorkerPolicy,
    store: InMemoryJobStore,
    queue: InMemoryJobQueue,
    scripted: ScriptedJob,
    clock: ManualClock,
) -> None:
    class Died(BaseException):
        pass

    def dies(payload: Any, ctx: Any) -> Any:
        raise Died

    scripted.action = dies
    job = submitted(ports)
    queue.sent.clear()

    with pytest.raises(Died):
        run(delivered(job, receive_count=last_receive(worker_ports, policy)), worker_ports, policy)
    held = stored(store, job)
    assert held.status is JobStatus.RUNNING and held.sweep_at is not None
    clock.set(held.sweep_at + timedelta(seconds=1))

    report = sweep(ports, SweepPolicy())

    assert report.requeued == 1
    assert [s.message.job_id for s in queue.sent] == [job.job_id]  # a fresh message, not the one in the DLQ


def test_a_record_without_time_on_its_last_receive_goes_back_as_a_fresh_copy(
    ports: Ports,
    worker_ports: WorkerPorts,
    policy: WorkerPolicy,
    store: InMemoryJobStore,
    queue: InMemoryJobQueue,
    metrics: RecordingMetrics,
) -> None:
    job = submitted(ports)
    queue.sent.clear()
    almost_enough = SCRIPTED_TIMEOUT_S * 1000 + policy.start_margin_ms - 1
    delivery = delivered(job, receive_count=last_receive(worker_ports, policy))

    assert process_record(delivery, worker_ports, policy, lambda: almost_enough) is True

    assert [s.message.job_id for s in queue.sent] == [job.job_id]
    assert queue.visibility_changes == []
    assert metrics.counts["MessagesRenewed"] == 1
    assert stored(store, job).status is JobStatus.QUEUED


def test_a_store_outage_on_the_last_receive_sends_a_fresh_copy_or_leaves_the_message_if_sqs_is_down_too(
    ports: Ports, worker_ports: WorkerPorts, policy: WorkerPolicy, store: InMemoryJobStore, queue: InMemoryJobQueue
) -> None:
    job = submitted(ports)
    queue.sent.clear()
    delivery = delivered(job, receive_count=last_receive(worker_ports, policy))
    store.fail_next("claim", StoreUnavailableError("DynamoDB ThrottlingException"))

    assert run(delivery, worker_ports, policy) is True
    assert [s.message.job_id for s in queue.sent] == [job.job_id]

    store.fail_next("claim", StoreUnavailableError("DynamoDB ThrottlingException"))
    queue.fail_sends(1)
    assert run(delivery, worker_ports, policy) is False


# -- the batch held until the lease ends --------------------------------------------------------


def test_an_invocation_holds_its_messages_until_one_second_after_the_lease_its_claims_take(
    ports: Ports,
    worker_ports: WorkerPorts,
    policy: WorkerPolicy,
    store: InMemoryJobStore,
    queue: InMemoryJobQueue,
    clock: ManualClock,
) -> None:
    jobs = [submitted(ports, idempotency_key=f"k-{n}") for n in range(12)]
    invocation = Invocation(clock, 100)

    failures = process_batch(
        [delivery_of(job, f"m-{n}") for n, job in enumerate(jobs)], worker_ports, policy, invocation.remaining_ms
    )

    lease = invocation.ends + policy.lease_margin
    assert failures == []
    assert {stored(store, job).status for job in jobs} == {JobStatus.SUCCEEDED}
    # One request per 10 messages, every message of the batch, set before the first claim: it comes back
    # one second after the lease ends (the lease every claim of the invocation takes).
    assert queue.visibility_batches == [
        ("default", [f"rh-m-{n}" for n in range(10)], 131),
        ("default", ["rh-m-10", "rh-m-11"], 131),
    ]
    assert clock.now() + timedelta(seconds=131) == lease + timedelta(seconds=1)


def test_a_record_that_goes_back_with_a_time_of_its_own_sets_it_after_the_hold(
    ports: Ports,
    worker_ports: WorkerPorts,
    policy: WorkerPolicy,
    queue: InMemoryJobQueue,
    scripted: ScriptedJob,
) -> None:
    job = submitted(ports)
    scripted.action = fails(RuntimeError("try again"))

    assert process_batch([delivery_of(job)], worker_ports, policy, unbounded) == ["m-1"]

    lease_s = worker_ports.registry.worker_timeout_s("default") + policy.lease_margin.total_seconds()
    assert queue.visibility_batches == [("default", ["rh-m-1"], int(lease_s) + 1)]
    # The retry's backoff, set afterwards, is the visibility the message keeps.
    assert [change.receipt_handle for change in queue.visibility_changes] == ["rh-m-1"]
    assert queue.visibility_changes[0].timeout_s < lease_s


def test_a_hold_that_fails_is_counted_and_every_record_still_runs(
    ports: Ports,
    worker_ports: WorkerPorts,
    policy: WorkerPolicy,
    store: InMemoryJobStore,
    queue: InMemoryJobQueue,
    metrics: RecordingMetrics,
) -> None:
    jobs = [submitted(ports, idempotency_key=f"k-{n}") for n in range(3)]
    queue.fail_visibility_batches()

    deliveries = [delivery_of(job, f"m-{n}") for n, job in enumerate(jobs)]

    failures = process_batch(deliveries, worker_ports, policy, unbounded)

    assert failures == []
    assert {stored(store, job).status for job in jobs} == {JobStatus.SUCCEEDED}
    assert queue.visibility_batches == []
    assert metrics.counts["VisibilityHoldsFailed"] == 3


def test_a_hold_that_raises_is_counted_and_every_record_still_runs(
    ports: Ports,
    worker_ports: WorkerPorts,
    policy: WorkerPolicy,
    store: InMemoryJobStore,
    metrics: RecordingMetrics,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    job = submitted(ports)

    def unavailable(queue: str, receipt_handles: Any, timeout_s: int) -> list[str]:
        raise StoreUnavailableError("anything the adapter may raise")

    monkeypatch.setattr(worker_ports.queue, "change_visibility_batch", unavailable)

    assert process_batch([delivery_of(job)], worker_ports, policy, unbounded) == []
    assert stored(store, job).status is JobStatus.SUCCEEDED
    assert metrics.counts["VisibilityHoldsFailed"] == 1


def test_each_attempts_end_line_names_its_job_type_and_how_long_it_ran(
    ports: Ports,
    worker_ports: WorkerPorts,
    policy: WorkerPolicy,
    scripted: ScriptedJob,
    clock: ManualClock,
    worker_log: io.StringIO,
) -> None:
    """The keys the saved Logs Insights queries group by (infra/log_queries.py): job_type and duration_ms."""
    worker_log_level = logging.getLogger("offpath.worker").level
    logging.getLogger("offpath.worker").setLevel(logging.INFO)

    def slow_then(error: Exception | None) -> Any:
        def act(payload: Any, ctx: Any) -> Any:
            clock.advance(1.5)
            if error is not None:
                raise error
            return {"done": True}

        return act

    try:
        for error in (RuntimeError("boom"), PermanentError("bad input"), None):
            scripted.action = slow_then(error)
            run(delivery_of(submitted(ports)), worker_ports, policy)
    finally:
        logging.getLogger("offpath.worker").setLevel(worker_log_level)

    ends = [json.loads(line) for line in worker_log.getvalue().splitlines()]
    ends = [line for line in ends if line["message"] in {"job failed; retrying", "job failed", "job succeeded"}]
    assert [(e["message"], e["level"], e["job_type"], e["duration_ms"]) for e in ends] == [
        ("job failed; retrying", "WARNING", SCRIPTED_TYPE, 1500.0),
        ("job failed", "ERROR", SCRIPTED_TYPE, 1500.0),
        ("job succeeded", "INFO", SCRIPTED_TYPE, 1500.0),
    ]
    assert all({"job_id", "tenant", "attempt"} <= set(e) for e in ends)


# -- what an attempt leaves behind: its log lines, its counts, its record ---------------------------------------------


def lines_of(worker_log: io.StringIO, message: str) -> list[dict[str, Any]]:
    return [line for line in map(json.loads, worker_log.getvalue().splitlines()) if line["message"] == message]


@pytest.fixture
def info_log(worker_log: io.StringIO) -> Iterator[io.StringIO]:
    worker_logger = logging.getLogger("offpath.worker")
    level = worker_logger.level
    worker_logger.setLevel(logging.INFO)
    try:
        yield worker_log
    finally:
        worker_logger.setLevel(level)


def test_an_attempts_start_line_carries_opentelemetrys_messaging_attributes(
    ports: Ports, worker_ports: WorkerPorts, policy: WorkerPolicy, info_log: io.StringIO
) -> None:
    job = submitted(ports)
    run(delivery_of(job, "m-42"), worker_ports, policy)

    [line] = lines_of(info_log, "job started")
    assert {k: line.get(k) for k in ("job_id", "attempt", "job_type", "span_name")} == {
        "job_id": job.job_id,
        "attempt": 1,
        "job_type": SCRIPTED_TYPE,
        "span_name": "process default",
    }
    assert {k: v for k, v in line.items() if k.startswith("messaging.")} == {
        "messaging.system": "aws_sqs",
        "messaging.operation.type": "process",
        "messaging.operation.name": "process",
        "messaging.destination.name": "default",
        "messaging.message.id": "m-42",
    }


def test_a_result_of_exactly_the_limit_is_stored_and_one_byte_more_fails_the_job_saying_its_size(
    ports: Ports, worker_ports: WorkerPorts, policy: WorkerPolicy, store: InMemoryJobStore, scripted: ScriptedJob
) -> None:
    fits = submitted(ports, payload={"n": 1})
    scripted.action = lambda payload, ctx: "x" * (MAX_RESULT_BYTES - 2)  # a JSON string: its quotes count
    assert run(delivery_of(fits), worker_ports, policy) is True
    assert stored(store, fits).status is JobStatus.SUCCEEDED

    too_large = submitted(ports, payload={"n": 2})
    scripted.action = lambda payload, ctx: "x" * (MAX_RESULT_BYTES - 1)
    assert run(delivery_of(too_large), worker_ports, policy) is True
    failed = stored(store, too_large)
    assert (failed.status, failed.error) == (
        JobStatus.FAILED,
        f"result is {MAX_RESULT_BYTES + 1} bytes; the limit is {MAX_RESULT_BYTES} bytes",
    )


def test_a_timed_out_attempt_is_counted_on_its_queue_and_type(
    ports: Ports,
    worker_ports: WorkerPorts,
    policy: WorkerPolicy,
    scripted: ScriptedJob,
    clock: ManualClock,
    metrics: RecordingMetrics,
) -> None:
    scripted.action = lambda payload, ctx: clock.advance(SCRIPTED_TIMEOUT_S + 1)
    run(delivery_of(submitted(ports)), worker_ports, policy)

    assert metrics.dimensioned[("JobsTimedOut", "default", SCRIPTED_TYPE)] == 1


def test_a_failed_job_keeps_what_ended_it_for_the_retention_and_its_line_says_why(
    ports: Ports,
    worker_ports: WorkerPorts,
    policy: WorkerPolicy,
    store: InMemoryJobStore,
    scripted: ScriptedJob,
    clock: ManualClock,
    info_log: io.StringIO,
) -> None:
    job = failed_for_good(ports, worker_ports, policy, scripted)

    failed = stored(store, job)
    assert failed.expires_at == clock.now() + policy.retention
    [record] = failed.attempt_history
    assert (record.error_type, record.error) == ("PermanentError", "bad input")
    assert record.traceback is not None and "in action" in record.traceback
    [line] = lines_of(info_log, "job failed")
    assert (line["attempt"], line["error"], line["traceback"]) == (1, "permanent error: bad input", record.traceback)


def test_a_failure_after_a_newer_attempt_took_over_is_logged_and_its_message_acknowledged(
    ports: Ports,
    worker_ports: WorkerPorts,
    policy: WorkerPolicy,
    store: InMemoryJobStore,
    scripted: ScriptedJob,
    clock: ManualClock,
    info_log: io.StringIO,
) -> None:
    job = submitted(ports)

    def overtaken(payload: Any, ctx: Any) -> Any:
        clock.advance(lease_length_s(worker_ports, policy) + 1)
        another_worker_claims(store, job, clock, lease_s=3600)
        raise PermanentError("late")

    scripted.action = overtaken

    assert run(delivery_of(job), worker_ports, policy) is True
    assert lines_of(info_log, "a newer attempt owns this job; this attempt's failure is not recorded") != []
    assert lines_of(info_log, "job failed") == []


def test_a_duplicate_delivery_is_counted_on_its_queue_and_type_and_says_the_jobs_state(
    ports: Ports, worker_ports: WorkerPorts, policy: WorkerPolicy, metrics: RecordingMetrics, info_log: io.StringIO
) -> None:
    job = submitted(ports)
    run(delivery_of(job), worker_ports, policy)
    run(delivery_of(job, "m-2"), worker_ports, policy)

    assert metrics.dimensioned[("DuplicateDeliveries", "default", SCRIPTED_TYPE)] == 1
    assert lines_of(info_log, "delivery for a SUCCEEDED job; acknowledged without running") != []


def test_an_outcome_write_that_gives_up_says_how_many_times_it_failed(
    ports: Ports,
    worker_ports: WorkerPorts,
    policy: WorkerPolicy,
    registry: Registry,
    store: InMemoryJobStore,
    clock: ManualClock,
    metrics: RecordingMetrics,
    monkeypatch: pytest.MonkeyPatch,
    info_log: io.StringIO,
) -> None:
    job = submitted(ports)
    invocation = Invocation(clock, registry.worker_timeout_s("default"))
    tries: list[int] = []

    def store_down(*args: Any, **kwargs: Any) -> None:
        tries.append(1)
        raise StoreUnavailableError("DynamoDB ServiceUnavailable")

    monkeypatch.setattr(store, "record_success", store_down)
    process_record(delivery_of(job), worker_ports, policy, invocation.remaining_ms)

    [gave_up] = lines_of(info_log, f"outcome write failed {len(tries)} times; giving up before the invocation ends")
    assert gave_up["level"] == "ERROR"
    retries = lines_of(info_log, "outcome write failed; retrying")
    assert [line["retry"] for line in retries] == list(range(1, len(tries)))
    assert metrics.dimensioned[("OutcomeWriteRetries", "default", SCRIPTED_TYPE)] == len(tries) - 1


def nested(depth: int) -> None:
    if depth == 0:
        raise RuntimeError("deep")
    nested(depth - 1)


def test_a_traceback_keeps_the_innermost_job_frames_within_its_bounds_without_the_workers() -> None:
    try:
        nested(9)
    except RuntimeError as error:
        text = job_traceback(error)

    assert text is not None and len(text.encode()) <= TRACEBACK_BYTES
    lines = text.splitlines()
    assert 1 <= len(lines) <= TRACEBACK_FRAMES
    assert all(line.endswith(" in nested") for line in lines)
    first_raise = nested.__code__.co_firstlineno + 2
    assert lines[-1].endswith(f":{first_raise} in nested")  # innermost last
    # As many of the innermost frames as fit: one more would not.
    frame = lines[0] + "\n"
    assert len((frame + text + "\n").encode()) > TRACEBACK_BYTES or len(lines) == TRACEBACK_FRAMES


def test_a_traceback_of_the_workers_own_frames_only_is_none() -> None:
    error = RuntimeError("no frames")
    assert job_traceback(error) is None


# -- records that do not run: what the operator is told and counted --------------------------------------------------


def test_a_message_that_is_not_a_job_message_is_logged_by_its_id_and_counted_under_an_unknown_type(
    worker_ports: WorkerPorts, policy: WorkerPolicy, metrics: RecordingMetrics, info_log: io.StringIO
) -> None:
    run(Delivery("m-9", "rh-9", "not json"), worker_ports, policy)

    [line] = lines_of(info_log, "message is not an offpath job message")
    assert (line["level"], line["message_id"]) == ("ERROR", "m-9")
    assert metrics.dimensioned[("RecordsFailed", "default", "unknown")] == 1


def test_a_record_that_fails_is_logged_as_staying_on_the_queue_and_counted_by_its_type(
    ports: Ports,
    worker_ports: WorkerPorts,
    policy: WorkerPolicy,
    store: InMemoryJobStore,
    metrics: RecordingMetrics,
    info_log: io.StringIO,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    job = submitted(ports)

    def unreadable(job_id: str, **kwargs: Any) -> Job:
        raise ValueError("an item this code cannot read")

    monkeypatch.setattr(store, "claim", unreadable)

    assert process_batch([delivery_of(job, "m-7")], worker_ports, policy, unbounded) == ["m-7"]
    message = "the record failed; it stays on the queue (its redrive policy moves it to the DLQ in the end)"
    [line] = lines_of(info_log, message)
    assert (line["job_id"], line["message_id"]) == (job.job_id, "m-7")
    assert metrics.dimensioned[("RecordsFailed", "default", SCRIPTED_TYPE)] == 1


def test_the_messages_traceparent_names_the_trace_of_every_line_of_the_attempt(
    ports: Ports, worker_ports: WorkerPorts, policy: WorkerPolicy, info_log: io.StringIO
) -> None:
    trace = "4bf92f3577b34da6a3ce929d0e0e4736"
    job = submitted(ports)
    run(dataclasses.replace(delivery_of(job), traceparent=f"00-{trace}-00f067aa0ba902b7-01"), worker_ports, policy)

    lines = [json.loads(line) for line in info_log.getvalue().splitlines()]
    assert lines and {line.get("trace_id") for line in lines} == {trace}


def test_a_message_for_a_job_not_written_yet_is_logged_and_goes_back_with_its_handle(
    ports: Ports, worker_ports: WorkerPorts, policy: WorkerPolicy, queue: InMemoryJobQueue, info_log: io.StringIO
) -> None:
    unwritten = submitted(ports).replace(job_id="e" * 32)
    run(delivered(unwritten, sent_at=worker_ports.clock.now()), worker_ports, policy)

    assert queue.visibility_changes == [VisibilityChange("default", "rh-m-1", 2)]
    [line] = lines_of(info_log, "message for a job not written yet; it goes back")
    assert line["retry_in_s"] == 2


def test_a_message_for_a_job_never_written_is_dropped_logged_and_counted_on_its_queue(
    ports: Ports,
    worker_ports: WorkerPorts,
    policy: WorkerPolicy,
    metrics: RecordingMetrics,
    clock: ManualClock,
    info_log: io.StringIO,
) -> None:
    unwritten = submitted(ports).replace(job_id="e" * 32)
    sent_at = clock.now()
    clock.advance(policy.unwritten_bound.total_seconds())
    run(delivered(unwritten, receive_count=3, sent_at=sent_at), worker_ports, policy)

    [line] = lines_of(info_log, "message for a job that does not exist (expired or never written); dropped")
    assert line["level"] == "WARNING"
    assert metrics.dimensioned[("MessagesUnwritten", "default", "unknown")] == 1


def test_a_fresh_copy_is_sent_on_the_jobs_queue_counted_and_logged_and_a_failed_one_says_so(
    ports: Ports,
    worker_ports: WorkerPorts,
    policy: WorkerPolicy,
    queue: InMemoryJobQueue,
    metrics: RecordingMetrics,
    info_log: io.StringIO,
) -> None:
    job = submitted(ports)
    queue.sent.clear()
    almost_enough = SCRIPTED_TIMEOUT_S * 1000 + policy.start_margin_ms - 1
    delivery = delivered(job, receive_count=last_receive(worker_ports, policy))

    process_record(delivery, worker_ports, policy, lambda: almost_enough)
    assert [(s.queue, s.message.job_id) for s in queue.sent] == [("default", job.job_id)]
    assert metrics.dimensioned[("MessagesRenewed", "default", SCRIPTED_TYPE)] == 1
    assert lines_of(info_log, "message on its last receives went back as a fresh copy") != []

    queue.fail_sends(1)
    process_record(delivery, worker_ports, policy, lambda: almost_enough)
    message = "the fresh copy of a message on its last receives could not be sent; it goes back"
    assert [line["level"] for line in lines_of(info_log, message)] == ["ERROR"]


def test_a_retry_keeps_what_ended_the_attempt_and_its_line_says_when_it_runs_again(
    ports: Ports,
    worker_ports: WorkerPorts,
    policy: WorkerPolicy,
    store: InMemoryJobStore,
    queue: InMemoryJobQueue,
    scripted: ScriptedJob,
    info_log: io.StringIO,
) -> None:
    scripted.action = fails(RuntimeError("transient"))
    job = submitted(ports)
    run(delivery_of(job), worker_ports, policy)

    [record] = stored(store, job).attempt_history
    assert (record.outcome, record.error_type, record.error) == ("RETRYING", "RuntimeError", "transient")
    assert record.traceback is not None and "in action" in record.traceback
    [line] = lines_of(info_log, "job failed; retrying")
    [change] = queue.visibility_changes
    assert (line["attempt"], line["error"], line["retry_in_s"], line["traceback"]) == (
        1,
        "RuntimeError: transient",
        change.timeout_s,
        record.traceback,
    )


def test_a_retry_after_a_newer_attempt_took_over_is_logged_and_changes_nothing(
    ports: Ports,
    worker_ports: WorkerPorts,
    policy: WorkerPolicy,
    store: InMemoryJobStore,
    scripted: ScriptedJob,
    clock: ManualClock,
    info_log: io.StringIO,
) -> None:
    job = submitted(ports)

    def overtaken(payload: Any, ctx: Any) -> Any:
        clock.advance(lease_length_s(worker_ports, policy) + 1)
        another_worker_claims(store, job, clock, lease_s=3600)
        raise RuntimeError("late")

    scripted.action = overtaken
    run(delivery_of(job), worker_ports, policy)

    assert lines_of(info_log, "a newer attempt owns this job; this attempt's failure is not recorded") != []
    assert lines_of(info_log, "job failed; retrying") == []


def test_a_redrive_is_counted_on_its_queue_and_type_and_logged_with_its_number(
    ports: Ports,
    worker_ports: WorkerPorts,
    policy: WorkerPolicy,
    scripted: ScriptedJob,
    metrics: RecordingMetrics,
    info_log: io.StringIO,
) -> None:
    job = failed_for_good(ports, worker_ports, policy, scripted)
    scripted.action = lambda payload, ctx: "fixed"

    run(Delivery("m-2", "rh-m-2", delivery_of(job).body, redriven=True), worker_ports, policy)

    assert metrics.dimensioned[("JobsRedriven", "default", SCRIPTED_TYPE)] == 1
    assert lines_of(info_log, "redriven job reset to QUEUED (redrive 1)") != []


def test_a_hold_that_fails_for_some_messages_says_how_many_and_at_what_visibility(
    ports: Ports, worker_ports: WorkerPorts, policy: WorkerPolicy, queue: InMemoryJobQueue, info_log: io.StringIO
) -> None:
    jobs = [submitted(ports, idempotency_key=f"k-{n}") for n in range(3)]
    queue.fail_visibility_batches()

    process_batch([delivery_of(job, f"m-{n}") for n, job in enumerate(jobs)], worker_ports, policy, unbounded)

    [line] = lines_of(info_log, "3 of the batch's messages keep the queue's visibility timeout (not set to the lease)")
    assert line["level"] == "WARNING" and line["visibility_s"] > 0


def test_a_hold_that_raises_is_logged_with_its_exception(
    ports: Ports,
    worker_ports: WorkerPorts,
    policy: WorkerPolicy,
    monkeypatch: pytest.MonkeyPatch,
    info_log: io.StringIO,
) -> None:
    def unavailable(queue: str, receipt_handles: Any, timeout_s: int) -> list[str]:
        raise StoreUnavailableError("SQS is down")

    monkeypatch.setattr(worker_ports.queue, "change_visibility_batch", unavailable)
    process_batch([delivery_of(submitted(ports))], worker_ports, policy, unbounded)

    [line] = lines_of(info_log, "the batch's visibility could not be set to the lease")
    assert line["level"] == "ERROR" and "SQS is down" in line["exception"]


def test_a_job_types_own_frames_are_kept_relative_to_the_functions_root_and_offpaths_are_not(
    ports: Ports, worker_ports: WorkerPorts, policy: WorkerPolicy, store: InMemoryJobStore
) -> None:
    from offpath.jobs import demo

    job = submitted(ports, job_type="demo.flaky", payload={"fail_first": 1})
    run(delivery_of(job), worker_ports, policy)

    [record] = stored(store, job).attempt_history
    assert record.traceback is not None

    def line_of(function: Any, text: str) -> int:
        lines, first = inspect.getsourcelines(function)
        return first + next(n for n, line in enumerate(lines) if text in line)

    called_at = line_of(demo.flaky, "_flaky_failure(")
    raised_at = line_of(demo._flaky_failure, "raise RuntimeError")
    lines = record.traceback.splitlines()
    assert lines[-2:] == [
        f"offpath/jobs/demo.py:{called_at} in flaky",
        f"offpath/jobs/demo.py:{raised_at} in _flaky_failure",
    ]
    # None of offpath's own frames (the worker that called the job); a frame outside the package, such as a
    # mutation tester's, may come before the job's.
    assert not [line for line in lines if line.startswith("offpath/") and not line.startswith("offpath/jobs/")]


def test_a_message_for_a_job_type_this_deployment_lacks_is_logged_and_counted_under_that_type(
    ports: Ports, worker_ports: WorkerPorts, policy: WorkerPolicy, metrics: RecordingMetrics, info_log: io.StringIO
) -> None:
    run(delivery_of(submitted(ports).replace(type="removed.type")), worker_ports, policy)

    [line] = lines_of(info_log, "no job type removed.type in this deployment")
    assert line["level"] == "ERROR"
    assert metrics.dimensioned[("RecordsFailed", "default", "removed.type")] == 1


def test_a_record_without_time_to_start_is_logged_and_counted_on_its_queue_and_type(
    ports: Ports, worker_ports: WorkerPorts, policy: WorkerPolicy, metrics: RecordingMetrics, info_log: io.StringIO
) -> None:
    almost_enough = SCRIPTED_TIMEOUT_S * 1000 + policy.start_margin_ms - 1
    process_record(delivery_of(submitted(ports)), worker_ports, policy, lambda: almost_enough)

    message = "not enough time left in this invocation to start the job; it goes back at once, unclaimed"
    assert lines_of(info_log, message) != []
    assert metrics.dimensioned[("RecordsReturnedUnrun", "default", SCRIPTED_TYPE)] == 1
