"""Debounce: a later submit under the same debounce key within the window supersedes the earlier job
(logic/debounce.py)."""

from __future__ import annotations

import itertools
import logging
from datetime import timedelta
from typing import Any

import pytest

from offpath.domain.errors import InvalidRequestError, StoreUnavailableError
from offpath.domain.job import Job, JobStatus
from offpath.domain.ports import Ports
from offpath.logic.process import WorkerPolicy, WorkerPorts, process_record
from offpath.logic.submit import SubmitPolicy, SubmitRequest, submit_batch
from offpath_tools.clocks import ManualClock
from offpath_tools.fakes import InMemoryJobQueue, InMemoryJobStore, RecordingMetrics, ScriptedJob
from tests.unit.conftest import START, TENANT, delivery_of, submitted, unbounded


def debounced(ports: Ports, key: str = "k", seconds: int = 2, **kwargs: Any) -> Job:
    return submitted(ports, debounce=(key, seconds), **kwargs)


def stored(store: InMemoryJobStore, job: Job) -> Job:
    found = store.get(job.job_id, tenant=job.tenant)
    assert found is not None
    return found


def test_five_submits_within_the_window_leave_the_last_to_run_seconds_after_it(
    ports: Ports,
    worker_ports: WorkerPorts,
    policy: WorkerPolicy,
    store: InMemoryJobStore,
    queue: InMemoryJobQueue,
    clock: ManualClock,
    scripted: ScriptedJob,
) -> None:
    jobs = []
    for _ in range(5):
        jobs.append(debounced(ports))
        clock.advance(0.2)
    last = jobs[-1]

    assert stored(store, last).status is JobStatus.QUEUED
    assert stored(store, last).run_at == START + timedelta(seconds=0.8 + 2)
    # At once, each names the job that superseded it.
    for earlier, later in itertools.pairwise(jobs):
        superseded = stored(store, earlier)
        assert (superseded.status, superseded.cancel_reason, superseded.superseded_by) == (
            JobStatus.CANCELLED,
            "superseded",
            later.job_id,
        )
    # Each message went out with the window's delay; the superseded jobs' deliveries are acked unrun, and each then
    # names the burst's survivor.
    assert [sent.delay_s for sent in queue.sent] == [2] * 5
    clock.advance(2)
    assert all(process_record(delivery_of(job), worker_ports, policy, unbounded) for job in jobs)
    assert [scripted.runs_of(job.job_id) for job in jobs] == [0, 0, 0, 0, 1]
    assert stored(store, last).status is JobStatus.SUCCEEDED
    assert [stored(store, job).superseded_by for job in jobs] == [last.job_id] * 4 + [None]


def test_a_job_of_a_later_burst_is_not_named(
    ports: Ports,
    worker_ports: WorkerPorts,
    policy: WorkerPolicy,
    store: InMemoryJobStore,
    clock: ManualClock,
) -> None:
    first = debounced(ports)
    clock.advance(1.5)
    second = debounced(ports)
    clock.advance(2.5)  # second's window ended: a new burst begins
    third = debounced(ports)

    # first's message comes late, after the new burst began.
    assert process_record(delivery_of(first), worker_ports, policy, unbounded) is True

    assert stored(store, first).superseded_by == second.job_id
    assert stored(store, second).status is JobStatus.QUEUED
    assert stored(store, third).status is JobStatus.QUEUED


def test_a_submit_after_the_window_supersedes_nothing(
    ports: Ports, store: InMemoryJobStore, clock: ManualClock
) -> None:
    first = debounced(ports)
    clock.advance(2)

    second = debounced(ports)

    assert stored(store, first).status is JobStatus.QUEUED
    assert stored(store, second).status is JobStatus.QUEUED


def test_keys_are_per_tenant_type_and_key(ports: Ports, store: InMemoryJobStore) -> None:
    first = debounced(ports, key="a")
    others = [
        debounced(ports, key="b"),
        debounced(ports, key="a", tenant="tenant-b"),
        submitted(ports, job_type="test.strict", payload={"name": "x"}, debounce=("a", 2)),
    ]

    assert [stored(store, job).status for job in (first, *others)] == [JobStatus.QUEUED] * 4


def test_a_job_that_started_is_not_superseded(
    ports: Ports, store: InMemoryJobStore, clock: ManualClock, metrics: RecordingMetrics
) -> None:
    first = debounced(ports)
    store.claim(first.job_id, tenant=TENANT, now=clock.now(), lease_until=clock.now() + timedelta(minutes=1))

    second = debounced(ports)

    assert stored(store, first).status is JobStatus.RUNNING
    assert stored(store, second).status is JobStatus.QUEUED
    assert "JobsSuperseded" not in metrics.counts


def test_a_debounce_record_that_cannot_be_written_leaves_the_new_job_accepted(
    ports: Ports, store: InMemoryJobStore, metrics: RecordingMetrics
) -> None:
    first = debounced(ports)
    store.fail_next("swap_debounce", StoreUnavailableError("down"))

    second = debounced(ports)

    assert stored(store, second).status is JobStatus.QUEUED
    assert stored(store, first).status is JobStatus.QUEUED
    assert metrics.counts["DebounceFailed"] == 1


def test_debounce_sets_when_it_runs_so_a_run_at_beside_it_is_refused(ports: Ports) -> None:
    with pytest.raises(InvalidRequestError) as refused:
        debounced(ports, run_at=(START + timedelta(seconds=10)).isoformat())

    assert refused.value.field == "run_at"


def test_an_expiry_must_come_after_the_debounced_run(ports: Ports) -> None:
    with pytest.raises(InvalidRequestError) as refused:
        debounced(ports, seconds=10, expires_at=(START + timedelta(seconds=5)).isoformat())

    assert refused.value.field == "expires_at"
    assert debounced(ports, seconds=10, expires_at=(START + timedelta(seconds=15)).isoformat()).start_by is not None


def test_a_replay_under_an_idempotency_key_is_the_first_job_and_supersedes_nothing(
    ports: Ports, store: InMemoryJobStore, clock: ManualClock
) -> None:
    first = debounced(ports, idempotency_key="once")
    clock.advance(1)

    again = debounced(ports, idempotency_key="once")

    assert again.job_id == first.job_id
    assert stored(store, first).status is JobStatus.QUEUED


def test_batch_items_are_debounced_as_single_submits(ports: Ports, store: InMemoryJobStore) -> None:
    earlier = debounced(ports)

    [item] = submit_batch(
        [SubmitRequest(tenant=TENANT, type="test.scripted", payload={}, debounce=("k", 2))], ports, SubmitPolicy()
    )

    assert item.submitted is not None
    later = item.submitted.job
    assert (stored(store, earlier).status, stored(store, earlier).superseded_by) == (JobStatus.CANCELLED, later.job_id)
    assert later.run_at == START + timedelta(seconds=2)


# -- what the operator sees: logs and metrics -------------------------------------------------------------------


def test_a_supersede_is_counted_and_logged_and_the_superseded_job_kept_for_the_retention(
    ports: Ports,
    store: InMemoryJobStore,
    clock: ManualClock,
    metrics: RecordingMetrics,
    caplog: pytest.LogCaptureFixture,
) -> None:
    first = debounced(ports)
    clock.advance(1)

    with caplog.at_level(logging.INFO, logger="offpath.logic.debounce"):
        second = debounced(ports)

    assert stored(store, first).expires_at == clock.now() + SubmitPolicy().retention
    assert metrics.dimensioned[("JobsSuperseded", first.queue, first.type)] == 1
    [logged] = caplog.records
    assert logged.getMessage() == "debounced job superseded"
    assert (logged.superseded, logged.superseded_by) == (first.job_id, second.job_id)  # type: ignore[attr-defined]


def test_a_debounce_record_not_written_is_a_warning_and_counted(
    ports: Ports, store: InMemoryJobStore, metrics: RecordingMetrics, caplog: pytest.LogCaptureFixture
) -> None:
    store.fail_next("swap_debounce", StoreUnavailableError("down"))

    with caplog.at_level(logging.WARNING, logger="offpath.logic.debounce"):
        job = debounced(ports)

    assert [r.getMessage() for r in caplog.records] == [
        "debounce record not written; an earlier job under the key may run too"
    ]
    assert metrics.dimensioned == {("DebounceFailed", job.queue, job.type): 1}


def test_a_superseded_job_not_cancelled_runs_too_and_the_operator_is_told(
    ports: Ports, store: InMemoryJobStore, metrics: RecordingMetrics, caplog: pytest.LogCaptureFixture
) -> None:
    first = debounced(ports)
    store.fail_next("cancel", StoreUnavailableError("down"))

    with caplog.at_level(logging.WARNING, logger="offpath.logic.debounce"):
        second = debounced(ports)

    assert (stored(store, first).status, stored(store, second).status) == (JobStatus.QUEUED, JobStatus.QUEUED)
    [logged] = caplog.records
    assert logged.getMessage() == "the superseded job was not cancelled; it may run too"
    assert logged.superseded == first.job_id  # type: ignore[attr-defined]
    assert metrics.dimensioned == {("DebounceFailed", first.queue, first.type): 1}


# -- naming the survivor when a superseded job's message comes --------------------------------------------------


def test_a_job_submitted_exactly_at_the_end_of_the_first_window_still_counts_as_its_burst(
    ports: Ports, worker_ports: WorkerPorts, policy: WorkerPolicy, store: InMemoryJobStore, clock: ManualClock
) -> None:
    first = debounced(ports)
    clock.advance(1.5)
    debounced(ports)
    clock.advance(0.5)  # first's window ends now; the second's has not
    third = debounced(ports)

    assert process_record(delivery_of(first), worker_ports, policy, unbounded) is True

    assert stored(store, first).superseded_by == third.job_id


def test_a_superseded_job_that_names_the_survivor_already_costs_no_write(
    ports: Ports, worker_ports: WorkerPorts, policy: WorkerPolicy, store: InMemoryJobStore, clock: ManualClock
) -> None:
    first = debounced(ports)
    second = debounced(ports)
    clock.advance(2)
    writes = len(store.writes)

    assert process_record(delivery_of(first), worker_ports, policy, unbounded) is True

    assert stored(store, first).superseded_by == second.job_id
    assert "name_survivor" not in store.writes[writes:]


def test_a_superseded_job_whose_burst_record_is_gone_keeps_its_name(
    ports: Ports, worker_ports: WorkerPorts, policy: WorkerPolicy, store: InMemoryJobStore, clock: ManualClock
) -> None:
    first = debounced(ports)
    second = debounced(ports)
    store.drop_debounce_records()
    clock.advance(2)

    assert process_record(delivery_of(first), worker_ports, policy, unbounded) is True

    assert stored(store, first).superseded_by == second.job_id


def test_a_survivor_not_named_is_a_warning_with_its_cause_and_counted(
    ports: Ports,
    worker_ports: WorkerPorts,
    policy: WorkerPolicy,
    store: InMemoryJobStore,
    clock: ManualClock,
    metrics: RecordingMetrics,
    caplog: pytest.LogCaptureFixture,
) -> None:
    first = debounced(ports)
    second = debounced(ports)
    clock.advance(2)
    store.fail_next("debounce_record", StoreUnavailableError("down"))

    with caplog.at_level(logging.WARNING, logger="offpath.logic.debounce"):
        assert process_record(delivery_of(first), worker_ports, policy, unbounded) is True

    assert stored(store, first).superseded_by == second.job_id
    [logged] = [r for r in caplog.records if r.name == "offpath.logic.debounce"]
    assert logged.getMessage() == "a superseded job's survivor was not named"
    assert logged.exc_info is not None and isinstance(logged.exc_info[1], StoreUnavailableError)
    assert metrics.dimensioned[("DebounceFailed", first.queue, first.type)] == 1
