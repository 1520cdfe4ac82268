"""The alarm evaluator: CloudWatch's part, which moto does not play (it stores alarms, never evaluates them).

Every interval it measures the queues from the emulator (visible, in flight, delayed, the oldest
message's age; a DLQ's depth), publishes those values as the AWS/SQS metrics SQS would publish
(`put_metric_data`, so `GET /queues` reads the same numbers through GetMetricData), and sets each
declared alarm's state with `set_alarm_state`. Alarms on events (worker errors, API 5xx, stuck jobs
found by the sweeper) count the events the runtime saw within the alarm's period.

A state change is the local stand-in for the SNS notification the stack sends: it is written to
`alarms.jsonl` in the data directory and shown on the console (changes into or out of ALARM), unless the
alarm's actions are disabled (a paused queue class's age alarm): then it is recorded, marked, and shown nowhere.

Differences from AWS: every alarm is evaluated on the current value (one period, one datapoint),
every interval rather than every minute.
"""

from __future__ import annotations

import collections
import json
import logging
import threading
import time
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any

from offpath_local.emulator import QueueDepth, QueuePeek, keep_latest_metric_point, prune_metric_data
from offpath_local.periodic import Periodic
from offpath_local.resources import AlarmSpec

logger = logging.getLogger("offpath.local.alarms")

METRIC_HEARTBEAT_S = 60.0
AGE_METRIC = "ApproximateAgeOfOldestMessage"
METRIC_RETENTION_S = 3600.0
PRUNE_EVERY_S = 600.0


def announced(change: dict[str, Any]) -> bool:
    """Whether a change is shown on the console (the stand-in for the SNS notification): into or out of ALARM, and
    only while the alarm's actions are enabled."""
    return "ALARM" in (change["old_state"], change["new_state"]) and bool(change.get("actions_enabled", True))


class EventCounts:
    """Timestamps of events by name, for the alarms that count them within a period."""

    def __init__(self) -> None:
        self._events: dict[str, collections.deque[float]] = collections.defaultdict(collections.deque)
        self._lock = threading.Lock()

    def add(self, name: str, count: int = 1) -> None:
        now = time.time()
        with self._lock:
            self._events[name].extend([now] * count)

    def within(self, name: str, period_s: float) -> int:
        cutoff = time.time() - period_s
        with self._lock:
            events = self._events.get(name)
            if not events:
                return 0
            while events and events[0] < cutoff:
                events.popleft()
            return len(events)


class AlarmEvaluator(Periodic):
    thread_name = "alarm-evaluator"

    def __init__(
        self,
        *,
        cloudwatch: Any,
        peek: QueuePeek,
        queue_urls: Iterable[str],
        specs: Iterable[AlarmSpec],
        events: EventCounts,
        interval_s: float = 5.0,
        record_path: Any = None,
        on_change: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        self.cloudwatch = cloudwatch
        self.peek = peek
        self.queue_urls = list(queue_urls)
        self.specs = list(specs)
        self.events = events
        super().__init__(interval_s)
        self.record_path = record_path
        self.on_change = on_change
        self.states: dict[str, str] = {spec.name: "INSUFFICIENT_DATA" for spec in self.specs}
        self._published: dict[tuple[str, str], tuple[float, float]] = {}
        self._last_prune = time.monotonic()
        self._lock = threading.Lock()

    def step(self) -> object:
        return self.evaluate()

    def evaluate(self) -> dict[str, QueueDepth]:
        with self._lock:
            depths = self.peek.depths(self.queue_urls)
            self._publish(depths)
            for spec in self.specs:
                value = self._measure(spec, depths)
                state = "ALARM" if value >= spec.threshold else "OK"
                if state != self.states[spec.name]:
                    self._change(spec, state, value)
            if time.monotonic() - self._last_prune > PRUNE_EVERY_S:
                prune_metric_data(METRIC_RETENTION_S)
                self._last_prune = time.monotonic()
            return depths

    def _measure(self, spec: AlarmSpec, depths: dict[str, QueueDepth]) -> float:
        if spec.source == "events" and spec.event:
            return float(self.events.within(spec.event, spec.period_s))
        depth = depths.get(spec.queue_name or "")
        if depth is None:
            return 0.0
        if spec.source == "oldest_age":
            return depth.oldest_age_s or 0.0
        return float(depth.visible)

    def _change(self, spec: AlarmSpec, state: str, value: float) -> None:
        old = self.states[spec.name]
        self.states[spec.name] = state
        comparison = "greater than or equal to" if state == "ALARM" else "less than"
        reason = f"{spec.metric_name} = {value:g}, {comparison} the threshold ({spec.threshold:g})"
        now = datetime.now(UTC)
        reason_data = {
            "version": "1.0",
            "queryDate": now.isoformat(),
            "statistic": spec.statistic,
            "period": spec.period_s,
            "recentDatapoints": [value],
            "threshold": spec.threshold,
            "evaluatedDatapoints": [{"timestamp": now.isoformat(), "value": value}],
        }
        try:
            self.cloudwatch.set_alarm_state(
                AlarmName=spec.name, StateValue=state, StateReason=reason, StateReasonData=json.dumps(reason_data)
            )
        except Exception:
            logger.warning("alarm %s: its state could not be set in the emulator", spec.name, exc_info=True)
        change = {
            "time": now.isoformat().replace("+00:00", "Z"),
            "alarm": spec.name,
            "old_state": old,
            "new_state": state,
            "reason": reason,
            "value": value,
            "threshold": spec.threshold,
            "description": spec.description,
            # False: the alarm's actions are disabled (its queue class is paused): the change notifies nobody.
            "actions_enabled": self._actions_enabled(spec.name),
        }
        if self.record_path is not None:
            with open(self.record_path, "a", encoding="utf-8") as record:
                record.write(json.dumps(change) + "\n")
        if self.on_change:
            self.on_change(change)

    def _actions_enabled(self, name: str) -> bool:
        """Whether the alarm's actions are enabled (as on AWS, where a disabled one's change sends no notification)."""
        try:
            alarms = self.cloudwatch.describe_alarms(AlarmNames=[name]).get("MetricAlarms") or []
        except Exception:
            logger.warning("alarm %s: whether its actions are enabled could not be read", name, exc_info=True)
            return True
        return bool(alarms[0].get("ActionsEnabled", True)) if alarms else True

    def _publish(self, depths: dict[str, QueueDepth]) -> None:
        """The AWS/SQS metrics, as data points: when a value changes, and once a minute regardless. The oldest
        message's age keeps only its latest point, and none while the queue has no message: it is read as
        it is now, never from messages already gone."""
        now = time.time()
        stamp = datetime.now(UTC)
        data = []
        ages: dict[str, bool] = {}
        for name, depth in depths.items():
            values = {
                "ApproximateNumberOfMessagesVisible": ("Count", float(depth.visible)),
                "ApproximateNumberOfMessagesNotVisible": ("Count", float(depth.in_flight)),
                "ApproximateNumberOfMessagesDelayed": ("Count", float(depth.delayed)),
            }
            age_key = (name, AGE_METRIC)
            if depth.oldest_age_s is not None:
                values[AGE_METRIC] = ("Seconds", float(round(depth.oldest_age_s)))
            elif age_key in self._published:
                del self._published[age_key]
                ages[name] = False
            for metric, (unit, value) in values.items():
                last = self._published.get((name, metric))
                if last is not None and last[0] == value and now - last[1] < METRIC_HEARTBEAT_S:
                    continue
                self._published[(name, metric)] = (value, now)
                if metric == AGE_METRIC:
                    ages[name] = True
                data.append(
                    {
                        "MetricName": metric,
                        "Dimensions": [{"Name": "QueueName", "Value": name}],
                        "Timestamp": stamp,
                        "Value": value,
                        "Unit": unit,
                    }
                )
        for start in range(0, len(data), 500):
            self.cloudwatch.put_metric_data(Namespace="AWS/SQS", MetricData=data[start : start + 500])
        for name, published in ages.items():
            keep_latest_metric_point("AWS/SQS", AGE_METRIC, {"QueueName": name}, keep=published)
