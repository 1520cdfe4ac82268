"""Waiting for a job (`GET /jobs/{id}?wait=N`): the pauses between reads, their bound, and the parameter."""

from __future__ import annotations

import pytest

from offpath.domain.errors import InvalidRequestError
from offpath.domain.quotas import QuotaExceededError
from offpath.logic.waiting import LEASE_MARGIN_S, MAX_PAUSE_S, MAX_WAIT_S, max_reads, parse_wait, pauses, wait_slot


@pytest.mark.parametrize("wait_s", [0.1, 0.5, 1, 3, 10, 19.9, 20])
def test_the_pauses_fill_the_wait_none_longer_than_a_second(wait_s: float) -> None:
    found = pauses(wait_s)

    assert sum(found) == pytest.approx(wait_s)
    assert all(0 < pause <= MAX_PAUSE_S for pause in found)
    assert found[0] == pytest.approx(min(0.1, wait_s))


def test_the_longest_wait_reads_the_job_at_most_24_times() -> None:
    assert max_reads(MAX_WAIT_S) == 24
    assert max_reads(10) == 14
    assert max(max_reads(n / 10) for n in range(1, 201)) == 24


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("20", 20.0), ("0.1", 0.1), ("5", 5.0), ("12.5", 12.5), ("1e1", 10.0), ("5E-1", 0.5), ("5e-324", 5e-324)],
)
def test_a_wait_of_seconds_is_read(text: str, seconds: float) -> None:
    assert parse_wait(text) == seconds


BAD = ["0", "0.0", "20.1", "21", "-1", "", "abc", "inf", "nan", "3e1", " 5", "5 ", "²", "1.2.3", "1_0", "05", "1."]


@pytest.mark.parametrize("text", BAD)
def test_a_bad_wait_is_refused_naming_the_parameter(text: str) -> None:
    with pytest.raises(InvalidRequestError) as refused:
        parse_wait(text)
    assert refused.value.field == "wait"
    assert "at most 20" in str(refused.value)


class CountedSlots:
    """Wait slots in memory: `cap` per tenant, no leases (the table's own are tested against moto)."""

    def __init__(self) -> None:
        self.held: dict[str, set[str]] = {}
        self.leases: list[float] = []

    def take(self, tenant: str, wait_id: str, *, cap: int, now_s: float, lease_s: float) -> float:
        held = self.held.setdefault(tenant, set())
        if len(held) >= cap:
            return 2.5
        held.add(wait_id)
        self.leases.append(lease_s)
        return 0.0

    def release(self, tenant: str, wait_id: str) -> None:
        self.held[tenant].discard(wait_id)


def test_a_wait_slot_is_held_while_waiting_and_given_back_even_when_the_wait_fails() -> None:
    slots = CountedSlots()
    with wait_slot(slots, "tenant-a", 20, cap=1, now_s=0):
        assert len(slots.held["tenant-a"]) == 1
    with pytest.raises(RuntimeError), wait_slot(slots, "tenant-a", 20, cap=1, now_s=0):
        raise RuntimeError("the read failed")

    assert slots.held["tenant-a"] == set()
    assert slots.leases == [20 + LEASE_MARGIN_S] * 2


def test_past_the_cap_a_wait_is_refused_with_the_seconds_to_retry_after() -> None:
    slots = CountedSlots()
    with wait_slot(slots, "tenant-a", 5, cap=1, now_s=0):
        with pytest.raises(QuotaExceededError) as refused, wait_slot(slots, "tenant-a", 5, cap=1, now_s=0):
            pass
        with wait_slot(slots, "tenant-b", 5, cap=1, now_s=0):
            pass

    assert (refused.value.field, refused.value.retry_after_s) == ("wait", 3)
