"""Pause and resume through the api and worker handlers against moto: the routes (admin only, 404, idempotent,
the reason's bound), what GET /queues, GET /job-types and GET /alarms show, a paused job type's jobs waiting
without spending an attempt and running once resumed, and the AWS switch (the event source mapping through a
botocore Stubber: moto's Lambda would start Docker for a mapping; the alarm's actions on moto's CloudWatch)."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from offpath.adapters.cloudwatch import CloudWatchAlarms
from offpath.adapters.queue_switch import AwsQueueSwitch
from offpath.domain.errors import SwitchUnavailableError
from tests.integration.conftest import Pipeline
from tests.integration.test_ops_routes import _WithChanges

ADMIN = ["offpath/admin"]
AGE_ALARM = "offpath-default-oldest-message-age"
UUID_DEFAULT = "0b1f6c3e-7a2d-4e5b-8c9f-1d2e3f4a5b6c"


def job_of(pipeline: Pipeline, job_id: str) -> dict[str, Any]:
    code, body, _ = pipeline.call("GET", f"/jobs/{job_id}")
    assert code == 200, body
    return dict(body)


def queues(pipeline: Pipeline) -> list[dict[str, Any]]:
    code, body, _ = pipeline.call("GET", "/queues", scopes=ADMIN)
    assert code == 200, body
    return list(body["queues"])


def job_types(pipeline: Pipeline) -> dict[str, dict[str, Any]]:
    code, body, _ = pipeline.call("GET", "/job-types")
    assert code == 200, body
    return {t["name"]: t for t in body["job_types"]}


# -- the routes ------------------------------------------------------------------------------------------------


def test_an_admin_pauses_a_queue_and_get_queues_shows_it_first_since_when_and_why(pipeline: Pipeline) -> None:
    pipeline.submit("demo.echo", {"n": 1})

    code, body, _ = pipeline.call("POST", "/queues/default/pause", body={"reason": "database migration"}, scopes=ADMIN)

    assert code == 200, body
    assert (body["kind"], body["name"], body["paused"], body["changed"]) == ("queue", "default", True, True)
    assert body["pause_reason"] == "database migration"
    assert body["waiting"] == 1
    listed = queues(pipeline)
    assert listed[0]["name"] == "default", "paused queues come first"
    assert (listed[0]["paused"], listed[0]["paused_at"], listed[0]["pause_reason"]) == (
        True,
        body["paused_at"],
        "database migration",
    )
    assert all(q["paused"] is False and q["paused_at"] is None for q in listed[1:])


def test_pausing_a_paused_queue_answers_200_with_its_original_paused_at_and_reason(pipeline: Pipeline) -> None:
    _, first, _ = pipeline.call("POST", "/queues/default/pause", body={"reason": "first"}, scopes=ADMIN)

    code, again, _ = pipeline.call("POST", "/queues/default/pause", body={"reason": "second"}, scopes=ADMIN)

    assert code == 200
    assert (again["paused"], again["changed"]) == (True, False)
    assert (again["paused_at"], again["pause_reason"]) == (first["paused_at"], "first")


def test_a_resume_lifts_the_pause_and_a_second_resume_changes_nothing(pipeline: Pipeline) -> None:
    pipeline.call("POST", "/queues/default/pause", scopes=ADMIN)

    code, resumed, _ = pipeline.call("POST", "/queues/default/resume", scopes=ADMIN)
    _, again, _ = pipeline.call("POST", "/queues/default/resume", scopes=ADMIN)

    assert code == 200
    assert (resumed["paused"], resumed["paused_at"], resumed["changed"]) == (False, None, True)
    assert (again["paused"], again["changed"]) == (False, False)
    assert not any(q["paused"] for q in queues(pipeline))


@pytest.mark.parametrize(
    "path",
    ["/queues/default/pause", "/queues/default/resume", "/job-types/demo.echo/pause", "/job-types/demo.echo/resume"],
)
def test_a_tenant_may_not_pause_or_resume(pipeline: Pipeline, path: str) -> None:
    code, body, _ = pipeline.call("POST", path)

    assert (code, body["error"]["code"]) == (403, "forbidden")


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("/queues/nope/pause", "no such queue"),
        ("/queues/nope/resume", "no such queue"),
        ("/job-types/demo.nope/pause", "no such job type"),
        ("/job-types/demo.nope/resume", "no such job type"),
    ],
)
def test_an_unknown_name_is_not_found(pipeline: Pipeline, path: str, message: str) -> None:
    code, body, _ = pipeline.call("POST", path, scopes=ADMIN)

    assert code == 404
    assert (body["error"]["code"], body["error"]["message"]) == ("not_found", message)


@pytest.mark.parametrize("body", [{"reason": "x" * 201}, {"reason": ""}, {"why": "no"}, {"reason": 5}])
def test_a_bad_reason_is_refused_naming_its_field(pipeline: Pipeline, body: dict[str, Any]) -> None:
    code, answer, _ = pipeline.call("POST", "/queues/default/pause", body=body, scopes=ADMIN)

    assert code == 422
    assert answer["error"]["code"] == "invalid_request"
    assert answer["error"]["field"] in ("reason", "why")
    assert not any(q["paused"] for q in queues(pipeline)), "nothing was paused"


def test_a_paused_job_type_is_shown_paused_first_by_get_job_types(pipeline: Pipeline) -> None:
    code, body, _ = pipeline.call("POST", "/job-types/demo.sleep/pause", body={"reason": "slow"}, scopes=ADMIN)

    assert (code, body["kind"], body["paused"], body["waiting"]) == (200, "job_type", True, None)
    _, listed, _ = pipeline.call("GET", "/job-types")
    assert listed["job_types"][0]["name"] == "demo.sleep"
    shown = job_types(pipeline)
    assert (shown["demo.sleep"]["paused"], shown["demo.sleep"]["pause_reason"]) == (True, "slow")
    assert shown["demo.sleep"]["paused_at"] == body["paused_at"]
    assert shown["demo.echo"]["paused"] is False


# -- the worker --------------------------------------------------------------------------------------------------


def test_a_paused_job_types_job_waits_without_spending_an_attempt_and_runs_once_resumed(pipeline: Pipeline) -> None:
    pipeline.call("POST", "/job-types/demo.echo/pause", scopes=ADMIN)
    _, job, _ = pipeline.submit("demo.echo", {"n": 7})

    pipeline.drain()

    waiting = job_of(pipeline, job["job_id"])
    assert (waiting["status"], waiting["attempts"]) == ("QUEUED", 0)
    assert waiting["waiting_on"] == {
        "reason": "paused",
        "message": "job type demo.echo is paused; it runs once resumed",
        "holders": [],
        "until": None,
    }
    assert pipeline.metrics.counts["AdmissionWaits"] == 1
    assert pipeline.depth() == (0, 1), "its message is back on the queue, invisible for the pause's wait"

    pipeline.call("POST", "/job-types/demo.echo/resume", scopes=ADMIN)
    assert job_of(pipeline, job["job_id"])["waiting_on"] is None, "resumed: nothing holds it"
    pipeline.visibility_timeout_passes()
    pipeline.drain()

    done = job_of(pipeline, job["job_id"])
    assert (done["status"], done["attempts"], done["result"]) == ("SUCCEEDED", 1, {"n": 7})


def test_a_paused_queues_jobs_wait_in_the_worker_when_its_mapping_still_delivers(pipeline: Pipeline) -> None:
    pipeline.call("POST", "/queues/default/pause", scopes=ADMIN)
    _, job, _ = pipeline.submit("demo.echo", {"n": 1})

    pipeline.drain()  # as a mapping the pause could not switch off would

    assert (job_of(pipeline, job["job_id"])["status"], job_of(pipeline, job["job_id"])["attempts"]) == ("QUEUED", 0)
    pipeline.call("POST", "/queues/default/resume", scopes=ADMIN)
    pipeline.visibility_timeout_passes()
    pipeline.drain()
    assert job_of(pipeline, job["job_id"])["status"] == "SUCCEEDED"


# -- the alarms ----------------------------------------------------------------------------------------------------


def put_age_alarm() -> Any:
    cloudwatch = boto3.client("cloudwatch", region_name="us-east-1")
    cloudwatch.put_metric_alarm(
        AlarmName=AGE_ALARM,
        AlarmDescription="the oldest message waited",
        Namespace="AWS/SQS",
        MetricName="ApproximateAgeOfOldestMessage",
        Statistic="Maximum",
        Period=60,
        EvaluationPeriods=1,
        Threshold=300,
        ComparisonOperator="GreaterThanOrEqualToThreshold",
        AlarmActions=["arn:aws:sns:us-east-1:123456789012:offpath-alarms"],
    )
    cloudwatch.set_alarm_state(AlarmName=AGE_ALARM, StateValue="ALARM", StateReason="900 >= 300")
    return cloudwatch


def alarm_view(pipeline: Pipeline) -> dict[str, Any]:
    code, body, _ = pipeline.call("GET", "/alarms", scopes=ADMIN)
    assert code == 200, body
    return next(a for a in body["alarms"] if a["name"] == AGE_ALARM)


def test_a_paused_queues_age_alarm_is_shown_paused_and_pages_nobody_until_resumed(pipeline: Pipeline) -> None:
    cloudwatch = put_age_alarm()
    # moto has no DescribeAlarmHistory: no changes here (tests/integration/test_ops_routes.py does the same).
    pipeline.api_services = dataclasses.replace(
        pipeline.api_services, alarms=_WithChanges(CloudWatchAlarms("offpath", client=cloudwatch), [])
    )
    assert alarm_view(pipeline)["state"] == "ALARM"

    pipeline.call("POST", "/queues/default/pause", scopes=ADMIN)

    shown = alarm_view(pipeline)
    assert shown["state"] == "PAUSED"
    assert shown["reason"].startswith("queue default is paused since ")
    assert cloudwatch.describe_alarms(AlarmNames=[AGE_ALARM])["MetricAlarms"][0]["ActionsEnabled"] is False

    pipeline.call("POST", "/queues/default/resume", scopes=ADMIN)

    assert alarm_view(pipeline)["state"] == "ALARM"
    assert cloudwatch.describe_alarms(AlarmNames=[AGE_ALARM])["MetricAlarms"][0]["ActionsEnabled"] is True


# -- the event source mapping (AWS) --------------------------------------------------------------------------------


def stubbed_lambda() -> tuple[Any, Stubber]:
    client = boto3.client("lambda", region_name="us-east-1")
    return client, Stubber(client)


def test_a_queue_pause_disables_its_event_source_mapping_and_a_resume_enables_it(pipeline: Pipeline) -> None:
    client, stub = stubbed_lambda()
    stub.add_response(
        "update_event_source_mapping",
        {"UUID": UUID_DEFAULT, "State": "Disabling"},
        {"UUID": UUID_DEFAULT, "Enabled": False},
    )
    stub.add_response(
        "update_event_source_mapping",
        {"UUID": UUID_DEFAULT, "State": "Enabling"},
        {"UUID": UUID_DEFAULT, "Enabled": True},
    )
    switch = AwsQueueSwitch(
        {"default": UUID_DEFAULT, "critical": "6f1c9a52-4d0e-4b7a-9c3e-2a8b7d5e1f03"},
        {"default": [AGE_ALARM]},
        lambda_client=client,
    )
    pipeline.api_services = dataclasses.replace(pipeline.api_services, switch=switch)

    with stub:
        paused = pipeline.call("POST", "/queues/default/pause", scopes=ADMIN)[0]
        resumed = pipeline.call("POST", "/queues/default/resume", scopes=ADMIN)[0]
        stub.assert_no_pending_responses()

    assert (paused, resumed) == (200, 200)


def test_a_job_types_pause_switches_no_mapping(pipeline: Pipeline) -> None:
    client, stub = stubbed_lambda()  # no response queued: any call fails the test
    switch = AwsQueueSwitch({"default": UUID_DEFAULT}, {}, lambda_client=client)
    pipeline.api_services = dataclasses.replace(pipeline.api_services, switch=switch)

    with stub:
        code = pipeline.call("POST", "/job-types/demo.echo/pause", scopes=ADMIN)[0]

    assert code == 200


def test_a_mapping_that_cannot_be_switched_answers_503_the_pause_stands_and_a_retry_heals_it(
    pipeline: Pipeline,
) -> None:
    client, stub = stubbed_lambda()
    stub.add_client_error("update_event_source_mapping", "ServiceException", http_status_code=500)
    stub.add_response("update_event_source_mapping", {"UUID": UUID_DEFAULT}, {"UUID": UUID_DEFAULT, "Enabled": False})
    switch = AwsQueueSwitch({"default": UUID_DEFAULT}, {}, lambda_client=client)
    pipeline.api_services = dataclasses.replace(pipeline.api_services, switch=switch)

    with stub:
        failed, body, headers = pipeline.call("POST", "/queues/default/pause", scopes=ADMIN)
        assert (failed, body["error"]["code"], headers.get("Retry-After")) == (503, "unavailable", "2")
        assert queues(pipeline)[0]["paused"] is True, "the table's state stands; the worker enforces it"
        healed, again, _ = pipeline.call("POST", "/queues/default/pause", scopes=ADMIN)
        stub.assert_no_pending_responses()

    assert (healed, again["paused"], again["changed"]) == (200, True, False)


def test_a_resume_whose_mapping_cannot_be_switched_leaves_the_queue_paused(pipeline: Pipeline) -> None:
    pipeline.call("POST", "/queues/default/pause", scopes=ADMIN)
    client, stub = stubbed_lambda()
    stub.add_client_error("update_event_source_mapping", "TooManyRequestsException", http_status_code=429)
    switch = AwsQueueSwitch({"default": UUID_DEFAULT}, {}, lambda_client=client)
    pipeline.api_services = dataclasses.replace(pipeline.api_services, switch=switch)

    with stub:
        code = pipeline.call("POST", "/queues/default/resume", scopes=ADMIN)[0]

    assert code == 503
    assert queues(pipeline)[0]["paused"] is True


def test_the_switch_adapter_raises_no_raw_sdk_error() -> None:
    client, stub = stubbed_lambda()
    stub.add_client_error("update_event_source_mapping", "ResourceNotFoundException", http_status_code=404)

    with stub, pytest.raises(SwitchUnavailableError):
        AwsQueueSwitch({"default": UUID_DEFAULT}, {}, lambda_client=client).apply("default", paused=True)


def test_paused_at_is_the_time_of_the_first_pause(pipeline: Pipeline) -> None:
    before = datetime.now(UTC) - timedelta(seconds=1)

    _, body, _ = pipeline.call("POST", "/job-types/demo.echo/pause", scopes=ADMIN)

    paused_at = datetime.fromisoformat(body["paused_at"].replace("Z", "+00:00"))
    assert before <= paused_at <= datetime.now(UTC) + timedelta(seconds=1)
