"""One contract, two stores: the DynamoDB store (under moto) and the in-memory fake decide alike.

This is what keeps the fake honest for the unit tests, and where attempt fencing (TESTPLAN 20) is
checked on the store itself with a clock the test controls. Both stores are also checked against the
transitions declared in offpath.domain.job, state by state and guard by guard: a store that allows
a change the declaration forbids (or refuses one it allows) fails here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from offpath.adapters.dynamodb_store import DynamoDbJobStore, condition_of, iso, parse_iso
from offpath.domain.errors import (
    IdempotencyConflictError,
    InvalidRequestError,
    JobConflictError,
    JobNotFoundError,
)
from offpath.domain.job import TRANSITIONS, Facts, Guard, Job, JobStatus, Progress, Transition
from offpath.domain.ports import DebounceRecord, JobStore
from offpath_tools.fakes import InMemoryJobStore

T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
LEASE = timedelta(seconds=60)
RETENTION = timedelta(days=7)
TENANT = "tenant-a"


@pytest.fixture(params=["in-memory", "dynamodb"])
def job_store(request: pytest.FixtureRequest) -> JobStore:
    if request.param == "in-memory":
        return InMemoryJobStore()
    store: JobStore = request.getfixturevalue("store")
    return store


def new_job(
    n: int = 1, *, tenant: str = TENANT, payload_hash: str = "h1", submission: str = "s1", **changes: Any
) -> Job:
    job = Job(
        job_id=f"{n:032x}",
        tenant=tenant,
        type="demo.echo",
        queue="default",
        payload={"n": n},
        payload_hash=payload_hash,
        status=JobStatus.QUEUED,
        created_at=T0 + timedelta(seconds=n),
        updated_at=T0 + timedelta(seconds=n),
        max_attempts=3,
        idempotency_key=f"key-{n}",
        submission_id=submission,
        sweep_at=T0 + timedelta(minutes=2),
    )
    return job.replace(**changes)


def claim(store: JobStore, job: Job, now: datetime = T0) -> Job:
    return store.claim(job.job_id, tenant=job.tenant, now=now, lease_until=now + LEASE)


def current(store: JobStore, job: Job) -> Job:
    found = store.get(job.job_id, tenant=job.tenant)
    assert found is not None
    return found


# -- create: the idempotency decision ----------------------------------------------------------


def test_a_new_job_is_created(job_store: JobStore) -> None:
    outcome = job_store.create(new_job())

    assert not outcome.replayed
    assert current(job_store, new_job()).status is JobStatus.QUEUED


def test_a_retry_of_the_same_write_is_the_same_new_job(job_store: JobStore) -> None:
    job_store.create(new_job())

    outcome = job_store.create(new_job())

    assert (outcome.replayed, outcome.job.job_id) == (False, new_job().job_id)


def test_another_submission_with_the_same_payload_is_a_replay(job_store: JobStore) -> None:
    job_store.create(new_job())

    outcome = job_store.create(new_job(submission="s2"))

    assert outcome.replayed
    assert outcome.job.submission_id == "s1"


def test_another_submission_with_another_payload_is_a_conflict(job_store: JobStore) -> None:
    job_store.create(new_job())

    with pytest.raises(IdempotencyConflictError) as raised:
        job_store.create(new_job(submission="s2", payload_hash="h2"))

    assert raised.value.existing.payload_hash == "h1"
    assert current(job_store, new_job()).payload_hash == "h1"


def test_an_unknown_job_is_none(job_store: JobStore) -> None:
    assert job_store.get("f" * 32, tenant="tenant-a") is None


def test_another_tenants_job_is_no_job(job_store: JobStore) -> None:
    """A job is read by its tenant and id (its key): another tenant's id finds nothing, never the job."""
    job_store.create(new_job())

    assert job_store.get(new_job().job_id, tenant="tenant-b") is None
    assert job_store.get(new_job().job_id, tenant=new_job().tenant) is not None


# -- claim ---------------------------------------------------------------------------------------


def test_a_claim_takes_the_job_with_a_lease_and_the_next_attempt(job_store: JobStore) -> None:
    job_store.create(new_job())

    claimed = claim(job_store, new_job())

    assert (claimed.status, claimed.attempt, claimed.lease_until) == (JobStatus.RUNNING, 1, T0 + LEASE)
    assert current(job_store, claimed).attempt == 1


def test_a_second_claim_while_the_lease_is_held_is_refused_with_the_job(job_store: JobStore) -> None:
    job_store.create(new_job())
    claim(job_store, new_job())

    with pytest.raises(JobConflictError) as raised:
        claim(job_store, new_job(), now=T0 + timedelta(seconds=30))

    assert raised.value.job is not None
    assert (raised.value.job.status, raised.value.job.attempt) == (JobStatus.RUNNING, 1)


def test_a_claim_after_the_lease_expired_is_the_next_attempt(job_store: JobStore) -> None:
    job_store.create(new_job())
    claim(job_store, new_job())

    again = claim(job_store, new_job(), now=T0 + LEASE)

    assert again.attempt == 2


def test_a_claim_with_no_attempts_left_is_refused(job_store: JobStore) -> None:
    job_store.create(new_job(max_attempts=1))
    claim(job_store, new_job())

    with pytest.raises(JobConflictError):
        claim(job_store, new_job(), now=T0 + LEASE)


def test_a_claim_of_an_unknown_job_is_not_found(job_store: JobStore) -> None:
    with pytest.raises(JobNotFoundError):
        claim(job_store, new_job())


def test_a_claim_naming_another_tenant_is_refused_without_the_job(job_store: JobStore) -> None:
    """The message's tenant is part of the job's key: under another tenant there is no such job."""
    job_store.create(new_job())

    with pytest.raises(JobNotFoundError):
        claim(job_store, new_job(tenant="tenant-b"))

    assert current(job_store, new_job()).status is JobStatus.QUEUED


# -- outcomes and fencing (TESTPLAN 20) ----------------------------------------------------------


def test_success_stores_the_result_as_json(job_store: JobStore) -> None:
    job_store.create(new_job())
    claimed = claim(job_store, new_job())

    job_store.record_success(claimed, result={"at": T0, "n": 1}, now=T0, expires_at=T0 + RETENTION)

    done = current(job_store, claimed)
    assert (done.status, done.result, done.sweep_at) == (JobStatus.SUCCEEDED, {"at": str(T0), "n": 1}, None)


def test_a_retry_makes_the_job_claimable_for_its_next_attempt(job_store: JobStore) -> None:
    job_store.create(new_job())
    first = claim(job_store, new_job())

    job_store.record_retry(first, error="boom", now=T0, next_attempt_at=T0 + timedelta(seconds=4))

    waiting = current(job_store, first)
    assert (waiting.status, waiting.error, waiting.next_attempt_at) == (
        JobStatus.RETRYING,
        "boom",
        T0 + timedelta(seconds=4),
    )
    assert claim(job_store, new_job(), now=T0 + timedelta(seconds=1)).attempt == 2


@pytest.mark.parametrize("late_outcome", ["record_success", "record_retry", "record_failure"])
def test_a_late_attempt_cannot_overwrite_the_outcome_of_a_newer_one(job_store: JobStore, late_outcome: str) -> None:
    job_store.create(new_job())
    late = claim(job_store, new_job())
    newer = claim(job_store, new_job(), now=T0 + LEASE)
    job_store.record_success(newer, result="newer", now=T0 + LEASE, expires_at=T0 + RETENTION)
    arguments: dict[str, Any] = {
        "record_success": {"result": "late", "expires_at": T0 + RETENTION},
        "record_retry": {"error": "late", "next_attempt_at": T0 + LEASE},
        "record_failure": {"error": "late", "expires_at": T0 + RETENTION},
    }[late_outcome]

    with pytest.raises(JobConflictError):
        getattr(job_store, late_outcome)(late, now=T0 + 2 * LEASE, **arguments)

    final = current(job_store, newer)
    assert (final.status, final.attempt, final.result, final.error) == (JobStatus.SUCCEEDED, 2, "newer", None)


def test_a_late_attempt_cannot_fail_a_job_while_the_newer_attempt_runs(job_store: JobStore) -> None:
    job_store.create(new_job())
    late = claim(job_store, new_job())
    claim(job_store, new_job(), now=T0 + LEASE)

    with pytest.raises(JobConflictError):
        job_store.record_failure(late, error="late", now=T0 + LEASE, expires_at=T0 + RETENTION)

    assert (current(job_store, late).status, current(job_store, late).attempt) == (JobStatus.RUNNING, 2)


def test_an_expired_lease_fails_the_job_only_once_it_has_expired(job_store: JobStore) -> None:
    job_store.create(new_job())
    claimed = claim(job_store, new_job())

    with pytest.raises(JobConflictError):
        job_store.fail_expired_lease(claimed, now=T0 + timedelta(seconds=1), expires_at=T0 + RETENTION)
    job_store.fail_expired_lease(claimed, now=T0 + LEASE, expires_at=T0 + RETENTION)

    failed = current(job_store, claimed)
    assert (failed.status, failed.error) == (JobStatus.FAILED, "lease expired")


def test_an_expired_lease_of_an_older_attempt_fails_nothing(job_store: JobStore) -> None:
    job_store.create(new_job())
    older = claim(job_store, new_job())
    newer = claim(job_store, new_job(), now=T0 + LEASE)

    with pytest.raises(JobConflictError):
        job_store.fail_expired_lease(older, now=T0 + 3 * LEASE, expires_at=T0 + RETENTION)

    assert current(job_store, newer).status is JobStatus.RUNNING


def test_progress_is_stored_for_the_attempt_holding_the_job_only(job_store: JobStore) -> None:
    job_store.create(new_job())
    claim(job_store, new_job())
    claim(job_store, new_job(), now=T0 + LEASE)

    tenant = new_job().tenant
    job_store.set_progress(new_job().job_id, tenant=tenant, attempt=2, progress=Progress(0.5, "half"), now=T0 + LEASE)
    with pytest.raises(JobConflictError):
        job_store.set_progress(
            new_job().job_id, tenant=tenant, attempt=1, progress=Progress(0.9, "late"), now=T0 + LEASE
        )

    assert current(job_store, new_job()).progress == Progress(0.5, "half")


# -- cancel, once -------------------------------------------------------------------------------


def test_a_queued_job_is_cancelled(job_store: JobStore) -> None:
    job_store.create(new_job())

    cancelled = job_store.cancel(new_job().job_id, tenant=TENANT, now=T0, expires_at=T0 + RETENTION)

    assert (cancelled.status, current(job_store, cancelled).status) == (JobStatus.CANCELLED, JobStatus.CANCELLED)


def test_a_running_job_is_not_cancelled(job_store: JobStore) -> None:
    job_store.create(new_job())
    claim(job_store, new_job())

    with pytest.raises(JobConflictError) as raised:
        job_store.cancel(new_job().job_id, tenant=TENANT, now=T0, expires_at=T0 + RETENTION)

    assert str(raised.value) == "a RUNNING job cannot be cancelled"


def test_another_tenants_job_is_not_found_for_cancel(job_store: JobStore) -> None:
    job_store.create(new_job())

    with pytest.raises(JobNotFoundError):
        job_store.cancel(new_job().job_id, tenant="tenant-b", now=T0, expires_at=T0 + RETENTION)

    assert current(job_store, new_job()).status is JobStatus.QUEUED


def test_an_unknown_job_is_not_found_for_cancel(job_store: JobStore) -> None:
    with pytest.raises(JobNotFoundError):
        job_store.cancel(new_job().job_id, tenant=TENANT, now=T0, expires_at=T0 + RETENTION)


def test_once_is_true_the_first_time_only(job_store: JobStore) -> None:
    marks = [
        job_store.mark_once("j1", "email", now=T0, expires_at=T0 + RETENTION),
        job_store.mark_once("j1", "email", now=T0, expires_at=T0 + RETENTION),
        job_store.mark_once("j1", "sms", now=T0, expires_at=T0 + RETENTION),
        job_store.mark_once("j2", "email", now=T0, expires_at=T0 + RETENTION),
    ]

    assert marks == [True, False, True, True]


# -- listing ------------------------------------------------------------------------------------


def test_a_tenants_jobs_are_listed_newest_first_in_pages(job_store: JobStore) -> None:
    for n in range(1, 6):
        job_store.create(new_job(n))
    job_store.create(new_job(9, tenant="tenant-b"))

    pages, cursor = [], None
    for _ in range(3):
        page = job_store.list_jobs(TENANT, status=None, job_type=None, limit=2, cursor=cursor)
        pages.append([int(job.job_id, 16) for job in page.jobs])
        cursor = page.cursor

    assert pages == [[5, 4], [3, 2], [1]]
    assert cursor is None


def test_a_filtered_page_reads_past_the_jobs_that_do_not_match(job_store: JobStore) -> None:
    for n in range(1, 4):
        job_store.create(new_job(n))
    claim(job_store, new_job(3))

    page = job_store.list_jobs(TENANT, status=JobStatus.QUEUED, job_type=None, limit=1, cursor=None)
    rest = job_store.list_jobs(TENANT, status=JobStatus.QUEUED, job_type=None, limit=10, cursor=page.cursor)

    assert [int(job.job_id, 16) for job in page.jobs] == [2]  # the newest job is RUNNING: passed, not counted
    assert [int(job.job_id, 16) for job in rest.jobs] == [1]
    assert rest.cursor is None


def test_a_filtered_page_stops_at_its_read_budget_with_a_cursor(job_store: JobStore) -> None:
    for n in range(1, 13):
        job_store.create(new_job(n))
    claim(job_store, new_job(12))
    claim(job_store, new_job(1))

    page = job_store.list_jobs(TENANT, status=JobStatus.RUNNING, job_type=None, limit=1, cursor=None)
    nothing = job_store.list_jobs(TENANT, status=JobStatus.RUNNING, job_type=None, limit=1, cursor=page.cursor)
    last = job_store.list_jobs(TENANT, status=JobStatus.RUNNING, job_type=None, limit=1, cursor=nothing.cursor)

    assert [int(job.job_id, 16) for job in page.jobs] == [12]
    assert nothing.jobs == []  # 10 jobs passed (11 .. 2), none running: the budget of 10 x 1 is spent
    assert nothing.cursor is not None
    assert [int(job.job_id, 16) for job in last.jobs] == [1]


def test_a_cursor_from_another_tenant_is_refused(job_store: JobStore) -> None:
    for n in range(1, 3):
        job_store.create(new_job(n))
    cursor = job_store.list_jobs(TENANT, status=None, job_type=None, limit=1, cursor=None).cursor

    with pytest.raises(InvalidRequestError):
        job_store.list_jobs("tenant-b", status=None, job_type=None, limit=1, cursor=cursor)


# -- sweeping and redrive -----------------------------------------------------------------------


def test_jobs_due_for_a_sweep_are_the_unfinished_ones_whose_time_passed(job_store: JobStore) -> None:
    job_store.create(new_job(1, sweep_at=T0))
    job_store.create(new_job(2, sweep_at=T0 + timedelta(hours=1)))
    job_store.create(new_job(3, sweep_at=T0 - timedelta(minutes=1)))
    done = claim(job_store, new_job(3), now=T0 - timedelta(minutes=1))
    job_store.record_success(done, result=None, now=T0, expires_at=T0 + RETENTION)

    due = job_store.due_for_sweep(now=T0, limit=10)

    assert [int(job.job_id, 16) for job in due] == [1]


def test_of_two_sweeps_that_saw_the_same_time_only_one_moves_it(job_store: JobStore) -> None:
    job_store.create(new_job(1, sweep_at=T0))
    seen = current(job_store, new_job(1))

    job_store.reschedule_sweep(seen, sweep_at=T0 + LEASE, resent=True)
    with pytest.raises(JobConflictError):
        job_store.reschedule_sweep(seen, sweep_at=T0 + 2 * LEASE, resent=True)

    swept = current(job_store, seen)
    assert (swept.sweep_at, swept.resends) == (T0 + LEASE, 1)


def test_a_redrive_gives_a_failed_job_a_fresh_budget_once(job_store: JobStore) -> None:
    job_store.create(new_job())
    claimed = claim(job_store, new_job())
    job_store.record_failure(claimed, error="bad", now=T0, expires_at=T0 + RETENTION)

    again = job_store.reset_for_redrive(claimed.job_id, tenant=TENANT, now=T0, sweep_at=T0 + LEASE)
    with pytest.raises(JobConflictError):
        job_store.reset_for_redrive(claimed.job_id, tenant=TENANT, now=T0, sweep_at=T0 + LEASE)

    assert (again.status, again.attempt, again.redrives, again.error) == (JobStatus.QUEUED, 0, 1, None)


@pytest.mark.parametrize("end", ["failed", "cancelled"])
def test_a_hand_retry_gives_a_failed_or_cancelled_job_a_fresh_budget_and_counts_it(
    job_store: JobStore, end: str
) -> None:
    job_store.create(new_job())
    if end == "failed":
        claimed = claim(job_store, new_job())
        job_store.record_failure(claimed, error="bad", now=T0, expires_at=T0 + RETENTION)
    else:
        job_store.cancel(new_job().job_id, tenant=TENANT, now=T0, expires_at=T0 + RETENTION)

    again = job_store.retry_by_hand(new_job().job_id, tenant=TENANT, now=T0 + LEASE, sweep_at=T0 + 2 * LEASE)

    stored = current(job_store, again)
    assert (stored.status, stored.attempt, stored.retries, stored.error) == (JobStatus.QUEUED, 0, 1, None)
    assert (stored.finished_at, stored.expires_at, stored.sweep_at) == (None, None, T0 + 2 * LEASE)
    assert stored.retried_at == T0 + LEASE
    assert [j.job_id for j in job_store.due_for_sweep(now=T0 + 2 * LEASE, limit=10)] == [stored.job_id]
    assert claim(job_store, new_job(), now=T0 + 2 * LEASE).attempt == 1


# -- expiry and debounce --------------------------------------------------------------------------


def test_a_waiting_job_past_its_expiry_is_expired_once_and_kept_for_the_retention(job_store: JobStore) -> None:
    job_store.create(new_job(start_by=T0 + LEASE))
    later = T0 + 2 * LEASE

    expired = job_store.expire(new_job().job_id, tenant=TENANT, now=later, expires_at=later + RETENTION)
    with pytest.raises(JobConflictError) as again:
        job_store.expire(new_job().job_id, tenant=TENANT, now=later + LEASE, expires_at=later + RETENTION)

    stored = current(job_store, expired)
    assert (stored.status, stored.attempt, stored.finished_at, stored.start_by) == (
        JobStatus.EXPIRED,
        0,
        later,
        T0 + LEASE,
    )
    assert stored.expires_at == later + RETENTION and stored.sweep_at is None
    assert again.value.job is not None and again.value.job.status is JobStatus.EXPIRED
    assert job_store.due_for_sweep(now=later + RETENTION, limit=10) == []


def test_a_job_is_not_expired_before_its_expiry_or_without_one(job_store: JobStore) -> None:
    job_store.create(new_job(1, start_by=T0 + 2 * LEASE))
    job_store.create(new_job(2))

    for n in (1, 2):
        with pytest.raises(JobConflictError):
            job_store.expire(new_job(n).job_id, tenant=TENANT, now=T0 + LEASE, expires_at=T0 + RETENTION)
        assert current(job_store, new_job(n)).status is JobStatus.QUEUED


def test_a_hand_retry_of_an_expired_job_runs_it_again_without_its_expiry(job_store: JobStore) -> None:
    job_store.create(new_job(start_by=T0))
    job_store.expire(new_job().job_id, tenant=TENANT, now=T0 + LEASE, expires_at=T0 + RETENTION)

    again = job_store.retry_by_hand(new_job().job_id, tenant=TENANT, now=T0 + 2 * LEASE, sweep_at=T0 + 3 * LEASE)

    stored = current(job_store, again)
    assert (stored.status, stored.retries, stored.start_by, stored.finished_at) == (JobStatus.QUEUED, 1, None, None)
    assert claim(job_store, new_job(), now=T0 + 3 * LEASE).attempt == 1


def test_a_superseded_job_is_cancelled_with_its_reason_and_the_job_that_took_its_place(job_store: JobStore) -> None:
    job_store.create(new_job(1, debounce_key="k", debounce_s=2))

    cancelled = job_store.cancel(
        new_job(1).job_id, tenant=TENANT, now=T0, expires_at=T0 + RETENTION, superseded_by=new_job(2).job_id
    )

    stored = current(job_store, cancelled)
    assert (stored.status, stored.cancel_reason, stored.superseded_by) == (
        JobStatus.CANCELLED,
        "superseded",
        new_job(2).job_id,
    )
    assert (stored.debounce_key, stored.debounce_s) == ("k", 2)
    job_store.create(new_job(3))
    by_hand = job_store.cancel(new_job(3).job_id, tenant=TENANT, now=T0, expires_at=T0 + RETENTION)
    assert (by_hand.cancel_reason, by_hand.superseded_by) == (None, None)


def test_a_superseded_job_names_a_later_survivor_only_in_place_of_the_one_it_named(job_store: JobStore) -> None:
    job_store.create(new_job(1, debounce_key="k", debounce_s=2))
    job_store.cancel(new_job(1).job_id, tenant=TENANT, now=T0, expires_at=T0 + RETENTION, superseded_by="b" * 32)

    job_store.name_survivor(new_job(1).job_id, tenant=TENANT, seen="b" * 32, survivor="c" * 32, now=T0 + LEASE)
    with pytest.raises(JobConflictError):
        job_store.name_survivor(new_job(1).job_id, tenant=TENANT, seen="b" * 32, survivor="d" * 32, now=T0 + LEASE)

    stored = current(job_store, new_job(1))
    assert (stored.status, stored.cancel_reason, stored.superseded_by) == (JobStatus.CANCELLED, "superseded", "c" * 32)
    assert stored.updated_at == T0


def test_a_debounce_record_reads_back_as_the_last_one_swapped_in(job_store: JobStore) -> None:
    record = DebounceRecord(new_job(1).job_id, T0, T0 + LEASE)

    assert job_store.debounce_record(TENANT, "demo.echo", "k") is None
    job_store.swap_debounce(TENANT, "demo.echo", "k", record)
    assert job_store.debounce_record(TENANT, "demo.echo", "k") == record
    assert job_store.debounce_record("tenant-b", "demo.echo", "k") is None


def test_a_debounce_record_is_swapped_in_one_write_handing_back_the_one_it_replaced(job_store: JobStore) -> None:
    first = DebounceRecord(new_job(1).job_id, T0, T0 + LEASE)
    second = DebounceRecord(new_job(2).job_id, T0 + LEASE, T0 + 2 * LEASE)

    assert job_store.swap_debounce(TENANT, "demo.echo", "k", first) is None
    assert job_store.swap_debounce(TENANT, "demo.echo", "k", second) == first
    # Per tenant, job type and key.
    assert job_store.swap_debounce("tenant-b", "demo.echo", "k", first) is None
    assert job_store.swap_debounce(TENANT, "demo.sleep", "k", first) is None
    assert job_store.swap_debounce(TENANT, "demo.echo", "other", first) is None
    assert job_store.swap_debounce(TENANT, "demo.echo", "k", first) == second


def test_a_hand_retry_of_a_queued_job_is_refused_and_changes_nothing(job_store: JobStore) -> None:
    job_store.create(new_job())

    with pytest.raises(JobConflictError) as raised:
        job_store.retry_by_hand(new_job().job_id, tenant=TENANT, now=T0, sweep_at=T0 + LEASE)

    assert raised.value.job is not None and raised.value.job.status is JobStatus.QUEUED
    assert current(job_store, new_job()).retries == 0


def test_a_hand_retry_of_another_tenants_job_is_not_found(job_store: JobStore) -> None:
    job_store.create(new_job())
    job_store.cancel(new_job().job_id, tenant=TENANT, now=T0, expires_at=T0 + RETENTION)

    with pytest.raises(JobNotFoundError):
        job_store.retry_by_hand(new_job().job_id, tenant="tenant-b", now=T0, sweep_at=T0 + LEASE)

    assert current(job_store, new_job()).status is JobStatus.CANCELLED


def test_each_attempts_end_is_kept_on_the_job_by_its_outcome_write(job_store: JobStore) -> None:
    job_store.create(new_job())
    first = claim(job_store, new_job())
    job_store.record_retry(first, error="boom", now=T0 + timedelta(seconds=2), next_attempt_at=T0 + LEASE)
    second = claim(job_store, new_job(), now=T0 + LEASE)
    job_store.record_success(second, result="ok", now=T0 + LEASE + timedelta(seconds=3), expires_at=T0 + RETENTION)

    history = current(job_store, second).attempt_history

    assert [(r.attempt, r.started_at, r.finished_at, r.outcome, r.error) for r in history] == [
        (1, T0, T0 + timedelta(seconds=2), "RETRYING", "boom"),
        (2, T0 + LEASE, T0 + LEASE + timedelta(seconds=3), "SUCCEEDED", None),
    ]


def test_the_attempt_history_keeps_the_last_ten_and_a_short_error(job_store: JobStore) -> None:
    job_store.create(new_job(max_attempts=100))
    now = T0
    for _ in range(12):
        claimed = claim(job_store, new_job(), now=now)
        job_store.record_retry(claimed, error="x" * 1000, now=now, next_attempt_at=now)
        now += timedelta(seconds=1)

    history = current(job_store, new_job()).attempt_history

    assert [r.attempt for r in history] == list(range(3, 13))
    assert {len(r.error or "") for r in history} == {200}


def test_an_expired_lease_with_attempts_left_is_requeued_once(job_store: JobStore) -> None:
    job_store.create(new_job())
    claimed = claim(job_store, new_job())

    requeued = job_store.requeue_expired_lease(claimed, now=T0 + LEASE, sweep_at=T0 + 2 * LEASE)
    with pytest.raises(JobConflictError):
        job_store.requeue_expired_lease(claimed, now=T0 + LEASE, sweep_at=T0 + 2 * LEASE)

    assert (requeued.status, requeued.attempt, requeued.resends) == (JobStatus.QUEUED, 1, 1)


# -- the declaration: both stores allow exactly what it allows --------------------------------------

NOW = T0 + timedelta(minutes=5)
SEEN = T0 + timedelta(minutes=2)
# What the caller brings, matching every job `shaped` makes: its tenant, attempt and sweep time.
FACTS = Facts(now=NOW, tenant=TENANT, attempt=1, seen_sweep_at=SEEN, seen_survivor=f"{9:032x}")


def shaped(status: JobStatus, n: int) -> Job:
    """A job in `status` that every guard allows: attempt 1 of 3, its lease ended at T0, its expiry at T0."""
    return new_job(
        n,
        status=status,
        attempt=1,
        lease_until=T0,
        sweep_at=SEEN,
        start_by=T0,
        cancel_reason="superseded",
        superseded_by=f"{9:032x}",
    )


# For each guard, how a job and the caller's facts break it (and only it).
VIOLATIONS: dict[Guard, Callable[[Job, Facts], tuple[Job, Facts]]] = {
    Guard.SAME_TENANT: lambda job, facts: (job, dataclasses.replace(facts, tenant="tenant-b")),
    Guard.ATTEMPT_FENCE: lambda job, facts: (job.replace(attempt=2), facts),
    Guard.ATTEMPTS_LEFT: lambda job, facts: (job.replace(attempt=3), dataclasses.replace(facts, attempt=3)),
    Guard.LEASE_EXPIRED: lambda job, facts: (job.replace(lease_until=NOW + 2 * LEASE), facts),
    Guard.SWEEP_FENCE: lambda job, facts: (
        job,
        dataclasses.replace(facts, seen_sweep_at=SEEN - timedelta(seconds=1)),
    ),
    Guard.START_BY_PASSED: lambda job, facts: (job.replace(start_by=NOW + LEASE), facts),
    Guard.SURVIVOR_FENCE: lambda job, facts: (job.replace(superseded_by=f"{8:032x}"), facts),
}

# Each declared transition as the store method that makes it.
OPERATIONS: dict[str, Callable[[JobStore, Job, Facts], object]] = {
    "claim": lambda store, job, f: store.claim(job.job_id, tenant=str(f.tenant), now=NOW, lease_until=NOW + LEASE),
    "succeed": lambda store, job, f: store.record_success(
        job.replace(attempt=f.attempt), result="ok", now=NOW, expires_at=NOW + RETENTION
    ),
    "retry": lambda store, job, f: store.record_retry(
        job.replace(attempt=f.attempt), error="e", now=NOW, next_attempt_at=NOW + LEASE
    ),
    "fail": lambda store, job, f: store.record_failure(
        job.replace(attempt=f.attempt), error="e", now=NOW, expires_at=NOW + RETENTION
    ),
    "record_progress": lambda store, job, f: store.set_progress(
        job.job_id, tenant=job.tenant, attempt=int(f.attempt or 0), progress=Progress(0.5, "half"), now=NOW
    ),
    "fail_expired_lease": lambda store, job, f: store.fail_expired_lease(
        job.replace(attempt=f.attempt), now=NOW, expires_at=NOW + RETENTION
    ),
    "requeue_expired_lease": lambda store, job, f: store.requeue_expired_lease(
        job.replace(attempt=f.attempt), now=NOW, sweep_at=NOW + LEASE
    ),
    "cancel": lambda store, job, f: store.cancel(job.job_id, tenant=str(f.tenant), now=NOW, expires_at=NOW + RETENTION),
    "name_survivor": lambda store, job, f: store.name_survivor(
        job.job_id, tenant=str(f.tenant), seen=str(f.seen_survivor), survivor=f"{7:032x}", now=NOW
    ),
    "expire": lambda store, job, f: store.expire(job.job_id, tenant=str(f.tenant), now=NOW, expires_at=NOW + RETENTION),
    "enqueue_scheduled": lambda store, job, f: store.enqueue_scheduled(
        job.job_id, tenant=str(f.tenant), now=NOW, sweep_at=NOW + LEASE
    ),
    "redrive": lambda store, job, f: store.reset_for_redrive(
        job.job_id, tenant=str(f.tenant), now=NOW, sweep_at=NOW + LEASE
    ),
    "retry_by_hand": lambda store, job, f: store.retry_by_hand(
        job.job_id, tenant=str(f.tenant), now=NOW, sweep_at=NOW + LEASE
    ),
    "retry_by_hand_scheduled": lambda store, job, f: store.retry_by_hand(
        job.job_id, tenant=str(f.tenant), now=NOW, sweep_at=NOW + LEASE, scheduled=True
    ),
    "discard": lambda store, job, f: store.discard(job.job_id, tenant=str(f.tenant), now=NOW),
    "reschedule_sweep": lambda store, job, f: store.reschedule_sweep(
        job.replace(sweep_at=f.seen_sweep_at), sweep_at=NOW + LEASE, resent=False
    ),
    "followed_up": lambda store, job, f: store.clear_followups(job.replace(sweep_at=f.seen_sweep_at)),
}


def cases(transition: Transition) -> list[tuple[str, Job, Facts]]:
    """Every state with every guard holding, then every source state with each guard broken."""
    found: list[tuple[str, Job, Facts]] = []
    for status in JobStatus:
        found.append((f"{status.value}", shaped(status, len(found) + 1), FACTS))
    for status in sorted(transition.from_):
        for guard in sorted(transition.all_guards, key=lambda g: g.name):
            job, facts = VIOLATIONS[guard](shaped(status, len(found) + 1), FACTS)
            found.append((f"{status.value} without {guard.name}", job, facts))
    return found


def test_every_transition_has_a_store_operation_and_every_guard_a_violation() -> None:
    assert {t.name for t in TRANSITIONS} == set(OPERATIONS)
    assert set(VIOLATIONS) == set(Guard)
    for guard, violate in VIOLATIONS.items():
        job, facts = violate(shaped(JobStatus.RUNNING, 1), FACTS)
        assert guard.holds(shaped(JobStatus.RUNNING, 1), FACTS) and not guard.holds(job, facts), guard


@pytest.mark.parametrize("transition", TRANSITIONS, ids=lambda t: t.name)
def test_a_store_allows_exactly_the_transitions_the_declaration_allows(
    job_store: JobStore, transition: Transition
) -> None:
    outcomes: dict[str, tuple[bool, bool]] = {}
    for case, job, facts in cases(transition):
        job_store.create(job)
        before = current(job_store, job)
        try:
            OPERATIONS[transition.name](job_store, job, facts)
            allowed = True
        except (JobConflictError, JobNotFoundError):
            allowed = False
        after = current(job_store, job)
        if allowed:
            assert after.status is (transition.to or before.status), case
        else:
            assert after == before, f"{case}: a refused {transition.name} changed the job"
        outcomes[case] = (allowed, transition.allows(job, facts))

    assert {case: store for case, (store, _) in outcomes.items()} == {
        case: declared for case, (_, declared) in outcomes.items()
    }


def test_a_claim_is_one_condition_rendered_from_its_declaration() -> None:
    claim_transition = next(t for t in TRANSITIONS if t.name == "claim")

    condition = condition_of(claim_transition, FACTS)

    assert condition.expression == (
        "tenant = :tenant AND attempt < max_attempts AND (#s IN (:queued, :retrying) OR "
        "(#s = :running AND (attribute_not_exists(lease_until) OR lease_until <= :now)))"
    )
    assert condition.values == {
        ":tenant": TENANT,
        ":queued": "QUEUED",
        ":retrying": "RETRYING",
        ":running": "RUNNING",
        ":now": iso(NOW),
    }


# -- timestamps -----------------------------------------------------------------------------------

EVERY_UTC_TIME = st.datetimes(timezones=st.just(UTC))


@given(EVERY_UTC_TIME)
def test_a_stored_time_reads_back_as_it_was_in_every_year(when: datetime) -> None:
    assert parse_iso(iso(when)) == when


@given(EVERY_UTC_TIME, EVERY_UTC_TIME)
def test_stored_times_sort_as_the_times_do(first: datetime, second: datetime) -> None:
    """Conditions (`lease_until <= :now`) and the sweep index compare the text."""
    assert (iso(first) < iso(second)) == (first < second)


def test_a_job_from_before_the_year_1000_reads_back_from_the_table(store: DynamoDbJobStore) -> None:
    early = datetime(999, 12, 31, 23, 59, 59, 5, tzinfo=UTC)
    store.create(new_job(created_at=early, updated_at=early, run_at=early, sweep_at=early))

    job = current(store, new_job())

    assert (job.created_at, job.run_at, job.sweep_at) == (early, early, early)
    assert [j.job_id for j in store.due_for_sweep(now=T0, limit=10)] == [job.job_id]
