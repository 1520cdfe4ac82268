"""The notifier against fakes: stream records (read by the store's own item reader) → events → sinks; the
first record whose events cannot be published is reported; the fan-out sends one delivery per subscribed
endpoint; the event bus gets batches of at most ten entries and its refused entries are sent again."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from offpath.adapters.deliveries import EventBridgeSink, EventPublishError
from offpath.adapters.dynamodb_store import from_item, to_item
from offpath.domain.batch import Batch, batch_summary
from offpath.domain.events import EventType, JobEvent, batch_events
from offpath.domain.job import Job, JobStatus
from offpath.domain.webhooks import Endpoint, Secret
from offpath.handlers import notifier
from offpath.handlers.composition import NotifierServices, render_job
from offpath.logic.notify import (
    Change,
    StreamRecord,
    WebhookFanout,
    change_of,
    events_of_record,
    notify,
    publish_metrics,
    record_metrics,
)
from offpath_tools.clocks import ManualClock
from offpath_tools.fakes import RecordingMetrics
from offpath_tools.webhook_fakes import InMemoryWebhookStore, RecordingDeliveryQueue

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def job(job_id: str, status: JobStatus, tenant: str = "acme", job_type: str = "demo.echo", at: int = 0) -> Job:
    return Job(
        job_id=job_id,
        tenant=tenant,
        type=job_type,
        queue="default",
        payload={"secret": "payload"},
        payload_hash="h",
        status=status,
        created_at=T0,
        updated_at=T0 + timedelta(seconds=at),
        max_attempts=3,
        attempt=1 if status is not JobStatus.QUEUED else 0,
    )


def record(seq: int, old: Job | None, new: Job) -> dict[str, Any]:
    change: dict[str, Any] = {"SequenceNumber": str(seq), "NewImage": to_item(new)}
    if old is not None:
        change["OldImage"] = to_item(old)
    return {"eventName": "MODIFY" if old else "INSERT", "dynamodb": change}


class Sink:
    def __init__(self, fail_on: str | None = None) -> None:
        self.published: list[JobEvent] = []
        self.fail_on = fail_on

    def publish(self, events: Sequence[JobEvent]) -> None:
        if any(e.job.job_id == self.fail_on for e in events):
            raise RuntimeError("down")
        self.published.extend(events)


def test_each_status_change_in_a_batch_becomes_its_event() -> None:
    sink = Sink()
    queued = job("a" * 32, JobStatus.QUEUED)
    running = job("a" * 32, JobStatus.RUNNING, at=1)
    event = {"Records": [record(1, None, queued), record(2, queued, running)]}

    answer = notifier.handler(event, None, services=NotifierServices(read_item=from_item, sinks=[sink]))

    assert answer == {"batchItemFailures": []}
    assert [e.type.value for e in sink.published] == ["job.queued", "job.started"]


def test_the_first_record_that_cannot_be_published_is_reported_and_nothing_after_it() -> None:
    sink = Sink(fail_on="b" * 32)
    records = [record(i, None, job(c * 32, JobStatus.QUEUED)) for i, c in ((1, "a"), (2, "b"), (3, "c"))]

    answer = notifier.handler({"Records": records}, None, NotifierServices(from_item, [sink]))

    assert answer == {"batchItemFailures": [{"itemIdentifier": "2"}]}
    assert [e.job.job_id for e in sink.published] == ["a" * 32]


def test_an_unreadable_image_is_left_out_and_the_rest_is_published() -> None:
    sink = Sink()
    bad = {"dynamodb": {"SequenceNumber": "1", "NewImage": {"pk": {"S": "JOB#x"}}}}
    good = record(2, None, job("a" * 32, JobStatus.QUEUED))

    answer = notifier.handler({"Records": [bad, good]}, None, NotifierServices(from_item, [sink]))

    assert answer == {"batchItemFailures": []} and len(sink.published) == 1


def test_the_fan_out_sends_one_delivery_per_subscribed_endpoint_reading_a_tenant_once() -> None:
    store = InMemoryWebhookStore()
    secret = (Secret("whsec_c2VjcmV0"),)
    url = "https://hooks.example.com/"
    store.put_endpoint("acme", Endpoint("all", url, ("job.succeeded",), secrets=secret), limit=10)
    store.put_endpoint(
        "acme",
        Endpoint("reports", url, ("job.succeeded",), ("demo.report",), include_payload=True, secrets=secret),
        limit=10,
    )
    store.put_endpoint("acme", Endpoint("off", url, ("job.succeeded",), secrets=secret, enabled=False), limit=10)
    store.put_endpoint("other", Endpoint("theirs", url, ("job.succeeded",), secrets=secret), limit=10)
    queue = RecordingDeliveryQueue()
    fanout = WebhookFanout(store, queue, ManualClock(T0), render_job)
    events = [
        JobEvent("evt_1", EventType.SUCCEEDED, T0, "acme", j)
        for j in (job("a" * 32, JobStatus.SUCCEEDED), job("b" * 32, JobStatus.SUCCEEDED, job_type="demo.report"))
    ]

    fanout.publish(events)

    sent = sorted((d.endpoint, d.data["job_id"][0], d.data["payload"] is not None) for d, _ in queue.sent)
    assert sent == [("all", "a", False), ("all", "b", False), ("reports", "b", True)]
    assert store.reads == 1


def test_the_event_bus_gets_batches_of_ten_and_refused_entries_again() -> None:
    class Client:
        def __init__(self) -> None:
            self.calls: list[list[dict[str, Any]]] = []

        def put_events(self, Entries: list[dict[str, Any]]) -> dict[str, Any]:
            self.calls.append(Entries)
            if len(self.calls) == 1:  # the first call: its first entry is refused
                results = [{"ErrorCode": "InternalFailure"}] + [{"EventId": "x"}] * (len(Entries) - 1)
                return {"FailedEntryCount": 1, "Entries": results}
            return {"FailedEntryCount": 0, "Entries": [{"EventId": "x"}] * len(Entries)}

    client = Client()
    sink = EventBridgeSink("default", render_job, client=client)
    events = [
        JobEvent(f"evt_{i}", EventType.QUEUED, T0, "acme", j)
        for i, j in enumerate(job(f"{i:032x}", JobStatus.QUEUED) for i in range(12))
    ]

    sink.publish(events)

    assert [len(call) for call in client.calls] == [10, 1, 2]
    entry = client.calls[0][0]
    assert (entry["Source"], entry["DetailType"], entry["EventBusName"]) == ("offpath", "Job State Change", "default")
    detail = json.loads(entry["Detail"])
    assert set(detail) == {"id", "type", "time", "tenant", "job"} and detail["job"]["payload"] is None


def test_entries_the_bus_keeps_refusing_fail_the_batch() -> None:
    class Refusing:
        def put_events(self, Entries: list[dict[str, Any]]) -> dict[str, Any]:
            return {"FailedEntryCount": len(Entries), "Entries": [{"ErrorCode": "ThrottlingException"}] * len(Entries)}

    event = JobEvent(
        "evt_1",
        EventType.QUEUED,
        T0,
        "acme",
        replace(job("a" * 32, JobStatus.QUEUED)),
    )
    with pytest.raises(EventPublishError):
        EventBridgeSink("bus", render_job, client=Refusing()).publish([event])


# -- lifecycle metrics, from the stream -------------------------------------------------------------


def lifecycle(seq0: int = 1) -> tuple[list[dict[str, Any]], Job]:
    """A job's stream: queued, started 2 s after its creation, succeeded 0.5 s later."""
    job_id = "f" * 32
    queued = job(job_id, JobStatus.QUEUED)
    running = replace(job(job_id, JobStatus.RUNNING, at=2), attempt_started_at=T0 + timedelta(seconds=2))
    done = replace(running, status=JobStatus.SUCCEEDED, updated_at=T0 + timedelta(seconds=2.5))
    done = replace(done, finished_at=done.updated_at, lease_until=None)
    records = [record(seq0, None, queued), record(seq0 + 1, queued, running), record(seq0 + 2, running, done)]
    return records, done


def test_the_notifier_publishes_each_batchs_lifecycle_metrics_in_one_emf_line() -> None:
    import io

    from offpath.observability import EmfMetrics

    out = io.StringIO()
    records, _ = lifecycle()
    services = NotifierServices(from_item, [Sink()], metrics=EmfMetrics("notifier", stream=out))

    notifier.handler({"Records": records}, None, services=services)

    lines = out.getvalue().splitlines()
    assert len(lines) == 1
    doc = json.loads(lines[0])
    assert (doc["queue"], doc["job_type"]) == ("default", "demo.echo")
    assert [doc["JobsSubmitted"], doc["JobsStarted"], doc["JobsSucceeded"]] == [1, 1, 1]
    assert doc["QueueDelay"] == [2000] and doc["JobDuration"] == [500]
    names = {m["Name"] for m in doc["_aws"]["CloudWatchMetrics"][0]["Metrics"]}
    assert names == {"JobsSubmitted", "JobsStarted", "JobsSucceeded", "QueueDelay", "JobDuration"}


def test_failures_retries_and_dead_letters_are_counted_from_the_states_entered() -> None:
    from offpath_tools.fakes import RecordingMetrics

    metrics = RecordingMetrics()
    running = replace(job("a" * 32, JobStatus.RUNNING, at=1), attempt_started_at=T0)
    retrying = replace(running, status=JobStatus.RETRYING, updated_at=T0 + timedelta(seconds=3))
    again = replace(retrying, status=JobStatus.RUNNING, attempt=2, attempt_started_at=T0 + timedelta(seconds=9))
    failed = replace(again, status=JobStatus.FAILED, updated_at=T0 + timedelta(seconds=10))
    renewed = replace(failed, sweep_at=T0)  # a write that changes no state is no metric
    records = [record(1, running, retrying), record(2, retrying, again), record(3, again, failed)]
    records.append(record(4, failed, renewed))

    notifier.handler({"Records": records}, None, NotifierServices(from_item, [Sink()], metrics=metrics))

    assert metrics.counts == {"JobsRetried": 1, "JobsStarted": 1, "JobsFailed": 1, "JobsDeadLettered": 1}
    assert metrics.timings == {"JobDuration": [3000, 1000]}  # no QueueDelay: attempt 2 is no first start


def test_a_record_retried_by_the_mapping_is_counted_once() -> None:
    from offpath_tools.fakes import RecordingMetrics

    metrics = RecordingMetrics()
    records = [record(i, None, job(c * 32, JobStatus.QUEUED)) for i, c in ((1, "a"), (2, "b"), (3, "c"))]
    failing = NotifierServices(from_item, [Sink(fail_on="b" * 32)], metrics=metrics)

    notifier.handler({"Records": records}, None, failing)  # "2" and "3" are reported for the retry
    notifier.handler({"Records": records[1:]}, None, NotifierServices(from_item, [Sink()], metrics=metrics))

    assert metrics.counts == {"JobsSubmitted": 3}


# -- changes and their events ----------------------------------------------------------------------


def member(status: JobStatus, *, counted: bool, at: int = 0) -> Job:
    return replace(job("d" * 32, status, at=at), batch_id="b-1", batch_counted=status if counted else None, attempt=1)


def done_batch() -> Batch:
    return Batch("b-1", "acme", T0, T0 + timedelta(seconds=5), total=1, counts={"SUCCEEDED": 1}, sealed_at=T0)


class Batches:
    """A batch reader that records what it was asked."""

    def __init__(self, batch: Batch | None) -> None:
        self.batch = batch
        self.asked: list[tuple[str, str]] = []

    def __call__(self, tenant: str, batch_id: str) -> Batch | None:
        self.asked.append((tenant, batch_id))
        return self.batch


def test_the_count_of_the_member_that_completes_its_batch_adds_the_batchs_events() -> None:
    batches = Batches(done_batch())
    old, new = member(JobStatus.RUNNING, counted=False), member(JobStatus.SUCCEEDED, counted=True, at=5)

    change = change_of(StreamRecord.of(record(7, old, new)), from_item, batches)

    assert batches.asked == [("acme", "b-1")]
    assert (change.sequence_number, change.old, change.new) == ("7", old, new)
    assert [e.type.value for e in change.events] == ["job.succeeded", "batch.completed", "batch.succeeded"]
    assert [e.batch for e in change.events] == [None, done_batch(), done_batch()]
    assert all(e.job == new for e in change.events)


def test_no_batch_is_read_for_a_change_that_counts_no_member() -> None:
    batches = Batches(done_batch())
    counted = member(JobStatus.SUCCEEDED, counted=True, at=5)
    loner = job("a" * 32, JobStatus.SUCCEEDED)
    moved = replace(counted, sweep_at=T0)  # a later write to a member already counted

    for old, new in ((counted, moved), (None, loner)):
        change = change_of(StreamRecord.of(record(8, old, new)), from_item, batches)
        assert all(e.batch is None for e in change.events)

    assert batches.asked == []
    assert change_of(StreamRecord.of(record(9, None, counted)), from_item).events[-1].batch is None  # no reader


def test_a_batch_gone_when_its_member_is_counted_adds_no_event() -> None:
    old, new = member(JobStatus.RUNNING, counted=False), member(JobStatus.SUCCEEDED, counted=True, at=5)

    change = change_of(StreamRecord.of(record(7, old, new)), from_item, Batches(None))

    assert [e.type.value for e in change.events] == ["job.succeeded"]


def test_a_removed_item_is_a_change_with_its_old_image_and_no_event() -> None:
    gone = job("a" * 32, JobStatus.SUCCEEDED)

    change = change_of(StreamRecord("4", to_item(gone), None), from_item)

    assert change == Change("4", gone, None, ())


def test_an_unreadable_image_is_logged_by_its_sequence_number(caplog: pytest.LogCaptureFixture) -> None:
    bad = StreamRecord.of({"dynamodb": {"SequenceNumber": "12", "NewImage": {"pk": {"S": "JOB#x"}}}})

    with caplog.at_level(logging.ERROR, logger="offpath.notifier"):
        assert change_of(bad, from_item) == Change("12", None, None)

    [logged] = caplog.records
    assert logged.getMessage() == "a stream record's job image could not be read; left out"
    assert logged.__dict__["seq"] == "12"


def test_a_record_without_its_change_has_no_sequence_number_and_no_images() -> None:
    assert StreamRecord.of({}) == StreamRecord("", None, None)


def test_a_records_events_are_those_of_its_change() -> None:
    queued = job("a" * 32, JobStatus.QUEUED)

    events = events_of_record(StreamRecord.of(record(1, None, queued)), from_item)

    assert [(e.type.value, e.job) for e in events] == [("job.queued", queued)]


# -- publishing --------------------------------------------------------------------------------------


class Calls(Sink):
    """A sink that records each call's events, and fails the calls that carry `fail_on`."""

    def __init__(self, fail_on: str | None = None) -> None:
        super().__init__(fail_on)
        self.calls: list[list[str]] = []

    def publish(self, events: Sequence[JobEvent]) -> None:
        self.calls.append([e.id for e in events])
        super().publish(events)


def test_a_batchs_event_read_after_several_counts_goes_out_once_in_one_call_per_sink() -> None:
    first = member(JobStatus.SUCCEEDED, counted=True, at=5)
    second = replace(first, job_id="e" * 32)
    changes = [
        change_of(StreamRecord.of(record(i, None, m)), from_item, Batches(done_batch()))
        for i, m in ((1, first), (2, second))
    ]
    sinks = [Calls(), Calls()]

    assert notify(changes, sinks) is None

    ids = [e.id for e in changes[0].events] + [changes[1].events[0].id]
    assert [sink.calls for sink in sinks] == [[ids], [ids]]
    assert changes[1].events[1].id == changes[0].events[1].id  # the same batch.completed


def test_when_the_batch_fails_records_are_published_one_by_one_up_to_the_first_that_fails(
    caplog: pytest.LogCaptureFixture,
) -> None:
    quiet = replace(job("a" * 32, JobStatus.QUEUED), sweep_at=T0)  # a write that is no event
    changes = [
        change_of(StreamRecord.of(record(1, job("a" * 32, JobStatus.QUEUED), quiet)), from_item),
        change_of(StreamRecord.of(record(2, None, job("b" * 32, JobStatus.QUEUED))), from_item),
        change_of(StreamRecord.of(record(3, None, job("c" * 32, JobStatus.QUEUED))), from_item),
    ]
    sink = Calls(fail_on="b" * 32)

    with caplog.at_level(logging.WARNING, logger="offpath.notifier"):
        assert notify(changes, [sink]) == "2"

    assert not changes[0].events and len(sink.calls) == 2 and sink.published == []
    batch, record_ = caplog.records
    assert batch.getMessage() == "publishing the batch failed; publishing record by record" and batch.exc_info
    assert record_.getMessage() == "a record's events could not be published" and record_.__dict__["seq"] == "2"


def test_the_metrics_of_the_records_before_a_failed_one_are_flushed() -> None:
    metrics = RecordingMetrics()
    records, _ = lifecycle()
    changes = [change_of(StreamRecord.of(r), from_item) for r in records]

    publish_metrics(changes, metrics, failed="2")

    assert (metrics.counts, metrics.flushes) == ({"JobsSubmitted": 1}, 1)


def test_a_queue_delay_keeps_its_fraction_of_a_millisecond() -> None:
    metrics = RecordingMetrics()
    queued = job("a" * 32, JobStatus.QUEUED)
    started = replace(job("a" * 32, JobStatus.RUNNING, at=1), attempt_started_at=T0 + timedelta(microseconds=1_234_500))

    record_metrics(change_of(StreamRecord.of(record(1, queued, started)), from_item), metrics)

    assert metrics.timings == {"QueueDelay": [1234.5]}


def test_a_batch_event_is_delivered_with_the_batch_and_the_member_that_completed_it() -> None:
    store = InMemoryWebhookStore()
    store.put_endpoint("acme", Endpoint("all", "https://h.example/", ("batch.completed",), secrets=()), limit=10)
    queue = RecordingDeliveryQueue()
    completed = member(JobStatus.SUCCEEDED, counted=True, at=5)
    [event] = [e for e in batch_events(completed, done_batch()) if e.type is EventType.BATCH_COMPLETED]

    WebhookFanout(store, queue, ManualClock(T0), render_job).publish([event])

    [(sent, _)] = queue.sent
    assert (sent.tenant, sent.endpoint, sent.event_id, sent.type, sent.timestamp) == (
        "acme",
        "all",
        event.id,
        "batch.completed",
        T0 + timedelta(seconds=5),
    )
    assert sent.data == {"batch": batch_summary(done_batch()), "job": render_job(completed, False)}
