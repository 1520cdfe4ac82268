"""Alarms (all notifying one SNS topic) and one dashboard.

Job metrics come from the functions' EMF lines: namespace `Offpath`, dimension sets (queue, job_type) and
(queue) — see `offpath/observability.py`.
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cloudwatch_actions
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.api import JobApi
from infra.lambda_function import ServiceFunction
from infra.nag import acknowledge
from infra.notices import Notices
from infra.options import StackOptions
from infra.queues import JobQueues
from infra.schedules import Schedules
from infra.workers import Workers
from offpath.domain.registry import Registry
from offpath.naming import alarm_name, oldest_age_alarm_id
from offpath.observability import NAMESPACE

JOB_OUTCOMES = ("JobsSucceeded", "JobsFailed", "JobsRetried", "JobsDeadLettered", "JobsExpired")
DURATION_PERCENTILES = ("p50", "p90", "p99")
ONE_MINUTE = cdk.Duration.minutes(1)
FIVE_MINUTES = cdk.Duration.minutes(5)
TOPIC_KEY_REASON = (
    "CloudWatch alarms cannot publish to a topic encrypted with the AWS managed SNS key, and a customer managed "
    "key costs a monthly fee; the topic carries alarm state changes only, never job data."
)
SUBSCRIPTION_DLQ_REASON = (
    "The only subscription is the operator's e-mail; an undelivered notification leaves the alarm in ALARM, "
    "visible on the dashboard's alarm widget and in the alarm history."
)


def job_metric(
    name: str, statistic: str, *, queue: str, job_type: str | None = None, label: str | None = None
) -> cloudwatch.Metric:
    """A metric of the functions' EMF output, by queue class alone or by queue class and job type."""
    dimensions = {"queue": queue} if job_type is None else {"queue": queue, "job_type": job_type}
    return cloudwatch.Metric(
        namespace=NAMESPACE,
        metric_name=name,
        dimensions_map=dimensions,
        statistic=statistic,
        period=ONE_MINUTE,
        label=label,
    )


def queue_depth(queue: sqs.IQueue) -> cloudwatch.Metric:
    return queue.metric_approximate_number_of_messages_visible(period=ONE_MINUTE, statistic="Maximum")


class Monitoring(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        registry: Registry,
        options: StackOptions,
        queues: JobQueues,
        workers: Workers,
        api: JobApi,
        schedules: Schedules,
        notices: Notices | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.prefix = options.prefix
        self.topic = sns.Topic(self, "AlarmTopic", display_name=f"{options.prefix} alarms", enforce_ssl=True)
        acknowledge(self.topic, "AwsSolutions-SNS2", TOPIC_KEY_REASON)
        if options.alarm_email:
            subscription = subscriptions.EmailSubscription(options.alarm_email)
            self.topic.add_subscription(subscription)
            acknowledge(self.topic, "Serverless-SNSRedrivePolicy", SUBSCRIPTION_DLQ_REASON)
        self.alarms: list[cloudwatch.Alarm] = []

        for name, settings in sorted(registry.queues.items()):
            queue, dlq, worker = queues.queues[name], queues.dlqs[name], workers.workers[name].function
            self._alarm(
                f"{name}-dlq-depth",
                queue_depth(dlq),
                1,
                f"Messages in the DLQ of queue class {name}: jobs that failed for good. Inspect, fix, then redrive.",
            )
            self._alarm(
                oldest_age_alarm_id(name),
                queue.metric_approximate_age_of_oldest_message(period=ONE_MINUTE, statistic="Maximum"),
                settings.oldest_age_alarm_s,
                f"The oldest message on queue class {name} waited {settings.oldest_age_alarm_s}s or more: "
                "the workers are not keeping up or not running.",
            )
            self._alarm(
                f"{name}-stuck-jobs",
                job_metric("StuckJobsFound", "Sum", queue=name).with_(period=FIVE_MINUTES),
                1,
                f"The sweeper found jobs of queue class {name} stuck (unsent, or a lease that expired).",
            )
            self._alarm(
                f"{name}-worker-errors",
                worker.metric_errors(period=FIVE_MINUTES, statistic="Sum"),
                1,
                f"The worker of queue class {name} crashed or timed out (its whole batch returns to the queue).",
            )
            self._alarm(
                f"{name}-worker-throttles",
                worker.metric_throttles(period=FIVE_MINUTES, statistic="Sum"),
                1,
                f"The worker of queue class {name} was throttled: the account's concurrency is exhausted.",
            )
        self._alarm(
            "api-5xx",
            api.http_api.metric_server_error(period=FIVE_MINUTES, statistic="Sum"),
            1,
            "The HTTP API answered with a server error (5xx).",
        )
        self._alarm(
            "schedule-dlq-depth",
            queue_depth(schedules.dead_letter_queue),
            1,
            "EventBridge Scheduler gave up invoking a schedule's target (recurring, one-time or the sweeper).",
        )
        self._alarm(
            "enqueue-failures",
            queue_depth(schedules.async_failures),
            1,
            "An invocation of the enqueue (or sweeper) function failed after Lambda's retries: a schedule's firing "
            "or a delayed job may not have been enqueued.",
        )
        if notices is not None:
            self._alarm(
                "webhooks-dlq-depth",
                queue_depth(notices.delivery_dlq),
                1,
                "Webhook deliveries the delivery function kept failing on are parked in the delivery DLQ.",
            )
            self._alarm(
                "notifier-failures",
                queue_depth(notices.stream_failures),
                1,
                "The notifier gave up on a batch of the job table's stream: its events may not have been sent.",
            )
        self.dashboard = self._dashboard(registry, queues, workers, api, schedules)

    def _alarm(self, alarm_id: str, metric: cloudwatch.IMetric, threshold: float, description: str) -> None:
        alarm = cloudwatch.Alarm(
            self,
            alarm_id,
            alarm_name=alarm_name(self.prefix, alarm_id),
            alarm_description=description,
            metric=metric,
            threshold=threshold,
            evaluation_periods=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
        action = cloudwatch_actions.SnsAction(self.topic)
        alarm.add_alarm_action(action)
        alarm.add_ok_action(action)
        self.alarms.append(alarm)

    def _dashboard(
        self, registry: Registry, queues: JobQueues, workers: Workers, api: JobApi, schedules: Schedules
    ) -> cloudwatch.Dashboard:
        # Named after the prefix, so its console URL is known before deployment.
        dashboard = cloudwatch.Dashboard(self, "Dashboard", dashboard_name=self.prefix)
        dashboard.add_widgets(
            cloudwatch.TextWidget(
                markdown=f"# {self.prefix}\nQueues, job outcomes and durations per job type, the API and the "
                "functions. Every alarm notifies the alarm topic.",
                width=24,
                height=2,
            ),
            cloudwatch.AlarmStatusWidget(title="alarms", alarms=list(self.alarms), width=24, height=4),
        )
        for name, settings in sorted(registry.queues.items()):
            queue, dlq = queues.queues[name], queues.dlqs[name]
            dashboard.add_widgets(
                cloudwatch.GraphWidget(
                    title=f"queue {name}: depth",
                    left=[
                        queue_depth(queue).with_(label="visible"),
                        queue.metric_approximate_number_of_messages_not_visible(
                            period=ONE_MINUTE, statistic="Maximum", label="in flight"
                        ),
                    ],
                    width=6,
                ),
                cloudwatch.GraphWidget(
                    title=f"queue {name}: oldest message age (s)",
                    left=[queue.metric_approximate_age_of_oldest_message(period=ONE_MINUTE, statistic="Maximum")],
                    left_annotations=[
                        cloudwatch.HorizontalAnnotation(value=settings.oldest_age_alarm_s, label="alarm")
                    ],
                    width=6,
                ),
                cloudwatch.GraphWidget(
                    title=f"queue {name}: DLQ depth", left=[queue_depth(dlq).with_(label="in DLQ")], width=6
                ),
                cloudwatch.GraphWidget(
                    title=f"queue {name}: job outcomes",
                    left=[job_metric(outcome, "Sum", queue=name) for outcome in JOB_OUTCOMES],
                    width=6,
                ),
            )
            for job_type in sorted(registry.job_types_on(name), key=lambda jt: jt.name):
                dashboard.add_widgets(
                    cloudwatch.GraphWidget(
                        title=f"{job_type.name} ({name}): outcomes",
                        left=[
                            job_metric(outcome, "Sum", queue=name, job_type=job_type.name) for outcome in JOB_OUTCOMES
                        ],
                        width=12,
                    ),
                    cloudwatch.GraphWidget(
                        title=f"{job_type.name} ({name}): duration (ms)",
                        left=[
                            job_metric("JobDuration", percentile, queue=name, job_type=job_type.name, label=percentile)
                            for percentile in DURATION_PERCENTILES
                        ],
                        width=12,
                    ),
                )
        http_api = api.http_api
        dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="API latency (ms)",
                left=[http_api.metric_latency(period=ONE_MINUTE, statistic=p, label=p) for p in DURATION_PERCENTILES],
                width=8,
            ),
            cloudwatch.GraphWidget(
                title="API requests and errors",
                left=[
                    http_api.metric_count(period=ONE_MINUTE, statistic="Sum", label="requests"),
                    http_api.metric_client_error(period=ONE_MINUTE, statistic="Sum", label="4xx"),
                    http_api.metric_server_error(period=ONE_MINUTE, statistic="Sum", label="5xx"),
                ],
                width=8,
            ),
            cloudwatch.GraphWidget(
                title="schedules: DLQ and failed invocations",
                left=[
                    queue_depth(schedules.dead_letter_queue).with_(label="schedule DLQ"),
                    queue_depth(schedules.async_failures).with_(label="failed invocations"),
                ],
                width=8,
            ),
        )
        functions: list[ServiceFunction] = [
            api.handler,
            api.reader,
            *(workers.workers[name] for name in sorted(workers.workers)),
            schedules.enqueue,
            schedules.sweeper,
        ]
        dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Lambda errors",
                left=[
                    f.function.metric_errors(period=ONE_MINUTE, statistic="Sum", label=f.function_name)
                    for f in functions
                ],
                width=8,
            ),
            cloudwatch.GraphWidget(
                title="Lambda throttles",
                left=[
                    f.function.metric_throttles(period=ONE_MINUTE, statistic="Sum", label=f.function_name)
                    for f in functions
                ],
                width=8,
            ),
            cloudwatch.GraphWidget(
                title="Lambda concurrent executions",
                left=[
                    f.function.metric(
                        "ConcurrentExecutions", period=ONE_MINUTE, statistic="Maximum", label=f.function_name
                    )
                    for f in functions
                ],
                width=8,
            ),
        )
        return dashboard

    def dashboard_url(self) -> str:
        region = cdk.Aws.REGION
        return f"https://{region}.console.aws.amazon.com/cloudwatch/home?region={region}#dashboards:name={self.prefix}"
