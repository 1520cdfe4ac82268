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
| `OFFPATH_REDRIVE_MODE` | api | `move_task` (StartMessageMoveTask, default) or `copy` (for emulators) |
| `AWS_ENDPOINT_URL` | all | boto3's own: points every client at an emulator |
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from datetime import timedelta
from typing import Literal

from pydantic import BaseModel, Field, field_validator

# The largest payload limit: a payload at it (measured as stored, UTF-8), a result at the worker's 64 KiB limit
# and the job's other attributes (well under 16 KB: key, error, progress message) keep the item under
# DynamoDB's 400 KB (tests/integration/test_trust_boundary.py writes such an item).
MAX_PAYLOAD_LIMIT_BYTES = 256 * 1024


class Settings(BaseModel):
    table_name: str
    queue_urls: dict[str, str] = Field(default_factory=dict)
    dlq_urls: dict[str, str] = Field(default_factory=dict)
    queue_class: str | None = None
    payload_limit_bytes: int = Field(default=64 * 1024, ge=1, le=MAX_PAYLOAD_LIMIT_BYTES)
    retention_days: int = Field(default=7, ge=1, le=365)
    log_level: str = "INFO"
    schedule_group: str | None = None
    scheduler_role_arn: str | None = None
    enqueue_function_arn: str | None = None
    schedule_dlq_arn: str | None = None
    sweep_grace_s: int = Field(default=120, ge=1, le=3600)
    redrive_mode: Literal["move_task", "copy"] = "move_task"

    @field_validator("queue_urls", "dlq_urls", mode="before")
    @classmethod
    def _json_object(cls, value: object) -> object:
        return json.loads(value) if isinstance(value, str) else value

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
