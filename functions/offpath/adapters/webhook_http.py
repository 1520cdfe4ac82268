"""Sending a delivery: resolve the receiver's host once, check every address it resolved to, connect to the
checked address (pinned: no second resolution), then speak HTTP(S) to it with the host's name as Host and as
TLS server name (SNI, certificate check). Redirects are not followed (an answer is an answer); the body of an
answer is read up to 64 KiB and dropped.

The resolver and the connector are ports, so a test proves a refused address is never connected to.
"""

from __future__ import annotations

import contextlib
import http.client
import socket
import ssl
import threading
import time
from collections.abc import Set as AbstractSet
from typing import Protocol

from offpath.domain.webhooks import (
    HttpResult,
    RefusedUrlError,
    Resolver,
    checked_url,
    default_port,
    refusal_of_all,
    refusal_of_port,
)

ANSWER_READ_LIMIT = 64 * 1024
USER_AGENT = "offpath-webhooks/1"
# Every failure to get an answer, whatever its cause (refused, reset, unreachable, a connect timing out).
CONNECTION_FAILED = "connection failed"


class Connector(Protocol):
    def connect(self, address: str, port: int, timeout_s: float) -> socket.socket: ...


class SystemResolver:
    """The system's resolver (DNS): every address of the host, IPv4 and IPv6."""

    def resolve(self, host: str, port: int) -> list[str]:
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except (socket.gaierror, UnicodeError):
            return []
        return list(dict.fromkeys(str(info[4][0]) for info in infos))


class SocketConnector:
    def connect(self, address: str, port: int, timeout_s: float) -> socket.socket:
        return socket.create_connection((address, port), timeout=timeout_s)


class PinnedSender:
    """`timeout_s` of `post` is the delivery's whole time: connecting, sending and reading the answer end by
    then (a receiver trickling its answer a byte at a time is cut off at it), so one slow receiver never holds
    the other deliveries of its batch. Whatever keeps a connection from answering (refused, reset, unreachable,
    a connect that times out) is one error, CONNECTION_FAILED: the log says nothing of what listens where."""

    def __init__(
        self,
        resolver: Resolver,
        connector: Connector,
        *,
        allow_loopback: bool = False,
        loopback_ports: AbstractSet[int] = frozenset(),
    ) -> None:
        self.resolver = resolver
        self.connector = connector
        self.allow_loopback = allow_loopback
        self.loopback_ports = loopback_ports

    def post(self, url: str, headers: dict[str, str], body: bytes, timeout_s: float) -> HttpResult:
        started = time.perf_counter()
        deadline = started + timeout_s

        def elapsed() -> int:
            return int((time.perf_counter() - started) * 1000)

        try:
            parts = checked_url(url, allow_loopback=self.allow_loopback)
        except RefusedUrlError as error:
            return HttpResult(None, 0, error=f"refused: {error}")
        host = parts.hostname or ""
        port = default_port(parts)
        addresses = self.resolver.resolve(host, port)
        reason = refusal_of_all(addresses, allow_loopback=self.allow_loopback)
        if reason is None and self.allow_loopback:
            reason = refusal_of_port(addresses[0], port, self.loopback_ports)
        if reason is not None:
            return HttpResult(None, elapsed(), error=f"refused: {reason}")
        try:
            sock = self.connector.connect(addresses[0], port, max(0.001, deadline - time.perf_counter()))
        except OSError:
            return HttpResult(None, elapsed(), error=CONNECTION_FAILED)
        held = [sock]
        expired = threading.Event()

        def cut() -> None:  # the deadline: the connection is shut, whatever call waits on it returns
            expired.set()
            with contextlib.suppress(OSError):
                socket.socket.shutdown(held[-1], socket.SHUT_RDWR)

        watchdog = threading.Timer(max(0.0, deadline - time.perf_counter()), cut)
        watchdog.daemon = True
        watchdog.start()
        connection: http.client.HTTPConnection | None = None
        try:
            sock.settimeout(max(0.001, deadline - time.perf_counter()))
            if parts.scheme == "https":
                sock = ssl.create_default_context().wrap_socket(sock, server_hostname=host)
                held.append(sock)
            connection = http.client.HTTPConnection(host, port, timeout=timeout_s)
            connection.sock = sock  # pinned: http.client connects only when it has no socket
            target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
            connection.request("POST", target, body=body, headers={**headers, "user-agent": USER_AGENT})
            answer = connection.getresponse()
            answer.read(ANSWER_READ_LIMIT)
            if expired.is_set():
                raise TimeoutError
            return HttpResult(answer.status, elapsed(), retry_after=answer.getheader("retry-after"))
        except (OSError, http.client.HTTPException, ValueError):
            if expired.is_set() or time.perf_counter() >= deadline:
                return HttpResult(None, elapsed(), error=f"timed out after {timeout_s:g} s")
            return HttpResult(None, elapsed(), error=CONNECTION_FAILED)
        finally:
            watchdog.cancel()
            if connection is not None:
                connection.close()
            with contextlib.suppress(OSError):
                held[-1].close()
