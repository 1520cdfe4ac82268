"""API Gateway (HTTP API, payload format 2.0) with its JWT authorizer, on 127.0.0.1.

Each request becomes the event API Gateway would send the api function: `rawPath`,
`rawQueryString`, lower-cased `headers` (duplicates comma-joined), `cookies`,
`queryStringParameters` (duplicates comma-joined), `pathParameters` of the matched route, `body` +
`isBase64Encoded`, `requestContext` (`http.method/path/sourceIp`, `requestId`, `routeKey`, and
`authorizer.jwt.claims` + `scopes`). The function's response is returned as it is: status, headers,
cookies as `Set-Cookie`, a base64 body decoded.

The authorizer: `Authorization: Bearer <token>` is looked up in the token map (tenant -> secret); the
claims are those a JWT authorizer passes on (`sub`, `tenant`, `iss`, `aud`, `iat`, `exp`, `scope`).
A missing or unknown token is answered 401 and the function is not called; `GET /health` has no
authorizer; the admin routes need the `offpath/admin` scope (403 otherwise), as the stack's
route-level authorization scopes do. The token is checked before the body is read (a request refused
before its body is answered and its connection closed, once what the client is still sending has been read
and dropped: a lingering close, so that a reset never destroys the answer). Requests larger than 10 MB are
refused (413), and a function that takes more than 30 s is answered 503, as API Gateway does; a request still
waiting for the function when it is answered 503 never runs (api functions' `invoke`). A client that sends nothing for
CLIENT_TIMEOUT_S is disconnected. Every error the gateway or http.server answers (a malformed request line, an
oversized header, an unknown method) is in the JSON envelope, and every answer carries
`X-Content-Type-Options: nosniff`. The runtime's own pages (/metrics, the console), which need no token, are
answered only to a `Host` that is an IP address or `localhost`: a DNS-rebinding page cannot read them.

The route table is the one the stack deploys: the routes declared in offpath.contract. A method and path
no route matches is answered 404 `{"message":"Not Found"}` before any authorizer, and never reaches the
function, as API Gateway answers (an HTTP API without a `$default` route).
"""

from __future__ import annotations

import base64
import contextlib
import hmac
import ipaddress
import json
import logging
import re
import secrets
import socket
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import parse_qsl, unquote, urlsplit

from offpath import contract
from offpath.tenancy import ADMIN_SCOPE
from offpath_local.realtime import StreamRequest
from offpath_local.resources import ACCOUNT_ID

logger = logging.getLogger("offpath.local.gateway")


MAX_BODY_BYTES = 10 * 1024 * 1024
INTEGRATION_TIMEOUT_S = 30.0
CLIENT_TIMEOUT_S = 20.0  # a client silent this long (mid-request, or idle between keep-alive requests) is let go
# After an answer given without reading the request's body (413, 401, ...): how long, and how much, of what the
# client is still sending is read and dropped before the connection is closed (a lingering close).
LINGER_S = 2.0
LINGER_BYTES = 4 * MAX_BODY_BYTES
AUDIENCE = "offpath"
TOKEN_LIFETIME_S = 3600
TEXT_TYPES = re.compile(
    r"^(text/|application/(json|[\w.+-]*\+json|xml|[\w.+-]*\+xml|javascript|x-www-form-urlencoded))", re.IGNORECASE
)

# API Gateway's answer to a request no route matches.
NOT_FOUND_BODY = b'{"message":"Not Found"}'
# A method name (RFC 9110's token, upper case as methods are written) the gateway routes.
ROUTABLE_METHOD = re.compile(r"[A-Z][A-Z0-9_-]{0,31}")
CHUNK_SIZE = re.compile(rb"[0-9A-Fa-f]{1,16}")
CONTENT_LENGTH = re.compile(r"[0-9]{1,16}")

Invoke = Callable[[dict[str, Any], float], dict[str, Any]]
# The runtime's own pages (the console, /metrics), answered before routing: (method, path) -> (status,
# headers, body), or None for a request they do not answer.
Pages = Callable[[str, str], tuple[int, dict[str, str], bytes] | None]


class Streams(Protocol):
    """The runtime's server-sent event streams (offpath_local.realtime.JobEventStreams), answered before
    routing, for an authorised caller: an answer (status, headers, body) or the stream's chunks."""

    def matches(self, method: str, path: str) -> bool: ...

    def open(self, request: StreamRequest) -> tuple[int, dict[str, str], bytes] | Iterator[bytes]: ...


@dataclass(frozen=True)
class Route:
    method: str
    template: str
    pattern: re.Pattern[str]
    admin: bool = False
    public: bool = False
    function: str = contract.API_FUNCTION

    @classmethod
    def of(
        cls,
        method: str,
        template: str,
        *,
        admin: bool = False,
        public: bool = False,
        function: str = contract.API_FUNCTION,
    ) -> Route:
        regex = re.sub(r"\\\{(\w+)\\\}", r"(?P<\1>[^/]+)", re.escape(template))
        return cls(method, template, re.compile(f"^{regex}$"), admin, public, function)


def route_table(declared: Iterable[contract.Route] = contract.ROUTES) -> list[Route]:
    routes = [
        Route.of(r.method, r.path, admin=r.access == "admin", public=r.access == "public", function=r.function)
        for r in declared
    ]
    # Literal segments win over parameters (`/jobs/batch` before `/jobs/{job_id}`), as API Gateway matches.
    return sorted(routes, key=lambda r: r.template.count("{"))


@dataclass
class Authorizer:
    """Bearer tokens of tenants, and the tenants with the admin scope."""

    tokens: dict[str, str]  # tenant -> secret
    admins: frozenset[str] = frozenset()
    issuer: str = "http://127.0.0.1/"

    def tenant_for(self, authorization: str | None) -> str | None:
        if not authorization:
            return None
        scheme, _, token = authorization.strip().partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return None
        presented = token.strip().encode()
        found = None
        for tenant, secret in self.tokens.items():
            if hmac.compare_digest(presented, secret.encode()):
                found = tenant
        return found

    def claims(self, tenant: str) -> tuple[dict[str, str], list[str] | None]:
        now = int(time.time())
        scopes = [ADMIN_SCOPE] if tenant in self.admins else []
        claims = {
            "sub": tenant,
            "tenant": tenant,
            "iss": self.issuer,
            "aud": AUDIENCE,
            "iat": str(now),
            "exp": str(now + TOKEN_LIFETIME_S),
        }
        if scopes:
            claims["scope"] = " ".join(scopes)
        return claims, scopes or None


def new_token() -> str:
    """Hex only: a token that starts with '-' would read as an option on a command line."""
    return secrets.token_hex(20)


def request_id() -> str:
    """An id shaped like API Gateway's (`apigw-requestid`)."""
    return base64.b64encode(uuid.uuid4().bytes[:10]).decode().rstrip("=") + "="


def build_event(
    *,
    method: str,
    target: str,
    headers: list[tuple[str, str]],
    body: bytes,
    source_ip: str,
    route: Route | None,
    path_parameters: dict[str, str] | None,
    claims: dict[str, str] | None,
    scopes: list[str] | None,
    domain: str,
    req_id: str,
) -> dict[str, Any]:
    split = urlsplit(target)
    raw_path = split.path or "/"
    joined: dict[str, str] = {}
    cookies: list[str] = []
    for name, value in headers:
        lower = name.lower()
        if lower == "cookie":
            cookies += [c.strip() for c in value.split(";") if c.strip()]
            continue
        joined[lower] = f"{joined[lower]},{value}" if lower in joined else value
    query: dict[str, str] = {}
    for key, value in parse_qsl(split.query, keep_blank_values=True):
        query[key] = f"{query[key]},{value}" if key in query else value
    content_type = joined.get("content-type", "")
    text: str | None = None
    encoded = False
    if body:
        if not content_type or TEXT_TYPES.match(content_type):
            try:
                text = body.decode("utf-8")
            except UnicodeDecodeError:
                text = None
        if text is None:
            text = base64.b64encode(body).decode()
            encoded = True
    now = time.time()
    # A route of the table, or None: the catch-all `$default` route (a direct call of the function in tests).
    route_key = f"{route.method} {route.template}" if route is not None else "$default"
    request_context: dict[str, Any] = {
        "accountId": ACCOUNT_ID,
        "apiId": "local",
        "domainName": domain,
        "domainPrefix": domain.split(".", 1)[0],
        "http": {
            "method": method,
            "path": unquote(raw_path),
            "protocol": "HTTP/1.1",
            "sourceIp": source_ip,
            "userAgent": joined.get("user-agent", ""),
        },
        "requestId": req_id,
        "routeKey": route_key,
        "stage": "$default",
        "time": formatdate(now, usegmt=True),
        "timeEpoch": int(now * 1000),
    }
    if claims is not None:
        request_context["authorizer"] = {"jwt": {"claims": claims, "scopes": scopes}}
    event: dict[str, Any] = {
        "version": "2.0",
        "routeKey": route_key,
        "rawPath": raw_path,
        "rawQueryString": split.query,
        "headers": joined,
        "requestContext": request_context,
        "isBase64Encoded": encoded,
    }
    if cookies:
        event["cookies"] = cookies
    if query:
        event["queryStringParameters"] = query
    if path_parameters:
        event["pathParameters"] = path_parameters
    if text is not None:
        event["body"] = text
    return event


class Gateway:
    def __init__(
        self,
        invoke: Invoke,
        authorizer: Authorizer,
        *,
        host: str = "127.0.0.1",
        port: int = 8000,
        on_response: Callable[[int], None] | None = None,
        routes: Iterable[contract.Route] = contract.ROUTES,
        pages: Pages | None = None,
        streams: Streams | None = None,
        functions: dict[str, Invoke] | None = None,
        client_timeout_s: float = CLIENT_TIMEOUT_S,
    ) -> None:
        """`functions`: the function a route names (contract.Route.function) other than the api, by name: the
        read function's own environments answer `GET /jobs/{id}`, so that waits never hold the api's."""
        self.invoke = invoke
        self.functions = functions or {}
        self.client_timeout_s = client_timeout_s
        self.pages = pages
        self.streams = streams
        self.authorizer = authorizer
        self.routes = route_table(routes)
        self.on_response = on_response
        self._server = _Server((host, port), _handler_class(self))
        self.host, self.port = self._server.server_address[:2]
        self.authorizer.issuer = f"http://{self.host}:{self.port}/"
        self._thread = threading.Thread(target=self._server.serve_forever, name="gateway", daemon=True)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def match(self, method: str, path: str) -> tuple[Route | None, dict[str, str] | None]:
        for route in self.routes:
            if route.method != method:
                continue
            found = route.pattern.match(path)
            if found:
                return route, (found.groupdict() or None)
        return None, None


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 256

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A request that fails outside the function (a client gone, the runtime stopping) is logged, not
        printed as a traceback on the runtime's console (socketserver's default)."""
        error = sys.exc_info()[1]
        logger.warning("a request ended with %s: %s", type(error).__name__, error)
        logger.debug("the request's traceback", exc_info=True)


def _handler_class(gateway: Gateway) -> type[BaseHTTPRequestHandler]:
    class Handler(_RequestHandler):
        pass

    Handler.gateway = gateway
    Handler.timeout = gateway.client_timeout_s
    return Handler


class _RequestHandler(BaseHTTPRequestHandler):
    gateway: Gateway
    protocol_version = "HTTP/1.1"
    server_version = "offpath-local"
    sys_version = ""
    _unread_body = False  # answered without reading a body the request declares: linger before closing

    if not TYPE_CHECKING:  # (so that the type checker still checks every other attribute)

        def __getattr__(self, name: str) -> Any:
            """Every method is routed (`do_GET`, `do_TRACE`, `do_QUERY`, ...), as API Gateway routes them: one
            no route declares is answered 404 like any unmatched route, never http.server's own 501 page."""
            if name.startswith("do_") and ROUTABLE_METHOD.fullmatch(name[3:]):
                return self._handle
            raise AttributeError(name)

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug(format, *args)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """http.server's own errors (a malformed request line, an oversized header, an unknown method...) in the
        envelope, never its HTML page."""
        if self.request_version == "HTTP/0.9":  # not parsed far enough to know: answered as HTTP/1.1
            self.request_version = "HTTP/1.1"
        self.close_connection = True
        short = self.responses.get(code, ("error", ""))[0]
        error_code = re.sub(r"[^a-z0-9]+", "_", short.lower()).strip("_") or "error"
        self._error(code, error_code, message or short, request_id())

    def _handle(self) -> None:
        req_id = request_id()
        self._body_read = False
        if self._refused_early(req_id):
            return
        try:
            body = self._read_body()
            self._body_read = True
        except _TooLarge:
            self._error(413, "payload_too_large", f"the request body is over {MAX_BODY_BYTES} bytes (10 MB)", req_id)
            self.close_connection = True
            return
        except ValueError:
            self._error(
                400, "bad_request", "the request's body framing (Content-Length or chunks) is malformed", req_id
            )
            self.close_connection = True
            return
        gateway = self.gateway
        route, parameters, claims, scopes = self._route, self._parameters, self._claims, self._scopes
        host = self.headers.get("Host") or f"{gateway.host}:{gateway.port}"
        event = build_event(
            method=self.command,
            target=self.path,
            headers=list(self.headers.items()),
            body=body,
            source_ip=self.client_address[0],
            route=route,
            path_parameters=parameters,
            claims=claims,
            scopes=scopes,
            domain=host,
            req_id=req_id,
        )
        try:
            response = gateway.functions.get(route.function, gateway.invoke)(event, INTEGRATION_TIMEOUT_S)
        except TimeoutError:
            self._error(
                503,
                "unavailable",
                f"the api function did not answer within {INTEGRATION_TIMEOUT_S:.0f} s; retry later",
                req_id,
            )
            return
        except Exception:
            logger.exception("the api function raised")
            self._error(500, "internal_error", "internal error", req_id)
            return
        self._respond(response, req_id)

    def _refused_early(self, req_id: str) -> bool:
        """Everything answered before the body is read: the runtime's pages, the streams, an unmatched route, the
        authorizer's refusals. True when answered (the route and the caller's claims are kept otherwise)."""
        gateway = self.gateway
        path = urlsplit(self.path).path or "/"
        page = gateway.pages(self.command, path) if gateway.pages else None
        if page is not None:
            if not _local_host(self.headers.get("Host") or ""):
                self._error(403, "forbidden", "this page is served to 127.0.0.1, [::1] or localhost only", req_id)
            else:
                self._send(*page, req_id)
            return True
        if gateway.streams is not None and gateway.streams.matches(self.command, path):
            self._open_stream(gateway.streams, path, req_id)
            return True
        self._route, self._parameters = gateway.match(self.command, path)
        self._claims: dict[str, str] | None = None
        self._scopes: list[str] | None = None
        if self._route is None:
            self._send(404, {"content-type": "application/json"}, NOT_FOUND_BODY, req_id)
            return True
        if not self._route.public:
            tenant = gateway.authorizer.tenant_for(self.headers.get("Authorization"))
            if tenant is None:
                self._error(
                    401, "unauthorized", "a valid bearer token is needed (Authorization: Bearer <token>)", req_id
                )
                return True
            self._claims, self._scopes = gateway.authorizer.claims(tenant)
            if self._route.admin and ADMIN_SCOPE not in (self._scopes or []):
                self._error(403, "forbidden", f"this route needs the {ADMIN_SCOPE} scope", req_id)
                return True
        return False

    def _open_stream(self, streams: Streams, path: str, req_id: str) -> None:
        """A stream for its tenant: the token from Authorization or, as a browser's EventSource cannot send
        that header, from the query's `access_token`."""
        query = dict(parse_qsl(urlsplit(self.path).query))
        authorization = self.headers.get("Authorization")
        if authorization is None and query.get("access_token"):
            authorization = f"Bearer {query['access_token']}"
        tenant = self.gateway.authorizer.tenant_for(authorization)
        if tenant is None:
            self._error(401, "unauthorized", "a valid bearer token is needed (Authorization: Bearer <token>)", req_id)
            return
        answer = streams.open(StreamRequest(tenant, path, self.headers.get("Last-Event-ID")))
        if isinstance(answer, tuple):
            self._send(*answer, req_id)
            return
        self.close_connection = True
        self.send_response(200)
        for name, value in (
            ("content-type", "text/event-stream; charset=utf-8"),
            ("cache-control", "no-store"),
            ("x-accel-buffering", "no"),
            ("connection", "close"),
            ("apigw-requestid", req_id),
        ):
            self.send_header(name, value)
        self.end_headers()
        if self.gateway.on_response:
            self.gateway.on_response(200)
        if self.command == "HEAD":
            return
        try:
            for chunk in answer:
                self.wfile.write(chunk)
                self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError, TimeoutError):
            logger.debug("a stream's client went away")
        finally:
            close = getattr(answer, "close", None)
            if close is not None:
                close()

    def _read_body(self) -> bytes:
        """The body by its framing; a malformed frame (a chunk size or Content-Length that is not a plain
        number) raises ValueError, one over MAX_BODY_BYTES _TooLarge before it is read."""
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            chunks, size = [], 0
            while True:
                line = self.rfile.readline(1024)
                size_text = line.split(b";", 1)[0].strip()
                if not CHUNK_SIZE.fullmatch(size_text):
                    raise ValueError("a chunk size is not a hexadecimal number")
                length = int(size_text, 16)
                if length == 0:
                    while self.rfile.readline(1024) not in (b"\r\n", b"\n", b""):
                        pass
                    break
                size += length
                if size > MAX_BODY_BYTES:
                    raise _TooLarge()
                chunks.append(self.rfile.read(length))
                self.rfile.readline(1024)
            return b"".join(chunks)
        length_text = (self.headers.get("Content-Length") or "0").strip()
        if not CONTENT_LENGTH.fullmatch(length_text):
            raise ValueError("Content-Length is not a number of bytes")
        length = int(length_text)
        if length > MAX_BODY_BYTES:
            raise _TooLarge()
        return self.rfile.read(length) if length else b""

    def _respond(self, response: Any, req_id: str) -> None:
        if not isinstance(response, dict) or "statusCode" not in response:
            # Payload 2.0: a response without statusCode is taken as the JSON body of a 200.
            body = json.dumps(response).encode()
            self._send(200, {"content-type": "application/json"}, body, req_id)
            return
        status = int(response.get("statusCode") or 200)
        headers = {str(k).lower(): str(v) for k, v in (response.get("headers") or {}).items()}
        raw = response.get("body")
        if raw is None:
            data = b""
        elif response.get("isBase64Encoded"):
            data = base64.b64decode(raw)
        else:
            data = str(raw).encode()
        self._send(status, headers, data, req_id, cookies=list(response.get("cookies") or []))

    def _error(self, status: int, code: str, message: str, req_id: str) -> None:
        """An error the gateway itself answers, in the api's envelope."""
        body = json.dumps({"error": {"code": code, "message": message}}, separators=(",", ":")).encode()
        headers = {"content-type": "application/json"}
        if status == 401:
            headers["www-authenticate"] = "Bearer"
        if status == 503:
            headers["retry-after"] = "2"
        self._send(status, headers, body, req_id)

    def _send(
        self, status: int, headers: dict[str, str], body: bytes, req_id: str, cookies: list[str] | None = None
    ) -> None:
        self.send_response(status)
        for name, value in headers.items():
            if name in ("content-length", "connection", "transfer-encoding", "date", "server"):
                continue
            self.send_header(name, value)
        for cookie in cookies or []:
            self.send_header("set-cookie", cookie)
        self.send_header("apigw-requestid", req_id)
        self.send_header("x-content-type-options", "nosniff")
        self.send_header("content-length", str(len(body)))
        if not getattr(self, "_body_read", True) and self._declares_body():
            # Answered without reading the body: the connection cannot carry another request.
            self.close_connection = True
            self._unread_body = True
            self.send_header("connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
        if self.gateway.on_response:
            self.gateway.on_response(status)

    def finish(self) -> None:
        super().finish()
        if self._unread_body:
            linger(self.connection)

    def _declares_body(self) -> bool:
        headers = getattr(self, "headers", None)
        if headers is None:
            return False
        length = (headers.get("Content-Length") or "0").strip()
        return length != "0" or "chunked" in (headers.get("Transfer-Encoding") or "").lower()


def _local_host(host: str) -> bool:
    """Whether a Host header names this machine by address or as localhost (never a name DNS could rebind)."""
    name = host.strip().lower()
    if name.startswith("["):
        name = name[1:].partition("]")[0]
    elif name.count(":") == 1:
        name = name.partition(":")[0]
    if name in ("localhost", "localhost."):
        return True
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def linger(conn: socket.socket) -> None:
    """Stop writing, then read and drop what the client is still sending (for at most LINGER_S and LINGER_BYTES)
    before the connection is closed. Closed with unread bytes in it, a connection is reset, and a reset can
    destroy the answer before the client reads it: the client of a 413 would see a broken pipe instead."""
    with contextlib.suppress(OSError):
        conn.shutdown(socket.SHUT_WR)
        deadline, left = time.monotonic() + LINGER_S, LINGER_BYTES
        while left > 0 and (remaining := deadline - time.monotonic()) > 0:
            conn.settimeout(remaining)
            data = conn.recv(min(65536, left))
            if not data:
                return
            left -= len(data)


class _TooLarge(Exception):
    pass
