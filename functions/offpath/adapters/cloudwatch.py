"""Statistics and alarms from CloudWatch: the functions' EMF metrics (observability.EmfMetrics) read back
with GetMetricData, and the stack's alarms with DescribeAlarms and DescribeAlarmHistory.

`CloudWatchStats` finds the queue and job type pairs that have metrics (ListMetrics, on the
`JobsSubmitted` ... metrics with a queue dimension: per (queue, job type) where the functions publish them,
`OFFPATH_METRICS_BY_JOB_TYPE`; otherwise per queue, reported with the job type `*`), then asks GetMetricData
for one-minute sums of the counts and p50/p95 of the timings of each pair: 9 metrics per pair per call, up to
500 per request. GetMetricData
is billed per metric requested (see `offpath cost`), so callers should not ask more than once a minute.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import botocore.exceptions
from botocore.config import Config

from offpath.domain.errors import MetricsUnavailableError
from offpath.observability import NAMESPACE

if TYPE_CHECKING:
    from mypy_boto3_cloudwatch.client import CloudWatchClient

    from offpath.domain.operations import AlarmChange, AlarmState, MinuteStats

SDK_CONFIG = Config(retries={"mode": "standard", "total_max_attempts": 3}, connect_timeout=2, read_timeout=10)
PERIOD_S = 60
QUERIES_PER_REQUEST = 500
# The EMF metric behind each count of MinuteStats, and the statistic of each percentile (seconds from ms).
COUNTS = {
    "submitted": "JobsSubmitted",
    "succeeded": "JobsSucceeded",
    "failed": "JobsFailed",
    "retried": "JobsRetried",
    "dead_lettered": "JobsDeadLettered",
    "expired": "JobsExpired",
}
PERCENTILES = {
    "duration_p50_s": ("JobDuration", "p50"),
    "duration_p95_s": ("JobDuration", "p95"),
    "queue_wait_p50_s": ("QueueDelay", "p50"),
    "queue_wait_p95_s": ("QueueDelay", "p95"),
}
DIMENSIONS = ("queue", "job_type")
# The job type of a row read from a queue's own metrics (the default: EMF metrics per queue, not per job type).
ALL_JOB_TYPES = "*"


def default_client() -> CloudWatchClient:
    import boto3

    return boto3.client("cloudwatch", config=SDK_CONFIG)


def _call(operation: Callable[..., Any], **request: Any) -> Any:
    """Call the SDK; no raw SDK error leaves this module."""
    try:
        return operation(**request)
    except botocore.exceptions.ClientError as error:
        code = error.response.get("Error", {}).get("Code", "")
        raise MetricsUnavailableError(f"CloudWatch {code or 'error'}") from error
    except botocore.exceptions.BotoCoreError as error:
        raise MetricsUnavailableError(f"CloudWatch unreachable: {type(error).__name__}") from error


class CloudWatchStats:
    def __init__(self, namespace: str = NAMESPACE, client: CloudWatchClient | None = None) -> None:
        self.namespace = namespace
        self._client = client

    @property
    def client(self) -> CloudWatchClient:
        if self._client is None:
            self._client = default_client()
        return self._client

    def minutes(self, *, start: datetime, end: datetime) -> list[MinuteStats]:
        from offpath.domain.operations import MinuteStats

        pairs = self._pairs()
        queries: list[dict[str, Any]] = []
        wanted: dict[str, tuple[tuple[str, str], str]] = {}  # query id -> (pair, MinuteStats field)
        for n, pair in enumerate(pairs):
            dimensions = [
                {"Name": name, "Value": value}
                for name, value in zip(DIMENSIONS, pair, strict=True)
                if value != ALL_JOB_TYPES
            ]
            for field, (metric, stat) in _statistics():
                query_id = f"m{n}_{field}"
                wanted[query_id] = (pair, field)
                queries.append(
                    {
                        "Id": query_id,
                        "MetricStat": {
                            "Metric": {
                                "Namespace": self.namespace,
                                "MetricName": metric,
                                "Dimensions": dimensions,
                            },
                            "Period": PERIOD_S,
                            "Stat": stat,
                        },
                    }
                )
        rows: dict[tuple[datetime, str, str], MinuteStats] = {}
        for result in self._results(queries, _minute(start), _minute(end) + timedelta(minutes=1)):
            (queue, job_type), field = wanted[result["Id"]]
            for stamp, value in zip(result.get("Timestamps", []), result.get("Values", []), strict=False):
                if value is None:
                    continue
                minute = _minute(stamp)
                row = rows.get((minute, queue, job_type)) or MinuteStats(minute, queue, job_type)
                number: float | int = round(float(value) / 1000, 6) if field in PERCENTILES else int(value)
                changes: dict[str, Any] = {field: number}
                rows[(minute, queue, job_type)] = replace(row, **changes)
        return [rows[key] for key in sorted(rows)]

    def _pairs(self) -> list[tuple[str, str]]:
        """The (queue, job type) pairs with any of the counted metrics (ListMetrics, paginated); a queue whose
        metrics are not published per job type is one pair, (queue, `*`)."""
        pairs: set[tuple[str, str]] = set()
        queues: set[str] = set()
        for metric in COUNTS.values():
            token: str | None = None
            while True:
                request: dict[str, Any] = {
                    "Namespace": self.namespace,
                    "MetricName": metric,
                    "Dimensions": [{"Name": "queue"}],
                }
                if token:
                    request["NextToken"] = token
                response = _call(self.client.list_metrics, **request)
                for found in response.get("Metrics", []):
                    dimensions = {d["Name"]: d["Value"] for d in found.get("Dimensions", [])}
                    if set(dimensions) == set(DIMENSIONS):
                        pairs.add((dimensions["queue"], dimensions["job_type"]))
                    elif set(dimensions) == {"queue"}:
                        queues.add(dimensions["queue"])
                token = response.get("NextToken")
                if not token:
                    break
        by_type = {queue for queue, _ in pairs}
        pairs |= {(queue, ALL_JOB_TYPES) for queue in queues - by_type}
        return sorted(pairs)

    def _results(self, queries: list[dict[str, Any]], start: datetime, end: datetime) -> Iterator[dict[str, Any]]:
        for first in range(0, len(queries), QUERIES_PER_REQUEST):
            token: str | None = None
            while True:
                request: dict[str, Any] = {
                    "MetricDataQueries": queries[first : first + QUERIES_PER_REQUEST],
                    "StartTime": start,
                    "EndTime": end,
                    "ScanBy": "TimestampAscending",
                }
                if token:
                    request["NextToken"] = token
                response = _call(self.client.get_metric_data, **request)
                yield from response.get("MetricDataResults", [])
                token = response.get("NextToken")
                if not token:
                    break


def _statistics() -> Iterator[tuple[str, tuple[str, str]]]:
    for field, metric in COUNTS.items():
        yield field, (metric, "Sum")
    yield from PERCENTILES.items()


def _minute(when: datetime) -> datetime:
    utc = when.astimezone(UTC) if when.tzinfo else when.replace(tzinfo=UTC)
    return utc.replace(second=0, microsecond=0)


class CloudWatchAlarms:
    """The stack's alarms: those whose names start with its prefix (`<prefix>-`, infra/monitoring.py)."""

    def __init__(self, prefix: str, client: CloudWatchClient | None = None) -> None:
        self.prefix = prefix
        self._client = client

    @property
    def client(self) -> CloudWatchClient:
        if self._client is None:
            self._client = default_client()
        return self._client

    def alarms(self) -> list[AlarmState]:
        from offpath.domain.operations import AlarmState

        found: list[AlarmState] = []
        token: str | None = None
        while True:
            request: dict[str, Any] = {"AlarmNamePrefix": f"{self.prefix}-", "AlarmTypes": ["MetricAlarm"]}
            if token:
                request["NextToken"] = token
            response = _call(self.client.describe_alarms, **request)
            for alarm in response.get("MetricAlarms", []):
                found.append(
                    AlarmState(
                        name=str(alarm["AlarmName"]),
                        state=str(alarm.get("StateValue", "INSUFFICIENT_DATA")),
                        reason=str(alarm.get("StateReason", "")),
                        updated_at=_utc(alarm.get("StateUpdatedTimestamp")),
                        description=str(alarm.get("AlarmDescription", "")),
                    )
                )
            token = response.get("NextToken")
            if not token:
                break
        return sorted(found, key=lambda a: a.name)

    def changes(self, *, limit: int) -> list[AlarmChange]:
        """State changes of the stack's alarms, newest first: DescribeAlarmHistory per alarm (named, so the
        grant can be kept to the stack's alarms), merged."""
        changes: list[AlarmChange] = []
        for alarm in self.alarms():
            response = _call(
                self.client.describe_alarm_history,
                AlarmName=alarm.name,
                HistoryItemType="StateUpdate",
                ScanBy="TimestampDescending",
                MaxRecords=max(1, min(100, limit)),
            )
            changes.extend(_change(alarm.name, item) for item in response.get("AlarmHistoryItems", []))
        changes.sort(key=lambda c: c.time, reverse=True)
        return changes[:limit]


def _change(name: str, item: Any) -> AlarmChange:
    """A StateUpdate history item: its HistoryData holds the old and new state (JSON)."""
    from offpath.domain.operations import AlarmChange

    try:
        data = json.loads(item.get("HistoryData") or "{}")
    except ValueError:
        data = {}
    old, new = data.get("oldState") or {}, data.get("newState") or {}
    return AlarmChange(
        time=_utc(item.get("Timestamp")) or datetime.now(UTC),
        alarm=name,
        old_state=str(old.get("stateValue", "")),
        new_state=str(new.get("stateValue", "")),
        reason=str(new.get("stateReason") or item.get("HistorySummary", "")),
    )


def _utc(value: Any) -> datetime | None:
    if not isinstance(value, datetime):
        return None
    return value.astimezone(UTC) if value.tzinfo else value.replace(tzinfo=UTC)
