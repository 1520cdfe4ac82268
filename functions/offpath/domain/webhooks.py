"""Webhook endpoints and their deliveries: what an endpoint is, which events it receives, how a delivery is
signed (Standard Webhooks 1.0), when a failed delivery is tried again, when an endpoint is disabled, and
which addresses a delivery may never reach.

No I/O here: the store, the delivery queue, the resolver and the connection are ports (below), each with
one adapter in offpath.adapters and fakes in the tests.
"""

from __future__ import annotations

import base64
import ipaddress
import json
import math
import re
import secrets
from collections.abc import Callable, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, Protocol
from urllib.parse import SplitResult, urlsplit

from offpath.domain.clock import iso
from offpath.domain.events import EventType, JobEvent

# -- endpoints ---------------------------------------------------------------------------------

NAME_PATTERN = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
MAX_ENDPOINTS_PER_TENANT = 10
MAX_URL_LENGTH = 2048
SECRET_PREFIX = "whsec_"  # noqa: S105 - the secrets' prefix, not a secret
SECRET_BYTES = 32
# A rotated-out secret still signs deliveries this long (the signature header carries both).
OLD_SECRET_VALID = timedelta(hours=24)
TEST_EVENT = "webhook.test"
# What `events` may name: every job event type.
SUBSCRIBABLE = frozenset(kind.value for kind in EventType)


@dataclass(frozen=True)
class Secret:
    value: str  # whsec_<base64>
    expires_at: datetime | None = None  # None: the current secret

    def valid_at(self, now: datetime) -> bool:
        return self.expires_at is None or now < self.expires_at


@dataclass(frozen=True)
class Endpoint:
    name: str
    url: str
    events: tuple[str, ...]
    job_types: tuple[str, ...] = ()  # empty: every job type
    include_payload: bool = False
    secrets: tuple[Secret, ...] = ()  # the current one first
    enabled: bool = True
    disabled_reason: str | None = None
    disabled_at: datetime | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None

    def wants(self, event: JobEvent) -> bool:
        """Whether this endpoint receives the event (it is enabled and subscribes to its type and job type)."""
        if not self.enabled or event.type.value not in self.events:
            return False
        return not self.job_types or event.job.type in self.job_types

    def signing_secrets(self, now: datetime) -> list[str]:
        return [secret.value for secret in self.secrets if secret.valid_at(now)]

    @property
    def secret(self) -> str:
        return self.secrets[0].value


def new_secret() -> str:
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode()


def rotated(endpoint: Endpoint, now: datetime) -> Endpoint:
    """A new current secret; the old one stays valid for OLD_SECRET_VALID (older ones are dropped)."""
    old = Secret(endpoint.secret, expires_at=now + OLD_SECRET_VALID)
    return replace(endpoint, secrets=(Secret(new_secret()), old), updated_at=now)


def disabled(endpoint: Endpoint, reason: str, now: datetime) -> Endpoint:
    return replace(endpoint, enabled=False, disabled_reason=reason, disabled_at=now, updated_at=now)


# -- signing (Standard Webhooks 1.0) -----------------------------------------------------------


def body_of(kind: str, timestamp: datetime, data: dict[str, Any]) -> str:
    """The delivery's body: `{"type", "timestamp", "data"}`."""
    return json.dumps({"type": kind, "timestamp": iso(timestamp), "data": data}, separators=(",", ":"))


def signature(secrets_: Sequence[str], message_id: str, timestamp: datetime, body: str) -> str:
    """`webhook-signature`: one `v1,<base64 HMAC-SHA256 of id.timestamp.body>` per secret, space-separated.
    (Imported here: only the delivery function signs, so only its package needs `standardwebhooks`.)"""
    from standardwebhooks import Webhook

    return " ".join(Webhook(secret).sign(message_id, timestamp, body) for secret in secrets_)


def signed_headers(secrets_: Sequence[str], message_id: str, timestamp: datetime, body: str) -> dict[str, str]:
    return {
        "webhook-id": message_id,
        "webhook-timestamp": str(math.floor(timestamp.timestamp())),
        "webhook-signature": signature(secrets_, message_id, timestamp, body),
        "content-type": "application/json",
    }


# -- deliveries: retries and disabling ---------------------------------------------------------

# After the first attempt fails: 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h (eight attempts in about 28 h).
RETRY_DELAYS_S: tuple[float, ...] = (5, 300, 1800, 7200, 18000, 36000, 36000)
JITTER = 0.1  # each delay is drawn from ±10% of its value
DELIVERY_TIMEOUT_S = 10.0
# Retry-After is honoured up to the longest delay of the schedule.
MAX_RETRY_AFTER_S = max(RETRY_DELAYS_S)
# An endpoint whose deliveries have failed for this long without one success is disabled.
FAILING_DISABLES_AFTER = timedelta(days=5)
ATTEMPTS_KEPT = 10  # GET /webhooks/{name}/deliveries shows the latest attempts
HONOURS_RETRY_AFTER = frozenset({429, 503})
GONE = 410


def is_success(status: int | None) -> bool:
    return status is not None and 200 <= status < 300


def retry_delay_s(
    attempt: int, *, status: int | None, retry_after_s: float | None, scale: float, draw: float
) -> float | None:
    """How long after failed attempt `attempt` (1-based) the next one is made; None: no attempt is left.
    `draw` is a number in [0, 1) (the jitter). A 429 or 503 with Retry-After waits what the receiver asked
    (never scaled, at most MAX_RETRY_AFTER_S); otherwise the schedule times `scale` (the embedded runtime's
    test timings shorten it)."""
    if attempt > len(RETRY_DELAYS_S):
        return None
    if status in HONOURS_RETRY_AFTER and retry_after_s is not None:
        return min(max(retry_after_s, 0.0), MAX_RETRY_AFTER_S)
    base = RETRY_DELAYS_S[attempt - 1] * scale
    return base * (1 - JITTER + 2 * JITTER * draw)


def parse_retry_after(value: str | None, now: datetime) -> float | None:
    """Retry-After as seconds (delta-seconds or an HTTP date); None when absent or unreadable."""
    if value is None:
        return None
    text = value.strip()
    if text.isascii() and text.isdigit():
        return float(int(text[:9]))
    from email.utils import parsedate_to_datetime

    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        return None
    return max(0.0, (when - now).total_seconds())


@dataclass(frozen=True)
class Attempt:
    """One delivery attempt, as GET /webhooks/{name}/deliveries shows it. `job_id`: the job the event is about
    (None for a test event, and in an attempt logged before it was kept)."""

    event_id: str
    type: str
    attempt: int
    at: datetime
    status_code: int | None
    latency_ms: int
    error: str | None = None
    next_retry_at: datetime | None = None
    job_id: str | None = None


@dataclass(frozen=True)
class DeliveryLog:
    """An endpoint's latest attempts (newest first) and since when its deliveries keep failing."""

    attempts: tuple[Attempt, ...] = ()
    failing_since: datetime | None = None
    version: int = 0

    def with_attempt(self, attempt: Attempt, *, succeeded: bool) -> DeliveryLog:
        failing_since = None if succeeded else (self.failing_since or attempt.at)
        return DeliveryLog(
            attempts=(attempt, *self.attempts)[:ATTEMPTS_KEPT], failing_since=failing_since, version=self.version
        )

    def failing_too_long(self, now: datetime) -> bool:
        return self.failing_since is not None and now - self.failing_since >= FAILING_DISABLES_AFTER


# -- what a delivery carries, and its size on the queue -----------------------------------------

# SQS: a message, and a SendMessageBatch (the sum of its bodies), at most 256 KiB each here. AWS raised both
# limits to 1 MiB in 2025, but a queue's MaximumMessageSize is 256 KiB where it was never raised (docs and
# tools still give it as the default): 256 KiB is what every queue takes. Sizes are UTF-8 bytes.
SQS_MESSAGE_BYTES = 256 * 1024
SQS_BATCH_BYTES = 256 * 1024
# A delivery inlines the job view (with its payload when the endpoint asks, and its result) while that view
# is at most this big as JSON; past it, `payload` and `result` are left out (null) and `omitted` names them:
# the receiver reads them with GET /jobs/{job_id}. What is left (ids, states, times, a bounded error) is small.
INLINE_LIMIT_BYTES = 192 * 1024
OMITTABLE = ("payload", "result")
# Characters SQS refuses in a message body (lone surrogates, U+FFFE, U+FFFF); json_text escapes them.
_NOT_IN_SQS = re.compile("[\ud800-\udfff\ufffe\uffff]")


def json_text(value: Any) -> str:
    """Compact JSON without ASCII escapes (a 4-byte character stays 4 bytes, not a 12-byte surrogate pair),
    except for the characters SQS refuses, which are escaped (still the same JSON value)."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return _NOT_IN_SQS.sub(lambda found: f"\\u{ord(found.group()):04x}", text)


def utf8_bytes(text: str) -> int:
    return len(text.encode("utf-8", errors="surrogatepass"))


def inlined(data: dict[str, Any], limit: int = INLINE_LIMIT_BYTES) -> dict[str, Any]:
    """The job view as a delivery carries it: whole up to `limit` bytes of JSON, else without its payload and
    result (`omitted` names what was left out)."""
    if utf8_bytes(json_text(data)) <= limit:
        return data
    left_out = [key for key in OMITTABLE if data.get(key) is not None]
    return {**data, **dict.fromkeys(left_out), "omitted": left_out}


@dataclass(frozen=True)
class Delivery:
    """One message on the delivery queue: an event for one endpoint. `attempt` is the attempt this message
    makes (1-based); `not_before`: a retry's time, when it is further off than one message delay can wait."""

    tenant: str
    endpoint: str
    event_id: str
    type: str
    timestamp: datetime
    data: dict[str, Any]
    attempt: int = 1
    not_before: datetime | None = None

    def to_json(self) -> str:
        return json_text(
            {
                "tenant": self.tenant,
                "endpoint": self.endpoint,
                "event_id": self.event_id,
                "type": self.type,
                "timestamp": iso(self.timestamp),
                "data": self.data,
                "attempt": self.attempt,
                "not_before": iso(self.not_before) if self.not_before else None,
            }
        )

    @classmethod
    def from_json(cls, text: str) -> Delivery:
        raw = json.loads(text)
        not_before = raw.get("not_before")
        return cls(
            tenant=str(raw["tenant"]),
            endpoint=str(raw["endpoint"]),
            event_id=str(raw["event_id"]),
            type=str(raw["type"]),
            timestamp=datetime.fromisoformat(raw["timestamp"].replace("Z", "+00:00")),
            data=dict(raw["data"]),
            attempt=int(raw.get("attempt", 1)),
            not_before=datetime.fromisoformat(not_before.replace("Z", "+00:00")) if not_before else None,
        )


# -- where a delivery may go -------------------------------------------------------------------

LOOPBACK_RECEIVER = ipaddress.IPv4Address("127.0.0.1")


class RefusedUrlError(ValueError):
    """A receiver URL offpath will not send to (its scheme, form, or the address its host resolves to)."""


def checked_url(url: str, *, allow_loopback: bool) -> SplitResult:
    """The URL's parts, if its form is acceptable: https (http too where loopback receivers are allowed), a
    host, no credentials, no fragment."""
    if len(url) > MAX_URL_LENGTH:
        raise RefusedUrlError(f"url is longer than {MAX_URL_LENGTH} characters")
    if not url.isascii() or any(ch.isspace() or ord(ch) < 32 or ord(ch) == 127 for ch in url):
        raise RefusedUrlError("url must be ASCII without spaces or control characters")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise RefusedUrlError("url is not a valid URL") from None
    schemes = {"https", "http"} if allow_loopback else {"https"}
    if parts.scheme not in schemes:
        raise RefusedUrlError("url must use https" + (" (or http, locally)" if allow_loopback else ""))
    if not parts.hostname:
        raise RefusedUrlError("url has no host")
    if parts.username is not None or parts.password is not None:
        raise RefusedUrlError("url must not carry credentials")
    if parts.fragment:
        raise RefusedUrlError("url must not have a fragment")
    if port == 0:
        raise RefusedUrlError("url has port 0")
    return parts


def default_port(parts: SplitResult) -> int:
    return parts.port or (443 if parts.scheme == "https" else 80)


def refusal_of(address: str, *, allow_loopback: bool) -> str | None:
    """Why a delivery may not connect to this address (None: it may): private, loopback, link-local,
    multicast, reserved, unspecified or otherwise not global, IPv4 and IPv6 alike; an IPv6 address that carries
    an IPv4 address (IPv4-mapped, 6to4, NAT64, Teredo) is judged as the IPv4 address it carries. Where loopback
    receivers are allowed (the embedded runtime), 127.0.0.1 itself and only it is accepted: never an IPv6 form
    of it (6to4 or NAT64 would send it elsewhere), and only on the ports the operator named (refusal_of_port)."""
    try:
        ip: ipaddress.IPv4Address | ipaddress.IPv6Address = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return "not an IP address"
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = embedded_ipv4(ip)
        if embedded is not None:
            ip = embedded
    elif allow_loopback and ip == LOOPBACK_RECEIVER:
        return None
    checks = (
        ("unspecified", ip.is_unspecified),
        ("loopback", ip.is_loopback),
        ("link-local", ip.is_link_local),
        ("multicast", ip.is_multicast),
        ("private", ip.is_private),
        ("reserved", ip.is_reserved),
        ("not a public address", not ip.is_global),
    )
    for name, matched in checks:
        if matched:
            return f"{ip} is {name}"
    return None


# NAT64: the well-known prefix (RFC 6052) and the local-use one (RFC 8215); the IPv4 address is the last 32 bits.
NAT64_PREFIXES = (ipaddress.IPv6Network("64:ff9b::/96"), ipaddress.IPv6Network("64:ff9b:1::/48"))


def embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address carries (IPv4-mapped, 6to4, NAT64, Teredo's client), else None."""
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if any(ip in prefix for prefix in NAT64_PREFIXES):
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    if ip.teredo is not None:
        return ip.teredo[1]
    return None


def refusal_of_port(address: str, port: int, loopback_ports: AbstractSet[int]) -> str | None:
    """Where loopback receivers are allowed, one at 127.0.0.1 only on a port the operator named (`offpath local
    --webhook-port`): never the runtime's own services (emulator, gateway, console), never a port scan. The
    answer is the same for every port not named, whatever listens there."""
    try:
        loopback = ipaddress.ip_address(address) == LOOPBACK_RECEIVER
    except ValueError:
        loopback = False
    if loopback and port not in loopback_ports:
        return f"port {port} is not a receiver port of this runtime (offpath local --webhook-port)"
    return None


def refusal_of_all(addresses: Sequence[str], *, allow_loopback: bool) -> str | None:
    """A host is refused when any address it resolves to is (a rebinding answer mixes them)."""
    if not addresses:
        return "the host does not resolve"
    for address in addresses:
        reason = refusal_of(address, allow_loopback=allow_loopback)
        if reason is not None:
            return reason
    return None


# -- ports -------------------------------------------------------------------------------------


class Resolver(Protocol):
    def resolve(self, host: str, port: int) -> list[str]:
        """The addresses `host` resolves to (IP literals as themselves); [] when it does not resolve."""
        ...


@dataclass(frozen=True)
class HttpResult:
    status: int | None  # None: no answer (refused address, connection error, timeout)
    latency_ms: int
    retry_after: str | None = None
    error: str | None = None


class Sender(Protocol):
    def post(self, url: str, headers: dict[str, str], body: bytes, timeout_s: float) -> HttpResult: ...


class WebhookStore(Protocol):
    """A tenant's endpoints (one item per tenant) and each endpoint's delivery log."""

    def endpoints(self, tenant: str) -> list[Endpoint]: ...

    def endpoint(self, tenant: str, name: str) -> Endpoint | None: ...

    def put_endpoint(self, tenant: str, endpoint: Endpoint, *, limit: int) -> bool:
        """Writes (adds or replaces) the endpoint; returns whether it replaced one. Raises
        EndpointLimitError when a new one would exceed `limit`. A new endpoint starts with an empty delivery log:
        the attempt of a delivery that was in flight when an earlier endpoint of that name was deleted is not its."""
        ...

    def update_endpoint(self, tenant: str, name: str, change: Callable[[Endpoint], Endpoint | None]) -> Endpoint | None:
        """Applies `change` to the endpoint as stored now and writes what it gives, in one conditional write (on a
        conflict, read and applied again): an endpoint deleted or replaced meanwhile is never written back as it
        was. Returns what was written; None when there is no such endpoint or `change` gives None (no write)."""
        ...

    def delete_endpoint(self, tenant: str, name: str) -> bool: ...

    def delivery_log(self, tenant: str, name: str) -> DeliveryLog: ...

    def record_attempt(self, tenant: str, name: str, attempt: Attempt, *, succeeded: bool) -> DeliveryLog:
        """Adds the attempt to the endpoint's log; returns the log as written."""
        ...


class SecretCipher(Protocol):
    """Seals an endpoint's signing secret for storage and opens it again (KMS on AWS, a key file kept outside
    the data locally): the table, its stream and its backups never hold a secret in clear. `context` (the
    tenant and the endpoint) is bound to the sealed text: it opens only for the endpoint it was sealed for."""

    def seal(self, secret: str, context: dict[str, str]) -> str: ...

    def open(self, sealed: str, context: dict[str, str]) -> str: ...


class DeliveryQueue(Protocol):
    def send(self, deliveries: Sequence[Delivery], delay_s: int = 0) -> None: ...

    def dead_letter(self, delivery: Delivery, reason: str) -> None: ...


class EndpointLimitError(Exception):
    def __init__(self, limit: int) -> None:
        super().__init__(f"a tenant has at most {limit} webhook endpoints")


@dataclass
class EndpointCache:
    """A tenant's endpoints, read once per tenant and kept `ttl` (the notifier reads one item per tenant per
    batch, and none while its copy is fresh)."""

    ttl: timedelta = timedelta(seconds=5)
    _kept: dict[str, tuple[datetime, list[Endpoint]]] = field(default_factory=dict)

    def get(self, tenant: str, now: datetime, load: Any) -> list[Endpoint]:
        kept = self._kept.get(tenant)
        if kept is not None and now - kept[0] < self.ttl:
            return kept[1]
        endpoints: list[Endpoint] = load(tenant)
        self._kept[tenant] = (now, endpoints)
        return endpoints
