"""The demo job types through their whole life cycle, driven only through the api and worker handlers."""

from __future__ import annotations

import dataclasses

from tests.integration.conftest import Pipeline


def test_echo_job_succeeds_with_its_payload_as_result(pipeline: Pipeline) -> None:
    status, job, headers = pipeline.submit("demo.echo", {"hello": "world"})
    assert status == 202
    assert job["status"] == "QUEUED"
    assert headers["Location"] == f"/jobs/{job['job_id']}"

    pipeline.drain()

    status, view, _ = pipeline.call("GET", f"/jobs/{job['job_id']}")
    assert status == 200
    assert view["status"] == "SUCCEEDED"
    assert view["result"] == {"hello": "world"}
    assert view["attempts"] == 1


def test_flaky_job_retries_then_succeeds(pipeline: Pipeline) -> None:
    _, job, _ = pipeline.submit("demo.flaky", {"fail_first": 2})

    pipeline.drain()

    _, view, _ = pipeline.call("GET", f"/jobs/{job['job_id']}")
    assert view["status"] == "SUCCEEDED"
    assert view["attempts"] == 3
    assert view["result"] == {"succeeded_on_attempt": 3}


def test_poison_job_fails_at_once_into_the_dlq(pipeline: Pipeline) -> None:
    _, job, _ = pipeline.submit("demo.poison", {"reason": "bad input"})

    pipeline.drain()

    _, view, _ = pipeline.call("GET", f"/jobs/{job['job_id']}")
    assert view["status"] == "FAILED"
    assert view["attempts"] == 1
    assert "bad input" in view["error"]
    dead = pipeline.dlq_bodies()
    assert [d["job_id"] for d in dead] == [job["job_id"]]


def test_sleep_job_reports_progress(pipeline: Pipeline) -> None:
    _, job, _ = pipeline.submit("demo.sleep", {"ms": 20})

    pipeline.drain()

    _, view, _ = pipeline.call("GET", f"/jobs/{job['job_id']}")
    assert view["status"] == "SUCCEEDED"
    assert view["progress"] == {"fraction": 1.0, "message": "slept 20 ms"}


def test_result_over_the_limit_fails_the_job_with_the_reason(pipeline: Pipeline) -> None:
    original = pipeline.registry.job_types["demo.echo"]
    pipeline.registry.job_types["demo.echo"] = dataclasses.replace(
        original, function=lambda payload, ctx: {"blob": "x" * 70_000}
    )
    try:
        _, job, _ = pipeline.submit("demo.echo", {})
        pipeline.drain()
    finally:
        pipeline.registry.job_types["demo.echo"] = original

    _, view, _ = pipeline.call("GET", f"/jobs/{job['job_id']}")
    assert view["status"] == "FAILED"
    assert "the limit is 65536 bytes" in view["error"]
    assert [d["job_id"] for d in pipeline.dlq_bodies()] == [job["job_id"]]
