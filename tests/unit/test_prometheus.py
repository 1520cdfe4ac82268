"""/metrics: the runtime's aggregation of the functions' EMF lines, and the queue gauges read at each scrape."""

from __future__ import annotations

import io
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from offpath.observability import EmfMetrics
from offpath_local.output import Output
from offpath_local.prometheus import LocalMetrics

NOW = 1_796_000_000.0  # a minute boundary is irrelevant: minutes are floored


def emf_documents(write: Any) -> list[dict[str, Any]]:
    """What the functions print, through the real EmfMetrics: one document per queue and job type."""
    stream = io.StringIO()
    metrics = EmfMetrics("worker-default", stream=stream)
    write(metrics)
    metrics.flush()
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def samples(metrics: LocalMetrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    body, content_type = metrics.exposition()
    assert content_type.startswith("text/plain")
    found = {}
    for family in text_string_to_metric_families(body.decode()):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def labels(**values: str) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(values.items()))


def test_counts_and_outcomes_come_from_the_emf_lines() -> None:
    metrics = LocalMetrics(clock=lambda: NOW)

    def work(emf: EmfMetrics) -> None:
        emf.count("JobsSubmitted", 3, queue="default", job_type="demo.echo")
        emf.count("JobsSucceeded", queue="default", job_type="demo.echo")
        emf.count("JobsSucceeded", queue="default", job_type="demo.echo")
        emf.count("JobsRetried", queue="default", job_type="demo.flaky")
        emf.count("JobsFailed", queue="bulk", job_type="demo.poison")
        emf.count("JobsDeadLettered", queue="bulk", job_type="demo.poison")
        emf.count("StuckJobsFound", 0, queue="default", job_type="demo.echo")

    for document in emf_documents(work):
        metrics.record(document)

    found = samples(metrics)
    echo = labels(queue="default", job_type="demo.echo")
    assert found[("offpath_jobs_submitted_total", echo)] == 3
    assert (
        found[("offpath_jobs_finished_total", labels(queue="default", job_type="demo.echo", outcome="succeeded"))] == 2
    )
    assert found[("offpath_jobs_finished_total", labels(queue="bulk", job_type="demo.poison", outcome="failed"))] == 1
    assert found[("offpath_job_retries_total", labels(queue="default", job_type="demo.flaky"))] == 1
    assert found[("offpath_jobs_dead_lettered_total", labels(queue="bulk", job_type="demo.poison"))] == 1


def test_run_time_and_queue_wait_are_histograms_in_seconds() -> None:
    metrics = LocalMetrics(clock=lambda: NOW)

    def work(emf: EmfMetrics) -> None:
        for ms in (40, 60, 3000):
            emf.milliseconds("JobDuration", ms, queue="default", job_type="demo.sleep")
        emf.milliseconds("QueueDelay", 200, queue="default", job_type="demo.sleep")

    for document in emf_documents(work):
        metrics.record(document)

    found = samples(metrics)
    sleep = {"queue": "default", "job_type": "demo.sleep"}
    assert found[("offpath_job_run_duration_seconds_count", labels(**sleep))] == 3
    assert abs(found[("offpath_job_run_duration_seconds_sum", labels(**sleep))] - 3.1) < 1e-9
    assert found[("offpath_job_run_duration_seconds_bucket", labels(**sleep, le="0.05"))] == 1
    assert found[("offpath_job_run_duration_seconds_bucket", labels(**sleep, le="0.1"))] == 2
    assert found[("offpath_job_queue_wait_seconds_bucket", labels(**sleep, le="0.25"))] == 1


def test_no_label_names_a_tenant_or_a_job() -> None:
    metrics = LocalMetrics(clock=lambda: NOW)
    document = emf_documents(lambda emf: emf.count("JobsSubmitted", queue="default", job_type="demo.echo"))[0]
    metrics.record({**document, "tenant": "tenant-a", "job_id": "0" * 32})

    names = {name for (_, label_set) in samples(metrics) for name, _ in label_set}
    assert names <= {"queue", "job_type", "outcome", "le", "state"}


def record_minute(metrics: LocalMetrics, at: float, durations_ms: Iterable[int], succeeded: int) -> None:
    def work(emf: EmfMetrics) -> None:
        for ms in durations_ms:
            emf.milliseconds("JobDuration", ms, queue="default", job_type="demo.echo")
        emf.count("JobsSucceeded", succeeded, queue="default", job_type="demo.echo")

    for document in emf_documents(work):
        document["_aws"]["Timestamp"] = int(at * 1000)
        metrics.record(document)


def test_per_minute_statistics_count_and_take_percentiles() -> None:
    metrics = LocalMetrics(clock=lambda: NOW)
    record_minute(metrics, NOW, range(1, 101), succeeded=100)  # 1..100 ms

    [minute] = metrics.minutes()

    assert (minute.queue, minute.job_type, minute.succeeded, minute.failed) == ("default", "demo.echo", 100, 0)
    assert minute.minute == int(NOW // 60 * 60)
    assert (minute.duration_p50_s, minute.duration_p95_s) == (0.05, 0.095)
    assert minute.queue_wait_p50_s is None


def test_per_minute_statistics_keep_the_last_hour_only() -> None:
    clock = [NOW]
    metrics = LocalMetrics(clock=lambda: clock[0])
    record_minute(metrics, NOW, [10], succeeded=1)
    clock[0] += 61 * 60
    record_minute(metrics, clock[0], [500], succeeded=2)

    assert [(m.succeeded, m.duration_p50_s) for m in metrics.minutes()] == [(2, 0.5)]


@dataclass(frozen=True)
class Depth:
    visible: int
    in_flight: int
    delayed: int
    oldest_age_s: float | None


class FakePeek:
    def __init__(self, depths: dict[str, Depth]) -> None:
        self._depths = depths
        self.asked: list[list[str]] = []

    def depths(self, queue_urls: Iterable[str]) -> dict[str, Depth]:
        urls = list(queue_urls)
        self.asked.append(urls)
        return {url.rsplit("/", 1)[-1]: self._depths[url.rsplit("/", 1)[-1]] for url in urls}


def test_queue_gauges_are_read_at_each_scrape_per_queue_class() -> None:
    peek = FakePeek(
        {
            "offpath-default": Depth(4, 2, 1, 12.5),
            "offpath-default-dlq": Depth(3, 0, 0, 100.0),
        }
    )
    metrics = LocalMetrics(clock=lambda: NOW)
    metrics.watch(
        peek,
        {"default": "http://sqs/000/offpath-default"},
        {"default": "http://sqs/000/offpath-default-dlq"},
    )

    found = samples(metrics)
    assert found[("offpath_queue_messages", labels(queue="default", state="visible"))] == 4
    assert found[("offpath_queue_messages", labels(queue="default", state="in_flight"))] == 2
    assert found[("offpath_queue_messages", labels(queue="default", state="delayed"))] == 1
    assert found[("offpath_queue_oldest_message_age_seconds", labels(queue="default"))] == 12.5
    assert found[("offpath_dlq_messages", labels(queue="default"))] == 3
    samples(metrics)
    assert len(peek.asked) == 2, "every scrape reads the queues again"


def test_an_empty_queue_is_scraped_with_an_oldest_age_of_zero() -> None:
    peek = FakePeek({"offpath-default": Depth(0, 0, 0, None), "offpath-default-dlq": Depth(0, 0, 0, None)})
    metrics = LocalMetrics(clock=lambda: NOW)
    metrics.watch(
        peek, {"default": "http://sqs/000/offpath-default"}, {"default": "http://sqs/000/offpath-default-dlq"}
    )

    found = samples(metrics)
    assert found[("offpath_queue_oldest_message_age_seconds", labels(queue="default"))] == 0
    assert found[("offpath_queue_messages", labels(queue="default", state="visible"))] == 0


def test_the_runtimes_output_hands_each_emf_line_to_its_listeners(tmp_path: Path) -> None:
    output = Output(tmp_path)
    received: list[dict[str, Any]] = []
    output.on_metrics(received.append)
    output.install()
    try:
        metrics = EmfMetrics("api")  # writes to sys.stdout, as the functions' do
        metrics.count("JobsSubmitted", queue="default", job_type="demo.echo")
        metrics.flush()
        print("a job's own print is not a metric")
    finally:
        output.restore()

    assert [(d["queue"], d["job_type"], d["JobsSubmitted"]) for d in received] == [("default", "demo.echo", 1)]
    assert "JobsSubmitted" in (tmp_path / "offpath.log").read_text(), "the line still reaches the log"


def test_a_scrape_has_no_created_series() -> None:
    metrics = LocalMetrics(clock=lambda: NOW)

    def work(emf: EmfMetrics) -> None:
        emf.count("JobsSubmitted", queue="default", job_type="demo.echo")
        emf.count("JobsSucceeded", queue="default", job_type="demo.echo")

    for document in emf_documents(work):
        metrics.record(document)

    body, _ = metrics.exposition()
    text = body.decode()
    assert "offpath_jobs_submitted_total" in text
    assert "_created" not in text


def test_expired_jobs_are_a_finished_outcome_and_a_per_minute_count() -> None:
    metrics = LocalMetrics(clock=lambda: NOW)

    def work(emf: EmfMetrics) -> None:
        emf.count("JobsExpired", 2, queue="default", job_type="demo.echo")

    for document in emf_documents(work):
        metrics.record(document)

    found = samples(metrics)
    expired = labels(queue="default", job_type="demo.echo", outcome="expired")
    assert found[("offpath_jobs_finished_total", expired)] == 2
    assert [(m.job_type, m.expired, m.failed) for m in metrics.minutes()] == [("demo.echo", 2, 0)]
