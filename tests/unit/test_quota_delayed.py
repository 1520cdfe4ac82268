"""The delayed-jobs quota on its own: the gate counts a tenant's delayed jobs (and only delayed submits take a
place) even when no open-jobs quota is set."""

from __future__ import annotations

import pytest

from offpath.domain.quotas import Quota, QuotaExceededError, QuotaSpecError, Usage, parse, parse_entry
from offpath.logic.quotas import CachedQuotaGate
from offpath_tools.clocks import ManualClock
from offpath_tools.fakes import InMemoryQuotaCounters
from tests.unit.conftest import START


def gate_of(text: str, counters: InMemoryQuotaCounters) -> CachedQuotaGate:
    return CachedQuotaGate(parse(text), counters, ManualClock(START), monotonic=lambda: 0.0)


def test_a_delayed_jobs_quota_alone_counts_and_refuses_the_next_delayed_submit() -> None:
    counters = InMemoryQuotaCounters()
    counters.add("acme", Usage(open_jobs=7, delayed_jobs=1), job_id="0" * 32)
    gate = gate_of("acme:delayed_jobs=2", counters)

    gate.admit("acme", delayed=False)  # a job due now takes no delayed place
    gate.admit("acme", delayed=True)
    with pytest.raises(QuotaExceededError) as refused:
        gate.admit("acme", delayed=True)

    assert (refused.value.field, refused.value.retry_after_s) == ("delayed_jobs", 5)
    assert str(refused.value) == "over the quota of 2 delayed jobs (waiting for their run_at); 2 are waiting"
    gate.admit("acme", delayed=False)  # still no open-jobs quota
    assert gate.usage("acme") == Usage(open_jobs=7, delayed_jobs=1)


def test_a_quota_counts_when_either_count_is_limited() -> None:
    assert Quota(delayed_jobs=3).counts and Quota(delayed_jobs=3).limited
    assert Quota(open_jobs=3).counts
    assert not Quota(submits_per_s=1).counts and Quota(submits_per_s=1).limited
    assert not Quota().limited
    assert Usage(2, 3).plus(Usage(1, -1)) == Usage(3, 2)


def test_the_usage_of_a_tenant_without_a_count_is_not_read() -> None:
    counters = InMemoryQuotaCounters()
    gate = gate_of("acme:submits_per_s=5", counters)

    assert gate.usage("acme") is None
    assert gate_of("acme:delayed_jobs=1", counters).usage("acme") == Usage()


# -- the text form at its bounds ------------------------------------------------------------------------


def test_the_largest_values_are_accepted_and_one_more_is_refused() -> None:
    assert parse_entry("acme:submits_per_s=1000000") == ("acme", Quota(submits_per_s=1_000_000.0))
    assert parse_entry("acme:open_jobs=999999999") == ("acme", Quota(open_jobs=999_999_999))
    with pytest.raises(QuotaSpecError) as refused:
        parse_entry("acme:open_jobs=1000000000")
    assert str(refused.value) == "'acme:open_jobs=1000000000': open_jobs must be a whole number from 0 to 999999999"


def test_the_tenant_is_what_comes_before_the_last_colon() -> None:
    assert parse_entry("acme:x:open_jobs=1") == ("acme:x", Quota(open_jobs=1))


def test_a_refusal_shows_the_entry_cut_to_60_characters_and_the_part_to_40() -> None:
    with pytest.raises(QuotaSpecError) as refused:
        parse_entry("acme:" + "z" * 70 + "=1")
    assert str(refused.value) == (
        f"{'acme:' + 'z' * 55!r}: {'z' * 40!r} is not one of submits_per_s=, burst=, open_jobs=, delayed_jobs="
    )
    with pytest.raises(QuotaSpecError) as refused:
        parse_entry("!" * 50 + ":open_jobs=1")
    assert str(refused.value) == (
        f"{'!' * 50 + ':open_jobs'!r}: {'!' * 40!r} is not a tenant a caller can be (or * for the default)"
    )


def test_the_text_form_writes_rates_as_numbers_counts_as_integers_and_no_default_when_there_is_none() -> None:
    assert (
        parse("*:open_jobs=5;acme:submits_per_s=2.5,burst=3").text() == "*:open_jobs=5;acme:submits_per_s=2.5,burst=3"
    )
    assert parse("acme:submits_per_s=2,delayed_jobs=7").text() == "acme:submits_per_s=2,delayed_jobs=7"


def test_a_refusal_asks_to_wait_at_least_a_second_and_as_long_as_asked() -> None:
    assert QuotaExceededError("open_jobs", "m", 0).retry_after_s == 1
    assert QuotaExceededError("open_jobs", "m", 1).retry_after_s == 1
    assert QuotaExceededError("open_jobs", "m", 7).retry_after_s == 7


def test_a_large_count_is_written_out_whole() -> None:
    assert parse("acme:open_jobs=999999999").text() == "acme:open_jobs=999999999"


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        (
            "acme:submits_per_s=1000000.5",
            "'acme:submits_per_s=1000000.5': submits_per_s must be a number above 0 (at most 1000000)",
        ),
        ("acme:open_jobs=1=2", "'acme:open_jobs=1=2': open_jobs must be a whole number from 0 to 999999999"),
        (":open_jobs=1", "':open_jobs=1': a quota is TENANT:submits_per_s=N,open_jobs=M[,delayed_jobs=K] (* for all)"),
    ],
)
def test_a_value_just_over_its_bound_or_with_a_second_equals_sign_is_refused(entry: str, message: str) -> None:
    with pytest.raises(QuotaSpecError) as refused:
        parse_entry(entry)
    assert str(refused.value) == message
