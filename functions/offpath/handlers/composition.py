"""Building the ports from settings: the one place adapters are wired (the composition root).

Each handler builds its services here from its settings. On Lambda nothing is overridden; tests, benchmarks
and the local runtime pass `Overrides` (their own clients, clock, metrics, registry or jitter) and get the
same wiring otherwise.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, cast

from offpath import snapstart
from offpath.adapters import dynamodb_store, sqs_queue
from offpath.adapters.dynamodb_batches import DynamoDbBatchStore
from offpath.adapters.dynamodb_store import DynamoDbJobStore, from_item
from offpath.adapters.sqs_queue import SqsJobQueue, SqsQueueMonitor, SqsRedriver
from offpath.domain.clock import Clock, SystemClock
from offpath.domain.job import Job
from offpath.domain.ports import JobScheduler, JobStore, Metrics, Ports
from offpath.domain.registry import Registry
from offpath.handlers.job_json import job_document as render_job
from offpath.jobs import load_job_types
from offpath.observability import EmfMetrics
from offpath.settings import Settings

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient
    from mypy_boto3_scheduler.client import EventBridgeSchedulerClient
    from mypy_boto3_sqs.client import SQSClient

    from offpath.adapters.deliveries import SqsDeliveryQueue
    from offpath.adapters.dynamodb_quotas import DynamoDbQuotaCounters
    from offpath.adapters.webhook_http import Connector
    from offpath.domain.batch import Batch
    from offpath.domain.events import EventSink
    from offpath.domain.limits import LimitStore
    from offpath.domain.pauses import PauseStore, QueueSwitch
    from offpath.domain.quotas import QuotaCounters
    from offpath.domain.webhooks import DeliveryQueue, Resolver, SecretCipher, WebhookStore
    from offpath.logic.bulk import BulkServices
    from offpath.logic.process import WorkerPolicy, WorkerPorts
    from offpath.logic.quotas import CachedQuotaGate
    from offpath.logic.submit import SubmitPolicy
    from offpath.logic.sweep import SweepPolicy
    from offpath.logic.waiting import WaitSlots
    from offpath.logic.webhooks import DeliveryPorts, ReceiverPolicy


class OnFirstUse:
    """A client made the first time one of its methods is looked up: a request that never calls a service
    never pays for its client (botocore loads the service's model and endpoint rules: measured after a DynamoDB
    client, ~50 ms of CPU for SQS's, ~7 ms for the Scheduler's). Which clients a request needs is decided by
    the request, not the handler's init."""

    def __init__(self, make: Callable[[], Any]) -> None:
        self._make = make
        self._client: Any = None

    @property
    def made(self) -> bool:
        return self._client is not None

    def __getattr__(self, name: str) -> Any:
        if self._client is None:
            self._client = self._make()
        return getattr(self._client, name)


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
    # Notices: the resolver and connector of webhook deliveries, and the sink standing in for the event bus.
    resolver: Resolver | None = None
    connector: Connector | None = None
    event_bus: EventSink | None = None
    cipher: SecretCipher | None = None  # seals the endpoints' signing secrets (None: KMS, with the stack's key)
    # What follows a queue class's pause (None: the AWS switch, from the settings; the local runtime's poller switch).
    queue_switch: QueueSwitch | None = None

    def store(self, settings: Settings) -> JobStore:
        store: JobStore = DynamoDbJobStore(settings.table_name, client=self.dynamodb_client())
        book = settings.quota_book
        if book.counts:
            from offpath.logic.quotas import CountingStore

            store = CountingStore(store, book, self.quota_counters(settings))
        return self.wrap_store(store) if self.wrap_store else store

    def quota_counters(self, settings: Settings) -> DynamoDbQuotaCounters:
        from offpath.adapters.dynamodb_quotas import DynamoDbQuotaCounters

        return DynamoDbQuotaCounters(settings.table_name, client=self.dynamodb_client())

    def dynamodb_client(self) -> DynamoDBClient:
        """The DynamoDB client every store of one set of services shares (the job store's, the webhook store's,
        the quota counters'): one client, one service model loaded, where the api made one per store (~15 ms)."""
        if self.dynamodb is None:
            # Made here as on Lambda, at init: with SnapStart its pooled connections must not outlive a restore
            # (offpath.snapstart; the hooks are installed where the runtime has them). Clients made on first use
            # are made after any restore.
            self.dynamodb = snapstart.track_client(dynamodb_store.default_client())
            snapstart.register()
        return self.dynamodb

    def generator(self) -> random.Random:
        """The worker's random generator (backoff jitter); the default one is seeded again after a restore."""
        rng = self.rng()
        if self.rng is random.Random:
            snapstart.track_generator(rng)
        return rng

    def sqs_client(self) -> SQSClient:
        """The SQS client every SQS adapter of one set of services shares (made once, when first used: a worker
        whose jobs succeed never calls SQS itself; the event source mapping deletes their messages)."""
        if self.sqs is None:
            self.sqs = cast("SQSClient", OnFirstUse(sqs_queue.default_client))
        return self.sqs


def build_ports(settings: Settings, service: str, overrides: Overrides | None = None) -> Ports:
    o = overrides or Overrides()
    clock = o.clock or SystemClock()
    return Ports(
        registry=o.registry or load_job_types(demo=settings.demo_jobs),
        store=o.store(settings),
        queue=SqsJobQueue(settings.queue_urls, settings.dlq_urls, client=o.sqs_client()),
        clock=clock,
        metrics=o.metrics(service) if o.metrics else EmfMetrics(service, by_job_type=settings.metrics_by_job_type),
        scheduler=build_scheduler(settings, o),
        quotas=build_quota_gate(settings, clock, o),
        batches=build_batch_store(settings, o),
    )


def build_batch_store(settings: Settings, overrides: Overrides | None = None) -> DynamoDbBatchStore:
    return DynamoDbBatchStore(settings.table_name, client=(overrides or Overrides()).dynamodb_client())


def build_wait_slots(settings: Settings, overrides: Overrides | None = None) -> WaitSlots:
    """The count of each tenant's open waits (GET /jobs/{id}?wait=N), on the jobs table; built at the first
    wait."""
    from offpath.adapters.dynamodb_waits import DynamoDbWaitSlots

    return DynamoDbWaitSlots(settings.table_name, client=(overrides or Overrides()).dynamodb_client())


def build_quota_gate(settings: Settings, clock: Clock, overrides: Overrides | None = None) -> CachedQuotaGate | None:
    """The submit path's quota check; None when no quota is configured (nothing is counted or asked)."""
    book = settings.quota_book
    if not book.configured:
        return None
    from offpath.logic.quotas import CachedQuotaGate

    return CachedQuotaGate(book, (overrides or Overrides()).quota_counters(settings), clock)


def build_worker_ports(settings: Settings, overrides: Overrides | None = None) -> WorkerPorts:
    """The worker's ports for `settings.queue_class`."""
    from offpath.logic.process import WorkerPorts

    if settings.queue_class is None:
        raise RuntimeError("OFFPATH_QUEUE_CLASS is not set")
    o = overrides or Overrides()
    service = f"worker-{settings.queue_class}"
    rng = o.generator()
    from offpath.logic.pause import PauseFlags

    clock = o.clock or SystemClock()
    registry = o.registry or load_job_types(demo=settings.demo_jobs)
    return WorkerPorts(
        registry=registry,
        store=o.store(settings),
        queue=SqsJobQueue(settings.queue_urls, settings.dlq_urls, client=o.sqs_client()),
        clock=clock,
        metrics=o.metrics(service) if o.metrics else EmfMetrics(service, by_job_type=settings.metrics_by_job_type),
        rng=rng,
        batches=build_batch_store(settings, o),
        # What a job submits (ctx.submit, a chain's next job) is asked of the tenant's quotas like any submit.
        quotas=build_quota_gate(settings, clock, o),
        limits=build_limit_store(settings, registry, o),
        retention=settings.retention,
        pauses=PauseFlags(build_pause_store(settings, o), queue=settings.queue_class),
    )


def build_limit_store(settings: Settings, registry: Registry, overrides: Overrides | None = None) -> LimitStore | None:
    """The concurrency slots and rate-limit buckets of the queue class's job types; None when none declares a
    limit (its worker then neither imports nor calls anything for them)."""
    queue = settings.queue_class
    if not any(job_type.limits.declared for job_type in registry.job_types.values() if job_type.queue == queue):
        return None
    from offpath.adapters.dynamodb_limits import DynamoDbLimits

    return DynamoDbLimits(settings.table_name, client=(overrides or Overrides()).dynamodb_client())


def build_limit_reader(settings: Settings, overrides: Overrides | None = None) -> LimitStore:
    """The limits' items for the api, which only reads them (why a job waits, GET /jobs/{id})."""
    from offpath.adapters.dynamodb_limits import DynamoDbLimits

    return DynamoDbLimits(settings.table_name, client=(overrides or Overrides()).dynamodb_client())


def build_pause_store(settings: Settings, overrides: Overrides | None = None) -> PauseStore:
    from offpath.adapters.dynamodb_pauses import DynamoDbPauseStore

    return DynamoDbPauseStore(settings.table_name, client=(overrides or Overrides()).dynamodb_client())


def build_queue_switch(settings: Settings, registry: Registry, overrides: Overrides | None = None) -> QueueSwitch:
    """The switch a queue class's pause turns: the override (the local runtime's), else each queue class's event
    source mapping (OFFPATH_QUEUE_MAPPINGS) and its age alarm's actions (named from the stack's prefix)."""
    o = overrides or Overrides()
    if o.queue_switch is not None:
        return o.queue_switch
    from offpath.adapters.queue_switch import AwsQueueSwitch
    from offpath.naming import alarm_name, oldest_age_alarm_id

    alarms = {name: [alarm_name(settings.stack_prefix, oldest_age_alarm_id(name))] for name in registry.queues}
    return AwsQueueSwitch(settings.queue_mappings, alarms)


def build_scheduler(settings: Settings, overrides: Overrides | None = None) -> JobScheduler | None:
    if not (settings.schedule_group and settings.enqueue_function_arn and settings.scheduler_role_arn):
        return None
    from offpath.adapters import scheduler as scheduler_adapter

    return scheduler_adapter.EventBridgeJobScheduler(
        settings.schedule_group,
        target_arn=settings.enqueue_function_arn,
        role_arn=settings.scheduler_role_arn,
        dlq_arn=settings.schedule_dlq_arn,
        # A plain submit never calls the Scheduler: its client is made for the first delayed job or cancel.
        client=(overrides or Overrides()).scheduler
        or cast("EventBridgeSchedulerClient", OnFirstUse(scheduler_adapter.default_client)),
    )


def build_monitor(settings: Settings, overrides: Overrides | None = None) -> SqsQueueMonitor:
    return SqsQueueMonitor(settings.queue_urls, settings.dlq_urls, client=(overrides or Overrides()).sqs_client())


def build_redriver(settings: Settings, overrides: Overrides | None = None) -> SqsRedriver:
    client = (overrides or Overrides()).sqs_client()
    return SqsRedriver(settings.queue_urls, settings.dlq_urls, mode=settings.redrive_mode, client=client)


# The submit, sweep and worker use cases (and the Scheduler's adapter) are imported by the handlers that run
# them, not by every handler (a worker imports neither submit nor sweep: ~7 ms of its cold start; the api no
# worker use case, ~3 ms).


def submit_policy(settings: Settings) -> SubmitPolicy:
    from offpath.logic.submit import SubmitPolicy

    return SubmitPolicy(
        payload_limit_bytes=settings.payload_limit_bytes, sweep_grace=settings.sweep_grace, retention=settings.retention
    )


def worker_policy(settings: Settings) -> WorkerPolicy:
    from offpath.logic.process import WorkerPolicy

    if settings.queue_class is None:
        raise RuntimeError("OFFPATH_QUEUE_CLASS is not set")
    return WorkerPolicy(queue=settings.queue_class, retention=settings.retention, sweep_grace=settings.sweep_grace)


def sweep_policy(settings: Settings) -> SweepPolicy:
    from offpath.logic.sweep import SweepPolicy

    return SweepPolicy(grace=settings.sweep_grace, retention=settings.retention)


# -- notices: the notifier, webhook deliveries and the api's webhook routes ---------------------------
# Their adapters are imported by the builders that use them, not at the module's import: a worker or an api
# answering a submit imports none of them (the realtime adapter alone brought the api's response models into
# the worker's cold start: ~270 ms of imports).


@dataclass
class NotifierServices:
    read_item: Callable[[Mapping[str, Any]], Job]
    sinks: list[EventSink]
    # The jobs' lifecycle metrics (logic.notify.publish_metrics); None publishes none.
    metrics: Metrics | None = None
    # A batch by its tenant and id, read after a member's count for the batch events (None: none are made).
    read_batch: Callable[[str, str], Batch | None] | None = None


@dataclass
class WebhookServices:
    """What the api's webhook routes use: the endpoints, the receiver check and (for tests) the queue."""

    store: WebhookStore
    resolver: Resolver
    policy: ReceiverPolicy
    queue: DeliveryQueue | None
    # The token buckets that limit each tenant's test deliveries (None: not limited).
    test_rate: QuotaCounters | None = None


def receiver_policy(settings: Settings) -> ReceiverPolicy:
    from offpath.logic.webhooks import ReceiverPolicy

    policy = ReceiverPolicy(
        allow_loopback=settings.allow_loopback_receivers,
        retry_scale=settings.webhook_retry_scale,
        loopback_ports=settings.loopback_receiver_ports,
    )
    if settings.webhook_deadline_s is not None:
        policy = replace(policy, deadline_s=settings.webhook_deadline_s)
    return policy


def build_delivery_queue(settings: Settings, overrides: Overrides | None = None) -> SqsDeliveryQueue | None:
    if not settings.delivery_queue_url:
        return None
    from offpath.adapters.deliveries import SqsDeliveryQueue

    client = (overrides or Overrides()).sqs_client()
    return SqsDeliveryQueue(settings.delivery_queue_url, settings.delivery_dlq_url, client=client)


def secret_cipher(settings: Settings, overrides: Overrides) -> SecretCipher | None:
    """What seals the endpoints' signing secrets: the override (the embedded runtime's key file), else KMS with
    the stack's key (OFFPATH_WEBHOOK_SECRETS_KEY); None: stored as they are (tests without either)."""
    if overrides.cipher is not None:
        return overrides.cipher
    if not settings.webhook_secrets_key:
        return None
    from offpath.adapters.kms_secrets import KmsSecretCipher

    return KmsSecretCipher(settings.webhook_secrets_key)


def build_webhook_services(settings: Settings, overrides: Overrides | None = None) -> WebhookServices:
    from offpath.adapters.webhook_http import SystemResolver
    from offpath.adapters.webhook_store import DynamoDbWebhookStore

    o = overrides or Overrides()
    return WebhookServices(
        store=DynamoDbWebhookStore(settings.table_name, client=o.dynamodb_client(), cipher=secret_cipher(settings, o)),
        resolver=o.resolver or SystemResolver(),
        policy=receiver_policy(settings),
        queue=build_delivery_queue(settings, o),
        test_rate=o.quota_counters(settings),
    )


def build_notifier_services(settings: Settings, overrides: Overrides | None = None) -> NotifierServices:
    """The sinks: the event bus (when one is named, or the override standing in for it), then the webhook
    fan-out (when there is a delivery queue), then the realtime API (when the stack has one)."""
    from offpath.adapters.deliveries import EventBridgeSink
    from offpath.adapters.realtime import AppSyncEventsSink
    from offpath.adapters.webhook_store import DynamoDbWebhookStore
    from offpath.logic.notify import WebhookFanout

    o = overrides or Overrides()
    sinks: list[EventSink] = []
    if o.event_bus is not None:
        sinks.append(o.event_bus)
    elif settings.event_bus_name:
        sinks.append(EventBridgeSink(settings.event_bus_name, render_job))
    queue = build_delivery_queue(settings, o)
    if queue is not None:
        # The notifier never signs: it reads the endpoints without their secrets (and needs no key).
        store = DynamoDbWebhookStore(settings.table_name, client=o.dynamodb_client(), with_secrets=False)
        sinks.append(WebhookFanout(store, queue, o.clock or SystemClock(), render_job))
    if settings.realtime_url:
        # The stack's realtime API (AppSync Events): browsers subscribed to the jobs' channels.
        sinks.append(AppSyncEventsSink(settings.realtime_url))
    metrics = o.metrics("notifier") if o.metrics else EmfMetrics("notifier", by_job_type=settings.metrics_by_job_type)
    batches = build_batch_store(settings, o)
    return NotifierServices(
        read_item=from_item,
        sinks=sinks,
        metrics=metrics,
        read_batch=lambda tenant, batch_id: batches.get(batch_id, tenant=tenant),
    )


def build_delivery_ports(settings: Settings, overrides: Overrides | None = None) -> DeliveryPorts:
    from offpath.adapters.webhook_http import PinnedSender, SocketConnector, SystemResolver
    from offpath.adapters.webhook_store import DynamoDbWebhookStore
    from offpath.logic.webhooks import DeliveryPorts

    o = overrides or Overrides()
    queue = build_delivery_queue(settings, o)
    if queue is None:
        raise RuntimeError("OFFPATH_DELIVERY_QUEUE_URL is not set")
    sender = PinnedSender(
        o.resolver or SystemResolver(),
        o.connector or SocketConnector(),
        allow_loopback=settings.allow_loopback_receivers,
        loopback_ports=settings.loopback_receiver_ports,
    )
    return DeliveryPorts(
        store=DynamoDbWebhookStore(settings.table_name, client=o.dynamodb_client(), cipher=secret_cipher(settings, o)),
        queue=queue,
        sender=sender,
        clock=o.clock or SystemClock(),
        rng=o.rng(),
    )


def build_bulk_services(settings: Settings, ports: Ports, overrides: Overrides | None = None) -> BulkServices:
    """Bulk operations (POST /jobs/bulk; the sweeper continues them) on the jobs table, with the given ports."""
    from offpath.adapters.dynamodb_bulk import DynamoDbBulkStore
    from offpath.logic.bulk import BulkPolicy, BulkServices

    store = DynamoDbBulkStore(
        settings.table_name, client=(overrides or Overrides()).dynamodb_client(), retention=settings.retention
    )
    policy = BulkPolicy(sweep_grace=submit_policy(settings).sweep_grace, retention=settings.retention)
    return BulkServices(ports, store, policy)
