"""Realtime job events for browsers, locally: `GET /jobs/{id}/events` as server-sent events.

A stand-in for the AWS AppSync Events API the stack deploys with `-c realtime=true` (docs/realtime.md): the
runtime's notifier publishes every job event to `RealtimeHub` (an `EventSink`; the stream player hands it each
record's events); a browser subscribes to one job of its own tenant and gets that job's events as they come:
`id:` the event's id, `event:` its type (`job.progress`, `job.succeeded`, ...), `data:` the same JSON AppSync
subscribers get (`offpath.adapters.realtime.event_document`). The stream ends after the job's final event.

The caller is the job's tenant or gets 404 before any stream, as `GET /jobs/{id}` answers. A browser's
EventSource cannot send an Authorization header: the token may come as `access_token` in the query instead
(RFC 6750's form), on this route only. A subscriber that comes late (or after the runtime restarted) first gets
the event of the job's state as it is when it subscribes (the one the hub kept, else the one that state is),
then every later one; a job's earlier life (the attempts before a retry by hand) is not replayed. With
`Last-Event-ID` (EventSource's reconnection) it gets what came after that event. A job that is final and
whose events the subscriber has all seen is answered 204, which tells EventSource to stop reconnecting.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from offpath.adapters.realtime import event_document
from offpath.domain.events import FINAL_EVENTS, EventType, JobEvent, events_of_change
from offpath.domain.job import Job

JOB_EVENTS_PATH = re.compile(r"^/jobs/([^/]+)/events$")
JOB_ID = re.compile(r"^[0-9a-f]{32}$")
# What the hub keeps: the latest events of the latest jobs (a late subscriber replays them).
MAX_JOBS = 1000
MAX_EVENTS_PER_JOB = 200
HEARTBEAT_S = 15.0
# A stream lasts at most this long; EventSource reconnects with Last-Event-ID and goes on where it left off.
MAX_STREAM_S = 900.0
RECONNECT_MS = 2000
NOT_FOUND = json.dumps({"error": {"code": "not_found", "message": "no such job"}}).encode()
JSON_HEADERS = {"content-type": "application/json"}

Answer = tuple[int, dict[str, str], bytes]


class RealtimeHub:
    """The notifier's realtime sink: each job's events, in order, handed to the streams that follow the job."""

    def __init__(self, max_jobs: int = MAX_JOBS, max_events: int = MAX_EVENTS_PER_JOB) -> None:
        self._jobs: OrderedDict[str, deque[tuple[int, JobEvent]]] = OrderedDict()
        self._ids: dict[str, set[str]] = {}
        self._max_jobs = max_jobs
        self._max_events = max_events
        self._sequence = 0
        self._changed = threading.Condition()
        self._closed = False

    def publish(self, events: Sequence[JobEvent]) -> None:
        """`EventSink.publish`: an event seen before (a record read again) is kept once."""
        with self._changed:
            for event in events:
                job_id = event.job.job_id
                kept = self._jobs.get(job_id)
                if kept is None:
                    kept = self._jobs[job_id] = deque(maxlen=self._max_events)
                    self._ids[job_id] = set()
                    while len(self._jobs) > self._max_jobs:
                        gone, _ = self._jobs.popitem(last=False)
                        self._ids.pop(gone, None)
                self._jobs.move_to_end(job_id)
                if event.id in self._ids[job_id]:
                    continue
                if len(kept) == kept.maxlen:
                    self._ids[job_id].discard(kept[0][1].id)
                self._sequence += 1
                kept.append((self._sequence, event))
                self._ids[job_id].add(event.id)
            self._changed.notify_all()

    def events(self, job_id: str, after: int = 0) -> list[tuple[int, JobEvent]]:
        """The job's kept events published after sequence number `after`, oldest first."""
        with self._changed:
            return [(n, e) for n, e in self._jobs.get(job_id, ()) if n > after]

    def wait(self, job_id: str, after: int, timeout_s: float) -> list[tuple[int, JobEvent]]:
        """The job's events after `after`, waiting up to `timeout_s` for one; [] on timeout or when closed."""
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while not self._closed:
                found = [(n, e) for n, e in self._jobs.get(job_id, ()) if n > after]
                left = deadline - time.monotonic()
                if found or left <= 0:
                    return found
                self._changed.wait(left)
            return []

    def close(self) -> None:
        """Every waiting stream ends (the runtime is stopping)."""
        with self._changed:
            self._closed = True
            self._changed.notify_all()

    @property
    def closed(self) -> bool:
        return self._closed


@dataclass(frozen=True)
class StreamRequest:
    tenant: str
    path: str
    last_event_id: str | None


class JobEventStreams:
    """`GET /jobs/{id}/events` for the gateway: an answer (404, 204) or the stream's chunks."""

    def __init__(
        self,
        hub: RealtimeHub,
        read_job: Callable[[str, str], Job | None],
        *,
        heartbeat_s: float = HEARTBEAT_S,
        max_stream_s: float = MAX_STREAM_S,
    ) -> None:
        self.hub = hub
        self.read_job = read_job
        self.heartbeat_s = heartbeat_s
        self.max_stream_s = max_stream_s

    def matches(self, method: str, path: str) -> bool:
        return method in ("GET", "HEAD") and JOB_EVENTS_PATH.match(path) is not None

    def open(self, request: StreamRequest) -> Answer | Iterator[bytes]:
        found = JOB_EVENTS_PATH.match(request.path)
        job_id = found.group(1) if found else ""
        # Read by the caller's tenant and the id (the job's key): another tenant's job is no job.
        job = self.read_job(job_id, request.tenant) if JOB_ID.match(job_id) else None
        if job is None or job.tenant != request.tenant:
            return 404, dict(JSON_HEADERS), NOT_FOUND
        kept = self.hub.events(job_id)
        ids = [event.id for _, event in kept]
        if request.last_event_id in ids:
            cursor = kept[ids.index(request.last_event_id)][0]
            replay = [event for n, event in kept if n > cursor]
        else:
            # The job as it was read, then what came after: the kept event of that state when there is one
            # (else the event its state is), and the kept events of later states.
            cursor = kept[-1][0] if kept else 0
            now = [i for i, (_, event) in enumerate(kept) if event.job.updated_at == job.updated_at]
            if now:
                replay = [event for _, event in kept[now[0] :]]
            else:
                later = [event for _, event in kept if event.job.updated_at > job.updated_at]
                replay = events_of_change(None, job) + later
            if request.last_event_id is not None and request.last_event_id in {e.id for e in replay}:
                replay = replay[[e.id for e in replay].index(request.last_event_id) + 1 :]
        seen_final = any(event.type in FINAL_EVENTS for event in replay)
        if not replay and job.status.is_final:
            return 204, {}, b""
        return self._stream(job_id, cursor, replay, ended=seen_final)

    def _stream(self, job_id: str, cursor: int, replay: list[JobEvent], *, ended: bool) -> Iterator[bytes]:
        yield f"retry: {RECONNECT_MS}\n\n".encode()
        sent = set()
        for event in replay:
            sent.add(event.id)
            yield frame(event)
        if ended:
            return
        deadline = time.monotonic() + self.max_stream_s
        while not self.hub.closed and time.monotonic() < deadline:
            found = self.hub.wait(job_id, cursor, min(self.heartbeat_s, max(0.0, deadline - time.monotonic())))
            if not found:
                yield b": keep-alive\n\n"
                continue
            for number, event in found:
                cursor = number
                if event.id not in sent:  # the state it was opened with, published after
                    sent.add(event.id)
                    yield frame(event)
            if any(event.type in FINAL_EVENTS for _, event in found):
                return


def frame(event: JobEvent) -> bytes:
    """One server-sent event: its id, its type as the event name, its JSON on one data line."""
    data = json.dumps(event_document(event), separators=(",", ":"))
    return f"id: {event.id}\nevent: {EventType(event.type).value}\ndata: {data}\n\n".encode()
