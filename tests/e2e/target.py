"""Where the end-to-end suite runs: a target, given by its URL or started by the session.

`make e2e URL=... TOKEN=... [TOKEN_B=...]` or `make e2e URL=... SIGV4=1` (the environment variables
`OFFPATH_E2E_URL`, `OFFPATH_E2E_TOKEN`, `OFFPATH_E2E_TOKEN_B`, `OFFPATH_E2E_SIGV4`) points the suite at a deployment:
LocalStack or an AWS stage. `TOKEN` is an admin tenant's bearer token (a JWT-authorised stage), `TOKEN_B` a
second, non-admin tenant's; `SIGV4=1` signs every request with the AWS credentials of the shell (an
IAM-authorised stage; the caller's policy grants the admin routes).

Without a URL (`make test`), the target is the embedded runtime the session starts as a separate process
(`offpath local`), described by the same variables: its URL and two tokens. The portable tests (those that take
the `target` fixture) reach it only over HTTP, as they reach a deployment.

Each target declares what it can do (`CAPABILITIES`). A test that needs more (`@pytest.mark.needs(...)`; a test
without the `target` fixture needs the embedded runtime itself) is reported as not applicable, by name.

Against a URL the suite touches only what it made: its own jobs, its own webhook endpoints (each deleted after its
test), never another tenant's. A redrive moves every dead letter of a queue, so the redrive test runs only where
the DLQ held nothing but the suite's own (tests/e2e/conftest.py `Preflight`). Webhook deliveries need a receiver
the target can reach: one the suite starts on 127.0.0.1 for a loopback target (`RECEIVER_PORT=N`, a port the
target was started to accept: `offpath local --webhook-port N`), or `RECEIVER_URL=` (any HTTP(S) endpoint answering
2xx) for a deployment; then deliveries are checked in the API's delivery log.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from offpath_local.client import ApiClient

T = TypeVar("T")
URL, TOKEN, TOKEN_B, SIGV4 = "OFFPATH_E2E_URL", "OFFPATH_E2E_TOKEN", "OFFPATH_E2E_TOKEN_B", "OFFPATH_E2E_SIGV4"
RECEIVER_URL = "OFFPATH_E2E_RECEIVER_URL"
# The port of the suite's webhook receiver on 127.0.0.1. `offpath local` accepts loopback receivers only on the ports
# its operator named (`--webhook-port N`): against a loopback URL, webhook tests run only when RECEIVER_PORT=N is given.
RECEIVER_PORT = "OFFPATH_E2E_RECEIVER_PORT"
# LocalStack's functions run in containers: a receiver on this machine's loopback is out of their reach.
LOCALSTACK_PORT = 4566
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})
# The job types the suite submits: a stage deployed without demos (-c demos=false) has none of them.
DEMO_TYPES = ("demo.echo", "demo.sleep", "demo.flaky", "demo.poison")
TRUE_WORDS = frozenset({"1", "true", "yes", "on"})
CAPABILITIES = {
    "admin": "an admin caller (redrive, trigger)",
    "tenant_b": "a second, non-admin tenant (TOKEN_B)",
    "token": "bearer-token callers (TOKEN=...; an IAM-authorised stage refuses before any token check)",
    "receiver": "a webhook receiver the target can reach and accepts (RECEIVER_URL=...; for `offpath local "
    "--webhook-port N`, RECEIVER_PORT=N)",
    "clock": "a scheduler clock faster than real time (the embedded runtime's)",
    "faults": "fault injection (the embedded runtime's)",
    "embedded": "the embedded runtime itself (its data directory, console, gateway or emulator)",
}
EMBEDDED = frozenset(CAPABILITIES)
# How much longer a deployment may take than the embedded runtime (cold starts, real polling intervals).
DEPLOYED_PATIENCE = 4.0


class TargetError(ValueError):
    """The variables do not describe a target; the message says what to give."""


@dataclass
class Response:
    status: int
    body: Any
    headers: dict[str, str]


@dataclass(frozen=True)
class Target:
    name: str
    url: str
    token: str | None
    token_b: str | None
    sigv4: bool
    capabilities: frozenset[str]
    patience: float = 1.0
    receiver_url: str | None = None
    # True for a deployment named by URL: shared with other tenants, so the suite touches only what it made.
    shared: bool = True
    # The suite's own jobs parked in a DLQ during this run (a redrive may move only these).
    parked: set[str] = field(default_factory=set, compare=False, hash=False)

    @classmethod
    def from_environment(
        cls,
        env: Mapping[str, str],
        *,
        name: str | None = None,
        capabilities: frozenset[str] | None = None,
        patience: float = DEPLOYED_PATIENCE,
    ) -> Target | None:
        """The target the variables describe, or None when no URL is given (the embedded runtime)."""
        url = env.get(URL, "").strip().rstrip("/")
        if not url:
            return None
        if not url.startswith(("http://", "https://")):
            raise TargetError(f"URL must be an http:// or https:// URL, not {url[:60]!r}")
        token = env.get(TOKEN, "").strip() or None
        token_b = env.get(TOKEN_B, "").strip() or None
        sigv4 = env.get(SIGV4, "").strip().lower() in TRUE_WORDS
        if sigv4 == bool(token):
            raise TargetError("give TOKEN=<an admin tenant's token> or SIGV4=1 (AWS credentials), one of the two")
        if token_b and not token:
            raise TargetError("TOKEN_B needs TOKEN: both tenants call with bearer tokens")
        receiver_url = env.get(RECEIVER_URL, "").strip() or None
        declared = {"admin"} | ({"tenant_b"} if token_b else set()) | ({"token"} if token else set())
        loopback_receiver = env.get(RECEIVER_PORT, "").strip() and urlsplit(url).port != LOCALSTACK_PORT
        if receiver_url or (is_loopback(url) and loopback_receiver):
            declared.add("receiver")
        return cls(
            name=name or url,
            url=url,
            token=token,
            token_b=token_b,
            sigv4=sigv4,
            capabilities=capabilities if capabilities is not None else frozenset(declared),
            patience=patience,
            receiver_url=receiver_url,
        )

    def can(self, need: str) -> bool:
        return need in self.capabilities

    def client(self, tenant: str | None = "a") -> ApiClient:
        """Tenant "a" (the admin), "b" (the second tenant) or None (no credentials at all)."""
        # Imported here, not with this module: conftest loads it, and the fuzz tests' generated cases depend
        # on the project modules loaded when they run (tests/e2e/test_fuzz_api.py).
        from offpath_local.client import ApiClient

        if tenant is None:
            return ApiClient(self.url)
        if tenant == "b":
            if self.token_b is None:
                raise TargetError(f"{self.name} has no second tenant (TOKEN_B)")
            return ApiClient(self.url, token=self.token_b)
        return ApiClient(self.url, token=self.token, sign=self.sigv4)

    def call(
        self,
        method: str,
        path: str,
        *,
        tenant: str | None = "a",
        body: Any = None,
        raw: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> Response:
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        all_headers = {"Content-Type": "application/json"} if data is not None else {}
        all_headers.update(headers or {})
        status, answer, answered = self.client(tenant).send(method, path, data, all_headers)
        try:
            parsed = json.loads(answer) if answer else None
        except ValueError:
            parsed = answer.decode(errors="replace")
        return Response(status, parsed, {k.lower(): v for k, v in answered.items()})

    def submit(self, job_type: str, payload: dict[str, Any], **kwargs: Any) -> Response:
        return self.call("POST", "/jobs", body={"type": job_type, "payload": payload}, **kwargs)

    def job(self, job_id: str, tenant: str = "a") -> dict[str, Any]:
        """The job's view; one of the suite's own seen FAILED on `default` and not discarded is recorded as parked
        there (so a redrive's count of other tenants' dead letters leaves it out), one seen discarded is not."""
        answer = self.call("GET", f"/jobs/{job_id}", tenant=tenant)
        assert answer.status == 200, answer.body
        view = dict(answer.body)
        if view.get("discarded_at") is not None:
            self.parked.discard(job_id)
        elif view.get("status") == "FAILED" and view.get("queue") == "default":
            self.parked.add(job_id)
        return view

    def wait_for_job(self, job_id: str, statuses: set[str], timeout_s: float = 20) -> dict[str, Any]:
        def reached() -> dict[str, Any] | None:
            job = self.job(job_id)
            return job if job["status"] in statuses else None

        return self.wait_for(reached, timeout_s)

    def wait_for(self, probe: Callable[[], T | None], timeout_s: float = 20, interval_s: float = 0.05) -> T:
        """Poll `probe` until it returns something; the timeout is stretched by the target's patience."""
        deadline = time.monotonic() + timeout_s * self.patience
        while time.monotonic() < deadline:
            found = probe()
            if found is not None:
                return found
            time.sleep(interval_s * self.patience)
        raise AssertionError(f"condition not met within {timeout_s * self.patience:g} s on {self.name}")


def is_loopback(url: str) -> bool:
    return (urlsplit(url).hostname or "") in LOOPBACK_HOSTS


def not_applicable(target: Target, needs: set[str]) -> str | None:
    """Why a test with these needs does not apply to the target, or None when it does."""
    missing = sorted(needs - target.capabilities)
    if not missing:
        return None
    return f"not applicable on {target.name}: needs " + "; ".join(CAPABILITIES.get(m, m) for m in missing)
