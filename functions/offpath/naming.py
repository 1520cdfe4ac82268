"""Resource names and table layout shared by the CDK stack and the local runtime (one place)."""

from __future__ import annotations

TABLE_PARTITION_KEY = "pk"
TTL_ATTRIBUTE = "expires_at"
# (index name, partition key, sort key); every index projects all attributes.
TABLE_INDEXES = (
    ("by_tenant", "gsi1pk", "gsi_sk"),
    ("by_tenant_status", "gsi2pk", "gsi_sk"),
)


def queue_name(prefix: str, queue_class: str) -> str:
    return f"{prefix}-{queue_class}"


def dlq_name(prefix: str, queue_class: str) -> str:
    return f"{prefix}-{queue_class}-dlq"
