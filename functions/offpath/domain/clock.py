"""Time comes from a clock that tests can replace (offpath_tools.clocks has the ones they move by hand)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Protocol


def iso(when: datetime) -> str:
    """A time as the api, events and webhooks write it: ISO 8601, UTC as `Z`."""
    return when.isoformat().replace("+00:00", "Z")


class Clock(Protocol):
    def now(self) -> datetime: ...


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)
