"""One worker function per queue class, so `critical` never waits behind `bulk`: each has its own event source
mapping with the batch size, batching window and maximum concurrency of its queue class. The batch size and the
function's timeout come from the registry together: a full batch of the slowest job type fits the timeout."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_lambda_event_sources as event_sources
from constructs import Construct

from infra.lambda_function import FunctionKit, ServiceFunction
from infra.nag import acknowledge
from infra.queues import JobQueues
from infra.table import JobTable
from offpath.domain.registry import Registry
from offpath.naming import FUNCTION_MEMORY_MB, worker_function_name

WORKER_HANDLER = "offpath.handlers.worker.handler"
WORKER_MEMORY_MB = FUNCTION_MEMORY_MB["worker"]
ESM_DESTINATION_REASON = (
    "Lambda supports no on-failure destination for SQS event sources; failed messages go to the queue's DLQ "
    "through its redrive policy (maxReceiveCount above every job type's max_attempts)."
)


class Workers(Construct):
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
        self.workers: dict[str, ServiceFunction] = {}
        # Each queue class's event source mapping (a pause disables it: JobApi.allow_pausing).
        self.sources: dict[str, event_sources.SqsEventSource] = {}
        for name, settings in sorted(registry.queues.items()):
            worker = ServiceFunction(
                self,
                name,
                kit=kit,
                name=worker_function_name(kit.options.prefix, name),
                handler=WORKER_HANDLER,
                description=f"offpath: runs the jobs of queue class {name}",
                timeout=cdk.Duration.seconds(registry.worker_timeout_s(name)),
                memory_mb=WORKER_MEMORY_MB,
                environment={"OFFPATH_QUEUE_CLASS": name},
            )
            # GetItem: a job's `ctx.parent`, a job of a type with a keyed or concurrency limit read before its claim
            # (logic/limits.py), a superseded job's debounce record (logic/debounce.py name_survivor), the pause flags
            # (one cached read of the pause item, offpath.logic.pause.PauseFlags), a finished batch member's batch;
            # BatchGetItem: the tenant's open-jobs count, asked by what a job submits (`ctx.submit`, a chain's next
            # job) when quotas are configured, and a job's ctx.batch paging through its batch's jobs (with Query on
            # the table). A batch member's count is a transaction of updates: UpdateItem.
            table.grant(worker, ["UpdateItem", "PutItem", "GetItem", "BatchGetItem"], query_table=True)
            queue = queues.queues[name]
            source = event_sources.SqsEventSource(
                queue,
                batch_size=registry.batch_size(name),
                max_batching_window=(
                    cdk.Duration.seconds(settings.batching_window_s) if settings.batching_window_s else None
                ),
                max_concurrency=settings.max_concurrency,
                report_batch_item_failures=True,
            )
            # Receive, delete and change visibility (the backoff of a retry; the batch held until its lease ends,
            # ChangeMessageVisibilityBatch, which the same action allows) on its own queue.
            worker.target.add_event_source(source)
            # Its DLQ (a failed job's copy) and every job queue: its own (a fresh copy of a message on its last
            # receives) and any other (a job it submits, `ctx.submit`, a chain's next job or a batch's callback, runs
            # on its type's queue).
            job_queues = [queue.queue_arn for _, queue in sorted(queues.queues.items())]
            worker.grant(["sqs:SendMessage"], [queues.dlqs[name].queue_arn, *job_queues])
            acknowledge(worker, "Serverless-LambdaEventSourceMappingDestination", ESM_DESTINATION_REASON)
            self.workers[name] = worker
            self.sources[name] = source
