"""Waiting for a job (`GET /jobs/{id}?wait=N`): the pauses between reads, their bound, and the parameter."""

from __future__ import annotations

import pytest

from offpath.domain.errors import InvalidRequestError
from offpath.logic.waiting import MAX_PAUSE_S, MAX_WAIT_S, max_reads, parse_wait, pauses


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
