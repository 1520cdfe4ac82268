"""The two apps the infra tests synthesize, and how to read them.

- the default: the stack `app.py` deploys (the project's registry, cdk.json's context);
- the extended: a test-local registry (the demo job types included) with one more queue class, job type and
  schedules, built with the other context options (JWT, alarm e-mail, no deletion protection,
  another prefix, the demo job types, tenant claims, admin principals, an event bus of its own, realtime).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aws_cdk import App
from aws_cdk.assertions import Template
from pydantic import BaseModel

from infra.stack import OffpathStack, build_app
from offpath.domain.backoff import Backoff
from offpath.domain.context import JobContext
from offpath.domain.cron import parse_cron
from offpath.domain.registry import JobType, QueueClass, Registry, Schedule
from offpath.jobs import load_job_types

ROOT = Path(__file__).resolve().parents[2]
NEW_QUEUE = "reports"
NEW_JOB_TYPE = "reports.build"
EXTENDED_CONTEXT = {
    "prefix": "offpath-alt",
    "jwt_issuer": "https://issuer.example.com/",
    "jwt_audience": "offpath-api,offpath-admin",
    "alarm_email": "ops@example.com",
    "deletion_protection": "false",
    "tracing": "true",
    "demo_jobs": "true",
    "tenant_claims": "tenant,custom:tenant",
    "admin_principals": "arn:aws:iam::123456789012:role/ops,arn:aws:iam::123456789012:user/alice",
    "quotas": "*:submits_per_s=50,burst=100,open_jobs=10000;acme:submits_per_s=500,delayed_jobs=100",
    "monthly_budget_usd": "50",
    "budget_email": "billing@example.com",
    "api_reserved_concurrency": "200",
    "enqueue_reserved_concurrency": "0",
    "batch_rate_limit": "2",
    "batch_burst_limit": "4",
    "table_max_write_units": "0",
    "event_bus": "offpath-alt-events",
    "realtime": "true",
}


@dataclass
class Synthesized:
    app: App
    stack: OffpathStack
    template: Template
    outdir: Path

    @property
    def registry(self) -> Registry:
        return self.stack.registry

    @property
    def json(self) -> dict[str, Any]:
        return self.template.to_json()  # type: ignore[no-any-return]

    @property
    def asset(self) -> Path:
        """The staged directory of the functions' code asset (the one zip asset)."""
        manifest = json.loads((self.outdir / f"{self.stack.artifact_id}.assets.json").read_text())
        (asset,) = [f for f in manifest["files"].values() if f["source"].get("packaging") == "zip"]
        return self.outdir / asset["source"]["path"]

    def resources(self, resource_type: str) -> dict[str, dict[str, Any]]:
        return self.template.find_resources(resource_type)  # type: ignore[no-any-return]


def cdk_json_context() -> dict[str, Any]:
    """The feature flags the CLI passes from cdk.json, so tests synthesize what `cdk deploy` would."""
    return dict(json.loads((ROOT / "cdk.json").read_text())["context"])


class ReportPayload(BaseModel):
    month: str = "latest"


def build_report(payload: ReportPayload, ctx: JobContext) -> dict[str, str]:
    return {"month": payload.month}


def extended_registry() -> Registry:
    """The project's registry plus a queue class, a job type on it and two schedules; the global registry is
    left untouched."""
    base = load_job_types(demo=True)
    registry = Registry(queues=dict(base.queues), job_types=dict(base.job_types), schedules=dict(base.schedules))
    registry.add_queue(QueueClass(NEW_QUEUE, batch_size=5, max_concurrency=3, oldest_age_alarm_s=900))
    registry.add_job_type(
        JobType(
            name=NEW_JOB_TYPE,
            function=build_report,
            payload_model=ReportPayload,
            queue=NEW_QUEUE,
            max_attempts=9,
            timeout_s=200,
            backoff=Backoff(base_s=2.0, cap_s=60.0),
        )
    )
    for name, cron, zone, window in (
        ("prague-report", "30 2 * * ? *", "Europe/Prague", 10),
        ("tokyo-report", "0 9 ? * MON-FRI *", "Asia/Tokyo", None),
    ):
        parsed = parse_cron(cron)
        registry.add_schedule(
            Schedule(
                name=name,
                expression=parsed.text,
                timezone=zone,
                job=NEW_JOB_TYPE,
                payload={"month": "previous"},
                flexible_window_min=window,
                parsed=parsed,
            )
        )
    return registry


def synthesize(outdir: Path, context: dict[str, Any], registry: Registry | None) -> Synthesized:
    app, stack = build_app(context, registry=registry, outdir=str(outdir))
    template = Template.from_stack(stack)
    return Synthesized(app, stack, template, outdir)
