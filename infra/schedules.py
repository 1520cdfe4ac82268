"""EventBridge Scheduler: the schedule group, one schedule per declared schedule, the sweeper's schedule, the
enqueue and sweeper functions they invoke, and the role the api passes to the Scheduler for one-time schedules.

The Scheduler invokes Lambda asynchronously: its retry policy and DLQ cover the invoke call only; a failure
inside a function is retried by Lambda and then lands in the async on-failure queue (both queues alarm).
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_scheduler as scheduler
from aws_cdk import aws_scheduler_targets as targets
from constructs import Construct

from infra.lambda_function import LIVE_ALIAS, FunctionKit, QueueDestination, ServiceFunction
from infra.nag import acknowledge
from infra.queues import JobQueues, secure_queue
from infra.table import SWEEP_INDEX, JobTable
from offpath.domain.registry import Registry
from offpath.naming import (
    FUNCTION_MEMORY_MB,
    SWEEP_EXPRESSION,
    SWEEP_INPUT,
    enqueue_function_name,
    recurring_input,
    schedule_group_name,
    sweeper_function_name,
)

ENQUEUE_HANDLER = "offpath.handlers.enqueue.handler"
SWEEPER_HANDLER = "offpath.handlers.sweeper.handler"
# Scheduler's retries of the invoke call for a declared schedule's slot; the enqueue function is idempotent
# per slot (scheduled_time), so a retry never makes a second job.
RECURRING_RETRY_ATTEMPTS = 10
RECURRING_MAX_EVENT_AGE = cdk.Duration.hours(1)
# Lambda's own retries of an asynchronous invocation that failed inside the function.
ENQUEUE_ASYNC_RETRIES = 2
ENQUEUE_MAX_EVENT_AGE = cdk.Duration.hours(1)
ENQUEUE_TIMEOUT = cdk.Duration.seconds(30)
# The sweeper runs every minute: a sweep that fails is replaced by the next one, never retried.
SWEEPER_TIMEOUT = cdk.Duration.seconds(50)
SWEEPER_MAX_EVENT_AGE = cdk.Duration.minutes(1)
FAILURE_RETENTION = cdk.Duration.days(14)
SCHEDULER_DLQ_REASON = (
    "This queue is the dead-letter queue of every schedule's target (set in the schedules' DeadLetterConfig, "
    "which cdk-nag does not follow)."
)
ON_FAILURE_REASON = (
    "This queue is the on-failure destination of the enqueue and sweeper functions' asynchronous invocations "
    "(a DLQ by another name, which cdk-nag does not follow)."
)


class Schedules(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        registry: Registry,
        kit: FunctionKit,
        table: JobTable,
        queues: JobQueues,
    ) -> None:
        super().__init__(scope, construct_id)
        stack = cdk.Stack.of(self)
        prefix = kit.options.prefix
        self.group_name = schedule_group_name(prefix)
        self.group = scheduler.ScheduleGroup(
            self, "Group", schedule_group_name=self.group_name, removal_policy=cdk.RemovalPolicy.DESTROY
        )
        # Every schedule's invoke call that the Scheduler gave up on (recurring, one-time and the sweeper's).
        self.dead_letter_queue = secure_queue(
            self,
            "ScheduleDlq",
            name=f"{prefix}-schedule-dlq",
            retention=FAILURE_RETENTION,
            dead_letter_for="schedule invocations EventBridge Scheduler gave up on",
        )
        acknowledge(self.dead_letter_queue, "AwsSolutions-SQS3", SCHEDULER_DLQ_REASON)
        # Invocations that failed inside the enqueue or sweeper function after Lambda's own retries.
        self.async_failures = secure_queue(
            self,
            "AsyncFailures",
            name=f"{prefix}-async-failures",
            retention=FAILURE_RETENTION,
            dead_letter_for="asynchronous invocations that failed after Lambda's retries",
        )
        acknowledge(self.async_failures, "AwsSolutions-SQS3", ON_FAILURE_REASON)
        on_failure = QueueDestination(self.async_failures)

        self.enqueue_function_name = enqueue_function_name(prefix)
        # Built from the name rather than referenced, so the functions that carry it in their environment
        # (the enqueue function among them) do not depend on it.
        self.enqueue_function_arn = stack.format_arn(
            service="lambda",
            resource="function",
            # With SnapStart the one-time schedules invoke the alias (a published version with its snapshot).
            resource_name=f"{self.enqueue_function_name}:{LIVE_ALIAS}"
            if kit.options.snapstart
            else self.enqueue_function_name,
            arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME,
        )
        self.schedule_arns = stack.format_arn(
            service="scheduler", resource="schedule", resource_name=f"{self.group_name}/*"
        )
        self.scheduler_role = self._scheduler_role("SchedulerRole", "invokes the enqueue function")
        self.environment = {
            "OFFPATH_SCHEDULE_GROUP": self.group_name,
            "OFFPATH_SCHEDULER_ROLE_ARN": self.scheduler_role.role_arn,
            "OFFPATH_ENQUEUE_FUNCTION_ARN": self.enqueue_function_arn,
            "OFFPATH_SCHEDULE_DLQ_ARN": self.dead_letter_queue.queue_arn,
        }

        self.enqueue = ServiceFunction(
            self,
            "Enqueue",
            kit=kit,
            name=self.enqueue_function_name,
            handler=ENQUEUE_HANDLER,
            description="offpath: turns a schedule's firing or a delayed job coming due into a queued job",
            timeout=ENQUEUE_TIMEOUT,
            memory_mb=FUNCTION_MEMORY_MB["enqueue"],
            environment={},
            async_retry_attempts=ENQUEUE_ASYNC_RETRIES,
            async_max_event_age=ENQUEUE_MAX_EVENT_AGE,
            on_failure=on_failure,
        )
        table.grant(self.enqueue, ["PutItem", "GetItem", "UpdateItem"])
        self.enqueue.grant(["sqs:SendMessage"], [queue.queue_arn for queue in queues.queues.values()])
        self._grant_invoke(self.scheduler_role, self.enqueue.target)

        self.sweeper = ServiceFunction(
            self,
            "Sweeper",
            kit=kit,
            name=sweeper_function_name(prefix),
            handler=SWEEPER_HANDLER,
            description="offpath: re-sends unsent jobs, settles expired leases, enqueues overdue delayed jobs",
            timeout=SWEEPER_TIMEOUT,
            memory_mb=FUNCTION_MEMORY_MB["sweeper"],
            environment={},
            async_retry_attempts=0,
            async_max_event_age=SWEEPER_MAX_EVENT_AGE,
            on_failure=on_failure,
        )
        # The sweep index holds keys only: the due jobs are then read with BatchGetItem. PutItem: a final job's
        # follow-up its worker did not run (a chain's next job, logic/followups.py). It also continues bulk
        # operations (logic/bulk.py): the open operations' item and each operation (GetItem, PutItem), the tenant's
        # listing (Query on the table) and, for a retried job, its dead letter's removal (receive, delete it,
        # release the others: ChangeMessageVisibilityBatch is authorised by sqs:ChangeMessageVisibility).
        table.grant(
            self.sweeper,
            ["UpdateItem", "BatchGetItem", "GetItem", "PutItem"],
            query_indexes=(SWEEP_INDEX,),
            query_table=True,
        )
        self.sweeper.grant(["sqs:SendMessage"], queues.all_arns())
        self.sweeper.grant(
            ["sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:ChangeMessageVisibility"],
            [dlq.queue_arn for _, dlq in sorted(queues.dlqs.items())],
        )
        # How many messages a queue holds, before re-sending its overdue jobs (a backlog is not a lost message).
        self.sweeper.grant(["sqs:GetQueueAttributes"], [queue.queue_arn for _, queue in sorted(queues.queues.items())])
        self.sweeper_role = self._scheduler_role("SweeperScheduleRole", "invokes the sweeper function")
        self._grant_invoke(self.sweeper_role, self.sweeper.target)

        self.schedules: dict[str, scheduler.Schedule] = {}
        for name, declared in sorted(registry.schedules.items()):
            self.schedules[name] = scheduler.Schedule(
                self,
                f"Schedule-{name}",
                schedule_name=name,
                schedule_group=self.group,
                description=f"offpath: {declared.job} ({declared.expression} {declared.timezone})",
                schedule=scheduler.ScheduleExpression.expression(
                    declared.expression, cdk.TimeZone.of(declared.timezone)
                ),
                time_window=(
                    scheduler.TimeWindow.flexible(cdk.Duration.minutes(declared.flexible_window_min))
                    if declared.flexible_window_min
                    else scheduler.TimeWindow.off()
                ),
                enabled=declared.enabled,
                target=targets.LambdaInvoke(
                    self.enqueue.target,
                    # The role's grants are exactly those added here; the target must not widen them.
                    role=self.scheduler_role.without_policy_updates(),
                    input=scheduler.ScheduleTargetInput.from_object(recurring_input(declared.name)),
                    dead_letter_queue=self.dead_letter_queue,
                    retry_attempts=RECURRING_RETRY_ATTEMPTS,
                    max_event_age=RECURRING_MAX_EVENT_AGE,
                ),
            )
        self.sweep_schedule = scheduler.Schedule(
            self,
            "SweepSchedule",
            schedule_name=sweeper_function_name(prefix),
            schedule_group=self.group,
            description="offpath: the sweeper, every minute",
            schedule=scheduler.ScheduleExpression.expression(SWEEP_EXPRESSION),
            time_window=scheduler.TimeWindow.off(),
            target=targets.LambdaInvoke(
                self.sweeper.target,
                role=self.sweeper_role.without_policy_updates(),
                input=scheduler.ScheduleTargetInput.from_object(SWEEP_INPUT),
                dead_letter_queue=self.dead_letter_queue,
                retry_attempts=0,
                max_event_age=cdk.Duration.minutes(1),
            ),
        )

    def grant_one_time_schedules(self, function: ServiceFunction, actions: list[str]) -> None:
        """Scheduler actions on the group's schedules, and passing the Scheduler role to the Scheduler."""
        function.grant(actions, [self.schedule_arns])
        function.role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["iam:PassRole"],
                resources=[self.scheduler_role.role_arn],
                conditions={"StringEquals": {"iam:PassedToService": "scheduler.amazonaws.com"}},
            )
        )

    def _scheduler_role(self, construct_id: str, purpose: str) -> iam.Role:
        stack = cdk.Stack.of(self)
        role = iam.Role(
            self,
            construct_id,
            description=f"EventBridge Scheduler {purpose} of {self.group_name}",
            assumed_by=iam.ServicePrincipal(
                "scheduler.amazonaws.com",
                conditions={
                    "StringEquals": {
                        "aws:SourceAccount": stack.account,
                        "aws:SourceArn": self.group.schedule_group_arn,
                    }
                },
            ),
        )
        role.add_to_policy(
            iam.PolicyStatement(actions=["sqs:SendMessage"], resources=[self.dead_letter_queue.queue_arn])
        )
        return role

    @staticmethod
    def _grant_invoke(role: iam.Role, function: lambda_.IFunction) -> None:
        """The unqualified function only (Function.grant_invoke would add every version and alias too)."""
        role.add_to_policy(iam.PolicyStatement(actions=["lambda:InvokeFunction"], resources=[function.function_arn]))
