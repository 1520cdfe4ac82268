"""The notifier: a batch of the job table's stream records → job events (offpath.domain.events) → sinks.

Records are taken in stream order. The whole batch's events go to each sink at once; when a sink fails, the
records are published one at a time again until the first that fails: its sequence number is reported (the
event source mapping retries from it; the records before it are done). An event published twice is the same
event (its id is stable), which a receiver recognises.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from offpath.domain.batch import Batch, batch_summary
from offpath.domain.clock import Clock
from offpath.domain.events import EventSink, EventType, JobEvent, batch_events, counted_in_batch, events_of_change
from offpath.domain.job import Job, JobStatus
from offpath.domain.ports import Metrics
from offpath.domain.webhooks import Delivery, DeliveryQueue, EndpointCache, WebhookStore, inlined

logger = logging.getLogger("offpath.notifier")

ItemReader = Callable[[Mapping[str, Any]], Job]
# A batch read by its tenant and id (None: gone), for the batch events after a member's count.
BatchReader = Callable[[str, str], "Batch | None"]
# The job as a delivery shows it (the API's job view); `with_payload` when the endpoint asks for it.
JobRenderer = Callable[[Job, bool], dict[str, Any]]


@dataclass(frozen=True)
class StreamRecord:
    """What the notifier needs of one DynamoDB Streams record."""

    sequence_number: str
    old_image: Mapping[str, Any] | None
    new_image: Mapping[str, Any] | None

    @classmethod
    def of(cls, record: Mapping[str, Any]) -> StreamRecord:
        change = record.get("dynamodb") or {}
        return cls(str(change.get("SequenceNumber", "")), change.get("OldImage"), change.get("NewImage"))


@dataclass(frozen=True)
class Change:
    """One record read once: the job before and after (None for an image absent or unreadable) and the events
    that change is."""

    sequence_number: str
    old: Job | None
    new: Job | None
    events: tuple[JobEvent, ...] = ()


def change_of(record: StreamRecord, read_item: ItemReader, read_batch: BatchReader | None = None) -> Change:
    """The record's job images, each deserialised once for both its events and its metrics. An image the
    store cannot read leaves the change empty (logged by its sequence number): one bad record never blocks the
    stream."""
    try:
        old = read_item(record.old_image) if record.old_image else None
        new = read_item(record.new_image) if record.new_image else None
    except Exception:
        logger.error("a stream record's job image could not be read; left out", extra={"seq": record.sequence_number})
        return Change(record.sequence_number, None, None)
    events = events_of_change(old, new)
    if read_batch is not None and new is not None and new.batch_id is not None and counted_in_batch(old, new):
        # A member was counted: the batch's events, if it is complete now (one consistent read, per member).
        batch = read_batch(new.tenant, new.batch_id)
        if batch is not None:
            events += batch_events(new, batch)
    return Change(record.sequence_number, old, new, tuple(events))


def events_of_record(record: StreamRecord, read_item: ItemReader) -> list[JobEvent]:
    return list(change_of(record, read_item).events)


def notify(changes: Sequence[Change], sinks: Sequence[EventSink]) -> str | None:
    """Publishes the changes' events to every sink; returns the sequence number of the first change whose
    events could not be published (None: all were)."""
    # A batch's event, read complete after several of its members' counts in one batch of records, goes out once.
    seen: set[str] = set()
    per_change = []
    for change in changes:
        kept = [e for e in change.events if e.batch is None or e.id not in seen]
        seen.update(e.id for e in kept if e.batch is not None)
        per_change.append(kept)
    everything = [event for events in per_change for event in events]
    if not everything:
        return None
    try:
        for sink in sinks:
            sink.publish(everything)
        return None
    except Exception:
        logger.warning("publishing the batch failed; publishing record by record", exc_info=True)
    for change, events in zip(changes, per_change, strict=True):
        if not events:
            continue
        try:
            for sink in sinks:
                sink.publish(events)
        except Exception:
            logger.exception("a record's events could not be published", extra={"seq": change.sequence_number})
            return change.sequence_number
    return None


# The lifecycle metrics, published here from the stream (one EMF document per batch and queue) rather than by
# the api and the worker for each job: a job's entry into each state, and the timings its images carry.
EVENT_COUNTS: dict[EventType, str] = {
    EventType.STARTED: "JobsStarted",
    EventType.SUCCEEDED: "JobsSucceeded",
    EventType.RETRYING: "JobsRetried",
    EventType.FAILED: "JobsFailed",
    EventType.DEAD_LETTERED: "JobsDeadLettered",
    EventType.EXPIRED: "JobsExpired",
}
_FINISHED_ATTEMPT = (JobStatus.SUCCEEDED, JobStatus.RETRYING, JobStatus.FAILED)


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 3)


def record_metrics(change: Change, metrics: Metrics) -> None:
    """The lifecycle metrics one change of a job item is, counted from its events (domain.events decides which
    change is which): JobsSubmitted for a new job; JobsStarted (with QueueDelay, creation to the first
    attempt's start), JobsSucceeded, JobsRetried, JobsFailed, JobsDeadLettered, JobsExpired; JobDuration when a running
    attempt ends (its start to the write that ended it)."""
    old, new = change.old, change.new
    if new is None:
        return
    queue, job_type = new.queue, new.type
    if old is None:
        metrics.count("JobsSubmitted", queue=queue, job_type=job_type)
    kinds = {event.type for event in change.events}
    for kind in kinds:
        if kind in EVENT_COUNTS:
            metrics.count(EVENT_COUNTS[kind], queue=queue, job_type=job_type)
    began = new.attempt_started_at or new.started_at
    if EventType.STARTED in kinds and new.attempt == 1 and began is not None:
        waited = _ms((began - new.created_at).total_seconds())
        metrics.milliseconds("QueueDelay", waited, queue=queue, job_type=job_type)
    if old is not None and old.status is JobStatus.RUNNING and new.status in _FINISHED_ATTEMPT:
        ran_from = old.attempt_started_at or old.started_at
        if ran_from is not None:
            ended = new.finished_at or new.updated_at
            ms = _ms((ended - ran_from).total_seconds())
            metrics.milliseconds("JobDuration", ms, queue=queue, job_type=job_type)


def publish_metrics(changes: Sequence[Change], metrics: Metrics, failed: str | None = None) -> None:
    """The lifecycle metrics of the changes before `failed` (those done: the mapping retries from `failed`, so
    a record is counted once), written as one EMF document per queue and job type."""
    for change in changes:
        if failed is not None and change.sequence_number == failed:
            break
        record_metrics(change, metrics)
    metrics.flush()


class WebhookFanout:
    """An event sink: one delivery per event and per endpoint of its tenant that wants it, on the delivery
    queue. A tenant's endpoints are read once per tenant and kept briefly (EndpointCache). A delivery carries
    the job view whole up to INLINE_LIMIT_BYTES (domain/webhooks.py), else without its payload and result."""

    def __init__(
        self,
        store: WebhookStore,
        queue: DeliveryQueue,
        clock: Clock,
        render: JobRenderer,
        cache: EndpointCache | None = None,
    ) -> None:
        self.store = store
        self.queue = queue
        self.clock = clock
        self.render = render
        self.cache = cache or EndpointCache()

    def publish(self, events: Sequence[JobEvent]) -> None:
        deliveries = self.deliveries(events)
        if deliveries:
            self.queue.send(deliveries)

    def _data(self, event: JobEvent, include_payload: bool) -> dict[str, Any]:
        view = self.render(event.job, include_payload)
        if event.batch is None:
            return view
        # A batch event: the batch, and (as `job`) the member whose count completed it.
        return {"batch": batch_summary(event.batch), "job": view}

    def deliveries(self, events: Sequence[JobEvent]) -> list[Delivery]:
        now = self.clock.now()
        out: list[Delivery] = []
        for event in events:
            for endpoint in self.cache.get(event.tenant, now, self.store.endpoints):
                if endpoint.wants(event):
                    out.append(
                        Delivery(
                            tenant=event.tenant,
                            endpoint=endpoint.name,
                            event_id=event.id,
                            type=event.type.value,
                            timestamp=event.time,
                            data=inlined(self._data(event, endpoint.include_payload)),
                        )
                    )
        return out
