"""The worker's overhead per job: a no-op job through the worker's logic against calling its function directly.

worker:  `offpath.logic.process.process_batch` over N QUEUED no-op jobs in batches of the default queue class's
         batch size, with the in-memory fakes of the ports (offpath_tools.fakes: InMemoryJobStore, InMemoryJobQueue,
         RecordingMetrics) and the system clock: parse the message, claim (a conditional update in the store),
         validate the payload, run the function within its timeout, record the success, count the metrics.
         Run on the main thread, as in Lambda, the timeout is a SIGALRM timer.
direct:  the same function called N times with a parsed payload and a context built once.

The difference is what offpath adds per job on top of the job's own work, without any AWS call (on AWS, the
claim and the success are two DynamoDB UpdateItem calls, which cost far more). Logs are at WARNING (nothing
written); `with logs` repeats the worker runs with the worker's INFO JSON logs and EMF metric lines written to
/dev/null, as the function writes them to CloudWatch Logs. Runs alternate; medians are printed.

    .venv/bin/python scripts/bench_worker_overhead.py [--jobs 2000] [--runs 7] [--json]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict

from offpath.domain.backoff import Backoff
from offpath.domain.clock import SystemClock
from offpath.domain.context import JobContext
from offpath.domain.job import Job, JobStatus
from offpath.domain.ports import JobMessage
from offpath.domain.registry import JobType, QueueClass, Registry
from offpath.logic.process import Delivery, WorkerPolicy, WorkerPorts, process_batch
from offpath.observability import EmfMetrics, configure_logging
from offpath_tools.fakes import InMemoryJobQueue, InMemoryJobStore, RecordingMetrics

JOB_TYPE = "bench.noop"
QUEUE = "default"
TENANT = "bench"
UNBOUNDED_MS = 15 * 60 * 1000


class NoopPayload(BaseModel):
    model_config = ConfigDict(extra="allow")


def noop(payload: NoopPayload, ctx: JobContext) -> None:
    return None


def registry() -> Registry:
    built = Registry(queues={QUEUE: QueueClass(QUEUE)})
    built.add_job_type(
        JobType(
            name=JOB_TYPE,
            function=noop,
            payload_model=NoopPayload,
            queue=QUEUE,
            max_attempts=3,
            timeout_s=30,
            backoff=Backoff(),
        )
    )
    return built


def queued_job(now: datetime) -> Job:
    return Job(
        job_id=uuid.uuid4().hex,
        tenant=TENANT,
        type=JOB_TYPE,
        queue=QUEUE,
        payload={"n": 1},
        payload_hash="bench",
        status=JobStatus.QUEUED,
        created_at=now,
        updated_at=now,
        max_attempts=3,
    )


def run_worker(jobs: int, metrics_factory: Callable[[], Any]) -> float:
    """Seconds per job through process_batch (the set-up of the store is not timed)."""
    clock = SystemClock()
    store = InMemoryJobStore()
    built = registry()
    ports = WorkerPorts(registry=built, store=store, queue=InMemoryJobQueue(), clock=clock, metrics=metrics_factory())
    policy = WorkerPolicy(queue=QUEUE)
    now = clock.now()
    deliveries = []
    for index in range(jobs):
        job = store.put(queued_job(now))
        deliveries.append(Delivery(f"m-{index}", f"rh-{index}", JobMessage.of(job).to_body()))
    size = built.queues[QUEUE].batch_size
    batches = [deliveries[i : i + size] for i in range(0, jobs, size)]

    started = time.perf_counter()
    for batch in batches:
        failures = process_batch(batch, ports, policy, lambda: UNBOUNDED_MS)
        ports.metrics.flush()  # as the worker handler does after each batch
        if failures:
            raise RuntimeError(f"{len(failures)} records of a batch were not acknowledged")
    elapsed = time.perf_counter() - started

    if any(job.status is not JobStatus.SUCCEEDED for job in store.jobs()):
        raise RuntimeError("not every job succeeded")
    return elapsed / jobs


def run_direct(jobs: int) -> float:
    """Seconds per call of the job function itself."""
    clock = SystemClock()
    store = InMemoryJobStore()
    job = store.put(queued_job(clock.now()))
    payload = NoopPayload.model_validate(job.payload)
    context = JobContext(
        job, store=store, clock=clock, remaining_ms=lambda: UNBOUNDED_MS, logger=logging.getLogger("bench")
    )
    started = time.perf_counter()
    for _ in range(jobs):
        noop(payload, context)
    return (time.perf_counter() - started) / jobs


def measure(jobs: int, runs: int) -> dict[str, Any]:
    devnull = open(os.devnull, "w")  # noqa: SIM115 - open for the whole measurement
    root = logging.getLogger()
    quiet_handlers, quiet_level = list(root.handlers), root.level
    samples: dict[str, list[float]] = {"worker": [], "direct": [], "worker_with_logs": []}
    try:
        run_worker(min(jobs, 200), RecordingMetrics)  # warm-up: imports, caches
        run_direct(jobs)
        for _ in range(runs):
            root.setLevel(logging.WARNING)
            samples["worker"].append(run_worker(jobs, RecordingMetrics))
            samples["direct"].append(run_direct(jobs))
            configure_logging("worker", "INFO", stream=devnull)
            samples["worker_with_logs"].append(run_worker(jobs, lambda: EmfMetrics("worker", stream=devnull)))
            root.handlers[:] = quiet_handlers
            root.setLevel(quiet_level)
    finally:
        root.handlers[:] = quiet_handlers
        root.setLevel(quiet_level)
        devnull.close()
    us = {name: [value * 1e6 for value in values] for name, values in samples.items()}
    median = {name: statistics.median(values) for name, values in us.items()}
    return {
        "jobs": jobs,
        "runs": runs,
        "batch_size": registry().queues[QUEUE].batch_size,
        "worker_us_per_job": round(median["worker"], 2),
        "direct_us_per_job": round(median["direct"], 3),
        "overhead_us_per_job": round(median["worker"] - median["direct"], 2),
        "worker_with_logs_us_per_job": round(median["worker_with_logs"], 2),
        "overhead_with_logs_us_per_job": round(median["worker_with_logs"] - median["direct"], 2),
        "worker_us_range": [round(min(us["worker"]), 2), round(max(us["worker"]), 2)],
        "worker_with_logs_us_range": [round(min(us["worker_with_logs"]), 2), round(max(us["worker_with_logs"]), 2)],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=2000, help="no-op jobs per run (default 2000)")
    parser.add_argument("--runs", type=int, default=7, help="runs of each, alternating (default 7)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args()
    result = measure(args.jobs, args.runs)
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"python {sys.version.split()[0]}; {args.jobs} no-op jobs per run in batches of {result['batch_size']};")
    print(f"{args.runs} runs of each, alternating; medians per job:")
    print(f"  the job function called directly          {result['direct_us_per_job']:>8.3f} us")
    print(f"  through process_batch (in-memory fakes)   {result['worker_us_per_job']:>8.2f} us")
    print(f"  worker overhead                           {result['overhead_us_per_job']:>8.2f} us")
    print(f"  worker overhead, INFO JSON logs + EMF     {result['overhead_with_logs_us_per_job']:>8.2f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
