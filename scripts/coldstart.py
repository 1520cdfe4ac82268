"""Cold start as the first caller feels it: each handler's init plus its first request, in a fresh process,
against the floor of a fresh process doing `import boto3`, creating the clients and making the same AWS calls.

The emulator is a moto server on 127.0.0.1 (offpath_local.emulator.Emulator, started by this script) holding
the stack's table and queues (offpath_local.resources.create_resources); every process below reaches it
through AWS_ENDPOINT_URL.

  api     handler:  import offpath.handlers.api, serve `POST /jobs` (demo.echo, 128-byte payload) -> 202
          floor:    import boto3, create a DynamoDB and an SQS client, PutItem + SendMessage
  worker  handler:  import offpath.handlers.worker, serve one SQS record of a QUEUED job (submitted by this
                    script beforehand) -> no batch item failure (the job SUCCEEDED)
          floor:    import boto3, create a DynamoDB client, two UpdateItem (the claim, the outcome), an SQS
                    client and one ChangeMessageVisibilityBatch (the hold of the batch's messages for the
                    lease, logic/process.py) - the calls the worker makes

The floor creates only the clients its calls need. Each process also reports its init alone (for a handler:
import + `default_services()`; for the floor: import boto3 + the clients); those "import-only" numbers are
printed beside the first-request ones, and the enqueue, sweeper, notifier and delivery handlers are measured that
way only (against `import boto3` and the clients their init creates on AWS). A last import-only row, `pydantic`, is no
handler: the api's import-only floor plus importing the asset's pydantic and validating one model, with no
offpath code at all, the least any handler that validates a payload with a pydantic model pays.

What is measured is the function asset as the stack bundles it (infra/lambda_function.py): offpath and the
pinned distributions with their unchecked-hash Python 3.13 bytecode, on the functions' Python, 3.13 (the tests'
environment, .venv/lambda-python: `make test-lambda-python`, which also brings the floor's boto3). The stack's
asset for AWS carries arm64 wheels (pydantic_core), which this machine cannot load unless it is arm64: the asset
measured is bundled the same way for this machine's architecture, from the same pinned versions (the asset
`-c target=localstack` deploys; `--asset DIR` measures a synthesized one, e.g. from cdk.out). The measured
processes write no bytecode (PYTHONDONTWRITEBYTECODE=1, as /var/task is read-only): the asset's own .pyc files
are all they have, as in Lambda. `--source-only` strips them, to measure an asset without bytecode.

Runs are interleaved (floor, handler, floor, ...) after one warm-up pair so drift on a noisy machine hits both;
the medians, their ratio and the machine's load (os.getloadavg) are printed. Times exclude the interpreter's
own start, which both sides pay alike. `--json` prints the numbers as JSON (read by write_benchmarks.py).

    .venv/bin/python scripts/coldstart.py [--runs 9] [--json] [--asset DIR | --functions DIR] [--source-only]

`--functions DIR` bundles another copy of the functions' source (for a before/after:
`git archive main functions | tar -x -C /tmp/before`, then `--functions /tmp/before/functions`).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from offpath.jobs import load_job_types
from offpath.naming import FUNCTION_ENVIRONMENT
from offpath_local.emulator import Emulator
from offpath_local.resources import Resources, create_resources
from offpath_tools.http_events import http_event

ROOT = Path(__file__).resolve().parent.parent
FUNCTIONS_DIR = ROOT / "functions"
# The tests' Python 3.13 environment (infra/lambda_function.py TEST_VENV_PYTHON).
LAMBDA_PYTHON = ROOT / ".venv" / "lambda-python" / "bin" / "python"
TARGET = 1.30
PAYLOAD = {"data": "x" * (128 - len('{"data":""}'))}
CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "coldstart",
    "AWS_SECRET_ACCESS_KEY": "coldstart",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_REGION": "us-east-1",
}
# What the stack gives every function beside the table and queues (infra/lambda_function.py), by name only.
STACK_ENVIRONMENT = {
    **FUNCTION_ENVIRONMENT,
    "OFFPATH_SCHEDULE_GROUP": "offpath-schedules",
    "OFFPATH_SCHEDULER_ROLE_ARN": "arn:aws:iam::123456789012:role/offpath-scheduler",
    "OFFPATH_ENQUEUE_FUNCTION_ARN": "arn:aws:lambda:us-east-1:123456789012:function:offpath-enqueue",
    "OFFPATH_DEMO_JOBS": "true",
}
# What Lambda itself sets in every function's environment and offpath reads: the function's name (on Lambda the
# collector is paused during the init, offpath.collector; the JSON log handler stands alone, offpath.observability).
LAMBDA_ENVIRONMENT = {"AWS_LAMBDA_FUNCTION_NAME": "offpath-coldstart"}

# -- the programs each fresh process runs (the event or record arrives on stdin, read before the clock starts)

API_PROGRAM = """
import json, sys, time
event = json.loads(sys.stdin.read())
t, c = time.perf_counter(), time.process_time()
import offpath.handlers.api as module
module.default_services()
init, init_cpu = time.perf_counter() - t, time.process_time() - c
response = module.handler(event, None)
total, total_cpu = time.perf_counter() - t, time.process_time() - c
assert response["statusCode"] == 202, response
print(json.dumps([init, total, init_cpu, total_cpu]))
"""

API_FLOOR = """
import json, sys, time, uuid
request = json.loads(sys.stdin.read())
t, c = time.perf_counter(), time.process_time()
import boto3
dynamodb = boto3.client("dynamodb")
sqs = boto3.client("sqs")
init, init_cpu = time.perf_counter() - t, time.process_time() - c
dynamodb.put_item(TableName=request["table"],
                  Item={"pk": {"S": "floor#" + uuid.uuid4().hex}, "sk": {"S": "#"}, "data": {"S": "x" * 128}},
                  ConditionExpression="attribute_not_exists(pk)")
sqs.send_message(QueueUrl=request["queue_url"], MessageBody=json.dumps({"job_id": uuid.uuid4().hex}))
total, total_cpu = time.perf_counter() - t, time.process_time() - c
print(json.dumps([init, total, init_cpu, total_cpu]))
"""

WORKER_PROGRAM = """
import json, sys, time
event = json.loads(sys.stdin.read())
t, c = time.perf_counter(), time.process_time()
import offpath.handlers.worker as module
module.default_services()
init, init_cpu = time.perf_counter() - t, time.process_time() - c
response = module.handler(event, None)
total, total_cpu = time.perf_counter() - t, time.process_time() - c
assert response == {"batchItemFailures": []}, response
print(json.dumps([init, total, init_cpu, total_cpu]))
"""

WORKER_FLOOR = """
import json, sys, time
request = json.loads(sys.stdin.read())
t, c = time.perf_counter(), time.process_time()
import boto3
dynamodb = boto3.client("dynamodb")
init, init_cpu = time.perf_counter() - t, time.process_time() - c
sqs = boto3.client("sqs")  # the worker makes its SQS client on first use, for the hold below
sqs.change_message_visibility_batch(QueueUrl=request["queue_url"], Entries=[
    {"Id": "0", "ReceiptHandle": request["receipt_handle"], "VisibilityTimeout": 300}])
for status in ("RUNNING", "SUCCEEDED"):
    dynamodb.update_item(TableName=request["table"], Key={"pk": {"S": "floor#worker"}, "sk": {"S": "#"}},
                         UpdateExpression="SET #s = :s ADD attempt :one",
                         ExpressionAttributeNames={"#s": "status"},
                         ExpressionAttributeValues={":s": {"S": status}, ":one": {"N": "1"}})
total, total_cpu = time.perf_counter() - t, time.process_time() - c
print(json.dumps([init, total, init_cpu, total_cpu]))
"""

IMPORT_PROGRAM = """
import json, time
t, c = time.perf_counter(), time.process_time()
import offpath.handlers.{name} as module
module.default_services()
print(json.dumps([time.perf_counter() - t, time.process_time() - c]))
"""

IMPORT_FLOOR = """
import json, time
t, c = time.perf_counter(), time.process_time()
import boto3
for service in {clients!r}:
    boto3.client(service)
print(json.dumps([time.perf_counter() - t, time.process_time() - c]))
"""

# The clients each import-only row's init creates on AWS, and what the stack gives that function beside
# STACK_ENVIRONMENT (infra/notices.py: the notifier puts events on the default bus; the delivery function opens
# sealed secrets with the stack's key).
DELIVERY_QUEUES = {
    "OFFPATH_DELIVERY_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/offpath-deliveries",
    "OFFPATH_DELIVERY_DLQ_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/offpath-deliveries-dlq",
}
IMPORT_ONLY: dict[str, tuple[list[str], dict[str, str]]] = {
    "enqueue": (["dynamodb", "sqs", "scheduler"], {}),
    "sweeper": (["dynamodb", "sqs", "scheduler"], {}),
    "notifier": (["events", "dynamodb"], {**DELIVERY_QUEUES, "OFFPATH_EVENT_BUS_NAME": "default"}),
    "delivery": (
        ["dynamodb", "kms"],
        {**DELIVERY_QUEUES, "OFFPATH_WEBHOOK_SECRETS_KEY": "arn:aws:kms:us-east-1:123456789012:key/offpath"},
    ),
}

# Not a handler: the api's import-only floor plus pydantic (the asset's) and one model validated, and no offpath
# code. The least any handler that validates a payload with a pydantic model pays over the floor.
PYDANTIC_CLIENTS = ["dynamodb", "sqs"]
PYDANTIC_PROGRAM = """
import json, time
t, c = time.perf_counter(), time.process_time()
import boto3
for service in {clients!r}:
    boto3.client(service)
from pydantic import BaseModel
class Payload(BaseModel):
    data: str
Payload.model_validate({{"data": "x"}})
print(json.dumps([time.perf_counter() - t, time.process_time() - c]))
"""
PYDANTIC_ROW = "pydantic"


def _pair(floor_s: float, handler_s: float) -> dict[str, float]:
    return {
        "floor_ms": round(floor_s * 1000, 1),
        "handler_ms": round(handler_s * 1000, 1),
        "ratio": round(handler_s / floor_s, 2),
    }


@dataclass
class Row:
    """Medians: for a first-request row [init, total, init CPU, total CPU]; for an import-only row [init,
    init CPU] (seconds)."""

    name: str
    floor: list[float]
    handler: list[float]

    def as_dict(self) -> dict[str, Any]:
        f, h = self.floor, self.handler
        if len(f) == 2:
            reference = {"reference": True} if self.name == PYDANTIC_ROW else {}
            return {
                "handler": self.name,
                **reference,
                "import_only": _pair(f[0], h[0]),
                "import_only_cpu": _pair(f[1], h[1]),
            }
        return {
            "handler": self.name,
            "first_request": _pair(f[1], h[1]),
            "first_request_cpu": _pair(f[3], h[3]),
            "import_only": _pair(f[0], h[0]),
            "import_only_cpu": _pair(f[2], h[2]),
        }


def _medians(runs: list[list[float]]) -> list[float]:
    return [statistics.median(column) for column in zip(*runs, strict=True)]


class Bench:
    def __init__(self, emulator: Emulator, resources: Resources, asset: Path, python: Path) -> None:
        self.emulator = emulator
        self.python = python
        self.resources = resources
        self.env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "OFFPATH_"))},
            **CREDENTIALS,
            **resources.environment(),
            **STACK_ENVIRONMENT,
            **LAMBDA_ENVIRONMENT,
            "OFFPATH_QUEUE_CLASS": "default",
            "AWS_ENDPOINT_URL": emulator.endpoint,
            "PYTHONPATH": str(asset),
            "PYTHONDONTWRITEBYTECODE": "1",
        }
        self.sqs = emulator.client("sqs")

    def run(self, program: str, stdin: str = "", env: dict[str, str] | None = None) -> list[float]:
        out = subprocess.run(
            [str(self.python), "-c", program],
            env={**self.env, **(env or {})},
            input=stdin,
            capture_output=True,
            text=True,
            check=False,
        )
        if out.returncode != 0:
            raise RuntimeError(f"a measured process failed:\n{out.stderr[-3000:]}")
        return [float(value) for value in json.loads(out.stdout.strip().splitlines()[-1])]

    def api_event(self) -> str:
        return json.dumps(http_event("POST", "/jobs", body={"type": "demo.echo", "payload": PAYLOAD}))

    def floor_request(self) -> str:
        queue_url = self.resources.queue_urls["default"]
        return json.dumps({"table": self.resources.table_name, "queue_url": queue_url})

    def worker_floor_request(self) -> str:
        """The floor's calls need a received message to hold, as the worker holds its record's: one is sent and
        received here, before the floor's process starts."""
        queue_url = self.resources.queue_urls["default"]
        self._drain(queue_url)
        self.sqs.send_message(QueueUrl=queue_url, MessageBody="{}")
        (message,) = self.sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=1, WaitTimeSeconds=1)["Messages"]
        return json.dumps({**json.loads(self.floor_request()), "receipt_handle": message["ReceiptHandle"]})

    def worker_event(self) -> str:
        """A QUEUED job's SQS record, as the event source mapping would deliver it: the job is submitted by a
        handler process of its own (this process imports no handler), and its message received here."""
        queue_url = self.resources.queue_urls["default"]
        self._drain(queue_url)
        self.run(API_PROGRAM, self.api_event())
        messages = self.sqs.receive_message(
            QueueUrl=queue_url, MaxNumberOfMessages=1, AttributeNames=["All"], WaitTimeSeconds=1
        ).get("Messages", [])
        if not messages:
            raise RuntimeError("the submitted job's message did not arrive")
        message = messages[0]
        record = {
            "messageId": message["MessageId"],
            "receiptHandle": message["ReceiptHandle"],
            "body": message["Body"],
            "attributes": message.get("Attributes", {}),
            "messageAttributes": {},
            "eventSource": "aws:sqs",
            "eventSourceARN": f"arn:aws:sqs:us-east-1:123456789012:{queue_url.rsplit('/', 1)[-1]}",
            "awsRegion": "us-east-1",
            "md5OfBody": message.get("MD5OfBody", ""),
        }
        return json.dumps({"Records": [record]})

    def _drain(self, queue_url: str) -> None:
        """Delete what the floor and earlier runs left on the queue (PurgeQueue is allowed once a minute)."""
        while messages := self.sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10).get("Messages"):
            entries = [{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(messages)]
            self.sqs.delete_message_batch(QueueUrl=queue_url, Entries=entries)

    def pair(self, name: str, runs: int) -> Row:
        handler_program, floor_program = (API_PROGRAM, API_FLOOR) if name == "api" else (WORKER_PROGRAM, WORKER_FLOOR)
        event = self.api_event if name == "api" else self.worker_event
        floor_request = self.floor_request if name == "api" else self.worker_floor_request
        floors: list[list[float]] = []
        handlers: list[list[float]] = []
        for index in range(runs + 1):  # the first pair warms the file cache and the .pyc files
            floor = self.run(floor_program, floor_request())
            handler = self.run(handler_program, event())
            if index:
                floors.append(floor)
                handlers.append(handler)
        return Row(name, _medians(floors), _medians(handlers))

    def import_only(
        self, name: str, clients: list[str], runs: int, program: str = IMPORT_PROGRAM, env: dict[str, str] | None = None
    ) -> Row:
        handler_program = program.format(name=name, clients=clients)
        floor_program = IMPORT_FLOOR.format(clients=clients)
        floors, handlers = [], []
        for index in range(runs + 1):
            floor, handler = self.run(floor_program, env=env), self.run(handler_program, env=env)
            if index:
                floors.append(floor)
                handlers.append(handler)
        return Row(name, _medians(floors), _medians(handlers))


PROFILE_WRAPPER = """
import cProfile, pstats, sys
program = {program!r}
profiler = cProfile.Profile()
profiler.enable()
exec(compile(program, "<measured>", "exec"), {{"__name__": "__main__"}})
profiler.disable()
stats = pstats.Stats(profiler, stream=sys.stderr)
stats.sort_stats({sort!r}).print_stats({limit})
print("[0]")
"""


def lambda_python() -> Path:
    """The functions' Python with boto3 beside it: the tests' Python 3.13 environment."""
    if not LAMBDA_PYTHON.is_file():
        raise SystemExit(f"{LAMBDA_PYTHON} is missing: make test-lambda-python creates it")
    return LAMBDA_PYTHON


def profile(name: str, sort: str, limit: int) -> str:
    """One handler process's init + first request under cProfile (its report, sorted by `sort`)."""
    with tempfile.TemporaryDirectory() as scratch:
        asset = prepared_asset(Path(scratch), None, FUNCTIONS_DIR, source_only=False)
        emulator = Emulator()
        emulator.start()
        try:
            registry = load_job_types(demo=True)
            resources = create_resources(emulator.client("dynamodb"), emulator.client("sqs"), registry)
            bench = Bench(emulator, resources, asset, lambda_python())
            program, event = (API_PROGRAM, bench.api_event) if name == "api" else (WORKER_PROGRAM, bench.worker_event)
            stdin = event()
            wrapped = PROFILE_WRAPPER.format(program=program, sort=sort, limit=limit)
            out = subprocess.run(
                [str(bench.python), "-c", wrapped],
                env=bench.env,
                input=stdin,
                capture_output=True,
                text=True,
                check=True,
            )
            return out.stderr
        finally:
            emulator.stop()


def prepared_asset(scratch: Path, asset: Path | None, functions: Path, source_only: bool) -> Path:
    """The asset to measure: a synthesized one, else `functions` bundled for this machine as the stack bundles
    it; without its bytecode with `source_only`."""
    if asset is None:
        asset = scratch / "asset"
        asset.mkdir()
        command = [sys.executable, "-m", "infra.lambda_asset", "--bundle", str(asset), "--source", str(functions)]
        subprocess.run(command, cwd=ROOT, check=True, stdout=sys.stderr)
    if not (asset / "offpath" / "handlers" / "api.py").is_file():
        raise SystemExit(f"{asset} is not the functions' asset (no offpath/handlers/api.py)")
    if source_only:
        copy = scratch / "source-only"
        shutil.copytree(asset, copy, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        asset = copy
    return asset


def measure(
    runs: int, functions: Path = FUNCTIONS_DIR, source_only: bool = False, asset: Path | None = None
) -> dict[str, Any]:
    python = lambda_python()
    with tempfile.TemporaryDirectory() as scratch:
        measured = prepared_asset(Path(scratch), asset, functions, source_only)
        result = _measure(runs, measured, python)
    version = subprocess.run(
        [str(python), "-c", "import platform; print(platform.python_version())"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    return {**result, "python": version, "bytecode": not source_only, "asset": str(asset) if asset else "bundled"}


def _measure(runs: int, asset: Path, python: Path) -> dict[str, Any]:
    emulator = Emulator()
    emulator.start()
    try:
        registry = load_job_types(demo=True)
        resources = create_resources(emulator.client("dynamodb"), emulator.client("sqs"), registry)
        bench = Bench(emulator, resources, asset, python)
        load_before = os.getloadavg()
        rows = [bench.pair("api", runs), bench.pair("worker", runs)]
        rows += [bench.import_only(name, clients, runs, env=env) for name, (clients, env) in IMPORT_ONLY.items()]
        rows.append(bench.import_only(PYDANTIC_ROW, PYDANTIC_CLIENTS, runs, PYDANTIC_PROGRAM))
        load_after = os.getloadavg()
    finally:
        emulator.stop()
    return {
        "runs": runs,
        "cpus": os.cpu_count(),
        "load_average_1m": [round(load_before[0], 2), round(load_after[0], 2)],
        "target": TARGET,
        "rows": [row.as_dict() for row in rows],
    }


def report(result: dict[str, Any]) -> str:
    before, after = result["load_average_1m"]
    lines = [
        f"python {result['python']}, {result['runs']} runs each, interleaved, after one warm-up pair; "
        f"1-minute load average {before:.2f} before, {after:.2f} after, on {result['cpus']} CPUs; "
        f"the asset ({result['asset']}) {'with' if result['bytecode'] else 'without'} its bytecode",
        "medians, ms: floor / handler = ratio (wall clock; CPU time of the process beside it)",
        f"{'handler':<9}{'init + first request':>28}{'(CPU)':>24}{'import only':>26}{'(CPU)':>24}",
    ]
    worst = 0.0

    def cell(pair: dict[str, float] | None) -> str:
        if pair is None:
            return f"{'-':>24}"
        return f"{pair['floor_ms']:>8.0f} /{pair['handler_ms']:>6.0f} = {pair['ratio']:.2f}"

    for row in result["rows"]:
        first = row.get("first_request")
        if first:
            worst = max(worst, first["ratio"])
        lines.append(
            f"{row['handler']:<9}{cell(first):>28}{cell(row.get('first_request_cpu')):>24}"
            f"{cell(row['import_only']):>26}{cell(row['import_only_cpu']):>24}"
        )
    lines.append(f"worst init + first request ratio {worst:.2f} (target <= {result['target']:.2f})")
    if any(row["handler"] == PYDANTIC_ROW for row in result["rows"]):
        lines.append(
            f"{PYDANTIC_ROW}: not a handler; boto3 and its two clients, then pydantic imported and one model "
            "validated, no offpath code: the least a handler validating with pydantic pays"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--json", action="store_true", help="print the numbers as JSON")
    parser.add_argument("--functions", type=Path, default=FUNCTIONS_DIR, help="the functions' source to bundle")
    parser.add_argument("--asset", type=Path, help="a synthesized asset directory to measure instead")
    parser.add_argument("--source-only", action="store_true", help="the asset without its bytecode")
    parser.add_argument("--profile", choices=["api", "worker"], help="profile one handler's cold start instead")
    parser.add_argument("--sort", default="cumulative", help="with --profile: the pstats sort key")
    parser.add_argument("--limit", type=int, default=60, help="with --profile: how many rows")
    args = parser.parse_args()
    if args.profile:
        print(profile(args.profile, args.sort, args.limit))
        return 0
    result = measure(args.runs, args.functions, args.source_only, args.asset)
    print(json.dumps(result, indent=2) if args.json else report(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
