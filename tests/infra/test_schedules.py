"""Schedules: every declared schedule in its time zone, the sweeper every minute, and the failure paths of
an asynchronous target (TESTPLAN 24)."""

from __future__ import annotations

import json

from offpath.naming import SWEEP_INPUT, recurring_input, schedule_group_name
from tests.infra.stacks import Synthesized
from tests.infra.template_view import functions_by_name, grants_of_role, of_type, queues_by_name, render


def schedules(stack: Synthesized) -> dict[str, dict[str, object]]:
    return {r["Properties"]["Name"]: r["Properties"] for r in of_type(stack.json, "AWS::Scheduler::Schedule").values()}


def test_every_declared_schedule_exists_with_its_expression_and_time_zone(any_stack: Synthesized) -> None:
    found = schedules(any_stack)
    prefix = any_stack.stack.options.prefix
    enqueue_id, _ = functions_by_name(any_stack.json)[f"{prefix}-enqueue"]
    dlq_id, _ = queues_by_name(any_stack.json)[f"{prefix}-schedule-dlq"]
    assert any_stack.registry.schedules, "the registry declares no schedule to check"
    for name, declared in any_stack.registry.schedules.items():
        schedule = found[name]
        assert schedule["ScheduleExpression"] == declared.expression
        assert schedule["ScheduleExpressionTimezone"] == declared.timezone
        assert schedule["GroupName"] == schedule_group_name(prefix)
        assert schedule["State"] == ("ENABLED" if declared.enabled else "DISABLED")
        if declared.flexible_window_min:
            assert schedule["FlexibleTimeWindow"] == {
                "Mode": "FLEXIBLE",
                "MaximumWindowInMinutes": declared.flexible_window_min,
            }
        else:
            assert schedule["FlexibleTimeWindow"] == {"Mode": "OFF"}
        target = schedule["Target"]
        assert render(target["Arn"]) == f"<{enqueue_id}.Arn>"
        assert json.loads(target["Input"]) == recurring_input(declared.name)
        assert render(target["DeadLetterConfig"]["Arn"]) == f"<{dlq_id}.Arn>"
        assert target["RetryPolicy"]["MaximumRetryAttempts"] > 0


def test_the_extended_registry_schedules_are_in_their_own_time_zones(extended_stack: Synthesized) -> None:
    found = schedules(extended_stack)
    assert found["prague-report"]["ScheduleExpressionTimezone"] == "Europe/Prague"
    assert found["prague-report"]["ScheduleExpression"] == "cron(30 2 * * ? *)"
    assert found["tokyo-report"]["ScheduleExpressionTimezone"] == "Asia/Tokyo"


def test_the_sweeper_runs_every_minute(default_stack: Synthesized) -> None:
    sweep = schedules(default_stack)["offpath-sweeper"]
    sweeper_id, _ = functions_by_name(default_stack.json)["offpath-sweeper"]
    assert sweep["ScheduleExpression"] == "rate(1 minute)"
    assert render(sweep["Target"]["Arn"]) == f"<{sweeper_id}.Arn>"
    assert json.loads(sweep["Target"]["Input"]) == SWEEP_INPUT


def test_the_scheduler_role_may_only_invoke_enqueue_and_write_the_schedule_dlq(default_stack: Synthesized) -> None:
    template = default_stack.json
    enqueue_id, _ = functions_by_name(template)["offpath-enqueue"]
    dlq_id, _ = queues_by_name(template)["offpath-schedule-dlq"]
    roles = {
        render(s["Target"]["RoleArn"]) for name, s in schedules(default_stack).items() if name != "offpath-sweeper"
    }
    (role_arn,) = roles
    role = role_arn.removeprefix("<").removesuffix(".Arn>")
    assert grants_of_role(template, role) == {
        "lambda:InvokeFunction": {f"<{enqueue_id}.Arn>"},
        "sqs:SendMessage": {f"<{dlq_id}.Arn>"},
    }
    trust = template["Resources"][role]["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert [s["Principal"] for s in trust] == [{"Service": "scheduler.amazonaws.com"}]
    assert set(trust[0]["Condition"]["StringEquals"]) == {"aws:SourceAccount", "aws:SourceArn"}
    api = functions_by_name(template)["offpath-api"][1]["Environment"]["Variables"]
    assert render(api["OFFPATH_SCHEDULER_ROLE_ARN"]) == role_arn
    assert render(api["OFFPATH_SCHEDULE_DLQ_ARN"]) == f"<{dlq_id}.Arn>"
    assert api["OFFPATH_SCHEDULE_GROUP"] == "offpath-schedules"


def test_enqueue_failures_go_to_an_on_failure_queue(default_stack: Synthesized) -> None:
    template = default_stack.json
    failures_id, _ = queues_by_name(template)["offpath-async-failures"]
    configs = {
        render(c["Properties"]["FunctionName"]): c["Properties"]
        for c in of_type(template, "AWS::Lambda::EventInvokeConfig").values()
    }
    for name in ("offpath-enqueue", "offpath-sweeper"):
        function_id, function = functions_by_name(template)[name]
        config = configs[f"<{function_id}>"]
        assert render(config["DestinationConfig"]["OnFailure"]["Destination"]) == f"<{failures_id}.Arn>"
        role = function["Role"]["Fn::GetAtt"][0]
        assert f"<{failures_id}.Arn>" in grants_of_role(template, role)["sqs:SendMessage"]
    assert configs[f"<{functions_by_name(template)['offpath-enqueue'][0]}>"]["MaximumRetryAttempts"] == 2
