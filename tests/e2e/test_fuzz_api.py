"""Fuzz the HTTP API from its OpenAPI document against the embedded runtime, with every check and every phase.

schemathesis (its command line, as anyone would run it: `schemathesis run URL/openapi.json --checks all --phases
examples,coverage,fuzzing,stateful`) generates requests from the document that GET /openapi.json serves, sends
them over HTTP to an `offpath local` of its own, and checks every answer: no 5xx; status codes, content types,
bodies and headers the document describes; a request that breaks the document refused with a 4xx
(negative_data_rejection) and one that fits it accepted (positive_data_acceptance: the document is as precise as
the api's checks); credentials enforced (ignored_auth, missing_required_header); the links between operations
followed in the stateful phase (a job a submission names can be read: ensure_resource_availability); methods no
route declares refused (unsupported_method). It must report no failure.

Steered, not weakened (tests/e2e/fuzz_hooks.py): three rules depend on time or on what was sent before, which no
schema can state, so the generated values are drawn where the rule allows (run_at within its range, an
idempotency key not used before, a cursor the listing handed out); integration tests cover those rules.

One exemption, for API Gateway's sake: a method no route declares, on a path without parameters (`PUT /jobs`), is
answered 404 `{"message":"Not Found"}` by API Gateway (HTTP API) and so by the local gateway (the contract:
tests/unit/test_contract.py), where `unsupported_method` expects 405 with `Allow`. Those probes are not sent; on
the paths with parameters they are (the check takes a 404 there), and test_gateway.py checks the 404 for every
method (TRACE and QUERY included).

Generation draws from dictionaries of real values too: the registered job types, the queue classes and
schedules, the ids of jobs seeded in every state, and of an open and a sealed batch.

Reproducible and bounded: derandomized generation, no example database, at most FUZZ_MAX_EXAMPLES (10) cases per
operation in the fuzzing phase, plus the coverage phase's boundary cases and the stateful phase: about 800
requests in `make test`. `make bench-fuzz` (part of `make bench`) runs the same with FUZZ_MAX_EXAMPLES=150 and a
random seed it prints. A failure prints the curl command that repeats it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from offpath import contract
from offpath.jobs import load_job_types
from offpath.logic.waiting import MAX_WAIT_S
from offpath_tools.launcher import OffpathLocal
from tests.e2e.conftest import ROOT, wait_for
from tests.e2e.fuzz_hooks import LOOPBACK_RECEIVER, LOOPBACK_RECEIVER_PORT, WEBHOOK_NAMES
from tests.e2e.target import Target

# Endpoints registered before the run, so the routes of one endpoint (test, deliveries, rotate-secret) are
# reached with a name that exists, not only through the stateful phase's links from a PUT it happened to make.
SEEDED_WEBHOOKS = [f"fuzz-{n}" for n in range(WEBHOOK_NAMES)]

TENANT, TOKEN = "fuzz", "fuzz-token-0123456789abcdef"
AUTHORIZATION = {"Authorization": f"Bearer {TOKEN}"}
MAX_EXAMPLES = int(os.environ.get("FUZZ_MAX_EXAMPLES", "10"))
# A seed makes the run random (and prints the seed); without one, generation is derandomized.
SEED = os.environ.get("FUZZ_SEED")
PHASES = "examples,coverage,fuzzing,stateful"
RUN_TIMEOUT_S = 1800
DOCUMENT_SCRIPT = (
    "import json; from offpath.handlers.openapi import openapi_document; from offpath.jobs import load_job_types; "
    "print(json.dumps(openapi_document(registry=load_job_types(demo=True))))"
)
# The routes whose request bodies hold every job type's variant (and a chain's, and a batch's): no coverage phase
# for them in `make test` (FUZZ_COVERAGE_ALL=1, as `make bench-fuzz` sets, keeps it).
HEAVY_BODIES = r"^(/jobs|/jobs/batch|/batches)$"
BATCH_PAGE = r"^/batches/\{batch_id\}/jobs$"
HEAVY_COVERAGE_OFF = os.environ.get("FUZZ_COVERAGE_ALL") != "1"
# Schemathesis's warnings shown by default (schemathesis.config._warnings.DEFAULT_DISPLAYED_WARNINGS).
WARNINGS = (
    "missing_auth",
    "missing_test_data",
    "base_url_mismatch",
    "validation_mismatch",
    "missing_deserializer",
    "unused_openapi_auth",
    "unsupported_regex",
    "method_not_allowed",
    "constants_extraction",
    "unmatched_filter",
    "unresolvable_reference",
    "rate_limited",
    "dictionary_mismatch",
    "timeout_units",
)
NOT_MISSING_TEST_DATA = sorted(w for w in WARNINGS if w != "missing_test_data")

# Jobs the runtime holds before the fuzzer starts, by idempotency key: their ids are known in advance
# (derived from tenant and key), so the fuzzer can read and cancel real jobs in each state.
SEEDED_JOBS: dict[str, dict[str, Any]] = {
    "fuzz-succeeded": {"type": "demo.echo", "payload": {"n": 1}},
    "fuzz-failed": {"type": "demo.poison", "payload": {"reason": "seeded"}},
    "fuzz-retrying": {"type": "demo.flaky", "payload": {"fail_first": 100}},
    "fuzz-progress": {"type": "demo.sleep", "payload": {"ms": 2000}},
    "fuzz-scheduled": {"type": "demo.echo", "payload": {}, "run_at": timedelta(days=30)},
    "fuzz-delayed": {"type": "demo.echo", "payload": {}, "run_at": timedelta(minutes=10)},
}
# What each seeded job is waited for before fuzzing (None: running, with its progress written).
SEEDED_STATES: dict[str, set[str] | None] = {
    "fuzz-succeeded": {"SUCCEEDED"},
    "fuzz-failed": {"FAILED"},
    "fuzz-retrying": {"RETRYING"},
    "fuzz-progress": None,
}


def _iso(when: datetime) -> str:
    return when.isoformat().replace("+00:00", "Z")


def _toml(value: Any) -> str:
    """A TOML value: JSON's strings, numbers, booleans and arrays are TOML's too."""
    return json.dumps(value)


# The seeded jobs' ids by their keys, as the runtime answered them (ids are not derived from keys).
SEEDED_IDS: dict[str, str] = {}
# Batches the runtime holds before the fuzzer starts: an open one (pages may be added to it) and a sealed one.
SEEDED_BATCHES: dict[str, dict[str, Any]] = {
    "fuzz-open-batch": {"jobs": [{"type": "demo.echo", "payload": {"n": 1}}], "open": True},
    "fuzz-sealed-batch": {"jobs": [{"type": "demo.echo", "payload": {"n": 2}}]},
}
SEEDED_BATCH_IDS: list[str] = []


def schemathesis_config() -> str:
    """The run's configuration (schemathesis.toml)."""
    registry = load_job_types()
    # No dictionary for a body's job type or queue: the document's variants tie each job's queue and payload to its
    # type, and a type or a queue drawn apart from its variant made bodies the document refuses, sent as valid ones.
    dictionaries = {
        "names": sorted(registry.queues) + sorted(registry.schedules) + SEEDED_WEBHOOKS,
        "job_ids": [SEEDED_IDS[key] for key in SEEDED_JOBS],
        "batch_ids": SEEDED_BATCH_IDS,
    }
    parameters = {
        "path.job_id": ("job_ids", 0.7),
        "path.batch_id": ("batch_ids", 0.7),
        "path.name": ("names", 0.7),
    }
    # API Gateway answers an undeclared method on these paths 404, not the 405 unsupported_method expects.
    plain_paths = sorted({route.path for route in contract.ROUTES if "{" not in route.path})
    lines = [
        # A long poll (GET /jobs/{id}?wait=N) of a job that stays unfinished answers after N s, up to 20.
        f"request-timeout = {MAX_WAIT_S + 10:g}",
        # A random id (of the right shape) is an unknown job or batch: 404, as it must be. Without the coverage
        # phase's cases for the submissions, the fuzzing phase's random ids outnumber the seeded ones on a few
        # routes (a cancel, a batch's page of jobs) and schemathesis calls that "missing test data"; every other
        # warning is shown and every check runs.
        f"warnings = {{ display = {_toml(NOT_MISSING_TEST_DATA)} }}",
        "",
        "[generation]",
        f"max-examples = {MAX_EXAMPLES}",
        f"deterministic = {_toml(SEED is None)}",
        'database = "none"',
        "",
    ]
    for name, values in dictionaries.items():
        lines += [f"[dictionaries.{name}]", f"values = {_toml(values)}", ""]
    lines.append("[parameters]")
    lines += [
        f"{_toml(where)} = {{ dictionary = {_toml(name)}, probability = {probability} }}"
        for where, (name, probability) in parameters.items()
    ]
    lines += [
        "",
        "[[operations]]",
        f"include-path-regex = {_toml('^(' + '|'.join(p.replace('.', '[.]') for p in plain_paths) + ')$')}",
        "phases.coverage.unexpected-methods = []",
        "",
        # The submissions' bodies are one variant per job type, each with a chain of steps that is itself one
        # variant per job type: the coverage phase's boundary cases multiply (tens of thousands of requests). They
        # are fuzzed (FUZZ_MAX_EXAMPLES each) and followed in the stateful phase; `make bench-fuzz` runs them with
        # every phase.
        "[[operations]]",
        f"include-path-regex = {_toml(HEAVY_BODIES)}",
        'include-method = "POST"',
        f"phases.coverage.enabled = {_toml(not HEAVY_COVERAGE_OFF)}",
        "",
        "[[operations]]",
        f"include-path-regex = {_toml(BATCH_PAGE)}",
        'include-method = "POST"',
        f"phases.coverage.enabled = {_toml(not HEAVY_COVERAGE_OFF)}",
    ]
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def fuzz_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A runtime of its own: the fuzzer redrives queues and fires schedules as an admin and submits hundreds
    of jobs, none of which may disturb what the other end-to-end tests look at."""
    runtime = OffpathLocal.start(
        tmp_path_factory.mktemp("offpath-fuzz"),
        tokens={TENANT: TOKEN},
        admins=[TENANT],
        args=["--quiet"],
        webhook_ports=[LOOPBACK_RECEIVER_PORT],
    )
    try:
        _seed_jobs(runtime.url)
        yield runtime.url
    finally:
        runtime.stop()


def _request(url: str, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None) -> Any:
    status, answer = _send(url, method, path, json.dumps(body).encode() if body is not None else None, headers)
    assert status < 300, (status, answer)
    return answer


def _send(
    url: str, method: str, path: str, data: bytes | None, headers: dict[str, str] | None = None
) -> tuple[int, Any]:
    all_headers = {**AUTHORIZATION, "Content-Type": "application/json", **(headers or {})}
    request = urllib.request.Request(url + path, data=data, method=method, headers=all_headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def _seed_jobs(url: str) -> None:
    for name in SEEDED_WEBHOOKS:
        _request(url, "PUT", f"/webhooks/{name}", {"url": LOOPBACK_RECEIVER, "events": ["job.succeeded"]})
    now = datetime.now(UTC)
    for key, job in SEEDED_JOBS.items():
        body = {**job, "run_at": _iso(now + job["run_at"])} if "run_at" in job else job
        SEEDED_IDS[key] = str(_request(url, "POST", "/jobs", body, {"Idempotency-Key": key})["job_id"])
    for key, batch in SEEDED_BATCHES.items():
        SEEDED_BATCH_IDS.append(str(_request(url, "POST", "/batches", batch, {"Idempotency-Key": key})["batch_id"]))
    for key, statuses in SEEDED_STATES.items():
        path = f"/jobs/{SEEDED_IDS[key]}"
        if statuses is None:
            wait_for(lambda path=path: _request(url, "GET", path)["progress"])
        else:
            wait_for(lambda path=path, statuses=statuses: _request(url, "GET", path)["status"] in statuses or None)


def test_the_served_document_is_the_one_fuzzed(fuzz_url: str) -> None:
    served = _request(fuzz_url, "GET", "/openapi.json")
    # Made in a fresh interpreter, as the runtime makes it: job types other tests register in this process (the
    # console's long-named type) are not the runtime's.
    made = subprocess.run(
        [sys.executable, "-c", DOCUMENT_SCRIPT], cwd=ROOT, capture_output=True, text=True, timeout=120, check=True
    )

    assert served == json.loads(made.stdout)


def test_schemathesis_with_every_check_and_every_phase_reports_no_failure(fuzz_url: str, tmp_path: Path) -> None:
    config = tmp_path / "schemathesis.toml"
    config.write_text(schemathesis_config())
    command = [sys.executable, "-m", "schemathesis.cli", "--config-file", str(config), "run"]
    command += [f"{fuzz_url}/openapi.json", "--checks", "all", "--phases", PHASES, "--no-color"]
    command += ["--header", f"Authorization: Bearer {TOKEN}", "--workers", "1"]
    if SEED is not None:
        command += ["--seed", SEED]
    env = {
        **os.environ,
        "SCHEMATHESIS_HOOKS": "tests.e2e.fuzz_hooks",
        "FUZZ_CURSORS": json.dumps(_real_cursors(fuzz_url)),
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }

    run = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)

    report = run.stdout + run.stderr
    assert run.returncode == 0, report[-30_000:]
    assert "No issues found" in report, report[-30_000:]
    for phase in ("Examples", "Coverage", "Fuzzing", "Stateful"):
        assert f"✅ {phase}" in report, report[-5_000:]


def _real_cursors(url: str) -> list[str]:
    """Cursors the listing handed out, one per page of the seeded jobs."""
    cursors, cursor = [], None
    while True:
        query = f"/jobs?limit=1&cursor={cursor}" if cursor else "/jobs?limit=1"
        cursor = _request(url, "GET", query)["cursor"]
        if cursor is None:
            return cursors
        cursors.append(cursor)


# -- what the fuzzer found, and what lies beyond its reach ------------------------------------------


def test_a_body_whose_bytes_are_not_utf8_is_malformed_json(target: Target) -> None:
    answer = target.call("POST", "/jobs", raw=b"\xff\xfe{")

    assert answer.status == 400
    assert answer.body["error"]["code"] == "malformed_json"


def test_json_nested_deeper_than_the_parser_goes_is_malformed_json(target: Target) -> None:
    answer = target.call("POST", "/jobs", raw=b"[" * 50_000)

    assert answer.status == 400
    assert answer.body["error"]["code"] == "malformed_json"


def test_a_run_at_that_utc_cannot_hold_is_refused_with_422(target: Target) -> None:
    body = {"type": "demo.echo", "payload": {}, "run_at": "0001-01-01T00:00:00+01:00"}

    answer = target.call("POST", "/jobs", body=body)

    assert answer.status == 422
    assert answer.body["error"]["field"] == "run_at"


def test_a_batch_item_with_a_run_at_that_utc_cannot_hold_is_refused_alone(target: Target) -> None:
    jobs = [{"type": "demo.echo"}, {"type": "demo.echo", "run_at": "0001-01-01T00:00:00+01:00"}]

    answer = target.call("POST", "/jobs/batch", body={"jobs": jobs})

    assert answer.status == 207
    assert [r["status"] for r in answer.body["results"]] == [202, 422]
    assert answer.body["results"][1]["error"]["field"] == "run_at"


def test_a_payload_nested_300_levels_deep_is_refused_with_422(target: Target) -> None:
    payload = b'{"a":' * 300 + b"1" + b"}" * 300
    answer = target.call("POST", "/jobs", raw=b'{"type": "demo.echo", "payload": ' + payload + b"}")

    assert answer.status == 422
