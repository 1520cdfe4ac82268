"""The webhook delivery queue on SQS (and its DLQ), and the job events on an EventBridge bus."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from offpath.adapters.sqs_queue import REASON_ATTRIBUTE, SEND_BATCH_LIMIT, _call
from offpath.adapters.sqs_queue import default_client as default_sqs_client
from offpath.domain.errors import QueueUnavailableError
from offpath.domain.events import JobEvent
from offpath.domain.webhooks import Delivery, iso_z
from offpath.naming import EVENT_DETAIL_TYPE, EVENT_SOURCE

if TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient

logger = logging.getLogger("offpath.deliveries")

PUT_EVENTS_LIMIT = 10
PUT_EVENTS_TRIES = 3


class EventPublishError(Exception):
    """Entries the bus kept refusing (or the bus could not be reached)."""


class SqsDeliveryQueue:
    def __init__(self, queue_url: str, dlq_url: str | None, client: SQSClient | None = None) -> None:
        self.queue_url = queue_url
        self.dlq_url = dlq_url
        self.client = client or default_sqs_client()

    def send(self, deliveries: Sequence[Delivery], delay_s: int = 0) -> None:
        """Every delivery, in batches of ten; raises QueueUnavailableError when any could not be sent."""
        for start in range(0, len(deliveries), SEND_BATCH_LIMIT):
            chunk = deliveries[start : start + SEND_BATCH_LIMIT]
            entries: list[Any] = [
                {"Id": str(i), "MessageBody": d.to_json(), "DelaySeconds": delay_s} for i, d in enumerate(chunk)
            ]
            response = _call(self.client.send_message_batch, QueueUrl=self.queue_url, Entries=entries)
            if response.get("Failed"):
                raise QueueUnavailableError(f"SQS refused {len(response['Failed'])} deliveries")

    def dead_letter(self, delivery: Delivery, reason: str) -> None:
        if not self.dlq_url:
            logger.error("no delivery DLQ configured; a failed delivery is dropped", extra={"reason": reason})
            return
        _call(
            self.client.send_message,
            QueueUrl=self.dlq_url,
            MessageBody=delivery.to_json(),
            MessageAttributes={REASON_ATTRIBUTE: {"DataType": "String", "StringValue": reason[:1000]}},
        )


def event_detail(event: JobEvent, job_view: dict[str, Any]) -> dict[str, Any]:
    """What an event carries on the bus (and in the embedded runtime's events.jsonl): never the payload."""
    return {
        "id": event.id,
        "type": event.type.value,
        "time": iso_z(event.time),
        "tenant": event.tenant,
        "job": job_view,
    }


class EventBridgeSink:
    """Each job event on the bus: source `offpath`, detail-type `Job State Change`, PutEvents in batches of ten;
    entries the bus refuses are sent again (up to three tries), then the batch is reported failed."""

    def __init__(self, bus_name: str, render: Any, client: Any = None) -> None:
        self.bus_name = bus_name
        self.render = render
        if client is None:
            import boto3

            client = boto3.client("events")
        self.client = client

    def entries(self, events: Sequence[JobEvent]) -> list[dict[str, Any]]:
        return [
            {
                "Source": EVENT_SOURCE,
                "DetailType": EVENT_DETAIL_TYPE,
                "Detail": json.dumps(event_detail(event, self.render(event.job, False)), separators=(",", ":")),
                "EventBusName": self.bus_name,
                "Resources": [],
                "Time": event.time,
            }
            for event in events
        ]

    def publish(self, events: Sequence[JobEvent]) -> None:
        entries = self.entries(events)
        for start in range(0, len(entries), PUT_EVENTS_LIMIT):
            self._put(entries[start : start + PUT_EVENTS_LIMIT])

    def _put(self, entries: list[dict[str, Any]]) -> None:
        pending = entries
        for _ in range(PUT_EVENTS_TRIES):
            try:
                response = self.client.put_events(Entries=pending)
            except Exception as error:  # botocore's errors: the bus is unreachable or refused the call
                raise EventPublishError(f"PutEvents failed: {type(error).__name__}") from error
            if not response.get("FailedEntryCount"):
                return
            results = response.get("Entries", [])
            pending = [entry for entry, result in zip(pending, results, strict=False) if result.get("ErrorCode")]
            if not pending:
                return
        raise EventPublishError(f"PutEvents refused {len(pending)} entries {PUT_EVENTS_TRIES} times")
