"""In-memory fakes of the notices ports (webhook store, delivery queue, resolver, connector, sender) for tests."""

from __future__ import annotations

import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from offpath.domain.webhooks import (
    Attempt,
    Delivery,
    DeliveryLog,
    Endpoint,
    EndpointLimitError,
    HttpResult,
)


class InMemoryWebhookStore:
    def __init__(self) -> None:
        self.items: dict[str, dict[str, Endpoint]] = {}
        self.logs: dict[tuple[str, str], DeliveryLog] = {}
        self.reads = 0

    def endpoints(self, tenant: str) -> list[Endpoint]:
        self.reads += 1
        return list(self.items.get(tenant, {}).values())

    def endpoint(self, tenant: str, name: str) -> Endpoint | None:
        self.reads += 1
        return self.items.get(tenant, {}).get(name)

    def put_endpoint(self, tenant: str, endpoint: Endpoint, *, limit: int) -> bool:
        endpoints = self.items.setdefault(tenant, {})
        replaced = endpoint.name in endpoints
        if not replaced and len(endpoints) >= limit:
            raise EndpointLimitError(limit)
        endpoints[endpoint.name] = endpoint
        if not replaced:
            self.logs.pop((tenant, endpoint.name), None)
        return replaced

    def update_endpoint(self, tenant: str, name: str, change: Callable[[Endpoint], Endpoint | None]) -> Endpoint | None:
        current = self.items.get(tenant, {}).get(name)
        updated = None if current is None else change(current)
        if updated is not None:
            self.items[tenant][name] = updated
        return updated

    def delete_endpoint(self, tenant: str, name: str) -> bool:
        self.logs.pop((tenant, name), None)
        return self.items.get(tenant, {}).pop(name, None) is not None

    def delivery_log(self, tenant: str, name: str) -> DeliveryLog:
        return self.logs.get((tenant, name), DeliveryLog())

    def record_attempt(self, tenant: str, name: str, attempt: Attempt, *, succeeded: bool) -> DeliveryLog:
        log = self.delivery_log(tenant, name).with_attempt(attempt, succeeded=succeeded)
        log = replace(log, version=log.version + 1)
        self.logs[(tenant, name)] = log
        return log


@dataclass
class RecordingDeliveryQueue:
    sent: list[tuple[Delivery, int]] = field(default_factory=list)
    dead: list[tuple[Delivery, str]] = field(default_factory=list)
    fail: bool = False

    def send(self, deliveries: Sequence[Delivery], delay_s: int = 0) -> None:
        if self.fail:
            raise RuntimeError("the delivery queue is down")
        self.sent.extend((d, delay_s) for d in deliveries)

    def dead_letter(self, delivery: Delivery, reason: str) -> None:
        self.dead.append((delivery, reason))


@dataclass
class FakeResolver:
    """Names to addresses, as a DNS server would answer (no packet is sent)."""

    answers: dict[str, list[str]] = field(default_factory=dict)
    asked: list[str] = field(default_factory=list)

    def resolve(self, host: str, port: int) -> list[str]:
        self.asked.append(host)
        return list(self.answers.get(host, []))


class ConnectorThatMustNotBeCalled:
    def connect(self, address: str, port: int, timeout_s: float) -> socket.socket:
        raise AssertionError(f"a connection to {address}:{port} was attempted")


@dataclass
class ScriptedSender:
    """Answers each post with the next result; records what was posted."""

    results: list[HttpResult] = field(default_factory=list)
    posted: list[tuple[str, dict[str, str], bytes]] = field(default_factory=list)

    def post(self, url: str, headers: dict[str, str], body: bytes, timeout_s: float) -> HttpResult:
        self.posted.append((url, headers, body))
        return self.results.pop(0) if self.results else HttpResult(200, 5)
