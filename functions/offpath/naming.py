"""Resource names and table layout shared by the CDK stack and the local runtime (one place)."""

from __future__ import annotations

from dataclasses import dataclass

# The table's key: every item has both. A job is `JOB#<tenant>#<shard>` / its id (so a tenant's listing is a
# Query of the table itself, no index entry written); every other item is alone in its partition and has the
# constant sort key SOLE_SORT_KEY. The key-making functions: offpath.adapters.dynamodb_store (`item_key`).
TABLE_PARTITION_KEY = "pk"
TABLE_SORT_KEY = "sk"
TABLE_KEY = (TABLE_PARTITION_KEY, TABLE_SORT_KEY)
SOLE_SORT_KEY = "#"
# How many partitions one tenant's jobs are spread over (`JOB#<tenant>#<0..15>`, the shard from crc32 of the
# job id). A job's writes land at the newest end of its partition's key range (ids are time-ordered), so
# DynamoDB cannot split a partition for heat: one tenant's ceiling is JOB_SHARDS x 1,000 write units a
# second over the three writes of a job (docs/scale.md).
JOB_SHARDS = 16
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
    # A tenant's listing needs no index: the table's own key is `JOB#<tenant>#<shard>` / time-ordered job id.
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


def read_function_name(prefix: str) -> str:
    """The function that answers the job reads (`GET /jobs/{id}`, waits included): contract.READ_FUNCTION."""
    return f"{prefix}-read"


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


# -- notices (job events): the table's change stream, the notifier, webhook deliveries ------------------
# The job table's stream carries both images; the notifier reads it through an event source mapping
# filtered to job items (its records are turned into events by offpath.domain.events).
TABLE_STREAM_VIEW = "NEW_AND_OLD_IMAGES"
# Every job item's partition key starts with it (`JOB#<tenant>#<shard>`); no other item's does.
JOB_ITEM_PREFIX = "JOB#"
# The event source mapping's filter criteria (one pattern): inserts and changes of job items only.
NOTIFIER_STREAM_FILTER = {
    "eventName": ["INSERT", "MODIFY"],
    "dynamodb": {"NewImage": {TABLE_PARTITION_KEY: {"S": [{"prefix": JOB_ITEM_PREFIX}]}}},
}


@dataclass(frozen=True)
class StreamMapping:
    """The notifier's event source mapping on the table's stream, as the stack declares it and the embedded
    runtime plays it: records per batch; a failing batch is split in two (bisection) and retried up to
    `retry_attempts` times while its oldest record is younger than `max_record_age_s`; then a record of it goes
    to the on-failure queue and the shard moves on."""

    batch_size: int
    retry_attempts: int
    bisect_on_error: bool
    max_record_age_s: int


NOTIFIER_MAPPING = StreamMapping(batch_size=100, retry_attempts=10, bisect_on_error=True, max_record_age_s=6 * 3600)
# On AWS each event also goes to an EventBridge bus (stack context `event_bus`: "default", a name, or "off").
EVENT_SOURCE = "offpath"
EVENT_DETAIL_TYPE = "Job State Change"


def notifier_function_name(prefix: str) -> str:
    return f"{prefix}-notifier"


def delivery_function_name(prefix: str) -> str:
    return f"{prefix}-delivery"


def delivery_queue_name(prefix: str) -> str:
    return f"{prefix}-webhooks"


def delivery_dlq_name(prefix: str) -> str:
    return f"{prefix}-webhooks-dlq"


def notifier_failures_queue_name(prefix: str) -> str:
    """The notifier's on-failure destination: a record of each stream batch it gave up on."""
    return f"{prefix}-notifier-failures"


# Memory (MB) of the notifier and the delivery function, as the stack deploys them.
NOTICES_MEMORY_MB = {"notifier": 256, "delivery": 256}
# Realtime (AWS AppSync Events): the channel namespace browsers subscribe in, `/jobs/<tenant>/<job_id>`.
REALTIME_NAMESPACE = "jobs"
# Every function's environment beside the stack's settings (infra/lambda_function.py). Pydantic looks for
# plugins in every installed distribution's entry points when it builds its first model (6 ms of CPU with the
# 112 distributions of the development environment, less with the runtime's and the layer's); offpath uses none.
FUNCTION_ENVIRONMENT = {"PYDANTIC_DISABLE_PLUGINS": "__all__"}


# -- pause and resume (docs/flow-control.md) ------------------------------------------------------------------
# The one item that holds every paused queue class and job type (the source of truth of the pause state).
PAUSES_ITEM_KEY = "PAUSES"


def oldest_age_alarm_id(queue_class: str) -> str:
    """The queue's age alarm (infra/monitoring.py): a paused queue's is muted and shown as paused."""
    return f"{queue_class}-oldest-message-age"


def alarm_name(prefix: str, alarm_id: str) -> str:
    return f"{prefix}-{alarm_id}"
