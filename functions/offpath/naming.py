"""Resource names and table layout shared by the CDK stack and the local runtime (one place)."""

from __future__ import annotations

from dataclasses import dataclass

TABLE_PARTITION_KEY = "pk"
TTL_ATTRIBUTE = "expires_at"


@dataclass(frozen=True)
class TableIndex:
    """A global secondary index (string keys). Projections are kept small on purpose: an index is
    written again whenever a projected attribute changes, and every write unit is paid for."""

    name: str
    partition_key: str
    sort_key: str
    projection: str  # "KEYS_ONLY" or "INCLUDE"
    attributes: tuple[str, ...] = ()


TABLE_INDEXES = (
    # A tenant's jobs, newest first; status and type projected so listings can filter by them.
    TableIndex("by_tenant", "gsi1pk", "gsi_sk", "INCLUDE", ("status", "type")),
    # Sparse: only unfinished jobs carry sweep_pk; keys only, so claims do not rewrite it.
    TableIndex("sweep", "sweep_pk", "sweep_at", "KEYS_ONLY"),
)
SCHEDULE_GROUP_SUFFIX = "schedules"
# What EventBridge Scheduler puts in the enqueue function's event (context attributes substituted).
SCHEDULED_TIME = "<aws.scheduler.scheduled-time>"
EXECUTION_ID = "<aws.scheduler.execution-id>"


def queue_name(prefix: str, queue_class: str) -> str:
    return f"{prefix}-{queue_class}"


def dlq_name(prefix: str, queue_class: str) -> str:
    return f"{prefix}-{queue_class}-dlq"
