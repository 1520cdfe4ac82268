"""`offpath console --api URL`: the console for a deployed stack, served on 127.0.0.1.

The browser loads the same page as from `offpath local` and calls the API at `/api/...` on this server,
which forwards each call to the deployed API signed here: SigV4 with the user's AWS credentials (a
profile, or the standard chain) or the JWT given with `--token`. The browser never holds either.

What stops another page, or another user of this machine, from using this server: every `/api` call
needs the session token this server made at start (given to the browser in the URL's fragment, sent
back as `Authorization: Bearer`); a call whose Host is not this server's (DNS rebinding) or that a
browser marks as cross-site is refused. Nothing is exposed on AWS: the server listens on loopback only.
"""

from __future__ import annotations

import argparse
import errno
import hmac
import json
import logging
import os
import re
import secrets
import signal
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from offpath_local.client import ApiClient, CannotConnectError, MissingCredentialsError
from offpath_local.console import SECURITY_HEADERS, ConsoleSite

logger = logging.getLogger("offpath.local.console")

DEFAULT_PORT = 8080
API_PREFIX = "/api"
MAX_BODY_BYTES = 10 * 1024 * 1024
# What a forwarded path may hold: the API's own path characters; no segment starts with a dot (no "..").
FORWARDED_PATH = re.compile(r"^(/[A-Za-z0-9_~%:@!$&'()*+,;=-][A-Za-z0-9._~%:@!$&'()*+,;=-]*)*/?$")
FORWARDED_HEADERS = ("content-type", "accept", "idempotency-key")
ANSWERED_HEADERS = ("content-type", "retry-after", "location", "idempotent-replayed")


class ConsoleProxy:
    def __init__(self, client: ApiClient, *, host: str = "127.0.0.1", port: int = 8080) -> None:
        self.client = client
        self.site = ConsoleSite(api_base=API_PREFIX)
        self.session_token = secrets.token_hex(20)
        self._server = _Server((host, port), _handler(self))
        address = self._server.server_address
        self.host, self.port = str(address[0]), int(address[1])
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def console_url(self) -> str:
        return f"{self.url}/console#token={self.session_token}"

    def allowed_hosts(self) -> set[str]:
        return {f"{self.host}:{self.port}", f"localhost:{self.port}", f"127.0.0.1:{self.port}"}

    def start(self) -> None:
        self._thread = threading.Thread(target=self._server.serve_forever, name="console-proxy", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def _handler(proxy: ConsoleProxy) -> type[BaseHTTPRequestHandler]:
    class Handler(_ProxyHandler):
        pass

    Handler.proxy = proxy
    return Handler


class _ProxyHandler(BaseHTTPRequestHandler):
    proxy: ConsoleProxy
    protocol_version = "HTTP/1.1"
    server_version = "offpath-console"
    sys_version = ""

    def do_GET(self) -> None:
        self._handle()

    def do_POST(self) -> None:
        self._handle()

    def do_PUT(self) -> None:
        self._handle()

    def do_PATCH(self) -> None:
        self._handle()

    def do_DELETE(self) -> None:
        self._handle()

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug(format, *args)

    def _handle(self) -> None:
        path = urlsplit(self.path).path or "/"
        if path == API_PREFIX or path.startswith(API_PREFIX + "/"):
            self._forward(self.path[len(API_PREFIX) :] or "/")
            return
        page = self.proxy.site.answer(self.command, path)
        if page is None:
            self._error(404, "not_found", "the console is at /console")
            return
        self._send(*page)

    def _forward(self, target: str) -> None:
        proxy = self.proxy
        if (self.headers.get("Host") or "") not in proxy.allowed_hosts():
            self._error(403, "forbidden", "this server answers requests for its own address only")
            return
        if (self.headers.get("Sec-Fetch-Site") or "").lower() == "cross-site":
            self._error(403, "forbidden", "cross-site requests are refused")
            return
        scheme, _, presented = (self.headers.get("Authorization") or "").partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(
            presented.strip().encode(), proxy.session_token.encode()
        ):
            self._error(401, "unauthorized", "open the console from the URL `offpath console` printed")
            return
        split = urlsplit(target)
        if not FORWARDED_PATH.match(split.path) or "%2e" in split.path.lower():
            self._error(400, "bad_path", "not a path of the API")
            return
        length = int(self.headers.get("Content-Length") or 0)
        if length < 0 or length > MAX_BODY_BYTES:
            self._error(413, "payload_too_large", "request bodies are limited to 10 MB")
            self.close_connection = True
            return
        data = self.rfile.read(length) if length else None
        headers = {k: v for k, v in self.headers.items() if k.lower() in FORWARDED_HEADERS}
        try:
            status, body, answered = proxy.client.send(self.command, target, data, headers)
        except CannotConnectError as error:
            self._error(502, "cannot_connect", str(error))
            return
        except MissingCredentialsError as error:
            self._error(500, "no_credentials", str(error))
            return
        kept = {k.lower(): v for k, v in answered.items() if k.lower() in ANSWERED_HEADERS}
        self._send(status, {"cache-control": "no-store", "x-content-type-options": "nosniff", **kept}, body)

    def _error(self, status: int, code: str, message: str) -> None:
        body = json.dumps({"error": {"code": code, "message": message}}).encode()
        self._send(status, {**SECURITY_HEADERS, "content-type": "application/json", "cache-control": "no-store"}, body)

    def _send(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)


# -- offpath console ----------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--api", metavar="URL", required=True, help="the deployed API (its execute-api URL)")
    signing = parser.add_mutually_exclusive_group()
    signing.add_argument("--profile", help="the AWS profile whose credentials sign each call (SigV4)")
    signing.add_argument("--token", help="a JWT for a JWT-authorised API (default: $OFFPATH_TOKEN, else SigV4)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port on 127.0.0.1 (default {DEFAULT_PORT})")


def run(args: argparse.Namespace) -> int:
    """Serves until Ctrl-C or SIGTERM. Exit codes as the CLI's: 0, 1 cannot listen, 2 usage."""
    api = str(args.api)
    if urlsplit(api).scheme not in ("http", "https") or not urlsplit(api).hostname:
        print(f"offpath console: --api takes the API's URL (https://...), got {api[:80]!r}", file=sys.stderr)
        return 2
    token = args.token or (None if args.profile else os.environ.get("OFFPATH_TOKEN")) or None
    client = ApiClient(api, token=token, sign=token is None, profile=args.profile)
    try:
        proxy = ConsoleProxy(client, port=args.port)
    except OSError as error:
        hint = " (try --port)" if error.errno == errno.EADDRINUSE else ""
        print(f"offpath console: cannot listen on 127.0.0.1:{args.port}: {error}{hint}", file=sys.stderr)
        return 1
    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
    proxy.start()
    signing = "its JWT" if token else f"SigV4 ({'profile ' + args.profile if args.profile else 'AWS credential chain'})"
    print(f"offpath console: {api} through {proxy.url}/api, signed with {signing}", flush=True)
    print(f"  open {proxy.console_url}", flush=True)
    print("Ctrl-C stops.", flush=True)
    try:
        while not stop.wait(0.2):
            pass
    finally:
        proxy.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 0
