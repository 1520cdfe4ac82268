"""`GET /metrics` of the embedded runtime, the Grafana dashboard over it, and the console in the banner."""

from __future__ import annotations

import json
import re
import urllib.request
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.conftest import ROOT, TOKEN_A, Local, wait_for

DASHBOARD = ROOT / "docs" / "grafana" / "offpath-dashboard.json"
METRIC_NAME = re.compile(r"\boffpath_[a-z0-9_]+\b")


def scrape(local: Local) -> dict[str, list[tuple[dict[str, str], float]]]:
    """Sample name -> [(labels, value)], read without a token, as Prometheus scrapes."""
    with urllib.request.urlopen(local.url + "/metrics", timeout=10) as answer:
        assert answer.status == 200
        assert answer.headers["Content-Type"].startswith("text/plain")
        text = answer.read().decode()
    found: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found.setdefault(sample.name, []).append((dict(sample.labels), sample.value))
    return found


def value(found: dict[str, list[tuple[dict[str, str], float]]], name: str, **labels: str) -> float:
    return sum(v for sample_labels, v in found.get(name, []) if labels.items() <= sample_labels.items())


def run_jobs_of_every_outcome(local: Local) -> None:
    """A success, a retry then success, and a failure to the DLQ. A worker prints its metrics when its
    invocation ends, a moment after the job's final state is written."""
    ids = [
        local.submit("demo.echo", {"n": 1}).body["job_id"],
        local.submit("demo.flaky", {"fail_first": 1}).body["job_id"],
        local.submit("demo.poison", {"reason": "metrics"}).body["job_id"],
    ]
    for job_id in ids:
        local.wait_for_job(job_id, {"SUCCEEDED", "FAILED"}, timeout_s=30)


def test_metrics_count_jobs_by_queue_and_type_and_outcome(local: Local) -> None:
    before = scrape(local)
    run_jobs_of_every_outcome(local)

    def settled() -> dict[str, list[tuple[dict[str, str], float]]] | None:
        found = scrape(local)
        finished = [
            value(found, "offpath_jobs_finished_total", job_type=t)
            - value(before, "offpath_jobs_finished_total", job_type=t)
            for t in ("demo.flaky", "demo.poison")
        ]
        return found if min(finished) >= 1 else None

    after = wait_for(settled, timeout_s=10, interval_s=0.2)

    def grew(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert grew("offpath_jobs_submitted_total", job_type="demo.flaky", queue="default") == 1
    assert grew("offpath_jobs_finished_total", job_type="demo.flaky", outcome="succeeded") == 1
    assert grew("offpath_jobs_finished_total", job_type="demo.poison", outcome="failed") == 1
    assert grew("offpath_job_retries_total", job_type="demo.flaky") == 1
    assert grew("offpath_job_run_duration_seconds_count", job_type="demo.flaky") == 2
    assert grew("offpath_job_queue_wait_seconds_count", job_type="demo.poison") == 1
    assert value(after, "offpath_dlq_messages", queue="default") >= 1
    states = {labels["state"] for labels, _ in after["offpath_queue_messages"]}
    assert states == {"visible", "in_flight", "delayed"}
    assert "offpath_queue_oldest_message_age_seconds" in after


def test_metrics_never_label_a_tenant_or_a_job(local: Local) -> None:
    run_jobs_of_every_outcome(local)
    found = scrape(local)

    label_names = {name for samples in found.values() for labels, _ in samples for name in labels}
    assert label_names <= {"queue", "job_type", "outcome", "state", "le"}


def test_every_dashboard_query_names_a_metric_that_metrics_exposes(local: Local) -> None:
    run_jobs_of_every_outcome(local)

    def every_kind_seen() -> set[str] | None:
        names = set(scrape(local))
        return names if {"offpath_jobs_dead_lettered_total", "offpath_job_retries_total"} <= names else None

    exposed = wait_for(every_kind_seen, timeout_s=10, interval_s=0.2)
    dashboard = json.loads(DASHBOARD.read_text())
    queries = [target["expr"] for panel in dashboard["panels"] for target in panel.get("targets", [])]
    queries += [
        variable["query"]["query"] for variable in dashboard["templating"]["list"] if variable["type"] == "query"
    ]

    assert len(queries) >= 10
    for query in queries:
        names = set(METRIC_NAME.findall(query))
        assert names, f"a query without an offpath metric: {query}"
        assert names <= exposed, f"{query} names {sorted(names - exposed)}, which /metrics does not expose"


def test_the_banner_links_to_the_console_signed_in_and_to_metrics(local: Local) -> None:
    console = Path(local.log).read_text()

    assert f"{local.url}/console#token={TOKEN_A}" in console
    assert f"{local.url}/metrics" in console
