"""Adapters and handlers against moto's in-process AWS (no event source mappings: see README)."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from offpath.adapters.dynamodb_store import DynamoDbJobStore
from offpath.adapters.scheduler import EventBridgeJobScheduler
from offpath.adapters.sqs_queue import SqsJobQueue, SqsQueueMonitor, SqsRedriver
from offpath.domain.clock import Clock, SystemClock
from offpath.domain.registry import Registry
from offpath.handlers import api, enqueue, sweeper, worker
from offpath.jobs import load_job_types
from offpath.logic.process import WorkerPolicy, WorkerPorts
from offpath.logic.submit import Ports, SubmitPolicy
from offpath.logic.sweep import SweepPolicy
from offpath.settings import Settings
from offpath_local.event_source import SqsEventSource
from offpath_local.resources import Resources, create_resources
from tests.http_events import body_of, http_event


class NoJitter(random.Random):
    """Backoff delays of zero, so retries are visible at once and tests need not wait."""

    def uniform(self, a: float, b: float) -> float:
        return 0.0


class RecordingMetrics:
    def __init__(self) -> None:
        self.counts: dict[str, float] = {}
        self.timings: dict[str, list[float]] = {}

    def count(self, name: str, value: float = 1, *, queue: str, job_type: str) -> None:
        self.counts[name] = self.counts.get(name, 0) + value

    def milliseconds(self, name: str, value: float, *, queue: str, job_type: str) -> None:
        self.timings.setdefault(name, []).append(value)

    def flush(self) -> None:
        pass


@pytest.fixture
def aws() -> Iterator[None]:
    with mock_aws():
        yield


@pytest.fixture
def registry() -> Registry:
    return load_job_types()


@pytest.fixture
def clients(aws: None) -> dict[str, Any]:
    return {"dynamodb": boto3.client("dynamodb"), "sqs": boto3.client("sqs")}


@pytest.fixture
def resources(clients: dict[str, Any], registry: Registry) -> Resources:
    return create_resources(clients["dynamodb"], clients["sqs"], registry)


@pytest.fixture
def store(resources: Resources, clients: dict[str, Any]) -> DynamoDbJobStore:
    return DynamoDbJobStore(resources.table_name, client=clients["dynamodb"])


@pytest.fixture
def queue(resources: Resources, clients: dict[str, Any]) -> SqsJobQueue:
    return SqsJobQueue(resources.queue_urls, resources.dlq_urls, client=clients["sqs"])


@pytest.fixture
def metrics() -> RecordingMetrics:
    return RecordingMetrics()


SCHEDULE_GROUP = "offpath-schedules"


class Pipeline:
    """Drives the real api and worker handlers against moto, as API Gateway and the ESM would."""

    def __init__(
        self,
        resources: Resources,
        clients: dict[str, Any],
        registry: Registry,
        metrics: RecordingMetrics,
        clock: Clock | None = None,
    ) -> None:
        self.resources = resources
        self.clients = clients
        self.registry = registry
        self.metrics = metrics
        self.store = DynamoDbJobStore(resources.table_name, client=clients["dynamodb"])
        self.queue = SqsJobQueue(resources.queue_urls, resources.dlq_urls, client=clients["sqs"])
        self.clock: Clock = clock or SystemClock()
        self.settings = Settings.model_validate(
            {"table_name": resources.table_name, "queue_urls": resources.queue_urls, "dlq_urls": resources.dlq_urls}
        )
        scheduler_client = boto3.client("scheduler")
        scheduler_client.create_schedule_group(Name=SCHEDULE_GROUP)
        self.scheduler = EventBridgeJobScheduler(
            SCHEDULE_GROUP,
            target_arn="arn:aws:lambda:us-east-1:123456789012:function:offpath-enqueue",
            role_arn="arn:aws:iam::123456789012:role/offpath-scheduler",
            dlq_arn="arn:aws:sqs:us-east-1:123456789012:offpath-schedules-dlq",
            client=scheduler_client,
        )
        self.ports = Ports(
            registry=registry,
            store=self.store,
            queue=self.queue,
            clock=self.clock,
            metrics=metrics,
            scheduler=self.scheduler,
        )
        self.api_services = api.ApiServices(
            ports=self.ports,
            policy=SubmitPolicy(payload_limit_bytes=self.settings.payload_limit_bytes),
            monitor=SqsQueueMonitor(resources.queue_urls, resources.dlq_urls, client=clients["sqs"]),
            redriver=SqsRedriver(resources.queue_urls, resources.dlq_urls, mode="copy", client=clients["sqs"]),
            settings=self.settings,
        )
        self.rng: random.Random = NoJitter()

    def enqueue(self, event: dict[str, Any]) -> dict[str, Any]:
        services = enqueue.EnqueueServices(self.ports, self.api_services.policy)
        return enqueue.handler(event, None, services=services)

    def sweep(self) -> dict[str, Any]:
        services = sweeper.SweeperServices(self.ports, SweepPolicy(grace=self.api_services.policy.sweep_grace))
        return sweeper.handler({"kind": "sweep"}, None, services=services)

    def call(self, method: str, path: str, **kwargs: Any) -> tuple[int, Any, dict[str, str]]:
        response = api.handler(http_event(method, path, **kwargs), None, services=self.api_services)
        return response["statusCode"], body_of(response), response.get("headers") or {}

    def submit(self, job_type: str, payload: dict[str, Any], **kwargs: Any) -> tuple[int, Any, dict[str, str]]:
        return self.call("POST", "/jobs", body={"type": job_type, "payload": payload}, **kwargs)

    def worker_services(self, queue_class: str) -> worker.WorkerServices:
        return worker.WorkerServices(
            ports=WorkerPorts(
                registry=self.registry,
                store=self.store,
                queue=self.queue,
                clock=self.clock,
                metrics=self.metrics,
                rng=self.rng,
            ),
            policy=WorkerPolicy(queue=queue_class, retention=self.settings.retention),
        )

    def event_source(self, queue_class: str) -> SqsEventSource:
        services = self.worker_services(queue_class)
        queue_settings = self.registry.queues[queue_class]
        return SqsEventSource(
            self.clients["sqs"],
            self.resources.queue_urls[queue_class],
            lambda event, context: worker.handler(event, context, services=services),
            function_name=f"worker-{queue_class}",
            batch_size=queue_settings.batch_size,
            batching_window_s=0,
            function_timeout_s=self.registry.worker_timeout_s(queue_class),
        )

    def drain(self, queue_class: str = "default", max_polls: int = 50) -> int:
        """Poll until the queue has nothing visible; returns how many batches were invoked."""
        source = self.event_source(queue_class)
        batches = 0
        for _ in range(max_polls):
            if source.poll_once().received == 0:
                break
            batches += 1
        return batches

    def dlq_bodies(self, queue_class: str = "default") -> list[dict[str, Any]]:
        import json

        response = self.clients["sqs"].receive_message(
            QueueUrl=self.resources.dlq_urls[queue_class],
            MaxNumberOfMessages=10,
            MessageAttributeNames=["All"],
            VisibilityTimeout=0,
        )
        return [
            {
                **json.loads(m["Body"]),
                "reason": m.get("MessageAttributes", {}).get("offpath-failure-reason", {}).get("StringValue"),
            }
            for m in response.get("Messages", [])
        ]


@pytest.fixture
def pipeline(resources: Resources, clients: dict[str, Any], registry: Registry, metrics: RecordingMetrics) -> Pipeline:
    return Pipeline(resources, clients, registry, metrics)
