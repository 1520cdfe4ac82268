"""Resource names and table layout shared by the CDK stack and the local runtime (one place)."""

from __future__ import annotations

TABLE_PARTITION_KEY = "pk"
TTL_ATTRIBUTE = "expires_at"
# (index name, partition key, sort key); every index projects all attributes.
TABLE_INDEXES = (
    ("by_tenant", "gsi1pk", "gsi_sk"),
    ("by_tenant_status", "gsi2pk", "gsi_sk"),
    # Sparse: only jobs the sweeper must look at again (not yet final) carry sweep_pk.
    ("sweep", "sweep_pk", "sweep_at"),
)
SCHEDULE_GROUP_SUFFIX = "schedules"
# What EventBridge Scheduler puts in the enqueue function's event (context attributes substituted).
SCHEDULED_TIME = "<aws.scheduler.scheduled-time>"
EXECUTION_ID = "<aws.scheduler.execution-id>"


def queue_name(prefix: str, queue_class: str) -> str:
    return f"{prefix}-{queue_class}"


def dlq_name(prefix: str, queue_class: str) -> str:
    return f"{prefix}-{queue_class}-dlq"
