"""Per-tenant quotas, declared once: what a tenant may submit (a token bucket of submits per second with a
burst), how many of its jobs may be open (not final) and how many delayed (SCHEDULED: due more than 15 minutes
ahead, waiting on a one-time schedule).

One text form everywhere (the `--quota` option of `offpath local`, the stack's `quotas` context, the
functions' `OFFPATH_QUOTAS`): entries `TENANT:name=value,...` separated by `;`, `*` for the default. A tenant's
entry overrides the default field by field; a field given nowhere is unlimited. Jobs that schedules make
(tenant `system`) are never limited.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Protocol

from offpath.domain.errors import OffpathError
from offpath.tenancy import RESERVED_TENANTS, TENANT_PATTERN

DEFAULT = "*"
FIELDS = ("submits_per_s", "burst", "open_jobs", "delayed_jobs")
# Seconds a caller over its open or delayed jobs is asked to wait (`Retry-After`): when its jobs finish is not
# known, and a check that is refused costs a cached comparison, no read.
COUNT_RETRY_AFTER_S = 5


class QuotaSpecError(ValueError):
    """A quota written wrongly (its message says what and where)."""


@dataclass(frozen=True)
class Quota:
    """A tenant's limits; None is unlimited. `burst`: the bucket's size (default one second of submits, at
    least 1)."""

    submits_per_s: float | None = None
    burst: int | None = None
    open_jobs: int | None = None
    delayed_jobs: int | None = None

    @property
    def bucket(self) -> int:
        """The token bucket's size: `burst`, else one second's submits (at least one)."""
        if self.burst is not None:
            return self.burst
        return max(1, math.ceil(self.submits_per_s or 1))

    @property
    def counts(self) -> bool:
        """Whether the tenant's open or delayed jobs are counted (a write per change of either)."""
        return self.open_jobs is not None or self.delayed_jobs is not None

    @property
    def limited(self) -> bool:
        return self.submits_per_s is not None or self.counts

    def over(self, base: Quota) -> Quota:
        """This quota, its absent fields taken from `base`."""
        own = {name: getattr(self, name) for name in FIELDS}
        return Quota(**{name: value if value is not None else getattr(base, name) for name, value in own.items()})


@dataclass(frozen=True)
class QuotaBook:
    """Every tenant's quota: `default` for a tenant without an entry of its own."""

    default: Quota = Quota()
    tenants: dict[str, Quota] = field(default_factory=dict)

    def for_tenant(self, tenant: str) -> Quota:
        if tenant.lower() in RESERVED_TENANTS:
            return Quota()
        own = self.tenants.get(tenant)
        return own.over(self.default) if own is not None else self.default

    @property
    def configured(self) -> bool:
        return self.default.limited or any(q.limited for q in self.tenants.values())

    @property
    def counts(self) -> bool:
        """Whether any tenant's open or delayed jobs are counted."""
        return self.default.counts or any(q.counts for q in self.tenants.values())

    def with_entries(self, entries: dict[str, Quota]) -> QuotaBook:
        """This book with `entries` added (a later entry for a tenant replaces the earlier one)."""
        tenants = {**self.tenants, **{t: q for t, q in entries.items() if t != DEFAULT}}
        return replace(self, default=entries.get(DEFAULT, self.default), tenants=tenants)

    def text(self) -> str:
        """The book in its text form (what `parse` reads)."""
        entries = ([(DEFAULT, self.default)] if self.default.limited else []) + sorted(self.tenants.items())
        return ";".join(f"{tenant}:{_quota_text(quota)}" for tenant, quota in entries)


def _quota_text(quota: Quota) -> str:
    parts = []
    for name in FIELDS:
        value = getattr(quota, name)
        if value is not None:
            parts.append(f"{name}={value:g}" if isinstance(value, float) else f"{name}={value}")
    return ",".join(parts)


def parse_entry(text: str) -> tuple[str, Quota]:
    """`TENANT:submits_per_s=N,burst=B,open_jobs=M,delayed_jobs=K` (any of the fields, at least one)."""
    tenant, sep, spec = text.strip().rpartition(":")
    tenant = tenant.strip()
    shown = text.strip()[:60]
    if not sep or not tenant:
        raise QuotaSpecError(f"{shown!r}: a quota is TENANT:submits_per_s=N,open_jobs=M[,delayed_jobs=K] (* for all)")
    if tenant != DEFAULT and (not TENANT_PATTERN.fullmatch(tenant) or tenant.lower() in RESERVED_TENANTS):
        raise QuotaSpecError(f"{shown!r}: {tenant[:40]!r} is not a tenant a caller can be (or * for the default)")
    values: dict[str, float | int] = {}
    for part in spec.split(","):
        name, eq, value = part.strip().partition("=")
        name = name.strip()
        if not eq or name not in FIELDS:
            raise QuotaSpecError(f"{shown!r}: {part.strip()[:40]!r} is not one of {', '.join(f + '=' for f in FIELDS)}")
        if name in values:
            raise QuotaSpecError(f"{shown!r}: {name} is given twice")
        values[name] = _number(name, value.strip(), shown)
    return tenant, Quota(**values)  # type: ignore[arg-type]


def _number(name: str, value: str, shown: str) -> float | int:
    if name == "submits_per_s":
        try:
            rate = float(value)
        except ValueError:
            rate = math.nan
        if not (math.isfinite(rate) and 0 < rate <= 1_000_000):
            raise QuotaSpecError(f"{shown!r}: submits_per_s must be a number above 0 (at most 1000000)")
        return rate
    smallest = 1 if name == "burst" else 0
    if not (value.isascii() and value.isdigit() and len(value) <= 9) or int(value) < smallest:
        raise QuotaSpecError(f"{shown!r}: {name} must be a whole number from {smallest} to 999999999")
    return int(value)


def parse(text: str | None) -> QuotaBook:
    """A book from its text form: entries separated by `;` (empty: no quotas)."""
    entries: dict[str, Quota] = {}
    for item in (text or "").split(";"):
        if item.strip():
            tenant, quota = parse_entry(item)
            entries[tenant] = quota
    return QuotaBook().with_entries(entries)


@dataclass(frozen=True)
class Usage:
    """A tenant's counted jobs: open (not final) and delayed (SCHEDULED)."""

    open_jobs: int = 0
    delayed_jobs: int = 0

    def plus(self, other: Usage) -> Usage:
        return Usage(self.open_jobs + other.open_jobs, self.delayed_jobs + other.delayed_jobs)


class QuotaExceededError(OffpathError):
    """A submit over one of the tenant's quotas: nothing was written. `retry_after_s`: when to try again."""

    def __init__(self, field: str, message: str, retry_after_s: int) -> None:
        self.field = field
        self.retry_after_s = max(1, retry_after_s)
        super().__init__(message)


class QuotaCounters(Protocol):
    """Where quotas are counted (on AWS: items of the jobs table, adapters/dynamodb_quotas.py)."""

    def take(self, tenant: str, *, per_s: float, bucket: int, now_us: int) -> float:
        """Take one submit from the tenant's token bucket: 0 if taken, else the seconds until one is there."""

    def usage(self, tenant: str) -> Usage:
        """The tenant's counted open and delayed jobs (never below 0)."""

    def add(self, tenant: str, change: Usage, *, job_id: str) -> None:
        """Count a change of the tenant's open and delayed jobs made by the job `job_id`; a count never goes below
        zero (a decrement of a count at 0, by a job opened before its quota was set, changes nothing)."""


class QuotaGate(Protocol):
    """What the submit path asks before it writes a job (logic/quotas.py)."""

    def admit(self, tenant: str, *, delayed: bool) -> None:
        """Raises QuotaExceededError (nothing written) when one more job is over the tenant's quotas."""
