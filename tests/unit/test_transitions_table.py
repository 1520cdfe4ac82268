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
from offpath.domain.job import (
    ATTEMPT_ERROR_CHARS,
    ATTEMPTS_KEPT,
    CLAIM,
    TRANSITIONS,
    AttemptRecord,
    Facts,
    Guard,
    Job,
    JobStatus,
    Progress,
    payload_json,
)
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
    "expire": (S.EXPIRED, {S.QUEUED: (), S.SCHEDULED: (), S.RETRYING: ()}, (G.SAME_TENANT, G.START_BY_PASSED)),
    "name_survivor": (None, {S.CANCELLED: ()}, (G.SAME_TENANT, G.SURVIVOR_FENCE)),
    "enqueue_scheduled": (S.QUEUED, {S.SCHEDULED: ()}, (G.SAME_TENANT,)),
    "redrive": (S.QUEUED, {S.FAILED: ()}, (G.SAME_TENANT,)),
    "retry_by_hand": (S.QUEUED, {S.FAILED: (), S.CANCELLED: (), S.EXPIRED: ()}, (G.SAME_TENANT,)),
    "retry_by_hand_scheduled": (S.SCHEDULED, {S.CANCELLED: ()}, (G.SAME_TENANT,)),
    "discard": (None, {S.FAILED: ()}, (G.SAME_TENANT,)),
    "reschedule_sweep": (None, UNFINISHED, (G.SWEEP_FENCE,)),
    "followed_up": (None, {S.SUCCEEDED: (), S.FAILED: (), S.CANCELLED: (), S.EXPIRED: ()}, (G.SWEEP_FENCE,)),
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
        "the job's expiry has not come",
        "the superseded job names another survivor",
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
    "retry_by_hand_scheduled": (
        S.CANCELLED,
        lambda job, tenant: transitions.retry_by_hand(job, tenant=tenant, now=LATER, sweep_at=SWEEP_AT, scheduled=True),
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


# -- what each transition leaves on the job, field by field: the whole record after the change is compared
# with the record before it and the changes spelled out, so a field a change forgets (or sets wrongly) fails.

T0 = START - timedelta(minutes=10)  # the job's earlier times
NOW = LATER
LEASE = timedelta(seconds=60)
EARLIER = AttemptRecord(attempt=1, started_at=T0, finished_at=T0, outcome="RETRYING", error="first")


def lived(status: JobStatus, **changes: object) -> Job:
    """A job with every field set to something a change could wrongly keep or drop."""
    return a_job(
        status,
        attempt=2,
        max_attempts=3,
        updated_at=T0,
        lease_until=START,
        started_at=T0,
        finished_at=None,
        next_attempt_at=T0,
        progress=Progress(0.5, "half"),
        result=None,
        error="attempt 1 failed",
        expires_at=None,
        redrives=1,
        sweep_at=T0,
        resends=2,
        retries=1,
        attempt_started_at=T0 + timedelta(minutes=1),
        attempt_history=(EARLIER,),
    ).replace(**changes)


def record(outcome: str, error: str | None, attempt: int = 2) -> AttemptRecord:
    return AttemptRecord(
        attempt=attempt, started_at=T0 + timedelta(minutes=1), finished_at=NOW, outcome=outcome, error=error
    )


def test_claim() -> None:
    job = lived(S.RETRYING)

    assert transitions.claim(job, tenant=TENANT, now=NOW, lease=LEASE) == job.replace(
        status=S.RUNNING,
        attempt=3,
        lease_until=NOW + LEASE,
        started_at=T0,
        attempt_started_at=NOW,
        updated_at=NOW,
        next_attempt_at=None,
    )
    first = lived(S.QUEUED, attempt=0, started_at=None)
    assert transitions.claim(first, tenant=TENANT, now=NOW, lease=LEASE).started_at == NOW


def test_succeed() -> None:
    job = lived(S.RUNNING)

    assert transitions.succeed(job, attempt=2, result={"n": 1}, now=NOW, retention=RETENTION) == job.replace(
        status=S.SUCCEEDED,
        attempt_history=(EARLIER, record("SUCCEEDED", None)),
        result={"n": 1},
        error=None,
        lease_until=None,
        finished_at=NOW,
        updated_at=NOW,
        expires_at=NOW + RETENTION,
        sweep_at=None,
    )


def test_schedule_retry() -> None:
    job = lived(S.RUNNING)

    assert transitions.schedule_retry(job, attempt=2, error="boom", now=NOW, delay=LEASE) == job.replace(
        status=S.RETRYING,
        attempt_history=(EARLIER, record("RETRYING", "boom")),
        error="boom",
        lease_until=None,
        next_attempt_at=NOW + LEASE,
        updated_at=NOW,
    )


def test_fail() -> None:
    job = lived(S.RUNNING)

    assert transitions.fail(job, attempt=2, error="bad", now=NOW, retention=RETENTION) == job.replace(
        status=S.FAILED,
        attempt_history=(EARLIER, record("FAILED", "bad")),
        error="bad",
        lease_until=None,
        finished_at=NOW,
        updated_at=NOW,
        expires_at=NOW + RETENTION,
        sweep_at=None,
    )


def test_record_progress() -> None:
    job = lived(S.RUNNING)

    progress = Progress(0.75, "three quarters")
    assert transitions.record_progress(job, attempt=2, progress=progress, now=NOW) == job.replace(
        progress=progress, updated_at=NOW
    )
    with pytest.raises(TransitionError, match="attempt 1 no longer holds the job"):
        transitions.record_progress(job, attempt=1, progress=progress, now=NOW)


def test_fail_expired_lease() -> None:
    job = lived(S.RUNNING)

    assert transitions.fail_expired_lease(job, attempt=2, now=NOW, retention=RETENTION) == job.replace(
        status=S.FAILED,
        attempt_history=(EARLIER, record("LEASE_EXPIRED", "lease expired")),
        error="lease expired",
        lease_until=None,
        finished_at=NOW,
        updated_at=NOW,
        expires_at=NOW + RETENTION,
        sweep_at=None,
    )


def test_requeue_expired_lease() -> None:
    job = lived(S.RUNNING)

    assert transitions.requeue_expired_lease(job, attempt=2, now=NOW, sweep_at=SWEEP_AT) == job.replace(
        status=S.QUEUED,
        attempt_history=(EARLIER, record("LEASE_EXPIRED", "lease expired")),
        lease_until=None,
        updated_at=NOW,
        sweep_at=SWEEP_AT,
        resends=3,
    )


def test_cancel() -> None:
    job = lived(S.RETRYING)  # a lease left on a waiting job (as an older version could write it) is dropped too

    assert transitions.cancel(job, tenant=TENANT, now=NOW, retention=RETENTION) == job.replace(
        status=S.CANCELLED,
        lease_until=None,
        finished_at=NOW,
        updated_at=NOW,
        expires_at=NOW + RETENTION,
        sweep_at=None,
    )


def test_enqueue_scheduled() -> None:
    job = lived(S.SCHEDULED, attempt=0)

    assert transitions.enqueue_scheduled(job, tenant=TENANT, now=NOW, sweep_at=SWEEP_AT) == job.replace(
        status=S.QUEUED, updated_at=NOW, sweep_at=SWEEP_AT
    )


def test_redrive() -> None:
    job = lived(S.FAILED, finished_at=T0, expires_at=NOW + RETENTION, sweep_at=None)

    assert transitions.redrive(job, tenant=TENANT, now=NOW, sweep_at=SWEEP_AT) == job.replace(
        status=S.QUEUED,
        attempt=0,
        error=None,
        finished_at=None,
        expires_at=None,
        updated_at=NOW,
        redrives=2,
        sweep_at=SWEEP_AT,
        resends=0,
    )


@pytest.mark.parametrize("status", [S.FAILED, S.CANCELLED])
def test_retry_by_hand(status: JobStatus) -> None:
    job = lived(status, finished_at=T0, expires_at=NOW + RETENTION, sweep_at=None)

    assert transitions.retry_by_hand(job, tenant=TENANT, now=NOW, sweep_at=SWEEP_AT) == job.replace(
        status=S.QUEUED,
        attempt=0,
        error=None,
        finished_at=None,
        expires_at=None,
        lease_until=None,
        next_attempt_at=None,
        updated_at=NOW,
        retries=2,
        retried_at=NOW,
        sweep_at=SWEEP_AT,
        resends=0,
    )


def test_retry_by_hand_scheduled() -> None:
    job = lived(S.CANCELLED, finished_at=T0, expires_at=NOW + RETENTION, sweep_at=None)

    assert transitions.retry_by_hand(job, tenant=TENANT, now=NOW, sweep_at=SWEEP_AT, scheduled=True) == job.replace(
        status=S.SCHEDULED,
        attempt=0,
        error=None,
        finished_at=None,
        expires_at=None,
        lease_until=None,
        next_attempt_at=None,
        updated_at=NOW,
        retries=2,
        retried_at=NOW,
        sweep_at=SWEEP_AT,
        resends=0,
    )
    with pytest.raises(TransitionError):
        transitions.retry_by_hand(lived(S.FAILED), tenant=TENANT, now=NOW, sweep_at=SWEEP_AT, scheduled=True)


def test_reschedule_sweep() -> None:
    job = lived(S.QUEUED)

    assert transitions.reschedule_sweep(job, seen=T0, sweep_at=SWEEP_AT, resent=True) == job.replace(
        sweep_at=SWEEP_AT, resends=3
    )
    assert transitions.reschedule_sweep(job, seen=T0, sweep_at=SWEEP_AT, resent=False) == job.replace(sweep_at=SWEEP_AT)
    with pytest.raises(TransitionError, match="another sweep handled the job"):
        transitions.reschedule_sweep(job, seen=SWEEP_AT, sweep_at=NOW, resent=False)
    with pytest.raises(TransitionError, match="another sweep handled the job"):
        transitions.reschedule_sweep(job.replace(sweep_at=None), seen=None, sweep_at=NOW, resent=False)


# -- the history of attempts ----------------------------------------------------------------------


def test_the_history_keeps_the_newest_attempts_and_a_short_error() -> None:
    long_history = tuple(
        AttemptRecord(attempt=n, started_at=T0, finished_at=T0, outcome="RETRYING") for n in range(1, ATTEMPTS_KEPT + 1)
    )
    job = lived(S.RUNNING, attempt=ATTEMPTS_KEPT + 1, max_attempts=20, attempt_history=long_history)

    history = job.history_with("FAILED", NOW, "x" * (ATTEMPT_ERROR_CHARS + 50))

    assert ATTEMPTS_KEPT == 10 and ATTEMPT_ERROR_CHARS == 200
    assert [r.attempt for r in history] == list(range(2, ATTEMPTS_KEPT + 2))
    assert history[-1].error == "x" * ATTEMPT_ERROR_CHARS
    assert job.history_with("SUCCEEDED", NOW)[-1].error is None


# -- the guards at their edges ------------------------------------------------------------------------


def test_a_lease_that_ends_now_has_expired_and_one_without_an_end_has_too() -> None:
    job = a_job(S.RUNNING, attempt=1, lease_until=NOW)

    assert job.lease_expired(NOW)
    assert not job.lease_expired(NOW - timedelta(microseconds=1))
    assert job.replace(lease_until=None).lease_expired(NOW)
    assert not job.replace(status=S.QUEUED).lease_expired(NOW)
    assert transitions.claim(job, tenant=TENANT, now=NOW, lease=LEASE).attempt == 2


def test_the_last_attempt_may_run_and_no_more() -> None:
    assert transitions.claim(a_job(S.RETRYING, attempt=2, max_attempts=3), tenant=TENANT, now=NOW, lease=LEASE)
    with pytest.raises(TransitionError, match="no attempts left"):
        transitions.claim(a_job(S.RETRYING, attempt=3, max_attempts=3), tenant=TENANT, now=NOW, lease=LEASE)


def test_a_guard_that_needs_a_fact_the_caller_did_not_give_says_so() -> None:
    with pytest.raises(ValueError, match="the SAME_TENANT guard needs a fact the caller did not give"):
        Guard.SAME_TENANT.holds(a_job(), Facts())
    with pytest.raises(ValueError, match="the ATTEMPT_FENCE guard needs"):
        Guard.ATTEMPT_FENCE.holds(a_job(), Facts())
    with pytest.raises(ValueError, match="the LEASE_EXPIRED guard needs"):
        Guard.LEASE_EXPIRED.holds(a_job(S.RUNNING, lease_until=NOW), Facts())


def test_a_refusal_names_the_transition_and_the_state() -> None:
    job = a_job(S.SUCCEEDED)

    assert CLAIM.refusal(job, Facts(now=NOW, tenant=TENANT)) == "claim does not start from SUCCEEDED"
    assert not CLAIM.allows(job, Facts(now=NOW, tenant=TENANT))
    assert CLAIM.allows(a_job(S.QUEUED), Facts(now=NOW, tenant=TENANT))
    with pytest.raises(TransitionError) as refused:
        CLAIM.check(job, Facts(now=NOW, tenant=TENANT))
    assert (refused.value.current, refused.value.target) == (S.SUCCEEDED, S.RUNNING)
    with pytest.raises(TransitionError) as unchanged:
        transitions.RECORD_PROGRESS.check(a_job(S.QUEUED), Facts(attempt=0))
    assert unchanged.value.target is S.QUEUED
    assert CLAIM.all_guards == {Guard.SAME_TENANT, Guard.ATTEMPTS_LEFT, Guard.LEASE_EXPIRED}


def test_final_states() -> None:
    assert {s for s in JobStatus if s.is_final} == {S.SUCCEEDED, S.FAILED, S.CANCELLED, S.EXPIRED}


# -- what a job is -----------------------------------------------------------------------------------


def test_the_same_submission_is_the_same_tenant_payload_queue_and_run_at() -> None:
    job = a_job(run_at=SWEEP_AT)

    assert job.same_submission(job.replace(job_id="1" * 32, submission_id="other"))
    assert not job.same_submission(job.replace(tenant="tenant-b"))
    assert not job.same_submission(job.replace(payload_hash="other"))
    assert not job.same_submission(job.replace(queue="bulk"))
    assert not job.same_submission(job.replace(run_at=None))
    assert a_job().fingerprint == "h|default|"


def test_a_payload_is_kept_as_compact_utf8_json() -> None:
    assert payload_json({"a": [1, 2], "name": "café"}) == '{"a":[1,2],"name":"café"}'


def test_a_fair_share_goes_by_the_sweep_time_and_by_the_creation_of_a_job_without_one() -> None:
    swept_first = a_job(job_id="b" * 32, tenant="tenant-b", created_at=T0 + timedelta(hours=1), sweep_at=T0)
    created_first = a_job(job_id="a" * 32, tenant="tenant-a", created_at=T0, sweep_at=T0 + timedelta(minutes=1))
    never_swept = a_job(job_id="c" * 32, tenant="tenant-c", created_at=T0 - timedelta(minutes=1), sweep_at=None)

    assert transitions.fair_share([created_first, swept_first], 1) == [swept_first]
    assert transitions.fair_share([created_first, swept_first, never_swept], 3) == [
        never_swept,
        swept_first,
        created_first,
    ]
    assert transitions.fair_share([created_first, swept_first], 0) == []
