"""What offpath costs to run on AWS, per million jobs and per month, from measured counts.

The counts come from `docs/measured_calls.json`, written by `make bench-calls` (scripts/bench_calls.py): per
scenario, the calls each function made, Lambda and Scheduler invocations, the messages the SQS event source
mapping delivered and deleted, every DynamoDB write and read with its item sizes, the bytes written to
CloudWatch Logs and the handlers' CPU time. This module prices them with us-east-1 list prices (`PRICES`,
each with the page it was read from and the date) and the assumptions in `Assumptions`, for a configuration
(`Config`: volumes, memory, batch size, payload size, capacity mode, log level, API type, tracing).

`offpath cost` (offpath_tools.cost_command) prints an estimate for a user's own volumes;
offpath_tools.cost_doc renders the model's section of docs/benchmarks.md.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from offpath.domain.registry import REGISTRY
from offpath.logic.submit import BATCH_WRITERS
from offpath.naming import FUNCTION_MEMORY_MB, LOG_RETENTION_DAYS, NOTICES_MEMORY_MB
from offpath.settings import Settings
from offpath_tools.write_units import read_units_for, write_units_for

MEASURED_PATH = Path(__file__).resolve().parents[2] / "docs" / "measured_calls.json"
TARGET_PER_MILLION = 3.00  # the cheapest documented configuration's target (`cheapest`)
DEFAULT_TARGET_PER_MILLION = 4.50  # the default configuration's
MILLION = 1_000_000
SECONDS_PER_MONTH = 365 / 12 * 86_400
DAYS_PER_MONTH = 365 / 12
# Lambda allocates CPU in proportion to memory: 1,769 MB is one full vCPU (AWS Lambda Developer Guide).
FULL_VCPU_MB = 1769
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
            "snapstart_cache_gb_second",
            0.0000015046,
            "$0.0000015046 per GB-second cached",
            "AWS Lambda pricing (SnapStart, Python)",
            "per published version with SnapStart, its memory, while it is active (3 hours at least); "
            "read through secondary summaries of the page",
        ),
        Price(
            "snapstart_restore_gb",
            0.0001397998,
            "$0.0001397998 per GB restored",
            "AWS Lambda pricing (SnapStart, Python)",
            "per execution environment restored from a snapshot, by its memory; read through secondary summaries",
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
    # One line of the HTTP API's access log (infra/api.py ACCESS_LOG_FIELDS with typical values; a test holds
    # the stack's format to it).
    access_log_bytes: int = 240
    # The event source mapping's pollers long-poll an idle queue: about 5 pollers x 3 receives a minute.
    idle_receives_per_queue_month: float = 5 * 3 * 60 * 24 * DAYS_PER_MONTH
    # The sweeper, every minute: 4 index queries (eventually consistent), ~30 ms at its memory.
    sweeper_runs_per_month: float = 60 * 24 * DAYS_PER_MONTH
    sweeper_read_units: float = 4 * 0.5
    sweeper_ms: float = 30.0
    # The worker's pause flags (offpath.logic.pause.PauseFlags): a worker environment that runs jobs reads the pause
    # item (one strongly consistent read of a small item: 1 read unit) at most once per 10 s, never more than once a
    # job. Counted for one busy environment per queue class in use, all month: each further busy environment adds
    # as much, a quiet one nothing.
    pause_flag_reads_per_queue_month: float = SECONDS_PER_MONTH / 10
    pause_flag_read_units: float = 1.0
    # X-Ray's default sampling for Lambda: the first request each second, then 5%.
    xray_reservoir_per_s: float = 1.0
    xray_rate: float = 0.05
    # DynamoDB storage: per-item overhead, and a job's index entries once it is finished: none (the sweep index
    # holds unfinished jobs only; a tenant's listing queries the table's own key, there is no listing index).
    item_overhead_bytes: int = 100
    index_entry_bytes: int = 0
    # Alarms the stack creates: 5 per queue class, plus API 5xx, Scheduler DLQ, async failures, the webhook
    # delivery DLQ and the notifier's stream failures.
    alarms_per_queue_class: int = 5
    other_alarms: int = 5
    dashboards: int = 1
    # The notifier (deployed with the table's stream by default): its event source mapping's batch (size and
    # batching window, as infra/notices.py sets them) and its time per invocation at its memory.
    notifier_batch_size: int = 100
    notifier_batching_window_s: float = 5.0
    notifier_ms: float = 40.0


ASSUMPTIONS = Assumptions()


# -- configuration ----------------------------------------------------------------------------


_SHARE = Field(default=0.0, ge=0, le=1)
_MEMORY_MB = {"ge": 128, "le": 10_240}
_ITEM_BYTES = {"ge": 2, "le": 400_000}


class Config(BaseModel):
    """A deployment and its volumes. Memory and retention default to what the CDK stack deploys
    (`offpath.naming.FUNCTION_MEMORY_MB`, `offpath.settings.Settings`, `offpath.naming.LOG_RETENTION_DAYS`);
    the shares are fractions of `jobs_per_month`. Values that cannot be priced raise `ValueError`
    (pydantic's ValidationError) when the configuration is made."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    jobs_per_month: float = Field(default=1_000_000, gt=0)
    retried_share: float = _SHARE  # jobs that fail once and succeed on their second attempt
    scheduled_share: float = _SHARE  # jobs started by a recurring schedule instead of POST /jobs
    delayed_share: float = _SHARE  # jobs submitted with run_at more than 15 minutes ahead
    batched_share: float = _SHARE  # jobs submitted through POST /jobs/batch, 100 at a time
    deduplicated_share: float = _SHARE  # replayed submits (same Idempotency-Key), as a fraction of jobs
    api_memory_mb: int = Field(default=FUNCTION_MEMORY_MB["api"], **_MEMORY_MB)
    worker_memory_mb: int = Field(default=FUNCTION_MEMORY_MB["worker"], **_MEMORY_MB)
    enqueue_memory_mb: int = Field(default=FUNCTION_MEMORY_MB["enqueue"], **_MEMORY_MB)
    batch_size: int = Field(default=10, ge=1, le=10_000)  # messages per worker invocation
    payload_bytes: int | None = Field(default=None, **_ITEM_BYTES)  # the payload's JSON; None: as measured
    result_bytes: int | None = Field(default=None, **_ITEM_BYTES)  # the stored result's JSON; None: as measured
    capacity_mode: Literal["on-demand", "provisioned"] = "on-demand"
    utilisation: float = Field(default=0.7, gt=0, le=1)  # provisioned capacity's average use
    log_level: Literal["INFO", "WARNING"] = "WARNING"  # the stack's default (infra/options.py)
    runtime_log_copy: bool = False  # True: the Lambda runtime's own handler also writes each record
    platform_logs: bool = False  # True: Lambda's START/END/REPORT lines (system log level INFO; the stack: WARN)
    snapstart: bool = False  # the stack's `snapstart` option: cache and restore charges instead of init time
    metrics_by_job_type: bool = False  # EMF metrics also per (queue, job type) (OFFPATH_METRICS_BY_JOB_TYPE)
    notifier: bool = True  # the table's stream and the notifier function, which the stack always deploys
    api_type: Literal["http", "rest"] = "http"
    tracing: bool = False  # X-Ray active tracing on every function (the stack's `tracing` option, off)
    # OpenTelemetry through the ADOT layer (the stack's `otel` option, off): its spans go to X-Ray, so it is
    # priced as X-Ray traces, only when on (the layer's own run time per invocation is not priced).
    otel: bool = False
    retention_days: int = Field(
        default=Settings.__dataclass_fields__["retention_days"].default, ge=1
    )  # finished jobs (TTL)
    log_retention_days: int = Field(default=LOG_RETENTION_DAYS, ge=1)
    job_types: int = Field(default=1, ge=1)  # job types in use (EMF metrics per job type)
    queue_classes: int = Field(default=len(REGISTRY.queues), ge=1)  # queue classes deployed (alarms) ...
    queue_classes_in_use: int = Field(default=1, ge=1)  # ... and those with traffic (metrics, idle polling)

    @model_validator(mode="after")
    def _one_mix(self) -> Config:
        if self.scheduled_share + self.delayed_share + self.batched_share > 1:
            raise ValueError("scheduled, delayed and batched shares add up to more than 1")
        return self

    @property
    def traced(self) -> bool:
        """X-Ray records traces: active tracing asked for, or OpenTelemetry exporting to it."""
        return self.tracing or self.otel

    def memory(self, function: str) -> int:
        return {"api": self.api_memory_mb, "worker": self.worker_memory_mb}.get(function, self.enqueue_memory_mb)

    def changed(self, **changes: Any) -> Config:
        """A copy with `changes`, validated as a new configuration is."""
        return Config.model_validate({**self.model_dump(), **changes})

    def with_memory(self, mb: int) -> Config:
        return self.changed(api_memory_mb=mb, worker_memory_mb=mb, enqueue_memory_mb=mb)


def problems(error: ValidationError) -> str:
    """A configuration's errors in one line, each with the field it is about."""
    return "; ".join(
        f"{'.'.join(str(part) for part in item['loc']) or 'configuration'}: {item['msg']}" for item in error.errors()
    )


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


# Calls a worker makes once per invocation, whatever its batch holds (10 records a request): the batch's
# messages held until the lease ends (logic/process.py), one ChangeMessageVisibilityBatch.
PER_INVOCATION_CALLS = ("SQS.ChangeMessageVisibilityBatch",)


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
        measured = float(scenario["invocations"].get(function, 0))
        for call, n in made.items():
            service = call.split(".", 1)[0]
            if call in PER_INVOCATION_CALLS and function == "worker" and measured:
                n = n / measured * count  # once per modelled invocation (below)
            wait = assumptions.latency_ms.get(service, 0.0) * n
            io_ms += wait / parallel if call == "DynamoDB.PutItem" else wait
        overhead_ms = count * assumptions.invocation_overhead_ms
        init_ms = count * assumptions.cold_start_share * assumptions.init_ms_full_cpu * cpu_scale
        if config.snapstart:
            # A restored environment skips init; each restore is charged by the memory restored.
            usage[f"snapstart_restore_gb:{function}"] = count * assumptions.cold_start_share * memory / 1024
            init_ms = 0.0
        usage[f"lambda_requests:{function}"] = count
        usage[f"lambda_gb_s:{function}"] = (cpu_ms + io_ms + overhead_ms + init_ms) / 1000 * memory / 1024

    # SQS: the functions' requests, and the event source mapping's receives and deletes per batch.
    sqs = sum(n for made in calls.values() for call, n in made.items() if call.startswith("SQS."))
    # A worker's per-invocation calls (the batch's hold) were measured per measured invocation: per modelled one.
    measured_invocations = float(scenario["invocations"].get("worker", 0))
    for call in PER_INVOCATION_CALLS:
        n = calls.get("worker", {}).get(call, 0)
        if n and measured_invocations:
            sqs += n / measured_invocations * invocations["worker"] - n
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
    if config.platform_logs:
        log_bytes += sum(invocations.values()) * assumptions.platform_log_bytes
    log_bytes += invocations["api"] * assumptions.access_log_bytes
    usage["log_bytes"] = log_bytes
    # The table's stream: one record for each job item write that changed the item.
    usage["stream_records"] = float(
        sum(1 for w in scenario["dynamodb"]["writes"] if w["item"] == "JOB" and not w["condition_failed"])
    )
    return {key: value / jobs for key, value in usage.items()}


def job_usage(measured: Mapping[str, Any], config: Config, assumptions: Assumptions = ASSUMPTIONS) -> Usage:
    """What one job uses on average, for the configured mix of scenarios. Without a configured payload size,
    every scenario's job carries the payload size the measurement used for its demo.echo jobs."""
    if config.payload_bytes is None and measured.get("payload_bytes"):
        config = config.changed(payload_bytes=int(measured["payload_bytes"]))
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
    total["traces"] = traces if config.traced else 0.0

    if config.notifier:
        _add(total, notifier_usage(total.get("stream_records", 0.0), config, assumptions), 1.0)

    # Storage: a finished job's item (and any index entry it keeps), kept for the retention period.
    plain_writes = [w for w in scenarios["plain"]["dynamodb"]["writes"] if w["item"] == "JOB"]
    stored = 1000
    if plain_writes:
        stored = _resized(plain_writes[-1]["after_bytes"], plain_writes[-1]["after_attribute_bytes"], config)
    stored += assumptions.item_overhead_bytes + assumptions.index_entry_bytes
    total["storage_gb_months"] = stored / 1e9 * (config.retention_days / DAYS_PER_MONTH)
    return total


def notifier_invocations_per_job(
    records_per_job: float, config: Config, assumptions: Assumptions = ASSUMPTIONS
) -> float:
    """The notifier's invocations per job. A job's records (queued, started, finished) follow one another within
    a fraction of a second, so they share a batch: a batch opens with the first record after the last batch and
    gathers for the batching window (or until it is full), which at `r` jobs a second and a window of `w`
    seconds makes r / (1 + r w) batches a second (at least one per `notifier_batch_size` records)."""
    if records_per_job <= 0:
        return 0.0
    rate = config.jobs_per_month / SECONDS_PER_MONTH
    window = assumptions.notifier_batching_window_s
    return max(records_per_job / assumptions.notifier_batch_size, 1 / (1 + rate * window))


def notifier_usage(records_per_job: float, config: Config, assumptions: Assumptions = ASSUMPTIONS) -> Usage:
    """What the notifier uses per job: its invocations (Lambda's reads of the stream are not billed) and their
    duration at its memory (CPU scaled like the other functions')."""
    invocations = notifier_invocations_per_job(records_per_job, config, assumptions)
    memory = NOTICES_MEMORY_MB["notifier"]
    ms = assumptions.notifier_ms + assumptions.invocation_overhead_ms
    platform = assumptions.platform_log_bytes if config.platform_logs else 0.0
    return {
        "lambda_requests:notifier": invocations,
        "lambda_gb_s:notifier": invocations * ms / 1000 * memory / 1024,
        "log_bytes": invocations * (notifier_emf_bytes(config) + platform),
    }


def notifier_emf_bytes(config: Config) -> int:
    """The notifier's EMF line for a batch holding one job's whole life (logic.notify.record_metrics), as
    observability.EmfMetrics writes it; a fuller batch adds a few bytes per value."""
    import io

    from offpath.observability import EmfMetrics

    out = io.StringIO()
    metrics = EmfMetrics("notifier", stream=out, by_job_type=config.metrics_by_job_type)
    for name in ("JobsSubmitted", "JobsStarted", "JobsSucceeded"):
        metrics.count(name, queue="default", job_type="demo.echo")
    metrics.milliseconds("QueueDelay", 123.456, queue="default", job_type="demo.echo")
    metrics.milliseconds("JobDuration", 12.345, queue="default", job_type="demo.echo")
    metrics.flush()
    return len(out.getvalue().encode())


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
    restored_gb = sum(v for k, v in usage.items() if k.startswith("snapstart_restore_gb:"))
    api_price = price("http_api_request") if config.api_type == "http" else price("rest_api_request")
    log_gb = usage["log_bytes"] / 1e9
    per_job = {
        "API Gateway": usage["api_requests"] * api_price,
        "Lambda": lambda_requests * price("lambda_request")
        + gb_seconds * price("lambda_gb_second_arm64")
        + restored_gb * price("snapstart_restore_gb"),
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
    sweeper_mb = FUNCTION_MEMORY_MB["sweeper"]
    sweeper_gb_s = runs * (assumptions.sweeper_ms + assumptions.invocation_overhead_ms) / 1000 * sweeper_mb / 1024
    sweeper = (
        runs * price("lambda_request")
        + sweeper_gb_s * price("lambda_gb_second_arm64")
        + runs * price("scheduler_invocation")
        + runs * assumptions.sweeper_read_units * rru_price
        + runs * assumptions.platform_log_bytes / 1e9 * price("logs_ingestion_gb")
        + (runs * price("xray_trace") if config.traced else 0.0)
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
    metrics = custom_metrics(metric_names, config)
    alarms = config.queue_classes * assumptions.alarms_per_queue_class + assumptions.other_alarms
    snapstart: dict[str, float] = {}
    if config.snapstart:
        # One published version per function is active: api, a worker per queue class, enqueue, sweeper.
        memory_gb = (
            config.api_memory_mb
            + config.queue_classes * config.worker_memory_mb
            + config.enqueue_memory_mb
            + FUNCTION_MEMORY_MB["sweeper"]
        ) / 1024
        snapstart["SnapStart snapshot cache"] = memory_gb * SECONDS_PER_MONTH * price("snapstart_cache_gb_second")
    return {
        **snapstart,
        "sweeper (every minute)": sweeper,
        "pause flags (a worker environment's read per 10 s)": config.queue_classes_in_use
        * assumptions.pause_flag_reads_per_queue_month
        * assumptions.pause_flag_read_units
        * rru_price,
        "idle queue polling": config.queue_classes_in_use
        * assumptions.idle_receives_per_queue_month
        * price("sqs_request"),
        f"custom metrics ({metrics})": metrics * price("custom_metric_month"),
        f"alarms ({alarms})": alarms * price("alarm_month"),
        "dashboard": assumptions.dashboards * price("dashboard_month"),
    }


def custom_metrics(metric_names: int, config: Config) -> int:
    """Custom metrics the EMF lines create (offpath.observability): each name per queue and once overall;
    per (queue, job type) too only when asked for, since that count grows with every job type added."""
    metrics = metric_names * (config.queue_classes_in_use + 1)
    if config.metrics_by_job_type:
        metrics += metric_names * config.job_types * config.queue_classes_in_use
    return metrics


def cheapest(base: Config) -> Config:
    """The cheapest documented configuration: submits in batches of 100 (POST /jobs/batch), DynamoDB
    provisioned capacity used at 70%, logs at WARNING without platform lines. Jobs the base configuration
    schedules or delays stay as they are; every other job is submitted in a batch."""
    return base.changed(
        batched_share=1.0 - base.scheduled_share - base.delayed_share,
        capacity_mode="provisioned",
        utilisation=0.7,
        log_level="WARNING",
        platform_logs=False,
    )


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
    cheapest_config = cheapest(base)
    return [
        ("default", base),
        ("batch size 1 (low volume, no batching window)", base.changed(batch_size=1)),
        ("memory 256 MB (all functions)", base.with_memory(256)),
        ("memory 512 MB (all functions)", base.with_memory(512)),
        ("memory 1024 MB (all functions)", base.with_memory(1024)),
        ("DynamoDB provisioned, 70% used", base.changed(capacity_mode="provisioned", utilisation=0.7)),
        ("log level INFO (every job's own lines)", base.changed(log_level="INFO")),
        ("Lambda START/END/REPORT lines (system log level INFO)", base.changed(platform_logs=True)),
        ("SnapStart on every function (-c snapstart=true)", base.changed(snapstart=True)),
        ("payload 1 KB", base.changed(payload_bytes=1024)),
        ("payload 64 KB", base.changed(payload_bytes=65_536)),
        ("REST API instead of HTTP API", base.changed(api_type="rest")),
        ("X-Ray tracing on (-c tracing=true)", base.changed(tracing=True)),
        ("OpenTelemetry via the ADOT layer (-c otel=true; X-Ray traces, only when on)", base.changed(otel=True)),
        ("10M jobs a month (X-Ray samples 5% above 1/s)", base.changed(jobs_per_month=10_000_000)),
        ("submitted in batches of 100", base.changed(batched_share=1.0)),
        (
            "mix: 5% retried, 5% scheduled, 5% replayed submits",
            base.changed(retried_share=0.05, scheduled_share=0.05, deduplicated_share=0.05),
        ),
        ("cheapest: batches of 100 + provisioned 70% + WARNING", cheapest_config),
        ("the same, with on-demand DynamoDB", cheapest_config.changed(capacity_mode="on-demand")),
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
        f"{'on' if config.traced else 'off'}"
        + ("; OpenTelemetry via the ADOT layer (its traces priced as X-Ray's)" if config.otel else "")
    )


# GET /stats asks, per (queue, job type) with metrics, 6 sums and 4 percentiles (adapters/cloudwatch.py),
# after 6 ListMetrics requests; the console asks it once a minute while its overview is open.
STATS_METRICS_PER_PAIR = 10
STATS_LIST_REQUESTS = 6
CONSOLE_HOURS_PER_MONTH = 8 * 22


def stats_call_cost(pairs: int) -> float:
    """One GET /stats on AWS: GetMetricData by the metric requested, ListMetrics by the request."""
    return pairs * STATS_METRICS_PER_PAIR * price("metric_requested") + STATS_LIST_REQUESTS * price("metric_requested")


def knob_rows(measured: Mapping[str, Any], base: Config | None = None) -> Iterable[tuple[str, float]]:
    """(label, dollars per million jobs) for each row of the knob table."""
    for label, config in knobs(base or Config()):
        yield label, estimate(measured, config).per_million


# -- per-tenant quotas (offpath/logic/quotas.py, adapters/dynamodb_quotas.py; docs/decisions.md 2026-12-01) ---------
# Write units each job adds when its tenant has a quota: the token bucket's one conditional write per submit (a
# refused submit is billed one too); the open count's +1 when accepted and -1 when final; a delayed job's -1 when
# it is enqueued (its +1 is the accepted job's write). Items under 1 KB: one unit each.
QUOTA_RATE_WRU = 1
QUOTA_COUNT_WRU = 2
QUOTA_DELAYED_WRU = 1
# One read of a tenant's counts: 16 shards, eventually consistent, 0.5 read units each; at most one a second per
# api environment and counted tenant (the gate's cache).
QUOTA_USAGE_READ_RRU = 8.0
QUOTA_KINDS = ("none", "rate", "counts", "all")


def quota_cost_per_job(config: Config, kind: str = "none", *, readers: float = 10.0) -> float:
    """Dollars a job adds with quotas on (`kind`: which are configured for its tenant; "none": 0). `readers`:
    api environments times counted tenants submitting in a second, each reading its counts once a second at
    most (the reads are spread over the month's jobs)."""
    if kind not in QUOTA_KINDS:
        raise ValueError(f"quotas must be one of {', '.join(QUOTA_KINDS)}")
    if kind == "none":
        return 0.0
    wru_price, rru_price = dynamodb_unit_prices(config)
    counted = kind in ("counts", "all")
    wru = (QUOTA_RATE_WRU if kind in ("rate", "all") else 0) + (
        QUOTA_COUNT_WRU + QUOTA_DELAYED_WRU * config.delayed_share if counted else 0
    )
    rate = config.jobs_per_month / SECONDS_PER_MONTH
    reads_per_job = min(1.0, readers / rate) if counted and rate > 0 else 0.0
    return wru * wru_price + reads_per_job * QUOTA_USAGE_READ_RRU * rru_price


# -- chains (offpath/logic/followups.py; docs/workflows.md) ---------------------------------------------------------
# What a chain step adds to the job that has a next one (`then`): its SUCCEED write keeps it in the sweep index and
# fixes the next job's id (the same write: no extra unit while the item stays under 1 KB), then one more write takes
# it out of the sweep index once the next job is made: CHAIN_STEP_WRU for an item under 1 KB. The next job's own
# create and send are that job's submit (a job submitted by the worker instead of through the api: no API Gateway
# request, no api invocation). A step reading `ctx.parent` reads its parent once (GetItem, strongly consistent:
# one read unit under 4 KB). A plain job: nothing.
CHAIN_STEP_WRU = 1
CHAIN_PARENT_READ_RRU = 1.0


def chain_cost_per_job(config: Config, chained_share: float = 0.0) -> float:
    """Dollars a job adds on average when `chained_share` of the jobs are a chain step with a next job (each next
    job reading its parent's result once); 0 for plain jobs."""
    if not 0.0 <= chained_share <= 1.0:
        raise ValueError("the chained share must be between 0 and 1")
    wru_price, rru_price = dynamodb_unit_prices(config)
    return chained_share * (CHAIN_STEP_WRU * wru_price + CHAIN_PARENT_READ_RRU * rru_price)


# -- job types' flow limits (offpath/logic/limits.py, adapters/dynamodb_limits.py; docs/flow-control.md) ----------
# What each job of a type with limits adds (a type that declares none adds nothing: its worker neither reads nor
# writes for them). A concurrency slot: acquired and released, one conditional write each, on an item under 1 KB
# (up to ~16 holders: a key's item grows ~50 bytes a holder); a rate limit: one conditional write on its bucket. A
# keyed limit or a concurrency limit reads the job before the claim (strongly consistent, under 4 KB: 1 read
# unit). Each time a job waits it repeats its admission (a refused conditional write is billed too) and its message
# is received and put back (2 SQS requests).
LIMIT_SLOT_WRU = 2
LIMIT_RATE_WRU = 1
LIMIT_READ_RRU = 1
LIMIT_WAIT_SQS_REQUESTS = 2
LIMIT_KINDS = ("none", "concurrency", "rate", "both")


def limits_units_per_job(kind: str = "none", *, waits: float = 0.0) -> tuple[float, float]:
    """(write units, read units) a job adds with its type's limits (`kind`: which it declares; "none": (0, 0)),
    `waits`: how often it waits on average before it runs."""
    if kind not in LIMIT_KINDS:
        raise ValueError(f"limits must be one of {', '.join(LIMIT_KINDS)}")
    if kind == "none":
        return 0.0, 0.0
    slots, rate = kind in ("concurrency", "both"), kind in ("rate", "both")
    writes = (LIMIT_SLOT_WRU if slots else 0) + (LIMIT_RATE_WRU if rate else 0)
    # A wait: the refused write (the bucket's, or the slot's after a token was taken: both), and the read again.
    per_wait = (1 if slots else 0) + (1 if rate else 0)
    return writes + per_wait * waits, LIMIT_READ_RRU * (1 + waits)


def limits_cost_per_job(config: Config, kind: str = "none", *, waits: float = 0.0) -> float:
    """Dollars a job adds with its type's limits (0 when it declares none)."""
    if kind == "none":
        limits_units_per_job(kind)
        return 0.0
    wru_price, rru_price = dynamodb_unit_prices(config)
    wru, rru = limits_units_per_job(kind, waits=waits)
    return wru * wru_price + rru * rru_price + waits * LIMIT_WAIT_SQS_REQUESTS * price("sqs_request")


# -- expiry and debounce (logic/expiry.py, logic/debounce.py; docs/flow-control.md) --------------------------------
# Expiry adds no write: its time rides on the job's item (a few bytes) and its message, and the worker reads it from
# the message; a job that expires costs one write (the expire) in place of its claim and outcome. A debounced submit
# writes its key's record (one item under 1 KB: 1 write unit); a submit that supersedes an earlier job also
# cancels it (one write of the earlier job's item: its payload and JOB_ITEM_BASE_BYTES, in 1 KB units). When the
# superseded job's message comes the worker reads the record (consistent, under 4 KB: 1 read unit) and, when the
# burst went on, names its survivor (one more write of the item; counted for every superseded job: the most it costs).
DEBOUNCE_RECORD_WRU = 1
DEBOUNCE_RECORD_READ_RRU = 1
JOB_ITEM_BASE_BYTES = 600


def flow_control_cost_per_job(config: Config, *, debounced_share: float = 0.0, superseded_share: float = 0.0) -> float:
    """Dollars a job adds for debounce: `debounced_share` of the jobs are submitted with a debounce, of which
    `superseded_share` (a share of all jobs) are superseded. 0 when no job is debounced; expiry is always 0."""
    if not 0 <= debounced_share <= 1:
        raise ValueError("the debounced share must be between 0 and 1")
    if not 0 <= superseded_share <= debounced_share:
        raise ValueError("the superseded share must be between 0 and the debounced share")
    wru_price, rru_price = dynamodb_unit_prices(config)
    # A payload "as measured" is a few dozen bytes: the item stays under 1 KB.
    item_wru = math.ceil(((config.payload_bytes or 0) + JOB_ITEM_BASE_BYTES) / 1024)
    writes = debounced_share * DEBOUNCE_RECORD_WRU + superseded_share * 2 * item_wru
    return writes * wru_price + superseded_share * DEBOUNCE_RECORD_READ_RRU * rru_price


# -- notices: the notifier, the event bus and webhook deliveries (issue 12) -------------------------------
# Kept apart from the job's own estimate: they cost only when a tenant registers an endpoint or the stack puts
# events on a bus. Sizes come from the adapters' own serialisers (a typical attempt, a one-endpoint item).

EVENTBRIDGE_EVENT_PRICE = 1.00 / MILLION  # Amazon EventBridge pricing: custom events, $1.00 per million (64 KB)
NOTIFIER_MEMORY_MB = NOTICES_MEMORY_MB["notifier"]
DELIVERY_MEMORY_MB = NOTICES_MEMORY_MB["delivery"]


@dataclass(frozen=True)
class NoticesAssumptions:
    # Stream records (job item changes) per job, every one an event: QUEUED, RUNNING, SUCCEEDED.
    events_per_job: float = 3.0
    # Records per notifier invocation (the mapping's batching) and its time per invocation (endpoint item
    # read once per tenant and batch, one SendMessageBatch, PutEvents per 10 events).
    records_per_notifier_batch: float = 10.0
    notifier_ms: float = 40.0
    # Deliveries per job: one subscribed endpoint, final events only.
    deliveries_per_job: float = 1.0
    # Messages per delivery-function batch, and the receiver's answer time per delivery (sent one by one).
    deliveries_per_batch: float = 5.0
    receiver_ms: float = 150.0
    # Share of deliveries that fail once and are retried (each retry is one more of everything).
    retried_share: float = 0.02


def notices_per_million(bus: bool = True, assumptions: NoticesAssumptions = NoticesAssumptions()) -> dict[str, float]:
    """Dollars per million jobs, by part: the notifier (stream reads by Lambda are not billed), the event bus
    (when on), and the webhook deliveries (SQS, the delivery function, the endpoint and log items)."""
    from datetime import UTC, datetime

    from offpath.adapters.webhook_store import attempt_to_json
    from offpath.domain.webhooks import ATTEMPTS_KEPT, Attempt

    a = assumptions
    lambda_gb_s = price("lambda_gb_second_arm64")
    notifier_invocations = a.events_per_job / a.records_per_notifier_batch
    notifier = (
        MILLION
        * notifier_invocations
        * (price("lambda_request") + a.notifier_ms / 1000 * NOTIFIER_MEMORY_MB / 1024 * lambda_gb_s)
    )
    bus_cost = MILLION * a.events_per_job * EVENTBRIDGE_EVENT_PRICE if bus else 0.0

    deliveries = a.deliveries_per_job * (1 + a.retried_share)
    # SendMessageBatch by the notifier, ReceiveMessage and DeleteMessageBatch by the mapping: each per batch.
    sqs_requests = deliveries * (1 / a.records_per_notifier_batch + 2 / a.deliveries_per_batch)
    delivery_invocations = deliveries / a.deliveries_per_batch
    delivery_lambda = delivery_invocations * price("lambda_request") + deliveries * (
        (a.receiver_ms + 3 * ASSUMPTIONS.latency_ms["DynamoDB"]) / 1000 * DELIVERY_MEMORY_MB / 1024 * lambda_gb_s
    )
    attempt = Attempt("evt_" + "0" * 32, "job.succeeded", 1, datetime(2026, 1, 1, tzinfo=UTC), 200, 120, None, None)
    log_bytes = ATTEMPTS_KEPT * (len(json.dumps(attempt_to_json(attempt))) + 2) + ASSUMPTIONS.item_overhead_bytes
    # Per delivery: the endpoints item read (consistent), the log read (consistent) and written whole.
    dynamodb = deliveries * (
        2 * read_units_for(log_bytes, consistent=True) * price("dynamodb_rru")
        + write_units_for(log_bytes) * price("dynamodb_wru")
    )
    return {
        "notifier (Lambda)": notifier,
        "event bus (EventBridge PutEvents)": bus_cost,
        "deliveries: SQS": MILLION * sqs_requests * price("sqs_request"),
        "deliveries: delivery function (Lambda)": MILLION * delivery_lambda,
        "deliveries: endpoint and log items (DynamoDB)": MILLION * dynamodb,
    }


def notices_rows(bus: bool = True) -> list[tuple[str, float]]:
    """(part, dollars per million jobs) rows and their total, for `offpath cost` and the benchmarks page. The
    notifier itself is left out: the stack always deploys it, so the job's own estimate counts it
    (`notifier_usage`)."""
    parts = {k: v for k, v in notices_per_million(bus).items() if k != "notifier (Lambda)"}
    return [*parts.items(), ("notices in all", sum(parts.values()))]


# -- waiting for a job and realtime events (issue 12) ----------------------------------------------

PRICES.update(
    {
        p.item: p
        for p in (
            Price(
                "appsync_events_operation",
                1.00 / MILLION,
                "$1.00 per 1M Event API operations",
                "AWS AppSync pricing (Events)",
                "each event published and each event delivered to a subscriber is an operation, as are connects "
                "and subscribes; read 2026-12-01 from AWS's price list (EU-EventAPI-Operation, $0.000001)",
            ),
            Price(
                "appsync_events_connection_minute",
                0.08 / MILLION,
                "$0.08 per 1M connection-minutes",
                "AWS AppSync pricing (Events)",
                "a browser connected while it watches a job",
            ),
            Price(
                "websocket_message",
                1.00 / MILLION,
                "$1.00 per 1M messages",
                "Amazon API Gateway pricing (WebSocket APIs)",
                "first 1 billion a month, metered in 32 KB units; the alternative not chosen (docs/decisions.md)",
            ),
            Price(
                "websocket_connection_minute",
                0.25 / MILLION,
                "$0.25 per 1M connection minutes",
                "Amazon API Gateway pricing (WebSocket APIs)",
                "the alternative not chosen (docs/decisions.md)",
            ),
        )
    }
)
# A job's realtime events: queued, started, 4 progress events (at most one a second) and the final one.
REALTIME_EVENTS_PER_JOB = 7
# How long a browser stays connected while it watches one job.
REALTIME_WATCH_MINUTES = 1.0


# A wait on a job not yet final takes one of its tenant's wait slots and gives it back: two writes of 1 unit
# (the slot item is small), whatever the wait's length.
WAIT_SLOT_WRITES = 2


@dataclass(frozen=True)
class LongPoll:
    """One `GET /jobs/{id}?wait=N` that ends after `seconds` (the job finished then, or the wait ended)."""

    seconds: float
    reads: int  # consistent reads of the job: the first, then one after each pause (offpath.logic.waiting)
    dollars: float  # the reads, the wait slot's writes, the API request and the api function's invocation and time
    writes: int = WAIT_SLOT_WRITES  # the tenant's wait slot: taken, then given back (adapters/dynamodb_waits.py)

    @property
    def per_million(self) -> float:
        return self.dollars * MILLION


def long_poll_cost(seconds: float, config: Config | None = None) -> LongPoll:
    """A long poll's price: one read unit per consistent read of a job item up to 4 KB, the two writes of its
    tenant's wait slot, one API request and one function invocation, and the function's memory for the
    seconds it waits (Lambda bills the wait)."""
    from offpath.logic.waiting import max_reads, pauses

    config = config or Config()
    reads = 1 + len(pauses(seconds)) if seconds > 0 else 1
    assert reads <= max_reads(max(seconds, 0.1))
    wru_price, rru_price = dynamodb_unit_prices(config)
    api_price = price("http_api_request") if config.api_type == "http" else price("rest_api_request")
    waited = seconds * config.api_memory_mb / 1024 * price("lambda_gb_second_arm64")
    dollars = reads * rru_price + WAIT_SLOT_WRITES * wru_price + api_price + price("lambda_request") + waited
    return LongPoll(seconds, reads, dollars, WAIT_SLOT_WRITES)


@dataclass(frozen=True)
class Realtime:
    """Realtime events per job, for a share of jobs watched in a browser: the managed service chosen
    (AppSync Events) and the alternative (an API Gateway WebSocket API with a connection table)."""

    watched_share: float
    appsync_per_job: float
    websocket_per_job: float


def realtime_cost(watched_share: float, config: Config | None = None) -> Realtime:
    """AppSync Events: every event is published (an operation) whether or not anyone watches; a watched job
    adds its connect and subscribe, one operation per event delivered, and the connection's minutes.
    WebSocket API: the notifier looks up a job's subscribers (one eventually consistent read per event) and
    sends to each (a message); a watched job adds the subscribe message, the $connect/$disconnect and
    subscribe invocations (a Lambda authorizer checking the JWT on connect), three writes to the connection
    table and the connection's minutes."""
    config = config or Config()
    wru_price, rru_price = dynamodb_unit_prices(config)
    events = REALTIME_EVENTS_PER_JOB
    op, minutes = price("appsync_events_operation"), REALTIME_WATCH_MINUTES
    appsync = events * op + watched_share * (2 * op + events * op + minutes * price("appsync_events_connection_minute"))
    invocations = 4  # authorizer, $connect, subscribe, $disconnect
    invocation = price("lambda_request") + 0.05 * 256 / 1024 * price("lambda_gb_second_arm64")
    websocket = events * 0.5 * rru_price + watched_share * (
        price("websocket_message")
        + events * price("websocket_message")
        + invocations * invocation
        + 3 * wru_price
        + minutes * price("websocket_connection_minute")
    )
    return Realtime(watched_share, appsync, websocket)


# -- batches (fan-out / fan-in): what a member and a callback add (docs/decisions.md, "Batches") --------------


@dataclass(frozen=True)
class BatchCost:
    """What one batch member, and one callback, add over the same job submitted without a batch (`POST
    /jobs/batch`). A plain job adds nothing. Sizes come from the store's own item serialisers."""

    member_write_units: float
    member_read_units: float
    callback_write_units: float
    per_member: float  # dollars
    per_callback: float

    @property
    def per_million_members(self) -> float:
        return self.per_member * MILLION


def batch_cost(config: Config, *, page_size: int = 100) -> BatchCost:
    """A page of `page_size` members: reserved and written (two transactions of the page item and the batch
    item, each unit doubled); per member: its count (a transaction of the job item and the batch item), the clear
    of its sweep time (the job item and its sweep index entry) and one consistent read of the batch; per callback:
    its job's put (with its sweep index entry) and the batch's callback id."""
    from datetime import UTC, datetime

    from offpath.adapters.dynamodb_batches import batch_to_item, page_to_item
    from offpath.adapters.dynamodb_store import to_item
    from offpath.domain.batch import Batch, CallbackSpec
    from offpath.domain.ids import new_job_id
    from offpath.domain.job import Job, JobStatus
    from offpath_tools.write_units import item_size

    now = datetime(2026, 12, 1, tzinfo=UTC)
    spec = CallbackSpec("reports.summarise", {"report": "r-7"})
    batch = Batch(new_job_id(now), "tenant-a", now, now, total=page_size, callbacks={"on_complete": spec})
    ids = [new_job_id(now) for _ in range(page_size)]
    payload = {"p": "x" * max(0, (config.payload_bytes or 100) - 8)}
    job = Job(
        job_id=ids[0],
        tenant="tenant-a",
        type="reports.row",
        queue="default",
        payload=payload,
        payload_hash="0" * 64,
        status=JobStatus.SUCCEEDED,
        created_at=now,
        updated_at=now,
        max_attempts=3,
        attempt=1,
        result={"r": "x" * max(0, (config.result_bytes or 100) - 8)},
        batch_id=batch.batch_id,
        trace_id="0" * 32,
    )
    job_units = write_units_for(item_size(to_item(job)))
    batch_units = write_units_for(item_size(batch_to_item(batch)))
    page_units = write_units_for(item_size(page_to_item(batch, "0" * 32, ids, now)))
    transaction = 2
    per_page = 2 * transaction * (page_units + batch_units)
    member = per_page / page_size + transaction * (job_units + batch_units) + (job_units + 1)
    reads = read_units_for(item_size(batch_to_item(batch)), consistent=True)
    callback = job_units + 1 + batch_units
    wru_price, rru_price = dynamodb_unit_prices(config)
    return BatchCost(
        member_write_units=member,
        member_read_units=reads,
        callback_write_units=callback,
        per_member=member * wru_price + reads * rru_price,
        per_callback=callback * wru_price,
    )
