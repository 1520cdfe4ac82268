"""What each handler's cold start imports: a module a handler's first request never uses is not imported at
its init (scripts/coldstart.py measures the time; this holds the set, which a stray top-level import grows)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROGRAM = """
import json, sys
import offpath.handlers.{name} as module
{services}
print(json.dumps(sorted(m for m in sys.modules if m.startswith("offpath"))))
"""
ENVIRONMENT = {"AWS_DEFAULT_REGION": "us-east-1", "OFFPATH_TABLE_NAME": "jobs", "PYTHONPATH": str(ROOT / "functions")}

# Never at a worker's init: the api's response models (pydantic models of every answer), the submit use case,
# the notices' adapters (webhooks, the event bus, the realtime API) and the quotas (only with quotas configured).
NOT_IN_THE_WORKER = {
    "offpath.handlers.api_models",
    "offpath.handlers.api_models_more",
    "offpath.domain.operations",
    "offpath.logic.submit",
    "offpath.adapters.realtime",
    "offpath.adapters.deliveries",
    "offpath.adapters.webhook_http",
    "offpath.adapters.webhook_store",
    "offpath.logic.webhooks",
    "offpath.logic.notify",
    "offpath.adapters.dynamodb_quotas",
    "offpath.logic.quotas",
    # Only the handlers that make one-time schedules (api, enqueue, sweeper) import the Scheduler's adapter.
    "offpath.adapters.scheduler",
}
# Never at the api's init: the notifier's sinks and the delivery path; the webhook routes' use cases, domain and
# adapters (imported by those routes, on their first call); the worker's use case; the other routes' models
# (api_models_more: batches, operators', quotas', webhooks', built on the first call that answers with one).
NOT_IN_THE_API = {
    "offpath.handlers.api_models_more",
    # The operator's records (queue depths, redrives, statistics, alarms): made by the operator's routes only.
    "offpath.domain.operations",
    "offpath.adapters.realtime",
    "offpath.adapters.deliveries",
    "offpath.logic.notify",
    "offpath.logic.webhooks",
    "offpath.domain.webhooks",
    "offpath.adapters.webhook_store",
    "offpath.adapters.webhook_http",
    "offpath.logic.process",
}


def imported_by(name: str, services: bool = False) -> set[str]:
    program = PROGRAM.format(name=name, services="module.default_services()" if services else "")
    out = subprocess.run(
        [sys.executable, "-c", program],
        env={**ENVIRONMENT, "OFFPATH_QUEUE_CLASS": "default"},
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    ).stdout
    return set(json.loads(out.strip().splitlines()[-1]))


@pytest.mark.parametrize(("handler", "unwanted"), [("worker", NOT_IN_THE_WORKER), ("api", NOT_IN_THE_API)])
@pytest.mark.parametrize("services", [False, True], ids=["imported", "services built"])
def test_a_handlers_init_imports_nothing_its_first_request_does_not_use(
    handler: str, unwanted: set[str], services: bool
) -> None:
    modules = imported_by(handler, services)

    assert f"offpath.handlers.{handler}" in modules
    assert modules & unwanted == set()


DELIVERY = {"OFFPATH_DELIVERY_QUEUE_URL": "http://127.0.0.1:9/q", "OFFPATH_DELIVERY_DLQ_URL": "http://127.0.0.1:9/d"}
WITHOUT_PYDANTIC = """
import json, sys
from datetime import UTC, datetime
import offpath.handlers.{name} as module
module.default_services()
from offpath.domain.job import Job, JobStatus
from offpath.handlers.composition import render_job
now = datetime(2026, 12, 3, tzinfo=UTC)
job = Job(job_id="0" * 32, tenant="t", type="demo.echo", queue="default", payload={{"n": 1}}, payload_hash="h",
          status=JobStatus.SUCCEEDED, created_at=now, updated_at=now, max_attempts=3, result={{"n": 1}})
assert render_job(job, True)["result"] == {{"n": 1}}
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in ("pydantic", "pydantic_core"))))
"""


@pytest.mark.parametrize("handler", ["delivery", "notifier"])
def test_the_notice_functions_init_and_rendering_a_job_import_no_pydantic(handler: str) -> None:
    """They send job events and webhook bodies and validate no payload: the settings, the registry, the submit and
    worker use cases and the job's JSON (handlers/job_json.py) import pydantic only to validate one or to render
    a value that is not plain JSON (~90 ms of a cold start on Python 3.13)."""
    out = subprocess.run(
        [sys.executable, "-c", WITHOUT_PYDANTIC.format(name=handler)],
        env={**ENVIRONMENT, **DELIVERY},
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    ).stdout

    assert json.loads(out.strip().splitlines()[-1]) == []


# -- the collector across the init (offpath.collector) -----------------------------------------------------------

COLLECTOR = """
import gc, json
import offpath.handlers.{name} as module
imported = [gc.isenabled(), gc.get_freeze_count() > 0]
{services}
print(json.dumps([imported, [gc.isenabled(), gc.get_freeze_count() > 0]]))
"""
HANDLERS = ["api", "worker", "enqueue", "sweeper", "notifier", "delivery"]
SERVICES = {"api": "module.default_services()", "worker": "module.default_services()"}
LAMBDA = {"AWS_LAMBDA_FUNCTION_NAME": "offpath-test", "OFFPATH_QUEUE_CLASS": "default"}


def collector_after_init(name: str, environment: dict[str, str]) -> list[list[bool]]:
    program = COLLECTOR.format(name=name, services=SERVICES.get(name, ""))
    out = subprocess.run(
        [sys.executable, "-c", program],
        env={**ENVIRONMENT, "OFFPATH_QUEUE_CLASS": "default", **environment},
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    ).stdout
    result: list[list[bool]] = json.loads(out.strip().splitlines()[-1])
    return result


@pytest.mark.parametrize("handler", HANDLERS)
def test_on_lambda_the_collector_runs_again_once_a_handlers_init_is_done(handler: str) -> None:
    imported, served = collector_after_init(handler, LAMBDA)

    # Collecting again, with what the init made frozen (never scanned again), after the import and after
    # default_services; a handler left with its collector paused would grow without bound.
    assert imported == [True, True]
    assert served == [True, True]


@pytest.mark.parametrize("handler", ["api", "worker"])
def test_outside_lambda_the_collector_is_left_alone(handler: str) -> None:
    imported, served = collector_after_init(handler, {})

    assert imported == [True, False]
    assert served == [True, False]
