"""Chains and jobs that submit jobs through the api, worker and sweeper handlers against moto (DynamoDB, SQS)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from offpath.adapters.dynamodb_store import DynamoDbJobStore
from offpath.domain.errors import JobConflictError
from offpath.domain.registry import Registry
from offpath.logic.followups import FOLLOWUP_GRACE
from offpath_local.resources import Resources
from offpath_tools.clocks import ManualClock
from offpath_tools.fakes import SCRIPTED_TYPE, ScriptedJob, registry_with
from tests.integration.conftest import Pipeline, RecordingMetrics

TENANT = "tenant-a"


class WorkerDied(BaseException):
    """The worker's process ends at that point (nothing after it runs)."""


@pytest.fixture
def scripted() -> ScriptedJob:
    return ScriptedJob()


@pytest.fixture
def registry(scripted: ScriptedJob) -> Registry:
    return registry_with(scripted)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(datetime.now(UTC).replace(microsecond=0))


@pytest.fixture
def timed(
    resources: Resources, clients: dict[str, Any], registry: Registry, metrics: RecordingMetrics, clock: ManualClock
) -> Pipeline:
    return Pipeline(resources, clients, registry, metrics, clock=clock)


def view_of(pipeline: Pipeline, job_id: str) -> dict[str, Any]:
    status, view, _ = pipeline.call("GET", f"/jobs/{job_id}")
    assert status == 200, view
    return view


def steps(*types: str, start: int = 1) -> dict[str, Any]:
    """A chain spec of `types` (the first a job, the rest its `then`s)."""
    spec: dict[str, Any] | None = None
    for job_type in reversed(types[1:]):
        spec = {"type": job_type, "payload": {}, **({"then": spec} if spec else {})}
    body: dict[str, Any] = {"type": types[0], "payload": {"start": start} if types[0] == "demo.step" else {}}
    if spec:
        body["then"] = spec
    return body


def submit_chain(pipeline: Pipeline, *types: str) -> str:
    status, job, _ = pipeline.call("POST", "/jobs", body=steps(*types))
    assert status == 202, job
    return str(job["job_id"])


def test_a_three_step_chain_runs_in_order_through_the_handlers(pipeline: Pipeline) -> None:
    first_id = submit_chain(pipeline, "demo.step", "demo.step", "demo.step")
    assert view_of(pipeline, first_id)["chain"] == "pending"

    for _ in range(3):
        pipeline.drain()

    first = view_of(pipeline, first_id)
    second = view_of(pipeline, first["next_job_id"])
    third = view_of(pipeline, second["next_job_id"])
    assert [v["status"] for v in (first, second, third)] == ["SUCCEEDED"] * 3
    assert [v["result"]["n"] for v in (first, second, third)] == [1, 2, 3]
    assert [v["result"]["parent_job_id"] for v in (second, third)] == [first_id, second["job_id"]]
    assert [v["parent_job_id"] for v in (first, second, third)] == [None, first_id, second["job_id"]]
    assert [v["chain"] for v in (first, second, third)] == ["continued", "continued", None]
    assert third["next_job_id"] is None


def test_a_poison_middle_step_stops_the_chain_there(pipeline: Pipeline) -> None:
    first_id = submit_chain(pipeline, "demo.step", "demo.poison", "demo.step")

    for _ in range(3):
        pipeline.drain()

    first = view_of(pipeline, first_id)
    middle = view_of(pipeline, first["next_job_id"])
    assert (middle["status"], middle["chain"], middle["next_job_id"]) == ("FAILED", "stopped", None)
    status, listing, _ = pipeline.call("GET", "/jobs")
    assert status == 200
    assert sorted(j["type"] for j in listing["jobs"]) == ["demo.poison", "demo.step"]


@pytest.mark.parametrize(
    ("then", "field"),
    [
        ({"type": "demo.step", "then": {"type": "no.such"}}, "then.then.type"),
        ({"type": "demo.step", "payload": {"start": "one"}}, "then.payload.start"),
        ({"type": "demo.step", "then": {"type": "demo.step", "payload": {"start": -1}}}, "then.then.payload.start"),
        ({"type": "demo.step", "extra": 1}, "then.extra"),
    ],
)
def test_a_chain_with_a_bad_step_is_refused_at_submit_naming_the_field(
    pipeline: Pipeline, then: dict[str, Any], field: str
) -> None:
    status, body, _ = pipeline.call("POST", "/jobs", body={"type": "demo.step", "then": then})

    assert status == 422, body
    assert body["error"]["field"] == field
    _, listing, _ = pipeline.call("GET", "/jobs")
    assert listing["jobs"] == []


def test_a_batch_item_may_carry_a_chain(pipeline: Pipeline) -> None:
    status, body, _ = pipeline.call(
        "POST",
        "/jobs/batch",
        body={"jobs": [steps("demo.step", "demo.step"), {"type": "demo.step", "then": {"type": "no.such"}}]},
    )

    assert status == 207, body
    accepted, refused = body["results"]
    assert (accepted["status"], accepted["job"]["chain"]) == (202, "pending")
    assert (refused["status"], refused["error"]["field"]) == (422, "then.type")


class DiesBeforeTheNextJob(DynamoDbJobStore):
    """Ends the worker's process once, as it is about to write a chain's next job (after the parent's SUCCEED)."""

    def __init__(self, store: DynamoDbJobStore) -> None:
        super().__init__(store.table_name, client=store.client)
        self.died = False

    def create(self, job: Any) -> Any:
        if job.parent_job_id is not None and not self.died:
            self.died = True
            raise WorkerDied
        return super().create(job)


def test_a_worker_that_dies_between_the_success_and_the_next_job_leaves_it_to_the_sweeper_once(
    timed: Pipeline, clock: ManualClock
) -> None:
    first_id = submit_chain(timed, "demo.step", "demo.step")
    timed.store = DiesBeforeTheNextJob(timed.store)  # type: ignore[arg-type]
    timed.drain()
    first = view_of(timed, first_id)
    assert first["status"] == "SUCCEEDED" and first["next_job_id"] is not None
    status, _, _ = timed.call("GET", f"/jobs/{first['next_job_id']}")
    assert status == 404

    timed.visibility_timeout_passes()
    timed.drain()  # the redelivered message of a SUCCEEDED job: acknowledged, nothing made
    assert timed.call("GET", f"/jobs/{first['next_job_id']}")[0] == 404
    clock.advance(FOLLOWUP_GRACE.total_seconds() + 1)
    timed.sweep()
    timed.sweep()
    timed.drain()

    second = view_of(timed, first["next_job_id"])
    assert (second["status"], second["parent_job_id"], second["result"]["n"]) == ("SUCCEEDED", first_id, 2)
    _, listing, _ = timed.call("GET", "/jobs")
    assert len(listing["jobs"]) == 2


def test_the_follow_ups_leave_the_sweep_index_only_under_the_sweep_time_they_saw(
    pipeline: Pipeline, store: DynamoDbJobStore
) -> None:
    first_id = submit_chain(pipeline, "demo.step", "demo.step")
    pipeline.drain()
    done = store.get(first_id, tenant=TENANT)
    assert done is not None and done.sweep_at is None

    with pytest.raises(JobConflictError):
        store.clear_followups(done.replace(sweep_at=datetime(2026, 1, 1, tzinfo=UTC)))


def test_a_retried_attempt_that_submits_again_gets_the_same_child(pipeline: Pipeline, scripted: ScriptedJob) -> None:
    children: list[str] = []

    def submits_then_fails_once(payload: Any, ctx: Any) -> dict[str, str]:
        children.append(ctx.submit("demo.echo", {"hello": "child"}, key="greeting"))
        if ctx.attempt == 1:
            raise RuntimeError("fails after its submit")
        return {"child": children[-1]}

    scripted.action = submits_then_fails_once
    status, parent, _ = pipeline.submit(SCRIPTED_TYPE, {})
    assert status == 202
    pipeline.drain()
    pipeline.visibility_timeout_passes()
    for _ in range(3):
        pipeline.drain()

    assert len(set(children)) == 1 and len(children) == 2
    child = view_of(pipeline, children[0])
    assert (child["parent_job_id"], child["status"], child["result"]) == (
        parent["job_id"],
        "SUCCEEDED",
        {"hello": "child"},
    )
    _, listing, _ = pipeline.call("GET", "/jobs")
    assert sorted(j["type"] for j in listing["jobs"]) == ["demo.echo", SCRIPTED_TYPE]
