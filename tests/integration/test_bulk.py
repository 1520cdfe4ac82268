"""Bulk actions (POST /jobs/bulk, GET /jobs/bulk/{operation_id}) through the api and sweeper handlers, against
moto: a dry run's count and sample; a retry of 25 FAILED jobs that skips a RUNNING one; tenants kept apart;
a quota that stops the operation; a runner that dies mid-operation and the sweeper that finishes exactly the
rest."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from offpath.adapters.dynamodb_bulk import DynamoDbBulkStore
from offpath.domain.bulk import (
    MAX_OPEN_OPERATIONS,
    MAX_OPEN_PER_OWNER,
    BulkFilter,
    BulkOperation,
    BulkOperationConflictError,
)
from offpath.domain.errors import QueueUnavailableError
from offpath.domain.job import Job, JobStatus
from offpath.domain.ports import JobMessage, JobStore
from offpath.handlers import api
from offpath.logic.bulk import BulkPolicy
from offpath.logic.quotas import CachedQuotaGate
from offpath_local.resources import Resources
from offpath_tools.clocks import ManualClock
from tests.integration.conftest import Pipeline, RecordingMetrics

TYPE = "demo.echo"


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(datetime.now(UTC).replace(microsecond=0))


@pytest.fixture
def make_pipeline(
    resources: Resources, clients: dict[str, Any], registry: Any, metrics: RecordingMetrics, clock: ManualClock
) -> Any:
    def build(quotas: str | None = None, page_size: int = 10) -> Pipeline:
        pipeline = Pipeline(resources, clients, registry, metrics, clock=clock)
        if quotas is not None:
            pipeline.settings = pipeline.settings.replace(quotas=quotas)
            del pipeline.store  # the services built now make their own store (counting, when counts are kept)
            pipeline.api_services = api.build_services(pipeline.settings, pipeline.overrides)
            pipeline.ports = pipeline.api_services.ports
            pipeline.store = pipeline.ports.store
            gate = pipeline.ports.quotas
            if isinstance(gate, CachedQuotaGate):
                gate.cache_s = 0  # every admission reads the count
        bulk = pipeline.api_services.build_bulk(pipeline.ports)  # type: ignore[misc]
        # Runners stop at their pages' ends or where a test makes them, never at a time of a loaded machine's.
        bulk.policy = BulkPolicy(page_size=page_size, sweep_grace=bulk.policy.sweep_grace, inline_s=600, sweep_s=600)
        pipeline.api_services.bulk = bulk
        return pipeline

    return build


def failed_jobs(pipeline: Pipeline, count: int, tenant: str = "tenant-a") -> list[str]:
    """`count` jobs that failed their last attempt, each with its message in the DLQ (as the worker leaves it)."""
    ids = []
    now = pipeline.clock.now()
    for n in range(count):
        status, body, _ = pipeline.submit(TYPE, {"message": f"m{n}"}, tenant=tenant)
        assert status == 202, body
        job = pipeline.store.claim(body["job_id"], tenant=tenant, now=now, lease_until=now + timedelta(minutes=1))
        pipeline.store.record_failure(job, error="boom", now=now, expires_at=now + timedelta(days=7))
        pipeline.queue.send_to_dlq("default", JobMessage.of(job), reason="boom")
        ids.append(body["job_id"])
        pipeline.clock.advance(0.001)  # type: ignore[attr-defined]
    return ids


def running_job(pipeline: Pipeline, tenant: str = "tenant-a") -> str:
    status, body, _ = pipeline.submit(TYPE, {"message": "running"}, tenant=tenant)
    assert status == 202, body
    now = pipeline.clock.now()
    pipeline.store.claim(body["job_id"], tenant=tenant, now=now, lease_until=now + timedelta(minutes=5))
    return str(body["job_id"])


def job(pipeline: Pipeline, job_id: str, tenant: str = "tenant-a") -> Job:
    found = pipeline.store.get(job_id, tenant=tenant)
    assert found is not None
    return found


def bulk(pipeline: Pipeline, body: dict[str, Any], tenant: str = "tenant-a", **kwargs: Any) -> tuple[int, Any]:
    status, answer, _ = pipeline.call("POST", "/jobs/bulk", body=body, tenant=tenant, **kwargs)
    return status, answer


def progress(pipeline: Pipeline, operation_id: str, tenant: str = "tenant-a") -> tuple[int, Any]:
    status, answer, _ = pipeline.call("GET", f"/jobs/bulk/{operation_id}", tenant=tenant)
    return status, answer


def dlq_depth(pipeline: Pipeline) -> int:
    attributes = pipeline.clients["sqs"].get_queue_attributes(
        QueueUrl=pipeline.resources.dlq_urls["default"], AttributeNames=["ApproximateNumberOfMessages"]
    )["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"])


def test_a_dry_run_counts_the_matching_jobs_and_shows_the_newest_ten(make_pipeline: Any) -> None:
    pipeline = make_pipeline()
    ids = failed_jobs(pipeline, 25)
    running_job(pipeline)

    status, answer = bulk(pipeline, {"action": "retry", "filter": {"status": "FAILED"}, "dry_run": True})

    assert status == 200, answer
    assert (answer["count"], answer["exact"], answer["limit"]) == (25, True, 10_000)
    assert answer["filter"] == {"tenant": "tenant-a", "status": "FAILED", "type": None, "tag": None}
    assert [s["job_id"] for s in answer["sample"]] == sorted(ids, reverse=True)[:10]
    assert {(s["type"], s["status"]) for s in answer["sample"]} == {(TYPE, "FAILED")}
    # Nothing moved.
    assert {job(pipeline, i).status for i in ids} == {JobStatus.FAILED}


def test_a_dry_run_past_the_limit_is_a_lower_bound(make_pipeline: Any) -> None:
    pipeline = make_pipeline()
    failed_jobs(pipeline, 4)
    pipeline.api_services.bulk.policy = BulkPolicy(limit=3, inline_s=600)  # type: ignore[union-attr]

    status, answer = bulk(pipeline, {"action": "retry", "filter": {"status": "FAILED"}, "dry_run": True})

    assert status == 200, answer
    assert (answer["count"], answer["exact"], answer["limit"]) == (3, False, 3)


def test_a_bulk_retry_retries_every_failed_job_and_skips_the_running_one(make_pipeline: Any) -> None:
    pipeline = make_pipeline()
    ids = failed_jobs(pipeline, 25)
    busy = running_job(pipeline)
    assert dlq_depth(pipeline) == 25
    on_queue = pipeline.depth("default")[0]

    status, answer = bulk(pipeline, {"action": "retry", "filter": {"type": TYPE}})

    assert status == 202, answer
    assert answer["status"] == "finished"
    assert (answer["matched"], answer["done"], answer["skipped"], answer["failed"]) == (26, 25, 1, 0)
    assert answer["skipped_reasons"] == {"job is RUNNING": 1}
    for job_id in ids:
        retried = job(pipeline, job_id)
        assert (retried.status, retried.retries, retried.attempt) == (JobStatus.QUEUED, 1, 0)
    assert job(pipeline, busy).status is JobStatus.RUNNING
    # Their dead letters are gone; their messages are on the queue.
    assert dlq_depth(pipeline) == 0
    assert pipeline.depth("default")[0] == on_queue + 25
    status, read = progress(pipeline, answer["operation_id"])
    assert status == 200
    assert read == answer


def test_a_bulk_cancel_cancels_the_waiting_jobs_and_skips_the_others(make_pipeline: Any) -> None:
    pipeline = make_pipeline()
    waiting = [pipeline.submit(TYPE, {"message": f"w{n}"})[1]["job_id"] for n in range(3)]
    failed = failed_jobs(pipeline, 2)
    busy = running_job(pipeline)

    status, answer = bulk(pipeline, {"action": "cancel", "filter": {}})

    assert status == 202, answer
    assert (answer["status"], answer["matched"], answer["done"], answer["skipped"]) == ("finished", 6, 3, 3)
    assert answer["skipped_reasons"] == {"job is FAILED": 2, "job is RUNNING": 1}
    assert {job(pipeline, i).status for i in waiting} == {JobStatus.CANCELLED}
    assert {job(pipeline, i).status for i in failed} == {JobStatus.FAILED}
    assert job(pipeline, busy).status is JobStatus.RUNNING


def test_a_tenant_touches_only_its_own_jobs(make_pipeline: Any) -> None:
    pipeline = make_pipeline()
    theirs = failed_jobs(pipeline, 3, tenant="tenant-a")
    mine = failed_jobs(pipeline, 1, tenant="tenant-b")

    status, refused = bulk(pipeline, {"action": "retry", "filter": {"tenant": "tenant-a"}}, tenant="tenant-b")
    assert status == 403, refused
    assert refused["error"]["code"] == "forbidden"

    status, answer = bulk(pipeline, {"action": "retry", "filter": {"status": "FAILED"}}, tenant="tenant-b")
    assert status == 202, answer
    assert (answer["matched"], answer["done"]) == (1, 1)
    assert job(pipeline, mine[0], tenant="tenant-b").status is JobStatus.QUEUED
    assert {job(pipeline, i).status for i in theirs} == {JobStatus.FAILED}
    # Another caller's operation is not found.
    assert progress(pipeline, answer["operation_id"], tenant="tenant-a")[0] == 404


def test_an_admin_acts_on_the_tenant_it_names(make_pipeline: Any) -> None:
    pipeline = make_pipeline()
    theirs = failed_jobs(pipeline, 3, tenant="tenant-a")

    status, answer = bulk(
        pipeline,
        {"action": "retry", "filter": {"tenant": "tenant-a", "status": "FAILED"}},
        tenant="ops",
        scopes=["offpath/admin"],
    )

    assert status == 202, answer
    assert answer["filter"]["tenant"] == "tenant-a"
    assert (answer["matched"], answer["done"]) == (3, 3)
    assert {job(pipeline, i).status for i in theirs} == {JobStatus.QUEUED}
    assert progress(pipeline, answer["operation_id"], tenant="ops")[1]["done"] == 3


def test_over_the_open_jobs_quota_the_operation_stops_and_leaves_the_rest(make_pipeline: Any) -> None:
    pipeline = make_pipeline(quotas="tenant-a:open_jobs=3")
    ids = failed_jobs(pipeline, 5)  # each submit opened a job, each failure closed it: 0 open

    status, answer = bulk(pipeline, {"action": "retry", "filter": {"status": "FAILED"}})

    assert status == 202, answer
    assert answer["status"] == "stopped"
    assert (answer["matched"], answer["done"], answer["skipped"]) == (3, 3, 0)
    assert "open jobs" in answer["stop_reason"]
    statuses = [job(pipeline, i).status for i in ids]
    assert statuses.count(JobStatus.QUEUED) == 3
    assert statuses.count(JobStatus.FAILED) == 2
    assert progress(pipeline, answer["operation_id"])[1] == answer


class Dies(Exception):
    """The runner's process ends (not an error a runner handles)."""


class DyingStore:
    """A store whose hand retries end the process at the `after`-th one (it is not made)."""

    def __init__(self, store: JobStore, after: int) -> None:
        self.store = store
        self.left = after

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    def retry_by_hand(self, job_id: str, **kwargs: Any) -> Job:
        self.left -= 1
        if self.left == 0:
            raise Dies()
        return self.store.retry_by_hand(job_id, **kwargs)


def test_a_runner_that_dies_mid_operation_is_followed_by_the_sweeper_which_finishes_exactly_the_rest(
    make_pipeline: Any, clock: ManualClock
) -> None:
    pipeline = make_pipeline(page_size=10)
    ids = failed_jobs(pipeline, 25)
    busy = running_job(pipeline)
    # The runner dies at its 14th hand retry: its first page (the running job, the newest, and 9 failed ones) is
    # checkpointed; 4 jobs of the second page are moved, not checkpointed.
    pipeline.api_services.ports = pipeline.ports = pipeline.api_services.ports.__class__(
        **{**vars(pipeline.ports), "store": DyingStore(pipeline.store, after=14)}
    )
    pipeline.api_services.bulk.ports = pipeline.ports  # type: ignore[union-attr]

    status, answer = bulk(pipeline, {"action": "retry", "filter": {"type": TYPE}})

    assert status == 202, answer
    assert answer["status"] == "running"
    assert (answer["matched"], answer["done"], answer["skipped"]) == (10, 9, 1)
    moved = [i for i in ids if job(pipeline, i).status is JobStatus.QUEUED]
    assert len(moved) == 13
    # A sweep while the dead runner's lease lasts leaves the operation alone.
    pipeline.sweep()
    assert progress(pipeline, answer["operation_id"])[1]["matched"] == 10

    clock.advance(BulkPolicy().lease.total_seconds() + 1)
    report = pipeline.sweep()

    assert report["bulk_operations"] == 1
    status, read = progress(pipeline, answer["operation_id"])
    assert read["status"] == "finished"
    assert (read["matched"], read["done"], read["skipped"], read["failed"]) == (26, 25, 1, 0)
    assert read["skipped_reasons"] == {"job is RUNNING": 1}
    # Every failed job retried once: none twice, none missed.
    assert {job(pipeline, i).retries for i in ids} == {1}
    assert {job(pipeline, i).status for i in ids} == {JobStatus.QUEUED}
    assert job(pipeline, busy).status is JobStatus.RUNNING


def test_a_bad_body_is_refused_naming_the_field(make_pipeline: Any) -> None:
    pipeline = make_pipeline()

    assert bulk(pipeline, {"action": "delete"})[1]["error"]["field"] == "action"
    status, answer = bulk(pipeline, {"action": "retry", "filter": {"type": "no.such"}})
    assert (status, answer["error"]["field"]) == (422, "filter.type")
    status, answer = bulk(pipeline, {"action": "retry", "filter": {"tag": "no-colon"}})
    assert (status, answer["error"]["field"]) == (422, "filter.tag")
    status, answer = bulk(pipeline, {"action": "retry", "filter": {"status": "DONE"}})
    assert (status, answer["error"]["field"]) == (422, "filter.status")
    status, answer = bulk(pipeline, {"action": "retry", "dry_run": 0})
    assert (status, answer["error"]["field"]) == (422, "dry_run")
    assert progress(pipeline, "0" * 32)[0] == 404
    assert progress(pipeline, "not-an-id")[0] == 404


def test_a_send_that_fails_still_counts_the_retry_done(make_pipeline: Any) -> None:
    pipeline = make_pipeline()
    ids = failed_jobs(pipeline, 2)

    class NoSend:
        def __init__(self, queue: Any) -> None:
            self.queue = queue

        def __getattr__(self, name: str) -> Any:
            return getattr(self.queue, name)

        def send(self, *args: Any, **kwargs: Any) -> None:
            raise QueueUnavailableError("down")

    pipeline.api_services.bulk.ports = pipeline.ports.__class__(  # type: ignore[union-attr]
        **{**vars(pipeline.ports), "queue": NoSend(pipeline.queue)}
    )
    status, answer = bulk(pipeline, {"action": "retry", "filter": {"status": "FAILED"}})

    assert (status, answer["done"]) == (202, 2)
    # The sweeper sends them when they are overdue.
    assert {job(pipeline, i).status for i in ids} == {JobStatus.QUEUED}


def test_the_sweeper_runs_nothing_when_no_operation_is_open(make_pipeline: Any) -> None:
    pipeline = make_pipeline()
    assert pipeline.sweep()["bulk_operations"] == 0


def test_the_operations_store_refuses_a_runner_that_lost_its_lease(
    resources: Resources, clients: dict[str, Any], clock: ManualClock
) -> None:
    store = DynamoDbBulkStore(resources.table_name, client=clients["dynamodb"])
    now = clock.now()
    created = BulkOperation(
        "a" * 32,
        "tenant-a",
        "retry",
        BulkFilter("tenant-a"),
        "running",
        now,
        now,
        lease_until=now + timedelta(minutes=2),
    )
    store.create(created)
    with pytest.raises(BulkOperationConflictError):
        store.take(created, now=now, lease_until=now + timedelta(minutes=2))  # its lease still runs

    taken = store.take(created, now=now + timedelta(minutes=3), lease_until=now + timedelta(minutes=5))

    with pytest.raises(BulkOperationConflictError):
        store.save(created.replace(matched=1), seen_step=created.step)
    over = store.save(taken.replace(status="finished", finished_at=now), seen_step=taken.step)
    assert (store.get("tenant-a", "a" * 32), store.open_operations()) == (over, [])


def test_past_the_running_operations_caps_a_new_one_is_409(make_pipeline: Any, resources: Resources) -> None:
    pipeline = make_pipeline()
    store = pipeline.api_services.bulk.operations  # type: ignore[union-attr]
    now = pipeline.clock.now()

    def running(n: int, owner: str) -> BulkOperation:
        return BulkOperation(f"{n:032x}", owner, "retry", BulkFilter(owner), "running", now, now)

    for n in range(MAX_OPEN_PER_OWNER):
        store.create(running(n, "tenant-a"))
    status, answer = bulk(pipeline, {"action": "retry", "filter": {}})
    assert (status, answer["error"]["code"]) == (409, "conflict")
    assert "too many bulk operations" in answer["error"]["message"]
    # Another caller's place is its own, until the cap over all callers.
    assert bulk(pipeline, {"action": "retry", "filter": {}}, tenant="tenant-b")[0] == 202
    for n in range(MAX_OPEN_PER_OWNER, MAX_OPEN_OPERATIONS):
        store.create(running(n, f"tenant-{n}"))
    assert bulk(pipeline, {"action": "retry", "filter": {}}, tenant="tenant-c")[0] == 409
