"""The functions: one worker per queue class, runtime, environment, code asset and its bytecode, least privilege."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from infra import lambda_function
from infra.lambda_function import (
    AWS_PLATFORM,
    FUNCTIONS_DIR,
    bundle,
    lambda_python,
    pinned_requirements,
    pinned_wheels,
    wheel_name,
)
from infra.nag import RESOURCELESS_ACTIONS
from infra.options import StackOptions
from offpath.domain.registry import MAX_WORKER_TIMEOUT_S, SUBMITTER_TIMEOUT_S, WORKER_TIMEOUT_MARGIN_S
from offpath.naming import FUNCTION_ENVIRONMENT, TABLE_INDEXES
from offpath.settings import Settings
from tests.infra.stacks import Synthesized
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
        # A queue class's pause: its event source mapping and its age alarm's actions (adapters/queue_switch.py).
        "lambda:UpdateEventSourceMapping",
        "cloudwatch:DisableAlarmActions",
        "cloudwatch:EnableAlarmActions",
        "scheduler:CreateSchedule",
        "scheduler:DeleteSchedule",
        "iam:PassRole",
        # DELETE /webhooks/{name}: the endpoint's delivery log.
        "dynamodb:DeleteItem",
        # The endpoints' signing secrets, sealed and read (the stack's webhook secrets key).
        "kms:Encrypt",
        "kms:Decrypt",
    },
    # GET /jobs/{id}: the job, and the tenant's wait slots (adapters/dynamodb_waits.py).
    "read": {
        "dynamodb:GetItem",
        "dynamodb:UpdateItem",
    },
    "worker": {
        "dynamodb:UpdateItem",
        "dynamodb:PutItem",
        # A job's `ctx.parent`, a job of a type with a limit read before its claim (logic/limits.py), a superseded
        # job's debounce record (logic/debounce.py name_survivor), the pause flags, cached (logic/pause.py), a batch
        # member's batch; the tenant's open-jobs count for what a job submits (ctx.submit, a chain's next job), a
        # job's ctx.batch paging through its batch's jobs.
        "dynamodb:GetItem",
        "dynamodb:BatchGetItem",
        "dynamodb:Query",
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
        # A chain's next job its worker did not make, a batch member's follow-ups (its batch read, a callback job
        # written; logic/followups.py); a bulk operation's checkpoint.
        "dynamodb:PutItem",
        "sqs:SendMessage",
        "sqs:GetQueueAttributes",
        # Bulk operations it continues (logic/bulk.py): the operation read, the tenant's listing (Query on the
        # table), a retried job's dead letter taken off its DLQ.
        "dynamodb:GetItem",
        "sqs:ReceiveMessage",
        "sqs:DeleteMessage",
        "sqs:ChangeMessageVisibility",
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
        "kms:Decrypt",  # the endpoints' signing secrets, read only
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


def test_every_function_is_arm64_python313_without_a_layer_or_a_parameter(default_stack: Synthesized) -> None:
    """The runtime is the Python the functions' tests also run on (make test-lambda-python); nothing is resolved
    at deploy time: no layer, no SSM parameter."""
    template = default_stack.json
    assert set(template["Parameters"]) == {"BootstrapVersion"}  # the CDK's own, read from SSM at deploy
    assert "/aws/service/" not in json.dumps(template)
    functions = functions_by_name(template)
    assert {kind_of(name, "offpath") for name in functions} == set(EXPECTED_ACTIONS)
    for _, function in functions.values():
        assert function["Runtime"] == "python3.13"
        assert function["Architectures"] == ["arm64"]
        assert "Layers" not in function
        assert "TracingConfig" not in function  # off by default: see the `tracing` option


def test_tracing_can_be_turned_on_by_context(extended_stack: Synthesized) -> None:
    for _, function in functions_by_name(extended_stack.json).values():
        assert function["TracingConfig"] == {"Mode": "Active"}


def test_handlers_are_referenced_by_name(default_stack: Synthesized) -> None:
    handlers = {
        kind_of(name, "offpath"): f["Handler"] for name, (_, f) in functions_by_name(default_stack.json).items()
    }
    assert handlers == {
        "api": "offpath.handlers.api.handler",
        "read": "offpath.handlers.api.handler",
        "worker": "offpath.handlers.worker.handler",
        "enqueue": "offpath.handlers.enqueue.handler",
        "sweeper": "offpath.handlers.sweeper.handler",
        "notifier": "offpath.handlers.notifier.handler",
        "delivery": "offpath.handlers.delivery.handler",
    }


def test_function_environments_hold_only_settings_variables(default_stack: Synthesized) -> None:
    known = {f"OFFPATH_{name.upper()}" for name in Settings.__dataclass_fields__} | set(FUNCTION_ENVIRONMENT)
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

    all_job_queues = {f"<{queues[f'offpath-{q}'][0]}.Arn>" for q in default_stack.registry.queues}
    for name in default_stack.registry.queues:
        worker = grants(f"worker-{name}")
        # Its own queue (a fresh copy of a message on its last receives) and every other job queue (a job it
        # submits, ctx.submit or a chain's next job, runs on its type's queue).
        assert worker["sqs:SendMessage"] == {f"<{queues[f'offpath-{name}-dlq'][0]}.Arn>", *all_job_queues}
        assert worker["sqs:ReceiveMessage"] == {f"<{queues[f'offpath-{name}'][0]}.Arn>"}
        assert worker["dynamodb:UpdateItem"] == {f"<{table_id}.Arn>"}
    # The sweep index, and the table itself for a bulk operation's listing (logic/bulk.py).
    assert grants("sweeper")["dynamodb:Query"] == {f"<{table_id}.Arn>/index/sweep", f"<{table_id}.Arn>"}
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


def test_the_code_asset_holds_offpath_and_the_pinned_distributions_for_cp313_arm64(default_stack: Synthesized) -> None:
    root = default_stack.asset
    assert (root / "offpath" / "handlers" / "api.py").is_file()
    assert (root / "offpath" / "jobs" / "__init__.py").is_file()
    assert (root / "tzdata" / "zoneinfo" / "Europe" / "Prague").is_file()
    for name, version in pinned_requirements():
        assert (root / f"{wheel_name(name)}-{version}.dist-info" / "METADATA").is_file(), name
    assert [p.name for p in (root / "pydantic_core").glob("*.so")] == [
        f"_pydantic_core.cpython-313-{AWS_PLATFORM.machine}-linux-gnu.so"
    ]
    assert not list(root.glob("aws_lambda_powertools*")) and not list(root.glob("boto*"))
    code = {f["Code"]["S3Key"] for _, f in functions_by_name(default_stack.json).values()}
    assert code == {f"{root.name.removeprefix('asset.')}.zip"}


PYC_PROBE = """
import importlib.util, marshal, sys
data = open(sys.argv[1], "rb").read()
print(importlib.util.MAGIC_NUMBER.hex(), marshal.loads(data[16:]).co_filename)
"""


def test_every_module_in_the_asset_has_unchecked_hash_bytecode_of_python313(default_stack: Synthesized) -> None:
    """Lambda's /var/task is read-only: a module without a valid .pyc there is compiled at every cold start. An
    unchecked-hash .pyc (PEP 552: flags 0b01) is loaded without reading its source's time or hash."""
    root = default_stack.asset
    sources = sorted(root.rglob("*.py"))
    assert len(sources) > 150  # offpath, pydantic, tzdata, standardwebhooks...
    api_pyc = root / "offpath" / "handlers" / "__pycache__" / "api.cpython-313.pyc"
    probe = subprocess.run([lambda_python(), "-c", PYC_PROBE, str(api_pyc)], capture_output=True, text=True, check=True)
    magic, filename = probe.stdout.split()
    assert filename == "/var/task/offpath/handlers/api.py"  # tracebacks name the file where Lambda has it

    missing, wrong = [], []
    for source in sources:
        pyc = source.parent / "__pycache__" / f"{source.stem}.cpython-313.pyc"
        if not pyc.is_file():
            missing.append(str(source.relative_to(root)))
            continue
        header = pyc.read_bytes()[:16]
        if header[:4].hex() != magic or int.from_bytes(header[4:8], "little") != 0b01:
            wrong.append(str(pyc.relative_to(root)))
    assert missing == []
    assert wrong == []
    assert [str(p) for p in root.rglob("*.pyc") if not p.name.endswith(".cpython-313.pyc")] == []


def test_a_synth_of_the_same_inputs_copies_the_kept_asset_instead_of_compiling_it(
    default_stack: Synthesized, tmp_path: Path, monkeypatch
) -> None:
    def no_compile(*args: object) -> None:
        raise AssertionError("compiled again")

    monkeypatch.setattr(lambda_function, "compile_bytecode", no_compile)
    bundle(FUNCTIONS_DIR, AWS_PLATFORM, tmp_path)

    def tree(root: Path) -> dict[str, bytes]:
        return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}

    assert tree(tmp_path) == tree(default_stack.asset)


def test_a_synth_with_the_wheels_cached_fetches_nothing(default_stack: Synthesized, monkeypatch) -> None:
    """The first synth fetches the pinned wheels into build/lambda-wheels (make lambda-wheels); later ones,
    every test's included, install from there without the network."""

    def no_fetch(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"fetched: {args}")

    monkeypatch.setattr(lambda_function.subprocess, "run", no_fetch)
    wheels = pinned_wheels(AWS_PLATFORM)

    assert sorted(w.name.split("-")[0] for w in wheels) == sorted(wheel_name(n) for n, _ in pinned_requirements())
    assert all(w.parent == AWS_PLATFORM.wheel_dir for w in wheels)


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


def test_without_a_python313_the_synth_stops_saying_how_to_install_one(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("OFFPATH_LAMBDA_PYTHON", str(tmp_path / "nothing"))
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(lambda_function, "TEST_VENV_PYTHON", tmp_path / "no-venv" / "python")
    lambda_function.lambda_python.cache_clear()
    try:
        with pytest.raises(lambda_function.BundlingError, match=r"no Python 3\.13 .*pyenv install 3\.13"):
            lambda_python()
    finally:
        lambda_function.lambda_python.cache_clear()


def test_the_api_may_switch_exactly_the_workers_event_source_mappings(default_stack: Synthesized) -> None:
    template = default_stack.json
    functions = functions_by_name(template)
    _, api = functions[f"{default_stack.stack.options.prefix}-api"]
    mappings = {
        logical: m["Properties"]
        for logical, m in template["Resources"].items()
        if m["Type"] == "AWS::Lambda::EventSourceMapping" and "Queue" in render(m["Properties"]["EventSourceArn"])
    }
    queues = queues_by_name(template)
    by_class = {
        name: next(
            logical
            for logical, m in mappings.items()
            if render(m["EventSourceArn"]) == f"<{queues[f'offpath-{name}'][0]}.Arn>"
        )
        for name in default_stack.registry.queues
    }

    given = json.loads(render(api["Environment"]["Variables"]["OFFPATH_QUEUE_MAPPINGS"]))

    assert given == {name: f"<{logical}>" for name, logical in by_class.items()}
    granted = [
        statement
        for statement in statements_of_role(template, role_of(api))
        if "lambda:UpdateEventSourceMapping" in as_list(statement["Action"])
    ]
    assert len(granted) == 1
    assert sorted(render(r) for r in as_list(granted[0]["Resource"])) == sorted(
        f"arn:<AWS::Partition>:lambda:<AWS::Region>:<AWS::AccountId>:event-source-mapping:<{logical}>"
        for logical in by_class.values()
    )
