"""Quotas: their text form (the `--quota` option, the stack's context, OFFPATH_QUOTAS), the gate's checks against
in-memory counters, and the counting store that never lets a count get in the way of a job's own write."""

from __future__ import annotations

import pytest

from offpath.domain.job import JobStatus
from offpath.domain.ports import Ports
from offpath.domain.quotas import Quota, QuotaBook, QuotaExceededError, QuotaSpecError, Usage, parse, parse_entry
from offpath.logic.quotas import CachedQuotaGate, CountingStore
from offpath.settings import Settings
from offpath_local.cli import USAGE, main
from offpath_tools.clocks import ManualClock
from offpath_tools.fakes import InMemoryJobStore, InMemoryQuotaCounters
from tests.unit.conftest import START, TENANT, submitted

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
        Settings.model_validate({"table_name": "t", "quotas": "acme:open_jobs=many"})


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
