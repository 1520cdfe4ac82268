"""Per-tenant quotas through the api, worker and enqueue handlers and the real counters, against moto: over a quota
a submit is answered 429 quota_exceeded with Retry-After and no job is written; under it nothing changes; one
tenant's quota never touches another's; a batch answers per item."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from offpath.handlers import api
from offpath.logic.quotas import CachedQuotaGate
from offpath_local.resources import Resources
from offpath_tools.clocks import ManualClock
from tests.integration.conftest import Pipeline, RecordingMetrics, aws_calls

JSON = {"content-type": "application/json"}


class Cache:
    """The gate's monotonic clock, moved by hand (how long an environment trusts a count it read)."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def expires(self) -> None:
        self.now += 60


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(datetime.now(UTC).replace(microsecond=0))


@pytest.fixture
def cache() -> Cache:
    return Cache()


@pytest.fixture
def with_quotas(
    resources: Resources,
    clients: dict[str, Any],
    registry: Any,
    metrics: RecordingMetrics,
    clock: ManualClock,
    cache: Cache,
) -> Any:
    """`with_quotas("tenant-a:open_jobs=2;*:...")`: a pipeline whose functions run with those quotas."""

    def build(text: str) -> Pipeline:
        pipeline = Pipeline(resources, clients, registry, metrics, clock=clock)
        pipeline.settings = pipeline.settings.replace(quotas=text)
        del pipeline.store  # the services built now make their own store (counting, when counts are kept)
        pipeline.api_services = api.build_services(pipeline.settings, pipeline.overrides)
        pipeline.ports = pipeline.api_services.ports
        pipeline.store = pipeline.ports.store
        gate = pipeline.ports.quotas
        if isinstance(gate, CachedQuotaGate):
            gate.monotonic = cache
        return pipeline

    return build


def submit(pipeline: Pipeline, tenant: str = "tenant-a", **body: Any) -> tuple[int, Any, dict[str, str]]:
    headers = {**JSON, **({"idempotency-key": body.pop("key")} if "key" in body else {})}
    return pipeline.call(
        "POST", "/jobs", body={"type": "demo.echo", "payload": {}, **body}, headers=headers, tenant=tenant
    )


def job_ids(pipeline: Pipeline, tenant: str = "tenant-a") -> set[str]:
    status, page, _ = pipeline.call("GET", "/jobs?limit=100", tenant=tenant)
    assert status == 200, page
    return {job["job_id"] for job in page["jobs"]}


def quota_items(pipeline: Pipeline) -> list[dict[str, Any]]:
    items = pipeline.clients["dynamodb"].scan(TableName=pipeline.resources.table_name)["Items"]
    return [item for item in items if item["pk"]["S"].startswith("QUOTA#")]


def assert_refused(answer: tuple[int, Any, dict[str, str]], field: str, retry_after: str) -> None:
    status, body, headers = answer
    assert status == 429, body
    assert body["error"]["code"] == "quota_exceeded"
    assert body["error"]["field"] == field
    assert headers["Retry-After"] == retry_after


# -- submits per second -----------------------------------------------------------------------


def test_over_the_submit_rate_a_submit_is_refused_with_retry_after_and_writes_no_job(
    with_quotas: Any, clock: ManualClock
) -> None:
    pipeline = with_quotas("tenant-a:submits_per_s=2,burst=3")
    accepted = [submit(pipeline) for _ in range(3)]

    refused = submit(pipeline)

    assert [status for status, _, _ in accepted] == [202, 202, 202]
    assert_refused(refused, "submits_per_s", "1")
    assert job_ids(pipeline) == {job["job_id"] for _, job, _ in accepted}


def test_the_bucket_refills_at_the_rate(with_quotas: Any, clock: ManualClock) -> None:
    pipeline = with_quotas("tenant-a:submits_per_s=2,burst=2")
    assert [submit(pipeline)[0] for _ in range(3)] == [202, 202, 429]

    clock.advance(0.5)
    assert [submit(pipeline)[0] for _ in range(2)] == [202, 429]
    clock.advance(1)

    assert [submit(pipeline)[0] for _ in range(3)] == [202, 202, 429]
    assert len(job_ids(pipeline)) == 5


def test_another_tenant_has_its_own_bucket_under_the_same_default(with_quotas: Any) -> None:
    pipeline = with_quotas("*:submits_per_s=1,burst=1")
    assert [submit(pipeline, "tenant-a")[0] for _ in range(2)] == [202, 429]

    assert [submit(pipeline, "tenant-b")[0] for _ in range(2)] == [202, 429]
    assert len(job_ids(pipeline, "tenant-b")) == 1


def test_a_tenant_without_a_quota_is_unaffected_by_another_tenants(with_quotas: Any) -> None:
    pipeline = with_quotas("tenant-a:submits_per_s=1,burst=1,open_jobs=1")
    assert [submit(pipeline, "tenant-a")[0] for _ in range(2)] == [202, 429]
    calls = aws_calls(pipeline.clients["dynamodb"])

    answers = [submit(pipeline, "tenant-b") for _ in range(20)]

    # Nothing is counted or asked for a tenant without a quota: one write per job, as without quotas.
    assert calls == {"DynamoDB.PutItem": 20}
    assert {status for status, _, _ in answers} == {202}
    assert len(job_ids(pipeline, "tenant-b")) == 20


# -- open and delayed jobs ----------------------------------------------------------------------


def test_over_the_open_jobs_a_submit_is_refused_until_a_job_finishes(with_quotas: Any, cache: Cache) -> None:
    pipeline = with_quotas("tenant-a:open_jobs=2")
    accepted = {submit(pipeline)[1]["job_id"] for _ in range(2)}

    refused = submit(pipeline)

    assert_refused(refused, "open_jobs", "5")
    assert job_ids(pipeline) == accepted

    pipeline.drain()  # both finish
    cache.expires()
    status, job, _ = submit(pipeline)
    assert status == 202, job
    assert job_ids(pipeline) == accepted | {job["job_id"]}


def test_over_the_delayed_jobs_a_delayed_submit_is_refused_but_not_an_immediate_one(
    with_quotas: Any, clock: ManualClock, cache: Cache
) -> None:
    pipeline = with_quotas("tenant-a:delayed_jobs=1")
    later = (clock.now() + timedelta(hours=2)).isoformat()
    status, delayed, _ = submit(pipeline, run_at=later)
    assert (status, delayed["status"]) == (202, "SCHEDULED")

    refused = submit(pipeline, run_at=later)
    immediate = submit(pipeline)

    assert_refused(refused, "delayed_jobs", "5")
    assert immediate[0] == 202
    assert job_ids(pipeline) == {delayed["job_id"], immediate[1]["job_id"]}

    # A cancelled delayed job no longer counts.
    assert pipeline.call("POST", f"/jobs/{delayed['job_id']}/cancel")[0] == 200
    cache.expires()
    assert submit(pipeline, run_at=later)[0] == 202


def test_a_delayed_job_enqueued_when_due_no_longer_counts_as_delayed(
    with_quotas: Any, clock: ManualClock, cache: Cache
) -> None:
    pipeline = with_quotas("tenant-a:delayed_jobs=1,open_jobs=5")
    later = clock.now() + timedelta(hours=2)
    _, job, _ = submit(pipeline, run_at=later.isoformat())
    clock.set(later)

    pipeline.enqueue({"kind": "delayed", "job_id": job["job_id"], "tenant": "tenant-a"})
    cache.expires()

    status, quotas, _ = pipeline.call("GET", "/quotas")
    assert status == 200
    assert quotas["usage"] == {"open_jobs": 1, "delayed_jobs": 0}
    assert submit(pipeline, run_at=(later + timedelta(hours=1)).isoformat())[0] == 202


def test_a_replay_over_the_quota_is_still_answered_as_the_job_it_replays(with_quotas: Any) -> None:
    pipeline = with_quotas("tenant-a:open_jobs=1")
    status, first, _ = submit(pipeline, key="order-1")
    assert status == 202

    assert submit(pipeline, key="order-2")[0] == 429
    replay_status, replay, headers = submit(pipeline, key="order-1")

    assert (replay_status, replay["job_id"], headers.get("Idempotent-Replayed")) == (200, first["job_id"], "true")


def test_jobs_opened_before_the_quota_was_set_never_take_the_count_below_zero(with_quotas: Any, cache: Cache) -> None:
    # Given four jobs of tenant-a opened while it had no quota (never counted)
    unlimited = with_quotas("tenant-b:open_jobs=1")
    for _ in range(4):
        assert submit(unlimited)[0] == 202
    pipeline = with_quotas("tenant-a:open_jobs=2")
    # When they finish under the quota
    pipeline.drain()
    cache.expires()

    # Then its count is 0, not -4, and the quota holds at 2
    assert pipeline.call("GET", "/quotas")[1]["usage"]["open_jobs"] == 0
    answers = []
    for _ in range(3):
        cache.expires()
        answers.append(submit(pipeline)[0])
    assert answers == [202, 202, 429]
    counted = [item.get("open_jobs", {}).get("N", "0") for item in quota_items(pipeline) if "#USE#" in item["pk"]["S"]]
    assert all(int(n) >= 0 for n in counted), counted


def test_a_retry_by_hand_counts_as_a_submit_against_the_open_jobs(with_quotas: Any, cache: Cache) -> None:
    # Given three cancelled jobs and one open job under open_jobs=3
    pipeline = with_quotas("tenant-a:open_jobs=3")
    cancelled = [submit(pipeline)[1]["job_id"] for _ in range(3)]
    for job_id in cancelled:
        assert pipeline.call("POST", f"/jobs/{job_id}/cancel")[0] == 200
    cache.expires()
    assert submit(pipeline)[0] == 202

    # When all three are retried
    answers = []
    for job_id in cancelled:
        cache.expires()
        answers.append(pipeline.call("POST", f"/jobs/{job_id}/retry"))

    # Then the third is over the quota: refused, and left CANCELLED
    assert [status for status, _, _ in answers] == [202, 202, 429]
    assert_refused(answers[2], "open_jobs", "5")
    assert pipeline.call("GET", f"/jobs/{cancelled[2]}")[1]["status"] == "CANCELLED"
    cache.expires()
    assert pipeline.call("GET", "/quotas")[1]["usage"]["open_jobs"] == 3


def test_a_retry_by_hand_takes_from_the_submit_rate(with_quotas: Any, clock: ManualClock) -> None:
    pipeline = with_quotas("tenant-a:submits_per_s=1,burst=2")
    first = submit(pipeline)[1]["job_id"]
    assert pipeline.call("POST", f"/jobs/{first}/cancel")[0] == 200
    assert submit(pipeline)[0] == 202

    refused = pipeline.call("POST", f"/jobs/{first}/retry")

    assert_refused(refused, "submits_per_s", "1")
    clock.advance(1)
    assert pipeline.call("POST", f"/jobs/{first}/retry")[0] == 202


# -- a batch, per item ------------------------------------------------------------------------


def test_a_batch_over_the_open_jobs_refuses_the_items_over_it_and_writes_the_others(with_quotas: Any) -> None:
    pipeline = with_quotas("tenant-a:open_jobs=3")
    body = {"jobs": [{"type": "demo.echo", "payload": {"i": i}} for i in range(5)]}

    status, batch, _ = pipeline.call("POST", "/jobs/batch", body=body, headers=JSON)

    assert status == 207
    results = batch["results"]
    accepted = [r for r in results if r["status"] == 202]
    refused = [r for r in results if r["status"] == 429]
    assert (len(accepted), len(refused)) == (3, 2)
    assert {r["error"]["code"] for r in refused} == {"quota_exceeded"}
    assert {r["error"]["field"] for r in refused} == {"open_jobs"}
    assert {r["retry_after_s"] for r in refused} == {5}
    assert job_ids(pipeline) == {r["job"]["job_id"] for r in accepted}


# -- GET /quotas, and no quotas at all ------------------------------------------------------------


def test_get_quotas_shows_the_callers_quotas_and_usage(with_quotas: Any, cache: Cache) -> None:
    pipeline = with_quotas("*:submits_per_s=10,open_jobs=100;tenant-a:open_jobs=7,delayed_jobs=2")
    for _ in range(3):
        submit(pipeline)

    status, mine, _ = pipeline.call("GET", "/quotas")
    _, theirs, _ = pipeline.call("GET", "/quotas", tenant="tenant-b")

    assert status == 200
    assert mine == {
        "tenant": "tenant-a",
        "quotas": {"submits_per_s": 10.0, "burst": 10, "open_jobs": 7, "delayed_jobs": 2},
        "usage": {"open_jobs": 3, "delayed_jobs": 0},
    }
    assert theirs == {
        "tenant": "tenant-b",
        "quotas": {"submits_per_s": 10.0, "burst": 10, "open_jobs": 100, "delayed_jobs": None},
        "usage": {"open_jobs": 0, "delayed_jobs": None},
    }


def test_without_quotas_nothing_is_counted_and_get_quotas_shows_none(pipeline: Pipeline) -> None:
    status, _, _ = pipeline.call("POST", "/jobs", body={"type": "demo.echo", "payload": {}}, headers=JSON)
    assert status == 202
    pipeline.drain()

    _, quotas, _ = pipeline.call("GET", "/quotas")

    assert pipeline.ports.quotas is None
    assert quota_items(pipeline) == []
    assert quotas["quotas"] == {"submits_per_s": None, "burst": None, "open_jobs": None, "delayed_jobs": None}
    assert quotas["usage"] == {"open_jobs": None, "delayed_jobs": None}


def test_the_counts_are_spread_over_shards_and_summed(with_quotas: Any, cache: Cache) -> None:
    pipeline = with_quotas("tenant-a:open_jobs=1000")
    for _ in range(40):
        submit(pipeline)
    pipeline.drain()
    for _ in range(5):
        submit(pipeline)
    cache.expires()

    _, quotas, _ = pipeline.call("GET", "/quotas")

    assert quotas["usage"]["open_jobs"] == 5
    shards = {json.dumps(item["pk"]) for item in quota_items(pipeline) if "#USE#" in item["pk"]["S"]}
    assert len(shards) > 4
