"""The other routes of the HTTP API: listing, batches, queues, the OpenAPI document, unknown routes."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from openapi_spec_validator import validate

from offpath.domain.registry import Registry
from offpath.handlers import api
from offpath.handlers.openapi import openapi_document
from offpath.naming import JOB_SHARDS
from offpath_local.resources import Resources
from offpath_tools.clocks import ManualClock
from tests.integration.conftest import Pipeline, RecordingMetrics, aws_calls


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(datetime.now(UTC).replace(microsecond=0))


@pytest.fixture
def timed(
    resources: Resources, clients: dict[str, Any], registry: Registry, metrics: RecordingMetrics, clock: ManualClock
) -> Pipeline:
    """A pipeline whose clock moves only when the test says, so creation order is exact."""
    return Pipeline(resources, clients, registry, metrics, clock=clock)


def submit_in_order(pipeline: Pipeline, clock: ManualClock, count: int, job_type: str = "demo.echo") -> list[str]:
    """Submits `count` jobs a second apart; returns their ids, oldest first."""
    ids = []
    for n in range(count):
        status, job, _ = pipeline.submit(job_type, {"n": n})
        assert status == 202, job
        ids.append(job["job_id"])
        clock.advance(1)
    return ids


def page(pipeline: Pipeline, query: str, tenant: str = "tenant-a") -> tuple[list[str], str | None]:
    status, body, _ = pipeline.call("GET", f"/jobs?{query}", tenant=tenant)
    assert status == 200, body
    return [job["job_id"] for job in body["jobs"]], body["cursor"]


# -- listing ------------------------------------------------------------------------------------


def test_jobs_are_listed_newest_first_a_page_at_a_time(timed: Pipeline, clock: ManualClock) -> None:
    ids = submit_in_order(timed, clock, 5)

    first, cursor = page(timed, "limit=2")
    second, cursor = page(timed, f"limit=2&cursor={cursor}")
    third, cursor = page(timed, f"limit=2&cursor={cursor}")

    assert [first, second, third] == [ids[4:2:-1], ids[2:0:-1], ids[:1]]
    assert cursor is None


def test_listing_queries_the_tenants_partitions_and_never_scans_the_table(timed: Pipeline, clock: ManualClock) -> None:
    ids = submit_in_order(timed, clock, 3)
    calls = aws_calls(timed.clients["dynamodb"])

    listed = [page(timed, "limit=100")[0], page(timed, "status=QUEUED")[0], page(timed, "type=demo.echo")[0]]

    assert listed == [ids[::-1]] * 3
    assert calls["DynamoDB.Query"] == 3 * JOB_SHARDS  # each listing queries each of the tenant's shards once
    assert "DynamoDB.BatchGetItem" not in calls  # the items come back whole from the queries
    assert "DynamoDB.Scan" not in calls


def test_the_status_filter_lists_only_jobs_in_that_state(timed: Pipeline, clock: ManualClock) -> None:
    done = submit_in_order(timed, clock, 2)
    timed.drain()
    waiting = submit_in_order(timed, clock, 2)

    assert page(timed, "status=QUEUED")[0] == waiting[::-1]
    assert page(timed, "status=SUCCEEDED")[0] == done[::-1]


def test_the_type_filter_lists_only_jobs_of_that_type(timed: Pipeline, clock: ManualClock) -> None:
    submit_in_order(timed, clock, 2)
    flaky = submit_in_order(timed, clock, 1, job_type="demo.flaky")

    assert page(timed, "type=demo.flaky")[0] == flaky


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("status=DONE", "status"),
        ("status=queued", "status"),
        ("limit=0", "limit"),
        ("limit=101", "limit"),
        ("limit=-1", "limit"),
        ("limit=ten", "limit"),
        ("limit=2.5", "limit"),
        ("limit=%C2%B2", "limit"),  # a superscript two: a digit, but not a number int() reads
        ("limit=" + "9" * 5000, "limit"),  # more digits than int() converts
        ("type=no.such.job", "type"),
        ("cursor=garbage", "cursor"),
        ("cursor=eyJwayI6IngifQ", "cursor"),  # {"pk":"x"}
    ],
)
def test_a_bad_query_parameter_is_rejected_naming_it(pipeline: Pipeline, query: str, field: str) -> None:
    status, body, _ = pipeline.call("GET", f"/jobs?{query}")

    assert status == 422, body
    assert body["error"]["field"] == field


def test_a_cursor_from_another_tenant_is_rejected(timed: Pipeline, clock: ManualClock) -> None:
    submit_in_order(timed, clock, 3)
    _, cursor = page(timed, "limit=1", tenant="tenant-a")

    status, body, _ = timed.call("GET", f"/jobs?limit=1&cursor={cursor}", tenant="tenant-b")

    assert status == 422
    assert body["error"]["field"] == "cursor"


# -- batches ------------------------------------------------------------------------------------


def test_a_batch_with_good_and_bad_items_answers_each_item(pipeline: Pipeline) -> None:
    _, earlier, _ = pipeline.submit("demo.echo", {"n": 0}, headers={"idempotency-key": "k-0"})
    items = [
        {"type": "demo.echo", "payload": {"n": 1}},
        {"type": "no.such.job", "payload": {}},
        {"type": "send_welcome_email", "payload": {"user_id": "u-1", "email": "not an address"}},
        {"type": "demo.echo", "payload": {"data": "x" * (64 * 1024)}},
        {"type": "demo.echo", "payload": {"n": 0}, "idempotency_key": "k-0"},
    ]

    status, body, _ = pipeline.call("POST", "/jobs/batch", body={"jobs": items})

    assert status == 207
    results = body["results"]
    assert [r["index"] for r in results] == [0, 1, 2, 3, 4]
    assert [r["status"] for r in results] == [202, 422, 422, 413, 200]
    assert [r.get("error", {}).get("code") for r in results] == [
        None,
        "unknown_job_type",
        "invalid_payload",
        "payload_too_large",
        None,
    ]
    assert results[2]["error"]["field"] == "payload.email"
    assert results[4]["job"]["job_id"] == earlier["job_id"]


def test_the_accepted_items_of_a_batch_run(pipeline: Pipeline) -> None:
    items = [{"type": "demo.echo", "payload": {"n": n}} for n in range(3)] + [{"type": "no.such.job"}]
    _, body, _ = pipeline.call("POST", "/jobs/batch", body={"jobs": items})

    pipeline.drain()

    accepted = [r["job"]["job_id"] for r in body["results"] if r["status"] == 202]
    assert len(accepted) == 3
    assert {pipeline.call("GET", f"/jobs/{job_id}")[1]["status"] for job_id in accepted} == {"SUCCEEDED"}


@pytest.mark.parametrize("jobs", [[], [{"type": "demo.echo"}] * 101])
def test_an_empty_or_oversized_batch_is_rejected_whole(pipeline: Pipeline, jobs: list[Any]) -> None:
    status, body, _ = pipeline.call("POST", "/jobs/batch", body={"jobs": jobs})

    assert status == 422
    assert body["error"]["field"] == "jobs"
    assert page(pipeline, "limit=100")[0] == []


# -- queues -------------------------------------------------------------------------------------


def test_queues_shows_depth_in_flight_and_dlq_depth_of_every_queue_class(pipeline: Pipeline) -> None:
    pipeline.submit("demo.poison", {"reason": "bad"})
    pipeline.drain()
    pipeline.submit("demo.echo", {"n": 1})
    pipeline.submit("demo.echo", {"n": 2})

    status, body, _ = pipeline.call("GET", "/queues", scopes=["offpath/admin"])

    assert status == 200
    queues = {q["name"]: q for q in body["queues"]}
    assert sorted(queues) == sorted(pipeline.registry.queues)
    for view in queues.values():
        assert set(view) >= {"name", "visible", "in_flight", "delayed", "oldest_age_s", "dlq_depth"}
    assert (queues["default"]["visible"], queues["default"]["in_flight"], queues["default"]["dlq_depth"]) == (2, 0, 1)
    assert (queues["critical"]["visible"], queues["critical"]["dlq_depth"]) == (0, 0)


# -- the OpenAPI document and unknown routes ----------------------------------------------------


def test_the_openapi_document_is_valid(pipeline: Pipeline) -> None:
    status, document, _ = pipeline.call("GET", "/openapi.json")

    assert status == 200
    validate(document)


def test_the_openapi_document_lists_every_route_the_api_answers(pipeline: Pipeline) -> None:
    _, document, _ = pipeline.call("GET", "/openapi.json")
    routes = {(route.method.lower(), route.path) for route in api.router.routes}

    documented = {(method, path) for path, operations in document["paths"].items() for method in operations}

    assert routes == documented


@pytest.mark.parametrize(("method", "path"), [("GET", "/nope"), ("DELETE", "/jobs"), ("GET", "/jobs/x/y/z")])
def test_an_unknown_route_is_answered_as_api_gateway_answers_it(pipeline: Pipeline, method: str, path: str) -> None:
    status, body, headers = pipeline.call(method, path)

    assert status == 404
    assert body == {"message": "Not Found"}
    assert headers == {"Content-Type": "application/json"}


def test_the_served_document_is_the_generated_one(pipeline: Pipeline) -> None:
    status, document, _ = pipeline.call("GET", "/openapi.json")

    assert status == 200
    assert document == json.loads(json.dumps(openapi_document(registry=pipeline.registry)))


def test_the_served_document_lists_every_job_type_with_its_payload_schema(pipeline: Pipeline) -> None:
    _, document, _ = pipeline.call("GET", "/openapi.json")
    schemas = document["components"]["schemas"]

    mapping = schemas["SubmitBody"]["discriminator"]["mapping"]
    assert set(mapping) == set(pipeline.registry.job_types)
    for name, job_type in pipeline.registry.job_types.items():
        payload = schemas[mapping[name].rsplit("/", 1)[1]]["properties"]["payload"]["$ref"]
        assert schemas[payload.rsplit("/", 1)[1]]["title"] == job_type.payload_model.__name__


# -- job types ----------------------------------------------------------------------------------


def test_job_types_lists_every_registered_type_with_its_policy_and_payload_schema(pipeline: Pipeline) -> None:
    status, body, _ = pipeline.call("GET", "/job-types")

    assert status == 200
    listed = body["job_types"]
    assert [t["name"] for t in listed] == sorted(pipeline.registry.job_types)
    for view in listed:
        job_type = pipeline.registry.job_types[view["name"]]
        assert view == {
            "name": job_type.name,
            "queue": job_type.queue,
            "max_attempts": job_type.max_attempts,
            "timeout_s": job_type.timeout_s,
            "submitted_by": getattr(job_type, "submitted_by", "tenant"),
            "payload_schema": job_type.payload_model.model_json_schema(),
            "limits": LIMITS_SHOWN.get(job_type.name),
            "paused": False,
            "paused_at": None,
            "pause_reason": None,
        }


# The demo types' limits as GET /job-types shows them; every other type declares none (null).
LIMITS_SHOWN = {
    "demo.limited": {"concurrency_key": "account", "max_concurrency": 2, "rate_limit": None},
    "demo.rated": {"concurrency_key": "account", "max_concurrency": None, "rate_limit": "2/s"},
}


def test_job_types_needs_an_authenticated_caller(pipeline: Pipeline) -> None:
    status, body, _ = pipeline.call("GET", "/job-types", tenant=None)

    assert status == 401
    assert body["error"]["code"] == "unauthorized"
