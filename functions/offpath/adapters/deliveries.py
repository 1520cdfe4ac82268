"""The webhook delivery queue on SQS (and its DLQ), and the job events on an EventBridge bus."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from offpath.adapters.sqs_queue import REASON_ATTRIBUTE, SEND_BATCH_LIMIT, _call
from offpath.adapters.sqs_queue import default_client as default_sqs_client
from offpath.domain.batch import batch_summary
from offpath.domain.clock import iso
from offpath.domain.errors import QueueUnavailableError
from offpath.domain.events import JobEvent
from offpath.domain.webhooks import SQS_BATCH_BYTES, SQS_MESSAGE_BYTES, Delivery, utf8_bytes
from offpath.naming import EVENT_DETAIL_TYPE, EVENT_SOURCE

if TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient

logger = logging.getLogger("offpath.deliveries")

PUT_EVENTS_LIMIT = 10
# A dead letter's reason attribute (its name, type and up to 1,000 characters of UTF-8) counts towards its size.
DEAD_LETTER_ROOM = 4 * 1024
PUT_EVENTS_TRIES = 3


class EventPublishError(Exception):
    """Entries the bus kept refusing (or the bus could not be reached)."""


class SqsDeliveryQueue:
    def __init__(self, queue_url: str, dlq_url: str | None, client: SQSClient | None = None) -> None:
        self.queue_url = queue_url
        self.dlq_url = dlq_url
        self.client = client or default_sqs_client()

    def send(self, deliveries: Sequence[Delivery], delay_s: int = 0) -> None:
        """Every delivery, in batches of at most ten and SQS_BATCH_BYTES. A delivery SQS cannot take (over
        SQS_MESSAGE_BYTES, or refused as the sender's fault) goes to the DLQ alone, with the reason: it never
        holds back the others. Raises QueueUnavailableError when SQS failed on its side (the caller retries)."""
        bodies = [delivery.to_json() for delivery in deliveries]
        sizes = [utf8_bytes(body) for body in bodies]
        for delivery, size in zip(deliveries, sizes, strict=True):
            if size > SQS_MESSAGE_BYTES:
                self.dead_letter(delivery, f"the delivery is {size} bytes, over SQS's {SQS_MESSAGE_BYTES}")
        kept = [i for i, size in enumerate(sizes) if size <= SQS_MESSAGE_BYTES]
        for batch in byte_batches([sizes[i] for i in kept], count=SEND_BATCH_LIMIT, limit=SQS_BATCH_BYTES):
            chosen = [kept[i] for i in batch]
            entries: list[Any] = [
                {"Id": str(n), "MessageBody": bodies[i], "DelaySeconds": delay_s} for n, i in enumerate(chosen)
            ]
            response = _call(self.client.send_message_batch, QueueUrl=self.queue_url, Entries=entries)
            theirs = [f for f in response.get("Failed", []) if not f.get("SenderFault")]
            if theirs:
                raise QueueUnavailableError(f"SQS refused {len(theirs)} deliveries")
            for failed in response.get("Failed", []):
                refused = deliveries[chosen[int(failed["Id"])]]
                self.dead_letter(refused, f"SQS refused the delivery: {failed.get('Code', 'refused')}")

    def dead_letter(self, delivery: Delivery, reason: str) -> None:
        if not self.dlq_url:
            logger.error("no delivery DLQ configured; a failed delivery is dropped", extra={"reason": reason})
            return
        body = delivery.to_json()
        if utf8_bytes(body) > SQS_MESSAGE_BYTES - DEAD_LETTER_ROOM:
            body = replace(delivery, data=reference_of(delivery.data)).to_json()
        _call(
            self.client.send_message,
            QueueUrl=self.dlq_url,
            MessageBody=body,
            MessageAttributes={REASON_ATTRIBUTE: {"DataType": "String", "StringValue": reason[:1000]}},
        )


def reference_of(data: dict[str, Any]) -> dict[str, Any]:
    """What a dead letter too big for the DLQ keeps of its data: the job's id, type and status."""
    kept: dict[str, Any] = {key: data[key] for key in ("job_id", "type", "status") if key in data}
    return {**kept, "omitted": sorted(key for key in data if key not in kept)}


def byte_batches(sizes: Sequence[int], *, count: int, limit: int) -> list[list[int]]:
    """The indexes of `sizes`, in order, cut into batches of at most `count` items whose sizes add up to at
    most `limit` (each size is at most `limit`)."""
    batches: list[list[int]] = []
    current: list[int] = []
    total = 0
    for index, size in enumerate(sizes):
        if current and (len(current) == count or total + size > limit):
            batches.append(current)
            current, total = [], 0
        current.append(index)
        total += size
    if current:
        batches.append(current)
    return batches


def event_detail(event: JobEvent, job_view: dict[str, Any]) -> dict[str, Any]:
    """What an event carries on the bus (and in the embedded runtime's events.jsonl): never the payload."""
    detail = {
        "id": event.id,
        "type": event.type.value,
        "time": iso(event.time),
        "tenant": event.tenant,
        "job": job_view,
    }
    if event.batch is not None:
        # A batch event: the batch, and (as `job`) the member whose count completed it.
        detail["batch"] = batch_summary(event.batch)
    return detail


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
