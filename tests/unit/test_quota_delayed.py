"""The delayed-jobs quota on its own: the gate counts a tenant's delayed jobs (and only delayed submits take a
place) even when no open-jobs quota is set."""

from __future__ import annotations

import pytest

from offpath.domain.quotas import Quota, QuotaExceededError, Usage, parse
from offpath.logic.quotas import CachedQuotaGate
from offpath_tools.clocks import ManualClock
from offpath_tools.fakes import InMemoryQuotaCounters
from tests.unit.conftest import START


def gate_of(text: str, counters: InMemoryQuotaCounters) -> CachedQuotaGate:
    return CachedQuotaGate(parse(text), counters, ManualClock(START), monotonic=lambda: 0.0)


def test_a_delayed_jobs_quota_alone_counts_and_refuses_the_next_delayed_submit() -> None:
    counters = InMemoryQuotaCounters()
    counters.add("acme", Usage(open_jobs=7, delayed_jobs=1))
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
