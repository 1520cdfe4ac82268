"""What offpath costs to run on AWS, per million jobs and per month, from measured counts.

The counts come from `docs/measured_calls.json`, written by `make bench-calls` (scripts/bench_calls.py): per
scenario, the calls each function made, Lambda and Scheduler invocations, the messages the SQS event source
mapping delivered and deleted, every DynamoDB write and read with its item sizes, the bytes written to
CloudWatch Logs and the handlers' CPU time. This module prices them with us-east-1 list prices (`PRICES`,
each with the page it was read from and the date) and the assumptions in `Assumptions`, for a configuration
(`Config`: volumes, memory, batch size, payload size, capacity mode, log level, API type, tracing).

`offpath cost` prints an estimate for a user's own volumes; `markdown` renders the model's section of
docs/benchmarks.md (prices, breakdown, knob table, Step Functions and Temporal Cloud beside it).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, TextIO

from offpath_local.write_units import read_units_for, write_units_for

MEASURED_PATH = Path(__file__).resolve().parents[2] / "docs" / "measured_calls.json"
TARGET_PER_MILLION = 3.00
MILLION = 1_000_000
SECONDS_PER_MONTH = 365 / 12 * 86_400
DAYS_PER_MONTH = 365 / 12
# Lambda allocates CPU in proportion to memory: 1,769 MB is one full vCPU (AWS Lambda Developer Guide).
FULL_VCPU_MB = 1769
# The api writes a batch's items this many at a time (offpath.logic.submit.BATCH_WRITERS).
BATCH_WRITERS = 8
SCENARIOS = ("plain", "dedup", "retried", "scheduled", "delayed", "batch")
PRICES_TAKEN = "2026-11-29"


# -- prices -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Price:
    item: str
    value: float  # dollars per unit
    shown: str  # as the price page gives it
    source: str  # the page it was read from
    note: str = ""


PRICES: dict[str, Price] = {
    p.item: p
    for p in (
        Price("lambda_request", 0.20 / MILLION, "$0.20 per 1M requests", "AWS Lambda pricing"),
        Price(
            "lambda_gb_second_arm64",
            0.0000133334,
            "$0.0000133334 per GB-second (arm64)",
            "AWS Lambda pricing",
            "first 7.5 billion GB-s a month; figures read through a secondary summary of the page",
        ),
        Price(
            "http_api_request",
            1.00 / MILLION,
            "$1.00 per 1M requests",
            "Amazon API Gateway pricing",
            "HTTP API, first 300M a month, metered in 512 KB units; secondary sources agree",
        ),
        Price(
            "rest_api_request",
            3.50 / MILLION,
            "$3.50 per 1M requests",
            "Amazon API Gateway pricing",
            "REST API, first 333M a month; secondary sources agree",
        ),
        Price(
            "sqs_request",
            0.40 / MILLION,
            "$0.40 per 1M requests",
            "Amazon SQS pricing",
            "standard queues; each 64 KiB of a request counts as one request; secondary sources agree",
        ),
        Price(
            "dynamodb_wru",
            0.625 / MILLION,
            "$0.625 per 1M write request units",
            "Amazon DynamoDB pricing (on-demand)",
            "Standard table class, after the November 2024 reduction; confirmed from secondary sources only",
        ),
        Price(
            "dynamodb_rru",
            0.125 / MILLION,
            "$0.125 per 1M read request units",
            "Amazon DynamoDB pricing (on-demand)",
            "Standard table class; confirmed from secondary sources only",
        ),
        Price(
            "dynamodb_wcu_hour",
            0.00065,
            "$0.00065 per WCU-hour",
            "Amazon DynamoDB pricing (provisioned)",
            "confirmed from a secondary source only",
        ),
        Price(
            "dynamodb_rcu_hour",
            0.00013,
            "$0.00013 per RCU-hour",
            "Amazon DynamoDB pricing (provisioned)",
            "confirmed from a secondary source only",
        ),
        Price(
            "dynamodb_storage_gb_month",
            0.25,
            "$0.25 per GB-month",
            "Amazon DynamoDB pricing",
            "after 25 GB free",
        ),
        Price(
            "scheduler_invocation",
            1.00 / MILLION,
            "$1.00 per 1M invocations",
            "Amazon EventBridge pricing (Scheduler)",
            "after 14M free invocations a month; secondary sources",
        ),
        Price(
            "logs_ingestion_gb",
            0.50,
            "$0.50 per GB ingested",
            "Amazon CloudWatch pricing",
            "Standard log class; secondary sources agree",
        ),
        Price(
            "logs_storage_gb_month",
            0.03,
            "$0.03 per GB-month",
            "Amazon CloudWatch pricing",
            "billed on compressed bytes",
        ),
        Price(
            "custom_metric_month",
            0.30,
            "$0.30 per metric-month",
            "Amazon CloudWatch pricing",
            "first 10,000 metrics",
        ),
        Price(
            "metric_requested",
            0.01 / 1000,
            "$0.01 per 1,000 metrics requested",
            "Amazon CloudWatch pricing",
            "GetMetricData (GET /stats); ListMetrics is $0.01 per 1,000 requests",
        ),
        Price(
            "alarm_month",
            0.10,
            "$0.10 per alarm-month",
            "Amazon CloudWatch pricing",
            "standard resolution; not confirmed in this review",
        ),
        Price(
            "dashboard_month",
            3.00,
            "$3.00 per dashboard-month",
            "Amazon CloudWatch pricing",
            "beyond 3 free dashboards",
        ),
        Price(
            "xray_trace",
            5.00 / MILLION,
            "$5.00 per 1M traces recorded",
            "AWS X-Ray pricing",
            "after 100,000 free a month",
        ),
        Price(
            "step_functions_transition",
            25.0 / MILLION,
            "$0.025 per 1,000 state transitions",
            "AWS Step Functions pricing",
            "Standard workflows, US East (N. Virginia)",
        ),
        Price(
            "temporal_action",
            25.0 / MILLION,
            "$25 per 1M actions",
            "Temporal Cloud pricing (docs.temporal.io)",
            "base rate; volume credits and plan minimums not applied",
        ),
    )
}


def price(name: str) -> float:
    return PRICES[name].value


# -- assumptions ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Assumptions:
    """What is not measured. Each value is stated in the document next to the estimate."""

    # Time a function waits for one AWS call (us-east-1, same region, warm connections).
    latency_ms: Mapping[str, float] = field(
        default_factory=lambda: {"DynamoDB": 5.0, "SQS": 8.0, "Scheduler": 25.0, "CloudWatch": 10.0}
    )
    # The runtime's own work per invocation (event in, response out) plus Lambda's rounding to the next ms.
    invocation_overhead_ms: float = 1.5
    # How much slower one Lambda vCPU (Graviton2) runs the handlers than the core they were measured on.
    cpu_factor: float = 1.5
    # Share of invocations that start a new execution environment, and its init time on one full vCPU
    # (imports and clients; billed since Lambda bills the INIT phase).
    cold_start_share: float = 0.001
    init_ms_full_cpu: float = 350.0
    # Lambda's START, END and REPORT lines (with the X-Ray line of active tracing) per invocation.
    platform_log_bytes: int = 340
    # One line of the HTTP API's access log (the stack's JSON format, typical values).
    access_log_bytes: int = 300
    # The event source mapping's pollers long-poll an idle queue: about 5 pollers x 3 receives a minute.
    idle_receives_per_queue_month: float = 5 * 3 * 60 * 24 * DAYS_PER_MONTH
    # The sweeper, every minute: 4 index queries (eventually consistent), ~30 ms at 512 MB.
    sweeper_runs_per_month: float = 60 * 24 * DAYS_PER_MONTH
    sweeper_read_units: float = 4 * 0.5
    sweeper_ms: float = 30.0
    # X-Ray's default sampling for Lambda: the first request each second, then 5%.
    xray_reservoir_per_s: float = 1.0
    xray_rate: float = 0.05
    # DynamoDB storage: per-item overhead and the by_tenant entry of a job.
    item_overhead_bytes: int = 100
    index_entry_bytes: int = 250
    # Alarms the stack creates: 5 per queue class, plus API 5xx, Scheduler DLQ and async failures.
    alarms_per_queue_class: int = 5
    other_alarms: int = 3
    dashboards: int = 1


ASSUMPTIONS = Assumptions()


# -- configuration ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Config:
    """A deployment and its volumes. Memory defaults are the CDK stack's (infra/api.py, infra/workers.py,
    infra/schedules.py); the shares are fractions of `jobs_per_month`."""

    jobs_per_month: float = 1_000_000
    retried_share: float = 0.0  # jobs that fail once and succeed on their second attempt
    scheduled_share: float = 0.0  # jobs started by a recurring schedule instead of POST /jobs
    delayed_share: float = 0.0  # jobs submitted with run_at more than 15 minutes ahead
    batched_share: float = 0.0  # jobs submitted through POST /jobs/batch, 100 at a time
    deduplicated_share: float = 0.0  # replayed submits (same Idempotency-Key), as a fraction of jobs
    api_memory_mb: int = 512
    worker_memory_mb: int = 512
    enqueue_memory_mb: int = 512
    batch_size: int = 10  # messages per worker invocation
    payload_bytes: int | None = None  # the payload's JSON; None: as measured
    result_bytes: int | None = None  # the stored result's JSON; None: as measured
    capacity_mode: str = "on-demand"  # or "provisioned"
    utilisation: float = 0.7  # provisioned capacity's average use
    log_level: str = "INFO"  # or "WARNING"
    runtime_log_copy: bool = False  # True: the Lambda runtime's own handler also writes each record
    api_type: str = "http"  # or "rest"
    tracing: bool = False  # X-Ray active tracing on every function (the stack's `tracing` option, off)
    retention_days: int = 7  # finished jobs kept (TTL)
    log_retention_days: int = 30
    job_types: int = 1  # job types in use (EMF metrics per job type)
    queue_classes: int = 3  # queue classes deployed (alarms) ...
    queue_classes_in_use: int = 1  # ... and those with traffic (metrics, idle polling)

    def check(self) -> None:
        shares = {
            "retried_share": self.retried_share,
            "scheduled_share": self.scheduled_share,
            "delayed_share": self.delayed_share,
            "batched_share": self.batched_share,
            "deduplicated_share": self.deduplicated_share,
        }
        for name, value in shares.items():
            if not 0 <= value <= 1:
                raise ValueError(f"{name} must be between 0 and 1")
        if self.scheduled_share + self.delayed_share + self.batched_share > 1:
            raise ValueError("scheduled, delayed and batched shares add up to more than 1")
        if self.jobs_per_month <= 0:
            raise ValueError("jobs_per_month must be positive")
        if not 1 <= self.batch_size <= 10_000:
            raise ValueError("batch_size must be 1..10000")
        for name in ("api_memory_mb", "worker_memory_mb", "enqueue_memory_mb"):
            if not 128 <= getattr(self, name) <= 10_240:
                raise ValueError(f"{name} must be 128..10240")
        if self.capacity_mode not in ("on-demand", "provisioned"):
            raise ValueError("capacity_mode must be on-demand or provisioned")
        if not 0 < self.utilisation <= 1:
            raise ValueError("utilisation must be in (0, 1]")
        if self.log_level not in ("INFO", "WARNING"):
            raise ValueError("log_level must be INFO or WARNING")
        if self.api_type not in ("http", "rest"):
            raise ValueError("api_type must be http or rest")
        for name in ("payload_bytes", "result_bytes"):
            value = getattr(self, name)
            if value is not None and not 2 <= value <= 400_000:
                raise ValueError(f"{name} must be 2..400000")

    def memory(self, function: str) -> int:
        return {"api": self.api_memory_mb, "worker": self.worker_memory_mb}.get(function, self.enqueue_memory_mb)

    def with_memory(self, mb: int) -> Config:
        return replace(self, api_memory_mb=mb, worker_memory_mb=mb, enqueue_memory_mb=mb)


# -- usage ------------------------------------------------------------------------------------


Usage = dict[str, float]


def _add(total: Usage, part: Usage, weight: float) -> None:
    for key, value in part.items():
        total[key] = total.get(key, 0.0) + weight * value


def load_measured(path: Path | None = None) -> dict[str, Any]:
    where = path or MEASURED_PATH
    try:
        data: dict[str, Any] = json.loads(where.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FileNotFoundError(f"{where} not found: run `make bench-calls` or pass --measured") from None
    missing = [name for name in SCENARIOS if name not in data.get("scenarios", {})]
    if missing:
        raise ValueError(f"{where} lacks the scenarios {', '.join(missing)}: run `make bench-calls`")
    return data


def _resized(size: int, attributes: Mapping[str, int], config: Config) -> int:
    """An item's size with the configured payload and result in place of the measured ones."""
    if config.payload_bytes is not None and "payload_json" in attributes:
        size += config.payload_bytes - attributes["payload_json"]
    if config.result_bytes is not None and "result_json" in attributes:
        size += config.result_bytes - attributes["result_json"]
    return size


def _worker_emf_envelope(scenarios: Mapping[str, Any]) -> float:
    """Bytes of the worker's EMF lines per invocation (as against per job), from the single-job and the batch
    scenarios: a worker writes one EMF document per invocation; more jobs in it only lengthen its values."""
    points: list[tuple[float, float, float]] = []
    for name in ("plain", "batch"):
        s = scenarios[name]
        points.append(
            (float(s["invocations"].get("worker", 0)), float(s["esm"]["deliveries"]), _log(s, "worker", "emf"))
        )
    (i1, d1, e1), (i2, d2, e2) = points
    determinant = i1 * d2 - i2 * d1
    if not determinant:
        return 0.0
    return max(0.0, (e1 * d2 - e2 * d1) / determinant)


def _log(scenario: Mapping[str, Any], function: str, kind: str) -> float:
    return float(scenario["log_bytes"].get(function, {}).get(kind, 0))


def scenario_usage(
    scenario: Mapping[str, Any], config: Config, envelope: float, assumptions: Assumptions = ASSUMPTIONS
) -> Usage:
    """What one job of a scenario uses, under `config`."""
    jobs = scenario["jobs"]
    deliveries, acks = scenario["esm"]["deliveries"], scenario["esm"]["acks"]
    calls: Mapping[str, Mapping[str, int]] = scenario["calls"]
    invocations = {
        "api": float(scenario["invocations"].get("api", 0)),
        "enqueue": float(scenario["invocations"].get("enqueue", 0)),
        "worker": deliveries / config.batch_size,
    }
    usage: Usage = {"api_requests": invocations["api"]}

    # Lambda: requests and GB-seconds (CPU scaled to the memory's CPU share, plus the calls' waiting time).
    for function, count in invocations.items():
        if not count:
            continue
        memory = config.memory(function)
        cpu_scale = assumptions.cpu_factor * max(1.0, FULL_VCPU_MB / memory)
        cpu_ms = scenario["cpu_ms_median"].get(function, 0.0) * cpu_scale
        io_ms = 0.0
        made = calls.get(function, {})
        puts_per_call = made.get("DynamoDB.PutItem", 0) / max(1.0, count)
        parallel = min(BATCH_WRITERS, max(1.0, puts_per_call)) if function == "api" else 1.0
        for call, n in made.items():
            service = call.split(".", 1)[0]
            wait = assumptions.latency_ms.get(service, 0.0) * n
            io_ms += wait / parallel if call == "DynamoDB.PutItem" else wait
        overhead_ms = count * assumptions.invocation_overhead_ms
        init_ms = count * assumptions.cold_start_share * assumptions.init_ms_full_cpu * cpu_scale
        usage[f"lambda_requests:{function}"] = count
        usage[f"lambda_gb_s:{function}"] = (cpu_ms + io_ms + overhead_ms + init_ms) / 1000 * memory / 1024

    # SQS: the functions' requests, and the event source mapping's receives and deletes per batch.
    sqs = sum(n for made in calls.values() for call, n in made.items() if call.startswith("SQS."))
    usage["sqs_requests"] = sqs + deliveries / config.batch_size + acks / config.batch_size
    usage["scheduler_invocations"] = float(calls.get("scheduler", {}).get("Scheduler.Invocation", 0))

    # DynamoDB: every measured write and read, priced again with the configured payload and result sizes.
    wru = 0.0
    for w in scenario["dynamodb"]["writes"]:
        before = _resized(w["before_bytes"], w["before_attribute_bytes"], config) if w["before_bytes"] else 0
        after = _resized(w["after_bytes"], w["after_attribute_bytes"], config) if w["after_bytes"] else 0
        wru += write_units_for(before) if w["condition_failed"] else write_units_for(max(before, after))
        if not w["condition_failed"]:
            wru += sum(w["index_units"].values())  # index entries hold keys, status and type only
    rru = 0.0
    for r in scenario["dynamodb"]["reads"]:
        attributes = r.get("attribute_bytes") or [{} for _ in r["item_bytes"]]
        sizes = [
            _resized(size, attrs, config) if size else 0
            for size, attrs in zip(r["item_bytes"], attributes, strict=True)
        ]
        if r["operation"] in ("Query", "Scan"):
            rru += read_units_for(sum(sizes), consistent=r["consistent"])
        else:
            rru += sum(read_units_for(size, consistent=r["consistent"]) for size in sizes)
    usage["wru"], usage["rru"] = wru, rru

    # CloudWatch Logs: log lines at the level, the runtime's copy, EMF (the worker's per invocation), Lambda's
    # own lines and the API access log.
    level = "info" if config.log_level == "INFO" else "warning"
    log_bytes = 0.0
    for function in scenario["log_bytes"]:
        log_bytes += _log(scenario, function, f"json_{level}")
        if config.runtime_log_copy:
            log_bytes += _log(scenario, function, f"runtime_{level}")
        emf = _log(scenario, function, "emf")
        if function == "worker":
            measured_invocations = scenario["invocations"].get("worker", 0)
            emf = max(emf - envelope * measured_invocations, 0.0) + envelope * invocations["worker"]
        log_bytes += emf
    log_bytes += sum(invocations.values()) * assumptions.platform_log_bytes
    log_bytes += invocations["api"] * assumptions.access_log_bytes
    usage["log_bytes"] = log_bytes
    return {key: value / jobs for key, value in usage.items()}


def job_usage(measured: Mapping[str, Any], config: Config, assumptions: Assumptions = ASSUMPTIONS) -> Usage:
    """What one job uses on average, for the configured mix of scenarios. Without a configured payload size,
    every scenario's job carries the payload size the measurement used for its demo.echo jobs."""
    config.check()
    if config.payload_bytes is None and measured.get("payload_bytes"):
        config = replace(config, payload_bytes=int(measured["payload_bytes"]))
    scenarios = measured["scenarios"]
    envelope = _worker_emf_envelope(scenarios)
    per = {name: scenario_usage(scenarios[name], config, envelope, assumptions) for name in SCENARIOS}
    plain_share = 1 - config.scheduled_share - config.delayed_share - config.batched_share
    total: Usage = {}
    _add(total, per["plain"], plain_share)
    _add(total, per["scheduled"], config.scheduled_share)
    _add(total, per["delayed"], config.delayed_share)
    _add(total, per["batch"], config.batched_share)
    _add(total, per["retried"], config.retried_share)  # a retried job instead of a plain one
    _add(total, per["plain"], -config.retried_share)
    _add(total, per["dedup"], config.deduplicated_share)

    # X-Ray: one trace per sampled invocation (an upper bound: a worker invocation may join the api's trace).
    traces = 0.0
    for function in ("api", "worker", "enqueue"):
        per_job = total.get(f"lambda_requests:{function}", 0.0)
        rate = per_job * config.jobs_per_month / SECONDS_PER_MONTH
        traces += per_job * sampled_share(rate, assumptions)
    total["traces"] = traces if config.tracing else 0.0

    # Storage: a finished job's item and index entry, kept for the retention period.
    plain_writes = [w for w in scenarios["plain"]["dynamodb"]["writes"] if w["item"] == "JOB"]
    stored = 1000
    if plain_writes:
        stored = _resized(plain_writes[-1]["after_bytes"], plain_writes[-1]["after_attribute_bytes"], config)
    stored += assumptions.item_overhead_bytes + assumptions.index_entry_bytes
    total["storage_gb_months"] = stored / 1e9 * (config.retention_days / DAYS_PER_MONTH)
    return total


def sampled_share(rate_per_s: float, assumptions: Assumptions = ASSUMPTIONS) -> float:
    """The share of a function's invocations X-Ray records at `rate_per_s` (spread evenly over the month)."""
    if rate_per_s <= 0:
        return 1.0
    kept = min(rate_per_s, assumptions.xray_reservoir_per_s)
    kept += assumptions.xray_rate * max(0.0, rate_per_s - assumptions.xray_reservoir_per_s)
    return kept / rate_per_s


# -- costs ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Estimate:
    config: Config
    usage: Usage
    per_job: dict[str, float]  # service -> dollars per job
    fixed_monthly: dict[str, float]  # item -> dollars per month, whatever the volume

    @property
    def per_million(self) -> float:
        return sum(self.per_job.values()) * MILLION

    @property
    def variable_monthly(self) -> float:
        return sum(self.per_job.values()) * self.config.jobs_per_month

    @property
    def monthly(self) -> float:
        return self.variable_monthly + sum(self.fixed_monthly.values())


def dynamodb_unit_prices(config: Config) -> tuple[float, float]:
    """Dollars per write unit and per read unit: on demand, or provisioned capacity used at `utilisation`."""
    if config.capacity_mode == "provisioned":
        return (
            price("dynamodb_wcu_hour") / (3600 * config.utilisation),
            price("dynamodb_rcu_hour") / (3600 * config.utilisation),
        )
    return price("dynamodb_wru"), price("dynamodb_rru")


def estimate(measured: Mapping[str, Any], config: Config, assumptions: Assumptions = ASSUMPTIONS) -> Estimate:
    usage = job_usage(measured, config, assumptions)
    wru_price, rru_price = dynamodb_unit_prices(config)
    lambda_requests = sum(v for k, v in usage.items() if k.startswith("lambda_requests:"))
    gb_seconds = sum(v for k, v in usage.items() if k.startswith("lambda_gb_s:"))
    api_price = price("http_api_request") if config.api_type == "http" else price("rest_api_request")
    log_gb = usage["log_bytes"] / 1e9
    per_job = {
        "API Gateway": usage["api_requests"] * api_price,
        "Lambda": lambda_requests * price("lambda_request") + gb_seconds * price("lambda_gb_second_arm64"),
        "SQS": usage["sqs_requests"] * price("sqs_request"),
        "DynamoDB": usage["wru"] * wru_price
        + usage["rru"] * rru_price
        + usage["storage_gb_months"] * price("dynamodb_storage_gb_month"),
        "EventBridge Scheduler": usage["scheduler_invocations"] * price("scheduler_invocation"),
        "CloudWatch Logs": log_gb * price("logs_ingestion_gb")
        + log_gb * (config.log_retention_days / DAYS_PER_MONTH) * price("logs_storage_gb_month"),
        "X-Ray": usage["traces"] * price("xray_trace"),
    }
    return Estimate(config, usage, per_job, fixed_monthly(measured, config, assumptions))


def fixed_monthly(
    measured: Mapping[str, Any], config: Config, assumptions: Assumptions = ASSUMPTIONS
) -> dict[str, float]:
    """What the deployment costs each month whatever its volume."""
    _, rru_price = dynamodb_unit_prices(config)
    runs = assumptions.sweeper_runs_per_month
    sweeper_gb_s = runs * (assumptions.sweeper_ms + assumptions.invocation_overhead_ms) / 1000 * 512 / 1024
    sweeper = (
        runs * price("lambda_request")
        + sweeper_gb_s * price("lambda_gb_second_arm64")
        + runs * price("scheduler_invocation")
        + runs * assumptions.sweeper_read_units * rru_price
        + runs * assumptions.platform_log_bytes / 1e9 * price("logs_ingestion_gb")
        + (runs * price("xray_trace") if config.tracing else 0.0)
    )
    names: set[str] = set()
    for name in SCENARIOS:
        names.update(measured["scenarios"][name].get("metric_names", []))
    used = {"JobsSubmitted", "JobsStarted", "JobsSucceeded", "JobDuration", "QueueDelay"}
    shares = {
        "JobsRetried": config.retried_share,
        "JobsDeduplicated": config.deduplicated_share,
        "ScheduleFirings": config.scheduled_share,
        "DelayedJobsEnqueued": config.delayed_share,
    }
    used |= {name for name, share in shares.items() if share > 0}
    metric_names = len(used & names) if names else len(used)
    # Each metric name is published per (queue, job type), per queue and once overall.
    metrics = metric_names * (config.job_types + config.queue_classes_in_use + 1)
    alarms = config.queue_classes * assumptions.alarms_per_queue_class + assumptions.other_alarms
    return {
        "sweeper (every minute)": sweeper,
        "idle queue polling": config.queue_classes_in_use
        * assumptions.idle_receives_per_queue_month
        * price("sqs_request"),
        f"custom metrics ({metrics})": metrics * price("custom_metric_month"),
        f"alarms ({alarms})": alarms * price("alarm_month"),
        "dashboard": assumptions.dashboards * price("dashboard_month"),
    }


# -- the same work elsewhere ------------------------------------------------------------------


@dataclass(frozen=True)
class Alternative:
    name: str
    units_per_job: float
    unit: str
    fees_per_million: float  # orchestration fees alone
    total_per_million: float  # with what the same work still needs around them
    note: str


def alternatives(
    measured: Mapping[str, Any], config: Config, assumptions: Assumptions = ASSUMPTIONS
) -> list[Alternative]:
    """Step Functions Standard and Temporal Cloud doing the same jobs.

    Step Functions: a minimal equivalent state machine is Start -> Task (invoke the job's Lambda function, with
    a Retry policy) -> Succeed: 2 state transitions a job, +1 per retry (each retry is a transition), +1 for a
    Wait state for a delayed job. The execution name is the idempotency key and the execution is the status
    record, so no table and no queue are needed; the job function still runs in Lambda (one invocation per
    attempt), callers still come through API Gateway (StartExecution integration) and schedules through
    EventBridge Scheduler.
    Temporal Cloud: a workflow with one activity: workflow started (1 action) + activity started (1), +1 per
    activity retry, +1 for a schedule's firing, +1 for a durable timer for a delayed job. The workers that run
    the workflow and the activity are yours to host (not priced here), as is a plan's monthly minimum.
    """
    config.check()
    r, s, d = config.retried_share, config.scheduled_share, config.delayed_share
    transitions = 2 + r + d
    actions = 2 + r + s + d
    plain = measured["scenarios"]["plain"]
    cpu_scale = assumptions.cpu_factor * max(1.0, FULL_VCPU_MB / config.worker_memory_mb)
    job_ms = plain["cpu_ms_median"].get("worker", 0.0) * cpu_scale + assumptions.invocation_overhead_ms
    attempts = 1 + r
    job_lambda = attempts * (
        price("lambda_request") + job_ms / 1000 * config.worker_memory_mb / 1024 * price("lambda_gb_second_arm64")
    )
    api_price = price("http_api_request") if config.api_type == "http" else price("rest_api_request")
    # StartExecution starts one execution: no batch submit; a replayed submit is still a request.
    api_requests = (1 - s) + config.deduplicated_share
    sfn_fees = transitions * price("step_functions_transition")
    sfn_total = sfn_fees + job_lambda + api_requests * api_price + s * price("scheduler_invocation")
    temporal_fees = actions * price("temporal_action")
    return [
        Alternative(
            "Step Functions Standard",
            transitions,
            "state transitions",
            sfn_fees * MILLION,
            sfn_total * MILLION,
            "+ API Gateway, the job's Lambda invocation, Scheduler for schedules",
        ),
        Alternative(
            "Temporal Cloud",
            actions,
            "actions",
            temporal_fees * MILLION,
            temporal_fees * MILLION,
            "+ the workers you host and a plan's monthly minimum (not priced)",
        ),
    ]


# -- knobs ------------------------------------------------------------------------------------


def knobs(base: Config) -> list[tuple[str, Config]]:
    """One change at a time from `base`, then the cheapest combination of the issue's knobs."""
    cheapest = replace(
        base,
        batched_share=1.0,
        capacity_mode="provisioned",
        utilisation=0.7,
        log_level="WARNING",
    )
    return [
        ("default", base),
        ("batch size 1 (low volume, no batching window)", replace(base, batch_size=1)),
        ("memory 256 MB (all functions)", base.with_memory(256)),
        ("memory 512 MB (all functions)", base.with_memory(512)),
        ("memory 1024 MB (all functions)", base.with_memory(1024)),
        ("DynamoDB provisioned, 70% used", replace(base, capacity_mode="provisioned", utilisation=0.7)),
        ("log level WARNING", replace(base, log_level="WARNING")),
        ("payload 1 KB", replace(base, payload_bytes=1024)),
        ("payload 64 KB", replace(base, payload_bytes=65_536)),
        ("REST API instead of HTTP API", replace(base, api_type="rest")),
        ("X-Ray tracing on (-c tracing=true)", replace(base, tracing=True)),
        ("10M jobs a month (X-Ray samples 5% above 1/s)", replace(base, jobs_per_month=10_000_000)),
        ("submitted in batches of 100", replace(base, batched_share=1.0)),
        (
            "mix: 5% retried, 5% scheduled, 5% replayed submits",
            replace(base, retried_share=0.05, scheduled_share=0.05, deduplicated_share=0.05),
        ),
        ("batches of 100 + provisioned 70% + WARNING", cheapest),
        ("the same, with on-demand DynamoDB", replace(cheapest, capacity_mode="on-demand")),
    ]


# -- output -----------------------------------------------------------------------------------


def money(value: float) -> str:
    if value >= 100:
        return f"${value:,.0f}"
    if value >= 0.01 or value == 0:
        return f"${value:,.2f}"
    return f"${value:.4f}"


def describe(config: Config, measured_payload: int | None = None) -> str:
    memory = (
        f"api {config.api_memory_mb} MB, worker {config.worker_memory_mb} MB, enqueue {config.enqueue_memory_mb} MB"
    )
    capacity = f"provisioned at {config.utilisation:.0%} use" if config.capacity_mode == "provisioned" else "on-demand"
    if config.payload_bytes is not None:
        payload = f"{config.payload_bytes} B"
    else:
        payload = f"{measured_payload} B, as measured" if measured_payload else "as measured"
    return (
        f"{'HTTP' if config.api_type == 'http' else 'REST'} API; Lambda arm64, {memory}; batch size "
        f"{config.batch_size}; payload {payload}; DynamoDB {capacity}; logs at {config.log_level}; X-Ray "
        f"{'on' if config.tracing else 'off'}"
    )


# GET /stats asks, per (queue, job type) with metrics, 5 sums and 4 percentiles (adapters/cloudwatch.py),
# after 5 ListMetrics requests; the console asks it once a minute while its overview is open.
STATS_METRICS_PER_PAIR = 9
STATS_LIST_REQUESTS = 5
CONSOLE_HOURS_PER_MONTH = 8 * 22


def stats_call_cost(pairs: int) -> float:
    """One GET /stats on AWS: GetMetricData by the metric requested, ListMetrics by the request."""
    return pairs * STATS_METRICS_PER_PAIR * price("metric_requested") + STATS_LIST_REQUESTS * price("metric_requested")


def render_text(measured: Mapping[str, Any], config: Config, out: TextIO) -> None:
    result = estimate(measured, config)
    rate = config.jobs_per_month / SECONDS_PER_MONTH
    out.write(
        f"offpath cost: us-east-1 list prices taken {PRICES_TAKEN}; calls and units measured "
        f"{measured.get('generated', '?')} (docs/measured_calls.json)\n\n"
    )
    out.write(
        f"volume   {config.jobs_per_month:,.0f} jobs a month ({rate:.2f}/s); retried {config.retried_share:.0%}, "
        f"scheduled {config.scheduled_share:.0%}, delayed {config.delayed_share:.0%}, batched "
        f"{config.batched_share:.0%}, replayed submits {config.deduplicated_share:.0%}\n"
    )
    out.write(f"config   {describe(config, measured.get('payload_bytes'))}\n\n")
    rows = [
        [service, money(cost * MILLION), money(cost * config.jobs_per_month)]
        for service, cost in result.per_job.items()
    ]
    rows.append(["total per million jobs", money(result.per_million), money(result.variable_monthly)])
    _table(out, ["SERVICE", "PER MILLION JOBS", "PER MONTH"], rows)
    out.write("\n")
    fixed = [[item, money(cost)] for item, cost in result.fixed_monthly.items()]
    fixed.append(["total fixed", money(sum(result.fixed_monthly.values()))])
    _table(out, ["FIXED PER MONTH", "COST"], fixed)
    out.write(f"\ntotal per month: {money(result.monthly)}\n")
    call = stats_call_cost(config.job_types)
    hour = 60 * call
    out.write(
        f"GET /stats (the console's charts): {config.job_types * STATS_METRICS_PER_PAIR} metrics per call "
        f"(GetMetricData, {config.job_types} queue and job type pair(s)) = {money(call)} a call; the console asks "
        f"once a minute while its overview is open: {money(hour)} an hour, {money(hour * CONSOLE_HOURS_PER_MONTH)} "
        f"a month open {CONSOLE_HOURS_PER_MONTH} h\n"
    )
    verdict = "within" if result.per_million <= TARGET_PER_MILLION else "over"
    out.write(f"target {money(TARGET_PER_MILLION)} per million jobs: {verdict} ({money(result.per_million)})\n\n")
    others = [
        [a.name, f"{a.units_per_job:g} {a.unit}", money(a.fees_per_million), money(a.total_per_million), a.note]
        for a in alternatives(measured, config)
    ]
    _table(out, ["SAME WORK ON", "PER JOB", "FEES PER MILLION", "TOTAL PER MILLION", ""], others)


def _table(out: TextIO, header: list[str], rows: list[list[str]]) -> None:
    cells = [header, *rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    for row in cells:
        out.write("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() + "\n")


def markdown(measured: Mapping[str, Any], base: Config | None = None) -> str:
    """The cost model's part of docs/benchmarks.md."""
    base = base or Config()
    a = ASSUMPTIONS
    default = estimate(measured, base)
    lines = [
        "## What a million jobs cost",
        "",
        f"`offpath cost` (local/offpath_local/cost.py) prices the counts above. Prices are us-east-1 list prices "
        f"taken {PRICES_TAKEN}, without free tiers:",
        "",
        "| price | list price | page | note |",
        "|---|---|---|---|",
    ]
    for p in PRICES.values():
        lines.append(f"| `{p.item}` | {p.shown} | {p.source} | {p.note} |")
    lines += [
        "",
        "Measured (docs/measured_calls.json): the calls, invocations, messages, write and read units with every "
        "item's size, the log bytes of each function, the handlers' CPU time. Assumed (stated here, not measured):",
        "",
        f"- Lambda duration = the handlers' measured CPU time x {a.cpu_factor} (a Graviton2 vCPU against the "
        f"measuring machine's core) x {FULL_VCPU_MB} MB / memory (the CPU share below one vCPU) + the waits for "
        "AWS calls ("
        + ", ".join(f"{k} {v:g} ms" for k, v in a.latency_ms.items())
        + f"; a batch's writes {BATCH_WRITERS} at a time) + {a.invocation_overhead_ms:g} ms per invocation; "
        f"{a.cold_start_share:.1%} of invocations start cold ({a.init_ms_full_cpu:g} ms of init on a full vCPU, "
        "billed).",
        f"- Memory as the CDK stack sets it: api {base.api_memory_mb} MB, worker {base.worker_memory_mb} MB "
        f"(infra/workers.py), enqueue {base.enqueue_memory_mb} MB; arm64.",
        f"- Batch size: {base.batch_size} messages per worker invocation, that is full batches. A queue without a "
        "batching window (the `default` class) gets full batches only under load: at a million jobs a month spread "
        "evenly (0.4 jobs/s) a poll finds about one message, which the batch size 1 row prices.",
        "- Logs: the JSON lines at the level (on Lambda offpath's JSON handler replaces the runtime's own, so "
        "each record is written once), EMF lines, "
        f"{a.platform_log_bytes} bytes of START/END/REPORT per invocation and a {a.access_log_bytes}-byte API "
        f"access log line per request; stored {base.log_retention_days} days (billed on compressed bytes: an upper "
        "bound).",
        "- X-Ray (only with the stack's `tracing` option on; off by default): one trace per sampled invocation "
        "(an upper bound), "
        f"sampled by the default rule ({a.xray_reservoir_per_s:g} a second, then {a.xray_rate:.0%}) at the month's "
        "average rate, so below about 1 job a second every invocation is traced.",
        f"- DynamoDB storage: the finished item plus {a.item_overhead_bytes} bytes of overhead and its "
        f"`by_tenant` entry (~{a.index_entry_bytes} bytes), kept {base.retention_days} days.",
        "- Fixed each month whatever the volume: the sweeper (every minute), the event source mapping's long "
        "polls of an idle queue (~5 pollers x 3 receives a minute), EMF custom metrics (each name per queue and "
        "job type, per queue and overall), the stack's alarms and dashboard.",
        "- Not included: data transfer out of AWS, free tiers, KMS (the queues use SQS-managed keys, the table "
        "an AWS-owned key).",
        "",
        f"### The default configuration: {describe(base, measured.get('payload_bytes'))}",
        "",
        f"{base.jobs_per_month:,.0f} plain jobs a month (submit, run, succeed):",
        "",
        "| service | per million jobs | usage per job |",
        "|---|---|---|",
    ]
    u = default.usage
    usage_text = {
        "API Gateway": f"{u['api_requests']:.3g} request",
        "Lambda": ", ".join(
            f"{k.split(':')[1]} {u[k]:.3g}" for k in sorted(u) if k.startswith("lambda_requests:") and u[k]
        )
        + " invocations"
        + f"; {sum(v for k, v in u.items() if k.startswith('lambda_gb_s:')):.3g} GB-s",
        "SQS": f"{u['sqs_requests']:.3g} requests",
        "DynamoDB": f"{u['wru']:.3g} WRU, {u['rru']:.3g} RRU",
        "EventBridge Scheduler": f"{u['scheduler_invocations']:.3g} invocations",
        "CloudWatch Logs": f"{u['log_bytes']:,.0f} bytes",
        "X-Ray": f"{u['traces']:.3g} traces",
    }
    for service, cost in default.per_job.items():
        lines.append(f"| {service} | {money(cost * MILLION)} | {usage_text[service]} |")
    lines.append(f"| **total** | **{money(default.per_million)}** | |")
    fixed_total = sum(default.fixed_monthly.values())
    lines += [
        "",
        "Fixed per month: "
        + ", ".join(f"{item} {money(cost)}" for item, cost in default.fixed_monthly.items())
        + f": {money(fixed_total)}.",
        "",
    ]
    verdict = (
        f"**The default configuration does not meet the {money(TARGET_PER_MILLION)} target: "
        f"{money(default.per_million)} per million jobs.**"
        if default.per_million > TARGET_PER_MILLION
        else f"The default configuration meets the {money(TARGET_PER_MILLION)} target: {money(default.per_million)}."
    )
    lines += [
        verdict,
        "",
        "### How each knob moves it",
        "",
        "| change | per million jobs | against default |",
        "|---|---|---|",
    ]
    reaching = []
    for label, config in knobs(base):
        e = estimate(measured, config)
        delta = e.per_million - default.per_million
        sign = "+" if delta >= 0 else "-"
        lines.append(f"| {label} | {money(e.per_million)} | {sign}{money(abs(delta))} |")
        if e.per_million <= TARGET_PER_MILLION and label != "default":
            reaching.append(label)
    plain = measured["scenarios"]["plain"]["dynamodb"]
    index_units = plain["index_write_units"]
    wru_price = price("dynamodb_wru") * MILLION
    lines += [
        "",
        (
            "Reaching the target: " + "; ".join(f"*{r}*" for r in reaching) + "."
            if reaching
            else "No single knob in this table reaches the target."
        ),
        "",
        f"Beyond these knobs, the largest lines are design choices. Each write unit a job pays costs "
        f"${wru_price:.3f} per million jobs on demand; a plain job pays {plain['write_units']}: "
        f"{plain['table_write_units']} in the table (submit, claim, success) and "
        + ", ".join(f"{n} in `{name}`" for name, n in index_units.items())
        + " (`by_tenant` projects keys only, so it is written once, when the job is submitted; the sparse "
        "`sweep` index once when the job is submitted and once when it finishes). A scheduled job also "
        "rewrites its schedule's item of 20 firings (about 3 KB: 3 write units) and reads it twice. X-Ray active "
        "tracing, off by default, would record about one trace per invocation below one job a second: at "
        f"{money(price('xray_trace') * MILLION)} per million traces it would cost about as much as DynamoDB.",
        "",
        "### The same work on Step Functions Standard and Temporal Cloud",
        "",
        "| on | per job | fees per million jobs | with what it still needs, per million | |",
        "|---|---|---|---|---|",
    ]
    for alt in alternatives(measured, base):
        lines.append(
            f"| {alt.name} | {alt.units_per_job:g} {alt.unit} | {money(alt.fees_per_million)} | "
            f"{money(alt.total_per_million)} | {alt.note} |"
        )
    lines += [
        f"| offpath (default) | see above | - | {money(default.per_million)} | + {money(fixed_total)} a month fixed |",
        "",
        "Step Functions: the minimal equivalent state machine is Start -> Task (invoke the job's function, with a "
        "Retry policy) -> Succeed: 2 state transitions a job, +1 per retry, +1 for a Wait state of a delayed job. "
        "The execution name serves as the idempotency key and the execution as the status, so it needs no table "
        "and no queue. Temporal Cloud: a workflow with one activity: 2 actions (workflow started, activity "
        "started), +1 per retry, +1 per schedule firing, +1 per durable timer; its workers run on your own "
        "compute. `offpath cost` prints these for your volumes.",
    ]
    return "\n".join(lines) + "\n"


# -- the command ------------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    volume = parser.add_argument_group("volume")
    volume.add_argument("--jobs-per-month", type=float, default=Config.jobs_per_month, metavar="N")
    volume.add_argument("--retried-share", type=float, default=0.0, metavar="X", help="jobs retried once (0..1)")
    volume.add_argument("--scheduled-share", type=float, default=0.0, metavar="X", help="jobs fired by schedules")
    volume.add_argument("--delayed-share", type=float, default=0.0, metavar="X", help="jobs with run_at > 15 min")
    volume.add_argument("--batched-share", type=float, default=0.0, metavar="X", help="jobs sent 100 per batch")
    volume.add_argument(
        "--deduplicated-share", type=float, default=0.0, metavar="X", help="replayed submits per job (0..1)"
    )
    setup = parser.add_argument_group("configuration")
    setup.add_argument("--api-memory", type=int, default=Config.api_memory_mb, metavar="MB")
    setup.add_argument("--worker-memory", type=int, default=Config.worker_memory_mb, metavar="MB")
    setup.add_argument("--batch-size", type=int, default=Config.batch_size, help="messages per worker invocation")
    setup.add_argument("--payload-bytes", type=int, help="the payload's JSON size (default: as measured)")
    setup.add_argument("--result-bytes", type=int, help="the stored result's size (default: as measured)")
    setup.add_argument("--capacity", choices=["on-demand", "provisioned"], default="on-demand")
    setup.add_argument("--utilisation", type=float, default=Config.utilisation, help="provisioned capacity used")
    setup.add_argument("--log-level", choices=["INFO", "WARNING"], default="INFO")
    setup.add_argument("--api-type", choices=["http", "rest"], default="http")
    setup.add_argument("--tracing", action="store_true", help="X-Ray active tracing on (the stack's tracing option)")
    setup.add_argument("--job-types", type=int, default=Config.job_types, help="job types in use (metrics)")
    setup.add_argument("--measured", type=Path, metavar="FILE", help="measured counts (docs/measured_calls.json)")
    setup.add_argument("--json", action="store_true", help="print the estimate as JSON")


def config_from(args: argparse.Namespace) -> Config:
    return Config(
        jobs_per_month=args.jobs_per_month,
        retried_share=args.retried_share,
        scheduled_share=args.scheduled_share,
        delayed_share=args.delayed_share,
        batched_share=args.batched_share,
        deduplicated_share=args.deduplicated_share,
        api_memory_mb=args.api_memory,
        worker_memory_mb=args.worker_memory,
        batch_size=args.batch_size,
        payload_bytes=args.payload_bytes,
        result_bytes=args.result_bytes,
        capacity_mode=args.capacity,
        utilisation=args.utilisation,
        log_level=args.log_level,
        api_type=args.api_type,
        tracing=args.tracing,
        job_types=args.job_types,
    )


def run(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """`offpath cost`: 0 printed, 2 the inputs cannot be priced."""
    out = out or sys.stdout
    try:
        config = config_from(args)
        config.check()
        measured = load_measured(args.measured)
    except (ValueError, FileNotFoundError) as error:
        print(f"offpath cost: {error}", file=sys.stderr)
        return 2
    if args.json:
        result = estimate(measured, config)
        document = {
            "prices_taken": PRICES_TAKEN,
            "config": asdict(config),
            "per_million_jobs": {k: v * MILLION for k, v in result.per_job.items()},
            "total_per_million_jobs": result.per_million,
            "fixed_monthly": result.fixed_monthly,
            "total_monthly": result.monthly,
            "usage_per_job": result.usage,
            "alternatives": [asdict(a) for a in alternatives(measured, config)],
        }
        out.write(json.dumps(document, indent=2) + "\n")
        return 0
    render_text(measured, config, out)
    return 0


def knob_rows(measured: Mapping[str, Any], base: Config | None = None) -> Iterable[tuple[str, float]]:
    """(label, dollars per million jobs) for each row of the knob table."""
    for label, config in knobs(base or Config()):
        yield label, estimate(measured, config).per_million


__all__ = [
    "ASSUMPTIONS",
    "PRICES",
    "Assumptions",
    "Config",
    "Estimate",
    "add_arguments",
    "alternatives",
    "estimate",
    "knob_rows",
    "load_measured",
    "markdown",
    "run",
]
