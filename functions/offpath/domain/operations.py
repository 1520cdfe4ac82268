"""The operator's records and ports: queue depths, redrives, per-minute statistics and alarms. Apart from
offpath.domain.ports because only the operator's routes use them: a submit's or a worker's cold start does not
create these records' classes (the adapters that make them import this module where they make them)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

# -- queues and redrives -------------------------------------------------------------------------


@dataclass(frozen=True)
class QueueStats:
    name: str
    visible: int
    in_flight: int
    delayed: int
    oldest_age_s: float | None
    dlq_depth: int


class QueueMonitor(Protocol):
    def stats(self) -> list[QueueStats]: ...


@dataclass(frozen=True)
class RedriveTask:
    queue: str
    status: str
    moved: int | None = None
    to_move: int | None = None
    task_id: str | None = None


class Redriver(Protocol):
    def start(self, queue: str, *, max_per_second: int | None) -> RedriveTask: ...

    def latest(self, queue: str) -> RedriveTask | None: ...


# -- operations: per-minute statistics and alarms ------------------------------------------------


@dataclass(frozen=True)
class MinuteStats:
    """One minute of one queue class and job type, from the functions' metrics. Percentiles are in
    seconds, None when no job ran (or waited) that minute."""

    minute: datetime  # the minute's start, UTC
    queue: str
    job_type: str
    submitted: int = 0
    succeeded: int = 0
    failed: int = 0
    retried: int = 0
    dead_lettered: int = 0
    duration_p50_s: float | None = None
    duration_p95_s: float | None = None
    queue_wait_p50_s: float | None = None
    queue_wait_p95_s: float | None = None
    # Jobs not started by their expires_at (JobsExpired).
    expired: int = 0


class StatsSource(Protocol):
    def minutes(self, *, start: datetime, end: datetime) -> list[MinuteStats]:
        """Every minute from `start` to `end` in which something was counted, oldest first."""


@dataclass(frozen=True)
class AlarmState:
    name: str
    state: str  # OK, ALARM or INSUFFICIENT_DATA
    reason: str
    updated_at: datetime | None
    description: str = ""


@dataclass(frozen=True)
class AlarmChange:
    time: datetime
    alarm: str
    old_state: str
    new_state: str
    reason: str


class AlarmSource(Protocol):
    def alarms(self) -> list[AlarmState]:
        """The stack's alarms, by name."""

    def changes(self, *, limit: int) -> list[AlarmChange]:
        """The stack's most recent alarm state changes, newest first."""
