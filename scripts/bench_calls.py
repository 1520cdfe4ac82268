"""AWS calls, DynamoDB capacity units and log bytes per job, measured with the real handlers in moto.

Each scenario drives the unmodified api, worker and enqueue handlers in-process against moto (`mock_aws`), the
way API Gateway, the SQS event source mapping and EventBridge Scheduler would:

  plain      POST /jobs demo.echo -> worker -> SUCCEEDED
  dedup      the same POST /jobs with the same Idempotency-Key again, while the first is QUEUED (replay, 200)
  retried    demo.flaky fail_first=1: the first attempt fails and retries, the second succeeds
  scheduled  a firing of a recurring schedule (overlap "skip", its item already holding its 20 newest
             firings): the Scheduler invokes the enqueue function -> job -> SUCCEEDED
  delayed    POST /jobs with run_at 1 h ahead (SCHEDULED + a one-time schedule), the schedule fires the
             enqueue function -> job -> SUCCEEDED
  batch      POST /jobs/batch with 100 demo.echo jobs -> 10 worker batches of 10 -> all SUCCEEDED

What is counted, per scenario:
- every call the functions make, per function and `Service.Operation` (botocore `before-call` hooks);
- what the event source mapping does on the functions' behalf: each message it delivers and each message it
  deletes. Its ReceiveMessage and DeleteMessageBatch requests are billed SQS requests; they are reported per
  batch of 10 (one of each per 10 messages) rather than as this single-job run made them;
- Lambda invocations per function and Scheduler invocations (recurring firings and one-time schedules);
- DynamoDB write and read units, by DynamoDB's rules (offpath_tools.write_units.CapacityMeter: it reads each
  written item before and after with a client of its own);
- the bytes the functions write to CloudWatch Logs: their JSON log lines at INFO and at WARNING, their EMF
  metric lines, and the copy of each log record that the Lambda Python runtime's own root handler writes
  in its text format (offpath adds its JSON handler beside it);
- the functions' CPU time (wall time in the handler minus the time moto spends answering), median over
  repeated unmetered runs of the scenario, on this machine.

The job payload is 128 bytes of JSON (demo.echo returns it as its result); every item stays under 1 KiB.
Writes the measured counts to docs/measured_calls.json (read by `offpath cost`) and a table to the section of
docs/benchmarks.md between `<!-- calls:begin -->` and `<!-- calls:end -->` (the rest of that file is kept).

    .venv/bin/python scripts/bench_calls.py [--timing-runs 25] [--no-write] [--price-only]
    make bench-calls
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import logging
import os
import statistics
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import moto
from moto import mock_aws
from moto.core.botocore_stubber import BotocoreStubber

from offpath.adapters import dynamodb_store, sqs_queue
from offpath.adapters.dynamodb_store import DynamoDbJobStore
from offpath.domain.job import Job
from offpath.domain.registry import Registry, schedule
from offpath.handlers import api, enqueue, worker
from offpath.handlers.composition import Overrides
from offpath.jobs import load_job_types
from offpath.observability import EmfMetrics, JsonFormatter
from offpath.settings import Settings
from offpath.tenancy import SYSTEM_TENANT
from offpath_local.event_source import SqsEventSource
from offpath_local.resources import create_resources, function_arn, queue_arn_of
from offpath_tools import cost_doc
from offpath_tools.clocks import ShiftableClock
from offpath_tools.fakes import NoJitter
from offpath_tools.http_events import http_event
from offpath_tools.write_units import CapacityMeter

ROOT = Path(__file__).resolve().parent.parent
# moto's own credentials and region, whatever the environment says (read when the clients are made).
for _name, _value in {
    "AWS_ACCESS_KEY_ID": "bench",
    "AWS_SECRET_ACCESS_KEY": "bench",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_REGION": "us-east-1",
}.items():
    os.environ[_name] = _value
for _name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL"):
    os.environ.pop(_name, None)

MEASURED_JSON = ROOT / "docs" / "measured_calls.json"
BENCHMARKS_MD = ROOT / "docs" / "benchmarks.md"
BEGIN, END = "<!-- calls:begin -->", "<!-- calls:end -->"
TENANT = "tenant-a"
PAYLOAD_BYTES = 128
PAYLOAD = {"data": "x" * (PAYLOAD_BYTES - len('{"data":""}'))}
BATCH = 100
ESM_BATCH = 10
BENCH_SCHEDULE = "bench-echo"
WARM_FIRINGS = 20
SCHEDULE_GROUP = "offpath-schedules"
# Loggers whose records a deployed function would write (botocore's and moto's stay out: botocore logs at
# INFO only at a cold start, and moto does not run on AWS).
FUNCTION_LOGGERS = ("offpath", "aws_lambda_powertools")
# The Lambda Python runtime's own handler: "[LEVEL]\t<timestamp>\t<request id>\t<message>\n".
RUNTIME_PREFIX_BYTES = len("[INFO]\t2026-01-01T00:00:00.000Z\t") + 36 + 1 + 1


# -- moto, one request at a time --------------------------------------------------------------

_MOTO_LOCK = threading.RLock()
_moto_seconds = 0.0


def _serve_one_at_a_time() -> None:
    """DynamoDB applies single-item conditional writes atomically; moto serves concurrent calls without a
    lock, so requests are served one at a time, as one table would. The time moto spends is summed so it can
    be taken out of the handlers' durations."""
    serve = BotocoreStubber.process_request

    def process(self: BotocoreStubber, request: Any) -> Any:
        global _moto_seconds
        with _MOTO_LOCK:
            start = time.perf_counter()
            try:
                return serve(self, request)
            finally:
                _moto_seconds += time.perf_counter() - start

    BotocoreStubber.process_request = process  # type: ignore[method-assign]


# -- what a run records -----------------------------------------------------------------------


@dataclass
class Tally:
    calls: Counter[tuple[str, str]] = field(default_factory=Counter)
    invocations: Counter[str] = field(default_factory=Counter)
    cpu_ms: Counter[str] = field(default_factory=Counter)
    log_bytes: Counter[tuple[str, str]] = field(default_factory=Counter)
    metric_names: set[str] = field(default_factory=set)
    deliveries: int = 0
    acks: int = 0


class Recorder:
    """Attributes calls, log bytes and time to the function being invoked."""

    def __init__(self) -> None:
        self.function: str | None = None
        self.tally = Tally()
        self.lock = threading.Lock()

    def reset(self) -> Tally:
        with self.lock:
            tally, self.tally = self.tally, Tally()
        return tally

    def count_call(self, model: Any, **_: Any) -> None:
        with self.lock:
            self.tally.calls[(self.function or "setup", f"{model.service_model.service_id}.{model.name}")] += 1

    def add_log_bytes(self, kind: str, size: int) -> None:
        with self.lock:
            self.tally.log_bytes[(self.function or "setup", kind)] += size

    @contextlib.contextmanager
    def invocation(self, function: str) -> Iterator[None]:
        self.function = function
        with self.lock:
            self.tally.invocations[function] += 1
        moto_before, start = _moto_seconds, time.perf_counter()
        try:
            yield
        finally:
            cpu = (time.perf_counter() - start) - (_moto_seconds - moto_before)
            with self.lock:
                self.tally.cpu_ms[function] += max(0.0, cpu * 1000)
            self.function = None


class CountingStream(io.TextIOBase):
    """Where a function's EMF lines go: their bytes are counted, nothing is kept."""

    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder

    def write(self, text: str) -> int:
        self.recorder.add_log_bytes("emf", len(text.encode()))
        for line in text.splitlines():
            document = json.loads(line) if line.strip() else {}
            for directive in document.get("_aws", {}).get("CloudWatchMetrics", []):
                with self.recorder.lock:
                    self.recorder.tally.metric_names.update(m["Name"] for m in directive["Metrics"])
        return len(text)


class LogBytes(logging.Handler):
    """Counts the bytes a function's log records make, as offpath's JSON lines or as the Lambda runtime's copy."""

    def __init__(self, recorder: Recorder, kind: str, level: int) -> None:
        super().__init__(level)
        self.recorder = recorder
        self.kind = kind
        self.json = JsonFormatter("api")

    def emit(self, record: logging.LogRecord) -> None:
        if not record.name.startswith(FUNCTION_LOGGERS):
            return
        if self.kind.startswith("json"):
            self.json.service = self.recorder.function or "setup"
            size = len((self.json.format(record) + "\n").encode())
        else:
            size = RUNTIME_PREFIX_BYTES + len(record.getMessage().encode())
        self.recorder.add_log_bytes(self.kind, size)


# -- the pipeline -----------------------------------------------------------------------------


class Bench:
    def __init__(self, registry: Registry, recorder: Recorder) -> None:
        self.registry = registry
        self.recorder = recorder
        admin_dynamodb, admin_sqs = boto3.client("dynamodb"), boto3.client("sqs")
        self.resources = create_resources(admin_dynamodb, admin_sqs, registry)
        boto3.client("scheduler").create_schedule_group(Name=SCHEDULE_GROUP)
        # The functions' clients (watched) and the clients that play AWS around them (not watched).
        self.dynamodb = boto3.client("dynamodb", config=dynamodb_store.SDK_CONFIG)
        self.sqs = boto3.client("sqs", config=sqs_queue.SDK_CONFIG)
        self.scheduler = boto3.client("scheduler")
        for client in (self.dynamodb, self.sqs, self.scheduler):
            client.meta.events.register("before-call", recorder.count_call)
        self.esm_sqs = boto3.client("sqs")
        self.admin_store = DynamoDbJobStore(self.resources.table_name, client=admin_dynamodb)
        self.meter = CapacityMeter(self.dynamodb, admin_dynamodb, attributes=("payload_json", "result_json"))

        dlq_url = admin_sqs.create_queue(QueueName="offpath-schedule-dlq")["QueueUrl"]
        self.settings = Settings(
            table_name=self.resources.table_name,
            queue_urls=self.resources.queue_urls,
            dlq_urls=self.resources.dlq_urls,
            schedule_group=SCHEDULE_GROUP,
            enqueue_function_arn=function_arn("offpath-enqueue"),
            scheduler_role_arn="arn:aws:iam::123456789012:role/offpath-scheduler",
            schedule_dlq_arn=queue_arn_of(dlq_url),
            redrive_mode="copy",
        )
        emf = CountingStream(recorder)
        self.clock = ShiftableClock()
        # The production wiring (handlers/composition.py) with the watched clients, the shiftable clock, EMF
        # lines counted instead of printed and no backoff jitter.
        overrides = Overrides(
            dynamodb=self.dynamodb,
            sqs=self.sqs,
            scheduler=self.scheduler,
            clock=self.clock,
            metrics=lambda service: EmfMetrics(service, stream=emf),
            registry=registry,
            rng=NoJitter,
        )
        self.api_services = api.build_services(self.settings, overrides)
        self.enqueue_services = enqueue.build_services(self.settings, overrides)
        self.sources: dict[str, SqsEventSource] = {}
        for name in registry.queues:
            services = worker.build_services(self.settings.replace(queue_class=name), overrides)
            self.sources[name] = SqsEventSource(
                self.esm_sqs,
                self.resources.queue_urls[name],
                self._worker(services),
                function_name=f"offpath-worker-{name}",
                batch_size=registry.batch_size(name),
                batching_window_s=0,
                function_timeout_s=registry.worker_timeout_s(name),
            )

    # -- what AWS does around the functions ---------------------------------------------------

    def _worker(self, services: worker.WorkerServices) -> Callable[[dict[str, Any], Any], dict[str, Any]]:
        def invoke(event: dict[str, Any], context: Any) -> dict[str, Any]:
            with self.recorder.invocation("worker"):
                answer = worker.handler(event, context, services=services)
            with self.recorder.lock:
                self.recorder.tally.deliveries += len(event["Records"])
                self.recorder.tally.acks += len(event["Records"]) - len(answer["batchItemFailures"])
            return answer

        return invoke

    def call_api(self, method: str, path: str, body: Any, headers: dict[str, str] | None = None) -> dict[str, Any]:
        with self.recorder.invocation("api"):
            event = http_event(
                method, path, body=body, headers={"content-type": "application/json", **(headers or {})}, tenant=TENANT
            )
            response = api.handler(event, None, services=self.api_services)
        return {"status": response["statusCode"], "body": json.loads(response["body"])}

    def fire(self, event: dict[str, Any]) -> dict[str, Any]:
        """EventBridge Scheduler invokes the enqueue function (one billed Scheduler invocation)."""
        with self.recorder.lock:
            self.recorder.tally.calls[("scheduler", "Scheduler.Invocation")] += 1
        with self.recorder.invocation("enqueue"):
            return enqueue.handler(event, None, services=self.enqueue_services)

    def drain(self, queue_class: str) -> None:
        source = self.sources[queue_class]
        for _ in range(100):
            if source.poll_once().received == 0:
                return
        raise RuntimeError(f"queue {queue_class} did not drain")

    def job(self, job_id: str) -> Job | None:
        """The job, the bench tenant's or (made by a schedule) the system's."""
        return self.admin_store.get(job_id, tenant=TENANT) or self.admin_store.get(job_id, tenant=SYSTEM_TENANT)

    def status(self, job_id: str) -> str:
        job = self.job(job_id)
        return job.status.value if job else "MISSING"


# -- the scenarios ----------------------------------------------------------------------------


class Scenario:
    """`prepare` sets the stage (not counted); `run` is what is counted and must leave its jobs finished."""

    name = ""
    description = ""
    jobs = 1

    def __init__(self, bench: Bench) -> None:
        self.bench = bench

    def prepare(self) -> None:
        return None

    def run(self) -> None:
        raise NotImplementedError

    def expect(self, ok: bool, what: str) -> None:
        if not ok:
            raise RuntimeError(f"scenario {self.name}: {what}")


class Plain(Scenario):
    name = "plain"
    description = "POST /jobs `demo.echo` -> worker -> SUCCEEDED"

    def run(self) -> None:
        answer = self.bench.call_api("POST", "/jobs", {"type": "demo.echo", "payload": PAYLOAD})
        self.bench.drain("default")
        self.expect(self.bench.status(answer["body"]["job_id"]) == "SUCCEEDED", "job did not succeed")


class Deduplicated(Scenario):
    name = "dedup"
    description = "the same POST /jobs and Idempotency-Key again while the first job is QUEUED: 200 replay"

    def prepare(self) -> None:
        self.key = f"order-{uuid.uuid4().hex[:12]}"
        first = self.bench.call_api(
            "POST", "/jobs", {"type": "demo.echo", "payload": PAYLOAD}, {"Idempotency-Key": self.key}
        )
        self.expect(first["status"] == 202, "first submit was not accepted")
        self.job_id = first["body"]["job_id"]

    def run(self) -> None:
        again = self.bench.call_api(
            "POST", "/jobs", {"type": "demo.echo", "payload": PAYLOAD}, {"Idempotency-Key": self.key}
        )
        self.expect(again["status"] == 200 and again["body"]["job_id"] == self.job_id, "not replayed")

    def finish(self) -> None:
        self.bench.drain("default")


class Retried(Scenario):
    name = "retried"
    description = "`demo.flaky` fail_first=1: attempt 1 fails (RETRYING), attempt 2 succeeds"

    def run(self) -> None:
        answer = self.bench.call_api("POST", "/jobs", {"type": "demo.flaky", "payload": {"fail_first": 1}})
        self.bench.drain("default")
        job = self.bench.job(answer["body"]["job_id"])
        self.expect(job is not None and job.status.value == "SUCCEEDED" and job.attempt == 2, "not retried once")


class Scheduled(Scenario):
    name = "scheduled"
    description = (
        "a recurring schedule of `demo.echo` fires (Scheduler -> enqueue function, overlap `skip`, the "
        "schedule's item already holding its 20 newest firings) -> job -> SUCCEEDED"
    )
    start = datetime(2026, 11, 1, tzinfo=UTC)

    def __init__(self, bench: Bench) -> None:
        super().__init__(bench)
        self.slots = 0
        for _ in range(WARM_FIRINGS):
            self.fire_one()

    def fire_one(self) -> str:
        slot = (self.start + timedelta(hours=self.slots)).strftime("%Y-%m-%dT%H:%M:%SZ")
        self.slots += 1
        answer = self.bench.fire(
            {"kind": "recurring", "schedule": BENCH_SCHEDULE, "scheduled_time": slot, "execution_id": str(uuid.uuid4())}
        )
        self.expect(answer["job_id"] is not None and not answer["skipped"], f"slot {slot} skipped")
        self.bench.drain("default")
        return str(answer["job_id"])

    def run(self) -> None:
        job_id = self.fire_one()
        self.expect(self.bench.status(job_id) == "SUCCEEDED", "scheduled job did not succeed")


class Delayed(Scenario):
    name = "delayed"
    description = (
        "POST /jobs with run_at 1 h ahead (SCHEDULED + a one-time schedule); the schedule fires the enqueue "
        "function -> job -> SUCCEEDED"
    )

    def run(self) -> None:
        run_at = (datetime.now(UTC) + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
        answer = self.bench.call_api("POST", "/jobs", {"type": "demo.echo", "payload": PAYLOAD, "run_at": run_at})
        self.expect(answer["body"]["status"] == "SCHEDULED", "job was not scheduled")
        job_id = answer["body"]["job_id"]
        with self.bench.clock.shifted(timedelta(hours=1, seconds=1)):
            self.bench.fire({"kind": "delayed", "job_id": job_id, "tenant": TENANT, "scheduled_time": run_at})
        self.bench.drain("default")
        self.expect(self.bench.status(job_id) == "SUCCEEDED", "delayed job did not succeed")


class Batch(Scenario):
    name = "batch"
    description = f"POST /jobs/batch with {BATCH} `demo.echo` jobs -> {BATCH // ESM_BATCH} worker batches -> SUCCEEDED"
    jobs = BATCH

    def run(self) -> None:
        jobs = [{"type": "demo.echo", "payload": PAYLOAD} for _ in range(BATCH)]
        answer = self.bench.call_api("POST", "/jobs/batch", {"jobs": jobs})
        self.bench.drain("default")
        ids = [item["job"]["job_id"] for item in answer["body"]["results"] if item["status"] == 202]
        self.expect(len(ids) == BATCH, "not every job was accepted")
        self.expect(all(self.bench.status(i) == "SUCCEEDED" for i in ids), "not every job succeeded")


SCENARIOS: tuple[type[Scenario], ...] = (Plain, Deduplicated, Retried, Scheduled, Delayed, Batch)


# -- measuring --------------------------------------------------------------------------------


def measure(scenario: Scenario, recorder: Recorder, meter: CapacityMeter, timing_runs: int) -> dict[str, Any]:
    scenario.prepare()
    recorder.reset()
    meter.attach()
    meter.reset()
    scenario.run()
    tally = recorder.reset()
    usage = meter.usage
    writes, reads = list(meter.writes), list(meter.reads)
    meter.detach()
    getattr(scenario, "finish", lambda: None)()
    cpu: dict[str, list[float]] = {}
    for _ in range(timing_runs if scenario.jobs == 1 else max(1, timing_runs // 5)):
        scenario.prepare()
        recorder.reset()
        scenario.run()
        timed = recorder.reset()
        getattr(scenario, "finish", lambda: None)()
        for function, ms in timed.cpu_ms.items():
            cpu.setdefault(function, []).append(ms)

    calls: dict[str, dict[str, int]] = {}
    for (function, call), n in sorted(tally.calls.items()):
        calls.setdefault(function, {})[call] = n
    logs: dict[str, dict[str, int]] = {}
    for (function, kind), n in sorted(tally.log_bytes.items()):
        logs.setdefault(function, {})[kind] = n
    return {
        "description": scenario.description,
        "jobs": scenario.jobs,
        "invocations": dict(sorted(tally.invocations.items())),
        "calls": calls,
        "esm": {"deliveries": tally.deliveries, "acks": tally.acks},
        "dynamodb": {
            "write_units": usage.write_units,
            "table_write_units": usage.table_write_units,
            "index_write_units": dict(sorted(usage.index_write_units.items())),
            "read_units": usage.read_units,
            "writes": [
                {
                    "operation": w.operation,
                    "item": w.key.split("=", 1)[1].split("#", 1)[0],
                    "before_bytes": w.before_bytes,
                    "after_bytes": w.after_bytes,
                    "before_attribute_bytes": w.before_attribute_bytes,
                    "after_attribute_bytes": w.after_attribute_bytes,
                    "condition_failed": w.condition_failed,
                    "table_units": w.cost.table,
                    "index_units": w.cost.indexes,
                }
                for w in writes
            ],
            "reads": [
                {
                    "operation": r.operation,
                    "consistent": r.consistent,
                    "item_bytes": list(r.item_bytes),
                    "attribute_bytes": list(r.attribute_bytes),
                    "units": r.units,
                }
                for r in reads
            ],
        },
        "log_bytes": logs,
        "metric_names": sorted(tally.metric_names),
        "cpu_ms_median": {f: round(statistics.median(v), 2) for f, v in sorted(cpu.items())},
    }


def run(timing_runs: int) -> dict[str, Any]:
    _serve_one_at_a_time()
    recorder = Recorder()
    root = logging.getLogger()
    root.setLevel(logging.INFO)
    for kind, level in (
        ("json_info", logging.INFO),
        ("json_warning", logging.WARNING),
        ("runtime_info", logging.INFO),
        ("runtime_warning", logging.WARNING),
    ):
        root.addHandler(LogBytes(recorder, kind, level))
    registry = load_job_types(demo=True)
    if BENCH_SCHEDULE not in registry.schedules:
        schedule(BENCH_SCHEDULE, rate="1 hour", job="demo.echo", payload=PAYLOAD, overlap="skip")
    with mock_aws():
        bench = Bench(registry, recorder)
        # Warm-up: the first requests through each handler build caches (models, routes, clients).
        for _ in range(3):
            for kind in (Plain, Retried, Delayed):
                kind(bench).run()
        recorder.reset()
        results: dict[str, Any] = {}
        for kind in SCENARIOS:
            scenario = kind(bench)
            results[scenario.name] = measure(scenario, recorder, bench.meter, timing_runs)
            print(f"measured {scenario.name}", file=sys.stderr)
    return {
        "generated": datetime.now(UTC).strftime("%Y-%m-%d"),
        "by": "scripts/bench_calls.py (make bench-calls)",
        "moto": moto.__version__,
        "python": sys.version.split()[0],
        "payload_bytes": PAYLOAD_BYTES,
        "esm_batch_size_reported": ESM_BATCH,
        "scenarios": results,
    }


# -- the report -------------------------------------------------------------------------------


def number(value: float) -> str:
    text = f"{value:.3f}".rstrip("0").rstrip(".")
    return text or "0"


def per_job_calls(data: dict[str, Any]) -> list[tuple[str, str, str, str, str]]:
    rows = []
    for name, s in data["scenarios"].items():
        jobs = s["jobs"]
        functions = []
        scheduler = ""
        for function, calls in s["calls"].items():
            if function == "scheduler":
                scheduler = number(sum(calls.values()) / jobs)
                continue
            listed = ", ".join(f"{call} {number(n / jobs)}" for call, n in calls.items())
            functions.append(f"{function}: {listed}")
        esm = s["esm"]
        esm_text = (
            f"ReceiveMessage {number(esm['deliveries'] / ESM_BATCH / jobs)}, "
            f"DeleteMessageBatch {number(esm['acks'] / ESM_BATCH / jobs)}"
            if esm["deliveries"]
            else "-"
        )
        invocations = dict(s["invocations"])
        if esm["deliveries"]:
            invocations["worker"] = esm["deliveries"] / ESM_BATCH  # the mapping's batches of 10
        lambdas = ", ".join(f"{f} {number(n / jobs)}" for f, n in sorted(invocations.items()))
        rows.append((name, lambdas, "<br>".join(functions) or "-", esm_text, scheduler or "-"))
    return rows


def markdown(data: dict[str, Any]) -> str:
    lines = [
        BEGIN,
        "## AWS calls and DynamoDB capacity units per job",
        "",
        f"Measured {data['generated']} by `make bench-calls` (`scripts/bench_calls.py`): the real api, worker and "
        f"enqueue handlers in-process against moto {data['moto']}, Python {data['python']}. Per job; the batch "
        f"row is the batch's totals divided by {BATCH}. Job payloads are {data['payload_bytes']} bytes of JSON "
        "(demo.echo returns it as its result); every item stays under 1 KiB. The raw counts, with every write's "
        "item sizes, are in [measured_calls.json](measured_calls.json), which `offpath cost` reads.",
        "",
        "- Lambda invocations: worker invocations are counted per batch of 10 messages, as the event source "
        "mapping makes them at load (this run's single jobs had batches of one).",
        "- The event source mapping's ReceiveMessage and DeleteMessageBatch are billed SQS requests made for the "
        "worker; they are modelled as one of each per 10 messages delivered and deleted.",
        "- Scheduler: billed Scheduler invocations (a recurring firing, a one-time schedule's firing). "
        "CreateSchedule calls are not billed.",
        "- Write units follow DynamoDB's rules (`tooling/offpath_tools/write_units.py`): the table pays 1 per started "
        "KiB of the larger of the item before and after; the sparse `sweep` index (keys only) pays when an "
        "unfinished job enters it and when it leaves; a failed conditional write pays the existing item's size "
        "and nothing in the indexes. There is no listing index: a tenant's listing queries the table's own key "
        "(a keyed submit writes its idempotency key's record besides the job).",
        "",
        "Scenarios:",
        "",
        *(f"- **{name}**: {s['description']}" for name, s in data["scenarios"].items()),
        "",
        "| scenario | Lambda invocations | calls by the functions | event source mapping (batches of 10) | "
        "Scheduler invocations |",
        "|---|---|---|---|---|",
    ]
    lines += [f"| {a} | {b} | {c} | {d} | {e} |" for a, b, c, d, e in per_job_calls(data)]
    lines += [
        "",
        "| scenario | WRU table | WRU `sweep` | WRU total | RRU | failed conditional writes |",
        "|---|---|---|---|---|---|",
    ]
    for name, s in data["scenarios"].items():
        d, jobs = s["dynamodb"], s["jobs"]
        failed = sum(1 for w in d["writes"] if w["condition_failed"])
        lines.append(
            f"| {name} | {number(d['table_write_units'] / jobs)} | "
            f"{number(d['index_write_units'].get('sweep', 0) / jobs)} | {number(d['write_units'] / jobs)} | "
            f"{number(d['read_units'] / jobs)} | {number(failed / jobs)} |"
        )
    lines += [
        "",
        "Bytes written to CloudWatch Logs per job by the functions (all functions together): offpath's JSON log "
        "lines at INFO and at WARNING, the EMF metric lines, and the copy of each log record the Lambda Python "
        "runtime's own root handler writes in its text format (offpath's JSON handler is added beside it). "
        "Lambda's START/END/REPORT lines and API Gateway's access log are not included (see the cost model).",
        "",
        "| scenario | JSON at INFO | JSON at WARNING | EMF | runtime copy at INFO | runtime copy at WARNING |",
        "|---|---|---|---|---|---|",
    ]
    for name, s in data["scenarios"].items():
        totals: Counter[str] = Counter()
        for kinds in s["log_bytes"].values():
            totals.update(kinds)
        jobs = s["jobs"]
        lines.append(
            f"| {name} | {number(totals['json_info'] / jobs)} | {number(totals['json_warning'] / jobs)} | "
            f"{number(totals['emf'] / jobs)} | {number(totals['runtime_info'] / jobs)} | "
            f"{number(totals['runtime_warning'] / jobs)} |"
        )
    lines += [
        "",
        "Handler CPU time per scenario on the measuring machine (wall time in the handlers minus moto's, median of "
        "repeated unmetered runs; every job of the scenario, all its invocations). The cost model scales it to a "
        "Lambda's CPU share and adds the AWS calls' latency.",
        "",
        "| scenario | api ms | worker ms | enqueue ms |",
        "|---|---|---|---|",
    ]
    for name, s in data["scenarios"].items():
        cpu = s["cpu_ms_median"]
        lines.append(
            f"| {name} | {number(cpu.get('api', 0))} | {number(cpu.get('worker', 0))} | "
            f"{number(cpu.get('enqueue', 0))} |"
        )
    lines += ["", cost_doc.markdown(data).rstrip("\n"), END]
    return "\n".join(lines) + "\n"


def write_section(path: Path, section: str) -> None:
    """Replace the calls section of docs/benchmarks.md, keeping every other section."""
    text = path.read_text(encoding="utf-8") if path.exists() else "# Benchmarks\n"
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        tail = rest.split(END, 1)[1].lstrip("\n")
        text = head + section + ("\n" + tail if tail else "")
    else:
        text = text.rstrip("\n") + "\n\n" + section
    path.write_text(text, encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--timing-runs", type=int, default=25, help="unmetered repetitions timed per scenario")
    parser.add_argument("--no-write", action="store_true", help="print the table; write no file")
    parser.add_argument(
        "--price-only",
        action="store_true",
        help="measure nothing: write the section again from docs/measured_calls.json (after a change of prices)",
    )
    args = parser.parse_args(argv)
    if args.price_only:
        section = markdown(json.loads(MEASURED_JSON.read_text(encoding="utf-8")))
        if not args.no_write:
            write_section(BENCHMARKS_MD, section)
        print(section)
        return 0
    data = run(max(1, args.timing_runs))
    section = markdown(data)
    if args.no_write:
        print(section)
        return 0
    MEASURED_JSON.write_text(json.dumps(data, indent=1, sort_keys=False) + "\n", encoding="utf-8")
    write_section(BENCHMARKS_MD, section)
    print(section)
    print(f"wrote {MEASURED_JSON.relative_to(ROOT)} and {BENCHMARKS_MD.relative_to(ROOT)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
