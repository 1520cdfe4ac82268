"""Building the ports from settings: the one place adapters are wired (the composition root)."""

from __future__ import annotations

from offpath.adapters.dynamodb_store import DynamoDbJobStore
from offpath.adapters.scheduler import EventBridgeJobScheduler
from offpath.adapters.sqs_queue import SqsJobQueue
from offpath.domain.clock import SystemClock
from offpath.domain.ports import JobScheduler
from offpath.jobs import load_job_types
from offpath.logic.submit import Ports, SubmitPolicy
from offpath.observability import EmfMetrics
from offpath.settings import Settings


def build_ports(settings: Settings, service: str) -> Ports:
    queue = SqsJobQueue(settings.queue_urls, settings.dlq_urls)
    return Ports(
        registry=load_job_types(demo=settings.demo_jobs),
        store=DynamoDbJobStore(settings.table_name),
        queue=queue,
        clock=SystemClock(),
        metrics=EmfMetrics(service),
        scheduler=build_scheduler(settings),
    )


def build_scheduler(settings: Settings) -> JobScheduler | None:
    if not (settings.schedule_group and settings.enqueue_function_arn and settings.scheduler_role_arn):
        return None
    return EventBridgeJobScheduler(
        settings.schedule_group,
        target_arn=settings.enqueue_function_arn,
        role_arn=settings.scheduler_role_arn,
        dlq_arn=settings.schedule_dlq_arn,
    )


def submit_policy(settings: Settings) -> SubmitPolicy:
    return SubmitPolicy(payload_limit_bytes=settings.payload_limit_bytes, sweep_grace=settings.sweep_grace)
