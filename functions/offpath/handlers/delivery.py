"""Webhook deliveries: the delivery queue's messages, one signed request each (logic/webhooks.py), with
partial batch responses (a message is reported only when the store or the queue failed; a receiver's failure
is retried through the queue, on the delivery schedule)."""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from typing import Any

from offpath import collector
from offpath.domain.webhooks import Delivery
from offpath.handlers.composition import Overrides, build_delivery_ports, receiver_policy
from offpath.logic.webhooks import DeliveryPorts, ReceiverPolicy, deliver
from offpath.observability import configure_logging
from offpath.settings import Settings

logger = logging.getLogger("offpath.delivery")


@dataclass
class DeliveryServices:
    ports: DeliveryPorts
    policy: ReceiverPolicy


@functools.lru_cache(maxsize=1)
@collector.during_init
def default_services() -> DeliveryServices:
    settings = Settings.from_env()
    configure_logging("delivery", settings.log_level)
    return build_services(settings)


def build_services(settings: Settings, overrides: Overrides | None = None) -> DeliveryServices:
    return DeliveryServices(ports=build_delivery_ports(settings, overrides), policy=receiver_policy(settings))


def handler(event: dict[str, Any], context: Any, services: DeliveryServices | None = None) -> dict[str, Any]:
    services = services or default_services()
    failures: list[dict[str, str]] = []
    for record in event.get("Records", []):
        try:
            delivery = Delivery.from_json(record["body"])
        except (KeyError, TypeError, ValueError):
            logger.error("an unreadable delivery message; left out", extra={"message_id": record.get("messageId")})
            continue
        try:
            outcome = deliver(delivery, services.ports, services.policy)
        except Exception:
            logger.exception("a delivery could not be completed; it comes back", extra={"event_id": delivery.event_id})
            failures.append({"itemIdentifier": record["messageId"]})
            continue
        logger.info(
            "delivery %s",
            outcome.result,
            extra={
                "event_id": delivery.event_id,
                "endpoint": delivery.endpoint,
                "status": outcome.status,
                "job_id": delivery.data.get("job_id"),
            },
        )
    return {"batchItemFailures": failures}


# The init's imports are done: what they made is frozen and the collector runs again (offpath.collector).
collector.settle()
