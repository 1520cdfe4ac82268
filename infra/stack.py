"""The offpath stack: it only composes the constructs, one per concern, all read from the registry."""

from __future__ import annotations

import re
from typing import Any

import aws_cdk as cdk
from constructs import Construct

from infra.api import JobApi
from infra.guards import Guards
from infra.lambda_function import ServiceFunction, function_kit
from infra.log_insights import LogQueries
from infra.monitoring import Monitoring
from infra.nag import NO_TRACING_REASON, XRAY_REASON, acknowledge, add_checks, wildcard_resource
from infra.notices import Notices
from infra.options import StackOptions
from infra.queues import JobQueues
from infra.schedules import Schedules
from infra.table import JobTable
from infra.workers import Workers
from offpath.domain.registry import Registry

SYNC_DLQ_REASON = (
    "Invoked synchronously (by API Gateway or an SQS event source); a function DLQ applies only to asynchronous "
    "invocations."
)
RUNTIME_REASON = (
    "Python 3.13, not the latest runtime: the interpreter make test runs the functions' tests on and compiles the "
    "asset's bytecode with (docs/decisions.md)."
)
ASYNC_DLQ_REASON = (
    "Invoked asynchronously by EventBridge Scheduler; failures go to the on-failure destination (an SQS queue "
    "with an alarm), which replaces a DLQ."
)


class OffpathStack(cdk.Stack):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        registry: Registry | None = None,
        options: StackOptions | None = None,
        **kwargs: Any,
    ) -> None:
        options = options or StackOptions()
        kwargs.setdefault("stack_name", options.prefix)
        kwargs.setdefault("description", "offpath: background jobs on AWS serverless")
        if options.localstack:
            # LocalStack's state lives as long as its container: `make localstack-deploy` bootstraps before every
            # deploy, so the template needs no bootstrap version check (an SSM parameter).
            kwargs.setdefault("synthesizer", cdk.DefaultStackSynthesizer(generate_bootstrap_version_rule=False))
        super().__init__(scope, construct_id, **kwargs)
        if registry is None:
            from offpath.jobs import load_job_types

            registry = load_job_types(demo=options.demo_jobs)
        self.registry = registry
        self.options = options

        self.table = JobTable(self, "JobTable", options=options)
        self.queues = JobQueues(self, "JobQueues", registry=registry, prefix=options.prefix)
        kit = function_kit(
            options,
            environment={
                "OFFPATH_TABLE_NAME": self.table.table_name,
                "OFFPATH_QUEUE_URLS": self.queues.urls(),
                "OFFPATH_DLQ_URLS": self.queues.dlq_urls(),
                "OFFPATH_RETENTION_DAYS": str(options.retention_days),
                "OFFPATH_LOG_LEVEL": options.log_level,
                **({"OFFPATH_DEMO_JOBS": "1"} if options.demo_jobs else {}),
                **({"OFFPATH_QUOTAS": options.quotas} if options.quotas else {}),
                **({"OFFPATH_METRICS_BY_JOB_TYPE": "1"} if options.metrics_by_job_type else {}),
            },
        )
        self.schedules = Schedules(self, "Schedules", registry=registry, kit=kit, table=self.table, queues=self.queues)
        self.api = JobApi(self, "JobApi", kit=kit, table=self.table, queues=self.queues, schedules=self.schedules)
        self.workers = Workers(self, "Workers", registry=registry, kit=kit, table=self.table, queues=self.queues)
        self.api.allow_pausing(self.workers)
        self.notices = Notices(self, "Notices", kit=kit, table=self.table, api=self.api.handler)
        self.monitoring = Monitoring(
            self,
            "Monitoring",
            registry=registry,
            options=options,
            queues=self.queues,
            workers=self.workers,
            api=self.api,
            schedules=self.schedules,
            notices=self.notices,
        )
        self.log_queries = LogQueries(
            self,
            "LogQueries",
            prefix=options.prefix,
            functions=self.functions,
            workers=list(self.workers.workers.values()),
        )
        self.guards = Guards(
            self, "Guards", options=options, api=self.api, enqueue=self.schedules.enqueue, table=self.table
        )
        self._acknowledge()
        self._outputs()

    @property
    def functions(self) -> list[ServiceFunction]:
        return [
            self.api.handler,
            self.api.reader,
            *self.workers.workers.values(),
            self.schedules.enqueue,
            self.schedules.sweeper,
            *self.notices.functions,
        ]

    def _acknowledge(self) -> None:
        schedules = wildcard_resource(
            f"arn:<AWS::Partition>:scheduler:<AWS::Region>:<AWS::AccountId>:schedule/{self.schedules.group_name}/*"
        )
        schedules_reason = (
            "One-time schedules are named per job (job-<id>) when the job is submitted, so the grant covers the "
            "schedules of this stack's group and no other group."
        )
        metric_data_reason = (
            "cloudwatch:GetMetricData and ListMetrics (queue ages for GET /queues, statistics for GET /stats) "
            "take no resource-level permissions"
        )
        alarms = wildcard_resource(
            f"arn:<AWS::Partition>:cloudwatch:<AWS::Region>:<AWS::AccountId>:alarm:{self.options.prefix}-*"
        )
        alarms_reason = (
            "GET /alarms reads the stack's alarms (DescribeAlarms, DescribeAlarmHistory); they are all named "
            f"{self.options.prefix}-..., and the grant covers those names only."
        )
        for function in self.functions:
            acknowledge(function, "AwsSolutions-L1", RUNTIME_REASON)
            acknowledge(function, "Serverless-LambdaLatestVersion", RUNTIME_REASON)
            if self.options.traced and function is not self.api.handler:
                acknowledge(function.role, wildcard_resource("*"), XRAY_REASON)
            if not self.options.traced:
                acknowledge(function, "Serverless-LambdaTracing", NO_TRACING_REASON)
        acknowledge(
            self.api.handler.role,
            wildcard_resource("*"),
            f"{XRAY_REASON}; {metric_data_reason}" if self.options.traced else metric_data_reason,
        )
        for function in (self.api.handler, self.schedules.enqueue, self.schedules.sweeper):
            acknowledge(function.role, schedules, schedules_reason)
        acknowledge(self.api.handler.role, alarms, alarms_reason)
        for function in (self.api.handler, self.api.reader, *self.workers.workers.values()):
            acknowledge(function, "Serverless-LambdaDLQ", SYNC_DLQ_REASON)
        for function in (self.schedules.enqueue, self.schedules.sweeper):
            acknowledge(function, "Serverless-LambdaDLQ", ASYNC_DLQ_REASON)

    def _outputs(self) -> None:
        cdk.CfnOutput(self, "ApiUrl", value=self.api.url, description="The HTTP API's base URL")
        cdk.CfnOutput(self, "TableName", value=self.table.table_name, description="The jobs table")
        for name in sorted(self.queues.queues):
            key = re.sub(r"[^A-Za-z0-9]", "", name.title())
            cdk.CfnOutput(self, f"Queue{key}", value=self.queues.queues[name].queue_name, description=f"Queue {name}")
            cdk.CfnOutput(self, f"Dlq{key}", value=self.queues.dlqs[name].queue_name, description=f"DLQ of {name}")
        cdk.CfnOutput(self, "DashboardUrl", value=self.monitoring.dashboard_url(), description="CloudWatch dashboard")
        cdk.CfnOutput(self, "AlarmTopicArn", value=self.monitoring.topic.topic_arn, description="Alarm SNS topic")
        realtime = self.notices.realtime_api
        if realtime is not None:
            cdk.CfnOutput(
                self,
                "RealtimeEndpoint",
                value=realtime.realtime_dns,
                description="AppSync Events: browsers subscribe to /jobs/<tenant>/<job_id> (docs/realtime.md)",
            )
            cdk.CfnOutput(self, "RealtimeHttpEndpoint", value=realtime.http_dns, description="AppSync Events HTTP")


def build_app(
    context: dict[str, Any] | None = None, *, registry: Registry | None = None, **app_kwargs: Any
) -> tuple[cdk.App, OffpathStack]:
    """The app `app.py` synthesizes: options from context, the stack, and cdk-nag on every synth.

    `registry` defaults to the project's (`offpath.jobs.load_job_types()`, the demo job types only with the
    `demo_jobs` option); tests pass their own.
    """
    app = cdk.App(context=context, **app_kwargs)
    options = StackOptions.from_context(app.node.try_get_context)
    stack = OffpathStack(app, "Offpath", registry=registry, options=options)
    add_checks(app)
    return app, stack
