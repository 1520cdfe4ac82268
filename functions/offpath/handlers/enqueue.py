"""The EventBridge Scheduler target: a recurring schedule's slot, or a delayed job coming due.

Invoked asynchronously by the Scheduler. An exception makes Lambda retry the event and, when its
retries are spent, send it to the function's on-failure destination (which has an alarm).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from offpath import collector
from offpath.domain.ports import Ports
from offpath.handlers.composition import Overrides, build_ports, submit_policy
from offpath.logic.schedules import enqueue_delayed, fire_schedule
from offpath.logic.submit import SubmitPolicy
from offpath.observability import configure_logging
from offpath.settings import Settings


@dataclass
class EnqueueServices:
    ports: Ports
    policy: SubmitPolicy


@functools.lru_cache(maxsize=1)
@collector.during_init
def default_services() -> EnqueueServices:
    settings = Settings.from_env()
    configure_logging("enqueue", settings.log_level)
    return build_services(settings)


def build_services(settings: Settings, overrides: Overrides | None = None) -> EnqueueServices:
    return EnqueueServices(build_ports(settings, "enqueue", overrides), submit_policy(settings))


def handler(event: dict[str, Any], context: Any, services: EnqueueServices | None = None) -> dict[str, Any]:
    services = services or default_services()
    kind = event.get("kind")
    slot = str(event.get("scheduled_time") or "")
    try:
        if kind == "recurring":
            if not slot:
                raise ValueError("a recurring firing needs scheduled_time")
            outcome = fire_schedule(str(event["schedule"]), slot, services.ports, services.policy)
            return {"job_id": outcome.firing.job_id, "skipped": outcome.firing.skipped_reason}
        if kind == "delayed":
            job = enqueue_delayed(str(event["job_id"]), str(event["tenant"]), services.ports, services.policy)
            return {"job_id": job.job_id if job else None, "status": job.status.value if job else None}
        raise ValueError(f"unknown event kind {str(kind)[:40]!r}")
    finally:
        services.ports.metrics.flush()


# The init's imports are done: what they made is frozen and the collector runs again (offpath.collector).
collector.settle()
