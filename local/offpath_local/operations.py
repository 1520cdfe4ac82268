"""Local stand-ins for what CloudWatch answers on AWS and moto cannot: GET /stats and the alarm history.

- `LocalStats`: moto's GetMetricData knows no percentiles (p50, p95), so the per-minute statistics come
  from the runtime's own aggregation of the functions' EMF lines (`prometheus.LocalMetrics`), the same
  lines CloudWatch would extract the metrics from. It keeps the last hour.
- `LocalAlarms`: the alarms and their states come from the emulator through the api's own adapter
  (`CloudWatchAlarms`, DescribeAlarms); moto has no DescribeAlarmHistory, so the recent changes are the
  ones the alarm evaluator made (the same it writes to alarms.jsonl).

The runtime puts them in the api function's services (its composition root, `functions.ApiFunction`).
"""

from __future__ import annotations

import collections
import json
import os
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from offpath.adapters.cloudwatch import CloudWatchAlarms
from offpath.domain.operations import AlarmChange, AlarmState, MinuteStats
from offpath_local.prometheus import KEEP_MINUTES, LocalMetrics

CHANGES_KEPT = 200
ALARM_RECORD = "alarms.jsonl"  # the alarm evaluator's record of state changes, in the data directory


class LocalStats:
    def __init__(self, metrics: LocalMetrics) -> None:
        self.metrics = metrics

    def minutes(self, *, start: datetime, end: datetime) -> list[MinuteStats]:
        first, last = int(start.timestamp()) // 60 * 60, int(end.timestamp())
        return [
            MinuteStats(
                minute=datetime.fromtimestamp(m.minute, UTC),
                queue=m.queue,
                job_type=m.job_type,
                submitted=m.submitted,
                succeeded=m.succeeded,
                failed=m.failed,
                retried=m.retried,
                dead_lettered=m.dead_lettered,
                expired=m.expired,
                duration_p50_s=m.duration_p50_s,
                duration_p95_s=m.duration_p95_s,
                queue_wait_p50_s=m.queue_wait_p50_s,
                queue_wait_p95_s=m.queue_wait_p95_s,
            )
            for m in self.metrics.minutes(KEEP_MINUTES)
            if first <= m.minute <= last
        ]


class AlarmChanges:
    """The alarm evaluator's state changes (its `on_change` records), newest last."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._changes: collections.deque[AlarmChange] = collections.deque(maxlen=CHANGES_KEPT)

    def record(self, change: dict[str, Any]) -> None:
        with self._lock:
            self._changes.append(
                AlarmChange(
                    time=datetime.fromisoformat(str(change["time"]).replace("Z", "+00:00")),
                    alarm=str(change["alarm"]),
                    old_state=str(change["old_state"]),
                    new_state=str(change["new_state"]),
                    reason=str(change["reason"]),
                )
            )

    def newest(self, limit: int) -> list[AlarmChange]:
        with self._lock:
            return list(reversed(self._changes))[:limit]


class LocalAlarms:
    def __init__(self, alarms: CloudWatchAlarms, changes: AlarmChanges) -> None:
        self._alarms = alarms
        self._changes = changes

    def alarms(self) -> list[AlarmState]:
        return self._alarms.alarms()

    def changes(self, *, limit: int) -> list[AlarmChange]:
        return self._changes.newest(limit)


def recorded_alarm_changes(path: Path, *, tail_bytes: int = 256 * 1024) -> list[dict[str, Any]]:
    """The alarm evaluator's record of state changes (one JSON object a line, oldest first): the readable ones
    among its last `tail_bytes`."""
    try:
        with path.open("rb") as record:
            record.seek(0, os.SEEK_END)
            size = record.tell()
            record.seek(max(0, size - tail_bytes))
            text = record.read().decode("utf-8", errors="replace")
    except OSError:
        return []
    lines = text.splitlines()
    if size > tail_bytes and lines:
        lines = lines[1:]  # cut in the middle
    changes = []
    for line in lines:
        try:
            change = json.loads(line)
        except ValueError:
            continue
        if isinstance(change, dict) and {"time", "alarm", "old_state", "new_state", "reason"} <= change.keys():
            changes.append(change)
    return changes


def restored_reason(state: str, change: dict[str, Any] | None) -> str:
    """An alarm's reason after a restart: the reason of the change that set its state, and when."""
    if change is not None and change.get("new_state") == state and change.get("reason"):
        return f"{change['reason']} (at {change['time']}; kept across a restart, evaluated again from now on)"
    return f"{state} before the restart (data directory); evaluated again from now on"
