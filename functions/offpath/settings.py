"""Configuration, read once per function from its environment (set by the CDK stack or the local runtime).

| variable | used by | meaning |
|---|---|---|
| `OFFPATH_TABLE_NAME` | all | the jobs table |
| `OFFPATH_QUEUE_URLS` | all | JSON object: queue class -> queue URL |
| `OFFPATH_DLQ_URLS` | all | JSON object: queue class -> DLQ URL |
| `OFFPATH_QUEUE_CLASS` | worker | the queue class this worker serves |
| `OFFPATH_PAYLOAD_LIMIT_BYTES` | api | largest accepted payload, as stored (default 65536, at most 262144) |
| `OFFPATH_RETENTION_DAYS` | all | how long finished jobs are kept (TTL, default 7) |
| `OFFPATH_LOG_LEVEL` | all | default INFO |
| `OFFPATH_SCHEDULE_GROUP` | api, enqueue, sweeper | the EventBridge Scheduler group for one-time schedules |
| `OFFPATH_SCHEDULER_ROLE_ARN` | api, sweeper | the role the Scheduler assumes to invoke the enqueue function |
| `OFFPATH_ENQUEUE_FUNCTION_ARN` | api, sweeper | the one-time schedules' target |
| `OFFPATH_SCHEDULE_DLQ_ARN` | api, sweeper | the one-time schedules' dead-letter queue |
| `OFFPATH_SWEEP_GRACE_S` | api, enqueue, sweeper | how long after a job is due the sweeper checks on it (default 120) |
| `OFFPATH_STACK_PREFIX` | api | the stack's name prefix, which its alarms' names start with (default offpath) |
| `OFFPATH_REDRIVE_MODE` | api | `move_task` (StartMessageMoveTask, default) or `copy` (for emulators) |
| `OFFPATH_TENANT_CLAIMS` | api | comma-separated JWT claims naming the tenant, first present wins (default `tenant`) |
| `OFFPATH_ADMIN_PRINCIPALS` | api | comma-separated IAM principal ARNs (users, roles) that are admins (default none) |
| `OFFPATH_QUOTAS` | all | tenant quotas: `TENANT:submits_per_s=N,open_jobs=M;*:...` (domain/quotas.py; default none) |
| `OFFPATH_WAITS_PER_TENANT` | api | the `GET /jobs/{id}?wait=N` a tenant may hold at once (default 5; 429 past it) |
| `OFFPATH_DEMO_JOBS` | all | `1`: the demo job types (`demo.*`) are loaded (default off; `offpath local` sets it) |
| `OFFPATH_EVENT_BUS_NAME` | notifier | the EventBridge bus job events are put on (absent: none) |
| `OFFPATH_DELIVERY_QUEUE_URL` | api, notifier, delivery | the webhook delivery queue |
| `OFFPATH_DELIVERY_DLQ_URL` | delivery | the delivery queue's DLQ (deliveries given up, with the reason) |
| `OFFPATH_ALLOW_LOOPBACK_RECEIVERS` | api, delivery | `1`: http://127.0.0.1 receivers allowed (local only) |
| `OFFPATH_LOOPBACK_RECEIVER_PORTS` | api, delivery | ports (comma-separated) of 127.0.0.1 receivers (local only) |
| `OFFPATH_WEBHOOK_SECRETS_KEY` | api, delivery | the KMS key sealing webhook signing secrets (absent: kept as given) |
| `OFFPATH_WEBHOOK_RETRY_SCALE` | delivery | retry schedule factor (default 1; shorter in tests) |
| `OFFPATH_WEBHOOK_DEADLINE_S` | delivery | a delivery's whole time: connect, send, read (default 10) |
| `OFFPATH_REALTIME_URL` | notifier | the AppSync Events API's HTTP endpoint events are published to (absent: none) |
| `OFFPATH_METRICS_BY_JOB_TYPE` | all | `1`: EMF metrics per (queue, job type) too (grows with job types; default off) |
| `OFFPATH_QUEUE_MAPPINGS` | api | JSON object: queue class -> its SQS event source mapping's UUID (paused: off) |
| `AWS_ENDPOINT_URL` | all | boto3's own: points every client at an emulator |
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from datetime import timedelta
from typing import Literal

from pydantic import BaseModel, Field, field_validator

from offpath.domain.quotas import QuotaBook
from offpath.domain.quotas import parse as quota_book
from offpath.tenancy import CLAIM_NAME_PATTERN, DEFAULT_TENANT_CLAIMS

# The largest payload limit: a payload at it (measured as stored, UTF-8), a result at the worker's 64 KiB limit
# and the job's other attributes (well under 16 KB: key, error, progress message) keep the item under
# DynamoDB's 400 KB (tests/integration/test_trust_boundary.py writes such an item).
MAX_PAYLOAD_LIMIT_BYTES = 256 * 1024


class Settings(BaseModel):
    table_name: str
    queue_urls: dict[str, str] = Field(default_factory=dict)
    dlq_urls: dict[str, str] = Field(default_factory=dict)
    queue_class: str | None = None
    # Pause and resume: each queue class's event source mapping (its UUID), which a pause disables.
    queue_mappings: dict[str, str] = Field(default_factory=dict)
    payload_limit_bytes: int = Field(default=64 * 1024, ge=1, le=MAX_PAYLOAD_LIMIT_BYTES)
    retention_days: int = Field(default=7, ge=1, le=365)
    log_level: str = "INFO"
    schedule_group: str | None = None
    scheduler_role_arn: str | None = None
    enqueue_function_arn: str | None = None
    schedule_dlq_arn: str | None = None
    sweep_grace_s: int = Field(default=120, ge=1, le=3600)
    redrive_mode: Literal["move_task", "copy"] = "move_task"
    tenant_claims: tuple[str, ...] = Field(default=DEFAULT_TENANT_CLAIMS, min_length=1)
    admin_principals: tuple[str, ...] = ()
    demo_jobs: bool = False
    stack_prefix: str = "offpath"
    quotas: str = ""
    # GET /jobs/{id}?wait=N: the waits a tenant may hold at once, across environments (logic/waiting.py).
    waits_per_tenant: int = Field(default=5, ge=1, le=1000)

    @field_validator("quotas")
    @classmethod
    def _quota_text(cls, value: str) -> str:
        quota_book(value)  # refused here, with its reason, rather than at the first submit
        return value

    @property
    def quota_book(self) -> QuotaBook:
        return quota_book(self.quotas)

    # Notices (job events, webhooks).
    event_bus_name: str | None = None
    delivery_queue_url: str | None = None
    delivery_dlq_url: str | None = None
    allow_loopback_receivers: bool = False
    loopback_receiver_ports: frozenset[int] = frozenset()
    webhook_secrets_key: str | None = None
    webhook_retry_scale: float = Field(default=1.0, gt=0, le=1)
    webhook_deadline_s: float | None = Field(default=None, gt=0, le=30)  # None: DELIVERY_TIMEOUT_S
    # Realtime: the AppSync Events API's HTTP publish endpoint (absent: none).
    realtime_url: str | None = None
    metrics_by_job_type: bool = False

    @field_validator("queue_urls", "dlq_urls", "queue_mappings", mode="before")
    @classmethod
    def _json_object(cls, value: object) -> object:
        return json.loads(value) if isinstance(value, str) else value

    @field_validator("loopback_receiver_ports", mode="before")
    @classmethod
    def _ports(cls, value: object) -> object:
        if isinstance(value, str):
            return frozenset(int(part) for part in value.split(",") if part.strip())
        return value

    @field_validator("tenant_claims", "admin_principals", mode="before")
    @classmethod
    def _comma_separated(cls, value: object) -> object:
        if isinstance(value, str):
            return tuple(part.strip() for part in value.split(",") if part.strip())
        return value

    @field_validator("tenant_claims")
    @classmethod
    def _claim_names(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for name in value:
            if not CLAIM_NAME_PATTERN.fullmatch(name):
                raise ValueError(f"tenant claim {name[:70]!r} must be 1 to 64 of A-Z a-z 0-9 _ : . -")
        return value

    @property
    def retention(self) -> timedelta:
        return timedelta(days=self.retention_days)

    @property
    def sweep_grace(self) -> timedelta:
        return timedelta(seconds=self.sweep_grace_s)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if environ is None else environ
        prefix = "OFFPATH_"
        values = {key[len(prefix) :].lower(): value for key, value in env.items() if key.startswith(prefix)}
        return cls.model_validate(values)
