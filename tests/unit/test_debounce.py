"""Debounce: a later submit under the same debounce key within the window supersedes the earlier job
(logic/debounce.py)."""

from __future__ import annotations

import itertools
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
