"""Batches (fan-out / fan-in) through the api, worker and sweeper handlers against moto: the routes, the counts and
the callbacks, exactly once, also after a hand retry and a worker that stopped between a member's final write and
its count."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from offpath.domain.registry import Registry
from offpath.logic import followups
from offpath_local.resources import Resources
from offpath_tools.clocks import ShiftableClock
from tests.integration.conftest import Pipeline, RecordingMetrics


@pytest.fixture
def clock() -> ShiftableClock:
    return ShiftableClock()


@pytest.fixture
def pipeline(
    resources: Resources, clients: dict[str, Any], registry: Registry, metrics: RecordingMetrics, clock: ShiftableClock
) -> Pipeline:
    return Pipeline(resources, clients, registry, metrics, clock=clock)


ON_COMPLETE = {"type": "demo.echo", "payload": {"callback": "complete"}}
ON_SUCCESS = {"type": "demo.echo", "payload": {"callback": "success"}}


def echo_jobs(n: int, start: int = 0) -> list[dict[str, Any]]:
    return [{"type": "demo.echo", "payload": {"n": i}} for i in range(start, start + n)]


def create(pipeline: Pipeline, body: dict[str, Any], **kwargs: Any) -> tuple[int, Any, dict[str, str]]:
    return pipeline.call("POST", "/batches", body=body, **kwargs)


def batch_of(pipeline: Pipeline, batch_id: str) -> dict[str, Any]:
    status, view, _ = pipeline.call("GET", f"/batches/{batch_id}")
    assert status == 200, view
    return dict(view)


def job_of(pipeline: Pipeline, job_id: str) -> dict[str, Any]:
    status, view, _ = pipeline.call("GET", f"/jobs/{job_id}")
    assert status == 200, view
    return dict(view)


def all_jobs(pipeline: Pipeline, batch_id: str, limit: int = 100) -> list[dict[str, Any]]:
    jobs: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        query = f"?limit={limit}" + (f"&cursor={cursor}" if cursor else "")
        status, page, _ = pipeline.call("GET", f"/batches/{batch_id}/jobs{query}")
        assert status == 200, page
        jobs.extend(page["jobs"])
        cursor = page["cursor"]
        if cursor is None:
            return jobs


def jobs_of_type(pipeline: Pipeline, payload_key: str) -> list[dict[str, Any]]:
    _, page, _ = pipeline.call("GET", "/jobs?limit=100&type=demo.echo")
    return [j for j in page["jobs"] if payload_key in (job_of(pipeline, j["job_id"])["payload"] or {})]


def test_a_batch_is_accepted_with_its_counts_and_its_jobs_name_it(pipeline: Pipeline) -> None:
    status, batch, _ = create(pipeline, {"jobs": echo_jobs(3), "on_complete": ON_COMPLETE})

    assert status == 202
    assert batch["status"] == "RUNNING"
    assert (batch["total"], batch["pending"], batch["succeeded"], batch["failed"], batch["cancelled"]) == (
        3,
        3,
        0,
        0,
        0,
    )
    assert batch["on_complete_job_id"] is None
    members = all_jobs(pipeline, batch["batch_id"])
    assert sorted(m["status"] for m in members) == ["QUEUED"] * 3
    assert {job_of(pipeline, m["job_id"])["batch_id"] for m in members} == {batch["batch_id"]}


def test_callbacks_run_once_when_every_job_succeeded(pipeline: Pipeline) -> None:
    _, batch, _ = create(pipeline, {"jobs": echo_jobs(4), "on_complete": ON_COMPLETE, "on_success": ON_SUCCESS})

    pipeline.drain()
    pipeline.drain()

    done = batch_of(pipeline, batch["batch_id"])
    assert done["status"] == "SUCCEEDED"
    assert (done["total"], done["pending"], done["succeeded"]) == (4, 0, 4)
    complete = job_of(pipeline, done["on_complete_job_id"])
    success = job_of(pipeline, done["on_success_job_id"])
    assert complete["status"] == success["status"] == "SUCCEEDED"
    assert complete["callback_of"] == success["callback_of"] == batch["batch_id"]
    assert complete["result"] == {"callback": "complete"}
    # Exactly one job of each callback exists.
    assert len(jobs_of_type(pipeline, "callback")) == 2


def test_a_poison_member_completes_the_batch_without_success_until_retried_by_hand(pipeline: Pipeline) -> None:
    jobs = [*echo_jobs(2), {"type": "demo.poison", "payload": {"reason": "bad row", "first_run_only": True}}]
    _, batch, _ = create(pipeline, {"jobs": jobs, "on_complete": ON_COMPLETE, "on_success": ON_SUCCESS})

    pipeline.drain()
    pipeline.drain()

    done = batch_of(pipeline, batch["batch_id"])
    assert done["status"] == "COMPLETE"
    assert (done["pending"], done["succeeded"], done["failed"]) == (0, 2, 1)
    assert done["on_complete_job_id"] is not None
    assert done["on_success_job_id"] is None
    poison = next(m for m in all_jobs(pipeline, batch["batch_id"]) if m["type"] == "demo.poison")

    status, retried, _ = pipeline.call("POST", f"/jobs/{poison['job_id']}/retry")
    assert status == 202, retried
    # Back to pending: the failed count moved with the retry's write.
    again = batch_of(pipeline, batch["batch_id"])
    assert (again["pending"], again["succeeded"], again["failed"]) == (1, 2, 0)
    assert again["status"] == "RUNNING"

    pipeline.drain()
    pipeline.drain()

    final = batch_of(pipeline, batch["batch_id"])
    assert final["status"] == "SUCCEEDED"
    assert (final["pending"], final["succeeded"], final["failed"]) == (0, 3, 0)
    assert final["on_complete_job_id"] == done["on_complete_job_id"]
    assert job_of(pipeline, final["on_success_job_id"])["status"] == "SUCCEEDED"
    callbacks = jobs_of_type(pipeline, "callback")
    assert sorted(j["payload"]["callback"] for j in (job_of(pipeline, c["job_id"]) for c in callbacks)) == [
        "complete",
        "success",
    ]


def test_the_same_key_replays_the_same_batch(pipeline: Pipeline) -> None:
    body = {"jobs": echo_jobs(2), "on_complete": ON_COMPLETE}
    status, first, _ = create(pipeline, body, headers={"content-type": "application/json", "Idempotency-Key": "k-1"})
    assert status == 202
    status, again, headers = create(
        pipeline, body, headers={"content-type": "application/json", "Idempotency-Key": "k-1"}
    )

    assert status == 200
    assert headers["Idempotent-Replayed"] == "true"
    assert again["batch_id"] == first["batch_id"]
    assert again["total"] == 2
    assert len(all_jobs(pipeline, first["batch_id"])) == 2

    status, refused, _ = create(
        pipeline, {"jobs": echo_jobs(3)}, headers={"content-type": "application/json", "Idempotency-Key": "k-1"}
    )
    assert status == 422
    assert refused["error"]["field"] == "Idempotency-Key"


def test_an_open_batch_takes_pages_until_sealed_and_only_then_calls_back(pipeline: Pipeline) -> None:
    _, batch, _ = create(pipeline, {"jobs": echo_jobs(2), "open": True, "on_complete": ON_COMPLETE})
    assert batch["status"] == "OPEN"
    batch_id = batch["batch_id"]
    status, added, _ = pipeline.call(
        "POST",
        f"/batches/{batch_id}/jobs",
        body={"jobs": echo_jobs(3, start=2)},
        headers={"content-type": "application/json", "Idempotency-Key": "page-2"},
    )
    assert status == 202
    assert added["total"] == 5
    # The same page again (its answer lost): nothing more is added.
    _, replayed, _ = pipeline.call(
        "POST",
        f"/batches/{batch_id}/jobs",
        body={"jobs": echo_jobs(3, start=2)},
        headers={"content-type": "application/json", "Idempotency-Key": "page-2"},
    )
    assert replayed["total"] == 5

    pipeline.drain()
    unsealed = batch_of(pipeline, batch_id)
    assert (unsealed["status"], unsealed["pending"], unsealed["succeeded"]) == ("OPEN", 0, 5)
    assert unsealed["on_complete_job_id"] is None

    status, sealed, _ = pipeline.call("POST", f"/batches/{batch_id}/seal")
    assert status == 200
    assert sealed["status"] == "SUCCEEDED"
    assert sealed["on_complete_job_id"] is not None
    status, late, _ = pipeline.call("POST", f"/batches/{batch_id}/jobs", body={"jobs": echo_jobs(1)})
    assert status == 409
    assert late["error"]["code"] == "conflict"
    # Sealing again changes nothing.
    _, resealed, _ = pipeline.call("POST", f"/batches/{batch_id}/seal")
    assert resealed["on_complete_job_id"] == sealed["on_complete_job_id"]
    assert len(jobs_of_type(pipeline, "callback")) == 1


def test_a_batch_s_jobs_come_a_page_at_a_time(pipeline: Pipeline) -> None:
    _, batch, _ = create(pipeline, {"jobs": echo_jobs(5), "open": True})
    pipeline.call("POST", f"/batches/{batch['batch_id']}/jobs", body={"jobs": echo_jobs(4, start=5)})

    listed = all_jobs(pipeline, batch["batch_id"], limit=2)

    assert len(listed) == 9
    assert sorted(job_of(pipeline, j["job_id"])["payload"]["n"] for j in listed) == list(range(9))


def test_batches_are_listed_newest_first_and_another_tenant_s_is_not_found(pipeline: Pipeline) -> None:
    _, first, _ = create(pipeline, {"jobs": echo_jobs(1)})
    _, second, _ = create(pipeline, {"jobs": echo_jobs(1)})

    status, page, _ = pipeline.call("GET", "/batches?limit=1")
    assert status == 200
    assert [b["batch_id"] for b in page["batches"]] == [second["batch_id"]]
    _, rest, _ = pipeline.call("GET", f"/batches?limit=1&cursor={page['cursor']}")
    assert [b["batch_id"] for b in rest["batches"]] == [first["batch_id"]]

    status, missing, _ = pipeline.call("GET", f"/batches/{first['batch_id']}", tenant="tenant-b")
    assert status == 404
    assert missing["error"]["code"] == "not_found"
    status, _, _ = pipeline.call("GET", f"/batches/{first['batch_id']}/jobs", tenant="tenant-b")
    assert status == 404
    _, others, _ = pipeline.call("GET", "/batches", tenant="tenant-b")
    assert others["batches"] == []


def test_a_bad_job_refuses_the_whole_batch_naming_it(pipeline: Pipeline) -> None:
    status, refused, _ = create(pipeline, {"jobs": [*echo_jobs(1), {"type": "demo.sleep", "payload": {"ms": -1}}]})

    assert status == 422
    assert refused["error"]["field"] == "jobs.1.payload.ms"
    _, page, _ = pipeline.call("GET", "/batches")
    assert page["batches"] == []


def test_a_cancelled_batch_cancels_its_waiting_jobs_and_completes_without_success(pipeline: Pipeline) -> None:
    _, batch, _ = create(pipeline, {"jobs": echo_jobs(3), "on_complete": ON_COMPLETE, "on_success": ON_SUCCESS})

    status, cancelled, _ = pipeline.call("POST", f"/batches/{batch['batch_id']}/cancel")

    assert status == 200
    assert (cancelled["status"], cancelled["cancelled"], cancelled["pending"]) == ("COMPLETE", 3, 0)
    assert cancelled["cancelled_at"] is not None
    assert cancelled["on_complete_job_id"] is not None
    assert cancelled["on_success_job_id"] is None
    assert {m["status"] for m in all_jobs(pipeline, batch["batch_id"])} == {"CANCELLED"}


def test_a_member_cancelled_by_id_is_counted(pipeline: Pipeline) -> None:
    _, batch, _ = create(pipeline, {"jobs": echo_jobs(2)})
    member = all_jobs(pipeline, batch["batch_id"])[0]

    status, _, _ = pipeline.call("POST", f"/jobs/{member['job_id']}/cancel")

    assert status == 200
    assert batch_of(pipeline, batch["batch_id"])["cancelled"] == 1


@pytest.fixture
def worker_dies_before_followups(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The worker stops between a member's final write and its count: its follow-ups never run."""
    skipped: list[str] = []

    def dies(job: Any, ports: Any, now: Any) -> None:
        skipped.append(job.job_id)
        raise RuntimeError("worker stopped")

    monkeypatch.setattr(followups, "FOLLOWUPS", (dies,))
    yield skipped


def test_a_worker_stopped_before_the_count_leaves_it_to_the_sweeper_once(
    pipeline: Pipeline, clock: ShiftableClock, worker_dies_before_followups: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, batch, _ = create(pipeline, {"jobs": echo_jobs(2), "on_complete": ON_COMPLETE, "on_success": ON_SUCCESS})

    pipeline.drain()
    assert len(worker_dies_before_followups) == 2
    stalled = batch_of(pipeline, batch["batch_id"])
    assert (stalled["pending"], stalled["succeeded"], stalled["on_complete_job_id"]) == (2, 0, None)

    monkeypatch.setattr(followups, "FOLLOWUPS", (followups.batch_member_final,))
    with clock.shifted(timedelta(minutes=1)):
        pipeline.sweep()
        # A second sweep (or a late worker) finds nothing left to do.
        pipeline.sweep()

    swept = batch_of(pipeline, batch["batch_id"])
    assert (swept["status"], swept["pending"], swept["succeeded"]) == ("SUCCEEDED", 0, 2)
    assert swept["on_complete_job_id"] is not None and swept["on_success_job_id"] is not None
    pipeline.drain()
    assert len(jobs_of_type(pipeline, "callback")) == 2


def test_followups_run_twice_count_once(pipeline: Pipeline) -> None:
    _, batch, _ = create(pipeline, {"jobs": echo_jobs(1), "on_complete": ON_COMPLETE})
    pipeline.drain()
    member = all_jobs(pipeline, batch["batch_id"])[0]
    job = pipeline.store.get(member["job_id"], tenant="tenant-a")
    assert job is not None

    # The sweeper's redelivery of the same follow-up after the worker ran it (a lost clear).
    followups.run_followups(job, pipeline.ports, now=pipeline.clock.now())
    followups.run_followups(job, pipeline.ports, now=pipeline.clock.now())

    again = batch_of(pipeline, batch["batch_id"])
    assert (again["total"], again["succeeded"], again["pending"]) == (1, 1, 0)
    assert len(jobs_of_type(pipeline, "callback")) == 1


def test_a_redriven_member_leaves_the_failed_count_and_its_success_calls_back(pipeline: Pipeline) -> None:
    jobs = [*echo_jobs(1), {"type": "demo.poison", "payload": {"reason": "bad row", "first_run_only": True}}]
    _, batch, _ = create(pipeline, {"jobs": jobs, "on_success": ON_SUCCESS})
    pipeline.drain()
    assert batch_of(pipeline, batch["batch_id"])["failed"] == 1

    code, _, _ = pipeline.call("POST", "/queues/default/redrive", scopes=["offpath/admin"])
    pipeline.drain()
    pipeline.drain()

    assert code == 202
    done = batch_of(pipeline, batch["batch_id"])
    assert (done["status"], done["succeeded"], done["failed"], done["pending"]) == ("SUCCEEDED", 2, 0, 0)
    assert job_of(pipeline, done["on_success_job_id"])["status"] == "SUCCEEDED"
