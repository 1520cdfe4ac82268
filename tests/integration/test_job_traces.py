"""One trace per job: a caller's W3C `traceparent` at submit is kept on the job, carried with its message, and
every log line the worker writes for the job names it; without one the job starts a trace of its own."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest

from offpath.observability import JsonFormatter
from tests.integration.conftest import Pipeline

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
TRACEPARENT = f"00-{TRACE}-00f067aa0ba902b7-01"


@pytest.fixture
def log_lines() -> Iterator[io.StringIO]:
    """The JSON lines the functions write (their formatter), kept for the test to read."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter("worker"))
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    try:
        yield stream
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


def lines_of(stream: io.StringIO, job_id: str) -> list[dict[str, Any]]:
    return [line for line in map(json.loads, stream.getvalue().splitlines()) if line.get("job_id") == job_id]


def test_a_callers_traceparent_names_the_jobs_trace(pipeline: Pipeline) -> None:
    code, job, _ = pipeline.submit("demo.echo", {"n": 1}, headers={"traceparent": TRACEPARENT})

    assert code == 202
    assert job["trace_id"] == TRACE
    assert pipeline.call("GET", f"/jobs/{job['job_id']}")[1]["trace_id"] == TRACE


def test_the_jobs_message_carries_its_trace(pipeline: Pipeline) -> None:
    code, _, _ = pipeline.submit("demo.echo", {"n": 1}, headers={"traceparent": TRACEPARENT})
    assert code == 202

    (message,) = pipeline.clients["sqs"].receive_message(
        QueueUrl=pipeline.resources.queue_urls["default"], MessageAttributeNames=["All"], WaitTimeSeconds=1
    )["Messages"]

    traceparent = message["MessageAttributes"]["traceparent"]["StringValue"]
    assert traceparent.startswith(f"00-{TRACE}-") and traceparent.endswith("-01")


def test_the_workers_log_lines_for_the_job_carry_its_trace(pipeline: Pipeline, log_lines: io.StringIO) -> None:
    _, job, _ = pipeline.submit("demo.flaky", {"fail_first": 1}, headers={"traceparent": TRACEPARENT})
    pipeline.drain()

    lines = lines_of(log_lines, job["job_id"])
    messages = [line["message"] for line in lines]
    assert "job started" in messages and "job failed; retrying" in messages and "job succeeded" in messages
    assert {line.get("trace_id") for line in lines} == {TRACE}
    started = next(line for line in lines if line["message"] == "job started")
    assert started["messaging.system"] == "aws_sqs"
    assert started["messaging.operation.type"] == "process"
    assert started["span_name"] == "process default"


def test_a_job_submitted_without_a_traceparent_has_a_trace_of_its_own(pipeline: Pipeline) -> None:
    _, first, _ = pipeline.submit("demo.echo", {"n": 1})
    _, second, _ = pipeline.submit("demo.echo", {"n": 2})

    assert len(first["trace_id"]) == 32 and set(first["trace_id"]) <= set("0123456789abcdef")
    assert first["trace_id"] != second["trace_id"]


@pytest.mark.parametrize("header", [f"00-{TRACE.upper()}-00f067aa0ba902b7-01", "00-0-0-0", f"ff-{TRACE}-1-01"])
def test_an_invalid_traceparent_is_ignored_not_refused(pipeline: Pipeline, header: str) -> None:
    code, job, _ = pipeline.submit("demo.echo", {"n": 1}, headers={"traceparent": header})

    assert code == 202
    assert job["trace_id"] not in (TRACE, TRACE.upper())
    assert len(job["trace_id"]) == 32


def test_the_worker_continues_the_trace_its_message_carries(pipeline: Pipeline, log_lines: io.StringIO) -> None:
    """The job's item without its trace (as a release before wrote it): the message's attribute still names it."""
    _, job, _ = pipeline.submit("demo.echo", {"n": 1}, headers={"traceparent": TRACEPARENT})
    dynamodb = pipeline.clients["dynamodb"]
    table = pipeline.resources.table_name
    (item,) = [i for i in dynamodb.scan(TableName=table)["Items"] if i.get("trace_id", {}).get("S") == TRACE]
    dynamodb.update_item(TableName=table, Key={"pk": item["pk"], "sk": item["sk"]}, UpdateExpression="REMOVE trace_id")
    assert pipeline.call("GET", f"/jobs/{job['job_id']}")[1]["trace_id"] is None

    pipeline.drain()

    lines = lines_of(log_lines, job["job_id"])
    assert "job succeeded" in [line["message"] for line in lines]
    assert {line.get("trace_id") for line in lines} == {TRACE}


def test_the_workers_lines_use_powertools_keys_and_name_the_job(
    pipeline: Pipeline, log_lines: io.StringIO, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("_X_AMZN_TRACE_ID", "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1")
    _, job, _ = pipeline.submit("demo.echo", {"n": 1}, headers={"traceparent": TRACEPARENT})
    pipeline.drain()

    started = next(line for line in lines_of(log_lines, job["job_id"]) if line["message"] == "job started")

    assert {"level", "location", "message", "timestamp", "service", "cold_start", "function_request_id"} <= set(started)
    assert (started["level"], started["service"]) == ("INFO", "worker")
    assert isinstance(started["cold_start"], bool)
    assert started["location"].startswith("_run_claimed:")
    assert len(started["function_request_id"]) == 36
    assert started["xray_trace_id"] == "1-5759e988-bd862e3fe1be46a994272793"
    assert (started["job_id"], started["tenant"], started["attempt"], started["trace_id"]) == (
        job["job_id"],
        "tenant-a",
        1,
        TRACE,
    )
