"""The transition table spelled out, and the guarantees of the transitions that only a literal test notices.

The other transition tests take their cases from the table itself (`CANCEL.from_`...): a wrong table would make
them wrong with it. Here every transition's sources and guards are written out by hand, and each guard a mutation
could drop is shown refusing a change in the in-memory store (which obeys the same table) or in the pure function.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from offpath.domain import job as transitions
from offpath.domain.errors import JobConflictError, TransitionError
from offpath.domain.job import TRANSITIONS, Guard, Job, JobStatus
from offpath_tools.fakes import InMemoryJobStore
from tests.unit.conftest import START, TENANT, a_job

S = JobStatus
G = Guard
LATER = START + timedelta(seconds=90)
SWEEP_AT = START + timedelta(minutes=5)
RETENTION = timedelta(days=7)
OTHER_TENANT = "tenant-b"

UNFINISHED = {S.QUEUED: (), S.SCHEDULED: (), S.RUNNING: (), S.RETRYING: ()}

# name -> (to, {source: guards from that source only}, guards from every source)
EXPECTED = {
    "claim": (
        S.RUNNING,
        {S.QUEUED: (), S.RETRYING: (), S.RUNNING: (G.LEASE_EXPIRED,)},
        (G.SAME_TENANT, G.ATTEMPTS_LEFT),
    ),
    "succeed": (S.SUCCEEDED, {S.RUNNING: ()}, (G.ATTEMPT_FENCE,)),
    "retry": (S.RETRYING, {S.RUNNING: ()}, (G.ATTEMPT_FENCE,)),
    "fail": (S.FAILED, {S.RUNNING: ()}, (G.ATTEMPT_FENCE,)),
    "record_progress": (None, {S.RUNNING: ()}, (G.ATTEMPT_FENCE,)),
    "fail_expired_lease": (S.FAILED, {S.RUNNING: ()}, (G.ATTEMPT_FENCE, G.LEASE_EXPIRED)),
    "requeue_expired_lease": (S.QUEUED, {S.RUNNING: ()}, (G.ATTEMPT_FENCE, G.LEASE_EXPIRED, G.ATTEMPTS_LEFT)),
    "cancel": (S.CANCELLED, {S.QUEUED: (), S.SCHEDULED: (), S.RETRYING: ()}, (G.SAME_TENANT,)),
    "enqueue_scheduled": (S.QUEUED, {S.SCHEDULED: ()}, (G.SAME_TENANT,)),
    "redrive": (S.QUEUED, {S.FAILED: ()}, (G.SAME_TENANT,)),
    "retry_by_hand": (S.QUEUED, {S.FAILED: (), S.CANCELLED: ()}, (G.SAME_TENANT,)),
    "reschedule_sweep": (None, UNFINISHED, (G.SWEEP_FENCE,)),
}


def test_the_table_declares_exactly_these_transitions() -> None:
    assert [t.name for t in TRANSITIONS] == list(EXPECTED)


@pytest.mark.parametrize("transition", TRANSITIONS, ids=lambda t: t.name)
def test_each_transition_starts_from_these_states_under_these_guards(transition: transitions.Transition) -> None:
    to, sources, guards = EXPECTED[transition.name]

    assert transition.to is to
    assert dict(transition.sources) == sources
    assert transition.guards == guards


def test_the_refusals_say_which_guard_failed() -> None:
    assert [g.value for g in Guard] == [
        "the job is another tenant's",
        "no longer holds the job",
        "no attempts left",
        "lease still held",
        "another sweep handled the job",
    ]
    running = a_job(S.RUNNING, attempt=2, lease_until=LATER)
    with pytest.raises(TransitionError, match="attempt 1 no longer holds the job"):
        transitions.succeed(running, attempt=1, result=None, now=LATER, retention=RETENTION)


# -- the requeue of an expired lease is fenced on the attempt -------------------------------------


def expired(attempt: int = 1) -> Job:
    return a_job(S.RUNNING, attempt=attempt, max_attempts=3, lease_until=START, sweep_at=START)


def test_a_requeue_under_a_stale_attempt_is_refused_by_the_store_and_the_job_is_left_as_it_is() -> None:
    """The sweeper read the job at attempt 1; meanwhile attempt 2 took it (and its lease ran out too). The
    sweeper's requeue, made with what it read, must not touch attempt 2's job."""
    store = InMemoryJobStore()
    now_held_by_attempt_2 = store.put(expired(attempt=2))
    seen_by_the_sweeper = expired(attempt=1)

    with pytest.raises(JobConflictError, match="no longer expired at that attempt"):
        store.requeue_expired_lease(seen_by_the_sweeper, now=LATER, sweep_at=SWEEP_AT)

    assert store.get(now_held_by_attempt_2.job_id, tenant=TENANT) == now_held_by_attempt_2


def test_a_requeue_at_the_attempt_that_holds_the_job_puts_it_back_in_the_queue() -> None:
    store = InMemoryJobStore()
    job = store.put(expired(attempt=1))

    requeued = store.requeue_expired_lease(job, now=LATER, sweep_at=SWEEP_AT)

    assert (requeued.status, requeued.attempt, requeued.sweep_at, requeued.resends) == (S.QUEUED, 1, SWEEP_AT, 1)
    assert requeued.lease_until is None and requeued.updated_at == LATER
    assert [(h.attempt, h.outcome, h.error) for h in requeued.attempt_history] == [
        (1, "LEASE_EXPIRED", "lease expired")
    ]


def test_a_requeue_of_a_job_whose_lease_is_still_held_or_with_no_attempts_left_is_refused() -> None:
    with pytest.raises(TransitionError, match="lease still held"):
        transitions.requeue_expired_lease(
            a_job(S.RUNNING, attempt=1, lease_until=LATER + timedelta(seconds=1)), attempt=1, now=LATER, sweep_at=LATER
        )
    with pytest.raises(TransitionError, match="no attempts left"):
        transitions.requeue_expired_lease(expired(attempt=3), attempt=3, now=LATER, sweep_at=LATER)


# -- another tenant's job is refused, by name, for each change a tenant asks for -----------------

BY_TENANT = {
    "cancel": (S.QUEUED, lambda job, tenant: transitions.cancel(job, tenant=tenant, now=LATER, retention=RETENTION)),
    "enqueue_scheduled": (
        S.SCHEDULED,
        lambda job, tenant: transitions.enqueue_scheduled(job, tenant=tenant, now=LATER, sweep_at=SWEEP_AT),
    ),
    "redrive": (S.FAILED, lambda job, tenant: transitions.redrive(job, tenant=tenant, now=LATER, sweep_at=SWEEP_AT)),
    "retry_by_hand": (
        S.CANCELLED,
        lambda job, tenant: transitions.retry_by_hand(job, tenant=tenant, now=LATER, sweep_at=SWEEP_AT),
    ),
    "claim": (
        S.QUEUED,
        lambda job, tenant: transitions.claim(job, tenant=tenant, now=LATER, lease=timedelta(seconds=60)),
    ),
}


@pytest.mark.parametrize("name", list(BY_TENANT))
def test_a_change_asked_for_by_another_tenant_is_refused_and_the_owner_may_make_it(name: str) -> None:
    status, change = BY_TENANT[name]
    job = a_job(status)

    with pytest.raises(TransitionError, match="the job is another tenant's"):
        change(job, OTHER_TENANT)
    assert change(job, TENANT).status is not status


# -- what each change leaves on the job --------------------------------------------------------


def test_a_claim_that_names_no_sweep_time_keeps_the_jobs_own() -> None:
    job = a_job(S.QUEUED, sweep_at=SWEEP_AT)

    claimed = transitions.claim(job, tenant=TENANT, now=LATER, lease=timedelta(seconds=60))
    indexed = transitions.claim(job, tenant=TENANT, now=LATER, lease=timedelta(seconds=60), sweep_at=LATER)

    assert claimed.sweep_at == SWEEP_AT
    assert indexed.sweep_at == LATER
    assert claimed.attempt_started_at == LATER


def test_a_cancelled_job_expires_after_the_retention_and_leaves_the_sweep() -> None:
    store = InMemoryJobStore()
    job = store.put(a_job(S.QUEUED, sweep_at=SWEEP_AT))

    store.cancel(job.job_id, tenant=TENANT, now=LATER, expires_at=LATER + RETENTION)

    cancelled = store.get(job.job_id, tenant=TENANT)
    assert cancelled is not None
    assert (cancelled.status, cancelled.finished_at, cancelled.updated_at) == (S.CANCELLED, LATER, LATER)
    assert (cancelled.expires_at, cancelled.sweep_at, cancelled.lease_until) == (LATER + RETENTION, None, None)
    assert transitions.cancel(job, tenant=TENANT, now=LATER, retention=RETENTION).expires_at == LATER + RETENTION


def test_a_success_clears_the_error_of_an_earlier_attempt() -> None:
    after_a_failed_attempt = a_job(S.RUNNING, attempt=2, error="boom on attempt 1", lease_until=LATER)

    done = transitions.succeed(after_a_failed_attempt, attempt=2, result={"ok": True}, now=LATER, retention=RETENTION)

    assert (done.status, done.error, done.result, done.sweep_at) == (S.SUCCEEDED, None, {"ok": True}, None)
    assert [(h.attempt, h.outcome, h.error) for h in done.attempt_history] == [(2, "SUCCEEDED", None)]


@pytest.mark.parametrize(("resent", "resends"), [(False, 2), (True, 3)])
def test_a_sweep_counts_a_resend_only_when_it_sent_the_job_again(resent: bool, resends: int) -> None:
    store = InMemoryJobStore()
    job = store.put(a_job(S.QUEUED, sweep_at=START, resends=2))

    store.reschedule_sweep(job, sweep_at=SWEEP_AT, resent=resent)

    swept = store.get(job.job_id, tenant=TENANT)
    assert swept is not None and (swept.sweep_at, swept.resends) == (SWEEP_AT, resends)


def test_a_sweep_that_saw_another_sweep_time_is_refused() -> None:
    store = InMemoryJobStore()
    job = store.put(a_job(S.QUEUED, sweep_at=SWEEP_AT))

    with pytest.raises(JobConflictError, match="another sweep handled the job"):
        store.reschedule_sweep(job.replace(sweep_at=START), sweep_at=LATER, resent=True)
    assert store.get(job.job_id, tenant=TENANT) == job
