"""`make iam-check`'s evaluator (offpath_tools.iam_check) on a small template of its own."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from offpath_local.aws_calls import resources_of
from offpath_tools import iam_calls
from offpath_tools.iam_check import actions_of, check, main, matches

TABLE = {"Fn::GetAtt": ["JobTable", "Arn"]}
DEFAULT = {"Fn::GetAtt": ["QueueDefault", "Arn"]}
SCHEDULES = {
    "Fn::Join": [
        "",
        ["arn:", {"Ref": "AWS::Partition"}, ":scheduler:", {"Ref": "AWS::Region"}, ":", {"Ref": "AWS::AccountId"}],
    ]
}
SCHEDULES["Fn::Join"][1].append(":schedule/offpath-schedules/*")


def statement(action: str | list[str], resource: Any, **condition: Any) -> dict[str, Any]:
    raw: dict[str, Any] = {"Effect": "Allow", "Action": action, "Resource": resource}
    if condition:
        raw["Condition"] = condition
    return raw


def function(name: str, role: str, **env: Any) -> dict[str, Any]:
    return {
        "Type": "AWS::Lambda::Function",
        "Properties": {
            "FunctionName": name,
            "Role": {"Fn::GetAtt": [role, "Arn"]},
            "Environment": {"Variables": {"OFFPATH_STACK_PREFIX": "offpath", **env}},
        },
    }


def role(service: str = "lambda.amazonaws.com") -> dict[str, Any]:
    trust = {"Statement": [{"Action": "sts:AssumeRole", "Effect": "Allow", "Principal": {"Service": service}}]}
    return {"Type": "AWS::IAM::Role", "Properties": {"AssumeRolePolicyDocument": trust}}


def policy(role_id: str, *statements: dict[str, Any]) -> dict[str, Any]:
    return {
        "Type": "AWS::IAM::Policy",
        "Properties": {"PolicyDocument": {"Statement": list(statements)}, "Roles": [{"Ref": role_id}]},
    }


@pytest.fixture
def template() -> dict[str, Any]:
    """An api that writes the table, sends to the default queue and creates one-time schedules; a worker that
    changes its messages' visibility; the role the schedules run with."""
    return {
        "Resources": {
            "JobTable": {"Type": "AWS::DynamoDB::Table", "Properties": {}},
            "QueueDefault": {"Type": "AWS::SQS::Queue", "Properties": {"QueueName": "offpath-default"}},
            "Enqueue": function("offpath-enqueue", "EnqueueRole"),
            "EnqueueRole": role(),
            "Api": function(
                "offpath-api",
                "ApiRole",
                OFFPATH_SCHEDULE_GROUP="offpath-schedules",
                OFFPATH_SCHEDULER_ROLE_ARN={"Fn::GetAtt": ["SchedulerRole", "Arn"]},
            ),
            "ApiRole": role(),
            "ApiPolicy": policy(
                "ApiRole",
                statement(["dynamodb:PutItem", "dynamodb:UpdateItem"], TABLE),
                statement("sqs:SendMessage", [DEFAULT]),
                statement("scheduler:CreateSchedule", SCHEDULES),
                statement(
                    "iam:PassRole",
                    {"Fn::GetAtt": ["SchedulerRole", "Arn"]},
                    StringEquals={"iam:PassedToService": "scheduler.amazonaws.com"},
                ),
            ),
            "Worker": function("offpath-worker-default", "WorkerRole"),
            "WorkerRole": role(),
            "WorkerPolicy": policy("WorkerRole", statement("sqs:ChangeMessage*", DEFAULT)),
            "SchedulerRole": role("scheduler.amazonaws.com"),
            "SchedulerPolicy": policy(
                "SchedulerRole", statement("lambda:InvokeFunction", {"Fn::GetAtt": ["Enqueue", "Arn"]})
            ),
        }
    }


CALLS = {
    ("api", "dynamodb", "TransactWriteItems", ("table:jobs", "transact:Put", "transact:Update")),
    ("api", "sqs", "SendMessageBatch", ("queue:jobs/{class}",)),
    ("api", "scheduler", "CreateSchedule", ("function:enqueue", "role:scheduler", "schedule:schedules/*")),
    ("worker-{class}", "sqs", "ChangeMessageVisibilityBatch", ("queue:jobs/{class}",)),
}


def api_statements(template: dict[str, Any]) -> list[dict[str, Any]]:
    return template["Resources"]["ApiPolicy"]["Properties"]["PolicyDocument"]["Statement"]  # type: ignore[no-any-return]


def test_botocore_operations_become_the_iam_actions_they_need() -> None:
    assert actions_of("sqs", "SendMessage", []) == ["sqs:SendMessage"]
    assert actions_of("sqs", "SendMessageBatch", []) == ["sqs:SendMessage"]
    assert actions_of("sqs", "DeleteMessageBatch", []) == ["sqs:DeleteMessage"]
    assert actions_of("sqs", "ChangeMessageVisibilityBatch", []) == ["sqs:ChangeMessageVisibility"]
    assert actions_of("dynamodb", "GetItem", ["table:jobs"]) == ["dynamodb:GetItem"]
    assert actions_of("dynamodb", "TransactWriteItems", ["table:jobs", "transact:Put", "transact:ConditionCheck"]) == [
        "dynamodb:ConditionCheckItem",
        "dynamodb:PutItem",
    ]
    assert actions_of("scheduler", "CreateSchedule", ["role:scheduler"]) == ["scheduler:CreateSchedule"]
    assert actions_of("sqs", "StartMessageMoveTask", ["queue:jobs-dlq/{class}", "to:queue:jobs/{class}"]) == [
        "sqs:StartMessageMoveTask",
        "sqs:ReceiveMessage",
        "sqs:DeleteMessage",
        "sqs:GetQueueAttributes",
    ]


def test_wildcards_match_as_iam_matches_them() -> None:
    assert matches(
        "arn:aws:scheduler:*:*:schedule/offpath-schedules/*", "arn:aws:scheduler:r:1:schedule/offpath-schedules/a"
    )
    assert not matches("arn:aws:scheduler:*:*:schedule/offpath-schedules/*", "arn:aws:scheduler:r:1:schedule/other/a")
    assert matches("sqs:Get*", "sqs:getqueueattributes", case=False)
    assert matches("arn:aws:sqs:*:*:offpath-?", "arn:aws:sqs:r:1:offpath-a")
    assert not matches("arn:aws:sqs:*:*:offpath-?", "arn:aws:sqs:r:1:offpath-ab")
    assert matches("*", "arn:aws:dynamodb:r:1:table/t/index/sweep")
    assert not matches("arn:aws:dynamodb:r:1:table/t", "arn:aws:dynamodb:r:1:table/t/index/sweep")


def test_every_call_granted_and_every_grant_used_passes(template: dict[str, Any]) -> None:
    report = check(template, CALLS, [])

    assert report.missing == [] and report.unused == []
    assert report.counts == {"api": 3, "worker-default": 1}


def test_a_removed_statement_fails_naming_the_function_the_call_and_the_grant(template: dict[str, Any]) -> None:
    broken = copy.deepcopy(template)
    api_statements(broken).pop(1)  # sqs:SendMessage on the default queue

    report = check(broken, CALLS, [])

    assert report.missing == [
        "api: sqs:SendMessage on arn:aws:sqs:us-east-1:123456789012:offpath-default is not granted by its role "
        "(ApiRole); needed by api: sqs:SendMessageBatch on queue:jobs/{class}"
    ]


def test_a_transaction_needs_each_of_its_items_actions(template: dict[str, Any]) -> None:
    api_statements(template)[0]["Action"] = ["dynamodb:PutItem"]

    report = check(template, CALLS, [])

    assert [line.split(" is not granted")[0] for line in report.missing] == [
        "api: dynamodb:UpdateItem on arn:aws:dynamodb:us-east-1:123456789012:table/JobTable"
    ]


def test_passing_the_schedules_role_needs_pass_role_for_the_scheduler(template: dict[str, Any]) -> None:
    api_statements(template)[3]["Condition"] = {"StringEquals": {"iam:PassedToService": "lambda.amazonaws.com"}}

    report = check(template, CALLS, [])

    assert len(report.missing) == 1
    assert report.missing[0].startswith(
        "api: iam:PassRole on arn:aws:iam::123456789012:role/SchedulerRole is not granted"
    )


def test_the_role_a_created_schedule_runs_with_must_invoke_its_target(template: dict[str, Any]) -> None:
    template["Resources"]["SchedulerPolicy"]["Properties"]["PolicyDocument"]["Statement"] = []

    report = check(template, CALLS, [])

    assert [line.split(" is not granted")[0] for line in report.missing] == [
        "role:SchedulerRole: lambda:InvokeFunction on arn:aws:lambda:us-east-1:123456789012:function:offpath-enqueue"
    ]


def test_a_grant_no_call_uses_fails_unless_the_allowlist_explains_it(template: dict[str, Any]) -> None:
    api_statements(template).append(statement("dynamodb:DeleteItem", TABLE))

    unexplained = check(template, CALLS, [])
    explained = check(
        template,
        CALLS,
        [{"principal": "api", "action": "dynamodb:DeleteItem", "resource": "table:jobs", "reason": "x"}],
    )

    assert unexplained.unused == [
        "api: dynamodb:DeleteItem on arn:aws:dynamodb:us-east-1:123456789012:table/JobTable (ApiPolicy #5) is "
        "granted but no recorded or implied call uses it; remove it, or give its reason in infra/iam_allowlist.json"
    ]
    assert explained.ok


def test_the_command_exits_non_zero_naming_the_missing_grant(
    template: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    api_statements(template).pop(2)  # scheduler:CreateSchedule
    (tmp_path / "t.json").write_text(json.dumps(template))
    iam_calls.save(CALLS, tmp_path / "calls.json")

    code = main(["--template", str(tmp_path / "t.json"), "--calls", str(tmp_path / "calls.json"), "--allowlist", "-"])

    assert code == 1
    assert "MISSING GRANT api: scheduler:CreateSchedule on arn:aws:scheduler:us-east-1:123456789012:schedule/" in (
        capsys.readouterr().err
    )


def test_recorded_calls_are_kept_in_logical_roles() -> None:
    recorded = {
        "function": "worker-critical",
        "service": "sqs",
        "operation": "SendMessage",
        "resources": [["queue", "https://sqs.us-east-1.amazonaws.com/123456789012/test-critical-dlq"]],
    }
    schedule = {
        "function": "api",
        "service": "scheduler",
        "operation": "CreateSchedule",
        "resources": resources_of(
            "scheduler",
            "CreateSchedule",
            {
                "Name": "job-1",
                "GroupName": "x-schedules",
                "Target": {
                    "Arn": "arn:aws:lambda:us-east-1:1:function:x-enqueue",
                    "RoleArn": "arn:aws:iam::1:role/x-scheduler",
                    "DeadLetterConfig": {"Arn": "arn:aws:sqs:us-east-1:1:x-schedule-dlq"},
                },
            },
        ),
    }
    query = {
        "function": "sweeper",
        "service": "dynamodb",
        "operation": "Query",
        "resources": [["table", "t"], ["index", "sweep"]],
    }

    assert iam_calls.normalise(recorded) == ("worker-{class}", "sqs", "SendMessage", ("queue:jobs-dlq/{class}",))
    assert iam_calls.normalise(schedule) == (
        "api",
        "scheduler",
        "CreateSchedule",
        ("function:enqueue", "queue:schedule-dlq", "role:scheduler", "schedule:schedules/*"),
    )
    assert iam_calls.normalise(query) == ("sweeper", "dynamodb", "Query", ("table:jobs/index/sweep",))


def test_an_allowlist_entry_for_a_grant_a_call_now_uses_fails(template: dict[str, Any]) -> None:
    api_statements(template).append(statement("dynamodb:DeleteItem", TABLE))
    stale = {"principal": "api", "action": "dynamodb:DeleteItem", "resource": "table:jobs", "reason": "unused"}
    calls = {*CALLS, ("api", "dynamodb", "DeleteItem", ("table:jobs",))}

    report = check(template, calls, [stale])

    assert report.unused == ["the allow-list's api dynamodb:DeleteItem explains no unused grant: remove it"]


def test_an_allowlist_entry_for_a_grant_the_stack_does_not_make_is_not_stale(template: dict[str, Any]) -> None:
    other = {"principal": "notifier", "action": "appsync:EventPublish", "reason": "an option left off"}

    assert check(template, CALLS, [other]).ok


def with_route(template: dict[str, Any], permission_source: str) -> dict[str, Any]:
    """`GET /jobs/{job_id}` integrated with the api function, and one Lambda permission for API Gateway."""
    resources = template["Resources"]
    resources["HttpApi"] = {"Type": "AWS::ApiGatewayV2::Api", "Properties": {}}
    resources["Integration"] = {
        "Type": "AWS::ApiGatewayV2::Integration",
        "Properties": {"ApiId": {"Ref": "HttpApi"}, "IntegrationUri": {"Fn::GetAtt": ["Api", "Arn"]}},
    }
    resources["Route"] = {
        "Type": "AWS::ApiGatewayV2::Route",
        "Properties": {
            "ApiId": {"Ref": "HttpApi"},
            "RouteKey": "GET /jobs/{job_id}",
            "Target": {"Fn::Join": ["", ["integrations/", {"Ref": "Integration"}]]},
        },
    }
    resources["Permission"] = {
        "Type": "AWS::Lambda::Permission",
        "Properties": {
            "Action": "lambda:InvokeFunction",
            "FunctionName": {"Fn::GetAtt": ["Api", "Arn"]},
            "Principal": "apigateway.amazonaws.com",
            "SourceArn": {
                "Fn::Sub": "arn:${AWS::Partition}:execute-api:${AWS::Region}:${AWS::AccountId}:${HttpApi}"
                + permission_source
            },
        },
    }
    return template


def test_a_route_needs_a_permission_for_api_gateway_that_covers_it(template: dict[str, Any]) -> None:
    covered = check(with_route(copy.deepcopy(template), "/*/*/jobs/{job_id}"), CALLS, [])
    elsewhere = check(with_route(template, "/*/*/jobs"), CALLS, [])

    assert covered.ok
    assert elsewhere.missing == [
        "route 'GET /jobs/{job_id}' (Route): no lambda:InvokeFunction permission for API Gateway"
    ]
    assert elsewhere.unused == [
        "permission Permission: apigateway.amazonaws.com may call lambda:InvokeFunction on "
        "arn:aws:lambda:us-east-1:123456789012:function:offpath-api, but no trigger of the template needs it"
    ]
