"""The saved Logs Insights queries: one job's life, failures by job type, the slowest job types and one tenant's
activity, over the functions' log groups, naming only keys the functions write."""

from __future__ import annotations

import io
import json
import logging
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

from infra.log_queries import ALL_FUNCTIONS, QUERIES, WORKERS
from offpath import observability
from offpath.domain.job import Job, JobStatus
from offpath.logic.process import _attempt_facts
from tests.infra.stacks import Synthesized
from tests.infra.template_view import of_type


def written_keys() -> set[str]:
    """The keys of a worker's attempt-end line, written by the functions' own formatter and helpers."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(observability.JsonFormatter("worker"))
    logger = logging.getLogger("offpath.test_log_queries")
    logger.addHandler(handler)
    at = datetime(2026, 12, 2, 9, 0, tzinfo=UTC)
    job = Job(
        job_id="0" * 32, tenant="acme", type="demo.echo", queue="default", payload={}, payload_hash="h",
        status=JobStatus.RUNNING, created_at=at, updated_at=at, max_attempts=3, attempt=1, attempt_started_at=at,
    )  # fmt: skip
    try:
        observability.bind_invocation(SimpleNamespace(aws_request_id="req"))
        with observability.bound_job_id(job.job_id, "4bf92f3577b34da6a3ce929d0e0e4736", job.tenant):
            observability.bind_attempt(1)
            logger.error("job failed", extra={"error": "boom", **_attempt_facts(job, at + timedelta(seconds=2))})
    finally:
        logger.removeHandler(handler)
        observability._invocation.set(None)
    return set(json.loads(stream.getvalue()))


def test_four_saved_queries_name_only_keys_the_functions_write(default_stack: Synthesized) -> None:
    definitions = {
        d["Properties"]["Name"]: d["Properties"]
        for d in of_type(default_stack.json, "AWS::Logs::QueryDefinition").values()
    }
    keys = written_keys()

    assert sorted(definitions) == [
        "offpath/failures-by-job-type",
        "offpath/job-life",
        "offpath/slowest-job-types",
        "offpath/tenant-activity",
    ]
    for saved in QUERIES:
        text = definitions[f"offpath/{saved.name}"]["QueryString"]
        assert text == saved.query
        assert saved.keys <= keys, f"{saved.name} names keys no line has: {sorted(saved.keys - keys)}"
    assert 'filter job_id = "JOB_ID"' in definitions["offpath/job-life"]["QueryString"]
    assert 'filter tenant = "TENANT"' in definitions["offpath/tenant-activity"]["QueryString"]
    assert "by job_type" in definitions["offpath/failures-by-job-type"]["QueryString"]
    assert "pct(duration_ms, 95)" in definitions["offpath/slowest-job-types"]["QueryString"]


def test_the_queries_read_the_functions_log_groups(default_stack: Synthesized) -> None:
    stack = default_stack.stack
    resolved = {fn.function_name: stack.resolve(fn.log_group.log_group_name) for fn in stack.functions}
    workers = {fn.function_name for fn in stack.workers.workers.values()}
    definitions = {
        d["Properties"]["Name"]: d["Properties"]
        for d in of_type(default_stack.json, "AWS::Logs::QueryDefinition").values()
    }

    for saved in QUERIES:
        groups = definitions[f"offpath/{saved.name}"]["LogGroupNames"]
        over = workers if saved.log_groups == WORKERS else set(resolved)
        assert saved.log_groups in (WORKERS, ALL_FUNCTIONS)
        assert sorted(map(json.dumps, groups)) == sorted(json.dumps(resolved[name]) for name in over)
    assert len(definitions["offpath/job-life"]["LogGroupNames"]) == len(stack.functions)
