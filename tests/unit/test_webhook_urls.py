"""Where a delivery may go, spelled out: the URL's form (userinfo, whitespace and CR/LF, port 0, length), an IPv6
address that wraps a refused IPv4 one (IPv4-mapped, 6to4), the port a delivery connects to; and what a receiver
asks for: Retry-After as an HTTP date; a retry's `not_before` carried on the delivery queue."""

from __future__ import annotations

import random
import socket
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pytest

from offpath.adapters.webhook_http import PinnedSender
from offpath.domain.errors import InvalidRequestError
from offpath.domain.webhooks import (
    MAX_URL_LENGTH,
    Delivery,
    Endpoint,
    HttpResult,
    Secret,
    new_secret,
    parse_retry_after,
    refusal_of,
)
from offpath.logic.webhooks import DeliveryPorts, EndpointRequest, ReceiverPolicy, deliver, put_endpoint
from offpath_tools.clocks import ManualClock
from offpath_tools.webhook_fakes import (
    FakeResolver,
    InMemoryWebhookStore,
    RecordingDeliveryQueue,
    ScriptedSender,
)

TENANT = "acme"
AWS = ReceiverPolicy(allow_loopback=False)
LOCAL = ReceiverPolicy(allow_loopback=True)
PUBLIC_ADDRESS = "93.184.215.14"
NOW = datetime(2026, 12, 2, 7, 0, tzinfo=UTC)


def register(url: str, *, policy: ReceiverPolicy = AWS, answers: dict[str, list[str]] | None = None) -> str:
    """Registers an endpoint at `url`; returns the refusal's message ("" when accepted)."""
    resolver = FakeResolver(answers if answers is not None else {"hooks.example.com": [PUBLIC_ADDRESS]})
    store = InMemoryWebhookStore()
    try:
        put_endpoint(
            TENANT,
            EndpointRequest("orders", url, ("job.succeeded",)),
            store=store,
            resolver=resolver,
            policy=policy,
            known_job_types=set(),
            clock=ManualClock(NOW),
        )
    except InvalidRequestError as refused:
        assert refused.field == "url"
        assert store.endpoints(TENANT) == []
        return str(refused)
    assert [e.url for e in store.endpoints(TENANT)] == [url]
    return ""


# -- the URL's form ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("https://user:secret@hooks.example.com/h", "url must not carry credentials"),
        ("https://user@hooks.example.com/h", "url must not carry credentials"),
        ("https://:secret@hooks.example.com/h", "url must not carry credentials"),
        (" https://hooks.example.com/h", "url must be ASCII without spaces or control characters"),
        ("https://hooks.example.com/a b", "url must be ASCII without spaces or control characters"),
        ("https://hooks.example.com/h\r\nX-Injected: 1", "url must be ASCII without spaces or control characters"),
        ("https://hooks.example.com/h\n", "url must be ASCII without spaces or control characters"),
        ("https://hooks.example.com/h\t", "url must be ASCII without spaces or control characters"),
        ("https://hooks.example.com/h\x00", "url must be ASCII without spaces or control characters"),
        ("https://hooks.example.com/h\x7f", ""),  # DEL is not below 32 nor a space: left to the receiver
        ("https://hooks.example.com/caf\u00e9", "url must be ASCII without spaces or control characters"),
        ("https://hooks.example.com:0/h", "url has port 0"),
        ("https://hooks.example.com:65536/h", "url is not a valid URL"),
        ("https://hooks.example.com:x/h", "url is not a valid URL"),
        ("https://[::1/h", "url is not a valid URL"),
        ("https://hooks.example.com/h#frag", "url must not have a fragment"),
        ("https:///h", "url has no host"),
        ("ftp://hooks.example.com/h", "url must use https"),
        ("http://hooks.example.com/h", "url must use https"),
        ("https://hooks.example.com/" + "a" * (MAX_URL_LENGTH - 26), ""),
        ("https://hooks.example.com/" + "a" * (MAX_URL_LENGTH - 25), f"url is longer than {MAX_URL_LENGTH} characters"),
        ("https://hooks.example.com:8443/h?x=1", ""),
    ],
)
def test_the_form_of_a_receivers_url(url: str, message: str) -> None:
    refusal = register(url)

    assert refusal == message if not message else refusal.startswith(message)


def test_http_is_accepted_only_where_loopback_receivers_are_and_says_so() -> None:
    assert register("http://127.0.0.1:9000/h", policy=LOCAL, answers={"127.0.0.1": ["127.0.0.1"]}) == ""
    assert register("ftp://127.0.0.1/h", policy=LOCAL, answers={"127.0.0.1": ["127.0.0.1"]}) == (
        "url must use https (or http, locally)"
    )


# -- addresses that wrap another --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "named"),
    [
        ("https://[2002:a9fe:a9fe::1]/h", "169.254.169.254 is link-local"),  # 6to4 of the metadata service
        ("https://[2002:0a00:0001::1]/h", "10.0.0.1 is private"),  # 6to4 of a private address
        ("https://[::ffff:a9fe:a9fe]/h", "169.254.169.254 is link-local"),  # IPv4-mapped
        ("https://[::ffff:127.0.0.1]/h", "127.0.0.1 is loopback"),
    ],
)
def test_an_ipv6_address_wrapping_a_refused_ipv4_one_is_refused_naming_it(url: str, named: str) -> None:
    host = url.split("[")[1].split("]")[0]

    assert register(url, answers={host: [host]}) == f"url is refused: {named}"


def test_a_name_resolving_to_a_6to4_address_of_the_metadata_service_is_refused() -> None:
    refusal = register("https://hooks.example.com/h", answers={"hooks.example.com": ["2002:a9fe:a9fe::1"]})

    assert refusal == "url is refused: 169.254.169.254 is link-local"


def test_a_scoped_ipv6_address_is_judged_without_its_zone() -> None:
    assert refusal_of("fe80::1%eth0", allow_loopback=False) == "fe80::1 is link-local"
    assert refusal_of("not-an-address", allow_loopback=False) == "not an IP address"
    assert refusal_of("2002:5db8:d70e::1", allow_loopback=False) is None  # 6to4 of a public address


def test_locally_the_loopback_receiver_is_accepted_even_when_mapped() -> None:
    assert refusal_of("::ffff:127.0.0.1", allow_loopback=True) is None
    assert refusal_of("::ffff:127.0.0.1", allow_loopback=False) == "127.0.0.1 is loopback"


# -- the port a delivery connects to ------------------------------------------------------------------


@dataclass
class RecordingConnector:
    """Records where a connection was asked for, and fails it (nothing leaves the process)."""

    asked: list[tuple[str, int]] = field(default_factory=list)

    def connect(self, address: str, port: int, timeout_s: float) -> socket.socket:
        self.asked.append((address, port))
        raise ConnectionRefusedError("no connection in tests")


@pytest.mark.parametrize(
    ("url", "allow_loopback", "expected"),
    [
        ("https://hooks.example.com/h", False, (PUBLIC_ADDRESS, 443)),
        ("https://hooks.example.com:8443/h", False, (PUBLIC_ADDRESS, 8443)),
        ("http://127.0.0.1/h", True, ("127.0.0.1", 80)),
        ("http://127.0.0.1:9000/h", True, ("127.0.0.1", 9000)),
        ("https://127.0.0.1/h", True, ("127.0.0.1", 443)),
    ],
)
def test_a_delivery_connects_to_the_urls_port_or_its_schemes(
    url: str, allow_loopback: bool, expected: tuple[str, int]
) -> None:
    connector = RecordingConnector()
    resolver = FakeResolver({"hooks.example.com": [PUBLIC_ADDRESS], "127.0.0.1": ["127.0.0.1"]})
    sender = PinnedSender(resolver, connector, allow_loopback=allow_loopback)

    result = sender.post(url, {}, b"{}", 1)

    assert connector.asked == [expected]
    assert (result.status, result.error) == (None, "connection error: ConnectionRefusedError")


# -- Retry-After and the retry's time on the queue ------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("Wed, 02 Dec 2026 07:00:30 GMT", 30.0),
        ("Wed, 02 Dec 2026 08:00:00 +0100", 0.0),  # the same instant as now
        ("Wed, 02 Dec 2026 06:00:00 GMT", 0.0),  # in the past: at once
        ("Wed, 02 Dec 2026 07:02:00 -0000", None),  # RFC 5322's "no zone known": unreadable
        ("120", 120.0),
        (" 7 ", 7.0),
        ("12345678901", 123456789.0),
        ("soon", None),
        ("", None),
        (None, None),
    ],
)
def test_retry_after_as_seconds_or_an_http_date(value: str | None, seconds: float | None) -> None:
    assert parse_retry_after(value, NOW) == seconds


def test_a_503_with_an_http_date_waits_until_that_date() -> None:
    store = InMemoryWebhookStore()
    store.put_endpoint(
        TENANT,
        Endpoint(
            name="orders", url="https://hooks.example.com/h", events=("job.succeeded",), secrets=(Secret(new_secret()),)
        ),
        limit=10,
    )
    queue = RecordingDeliveryQueue()
    clock = ManualClock(NOW)
    sender = ScriptedSender([HttpResult(503, 3, retry_after="Wed, 02 Dec 2026 07:01:40 GMT")])
    ports = DeliveryPorts(store, queue, sender, clock, random.Random(7))

    assert deliver(a_delivery(), ports, AWS).result == "retrying"

    retry, delay = queue.sent[0]
    assert (retry.attempt, delay, retry.not_before) == (2, 100, NOW + timedelta(seconds=100))


def a_delivery(**changes: object) -> Delivery:
    fields: dict[str, object] = {
        "tenant": TENANT,
        "endpoint": "orders",
        "event_id": "evt_0123456789abcdef0123456789abcdef",
        "type": "job.succeeded",
        "timestamp": datetime(2026, 12, 2, 6, 59, 1, tzinfo=UTC),
        "data": {"job_id": "a" * 32, "status": "SUCCEEDED"},
    }
    fields.update(changes)
    return Delivery(**fields)  # type: ignore[arg-type]


@pytest.mark.parametrize("not_before", [None, NOW + timedelta(hours=5)])
def test_a_delivery_read_back_from_its_queue_message_is_the_one_sent(not_before: datetime | None) -> None:
    sent = a_delivery(attempt=5, not_before=not_before)

    body = sent.to_json()

    assert Delivery.from_json(body) == sent
    assert ('"not_before":"2026-12-02T12:00:00Z"' in body) is (not_before is not None)


def test_a_delivery_message_without_an_attempt_is_the_first() -> None:
    body = (
        '{"tenant":"acme","endpoint":"orders","event_id":"e","type":"job.failed",'
        '"timestamp":"2026-12-02T07:00:00Z","data":{}}'
    )

    read = Delivery.from_json(body)

    assert (read.attempt, read.not_before, read.timestamp) == (1, None, NOW)
