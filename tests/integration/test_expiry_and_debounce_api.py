"""Expiry and debounce over the HTTP API, through the api and worker handlers against moto."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from offpath.domain.registry import Registry
from offpath_tools.clocks import ManualClock
from offpath_tools.fakes import RecordingMetrics
from tests.integration.conftest import Pipeline, Resources, aws_calls


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(datetime.now(UTC).replace(microsecond=0))


@pytest.fixture
def timed(
    resources: Resources, clients: dict[str, Any], registry: Registry, metrics: RecordingMetrics, clock: ManualClock
) -> Pipeline:
    return Pipeline(resources, clients, registry, metrics, clock=clock)


def at(clock: ManualClock, seconds: float) -> str:
    return (clock.now() + timedelta(seconds=seconds)).isoformat().replace("+00:00", "Z")


def view(pipeline: Pipeline, job_id: str) -> dict[str, Any]:
    status, body, _ = pipeline.call("GET", f"/jobs/{job_id}")
    assert status == 200, body
    return dict(body)


# -- expiry ---------------------------------------------------------------------------------------


def test_a_job_past_its_expiry_at_its_claim_ends_expired_never_runs_and_its_message_is_deleted(
    timed: Pipeline, clock: ManualClock
) -> None:
    status, job, _ = timed.call(
        "POST", "/jobs", body={"type": "demo.echo", "payload": {"n": 1}, "expires_at": at(clock, 5)}
    )
    assert status == 202
    assert job["expires_at"] == at(clock, 5)
    clock.advance(6)

    timed.drain()

    # Acknowledged: the event source mapping deleted the message.
    assert timed.worker_responses == [{"batchItemFailures": []}]
    expired = view(timed, job["job_id"])
    assert (expired["status"], expired["attempts"], expired["started_at"], expired["result"]) == (
        "EXPIRED",
        0,
        None,
        None,
    )
    assert expired["finished_at"] is not None
    assert timed.depth() == (0, 0)


def test_an_expired_job_retried_by_hand_runs_now_without_its_expiry(timed: Pipeline, clock: ManualClock) -> None:
    _, job, _ = timed.call("POST", "/jobs", body={"type": "demo.echo", "payload": {"n": 2}, "expires_at": at(clock, 5)})
    clock.advance(6)
    timed.drain()

    status, retried, _ = timed.call("POST", f"/jobs/{job['job_id']}/retry")
    timed.drain()

    assert status == 202
    assert (retried["status"], retried["expires_at"], retried["retries"]) == ("QUEUED", None, 1)
    done = view(timed, job["job_id"])
    assert (done["status"], done["result"]) == ("SUCCEEDED", {"n": 2})


def test_a_job_delivered_before_its_expiry_runs_as_any_other(timed: Pipeline, clock: ManualClock) -> None:
    _, job, _ = timed.call(
        "POST", "/jobs", body={"type": "demo.echo", "payload": {"n": 3}, "expires_at": at(clock, 60)}
    )

    timed.drain()

    assert view(timed, job["job_id"])["status"] == "SUCCEEDED"


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        ({"expires_at": "2020-01-01T00:00:00Z"}, "in the future"),
        ({"expires_at": "soon"}, "RFC 3339"),
        ({"expires_at": "+30s"}, "RFC 3339"),
        ({"expires_at": 5}, "string"),
    ],
)
def test_a_bad_expiry_is_refused_with_422_naming_the_field(
    pipeline: Pipeline, extra: dict[str, Any], says: str
) -> None:
    status, body, _ = pipeline.call("POST", "/jobs", body={"type": "demo.echo", "payload": {}, **extra})

    assert status == 422
    assert body["error"]["field"] == "expires_at"
    assert says in body["error"]["message"]


def test_an_expiry_before_the_run_at_is_refused_for_a_batch_item_alone(pipeline: Pipeline) -> None:
    now = datetime.now(UTC)
    run_at = (now + timedelta(minutes=10)).isoformat()
    items = [
        {"type": "demo.echo", "payload": {}, "run_at": run_at, "expires_at": (now + timedelta(minutes=5)).isoformat()},
        {"type": "demo.echo", "payload": {}, "expires_at": (now + timedelta(minutes=5)).isoformat()},
    ]

    status, body, _ = pipeline.call("POST", "/jobs/batch", body={"jobs": items})

    assert status == 207
    refused, accepted = body["results"]
    assert (refused["status"], refused["error"]["field"]) == (422, "expires_at")
    assert accepted["status"] == 202 and accepted["job"]["expires_at"] is not None


def test_expired_jobs_are_listed_by_their_status(timed: Pipeline, clock: ManualClock) -> None:
    _, job, _ = timed.call("POST", "/jobs", body={"type": "demo.echo", "payload": {}, "expires_at": at(clock, 1)})
    timed.call("POST", "/jobs", body={"type": "demo.echo", "payload": {}})
    clock.advance(2)
    timed.drain()

    status, page, _ = timed.call("GET", "/jobs?status=EXPIRED")

    assert status == 200
    assert [j["job_id"] for j in page["jobs"]] == [job["job_id"]]


# -- debounce -------------------------------------------------------------------------------------


def test_a_later_submit_under_the_key_supersedes_the_earlier_one_naming_it(timed: Pipeline, clock: ManualClock) -> None:
    body = {"type": "demo.echo", "payload": {"n": 1}, "debounce": {"key": "user-42", "seconds": 2}}
    _, first, _ = timed.call("POST", "/jobs", body=body)
    clock.advance(1)
    calls = aws_calls(timed.clients["dynamodb"], timed.clients["sqs"])

    status, second, _ = timed.call("POST", "/jobs", body=body)
    made = dict(calls)

    assert status == 202
    superseded = view(timed, first["job_id"])
    assert (superseded["status"], superseded["cancel_reason"], superseded["superseded_by"]) == (
        "CANCELLED",
        "superseded",
        second["job_id"],
    )
    assert second["status"] == "QUEUED" and second["run_at"] == at(clock, 2)
    # The job's write, the debounce record's and the superseded job's cancel; one send.
    assert made == {"DynamoDB.PutItem": 2, "DynamoDB.UpdateItem": 1, "SQS.SendMessage": 1}


def test_when_its_time_comes_a_superseded_job_names_the_job_of_its_burst_that_runs(
    timed: Pipeline, clock: ManualClock
) -> None:
    body = {"type": "demo.echo", "payload": {"n": 1}, "debounce": {"key": "user-43", "seconds": 2}}
    ids = []
    for _ in range(3):
        ids.append(timed.call("POST", "/jobs", body=body)[1]["job_id"])
        clock.advance(0.3)
    clock.advance(2)

    # The messages are delayed 2 s on the queue (in real time): drained until the last has run.
    deadline = time.monotonic() + 30
    while view(timed, ids[2])["status"] != "SUCCEEDED" and time.monotonic() < deadline:
        timed.drain()
        time.sleep(0.1)

    assert [view(timed, job_id)["status"] for job_id in ids] == ["CANCELLED", "CANCELLED", "SUCCEEDED"]
    assert [view(timed, job_id)["superseded_by"] for job_id in ids] == [ids[2], ids[2], None]


def test_a_submit_without_debounce_costs_what_it_did(pipeline: Pipeline) -> None:
    calls = aws_calls(pipeline.clients["dynamodb"], pipeline.clients["sqs"])

    expires_at = (datetime.now(UTC) + timedelta(minutes=1)).isoformat()
    status, _, _ = pipeline.call("POST", "/jobs", body={"type": "demo.echo", "payload": {}, "expires_at": expires_at})

    assert status == 202
    assert calls == {"DynamoDB.PutItem": 1, "SQS.SendMessage": 1}


@pytest.mark.parametrize(
    ("debounce", "field"),
    [
        ({"key": "", "seconds": 2}, "debounce.key"),
        ({"key": "x" * 129, "seconds": 2}, "debounce.key"),
        ({"key": " padded", "seconds": 2}, "debounce.key"),
        ({"key": "k", "seconds": 0}, "debounce.seconds"),
        ({"key": "k", "seconds": 901}, "debounce.seconds"),
        ({"key": "k", "seconds": "2"}, "debounce.seconds"),
        ({"key": "k"}, "debounce.seconds"),
        ({"seconds": 2}, "debounce.key"),
    ],
)
def test_a_bad_debounce_is_refused_with_422_naming_the_field(
    pipeline: Pipeline, debounce: dict[str, Any], field: str
) -> None:
    status, body, _ = pipeline.call("POST", "/jobs", body={"type": "demo.echo", "payload": {}, "debounce": debounce})

    assert status == 422
    assert body["error"]["field"] == field


def test_debounce_beside_a_run_at_is_refused_naming_run_at(pipeline: Pipeline) -> None:
    run_at = (datetime.now(UTC) + timedelta(minutes=1)).isoformat()
    body = {"type": "demo.echo", "payload": {}, "run_at": run_at, "debounce": {"key": "k", "seconds": 2}}

    status, answer, _ = pipeline.call("POST", "/jobs", body=body)

    assert status == 422
    assert answer["error"]["field"] == "run_at"
