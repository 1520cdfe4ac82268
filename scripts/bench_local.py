"""End-to-end throughput of the embedded runtime, against the floor of the same AWS calls on the same emulator.

offpath:  demo.echo jobs submitted over HTTP (`POST /jobs`, keep-alive connections from client threads) until
          each is SUCCEEDED: API Gateway event -> api function -> PutItem + SendMessage; poller -> worker
          function -> claim UpdateItem + success UpdateItem -> DeleteMessageBatch.
floor:    the same AWS calls issued directly with boto3 against the same emulator, without offpath: PutItem +
          SendMessage per job from as many threads as clients; then ReceiveMessage (10) + two UpdateItem per
          message + DeleteMessageBatch from as many threads as the default queue's maximum concurrency, on a
          table and queue made like the runtime's, with items the size of a real job item.

Both run in this process (like the runtime itself), alternating rounds; the medians and their ratio are
printed (target: offpath >= 70% of the floor), with the submit latency (p50/p99: under the full load of the
throughput rounds, and for one client submitting alone) and the runtime's start-up time (cold: `offpath local`
in a new process until /health answers; warm: the runtime's own start).

    .venv/bin/python scripts/bench_local.py [--jobs 400] [--clients 8] [--rounds 2] [--json]
    make bench-local
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from offpath_local.job_events import JobEvent
from offpath_local.resources import create_table
from offpath_local.runtime import LocalConfig, LocalRuntime
from offpath_tools.launcher import OffpathLocal

TOKEN = "bench-token-0123456789"  # noqa: S105 - a local test token
TIMEOUT_S = 300.0


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


# -- offpath ----------------------------------------------------------------------------------


def run_offpath(runtime: LocalRuntime, jobs: int, clients: int, tag: str) -> dict[str, Any]:
    host, port = runtime.url.removeprefix("http://").split(":")
    pending: set[str] = set()
    done_at: dict[str, float] = {}
    early: dict[str, float] = {}
    lock = threading.Lock()
    all_done = threading.Event()

    def on_event(event: JobEvent) -> None:
        if event.status != "SUCCEEDED":
            return
        with lock:
            if event.job_id in pending:
                done_at[event.job_id] = time.perf_counter()
                if len(done_at) == jobs:
                    all_done.set()
            else:  # succeeded before its submit returned
                early[event.job_id] = time.perf_counter()

    unsubscribe = runtime.events.subscribe(on_event)
    latencies: list[float] = []
    counter = iter(range(jobs))
    errors: list[str] = []

    def client() -> None:
        connection = http.client.HTTPConnection(host, int(port), timeout=60)
        headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
        while True:
            with lock:
                index = next(counter, None)
            if index is None:
                break
            body = json.dumps({"type": "demo.echo", "payload": {"bench": tag, "n": index}})
            started = time.perf_counter()
            connection.request("POST", "/jobs", body=body, headers=headers)
            response = connection.getresponse()
            data = response.read()
            latencies.append(time.perf_counter() - started)
            if response.status != 202:
                errors.append(f"{response.status} {data[:200]!r}")
                continue
            job_id = json.loads(data)["job_id"]
            with lock:
                pending.add(job_id)
                if job_id in early:
                    done_at[job_id] = early.pop(job_id)
                    if len(done_at) == jobs:
                        all_done.set()
        connection.close()

    started = time.perf_counter()
    threads = [threading.Thread(target=client) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise RuntimeError(f"{len(errors)} submits refused, first: {errors[0]}")
    if not all_done.wait(TIMEOUT_S):
        raise RuntimeError(f"only {len(done_at)} of {jobs} jobs succeeded within {TIMEOUT_S} s")
    unsubscribe()
    elapsed = max(done_at.values()) - started
    return {"jobs_per_s": jobs / elapsed, "elapsed_s": elapsed, "latencies": latencies}


# -- the floor --------------------------------------------------------------------------------


def job_item_template(runtime: LocalRuntime) -> dict[str, Any]:
    """A real SUCCEEDED demo.echo item of the runtime's table, to size the floor's items alike."""
    dynamodb = runtime.emulator.client("dynamodb")
    assert runtime.resources is not None
    page = dynamodb.scan(TableName=runtime.resources.table_name, Limit=20)
    for item in page.get("Items", []):
        if item.get("type", {}).get("S") == "demo.echo":
            return dict(item)
    raise RuntimeError("no demo.echo item to copy")


def run_floor(runtime: LocalRuntime, jobs: int, clients: int, consumers: int, tag: str) -> dict[str, Any]:
    assert runtime.resources is not None
    dynamodb = runtime.emulator.client("dynamodb")
    sqs = runtime.emulator.client("sqs")
    table = f"bench-floor-{tag}"
    create_table(dynamodb, table)
    default_url = runtime.resources.queue_urls["default"]
    attributes = sqs.get_queue_attributes(QueueUrl=default_url, AttributeNames=["VisibilityTimeout"])["Attributes"]
    queue_url = sqs.create_queue(QueueName=f"bench-floor-{tag}", Attributes=attributes)["QueueUrl"]
    template = job_item_template(runtime)
    for key in ("result", "finished_at", "started_at", "lease_until"):
        template.pop(key, None)
    template["status"] = {"S": "QUEUED"}
    template["attempt"] = {"N": "0"}

    counter = iter(range(jobs))
    lock = threading.Lock()
    processed = [0]
    finished = threading.Event()
    last_done = [0.0]

    def producer() -> None:
        while True:
            with lock:
                index = next(counter, None)
            if index is None:
                return
            job_id = f"{tag}-{index:08d}"
            item = {**template, "pk": {"S": f"job#{job_id}"}, "sk": {"S": "#"}}
            dynamodb.put_item(TableName=table, Item=item, ConditionExpression="attribute_not_exists(pk)")
            sqs.send_message(QueueUrl=queue_url, MessageBody=json.dumps({"job_id": job_id, "type": "demo.echo"}))

    def claim(key: dict[str, Any]) -> bool:
        try:
            dynamodb.update_item(
                TableName=table,
                Key=key,
                UpdateExpression="SET #s = :running, attempt = attempt + :one",
                ConditionExpression="#s = :queued",
                ExpressionAttributeNames={"#s": "status"},
                ExpressionAttributeValues={
                    ":running": {"S": "RUNNING"},
                    ":queued": {"S": "QUEUED"},
                    ":one": {"N": "1"},
                },
                ReturnValues="ALL_NEW",
            )
        except dynamodb.exceptions.ConditionalCheckFailedException:
            return False
        return True

    def consumer() -> None:
        while not finished.is_set():
            messages = sqs.receive_message(
                QueueUrl=queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=1, AttributeNames=["All"]
            ).get("Messages", [])
            if not messages:
                continue
            claimed = 0
            for message in messages:
                key = {"pk": {"S": "job#" + json.loads(message["Body"])["job_id"]}, "sk": {"S": "#"}}
                if not claim(key):
                    continue  # delivered twice (moto's receives race, as SQS may deliver twice): claimed once
                claimed += 1
                dynamodb.update_item(
                    TableName=table,
                    Key=key,
                    UpdateExpression="SET #s = :done, #r = :result",
                    ConditionExpression="#s = :running",
                    ExpressionAttributeNames={"#s": "status", "#r": "result"},
                    ExpressionAttributeValues={
                        ":done": {"S": "SUCCEEDED"},
                        ":running": {"S": "RUNNING"},
                        ":result": {"S": json.dumps({"bench": tag})},
                    },
                )
            sqs.delete_message_batch(
                QueueUrl=queue_url,
                Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(messages)],
            )
            with lock:
                processed[0] += claimed
                if processed[0] >= jobs:
                    last_done[0] = time.perf_counter()
                    finished.set()

    started = time.perf_counter()
    workers = [threading.Thread(target=consumer) for _ in range(consumers)]
    producers = [threading.Thread(target=producer) for _ in range(clients)]
    for thread in workers + producers:
        thread.start()
    for thread in producers:
        thread.join()
    if not finished.wait(TIMEOUT_S):
        raise RuntimeError(f"the floor processed only {processed[0]} of {jobs} jobs")
    for thread in workers:
        thread.join()
    elapsed = last_done[0] - started
    return {"jobs_per_s": jobs / elapsed, "elapsed_s": elapsed}


# -- start-up ---------------------------------------------------------------------------------


def cold_start_s() -> float:
    """`offpath local` in a new process, until its /health answers."""
    with tempfile.TemporaryDirectory() as data:
        started = time.perf_counter()
        runtime = OffpathLocal.start(Path(data), args=["--quiet"])
        elapsed = time.perf_counter() - started
        runtime.stop()
        return elapsed


# -- main -------------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=400, help="jobs per round (default 400)")
    parser.add_argument("--clients", type=int, default=8, help="submitting threads (default 8)")
    parser.add_argument("--rounds", type=int, default=2, help="rounds of each, alternating (default 2)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args()

    cold = cold_start_s()
    data_dir = Path(tempfile.mkdtemp(prefix="offpath-bench-"))
    runtime = LocalRuntime(
        LocalConfig(port=0, data_dir=data_dir, tokens={"bench": TOKEN}, quiet=True, alarm_interval_s=5.0)
    )
    runtime.start()
    warm = runtime.started_in_s
    results: dict[str, list[dict[str, Any]]] = {"offpath": [], "floor": []}
    try:
        assert runtime.resources is not None
        from offpath.jobs import load_job_types

        consumers = load_job_types().queues["default"].max_concurrency
        run_offpath(runtime, min(50, args.jobs), args.clients, "warmup")
        idle = run_offpath(runtime, 50, 1, "idle")["latencies"]
        for round_ in range(args.rounds):
            results["offpath"].append(run_offpath(runtime, args.jobs, args.clients, f"o{round_}"))
            print(f"round {round_ + 1}: offpath {results['offpath'][-1]['jobs_per_s']:.1f} jobs/s", file=sys.stderr)
            results["floor"].append(run_floor(runtime, args.jobs, args.clients, consumers, f"f{round_}"))
            print(f"round {round_ + 1}: floor   {results['floor'][-1]['jobs_per_s']:.1f} jobs/s", file=sys.stderr)
    finally:
        runtime.stop()

    offpath = statistics.median(r["jobs_per_s"] for r in results["offpath"])
    floor = statistics.median(r["jobs_per_s"] for r in results["floor"])
    latencies = [value for r in results["offpath"] for value in r["latencies"]]
    summary = {
        "jobs_per_round": args.jobs,
        "clients": args.clients,
        "rounds": args.rounds,
        "offpath_jobs_per_s": round(offpath, 1),
        "floor_jobs_per_s": round(floor, 1),
        "ratio": round(offpath / floor, 3),
        "submit_latency_ms": {
            "p50": round(percentile(latencies, 0.50) * 1000, 1),
            "p99": round(percentile(latencies, 0.99) * 1000, 1),
        },
        "idle_submit_latency_ms": {
            "p50": round(percentile(idle, 0.50) * 1000, 1),
            "p99": round(percentile(idle, 0.99) * 1000, 1),
        },
        "startup_s": {"cold": round(cold, 2), "warm": round(warm, 2)},
    }
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(f"offpath (submit over HTTP -> SUCCEEDED): {summary['offpath_jobs_per_s']} jobs/s")
        print(f"floor (same AWS calls, same emulator):   {summary['floor_jobs_per_s']} jobs/s")
        print(f"ratio: {summary['ratio']:.0%} (target >= 70%)")
        latency, alone = summary["submit_latency_ms"], summary["idle_submit_latency_ms"]
        print(f"submit latency, {args.clients} clients at full load: p50 {latency['p50']} ms, p99 {latency['p99']} ms")
        print(f"submit latency, one client at a time: p50 {alone['p50']} ms, p99 {alone['p99']} ms")
        print(f"start-up: {summary['startup_s']['cold']} s cold (new process until /health), {warm:.2f} s warm")
    return 0


if __name__ == "__main__":
    sys.exit(main())
