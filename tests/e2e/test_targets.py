"""`make e2e URL=...`: the suite pointed at a URL runs its portable tests there and names the others not
applicable. Proven here against the session's embedded runtime, reached only by its URL and a token."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.e2e.conftest import ROOT, TOKEN_A, Local
from tests.e2e.target import SIGV4, TOKEN, TOKEN_B, URL, Target, TargetError

PORTABLE = "tests/e2e/test_job_lifecycle.py::test_echo_job_succeeds_with_its_payload_as_result"
NEEDS_TENANT_B = "tests/e2e/test_job_lifecycle.py::test_a_tenant_cannot_see_another_tenants_jobs"
NEEDS_CLOCK = "tests/e2e/test_operations.py::test_a_declared_schedule_is_fired_by_the_clock"
NEEDS_RUNTIME = "tests/e2e/test_gateway.py::test_a_request_without_a_token_is_refused_with_401"
TESTS = (PORTABLE, NEEDS_TENANT_B, NEEDS_CLOCK, NEEDS_RUNTIME)


def test_a_run_against_a_url_passes_the_portable_tests_and_lists_the_rest_by_name(local: Local) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OFFPATH_E2E_")}
    env.update({URL: local.url, TOKEN: TOKEN_A})

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
        ["make", "-n", "e2e", "URL=https://api.example.com", "TOKEN=t-a", "TOKEN_B=t-b", "SIGV4="],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert done.returncode == 0, done.stderr
    command = done.stdout.replace("\\\n", " ")
    for expected in (f"{URL}='https://api.example.com'", f"{TOKEN}='t-a'", f"{TOKEN_B}='t-b'", f"{SIGV4}=''"):
        assert expected in command
    assert "-m pytest tests/e2e" in command


def test_the_embedded_runtime_can_do_everything_a_deployment_only_what_it_was_given() -> None:
    deployed = Target.from_environment({URL: "https://abc.execute-api.eu-west-1.amazonaws.com/", SIGV4: "1"})
    with_b = Target.from_environment({URL: "http://localhost:4566", TOKEN: "a", TOKEN_B: "b"})

    assert deployed is not None and with_b is not None
    assert deployed.url == "https://abc.execute-api.eu-west-1.amazonaws.com"
    assert deployed.capabilities == {"admin"}
    assert deployed.client().sign is True
    assert with_b.capabilities == {"admin", "tenant_b"}
    assert Target.from_environment({}) is None


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
