"""Create the table and queues in an emulator, from the registry, as the CDK stack declares them.

`create_resources` makes what the handlers need (table, queues and DLQs); `create_local_resources` adds
what the rest of the stack declares and the embedded runtime drives: the scheduling queues, the schedule
group with one schedule per declared schedule plus the sweeper's, and the alarms.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from offpath.domain.registry import Registry
from offpath.naming import (  # noqa: F401  (names re-exported for the runtime's modules)
    SWEEP_EXPRESSION,
    SWEEP_INPUT,
    TABLE_INDEXES,
    TABLE_PARTITION_KEY,
    TABLE_SORT_KEY,
    TABLE_STREAM_VIEW,
    TTL_ATTRIBUTE,
    api_function_name,
    delivery_dlq_name,
    delivery_function_name,
    delivery_queue_name,
    dlq_name,
    enqueue_function_name,
    notifier_failures_queue_name,
    notifier_function_name,
    queue_name,
    recurring_input,
    schedule_group_name,
    sweeper_function_name,
    worker_function_name,
)

ACCOUNT_ID = "123456789012"  # the emulator's account
REGION = "us-east-1"
SCHEDULING_RETENTION_DAYS = 14
# CloudWatch alarm thresholds on one-minute metrics, as the stack's Monitoring construct declares them.
ALARM_PERIOD_S = 60
EVENT_ALARM_PERIOD_S = 300


@dataclass(frozen=True)
class AlarmSpec:
    """One alarm of the stack. `source` says what the runtime measures for it:
    `queue_visible` (messages visible on `queue_name`), `oldest_age` (age of its oldest message) or
    `events` (how many `event` happened within the alarm's period)."""

    name: str
    description: str
    threshold: float
    metric_namespace: str
    metric_name: str
    dimensions: tuple[tuple[str, str], ...]
    source: str
    queue_name: str | None = None
    event: str | None = None
    period_s: int = ALARM_PERIOD_S
    statistic: str = "Maximum"


@dataclass(frozen=True)
class Resources:
    table_name: str
    queue_urls: dict[str, str]
    dlq_urls: dict[str, str]
    schedule_group: str | None = None
    schedule_dlq_url: str | None = None
    async_failures_url: str | None = None
    alarms: tuple[AlarmSpec, ...] = field(default_factory=tuple)
    prefix: str = "offpath"
    # Notices: the webhook delivery queue and its DLQ, and the table's stream.
    delivery_queue_url: str | None = None
    delivery_dlq_url: str | None = None
    stream_arn: str | None = None
    notifier_failures_url: str | None = None  # the stream mapping's on-failure destination

    def environment(self) -> dict[str, str]:
        """What the handlers read (offpath.settings)."""
        env = {
            "OFFPATH_TABLE_NAME": self.table_name,
            "OFFPATH_QUEUE_URLS": json.dumps(self.queue_urls),
            "OFFPATH_DLQ_URLS": json.dumps(self.dlq_urls),
            "OFFPATH_STACK_PREFIX": self.prefix,
        }
        if self.schedule_group:
            env.update(
                {
                    "OFFPATH_SCHEDULE_GROUP": self.schedule_group,
                    "OFFPATH_SCHEDULER_ROLE_ARN": scheduler_role_arn(self.prefix),
                    "OFFPATH_ENQUEUE_FUNCTION_ARN": function_arn(enqueue_function_name(self.prefix)),
                }
            )
        if self.schedule_dlq_url:
            env["OFFPATH_SCHEDULE_DLQ_ARN"] = queue_arn_of(self.schedule_dlq_url)
        if self.delivery_queue_url:
            env["OFFPATH_DELIVERY_QUEUE_URL"] = self.delivery_queue_url
            env["OFFPATH_ALLOW_LOOPBACK_RECEIVERS"] = "1"
        if self.delivery_dlq_url:
            env["OFFPATH_DELIVERY_DLQ_URL"] = self.delivery_dlq_url
        return env


def function_arn(function_name: str) -> str:
    return f"arn:aws:lambda:{REGION}:{ACCOUNT_ID}:function:{function_name}"


def function_name_of(arn: str) -> str:
    return arn.rsplit(":", 1)[-1]


def queue_arn_of(queue_url: str) -> str:
    account, name = queue_url.rstrip("/").split("/")[-2:]
    return f"arn:aws:sqs:{REGION}:{account}:{name}"


def scheduler_role_arn(prefix: str) -> str:
    return f"arn:aws:iam::{ACCOUNT_ID}:role/{prefix}-scheduler"


def create_table(dynamodb: Any, table_name: str) -> None:
    attributes = {TABLE_PARTITION_KEY, TABLE_SORT_KEY}
    for index in TABLE_INDEXES:
        attributes |= {index.partition_key, index.sort_key}
    dynamodb.create_table(
        TableName=table_name,
        BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[{"AttributeName": name, "AttributeType": "S"} for name in sorted(attributes)],
        KeySchema=[
            {"AttributeName": TABLE_PARTITION_KEY, "KeyType": "HASH"},
            {"AttributeName": TABLE_SORT_KEY, "KeyType": "RANGE"},
        ],
        # The notifier's source: the table's change stream with both images (moto records it).
        StreamSpecification={"StreamEnabled": True, "StreamViewType": TABLE_STREAM_VIEW},
        GlobalSecondaryIndexes=[
            {
                "IndexName": index.name,
                "KeySchema": [
                    {"AttributeName": index.partition_key, "KeyType": "HASH"},
                    {"AttributeName": index.sort_key, "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": index.projection}
                | ({"NonKeyAttributes": list(index.attributes)} if index.attributes else {}),
            }
            for index in TABLE_INDEXES
        ],
    )
    dynamodb.update_time_to_live(
        TableName=table_name, TimeToLiveSpecification={"Enabled": True, "AttributeName": TTL_ATTRIBUTE}
    )


def create_queues(sqs: Any, registry: Registry, prefix: str) -> tuple[dict[str, str], dict[str, str]]:
    queue_urls: dict[str, str] = {}
    dlq_urls: dict[str, str] = {}
    for name, queue in registry.queues.items():
        dlq_url = sqs.create_queue(
            QueueName=dlq_name(prefix, name),
            Attributes={"MessageRetentionPeriod": str(queue.dlq_retention_days * 86400)},
        )["QueueUrl"]
        dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        queue_urls[name] = sqs.create_queue(
            QueueName=queue_name(prefix, name),
            Attributes={
                "VisibilityTimeout": str(registry.visibility_timeout_s(name)),
                "MessageRetentionPeriod": str(queue.retention_days * 86400),
                "RedrivePolicy": json.dumps(
                    {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": registry.max_receive_count(name)}
                ),
            },
        )["QueueUrl"]
        dlq_urls[name] = dlq_url
    return queue_urls, dlq_urls


def create_resources(dynamodb: Any, sqs: Any, registry: Registry, prefix: str = "offpath") -> Resources:
    table_name = f"{prefix}-jobs"
    create_table(dynamodb, table_name)
    queue_urls, dlq_urls = create_queues(sqs, registry, prefix)
    return Resources(table_name, queue_urls, dlq_urls)


def create_scheduling_queues(sqs: Any, prefix: str) -> tuple[str, str]:
    """The Scheduler's DLQ (invoke calls it gave up on) and the enqueue/sweeper functions' asynchronous
    on-failure destination."""
    attributes = {"MessageRetentionPeriod": str(SCHEDULING_RETENTION_DAYS * 86400)}
    schedule_dlq = sqs.create_queue(QueueName=f"{prefix}-schedule-dlq", Attributes=attributes)["QueueUrl"]
    async_failures = sqs.create_queue(QueueName=f"{prefix}-async-failures", Attributes=attributes)["QueueUrl"]
    return schedule_dlq, async_failures


# The delivery queue as the stack declares it (the infra constructs own the numbers on AWS): a visibility
# timeout of 6 x the delivery function's timeout, a DLQ kept 14 days, five receives before a message that
# keeps crashing the function is parked there.
DELIVERY_FUNCTION_TIMEOUT_S = 120
DELIVERY_BATCH_SIZE = 10
DELIVERY_MAX_RECEIVES = 5
DELIVERY_RETENTION_DAYS = 4
DELIVERY_DLQ_RETENTION_DAYS = 14


def create_delivery_queues(sqs: Any, prefix: str) -> tuple[str, str]:
    """The webhook delivery queue and its DLQ."""
    dlq_url = sqs.create_queue(
        QueueName=delivery_dlq_name(prefix),
        Attributes={"MessageRetentionPeriod": str(DELIVERY_DLQ_RETENTION_DAYS * 86400)},
    )["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    queue_url = sqs.create_queue(
        QueueName=delivery_queue_name(prefix),
        Attributes={
            "VisibilityTimeout": str(6 * DELIVERY_FUNCTION_TIMEOUT_S),
            "MessageRetentionPeriod": str(DELIVERY_RETENTION_DAYS * 86400),
            "RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": DELIVERY_MAX_RECEIVES}),
        },
    )["QueueUrl"]
    return queue_url, dlq_url


def create_schedules(scheduler: Any, registry: Registry, prefix: str, schedule_dlq_url: str) -> str:
    """The schedule group, one schedule per declared schedule (target: the enqueue function) and the
    sweeper's schedule, with the inputs the stack gives them."""
    group = schedule_group_name(prefix)
    scheduler.create_schedule_group(Name=group)
    dead_letter = {"Arn": queue_arn_of(schedule_dlq_url)}
    for name, declared in sorted(registry.schedules.items()):
        window = (
            {"Mode": "FLEXIBLE", "MaximumWindowInMinutes": declared.flexible_window_min}
            if declared.flexible_window_min
            else {"Mode": "OFF"}
        )
        scheduler.create_schedule(
            Name=name,
            GroupName=group,
            ScheduleExpression=declared.expression,
            ScheduleExpressionTimezone=declared.timezone,
            FlexibleTimeWindow=window,
            State="ENABLED" if declared.enabled else "DISABLED",
            Description=f"offpath: {declared.job} ({declared.expression} {declared.timezone})",
            Target={
                "Arn": function_arn(enqueue_function_name(prefix)),
                "RoleArn": scheduler_role_arn(prefix),
                "Input": json.dumps(recurring_input(name)),
                "DeadLetterConfig": dead_letter,
            },
        )
    scheduler.create_schedule(
        Name=sweeper_function_name(prefix),
        GroupName=group,
        ScheduleExpression=SWEEP_EXPRESSION,
        FlexibleTimeWindow={"Mode": "OFF"},
        Description="offpath: the sweeper, every minute",
        Target={
            "Arn": function_arn(sweeper_function_name(prefix)),
            "RoleArn": scheduler_role_arn(prefix),
            "Input": json.dumps(SWEEP_INPUT),
            "DeadLetterConfig": dead_letter,
        },
    )
    return group


def alarm_specs(registry: Registry, prefix: str) -> list[AlarmSpec]:
    """The stack's alarms: per queue class its DLQ depth, oldest message age, stuck jobs, worker errors and
    throttles; then API 5xx, the Scheduler's DLQ, the asynchronous invocation failures, the webhook delivery DLQ
    and the notifier's stream failures (a queue the runtime has not made reads as empty)."""

    def sqs(name: str, description: str, threshold: float, queue: str, metric: str, source: str) -> AlarmSpec:
        return AlarmSpec(
            name=f"{prefix}-{name}",
            description=description,
            threshold=threshold,
            metric_namespace="AWS/SQS",
            metric_name=metric,
            dimensions=(("QueueName", queue),),
            source=source,
            queue_name=queue,
        )

    def events(name: str, description: str, namespace: str, metric: str, dims: dict[str, str], event: str) -> AlarmSpec:
        return AlarmSpec(
            name=f"{prefix}-{name}",
            description=description,
            threshold=1,
            metric_namespace=namespace,
            metric_name=metric,
            dimensions=tuple(dims.items()),
            source="events",
            event=event,
            period_s=EVENT_ALARM_PERIOD_S,
            statistic="Sum",
        )

    specs: list[AlarmSpec] = []
    for name, settings in sorted(registry.queues.items()):
        worker = worker_function_name(prefix, name)
        specs += [
            sqs(
                f"{name}-dlq-depth",
                f"Messages in the DLQ of queue class {name}: jobs that failed for good. Inspect, fix, then redrive.",
                1,
                dlq_name(prefix, name),
                "ApproximateNumberOfMessagesVisible",
                "queue_visible",
            ),
            sqs(
                f"{name}-oldest-message-age",
                f"The oldest message on queue class {name} waited {settings.oldest_age_alarm_s}s or more: "
                "the workers are not keeping up or not running.",
                settings.oldest_age_alarm_s,
                queue_name(prefix, name),
                "ApproximateAgeOfOldestMessage",
                "oldest_age",
            ),
            events(
                f"{name}-stuck-jobs",
                f"The sweeper found jobs of queue class {name} stuck (unsent, or a lease that expired).",
                "Offpath",
                "StuckJobsFound",
                {"queue": name},
                f"stuck:{name}",
            ),
            events(
                f"{name}-worker-errors",
                f"The worker of queue class {name} crashed or timed out (its whole batch returns to the queue).",
                "AWS/Lambda",
                "Errors",
                {"FunctionName": worker},
                f"worker-error:{name}",
            ),
            events(
                f"{name}-worker-throttles",
                f"The worker of queue class {name} was throttled: the account's concurrency is exhausted.",
                "AWS/Lambda",
                "Throttles",
                {"FunctionName": worker},
                f"worker-throttle:{name}",
            ),
        ]
    specs += [
        events("api-5xx", "The HTTP API answered with a server error (5xx).", "AWS/ApiGateway", "5xx", {}, "api-5xx"),
        sqs(
            "schedule-dlq-depth",
            "EventBridge Scheduler gave up invoking a schedule's target (recurring, one-time or the sweeper).",
            1,
            f"{prefix}-schedule-dlq",
            "ApproximateNumberOfMessagesVisible",
            "queue_visible",
        ),
        sqs(
            "enqueue-failures",
            "An invocation of the enqueue (or sweeper) function failed after Lambda's retries: a schedule's firing "
            "or a delayed job may not have been enqueued.",
            1,
            f"{prefix}-async-failures",
            "ApproximateNumberOfMessagesVisible",
            "queue_visible",
        ),
        sqs(
            "webhooks-dlq-depth",
            "Webhook deliveries the delivery function kept failing on are parked in the delivery DLQ.",
            1,
            delivery_dlq_name(prefix),
            "ApproximateNumberOfMessagesVisible",
            "queue_visible",
        ),
        sqs(
            "notifier-failures",
            "The notifier gave up on a batch of the job table's stream: its events may not have been sent.",
            1,
            notifier_failures_queue_name(prefix),
            "ApproximateNumberOfMessagesVisible",
            "queue_visible",
        ),
    ]
    return specs


def create_alarms(cloudwatch: Any, specs: list[AlarmSpec]) -> None:
    """The alarms exist in the emulator (describe_alarms lists them); the runtime sets their states."""
    for spec in specs:
        cloudwatch.put_metric_alarm(
            AlarmName=spec.name,
            AlarmDescription=spec.description,
            Namespace=spec.metric_namespace,
            MetricName=spec.metric_name,
            Dimensions=[{"Name": k, "Value": v} for k, v in spec.dimensions],
            Statistic=spec.statistic,
            Period=spec.period_s,
            EvaluationPeriods=1,
            Threshold=spec.threshold,
            ComparisonOperator="GreaterThanOrEqualToThreshold",
            TreatMissingData="notBreaching",
        )


def create_local_resources(clients: dict[str, Any], registry: Registry, prefix: str = "offpath") -> Resources:
    """Everything the stack declares that the embedded runtime emulates (clients: dynamodb, sqs, scheduler,
    cloudwatch)."""
    base = create_resources(clients["dynamodb"], clients["sqs"], registry, prefix)
    schedule_dlq, async_failures = create_scheduling_queues(clients["sqs"], prefix)
    group = create_schedules(clients["scheduler"], registry, prefix, schedule_dlq)
    delivery_queue, delivery_dlq = create_delivery_queues(clients["sqs"], prefix)
    notifier_failures = clients["sqs"].create_queue(
        QueueName=notifier_failures_queue_name(prefix),
        Attributes={"MessageRetentionPeriod": str(DELIVERY_DLQ_RETENTION_DAYS * 86400)},
    )["QueueUrl"]
    specs = alarm_specs(registry, prefix)
    create_alarms(clients["cloudwatch"], specs)
    stream_arn = clients["dynamodb"].describe_table(TableName=base.table_name)["Table"].get("LatestStreamArn")
    return Resources(
        table_name=base.table_name,
        queue_urls=base.queue_urls,
        dlq_urls=base.dlq_urls,
        schedule_group=group,
        schedule_dlq_url=schedule_dlq,
        async_failures_url=async_failures,
        alarms=tuple(specs),
        prefix=prefix,
        delivery_queue_url=delivery_queue,
        delivery_dlq_url=delivery_dlq,
        stream_arn=stream_arn,
        notifier_failures_url=notifier_failures,
    )
