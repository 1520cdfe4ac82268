"""`offpath console --api URL`: the console for a deployed API, served on loopback, signing each call itself.
The embedded runtime plays the deployed API (with `--token`); a recording server shows the SigV4 signature."""

from __future__ import annotations

import http.client
import json
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from offpath_local.client import ApiClient
from offpath_local.console.proxy import ConsoleProxy
from tests.e2e.conftest import ROOT, TOKEN_A, Local

START_TIMEOUT_S = 20


@dataclass
class Proxy:
    host: str
    port: int
    session: str

    def call(
        self,
        method: str,
        path: str,
        *,
        token: str | None = None,
        headers: dict[str, str] | None = None,
        body: Any = None,
    ) -> tuple[int, dict[str, str], bytes]:
        connection = http.client.HTTPConnection(self.host, self.port, timeout=30)
        all_headers = {"Authorization": f"Bearer {token or self.session}", **(headers or {})}
        data = json.dumps(body).encode() if body is not None else None
        if data is not None:
            all_headers["Content-Type"] = "application/json"
        connection.request(method, path, body=data, headers=all_headers)
        answer = connection.getresponse()
        result = answer.status, {k.lower(): v for k, v in answer.getheaders()}, answer.read()
        connection.close()
        return result


@pytest.fixture(scope="module")
def proxy(local: Local, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Proxy]:
    """`offpath console` as a user runs it, against the local runtime as the "deployed" API."""
    out = tmp_path_factory.mktemp("console") / "out.txt"
    command = [sys.executable, "-m", "offpath_local", "console", "--api", local.url, "--token", TOKEN_A, "--port", "0"]
    with out.open("w") as sink:
        process = subprocess.Popen(command, cwd=ROOT, stdout=sink, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            found = re.search(r"open http://(127\.0\.0\.1):(\d+)/console#token=([0-9a-f]+)", out.read_text())
            if found:
                break
            assert process.poll() is None, out.read_text()
            assert time.monotonic() < deadline, f"offpath console did not start:\n{out.read_text()}"
            time.sleep(0.05)
        yield Proxy(found.group(1), int(found.group(2)), found.group(3))
    finally:
        process.terminate()
        assert process.wait(timeout=10) == 0, out.read_text()


def test_the_proxy_serves_the_console_pointed_at_its_api_path(proxy: Proxy) -> None:
    status, headers, body = proxy.call("GET", "/console/jobs/0123456789abcdef0123456789abcdef")

    assert status == 200
    assert b'<meta name="offpath-api" content="/api">' in body
    assert "script-src 'self'" in headers["content-security-policy"]


def test_api_calls_reach_the_deployed_api_with_the_users_token(proxy: Proxy, local: Local) -> None:
    status, headers, body = proxy.call("POST", "/api/jobs", body={"type": "demo.echo", "payload": {"via": "console"}})
    assert status == 202, body
    job_id = json.loads(body)["job_id"]
    assert headers["location"] == f"/jobs/{job_id}"

    status, _, body = proxy.call("GET", f"/api/jobs/{job_id}")
    assert status == 200 and json.loads(body)["job_id"] == job_id
    assert local.job(job_id, token=TOKEN_A)["type"] == "demo.echo", "made as the tenant whose token the proxy holds"

    status, _, body = proxy.call("GET", "/api/jobs?limit=1")
    assert status == 200 and len(json.loads(body)["jobs"]) == 1


def test_api_calls_need_the_proxys_own_session_token(proxy: Proxy) -> None:
    assert proxy.call("GET", "/api/jobs", token="not-the-session")[0] == 401
    assert proxy.call("GET", "/api/jobs", token=TOKEN_A)[0] == 401, "the API's token is not the browser's"


def test_another_site_cannot_use_the_proxy(proxy: Proxy) -> None:
    rebinding = proxy.call("POST", "/api/queues/default/redrive", headers={"Host": f"evil.example:{proxy.port}"})
    cross_site = proxy.call("POST", "/api/queues/default/redrive", headers={"Sec-Fetch-Site": "cross-site"})

    assert rebinding[0] == 403 and cross_site[0] == 403


def test_only_api_paths_are_forwarded(proxy: Proxy) -> None:
    assert proxy.call("GET", "/api/jobs/%2e%2e/health")[0] == 400
    assert proxy.call("GET", "/jobs")[0] == 404


class _Recorder(BaseHTTPRequestHandler):
    seen: list[dict[str, str]] = []

    def do_GET(self) -> None:
        type(self).seen.append({"path": self.path, **{k.lower(): v for k, v in self.headers.items()}})
        body = b'{"jobs": [], "cursor": null}'
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def recorder() -> Iterator[tuple[str, list[dict[str, str]]]]:
    _Recorder.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/prod", _Recorder.seen
    finally:
        server.shutdown()
        server.server_close()


def _through(client: ApiClient, path: str) -> int:
    proxy = ConsoleProxy(client, port=0)
    proxy.start()
    try:
        return Proxy(proxy.host, proxy.port, proxy.session_token).call("GET", path)[0]
    finally:
        proxy.stop()


def test_without_a_token_each_call_is_signed_with_sigv4(recorder: tuple[str, list[dict[str, str]]]) -> None:
    url, seen = recorder

    assert _through(ApiClient(url, sign=True, region="eu-west-1"), "/api/jobs?status=FAILED") == 200

    [request] = seen
    assert request["path"] == "/prod/jobs?status=FAILED"
    assert re.match(
        r"AWS4-HMAC-SHA256 Credential=testing/\d{8}/eu-west-1/execute-api/aws4_request", request["authorization"]
    )
    assert "x-amz-date" in request


def test_a_profile_signs_with_that_profiles_credentials(
    recorder: tuple[str, list[dict[str, str]]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, seen = recorder
    credentials = tmp_path / "credentials"
    credentials.write_text("[ops]\naws_access_key_id = AKIAOPSPROFILE\naws_secret_access_key = secret\n")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(credentials))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))

    assert _through(ApiClient(url, sign=True, region="eu-west-1", profile="ops"), "/api/jobs") == 200

    assert seen[0]["authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKIAOPSPROFILE/")
