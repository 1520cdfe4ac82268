"""Writes tests/fixtures/items/v1/: every kind of item the stores write, as DynamoDB returned them (AttributeValue
JSON), written by the code of release v1 through its real adapters and handlers against moto (in-process).

These fixtures are the format of release v1. They were made once, by the code of that release, and are never
made again: later code writes later formats, and the point of the fixtures is that the code of every later
release still reads what v1 wrote (tests/integration/test_upgrade_from_v1.py). A new format gets its own folder
(v2/, ...) made by the code of its own release, with a script of its own.

    .venv/bin/python scripts/make_item_fixtures.py tests/fixtures/items/v1   # refuses to overwrite
"""

from __future__ import annotations

import json
import os
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from moto import mock_aws

sys.path[:0] = [str(Path(__file__).resolve().parents[1])]  # the repository: tests.integration's pipeline
# moto's in-process AWS only: a region, and credentials that are no one's.
for name, value in {
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
}.items():
    os.environ[name] = value

from offpath.adapters import dynamodb_store, sqs_queue  # noqa: E402
from offpath.adapters.dynamodb_quotas import DynamoDbQuotaCounters  # noqa: E402
from offpath.adapters.webhook_store import DynamoDbWebhookStore  # noqa: E402
from offpath.domain.quotas import Usage  # noqa: E402
from offpath.domain.webhooks import Attempt, Endpoint, Secret, new_secret, rotated  # noqa: E402
from offpath.jobs import load_job_types  # noqa: E402
from offpath_local.resources import create_resources  # noqa: E402
from offpath_tools.clocks import ManualClock  # noqa: E402
from offpath_tools.fakes import RecordingMetrics  # noqa: E402
from tests.integration.conftest import SESSION, Pipeline  # noqa: E402

# The time the items were written (the test moves its clock on from it).
WRITTEN_AT = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
TENANT = "tenant-a"
# The keyed submission, replayed by the test.
KEYED = {"key": "order-4711", "body": {"type": "demo.echo", "payload": {"order": 4711}}}
SCHEDULE, SLOT = "nightly-cleanup", "2026-12-01T02:00:00Z"


def write_items(clock: ManualClock) -> tuple[Pipeline, dict[str, str], dict[str, Any]]:
    """Every kind of item, written by the handlers and adapters; returns the pipeline, the jobs' ids by label
    and what the test needs to know besides the items (the keyed submission, the schedule)."""
    clients = {
        "dynamodb": SESSION.client("dynamodb", config=dynamodb_store.SDK_CONFIG),
        "sqs": SESSION.client("sqs", config=sqs_queue.SDK_CONFIG),
    }
    registry = load_job_types(demo=True)
    resources = create_resources(clients["dynamodb"], clients["sqs"], registry)
    pipeline = Pipeline(resources, clients, registry, RecordingMetrics(), clock=clock)
    store = pipeline.store
    ids: dict[str, str] = {}

    def submit(label: str, body: dict[str, Any], **kwargs: Any) -> str:
        code, view, _ = pipeline.call("POST", "/jobs", body=body, tenant=TENANT, **kwargs)
        assert code in (200, 201, 202), (code, view)
        ids[label] = view["job_id"]
        return str(view["job_id"])

    # Finished by the worker: SUCCEEDED with its result, FAILED with its error (its message in the DLQ).
    submit("SUCCEEDED", {"type": "demo.echo", "payload": {"greeting": "hello"}})
    pipeline.drain()
    submit("FAILED", {"type": "demo.poison", "payload": {"reason": "bad input"}})
    pipeline.drain()
    # Left as a deploy would meet them.
    submit("QUEUED", {"type": "demo.echo", "payload": {"n": 1}})
    submit("KEYED", KEYED["body"], headers={"content-type": "application/json", "Idempotency-Key": KEYED["key"]})
    later = (WRITTEN_AT + timedelta(hours=1)).isoformat()
    submit("SCHEDULED", {"type": "demo.echo", "payload": {"n": 2}, "run_at": later})
    cancelled = submit("CANCELLED", {"type": "demo.echo", "payload": {"n": 3}, "run_at": later})
    code, view, _ = pipeline.call("POST", f"/jobs/{cancelled}/cancel", tenant=TENANT)
    assert code == 200 and view["status"] == "CANCELLED", view
    # A worker mid-attempt (its Lambda then died): RUNNING with a lease, entered in the sweep index.
    running = submit("RUNNING", {"type": "demo.echo", "payload": {"n": 4}})
    now = clock.now()
    store.claim(
        running, tenant=TENANT, now=now, lease_until=now + timedelta(seconds=40), sweep_at=now + timedelta(seconds=41)
    )
    # An attempt that failed and waits for its retry: RETRYING.
    retrying = submit("RETRYING", {"type": "demo.flaky", "payload": {"fail_first": 1}})
    claimed = store.claim(retrying, tenant=TENANT, now=now, lease_until=now + timedelta(seconds=40))
    store.record_retry(
        claimed, error="flaky: failing attempt 1 of 1", now=now, next_attempt_at=now + timedelta(seconds=2)
    )
    # A recurring schedule's firing: its state, its slot's key record and its job.
    fired = pipeline.enqueue({"kind": "recurring", "schedule": SCHEDULE, "scheduled_time": SLOT, "execution_id": "e"})
    ids["FIRED"] = fired["job_id"]
    # A `ctx.once` mark of the running job.
    store.mark_once(running, "welcome-email", now=now, expires_at=now + timedelta(days=7))
    # Quota counters: a token bucket item and a usage counter.
    quotas = DynamoDbQuotaCounters(resources.table_name, client=clients["dynamodb"])
    quotas.take(TENANT, per_s=10, bucket=20, now_us=int(now.timestamp() * 1_000_000))
    quotas.add(TENANT, Usage(open_jobs=3, delayed_jobs=1))
    # A webhook endpoint whose secret was rotated (two secrets), and its delivery log.
    webhooks = DynamoDbWebhookStore(resources.table_name, client=clients["dynamodb"])
    endpoint = Endpoint(
        name="orders",
        url="https://hooks.example.com/offpath",
        events=("job.succeeded", "job.failed"),
        job_types=("demo.echo",),
        secrets=(Secret(new_secret()),),
        created_at=now,
        updated_at=now,
    )
    webhooks.put_endpoint(TENANT, rotated(endpoint, now), limit=10)
    attempt = Attempt(
        event_id="evt_0001", type="job.succeeded", attempt=1, at=now, status_code=503, latency_ms=120,
        error="HTTP 503", next_retry_at=now + timedelta(seconds=30),
    )  # fmt: skip
    webhooks.record_attempt(TENANT, "orders", attempt, succeeded=False)
    context = {
        "written_at": WRITTEN_AT.isoformat(),
        "tenant": TENANT,
        "keyed": KEYED,
        "schedule": SCHEDULE,
        "slot": SLOT,
    }
    return pipeline, ids, context


# Each item kind's partition key prefix -> its fixture file.
KINDS = {
    "JOB#": "jobs",
    "IDEM#": "idempotency_records",
    "SCHEDULE#": "schedule_states",
    "ONCE#": "once_marks",
    "QUOTA#RATE#": "quota_rate_buckets",
    "QUOTA#USE#": "quota_usage_counters",
    "WEBHOOKS#": "webhook_endpoints",
    "WEBHOOKLOG#": "webhook_delivery_logs",
}


def main(folder: Path) -> int:
    if folder.exists() and any(folder.glob("*.json")):
        print(f"{folder} holds fixtures already: they are never made again", file=sys.stderr)
        return 1
    clock = ManualClock(WRITTEN_AT)
    with mock_aws():
        pipeline, ids, context = write_items(clock)
        client = pipeline.clients["dynamodb"]
        items: list[dict[str, Any]] = []
        for page in client.get_paginator("scan").paginate(TableName=pipeline.resources.table_name):
            items.extend(page["Items"])
    labels = {job_id: label for label, job_id in ids.items()}
    files: dict[str, dict[str, Any]] = {name: {} for name in KINDS.values()}
    for item in items:
        pk = item["pk"]["S"]
        prefix = next((p for p in sorted(KINDS, key=len, reverse=True) if pk.startswith(p)), None)
        if prefix is None:
            raise SystemExit(f"an item of no known kind: {pk}")
        label = labels[item["sk"]["S"]] if prefix == "JOB#" else f"{pk}/{item['sk']['S']}"
        files[KINDS[prefix]][label] = item
    folder.mkdir(parents=True, exist_ok=True)
    for name, kind_items in files.items():
        if not kind_items:
            raise SystemExit(f"no {name} item was written")
        (folder / f"{name}.json").write_text(
            json.dumps(dict(sorted(kind_items.items())), indent=2, sort_keys=True) + "\n"
        )
    (folder / "context.json").write_text(json.dumps({**context, "job_ids": ids}, indent=2, sort_keys=True) + "\n")
    print(f"{len(items)} items in {len(files)} files under {folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures/items/v1")))
