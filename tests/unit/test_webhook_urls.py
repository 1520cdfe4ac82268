"""Where a delivery may go, spelled out: the URL's form (userinfo, whitespace and CR/LF, port 0, length), an IPv6
address that wraps a refused IPv4 one (IPv4-mapped, 6to4), the port a delivery connects to; and what a receiver
asks for: Retry-After as an HTTP date; a retry's `not_before` carried on the delivery queue."""

from __future__ import annotations

import base64
import json
import random
import socket
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pytest

from offpath.adapters.webhook_http import PinnedSender
from offpath.domain.clock import iso
from offpath.domain.errors import InvalidRequestError
from offpath.domain.events import EventType, JobEvent
from offpath.domain.job import JobStatus
from offpath.domain.webhooks import (
    ATTEMPTS_KEPT,
    FAILING_DISABLES_AFTER,
    MAX_RETRY_AFTER_S,
    MAX_URL_LENGTH,
    OLD_SECRET_VALID,
    SECRET_PREFIX,
    Attempt,
    Delivery,
    DeliveryLog,
    Endpoint,
    EndpointCache,
    EndpointLimitError,
    HttpResult,
    Secret,
    body_of,
    disabled,
    is_success,
    new_secret,
    parse_retry_after,
    refusal_of,
    refusal_of_all,
    retry_delay_s,
    rotated,
    signed_headers,
)
from offpath.logic.webhooks import DeliveryPorts, EndpointRequest, ReceiverPolicy, deliver, put_endpoint
from offpath_tools.clocks import ManualClock
from offpath_tools.webhook_fakes import (
    FakeResolver,
    InMemoryWebhookStore,
    RecordingDeliveryQueue,
    ScriptedSender,
)
from tests.unit.conftest import a_job

TENANT = "acme"
AWS = ReceiverPolicy(allow_loopback=False)
LOCAL = ReceiverPolicy(allow_loopback=True, loopback_ports=frozenset({9000}))
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
        ("https://hooks.example.com/h\x7f", "url must be ASCII without spaces or control characters"),  # DEL
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

    assert refusal == message


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
    assert refusal_of("fe80::1%eth0%1", allow_loopback=False) == "fe80::1 is link-local"  # cut at the first %
    assert refusal_of("not-an-address", allow_loopback=False) == "not an IP address"
    assert refusal_of("2002:5db8:d70e::1", allow_loopback=False) is None  # 6to4 of a public address


def test_locally_only_127_0_0_1_itself_is_a_loopback_receiver_never_an_ipv6_form_of_it() -> None:
    assert refusal_of("127.0.0.1", allow_loopback=True) is None
    assert refusal_of("::ffff:127.0.0.1", allow_loopback=True) == "127.0.0.1 is loopback"
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
    ports = frozenset({80, 443, 9000}) if allow_loopback else frozenset()
    sender = PinnedSender(resolver, connector, allow_loopback=allow_loopback, loopback_ports=ports)

    result = sender.post(url, {}, b"{}", 1)

    assert connector.asked == [expected]
    assert (result.status, result.error) == (None, "connection failed")


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


# -- the rules at their edges: which events an endpoint receives, its secrets and their rotation, the signed
# body and headers, success and Retry-After caps, the delivery log's run of failures, the endpoint cache.

FRACTIONAL_NOW = datetime(2026, 12, 2, 7, 0, 0, 750_000, tzinfo=UTC)


def event(kind: EventType = EventType.SUCCEEDED, job_type: str = "reports.build") -> JobEvent:
    job = a_job(JobStatus.SUCCEEDED, type=job_type)
    return JobEvent(id="evt_1", type=kind, time=FRACTIONAL_NOW, tenant=job.tenant, job=job)


def test_an_endpoint_receives_the_events_and_job_types_it_names_while_enabled() -> None:
    endpoint = Endpoint(name="orders", url="https://x.example/h", events=("job.succeeded",))

    assert endpoint.wants(event())
    assert not endpoint.wants(event(EventType.FAILED))
    assert Endpoint(name="o", url="u", events=("job.succeeded",), job_types=("reports.build",)).wants(event())
    assert not Endpoint(name="o", url="u", events=("job.succeeded",), job_types=("other",)).wants(event())
    assert not disabled(endpoint, "gone", FRACTIONAL_NOW).wants(event())


def test_a_new_secret_is_32_random_bytes_after_its_prefix() -> None:
    secret = new_secret()

    assert SECRET_PREFIX == "whsec_" and secret.startswith("whsec_")
    assert len(base64.b64decode(secret.removeprefix("whsec_"))) == 32
    assert new_secret() != secret


def test_a_rotation_keeps_the_old_secret_for_24_hours_exactly() -> None:
    endpoint = Endpoint(
        name="o", url="u", events=(), secrets=(Secret("whsec_old"), Secret("whsec_older", FRACTIONAL_NOW))
    )

    after = rotated(endpoint, FRACTIONAL_NOW)

    assert timedelta(hours=24) == OLD_SECRET_VALID
    assert after.secrets[1] == Secret("whsec_old", expires_at=FRACTIONAL_NOW + OLD_SECRET_VALID)
    assert len(after.secrets) == 2 and after.secret != "whsec_old" and after.updated_at == FRACTIONAL_NOW
    assert after.signing_secrets(FRACTIONAL_NOW + OLD_SECRET_VALID - timedelta(microseconds=1)) == [
        after.secret,
        "whsec_old",
    ]
    assert after.signing_secrets(FRACTIONAL_NOW + OLD_SECRET_VALID) == [after.secret]


def test_a_disabled_endpoint_says_why_and_when() -> None:
    endpoint = Endpoint(name="o", url="u", events=())

    off = disabled(endpoint, "410 Gone", FRACTIONAL_NOW)

    assert (off.enabled, off.disabled_reason, off.disabled_at, off.updated_at) == (
        False,
        "410 Gone",
        FRACTIONAL_NOW,
        FRACTIONAL_NOW,
    )


def test_the_signed_body_and_headers() -> None:
    body = body_of("job.succeeded", FRACTIONAL_NOW, {"job_id": "j"})

    assert body == '{"type":"job.succeeded","timestamp":"2026-12-02T07:00:00.750000Z","data":{"job_id":"j"}}'
    assert json.loads(body)["data"] == {"job_id": "j"}
    headers = signed_headers(["whsec_" + base64.b64encode(b"k" * 32).decode()], "msg_1", FRACTIONAL_NOW, body)
    assert headers["webhook-id"] == "msg_1"
    assert headers["webhook-timestamp"] == str(int(FRACTIONAL_NOW.timestamp()))
    assert headers["content-type"] == "application/json"
    assert headers["webhook-signature"].startswith("v1,")
    two = signed_headers(["whsec_" + base64.b64encode(b"k" * 32).decode()] * 2, "msg_1", FRACTIONAL_NOW, body)
    assert two["webhook-signature"].count(" ") == 1
    assert iso(datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)) == "2026-01-02T03:04:05Z"


@pytest.mark.parametrize(("status", "success"), [(None, False), (199, False), (200, True), (299, True), (300, False)])
def test_success_is_a_2xx_answer(status: int | None, success: bool) -> None:
    assert is_success(status) is success


def test_retry_after_is_honoured_for_429_and_503_only_and_capped() -> None:
    assert MAX_RETRY_AFTER_S == 36000
    assert retry_delay_s(1, status=503, retry_after_s=99_999, scale=0.1, draw=0.5) == 36000
    assert retry_delay_s(1, status=429, retry_after_s=-5, scale=1, draw=0.5) == 0.0
    assert retry_delay_s(1, status=429, retry_after_s=30, scale=0.01, draw=0.5) == 30
    assert retry_delay_s(1, status=500, retry_after_s=30, scale=1, draw=0.5) == 5
    assert retry_delay_s(2, status=503, retry_after_s=None, scale=2, draw=0.5) == 600
    assert retry_delay_s(7, status=500, retry_after_s=None, scale=1, draw=0.5) == 36000
    assert retry_delay_s(8, status=429, retry_after_s=30, scale=1, draw=0.5) is None


def attempt(at: datetime, n: int = 1) -> Attempt:
    return Attempt(event_id=f"e{n}", type="job.succeeded", attempt=1, at=at, status_code=500, latency_ms=3)


def test_the_log_keeps_the_newest_attempts_first_and_when_the_failures_began() -> None:
    log = DeliveryLog(version=4)
    for n in range(ATTEMPTS_KEPT + 2):
        log = log.with_attempt(attempt(FRACTIONAL_NOW + timedelta(minutes=n), n), succeeded=False)

    assert ATTEMPTS_KEPT == 10 and len(log.attempts) == ATTEMPTS_KEPT
    assert [a.event_id for a in log.attempts[:2]] == ["e11", "e10"]
    assert (log.failing_since, log.version) == (FRACTIONAL_NOW, 4)
    assert log.with_attempt(attempt(FRACTIONAL_NOW, 99), succeeded=True).failing_since is None


def test_an_endpoint_fails_too_long_after_five_days_exactly() -> None:
    log = DeliveryLog(failing_since=FRACTIONAL_NOW)

    assert timedelta(days=5) == FAILING_DISABLES_AFTER
    assert not log.failing_too_long(FRACTIONAL_NOW + timedelta(days=5) - timedelta(microseconds=1))
    assert log.failing_too_long(FRACTIONAL_NOW + timedelta(days=5))
    assert not DeliveryLog().failing_too_long(FRACTIONAL_NOW + timedelta(days=50))


def test_a_host_is_refused_when_it_does_not_resolve_or_any_address_is() -> None:
    assert refusal_of_all([], allow_loopback=False) == "the host does not resolve"
    assert refusal_of_all(["93.184.215.14", "10.0.0.1"], allow_loopback=False) == "10.0.0.1 is private"
    assert refusal_of_all(["93.184.215.14"], allow_loopback=False) is None


def test_the_endpoint_cache_reads_a_tenant_once_per_five_seconds() -> None:
    cache = EndpointCache()
    reads: list[str] = []

    def load(tenant: str) -> list[Endpoint]:
        reads.append(tenant)
        return [Endpoint(name=f"n{len(reads)}", url="u", events=())]

    first = cache.get("acme", FRACTIONAL_NOW, load)
    assert cache.get("acme", FRACTIONAL_NOW + timedelta(seconds=4.999), load) == first
    assert cache.get("other", FRACTIONAL_NOW, load) != first
    assert cache.get("acme", FRACTIONAL_NOW + timedelta(seconds=5), load) != first
    assert reads == ["acme", "other", "acme"]


def test_the_endpoint_limit_says_how_many() -> None:
    assert str(EndpointLimitError(10)) == "a tenant has at most 10 webhook endpoints"


@pytest.mark.parametrize(
    ("address", "refusal"),
    [
        ("0.0.0.0", "0.0.0.0 is unspecified"),
        ("::", ":: is unspecified"),
        ("127.0.0.1", "127.0.0.1 is loopback"),
        ("::1", "::1 is loopback"),
        ("169.254.169.254", "169.254.169.254 is link-local"),
        ("fe80::1", "fe80::1 is link-local"),
        ("224.0.0.1", "224.0.0.1 is multicast"),
        ("ff02::1", "ff02::1 is multicast"),
        ("10.0.0.1", "10.0.0.1 is private"),
        ("fc00::1", "fc00::1 is private"),
        ("::a9fe:a9fe", "::a9fe:a9fe is reserved"),  # IPv4-compatible (deprecated): not unwrapped, reserved
        ("100.64.0.1", "100.64.0.1 is not a public address"),  # shared address space (carrier-grade NAT)
    ],
)
def test_each_refused_class_is_named(address: str, refusal: str) -> None:
    assert refusal_of(address, allow_loopback=False) == refusal
