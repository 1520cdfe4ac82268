"""Batch notices: `batch.completed` and `batch.succeeded` from the table's stream, once each per batch (one id), on
the event bus and to the tenant's webhook endpoints that ask for them."""

from __future__ import annotations

import json
from typing import Any

from offpath.adapters.webhook_store import DynamoDbWebhookStore
from offpath.domain.webhooks import Endpoint, Secret
from offpath.handlers import notifier
from offpath.handlers.composition import Overrides
from offpath.settings import Settings
from offpath_local.resources import create_delivery_queues
from tests.integration.conftest import SESSION, Pipeline

SECRET = (Secret("whsec_c2VjcmV0IGZvciB0ZXN0cw=="),)


def stream_records(table_name: str) -> list[dict[str, Any]]:
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.dynamodb.models import dynamodb_backends

    table = dynamodb_backends[DEFAULT_ACCOUNT_ID]["us-east-1"].get_table(table_name)
    records = [dict(record.to_json()) for record in table.stream_shard.items]
    # The event source mapping's filter (offpath.naming.NOTIFIER_STREAM_FILTER): job items only.
    return [r for r in records if r["dynamodb"].get("NewImage", {}).get("pk", {}).get("S", "").startswith("JOB#")]


def notify(pipeline: Pipeline, queue_url: str, dlq_url: str) -> list[dict[str, Any]]:
    """Every stream record so far through the notifier (records in batches of 100, as the mapping sends them);
    the bus's entries."""
    events_client = SESSION.client("events")
    put: list[dict[str, Any]] = []
    events_client.meta.events.register(
        "provide-client-params.events.PutEvents", lambda params, **_: put.extend(params["Entries"])
    )
    settings = Settings(
        table_name=pipeline.resources.table_name,
        queue_urls=pipeline.resources.queue_urls,
        dlq_urls=pipeline.resources.dlq_urls,
        event_bus_name="default",
        delivery_queue_url=queue_url,
        delivery_dlq_url=dlq_url,
    )
    clients = pipeline.clients
    services = notifier.build_services(settings, Overrides(dynamodb=clients["dynamodb"], sqs=clients["sqs"]))
    services.sinks[0].client = events_client  # type: ignore[attr-defined]
    records = stream_records(pipeline.resources.table_name)
    for start in range(0, len(records), 100):
        assert notifier.handler({"Records": records[start : start + 100]}, None, services=services) == {
            "batchItemFailures": []
        }
    return put


def test_a_batch_s_notices_reach_the_bus_and_the_endpoint_once_each(pipeline: Pipeline) -> None:
    queue_url, dlq_url = create_delivery_queues(pipeline.clients["sqs"], "offpath")
    DynamoDbWebhookStore(pipeline.resources.table_name, client=pipeline.clients["dynamodb"]).put_endpoint(
        "tenant-a",
        Endpoint("batches", "https://example.com/", ("batch.completed", "batch.succeeded"), secrets=SECRET),
        limit=10,
    )
    _, batch, _ = pipeline.call(
        "POST", "/batches", body={"jobs": [{"type": "demo.echo", "payload": {"n": i}} for i in range(3)]}
    )
    pipeline.drain()

    put = notify(pipeline, queue_url, dlq_url)

    batch_events = [json.loads(e["Detail"]) for e in put if json.loads(e["Detail"])["type"].startswith("batch.")]
    assert sorted({(e["type"], e["id"]) for e in batch_events}) == sorted({(e["type"], e["id"]) for e in batch_events})
    assert sorted({e["type"] for e in batch_events}) == ["batch.completed", "batch.succeeded"]
    assert len({e["id"] for e in batch_events}) == 2
    completed = next(e for e in batch_events if e["type"] == "batch.completed")
    assert completed["batch"]["batch_id"] == batch["batch_id"]
    assert completed["batch"]["counts"] == {"SUCCEEDED": 3}
    messages = pipeline.clients["sqs"].receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10)["Messages"]
    delivered = [json.loads(m["Body"]) for m in messages]
    assert sorted(d["type"] for d in delivered) == ["batch.completed", "batch.succeeded"]
    assert {d["data"]["batch"]["batch_id"] for d in delivered} == {batch["batch_id"]}


def test_a_batch_with_a_failed_job_completes_without_succeeding(pipeline: Pipeline) -> None:
    queue_url, dlq_url = create_delivery_queues(pipeline.clients["sqs"], "offpath")
    jobs = [{"type": "demo.echo", "payload": {}}, {"type": "demo.poison", "payload": {"reason": "bad"}}]
    pipeline.call("POST", "/batches", body={"jobs": jobs})
    pipeline.drain()

    put = notify(pipeline, queue_url, dlq_url)

    assert sorted({json.loads(e["Detail"])["type"] for e in put if "batch" in json.loads(e["Detail"])}) == [
        "batch.completed"
    ]
