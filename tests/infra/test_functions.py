"""The functions: one worker per queue class, runtime and layer, environment, code asset, least privilege."""

from __future__ import annotations

import json
from pathlib import Path

from infra.nag import RESOURCELESS_ACTIONS
from infra.options import POWERTOOLS_LAYER_PARAMETER, StackOptions
from offpath.domain.registry import MAX_WORKER_TIMEOUT_S, SUBMITTER_TIMEOUT_S, WORKER_TIMEOUT_MARGIN_S
from offpath.naming import FUNCTION_ENVIRONMENT, TABLE_INDEXES
from offpath.settings import Settings
from tests.infra.stacks import PINNED_LAYER, Synthesized
from tests.infra.template_view import (
    alarms_by_name,
    as_list,
    functions_by_name,
    grants_of_role,
    of_type,
    queues_by_name,
    render,
    role_of,
    statements_of_role,
)

LOGS = {"logs:CreateLogStream", "logs:PutLogEvents"}
TRACES = {"xray:PutTraceSegments", "xray:PutTelemetryRecords"}
# What each function's code calls (adapters/), plus what its trigger needs.
EXPECTED_ACTIONS = {
    "api": {
        "dynamodb:PutItem",
        "dynamodb:GetItem",
        "dynamodb:UpdateItem",
        "dynamodb:BatchGetItem",
        "dynamodb:Query",
        "sqs:SendMessage",
        "sqs:GetQueueAttributes",
        "sqs:StartMessageMoveTask",
        "sqs:ListMessageMoveTasks",
        "sqs:ReceiveMessage",
        "sqs:DeleteMessage",
        # One job's dead letter (a hand retry, a discard): the others it passed over are released.
        "sqs:ChangeMessageVisibility",
        "cloudwatch:GetMetricData",
        "cloudwatch:ListMetrics",
        "cloudwatch:DescribeAlarms",
        "cloudwatch:DescribeAlarmHistory",
        "scheduler:CreateSchedule",
        "scheduler:DeleteSchedule",
        "iam:PassRole",
        # DELETE /webhooks/{name}: the endpoint's delivery log.
        "dynamodb:DeleteItem",
    },
    "worker": {
        "dynamodb:UpdateItem",
        "dynamodb:PutItem",
        # The event source mapping's grant on its own queue (ChangeMessageVisibility: the retry backoff, and the
        # batch held until its lease ends with ChangeMessageVisibilityBatch, which this action allows).
        "sqs:ReceiveMessage",
        "sqs:ChangeMessageVisibility",
        "sqs:DeleteMessage",
        "sqs:GetQueueAttributes",
        "sqs:GetQueueUrl",
        "sqs:SendMessage",
    },
    "enqueue": {
        "dynamodb:PutItem",
        "dynamodb:GetItem",
        "dynamodb:UpdateItem",
        "sqs:SendMessage",
    },
    "sweeper": {
        "dynamodb:Query",
        "dynamodb:UpdateItem",
        "dynamodb:BatchGetItem",
        "sqs:SendMessage",
        "sqs:GetQueueAttributes",
    },
    # + events:PutEvents with a bus, appsync:EventPublish with realtime (notifier_actions).
    "notifier": {
        "dynamodb:GetItem",
        "sqs:SendMessage",
        # The stream event source mapping's grant on the table's stream, and its on-failure destination's.
        "dynamodb:DescribeStream",
        "dynamodb:GetRecords",
        "dynamodb:GetShardIterator",
        "dynamodb:ListStreams",
        "sqs:GetQueueAttributes",
        "sqs:GetQueueUrl",
    },
    "delivery": {
        "dynamodb:GetItem",
        "dynamodb:PutItem",
        "sqs:SendMessage",
        "sqs:ReceiveMessage",
        "sqs:ChangeMessageVisibility",
        "sqs:DeleteMessage",
        "sqs:GetQueueAttributes",
        "sqs:GetQueueUrl",
    },
}


def expected_actions(kind: str, options: StackOptions) -> set[str]:
    """What a function of `kind` is granted under the stack's options."""
    actions = set(EXPECTED_ACTIONS[kind])
    if kind == "notifier":
        actions |= {"events:PutEvents"} if options.event_bus_name else set()
        actions |= {"appsync:EventPublish"} if options.realtime else set()
    return actions


def kind_of(function_name: str, prefix: str) -> str:
    kind = function_name.removeprefix(f"{prefix}-")
    return "worker" if kind.startswith("worker-") else kind


def test_every_queue_class_has_its_own_worker_with_its_batching_and_concurrency(any_stack: Synthesized) -> None:
    template = any_stack.json
    functions = functions_by_name(template)
    queues = queues_by_name(template)
    prefix = any_stack.stack.options.prefix
    mappings = {
        render(m["Properties"]["FunctionName"]): m["Properties"]
        for m in of_type(template, "AWS::Lambda::EventSourceMapping").values()
    }
    workers = {f"<{functions[f'{prefix}-worker-{name}'][0]}>" for name in any_stack.registry.queues}
    assert len(workers & set(mappings)) == len(any_stack.registry.queues)
    for name, settings in any_stack.registry.queues.items():
        worker_id, worker = functions[f"{prefix}-worker-{name}"]
        queue_id, _ = queues[f"{prefix}-{name}"]
        mapping = mappings[f"<{worker_id}>"]
        assert render(mapping["EventSourceArn"]) == f"<{queue_id}.Arn>"
        assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
        assert mapping["BatchSize"] == any_stack.registry.batch_size(name)
        assert mapping.get("MaximumBatchingWindowInSeconds", 0) == settings.batching_window_s
        assert mapping["ScalingConfig"] == {"MaximumConcurrency": settings.max_concurrency}
        assert worker["Handler"] == "offpath.handlers.worker.handler"
        assert worker["Environment"]["Variables"]["OFFPATH_QUEUE_CLASS"] == name
        assert worker["Timeout"] == any_stack.registry.worker_timeout_s(name)


def test_a_full_batch_of_each_workers_slowest_job_type_fits_its_timeout(any_stack: Synthesized) -> None:
    """A batch never has to return most of its records unrun: the batch size or the timeout gives way."""
    template = any_stack.json
    functions = functions_by_name(template)
    batch_sizes = {
        render(m["Properties"]["FunctionName"]): m["Properties"]["BatchSize"]
        for m in of_type(template, "AWS::Lambda::EventSourceMapping").values()
    }
    prefix = any_stack.stack.options.prefix
    for name, settings in any_stack.registry.queues.items():
        worker_id, worker = functions[f"{prefix}-worker-{name}"]
        slowest = max((jt.timeout_s for jt in any_stack.registry.job_types_on(name)), default=0)
        batch = batch_sizes[f"<{worker_id}>"]
        assert batch * (slowest + WORKER_TIMEOUT_MARGIN_S) <= worker["Timeout"] <= MAX_WORKER_TIMEOUT_S, name
        assert 1 <= batch <= settings.batch_size, name


def test_the_functions_that_submit_end_within_the_time_the_worker_waits_for_a_jobs_write(
    default_stack: Synthesized,
) -> None:
    """They send before they write: the worker drops a message whose job is unwritten after this bound."""
    functions = functions_by_name(default_stack.json)
    for kind in ("api", "enqueue"):
        assert functions[f"offpath-{kind}"][1]["Timeout"] <= SUBMITTER_TIMEOUT_S, kind


def test_every_function_is_arm64_python314_with_the_powertools_layer_from_ssm(default_stack: Synthesized) -> None:
    template = default_stack.json
    (parameter_id,) = [
        name for name, p in template["Parameters"].items() if p.get("Default") == POWERTOOLS_LAYER_PARAMETER
    ]
    assert template["Parameters"][parameter_id]["Type"] == "AWS::SSM::Parameter::Value<String>"
    functions = functions_by_name(template)
    assert {kind_of(name, "offpath") for name in functions} == set(EXPECTED_ACTIONS)
    for _, function in functions.values():
        assert function["Runtime"] == "python3.14"
        assert function["Architectures"] == ["arm64"]
        assert function["Layers"] == [{"Ref": parameter_id}]
        assert "TracingConfig" not in function  # off by default: see the `tracing` option


def test_tracing_can_be_turned_on_by_context(extended_stack: Synthesized) -> None:
    for _, function in functions_by_name(extended_stack.json).values():
        assert function["TracingConfig"] == {"Mode": "Active"}


def test_the_powertools_layer_can_be_pinned_by_context(extended_stack: Synthesized) -> None:
    for _, function in functions_by_name(extended_stack.json).values():
        assert function["Layers"] == [PINNED_LAYER]


def test_handlers_are_referenced_by_name(default_stack: Synthesized) -> None:
    handlers = {
        kind_of(name, "offpath"): f["Handler"] for name, (_, f) in functions_by_name(default_stack.json).items()
    }
    assert handlers == {
        "api": "offpath.handlers.api.handler",
        "worker": "offpath.handlers.worker.handler",
        "enqueue": "offpath.handlers.enqueue.handler",
        "sweeper": "offpath.handlers.sweeper.handler",
        "notifier": "offpath.handlers.notifier.handler",
        "delivery": "offpath.handlers.delivery.handler",
    }


def test_function_environments_hold_only_settings_variables(default_stack: Synthesized) -> None:
    known = {f"OFFPATH_{name.upper()}" for name in Settings.model_fields} | set(FUNCTION_ENVIRONMENT)
    template = default_stack.json
    queues = queues_by_name(template)
    for name, (_, function) in functions_by_name(template).items():
        variables = function["Environment"]["Variables"]
        assert set(variables) <= known, f"{name} sets variables that Settings does not read"
        assert {"OFFPATH_TABLE_NAME", "OFFPATH_QUEUE_URLS", "OFFPATH_DLQ_URLS", "OFFPATH_RETENTION_DAYS"} <= set(
            variables
        )
        urls = json.loads(render(variables["OFFPATH_QUEUE_URLS"]))
        dlq_urls = json.loads(render(variables["OFFPATH_DLQ_URLS"]))
        assert urls == {q: f"<{queues[f'offpath-{q}'][0]}>" for q in default_stack.registry.queues}
        assert dlq_urls == {q: f"<{queues[f'offpath-{q}-dlq'][0]}>" for q in default_stack.registry.queues}
        if kind_of(name, "offpath") == "api":
            assert {
                "OFFPATH_SCHEDULE_GROUP",
                "OFFPATH_SCHEDULER_ROLE_ARN",
                "OFFPATH_ENQUEUE_FUNCTION_ARN",
                "OFFPATH_SCHEDULE_DLQ_ARN",
            } <= set(variables)
            assert render(variables["OFFPATH_ENQUEUE_FUNCTION_ARN"]).endswith(":function:offpath-enqueue")


def test_every_function_logs_to_its_own_log_group_with_retention(default_stack: Synthesized) -> None:
    template = default_stack.json
    groups = of_type(template, "AWS::Logs::LogGroup")
    used = set()
    for name, (_, function) in functions_by_name(template).items():
        group_id = function["LoggingConfig"]["LogGroup"]["Ref"]
        assert groups[group_id]["Properties"]["LogGroupName"] == f"/aws/lambda/{name}"
        used.add(group_id)
    assert len(used) == len(functions_by_name(template))
    for group in groups.values():
        assert group["Properties"]["RetentionInDays"] == default_stack.stack.options.log_retention_days


def test_each_function_has_its_own_role_granting_only_what_it_calls(any_stack: Synthesized) -> None:
    template = any_stack.json
    prefix = any_stack.stack.options.prefix
    traces = TRACES if any_stack.stack.options.tracing else set()
    roles = set()
    for name, (_, function) in functions_by_name(template).items():
        role = role_of(function)
        roles.add(role)
        assert "ManagedPolicyArns" not in template["Resources"][role]["Properties"]
        actions = set(grants_of_role(template, role))
        assert actions == expected_actions(kind_of(name, prefix), any_stack.stack.options) | LOGS | traces, name
    assert len(roles) == len(functions_by_name(template))


def test_grants_stay_on_the_resources_each_function_uses(default_stack: Synthesized) -> None:
    template = default_stack.json
    functions = functions_by_name(template)
    queues = queues_by_name(template)
    (table_id,) = of_type(template, "AWS::DynamoDB::Table")

    def grants(kind: str) -> dict[str, set[str]]:
        return grants_of_role(template, role_of(functions[f"offpath-{kind}"][1]))

    for name in default_stack.registry.queues:
        worker = grants(f"worker-{name}")
        assert worker["sqs:SendMessage"] == {
            f"<{queues[f'offpath-{name}-dlq'][0]}.Arn>",
            f"<{queues[f'offpath-{name}'][0]}.Arn>",  # a fresh copy of a message on its last receives
        }
        assert worker["sqs:ReceiveMessage"] == {f"<{queues[f'offpath-{name}'][0]}.Arn>"}
        assert worker["dynamodb:UpdateItem"] == {f"<{table_id}.Arn>"}
    assert grants("sweeper")["dynamodb:Query"] == {f"<{table_id}.Arn>/index/sweep"}
    # The sweeper reads the job queues' sizes (a backlog is not a lost message), not the DLQs'.
    job_queue_arns = {f"<{queues[f'offpath-{q}'][0]}.Arn>" for q in default_stack.registry.queues}
    assert grants("sweeper")["sqs:GetQueueAttributes"] == job_queue_arns
    # A listing queries the table itself (its key is the tenant's listing key); no index but the sweeper's.
    assert [index.name for index in TABLE_INDEXES] == ["sweep"]
    assert grants("api")["dynamodb:Query"] == {f"<{table_id}.Arn>"}
    dlq_arns = {f"<{queues[f'offpath-{q}-dlq'][0]}.Arn>" for q in default_stack.registry.queues}
    assert grants("api")["sqs:StartMessageMoveTask"] == dlq_arns
    # Finding one job's dead letter: receive, delete and release on the DLQs only, never on the job queues.
    for action in ("sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:ChangeMessageVisibility"):
        assert grants("api")[action] == dlq_arns, action
    group_schedules = "arn:<AWS::Partition>:scheduler:<AWS::Region>:<AWS::AccountId>:schedule/offpath-schedules/*"
    for kind in ("api",):
        assert grants(kind)["scheduler:CreateSchedule"] == {group_schedules}
        assert grants(kind)["scheduler:DeleteSchedule"] == {group_schedules}
        (pass_role,) = [
            s
            for s in statements_of_role(template, role_of(functions[f"offpath-{kind}"][1]))
            if s["Action"] == "iam:PassRole"
        ]
        assert render(pass_role["Resource"]).startswith("<SchedulesSchedulerRole")
        assert pass_role["Condition"] == {"StringEquals": {"iam:PassedToService": "scheduler.amazonaws.com"}}


def test_the_api_reads_its_own_stacks_alarms_and_the_metrics_for_get_stats(any_stack: Synthesized) -> None:
    template = any_stack.json
    prefix = any_stack.stack.options.prefix
    api = grants_of_role(template, role_of(functions_by_name(template)[f"{prefix}-api"][1]))
    variables = functions_by_name(template)[f"{prefix}-api"][1]["Environment"]["Variables"]

    alarms = {f"arn:<AWS::Partition>:cloudwatch:<AWS::Region>:<AWS::AccountId>:alarm:{prefix}-*"}
    assert api["cloudwatch:DescribeAlarms"] == alarms
    assert api["cloudwatch:DescribeAlarmHistory"] == alarms
    assert api["cloudwatch:GetMetricData"] == api["cloudwatch:ListMetrics"] == {"*"}
    assert variables["OFFPATH_STACK_PREFIX"] == prefix
    assert all(name.startswith(f"{prefix}-") for name in alarms_by_name(template))


def test_wildcard_resources_only_for_actions_that_take_no_resource(default_stack: Synthesized) -> None:
    for policy in of_type(default_stack.json, "AWS::IAM::Policy").values():
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            actions = set(as_list(statement["Action"]))
            assert not any(action.endswith("*") for action in actions)
            if "*" in {render(resource) for resource in as_list(statement["Resource"])}:
                assert actions <= RESOURCELESS_ACTIONS


def test_the_code_asset_holds_offpath_and_tzdata_without_bytecode(default_stack: Synthesized) -> None:
    manifest = json.loads((default_stack.outdir / "Offpath.assets.json").read_text())
    (asset,) = [f for f in manifest["files"].values() if f["source"].get("packaging") == "zip"]
    root = default_stack.outdir / asset["source"]["path"]
    assert (root / "offpath" / "handlers" / "api.py").is_file()
    assert (root / "offpath" / "jobs" / "__init__.py").is_file()
    assert (root / "tzdata" / "zoneinfo" / "Europe" / "Prague").is_file()
    assert not [p for p in Path(root).rglob("*") if p.name == "__pycache__" or p.suffix == ".pyc"]
    code = {f["Code"]["S3Key"] for _, f in functions_by_name(default_stack.json).values()}
    assert code == {f"{asset['source']['path'].removeprefix('asset.')}.zip"}


def test_functions_log_json_without_platform_lines_at_the_warning_level(default_stack: Synthesized) -> None:
    for name, (_, function) in functions_by_name(default_stack.json).items():
        assert function["LoggingConfig"] == {
            "LogFormat": "JSON",
            "SystemLogLevel": "WARN",
            "ApplicationLogLevel": "INFO",
            "LogGroup": function["LoggingConfig"]["LogGroup"],
        }, name
        variables = function["Environment"]["Variables"]
        assert variables["OFFPATH_LOG_LEVEL"] == "WARNING", name
        assert variables["PYDANTIC_DISABLE_PLUGINS"] == "__all__", name
