"""The clock the deployed functions use (domain/clock.py)."""

from __future__ import annotations

from datetime import UTC, datetime

from offpath.domain.clock import SystemClock


def test_the_system_clock_tells_the_time_in_utc() -> None:
    before = datetime.now(UTC)

    now = SystemClock().now()

    assert now.tzinfo is UTC
    assert before <= now <= datetime.now(UTC)
