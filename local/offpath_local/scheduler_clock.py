"""The scheduler clock: EventBridge Scheduler's firing, which moto's scheduler (CRUD only) lacks.

It reads the schedules in the schedule group of the emulator (one per declared schedule and the
sweeper's, created at start-up as the stack declares them, and the one-time `at()` schedules the api
creates for delayed jobs) and, when a slot comes, invokes the target function asynchronously with
the schedule's `Target.Input`, its context attributes substituted as the Scheduler does:
`<aws.scheduler.scheduled-time>` (the slot, UTC, `2026-01-31T09:00:00Z`), `<aws.scheduler.execution-id>`,
`<aws.scheduler.attempt-number>` and `<aws.scheduler.schedule-arn>`. A one-time schedule with
`ActionAfterCompletion: DELETE` is deleted after it fired. Cron and rate expressions are evaluated in
the schedule's time zone with offpath's own parser (daylight saving time as the Scheduler does it).

Time is a `VirtualTime`: real time by default, faster for tests (`speed`), so a schedule can be seen
firing within seconds. Differences from AWS: a flexible time window fires at the start of the window,
and slots missed while the process was stopped are not fired (a few missed while it was busy are).
"""

from __future__ import annotations

import json
import logging
import re
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from offpath.domain.cron import load_zone, parse_cron, parse_rate
from offpath_local.periodic import Periodic

logger = logging.getLogger("offpath.local.scheduler")

MAX_CATCH_UP = 10
AT_PATTERN = re.compile(r"^at\((\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})\)$")

Invoke = Callable[[str, dict[str, Any]], None]
Record = Callable[[dict[str, Any]], None]


class VirtualTime:
    """Now, running `speed` times faster than real time from the moment it is made."""

    def __init__(self, speed: float = 1.0, start: datetime | None = None) -> None:
        if speed <= 0:
            raise ValueError("speed must be positive")
        self.speed = speed
        self._real_start = time.time()
        self._virtual_start = (start or datetime.now(UTC)).timestamp()

    def now(self) -> datetime:
        return datetime.fromtimestamp(self._virtual_start + (time.time() - self._real_start) * self.speed, UTC)

    def at_real(self, epoch_s: float) -> datetime:
        """The virtual time of a real instant."""
        return datetime.fromtimestamp(self._virtual_start + (epoch_s - self._real_start) * self.speed, UTC)


@dataclass
class _Tracked:
    name: str
    arn: str
    expression: str
    timezone: str
    target_arn: str
    input: str
    delete_after: bool
    modified: Any
    next_slot: datetime | None
    anchor: datetime


def scheduled_time(slot: datetime) -> str:
    return slot.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def substitute(template: str, *, slot: datetime, schedule_arn: str, attempt: int = 1) -> str:
    """Context attributes in a target input, replaced as text (they sit inside JSON strings)."""
    return (
        template.replace("<aws.scheduler.scheduled-time>", scheduled_time(slot))
        .replace("<aws.scheduler.execution-id>", secrets.token_hex(8))
        .replace("<aws.scheduler.attempt-number>", str(attempt))
        .replace("<aws.scheduler.schedule-arn>", schedule_arn)
    )


def next_slot(expression: str, timezone: str, after: datetime, anchor: datetime) -> datetime | None:
    """The first slot strictly after `after` (an `at()` slot is returned even when it has passed)."""
    match = AT_PATTERN.match(expression)
    if match:
        local = datetime.fromisoformat(match.group(1)).replace(tzinfo=load_zone(timezone or "UTC"))
        return local.astimezone(UTC)
    if expression.startswith("cron(") and expression.endswith(")"):
        return parse_cron(expression[5:-1]).next_after(after, load_zone(timezone or "UTC"))
    if expression.startswith("rate(") and expression.endswith(")"):
        return parse_rate(expression[5:-1]).next_after(after, anchor)
    raise ValueError(f"unsupported schedule expression {expression[:60]!r}")


class SchedulerClock(Periodic):
    thread_name = "scheduler-clock"

    def __init__(
        self,
        scheduler: Any,
        group: str,
        invoke: Invoke,
        *,
        time_source: VirtualTime | None = None,
        tick_s: float = 1.0,
        record: Record | None = None,
    ) -> None:
        self.scheduler = scheduler
        self.group = group
        self.invoke = invoke
        self.time = time_source or VirtualTime()
        super().__init__(tick_s)
        self.tick_s = tick_s
        self.record = record
        self._tracked: dict[str, _Tracked] = {}
        # One-time schedules that fired and stay in the group (no ActionAfterCompletion: DELETE).
        self._done: dict[str, Any] = {}

    def step(self) -> object:
        return self.tick()

    def tick(self) -> int:
        """Fire every slot that has come; returns how many fired."""
        now = self.time.now()
        self._refresh(now)
        fired = 0
        for tracked in list(self._tracked.values()):
            count = 0
            while tracked.next_slot is not None and tracked.next_slot <= now:
                slot = tracked.next_slot
                if count < MAX_CATCH_UP:
                    self._fire(tracked, slot)
                    fired += 1
                count += 1
                if AT_PATTERN.match(tracked.expression):
                    tracked.next_slot = None
                    self._completed(tracked)
                    break
                tracked.next_slot = next_slot(tracked.expression, tracked.timezone, slot, tracked.anchor)
            if count > MAX_CATCH_UP:
                logger.warning("schedule %s: %d missed slots not fired", tracked.name, count - MAX_CATCH_UP)
        return fired

    def _refresh(self, now: datetime) -> None:
        listed: dict[str, dict[str, Any]] = {}
        token: str | None = None
        while True:
            request: dict[str, Any] = {"GroupName": self.group}
            if token:
                request["NextToken"] = token
            response = self.scheduler.list_schedules(**request)
            for summary in response.get("Schedules", []):
                listed[summary["Name"]] = summary
            token = response.get("NextToken")
            if not token:
                break
        for name in list(self._tracked):
            if name not in listed:
                del self._tracked[name]
        for name, summary in listed.items():
            if summary.get("State", "ENABLED") != "ENABLED":
                self._tracked.pop(name, None)
                continue
            known = self._tracked.get(name)
            modified = summary.get("LastModificationDate")
            if name in self._done and self._done[name] == modified:
                continue
            if known is not None and known.modified == modified:
                continue
            self._track(name, summary, now)

    def _track(self, name: str, summary: dict[str, Any], now: datetime) -> None:
        try:
            detail = self.scheduler.get_schedule(Name=name, GroupName=self.group)
        except Exception:
            logger.warning("schedule %s could not be read", name)
            return
        created = detail.get("CreationDate")
        anchor = created if isinstance(created, datetime) else now
        anchor = anchor.astimezone(UTC) if anchor.tzinfo else anchor.replace(tzinfo=UTC)
        # A rate counts from when the schedule was made, in the clock's time.
        anchor = self.time.at_real(anchor.timestamp())
        expression = str(detail.get("ScheduleExpression", ""))
        timezone = str(detail.get("ScheduleExpressionTimezone") or "UTC")
        target = detail.get("Target") or {}
        try:
            first = next_slot(expression, timezone, now, anchor)
        except (ValueError, KeyError) as error:
            logger.warning("schedule %s: %s; it is not fired", name, error)
            return
        self._tracked[name] = _Tracked(
            name=name,
            arn=str(detail.get("Arn", "")),
            expression=expression,
            timezone=timezone,
            target_arn=str(target.get("Arn", "")),
            input=str(target.get("Input") or "{}"),
            delete_after=detail.get("ActionAfterCompletion") == "DELETE",
            modified=summary.get("LastModificationDate"),
            next_slot=first,
            anchor=anchor,
        )

    def _fire(self, tracked: _Tracked, slot: datetime) -> None:
        text = substitute(tracked.input, slot=slot, schedule_arn=tracked.arn)
        try:
            event = json.loads(text)
        except ValueError:
            event = text
        if self.record:
            self.record(
                {
                    "schedule": tracked.name,
                    "scheduled_time": scheduled_time(slot),
                    "target": tracked.target_arn,
                    "fired_at": datetime.now(UTC).isoformat().replace("+00:00", "Z"),
                }
            )
        self.invoke(tracked.target_arn, event)

    def _completed(self, tracked: _Tracked) -> None:
        self._done[tracked.name] = tracked.modified
        if tracked.delete_after:
            try:
                self.scheduler.delete_schedule(Name=tracked.name, GroupName=self.group)
            except Exception:
                logger.warning("one-time schedule %s could not be deleted after it fired", tracked.name)
        self._tracked.pop(tracked.name, None)
