"""The trust boundary, through the api, enqueue and worker handlers: who may submit which job type, which
tenants a caller can be, who is an admin, and what cancelling a delayed job leaves behind. TESTPLAN 32."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from botocore.awsrequest import AWSPreparedRequest
from pydantic import BaseModel

from offpath.domain.backoff import Backoff
from offpath.domain.context import JobContext
from offpath.domain.registry import JobType, Registry
from offpath.handlers import api
from offpath.jobs import billing
from offpath_local.resources import Resources
from offpath_tools.clocks import ManualClock
from offpath_tools.http_events import body_of, http_event
from tests.integration.conftest import Answer, Pipeline, RecordingMetrics, aws_calls

ADMIN = ["offpath/admin"]
ADMIN_TYPE = "ops.reindex"
MARKING_TYPE = "ops.mark_once"
TENANT_MARKING_TYPE = "tenant.mark_once"
ACCOUNT = "123456789012"
OPS_ROLE = f"arn:aws:iam::{ACCOUNT}:role/ops"
OPS_SESSION = f"arn:aws:sts::{ACCOUNT}:assumed-role/ops/alice"
SERVICE_SESSION = f"arn:aws:sts::{ACCOUNT}:assumed-role/billing-service/i-0abc"
SYSTEM_ONLY = ("billing.monthly_invoices", {"amount_cents": 99_999_999}), ("maintenance.nightly_cleanup", {})


class Empty(BaseModel):
    pass


def mark_once(payload: Empty, ctx: JobContext) -> dict[str, bool]:
    return {"first": ctx.once("rebuild:2026-12", across_jobs=True)}


def _type(name: str, submitted_by: str, function: Any = mark_once) -> JobType:
    return JobType(
        name=name,
        function=function,
        payload_model=Empty,
        queue="default",
        max_attempts=1,
        timeout_s=10,
        backoff=Backoff(),
        submitted_by=submitted_by,  # type: ignore[arg-type]
    )


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(datetime.now(UTC).replace(microsecond=0))


@pytest.fixture
def authority(
    resources: Resources, clients: dict[str, Any], registry: Registry, metrics: RecordingMetrics, clock: ManualClock
) -> Pipeline:
    """The project's registry plus an admin-only job type and two job types that mark once across jobs; the
    api function lists the role `ops` as an admin."""
    extended = Registry(queues=dict(registry.queues), job_types=dict(registry.job_types), schedules=registry.schedules)
    extended.add_job_type(_type(ADMIN_TYPE, "admin", lambda payload, ctx: {"done": True}))
    extended.add_job_type(_type(MARKING_TYPE, "admin"))
    extended.add_job_type(_type(TENANT_MARKING_TYPE, "tenant"))
    pipeline = Pipeline(resources, clients, extended, metrics, clock=clock)
    settings = pipeline.settings.replace(admin_principals=(OPS_ROLE,))
    pipeline.api_services = dataclasses.replace(pipeline.api_services, settings=settings)
    return pipeline


def tenant_of_job(pipeline: Pipeline, view: dict[str, Any]) -> str:
    """Whose the job is, as the table stores it (a job is read by its tenant and id: found here by a scan)."""
    store = pipeline.store
    found = store.client.scan(
        TableName=store.table_name,
        FilterExpression="job_id = :id",
        ExpressionAttributeValues={":id": {"S": view["job_id"]}},
    )["Items"]
    assert len(found) == 1
    stored = store.get(view["job_id"], tenant=found[0]["tenant"]["S"])
    assert stored is not None
    return stored.tenant


def job_count(pipeline: Pipeline) -> int:
    return int(pipeline.clients["dynamodb"].scan(TableName=pipeline.resources.table_name, Select="COUNT")["Count"])


# -- 2: who may submit a job type ----------------------------------------------------------------


@pytest.mark.parametrize(("job_type", "payload"), SYSTEM_ONLY)
def test_a_tenant_cannot_submit_a_system_job_type(authority: Pipeline, job_type: str, payload: dict[str, Any]) -> None:
    status, body, _ = authority.submit(job_type, payload)

    assert status == 403
    assert body["error"] == {
        "code": "job_type_forbidden",
        "message": f"job type {job_type!r} is submitted by schedules only",
        "field": "type",
    }
    assert job_count(authority) == 0


@pytest.mark.parametrize(("job_type", "payload"), SYSTEM_ONLY)
def test_an_admin_cannot_submit_a_system_job_type_either(
    authority: Pipeline, job_type: str, payload: dict[str, Any]
) -> None:
    jwt_status, jwt_body, _ = authority.submit(job_type, payload, scopes=ADMIN)
    iam_status, _, _ = authority.submit(job_type, payload, iam_arn=OPS_SESSION)

    assert (jwt_status, iam_status) == (403, 403)
    assert jwt_body["error"]["code"] == "job_type_forbidden"
    assert job_count(authority) == 0


def test_a_tenant_cannot_submit_an_admin_job_type(authority: Pipeline) -> None:
    jwt_status, body, _ = authority.submit(ADMIN_TYPE, {})
    iam_status, _, _ = authority.submit(ADMIN_TYPE, {}, iam_arn=SERVICE_SESSION)

    assert (jwt_status, iam_status) == (403, 403)
    assert body["error"]["message"] == f"job type {ADMIN_TYPE!r} is submitted by admins only"
    assert job_count(authority) == 0


def test_an_admin_submits_an_admin_job_type(authority: Pipeline) -> None:
    jwt_status, by_scope, _ = authority.submit(ADMIN_TYPE, {}, scopes=ADMIN)
    iam_status, by_role, _ = authority.submit(ADMIN_TYPE, {}, iam_arn=OPS_SESSION)
    authority.drain()

    assert (jwt_status, iam_status) == (202, 202)
    assert authority.call("GET", f"/jobs/{by_scope['job_id']}", scopes=ADMIN)[1]["status"] == "SUCCEEDED"
    assert authority.call("GET", f"/jobs/{by_role['job_id']}", iam_arn=OPS_SESSION)[1]["status"] == "SUCCEEDED"


def test_a_batch_refuses_a_forbidden_item_alone(authority: Pipeline) -> None:
    jobs = [
        {"type": "demo.echo", "payload": {"n": 1}},
        {"type": "billing.monthly_invoices", "payload": {"amount_cents": 99_999_999}},
        {"type": ADMIN_TYPE, "payload": {}},
    ]

    status, body, _ = authority.call("POST", "/jobs/batch", body={"jobs": jobs})

    assert status == 207
    assert [item["status"] for item in body["results"]] == [202, 403, 403]
    assert {item["error"]["code"] for item in body["results"][1:]} == {"job_type_forbidden"}
    assert job_count(authority) == 1


def test_the_schedule_still_submits_its_system_job_type(authority: Pipeline) -> None:
    gateway = billing.LoggingPaymentGatewayStub()
    billing.payments = gateway
    try:
        status, fired, _ = authority.call("POST", "/schedules/monthly-billing/trigger", scopes=ADMIN)
        authority.drain("critical")
    finally:
        billing.payments = billing.LoggingPaymentGatewayStub()

    assert status == 202
    assert fired["job"]["type"] == "billing.monthly_invoices"
    assert [amount for _, amount, _ in gateway.charges] == [1900, 1900, 1900]


def test_an_across_jobs_mark_of_an_admin_job_type_is_the_deployments(authority: Pipeline) -> None:
    _, first, _ = authority.submit(MARKING_TYPE, {}, tenant="admin-a", scopes=ADMIN)
    _, second, _ = authority.submit(MARKING_TYPE, {}, tenant="admin-b", scopes=ADMIN)
    authority.drain()

    results = [
        authority.call("GET", f"/jobs/{job['job_id']}", tenant=tenant, scopes=ADMIN)[1]["result"]
        for job, tenant in ((first, "admin-a"), (second, "admin-b"))
    ]
    assert results == [{"first": True}, {"first": False}]


def test_an_across_jobs_mark_of_a_tenant_job_type_stays_the_tenants(authority: Pipeline) -> None:
    _, first, _ = authority.submit(TENANT_MARKING_TYPE, {}, tenant="tenant-a")
    _, second, _ = authority.submit(TENANT_MARKING_TYPE, {}, tenant="tenant-b")
    _, again, _ = authority.submit(TENANT_MARKING_TYPE, {}, tenant="tenant-b")
    authority.drain()

    results = [
        authority.call("GET", f"/jobs/{job['job_id']}", tenant=tenant)[1]["result"]
        for job, tenant in ((first, "tenant-a"), (second, "tenant-b"), (again, "tenant-b"))
    ]
    assert results == [{"first": True}, {"first": True}, {"first": False}]


# -- 3: which tenant a caller is ------------------------------------------------------------------


@pytest.mark.parametrize("tenant", [" acme ", "acme\n", "t" * 257, "system", "System", "", "two words"])
def test_a_token_naming_an_invalid_or_reserved_tenant_is_refused_before_any_work(
    authority: Pipeline, tenant: str
) -> None:
    calls = aws_calls(authority.clients["dynamodb"], authority.clients["sqs"])

    status, body, _ = authority.call(
        "POST", "/jobs", body={"type": "demo.echo", "payload": {}}, claims={"tenant": tenant, "sub": "user-1"}
    )

    assert status == 403
    assert body["error"]["code"] == "tenant_refused"
    assert body["error"]["message"].startswith("the claim 'tenant' ")
    assert calls == {}


def test_a_token_claiming_system_cannot_touch_the_schedules_jobs(authority: Pipeline, clock: ManualClock) -> None:
    _, fired, _ = authority.call("POST", "/schedules/nightly-cleanup/trigger", scopes=ADMIN)
    job_id = fired["job_id"]
    as_system: dict[str, Any] = {"claims": {"tenant": "system", "sub": "system"}}
    next_slot = "2026-12-02T02:00:00Z"

    read, _, _ = authority.call("GET", f"/jobs/{job_id}", **as_system)
    cancel, _, _ = authority.call("POST", f"/jobs/{job_id}/cancel", **as_system)
    listing, _, _ = authority.call("GET", "/jobs", **as_system)
    presubmit, _, _ = authority.call(
        "POST",
        "/jobs",
        body={"type": "demo.echo", "payload": {}},
        headers={"content-type": "application/json", "idempotency-key": f"schedule:nightly-cleanup:{next_slot}"},
        **as_system,
    )
    authority.drain("bulk")
    firing = authority.enqueue(
        {"kind": "recurring", "schedule": "nightly-cleanup", "scheduled_time": next_slot, "execution_id": "e"}
    )

    assert (read, cancel, listing, presubmit) == (403, 403, 403, 403)
    assert authority.call("GET", f"/jobs/{job_id}", scopes=ADMIN)[1]["status"] == "SUCCEEDED"
    assert firing["job_id"] is not None


def test_the_subject_is_not_a_tenant_unless_configured(authority: Pipeline) -> None:
    status, body, _ = authority.submit("demo.echo", {}, claims={"sub": "user-1"})

    assert status == 401
    assert body["error"]["code"] == "unauthorized"


def test_configured_tenant_claims_name_the_tenant(authority: Pipeline) -> None:
    settings = authority.settings.replace(tenant_claims=("custom:tenant", "sub"))
    authority.api_services = dataclasses.replace(authority.api_services, settings=settings)

    _, by_custom, _ = authority.submit("demo.echo", {}, claims={"custom:tenant": "acme", "sub": "user-1"})
    _, by_sub, _ = authority.submit("demo.echo", {}, claims={"sub": "user-1"})
    ignored, _, _ = authority.submit("demo.echo", {}, claims={"tenant": "acme"})

    assert [tenant_of_job(authority, job) for job in (by_custom, by_sub)] == ["acme", "user-1"]
    assert ignored == 401


def test_an_iam_caller_is_its_role_whatever_the_session(authority: Pipeline) -> None:
    _, job, _ = authority.submit("demo.echo", {}, iam_arn=SERVICE_SESSION)

    status, view, _ = authority.call(
        "GET", f"/jobs/{job['job_id']}", iam_arn=f"arn:aws:sts::{ACCOUNT}:assumed-role/billing-service/other"
    )

    assert status == 200
    assert tenant_of_job(authority, view) == f"arn:aws:sts::{ACCOUNT}:assumed-role/billing-service"


# -- 4: who is an admin --------------------------------------------------------------------------

OPERATIONAL = [
    ("GET", "/queues"),
    ("GET", "/schedules"),
    ("POST", "/queues/default/redrive"),
    ("POST", "/schedules/nightly-cleanup/trigger"),
]


@pytest.mark.parametrize(("method", "path"), OPERATIONAL)
def test_operational_routes_refuse_a_jwt_tenant(authority: Pipeline, method: str, path: str) -> None:
    status, body, _ = authority.call(method, path)

    assert status == 403
    assert body["error"]["code"] == "forbidden"


@pytest.mark.parametrize(("method", "path"), OPERATIONAL)
def test_operational_routes_refuse_an_unlisted_iam_caller(authority: Pipeline, method: str, path: str) -> None:
    status, body, _ = authority.call(method, path, iam_arn=SERVICE_SESSION)

    assert status == 403
    assert body["error"]["code"] == "forbidden"


@pytest.mark.parametrize(("method", "path"), OPERATIONAL)
def test_operational_routes_answer_admins_of_both_kinds(authority: Pipeline, method: str, path: str) -> None:
    by_scope, _, _ = authority.call(method, path, scopes=ADMIN)
    by_role, _, _ = authority.call(method, path, iam_arn=OPS_SESSION)

    assert by_scope in (200, 202)
    assert by_role in (200, 202)


def test_an_unlisted_iam_caller_cannot_read_the_schedules_jobs(authority: Pipeline) -> None:
    _, fired, _ = authority.call("POST", "/schedules/nightly-cleanup/trigger", scopes=ADMIN)

    tenant, _, _ = authority.call("GET", f"/jobs/{fired['job_id']}", iam_arn=SERVICE_SESSION)
    admin, _, _ = authority.call("GET", f"/jobs/{fired['job_id']}", iam_arn=OPS_SESSION)

    assert (tenant, admin) == (404, 200)


def test_without_listed_principals_no_iam_caller_is_an_admin(pipeline: Pipeline) -> None:
    response = api.handler(http_event("GET", "/queues", iam_arn=OPS_SESSION), None, services=pipeline.api_services)

    assert response["statusCode"] == 403
    assert body_of(response)["error"]["code"] == "forbidden"


# -- 12: cancelling a delayed job deletes its one-time schedule ---------------------------------


def delayed(pipeline: Pipeline, clock: ManualClock) -> dict[str, Any]:
    later = (clock.now() + timedelta(hours=1)).isoformat()
    status, job, _ = pipeline.call("POST", "/jobs", body={"type": "demo.echo", "payload": {}, "run_at": later})
    assert status == 202, job
    assert job["status"] == "SCHEDULED"
    return job


def test_cancelling_a_delayed_job_deletes_its_one_time_schedule(authority: Pipeline, clock: ManualClock) -> None:
    job = delayed(authority, clock)
    assert authority.scheduler.exists(job["job_id"])

    status, cancelled, _ = authority.call("POST", f"/jobs/{job['job_id']}/cancel")

    assert status == 200
    assert cancelled["status"] == "CANCELLED"
    assert not authority.scheduler.exists(job["job_id"])


def test_a_cancel_stands_when_the_schedule_cannot_be_deleted(
    authority: Pipeline, clock: ManualClock, aws_answers: list[Any]
) -> None:
    job = delayed(authority, clock)

    def refuse_deletes(request: AWSPreparedRequest) -> Answer | None:
        if request.method == "DELETE" and "/schedules/" in request.url:
            return 500, {"Content-Type": "application/json"}, '{"message": "internal"}'
        return None

    aws_answers.append(refuse_deletes)
    status, cancelled, _ = authority.call("POST", f"/jobs/{job['job_id']}/cancel")
    aws_answers.clear()
    # The schedule, left behind, fires into the cancelled job, which stays cancelled.
    authority.enqueue({"kind": "delayed", "job_id": job["job_id"], "tenant": "tenant-a", "scheduled_time": "x"})
    authority.drain()

    assert status == 200
    assert cancelled["status"] == "CANCELLED"
    assert authority.call("GET", f"/jobs/{job['job_id']}")[1]["status"] == "CANCELLED"
