"""What API Gateway and its JWT authorizer do before the api function runs."""

from __future__ import annotations

import contextlib
import json
import socket
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from offpath.contract import ROUTES
from offpath_local.gateway import Authorizer, Gateway
from tests.e2e.conftest import TENANT_A, TOKEN_A, Local
from tests.e2e.target import Target

FORGED = {"Authorization": "Bearer not-a-token"}


def test_health_needs_no_token(target: Target) -> None:
    answer = target.call("GET", "/health", tenant=None)

    assert answer.status == 200
    assert answer.body == {"status": "ok"}


def test_a_request_without_credentials_reaches_no_job(target: Target) -> None:
    """Any target: refused before the function (401 from a bearer-token authorizer, 403 from IAM)."""
    answer = target.call("GET", "/jobs", tenant=None)

    assert answer.status in {401, 403}
    assert "jobs" not in (answer.body if isinstance(answer.body, dict) else {})


def refused(body: Any, code: str, gateway_message: str) -> bool:
    """The authorizer's refusal: the envelope (the embedded gateway, the api function) or API Gateway's own body."""
    if not isinstance(body, dict):
        return False
    return body.get("error", {}).get("code") == code or body == {"message": gateway_message}


@pytest.mark.needs("token")
def test_a_request_without_a_token_is_refused_with_401(target: Target) -> None:
    answer = target.call("GET", "/jobs", tenant=None)

    assert answer.status == 401
    assert refused(answer.body, "unauthorized", "Unauthorized"), answer.body


@pytest.mark.needs("token")
def test_a_request_with_an_unknown_token_is_refused_with_401(target: Target) -> None:
    answer = target.call("POST", "/jobs", tenant=None, body={"type": "demo.echo", "payload": {}}, headers=FORGED)

    assert answer.status == 401
    assert refused(answer.body, "unauthorized", "Unauthorized"), answer.body


@pytest.mark.needs("tenant_b")
def test_an_admin_route_needs_the_admin_scope(target: Target) -> None:
    answer = target.call("POST", "/queues/default/redrive", tenant="b")

    assert answer.status == 403
    assert refused(answer.body, "forbidden", "Forbidden"), answer.body


def test_a_malformed_body_reaches_the_function_and_is_answered_400(target: Target) -> None:
    answer = target.call("POST", "/jobs", raw=b"{not json", headers={"Content-Type": "application/json"})

    assert answer.status == 400
    assert answer.body["error"]["code"] == "malformed_json"


def test_the_response_carries_api_gateways_request_id(target: Target) -> None:
    answer = target.call("GET", "/health", tenant=None)

    assert answer.headers.get("apigw-requestid")


@pytest.mark.needs("tenant_b")
def test_concurrent_requests_of_two_tenants_each_see_only_their_own_job(target: Target) -> None:
    own = {
        "a": target.submit("demo.echo", {"who": "a"}, tenant="a").body["job_id"],
        "b": target.submit("demo.echo", {"who": "b"}, tenant="b").body["job_id"],
    }

    def read(tenant: str) -> tuple[str, int, str | None]:
        answer = target.call("GET", f"/jobs/{own[tenant]}", tenant=tenant)
        return tenant, answer.status, answer.body.get("job_id")

    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(read, ["a", "b"] * 60))

    assert all(status == 200 and job_id == own[tenant] for tenant, status, job_id in results)


# -- routes no declaration names ------------------------------------------------------------------


@pytest.fixture
def gateway() -> Iterator[tuple[Gateway, list[dict[str, Any]]]]:
    """A gateway alone, in front of a function that records every event it is invoked with."""
    invoked: list[dict[str, Any]] = []

    def invoke(event: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        invoked.append(event)
        return {"statusCode": 200, "headers": {"content-type": "application/json"}, "body": "{}"}

    gateway = Gateway(invoke, Authorizer({TENANT_A: TOKEN_A}), port=0)
    gateway.start()
    try:
        yield gateway, invoked
    finally:
        gateway.stop()


@pytest.mark.parametrize("token", [TOKEN_A, None])
@pytest.mark.parametrize(("method", "path"), [("GET", "/nope"), ("DELETE", "/jobs"), ("GET", "/jobs/x/cancel")])
def test_an_unknown_route_is_answered_404_by_the_gateway_without_reaching_the_function(
    gateway: tuple[Gateway, list[dict[str, Any]]], method: str, path: str, token: str | None
) -> None:
    server, invoked = gateway

    answer = Local(server.url, Path(), Path()).call(method, path, token=token)

    assert (answer.status, answer.body) == (404, {"message": "Not Found"})
    assert answer.headers["content-type"] == "application/json"
    assert answer.headers.get("apigw-requestid")
    assert invoked == []


def test_every_declared_route_reaches_the_function_with_its_route_key(
    gateway: tuple[Gateway, list[dict[str, Any]]],
) -> None:
    server, invoked = gateway
    client = Local(server.url, Path(), Path())

    for route in ROUTES:
        path = route.path.replace("{job_id}", "a" * 32).replace("{name}", "default")
        answer = client.call(route.method, path, token=TOKEN_A)
        if route.access == "admin":  # tenant-a has no admin scope
            assert answer.status == 403, route.key
        else:
            assert answer.status == 200, route.key

    assert [event["routeKey"] for event in invoked] == [r.key for r in ROUTES if r.access != "admin"]


@pytest.mark.parametrize("tenant", ["a", None])
@pytest.mark.parametrize(("method", "path"), [("PUT", "/jobs"), ("GET", "/nope"), ("DELETE", "/jobs")])
def test_a_running_target_answers_an_unknown_route_404(target: Target, method: str, path: str, tenant: str) -> None:
    answer = target.call(method, path, tenant=tenant)

    assert (answer.status, answer.body) == (404, {"message": "Not Found"})


# -- what the gateway itself answers: as API Gateway does, its errors in the envelope ------------------


def raw_exchange(server: Gateway, request: bytes, *, body: bytes = b"", close_write: bool = False) -> tuple[int, bytes]:
    """Send bytes as they are (framing included) and read the answer: its status and body."""
    with socket.create_connection((server.host, server.port), timeout=30) as conn:
        conn.sendall(request + body)
        if close_write:
            # The gateway may have answered and closed first: its answer is still there to read.
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_WR)
        reader = conn.makefile("rb")
        status = int(reader.readline().split()[1])
        length = 0
        while (line := reader.readline()) not in (b"\r\n", b"\n", b""):
            name, _, value = line.decode().partition(":")
            if name.strip().lower() == "content-length":
                length = int(value)
        return status, reader.read(length) if not request.startswith(b"HEAD ") else b""


def headers_of(method: str, path: str, *extra: str) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", f"Authorization: Bearer {TOKEN_A}", *extra, "", ""]
    return "\r\n".join(lines).encode()


@pytest.mark.parametrize("method", ["TRACE", "QUERY", "HEAD", "CONNECT", "PROPFIND"])
def test_a_method_http_server_does_not_know_is_routed_like_any_other(
    gateway: tuple[Gateway, list[dict[str, Any]]], method: str
) -> None:
    server, invoked = gateway

    status, body = raw_exchange(server, headers_of(method, "/jobs", "Content-Length: 0"))

    assert status == 404
    assert body == (b"" if method == "HEAD" else b'{"message":"Not Found"}')
    assert invoked == []


def test_a_chunk_size_of_minus_one_is_a_bad_request_not_the_rest_of_the_stream(
    gateway: tuple[Gateway, list[dict[str, Any]]],
) -> None:
    server, invoked = gateway
    request = headers_of("POST", "/jobs", "Transfer-Encoding: chunked", "Content-Type: application/json")

    status, body = raw_exchange(server, request, body=b"-1\r\n" + b'{"type": "demo.echo"}' * 1000, close_write=True)

    assert status == 400
    assert json.loads(body)["error"]["code"] == "bad_request"
    assert invoked == []


@pytest.mark.parametrize("size", ["0x10", "+10", " 1 0", "zz", ""])
def test_a_chunk_size_that_is_not_hexadecimal_is_a_bad_request(
    gateway: tuple[Gateway, list[dict[str, Any]]], size: str
) -> None:
    server, invoked = gateway
    request = headers_of("POST", "/jobs", "Transfer-Encoding: chunked")

    status, body = raw_exchange(server, request, body=f"{size}\r\n{'x' * 16}\r\n0\r\n\r\n".encode())

    assert status == 400
    assert json.loads(body)["error"]["code"] == "bad_request"
    assert invoked == []


def test_a_chunked_body_over_10_mb_is_refused_with_413_in_the_envelope(
    gateway: tuple[Gateway, list[dict[str, Any]]],
) -> None:
    server, invoked = gateway
    chunk = b"x" * (1024 * 1024)
    chunks = b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for _ in range(12))

    status, body = raw_exchange(server, headers_of("POST", "/jobs", "Transfer-Encoding: chunked"), body=chunks)

    assert status == 413
    assert json.loads(body)["error"]["code"] == "payload_too_large"
    assert invoked == []


@pytest.mark.parametrize(
    "length", ["+5", "5_0", "\u0665", "-1", "1e3"], ids=["plus", "underscore", "arabic", "minus", "exp"]
)
def test_a_content_length_that_is_not_a_number_of_bytes_is_a_bad_request(
    gateway: tuple[Gateway, list[dict[str, Any]]], length: str
) -> None:
    server, invoked = gateway
    request = headers_of("POST", "/jobs", f"Content-Length: {length}")

    status, body = raw_exchange(server, request.replace(length.encode(), length.encode("utf-8")), body=b"{}")

    assert status == 400
    assert json.loads(body)["error"]["code"] == "bad_request"
    assert invoked == []


def test_a_body_over_10_mb_is_refused_with_413_in_the_envelope(gateway: tuple[Gateway, list[dict[str, Any]]]) -> None:
    server, invoked = gateway
    request = headers_of("POST", "/jobs", f"Content-Length: {10 * 1024 * 1024 + 1}")

    status, body = raw_exchange(server, request)

    assert status == 413
    assert json.loads(body)["error"]["code"] == "payload_too_large"
    assert invoked == []


@pytest.mark.parametrize(
    ("token", "status", "code"),
    [(TOKEN_A, 413, "payload_too_large"), ("not-a-token", 401, "unauthorized")],
    ids=["over-10-mb", "unknown-token"],
)
def test_a_client_still_sending_the_body_of_a_refused_request_reads_the_answer_not_a_broken_pipe(
    gateway: tuple[Gateway, list[dict[str, Any]]], token: str, status: int, code: str
) -> None:
    """Refused before its body is read, a request's 11 MB body is more than the sockets between client and gateway
    buffer: the client is still sending when the answer is written. The gateway reads and drops the rest before it
    closes; closed with the body unread, the connection would be reset and the client see a broken pipe."""
    server, invoked = gateway
    size = 11 * 1024 * 1024
    request = headers_of("POST", "/jobs", f"Content-Length: {size}").replace(TOKEN_A.encode(), token.encode())

    answer = raw_exchange(server, request, body=b"x" * size)

    assert (answer[0], json.loads(answer[1])["error"]["code"]) == (status, code)
    assert invoked == []


def test_a_function_that_raises_is_answered_500_in_the_envelope() -> None:
    def invoke(event: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        raise RuntimeError("boom")

    server = Gateway(invoke, Authorizer({TENANT_A: TOKEN_A}), port=0)
    server.start()
    try:
        answer = Local(server.url, Path(), Path()).call("GET", "/jobs", token=TOKEN_A)
    finally:
        server.stop()

    assert answer.status == 500
    assert answer.body == {"error": {"code": "internal_error", "message": "internal error"}}


# -- what the gateway answers before, or instead of, the function (hygiene) ------------------------


def test_a_request_answered_503_while_it_waited_for_the_function_never_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    import queue
    import threading
    import types

    from offpath_local import gateway as gateway_module
    from offpath_local.functions import ApiFunction

    ran: list[str] = []
    # The api function with one environment, in front of a handler that records its runs.
    api = ApiFunction.__new__(ApiFunction)
    api.name = "api"
    api._environments = queue.Queue()
    api._environments.put(None)
    api._executor = ThreadPoolExecutor(1)
    api._module = types.SimpleNamespace(
        handler=lambda event, context, services: ran.append(event["body"]) or {"statusCode": 202, "body": "{}"}
    )
    monkeypatch.setattr(gateway_module, "INTEGRATION_TIMEOUT_S", 0.3)
    server = Gateway(api.invoke, Authorizer({TENANT_A: TOKEN_A}), port=0)
    server.start()
    local = Local(server.url, Path(), Path())
    busy = threading.Event()
    try:
        api._executor.submit(busy.wait)  # its one environment is busy for longer than the integration timeout
        refused = local.call("POST", "/jobs", token=TOKEN_A, body={"n": "refused"})
        busy.set()
        accepted = local.call("POST", "/jobs", token=TOKEN_A, body={"n": "accepted"})
    finally:
        busy.set()
        server.stop()
        api._executor.shutdown(wait=True)

    assert refused.status == 503
    assert refused.body["error"]["code"] == "unavailable"
    assert accepted.status == 202
    assert ran == ['{"n": "accepted"}']


def test_a_request_without_a_valid_token_is_refused_before_its_body_is_read(
    gateway: tuple[Gateway, list[dict[str, Any]]],
) -> None:
    server, invoked = gateway
    request = "\r\n".join(["POST /jobs HTTP/1.1", "Host: 127.0.0.1", "Content-Length: 5000000", "", ""]).encode()

    status, body = raw_exchange(server, request)  # the body is never sent: the answer cannot wait for it

    assert status == 401
    assert json.loads(body)["error"]["code"] == "unauthorized"
    assert invoked == []


def test_a_client_that_stops_sending_mid_request_is_disconnected() -> None:
    server = Gateway(
        lambda event, timeout_s: {"statusCode": 200}, Authorizer({TENANT_A: TOKEN_A}), port=0, client_timeout_s=0.5
    )
    server.start()
    try:
        with socket.create_connection((server.host, server.port), timeout=30) as conn:
            conn.sendall(b"POST /jobs HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # and nothing more
            closed = conn.recv(1024)
    finally:
        server.stop()

    assert closed == b""


@pytest.mark.parametrize(
    ("request_bytes", "status"),
    [
        (b"GARBAGE\r\n\r\n", 400),
        (b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + b"x" * 70000 + b"\r\n\r\n", 431),
        (b"GET /" + b"x" * 70000 + b" HTTP/1.1\r\n\r\n", 414),
        (b"get /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 501),
        (b"GET /health HTTP/2.0\r\nHost: 127.0.0.1\r\n\r\n", 505),
    ],
    ids=["request-line", "header", "uri", "method", "version"],
)
def test_what_http_server_refuses_is_answered_in_the_json_envelope(
    gateway: tuple[Gateway, list[dict[str, Any]]], request_bytes: bytes, status: int
) -> None:
    server, invoked = gateway

    answered, body = raw_exchange(server, request_bytes)

    assert answered == status
    assert set(json.loads(body)["error"]) == {"code", "message"}
    assert invoked == []


def test_every_answer_says_nosniff(local: Local) -> None:
    for path, token in (("/health", None), ("/jobs", TOKEN_A), ("/jobs/nope", TOKEN_A), ("/nowhere", None)):
        answer = local.call("GET", path, token=token)
        assert answer.headers.get("x-content-type-options") == "nosniff", (path, answer.status)


@pytest.mark.parametrize(
    ("host", "status"),
    [("127.0.0.1:8000", 200), ("localhost:8000", 200), ("[::1]:8000", 200), ("rebound.example.com:8000", 403)],
)
def test_the_metrics_page_answers_only_a_local_host_name(host: str, status: int) -> None:
    def pages(method: str, path: str) -> tuple[int, dict[str, str], bytes] | None:
        return (200, {"content-type": "text/plain"}, b"offpath_jobs 1\n") if path == "/metrics" else None

    server = Gateway(lambda event, timeout_s: {"statusCode": 200}, Authorizer({TENANT_A: TOKEN_A}), port=0, pages=pages)
    server.start()
    try:
        answered, body = raw_exchange(server, f"GET /metrics HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
    finally:
        server.stop()

    assert answered == status
    assert body == b"offpath_jobs 1\n" if status == 200 else json.loads(body)["error"]["code"] == "forbidden"
