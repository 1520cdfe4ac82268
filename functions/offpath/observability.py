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
_trace_id: contextvars.ContextVar[str | None] = contextvars.ContextVar("offpath_trace_id", default=None)
_tenant: contextvars.ContextVar[str | None] = contextvars.ContextVar("offpath_tenant", default=None)
_attempt: contextvars.ContextVar[int | None] = contextvars.ContextVar("offpath_attempt", default=None)
# The Lambda invocation a line belongs to: Powertools Logger's `cold_start`, `function_request_id`, `xray_trace_id`.
_invocation: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar("offpath_invocation", default=None)
_invocations = 0

# The SQS message attribute that carries a job's trace (W3C Trace Context, as OpenTelemetry's SQS propagation does).
TRACEPARENT_ATTRIBUTE = "traceparent"
_HEX = frozenset("0123456789abcdef")

_STANDARD_ATTRIBUTES = frozenset(vars(logging.makeLogRecord({})).keys()) | {"message", "asctime"}


@contextlib.contextmanager
def bound_job_id(job_id: str, trace_id: str | None = None, tenant: str | None = None) -> Iterator[None]:
    """Every log line written inside names the job (`job_id`) and, when known, its trace (`trace_id`) and
    tenant (`tenant`)."""
    token = _job_id.set(job_id)
    trace_token = _trace_id.set(trace_id)
    tenant_token = _tenant.set(tenant)
    attempt_token = _attempt.set(None)
    try:
        yield
    finally:
        _attempt.reset(attempt_token)
        _tenant.reset(tenant_token)
        _trace_id.reset(trace_token)
        _job_id.reset(token)


def bind_invocation(context: Any) -> None:
    """Names the Lambda invocation on every line it writes, by Powertools Logger's keys: `cold_start` (the
    first invocation of this execution environment), `function_request_id` (Lambda's request id) and
    `xray_trace_id` (the Root of `_X_AMZN_TRACE_ID`, when X-Ray traces the function)."""
    global _invocations
    _invocations += 1
    header = os.environ.get("_X_AMZN_TRACE_ID", "")
    root = next((part[5:] for part in header.split(";") if part.startswith("Root=")), None)
    _invocation.set(
        {
            "cold_start": _invocations == 1,
            "function_request_id": getattr(context, "aws_request_id", None),
            "xray_trace_id": root,
        }
    )


def bind_attempt(attempt: int) -> None:
    """Names the attempt of the job bound by `bound_job_id` once it is claimed (reset when that block ends)."""
    _attempt.set(attempt)


def bind_trace_id(trace_id: str | None) -> None:
    """Names the trace of the job bound by `bound_job_id` once it is known (reset when that block ends)."""
    _trace_id.set(trace_id)


def current_trace_id() -> str | None:
    return _trace_id.get()


def trace_id_of(traceparent: str | None) -> str | None:
    """The trace id of a W3C `traceparent` (`00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>`), or None when
    there is none or it is invalid: lower-case hex only, no all-zero trace or parent id, version `ff` refused,
    version 00 exactly four fields (a later version may add fields after the flags). A receiver ignores an
    invalid header (W3C Trace Context, "Processing model")."""
    if not traceparent or len(traceparent) > 512:
        return None
    parts = traceparent.strip(" \t").split("-")
    if len(parts) < 4:
        return None
    version, trace_id, parent_id, flags = parts[:4]
    if not (_hex(version, 2) and version != "ff" and (version != "00" or len(parts) == 4)):
        return None
    if not (_hex(trace_id, 32) and _hex(parent_id, 16) and _hex(flags, 2)):
        return None
    if trace_id == "0" * 32 or parent_id == "0" * 16:
        return None
    return trace_id


def traceparent_of(trace_id: str, span_id: str) -> str:
    """A version-00 `traceparent` naming `span_id` as the parent, sampled."""
    return f"00-{trace_id}-{span_id}-01"


def _hex(text: str, length: int) -> bool:
    return len(text) == length and set(text) <= _HEX


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
            "location": f"{record.funcName}:{record.lineno}",
            "message": record.getMessage(),
        }
        invocation = _invocation.get()
        if invocation:
            line.update((key, value) for key, value in invocation.items() if value is not None)
        job_id = getattr(record, "job_id", None) or _job_id.get()
        if job_id:
            line["job_id"] = job_id
            tenant, attempt = _tenant.get(), _attempt.get()
            if tenant:
                line["tenant"] = tenant
            if attempt is not None:
                line["attempt"] = attempt
        request_id = _request_id.get()
        if request_id:
            line["request_id"] = request_id
        trace_id = _trace_id.get()
        if trace_id and job_id:
            line["trace_id"] = trace_id
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
