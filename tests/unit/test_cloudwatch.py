"""The CloudWatch adapters against CloudWatch's documented answers (botocore's Stubber checks every request
against the service model; nothing leaves the process)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime

import boto3
import pytest
from botocore.stub import ANY, Stubber

from offpath.adapters.cloudwatch import CloudWatchAlarms, CloudWatchStats
from offpath.domain.errors import MetricsUnavailableError
from offpath.domain.operations import AlarmChange, MinuteStats

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
T1 = datetime(2026, 12, 1, 9, 1, tzinfo=UTC)


@pytest.fixture
def client() -> Iterator[tuple[object, Stubber]]:
    cloudwatch = boto3.client("cloudwatch", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    with Stubber(cloudwatch) as stubber:
        yield cloudwatch, stubber
        stubber.assert_no_pending_responses()


def dimensions(queue: str, job_type: str) -> list[dict[str, str]]:
    return [{"Name": "queue", "Value": queue}, {"Name": "job_type", "Value": job_type}]


def test_statistics_are_one_minute_sums_and_percentiles_per_queue_and_job_type(
    client: tuple[object, Stubber],
) -> None:
    cloudwatch, stubber = client
    listed = {
        "JobsSubmitted": [
            {"Namespace": "Offpath", "MetricName": "JobsSubmitted", "Dimensions": dimensions("default", "demo.echo")}
        ],
    }
    for metric in ("JobsSubmitted", "JobsSucceeded", "JobsFailed", "JobsRetried", "JobsDeadLettered", "JobsExpired"):
        stubber.add_response(
            "list_metrics",
            {"Metrics": listed.get(metric, [])},
            {"Namespace": "Offpath", "MetricName": metric, "Dimensions": [{"Name": "queue"}]},
        )
    answers = {
        "m0_submitted": ([T0, T1], [3.0, 1.0]),
        "m0_succeeded": ([T0], [2.0]),
        "m0_failed": ([T1], [1.0]),
        "m0_duration_p50_s": ([T0], [12.0]),
        "m0_duration_p95_s": ([T0], [48.5]),
        "m0_queue_wait_p95_s": ([T0], [900.0]),
    }
    stubber.add_response(
        "get_metric_data",
        {
            "MetricDataResults": [
                {"Id": query_id, "Timestamps": stamps, "Values": values, "StatusCode": "Complete"}
                for query_id, (stamps, values) in answers.items()
            ]
        },
        {
            "MetricDataQueries": ANY,
            "StartTime": T0,
            "EndTime": datetime(2026, 12, 1, 9, 2, tzinfo=UTC),
            "ScanBy": "TimestampAscending",
        },
    )

    rows = CloudWatchStats(client=cloudwatch).minutes(start=T0, end=T1)  # type: ignore[arg-type]

    assert rows == [
        MinuteStats(
            T0,
            "default",
            "demo.echo",
            submitted=3,
            succeeded=2,
            duration_p50_s=0.012,
            duration_p95_s=0.0485,
            queue_wait_p95_s=0.9,
        ),
        MinuteStats(T1, "default", "demo.echo", submitted=1, failed=1),
    ]


def test_the_statistics_ask_sums_of_counts_and_percentiles_of_timings(client: tuple[object, Stubber]) -> None:
    cloudwatch, stubber = client
    for metric in ("JobsSubmitted", "JobsSucceeded", "JobsFailed", "JobsRetried", "JobsDeadLettered", "JobsExpired"):
        found = [{"Namespace": "Offpath", "MetricName": metric, "Dimensions": dimensions("bulk", "x.y")}]
        stubber.add_response("list_metrics", {"Metrics": found}, None)
    asked: list[dict[str, object]] = []
    cloudwatch.meta.events.register(  # type: ignore[attr-defined]
        "provide-client-params.cloudwatch.GetMetricData", lambda params, **_: asked.extend(params["MetricDataQueries"])
    )
    stubber.add_response("get_metric_data", {"MetricDataResults": []}, None)

    assert CloudWatchStats(client=cloudwatch).minutes(start=T0, end=T1) == []  # type: ignore[arg-type]

    stats = {q["Id"]: (q["MetricStat"]["Metric"]["MetricName"], q["MetricStat"]["Stat"]) for q in asked}  # type: ignore[index]
    assert stats == {
        "m0_submitted": ("JobsSubmitted", "Sum"),
        "m0_succeeded": ("JobsSucceeded", "Sum"),
        "m0_failed": ("JobsFailed", "Sum"),
        "m0_retried": ("JobsRetried", "Sum"),
        "m0_dead_lettered": ("JobsDeadLettered", "Sum"),
        "m0_expired": ("JobsExpired", "Sum"),
        "m0_duration_p50_s": ("JobDuration", "p50"),
        "m0_duration_p95_s": ("JobDuration", "p95"),
        "m0_queue_wait_p50_s": ("QueueDelay", "p50"),
        "m0_queue_wait_p95_s": ("QueueDelay", "p95"),
    }


def test_a_cloudwatch_error_is_a_domain_error(client: tuple[object, Stubber]) -> None:
    cloudwatch, stubber = client
    stubber.add_client_error("list_metrics", service_error_code="Throttling", http_status_code=400)

    with pytest.raises(MetricsUnavailableError, match="Throttling"):
        CloudWatchStats(client=cloudwatch).minutes(start=T0, end=T1)  # type: ignore[arg-type]


def test_alarm_changes_come_from_each_alarms_history_newest_first(client: tuple[object, Stubber]) -> None:
    cloudwatch, stubber = client
    stubber.add_response(
        "describe_alarms",
        {
            "MetricAlarms": [
                {"AlarmName": "offpath-a", "StateValue": "ALARM", "StateReason": "up", "StateUpdatedTimestamp": T1},
                {"AlarmName": "offpath-b", "StateValue": "OK", "StateReason": "fine", "StateUpdatedTimestamp": T0},
            ]
        },
        {"AlarmNamePrefix": "offpath-", "AlarmTypes": ["MetricAlarm"]},
    )

    def history(old: str, new: str, reason: str) -> str:
        return json.dumps(
            {"version": "1.0", "oldState": {"stateValue": old}, "newState": {"stateValue": new, "stateReason": reason}}
        )

    for name, stamp, item in (
        ("offpath-a", T1, history("OK", "ALARM", "up")),
        ("offpath-b", T0, history("INSUFFICIENT_DATA", "OK", "fine")),
    ):
        stubber.add_response(
            "describe_alarm_history",
            {
                "AlarmHistoryItems": [
                    {"AlarmName": name, "Timestamp": stamp, "HistoryItemType": "StateUpdate", "HistoryData": item}
                ]
            },
            {"AlarmName": name, "HistoryItemType": "StateUpdate", "ScanBy": "TimestampDescending", "MaxRecords": 50},
        )

    changes = CloudWatchAlarms("offpath", client=cloudwatch).changes(limit=50)  # type: ignore[arg-type]

    assert changes == [
        AlarmChange(T1, "offpath-a", "OK", "ALARM", "up"),
        AlarmChange(T0, "offpath-b", "INSUFFICIENT_DATA", "OK", "fine"),
    ]


def test_a_queue_whose_metrics_are_not_per_job_type_is_one_row_for_every_job_type(
    client: tuple[object, Stubber],
) -> None:
    """The default EMF dimension sets publish per queue and overall (offpath.observability.DIMENSION_SETS)."""
    cloudwatch, stubber = client
    per_queue = [{"Name": "queue", "Value": "default"}]
    for metric in ("JobsSubmitted", "JobsSucceeded", "JobsFailed", "JobsRetried", "JobsDeadLettered", "JobsExpired"):
        found = [{"Namespace": "Offpath", "MetricName": metric, "Dimensions": per_queue}]
        stubber.add_response("list_metrics", {"Metrics": found if metric == "JobsSubmitted" else []}, None)
    asked: list[dict[str, object]] = []
    cloudwatch.meta.events.register(  # type: ignore[attr-defined]
        "provide-client-params.cloudwatch.GetMetricData", lambda params, **_: asked.extend(params["MetricDataQueries"])
    )
    stubber.add_response(
        "get_metric_data",
        {"MetricDataResults": [{"Id": "m0_submitted", "Timestamps": [T0], "Values": [4.0], "StatusCode": "Complete"}]},
        None,
    )

    rows = CloudWatchStats(client=cloudwatch).minutes(start=T0, end=T1)  # type: ignore[arg-type]

    assert rows == [MinuteStats(T0, "default", "*", submitted=4)]
    assert {json.dumps(q["MetricStat"]["Metric"]["Dimensions"]) for q in asked} == {json.dumps(per_queue)}  # type: ignore[index]
