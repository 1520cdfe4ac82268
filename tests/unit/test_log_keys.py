"""The functions' JSON log lines: Powertools Logger's keys, the first invocation marked as the cold start."""

from __future__ import annotations

import io
import json
import logging
from types import SimpleNamespace
from typing import Any

import pytest

from offpath import observability
from offpath.observability import JsonFormatter, bind_invocation, bound_job_id


@pytest.fixture(autouse=True)
def unbound_after() -> Any:
    """No line of a later test names this test's invocation."""
    yield
    observability._invocation.set(None)


def line_of(write: Any) -> dict[str, Any]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter("worker"))
    logger = logging.getLogger("offpath.test_log_keys")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        write(logger)
    finally:
        logger.removeHandler(handler)
    return dict(json.loads(stream.getvalue()))


def test_only_the_first_invocation_of_an_environment_is_its_cold_start(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(observability, "_invocations", 0)
    monkeypatch.delenv("_X_AMZN_TRACE_ID", raising=False)

    bind_invocation(SimpleNamespace(aws_request_id="req-1"))
    first = line_of(lambda log: log.info("one"))
    bind_invocation(SimpleNamespace(aws_request_id="req-2"))
    second = line_of(lambda log: log.info("two"))

    assert (first["cold_start"], first["function_request_id"]) == (True, "req-1")
    assert (second["cold_start"], second["function_request_id"]) == (False, "req-2")
    assert "xray_trace_id" not in second


def test_a_jobs_line_names_the_job_its_tenant_and_trace(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(observability, "_invocations", 1)
    bind_invocation(SimpleNamespace(aws_request_id="req-3"))

    def write(log: logging.Logger) -> None:
        with bound_job_id("j1", "4bf92f3577b34da6a3ce929d0e0e4736", "tenant-a"):
            observability.bind_attempt(2)
            log.warning("inside")

    line = line_of(write)

    assert set(line) >= {"level", "location", "message", "timestamp", "service", "cold_start", "function_request_id"}
    assert line["location"] == f"write:{write.__code__.co_firstlineno + 3}"
    assert (line["level"], line["message"], line["service"]) == ("WARNING", "inside", "worker")
    assert (line["job_id"], line["tenant"], line["attempt"], line["trace_id"]) == (
        "j1",
        "tenant-a",
        2,
        "4bf92f3577b34da6a3ce929d0e0e4736",
    )
