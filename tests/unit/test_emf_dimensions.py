"""EMF metrics per queue by default (custom metrics bounded by the queues), per job type only when asked for."""

from __future__ import annotations

import io
import json
from typing import Any

from offpath.handlers.composition import build_worker_ports
from offpath.observability import EmfMetrics
from offpath.settings import Settings


def documents(metrics: EmfMetrics, job_types: int) -> list[dict[str, Any]]:
    for n in range(job_types):
        metrics.count("JobsSucceeded", queue="default", job_type=f"type-{n}")
    metrics.flush()
    stream = metrics._stream
    assert isinstance(stream, io.StringIO)
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def published(docs: list[dict[str, Any]]) -> set[tuple[str, tuple[tuple[str, str], ...]]]:
    """The distinct custom metrics CloudWatch makes of the lines: (name, dimension values) per dimension set."""
    found = set()
    for doc in docs:
        for directive in doc["_aws"]["CloudWatchMetrics"]:
            for dimension_set in directive["Dimensions"]:
                for metric in directive["Metrics"]:
                    found.add((metric["Name"], tuple((d, doc[d]) for d in dimension_set)))
    return found


def test_by_default_more_job_types_make_no_more_custom_metrics_and_every_line_still_names_its_job_type() -> None:
    one = published(documents(EmfMetrics("worker-default", stream=io.StringIO()), 1))
    docs = documents(EmfMetrics("worker-default", stream=io.StringIO()), 50)
    assert published(docs) == one == {("JobsSucceeded", (("queue", "default"),)), ("JobsSucceeded", ())}
    assert {doc["job_type"] for doc in docs} == {f"type-{n}" for n in range(50)}


def test_per_job_type_metrics_are_opt_in_and_grow_with_the_job_types() -> None:
    docs = documents(EmfMetrics("worker-default", stream=io.StringIO(), by_job_type=True), 50)
    assert len(published(docs)) == 50 + 1 + 1


def test_the_setting_reaches_the_functions_metrics(monkeypatch: Any) -> None:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    base = {"table_name": "t", "queue_urls": {"default": "q"}, "dlq_urls": {"default": "d"}, "queue_class": "default"}
    default = build_worker_ports(Settings(**base)).metrics
    opted = build_worker_ports(Settings(**{**base, "metrics_by_job_type": "1"})).metrics
    assert isinstance(default, EmfMetrics) and isinstance(opted, EmfMetrics)
    assert default.dimensions == [["queue"], []]
    assert opted.dimensions == [["queue", "job_type"], ["queue"], []]
