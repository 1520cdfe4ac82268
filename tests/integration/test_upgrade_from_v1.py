"""An upgrade never loses data: the items release v1 wrote (tests/fixtures/items/v1, never regenerated), loaded
into the table as the current stack creates it, are carried to their final states by this release's handlers."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from standardwebhooks import Webhook

from offpath.adapters.dynamodb_quotas import DynamoDbQuotaCounters
from offpath.adapters.webhook_store import DynamoDbWebhookStore
from offpath.domain.ports import JobMessage
from offpath.domain.quotas import Usage
from offpath.domain.registry import Registry
from offpath.domain.webhooks import Delivery, HttpResult
from offpath.logic.webhooks import DeliveryPorts, ReceiverPolicy, deliver
from offpath_local.resources import Resources
from offpath_tools.clocks import ManualClock
from offpath_tools.webhook_fakes import RecordingDeliveryQueue, ScriptedSender
from tests.integration.conftest import Pipeline, RecordingMetrics

V1 = Path(__file__).resolve().parents[1] / "fixtures" / "items" / "v1"
CONTEXT = json.loads((V1 / "context.json").read_text())
WRITTEN_AT = datetime.fromisoformat(CONTEXT["written_at"])
IDS: dict[str, str] = CONTEXT["job_ids"]
TENANT = CONTEXT["tenant"]
ADMIN = ["offpath/admin"]


def v1_items(kind: str) -> dict[str, dict[str, Any]]:
    items: dict[str, dict[str, Any]] = json.loads((V1 / f"{kind}.json").read_text())
    return items


def load_v1(pipeline: Pipeline) -> int:
    """Every v1 item, as it stands in a deployed table, put into this test's table."""
    count = 0
    for path in sorted(V1.glob("*.json")):
        if path.name == "context.json":
            continue
        for item in json.loads(path.read_text()).values():
            pipeline.clients["dynamodb"].put_item(TableName=pipeline.resources.table_name, Item=item)
            count += 1
    return count


@pytest.fixture
def clock() -> ManualClock:
    # Two hours after v1 wrote its items: the running job's lease and the scheduled job's run_at have passed.
    return ManualClock(WRITTEN_AT + timedelta(hours=2))


@pytest.fixture
def upgraded(
    resources: Resources, clients: dict[str, Any], registry: Registry, metrics: RecordingMetrics, clock: ManualClock
) -> Pipeline:
    pipeline = Pipeline(resources, clients, registry, metrics, clock=clock)
    assert load_v1(pipeline) == 17
    return pipeline


def view_of(pipeline: Pipeline, label: str) -> dict[str, Any]:
    code, view, _ = pipeline.call("GET", f"/jobs/{IDS[label]}", tenant=TENANT)
    assert code == 200, view
    return dict(view)


def test_every_v1_job_reads_as_it_was_written(upgraded: Pipeline) -> None:
    statuses = {label: view_of(upgraded, label)["status"] for label in IDS if label != "FIRED"}

    assert statuses == {
        "CANCELLED": "CANCELLED",
        "FAILED": "FAILED",
        "KEYED": "QUEUED",
        "QUEUED": "QUEUED",
        "RETRYING": "RETRYING",
        "RUNNING": "RUNNING",
        "SCHEDULED": "SCHEDULED",
        "SUCCEEDED": "SUCCEEDED",
    }
    assert view_of(upgraded, "SUCCEEDED")["result"] == {"greeting": "hello"}
    assert view_of(upgraded, "FAILED")["error"] == "permanent error: bad input"


def test_a_v1_attempts_error_string_reads_as_an_error_without_type_or_traceback(upgraded: Pipeline) -> None:
    (attempt,) = view_of(upgraded, "FAILED")["attempt_history"]

    assert attempt["error"] == {"type": None, "message": "permanent error: bad input", "traceback": None}


def test_v1_queued_and_retrying_jobs_succeed_when_their_messages_are_processed(upgraded: Pipeline) -> None:
    # The messages v1 sent for them are still on their queues when the new code starts.
    for label in ("QUEUED", "RETRYING", "KEYED"):
        job = upgraded.store.get(IDS[label], tenant=TENANT)
        assert job is not None
        upgraded.queue.send(job.queue, JobMessage.of(job))

    upgraded.drain()

    assert view_of(upgraded, "QUEUED")["status"] == "SUCCEEDED"
    assert view_of(upgraded, "QUEUED")["result"] == {"n": 1}
    retried = view_of(upgraded, "RETRYING")
    assert (retried["status"], retried["attempts"]) == ("SUCCEEDED", 2)
    assert view_of(upgraded, "KEYED")["status"] == "SUCCEEDED"


def test_v1_running_job_whose_lease_expired_is_requeued_by_the_sweeper_and_succeeds(upgraded: Pipeline) -> None:
    report = upgraded.sweep()
    upgraded.drain()

    assert report["requeued"] == 1
    running = view_of(upgraded, "RUNNING")
    assert (running["status"], running["attempts"]) == ("SUCCEEDED", 2)


def test_v1_scheduled_job_is_dispatched_when_its_one_time_schedule_fires(
    upgraded: Pipeline, clock: ManualClock
) -> None:
    run_at = view_of(upgraded, "SCHEDULED")["run_at"]
    event = {"kind": "delayed", "job_id": IDS["SCHEDULED"], "tenant": TENANT, "scheduled_time": run_at}

    upgraded.enqueue(event)
    upgraded.drain()

    assert view_of(upgraded, "SCHEDULED")["status"] == "SUCCEEDED"
    assert view_of(upgraded, "SCHEDULED")["result"] == {"n": 2}


def test_v1_scheduled_job_whose_schedule_is_missing_is_dispatched_by_the_sweeper(upgraded: Pipeline) -> None:
    report = upgraded.sweep()
    upgraded.drain()

    assert report["enqueued"] == 1
    assert view_of(upgraded, "SCHEDULED")["status"] == "SUCCEEDED"


def test_v1_keyed_submit_replayed_answers_its_v1_job(upgraded: Pipeline) -> None:
    keyed = CONTEXT["keyed"]

    code, view, _ = upgraded.call(
        "POST",
        "/jobs",
        body=keyed["body"],
        tenant=TENANT,
        headers={"content-type": "application/json", "Idempotency-Key": keyed["key"]},
    )

    assert code == 200
    assert view["job_id"] == IDS["KEYED"]
    assert upgraded.depth() == (0, 0)  # a replay sends nothing


def test_v1_schedule_firing_record_dedupes_the_same_slot_and_is_listed(upgraded: Pipeline) -> None:
    again = upgraded.enqueue(
        {"kind": "recurring", "schedule": CONTEXT["schedule"], "scheduled_time": CONTEXT["slot"], "execution_id": "e"}
    )

    assert again["job_id"] == IDS["FIRED"]
    _, schedules, _ = upgraded.call("GET", "/schedules", scopes=ADMIN)
    [fired] = [s for s in schedules["schedules"] if s["name"] == CONTEXT["schedule"]]
    assert [f["job_id"] for f in fired["last_firings"]] == [IDS["FIRED"]]


def test_v1_once_mark_still_marks_its_side_effect_done(upgraded: Pipeline, clock: ManualClock) -> None:
    first = upgraded.store.mark_once(
        IDS["RUNNING"], "welcome-email", now=clock.now(), expires_at=clock.now() + timedelta(days=1)
    )

    assert first is False


def test_v1_quota_counters_are_read_and_taken_from(upgraded: Pipeline, clock: ManualClock) -> None:
    quotas = DynamoDbQuotaCounters(upgraded.resources.table_name, client=upgraded.clients["dynamodb"])

    assert quotas.usage(TENANT) == Usage(open_jobs=3, delayed_jobs=1)
    assert quotas.take(TENANT, per_s=10, bucket=20, now_us=int(clock.now().timestamp() * 1_000_000)) == 0.0
    # The bucket's write set every attribute of its format: it is in the current one now.
    [bucket_key] = v1_items("quota_rate_buckets")
    bucket = upgraded.clients["dynamodb"].get_item(
        TableName=upgraded.resources.table_name, Key={"pk": {"S": bucket_key.split("/")[0]}, "sk": {"S": "#"}}
    )["Item"]
    assert bucket["v"] == {"N": "2"}


def test_v1_webhook_endpoint_signs_a_delivery_its_stored_secret_verifies(upgraded: Pipeline) -> None:
    [endpoints] = v1_items("webhook_endpoints").values()
    stored_secret = json.loads(endpoints["endpoints_json"]["S"])["orders"]["secrets"][0]["value"]
    store = DynamoDbWebhookStore(upgraded.resources.table_name, client=upgraded.clients["dynamodb"])
    sender = ScriptedSender([HttpResult(200, 4)])
    # Signed now: a receiver checks the signature's timestamp against its own clock.
    ports = DeliveryPorts(store, RecordingDeliveryQueue(), sender, ManualClock(datetime.now(UTC)), random.Random(7))
    delivery = Delivery(
        tenant=TENANT,
        endpoint="orders",
        event_id="evt_0002",
        type="job.succeeded",
        timestamp=datetime.now(UTC),
        data={"job_id": IDS["SUCCEEDED"], "status": "SUCCEEDED"},
    )

    outcome = deliver(delivery, ports, ReceiverPolicy(allow_loopback=False))

    assert outcome.result == "delivered"
    [(url, headers, body)] = sender.posted
    assert url == "https://hooks.example.com/offpath"
    assert Webhook(stored_secret).verify(body, headers)["data"]["job_id"] == IDS["SUCCEEDED"]
    # The v1 delivery log goes on: its failed attempt, then this one.
    log = store.delivery_log(TENANT, "orders")
    assert [(a.event_id, a.status_code) for a in log.attempts] == [("evt_0002", 200), ("evt_0001", 503)]
