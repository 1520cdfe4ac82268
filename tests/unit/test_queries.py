"""Reading, cancelling and retrying a caller's jobs by hand (logic/queries.py, against the fakes): what the job
becomes, what is sent or scheduled, what the operator is told when a side step fails."""

from __future__ import annotations

import dataclasses
import logging
from datetime import timedelta

import pytest

from offpath.domain.errors import JobNotFoundError
from offpath.domain.job import LEASE_EXPIRED_OUTCOME, AttemptRecord, Job, JobStatus
from offpath.domain.ports import JobMessage, Ports
from offpath.domain.quotas import QuotaExceededError
from offpath.logic import queries
from offpath_tools.clocks import ManualClock
from offpath_tools.fakes import InMemoryJobQueue, InMemoryJobStore, InMemoryScheduler, RecordingMetrics
from tests.unit.conftest import START, TENANT, a_job, submitted

GRACE = timedelta(minutes=2)
RETENTION = timedelta(days=7)


@pytest.fixture
def scheduler() -> InMemoryScheduler:
    return InMemoryScheduler()


@pytest.fixture
def scheduling(ports: Ports, scheduler: InMemoryScheduler) -> Ports:
    return dataclasses.replace(ports, scheduler=scheduler)


def delayed(ports: Ports, seconds: int) -> Job:
    return submitted(ports, run_at=(START + timedelta(seconds=seconds)).isoformat())


def cancel(job: Job, ports: Ports, scheduler: InMemoryScheduler | None = None) -> Job:
    return queries.cancel_job(
        job.job_id, tenant=TENANT, store=ports.store, clock=ports.clock, retention=RETENTION, scheduler=scheduler
    )


class Gate:
    """A quota gate that records what it was asked and refuses while `full`."""

    def __init__(self, full: bool = False) -> None:
        self.full = full
        self.asked: list[tuple[str, bool]] = []

    def admit(self, tenant: str, *, delayed: bool) -> None:
        self.asked.append((tenant, delayed))
        if self.full:
            raise QuotaExceededError("jobs", "over the open jobs quota", retry_after_s=5)


def retry_through(gate: Gate, job: Job, ports: Ports) -> Job:
    """A hand retry of the tenant's job, admitted (or refused) by `gate`."""
    return queries.retry_job(
        job.job_id, tenant=TENANT, ports=dataclasses.replace(ports, quotas=gate), sweep_grace=GRACE
    )


# -- reading and cancelling ------------------------------------------------------------------------------------------


def test_a_job_is_read_by_its_own_tenant_only(ports: Ports) -> None:
    job = submitted(ports)

    assert queries.get_job(job.job_id, tenant=TENANT, store=ports.store) == job
    with pytest.raises(JobNotFoundError):
        queries.get_job(job.job_id, tenant="tenant-b", store=ports.store)


def test_a_cancelled_job_is_kept_for_the_retention_and_a_delayed_ones_schedule_is_deleted(
    scheduling: Ports, scheduler: InMemoryScheduler, clock: ManualClock
) -> None:
    job = delayed(scheduling, 3600)
    assert scheduler.exists(job.job_id)
    clock.advance(10)

    cancelled = cancel(job, scheduling, scheduler)

    assert (cancelled.status, cancelled.expires_at) == (JobStatus.CANCELLED, clock.now() + RETENTION)
    assert not scheduler.exists(job.job_id)


def test_a_cancel_of_a_job_due_within_an_sqs_delay_deletes_no_schedule(
    scheduling: Ports, scheduler: InMemoryScheduler
) -> None:
    job = delayed(scheduling, 900)
    scheduler.failing = True  # a delete would be logged as failed

    assert cancel(job, scheduling, scheduler).status is JobStatus.CANCELLED


def test_a_cancel_stands_when_the_schedule_cannot_be_deleted_and_the_operator_is_told(
    scheduling: Ports, scheduler: InMemoryScheduler, caplog: pytest.LogCaptureFixture
) -> None:
    job = delayed(scheduling, 3600)
    scheduler.failing = True

    with caplog.at_level(logging.WARNING, logger="offpath.logic.queries"):
        cancelled = cancel(job, scheduling, scheduler)

    assert scheduling.store.get(job.job_id, tenant=TENANT) == cancelled
    assert cancelled.status is JobStatus.CANCELLED
    [logged] = caplog.records
    assert logged.getMessage() == "one-time schedule of a cancelled job not deleted; it will fire into nothing"
    assert logged.job_id == job.job_id  # type: ignore[attr-defined]


def test_a_delayed_job_is_cancelled_where_no_scheduler_is_configured(ports: Ports) -> None:
    job = delayed(ports, 3600)

    assert cancel(job, ports).status is JobStatus.CANCELLED


def test_a_cancel_as_part_of_a_bulk_operation_marks_the_job(ports: Ports) -> None:
    job = submitted(ports)

    cancelled = queries.cancel_job(
        job.job_id, tenant=TENANT, store=ports.store, clock=ports.clock, retention=RETENTION, operation="op-1"
    )

    assert cancelled.bulk_operation_id == "op-1"


# -- retrying by hand ------------------------------------------------------------------------------------------------


def test_a_failed_job_retried_runs_now_and_is_counted_by_queue_and_type(
    ports: Ports, store: InMemoryJobStore, queue: InMemoryJobQueue, clock: ManualClock, metrics: RecordingMetrics
) -> None:
    job = store.put(a_job(JobStatus.FAILED, error="broken", attempt=3))

    retried = queries.retry_job(job.job_id, tenant=TENANT, ports=ports, sweep_grace=GRACE)

    assert (retried.status, retried.attempt, retried.sweep_at) == (JobStatus.QUEUED, 0, clock.now() + GRACE)
    assert (retried.retries, retried.retried_at) == (1, clock.now())
    assert [(s.queue, s.message.job_id, s.delay_s) for s in queue.sent] == [(job.queue, job.job_id, 0)]
    assert metrics.dimensioned == {("JobsRetriedByHand", job.queue, job.type): 1}


def test_a_cancelled_job_due_beyond_an_sqs_delay_is_scheduled_again_and_counted_as_delayed(
    scheduling: Ports, scheduler: InMemoryScheduler, queue: InMemoryJobQueue, clock: ManualClock
) -> None:
    job = delayed(scheduling, 3600)
    cancel(job, scheduling, scheduler)
    clock.advance(60)
    gate = Gate()
    sent = len(queue.sent)

    retried = retry_through(gate, job, scheduling)

    assert (retried.status, retried.run_at) == (JobStatus.SCHEDULED, START + timedelta(seconds=3600))
    assert retried.sweep_at == START + timedelta(seconds=3600) + GRACE
    assert scheduler.exists(job.job_id)
    assert queue.sent[sent:] == []
    assert gate.asked == [(TENANT, True)]


def test_a_cancelled_job_due_within_an_sqs_delay_is_sent_with_the_delay_left(
    ports: Ports, queue: InMemoryJobQueue, clock: ManualClock
) -> None:
    job = delayed(ports, 600)
    cancel(job, ports)
    clock.advance(100)
    gate = Gate()

    retried = retry_through(gate, job, ports)

    assert (retried.status, retried.sweep_at) == (JobStatus.QUEUED, START + timedelta(seconds=600) + GRACE)
    assert [(s.message.job_id, s.delay_s) for s in queue.sent[-1:]] == [(job.job_id, 500)]
    assert gate.asked == [(TENANT, False)]


def test_a_cancelled_job_whose_time_has_passed_runs_now(
    ports: Ports, queue: InMemoryJobQueue, clock: ManualClock
) -> None:
    job = delayed(ports, 600)
    cancel(job, ports)
    clock.advance(700)

    retried = queries.retry_job(job.job_id, tenant=TENANT, ports=ports, sweep_grace=GRACE)

    assert (retried.status, retried.sweep_at) == (JobStatus.QUEUED, clock.now() + GRACE)
    assert [(s.message.job_id, s.delay_s) for s in queue.sent[-1:]] == [(job.job_id, 0)]


def test_a_retry_asked_to_run_now_runs_a_delayed_job_now_without_reading_it_first(
    ports: Ports, store: InMemoryJobStore, queue: InMemoryJobQueue, clock: ManualClock
) -> None:
    job = delayed(ports, 600)
    cancel(job, ports)
    reads = len(store.reads)

    retried = queries.retry_job(job.job_id, tenant=TENANT, ports=ports, sweep_grace=GRACE, now_asked=True)

    assert (retried.status, retried.sweep_at) == (JobStatus.QUEUED, clock.now() + GRACE)
    assert [(s.message.job_id, s.delay_s) for s in queue.sent[-1:]] == [(job.job_id, 0)]
    assert store.reads[reads:] == []


def test_a_retry_over_the_tenants_quota_writes_and_sends_nothing(
    ports: Ports, store: InMemoryJobStore, queue: InMemoryJobQueue
) -> None:
    job = store.put(a_job(JobStatus.FAILED, error="broken"))

    with pytest.raises(QuotaExceededError):
        retry_through(Gate(full=True), job, ports)

    assert store.get(job.job_id, tenant=TENANT) == job
    assert queue.sent == []


def test_a_retry_whose_send_fails_is_left_to_the_sweeper_and_the_operator_is_told(
    ports: Ports,
    store: InMemoryJobStore,
    queue: InMemoryJobQueue,
    metrics: RecordingMetrics,
    caplog: pytest.LogCaptureFixture,
) -> None:
    job = store.put(a_job(JobStatus.FAILED, error="broken"))
    queue.fail_sends(1)

    with caplog.at_level(logging.WARNING, logger="offpath.logic.queries"):
        retried = queries.retry_job(job.job_id, tenant=TENANT, ports=ports, sweep_grace=GRACE)

    assert store.get(job.job_id, tenant=TENANT) == retried and retried.status is JobStatus.QUEUED
    [logged] = caplog.records
    assert logged.getMessage() == "send failed; the sweeper will send the job"
    assert logged.job_id == job.job_id  # type: ignore[attr-defined]
    assert metrics.dimensioned[("SendFailed", job.queue, job.type)] == 1


def test_a_retry_as_part_of_a_bulk_operation_marks_the_job(ports: Ports, store: InMemoryJobStore) -> None:
    job = store.put(a_job(JobStatus.FAILED, error="broken"))

    retried = queries.retry_job(job.job_id, tenant=TENANT, ports=ports, sweep_grace=GRACE, operation="op-1")

    assert retried.bulk_operation_id == "op-1"


# -- dead letters ----------------------------------------------------------------------------------------------------


def dead(store: InMemoryJobStore, queue: InMemoryJobQueue, outcome: str = "FAILED", tenant: str = TENANT) -> Job:
    last = AttemptRecord(attempt=3, started_at=START, finished_at=START, outcome=outcome, error="broken")
    job = store.put(a_job(JobStatus.FAILED, tenant=tenant, error="broken", attempt=3, attempt_history=(last,)))
    queue.send_to_dlq("default", JobMessage.of(job), reason="broken")
    return job


def test_a_retry_of_a_job_whose_lease_expired_removes_its_dead_letter_and_counts_it(
    ports: Ports, store: InMemoryJobStore, queue: InMemoryJobQueue, metrics: RecordingMetrics
) -> None:
    job = dead(store, queue, outcome=LEASE_EXPIRED_OUTCOME)

    queries.retry_job(job.job_id, tenant=TENANT, ports=ports, sweep_grace=GRACE)

    assert queue.dead_letters == []
    assert metrics.dimensioned[("DeadLettersRemoved", job.queue, job.type)] == 1


def test_a_dead_letter_not_removed_is_a_warning_and_counted(
    ports: Ports,
    store: InMemoryJobStore,
    queue: InMemoryJobQueue,
    metrics: RecordingMetrics,
    caplog: pytest.LogCaptureFixture,
) -> None:
    job = dead(store, queue)
    queue.failing_dead_letter_removals = True

    with caplog.at_level(logging.WARNING, logger="offpath.logic.queries"):
        queries.retry_job(job.job_id, tenant=TENANT, ports=ports, sweep_grace=GRACE)

    [logged] = caplog.records
    assert logged.getMessage() == "dead letter of a retried job not removed"
    assert logged.job_id == job.job_id  # type: ignore[attr-defined]
    assert metrics.dimensioned[("DeadLetterRemovalFailed", job.queue, job.type)] == 1
    assert ("DeadLettersRemoved", job.queue, job.type) not in metrics.dimensioned


def test_a_discard_finds_the_job_under_the_tenant_its_message_names_and_counts_it(
    ports: Ports, store: InMemoryJobStore, queue: InMemoryJobQueue, metrics: RecordingMetrics
) -> None:
    job = dead(store, queue, tenant="tenant-b")

    discarded = queries.discard_dead_letter("default", job.job_id, ports=ports)

    assert (discarded.tenant, discarded.discarded_at) == ("tenant-b", START)
    assert metrics.dimensioned == {("DeadLettersDiscarded", job.queue, job.type): 1}
