"""Job events: every state change of a job, derived from the change itself (the job before and after).

The job table's change stream is their source (DynamoDB Streams with old and new images on AWS; the
embedded runtime replays the same records locally): the worker's hot path writes nothing more for them.
`events_of_change` is the one place that says which change is which event; the notifier, webhook
deliveries, EventBridge and the realtime feeds all take its output.

An event's id is stable for that change: a record read twice (a stream retry, a replayed batch) yields
the same id, so a receiver recognises duplicates by it (Standard Webhooks' `webhook-id`).
"""

from __future__ import annotations

import enum
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from offpath.domain.batch import Batch
from offpath.domain.job import Job, JobStatus


class EventType(enum.StrEnum):
    QUEUED = "job.queued"
    SCHEDULED = "job.scheduled"
    STARTED = "job.started"
    RETRYING = "job.retrying"
    PROGRESS = "job.progress"
    SUCCEEDED = "job.succeeded"
    FAILED = "job.failed"
    # With job.failed: every failed job's message is parked in its queue's dead-letter queue.
    DEAD_LETTERED = "job.dead_lettered"
    CANCELLED = "job.cancelled"
    # A batch's every job is final (sealed); every job SUCCEEDED. Once each per batch (their ids derive from the
    # batch), like the batch's on_complete and on_success callbacks.
    BATCH_COMPLETED = "batch.completed"
    BATCH_SUCCEEDED = "batch.succeeded"
    # Not started by its expires_at: ended without running.
    EXPIRED = "job.expired"


# The event a job's arrival in a state is.
ENTERED: dict[JobStatus, EventType] = {
    JobStatus.QUEUED: EventType.QUEUED,
    JobStatus.SCHEDULED: EventType.SCHEDULED,
    JobStatus.RUNNING: EventType.STARTED,
    JobStatus.RETRYING: EventType.RETRYING,
    JobStatus.SUCCEEDED: EventType.SUCCEEDED,
    JobStatus.FAILED: EventType.FAILED,
    JobStatus.CANCELLED: EventType.CANCELLED,
    JobStatus.EXPIRED: EventType.EXPIRED,
}
# Events that also follow from entering a state.
ALSO: dict[JobStatus, tuple[EventType, ...]] = {JobStatus.FAILED: (EventType.DEAD_LETTERED,)}
# What a subscriber may ask for (webhooks' `events`): every type but the progress feed, which is for
# realtime subscribers (a webhook may still ask for it by name).
FINAL_EVENTS = frozenset({EventType.SUCCEEDED, EventType.FAILED, EventType.CANCELLED, EventType.EXPIRED})


@dataclass(frozen=True)
class JobEvent:
    id: str
    type: EventType
    time: datetime
    tenant: str
    job: Job
    # A batch event: the batch as read when the member `job` was counted (`job` is the member whose count the
    # notifier saw complete it).
    batch: Batch | None = None


def counted_in_batch(old: Job | None, new: Job | None) -> bool:
    """Whether the change is a batch member's count (its `batch_counted` mark set): after it, the batch may be
    complete."""
    return (
        new is not None
        and new.batch_id is not None
        and new.batch_counted is not None
        and (old is None or old.batch_counted is None)
    )


def batch_events(member: Job, batch: Batch) -> list[JobEvent]:
    """The batch's events its state is, as read after a member's count: batch.completed once it is complete,
    batch.succeeded once every job SUCCEEDED. Their ids derive from the batch alone, so a batch read complete
    after several counts (records handled late) is one event, and a receiver drops the copies."""
    kinds = [
        kind
        for kind, due in ((EventType.BATCH_COMPLETED, batch.complete), (EventType.BATCH_SUCCEEDED, batch.succeeded))
        if due
    ]
    return [
        JobEvent(
            id=f"evt_{hashlib.sha256(f'batch|{batch.batch_id}|{kind}'.encode()).hexdigest()[:32]}",
            type=kind,
            time=batch.updated_at,
            tenant=batch.tenant,
            job=member,
            batch=batch,
        )
        for kind in kinds
    ]


def events_of_change(old: Job | None, new: Job | None) -> list[JobEvent]:
    """The events one change of a job item is: none for a deletion (TTL expiry) or a write that changed
    neither the status nor the attempt nor the progress (a sweep time moved, a lease renewed)."""
    if new is None:
        return []
    entered = old is None or old.status is not new.status
    if entered or (new.status is JobStatus.RUNNING and old is not None and old.attempt != new.attempt):
        types = (ENTERED[new.status], *ALSO.get(new.status, ()))
        return [_event(kind, new) for kind in types]
    assert old is not None
    # Progress is coalesced to at most one event a second per job, without state: a progress write is an event
    # only when it is the first in its wall-clock second (the write before it was made in an earlier second).
    progressed = new.status is JobStatus.RUNNING and new.progress is not None and new.progress != old.progress
    if progressed and (old.progress is None or _second(new.updated_at) > _second(old.updated_at)):
        return [_event(EventType.PROGRESS, new)]
    return []


def _second(moment: datetime) -> int:
    return int(moment.timestamp())


def _event(kind: EventType, job: Job) -> JobEvent:
    change = f"{job.job_id}|{kind}|{job.attempt}|{job.redrives}|{job.retries}|{job.updated_at.isoformat()}"
    digest = hashlib.sha256(change.encode()).hexdigest()[:32]
    return JobEvent(id=f"evt_{digest}", type=kind, time=job.updated_at, tenant=job.tenant, job=job)


class EventSink(Protocol):
    """Where the notifier puts a batch of events: the EventBridge bus, the webhook deliveries of the
    tenants' endpoints, the realtime feed browsers subscribe to (one adapter each)."""

    def publish(self, events: Sequence[JobEvent]) -> None: ...
