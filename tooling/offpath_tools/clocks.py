"""Clocks that tests and benchmarks move by hand (the functions use `offpath.domain.clock.SystemClock`)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta


class ManualClock:
    """A clock that only moves when told to."""

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or datetime(2026, 1, 1, tzinfo=UTC)

    def now(self) -> datetime:
        return self._now

    def advance(self, seconds: float) -> None:
        self._now += timedelta(seconds=seconds)

    def set(self, when: datetime) -> None:
        self._now = when


class ShiftableClock:
    """The system clock, which a scenario can move ahead: a one-time schedule fires at its job's run_at."""

    def __init__(self) -> None:
        self.offset = timedelta(0)

    def now(self) -> datetime:
        return datetime.now(UTC) + self.offset

    @contextlib.contextmanager
    def shifted(self, by: timedelta) -> Iterator[None]:
        self.offset = by
        try:
            yield
        finally:
            self.offset = timedelta(0)
