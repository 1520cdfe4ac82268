"""Structured JSON logs (with the job id on every line) and CloudWatch EMF metrics.

Both are written to stdout, where Lambda sends them to CloudWatch Logs; CloudWatch extracts the
metrics from the EMF lines, so no PutMetricData call is ever made.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
import os
import sys
import time
from collections.abc import Iterator
from typing import Any, TextIO

NAMESPACE = "Offpath"

_job_id: contextvars.ContextVar[str | None] = contextvars.ContextVar("offpath_job_id", default=None)
_request_id: contextvars.ContextVar[str | None] = contextvars.ContextVar("offpath_request_id", default=None)

_STANDARD_ATTRIBUTES = frozenset(vars(logging.makeLogRecord({})).keys()) | {"message", "asctime"}


@contextlib.contextmanager
def bound_job_id(job_id: str) -> Iterator[None]:
    token = _job_id.set(job_id)
    try:
        yield
    finally:
        _job_id.reset(token)


def bind_request_id(request_id: str | None) -> None:
    _request_id.set(request_id)


class JsonFormatter(logging.Formatter):
    def __init__(self, service: str) -> None:
        super().__init__()
        self.service = service

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "level": record.levelname,
            "timestamp": self.formatTime(record, "%Y-%m-%dT%H:%M:%S") + f".{int(record.msecs):03d}Z",
            "service": self.service,
            "logger": record.name,
            "message": record.getMessage(),
        }
        job_id = getattr(record, "job_id", None) or _job_id.get()
        if job_id:
            line["job_id"] = job_id
        request_id = _request_id.get()
        if request_id:
            line["request_id"] = request_id
        for key, value in vars(record).items():
            if key not in _STANDARD_ATTRIBUTES and key not in line:
                line[key] = value
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str, ensure_ascii=True)


def configure_logging(service: str, level: str = "INFO", stream: TextIO | None = None) -> None:
    """Route every logger through one JSON handler on stdout (idempotent)."""
    formatter = JsonFormatter(service)
    formatter.converter = time.gmtime
    root = logging.getLogger()
    if os.environ.get("AWS_LAMBDA_FUNCTION_NAME"):
        # The Lambda runtime puts its own handler on the root logger; beside ours every line would
        # be written twice.
        for handler in list(root.handlers):
            if not getattr(handler, "offpath", False):
                root.removeHandler(handler)
    for handler in root.handlers:
        if getattr(handler, "offpath", False):
            handler.setFormatter(formatter)
            root.setLevel(level)
            return
    handler = logging.StreamHandler(stream or sys.stdout)
    handler.offpath = True  # type: ignore[attr-defined]
    handler.setFormatter(formatter)
    root.addHandler(handler)
    root.setLevel(level)


# The dimension sets every metric is published under. CloudWatch bills each distinct (name, dimension values)
# as one custom metric ($0.30 a month): per queue and overall the count is bounded by the queue classes; per
# (queue, job type) it grows with every job type added, so that set is opt-in (OFFPATH_METRICS_BY_JOB_TYPE,
# the stack's `metrics_by_job_type`). The job type is written in every line all the same, as a property that
# Logs Insights (and the local runtime's Prometheus endpoint) can group by at no metric cost.
DIMENSION_SETS = [["queue"], []]
DIMENSION_SETS_BY_JOB_TYPE = [["queue", "job_type"], ["queue"], []]


class EmfMetrics:
    """Buffers metrics and prints them as Embedded Metric Format lines, one per queue and job type."""

    def __init__(
        self, service: str, namespace: str = NAMESPACE, stream: TextIO | None = None, *, by_job_type: bool = False
    ) -> None:
        self.service = service
        self.namespace = namespace
        self.dimensions = DIMENSION_SETS_BY_JOB_TYPE if by_job_type else DIMENSION_SETS
        self._stream = stream
        self._buffer: dict[tuple[str, str], dict[str, tuple[str, list[float]]]] = {}

    def count(self, name: str, value: float = 1, *, queue: str, job_type: str) -> None:
        self._add(name, "Count", value, queue, job_type)

    def milliseconds(self, name: str, value: float, *, queue: str, job_type: str) -> None:
        self._add(name, "Milliseconds", value, queue, job_type)

    def _add(self, name: str, unit: str, value: float, queue: str, job_type: str) -> None:
        metrics = self._buffer.setdefault((queue, job_type), {})
        metrics.setdefault(name, (unit, []))[1].append(value)

    def flush(self) -> None:
        stream = self._stream or sys.stdout
        timestamp = int(time.time() * 1000)
        for (queue, job_type), metrics in self._buffer.items():
            document: dict[str, Any] = {
                "_aws": {
                    "Timestamp": timestamp,
                    "CloudWatchMetrics": [
                        {
                            "Namespace": self.namespace,
                            "Dimensions": self.dimensions,
                            "Metrics": [{"Name": name, "Unit": unit} for name, (unit, _) in metrics.items()],
                        }
                    ],
                },
                "service": self.service,
                "queue": queue,
                "job_type": job_type,
            }
            for name, (unit, values) in metrics.items():
                document[name] = values if unit == "Milliseconds" else sum(values)
            stream.write(json.dumps(document, separators=(",", ":")) + "\n")
        self._buffer.clear()
        stream.flush()
