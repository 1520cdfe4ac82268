"""A tenant's listing: its 16 shard queries one after another or together, and what a page reads.

The store (offpath.adapters.dynamodb_store) lists a tenant's jobs by querying each of the tenant's partitions of
the table and merging them. Two measurements of one page of GET /jobs (the store's `list_jobs`):

- its wall time, median over `--runs` pages, with the shard queries issued one by one (`listing_readers=1`) and
  together (16 threads), against a stand-in for DynamoDB's Query (`LatencyTable`: the same items, sorted, each
  answer after `--latency-ms`, as an in-region round trip takes some 3-10 ms). Not moto: moto spends tens of
  milliseconds of CPU on each query, which would hide the round trips being measured;
- the queries a page makes and the read units they consume, against moto (`mock_aws`, in-process), priced by
  offpath_tools.write_units.CapacityMeter (DynamoDB's rules: consistent reads, 4 KiB per unit of a query's
  summed item sizes).

    .venv/bin/python scripts/bench_listing.py [--jobs 2000] [--limit 50] [--latency-ms 8] [--runs 15]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "functions"), str(ROOT / "local"), str(ROOT / "tooling")]

import boto3  # noqa: E402
from moto import mock_aws  # noqa: E402

from offpath.adapters.dynamodb_store import DynamoDbJobStore, to_item  # noqa: E402
from offpath.domain.ids import new_job_id  # noqa: E402
from offpath.domain.job import Job, JobStatus  # noqa: E402
from offpath.naming import JOB_SHARDS  # noqa: E402
from offpath_local.resources import create_table  # noqa: E402
from offpath_tools.write_units import CapacityMeter  # noqa: E402

TABLE = "bench-listing"
TENANT = "tenant-big"
T0 = datetime(2026, 12, 1, tzinfo=UTC)


def jobs(count: int) -> list[Job]:
    made = []
    for n in range(count):
        created = T0 + timedelta(milliseconds=n)
        made.append(
            Job(
                job_id=new_job_id(created),
                tenant=TENANT,
                type="demo.echo",
                queue="default",
                payload={"message": "x" * 100},
                payload_hash="0" * 64,
                status=JobStatus.SUCCEEDED,
                created_at=created,
                updated_at=created,
                max_attempts=3,
                result={"message": "x" * 100},
            )
        )
    return made


class LatencyTable:
    """A stand-in for a DynamoDB client's Query on the table's key (equality on `pk`, newest first, Limit,
    ExclusiveStartKey): each answer after `latency_s`."""

    def __init__(self, items: list[dict[str, Any]], latency_s: float) -> None:
        self.latency_s = latency_s
        self.partitions: dict[str, list[dict[str, Any]]] = {}
        for item in items:
            self.partitions.setdefault(item["pk"]["S"], []).append(item)
        for partition in self.partitions.values():
            partition.sort(key=lambda item: item["sk"]["S"], reverse=True)

    def query(self, **request: Any) -> dict[str, Any]:
        time.sleep(self.latency_s)
        items = self.partitions.get(request["ExpressionAttributeValues"][":p"]["S"], [])
        start = request.get("ExclusiveStartKey")
        if start is not None:
            items = [item for item in items if item["sk"]["S"] < start["sk"]["S"]]
        page = items[: request["Limit"]]
        answer: dict[str, Any] = {"Items": page, "Count": len(page)}
        if len(items) > len(page):
            answer["LastEvaluatedKey"] = {"pk": page[-1]["pk"], "sk": page[-1]["sk"]}
        return answer


def page_time(store: DynamoDbJobStore, limit: int, runs: int) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        page = store.list_jobs(TENANT, status=None, job_type=None, limit=limit, cursor=None)
        times.append(time.perf_counter() - started)
        assert len(page.jobs) == limit
    return statistics.median(times) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--limit", type=int, default=50)
    parser.add_argument("--latency-ms", type=float, default=8.0)
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()

    items = [to_item(job) for job in jobs(args.jobs)]
    results: dict[str, Any] = {"jobs": args.jobs, "limit": args.limit, "latency_ms": args.latency_ms}
    table: Any = LatencyTable(items, args.latency_ms / 1000)
    for readers in (1, JOB_SHARDS):
        store = DynamoDbJobStore(TABLE, client=table, listing_readers=readers)
        page_time(store, args.limit, 2)  # warm: the pool's threads
        results[f"page_ms_readers_{readers}"] = round(page_time(store, args.limit, args.runs), 1)
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        create_table(client, TABLE)
        for item in items:
            client.put_item(TableName=TABLE, Item=item)
        meter = CapacityMeter(client, boto3.client("dynamodb", region_name="us-east-1")).attach()
        calls: list[str] = []
        client.meta.events.register("before-call.dynamodb", lambda model, **_: calls.append(model.name))
        DynamoDbJobStore(TABLE, client=client).list_jobs(
            TENANT, status=None, job_type=None, limit=args.limit, cursor=None
        )
        meter.detach()
        results["queries_per_page"] = calls.count("Query")
        results["other_calls_per_page"] = len(calls) - calls.count("Query")
        results["read_units_per_page"] = meter.usage.read_units
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
