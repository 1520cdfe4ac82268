"""Quotas: their text form (the `--quota` option, the stack's context, OFFPATH_QUOTAS), the gate's checks against
in-memory counters, and the counting store that never lets a count get in the way of a job's own write."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest

from offpath.domain.job import AttemptError, Job, JobStatus, Progress
from offpath.domain.ports import DebounceRecord, Firing, Ports
from offpath.domain.quotas import Quota, QuotaBook, QuotaExceededError, QuotaSpecError, Usage, parse, parse_entry
from offpath.logic.quotas import CachedQuotaGate, CountingStore
from offpath.settings import Settings
from offpath_local.cli import USAGE, main
from offpath_tools.clocks import ManualClock
from offpath_tools.fakes import SCRIPTED_TYPE, InMemoryJobStore, InMemoryQuotaCounters
from tests.unit.conftest import START, TENANT, a_job, submitted

# -- the text form --------------------------------------------------------------------------------


def test_a_tenants_entry_overrides_the_default_field_by_field() -> None:
    book = parse("*:submits_per_s=10,open_jobs=100; acme:submits_per_s=50,burst=80,delayed_jobs=5")

    assert book.for_tenant("acme") == Quota(submits_per_s=50, burst=80, open_jobs=100, delayed_jobs=5)
    assert book.for_tenant("other") == Quota(submits_per_s=10, open_jobs=100)
    assert book.for_tenant("other").bucket == 10


def test_the_text_form_reads_back_as_the_same_book() -> None:
    book = parse("*:submits_per_s=2.5,open_jobs=10;b:delayed_jobs=0;a:burst=3,submits_per_s=1")

    assert parse(book.text()) == book


def test_jobs_that_schedules_make_are_never_limited() -> None:
    assert parse("*:submits_per_s=1,open_jobs=1").for_tenant("system") == Quota()


def test_no_quota_configured_counts_nothing() -> None:
    assert not QuotaBook().configured
    assert not parse("*:submits_per_s=5").counts
    assert parse("acme:open_jobs=5").counts


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("acme", "a quota is TENANT:"),
        ("acme:submits_per_s=0", "submits_per_s must be a number above 0"),
        ("acme:submits_per_s=fast", "submits_per_s must be a number above 0"),
        ("acme:submits_per_s=inf", "submits_per_s must be a number above 0"),
        ("acme:open_jobs=-1", "open_jobs must be a whole number from 0"),
        ("acme:open_jobs=1.5", "open_jobs must be a whole number from 0"),
        ("acme:burst=0", "burst must be a whole number from 1"),
        ("acme:jobs=5", "is not one of submits_per_s="),
        ("acme:open_jobs=1,open_jobs=2", "open_jobs is given twice"),
        ("system:open_jobs=1", "is not a tenant a caller can be"),
        ("bad tenant:open_jobs=1", "is not a tenant a caller can be"),
    ],
)
def test_a_quota_written_wrongly_is_refused_with_its_reason(text: str, says: str) -> None:
    with pytest.raises(QuotaSpecError, match=says.replace("(", r"\(")):
        parse_entry(text)


def test_a_function_refuses_a_wrong_quota_setting_at_start() -> None:
    with pytest.raises(ValueError, match="open_jobs must be"):
        Settings(table_name="t", quotas="acme:open_jobs=many")


def test_offpath_local_refuses_a_wrong_quota_option_with_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["local", "--quota", "acme:submits_per_s=10", "--quota", "*:open_jobs=lots"])

    assert code == USAGE
    err = capsys.readouterr().err
    assert "--quota '*:open_jobs=lots': open_jobs must be a whole number from 0" in err
    assert "Traceback" not in err


# -- the gate -------------------------------------------------------------------------------------


def gate_of(text: str, counters: InMemoryQuotaCounters, clock: ManualClock) -> CachedQuotaGate:
    return CachedQuotaGate(parse(text), counters, clock, monotonic=lambda: 0.0)


def test_the_gate_counts_what_this_environment_admitted_since_it_read() -> None:
    counters = InMemoryQuotaCounters()
    gate = gate_of("acme:open_jobs=2", counters, ManualClock(START))
    gate.admit("acme", delayed=False)
    gate.admit("acme", delayed=False)

    with pytest.raises(QuotaExceededError) as refused:
        gate.admit("acme", delayed=False)

    assert (refused.value.field, refused.value.retry_after_s) == ("open_jobs", 5)
    assert counters.reads == 1  # one read for the three checks


def test_a_submit_the_bucket_refuses_does_not_count_against_the_open_jobs() -> None:
    counters = InMemoryQuotaCounters()
    clock = ManualClock(START)
    gate = gate_of("acme:submits_per_s=1,open_jobs=2", counters, clock)
    gate.admit("acme", delayed=False)
    with pytest.raises(QuotaExceededError, match="submits per second"):
        gate.admit("acme", delayed=False)
    clock.advance(1)

    gate.admit("acme", delayed=False)  # the second open job: the refused submit took no place


def test_the_retry_after_of_the_bucket_is_when_a_token_is_back() -> None:
    clock = ManualClock(START)
    gate = gate_of("acme:submits_per_s=0.25", InMemoryQuotaCounters(), clock)
    gate.admit("acme", delayed=False)

    with pytest.raises(QuotaExceededError) as refused:
        gate.admit("acme", delayed=False)

    assert refused.value.retry_after_s == 4


# -- counting ---------------------------------------------------------------------------------------


def test_a_count_that_cannot_be_written_leaves_the_jobs_write_standing(ports: Ports) -> None:
    counters = InMemoryQuotaCounters()
    store = CountingStore(InMemoryJobStore(), parse(f"{TENANT}:open_jobs=5"), counters)
    counters.failing_adds = 1
    counted = Ports(registry=ports.registry, store=store, queue=ports.queue, clock=ports.clock, metrics=ports.metrics)

    job = submitted(counted)

    assert store.get(job.job_id, tenant=job.tenant) is not None
    assert counters.usage(TENANT) == Usage()
    submitted(counted)
    assert counters.usage(TENANT) == Usage(open_jobs=1)


def test_a_job_that_ends_frees_its_place(ports: Ports) -> None:
    counters = InMemoryQuotaCounters()
    store = CountingStore(InMemoryJobStore(), parse(f"{TENANT}:open_jobs=5"), counters)
    counted = Ports(registry=ports.registry, store=store, queue=ports.queue, clock=ports.clock, metrics=ports.metrics)
    job = submitted(counted)
    now = ports.clock.now()

    store.cancel(job.job_id, tenant=TENANT, now=now, expires_at=now)

    assert store.get(job.job_id, tenant=job.tenant).status is JobStatus.CANCELLED  # type: ignore[union-attr]
    assert counters.usage(TENANT) == Usage()


def test_a_submit_the_bucket_refuses_gives_back_the_place_it_took_delayed_or_not() -> None:
    clock = ManualClock(START)
    gate = gate_of("acme:submits_per_s=1,open_jobs=2,delayed_jobs=1", InMemoryQuotaCounters(), clock)
    gate.admit("acme", delayed=False)
    for delayed in (False, True):
        with pytest.raises(QuotaExceededError) as refused:
            gate.admit("acme", delayed=delayed)
        assert refused.value.field == "submits_per_s"
        assert str(refused.value) == "over the quota of 1 submits per second (burst 1)"
    clock.advance(1)

    gate.admit("acme", delayed=True)  # the one delayed place, the second open place
    clock.advance(1)
    with pytest.raises(QuotaExceededError) as refused:
        gate.admit("acme", delayed=False)

    assert str(refused.value) == "over the quota of 2 open jobs (not final); 2 are open"


def test_a_refused_submit_gives_back_only_the_delayed_place_it_took() -> None:
    clock = ManualClock(START)
    gate = gate_of("acme:submits_per_s=1,delayed_jobs=1", InMemoryQuotaCounters(), clock)
    gate.admit("acme", delayed=False)
    for delayed in (False, True):
        with pytest.raises(QuotaExceededError):
            gate.admit("acme", delayed=delayed)
    clock.advance(1)
    gate.admit("acme", delayed=True)
    clock.advance(1)

    with pytest.raises(QuotaExceededError) as refused:
        gate.admit("acme", delayed=True)

    assert refused.value.field == "delayed_jobs"


def test_each_tenant_has_its_own_bucket() -> None:
    gate = gate_of("*:submits_per_s=1", InMemoryQuotaCounters(), ManualClock(START))
    gate.admit("acme", delayed=False)

    gate.admit("beta", delayed=False)


def test_the_bucket_gives_a_token_back_exactly_when_its_interval_is_over() -> None:
    clock = ManualClock(START)
    gate = gate_of("acme:submits_per_s=0.1", InMemoryQuotaCounters(), clock)
    gate.admit("acme", delayed=False)
    clock.advance(9.999999)

    with pytest.raises(QuotaExceededError) as refused:
        gate.admit("acme", delayed=False)
    assert refused.value.retry_after_s == 1
    clock.advance(0.000001)
    gate.admit("acme", delayed=False)


def test_the_gate_reads_a_tenants_count_again_once_its_reading_is_a_second_old() -> None:
    counters = InMemoryQuotaCounters()
    seconds = [100.0]
    gate = CachedQuotaGate(parse("acme:open_jobs=3"), counters, ManualClock(START), monotonic=lambda: seconds[0])
    gate.admit("acme", delayed=False)
    counters.add("acme", Usage(open_jobs=3), job_id="1" * 32)  # another environment's admissions
    seconds[0] = 100.999
    gate.admit("acme", delayed=False)  # its own reading: 0 + the 1 it admitted
    assert counters.reads == 1

    seconds[0] = 101.0
    with pytest.raises(QuotaExceededError):
        gate.admit("acme", delayed=False)  # read again: 3 open
    assert counters.reads == 2


def test_a_count_that_cannot_be_written_is_logged_with_its_tenant(
    ports: Ports, caplog: pytest.LogCaptureFixture
) -> None:
    counters = InMemoryQuotaCounters()
    counters.failing_adds = 1
    store = CountingStore(InMemoryJobStore(), parse(f"{TENANT}:open_jobs=5"), counters)

    with caplog.at_level(logging.WARNING, logger="offpath.logic.quotas"):
        store.create(a_job())

    [record] = caplog.records
    assert record.getMessage() == "a quota count was not written"
    assert record.__dict__["tenant"] == TENANT


def at(seconds: float) -> datetime:
    return START + timedelta(seconds=seconds)


def life(store: Any, usage: Callable[[], Usage | None]) -> tuple[list[object], list[Usage | None]]:
    """Every call of the JobStore port once, on jobs of a counted tenant (and two of an uncounted one): what each
    call answered, the jobs the store holds at the end, and the tenant's counts after each job's story."""
    answers: list[object] = []
    counts: list[Usage | None] = []
    day = 86_400

    def job(letter: str, status: JobStatus = JobStatus.QUEUED, **changes: Any) -> Job:
        made = a_job(status, job_id=letter * 32, sweep_at=at(120), **changes)
        answers.append(store.create(made))
        return made

    done = job("a", idempotency_key="key-a", tags={"team": "maps"})  # retried by its worker, then succeeds
    answers.append(store.record_key(done, expires_at=at(day)))
    answers.append(store.key_record(TENANT, "key-a"))
    run = store.claim(done.job_id, tenant=TENANT, now=at(1), lease_until=at(31), sweep_at=at(32))
    store.set_progress(done.job_id, tenant=TENANT, attempt=1, progress=Progress(0.5, "half"), now=at(2))
    answers += [run, store.get(done.job_id, tenant=TENANT)]
    answers += [
        store.mark_once(done.job_id, name, now=at(2), expires_at=at(60)) for name in ("started", "started", "ok")
    ]
    store.record_retry(run, error="boom", now=at(3), next_attempt_at=at(13), detail=AttemptError("E", "boom"))
    run = store.claim(done.job_id, tenant=TENANT, now=at(13), lease_until=at(43))
    store.record_retry(run, error="again", now=at(14), next_attempt_at=at(24))
    answers.append(store.get(done.job_id, tenant=TENANT))
    run = store.claim(done.job_id, tenant=TENANT, now=at(24), lease_until=at(54))
    store.record_success(run, result={"n": 1}, now=at(25), expires_at=at(25 + day))
    counts.append(usage())

    failed = job("b")  # failed by its worker, then redriven
    run = store.claim(failed.job_id, tenant=TENANT, now=at(1), lease_until=at(31))
    store.record_failure(run, error="bad", now=at(2), expires_at=at(2 + day), detail=AttemptError("K", "bad"))
    answers.append(store.reset_for_redrive(failed.job_id, tenant=TENANT, now=at(5), sweep_at=at(125)))
    plain = job("h", type="other")  # failed without a traceback
    run = store.claim(plain.job_id, tenant=TENANT, now=at(1), lease_until=at(31))
    answers.append(store.mark_once(plain.job_id, "started", now=at(2), expires_at=at(60)))
    store.record_failure(run, error="worse", now=at(2), expires_at=at(2 + day))
    counts.append(usage())

    lost = job("c", max_attempts=1)  # its worker vanished on its last attempt; retried by hand
    run = store.claim(lost.job_id, tenant=TENANT, now=at(1), lease_until=at(31))
    store.fail_expired_lease(run, now=at(40), expires_at=at(40 + day))
    answers.append(store.retry_by_hand(lost.job_id, tenant=TENANT, now=at(50), sweep_at=at(170), operation="op-1"))
    counts.append(usage())

    again = job("d")  # its worker vanished with attempts left
    run = store.claim(again.job_id, tenant=TENANT, now=at(1), lease_until=at(31))
    answers.append(store.requeue_expired_lease(run, now=at(40), sweep_at=at(160)))
    counts.append(usage())

    delayed = job("s", JobStatus.SCHEDULED, run_at=at(600))  # enqueued when due
    answers.append(store.enqueue_scheduled(delayed.job_id, tenant=TENANT, now=at(600), sweep_at=at(720)))
    counts.append(usage())

    job("e", JobStatus.SCHEDULED, run_at=at(9000))  # stays delayed (and counted in the shard of p and 2)
    later = job("f", JobStatus.SCHEDULED, run_at=at(3600))  # cancelled, then retried by hand for its run_at
    answers.append(store.cancel(later.job_id, tenant=TENANT, now=at(5), expires_at=at(5 + day), operation="op-2"))
    answers.append(
        store.retry_by_hand(later.job_id, tenant=TENANT, now=at(6), sweep_at=at(3720), operation="op-3", scheduled=True)
    )
    counts.append(usage())

    stale = job("p", start_by=at(30))  # not started by its start_by
    answers.append(store.expire(stale.job_id, tenant=TENANT, now=at(31), expires_at=at(31 + day)))
    counts.append(usage())

    burst = job("2")  # superseded by a later submit under its debounce key
    record = DebounceRecord("3" * 32, at(7), at(17))
    answers.append(store.swap_debounce(TENANT, SCRIPTED_TYPE, "key", DebounceRecord(burst.job_id, at(0), at(10))))
    answers.append(store.swap_debounce(TENANT, SCRIPTED_TYPE, "key", record))
    answers.append(store.debounce_record(TENANT, SCRIPTED_TYPE, "key"))
    answers.append(store.cancel(burst.job_id, tenant=TENANT, now=at(7), expires_at=at(7 + day), superseded_by="3" * 32))
    store.name_survivor(burst.job_id, tenant=TENANT, seen="3" * 32, survivor="4" * 32, now=at(8))
    counts.append(usage())

    for letter in "xy":  # an uncounted tenant's jobs: one cancelled, one expired
        answers.append(store.create(a_job(job_id=letter * 32, tenant="other", start_by=at(30))))
    answers.append(store.cancel("x" * 32, tenant="other", now=at(31), expires_at=at(31 + day)))
    answers.append(store.expire("y" * 32, tenant="other", now=at(31), expires_at=at(31 + day)))

    due = store.due_for_sweep(now=at(200), limit=2)
    answers.append(due)
    store.reschedule_sweep(due[0], sweep_at=at(500), resent=True)
    first = store.list_jobs(TENANT, status=None, job_type=None, limit=2, cursor=None)
    answers.append(first)
    answers.append(store.list_jobs(TENANT, status=None, job_type=SCRIPTED_TYPE, limit=2, cursor=first.cursor))
    answers.append(store.list_jobs(TENANT, status=JobStatus.CANCELLED, job_type=None, limit=50, cursor=None))
    answers.append(store.list_jobs(TENANT, status=None, job_type="other", limit=50, cursor=None))
    answers.append(store.list_jobs(TENANT, status=None, job_type=None, limit=50, cursor=None, tag=("team", "maps")))
    answers.append(store.record_firing("nightly", Firing("2026-03-01T12:00:00Z", at(0), "a" * 32), keep=1))
    answers.append(store.record_firing("nightly", Firing("2026-03-02T12:00:00Z", at(86_400), None, "paused"), keep=1))
    answers.append(store.get_schedule_state("nightly"))
    answers.append(sorted(store.jobs(), key=lambda j: (j.tenant, j.job_id)))
    return answers, counts


def test_a_counting_store_holds_and_answers_what_the_store_it_wraps_would_and_counts_each_change() -> None:
    counters = InMemoryQuotaCounters()
    counted = CountingStore(InMemoryJobStore(), parse(f"{TENANT}:open_jobs=50,delayed_jobs=50"), counters)

    answers, counts = life(counted, lambda: counters.usage(TENANT))

    assert answers == life(InMemoryJobStore(), lambda: None)[0]
    assert counts == [
        Usage(0, 0),  # a: submitted, succeeded
        Usage(1, 0),  # b: failed, redriven
        Usage(2, 0),  # c: failed, retried by hand
        Usage(3, 0),  # d: requeued
        Usage(4, 0),  # s: delayed, enqueued
        Usage(6, 2),  # e delayed; f delayed, cancelled, retried by hand for its run_at
        Usage(6, 2),  # p: expired
        Usage(6, 2),  # 2: superseded
    ]
    assert counters.usage("other") == Usage()


def test_a_cancel_or_an_expiry_of_an_uncounted_tenants_job_reads_nothing_first() -> None:
    store = InMemoryJobStore()
    counted = CountingStore(store, parse(f"{TENANT}:open_jobs=5"), InMemoryQuotaCounters())
    for letter in "xy":
        counted.create(a_job(job_id=letter * 32, tenant="other", start_by=at(30)))

    counted.cancel("x" * 32, tenant="other", now=at(31), expires_at=at(60))
    counted.expire("y" * 32, tenant="other", now=at(31), expires_at=at(60))

    assert store.reads == []
