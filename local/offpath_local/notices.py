"""Notices in the embedded runtime: the notifier and the delivery function in this process, and the two
stand-ins they are given here.

- The EventBridge bus is a stand-in: each entry the notifier would put on the bus (source `offpath`,
  detail-type `Job State Change`) is a line of `events.jsonl` in the data directory.
- The resolver is a stand-in: it resolves IP literals and `localhost` only and asks no DNS server, so a
  receiver is reached by its address (`http://127.0.0.1:PORT`); any other name does not resolve here.
"""

from __future__ import annotations

import importlib
import ipaddress
import json
import random
import threading
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from offpath.adapters.deliveries import event_detail
from offpath.domain.events import JobEvent
from offpath.naming import EVENT_DETAIL_TYPE, EVENT_SOURCE
from offpath.settings import Settings
from offpath_local.output import invocation

NOTIFIER_MODULE = "offpath.handlers.notifier"
DELIVERY_MODULE = "offpath.handlers.delivery"
EVENTS_FILE = "events.jsonl"


class LocalEventBus:
    """Stand-in for the EventBridge bus: one line per entry PutEvents would carry, in `events.jsonl`."""

    def __init__(self, path: Path, render: Any) -> None:
        self.path = path
        self.render = render
        self._lock = threading.Lock()

    def publish(self, events: Sequence[JobEvent]) -> None:
        stamp = datetime.now(UTC).isoformat().replace("+00:00", "Z")
        lines = [
            json.dumps(
                {
                    "time": stamp,
                    "source": EVENT_SOURCE,
                    "detail-type": EVENT_DETAIL_TYPE,
                    "detail": event_detail(event, self.render(event.job, False)),
                },
                separators=(",", ":"),
            )
            for event in events
        ]
        with self._lock, open(self.path, "a", encoding="utf-8") as record:
            record.write("".join(line + "\n" for line in lines))


class LoopbackResolver:
    """Stand-in for DNS: IP literals resolve to themselves, `localhost` to 127.0.0.1, nothing else resolves."""

    def resolve(self, host: str, port: int) -> list[str]:
        if host == "localhost":
            return ["127.0.0.1"]
        try:
            return [str(ipaddress.ip_address(host))]
        except ValueError:
            return []


class NotifierFunction:
    """The notifier, one environment (a stream shard is read in order, one batch at a time)."""

    def __init__(self, settings: Settings, data_dir: Path) -> None:
        from offpath.handlers.composition import Overrides, render_job

        self._module = importlib.import_module(NOTIFIER_MODULE)
        bus = LocalEventBus(data_dir / EVENTS_FILE, render_job)
        self._services = self._module.build_services(settings, Overrides(event_bus=bus))

    def __call__(self, event: dict[str, Any], context: Any) -> Any:
        with invocation("notifier"):
            return self._module.handler(event, context, services=self._services)


class DeliveryFunction:
    """The delivery function, with `concurrency` environments (each its own services)."""

    def __init__(self, settings: Settings, concurrency: int = 2, cipher: Any = None) -> None:
        import queue

        from offpath.handlers.composition import Overrides

        self._module = importlib.import_module(DELIVERY_MODULE)
        self._pool: queue.Queue[Any] = queue.Queue()
        for _ in range(max(1, concurrency)):
            overrides = Overrides(resolver=LoopbackResolver(), rng=random.Random, cipher=cipher)
            self._pool.put(self._module.build_services(settings, overrides))

    def __call__(self, event: dict[str, Any], context: Any) -> Any:
        services = self._pool.get()
        try:
            with invocation("delivery"):
                return self._module.handler(event, context, services=services)
        finally:
            self._pool.put(services)
