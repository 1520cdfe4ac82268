"""`POST /webhooks/{name}/test` through the api handler against moto: a tenant's test deliveries are limited (a
token bucket, 6 a minute with a burst of 3, on the jobs table), so the route cannot be made to send a stream of
requests to any URL a tenant registers; past it 429 with Retry-After and nothing is queued."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from offpath.handlers import api
from offpath.handlers.composition import Overrides
from offpath.logic.webhooks import TEST_BURST
from offpath_local.notices import LoopbackResolver
from offpath_local.resources import Resources, create_delivery_queues
from offpath_tools.clocks import ManualClock
from tests.integration.conftest import Pipeline, RecordingMetrics

JSON = {"content-type": "application/json"}


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(datetime.now(UTC).replace(microsecond=0))


@pytest.fixture
def hooks(
    resources: Resources, clients: dict[str, Any], registry: Any, metrics: RecordingMetrics, clock: ManualClock
) -> Pipeline:
    """A pipeline whose api has a delivery queue, allows loopback receivers, and runs on the test's clock."""
    pipeline = Pipeline(resources, clients, registry, metrics, clock=clock)
    queue_url, dlq_url = create_delivery_queues(clients["sqs"], "offpath")
    pipeline.settings = pipeline.settings.replace(
        delivery_queue_url=queue_url,
        delivery_dlq_url=dlq_url,
        allow_loopback_receivers=True,
        loopback_receiver_ports=[9],
    )
    overrides = Overrides(**{**vars(pipeline.overrides), "resolver": LoopbackResolver()})
    pipeline.api_services = api.build_services(pipeline.settings, overrides)
    return pipeline


def register(pipeline: Pipeline, name: str, tenant: str = "tenant-a") -> None:
    body = {"url": f"http://127.0.0.1:9/{name}", "events": ["job.succeeded"]}
    status, answer, _ = pipeline.call("PUT", f"/webhooks/{name}", body=body, headers=JSON, tenant=tenant)
    assert status == 201, answer


def queued(pipeline: Pipeline) -> int:
    url = pipeline.settings.delivery_queue_url
    attributes = pipeline.clients["sqs"].get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"]) + int(attributes["ApproximateNumberOfMessagesDelayed"])


def test_past_the_burst_a_test_delivery_is_refused_with_retry_after_and_nothing_is_queued(
    hooks: Pipeline, clock: ManualClock
) -> None:
    register(hooks, "one")
    register(hooks, "two")
    # The burst is the tenant's, over all its endpoints
    sent = [hooks.call("POST", f"/webhooks/{'one' if n % 2 else 'two'}/test")[0] for n in range(TEST_BURST)]

    status, body, headers = hooks.call("POST", "/webhooks/one/test")

    assert sent == [202] * TEST_BURST
    assert status == 429
    assert body["error"] == {
        "code": "quota_exceeded",
        "message": "over the limit of 6 test deliveries a minute (burst 3)",
        "field": "test",
    }
    assert headers["Retry-After"] == "10"
    assert queued(hooks) == TEST_BURST


def test_another_tenants_tests_are_not_limited_by_it_and_the_bucket_refills(
    hooks: Pipeline, clock: ManualClock
) -> None:
    register(hooks, "mine")
    register(hooks, "theirs", tenant="tenant-b")
    for _ in range(TEST_BURST):
        assert hooks.call("POST", "/webhooks/mine/test")[0] == 202
    assert hooks.call("POST", "/webhooks/mine/test")[0] == 429

    assert hooks.call("POST", "/webhooks/theirs/test", tenant="tenant-b")[0] == 202
    clock.advance(10)
    assert hooks.call("POST", "/webhooks/mine/test")[0] == 202
    assert hooks.call("POST", "/webhooks/mine/test")[0] == 429
