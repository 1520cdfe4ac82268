"""Notices against moto: the webhook store's items, the table's stream read into the notifier (event bus and
delivery queue), and the delivery function's retries and DLQ on the real queues."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime
from typing import Any

import pytest

from offpath.adapters.deliveries import SqsDeliveryQueue
from offpath.adapters.dynamodb_store import DynamoDbJobStore
from offpath.adapters.webhook_store import DynamoDbWebhookStore, attempt_from_json
from offpath.domain.webhooks import Attempt, Endpoint, EndpointLimitError, HttpResult, Secret
from offpath.handlers import delivery, notifier
from offpath.handlers.composition import Overrides
from offpath.logic.submit import SubmitPolicy, SubmitRequest, submit_job
from offpath.logic.webhooks import DeliveryPorts, ReceiverPolicy
from offpath.settings import Settings
from offpath_local.resources import Resources, create_delivery_queues
from offpath_tools.clocks import ManualClock
from offpath_tools.webhook_fakes import ScriptedSender
from tests.integration.conftest import SESSION

SECRET = (Secret("whsec_c2VjcmV0IGZvciB0ZXN0cw=="),)


@pytest.fixture
def webhooks(resources: Resources, clients: dict[str, Any]) -> DynamoDbWebhookStore:
    return DynamoDbWebhookStore(resources.table_name, client=clients["dynamodb"])


@pytest.fixture
def delivery_queues(clients: dict[str, Any]) -> tuple[str, str]:
    return create_delivery_queues(clients["sqs"], "offpath")


def test_endpoints_are_one_item_per_tenant_bounded_and_replaceable(webhooks: DynamoDbWebhookStore) -> None:
    first = Endpoint("a", "https://example.com/a", ("job.succeeded",), secrets=SECRET)

    assert webhooks.put_endpoint("acme", first, limit=2) is False
    assert (
        webhooks.put_endpoint("acme", Endpoint("b", "https://example.com/b", ("job.failed",), secrets=SECRET), limit=2)
        is False
    )
    with pytest.raises(EndpointLimitError):
        webhooks.put_endpoint("acme", Endpoint("c", "https://example.com/c", ("job.failed",), secrets=SECRET), limit=2)
    assert webhooks.put_endpoint(
        "acme", Endpoint("a", "https://example.com/z", ("job.failed",), secrets=SECRET), limit=2
    )

    assert webhooks.endpoint("acme", "a") == Endpoint("a", "https://example.com/z", ("job.failed",), secrets=SECRET)
    assert webhooks.endpoints("other") == []
    assert webhooks.delete_endpoint("acme", "a") and not webhooks.delete_endpoint("acme", "a")
    assert [e.name for e in webhooks.endpoints("acme")] == ["b"]


def test_the_delivery_log_keeps_the_latest_attempts_and_since_when_they_fail(webhooks: DynamoDbWebhookStore) -> None:
    at = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
    for n in range(12):
        webhooks.record_attempt(
            "acme", "a", Attempt(f"evt_{n}", "job.succeeded", 1, at, 500, 10, "HTTP 500", at), succeeded=False
        )

    log = webhooks.delivery_log("acme", "a")
    assert [a.event_id for a in log.attempts][:2] == ["evt_11", "evt_10"] and len(log.attempts) == 10
    assert log.failing_since == at
    webhooks.record_attempt("acme", "a", Attempt("evt_ok", "job.succeeded", 1, at, 200, 10), succeeded=True)
    assert webhooks.delivery_log("acme", "a").failing_since is None


def test_a_new_endpoint_starts_with_an_empty_delivery_log_and_a_replaced_one_keeps_its_own(
    webhooks: DynamoDbWebhookStore,
) -> None:
    at = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
    webhooks.put_endpoint("acme", Endpoint("a", "https://example.com/a", ("job.succeeded",), secrets=SECRET), limit=2)
    webhooks.delete_endpoint("acme", "a")
    # A delivery that was in flight at the delete records its attempt after it.
    webhooks.record_attempt("acme", "a", Attempt("evt_late", "job.succeeded", 1, at, 200, 10), succeeded=True)

    assert not webhooks.put_endpoint(
        "acme", Endpoint("a", "https://example.com/a", ("job.succeeded",), secrets=SECRET), limit=2
    )
    assert webhooks.delivery_log("acme", "a").attempts == ()

    webhooks.record_attempt("acme", "a", Attempt("evt_1", "job.succeeded", 1, at, 200, 10), succeeded=True)
    assert webhooks.put_endpoint(
        "acme", Endpoint("a", "https://example.com/b", ("job.succeeded",), secrets=SECRET), limit=2
    )
    assert [a.event_id for a in webhooks.delivery_log("acme", "a").attempts] == ["evt_1"]


def test_the_delivery_log_keeps_each_attempts_job_and_reads_an_older_attempt_without_one(
    webhooks: DynamoDbWebhookStore,
) -> None:
    at = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
    webhooks.record_attempt(
        "acme", "j", Attempt("evt_1", "job.failed", 1, at, 200, 10, job_id="0123456789abcdef"), succeeded=True
    )
    log = webhooks.delivery_log("acme", "j")
    older = {"event_id": "evt_0", "type": "job.succeeded", "attempt": 1, "at": "2026-12-01T08:00:00.000000Z"}

    assert [(a.job_id, a.type) for a in log.attempts] == [("0123456789abcdef", "job.failed")]
    assert attempt_from_json(older).job_id is None


def test_a_job_change_on_the_stream_reaches_the_bus_and_the_delivery_queue(
    resources: Resources,
    clients: dict[str, Any],
    store: DynamoDbJobStore,
    webhooks: DynamoDbWebhookStore,
    delivery_queues: tuple[str, str],
    registry: Any,
) -> None:
    queue_url, dlq_url = delivery_queues
    webhooks.put_endpoint("acme", Endpoint("all", "https://example.com/", ("job.queued",), secrets=SECRET), limit=10)
    events_client = SESSION.client("events")
    settings = Settings(
        table_name=resources.table_name,
        queue_urls=resources.queue_urls,
        dlq_urls=resources.dlq_urls,
        event_bus_name="default",
        delivery_queue_url=queue_url,
        delivery_dlq_url=dlq_url,
    )
    ports = _ports(resources, clients, registry)
    submitted = submit_job(SubmitRequest(tenant="acme", type="demo.echo", payload={}), ports, SubmitPolicy())
    records = _stream_records(resources.table_name)
    put: list[dict[str, Any]] = []
    events_client.meta.events.register(
        "provide-client-params.events.PutEvents", lambda params, **_: put.extend(params["Entries"])
    )
    services = notifier.build_services(settings, Overrides(dynamodb=clients["dynamodb"], sqs=clients["sqs"]))
    services.sinks[0].client = events_client  # type: ignore[attr-defined]

    answer = notifier.handler({"Records": records}, None, services=services)

    assert answer == {"batchItemFailures": []}
    assert [json.loads(e["Detail"])["type"] for e in put] == ["job.queued"]
    message = clients["sqs"].receive_message(QueueUrl=queue_url)["Messages"][0]
    body = json.loads(message["Body"])
    assert (body["endpoint"], body["type"], body["data"]["job_id"]) == ("all", "job.queued", submitted.job.job_id)


def test_a_failed_delivery_comes_back_delayed_and_the_last_one_goes_to_the_dlq(
    resources: Resources, clients: dict[str, Any], webhooks: DynamoDbWebhookStore, delivery_queues: tuple[str, str]
) -> None:
    queue_url, dlq_url = delivery_queues
    webhooks.put_endpoint("acme", Endpoint("all", "https://example.com/", ("job.succeeded",), secrets=SECRET), limit=10)
    queue = SqsDeliveryQueue(queue_url, dlq_url, client=clients["sqs"])
    sender = ScriptedSender([HttpResult(500, 5), HttpResult(500, 5)])
    services = delivery.DeliveryServices(
        DeliveryPorts(webhooks, queue, sender, ManualClock(datetime.now(UTC)), random.Random(1)), ReceiverPolicy()
    )
    message = {
        "tenant": "acme",
        "endpoint": "all",
        "event_id": "evt_1",
        "type": "job.succeeded",
        "timestamp": "2026-12-01T09:00:00Z",
        "data": {"job_id": "a" * 32},
        "attempt": 1,
    }

    first = delivery.handler({"Records": [{"messageId": "m1", "body": json.dumps(message)}]}, None, services)
    last = delivery.handler(
        {"Records": [{"messageId": "m2", "body": json.dumps({**message, "attempt": 8})}]}, None, services
    )

    assert first == last == {"batchItemFailures": []}
    again = clients["sqs"].receive_message(QueueUrl=queue_url, AttributeNames=["All"])
    assert "Messages" not in again  # delayed (about 5 s): not visible yet
    dead = clients["sqs"].receive_message(QueueUrl=dlq_url, MessageAttributeNames=["All"])["Messages"][0]
    assert json.loads(dead["Body"])["attempt"] == 8
    assert "8 attempts failed" in dead["MessageAttributes"]["offpath-failure-reason"]["StringValue"]


def _stream_records(table_name: str) -> list[dict[str, Any]]:
    """The table's stream as moto records it (moto's in-process mock does not serve DynamoDB Streams' API; its
    server does, and the embedded runtime reads it there)."""
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.dynamodb.models import dynamodb_backends

    table = dynamodb_backends[DEFAULT_ACCOUNT_ID]["us-east-1"].get_table(table_name)
    return [dict(record.to_json()) for record in table.stream_shard.items]


def _ports(resources: Resources, clients: dict[str, Any], registry: Any) -> Any:
    from offpath.handlers.composition import build_ports
    from offpath_tools.fakes import RecordingMetrics

    settings = Settings(table_name=resources.table_name, queue_urls=resources.queue_urls, dlq_urls=resources.dlq_urls)
    overrides = Overrides(
        dynamodb=clients["dynamodb"], sqs=clients["sqs"], registry=registry, metrics=lambda _: RecordingMetrics()
    )
    return build_ports(settings, "api", overrides)
