"""Expiry: a job not started by its `expires_at` ends EXPIRED without running (logic/expiry.py)."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest

from offpath.domain.errors import IdempotencyConflictError, InvalidRequestError
from offpath.domain.events import EventType, events_of_change
from offpath.domain.job import JobStatus
from offpath.domain.ports import JobMessage, Ports
from offpath.domain.quotas import Usage, parse
from offpath.logic.admission import ADMISSION, Done
from offpath.logic.expiry import expired
from offpath.logic.notify import Change, record_metrics
from offpath.logic.process import WorkerPolicy, WorkerPorts, process_record
from offpath.logic.queries import retry_job
from offpath.logic.quotas import CountingStore
from offpath.logic.sweep import SweepPolicy, sweep
from offpath_tools.clocks import ManualClock
from offpath_tools.fakes import InMemoryJobQueue, InMemoryJobStore, InMemoryQuotaCounters, RecordingMetrics, ScriptedJob
from tests.unit.conftest import START, TENANT, delivery_of, submitted, unbounded


def iso(seconds: float) -> str:
    return (START + timedelta(seconds=seconds)).isoformat()


# -- at submit ----------------------------------------------------------------------------------


def test_a_job_keeps_its_expiry_and_its_message_carries_it(ports: Ports, queue: InMemoryJobQueue) -> None:
    job = submitted(ports, expires_at=iso(60))

    assert job.start_by == START + timedelta(seconds=60)
    [sent] = queue.sent
    assert JobMessage.from_body(sent.message.to_body()).start_by == START + timedelta(seconds=60)


def test_a_job_without_an_expiry_sends_the_message_it_always_sent(ports: Ports, queue: InMemoryJobQueue) -> None:
    job = submitted(ports)

    assert job.start_by is None
    assert queue.sent[0].message.to_body() == (
        f'{{"job_id":"{job.job_id}","type":"test.scripted","tenant":"{TENANT}"}}'
    )


@pytest.mark.parametrize(
    ("given", "says"),
    [
        ({"expires_at": iso(0)}, "expires_at must be in the future"),
        ({"expires_at": iso(-5)}, "expires_at must be in the future"),
        ({"expires_at": iso(30), "run_at": iso(30)}, "expires_at must be after run_at"),
        ({"expires_at": iso(30), "run_at": iso(60)}, "expires_at must be after run_at"),
        ({"expires_at": iso(8 * 24 * 3600)}, "expires_at may be at most 7 days ahead"),
        ({"expires_at": "tomorrow"}, "expires_at must be an RFC 3339 date-time"),
        ({"expires_at": "2026-03-01T12:05:00"}, "expires_at must carry a time zone"),
    ],
)
def test_an_expiry_that_could_never_hold_is_refused_naming_the_field(
    ports: Ports, given: dict[str, str], says: str
) -> None:
    with pytest.raises(InvalidRequestError) as refused:
        submitted(ports, **given)

    assert refused.value.field == "expires_at"
    assert says in str(refused.value)


@pytest.mark.parametrize(
    ("given", "says"),
    [
        ({"expires_at": iso(0)}, "expires_at must be in the future"),
        ({"expires_at": iso(30), "run_at": iso(30)}, "expires_at must be after run_at (the job could never start)"),
    ],
)
def test_a_refused_expiry_says_why_in_full(ports: Ports, given: dict[str, str], says: str) -> None:
    with pytest.raises(InvalidRequestError) as refused:
        submitted(ports, **given)

    assert str(refused.value) == says


def test_an_expiry_exactly_the_retention_ahead_is_accepted(ports: Ports) -> None:
    job = submitted(ports, expires_at=iso(7 * 24 * 3600))

    assert job.start_by == START + timedelta(days=7)


def test_an_expiry_in_an_offset_is_the_same_moment_in_utc(ports: Ports) -> None:
    job = submitted(ports, expires_at="2026-03-01T13:01:00+01:00")

    assert job.start_by == START + timedelta(seconds=60)


def test_a_replay_under_a_key_must_ask_for_the_same_expiry(ports: Ports) -> None:
    first = submitted(ports, idempotency_key="k", expires_at=iso(60))

    assert submitted(ports, idempotency_key="k", expires_at=iso(60)).job_id == first.job_id
    with pytest.raises(IdempotencyConflictError):
        submitted(ports, idempotency_key="k", expires_at=iso(90))


# -- before the claim ---------------------------------------------------------------------------


def test_expiry_is_the_first_check_before_a_claim() -> None:
    assert ADMISSION[0] is expired


def test_a_job_whose_expiry_passed_before_its_claim_ends_expired_unrun_and_its_message_is_acked(
    ports: Ports,
    worker_ports: WorkerPorts,
    policy: WorkerPolicy,
    store: InMemoryJobStore,
    clock: ManualClock,
    scripted: ScriptedJob,
    metrics: RecordingMetrics,
) -> None:
    job = submitted(ports, expires_at=iso(5))
    clock.advance(6)

    assert process_record(delivery_of(job), worker_ports, policy, unbounded) is True

    expired = store.get(job.job_id, tenant=TENANT)
    assert expired is not None
    assert (expired.status, expired.attempt, expired.started_at) == (JobStatus.EXPIRED, 0, None)
    assert expired.finished_at == clock.now() and expired.expires_at == clock.now() + policy.retention
    assert scripted.runs_of(job.job_id) == 0
    assert metrics.dimensioned == {("JobsExpiredUnrun", job.queue, job.type): 1}
    assert "claim" not in store.writes


def test_the_worker_logs_that_it_expired_a_job_unrun_and_when(
    ports: Ports,
    worker_ports: WorkerPorts,
    policy: WorkerPolicy,
    clock: ManualClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    job = submitted(ports, expires_at=iso(5))
    clock.advance(6)

    with caplog.at_level(logging.INFO, logger="offpath.worker"):
        process_record(delivery_of(job), worker_ports, policy, unbounded)

    [logged] = [r for r in caplog.records if "expired" in r.getMessage()]
    assert logged.getMessage() == "job expired before it started; acknowledged without running"
    assert logged.expired_at == clock.now().isoformat()  # type: ignore[attr-defined]


def test_a_job_delivered_before_its_expiry_runs(
    ports: Ports,
    worker_ports: WorkerPorts,
    policy: WorkerPolicy,
    store: InMemoryJobStore,
    clock: ManualClock,
    scripted: ScriptedJob,
) -> None:
    job = submitted(ports, expires_at=iso(5))
    clock.advance(4)

    assert process_record(delivery_of(job), worker_ports, policy, unbounded) is True

    assert store.get(job.job_id, tenant=TENANT).status is JobStatus.SUCCEEDED  # type: ignore[union-attr]
    assert scripted.runs_of(job.job_id) == 1
    assert "expire" not in store.writes


def test_a_job_waiting_for_a_retry_past_its_expiry_ends_expired_at_its_next_delivery(
    ports: Ports,
    worker_ports: WorkerPorts,
    policy: WorkerPolicy,
    store: InMemoryJobStore,
    clock: ManualClock,
    scripted: ScriptedJob,
) -> None:
    def boom(payload: object, ctx: object) -> object:
        raise RuntimeError("boom")

    scripted.action = boom
    job = submitted(ports, expires_at=iso(5))
    assert process_record(delivery_of(job), worker_ports, policy, unbounded) is False
    clock.advance(10)

    assert process_record(delivery_of(job), worker_ports, policy, unbounded) is True

    expired = store.get(job.job_id, tenant=TENANT)
    assert expired is not None and (expired.status, expired.attempt) == (JobStatus.EXPIRED, 1)
    assert scripted.runs_of(job.job_id) == 1


def test_a_stale_message_of_a_job_that_runs_no_longer_expires_it(
    ports: Ports, worker_ports: WorkerPorts, store: InMemoryJobStore, clock: ManualClock
) -> None:
    job = submitted(ports, expires_at=iso(5))
    store.claim(job.job_id, tenant=TENANT, now=clock.now(), lease_until=clock.now() + timedelta(minutes=5))
    clock.advance(10)

    job_type = worker_ports.registry.job_types[job.type]
    assert expired(JobMessage.of(job), job_type, worker_ports, now=clock.now()) is None
    assert store.get(job.job_id, tenant=TENANT).status is JobStatus.RUNNING  # type: ignore[union-attr]


def test_the_expiry_check_answers_done_for_an_expired_job(
    ports: Ports, worker_ports: WorkerPorts, clock: ManualClock
) -> None:
    job = submitted(ports, expires_at=iso(5))
    clock.advance(5)

    verdict = expired(JobMessage.of(job), worker_ports.registry.job_types[job.type], worker_ports, now=clock.now())

    assert verdict == Done("expired")


# -- the sweeper, a hand retry, quotas, notices -------------------------------------------------------------


def test_the_sweeper_expires_a_due_job_past_its_expiry_rather_than_sending_it_again(
    ports: Ports, store: InMemoryJobStore, queue: InMemoryJobQueue, clock: ManualClock
) -> None:
    queue.fail_sends(1)
    job = submitted(ports, expires_at=iso(60))
    assert queue.sent == []
    clock.advance(3 * 60)

    report = sweep(ports, SweepPolicy())

    assert report.expired == 1 and report.resent == 0
    assert store.get(job.job_id, tenant=TENANT).status is JobStatus.EXPIRED  # type: ignore[union-attr]
    assert queue.sent == []


def test_a_hand_retry_of_an_expired_job_runs_it_now_without_its_expiry(
    ports: Ports,
    worker_ports: WorkerPorts,
    policy: WorkerPolicy,
    store: InMemoryJobStore,
    clock: ManualClock,
    scripted: ScriptedJob,
) -> None:
    job = submitted(ports, expires_at=iso(5))
    clock.advance(6)
    process_record(delivery_of(job), worker_ports, policy, unbounded)

    retried = retry_job(job.job_id, tenant=TENANT, ports=ports, sweep_grace=timedelta(minutes=2))

    assert (retried.status, retried.start_by, retried.retries) == (JobStatus.QUEUED, None, 1)
    assert process_record(delivery_of(retried), worker_ports, policy, unbounded) is True
    assert store.get(job.job_id, tenant=TENANT).status is JobStatus.SUCCEEDED  # type: ignore[union-attr]
    assert scripted.runs_of(job.job_id) == 1


@pytest.mark.parametrize("delayed", [False, True])
def test_an_expired_job_frees_its_open_jobs_place(ports: Ports, clock: ManualClock, delayed: bool) -> None:
    counters = InMemoryQuotaCounters()
    store = CountingStore(InMemoryJobStore(), parse(f"{TENANT}:open_jobs=5,delayed_jobs=5"), counters)
    counted = Ports(registry=ports.registry, store=store, queue=ports.queue, clock=clock, metrics=ports.metrics)
    run_at = {"run_at": iso(3600)} if delayed else {}
    job = submitted(counted, expires_at=iso(7200), **run_at)
    assert counters.usage(TENANT) == Usage(open_jobs=1, delayed_jobs=1 if delayed else 0)
    clock.advance(7201)

    store.expire(job.job_id, tenant=TENANT, now=clock.now(), expires_at=clock.now() + timedelta(days=7))

    assert counters.usage(TENANT) == Usage()


def test_an_expired_job_is_a_job_expired_notice_and_counted() -> None:
    from tests.unit.conftest import a_job

    waiting = a_job(JobStatus.QUEUED, start_by=START)
    expired = a_job(JobStatus.EXPIRED, start_by=START, updated_at=START + timedelta(seconds=1))
    events = events_of_change(waiting, expired)
    metrics = RecordingMetrics()

    record_metrics(Change("1", waiting, expired, tuple(events)), metrics)

    assert [e.type for e in events] == [EventType.EXPIRED]
    assert EventType.EXPIRED.value == "job.expired"
    assert metrics.counts["JobsExpired"] == 1
