"""Exponential backoff with full jitter: a delay anywhere in [0, ceiling], the ceiling doubling up to a cap."""

from __future__ import annotations

import random

import pytest

from offpath.domain.backoff import Backoff
from offpath_tools.fakes import CeilingJitter


def test_the_ceiling_doubles_with_each_failed_attempt() -> None:
    backoff = Backoff(base_s=2.0, cap_s=900.0)

    assert [backoff.ceiling(a) for a in (1, 2, 3, 4)] == [2.0, 4.0, 8.0, 16.0]


def test_the_ceiling_stops_at_the_cap() -> None:
    backoff = Backoff(base_s=2.0, cap_s=30.0)

    assert [backoff.ceiling(a) for a in (4, 5, 6, 50)] == [16.0, 30.0, 30.0, 30.0]


def test_the_first_attempt_waits_at_most_the_base() -> None:
    assert Backoff(base_s=3.0).ceiling(1) == 3.0


@pytest.mark.parametrize("attempt", [1, 2, 5, 12])
def test_every_delay_lies_between_zero_and_the_ceiling(attempt: int) -> None:
    backoff = Backoff(base_s=1.0, cap_s=60.0)
    rng = random.Random(attempt)

    delays = [backoff.delay(attempt, rng) for _ in range(500)]

    assert all(0.0 <= d <= backoff.ceiling(attempt) for d in delays)


def test_the_jitter_spreads_over_the_whole_range() -> None:
    backoff = Backoff(base_s=1.0, cap_s=60.0)
    rng = random.Random(7)
    ceiling = backoff.ceiling(4)

    delays = [backoff.delay(4, rng) for _ in range(500)]

    assert min(delays) < 0.1 * ceiling
    assert max(delays) > 0.9 * ceiling


def test_the_largest_delay_is_the_ceiling() -> None:
    backoff = Backoff(base_s=1.0, cap_s=5.0)

    assert [backoff.delay(a, CeilingJitter()) for a in (1, 2, 3, 4, 5)] == [1.0, 2.0, 4.0, 5.0, 5.0]
