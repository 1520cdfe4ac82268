"""The notifier against fakes: stream records (read by the store's own item reader) → events → sinks; the
first record whose events cannot be published is reported; the fan-out sends one delivery per subscribed
endpoint; the event bus gets batches of at most ten entries and its refused entries are sent again."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from offpath.adapters.deliveries import EventBridgeSink, EventPublishError
from offpath.adapters.dynamodb_store import from_item, to_item
from offpath.domain.events import EventType, JobEvent
from offpath.domain.job import Job, JobStatus
from offpath.domain.webhooks import Endpoint, Secret
from offpath.handlers import notifier
from offpath.handlers.composition import NotifierServices, render_job
from offpath.logic.notify import WebhookFanout
from offpath_tools.clocks import ManualClock
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
