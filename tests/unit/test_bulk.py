"""The bulk runner (logic/bulk.py) against the fakes: a slice that runs out of time within a page leaves it to
the next runner with exact counts; the submit rate's quota is waited for; the limit; a job that cannot be moved
is a failure with its error; jobs submitted after the operation are not touched; the filters (status, type, tag)
pick the jobs moved, and the jobs the action cannot move are counted by why, over the pages."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

import pytest

from offpath.domain.bulk import MAX_MATCHED, BulkFilter, BulkOperation, BulkOperationConflictError
from offpath.domain.errors import JobConflictError, JobNotFoundError, StoreUnavailableError
from offpath.domain.job import Job, JobStatus
from offpath.domain.ports import Ports
from offpath.domain.quotas import QuotaExceededError
from offpath.logic.bulk import BulkPolicy, BulkServices, Preview, preview, resume, run, start
from offpath_tools.clocks import ManualClock
from offpath_tools.fakes import SCRIPTED_TYPE, STRICT_TYPE, InMemoryBulkStore, InMemoryJobStore, InMemoryScheduler
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
    return jobs_in(store, clock, [JobStatus.FAILED] * count)


def jobs_in(store: InMemoryJobStore, clock: ManualClock, states: list[JobStatus], **changes: Any) -> list[str]:
    """Jobs in these states, created a second apart in this order (the listing shows the last first)."""
    ids = []
    for n, status in enumerate(states):
        at = clock.now() - timedelta(seconds=len(states) - n)
        job = a_job(status, job_id=f"{n:032x}", created_at=at, updated_at=at, attempt=3, **changes)
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
        if job_id in {f"{1:032x}", f"{2:032x}"}:
            raise StoreUnavailableError(f"DynamoDB ThrottlingException ({job_id[-1]})")
        return super().retry_by_hand(job_id, **kwargs)


def test_jobs_that_cannot_be_moved_are_failures_each_with_its_error(ports: Ports, clock: ManualClock) -> None:
    store = FailingRetries()
    failed(store, clock, 4)
    work, _ = services(Ports(**{**vars(ports), "store": store}))

    over = start(TENANT, "retry", FILTER, work)

    assert (over.status, over.matched, over.done, over.failed) == ("finished", 4, 2, 2)
    assert [(f.job_id, f.error) for f in over.failures] == [
        (f"{2:032x}", "StoreUnavailableError: DynamoDB ThrottlingException (2)"),
        (f"{1:032x}", "StoreUnavailableError: DynamoDB ThrottlingException (1)"),
    ]


def test_a_status_filter_moves_only_the_jobs_in_that_status(
    ports: Ports, store: InMemoryJobStore, clock: ManualClock
) -> None:
    states = [JobStatus.FAILED, JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.QUEUED, JobStatus.FAILED]
    ids = jobs_in(store, clock, states)
    work, _ = services(ports)

    over = start(TENANT, "retry", FILTER, work)

    assert (over.status, over.matched, over.done, over.skipped) == ("finished", 3, 3, 0)
    assert statuses(store, ids) == [
        JobStatus.QUEUED,
        JobStatus.SUCCEEDED,
        JobStatus.QUEUED,
        JobStatus.QUEUED,
        JobStatus.QUEUED,
    ]
    assert [store.get(i, tenant=TENANT).bulk_operation_id for i in ids] == [  # type: ignore[union-attr]
        over.operation_id,
        None,
        over.operation_id,
        None,
        over.operation_id,
    ]


def test_a_cancel_of_a_types_jobs_counts_those_it_cannot_cancel_by_why_over_its_pages(
    ports: Ports, store: InMemoryJobStore, clock: ManualClock
) -> None:
    # Newest first, pages of four: SUCCEEDED, QUEUED, FAILED, SUCCEEDED | QUEUED, FAILED, SUCCEEDED.
    s, f, q = JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.QUEUED
    ids = jobs_in(store, clock, [s, f, q, s, f, q, s])
    other = store.put(a_job(JobStatus.QUEUED, job_id="e" * 32, type=STRICT_TYPE, created_at=clock.now()))
    work, operations = services(ports)

    over = start(TENANT, "cancel", BulkFilter(tenant=TENANT, job_type=SCRIPTED_TYPE), work)

    assert (over.status, over.pages, over.matched, over.done, over.skipped) == ("finished", 2, 7, 2, 5)
    assert over.skipped_reasons == {"job is SUCCEEDED": 3, "job is FAILED": 2}
    assert statuses(store, ids) == [s, f, JobStatus.CANCELLED, s, f, JobStatus.CANCELLED, s]
    assert store.get(other.job_id, tenant=TENANT).status is JobStatus.QUEUED  # type: ignore[union-attr]
    assert operations.get(TENANT, over.operation_id) == over


def test_a_tag_filter_moves_only_the_jobs_with_that_tags_value(
    ports: Ports, store: InMemoryJobStore, clock: ManualClock
) -> None:
    ids = [
        store.put(a_job(JobStatus.FAILED, job_id=f"{n:032x}", tags=tags, attempt=3, created_at=clock.now())).job_id
        for n, tags in enumerate([{"team": "a"}, {"team": "b"}, {}, {"owner": "a"}, {"team": "a"}])
    ]
    work, _ = services(ports)

    over = start(TENANT, "retry", BulkFilter(tenant=TENANT, status=JobStatus.FAILED, tag=("team", "a")), work)

    assert (over.matched, over.done) == (2, 2)
    assert statuses(store, ids) == [
        JobStatus.QUEUED,
        JobStatus.FAILED,
        JobStatus.FAILED,
        JobStatus.FAILED,
        JobStatus.QUEUED,
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


# -- the dry run -----------------------------------------------------------------------------------


def test_a_dry_run_counts_the_matching_jobs_and_shows_the_ten_newest(
    ports: Ports, store: InMemoryJobStore, clock: ManualClock
) -> None:
    ids = failed(store, clock, 12)
    store.put(a_job(JobStatus.QUEUED, job_id="e" * 32, created_at=clock.now()))
    store.put(a_job(JobStatus.FAILED, job_id="f" * 32, created_at=clock.now(), type="other"))
    store.put(a_job(JobStatus.FAILED, job_id="d" * 32, created_at=clock.now(), tags={"team": "maps"}))

    seen = preview(BulkFilter(tenant=TENANT, status=JobStatus.FAILED, job_type=SCRIPTED_TYPE), ports)

    assert (seen.count, seen.exact, seen.limit) == (13, True, MAX_MATCHED)
    assert [j.job_id for j in seen.sample] == ["d" * 32, *reversed(ids[-9:])]
    tagged = preview(BulkFilter(tenant=TENANT, tag=("team", "maps")), ports)
    assert (tagged.count, [j.job_id for j in tagged.sample]) == (1, ["d" * 32])


def test_a_dry_run_past_its_limit_is_a_lower_bound_and_at_it_exact(
    ports: Ports, store: InMemoryJobStore, clock: ManualClock
) -> None:
    ids = failed(store, clock, 5)

    assert preview(FILTER, ports, limit=4) == Preview(4, False, [store.get(i, tenant=TENANT) for i in ids[:0:-1]], 4)  # type: ignore[misc]
    assert (preview(FILTER, ports, limit=5).count, preview(FILTER, ports, limit=5).exact) == (5, True)


def test_a_dry_run_reads_ten_pages_of_a_hundred_at_most(
    ports: Ports, store: InMemoryJobStore, clock: ManualClock
) -> None:
    failed(store, clock, 1001)

    seen = preview(FILTER, ports)

    assert (seen.count, seen.exact, len(seen.sample), seen.limit) == (1000, False, 10, MAX_MATCHED)
    assert store.reads.count("list_jobs") == 10


def test_a_dry_run_over_two_pages_counts_each_job_once(
    ports: Ports, store: InMemoryJobStore, clock: ManualClock
) -> None:
    failed(store, clock, 150)

    assert (preview(FILTER, ports).count, preview(FILTER, ports).exact) == (150, True)


# -- cancelling, and what a run meets -------------------------------------------------------------------


def test_a_cancel_moves_the_waiting_jobs_and_skips_the_others_by_their_state(
    ports: Ports, store: InMemoryJobStore, clock: ManualClock
) -> None:
    scheduler = InMemoryScheduler()
    earlier = clock.now() - timedelta(seconds=10)
    for letter, status in (("a", JobStatus.QUEUED), ("b", JobStatus.RUNNING), ("c", JobStatus.SUCCEEDED)):
        store.put(a_job(status, job_id=letter * 32, created_at=earlier))
    later = a_job(JobStatus.SCHEDULED, job_id="d" * 32, created_at=earlier, run_at=clock.now() + timedelta(hours=1))
    store.put(later)
    scheduler.create_one_time(later)
    store.put(a_job(JobStatus.QUEUED, job_id="e" * 32, created_at=clock.now()))  # made as the operation starts
    work, _ = services(Ports(**{**vars(ports), "scheduler": scheduler}), retention=timedelta(days=2))

    over = start(TENANT, "cancel", BulkFilter(tenant=TENANT), work)

    assert (over.matched, over.done, over.skipped) == (5, 3, 2)
    assert over.skipped_reasons == {"job is RUNNING": 1, "job is SUCCEEDED": 1}
    for letter in "ade":
        job = store.get(letter * 32, tenant=TENANT)
        assert job is not None and job.status is JobStatus.CANCELLED
        assert (job.bulk_operation_id, job.expires_at) == (over.operation_id, clock.now() + timedelta(days=2))
    assert not scheduler.exists(later.job_id)


class Conflicts(InMemoryJobStore):
    """A store whose hand retries meet what another writer did first: this operation's own move, another
    state, a job changed or gone."""

    def retry_by_hand(self, job_id: str, **kwargs: Any) -> Job:
        job = self.get(job_id, tenant=TENANT)
        assert job is not None
        met = {
            "a": JobConflictError(job.replace(bulk_operation_id=kwargs["operation"]), "job is QUEUED"),
            "b": JobConflictError(job.replace(status=JobStatus.RUNNING), "job is RUNNING"),
            "c": JobConflictError(None, "job changed"),
            "d": JobNotFoundError(job_id),
        }.get(job_id[0])
        if met is not None:
            raise met
        return super().retry_by_hand(job_id, **kwargs)


def test_a_job_another_writer_moved_first_is_done_once_or_skipped_with_what_it_met(
    ports: Ports, clock: ManualClock
) -> None:
    store = Conflicts()
    earlier = clock.now() - timedelta(seconds=10)
    for letter in "abcde":
        store.put(a_job(JobStatus.FAILED, job_id=letter * 32, created_at=earlier, attempt=3))
    work, _ = services(Ports(**{**vars(ports), "store": store}), page_size=10)

    over = start(TENANT, "retry", FILTER, work)

    assert (over.matched, over.done, over.skipped, over.failed) == (5, 2, 3, 0)
    assert over.skipped_reasons == {"job is RUNNING": 1, "job changed": 1, "job is gone": 1}


class OpenJobsFull:
    """A quota gate that admits `room` retries, then refuses over the open jobs."""

    def __init__(self, room: int) -> None:
        self.room = room

    def admit(self, tenant: str, *, delayed: bool) -> None:
        if self.room == 0:
            raise QuotaExceededError("open_jobs", "over the quota of 3 open jobs (not final); 3 are open", 5)
        self.room -= 1


def test_over_a_count_quota_the_operation_stops_at_its_last_checkpoint_saying_why(
    ports: Ports, store: InMemoryJobStore, clock: ManualClock
) -> None:
    ids = failed(store, clock, 5)
    work, operations = services(Ports(**{**vars(ports), "quotas": OpenJobsFull(3)}), page_size=2)

    over = start(TENANT, "retry", FILTER, work)

    assert (over.status, over.stop_reason) == ("stopped", "over the quota of 3 open jobs (not final); 3 are open")
    assert (over.matched, over.done, over.pages, over.limit_reached) == (3, 3, 2, False)
    assert over.cursor is not None and over.cursor == checkpoint_cursor(store, 2)
    assert (over.finished_at, over.updated_at, over.lease_until) == (clock.now(), clock.now(), None)
    assert statuses(store, ids).count(JobStatus.QUEUED) == 3
    assert operations.open_operations() == []


def checkpoint_cursor(store: InMemoryJobStore, page_size: int) -> str | None:
    return store.list_jobs(TENANT, status=None, job_type=None, limit=page_size, cursor=None).cursor


def test_a_finished_operation_says_so_with_its_pages_and_is_logged(
    ports: Ports, store: InMemoryJobStore, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    failed(store, clock, 5)
    store.put(a_job(JobStatus.QUEUED, job_id="e" * 32, created_at=clock.now() - timedelta(seconds=9)))
    work, operations = services(ports, page_size=2)

    with caplog.at_level(logging.INFO, logger="offpath.bulk"):
        over = start(TENANT, "retry", FILTER, work)

    assert (over.status, over.stop_reason, over.cursor, over.pages, over.limit_reached) == (
        "finished",
        None,
        None,
        3,
        False,
    )
    assert (over.finished_at, over.updated_at, over.lease_until) == (clock.now(), clock.now(), None)
    assert operations.get(TENANT, over.operation_id) == over
    [record] = [r for r in caplog.records if r.getMessage() == "bulk operation over"]
    logged = {k: record.__dict__[k] for k in ("operation_id", "status", "matched", "done", "skipped", "failed")}
    assert logged == {
        "operation_id": over.operation_id,
        "status": "finished",
        "matched": 5,
        "done": 5,
        "skipped": 0,
        "failed": 0,
    }


# -- runners: their time, their pages, their leases -------------------------------------------------------


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


def test_a_run_of_no_time_moves_nothing_and_one_of_a_page_moves_one_page(
    ports: Ports, store: InMemoryJobStore, clock: ManualClock
) -> None:
    ids = failed(store, clock, 7)
    work, _ = services(ports, inline_s=0, page_size=2)
    work.monotonic = Seconds(0.0)
    held = start(TENANT, "retry", FILTER, work)
    assert statuses(store, ids) == [JobStatus.FAILED] * 7

    taken = work.operations.take(held, now=clock.now(), lease_until=clock.now() + timedelta(minutes=2))
    one = run(taken, work, seconds=60, max_pages=1)
    assert (one.pages, one.matched, one.lease_until) == (1, 2, clock.now())
    taken = work.operations.take(one, now=clock.now(), lease_until=clock.now() + timedelta(minutes=2))
    two = run(taken, work, seconds=60, max_pages=2)
    assert (two.pages, two.matched, two.status) == (3, 6, "running")
    assert statuses(store, ids).count(JobStatus.QUEUED) == 6


class ListingFails(InMemoryJobStore):
    """A store whose listing fails past the first page (the runner dies there); each listing takes a second of
    `clock`, when given."""

    clock: ManualClock | None = None

    def list_jobs(self, tenant: str, **kwargs: Any) -> Any:
        if self.clock is not None:
            self.clock.advance(1)
        if kwargs["cursor"] is not None:
            raise StoreUnavailableError("DynamoDB ThrottlingException")
        return super().list_jobs(tenant, **kwargs)


def test_a_runner_that_dies_after_a_page_leaves_its_checkpoint_held_for_its_lease(
    ports: Ports, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    store = ListingFails()
    failed(store, clock, 5)
    checkpoint_cursor_ = checkpoint_cursor(store, 2)
    store.clock = clock
    started = clock.now()
    work, operations = services(Ports(**{**vars(ports), "store": store}), page_size=2, lease=timedelta(minutes=3))

    with caplog.at_level(logging.ERROR, logger="offpath.bulk"):
        held = start(TENANT, "retry", FILTER, work)

    assert held == operations.get(TENANT, held.operation_id)
    assert (held.status, held.pages, held.matched, held.done) == ("running", 1, 2, 2)
    checkpointed = started + timedelta(seconds=1)  # the first page's listing took a second
    assert (held.cursor, held.updated_at) == (checkpoint_cursor_, checkpointed)
    assert held.lease_until == checkpointed + timedelta(minutes=3)
    assert [r.getMessage() for r in caplog.records] == [
        "a bulk operation's first slice failed; the sweeper goes on with it"
    ]


def test_a_runner_that_dies_before_its_first_page_leaves_the_operation_held_for_its_lease(
    ports: Ports, clock: ManualClock
) -> None:
    store = InMemoryJobStore()
    store.fail_next("list_jobs", StoreUnavailableError("DynamoDB ThrottlingException"))
    work, _ = services(Ports(**{**vars(ports), "store": store}), lease=timedelta(minutes=3))

    held = start(TENANT, "retry", FILTER, work)

    assert (held.status, held.pages, held.created_at, held.updated_at) == ("running", 0, clock.now(), clock.now())
    assert held.lease_until == clock.now() + timedelta(minutes=3)


def operation(letter: str, clock: ManualClock, **changes: Any) -> BulkOperation:
    now = clock.now()
    return BulkOperation(letter * 32, TENANT, "retry", FILTER, "running", now, now).replace(**changes)


def test_a_sweep_forgets_the_operations_that_are_over_or_gone_and_runs_every_free_one(
    ports: Ports, store: InMemoryJobStore, clock: ManualClock
) -> None:
    failed(store, clock, 2)
    work, operations = services(ports)
    operations.create(operation("a", clock, status="finished"))
    operations.open.add((TENANT, "b" * 32))  # its item is gone
    operations.create(operation("c", clock, lease_until=clock.now() + timedelta(minutes=1)))  # held
    operations.create(operation("d", clock))  # never held
    operations.create(operation("e", clock, lease_until=clock.now()))  # released
    clock.advance(10)

    assert resume(work, seconds=1) == 2

    assert operations.open_operations() == [(TENANT, "c" * 32)]
    for letter in "de":
        over = operations.get(TENANT, letter * 32)
        assert (over.status, over.updated_at, over.finished_at) == ("finished", clock.now(), clock.now())


def test_a_sweep_with_no_time_left_runs_nothing(ports: Ports, store: InMemoryJobStore, clock: ManualClock) -> None:
    failed(store, clock, 2)
    work, operations = services(ports, sweep_s=20.0)
    work.monotonic = Seconds(0.0)
    work.monotonic.now = 100.0
    operations.create(operation("a", clock))

    assert resume(work, seconds=0) == 0
    assert operations.get(TENANT, "a" * 32).pages == 0  # type: ignore[union-attr]


class TakenFirst(InMemoryBulkStore):
    """Another runner takes operation "a" just before this one."""

    def take(self, operation: Any, *, now: Any, lease_until: Any) -> Any:
        if operation.operation_id[0] == "a":
            raise BulkOperationConflictError()
        return super().take(operation, now=now, lease_until=lease_until)


def test_an_operation_another_runner_took_or_that_fails_does_not_stop_the_sweep(
    ports: Ports, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    store = ListingFails()
    failed(store, clock, 1)
    operations = TakenFirst()
    work = BulkServices(Ports(**{**vars(ports), "store": store}), operations, BulkPolicy(page_size=4))
    for letter in "abc":
        operations.create(operation(letter, clock, filter=BulkFilter(tenant=TENANT) if letter == "b" else FILTER))
    store.fail_next("list_jobs", StoreUnavailableError("DynamoDB ThrottlingException"))  # b's first page

    with caplog.at_level(logging.ERROR, logger="offpath.bulk"):
        assert resume(work) == 1

    assert operations.get(TENANT, "c" * 32).status == "finished"
    b = operations.get(TENANT, "b" * 32)
    assert (b.status, b.lease_until) == ("running", clock.now() + BulkPolicy().lease)
    [record] = caplog.records
    assert record.getMessage() == "a bulk operation could not be continued"
    assert record.__dict__["operation_id"] == "b" * 32


def test_a_filtered_operation_lists_only_the_jobs_its_filter_names(
    ports: Ports, store: InMemoryJobStore, clock: ManualClock
) -> None:
    for n, (job_type, tags) in enumerate(
        [(SCRIPTED_TYPE, {"team": "maps"})] * 4 + [("other", {})] * 4 + [("other", {"team": "maps"})] * 2
    ):
        at = clock.now() - timedelta(seconds=20 - n)
        store.put(a_job(JobStatus.FAILED, job_id=f"{n:032x}", created_at=at, type=job_type, tags=tags, attempt=3))
    work, _ = services(ports, page_size=2)

    over = start(TENANT, "retry", BulkFilter(tenant=TENANT, job_type="other", tag=("team", "maps")), work)

    assert (over.matched, over.done, over.pages) == (2, 2, 2)


def test_a_runner_leaves_the_page_when_its_wait_for_the_bucket_would_end_just_at_its_deadline(
    ports: Ports, store: InMemoryJobStore, clock: ManualClock
) -> None:
    failed(store, clock, 2)
    # The clock's fourth read (the wait's check) is 1.0 s: with the 1 s wait, the deadline (0.25 + 1.75) exactly.
    work, _ = services(Ports(**{**vars(ports), "quotas": RateOnce()}), inline_s=1.75)
    work.monotonic = Seconds(0.25)
    slept: list[float] = []
    work.sleep = slept.append

    held = start(TENANT, "retry", FILTER, work)

    assert (held.status, held.matched, slept) == ("running", 0, [])
