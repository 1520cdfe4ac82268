"""Webhook endpoints (register, replace, rotate, delete, test) and the delivery of one message.

A delivery is made from the delivery queue: the endpoint is read fresh (its URL, its secrets, whether it is
enabled), the body signed with every valid secret, the receiver's address resolved and checked, and the
request sent to the checked address. A failure is tried again on the schedule of domain/webhooks.py, through
the queue: a delay of up to 15 minutes is the message's own (SQS DelaySeconds); a longer one is waited in
hops of 15 minutes (the message carries its `not_before`, and is sent again while that is ahead). The last
failure, and any delivery to a disabled endpoint, goes to the delivery queue's DLQ with the reason.
"""

from __future__ import annotations

import logging
import math
import random
import uuid
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from offpath.domain.clock import Clock
from offpath.domain.errors import InvalidRequestError, WebhookNotFoundError
from offpath.domain.quotas import QuotaCounters, QuotaExceededError
from offpath.domain.webhooks import (
    DELIVERY_TIMEOUT_S,
    GONE,
    MAX_ENDPOINTS_PER_TENANT,
    NAME_PATTERN,
    SUBSCRIBABLE,
    TEST_EVENT,
    Attempt,
    Delivery,
    DeliveryLog,
    DeliveryQueue,
    Endpoint,
    EndpointLimitError,
    RefusedUrlError,
    Resolver,
    Secret,
    Sender,
    WebhookStore,
    body_of,
    checked_url,
    default_port,
    disabled,
    is_success,
    new_secret,
    parse_retry_after,
    refusal_of_all,
    refusal_of_port,
    retry_delay_s,
    rotated,
    signed_headers,
)

logger = logging.getLogger("offpath.webhooks")

# SQS DelaySeconds' ceiling: a longer wait is made of several hops.
MAX_MESSAGE_DELAY_S = 900


@dataclass(frozen=True)
class ReceiverPolicy:
    """Where deliveries may go: `allow_loopback` only in the embedded runtime (http://127.0.0.1 receivers, on
    `loopback_ports` only: the ports the operator named). `deadline_s`: a delivery's whole time (connect, send,
    read)."""

    allow_loopback: bool = False
    retry_scale: float = 1.0
    loopback_ports: frozenset[int] = frozenset()
    deadline_s: float = DELIVERY_TIMEOUT_S


@dataclass(frozen=True)
class EndpointRequest:
    name: str
    url: str
    events: tuple[str, ...]
    job_types: tuple[str, ...] = ()
    include_payload: bool = False


@dataclass(frozen=True)
class PutOutcome:
    endpoint: Endpoint
    replaced: bool


def checked_name(name: str) -> str:
    if not NAME_PATTERN.fullmatch(name):
        raise WebhookNotFoundError(name)
    return name


def check_receiver(url: str, resolver: Resolver, policy: ReceiverPolicy) -> None:
    """Raises RefusedUrlError when the URL's form or any address its host resolves to is refused."""
    parts = checked_url(url, allow_loopback=policy.allow_loopback)
    host = parts.hostname or ""
    port = default_port(parts)
    addresses = resolver.resolve(host, port)
    reason = refusal_of_all(addresses, allow_loopback=policy.allow_loopback)
    if reason is None and policy.allow_loopback:
        reason = next((r for a in addresses if (r := refusal_of_port(a, port, policy.loopback_ports))), None)
    if reason is not None:
        raise RefusedUrlError(f"url is refused: {reason}")


def put_endpoint(
    tenant: str,
    request: EndpointRequest,
    *,
    store: WebhookStore,
    resolver: Resolver,
    policy: ReceiverPolicy,
    known_job_types: set[str],
    clock: Clock,
) -> PutOutcome:
    """Adds or replaces the endpoint (a replaced one keeps its secrets and is enabled again)."""
    if not NAME_PATTERN.fullmatch(request.name):
        raise InvalidRequestError("name", "name must be 1 to 64 of a-z 0-9 _ -, starting with a letter or digit")
    unknown = [kind for kind in request.events if kind not in SUBSCRIBABLE]
    if unknown or not request.events:
        raise InvalidRequestError("events", f"events must name one or more of {', '.join(sorted(SUBSCRIBABLE))}")
    strange = [name for name in request.job_types if name not in known_job_types]
    if strange:
        raise InvalidRequestError("job_types", "job_types names a job type that is not registered")
    try:
        check_receiver(request.url, resolver, policy)
    except RefusedUrlError as error:
        raise InvalidRequestError("url", str(error)) from None
    now = clock.now()
    existing = store.endpoint(tenant, request.name)
    endpoint = Endpoint(
        name=request.name,
        url=request.url,
        events=tuple(dict.fromkeys(request.events)),
        job_types=tuple(dict.fromkeys(request.job_types)),
        include_payload=request.include_payload,
        secrets=existing.secrets if existing else (Secret(new_secret()),),
        created_at=existing.created_at if existing else now,
        updated_at=now,
    )
    try:
        replaced = store.put_endpoint(tenant, endpoint, limit=MAX_ENDPOINTS_PER_TENANT)
    except EndpointLimitError as error:
        raise InvalidRequestError("name", str(error), code="too_many_endpoints") from None
    return PutOutcome(endpoint, replaced)


def get_endpoint(tenant: str, name: str, store: WebhookStore) -> Endpoint:
    endpoint = store.endpoint(tenant, checked_name(name))
    if endpoint is None:
        raise WebhookNotFoundError(name)
    return endpoint


def rotate_secret(tenant: str, name: str, *, store: WebhookStore, clock: Clock) -> Endpoint:
    """A new secret for the endpoint as stored at the write (a delete or a replacement meanwhile is not undone)."""
    now = clock.now()
    endpoint = store.update_endpoint(tenant, checked_name(name), lambda current: rotated(current, now))
    if endpoint is None:
        raise WebhookNotFoundError(name)
    return endpoint


def delete_endpoint(tenant: str, name: str, store: WebhookStore) -> None:
    if not store.delete_endpoint(tenant, checked_name(name)):
        raise WebhookNotFoundError(name)


# A tenant's test deliveries (`POST /webhooks/{name}/test`, over all its endpoints): a token bucket of
# TESTS_PER_MINUTE with a burst of TEST_BURST, so the route cannot be used to send a stream of requests to a URL.
TESTS_PER_MINUTE = 6
TEST_BURST = 3
TEST_BUCKET = "#webhook-test"  # the bucket's name beside the tenant's submit bucket (no tenant id holds '#')


def send_test(
    tenant: str,
    name: str,
    *,
    store: WebhookStore,
    queue: DeliveryQueue,
    clock: Clock,
    rate: QuotaCounters | None = None,
) -> Delivery:
    """A `webhook.test` event for this endpoint, whatever it subscribes to. Past the tenant's rate of tests
    (`rate`'s token bucket) QuotaExceededError (field `test`), and nothing is sent."""
    endpoint = get_endpoint(tenant, name, store)
    now = clock.now()
    if rate is not None:
        wait = rate.take(
            tenant + TEST_BUCKET,
            per_s=TESTS_PER_MINUTE / 60,
            bucket=TEST_BURST,
            now_us=int(now.timestamp() * 1_000_000),
        )
        if wait > 0:
            raise QuotaExceededError(
                "test",
                f"over the limit of {TESTS_PER_MINUTE} test deliveries a minute (burst {TEST_BURST})",
                math.ceil(wait),
            )
    delivery = Delivery(
        tenant=tenant,
        endpoint=endpoint.name,
        event_id=f"evt_test_{uuid.uuid4().hex}",
        type=TEST_EVENT,
        timestamp=now,
        data={"endpoint": endpoint.name, "message": "a test delivery from offpath"},
    )
    queue.send([delivery])
    return delivery


def delivery_log(tenant: str, name: str, store: WebhookStore) -> DeliveryLog:
    get_endpoint(tenant, name, store)
    return store.delivery_log(tenant, name)


# -- delivering --------------------------------------------------------------------------------


@dataclass(frozen=True)
class DeliveryPorts:
    store: WebhookStore
    queue: DeliveryQueue
    sender: Sender
    clock: Clock
    rng: random.Random


@dataclass(frozen=True)
class DeliveryOutcome:
    """`result`: delivered, retrying, waiting (a hop of a long delay), dead_lettered, disabled or dropped."""

    result: str
    status: int | None = None
    next_retry_at: datetime | None = None


def deliver(delivery: Delivery, ports: DeliveryPorts, policy: ReceiverPolicy) -> DeliveryOutcome:
    """One message of the delivery queue. Raises only when the store or the queue fails (the message then
    comes back, as a partial batch failure)."""
    now = ports.clock.now()
    if delivery.not_before is not None and delivery.not_before > now:
        _send_later(ports.queue, delivery, (delivery.not_before - now).total_seconds())
        return DeliveryOutcome("waiting", next_retry_at=delivery.not_before)
    endpoint = ports.store.endpoint(delivery.tenant, delivery.endpoint)
    if endpoint is None:
        logger.info("a delivery's endpoint was deleted; dropped", extra={"event_id": delivery.event_id})
        return DeliveryOutcome("dropped")
    if not endpoint.enabled:
        ports.queue.dead_letter(delivery, f"endpoint {endpoint.name} is disabled: {endpoint.disabled_reason}")
        return DeliveryOutcome("dead_lettered")
    body = body_of(delivery.type, delivery.timestamp, delivery.data)
    headers = signed_headers(endpoint.signing_secrets(now), delivery.event_id, now, body)
    result = ports.sender.post(endpoint.url, headers, body.encode(), policy.deadline_s)
    after = ports.clock.now()
    succeeded = is_success(result.status)
    delay = None
    if not succeeded and result.status != GONE:
        delay = retry_delay_s(
            delivery.attempt,
            status=result.status,
            retry_after_s=parse_retry_after(result.retry_after, after),
            scale=policy.retry_scale,
            draw=ports.rng.random(),
        )
    next_retry_at = after + timedelta(seconds=delay) if delay is not None else None
    error = result.error or (None if succeeded else f"HTTP {result.status}")
    attempt = Attempt(
        event_id=delivery.event_id,
        type=delivery.type,
        attempt=delivery.attempt,
        at=now,
        status_code=result.status,
        latency_ms=result.latency_ms,
        error=error,
        next_retry_at=next_retry_at,
        job_id=_job_id_of(delivery),
    )
    log = ports.store.record_attempt(delivery.tenant, endpoint.name, attempt, succeeded=succeeded)
    if succeeded:
        return DeliveryOutcome("delivered", result.status)
    if result.status == GONE:
        _disable(ports, delivery, endpoint, "the receiver answered 410 Gone", after)
        return DeliveryOutcome("disabled", result.status)
    if log.failing_too_long(after):
        since = log.failing_since.isoformat() if log.failing_since else "?"
        _disable(ports, delivery, endpoint, f"deliveries failed for 5 days in a row (since {since})", after)
        return DeliveryOutcome("disabled", result.status)
    if delay is None:
        ports.queue.dead_letter(delivery, f"{delivery.attempt} attempts failed; the last: {error}")
        return DeliveryOutcome("dead_lettered", result.status)
    retry = replace(delivery, attempt=delivery.attempt + 1, not_before=next_retry_at)
    _send_later(ports.queue, retry, delay)
    return DeliveryOutcome("retrying", result.status, next_retry_at)


def _job_id_of(delivery: Delivery) -> str | None:
    """The job a delivery's event is about: its data is the job's view (none for a test event)."""
    job_id = delivery.data.get("job_id")
    return job_id if isinstance(job_id, str) and job_id else None


def _disable(ports: DeliveryPorts, delivery: Delivery, endpoint: Endpoint, reason: str, now: datetime) -> None:
    """Disables the endpoint as stored now, if it still sends to the receiver that earned it: one deleted while the
    delivery was in flight stays deleted, one given another URL (or disabled already) is left as it is."""

    def change(current: Endpoint) -> Endpoint | None:
        return disabled(current, reason, now) if current.enabled and current.url == endpoint.url else None

    written = ports.store.update_endpoint(delivery.tenant, endpoint.name, change)
    ports.queue.dead_letter(delivery, f"endpoint {endpoint.name} disabled: {reason}")
    if written is None:
        logger.warning(
            "webhook endpoint deleted, changed or disabled meanwhile: not disabled again",
            extra={"endpoint": endpoint.name, "reason": reason},
        )
    else:
        logger.warning("webhook endpoint disabled", extra={"endpoint": endpoint.name, "reason": reason})


def _send_later(queue: DeliveryQueue, delivery: Delivery, wait_s: float) -> None:
    """On the queue again after `wait_s` (whole seconds, at least one; at most one message delay: the rest is
    waited by the next hop, which `not_before` tells)."""
    queue.send([delivery], delay_s=min(MAX_MESSAGE_DELAY_S, max(1, math.ceil(wait_s))))
