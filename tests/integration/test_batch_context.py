"""A job's `ctx.submit_batch` (idempotent across the job's attempts) and a callback's `ctx.batch` (the batch's id,
counts and its jobs' results, a page at a time), through the api and worker handlers against moto."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict

from offpath.domain.backoff import Backoff
from offpath.domain.context import JobContext
from offpath.domain.registry import JobType, Registry
from offpath.logic.batches import JobBatches
from offpath_local.resources import Resources
from tests.integration.conftest import Pipeline, RecordingMetrics

SUMMARY = "tests.batch_summary"
FAN_OUT = "tests.fan_out"


class AnyPayload(BaseModel):
    model_config = ConfigDict(extra="allow")


class FanOut(BaseModel):
    n: int
    crash_first_attempt: bool = False


def summarise(payload: AnyPayload, ctx: JobContext) -> dict[str, Any]:
    batch = ctx.batch
    assert batch is not None
    return {
        "batch_id": batch.batch_id,
        "total": batch.total,
        "succeeded": batch.succeeded,
        "failed": batch.failed,
        "results": sorted(result["n"] for _, _, result in batch.results()),
    }


def fan_out(payload: FanOut, ctx: JobContext) -> dict[str, Any]:
    batch = ctx.submit_batch(
        [{"type": "demo.echo", "payload": {"n": i}} for i in range(payload.n)],
        key="fan",
        on_complete={"type": SUMMARY, "payload": {}},
    )
    if payload.crash_first_attempt and ctx.attempt == 1:
        raise RuntimeError("stopped after submitting the batch")
    return {"batch_id": batch.batch_id}


def _type(name: str, function: Any, model: type[BaseModel]) -> JobType:
    return JobType(
        name=name,
        function=function,
        payload_model=model,
        queue="default",
        max_attempts=3,
        timeout_s=10,
        backoff=Backoff(),
    )


@pytest.fixture
def pipeline(resources: Resources, clients: dict[str, Any], registry: Registry, metrics: RecordingMetrics) -> Pipeline:
    extended = Registry(queues=dict(registry.queues), job_types=dict(registry.job_types), schedules=registry.schedules)
    extended.add_job_type(_type(SUMMARY, summarise, AnyPayload))
    extended.add_job_type(_type(FAN_OUT, fan_out, FanOut))
    return Pipeline(resources, clients, extended, metrics)


def drain_all(pipeline: Pipeline) -> None:
    for _ in range(5):
        if pipeline.drain() == 0:
            return


def test_a_retried_job_submits_its_batch_once_and_the_callback_reads_every_result(pipeline: Pipeline) -> None:
    _, parent, _ = pipeline.submit(FAN_OUT, {"n": 7, "crash_first_attempt": True})

    drain_all(pipeline)

    _, finished, _ = pipeline.call("GET", f"/jobs/{parent['job_id']}")
    assert finished["status"] == "SUCCEEDED"
    assert finished["attempts"] == 2
    _, listing, _ = pipeline.call("GET", "/batches")
    assert [b["batch_id"] for b in listing["batches"]] == [finished["result"]["batch_id"]]
    batch = listing["batches"][0]
    assert (batch["status"], batch["total"], batch["succeeded"]) == ("SUCCEEDED", 7, 7)
    assert batch["parent_job_id"] == parent["job_id"]
    _, callback, _ = pipeline.call("GET", f"/jobs/{batch['on_complete_job_id']}")
    assert callback["status"] == "SUCCEEDED"
    assert callback["result"] == {
        "batch_id": batch["batch_id"],
        "total": 7,
        "succeeded": 7,
        "failed": 0,
        "results": list(range(7)),
    }


def test_a_callback_pages_through_more_jobs_than_one_page(pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch) -> None:
    # Pages of 10 (100 in the stack) over the two requests' stored pages of 12 and 13 ids: the callback's cursor
    # stops inside a stored page and crosses from one to the next.
    monkeypatch.setattr(JobBatches, "PAGE", 10)
    _, batch, _ = pipeline.call(
        "POST",
        "/batches",
        body={
            "jobs": [{"type": "demo.echo", "payload": {"n": i}} for i in range(12)],
            "open": True,
            "on_complete": {"type": SUMMARY, "payload": {}},
        },
    )
    pipeline.call(
        "POST",
        f"/batches/{batch['batch_id']}/jobs",
        body={"jobs": [{"type": "demo.echo", "payload": {"n": i}} for i in range(12, 25)]},
    )
    pipeline.call("POST", f"/batches/{batch['batch_id']}/seal")

    drain_all(pipeline)

    _, done, _ = pipeline.call("GET", f"/batches/{batch['batch_id']}")
    _, callback, _ = pipeline.call("GET", f"/jobs/{done['on_complete_job_id']}")
    assert callback["result"]["total"] == 25
    assert callback["result"]["results"] == list(range(25))
