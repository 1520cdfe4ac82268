"""The SQS worker: one function per queue class, with partial batch responses."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from offpath import collector
from offpath.adapters.sqs_queue import REASON_ATTRIBUTE
from offpath.handlers.composition import Overrides, build_worker_ports, worker_policy
from offpath.logic.process import Delivery, WorkerPolicy, WorkerPorts, process_batch
from offpath.observability import TRACEPARENT_ATTRIBUTE, bind_invocation, configure_logging
from offpath.settings import Settings

# Used when the invocation has no Lambda context (a direct call in tests); the worker never counts on more
# than its function's timeout from the registry (logic/process.py).
UNBOUNDED_MS = 15 * 60 * 1000


@dataclass
class WorkerServices:
    ports: WorkerPorts
    policy: WorkerPolicy


@functools.lru_cache(maxsize=1)
@collector.during_init
def default_services() -> WorkerServices:
    settings = Settings.from_env()
    configure_logging("worker", settings.log_level)
    return build_services(settings)


def build_services(settings: Settings, overrides: Overrides | None = None) -> WorkerServices:
    """The worker's services for `settings.queue_class` (the local runtime builds one set per environment)."""
    return WorkerServices(ports=build_worker_ports(settings, overrides), policy=worker_policy(settings))


def sent_at(record: dict[str, Any]) -> datetime | None:
    """SQS's SentTimestamp of a record (epoch milliseconds), if it carries a readable one."""
    try:
        return datetime.fromtimestamp(int(record["attributes"]["SentTimestamp"]) / 1000, UTC)
    except (KeyError, TypeError, ValueError, OverflowError, OSError):
        return None


def _string_attribute(record: dict[str, Any], name: str) -> str | None:
    """A String message attribute of an SQS record as Lambda hands it (`stringValue`), if it has one."""
    value = ((record.get("messageAttributes") or {}).get(name) or {}).get("stringValue")
    return value if isinstance(value, str) else None


def handler(event: dict[str, Any], context: Any, services: WorkerServices | None = None) -> dict[str, Any]:
    services = services or default_services()
    bind_invocation(context)
    deliveries = [
        Delivery(
            message_id=record["messageId"],
            receipt_handle=record["receiptHandle"],
            body=record["body"],
            receive_count=int(record.get("attributes", {}).get("ApproximateReceiveCount", "1")),
            redriven=REASON_ATTRIBUTE in (record.get("messageAttributes") or {}),
            sent_at=sent_at(record),
            traceparent=_string_attribute(record, TRACEPARENT_ATTRIBUTE),
        )
        for record in event.get("Records", [])
    ]
    remaining = getattr(context, "get_remaining_time_in_millis", None) or (lambda: UNBOUNDED_MS)
    try:
        failures = process_batch(deliveries, services.ports, services.policy, remaining)
    finally:
        services.ports.metrics.flush()
    return {"batchItemFailures": [{"itemIdentifier": message_id} for message_id in failures]}


# The init's imports are done: what they made is frozen and the collector runs again (offpath.collector).
collector.settle()
