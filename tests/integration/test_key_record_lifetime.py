"""An idempotency key's record lives at least as long as the job it names, on a clock the test moves and with
DynamoDB's TTL played by hand (moto keeps expired items): a replay while the job is kept is a replay, even when
the job finished days after it was due; a replay once both are gone is a new job."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from offpath_local.resources import Resources
from offpath_tools.clocks import ManualClock
from tests.integration.conftest import Pipeline, RecordingMetrics, aws_calls

JSON = {"content-type": "application/json"}
T0 = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


@pytest.fixture
def timed(
    resources: Resources, clients: dict[str, Any], registry: Any, metrics: RecordingMetrics, clock: ManualClock
) -> Pipeline:
    return Pipeline(resources, clients, registry, metrics, clock=clock)


def submit(pipeline: Pipeline, key: str) -> tuple[int, Any, dict[str, str]]:
    body = {"type": "demo.echo", "payload": {"n": 1}}
    return pipeline.call("POST", "/jobs", body=body, headers={**JSON, "idempotency-key": key})


def time_to_live(pipeline: Pipeline, now: datetime) -> int:
    """DynamoDB's TTL at `now`: every item whose `expires_at` has passed is deleted. The number deleted."""
    client, table = pipeline.clients["dynamodb"], pipeline.resources.table_name
    gone = 0
    for item in client.scan(TableName=table)["Items"]:
        if "expires_at" in item and int(item["expires_at"]["N"]) <= now.timestamp():
            client.delete_item(TableName=table, Key={"pk": item["pk"], "sk": item["sk"]})
            gone += 1
    return gone


def key_items(pipeline: Pipeline) -> list[dict[str, Any]]:
    items = pipeline.clients["dynamodb"].scan(TableName=pipeline.resources.table_name)["Items"]
    return [item for item in items if item["pk"]["S"].startswith("IDEM#")]


def test_a_replay_in_the_last_day_of_a_job_that_finished_late_is_still_a_replay(
    timed: Pipeline, clock: ManualClock
) -> None:
    # Given a keyed job that finished 3 days after it was due (kept until then + 7 days)
    status, job, _ = submit(timed, "order-7")
    assert status == 202
    clock.set(T0 + timedelta(days=3))
    timed.drain()
    assert timed.call("GET", f"/jobs/{job['job_id']}")[1]["status"] == "SUCCEEDED"

    # When the key is replayed on the job's last day (the key's first expiry, due + 8 days, has passed)
    clock.set(T0 + timedelta(days=9, hours=23))
    time_to_live(timed, clock.now())
    replay_status, replay, headers = submit(timed, "order-7")

    # Then it is a replay of the finished job, which does not run again
    assert (replay_status, replay["job_id"], headers.get("Idempotent-Replayed")) == (200, job["job_id"], "true")
    assert replay["status"] == "SUCCEEDED"


def test_a_replay_once_the_job_and_its_key_are_gone_is_a_new_job(timed: Pipeline, clock: ManualClock) -> None:
    assert submit(timed, "order-8")[0] == 202
    clock.set(T0 + timedelta(days=3))
    timed.drain()

    clock.set(T0 + timedelta(days=11, minutes=1))  # the job's expiry + the margin: both gone
    assert time_to_live(timed, clock.now()) == 2
    status, again, headers = submit(timed, "order-8")

    assert status == 202
    assert "Idempotent-Replayed" not in headers
    assert again["status"] == "QUEUED"


def test_a_job_finishing_when_due_writes_its_key_record_once(timed: Pipeline, clock: ManualClock) -> None:
    """The key's record is extended only for a job finishing more than a day after it was due: the worker's
    path of every other keyed job has no extra write."""
    assert submit(timed, "order-9")[0] == 202
    before = int(key_items(timed)[0]["expires_at"]["N"])
    calls = aws_calls(timed.clients["dynamodb"])
    clock.advance(60)

    timed.drain()

    assert int(key_items(timed)[0]["expires_at"]["N"]) == before
    assert calls["DynamoDB.UpdateItem"] == 2  # the claim and the outcome


def test_a_job_cancelled_days_after_it_was_due_keeps_its_key_as_long(timed: Pipeline, clock: ManualClock) -> None:
    status, job, _ = submit(timed, "order-10")
    assert status == 202
    clock.set(T0 + timedelta(days=3))
    assert timed.call("POST", f"/jobs/{job['job_id']}/cancel")[0] == 200

    clock.set(T0 + timedelta(days=9, hours=23))
    time_to_live(timed, clock.now())
    replay_status, replay, _ = submit(timed, "order-10")

    assert (replay_status, replay["job_id"], replay["status"]) == (200, job["job_id"], "CANCELLED")
