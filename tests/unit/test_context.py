"""What a job function gets: `ctx.once` guards side effects, `ctx.progress` shows how far it is, `ctx.batch` and
`ctx.submit_batch` read and make batches (here through a gateway over a few batches in memory; the real one,
logic/batches.py:JobBatches, in tests/integration/test_batch_context.py)."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

import pytest

from offpath.domain.batch import Batch
from offpath.domain.context import JobContext, NoSubmitPortError
from offpath.domain.errors import JobConflictError
from offpath.domain.job import Job, JobStatus, Progress
from offpath_tools.clocks import ManualClock
from offpath_tools.fakes import InMemoryJobStore
from tests.unit.conftest import START, TENANT, a_job

LOGGER = logging.getLogger("offpath.test")


@pytest.fixture
def running_job(store: InMemoryJobStore, clock: ManualClock) -> Job:
    return store.put(a_job(JobStatus.RUNNING, attempt=2, lease_until=clock.now() + timedelta(minutes=1)))


def context_for(
    job: Job, store: InMemoryJobStore, clock: ManualClock, remaining_ms: int = 5_000, **options: Any
) -> JobContext:
    return JobContext(job, store=store, clock=clock, remaining_ms=lambda: remaining_ms, logger=LOGGER, **options)


class MarkExpiries(InMemoryJobStore):
    """The store, keeping each once-mark's expiry (the item's `expires_at`, which DynamoDB's TTL reads)."""

    def __init__(self) -> None:
        super().__init__()
        self.expiries: dict[tuple[str, str], datetime] = {}

    def mark_once(self, job_id: str, name: str, *, now: datetime, expires_at: datetime) -> bool:
        first = super().mark_once(job_id, name, now=now, expires_at=expires_at)
        if first:
            self.expiries[(job_id, name)] = expires_at
        return first


def test_once_is_true_the_first_time_and_false_ever_after(
    running_job: Job, store: InMemoryJobStore, clock: ManualClock
) -> None:
    ctx = context_for(running_job, store, clock)

    assert [ctx.once("email"), ctx.once("email"), context_for(running_job, store, clock).once("email")] == [
        True,
        False,
        False,
    ]


def test_once_marks_each_name_separately(running_job: Job, store: InMemoryJobStore, clock: ManualClock) -> None:
    ctx = context_for(running_job, store, clock)
    ctx.once("email")

    assert ctx.once("sms") is True


def test_once_marks_each_job_separately(running_job: Job, store: InMemoryJobStore, clock: ManualClock) -> None:
    context_for(running_job, store, clock).once("email")
    other = store.put(running_job.replace(job_id="1" * 32))

    assert context_for(other, store, clock).once("email") is True


def test_once_across_jobs_holds_for_every_job_of_the_tenant(
    running_job: Job, store: InMemoryJobStore, clock: ManualClock
) -> None:
    context_for(running_job, store, clock).once("charge:c-42:2026-03", across_jobs=True)
    other = store.put(running_job.replace(job_id="1" * 32))

    assert context_for(other, store, clock).once("charge:c-42:2026-03", across_jobs=True) is False


def test_once_across_jobs_does_not_cross_tenants(running_job: Job, store: InMemoryJobStore, clock: ManualClock) -> None:
    context_for(running_job, store, clock).once("charge", across_jobs=True)
    other = store.put(running_job.replace(job_id="1" * 32, tenant="tenant-b"))

    assert context_for(other, store, clock).once("charge", across_jobs=True) is True


def test_a_once_mark_is_kept_30_days_and_one_across_jobs_400_days(running_job: Job, clock: ManualClock) -> None:
    store = MarkExpiries()
    store.put(running_job)
    ctx = context_for(running_job, store, clock)

    ctx.once("email")
    ctx.once("charge", across_jobs=True)

    assert store.expiries == {
        (running_job.job_id, "email"): clock.now() + timedelta(days=30),
        (f"tenant:{TENANT}", "charge"): clock.now() + timedelta(days=400),
    }


def test_once_across_jobs_of_a_type_shared_across_tenants_holds_for_every_tenant(
    running_job: Job, store: InMemoryJobStore, clock: ManualClock
) -> None:
    context_for(running_job, store, clock, shared_across_tenants=True).once("rotate-keys", across_jobs=True)
    other = store.put(running_job.replace(job_id="1" * 32, tenant="tenant-b"))

    assert context_for(other, store, clock, shared_across_tenants=True).once("rotate-keys", across_jobs=True) is False
    assert context_for(other, store, clock).once("rotate-keys", across_jobs=True) is True


def test_progress_is_stored_on_the_job(running_job: Job, store: InMemoryJobStore, clock: ManualClock) -> None:
    context_for(running_job, store, clock).progress(0.25, "a quarter")

    assert store.get(running_job.job_id, tenant=running_job.tenant).progress == Progress(0.25, "a quarter")


@pytest.mark.parametrize(("fraction", "stored"), [(-0.5, 0.0), (1.7, 1.0), (1, 1.0)])
def test_progress_is_kept_between_zero_and_one(
    running_job: Job, store: InMemoryJobStore, clock: ManualClock, fraction: float, stored: float
) -> None:
    context_for(running_job, store, clock).progress(fraction)

    assert store.get(running_job.job_id, tenant=running_job.tenant).progress.fraction == stored


def test_progress_without_a_message_stores_an_empty_one(
    running_job: Job, store: InMemoryJobStore, clock: ManualClock
) -> None:
    context_for(running_job, store, clock).progress(0.5)

    stored = store.get(running_job.job_id, tenant=running_job.tenant)
    assert stored is not None and stored.progress == Progress(0.5, "")


def test_a_long_progress_message_is_cut_to_200_characters(
    running_job: Job, store: InMemoryJobStore, clock: ManualClock
) -> None:
    context_for(running_job, store, clock).progress(0.5, "x" * 1000)

    assert store.get(running_job.job_id, tenant=running_job.tenant).progress.message == "x" * 200


def test_progress_from_an_attempt_that_lost_the_job_is_refused(
    running_job: Job, store: InMemoryJobStore, clock: ManualClock
) -> None:
    stale = context_for(running_job.replace(attempt=1), store, clock)

    with pytest.raises(JobConflictError):
        stale.progress(0.5)

    assert store.get(running_job.job_id, tenant=running_job.tenant).progress is None


def test_the_context_tells_the_job_who_and_where_it_is(
    running_job: Job, store: InMemoryJobStore, clock: ManualClock
) -> None:
    ctx = context_for(running_job, store, clock, remaining_ms=2_500)

    assert (ctx.job_id, ctx.attempt, ctx.max_attempts, ctx.tenant) == (running_job.job_id, 2, 3, "tenant-a")
    assert ctx.remaining_time_s == 2.5
    assert ctx.logger is LOGGER


def test_submit_without_a_submit_port_says_so(running_job: Job, store: InMemoryJobStore, clock: ManualClock) -> None:
    with pytest.raises(NoSubmitPortError) as refused:
        context_for(running_job, store, clock).submit("reports.build", {}, key="k-1")

    assert str(refused.value) == "this job's context has no submit port"


# -- batches -------------------------------------------------------------------------------------------------------


def a_batch(batch_id: str, **changes: Any) -> Batch:
    return Batch(batch_id=batch_id, tenant=TENANT, created_at=START, updated_at=START, **changes)


class PagedBatches:
    """A BatchGateway over batches in memory: their members two to a page, and the batches submitted."""

    def __init__(self, *batches: tuple[Batch, list[Job]]) -> None:
        self.batches = {batch.batch_id: (batch, jobs) for batch, jobs in batches}
        self.reads: list[tuple[str, str]] = []
        self.submitted: list[dict[str, Any]] = []

    def read(self, batch_id: str, *, tenant: str) -> Batch:
        self.reads.append((batch_id, tenant))
        return self.batches[batch_id][0]

    def jobs(self, batch: Batch, *, cursor: str | None) -> tuple[list[Job], str | None]:
        start = 0 if cursor is None else int(cursor)
        members = self.batches[batch.batch_id][1]
        return members[start : start + 2], str(start + 2) if start + 2 < len(members) else None

    def submit(
        self,
        parent: Job,
        jobs: Sequence[Mapping[str, Any]],
        *,
        on_complete: Mapping[str, Any] | None,
        on_success: Mapping[str, Any] | None,
        key: str,
    ) -> Batch:
        self.submitted.append(
            {"parent": parent.job_id, "jobs": list(jobs), "on_complete": on_complete, "on_success": on_success}
        )
        batch = a_batch(f"{parent.job_id}:{key}", total=len(jobs), parent_job_id=parent.job_id)
        self.batches[batch.batch_id] = (batch, [])
        return batch


def members(statuses: list[JobStatus]) -> list[Job]:
    return [
        a_job(status, job_id=f"{n:032x}", batch_id="b-1", result={"n": n} if status is JobStatus.SUCCEEDED else None)
        for n, status in enumerate(statuses)
    ]


def test_a_callback_reads_its_batchs_counts(running_job: Job, store: InMemoryJobStore, clock: ManualClock) -> None:
    counts = {"SUCCEEDED": 3, "FAILED": 1, "CANCELLED": 2}
    batches = PagedBatches((a_batch("b-1", total=8, counts=counts), []))
    callback = running_job.replace(callback_of="b-1")

    seen = context_for(callback, store, clock, batches=batches).batch

    assert seen is not None
    assert (seen.batch_id, seen.total, seen.pending) == ("b-1", 8, 2)
    assert (seen.succeeded, seen.failed, seen.cancelled, seen.counts) == (3, 1, 2, counts)
    assert seen.batch == a_batch("b-1", total=8, counts=counts)
    assert batches.reads == [("b-1", TENANT)]


def test_a_state_no_member_reached_counts_zero(running_job: Job, store: InMemoryJobStore, clock: ManualClock) -> None:
    batches = PagedBatches((a_batch("b-1", total=2, counts={"SUCCEEDED": 2}), []))

    seen = context_for(running_job.replace(callback_of="b-1"), store, clock, batches=batches).batch

    assert seen is not None
    assert (seen.failed, seen.count("EXPIRED")) == (0, 0)


def test_a_member_reads_its_own_batch_and_a_job_of_no_batch_reads_none(
    running_job: Job, store: InMemoryJobStore, clock: ManualClock
) -> None:
    batches = PagedBatches((a_batch("b-1", total=1), []))

    member = context_for(running_job.replace(batch_id="b-1"), store, clock, batches=batches).batch

    assert member is not None and member.batch_id == "b-1"
    assert context_for(running_job, store, clock, batches=batches).batch is None
    assert context_for(running_job.replace(batch_id="b-1"), store, clock).batch is None
    assert batches.reads == [("b-1", TENANT)]


def test_a_callback_walks_every_page_of_its_batchs_jobs_and_their_results(
    running_job: Job, store: InMemoryJobStore, clock: ManualClock
) -> None:
    statuses = [JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.SUCCEEDED, JobStatus.CANCELLED, JobStatus.SUCCEEDED]
    batches = PagedBatches((a_batch("b-1", total=5), members(statuses)))

    seen = context_for(running_job.replace(callback_of="b-1"), store, clock, batches=batches).batch

    assert seen is not None
    assert [job.job_id for job in seen.jobs()] == [f"{n:032x}" for n in range(5)]
    assert list(seen.results()) == [
        (f"{0:032x}", "SUCCEEDED", {"n": 0}),
        (f"{1:032x}", "FAILED", None),
        (f"{2:032x}", "SUCCEEDED", {"n": 2}),
        (f"{3:032x}", "CANCELLED", None),
        (f"{4:032x}", "SUCCEEDED", {"n": 4}),
    ]


def test_a_batch_of_one_page_is_read_in_one_call(running_job: Job, store: InMemoryJobStore, clock: ManualClock) -> None:
    batches = PagedBatches((a_batch("b-1", total=1), members([JobStatus.SUCCEEDED])))

    seen = context_for(running_job.replace(callback_of="b-1"), store, clock, batches=batches).batch

    assert seen is not None
    assert list(seen.results()) == [(f"{0:032x}", "SUCCEEDED", {"n": 0})]


def test_submit_batch_hands_the_jobs_callbacks_and_key_over_and_gives_the_new_batch(
    running_job: Job, store: InMemoryJobStore, clock: ManualClock
) -> None:
    batches = PagedBatches()
    jobs = [{"type": "reports.build", "payload": {"n": n}} for n in range(3)]
    on_complete = {"type": "reports.merge"}
    on_success = {"type": "reports.mail", "payload": {"to": "ops"}}

    made = context_for(running_job, store, clock, batches=batches).submit_batch(
        jobs, key="fan-out", on_complete=on_complete, on_success=on_success
    )

    assert batches.submitted == [
        {"parent": running_job.job_id, "jobs": jobs, "on_complete": on_complete, "on_success": on_success}
    ]
    assert (made.batch_id, made.total, made.pending) == (f"{running_job.job_id}:fan-out", 3, 3)
    assert made.batch.parent_job_id == running_job.job_id
    assert list(made.jobs()) == []


def test_submit_batch_without_a_batch_store_says_so(
    running_job: Job, store: InMemoryJobStore, clock: ManualClock
) -> None:
    with pytest.raises(RuntimeError) as refused:
        context_for(running_job, store, clock).submit_batch([{"type": "reports.build"}], key="fan-out")

    assert str(refused.value) == "no batch store configured"
