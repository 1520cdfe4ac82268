"""One tenant's oversized fan-out against moto's SQS: it never fails the stream record it came from (another
tenant's delivery of the same batch goes out), and a delivery SQS cannot take goes to the DLQ alone."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from offpath.adapters.deliveries import SqsDeliveryQueue
from offpath.adapters.dynamodb_store import DynamoDbJobStore
from offpath.adapters.webhook_store import DynamoDbWebhookStore
from offpath.domain.webhooks import Delivery, Endpoint, Secret
from offpath.handlers import notifier
from offpath.handlers.composition import Overrides
from offpath.logic.submit import SubmitPolicy, SubmitRequest, submit_job
from offpath.settings import Settings
from offpath_local.resources import Resources, create_delivery_queues
from tests.integration.test_notices import _ports, _stream_records

SECRET = (Secret("whsec_c2VjcmV0IGZvciB0ZXN0cw=="),)
EMOJI = "\U0001f600"


@pytest.fixture
def delivery_queues(clients: dict[str, Any]) -> tuple[str, str]:
    return create_delivery_queues(clients["sqs"], "offpath")


def received(sqs: Any, url: str) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    while batch := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, MessageAttributeNames=["All"]).get(
        "Messages"
    ):
        messages += batch
    return messages


def test_a_tenants_oversized_fan_out_and_another_tenants_event_in_one_batch_are_all_sent(
    resources: Resources,
    clients: dict[str, Any],
    store: DynamoDbJobStore,
    delivery_queues: tuple[str, str],
    registry: Any,
) -> None:
    queue_url, dlq_url = delivery_queues
    webhooks = DynamoDbWebhookStore(resources.table_name, client=clients["dynamodb"])
    for n in range(10):
        hook = Endpoint(f"big{n}", "https://example.com/", ("job.queued",), include_payload=True, secrets=SECRET)
        webhooks.put_endpoint("tenant-a", hook, limit=10)
    webhooks.put_endpoint(
        "tenant-b", Endpoint("small", "https://example.com/", ("job.queued",), secrets=SECRET), limit=10
    )
    ports = _ports(resources, clients, registry)
    big = submit_job(
        SubmitRequest(tenant="tenant-a", type="demo.echo", payload={"text": EMOJI * 16_000}), ports, SubmitPolicy()
    )
    small = submit_job(SubmitRequest(tenant="tenant-b", type="demo.echo", payload={}), ports, SubmitPolicy())
    settings = Settings(
        table_name=resources.table_name,
        queue_urls=resources.queue_urls,
        dlq_urls=resources.dlq_urls,
        delivery_queue_url=queue_url,
        delivery_dlq_url=dlq_url,
    )
    services = notifier.build_services(settings, Overrides(dynamodb=clients["dynamodb"], sqs=clients["sqs"]))

    answer = notifier.handler({"Records": _stream_records(resources.table_name)}, None, services=services)

    assert answer == {"batchItemFailures": []}
    bodies = [json.loads(m["Body"]) for m in received(clients["sqs"], queue_url)]
    per_tenant = {(b["tenant"], b["data"]["job_id"]) for b in bodies}
    assert per_tenant == {("tenant-a", big.job.job_id), ("tenant-b", small.job.job_id)}
    assert len(bodies) == 11
    assert all(b["data"]["payload"] == {"text": EMOJI * 16_000} for b in bodies if b["tenant"] == "tenant-a")
    assert received(clients["sqs"], dlq_url) == []


def test_a_delivery_sqs_cannot_take_goes_to_the_dlq_alone_the_others_are_sent(
    clients: dict[str, Any], delivery_queues: tuple[str, str]
) -> None:
    queue_url, dlq_url = delivery_queues
    queue = SqsDeliveryQueue(queue_url, dlq_url, client=clients["sqs"])
    at = datetime(2026, 12, 2, tzinfo=UTC)
    huge = Delivery("tenant-a", "big", "evt_huge", "job.succeeded", at, {"job_id": "j1", "blob": "x" * 300_000})
    normal = [Delivery("tenant-b", "small", f"evt_{n}", "job.succeeded", at, {"job_id": f"k{n}"}) for n in range(3)]

    queue.send([normal[0], huge, *normal[1:]])

    sent = [json.loads(m["Body"])["event_id"] for m in received(clients["sqs"], queue_url)]
    assert sorted(sent) == ["evt_0", "evt_1", "evt_2"]
    (dead,) = received(clients["sqs"], dlq_url)
    assert json.loads(dead["Body"])["data"] == {"job_id": "j1", "omitted": ["blob"]}
    reason = dead["MessageAttributes"]["offpath-failure-reason"]["StringValue"]
    assert "over SQS's 262144" in reason
