"""The notifier: the job table's stream (DynamoDB Streams, new and old images, filtered to job items by the
event source mapping) → job events → the event bus and the webhook deliveries. Partial batch responses: the
first record whose events could not be published is reported, and the mapping retries from it. The jobs'
lifecycle metrics (logic.notify.record_metrics) are published here too, one EMF document per batch and queue."""

from __future__ import annotations

import functools
from typing import Any

from offpath import collector
from offpath.handlers.composition import NotifierServices, Overrides, build_notifier_services
from offpath.logic.notify import StreamRecord, change_of, notify, publish_metrics
from offpath.observability import configure_logging
from offpath.settings import Settings


@functools.lru_cache(maxsize=1)
@collector.during_init
def default_services() -> NotifierServices:
    settings = Settings.from_env()
    configure_logging("notifier", settings.log_level)
    return build_services(settings)


def build_services(settings: Settings, overrides: Overrides | None = None) -> NotifierServices:
    return build_notifier_services(settings, overrides)


def handler(event: dict[str, Any], context: Any, services: NotifierServices | None = None) -> dict[str, Any]:
    services = services or default_services()
    changes = [
        change_of(StreamRecord.of(record), services.read_item, services.read_batch)
        for record in event.get("Records", [])
    ]
    failed = notify(changes, services.sinks)
    if services.metrics is not None:
        publish_metrics(changes, services.metrics, failed)
    return {"batchItemFailures": [{"itemIdentifier": failed}] if failed is not None else []}


# The init's imports are done: what they made is frozen and the collector runs again (offpath.collector).
collector.settle()
