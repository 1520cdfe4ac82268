"""The SQS worker: one function per queue class, with partial batch responses."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from offpath.adapters.dynamodb_store import DynamoDbJobStore
from offpath.adapters.sqs_queue import REASON_ATTRIBUTE, SqsJobQueue
from offpath.domain.clock import SystemClock
from offpath.jobs import load_job_types
from offpath.logic.process import Delivery, WorkerPolicy, WorkerPorts, process_batch
from offpath.observability import EmfMetrics, configure_logging
from offpath.settings import Settings

# Used when the invocation has no Lambda context (a direct call in tests).
UNBOUNDED_MS = 15 * 60 * 1000


@dataclass
class WorkerServices:
    ports: WorkerPorts
    policy: WorkerPolicy


@functools.lru_cache(maxsize=1)
def default_services() -> WorkerServices:
    settings = Settings.from_env()
    configure_logging("worker", settings.log_level)
    return build_services(settings)


def build_services(settings: Settings) -> WorkerServices:
    """The worker's ports for `settings.queue_class` (the local runtime builds one per queue class)."""
    if settings.queue_class is None:
        raise RuntimeError("OFFPATH_QUEUE_CLASS is not set")
    return WorkerServices(
        ports=WorkerPorts(
            registry=load_job_types(demo=settings.demo_jobs),
            store=DynamoDbJobStore(settings.table_name),
            queue=SqsJobQueue(settings.queue_urls, settings.dlq_urls),
            clock=SystemClock(),
            metrics=EmfMetrics(f"worker-{settings.queue_class}"),
        ),
        policy=WorkerPolicy(queue=settings.queue_class, retention=settings.retention, sweep_grace=settings.sweep_grace),
    )


def handler(event: dict[str, Any], context: Any, services: WorkerServices | None = None) -> dict[str, Any]:
    services = services or default_services()
    deliveries = [
        Delivery(
            message_id=record["messageId"],
            receipt_handle=record["receiptHandle"],
            body=record["body"],
            receive_count=int(record.get("attributes", {}).get("ApproximateReceiveCount", "1")),
            redriven=REASON_ATTRIBUTE in (record.get("messageAttributes") or {}),
        )
        for record in event.get("Records", [])
    ]
    remaining = getattr(context, "get_remaining_time_in_millis", None) or (lambda: UNBOUNDED_MS)
    try:
        failures = process_batch(deliveries, services.ports, services.policy, remaining)
    finally:
        services.ports.metrics.flush()
    return {"batchItemFailures": [{"itemIdentifier": message_id} for message_id in failures]}
