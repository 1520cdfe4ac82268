"""The sweeper, run by EventBridge Scheduler every minute (see logic/sweep.py)."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from offpath import collector
from offpath.domain.ports import Ports
from offpath.handlers.composition import Overrides, build_ports, sweep_policy
from offpath.logic.sweep import SweepPolicy, sweep
from offpath.observability import configure_logging
from offpath.settings import Settings


@dataclass
class SweeperServices:
    ports: Ports
    policy: SweepPolicy


@functools.lru_cache(maxsize=1)
@collector.during_init
def default_services() -> SweeperServices:
    settings = Settings.from_env()
    configure_logging("sweeper", settings.log_level)
    return build_services(settings)


def build_services(settings: Settings, overrides: Overrides | None = None) -> SweeperServices:
    return SweeperServices(build_ports(settings, "sweeper", overrides), sweep_policy(settings))


def handler(event: dict[str, Any], context: Any, services: SweeperServices | None = None) -> dict[str, Any]:
    services = services or default_services()
    try:
        report = sweep(services.ports, services.policy)
    finally:
        services.ports.metrics.flush()
    return {**vars(report), "stuck": report.stuck}


# The init's imports are done: what they made is frozen and the collector runs again (offpath.collector).
collector.settle()
