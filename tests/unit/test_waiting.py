"""Waiting for a job (`GET /jobs/{id}?wait=N`): the pauses between reads, their bound, and the parameter."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from offpath.domain.errors import InvalidRequestError
from offpath.domain.job import Job, JobStatus
from offpath.domain.quotas import QuotaExceededError
from offpath.logic.waiting import (
    LEASE_MARGIN_S,
    MAX_PAUSE_S,
    MAX_WAIT_S,
    max_reads,
    parse_wait,
    pauses,
    wait_for_job,
    wait_slot,
)
from tests.unit.conftest import a_job


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


def test_a_wait_ending_within_a_nanosecond_of_a_pause_makes_no_read_for_that_nanosecond() -> None:
    assert pauses(0.100000001) == [0.1]
    assert max_reads(1.500000001) == max_reads(1.5) == 5


def test_a_wait_of_up_to_32_characters_is_read_and_a_longer_one_refused() -> None:
    assert parse_wait("1." + "0" * 30) == 1.0
    with pytest.raises(InvalidRequestError):
        parse_wait("1." + "0" * 31)


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


class Ticking:
    """A monotonic clock that moves only when the wait sleeps or a read takes `read_s`."""

    def __init__(self, read_s: float = 0.0) -> None:
        self.now = 100.0
        self.read_s = read_s
        self.slept: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds

    def monotonic(self) -> float:
        return self.now

    def reads(self, *statuses: JobStatus) -> Callable[[], Job]:
        """A read that answers the job in each of `statuses` in turn (the last one from then on)."""
        answers = list(statuses)

        def read() -> Job:
            self.now += self.read_s
            return a_job(answers.pop(0) if len(answers) > 1 else answers[0])

        return read


def test_a_job_already_final_is_answered_without_a_read_or_a_pause() -> None:
    ticking = Ticking()
    done = a_job(JobStatus.SUCCEEDED)

    assert wait_for_job(
        done, ticking.reads(JobStatus.RUNNING), 5, sleep=ticking.sleep, monotonic=ticking.monotonic
    ) == (
        done,
        0,
    )
    assert ticking.slept == []


def test_a_job_that_finishes_is_answered_at_the_read_that_sees_it() -> None:
    ticking = Ticking()
    read = ticking.reads(JobStatus.RUNNING, JobStatus.RUNNING, JobStatus.SUCCEEDED)

    job, reads = wait_for_job(a_job(JobStatus.QUEUED), read, 5, sleep=ticking.sleep, monotonic=ticking.monotonic)

    assert (job.status, reads) == (JobStatus.SUCCEEDED, 3)
    assert ticking.slept == pytest.approx([0.1, 0.2, 0.4])


def test_a_job_that_never_finishes_is_answered_as_it_is_when_the_wait_ends() -> None:
    ticking = Ticking()

    job, reads = wait_for_job(
        a_job(JobStatus.QUEUED), ticking.reads(JobStatus.RUNNING), 2, sleep=ticking.sleep, monotonic=ticking.monotonic
    )

    assert (job.status, reads) == (JobStatus.RUNNING, max_reads(2) - 1)
    assert ticking.slept == pytest.approx(pauses(2))
    assert ticking.now == pytest.approx(102.0)


def test_slow_reads_shorten_the_pauses_and_a_read_past_the_end_is_the_last() -> None:
    ticking = Ticking(read_s=0.3)

    job, reads = wait_for_job(
        a_job(JobStatus.QUEUED), ticking.reads(JobStatus.RUNNING), 1, sleep=ticking.sleep, monotonic=ticking.monotonic
    )

    # 0.1 pause + 0.3 read, 0.2 + 0.3 (0.1 s left), the pause cut to 0.1 + 0.3: past the end, no more.
    assert (job.status, reads) == (JobStatus.RUNNING, 3)
    assert ticking.slept == pytest.approx([0.1, 0.2, 0.1])


def test_a_read_that_ends_exactly_when_the_wait_does_is_the_last() -> None:
    ticking = Ticking()

    def read_until_the_end() -> Job:
        ticking.now = 101.0  # the wait began at 100.0 and lasts 1 s
        return a_job(JobStatus.RUNNING)

    job, reads = wait_for_job(
        a_job(JobStatus.QUEUED), read_until_the_end, 1, sleep=ticking.sleep, monotonic=ticking.monotonic
    )

    assert (job.status, reads) == (JobStatus.RUNNING, 1)
    assert ticking.slept == [0.1]
