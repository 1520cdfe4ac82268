"""TESTPLAN 28: an alarm per failure mode, each notifying the one topic; a dashboard naming every queue."""

from __future__ import annotations

from infra.monitoring import DURATION_PERCENTILES, JOB_OUTCOMES
from offpath_tools.cost import ASSUMPTIONS, Config
from tests.infra.stacks import EXTENDED_CONTEXT, Synthesized
from tests.infra.template_view import alarms_by_name, dimensions, functions_by_name, of_type, queues_by_name, render


def test_every_alarm_notifies_the_alarm_topic(any_stack: Synthesized) -> None:
    (topic_id,) = of_type(any_stack.json, "AWS::SNS::Topic")
    alarms = alarms_by_name(any_stack.json)
    assert alarms
    for name, alarm in alarms.items():
        assert alarm["AlarmActions"] == [{"Ref": topic_id}], name
        assert alarm["OKActions"] == [{"Ref": topic_id}], name


def test_alarms_cover_each_queue_class(any_stack: Synthesized) -> None:
    alarms = alarms_by_name(any_stack.json)
    prefix = any_stack.stack.options.prefix
    for name, settings in any_stack.registry.queues.items():
        dlq = alarms[f"{prefix}-{name}-dlq-depth"]
        assert (dlq["Namespace"], dlq["MetricName"], dlq["Threshold"]) == (
            "AWS/SQS",
            "ApproximateNumberOfMessagesVisible",
            1,
        )
        dlq_id, _ = queues_by_name(any_stack.json)[f"{prefix}-{name}-dlq"]
        assert dimensions(dlq)["QueueName"] == f"<{dlq_id}.QueueName>"
        age = alarms[f"{prefix}-{name}-oldest-message-age"]
        assert (age["MetricName"], age["Threshold"]) == ("ApproximateAgeOfOldestMessage", settings.oldest_age_alarm_s)
        stuck = alarms[f"{prefix}-{name}-stuck-jobs"]
        assert (stuck["Namespace"], stuck["MetricName"], dimensions(stuck)) == (
            "Offpath",
            "StuckJobsFound",
            {"queue": name},
        )
        for kind, metric in (("errors", "Errors"), ("throttles", "Throttles")):
            alarm = alarms[f"{prefix}-{name}-worker-{kind}"]
            assert (alarm["Namespace"], alarm["MetricName"]) == ("AWS/Lambda", metric)
            assert "Workers" in dimensions(alarm)["FunctionName"]
        for alarm in (dlq, age, stuck):
            assert alarm["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"


def test_alarms_cover_the_api_and_the_schedules(default_stack: Synthesized) -> None:
    alarms = alarms_by_name(default_stack.json)
    api = alarms["offpath-api-5xx"]
    assert (api["Namespace"], api["MetricName"]) == ("AWS/ApiGateway", "5xx")
    schedule_dlq = alarms["offpath-schedule-dlq-depth"]
    assert dimensions(schedule_dlq)["QueueName"].startswith("<SchedulesScheduleDlq")
    failures = alarms["offpath-enqueue-failures"]
    assert dimensions(failures)["QueueName"].startswith("<SchedulesAsyncFailures")


def test_the_alarm_email_is_subscribed_when_given(default_stack: Synthesized, extended_stack: Synthesized) -> None:
    assert not of_type(default_stack.json, "AWS::SNS::Subscription")
    (subscription,) = of_type(extended_stack.json, "AWS::SNS::Subscription").values()
    assert subscription["Properties"]["Protocol"] == "email"
    assert subscription["Properties"]["Endpoint"] == EXTENDED_CONTEXT["alarm_email"]


def test_the_dashboard_names_every_queue_and_job_type(any_stack: Synthesized) -> None:
    (dashboard,) = of_type(any_stack.json, "AWS::CloudWatch::Dashboard").values()
    body = render(dashboard["Properties"]["DashboardBody"])
    for name in any_stack.registry.queues:
        for title in (f"queue {name}: depth", f"queue {name}: oldest message age", f"queue {name}: DLQ depth"):
            assert title in body
    for job_type in any_stack.registry.job_types.values():
        assert f"{job_type.name} ({job_type.queue}): duration" in body
    for metric in (*JOB_OUTCOMES, "JobDuration", *DURATION_PERCENTILES, "ConcurrentExecutions", "Throttles", "5xx"):
        assert f'"{metric}"' in body
    assert '"job_type"' in body and '"Offpath"' in body


def test_the_local_runtime_declares_the_same_alarms_as_the_stack(any_stack: Synthesized) -> None:
    from offpath_local.resources import alarm_specs

    alarms = alarms_by_name(any_stack.json)
    local = {spec.name: spec for spec in alarm_specs(any_stack.registry, any_stack.stack.options.prefix)}

    assert set(local) == set(alarms)
    for name, spec in local.items():
        assert (spec.metric_namespace, spec.metric_name, spec.threshold) == (
            alarms[name]["Namespace"],
            alarms[name]["MetricName"],
            alarms[name]["Threshold"],
        ), name


def test_the_cost_model_prices_the_alarms_and_memory_the_stack_deploys(any_stack: Synthesized) -> None:
    """The cost model does not import the CDK stack: it assumes these, and this holds it to them."""
    queue_classes = len(any_stack.registry.queues)
    expected = queue_classes * ASSUMPTIONS.alarms_per_queue_class + ASSUMPTIONS.other_alarms
    assert len(alarms_by_name(any_stack.json)) == expected
    assert len(of_type(any_stack.json, "AWS::CloudWatch::Dashboard")) == ASSUMPTIONS.dashboards
    config = Config(queue_classes=queue_classes)
    memory = {name: properties["MemorySize"] for name, (_, properties) in functions_by_name(any_stack.json).items()}
    prefix = any_stack.stack.options.prefix
    assert memory[f"{prefix}-api"] == config.memory("api")
    assert memory[f"{prefix}-enqueue"] == config.memory("enqueue")
    assert {memory[f"{prefix}-worker-{name}"] for name in any_stack.registry.queues} == {config.memory("worker")}
