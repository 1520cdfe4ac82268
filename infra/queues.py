"""One SQS queue and one DLQ per queue class of the registry, both encrypted and TLS-only."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.nag import acknowledge
from offpath.domain.registry import Registry
from offpath.naming import dlq_name, queue_name

SQS_MAX_RETENTION_DAYS = 14
SQS_MAX_VISIBILITY_S = 12 * 60 * 60
# AWS guidance for a queue feeding a Lambda function.
VISIBILITY_TO_TIMEOUT_RATIO = 6


class QueueConfigError(ValueError):
    """The registry asks for a queue that would break a delivery guarantee; raised at synth."""


def secure_queue(
    scope: Construct,
    construct_id: str,
    *,
    name: str,
    retention: cdk.Duration,
    visibility_timeout: cdk.Duration | None = None,
    dead_letter_queue: sqs.DeadLetterQueue | None = None,
    dead_letter_for: str | None = None,
) -> sqs.Queue:
    """Every queue of the stack: SSE (SQS-managed keys) and a policy denying requests without TLS.

    `dead_letter_for` says what a dead-letter queue collects: such a queue is the end of the line and has
    no redrive policy of its own.
    """
    queue = sqs.Queue(
        scope,
        construct_id,
        queue_name=name,
        encryption=sqs.QueueEncryption.SQS_MANAGED,
        enforce_ssl=True,
        retention_period=retention,
        visibility_timeout=visibility_timeout,
        dead_letter_queue=dead_letter_queue,
    )
    if dead_letter_for is not None:
        reason = f"A dead-letter queue ({dead_letter_for}): the end of the line, watched by an alarm."
        acknowledge(queue, "Serverless-SQSRedrivePolicy", reason)
    return queue


def check_queue_class(registry: Registry, queue: str) -> None:
    """The guarantees the stack relies on, checked against the registry before any queue is made."""
    settings = registry.queues[queue]
    attempts = {job_type.name: job_type.max_attempts for job_type in registry.job_types_on(queue)}
    receive_count = registry.max_receive_count(queue)
    if attempts and receive_count <= max(attempts.values()):
        worst = max(attempts, key=lambda name: attempts[name])
        raise QueueConfigError(
            f"queue class {queue!r}: maxReceiveCount {receive_count} must be above every job type's max_attempts, "
            f"but job type {worst!r} has max_attempts={attempts[worst]}; SQS would move its messages to the DLQ "
            f"before the worker has recorded the last attempt"
        )
    worker_timeout = registry.worker_timeout_s(queue)
    visibility = registry.visibility_timeout_s(queue)
    if visibility < VISIBILITY_TO_TIMEOUT_RATIO * worker_timeout:
        raise QueueConfigError(
            f"queue class {queue!r}: visibility timeout {visibility}s is under {VISIBILITY_TO_TIMEOUT_RATIO} x "
            f"the worker timeout ({worker_timeout}s)"
        )
    if visibility > SQS_MAX_VISIBILITY_S:
        raise QueueConfigError(f"queue class {queue!r}: visibility timeout {visibility}s is over SQS's 12 hours")
    if not settings.retention_days < settings.dlq_retention_days <= SQS_MAX_RETENTION_DAYS:
        raise QueueConfigError(
            f"queue class {queue!r}: DLQ retention ({settings.dlq_retention_days} days) must be longer than the "
            f"queue's ({settings.retention_days} days) and at most {SQS_MAX_RETENTION_DAYS} days"
        )


class JobQueues(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, registry: Registry, prefix: str) -> None:
        super().__init__(scope, construct_id)
        self.queues: dict[str, sqs.Queue] = {}
        self.dlqs: dict[str, sqs.Queue] = {}
        for name, settings in sorted(registry.queues.items()):
            check_queue_class(registry, name)
            dlq = secure_queue(
                self,
                f"{name}-dlq",
                name=dlq_name(prefix, name),
                retention=cdk.Duration.days(settings.dlq_retention_days),
                dead_letter_for=f"jobs of queue class {name} that failed for good; redriven by the api",
            )
            self.queues[name] = secure_queue(
                self,
                name,
                name=queue_name(prefix, name),
                retention=cdk.Duration.days(settings.retention_days),
                visibility_timeout=cdk.Duration.seconds(registry.visibility_timeout_s(name)),
                dead_letter_queue=sqs.DeadLetterQueue(queue=dlq, max_receive_count=registry.max_receive_count(name)),
            )
            self.dlqs[name] = dlq

    def urls(self) -> str:
        """OFFPATH_QUEUE_URLS: a JSON object, queue class -> URL."""
        return cdk.Stack.of(self).to_json_string({name: queue.queue_url for name, queue in self.queues.items()})

    def dlq_urls(self) -> str:
        """OFFPATH_DLQ_URLS: a JSON object, queue class -> DLQ URL."""
        return cdk.Stack.of(self).to_json_string({name: queue.queue_url for name, queue in self.dlqs.items()})

    def all_arns(self) -> list[str]:
        return [queue.queue_arn for queue in self.queues.values()] + [dlq.queue_arn for dlq in self.dlqs.values()]
