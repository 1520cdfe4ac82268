"""`make e2e URL=...`: the suite pointed at a URL runs its portable tests there and names the others not
applicable. Proven here against the session's embedded runtime, reached only by its URL and a token."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from offpath_tools.launcher import OffpathLocal, free_loopback_port
from tests.e2e.conftest import ROOT, TENANT_A, TENANT_B, TOKEN_A, Local
from tests.e2e.conftest import TOKEN_B as TOKEN_B_VALUE
from tests.e2e.target import RECEIVER_PORT, RECEIVER_URL, SIGV4, TOKEN, TOKEN_B, URL, Target, TargetError

PORTABLE = "tests/e2e/test_job_lifecycle.py::test_echo_job_succeeds_with_its_payload_as_result"
NEEDS_TENANT_B = "tests/e2e/test_job_lifecycle.py::test_a_tenant_cannot_see_another_tenants_jobs"
NEEDS_CLOCK = "tests/e2e/test_operations.py::test_a_declared_schedule_is_fired_by_the_clock"
NEEDS_RUNTIME = "tests/e2e/test_gateway.py::test_a_function_that_raises_is_answered_500_in_the_envelope"
TESTS = (PORTABLE, NEEDS_TENANT_B, NEEDS_CLOCK, NEEDS_RUNTIME)
# The suite needs none of the installed pytest plugins (hypothesis and schemathesis take seconds to import).
LEAN = {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}


def test_a_run_against_a_url_passes_the_portable_tests_and_lists_the_rest_by_name(local: Local) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OFFPATH_E2E_")}
    env.update({URL: local.url, TOKEN: TOKEN_A, **LEAN})

    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *TESTS],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )

    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    assert "1 passed, 3 skipped" in out
    assert f"not applicable on {local.url}: 3 tests" in out
    assert f"N/A {NEEDS_TENANT_B} (needs a second, non-admin tenant (TOKEN_B))" in out
    assert f"N/A {NEEDS_CLOCK} (needs a scheduler clock faster than real time" in out
    assert f"N/A {NEEDS_RUNTIME} (needs the embedded runtime itself" in out


def test_make_e2e_passes_its_variables_to_the_suite() -> None:
    done = subprocess.run(
        [
            "make",
            "-n",
            "e2e",
            "URL=https://api.example.com",
            "TOKEN=t-a",
            "TOKEN_B=t-b",
            "SIGV4=",
            "RECEIVER_URL=r",
            "RECEIVER_PORT=47001",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert done.returncode == 0, done.stderr
    command = done.stdout.replace("\\\n", " ")
    expected_variables = (
        f"{URL}='https://api.example.com'",
        f"{TOKEN}='t-a'",
        f"{TOKEN_B}='t-b'",
        f"{SIGV4}=''",
        f"{RECEIVER_URL}='r'",
        f"{RECEIVER_PORT}='47001'",
    )
    for expected in expected_variables:
        assert expected in command
    assert "-m pytest tests/e2e" in command


def test_the_embedded_runtime_can_do_everything_a_deployment_only_what_it_was_given() -> None:
    deployed = Target.from_environment({URL: "https://abc.execute-api.eu-west-1.amazonaws.com/", SIGV4: "1"})
    with_b = Target.from_environment({URL: "http://localhost:4566", TOKEN: "a", TOKEN_B: "b"})

    assert deployed is not None and with_b is not None
    assert deployed.url == "https://abc.execute-api.eu-west-1.amazonaws.com"
    assert deployed.capabilities == {"admin"}
    assert deployed.client().sign is True
    assert with_b.capabilities == {"admin", "tenant_b", "token"}
    assert deployed.shared and with_b.shared
    assert Target.from_environment({}) is None


def test_webhook_tests_run_only_with_a_receiver_the_target_accepts() -> None:
    local, deployed = "http://127.0.0.1:8000", "https://abc.execute-api.eu-west-1.amazonaws.com"
    cases = [
        # `offpath local` refuses a loopback receiver on a port it was not started to accept (422 `url`).
        ({URL: local}, False),
        ({URL: local, RECEIVER_PORT: "47001"}, True),
        ({URL: "http://localhost:4566", RECEIVER_PORT: "47001"}, False),  # LocalStack's functions run in containers
        ({URL: deployed, RECEIVER_PORT: "47001"}, False),
        ({URL: deployed, RECEIVER_URL: "https://hooks.example.com/e2e"}, True),
    ]

    for env, receiver in cases:
        target = Target.from_environment({TOKEN: "a", **env})
        assert target is not None and target.can("receiver") is receiver, env


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({URL: "https://x.example.com"}, "give TOKEN=<an admin tenant's token> or SIGV4=1"),
        ({URL: "https://x.example.com", TOKEN: "a", SIGV4: "1"}, "one of the two"),
        ({URL: "https://x.example.com", SIGV4: "1", TOKEN_B: "b"}, "TOKEN_B needs TOKEN"),
        ({URL: "x.example.com", TOKEN: "a"}, "must be an http:// or https:// URL"),
    ],
)
def test_an_incomplete_target_is_refused_with_what_to_give(env: dict[str, str], message: str) -> None:
    with pytest.raises(TargetError, match=message.replace("(", r"\(").replace(")", r"\)")):
        Target.from_environment(env)


# -- a shared target: the suite touches only what it made ---------------------------------------------------------

BYSTANDER, BYSTANDER_TOKEN = "bystander", "e2e-token-bystander"
REDRIVE = "tests/e2e/test_operations.py::test_redrive_sends_dead_jobs_back_through_the_worker"
# Parks a poison job of the suite's own in the default DLQ without naming it as parked: the suite sees it FAILED.
OWN_DEAD_LETTER = "tests/e2e/test_cli.py::test_status_of_a_failed_job_shows_its_attempts_error_and_traceback"
WEBHOOK_TESTS = (
    "tests/e2e/test_live.py::test_an_endpoint_is_registered_read_rotated_and_its_secret_shown_only_when_made",
    "tests/e2e/test_live.py::test_a_test_event_reaches_the_receiver_signed_and_is_in_the_delivery_log",
    "tests/e2e/test_live.py::test_another_tenants_endpoint_is_not_found[GET-]",
)


def run_suite(
    url: str, *tests: str, token_b: str | None = TOKEN_B_VALUE, receiver_port: int | None = None
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OFFPATH_E2E_")}
    env.update({URL: url, TOKEN: TOKEN_A, **({TOKEN_B: token_b} if token_b else {}), **LEAN})
    if receiver_port is not None:
        env[RECEIVER_PORT] = str(receiver_port)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *tests],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_against_a_shared_target_another_tenants_dead_letter_stays_and_no_endpoint_is_left(
    tmp_path: Path,
) -> None:
    receiver_port = free_loopback_port()
    runtime = OffpathLocal.start(
        tmp_path,
        tokens={TENANT_A: TOKEN_A, TENANT_B: TOKEN_B_VALUE, BYSTANDER: BYSTANDER_TOKEN},
        admins=[TENANT_A],
        args=["--quiet"],
        cwd=ROOT,
        webhook_ports=[receiver_port],
    )
    try:
        # Given another tenant's poison job parked in the default DLQ
        shared = Target.from_environment({URL: runtime.url, TOKEN: TOKEN_A})
        assert shared is not None
        bystander = Target.from_environment({URL: runtime.url, TOKEN: BYSTANDER_TOKEN})
        assert bystander is not None
        parked = bystander.submit("demo.poison", {"reason": "the bystander's"})
        bystander.wait_for_job(parked.body["job_id"], {"FAILED"})
        shared.wait_for(lambda: dlq_depth(shared) == 1 or None)

        # When the suite parks a dead letter of its own there, then runs its redrive and webhook tests against
        # the runtime's URL
        done = run_suite(runtime.url, OWN_DEAD_LETTER, REDRIVE, *WEBHOOK_TESTS, receiver_port=receiver_port)

        # Then the redrive was not applicable, and nothing of the bystander's (or anyone's) was touched
        out = done.stdout
        assert done.returncode == 0, out + done.stderr
        # (the suite's own dead letter is not counted as another tenant's)
        assert f"N/A {REDRIVE} (DLQ not empty (1 dead letter on default not this run's own))" in out
        assert re.search(
            r"e2e on http://127\.0\.0\.1:\d+: ran \d+ of \d+ tests \(\d+%\): \d+ passed, 0 failed; 1 not applicable",
            out,
        )
        job = bystander.job(parked.body["job_id"])
        assert (job["status"], job["attempts"], job["redrives"], job["retries"]) == ("FAILED", 1, 0, 0)
        assert dlq_depth(shared) == 2  # the bystander's and the suite's own
        for tenant in ("a", "b"):
            assert shared_with_b(runtime.url).call("GET", "/webhooks", tenant=tenant).body["webhooks"] == []
    finally:
        runtime.stop()


def dlq_depth(target: Target) -> int:
    queues = target.call("GET", "/queues").body["queues"]
    return int(next(q["dlq_depth"] for q in queues if q["name"] == "default"))


def shared_with_b(url: str) -> Target:
    target = Target.from_environment({URL: url, TOKEN: TOKEN_A, TOKEN_B: TOKEN_B_VALUE})
    assert target is not None
    return target


class NoDemos(BaseHTTPRequestHandler):
    """A target deployed without demo job types: `GET /job-types` lists one job type of its own."""

    def do_GET(self) -> None:
        body = json.dumps({"job_types": [{"name": "send_welcome_email"}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


def test_a_target_without_the_demo_job_types_stops_the_run_with_one_line() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), NoDemos)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"

        done = run_suite(url, "tests/e2e/test_job_lifecycle.py", token_b=None)
    finally:
        server.shutdown()
        server.server_close()

    assert done.returncode == 4, done.stdout + done.stderr  # pytest's usage error: nothing ran
    lines = [line for line in done.stderr.splitlines() if line.startswith("ERROR: make e2e:")]
    assert lines == [
        f"ERROR: make e2e: {url} has no demo job types (demo.echo, demo.sleep, demo.flaky, demo.poison missing): "
        "it was deployed without demos; the suite runs its jobs on them (deploy a test stage with -c demo_jobs=true)"
    ]
    assert " passed" not in done.stdout and " failed" not in done.stdout
