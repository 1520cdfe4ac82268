"""Notices end to end: webhook endpoints over HTTP, jobs run by the embedded runtime, the table's stream played
to the notifier, deliveries made by the delivery function to a real receiver on 127.0.0.1 that verifies every
signature with `standardwebhooks`.

The runtime of this module shortens the delivery schedule (OFFPATH_WEBHOOK_RETRY_SCALE=0.01: 5 s, 5 min, 30 min
become 1 s, 3 s, 18 s; a delay is at least one second, SQS's unit). Each test has a tenant of its own, so an
endpoint is registered before that tenant's first job (the notifier reads a tenant's endpoints once per few
seconds)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from offpath_tools.launcher import OffpathLocal
from tests.e2e.conftest import ROOT, Local, wait_for
from tests.e2e.receiver import Receiver

TENANTS = [f"notice-{i}" for i in range(10)]


def token(tenant: str) -> str:
    return f"e2e-token-{tenant}"


@pytest.fixture(scope="module")
def notices(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Local]:
    runtime = OffpathLocal.start(
        tmp_path_factory.mktemp("offpath-notices"),
        tokens={tenant: token(tenant) for tenant in TENANTS},
        admins=[TENANTS[0]],
        args=["--alarm-interval", "1"],
        env={"OFFPATH_WEBHOOK_RETRY_SCALE": "0.01"},
        cwd=ROOT,
    )
    try:
        yield Local(url=runtime.url, data_dir=runtime.data_dir, log=runtime.console)
    finally:
        runtime.stop()


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    receiver = Receiver()
    try:
        yield receiver
    finally:
        receiver.stop()


def register(local: Local, tenant: str, name: str, url: str, events: list[str], **extra: Any) -> dict[str, Any]:
    answer = local.call("PUT", f"/webhooks/{name}", token=token(tenant), body={"url": url, "events": events, **extra})
    assert answer.status == 201, answer.body
    return dict(answer.body)


def test_a_registered_endpoint_receives_one_verifiable_job_succeeded_delivery(
    notices: Local, receiver: Receiver
) -> None:
    tenant = TENANTS[1]
    endpoint = register(notices, tenant, "orders", receiver.url("/slice"), ["job.succeeded"])
    assert endpoint["secret"].startswith("whsec_")

    submitted = notices.submit("demo.echo", {"hello": "world"}, token=token(tenant))
    assert submitted.status == 202, submitted.body
    job_id = submitted.body["job_id"]

    received = wait_for(lambda: receiver.at("/slice") or None, timeout_s=30)
    delivery = received[0]
    assert delivery.verified_by(endpoint["secret"])
    assert delivery.event["type"] == "job.succeeded"
    assert delivery.event["data"]["job_id"] == job_id
    assert delivery.event["data"]["status"] == "SUCCEEDED"
    assert delivery.event["data"]["payload"] is None  # include_payload is off
    assert delivery.webhook_id.startswith("evt_")
    assert {r.event["type"] for r in receiver.at("/slice")} == {"job.succeeded"}


def test_the_event_bus_stand_in_records_every_state_change_without_the_payload(notices: Local) -> None:
    tenant = TENANTS[2]
    submitted = notices.submit("demo.echo", {"secret": "kept out"}, token=token(tenant))
    job_id = submitted.body["job_id"]
    path = Path(notices.data_dir) / "events.jsonl"

    def job_lines() -> list[dict[str, Any]] | None:
        if not path.exists():
            return None
        lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        mine = [line for line in lines if line["detail"]["job"]["job_id"] == job_id]
        return mine if any(line["detail"]["type"] == "job.succeeded" for line in mine) else None

    lines = wait_for(job_lines, timeout_s=30)
    assert [line["detail"]["type"] for line in lines] == ["job.queued", "job.started", "job.succeeded"]
    assert {line["source"] for line in lines} == {"offpath"}
    assert {line["detail-type"] for line in lines} == {"Job State Change"}
    assert all(line["detail"]["tenant"] == tenant and line["detail"]["job"]["payload"] is None for line in lines)
