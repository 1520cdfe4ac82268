"""Building the ports from settings: the one place adapters are wired (the composition root).

Each handler builds its services here from its settings. On Lambda nothing is overridden; tests, benchmarks
and the local runtime pass `Overrides` (their own clients, clock, metrics, registry or jitter) and get the
same wiring otherwise.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from offpath.adapters import sqs_queue
from offpath.adapters.dynamodb_quotas import DynamoDbQuotaCounters
from offpath.adapters.dynamodb_store import DynamoDbJobStore
from offpath.adapters.scheduler import EventBridgeJobScheduler
from offpath.adapters.sqs_queue import SqsJobQueue, SqsQueueMonitor, SqsRedriver
from offpath.domain.clock import Clock, SystemClock
from offpath.domain.ports import JobScheduler, JobStore, Metrics, Ports
from offpath.domain.registry import Registry
from offpath.jobs import load_job_types
from offpath.logic.process import WorkerPolicy, WorkerPorts
from offpath.logic.quotas import CachedQuotaGate, CountingStore
from offpath.logic.submit import SubmitPolicy
from offpath.logic.sweep import SweepPolicy
from offpath.observability import EmfMetrics
from offpath.settings import Settings

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient
    from mypy_boto3_scheduler.client import EventBridgeSchedulerClient
    from mypy_boto3_sqs.client import SQSClient


@dataclass
class Overrides:
    """What replaces a production default; anything left None is built as on Lambda. `metrics` is called
    with the service's name ("api", "worker-default", ...); `rng` once per set of worker ports; `wrap_store`
    with the DynamoDB store, and what it returns is the store used (an observer, or a store that fails)."""

    dynamodb: DynamoDBClient | None = None
    sqs: SQSClient | None = None
    scheduler: EventBridgeSchedulerClient | None = None
    clock: Clock | None = None
    metrics: Callable[[str], Metrics] | None = None
    registry: Registry | None = None
    rng: Callable[[], random.Random] = field(default=random.Random)
    wrap_store: Callable[[JobStore], JobStore] | None = None

    def store(self, settings: Settings) -> JobStore:
        store: JobStore = DynamoDbJobStore(settings.table_name, client=self.dynamodb)
        book = settings.quota_book
        if book.counts:
            store = CountingStore(store, book, self.quota_counters(settings))
        return self.wrap_store(store) if self.wrap_store else store

    def quota_counters(self, settings: Settings) -> DynamoDbQuotaCounters:
        return DynamoDbQuotaCounters(settings.table_name, client=self.dynamodb)

    def sqs_client(self) -> SQSClient:
        """The SQS client every SQS adapter of one set of services shares (made once, when first asked for)."""
        if self.sqs is None:
            self.sqs = sqs_queue.default_client()
        return self.sqs


def build_ports(settings: Settings, service: str, overrides: Overrides | None = None) -> Ports:
    o = overrides or Overrides()
    clock = o.clock or SystemClock()
    return Ports(
        registry=o.registry or load_job_types(demo=settings.demo_jobs),
        store=o.store(settings),
        queue=SqsJobQueue(settings.queue_urls, settings.dlq_urls, client=o.sqs_client()),
        clock=clock,
        metrics=o.metrics(service) if o.metrics else EmfMetrics(service),
        scheduler=build_scheduler(settings, o),
        quotas=build_quota_gate(settings, clock, o),
    )


def build_quota_gate(settings: Settings, clock: Clock, overrides: Overrides | None = None) -> CachedQuotaGate | None:
    """The submit path's quota check; None when no quota is configured (nothing is counted or asked)."""
    book = settings.quota_book
    if not book.configured:
        return None
    return CachedQuotaGate(book, (overrides or Overrides()).quota_counters(settings), clock)


def build_worker_ports(settings: Settings, overrides: Overrides | None = None) -> WorkerPorts:
    """The worker's ports for `settings.queue_class`."""
    if settings.queue_class is None:
        raise RuntimeError("OFFPATH_QUEUE_CLASS is not set")
    o = overrides or Overrides()
    service = f"worker-{settings.queue_class}"
    return WorkerPorts(
        registry=o.registry or load_job_types(demo=settings.demo_jobs),
        store=o.store(settings),
        queue=SqsJobQueue(settings.queue_urls, settings.dlq_urls, client=o.sqs_client()),
        clock=o.clock or SystemClock(),
        metrics=o.metrics(service) if o.metrics else EmfMetrics(service),
        rng=o.rng(),
    )


def build_scheduler(settings: Settings, overrides: Overrides | None = None) -> JobScheduler | None:
    if not (settings.schedule_group and settings.enqueue_function_arn and settings.scheduler_role_arn):
        return None
    return EventBridgeJobScheduler(
        settings.schedule_group,
        target_arn=settings.enqueue_function_arn,
        role_arn=settings.scheduler_role_arn,
        dlq_arn=settings.schedule_dlq_arn,
        client=(overrides or Overrides()).scheduler,
    )


def build_monitor(settings: Settings, overrides: Overrides | None = None) -> SqsQueueMonitor:
    return SqsQueueMonitor(settings.queue_urls, settings.dlq_urls, client=(overrides or Overrides()).sqs_client())


def build_redriver(settings: Settings, overrides: Overrides | None = None) -> SqsRedriver:
    client = (overrides or Overrides()).sqs_client()
    return SqsRedriver(settings.queue_urls, settings.dlq_urls, mode=settings.redrive_mode, client=client)


def submit_policy(settings: Settings) -> SubmitPolicy:
    return SubmitPolicy(payload_limit_bytes=settings.payload_limit_bytes, sweep_grace=settings.sweep_grace)


def worker_policy(settings: Settings) -> WorkerPolicy:
    if settings.queue_class is None:
        raise RuntimeError("OFFPATH_QUEUE_CLASS is not set")
    return WorkerPolicy(queue=settings.queue_class, retention=settings.retention, sweep_grace=settings.sweep_grace)


def sweep_policy(settings: Settings) -> SweepPolicy:
    return SweepPolicy(grace=settings.sweep_grace, retention=settings.retention)
