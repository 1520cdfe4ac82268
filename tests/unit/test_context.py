"""What a job function gets: `ctx.once` guards side effects, `ctx.progress` shows how far it is."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest

from offpath.domain.context import JobContext
from offpath.domain.errors import JobConflictError
from offpath.domain.job import Job, JobStatus, Progress
from offpath_tools.clocks import ManualClock
from offpath_tools.fakes import InMemoryJobStore
from tests.unit.conftest import a_job


@pytest.fixture
def running_job(store: InMemoryJobStore, clock: ManualClock) -> Job:
    return store.put(a_job(JobStatus.RUNNING, attempt=2, lease_until=clock.now() + timedelta(minutes=1)))


def context_for(job: Job, store: InMemoryJobStore, clock: ManualClock, remaining_ms: int = 5_000) -> JobContext:
    return JobContext(
        job, store=store, clock=clock, remaining_ms=lambda: remaining_ms, logger=logging.getLogger("offpath.test")
    )


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


def test_progress_is_stored_on_the_job(running_job: Job, store: InMemoryJobStore, clock: ManualClock) -> None:
    context_for(running_job, store, clock).progress(0.25, "a quarter")

    assert store.get(running_job.job_id, tenant=running_job.tenant).progress == Progress(0.25, "a quarter")


@pytest.mark.parametrize(("fraction", "stored"), [(-0.5, 0.0), (1.7, 1.0), (1, 1.0)])
def test_progress_is_kept_between_zero_and_one(
    running_job: Job, store: InMemoryJobStore, clock: ManualClock, fraction: float, stored: float
) -> None:
    context_for(running_job, store, clock).progress(fraction)

    assert store.get(running_job.job_id, tenant=running_job.tenant).progress.fraction == stored


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
