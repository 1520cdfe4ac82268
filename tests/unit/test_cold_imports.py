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
import offpath.handlers.{name}
print(json.dumps(sorted(m for m in sys.modules if m.startswith("offpath"))))
"""
ENVIRONMENT = {"AWS_DEFAULT_REGION": "us-east-1", "OFFPATH_TABLE_NAME": "jobs", "PYTHONPATH": str(ROOT / "functions")}

# Never at a worker's init: the api's response models (pydantic models of every answer), the submit use case,
# the notices' adapters (webhooks, the event bus, the realtime API) and the quotas (only with quotas configured).
NOT_IN_THE_WORKER = {
    "offpath.handlers.api_models",
    "offpath.logic.submit",
    "offpath.adapters.realtime",
    "offpath.adapters.deliveries",
    "offpath.adapters.webhook_http",
    "offpath.adapters.webhook_store",
    "offpath.logic.webhooks",
    "offpath.logic.notify",
    "offpath.adapters.dynamodb_quotas",
    "offpath.logic.quotas",
}
# Never at the api's init: the notifier's sinks and the delivery path.
NOT_IN_THE_API = {"offpath.adapters.realtime", "offpath.adapters.deliveries", "offpath.logic.notify"}


def imported_by(name: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", PROGRAM.format(name=name)],
        env=ENVIRONMENT,
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    ).stdout
    return set(json.loads(out))


@pytest.mark.parametrize(("handler", "unwanted"), [("worker", NOT_IN_THE_WORKER), ("api", NOT_IN_THE_API)])
def test_a_handlers_init_imports_nothing_its_first_request_does_not_use(handler: str, unwanted: set[str]) -> None:
    modules = imported_by(handler)

    assert f"offpath.handlers.{handler}" in modules
    assert modules & unwanted == set()
