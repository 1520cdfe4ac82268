"""Cold-start cost of each handler against the boto3 baseline, each measured in a fresh process.

handler:  import the handler module and build its services (the clients it creates at init).
baseline: `import boto3` and create the same clients, nothing else.
Runs are interleaved (baseline, handler, baseline, ...) so drift on a noisy machine hits both;
the medians and their ratio are printed. Nothing is sent anywhere: clients are only created.

    .venv/bin/python scripts/coldstart.py [--runs 7]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

ENVIRONMENT = {
    "AWS_ACCESS_KEY_ID": "x",
    "AWS_SECRET_ACCESS_KEY": "x",
    "AWS_DEFAULT_REGION": "us-east-1",
    "OFFPATH_TABLE_NAME": "offpath-jobs",
    "OFFPATH_QUEUE_URLS": json.dumps({"default": "https://sqs.us-east-1.amazonaws.com/1/offpath-default"}),
    "OFFPATH_DLQ_URLS": json.dumps({"default": "https://sqs.us-east-1.amazonaws.com/1/offpath-default-dlq"}),
    "OFFPATH_QUEUE_CLASS": "default",
    "OFFPATH_SCHEDULE_GROUP": "offpath-schedules",
    "OFFPATH_SCHEDULER_ROLE_ARN": "arn:aws:iam::1:role/scheduler",
    "OFFPATH_ENQUEUE_FUNCTION_ARN": "arn:aws:lambda:us-east-1:1:function:enqueue",
    "OFFPATH_LOG_LEVEL": "WARNING",
}

# handler module -> the clients its init creates
HANDLERS = {
    "api": ["dynamodb", "sqs", "scheduler"],
    "worker": ["dynamodb", "sqs"],
    "enqueue": ["dynamodb", "sqs", "scheduler"],
    "sweeper": ["dynamodb", "sqs", "scheduler"],
}

HANDLER_PROGRAM = """
import time
t = time.perf_counter()
import offpath.handlers.{name} as module
module.default_services()
print(time.perf_counter() - t)
"""

BASELINE_PROGRAM = """
import time
t = time.perf_counter()
import boto3
for service in {clients!r}:
    boto3.client(service)
print(time.perf_counter() - t)
"""


def run(program: str) -> float:
    env = {**os.environ, **ENVIRONMENT, "PYTHONPATH": str(ROOT / "functions"), "PYTHONDONTWRITEBYTECODE": "0"}
    out = subprocess.run([sys.executable, "-c", program], env=env, capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]}, {args.runs} runs each, interleaved, after one warm-up pair")
    print(f"{'handler':<10}{'baseline ms':>14}{'handler ms':>14}{'ratio':>9}")
    worst = 0.0
    for name, clients in HANDLERS.items():
        handler_program = HANDLER_PROGRAM.format(name=name)
        baseline_program = BASELINE_PROGRAM.format(clients=clients)
        run(baseline_program), run(handler_program)  # warm the file cache and .pyc files
        baseline, handler = [], []
        for _ in range(args.runs):
            baseline.append(run(baseline_program))
            handler.append(run(handler_program))
        b, h = statistics.median(baseline), statistics.median(handler)
        worst = max(worst, h / b)
        print(f"{name:<10}{b * 1000:>14.1f}{h * 1000:>14.1f}{h / b:>9.2f}")
    print(f"worst ratio {worst:.2f} (target <= 1.30)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
