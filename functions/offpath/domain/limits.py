"""A job type's flow limits, declared in its `@job(...)` (docs/flow-control.md):

- `max_concurrency`: at most N of its jobs with the same key RUNNING at once, across every worker environment
  (per `concurrency_key`; without a key, N for the whole type).
- `rate_limit` ("10/s", "100/m", "3600/h"): at most that many of its jobs start, per the same key (the whole type
  without a key), as a token bucket that holds one second of starts (at least one): "2/s" starts two at once, then
  one every half second.

`concurrency_key`: a payload field path ("account", "customer.id") or a function of the payload (the parsed
model). A keyed limit is counted per tenant and key (two tenants' "acct-1" are two keys); an unkeyed one counts
the type's jobs of every tenant. A job whose payload lacks the field has the key "" (one key shared by all such
jobs).

A job over a limit is not claimed: no attempt is spent, and its message comes back when a token is due or a slot
may be free (logic/limits.py). Everything here is checked when the job type is registered, at import.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

# The most jobs of one key a type may run at once: the holders of a key live on one item (each ~50 bytes), so
# its writes stay within a few write units.
MAX_CONCURRENCY = 100
# The fastest rate a type may declare (a key's bucket spreads over items past 500 a second).
MAX_RATE_PER_S = 10_000.0
RATE_PATTERN = re.compile(r"^\s*(\d{1,9})\s*/\s*(s|m|h)\s*$")
UNIT_S = {"s": 1, "m": 60, "h": 3600}
FIELD_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")

KeyFunction = Callable[[Any], Any]


class LimitSpecError(ValueError):
    """A limit written wrongly (its message says what)."""


@dataclass(frozen=True)
class RateLimit:
    """`count` starts per `per_s` seconds, as written (`text`)."""

    count: int
    per_s: int
    text: str

    @property
    def rate_per_s(self) -> float:
        return self.count / self.per_s

    @property
    def bucket(self) -> int:
        """The bucket's size: one second of starts, at least one (what may start at once after a quiet spell)."""
        return max(1, math.ceil(self.rate_per_s))


def parse_rate_limit(text: str) -> RateLimit:
    match = RATE_PATTERN.match(text) if isinstance(text, str) else None
    if match is None:
        raise LimitSpecError(f"rate_limit {str(text)[:40]!r}: write it as COUNT/UNIT, UNIT one of s, m, h ('10/s')")
    count, unit = int(match.group(1)), match.group(2)
    rule = RateLimit(count=count, per_s=UNIT_S[unit], text=f"{count}/{unit}")
    if count < 1 or rule.rate_per_s > MAX_RATE_PER_S:
        raise LimitSpecError(f"rate_limit {text!r}: the count must be 1 or more, at most {MAX_RATE_PER_S:g} a second")
    return rule


@dataclass(frozen=True)
class Limits:
    """A job type's flow limits (none by default: no read or write is added to its worker's path)."""

    concurrency_key: str | KeyFunction | None = None
    max_concurrency: int | None = None
    rate_limit: RateLimit | None = None

    @property
    def declared(self) -> bool:
        return self.max_concurrency is not None or self.rate_limit is not None

    @property
    def keyed(self) -> bool:
        return self.concurrency_key is not None

    @property
    def key_text(self) -> str | None:
        """The key as GET /job-types shows it: the field path, or "function" for a function of the payload."""
        if self.concurrency_key is None:
            return None
        return self.concurrency_key if isinstance(self.concurrency_key, str) else "function"

    def key_of(self, payload: Any) -> str:
        """The key of one job, from its parsed payload (a model) or its plain payload (a dict)."""
        key = self.concurrency_key
        if key is None:
            return ""
        if not isinstance(key, str):
            return _text(key(payload))
        value: Any = payload
        for part in key.split("."):
            value = value.get(part) if isinstance(value, dict) else getattr(value, part, None)
            if value is None:
                return ""
        return _text(value)


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def limits_of(
    *,
    concurrency_key: str | KeyFunction | None,
    max_concurrency: int | None,
    rate_limit: str | None,
    payload_fields: set[str] | None = None,
) -> Limits:
    """The limits a `@job(...)` declares, checked. `payload_fields`: the payload model's fields when it allows no
    others (a key path must start with one of them)."""
    if max_concurrency is not None and (
        isinstance(max_concurrency, bool)
        or not isinstance(max_concurrency, int)
        or not 1 <= max_concurrency <= MAX_CONCURRENCY
    ):
        raise LimitSpecError(f"max_concurrency must be a whole number 1..{MAX_CONCURRENCY}")
    rule = parse_rate_limit(rate_limit) if rate_limit is not None else None
    if concurrency_key is not None:
        if max_concurrency is None and rule is None:
            raise LimitSpecError("concurrency_key needs max_concurrency or rate_limit (the limit it keys)")
        if isinstance(concurrency_key, str):
            parts = concurrency_key.split(".")
            if not all(FIELD_PATTERN.match(part) for part in parts):
                raise LimitSpecError(
                    f"concurrency_key {concurrency_key[:60]!r}: a payload field path ('account', 'customer.id')"
                )
            if payload_fields is not None and parts[0] not in payload_fields:
                raise LimitSpecError(f"concurrency_key {concurrency_key!r}: the payload has no field {parts[0]!r}")
        elif not callable(concurrency_key):
            raise LimitSpecError("concurrency_key must be a payload field path or a function of the payload")
    return Limits(concurrency_key=concurrency_key, max_concurrency=max_concurrency, rate_limit=rule)


class LimitStore(Protocol):
    """Where the limits are kept (on AWS: items of the jobs table, adapters/dynamodb_limits.py). `scope` names
    one key of one type (logic/limits.py `scope_of`)."""

    def acquire(self, scope: str, *, job_id: str, attempt: int, until_us: int, now_us: int, limit: int) -> float:
        """Hold one of the scope's `limit` slots for the job's attempt `attempt` until `until_us` (its lease's end
        at the latest): 0 if held, else the seconds to wait before looking again. A slot whose holder's time has
        passed is free (its worker died); its job's own slot of an earlier attempt is taken over."""

    def release(self, scope: str, *, job_id: str, attempt: int) -> None:
        """Free the job's slot if its attempt `attempt` holds it (a fencing token: a later attempt's slot stays)."""

    def take(self, scope: str, *, per_s: float, bucket: int, now_us: int) -> float:
        """Take one start from the scope's token bucket: 0 if taken, else the seconds until one is there."""

    def holders(self, scope: str) -> dict[str, tuple[int, int]]:
        """Read only: the scope's slot holders, job id -> (attempt, until in epoch microseconds); a holder whose
        time has passed is still listed (it is taken over at the next acquire)."""

    def next_start_s(self, scope: str, *, per_s: float, bucket: int, now_us: int) -> float:
        """Read only: 0 if the scope's token bucket has a start now, else the seconds until one is there."""
