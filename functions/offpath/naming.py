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
    # A tenant's jobs, newest first. Keys only: written once, when the job is created; a listing
    # reads its page's items and filters them by status and type.
    TableIndex("by_tenant", "gsi1pk", "gsi_sk", "KEYS_ONLY"),
    # Sparse: only unfinished jobs carry sweep_pk; keys only, so claims do not rewrite it.
    TableIndex("sweep", "sweep_pk", "sweep_at", "KEYS_ONLY"),
)
SCHEDULE_GROUP_SUFFIX = "schedules"
# Each function's memory (MB) as the stack deploys it; the cost model prices the same.
FUNCTION_MEMORY_MB = {"api": 512, "worker": 512, "enqueue": 512, "sweeper": 512}
# Retention of every function's log group and of the API access log, unless the stack's option says otherwise.
LOG_RETENTION_DAYS = 30
# What EventBridge Scheduler puts in the enqueue function's event (context attributes substituted).
SCHEDULED_TIME = "<aws.scheduler.scheduled-time>"
EXECUTION_ID = "<aws.scheduler.execution-id>"


def queue_name(prefix: str, queue_class: str) -> str:
    return f"{prefix}-{queue_class}"


def dlq_name(prefix: str, queue_class: str) -> str:
    return f"{prefix}-{queue_class}-dlq"


def api_function_name(prefix: str) -> str:
    return f"{prefix}-api"


def worker_function_name(prefix: str, queue_class: str) -> str:
    return f"{prefix}-worker-{queue_class}"


def enqueue_function_name(prefix: str) -> str:
    return f"{prefix}-enqueue"


def sweeper_function_name(prefix: str) -> str:
    return f"{prefix}-sweeper"


def schedule_group_name(prefix: str) -> str:
    return f"{prefix}-{SCHEDULE_GROUP_SUFFIX}"


SWEEP_EXPRESSION = "rate(1 minute)"
SWEEP_INPUT = {"kind": "sweep", "scheduled_time": SCHEDULED_TIME}


def recurring_input(schedule_name: str) -> dict[str, str]:
    """What the enqueue function receives for a declared schedule (docs/architecture.md)."""
    return {
        "kind": "recurring",
        "schedule": schedule_name,
        "scheduled_time": SCHEDULED_TIME,
        "execution_id": EXECUTION_ID,
    }


# Every function's environment beside the stack's settings (infra/lambda_function.py). Pydantic looks for
# plugins in every installed distribution's entry points when it builds its first model (6 ms of CPU with the
# 112 distributions of the development environment, less with the runtime's and the layer's); offpath uses none.
FUNCTION_ENVIRONMENT = {"PYDANTIC_DISABLE_PLUGINS": "__all__"}
