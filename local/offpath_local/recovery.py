"""Jobs a previous run of the runtime left RUNNING are recovered at start, not at their lease's end.

A lease keeps a second worker off a job while its first one may still be working on it. In AWS a worker that
dies is recovered when its lease ends (the invocation's end + the lease margin: up to 12 minutes). Here the
data directory is locked by one runtime at a time (state.DataLock), so at start no worker of this runtime
holds a lease yet, and none of another run can still hold one: every RUNNING job in the restored table was
left so by a run that stopped (a kill -9, a batch given up after the stop's grace period). Its lease is ended
now, fenced on the attempt and the lease the restored item holds (a job that moved on is left alone), and the
job enters the sweep index due now; the runtime then runs the sweeper once, which requeues it (attempts
left, with a LEASE_EXPIRED attempt in its history) or fails it to the DLQ (none left), as it would at the
lease's end.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from offpath.adapters.dynamodb_store import attribute_values, from_item, iso, job_key, sweep_shard
from offpath.domain.job import JobStatus

logger = logging.getLogger("offpath.local.recovery")

JOB_PREFIX = "JOB#"


def left_running(items: Iterable[Mapping[str, Any]], partition_key: str) -> list[Any]:
    """The jobs among a snapshot's table items that are RUNNING (offpath.domain.job.Job)."""
    jobs = []
    for item in items:
        if not str((item.get(partition_key) or {}).get("S", "")).startswith(JOB_PREFIX):
            continue
        if (item.get("status") or {}).get("S") != JobStatus.RUNNING.value:
            continue
        try:
            jobs.append(from_item(item))
        except Exception:  # an item this version cannot read is left as it is; the sweeper meets it later
            logger.warning("a RUNNING item of the snapshot could not be read; its lease is left to end", exc_info=True)
    return jobs


def end_leases(dynamodb: Any, table_name: str, jobs: Iterable[Any], now: datetime) -> list[str]:
    """Ends each job's lease at `now` and makes it due in the sweep index, if it is still RUNNING at the attempt
    and lease it was read with. Returns the ids of the jobs whose lease was ended."""
    ended = []
    for job in jobs:
        if job.lease_until is None:
            continue
        try:
            dynamodb.update_item(
                TableName=table_name,
                Key=job_key(job.tenant, job.job_id),
                UpdateExpression="SET lease_until = :now, sweep_pk = :shard, sweep_at = :now",
                ConditionExpression="#s = :running AND attempt = :attempt AND lease_until = :lease",
                ExpressionAttributeNames={"#s": "status"},
                ExpressionAttributeValues=attribute_values(
                    {
                        ":now": iso(now),
                        ":shard": sweep_shard(job.job_id),
                        ":running": JobStatus.RUNNING.value,
                        ":attempt": job.attempt,
                        ":lease": iso(job.lease_until),
                    }
                ),
            )
        except dynamodb.exceptions.ConditionalCheckFailedException:
            continue  # it moved on since the snapshot was read
        ended.append(job.job_id)
    return ended
