"""The deployment's options, read once from CDK context (`cdk.json`, or `-c key=value` on the command line).

- `target` (default `aws`): where the stack is deployed. `localstack` (localstack/README.md): the functions run
  on Python 3.13 on this machine's architecture (the asset's compiled packages, pydantic_core, are that
  architecture's wheels of the same pinned versions), not on arm64.
- `prefix` (default `offpath`): the stack name and the prefix of every named resource, at most 20 characters.
  Two deployments in one account and region need two prefixes.
- `jwt_issuer` and `jwt_audience` (comma-separated): both given, a JWT authorizer replaces IAM authorisation.
- `alarm_email`: an e-mail address subscribed to the alarm topic.
- `deletion_protection` (default `true`): the jobs table's deletion protection; `false` also lets
  `cdk destroy` delete the table.
- `retention_days` (default 7): how long finished jobs are kept (`OFFPATH_RETENTION_DAYS`, the table's TTL).
- `log_retention_days` (default 30): retention of every function's log group and of the API access log
  (1, 3, 5, 7, 14, 30, 60, 90, 180 or 365).
- `log_level` (default `WARNING`): the functions' log level. At `INFO` every job adds its lines (~520 bytes a
  job, $0.26 per million jobs in CloudWatch Logs); warnings and errors are always written.
- `payload_limit_bytes` (default 65536): the largest accepted job payload.
- `api_rate_limit`, `api_burst_limit` (default 50, 100): the API stage's default throttling.
- `tenant_claims` (comma-separated, default `tenant`): the JWT claims that name the tenant, the first the token
  carries wins. Add `sub` only if every subject of the issuer may be a tenant of its own; a Cognito
  `custom:` attribute only if the app client cannot write it.
- `admin_principals` (comma-separated IAM principal ARNs: users, roles, assumed roles): with IAM authorisation,
  the callers that are admins. Everyone else is a tenant, whatever routes their policy grants.
- `demo_jobs` (default `false`): deploy the demo job types (`demo.*`).
- `quotas` (default none): the tenants' quotas, `TENANT:submits_per_s=N,burst=B,open_jobs=M,delayed_jobs=K`
  entries separated by `;`, `*` for the default (offpath/domain/quotas.py); every function's `OFFPATH_QUOTAS`.
- `api_reserved_concurrency` (default 100), `enqueue_reserved_concurrency` (default 10): reserved concurrency
  of the api and enqueue functions (0: none). The account keeps at least 100 unreserved (Lambda's rule).
- `read_reserved_concurrency` (default 50; 0: none): the read function's (`GET /jobs/{id}`, waits included),
  apart from the api's, so waits never take the environments submits need. Each tenant holds at most
  `waits_per_tenant` (default 5) waits at once, so no one tenant takes more than that many of them.
- `waits_per_tenant` (default 5): the waits (`GET /jobs/{id}?wait=N`) a tenant may hold at once (429 past it).
- `batch_rate_limit`, `batch_burst_limit` (default 5, 10): the stage's throttling of `POST /jobs/batch` (up to
  100 jobs each), apart from the stage's default for every other route.
- `table_max_read_units`, `table_max_write_units` (default 12000, 4000; 0: no maximum): the table's and each
  index's on-demand maximum throughput (request units a second).
- `monthly_budget_usd` (default 0: no budget) and `budget_email` (default: `alarm_email`): an AWS Budgets cost
  budget for the account, mailing at 80% of the actual and 100% of the forecast monthly spend.
- `metrics_by_job_type` (default `false`): EMF metrics also per (queue, job type). Off, each metric name is
  published per queue and overall, so custom metrics ($0.30 a month each) stay bounded as job types are added;
  on, they grow by (metric names x job types x queues): `offpath cost --job-types N --metrics-by-job-type`.
- `snapstart` (default `false`): Lambda SnapStart on every function. Each deploy publishes a version per function
  and points an alias `live` at it; the API integration, the event source mappings and the schedules invoke the
  alias. Init runs once per version and new environments are restored from its snapshot
  (offpath/snapstart.py re-seeds randomness and drops pooled connections after a restore). Priced by
  `offpath cost --snapstart`: a cache charge per version and memory, a restore charge per cold start. Not on
  `target=localstack`.
- `tracing` (default `false`): active X-Ray tracing on every function. Off by default: at low volume it
  records about one trace per invocation, ~$5 per million jobs, as much as the rest of the pipeline.
- `otel` (default `false`): OpenTelemetry on every function through the AWS Distro for OpenTelemetry (ADOT) Python
  layer: the layer, `AWS_LAMBDA_EXEC_WRAPPER=/opt/otel-instrument` and active X-Ray tracing (ADOT exports its
  spans to X-Ray). The layer is pinned: ADOT Python SDK 1.29.0, its ARN per region from a mapping in the
  template (aws_cdk's own table), never a "latest" looked up at deploy time; `otel_layer_arn` (a full layer
  version ARN, in the stack's region) replaces it. Off by default: X-Ray charges per trace, as `tracing` does
  (`offpath cost --otel`). Not on `target=localstack`.
- `event_bus` (default `off`): where the notifier puts every job event (source `offpath`, detail-type
  `Job State Change`): `default` the account's default bus, another name a new bus of that name, `off` none.
  Off by default: EventBridge charges $1.00 a million events, three a plain job ($3.00 a million jobs).
- `realtime` (default `false`): an AWS AppSync Events API a browser subscribes to for its tenant's job events
  (channel `/jobs/<tenant>/<job_id>`), the notifier publishing to it. Needs the JWT authorizer (`jwt_issuer`,
  `jwt_audience`): a browser connects with the same token it calls the API with, and may subscribe only to
  its own tenant's channels (docs/realtime.md).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

from aws_cdk import aws_logs as logs

from offpath.naming import LOG_RETENTION_DAYS
from offpath.tenancy import CLAIM_NAME_PATTERN, DEFAULT_TENANT_CLAIMS, IAM_PRINCIPAL_PATTERN

TRUE_WORDS = frozenset({"1", "true", "yes", "on"})
FALSE_WORDS = frozenset({"0", "false", "no", "off"})
TARGETS = ("aws", "localstack")
# Options there were once and are no more: given, the synth stops and says why instead of ignoring them.
REMOVED = {
    "powertools_layer_arn": "the functions use no layer: the asset bundles pydantic, pinned (docs/decisions.md)",
}
# Room for the longest derived name: a worker function, "<prefix>-worker-<queue class>", has at most 64 characters.
# An EventBridge bus name; `default` and `off` are read as the default bus and no bus.
EVENT_BUS_PATTERN = re.compile(r"[A-Za-z0-9._/-]{1,256}")
EVENT_BUS_OFF = "off"
EVENT_BUS_DEFAULT = "default"
# A Lambda layer version's ARN, its version number included (a layer is pinned, never "latest").
LAYER_VERSION_ARN = re.compile(r"arn:aws[a-z-]*:lambda:[a-z0-9-]+:\d{12}:layer:[A-Za-z0-9_-]{1,140}:\d{1,9}")
PREFIX_PATTERN = re.compile(r"^[a-z][a-z0-9-]{0,19}$")
LOG_RETENTION = {
    1: logs.RetentionDays.ONE_DAY,
    3: logs.RetentionDays.THREE_DAYS,
    5: logs.RetentionDays.FIVE_DAYS,
    7: logs.RetentionDays.ONE_WEEK,
    14: logs.RetentionDays.TWO_WEEKS,
    30: logs.RetentionDays.ONE_MONTH,
    60: logs.RetentionDays.TWO_MONTHS,
    90: logs.RetentionDays.THREE_MONTHS,
    180: logs.RetentionDays.SIX_MONTHS,
    365: logs.RetentionDays.ONE_YEAR,
}


class OptionsError(ValueError):
    """A context value that cannot be used; the message names the key."""


@dataclass(frozen=True)
class StackOptions:
    target: str = "aws"
    prefix: str = "offpath"
    jwt_issuer: str | None = None
    jwt_audience: tuple[str, ...] = ()
    alarm_email: str | None = None
    deletion_protection: bool = True
    retention_days: int = 7
    log_retention_days: int = LOG_RETENTION_DAYS
    log_level: str = "WARNING"
    payload_limit_bytes: int = 64 * 1024
    api_rate_limit: int = 50
    api_burst_limit: int = 100
    tracing: bool = False
    otel: bool = False
    otel_layer_arn: str | None = None
    tenant_claims: tuple[str, ...] = DEFAULT_TENANT_CLAIMS
    admin_principals: tuple[str, ...] = ()
    demo_jobs: bool = False
    quotas: str | None = None
    api_reserved_concurrency: int = 100
    read_reserved_concurrency: int = 50
    waits_per_tenant: int = 5
    enqueue_reserved_concurrency: int = 10
    batch_rate_limit: int = 5
    batch_burst_limit: int = 10
    table_max_read_units: int = 12_000
    table_max_write_units: int = 4_000
    monthly_budget_usd: int = 0
    budget_email: str | None = None
    event_bus: str = "off"
    realtime: bool = False
    snapstart: bool = False
    metrics_by_job_type: bool = False

    def __post_init__(self) -> None:
        self._check_guards()
        if self.target not in TARGETS:
            raise OptionsError(f"target must be one of {', '.join(TARGETS)}, not {self.target!r}")
        if self.localstack and self.snapstart:
            raise OptionsError("snapstart does not apply to target localstack")
        if self.localstack and self.otel:
            raise OptionsError("otel does not apply to target localstack (no ADOT layer there)")
        if self.otel_layer_arn is not None and not LAYER_VERSION_ARN.fullmatch(self.otel_layer_arn):
            raise OptionsError(
                "otel_layer_arn must be a layer version ARN with its version number "
                f"(arn:aws:lambda:REGION:ACCOUNT:layer:NAME:VERSION), not {self.otel_layer_arn[:120]!r}"
            )
        if self.otel_layer_arn is not None and not self.otel:
            raise OptionsError("otel_layer_arn applies only with otel=true")
        if not PREFIX_PATTERN.match(self.prefix):
            raise OptionsError(f"prefix {self.prefix!r} must match {PREFIX_PATTERN.pattern}")
        if bool(self.jwt_issuer) != bool(self.jwt_audience):
            raise OptionsError("give both jwt_issuer and jwt_audience, or neither")
        if self.jwt_issuer is not None and not self.jwt_issuer.startswith("https://"):
            raise OptionsError("jwt_issuer must be an https:// URL")
        if not 1 <= self.retention_days <= 365:
            raise OptionsError("retention_days must be 1..365")
        if self.log_retention_days not in LOG_RETENTION:
            raise OptionsError(f"log_retention_days must be one of {', '.join(map(str, LOG_RETENTION))}")
        if not 1 <= self.payload_limit_bytes <= 256 * 1024:
            raise OptionsError("payload_limit_bytes must be 1..262144")
        if self.api_rate_limit < 1 or self.api_burst_limit < 1:
            raise OptionsError("api_rate_limit and api_burst_limit must be positive")
        if not self.tenant_claims:
            raise OptionsError("tenant_claims must name at least one claim")
        for claim in self.tenant_claims:
            if not CLAIM_NAME_PATTERN.fullmatch(claim):
                raise OptionsError(f"tenant_claims: {claim[:70]!r} must be 1 to 64 of A-Z a-z 0-9 _ : . -")
        if not EVENT_BUS_PATTERN.fullmatch(self.event_bus) or self.event_bus.startswith("aws."):
            raise OptionsError(
                "event_bus must be default, off or a bus name (1 to 256 of A-Z a-z 0-9 . _ - /, not aws.), "
                f"not {self.event_bus!r}"
            )
        if self.realtime and not self.jwt:
            raise OptionsError("realtime needs jwt_issuer and jwt_audience: browsers subscribe with their JWT")
        for principal in self.admin_principals:
            if not IAM_PRINCIPAL_PATTERN.fullmatch(principal):
                raise OptionsError(
                    f"admin_principals: {principal[:100]!r} is not an IAM principal ARN "
                    "(arn:aws:iam::ACCOUNT:user/NAME or arn:aws:iam::ACCOUNT:role/NAME)"
                )

    def _check_guards(self) -> None:
        from offpath.domain.quotas import QuotaSpecError, parse

        try:
            parse(self.quotas)
        except QuotaSpecError as error:
            raise OptionsError(f"quotas: {error}") from None
        for name in (
            "api_reserved_concurrency",
            "read_reserved_concurrency",
            "enqueue_reserved_concurrency",
            "table_max_read_units",
            "table_max_write_units",
            "monthly_budget_usd",
        ):
            if getattr(self, name) < 0:
                raise OptionsError(f"{name} must be 0 (none) or more")
        if not 1 <= self.waits_per_tenant <= 1000:
            raise OptionsError("waits_per_tenant must be from 1 to 1000")
        if self.batch_rate_limit < 1 or self.batch_burst_limit < 1:
            raise OptionsError("batch_rate_limit and batch_burst_limit must be positive")
        if self.monthly_budget_usd and not (self.budget_email or self.alarm_email):
            raise OptionsError("monthly_budget_usd needs budget_email (or alarm_email) to mail its notifications to")

    @property
    def traced(self) -> bool:
        """X-Ray active tracing on the functions: asked for (`tracing`), or what OpenTelemetry exports to (`otel`)."""
        return self.tracing or self.otel

    @property
    def localstack(self) -> bool:
        return self.target == "localstack"

    @property
    def jwt(self) -> bool:
        return self.jwt_issuer is not None

    @property
    def event_bus_name(self) -> str | None:
        """The bus the notifier puts events on; None when `event_bus` is off."""
        return None if self.event_bus == EVENT_BUS_OFF else self.event_bus

    @property
    def log_retention(self) -> logs.RetentionDays:
        return LOG_RETENTION[self.log_retention_days]

    @classmethod
    def from_context(cls, get: Callable[[str], Any]) -> StackOptions:
        """`get` is `node.try_get_context`; values from the command line arrive as text."""
        for key, why in REMOVED.items():
            if get(key) not in (None, ""):
                raise OptionsError(f"context {key} is no longer an option: {why}")
        values: dict[str, Any] = {}
        for item in fields(cls):
            raw = get(item.name)
            if raw is None or raw == "":
                continue
            default = item.default
            if isinstance(default, bool):
                values[item.name] = _boolean(item.name, raw)
            elif isinstance(default, int):
                values[item.name] = _integer(item.name, raw)
            elif isinstance(default, tuple):
                parts = raw if isinstance(raw, list) else str(raw).split(",")
                values[item.name] = tuple(str(part).strip() for part in parts if str(part).strip())
            else:
                values[item.name] = str(raw)
        return cls(**values)


def _boolean(key: str, raw: Any) -> bool:
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip().lower()
    if text in TRUE_WORDS:
        return True
    if text in FALSE_WORDS:
        return False
    raise OptionsError(f"context {key} must be true or false, not {raw!r}")


def _integer(key: str, raw: Any) -> int:
    try:
        return int(raw)
    except (TypeError, ValueError):
        raise OptionsError(f"context {key} must be a whole number, not {raw!r}") from None
