"""The bulk runner (logic/bulk.py) against the fakes: a slice that runs out of time within a page leaves it to
the next runner with exact counts; the submit rate's quota is waited for; the limit; a job that cannot be moved
is a failure with its error; jobs submitted after the operation are not touched."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from offpath.domain.bulk import BulkFilter, BulkOperationConflictError
from offpath.domain.errors import StoreUnavailableError
from offpath.domain.job import Job, JobStatus
from offpath.domain.ports import Ports
from offpath.domain.quotas import QuotaExceededError
from offpath.logic.bulk import BulkPolicy, BulkServices, resume, run, start
from offpath_tools.clocks import ManualClock
from offpath_tools.fakes import InMemoryBulkStore, InMemoryJobStore
from tests.unit.conftest import TENANT, a_job

FILTER = BulkFilter(tenant=TENANT, status=JobStatus.FAILED)


class Seconds:
    """A monotonic clock that moves `step` seconds each time it is read."""

    def __init__(self, step: float = 0.0) -> None:
        self.now = 0.0
        self.step = step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


def failed(store: InMemoryJobStore, clock: ManualClock, count: int) -> list[str]:
    ids = []
    for n in range(count):
        at = clock.now() - timedelta(seconds=count - n)
        job = a_job(JobStatus.FAILED, job_id=f"{n:032x}", created_at=at, updated_at=at, attempt=3)
        store.put(job)
        ids.append(job.job_id)
    return ids


def services(ports: Ports, **policy: Any) -> tuple[BulkServices, InMemoryBulkStore]:
    operations = InMemoryBulkStore()
    return BulkServices(ports, operations, BulkPolicy(**{"page_size": 4, **policy})), operations


def statuses(store: InMemoryJobStore, ids: list[str]) -> list[JobStatus]:
    return [j.status for j in (store.get(i, tenant=TENANT) for i in ids) if j is not None]


def test_a_slice_that_ends_within_a_page_leaves_the_page_and_the_next_runner_counts_it_once(
    ports: Ports, store: InMemoryJobStore, clock: ManualClock
) -> None:
    ids = failed(store, clock, 10)
    work, operations = services(ports, inline_s=2.0)
    # Each read of the runner's clock takes 0.4 s: the 2 s slice ends within the first page.
    work.monotonic = Seconds(0.4)

    first = start(TENANT, "retry", FILTER, work)

    assert first.status == "running"
    assert (first.matched, first.done) == (0, 0), "counts are a finished page's"
    moved = statuses(store, ids).count(JobStatus.QUEUED)
    assert 0 < moved < 4
    work.monotonic = Seconds(0.0)
    clock.advance(1)
    assert resume(work) == 1
    over = operations.get(TENANT, first.operation_id)
    assert (over.status, over.matched, over.done, over.skipped) == ("finished", 10, 10, 0)
    assert {j.retries for j in (store.get(i, tenant=TENANT) for i in ids) if j is not None} == {1}


class RateOnce:
    """A quota gate over the submit rate once, for a second."""

    def __init__(self) -> None:
        self.refused = False

    def admit(self, tenant: str, *, delayed: bool) -> None:
        if not self.refused:
            self.refused = True
            raise QuotaExceededError("submits_per_s", "over the quota of 1 submits per second (burst 1)", 1)


def test_over_the_submit_rate_the_runner_waits_for_the_bucket(
    ports: Ports, store: InMemoryJobStore, clock: ManualClock
) -> None:
    ids = failed(store, clock, 3)
    work, _ = services(Ports(**{**vars(ports), "quotas": RateOnce()}))
    slept: list[float] = []
    work.sleep = slept.append

    over = start(TENANT, "retry", FILTER, work)

    assert (over.status, over.done) == ("finished", 3)
    assert slept == [1.0]
    assert statuses(store, ids) == [JobStatus.QUEUED] * 3


def test_the_limit_ends_the_operation_with_limit_reached(
    ports: Ports, store: InMemoryJobStore, clock: ManualClock
) -> None:
    ids = failed(store, clock, 5)
    work, _ = services(ports, limit=3)

    over = start(TENANT, "retry", FILTER, work)

    assert (over.status, over.matched, over.done, over.limit_reached) == ("finished", 3, 3, True)
    assert statuses(store, ids).count(JobStatus.FAILED) == 2


class FailingRetries(InMemoryJobStore):
    def retry_by_hand(self, job_id: str, **kwargs: Any) -> Job:
        if job_id == f"{1:032x}":
            raise StoreUnavailableError("DynamoDB ThrottlingException")
        return super().retry_by_hand(job_id, **kwargs)


def test_a_job_that_cannot_be_moved_is_a_failure_with_its_error(ports: Ports, clock: ManualClock) -> None:
    store = FailingRetries()
    failed(store, clock, 3)
    work, _ = services(Ports(**{**vars(ports), "store": store}))

    over = start(TENANT, "retry", FILTER, work)

    assert (over.status, over.matched, over.done, over.failed) == ("finished", 3, 2, 1)
    assert [(f.job_id, f.error) for f in over.failures] == [
        (f"{1:032x}", "StoreUnavailableError: DynamoDB ThrottlingException")
    ]


def test_jobs_submitted_after_the_operation_started_are_not_touched(
    ports: Ports, store: InMemoryJobStore, clock: ManualClock
) -> None:
    failed(store, clock, 2)
    work, operations = services(ports, inline_s=0)
    held = start(TENANT, "retry", FILTER, work)
    later = a_job(JobStatus.FAILED, job_id="f" * 32, created_at=clock.now() + timedelta(seconds=1), attempt=3)
    store.put(later)
    clock.advance(5)

    assert resume(work) == 1

    over = operations.get(TENANT, held.operation_id)
    assert (over.status, over.matched, over.done) == ("finished", 2, 2)
    assert store.get(later.job_id, tenant=TENANT).status is JobStatus.FAILED  # type: ignore[union-attr]


def test_a_held_operation_is_not_taken_by_another_runner(
    ports: Ports, store: InMemoryJobStore, clock: ManualClock
) -> None:
    failed(store, clock, 2)
    work, operations = services(ports, inline_s=0)
    held = start(TENANT, "retry", FILTER, work)
    # Released at once (no time inline); taken by a sweep, which finishes it.
    assert resume(work) == 1
    assert resume(work) == 0
    over = operations.get(TENANT, held.operation_id)
    assert over.status == "finished"
    # The first runner's copy, written over since: its write is refused.
    with pytest.raises(BulkOperationConflictError):
        run(held, work, seconds=1)


def test_a_sweep_gives_bulk_operations_what_its_invocation_has_left_less_a_margin(ports: Ports) -> None:
    from types import SimpleNamespace

    from offpath.handlers.sweeper import _bulk_seconds

    work, _ = services(ports, sweep_s=20.0)

    assert _bulk_seconds(work, None) == 20.0
    assert _bulk_seconds(work, SimpleNamespace(get_remaining_time_in_millis=lambda: 45_000)) == 20.0
    assert _bulk_seconds(work, SimpleNamespace(get_remaining_time_in_millis=lambda: 15_000)) == 5.0
    assert _bulk_seconds(work, SimpleNamespace(get_remaining_time_in_millis=lambda: 4_000)) == 0.0


class RateAlways:
    """A quota gate that refuses over the submit rate, for 10 s, every time it is asked."""

    def __init__(self) -> None:
        self.asked = 0

    def admit(self, tenant: str, *, delayed: bool) -> None:
        self.asked += 1
        raise QuotaExceededError("submits_per_s", "over the quota of 0.1 submits per second (burst 1)", 10)


def test_a_runner_whose_time_ends_before_the_bucket_refills_leaves_the_page_at_once(
    ports: Ports, store: InMemoryJobStore, clock: ManualClock
) -> None:
    ids = failed(store, clock, 2)
    gate = RateAlways()
    work, _ = services(Ports(**{**vars(ports), "quotas": gate}), inline_s=5.0)
    slept: list[float] = []
    work.sleep = slept.append

    held = start(TENANT, "retry", FILTER, work)

    assert (held.status, held.matched, held.lease_until, slept) == ("running", 0, clock.now(), [])
    assert (gate.asked, store.reads.count("list_jobs")) == (1, 1)  # no new try of the page until its time is up
    assert statuses(store, ids) == [JobStatus.FAILED] * 2
