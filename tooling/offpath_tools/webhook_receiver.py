"""A webhook receiver on 127.0.0.1 for the end-to-end tests and the fault ledger: it records every request it
gets and answers what the caller scripts for its path (200 by default; `fail_every`: every n-th request on a
path answered 503). Signatures are verified with `standardwebhooks`, as a receiver would, by whoever knows the
endpoint's secrets. `listening(trickle)`: a receiver that answers one byte every 0.2 s (a slow receiver)."""

from __future__ import annotations

import contextlib
import dataclasses
import hmac
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from standardwebhooks import Webhook

# Standard Webhooks' tolerance between a request's timestamp and its receiver's clock.
SIGNATURE_TOLERANCE_S = 5 * 60


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]
    body: str
    at: float  # time.monotonic()
    status: int = 0  # what the receiver answered
    received_at: float = field(default_factory=time.time)  # the wall clock's time of arrival

    @property
    def event(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.body)
        return data

    @property
    def webhook_id(self) -> str:
        return self.headers["webhook-id"]

    def verified_by(self, secret: str) -> bool:
        """As the receiver would have verified it when it arrived: its timestamp within Standard Webhooks' 5 minutes
        of that moment (not of now: a run longer than 5 minutes checks its first deliveries after that long), and
        one of its v1 signatures the one `standardwebhooks` makes with `secret`."""
        headers = {key.lower(): value for key, value in self.headers.items()}
        try:
            timestamp = datetime.fromtimestamp(float(headers["webhook-timestamp"]), tz=UTC)
            if abs(timestamp.timestamp() - self.received_at) > SIGNATURE_TOLERANCE_S:
                return False
            expected = Webhook(secret).sign(msg_id=headers["webhook-id"], timestamp=timestamp, data=self.body)
        except Exception:
            return False
        given = headers.get("webhook-signature", "").split(" ")
        return any(hmac.compare_digest(expected, signature) for signature in given if signature.startswith("v1,"))


@dataclass
class Script:
    """Answers for one path: each request takes the next (status, headers); when none is left, `then`."""

    answers: list[tuple[int, dict[str, str]]] = field(default_factory=list)
    then: int = 200


class Receiver:
    def __init__(self, fail_every: int = 0, port: int = 0) -> None:
        self.fail_every = fail_every
        self.received: list[Received] = []
        self.scripts: dict[str, Script] = {}
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length).decode()
                headers = {k.lower(): v for k, v in self.headers.items()}
                status, extra = receiver._answer(Received(self.path, headers, body, time.monotonic()))
                self.send_response(status)
                for name, value in extra.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, format: str, *args: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.port = self.server.server_address[1]
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def script(self, path: str, *answers: tuple[int, dict[str, str]], then: int = 200) -> None:
        with self._lock:
            self.scripts[path] = Script(list(answers), then)

    def _answer(self, received: Received) -> tuple[int, dict[str, str]]:
        with self._lock:
            status, extra = self._decide(received.path, len(self.received) + 1)
            self.received.append(dataclasses.replace(received, status=status))
            return status, extra

    def _decide(self, path: str, count: int) -> tuple[int, dict[str, str]]:
        if self.fail_every and count % self.fail_every == 0:
            return 503, {}
        script = self.scripts.get(path)
        if script is None:
            return 200, {}
        if script.answers:
            return script.answers.pop(0)
        return script.then, {}

    def at(self, path: str) -> list[Received]:
        with self._lock:
            return [r for r in self.received if r.path == path]

    def events(self, path: str) -> Iterator[tuple[Received, dict[str, Any]]]:
        for received in self.at(path):
            yield received, received.event

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@contextlib.contextmanager
def listening(serve: Callable[[socket.socket], None]) -> Iterator[int]:
    """A TCP server on 127.0.0.1 whose every connection is given to `serve(connection)`; yields its port."""
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                connection, _ = server.accept()
            except OSError:
                return
            threading.Thread(target=serve, args=(connection,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield server.getsockname()[1]
    finally:
        stop.set()
        server.close()


def trickle(connection: socket.socket) -> None:
    """Reads the request, then answers one byte every 0.2 s, for ever (until the client goes)."""
    with contextlib.suppress(OSError):
        connection.recv(65536)
        for byte in b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n" + b"x" * 100000:
            connection.sendall(bytes([byte]))
            time.sleep(0.2)
    connection.close()
