"""Realtime job events: the local hub the notifier publishes to, the server-sent event streams it feeds (their
framing, replay, Last-Event-ID, end after the final event, 404 for another tenant's job), and the AppSync Events
publisher's channels and requests. Events are published into the hub directly here; tests/e2e/test_realtime.py
drives the whole path from the table's stream."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import timedelta

import pytest

from offpath.adapters.realtime import AppSyncEventsSink, channel_of, event_document, tenant_segment
from offpath.domain.events import JobEvent, events_of_change
from offpath.domain.job import Job, JobStatus, Progress
from offpath_local.realtime import JobEventStreams, RealtimeHub, StreamRequest
from tests.unit.conftest import START, TENANT, a_job

JOB_ID = "0" * 32


def change(old: Job | None, new: Job) -> list[JobEvent]:
    return events_of_change(old, new)


def lifecycle() -> list[list[JobEvent]]:
    """A job's events, one publish per change: queued, started, two progress events, succeeded."""
    queued = a_job(JobStatus.QUEUED)
    running = a_job(JobStatus.RUNNING, attempt=1, updated_at=START + timedelta(seconds=1))
    half = running.replace(progress=Progress(0.5, "half"), updated_at=START + timedelta(seconds=2))
    most = half.replace(progress=Progress(0.9, "most"), updated_at=START + timedelta(seconds=3))
    done = a_job(JobStatus.SUCCEEDED, attempt=1, result={"ok": True}, updated_at=START + timedelta(seconds=4))
    return [
        change(None, queued),
        change(queued, running),
        change(running, half),
        change(half, most),
        change(most, done),
    ]


def parse(chunks: list[bytes]) -> list[dict[str, str]]:
    """The events of a server-sent event stream (comments and the retry field left out)."""
    events = []
    for block in b"".join(chunks).decode().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if line and not line.startswith(":"))
        if "event" in fields:
            events.append(fields)
    return events


@pytest.fixture
def hub() -> RealtimeHub:
    return RealtimeHub()


def streams(hub: RealtimeHub, job: Job | None, **kwargs: float) -> JobEventStreams:
    return JobEventStreams(
        hub,
        lambda job_id, tenant: job if job is not None and (job.job_id, job.tenant) == (job_id, tenant) else None,
        **kwargs,
    )


def opened(streams: JobEventStreams, tenant: str = TENANT, last: str | None = None) -> Iterator[bytes]:
    answer = streams.open(StreamRequest(tenant, f"/jobs/{JOB_ID}/events", last))
    assert not isinstance(answer, tuple), answer
    return answer


def test_a_subscriber_gets_each_event_as_it_is_published_and_the_stream_ends_after_the_final_one(
    hub: RealtimeHub,
) -> None:
    batches = lifecycle()
    hub.publish(batches[0])
    stream = opened(streams(hub, a_job(JobStatus.QUEUED)))
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.extend(stream))
    reader.start()
    for batch in batches[1:]:
        hub.publish(batch)
    reader.join(timeout=10)

    assert not reader.is_alive()  # ended by job.succeeded, not by a timeout
    events = parse(received)
    assert [e["event"] for e in events] == [
        "job.queued",
        "job.started",
        "job.progress",
        "job.progress",
        "job.succeeded",
    ]
    published = [event for batch in batches for event in batch]
    assert [e["id"] for e in events] == [event.id for event in published]
    last = json.loads(events[-1]["data"])
    assert last == json.loads(json.dumps(event_document(published[-1])))
    assert last["job"]["status"] == "SUCCEEDED" and last["job"]["result"] == {"ok": True}
    assert "payload" not in last["job"] or last["job"]["payload"] is None
    assert json.loads(events[2]["data"])["job"]["progress"] == {"fraction": 0.5, "message": "half"}


def test_another_tenants_job_and_an_unknown_job_are_404_before_any_stream(hub: RealtimeHub) -> None:
    job = a_job(JobStatus.RUNNING)
    endpoint = streams(hub, job)

    refused = endpoint.open(StreamRequest("someone-else", f"/jobs/{JOB_ID}/events", None))
    unknown = endpoint.open(StreamRequest(TENANT, f"/jobs/{'f' * 32}/events", None))
    malformed = endpoint.open(StreamRequest(TENANT, "/jobs/not-a-job/events", None))

    for answer in (refused, unknown, malformed):
        assert isinstance(answer, tuple)
        status, _, body = answer
        assert status == 404
        assert json.loads(body) == {"error": {"code": "not_found", "message": "no such job"}}


def test_a_late_subscriber_starts_at_the_state_it_read_and_one_after_the_end_is_told_to_stop(
    hub: RealtimeHub,
) -> None:
    batches = lifecycle()
    for batch in batches:
        hub.publish(batch)
    published = [event for batch in batches for event in batch]
    done = published[-1].job
    half = published[2].job  # read while at 50%, subscribed after the job went on

    events = parse(list(opened(streams(hub, done))))
    from_half = parse(list(opened(streams(hub, half))))

    assert [e["event"] for e in events] == ["job.succeeded"]
    assert [e["id"] for e in from_half] == [event.id for event in published[2:]]
    # EventSource reconnects with the last id it saw: nothing is left, and 204 stops its reconnecting.
    assert streams(hub, done).open(StreamRequest(TENANT, f"/jobs/{JOB_ID}/events", events[-1]["id"]))[0] == 204
    # From the middle: only what came after.
    after = parse(list(opened(streams(hub, done), last=published[1].id)))
    assert [e["id"] for e in after] == [event.id for event in published[2:]]


def test_a_job_retried_by_hand_is_not_replayed_its_earlier_life(hub: RealtimeHub) -> None:
    failed = a_job(JobStatus.FAILED, attempt=1, error="boom", updated_at=START + timedelta(seconds=1))
    hub.publish(change(None, a_job(JobStatus.QUEUED)))
    hub.publish(change(a_job(JobStatus.RUNNING, attempt=1), failed))
    again = a_job(JobStatus.QUEUED, retries=1, updated_at=START + timedelta(seconds=2))

    events = parse(list(opened(streams(hub, again, heartbeat_s=0.01, max_stream_s=0.02))))

    assert [(e["event"], json.loads(e["data"])["job"]["status"]) for e in events] == [("job.queued", "QUEUED")]


def test_a_job_the_hub_never_saw_is_streamed_from_its_current_state(hub: RealtimeHub) -> None:
    """After a restart the hub is empty: the job's state now is the first event (its id is the one its last
    change had)."""
    done = lifecycle()[-1][0].job

    events = parse(list(opened(streams(hub, done))))

    assert [e["event"] for e in events] == ["job.succeeded"]
    assert events[0]["id"] == lifecycle()[-1][0].id


def test_a_failed_job_streams_failed_and_dead_lettered_then_ends(hub: RealtimeHub) -> None:
    running = a_job(JobStatus.RUNNING, attempt=3)
    failed = a_job(JobStatus.FAILED, attempt=3, error="boom", updated_at=START + timedelta(seconds=1))
    stream = opened(streams(hub, running))
    hub.publish(change(None, running))
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.extend(stream))
    reader.start()
    hub.publish(change(running, failed))
    reader.join(timeout=10)

    assert [e["event"] for e in parse(received)] == ["job.started", "job.failed", "job.dead_lettered"]


def test_a_quiet_stream_sends_keep_alives_and_a_record_read_twice_is_one_event(hub: RealtimeHub) -> None:
    batches = lifecycle()
    stream = opened(streams(hub, a_job(JobStatus.QUEUED), heartbeat_s=0.01, max_stream_s=0.05))
    chunks = list(stream)  # nothing published: keep-alives until the stream's time is up

    assert any(chunk == b": keep-alive\n\n" for chunk in chunks)
    hub.publish(batches[0])
    hub.publish(batches[0])
    assert len(hub.events(JOB_ID)) == 1


def test_closing_the_hub_ends_every_stream(hub: RealtimeHub) -> None:
    stream = opened(streams(hub, a_job(JobStatus.QUEUED)))
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.extend(stream))
    reader.start()
    hub.close()
    reader.join(timeout=10)

    assert not reader.is_alive()


def test_the_hub_keeps_a_bounded_number_of_jobs_and_events() -> None:
    hub = RealtimeHub(max_jobs=2, max_events=3)
    for n in range(3):
        hub.publish(change(None, a_job(JobStatus.QUEUED, job_id=f"{n:032x}")))
    running = a_job(JobStatus.RUNNING, job_id=f"{2:032x}", attempt=1)
    for second in range(1, 5):
        later = running.replace(progress=Progress(second / 10, ""), updated_at=START + timedelta(seconds=second))
        hub.publish(change(running, later))
        running = later

    assert hub.events(f"{0:032x}") == []
    assert len(hub.events(f"{2:032x}")) == 3


@pytest.mark.parametrize(
    ("tenant", "segment"),
    [("acme", "acme"), ("acme.eu", "acme-2eeu"), ("a/b:c", "a-2fb-3ac"), ("tenant-a", "tenant-2da")],
)
def test_a_tenant_is_written_as_a_channel_segment(tenant: str, segment: str) -> None:
    assert tenant_segment(tenant) == segment
    assert channel_of(tenant, JOB_ID) == f"/jobs/{segment}/{JOB_ID}"


def test_the_appsync_events_sink_publishes_each_jobs_events_to_its_channel_5_at_a_time() -> None:
    sent: list[tuple[str, dict[str, object], dict[str, str]]] = []

    def send(url: str, body: bytes, headers: dict[str, str]) -> int:
        sent.append((url, json.loads(body), headers))
        return 200

    class Credentials:
        def get_frozen_credentials(self) -> object:
            from botocore.credentials import ReadOnlyCredentials

            return ReadOnlyCredentials("AKIDEXAMPLE", "secret", None)

    sink = AppSyncEventsSink(
        "https://example.appsync-api.eu-west-1.amazonaws.com/event", "eu-west-1", credentials=Credentials(), send=send
    )
    events = [event for batch in lifecycle() for event in batch]
    other = change(None, a_job(JobStatus.QUEUED, job_id="1" * 32, tenant="other.tenant"))
    sink.publish([*events, *other])

    assert [(body["channel"], len(body["events"])) for _, body, _ in sent] == [  # type: ignore[arg-type]
        (f"/jobs/{tenant_segment(TENANT)}/{JOB_ID}", 5),
        (f"/jobs/other-2etenant/{'1' * 32}", 1),
    ]
    first = json.loads(sent[0][1]["events"][0])  # type: ignore[index]
    assert first["id"] == events[0].id and first["type"] == "job.queued"
    assert sent[0][2]["Authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/")
    assert "/eu-west-1/appsync/aws4_request" in sent[0][2]["Authorization"]


def test_a_refused_publish_raises_so_the_notifier_retries_the_record() -> None:
    from offpath.adapters.realtime import RealtimeUnavailableError

    class Credentials:
        def get_frozen_credentials(self) -> object:
            from botocore.credentials import ReadOnlyCredentials

            return ReadOnlyCredentials("AKIDEXAMPLE", "secret", None)

    sink = AppSyncEventsSink("https://x/event", "us-east-1", credentials=Credentials(), send=lambda *_: 403)
    with pytest.raises(RealtimeUnavailableError, match="403"):
        sink.publish(lifecycle()[0])


def test_the_notifier_publishes_to_the_realtime_api_when_the_stack_has_one() -> None:
    from offpath.handlers.composition import build_notifier_services
    from offpath.settings import Settings

    url = "https://abc.appsync-api.eu-west-1.amazonaws.com/event"
    with_realtime = build_notifier_services(Settings(table_name="jobs", realtime_url=url))
    without = build_notifier_services(Settings(table_name="jobs"))

    (sink,) = [s for s in with_realtime.sinks if isinstance(s, AppSyncEventsSink)]
    assert sink.url == url
    assert not [s for s in without.sinks if isinstance(s, AppSyncEventsSink)]
