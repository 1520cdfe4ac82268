"""The worker's logic for one record: claim, run, record the outcome, and say what happens to the message."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from offpath.domain.errors import PermanentError, StoreUnavailableError
from offpath.domain.job import Job, JobStatus
from offpath.logic.process import Delivery, WorkerPolicy, WorkerPorts, process_batch, process_record
from offpath.logic.submit import Ports
from offpath_tools.clocks import ManualClock
from offpath_tools.fakes import (
    SCRIPTED_MAX_ATTEMPTS,
    SCRIPTED_TIMEOUT_S,
    STRICT_TYPE,
    DeadLetter,
    InMemoryJobQueue,
    InMemoryJobStore,
    RecordingMetrics,
    ScriptedJob,
    VisibilityChange,
)
from tests.unit.conftest import delivery_of, submitted, unbounded


def fails(error: Exception) -> Any:
    def action(payload: Any, ctx: Any) -> Any:
        raise error

    return action


def run(delivery: Delivery, worker_ports: WorkerPorts, policy: WorkerPolicy) -> bool:
    return process_record(delivery, worker_ports, policy, unbounded)


def stored(store: InMemoryJobStore, job: Job) -> Job:
    current = store.get(job.job_id)
    assert current is not None
    return current


def another_worker_claims(store: InMemoryJobStore, job: Job, clock: ManualClock, lease_s: float) -> Job:
    """Another worker takes the job now, with a lease of `lease_s` seconds."""
    now = clock.now()
    return store.claim(job.job_id, tenant=job.tenant, now=now, lease_until=now + timedelta(seconds=lease_s))


def lease_length_s(policy: WorkerPolicy) -> float:
    return SCRIPTED_TIMEOUT_S + policy.lease_margin.total_seconds()


# -- outcomes -----------------------------------------------------------------------------------


def test_a_successful_job_is_acked_and_stores_its_result(
    ports: Ports, worker_ports: WorkerPorts, policy: WorkerPolicy, store: InMemoryJobStore, metrics: RecordingMetrics
) -> None:
    job = submitted(ports, payload={"n": 1})

    assert run(delivery_of(job), worker_ports, policy) is True

    done = stored(store, job)
    assert (done.status, done.attempt, done.result) == (JobStatus.SUCCEEDED, 1, {"done": True})
    assert (metrics.counts["JobsStarted"], metrics.counts["JobsSucceeded"]) == (1, 1)


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
    assert metrics.counts["DuplicateDeliveries"] == 1


def test_a_delivery_while_another_worker_holds_the_lease_waits_until_the_lease_ends(
    ports: Ports,
    worker_ports: WorkerPorts,
    policy: WorkerPolicy,
    store: InMemoryJobStore,
    queue: InMemoryJobQueue,
    scripted: ScriptedJob,
    clock: ManualClock,
) -> None:
    job = submitted(ports)
    another_worker_claims(store, job, clock, lease_s=60)

    assert run(delivery_of(job), worker_ports, policy) is False

    assert queue.visibility_changes == [VisibilityChange("default", "rh-m-1", 61)]
    assert scripted.calls == []
    assert stored(store, job).attempt == 1


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


def test_a_record_without_time_to_finish_goes_back_untouched(
    ports: Ports,
    worker_ports: WorkerPorts,
    policy: WorkerPolicy,
    store: InMemoryJobStore,
    queue: InMemoryJobQueue,
    scripted: ScriptedJob,
) -> None:
    job = submitted(ports)
    store.writes.clear()
    almost_enough = SCRIPTED_TIMEOUT_S * 1000 + policy.start_margin_ms - 1

    assert process_record(delivery_of(job), worker_ports, policy, lambda: almost_enough) is False

    assert store.writes == []
    assert (queue.visibility_changes, queue.dead_letters, scripted.calls) == ([], [], [])


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
        clock.advance(lease_length_s(policy) + 1)
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
        clock.advance(lease_length_s(policy) + 1)
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
    scripted.action = fails(PermanentError("bad input"))
    job = submitted(ports)
    run(delivery_of(job), worker_ports, policy)
    scripted.action = lambda payload, ctx: "fixed"

    redriven = Delivery("m-2", "rh-m-2", delivery_of(job).body, redriven=True)
    assert run(redriven, worker_ports, policy) is True

    final = stored(store, job)
    assert (final.status, final.attempt, final.redrives, final.result) == (JobStatus.SUCCEEDED, 1, 1, "fixed")


def test_a_plain_duplicate_of_a_failed_jobs_message_does_not_run_it_again(
    ports: Ports, worker_ports: WorkerPorts, policy: WorkerPolicy, scripted: ScriptedJob
) -> None:
    scripted.action = fails(PermanentError("bad input"))
    job = submitted(ports)
    run(delivery_of(job), worker_ports, policy)

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
