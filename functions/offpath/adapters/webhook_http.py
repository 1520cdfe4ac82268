"""Sending a delivery: resolve the receiver's host once, check every address it resolved to, connect to the
checked address (pinned: no second resolution), then speak HTTP(S) to it with the host's name as Host and as
TLS server name (SNI, certificate check). Redirects are not followed (an answer is an answer); the body of an
answer is read up to 64 KiB and dropped.

The resolver and the connector are ports, so a test proves a refused address is never connected to.
"""

from __future__ import annotations

import http.client
import socket
import ssl
import time
from typing import Protocol

from offpath.domain.webhooks import (
    HttpResult,
    RefusedUrlError,
    Resolver,
    checked_url,
    default_port,
    refusal_of_all,
)

ANSWER_READ_LIMIT = 64 * 1024
USER_AGENT = "offpath-webhooks/1"


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
    def __init__(self, resolver: Resolver, connector: Connector, *, allow_loopback: bool = False) -> None:
        self.resolver = resolver
        self.connector = connector
        self.allow_loopback = allow_loopback

    def post(self, url: str, headers: dict[str, str], body: bytes, timeout_s: float) -> HttpResult:
        started = time.perf_counter()

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
        if reason is not None:
            return HttpResult(None, elapsed(), error=f"refused: {reason}")
        connection: http.client.HTTPConnection | None = None
        try:
            sock = self.connector.connect(addresses[0], port, timeout_s)
            sock.settimeout(timeout_s)
            if parts.scheme == "https":
                sock = ssl.create_default_context().wrap_socket(sock, server_hostname=host)
            connection = http.client.HTTPConnection(host, port, timeout=timeout_s)
            connection.sock = sock  # pinned: http.client connects only when it has no socket
            target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
            connection.request("POST", target, body=body, headers={**headers, "user-agent": USER_AGENT})
            answer = connection.getresponse()
            answer.read(ANSWER_READ_LIMIT)
            return HttpResult(answer.status, elapsed(), retry_after=answer.getheader("retry-after"))
        except TimeoutError:
            return HttpResult(None, elapsed(), error=f"timed out after {timeout_s:g} s")
        except (OSError, http.client.HTTPException) as error:
            return HttpResult(None, elapsed(), error=f"connection error: {type(error).__name__}")
        finally:
            if connection is not None:
                connection.close()
