"""`offpath clock`: a deployment's schedules fired as EventBridge Scheduler would, where it never fires
(LocalStack): the sweeper every minute, declared schedules at their slots, one-time schedules once."""

from __future__ import annotations

import io
import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from moto import mock_aws

from offpath.jobs import load_job_types
from offpath.naming import SCHEDULED_TIME, schedule_group_name
from offpath_local.cli import main
from offpath_local.deployed_clock import build_clock
from offpath_local.resources import create_schedules, function_arn
from offpath_local.scheduler_clock import VirtualTime

PREFIX = "offpath"


class RecordingLambda:
    def __init__(self) -> None:
        self.invocations: list[dict[str, Any]] = []

    def invoke(self, **request: Any) -> dict[str, Any]:
        self.invocations.append({**request, "Payload": json.loads(request["Payload"])})
        return {"StatusCode": 202}


@pytest.fixture
def scheduler() -> Iterator[Any]:
    with mock_aws():
        client = boto3.client("scheduler", region_name="us-east-1")
        create_schedules(client, load_job_types(), PREFIX, "https://sqs.us-east-1.amazonaws.com/123456789012/dlq")
        yield client


def test_the_sweeper_and_a_one_time_schedule_are_invoked_asynchronously_with_the_schedulers_input(
    scheduler: Any,
) -> None:
    run_at = (datetime.now(UTC) + timedelta(seconds=30)).strftime("%Y-%m-%dT%H:%M:%S")
    scheduler.create_schedule(
        Name="job-abc",
        GroupName=schedule_group_name(PREFIX),
        ScheduleExpression=f"at({run_at})",
        FlexibleTimeWindow={"Mode": "OFF"},
        ActionAfterCompletion="DELETE",
        Target={
            "Arn": function_arn(f"{PREFIX}-enqueue"),
            "RoleArn": "arn:aws:iam::123456789012:role/r",
            "Input": json.dumps({"kind": "delayed", "job_id": "abc", "scheduled_time": SCHEDULED_TIME}),
        },
    )
    functions = RecordingLambda()
    out = io.StringIO()
    # 120 times real speed: a virtual minute passes in half a second.
    clock = build_clock(scheduler, functions, PREFIX, tick_s=0.05, out=out, time_source=VirtualTime(speed=120))

    clock.tick()
    time.sleep(0.6)
    clock.tick()

    by_kind = {i["Payload"]["kind"]: i for i in functions.invocations}
    assert {"sweep", "delayed"} <= set(by_kind)
    sweep = by_kind["sweep"]
    assert sweep["FunctionName"] == function_arn(f"{PREFIX}-sweeper")
    assert sweep["InvocationType"] == "Event"
    assert sweep["Payload"]["scheduled_time"].endswith("Z")
    delayed = by_kind["delayed"]
    assert delayed["FunctionName"] == function_arn(f"{PREFIX}-enqueue")
    assert delayed["Payload"] == {"kind": "delayed", "job_id": "abc", "scheduled_time": f"{run_at}Z"}
    names = {s["Name"] for s in scheduler.list_schedules(GroupName=schedule_group_name(PREFIX))["Schedules"]}
    assert "job-abc" not in names  # deleted after it fired, as it asked
    assert f"fired {PREFIX}-sweeper (sweep, slot " in out.getvalue()


def test_a_declared_schedule_fires_with_its_name_and_slot(scheduler: Any) -> None:
    functions = RecordingLambda()
    # A day passes in under a second: the declared daily schedule (nightly-cleanup) comes due.
    day_in_a_second = timedelta(days=1) / timedelta(seconds=0.9)
    clock = build_clock(
        scheduler, functions, PREFIX, tick_s=0.05, out=io.StringIO(), time_source=VirtualTime(speed=day_in_a_second)
    )

    clock.tick()
    time.sleep(0.9)
    clock.tick()

    recurring = [i["Payload"] for i in functions.invocations if i["Payload"]["kind"] == "recurring"]
    assert "nightly-cleanup" in {p["schedule"] for p in recurring}
    assert {p["schedule"] for p in recurring} <= set(load_job_types().schedules)
    assert all(p["scheduled_time"].endswith("Z") and "<aws." not in p["execution_id"] for p in recurring)


def test_the_command_refuses_a_tick_that_is_not_positive(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["clock", "--tick", "0"]) == 2
    assert "--tick must be positive" in capsys.readouterr().err
