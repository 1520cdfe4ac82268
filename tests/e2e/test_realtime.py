"""Realtime job events over HTTP from the embedded runtime: `GET /jobs/{id}/events` (server-sent events), fed by
the table's stream as the notifier reads it. A subscriber sees a job's progress and its end, then the stream
closes; another tenant's job is 404 before any stream."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from tests.e2e.conftest import TOKEN_A, TOKEN_B, Local


def subscribe(
    local: Local, job_id: str, *, token: str | None = TOKEN_A, query: str = "", last_event_id: str | None = None
) -> tuple[int, dict[str, str], list[dict[str, Any]]]:
    """The stream's status, headers and events (read to its end)."""
    headers = {"Accept": "text/event-stream"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    if last_event_id is not None:
        headers["Last-Event-ID"] = last_event_id
    request = urllib.request.Request(f"{local.url}/jobs/{job_id}/events{query}", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            status, answered, raw = answer.status, dict(answer.headers), answer.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), [{"error": json.loads(error.read() or b"null")}]
    events = []
    for block in raw.decode().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if line and not line.startswith(":"))
        if "event" in fields:
            events.append({"id": fields["id"], "event": fields["event"], "data": json.loads(fields["data"])})
    return status, {k.lower(): v for k, v in answered.items()}, events


def test_a_subscriber_sees_a_jobs_progress_and_end_then_the_stream_closes(local: Local) -> None:
    job_id = local.submit("demo.sleep", {"ms": 2500}).body["job_id"]

    status, headers, events = subscribe(local, job_id)

    assert status == 200
    assert headers["content-type"].startswith("text/event-stream")
    kinds = [event["event"] for event in events]
    assert kinds[-1] == "job.succeeded"
    assert "job.started" in kinds
    assert kinds.count("job.progress") >= 1
    assert all(event["data"]["job"]["job_id"] == job_id for event in events)
    assert all(event["id"] == event["data"]["id"] and event["event"] == event["data"]["type"] for event in events)
    assert len({event["id"] for event in events}) == len(events)
    progress = [event["data"]["job"]["progress"]["fraction"] for event in events if event["event"] == "job.progress"]
    assert progress == sorted(progress)
    assert events[-1]["data"]["job"]["result"] == {"slept_ms": 2500}


def test_a_finished_job_replays_its_events_and_a_reconnection_after_the_end_is_told_to_stop(local: Local) -> None:
    job_id = local.submit("demo.echo", {"n": "realtime"}).body["job_id"]
    local.wait_for_job(job_id, {"SUCCEEDED"})

    status, _, events = subscribe(local, job_id)
    again, _, nothing = subscribe(local, job_id, last_event_id=events[-1]["id"])

    assert status == 200
    assert [event["event"] for event in events][-1] == "job.succeeded"
    assert (again, nothing) == (204, [])


def test_another_tenants_job_is_not_found_and_no_token_is_unauthorized(local: Local) -> None:
    job_id = local.submit("demo.sleep", {"ms": 300}).body["job_id"]

    other, _, refused = subscribe(local, job_id, token=TOKEN_B)
    anonymous, _, _ = subscribe(local, job_id, token=None)
    wrong, _, _ = subscribe(local, job_id, token=None, query="?access_token=not-a-token")

    assert other == 404
    assert refused == [{"error": {"error": {"code": "not_found", "message": "no such job"}}}]
    assert anonymous == 401
    assert wrong == 401


def test_a_browser_without_headers_passes_its_token_in_the_query(local: Local) -> None:
    """EventSource sends no Authorization header: `access_token` stands in, on this route only."""
    job_id = local.submit("demo.echo", {"n": "query token"}).body["job_id"]

    status, _, events = subscribe(local, job_id, token=None, query=f"?access_token={TOKEN_A}")
    listed = local.call("GET", f"/jobs?access_token={TOKEN_A}", token=None)

    assert status == 200
    assert events[-1]["event"] == "job.succeeded"
    assert listed.status == 401
