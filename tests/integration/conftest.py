"""Adapters and handlers against moto's in-process AWS (no event source mappings: see README)."""

from __future__ import annotations

import random
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import boto3
import pytest
from botocore.awsrequest import AWSPreparedRequest
from moto import mock_aws
from moto.core.botocore_stubber import BotocoreStubber

from offpath.adapters import dynamodb_store, sqs_queue
from offpath.adapters.dynamodb_store import DynamoDbJobStore
from offpath.adapters.sqs_queue import SqsJobQueue
from offpath.domain.clock import Clock, SystemClock
from offpath.domain.ports import JobStore
from offpath.domain.registry import Registry
from offpath.handlers import api, enqueue, sweeper, worker
from offpath.handlers.composition import Overrides
from offpath.jobs import load_job_types
from offpath.settings import Settings
from offpath_local import aws_calls as recorded_calls
from offpath_local.event_source import SqsEventSource
from offpath_local.resources import Resources, create_resources
from offpath_tools.fakes import NoJitter, RecordingMetrics
from offpath_tools.http_events import body_of, http_event

__all__ = ["Answer", "NoJitter", "Pipeline", "RecordingMetrics", "aws_calls", "operation_of", "sqs_event"]

# DynamoDB applies single-item conditional writes atomically; moto serves concurrent calls from
# several threads without a lock, so here they are served one at a time, as one table would.
_ONE_REQUEST_AT_A_TIME = threading.RLock()
# Functions that may answer a request in AWS's place, before moto sees it (see `aws_answers`).
Answer = tuple[int, dict[str, str], str]
_ANSWERS: list[Callable[[AWSPreparedRequest], Answer | None]] = []
# One boto3 session per test process, made after moto is imported (so moto's stub is among its handlers):
# its loader parses each service's model once. boto3.client() would build a new session in every test,
# since mock_aws drops boto3's default one, and that was half of each test's set-up.
SESSION = boto3.Session()
# The handlers called here run as their functions: their AWS calls are recorded as theirs (tests/conftest.py).
recorded_calls.attribute_handlers()


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    serve = BotocoreStubber.process_request

    def serve_one_at_a_time(self: BotocoreStubber, request: AWSPreparedRequest) -> Any:
        with _ONE_REQUEST_AT_A_TIME:
            for answer in list(_ANSWERS):
                response = answer(request)
                if response is not None:
                    return response
            return serve(self, request)

    monkeypatch.setattr(BotocoreStubber, "process_request", serve_one_at_a_time)
    _ANSWERS.clear()
    try:
        with mock_aws():
            yield
    finally:
        _ANSWERS.clear()


@pytest.fixture
def aws_answers(aws: None) -> list[Callable[[AWSPreparedRequest], Answer | None]]:
    """Append a function (request -> (status, headers, body) or None) to answer requests in AWS's
    place: a throttle or a 5xx that, as on AWS, changes nothing."""
    return _ANSWERS


def operation_of(request: AWSPreparedRequest) -> str:
    """The operation a request calls, from the JSON protocols' X-Amz-Target header
    (for example DynamoDB_20120810.PutItem or AmazonSQS.SendMessage)."""
    target = request.headers.get("X-Amz-Target", "")
    return target.decode() if isinstance(target, bytes) else str(target)


def aws_calls(*clients: Any) -> Counter[str]:
    """Counts every call the given clients make from now on, as "Service.Operation"."""
    calls: Counter[str] = Counter()
    lock = threading.Lock()

    def count(model: Any, **kwargs: Any) -> None:
        with lock:
            calls[f"{model.service_model.service_id}.{model.name}"] += 1

    for client in clients:
        client.meta.events.register("before-call", count)
    return calls


@pytest.fixture
def registry() -> Registry:
    return load_job_types(demo=True)


@pytest.fixture
def clients(aws: None) -> dict[str, Any]:
    # The adapters' own SDK configuration (standard retry mode, 3 attempts).
    return {
        "dynamodb": SESSION.client("dynamodb", config=dynamodb_store.SDK_CONFIG),
        "sqs": SESSION.client("sqs", config=sqs_queue.SDK_CONFIG),
    }


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
        self.clock: Clock = clock or SystemClock()
        scheduler_client = SESSION.client("scheduler")
        scheduler_client.create_schedule_group(Name=SCHEDULE_GROUP)
        self.settings = Settings(
            table_name=resources.table_name,
            queue_urls=resources.queue_urls,
            dlq_urls=resources.dlq_urls,
            schedule_group=SCHEDULE_GROUP,
            enqueue_function_arn="arn:aws:lambda:us-east-1:123456789012:function:offpath-enqueue",
            scheduler_role_arn="arn:aws:iam::123456789012:role/offpath-scheduler",
            schedule_dlq_arn="arn:aws:sqs:us-east-1:123456789012:offpath-schedules-dlq",
            redrive_mode="copy",
        )
        self.rng: random.Random = NoJitter()
        # The production wiring (handlers/composition.py), with moto's clients and the test's clock and metrics.
        self.overrides = Overrides(
            dynamodb=clients["dynamodb"],
            sqs=clients["sqs"],
            scheduler=scheduler_client,
            clock=self.clock,
            metrics=lambda _service: metrics,
            registry=registry,
            rng=lambda: self.rng,
            wrap_store=self._store,
        )
        self.api_services = api.build_services(self.settings, self.overrides)
        self.ports = self.api_services.ports
        self.store = self.ports.store
        self.queue = self.ports.queue
        self.scheduler = self.ports.scheduler
        # What the event source mapping delivered to the worker, and what the worker answered.
        self.delivered: dict[str, list[str]] = {}
        self.worker_responses: list[dict[str, Any]] = []

    def _store(self, built: JobStore) -> JobStore:
        """The services built after a test replaced `store` (with a store that fails on purpose) use its store."""
        return getattr(self, "store", built)

    def enqueue(self, event: dict[str, Any]) -> dict[str, Any]:
        return enqueue.handler(event, None, services=enqueue.build_services(self.settings, self.overrides))

    def sweep(self) -> dict[str, Any]:
        return sweeper.handler({"kind": "sweep"}, None, services=sweeper.build_services(self.settings, self.overrides))

    def call(self, method: str, path: str, **kwargs: Any) -> tuple[int, Any, dict[str, str]]:
        response = api.handler(http_event(method, path, **kwargs), None, services=self.api_services)
        return response["statusCode"], body_of(response), response.get("headers") or {}

    def submit(self, job_type: str, payload: dict[str, Any], **kwargs: Any) -> tuple[int, Any, dict[str, str]]:
        return self.call("POST", "/jobs", body={"type": job_type, "payload": payload}, **kwargs)

    def worker_services(self, queue_class: str) -> worker.WorkerServices:
        return worker.build_services(self.settings.replace(queue_class=queue_class), self.overrides)

    def event_source(self, queue_class: str) -> SqsEventSource:
        services = self.worker_services(queue_class)
        return SqsEventSource(
            self.clients["sqs"],
            self.resources.queue_urls[queue_class],
            self._recording_worker(queue_class, services),
            function_name=f"worker-{queue_class}",
            batch_size=self.registry.batch_size(queue_class),
            batching_window_s=0,
            function_timeout_s=self.registry.worker_timeout_s(queue_class),
        )

    def _recording_worker(self, queue_class: str, services: worker.WorkerServices) -> Any:
        def invoke(event: dict[str, Any], context: Any) -> dict[str, Any]:
            self.delivered.setdefault(queue_class, []).extend(r["receiptHandle"] for r in event["Records"])
            response = worker.handler(event, context, services=services)
            self.worker_responses.append(response)
            return response

        return invoke

    def receive(self, queue_class: str = "default", count: int = 10) -> list[dict[str, Any]]:
        """Receive messages as the event source mapping does (each receive counts; they go in flight)."""
        response = self.clients["sqs"].receive_message(
            QueueUrl=self.resources.queue_urls[queue_class],
            MaxNumberOfMessages=count,
            AttributeNames=["All"],
            MessageAttributeNames=["All"],
        )
        messages: list[dict[str, Any]] = response.get("Messages", [])
        return messages

    def invoke_worker(self, messages: list[dict[str, Any]], queue_class: str = "default") -> dict[str, Any]:
        """One worker invocation with these messages as its batch (the mapping's delete is not done)."""
        return worker.handler(sqs_event(messages), None, services=self.worker_services(queue_class))

    def visibility_timeout_passes(self, queue_class: str = "default") -> None:
        """Every message delivered through `drain` and not deleted becomes visible again, as it
        does on SQS when its visibility timeout ends."""
        for receipt_handle in self.delivered.get(queue_class, []):
            try:
                self.clients["sqs"].change_message_visibility(
                    QueueUrl=self.resources.queue_urls[queue_class], ReceiptHandle=receipt_handle, VisibilityTimeout=0
                )
            except self.clients["sqs"].exceptions.ClientError:
                pass  # deleted, or already visible

    def depth(self, queue_class: str = "default") -> tuple[int, int]:
        """(visible, in flight) messages on the queue."""
        attributes = self.clients["sqs"].get_queue_attributes(
            QueueUrl=self.resources.queue_urls[queue_class],
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        return int(attributes["ApproximateNumberOfMessages"]), int(attributes["ApproximateNumberOfMessagesNotVisible"])

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


def sqs_event(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The event the SQS event source mapping invokes the worker with."""
    return {
        "Records": [
            {
                "messageId": m["MessageId"],
                "receiptHandle": m["ReceiptHandle"],
                "body": m["Body"],
                "attributes": m.get("Attributes", {}),
                "messageAttributes": m.get("MessageAttributes", {}),
                "eventSource": "aws:sqs",
            }
            for m in messages
        ]
    }


@pytest.fixture
def pipeline(resources: Resources, clients: dict[str, Any], registry: Registry, metrics: RecordingMetrics) -> Pipeline:
    return Pipeline(resources, clients, registry, metrics)
