"""Where a webhook may go and how long it may take, against receivers on 127.0.0.1 (real sockets): the embedded
runtime's loopback receivers only on the ports its operator named, no IPv6 form of 127.0.0.1 passing for it,
one error for every failed connection (the deliveries log is no port scanner), and a whole-delivery deadline
that cuts off a receiver trickling its answer while the batch's other deliveries go on."""

from __future__ import annotations

import json
import random
import socket
import threading
import time
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from offpath.adapters.webhook_http import CONNECTION_FAILED, PinnedSender, SocketConnector
from offpath.domain.errors import InvalidRequestError
from offpath.domain.webhooks import Delivery, Endpoint, Secret, new_secret, refusal_of
from offpath.handlers import delivery as delivery_handler
from offpath.logic.webhooks import DeliveryPorts, EndpointRequest, ReceiverPolicy, put_endpoint
from offpath_local.notices import LoopbackResolver
from offpath_tools.clocks import ManualClock
from offpath_tools.webhook_fakes import ConnectorThatMustNotBeCalled, InMemoryWebhookStore, RecordingDeliveryQueue
from offpath_tools.webhook_receiver import listening, trickle

# Every IPv6 form that carries 127.0.0.1: IPv4-mapped, 6to4, NAT64 (well-known and local-use), Teredo's client.
IPV6_FORMS_OF_LOOPBACK = [
    "::ffff:127.0.0.1",
    "2002:7f00:1::",
    "64:ff9b::7f00:1",
    "64:ff9b:1::7f00:1",
    "2001:0:4136:e378:8000:63bf:80ff:fffe",
]


@pytest.mark.parametrize("address", IPV6_FORMS_OF_LOOPBACK)
def test_an_ipv6_form_of_127_0_0_1_is_refused_even_where_loopback_receivers_are_allowed(address: str) -> None:
    assert refusal_of(address, allow_loopback=True) == "127.0.0.1 is loopback"
    assert refusal_of(address, allow_loopback=False) == "127.0.0.1 is loopback"


@pytest.mark.parametrize("address", ["64:ff9b::a00:1", "64:ff9b::a9fe:a9fe", "2002:a9fe:a9fe::"])
def test_a_nat64_or_6to4_form_of_an_inside_address_is_refused_on_aws(address: str) -> None:
    assert refusal_of(address, allow_loopback=False) is not None


def test_an_ipv6_form_of_127_0_0_1_is_a_422_naming_the_url_locally() -> None:
    store = InMemoryWebhookStore()
    policy = ReceiverPolicy(allow_loopback=True, loopback_ports=frozenset({8080}))
    for address in IPV6_FORMS_OF_LOOPBACK:
        with pytest.raises(InvalidRequestError) as refused:
            put_endpoint(
                "acme",
                EndpointRequest("hook", f"http://[{address}]:8080/h", ("job.succeeded",)),
                store=store,
                resolver=LoopbackResolver(),
                policy=policy,
                known_job_types=set(),
                clock=ManualClock(),
            )
        assert refused.value.field == "url" and "loopback" in str(refused.value)
    assert store.endpoints("acme") == []


def test_a_loopback_receiver_is_allowed_only_on_a_named_port() -> None:
    store = InMemoryWebhookStore()
    policy = ReceiverPolicy(allow_loopback=True, loopback_ports=frozenset({8080}))

    def put(url: str) -> None:
        put_endpoint(
            "acme",
            EndpointRequest("hook", url, ("job.succeeded",)),
            store=store,
            resolver=LoopbackResolver(),
            policy=policy,
            known_job_types=set(),
            clock=ManualClock(),
        )

    put("http://127.0.0.1:8080/h")
    for url in ("http://127.0.0.1:8081/moto-api/reset", "http://localhost:8000/jobs", "http://127.0.0.1/h"):
        with pytest.raises(InvalidRequestError) as refused:
            put(url)
        assert refused.value.field == "url" and "is not a receiver port of this runtime" in str(refused.value)
    assert [e.url for e in store.endpoints("acme")] == ["http://127.0.0.1:8080/h"]


def test_a_delivery_to_a_port_not_named_is_refused_without_a_connection() -> None:
    sender = PinnedSender(LoopbackResolver(), ConnectorThatMustNotBeCalled(), allow_loopback=True)

    result = sender.post("http://127.0.0.1:5000/moto-api/reset", {}, b"{}", 10)

    assert result.status is None and result.error is not None
    assert result.error.startswith("refused: port 5000 is not a receiver port")


class RaisingConnector:
    def __init__(self, error: OSError) -> None:
        self.error = error

    def connect(self, address: str, port: int, timeout_s: float) -> socket.socket:
        raise self.error


def reset_at_once(connection: socket.socket) -> None:
    connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    connection.close()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_every_failed_connection_is_one_generic_error() -> None:
    """Refused, reset, unreachable, a connect timing out: the log cannot tell what listens on a port."""
    errors = []
    for error in (ConnectionRefusedError(), TimeoutError(), OSError(113, "No route to host")):
        sender = PinnedSender(LoopbackResolver(), RaisingConnector(error), allow_loopback=True, loopback_ports={80})
        errors.append(sender.post("http://127.0.0.1/h", {}, b"{}", 10).error)
    closed = free_port()  # nothing listens: a real refusal
    sender = PinnedSender(LoopbackResolver(), SocketConnector(), allow_loopback=True, loopback_ports={closed})
    errors.append(sender.post(f"http://127.0.0.1:{closed}/h", {}, b"{}", 10).error)
    with listening(reset_at_once) as port:  # accepts, then resets
        sender = PinnedSender(LoopbackResolver(), SocketConnector(), allow_loopback=True, loopback_ports={port})
        errors.append(sender.post(f"http://127.0.0.1:{port}/h", {}, b"{}", 10).error)

    assert errors == [CONNECTION_FAILED] * 5


def test_a_receiver_trickling_its_answer_is_cut_off_at_the_delivery_deadline() -> None:
    with listening(trickle) as port:
        sender = PinnedSender(LoopbackResolver(), SocketConnector(), allow_loopback=True, loopback_ports={port})
        started = time.monotonic()

        result = sender.post(f"http://127.0.0.1:{port}/slow", {}, b"{}", 1.0)

        took = time.monotonic() - started
    assert result.status is None and result.error == "timed out after 1 s"
    # Each byte comes within the 1 s a read waits: only a deadline on the whole delivery ends it. The bound is
    # generous (a loaded machine), far below what the trickle would take (~40 s for its status line alone).
    assert took < 8


class Quick(BaseHTTPRequestHandler):
    received: list[str] = []

    def do_POST(self) -> None:
        Quick.received.append(self.rfile.read(int(self.headers["Content-Length"])).decode())
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        return


def test_a_slow_receiver_holds_only_its_own_delivery_the_batchs_others_are_made() -> None:
    Quick.received = []
    quick = ThreadingHTTPServer(("127.0.0.1", 0), Quick)
    threading.Thread(target=quick.serve_forever, daemon=True).start()
    try:
        with listening(trickle) as slow_port:
            quick_port = quick.server_address[1]
            store = InMemoryWebhookStore()
            for tenant, port in (("slow", slow_port), ("quick", quick_port)):
                hook = Endpoint(
                    "hook", f"http://127.0.0.1:{port}/h", ("job.succeeded",), secrets=(Secret(new_secret()),)
                )
                store.put_endpoint(tenant, hook, limit=10)
            policy = ReceiverPolicy(
                allow_loopback=True, loopback_ports=frozenset({slow_port, quick_port}), deadline_s=1
            )
            sender = PinnedSender(
                LoopbackResolver(), SocketConnector(), allow_loopback=True, loopback_ports=policy.loopback_ports
            )
            queue = RecordingDeliveryQueue()
            ports = DeliveryPorts(store, queue, sender, ManualClock(datetime.now(UTC)), random.Random(1))
            services = delivery_handler.DeliveryServices(ports=ports, policy=policy)
            records = [{"messageId": tenant, "body": message(tenant)} for tenant in ("slow", "slow", "slow", "quick")]

            answer = delivery_handler.handler({"Records": records}, None, services=services)
    finally:
        quick.shutdown()
        quick.server_close()

    assert answer == {"batchItemFailures": []}
    assert [json.loads(body)["data"]["tenant"] for body in Quick.received] == ["quick"]
    slow_log = store.delivery_log("slow", "hook").attempts
    assert [a.error for a in slow_log] == ["timed out after 1 s"] * 3
    assert all(900 <= a.latency_ms < 8000 for a in slow_log)
    assert [d.tenant for d, _ in queue.sent] == ["slow"] * 3  # each retried later, on the schedule


def message(tenant: str) -> str:
    return Delivery(
        tenant=tenant,
        endpoint="hook",
        event_id=f"evt_{tenant}",
        type="job.succeeded",
        timestamp=datetime(2026, 12, 2, tzinfo=UTC),
        data={"tenant": tenant},
    ).to_json()
