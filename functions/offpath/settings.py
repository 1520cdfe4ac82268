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

import dataclasses
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from functools import cached_property
from typing import Any

from offpath.domain.quotas import QuotaBook
from offpath.domain.quotas import parse as quota_book
from offpath.tenancy import CLAIM_NAME_PATTERN, DEFAULT_TENANT_CLAIMS

# The largest payload limit: a payload at it (measured as stored, UTF-8), a result at the worker's 64 KiB limit
# and the job's other attributes (well under 16 KB: key, error, progress message) keep the item under
# DynamoDB's 400 KB (tests/integration/test_trust_boundary.py writes such an item).
MAX_PAYLOAD_LIMIT_BYTES = 256 * 1024
PREFIX = "OFFPATH_"
_TRUE, _FALSE = {"1", "on", "t", "true", "y", "yes"}, {"0", "off", "f", "false", "n", "no"}


class SettingsError(ValueError):
    """A variable is missing or its value is refused; the message names the variable and what it takes."""


# How each field reads its value: from the environment's text, or as given in code (the tests, the local
# runtime). Each parser returns the field's value or raises ValueError saying what the field takes.
Parse = Callable[[Any], Any]


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError("must be text")
    return value


def _optional_text(value: Any) -> str | None:
    return None if value is None else _text(value)


def _number(kind: type[int] | type[float], low: float, high: float, *, low_open: bool = False) -> Parse:
    above = f"more than {low:g}" if low_open else f"from {low:g}"

    def parse(value: Any) -> int | float:
        try:
            if isinstance(value, bool) or not isinstance(value, str | int | float):
                raise ValueError
            number = kind(value.strip()) if isinstance(value, str) else value
            if kind is int and number != int(number):
                raise ValueError
            number = kind(number)
        except (TypeError, ValueError):
            raise ValueError(f"must be {'an integer' if kind is int else 'a number'} {above} to {high:g}") from None
        if not ((number > low if low_open else number >= low) and number <= high):  # NaN fails both
            raise ValueError(f"must be {above} to {high:g}, not {number:g}")
        return number

    return parse


def _optional(parse: Parse) -> Parse:
    return lambda value: None if value is None else parse(value)


def _flag(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    raise ValueError(f"must be one of {', '.join(sorted(_TRUE))} or {', '.join(sorted(_FALSE))}")


def _urls(value: Any) -> dict[str, str]:
    """A JSON object of names to text (queue class -> URL, queue class -> mapping UUID)."""
    try:
        parsed = json.loads(value) if isinstance(value, str) else value
    except ValueError:
        raise ValueError("must be a JSON object of names to text") from None
    if not isinstance(parsed, Mapping) or not all(isinstance(v, str) for v in parsed.values()):
        raise ValueError("must be a JSON object of names to text")
    return {str(k): v for k, v in parsed.items()}


def _names(value: Any) -> tuple[str, ...]:
    """Comma-separated text, or a sequence of text."""
    parts = value.split(",") if isinstance(value, str) else value
    if not isinstance(parts, list | tuple | set | frozenset) or not all(isinstance(p, str) for p in parts):
        raise ValueError("must be comma-separated names")
    return tuple(part.strip() for part in parts if part.strip())


def _claims(value: Any) -> tuple[str, ...]:
    names = _names(value)
    if not names:
        raise ValueError("must name at least one claim")
    for name in names:
        if not CLAIM_NAME_PATTERN.fullmatch(name):
            raise ValueError(f"tenant claim {name[:70]!r} must be 1 to 64 of A-Z a-z 0-9 _ : . -")
    return names


def _ports(value: Any) -> frozenset[int]:
    parts = value.split(",") if isinstance(value, str) else value
    try:
        ports = frozenset(int(part) for part in parts if not isinstance(part, str) or part.strip())
    except (TypeError, ValueError):
        raise ValueError("must be comma-separated port numbers") from None
    if not all(1 <= port <= 65535 for port in ports):
        raise ValueError("must be port numbers from 1 to 65535")
    return ports


def _one_of(*choices: str) -> Parse:
    def parse(value: Any) -> str:
        if value not in choices:
            raise ValueError(f"must be one of {', '.join(choices)}")
        return str(value)

    return parse


def _quotas(value: Any) -> str:
    quota_book(_text(value))  # refused here, with its reason, rather than at the first submit
    return str(value)


def _reads(parse: Parse) -> dict[str, Parse]:
    """A field's metadata: how it reads its value."""
    return {"parse": parse}


@dataclass(frozen=True)
class Settings:
    """Each field is `OFFPATH_<FIELD>` in the environment (the table above); given in code, a field takes its
    value's type or the environment's text for it."""

    table_name: str = field(metadata=_reads(_text))
    queue_urls: dict[str, str] = field(default_factory=dict, metadata=_reads(_urls))
    dlq_urls: dict[str, str] = field(default_factory=dict, metadata=_reads(_urls))
    queue_class: str | None = field(default=None, metadata=_reads(_optional_text))
    # Pause and resume: each queue class's event source mapping (its UUID), which a pause disables.
    queue_mappings: dict[str, str] = field(default_factory=dict, metadata=_reads(_urls))
    payload_limit_bytes: int = field(default=64 * 1024, metadata=_reads(_number(int, 1, MAX_PAYLOAD_LIMIT_BYTES)))
    retention_days: int = field(default=7, metadata=_reads(_number(int, 1, 365)))
    log_level: str = field(default="INFO", metadata=_reads(_text))
    schedule_group: str | None = field(default=None, metadata=_reads(_optional_text))
    scheduler_role_arn: str | None = field(default=None, metadata=_reads(_optional_text))
    enqueue_function_arn: str | None = field(default=None, metadata=_reads(_optional_text))
    schedule_dlq_arn: str | None = field(default=None, metadata=_reads(_optional_text))
    sweep_grace_s: int = field(default=120, metadata=_reads(_number(int, 1, 3600)))
    redrive_mode: str = field(default="move_task", metadata=_reads(_one_of("move_task", "copy")))
    tenant_claims: tuple[str, ...] = field(default=DEFAULT_TENANT_CLAIMS, metadata=_reads(_claims))
    admin_principals: tuple[str, ...] = field(default=(), metadata=_reads(_names))
    demo_jobs: bool = field(default=False, metadata=_reads(_flag))
    stack_prefix: str = field(default="offpath", metadata=_reads(_text))
    quotas: str = field(default="", metadata=_reads(_quotas))
    # GET /jobs/{id}?wait=N: the waits a tenant may hold at once, across environments (logic/waiting.py).
    waits_per_tenant: int = field(default=5, metadata=_reads(_number(int, 1, 1000)))
    # Notices (job events, webhooks).
    event_bus_name: str | None = field(default=None, metadata=_reads(_optional_text))
    delivery_queue_url: str | None = field(default=None, metadata=_reads(_optional_text))
    delivery_dlq_url: str | None = field(default=None, metadata=_reads(_optional_text))
    allow_loopback_receivers: bool = field(default=False, metadata=_reads(_flag))
    loopback_receiver_ports: frozenset[int] = field(default=frozenset(), metadata=_reads(_ports))
    webhook_secrets_key: str | None = field(default=None, metadata=_reads(_optional_text))
    webhook_retry_scale: float = field(default=1.0, metadata=_reads(_number(float, 0, 1, low_open=True)))
    # None: DELIVERY_TIMEOUT_S
    webhook_deadline_s: float | None = field(
        default=None, metadata=_reads(_optional(_number(float, 0, 30, low_open=True)))
    )
    # Realtime: the AppSync Events API's HTTP publish endpoint (absent: none).
    realtime_url: str | None = field(default=None, metadata=_reads(_optional_text))
    metrics_by_job_type: bool = field(default=False, metadata=_reads(_flag))

    def __post_init__(self) -> None:
        problems = []
        for spec in dataclasses.fields(self):
            try:
                object.__setattr__(self, spec.name, spec.metadata["parse"](getattr(self, spec.name)))
            except ValueError as error:
                problems.append(f"{PREFIX}{spec.name.upper()} {error}")
        if problems:
            raise SettingsError("; ".join(problems))

    @cached_property
    def quota_book(self) -> QuotaBook:
        return quota_book(self.quotas)

    @property
    def retention(self) -> timedelta:
        return timedelta(days=self.retention_days)

    @property
    def sweep_grace(self) -> timedelta:
        return timedelta(seconds=self.sweep_grace_s)

    def replace(self, **changes: Any) -> Settings:
        """These settings with some fields changed (each read as when given)."""
        return dataclasses.replace(self, **changes)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """The settings the `OFFPATH_` variables give; others, and `OFFPATH_` names that are no field, are
        ignored."""
        env = os.environ if environ is None else environ
        names = {spec.name for spec in dataclasses.fields(cls)}
        values = {key[len(PREFIX) :].lower(): value for key, value in env.items() if key.startswith(PREFIX)}
        if "table_name" not in values:
            raise SettingsError(f"{PREFIX}TABLE_NAME is required (the jobs table)")
        given: dict[str, Any] = {name: value for name, value in values.items() if name in names}
        return cls(**given)
