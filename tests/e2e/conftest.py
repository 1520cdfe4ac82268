"""The embedded runtime, started once per test session (`offpath local` in a child process, on free
loopback ports, with a fast scheduler clock: offpath_tools.launcher), and driven only over HTTP.

The portable tests take the `target` fixture (tests/e2e/target.py): the embedded runtime by default, or the
deployment `make e2e URL=...` names; there, every test that needs more than the target can do is reported as
not applicable, by name, at the end of the run, with the counts (ran, not applicable, failed).

Against a URL, before any test: `GET /job-types` (the demo job types must be there: one line and a stop if not)
and `GET /queues` (the DLQ depths before the suite ran; the redrive test needs an empty one)."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest

from offpath_tools.launcher import OffpathLocal, free_loopback_port
from offpath_tools.webhook_receiver import Receiver
from tests.e2e import target as variables
from tests.e2e.target import DEMO_TYPES, EMBEDDED, RECEIVER_PORT, Response, Target, TargetError, not_applicable

ROOT = Path(__file__).resolve().parents[2]
TENANT_A, TOKEN_A = "tenant-a", "e2e-token-tenant-a"
TENANT_B, TOKEN_B = "tenant-b", "e2e-token-tenant-b"
T = TypeVar("T")


EMBEDDED_NAME = "the embedded runtime"
# Tests not applicable on the target of this run, with why; printed at the end of the run.
NOT_APPLICABLE: list[tuple[str, str]] = []
_GIVEN: list[Target] = []


@dataclass
class Preflight:
    """What the target held before the suite touched it."""

    job_types: list[str] = field(default_factory=list)
    dlq_depths: dict[str, int] = field(default_factory=dict)


PREFLIGHT = Preflight()


def given_target() -> Target | None:
    """The deployment `make e2e URL=...` names (one object for the whole run), or None: the embedded runtime."""
    try:
        given = Target.from_environment(os.environ)
    except TargetError as error:
        raise pytest.UsageError(f"make e2e: {error}") from None
    if given is None:
        return None
    if not _GIVEN or _GIVEN[0] != given:
        _GIVEN[:] = [given]
    return _GIVEN[0]


def preflight(given: Target) -> None:
    """Before any test: can the suite run here at all? One line and a stop when it cannot."""
    from offpath_local.client import CannotConnectError

    try:
        types = given.call("GET", "/job-types")
    except (CannotConnectError, OSError) as error:
        raise pytest.UsageError(f"make e2e: {given.url} does not answer ({error})") from None
    if types.status in {401, 403}:
        check = "the shell's AWS credentials (SIGV4=1)" if given.sigv4 else "TOKEN"
        refused = f"refused the suite's credentials ({types.status})"
        raise pytest.UsageError(f"make e2e: {given.url} {refused}: check {check}")
    if types.status != 200 or not isinstance(types.body, dict):
        raise pytest.UsageError(f"make e2e: GET {given.url}/job-types answered {types.status}, not the job types")
    PREFLIGHT.job_types = [str(t["name"]) for t in types.body.get("job_types", [])]
    missing = [name for name in DEMO_TYPES if name not in PREFLIGHT.job_types]
    if missing:
        raise pytest.UsageError(
            f"make e2e: {given.url} has no demo job types ({', '.join(missing)} missing): it was deployed without "
            "demos; the suite runs its jobs on them (deploy a test stage with -c demo_jobs=true)"
        )
    queues = given.call("GET", "/queues")
    if queues.status == 200:
        PREFLIGHT.dlq_depths = {str(q["name"]): int(q["dlq_depth"]) for q in queues.body["queues"]}


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "needs(*capabilities): what the e2e target must be able to do (target.py)")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    given = given_target()
    if given is not None and any("target" in getattr(item, "fixturenames", ()) for item in items):
        preflight(given)
    for item in items:
        if "tests/e2e/" not in str(item.fspath).replace(os.sep, "/"):
            continue
        item.add_marker(pytest.mark.e2e)
        if given is None:
            continue
        needs = {need for marker in item.iter_markers("needs") for need in marker.args}
        if "target" not in getattr(item, "fixturenames", ()):
            needs.add("embedded")
        reason = not_applicable(given, needs)
        if reason is not None:
            item.add_marker(pytest.mark.skip(reason=reason))
            NOT_APPLICABLE.append((item.nodeid, reason.split(": ", 1)[1]))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """A test that finds out while running that it does not apply here (the redrive test on a DLQ that held
    someone else's dead letters) skips with a reason that starts "not applicable: "."""
    if report.skipped and report.when in {"setup", "call"}:
        reason = str(report.longrepr[2]) if isinstance(report.longrepr, tuple) else ""
        reason = reason.removeprefix("Skipped: ")
        if reason.startswith("not applicable: ") and given_target() is not None:
            NOT_APPLICABLE.append((report.nodeid, reason.split(": ", 1)[1]))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    given = given_target()
    if given is None:
        return
    if NOT_APPLICABLE:
        terminalreporter.section(f"not applicable on {given.name}: {len(NOT_APPLICABLE)} tests")
        for nodeid, why in NOT_APPLICABLE:
            terminalreporter.write_line(f"N/A {nodeid} ({why})")
    stats = terminalreporter.stats
    passed = len([r for r in stats.get("passed", []) if r.when == "call"])
    failed = len({r.nodeid for r in stats.get("failed", []) + stats.get("error", [])})
    skipped = len({r.nodeid for r in stats.get("skipped", [])})
    total = passed + failed + skipped
    if total:
        ran = passed + failed
        terminalreporter.write_line(
            f"e2e on {given.name}: ran {ran} of {total} tests ({100 * ran / total:.0f}%): {passed} passed, "
            f"{failed} failed; {skipped} not applicable"
        )


@pytest.fixture(scope="session")
def target(request: pytest.FixtureRequest) -> Target:
    """The deployment given by URL, else the session's embedded runtime reached only by its URL and tokens
    (described by the same variables `make e2e` sets)."""
    given = given_target()
    if given is not None:
        return given
    local: Local = request.getfixturevalue("local")
    embedded = Target.from_environment(
        {variables.URL: local.url, variables.TOKEN: TOKEN_A, variables.TOKEN_B: TOKEN_B},
        name=EMBEDDED_NAME,
        capabilities=EMBEDDED,
        patience=1.0,
    )
    assert embedded is not None
    return dataclasses.replace(embedded, shared=False)


@dataclass
class Hook:
    """A webhook endpoint the suite registered (its secret) and where its deliveries arrive."""

    name: str
    url: str
    secret: str
    tenant: str
    receiver: Receiver | None
    path: str


# The port of the suite's webhook receiver on 127.0.0.1: an `offpath local` target accepts loopback receivers only
# on the ports its operator named (`--webhook-port`), so a runtime the suite runs against names this one; a target
# started elsewhere names it through RECEIVER_PORT (tests/e2e/target.py).


@pytest.fixture(scope="session")
def receiver_port() -> int:
    return int(os.environ.get(RECEIVER_PORT) or free_loopback_port())


@pytest.fixture(scope="session")
def receiver(receiver_port: int) -> Iterator[Receiver]:
    receiver = Receiver(port=receiver_port)
    try:
        yield receiver
    finally:
        receiver.stop()


@pytest.fixture
def webhooks(target: Target, request: pytest.FixtureRequest) -> Iterator[Callable[..., Hook]]:
    """Registers webhook endpoints with names of this run (`PUT /webhooks/{name}`) and deletes each one after the
    test, whatever its outcome. Deliveries go to the suite's receiver on 127.0.0.1, or to RECEIVER_URL."""
    made: list[tuple[str, str]] = []

    def register(events: list[str], *, tenant: str = "a", **extra: Any) -> Hook:
        name = f"e2e-{uuid.uuid4().hex[:12]}"
        local: Receiver | None = None
        if target.receiver_url:
            url = target.receiver_url
        else:
            local = request.getfixturevalue("receiver")
            url = local.url(f"/{name}")
        answer = target.call("PUT", f"/webhooks/{name}", tenant=tenant, body={"url": url, "events": events, **extra})
        assert answer.status == 201, answer.body
        made.append((tenant, name))
        return Hook(name, url, str(answer.body["secret"]), tenant, local, f"/{name}")

    try:
        yield register
    finally:
        for tenant, name in made:
            gone = target.call("DELETE", f"/webhooks/{name}", tenant=tenant)
            assert gone.status in {204, 404}, (name, gone.status, gone.body)


@dataclass
class Local:
    url: str
    data_dir: Path
    log: Path

    def call(
        self,
        method: str,
        path: str,
        *,
        token: str | None = TOKEN_A,
        body: Any = None,
        raw: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> Response:
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        all_headers = {"Content-Type": "application/json"} if data is not None else {}
        if token is not None:
            all_headers["Authorization"] = f"Bearer {token}"
        all_headers.update(headers or {})
        request = urllib.request.Request(self.url + path, data=data, method=method, headers=all_headers)
        try:
            with urllib.request.urlopen(request, timeout=30) as answer:
                return _response(answer.status, answer.read(), dict(answer.headers))
        except urllib.error.HTTPError as error:
            return _response(error.code, error.read(), dict(error.headers))

    def submit(self, job_type: str, payload: dict[str, Any], **kwargs: Any) -> Response:
        return self.call("POST", "/jobs", body={"type": job_type, "payload": payload}, **kwargs)

    def accepted(self, job_type: str, payload: dict[str, Any], key: str, attempts: int = 3) -> str:
        """Submit as a client should on a loaded machine: with an Idempotency-Key, again on a 503 (the gateway's
        30 s integration timeout), the same job whichever try was the one that ran. Its job id; any other answer
        fails with the answer shown."""
        for _ in range(attempts):
            answer = self.submit(job_type, payload, headers={"Idempotency-Key": key})
            if answer.status != 503:
                break
        assert answer.status in (200, 202), (answer.status, answer.body)
        return str(answer.body["job_id"])

    def job(self, job_id: str, token: str = TOKEN_A) -> dict[str, Any]:
        answer = self.call("GET", f"/jobs/{job_id}", token=token)
        assert answer.status == 200, answer.body
        return dict(answer.body)

    def wait_for_job(
        self, job_id: str, statuses: set[str], timeout_s: float = 20, token: str = TOKEN_A
    ) -> dict[str, Any]:
        return wait_for(lambda: _if(self.job(job_id, token), lambda j: j["status"] in statuses), timeout_s)

    def alarm_changes(self) -> list[dict[str, Any]]:
        path = self.data_dir / "alarms.jsonl"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    def alarm_state(self, name: str) -> str | None:
        states = [c["new_state"] for c in self.alarm_changes() if c["alarm"] == name]
        return states[-1] if states else None


def _if(value: T, condition: Callable[[T], bool]) -> T | None:
    return value if condition(value) else None


def wait_for(probe: Callable[[], T | None], timeout_s: float = 20, interval_s: float = 0.05) -> T:
    """Poll `probe` until it returns something (not None); fail after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    last: T | None = None
    while time.monotonic() < deadline:
        last = probe()
        if last is not None:
            return last
        time.sleep(interval_s)
    raise AssertionError(f"condition not met within {timeout_s} s")


def _response(status: int, raw: bytes, headers: dict[str, str]) -> Response:
    try:
        body = json.loads(raw) if raw else None
    except ValueError:
        body = raw.decode(errors="replace")
    return Response(status, body, {k.lower(): v for k, v in headers.items()})


def tests_importable() -> dict[str, str]:
    """The environment for a runtime that loads modules of this test tree (`--load tests.e2e...`)."""
    return {"PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}


@pytest.fixture(scope="session")
def local(tmp_path_factory: pytest.TempPathFactory, receiver_port: int) -> Iterator[Local]:
    runtime = OffpathLocal.start(
        tmp_path_factory.mktemp("offpath-local"),
        tokens={TENANT_A: TOKEN_A, TENANT_B: TOKEN_B},
        admins=[TENANT_A],
        webhook_ports=[receiver_port],
        load=["tests.e2e.local_schedules"],
        args=["--clock-speed", "60", "--clock-tick", "0.2", "--alarm-interval", "0.3"],
        env=tests_importable(),
        cwd=ROOT,
    )
    try:
        yield Local(url=runtime.url, data_dir=runtime.data_dir, log=runtime.console)
    finally:
        runtime.stop()


def emulator_scenario(module: str, timeout_s: float = 300) -> dict[str, Any]:
    """Runs `python -m <module>` (a scenario that starts an emulator of its own: moto's state, and the emulator's
    corrections to moto's classes, are per process) and returns the JSON its last line printed. The timeout is a
    guard against a hang: the scenarios are CPU work, slow on a shared machine."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    run = subprocess.run(
        [sys.executable, "-m", module], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout_s, check=True
    )
    return dict(json.loads(run.stdout.strip().splitlines()[-1]))
