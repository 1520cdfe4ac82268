"""The runtime's own aggregation of the functions' EMF metric lines, and `GET /metrics` over it.

On AWS, CloudWatch extracts metrics from the EMF lines the functions print. Here the runtime reads the
same lines from the functions' output (`Output.on_metrics`) and keeps:
- Prometheus counters and histograms, labelled `queue` and `job_type` only (never a tenant or a job id);
- per-minute counts and samples of the last hour, per queue and job type (`LocalMetrics.minutes`), the
  local source of the per-minute statistics the console charts.

The queue gauges are read when scraped, from the emulator's queues (`QueuePeek`: no receive, no side
effect), so `/metrics` shows the depths `GET /queues` shows.
"""

from __future__ import annotations

import math
import threading
import time
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from prometheus_client import CollectorRegistry, Counter, Histogram, disable_created_metrics, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST

# EMF metric name -> what it counts here.
SUBMITTED, SUCCEEDED, FAILED, RETRIED, DEAD_LETTERED, EXPIRED = (
    "JobsSubmitted",
    "JobsSucceeded",
    "JobsFailed",
    "JobsRetried",
    "JobsDeadLettered",
    "JobsExpired",
)
DURATION, QUEUE_WAIT = "JobDuration", "QueueDelay"
COUNTED = (SUBMITTED, SUCCEEDED, FAILED, RETRIED, DEAD_LETTERED, EXPIRED)
OUTCOMES = {SUCCEEDED: "succeeded", FAILED: "failed", EXPIRED: "expired"}
LABELS = ("queue", "job_type")
# Seconds: from a 5 ms echo to a 15-minute (Lambda's longest) run.
DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900)
WAIT_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600)
KEEP_MINUTES = 60
# Per minute, queue and job type: enough samples for a p95 of a busy minute, bounded memory.
MAX_SAMPLES = 5000
METRICS_PATH = "/metrics"


class Depths(Protocol):
    """What `emulator.QueuePeek` answers: per queue name, visible/in_flight/delayed/oldest_age_s."""

    def depths(self, queue_urls: Iterable[str]) -> Mapping[str, Any]: ...


@dataclass
class _Minute:
    counts: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    samples: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))


@dataclass(frozen=True)
class MinuteStats:
    """One minute of one queue and job type (seconds for the percentiles; None without samples)."""

    minute: int  # epoch seconds at the start of the minute
    queue: str
    job_type: str
    submitted: int
    succeeded: int
    failed: int
    retried: int
    dead_lettered: int
    expired: int
    duration_p50_s: float | None
    duration_p95_s: float | None
    queue_wait_p50_s: float | None
    queue_wait_p95_s: float | None


# A scrape shows counts, not each series' creation time: `_created` series double what a scrape returns and
# nothing here reads them. The switch is process-wide; the runtime is the only user of prometheus_client.
disable_created_metrics()


class LocalMetrics:
    def __init__(self, clock: Any = time.time) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._minutes: dict[tuple[int, str, str], _Minute] = {}
        self.registry = CollectorRegistry(auto_describe=True)
        self._submitted = Counter("offpath_jobs_submitted", "Jobs accepted by the API", LABELS, registry=self.registry)
        self._finished = Counter(
            "offpath_jobs_finished", "Jobs that reached a final outcome", (*LABELS, "outcome"), registry=self.registry
        )
        self._retries = Counter(
            "offpath_job_retries", "Failed attempts given another try", LABELS, registry=self.registry
        )
        self._dead = Counter(
            "offpath_jobs_dead_lettered", "Jobs whose message went to the DLQ", LABELS, registry=self.registry
        )
        self._duration = Histogram(
            "offpath_job_run_duration_seconds",
            "Run time of one attempt",
            LABELS,
            buckets=DURATION_BUCKETS,
            registry=self.registry,
        )
        self._wait = Histogram(
            "offpath_job_queue_wait_seconds",
            "From submission (or run_at) to the first attempt's start",
            LABELS,
            buckets=WAIT_BUCKETS,
            registry=self.registry,
        )
        self._queues = _QueueGauges()
        self.registry.register(self._queues)

    # -- input --------------------------------------------------------------------------------

    def watch(self, peek: Depths, queue_urls: Mapping[str, str], dlq_urls: Mapping[str, str]) -> None:
        """The queues (per queue class) whose depths the gauges report."""
        self._queues.peek = peek
        self._queues.queue_urls = dict(queue_urls)
        self._queues.dlq_urls = dict(dlq_urls)

    def record(self, document: Mapping[str, Any]) -> None:
        """One EMF document (observability.EmfMetrics): its metrics for its queue and job type."""
        try:
            directives = document["_aws"]["CloudWatchMetrics"]
            names = [m["Name"] for d in directives for m in d["Metrics"]]
        except (KeyError, TypeError):
            return
        queue, job_type = str(document.get("queue", "")), str(document.get("job_type", ""))
        stamp = document["_aws"].get("Timestamp")
        at = stamp / 1000 if isinstance(stamp, int | float) else self._clock()
        minute = int(at // 60 * 60)
        with self._lock:
            bucket = self._minutes.get((minute, queue, job_type))
            if bucket is None:
                bucket = self._minutes[(minute, queue, job_type)] = _Minute()
                self._forget_before(minute - KEEP_MINUTES * 60)
            for name in names:
                value = document.get(name)
                if name in COUNTED and isinstance(value, int | float) and value > 0:
                    bucket.counts[name] += value
                    self._count(name, float(value), queue, job_type)
                elif name in (DURATION, QUEUE_WAIT):
                    values = value if isinstance(value, list) else [value]
                    seconds = [v / 1000 for v in values if isinstance(v, int | float) and math.isfinite(v)]
                    histogram = self._duration if name == DURATION else self._wait
                    for s in seconds:
                        histogram.labels(queue, job_type).observe(s)
                    kept = bucket.samples[name]
                    kept.extend(seconds[: max(0, MAX_SAMPLES - len(kept))])

    def _count(self, name: str, value: float, queue: str, job_type: str) -> None:
        if name == SUBMITTED:
            self._submitted.labels(queue, job_type).inc(value)
        elif name in OUTCOMES:
            self._finished.labels(queue, job_type, OUTCOMES[name]).inc(value)
        elif name == RETRIED:
            self._retries.labels(queue, job_type).inc(value)
        elif name == DEAD_LETTERED:
            self._dead.labels(queue, job_type).inc(value)

    def _forget_before(self, cutoff: int) -> None:
        for key in [k for k in self._minutes if k[0] < cutoff]:
            del self._minutes[key]

    # -- output -------------------------------------------------------------------------------

    def minutes(self, window: int = KEEP_MINUTES) -> list[MinuteStats]:
        """The last `window` minutes that saw any metric, oldest first."""
        cutoff = int(self._clock() // 60 * 60) - (window - 1) * 60
        with self._lock:
            items = sorted((k, v) for k, v in self._minutes.items() if k[0] >= cutoff)
            return [_minute_stats(minute, queue, job_type, bucket) for (minute, queue, job_type), bucket in items]

    def exposition(self) -> tuple[bytes, str]:
        """The Prometheus text format and its content type."""
        return generate_latest(self.registry), CONTENT_TYPE_LATEST


def _minute_stats(minute: int, queue: str, job_type: str, bucket: _Minute) -> MinuteStats:
    duration_p50, duration_p95 = _percentiles(bucket.samples.get(DURATION, []))
    wait_p50, wait_p95 = _percentiles(bucket.samples.get(QUEUE_WAIT, []))
    counts = {name: int(bucket.counts.get(name, 0)) for name in COUNTED}
    return MinuteStats(
        minute=minute,
        queue=queue,
        job_type=job_type,
        submitted=counts[SUBMITTED],
        succeeded=counts[SUCCEEDED],
        failed=counts[FAILED],
        retried=counts[RETRIED],
        dead_lettered=counts[DEAD_LETTERED],
        expired=counts[EXPIRED],
        duration_p50_s=duration_p50,
        duration_p95_s=duration_p95,
        queue_wait_p50_s=wait_p50,
        queue_wait_p95_s=wait_p95,
    )


def _percentiles(samples: list[float]) -> tuple[float | None, float | None]:
    if not samples:
        return None, None
    ordered = sorted(samples)
    return _rank(ordered, 0.50), _rank(ordered, 0.95)


def _rank(ordered: list[float], q: float) -> float:
    """Nearest rank: the smallest sample with at least q of the samples at or below it."""
    return round(ordered[max(0, math.ceil(q * len(ordered)) - 1)], 6)


class _QueueGauges:
    """Queue depths and ages, read at each scrape."""

    def __init__(self) -> None:
        self.peek: Depths | None = None
        self.queue_urls: dict[str, str] = {}
        self.dlq_urls: dict[str, str] = {}

    def describe(self) -> list[Metric]:
        return list(self._families({}, {}))

    def collect(self) -> Iterator[Metric]:
        if self.peek is None:
            yield from self._families({}, {})
            return
        depths = self.peek.depths([*self.queue_urls.values(), *self.dlq_urls.values()])
        yield from self._families(depths, self._names())

    def _names(self) -> dict[str, str]:
        """Queue name -> queue class, for the main queues and the DLQs."""
        names = {url.rstrip("/").rsplit("/", 1)[-1]: c for c, url in self.queue_urls.items()}
        names.update({url.rstrip("/").rsplit("/", 1)[-1]: c for c, url in self.dlq_urls.items()})
        return names

    def _families(self, depths: Mapping[str, Any], classes: dict[str, str]) -> Iterator[Metric]:
        messages = GaugeMetricFamily(
            "offpath_queue_messages", "Messages in a queue class's queue, by state", labels=["queue", "state"]
        )
        age = GaugeMetricFamily(
            "offpath_queue_oldest_message_age_seconds", "Age of the oldest message in the queue", labels=["queue"]
        )
        dlq = GaugeMetricFamily("offpath_dlq_messages", "Messages in the queue class's DLQ", labels=["queue"])
        dlq_names = {url.rstrip("/").rsplit("/", 1)[-1] for url in self.dlq_urls.values()}
        for name, depth in sorted(depths.items()):
            queue_class = classes.get(name)
            if queue_class is None:
                continue
            if name in dlq_names:
                dlq.add_metric([queue_class], depth.visible + depth.in_flight + depth.delayed)
                continue
            messages.add_metric([queue_class, "visible"], depth.visible)
            messages.add_metric([queue_class, "in_flight"], depth.in_flight)
            messages.add_metric([queue_class, "delayed"], depth.delayed)
            # An empty queue has no oldest message: 0, as CloudWatch's ApproximateAgeOfOldestMessage reads then.
            age.add_metric([queue_class], depth.oldest_age_s or 0.0)
        yield from (messages, age, dlq)
