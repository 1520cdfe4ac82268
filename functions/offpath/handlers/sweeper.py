"""The sweeper, run by EventBridge Scheduler every minute (see logic/sweep.py). After the sweep it continues the
bulk operations whose runner finished its slice or died (logic/bulk.py `resume`)."""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from offpath import collector
from offpath.domain.ports import Ports
from offpath.handlers.composition import Overrides, build_bulk_services, build_ports, sweep_policy
from offpath.logic.sweep import SweepPolicy, sweep
from offpath.observability import configure_logging
from offpath.settings import Settings

if TYPE_CHECKING:
    from offpath.logic.bulk import BulkServices

logger = logging.getLogger("offpath.sweeper")


@dataclass
class SweeperServices:
    ports: Ports
    policy: SweepPolicy
    bulk: BulkServices | None = None


@functools.lru_cache(maxsize=1)
@collector.during_init
def default_services() -> SweeperServices:
    settings = Settings.from_env()
    configure_logging("sweeper", settings.log_level)
    return build_services(settings)


def build_services(settings: Settings, overrides: Overrides | None = None) -> SweeperServices:
    ports = build_ports(settings, "sweeper", overrides)
    return SweeperServices(ports, sweep_policy(settings), build_bulk_services(settings, ports, overrides))


def handler(event: dict[str, Any], context: Any, services: SweeperServices | None = None) -> dict[str, Any]:
    services = services or default_services()
    bulk_operations = 0
    try:
        report = sweep(services.ports, services.policy)
        if services.bulk is not None:
            from offpath.logic.bulk import resume

            try:
                bulk_operations = resume(services.bulk, seconds=_bulk_seconds(services.bulk, context))
            except Exception:  # the open operations could not be read: the next sweep tries again
                logger.exception("bulk operations not continued")
    finally:
        services.ports.metrics.flush()
    return {**vars(report), "stuck": report.stuck, "bulk_operations": bulk_operations}


# What a sweep leaves unspent of its function's time when it continues bulk operations (a runner cut off by the
# timeout loses nothing: its operation goes on from its checkpoint at the next sweep, but it is logged as an error).
BULK_MARGIN_S = 10.0


def _bulk_seconds(bulk: BulkServices, context: Any) -> float:
    """The policy's time for bulk operations, within what is left of this invocation (less BULK_MARGIN_S)."""
    remaining = getattr(context, "get_remaining_time_in_millis", None)
    if remaining is None:
        return bulk.policy.sweep_s
    left = float(remaining()) / 1000 - BULK_MARGIN_S
    return max(0.0, min(bulk.policy.sweep_s, left))


# The init's imports are done: what they made is frozen and the collector runs again (offpath.collector).
collector.settle()
