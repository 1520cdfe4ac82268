"""The job types' flow limits on the jobs table (items beside the jobs; no index carries them).

- `LIMIT#SLOTS#<type>[#<key digest>]`: one key's concurrency slots, one item: `n` (how many are held) and one
  attribute `h_<job id>` per holder, `{a: attempt, u: until (epoch microseconds)}`. Every change is one
  conditional UpdateItem, no read first:
  - acquire: `SET h_<job> ADD n 1` if the job holds none and `n < limit`;
  - refused, the item that refused it comes back (ReturnValuesOnConditionCheckFailure): a holder whose `u` has
    passed is taken over (`REMOVE h_<dead> SET h_<job>`, on condition that the dead holder is still the one seen:
    its attempt and time are the fencing token), as is the job's own slot of an earlier attempt whose time is up;
    else the job waits until a holder's time is up at the latest;
  - release: `REMOVE h_<job> ADD n -1` if `h_<job>.a` is the releasing attempt (so the slot an attempt took over
    is never freed by the attempt it replaced).
  `n` moves only with a holder's arrival or departure in the same write, so it is the number of holders.
- `LIMIT#RATE#<type>[#<key digest>]#<n>`: one key's token bucket (GCRA, adapters/dynamodb_quotas.py's).

Each key has items of its own: 1,000 keys are 1,000 partition keys, spread by DynamoDB's hash over the table's
partitions; one key's items take its own jobs' writes only (two a job for its slots, one for its bucket).
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

from offpath.adapters.dynamodb_quotas import DynamoDbQuotaCounters
from offpath.adapters.dynamodb_store import (
    ConditionFailed,
    attribute_values,
    call,
    default_client,
    key_of,
    plain_values,
)
from offpath.adapters.item_formats import FORMAT_ATTRIBUTE, LIMIT_RATE, LIMIT_SLOTS

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient

# A slots item outlives its last holder's time by a day (TTL, epoch seconds), then goes.
SLOTS_TTL_S = 86_400
# How often an acquire tries again when another environment changed the item between its writes.
ACQUIRE_TRIES = 4


def slots_key(scope: str) -> str:
    return f"LIMIT#SLOTS#{scope}"


def bucket_key(scope: str, n: int) -> str:
    return f"LIMIT#RATE#{scope}#{n}"


def holder_attribute(job_id: str) -> str:
    return f"h_{job_id}"


class DynamoDbLimits:
    def __init__(self, table_name: str, client: DynamoDBClient | None = None) -> None:
        self.table_name = table_name
        self.client = client or default_client()
        self._buckets = DynamoDbQuotaCounters(
            table_name, client=self.client, bucket_key=bucket_key, bucket_format=LIMIT_RATE
        )

    def take(self, scope: str, *, per_s: float, bucket: int, now_us: int) -> float:
        return self._buckets.take(scope, per_s=per_s, bucket=bucket, now_us=now_us)

    def holders(self, scope: str) -> dict[str, tuple[int, int]]:
        response = call(self.client.get_item, TableName=self.table_name, Key=key_of(slots_key(scope)))
        return {name.removeprefix("h_"): held for name, held in _holders(_plain(response.get("Item"))).items()}

    def next_start_s(self, scope: str, *, per_s: float, bucket: int, now_us: int) -> float:
        return self._buckets.wait_s(scope, per_s=per_s, bucket=bucket, now_us=now_us)

    def acquire(self, scope: str, *, job_id: str, attempt: int, until_us: int, now_us: int, limit: int) -> float:
        mine = holder_attribute(job_id)
        holder = {"a": attempt, "u": until_us}
        ttl = until_us // 1_000_000 + SLOTS_TTL_S
        wait_us = 1_000_000
        for _ in range(ACQUIRE_TRIES):
            try:
                self._update(
                    scope,
                    f"SET #h = :h, expires_at = :ttl, {FORMAT_ATTRIBUTE} = :fv ADD n :one",
                    "attribute_not_exists(#h) AND (attribute_not_exists(n) OR n < :limit)",
                    {"#h": mine},
                    {":h": holder, ":ttl": ttl, ":fv": LIMIT_SLOTS.version, ":one": 1, ":limit": limit},
                )
                return 0.0
            except ConditionFailed as failed:
                seen = _plain(failed.item)
            held = _holders(seen)
            own = held.get(mine)
            if own is not None:
                if own == (attempt, until_us):
                    return 0.0  # this acquire's own write, met again by an SDK retry after a lost response
                if own[1] > now_us:
                    return (own[1] - now_us) / 1_000_000  # the job's slot is held by a live attempt
                # The job's own slot, of an attempt whose time is up: taken over.
                if self._take_over(scope, mine, own, mine, holder, ttl):
                    return 0.0
                continue
            if int(seen.get("n", 0)) < limit:
                continue  # a slot was freed meanwhile
            dead = sorted((until, name) for name, (_, until) in held.items() if until <= now_us)
            if not dead:
                return max(1, min(until for _, until in held.values()) - now_us) / 1_000_000 if held else 1.0
            _, name = dead[0]
            if self._take_over(scope, name, held[name], mine, holder, ttl):
                return 0.0
        return wait_us / 1_000_000  # contended: come back shortly

    def release(self, scope: str, *, job_id: str, attempt: int) -> None:
        # Refused: not held by this attempt (never taken, taken over, or released already).
        with contextlib.suppress(ConditionFailed):
            self._update(
                scope,
                "REMOVE #h ADD n :minus",
                "#h.a = :a",
                {"#h": holder_attribute(job_id)},
                {":minus": -1, ":a": attempt},
                old=False,
            )

    def _take_over(
        self, scope: str, dead: str, seen: tuple[int, int], mine: str, holder: dict[str, int], ttl: int
    ) -> bool:
        """Replace the holder `dead` (as seen: its attempt and time) with this job's: `n` stays."""
        same = dead == mine
        update = "SET #h = :h, expires_at = :ttl" if same else "REMOVE #d SET #h = :h, expires_at = :ttl"
        condition = "#d.a = :da AND #d.u = :du" + ("" if same else " AND attribute_not_exists(#h)")
        names = {"#h": mine} if same else {"#h": mine, "#d": dead}
        if same:
            condition = condition.replace("#d", "#h")
        try:
            self._update(
                scope,
                f"{update}, {FORMAT_ATTRIBUTE} = :fv",
                condition,
                names,
                {":h": holder, ":ttl": ttl, ":fv": LIMIT_SLOTS.version, ":da": seen[0], ":du": seen[1]},
                old=False,
            )
            return True
        except ConditionFailed:
            return False

    def _update(
        self,
        scope: str,
        update: str,
        condition: str,
        names: dict[str, str],
        values: dict[str, Any],
        *,
        old: bool = True,
    ) -> None:
        request: dict[str, Any] = {
            "TableName": self.table_name,
            "Key": key_of(slots_key(scope)),
            "UpdateExpression": update,
            "ConditionExpression": condition,
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": attribute_values(values),
        }
        if old:
            request["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
        call(self.client.update_item, **request)


def _plain(item: Any) -> dict[str, Any]:
    return LIMIT_SLOTS.read(plain_values(item or {}))


def _holders(item: dict[str, Any]) -> dict[str, tuple[int, int]]:
    """The item's holders: attribute name -> (attempt, until in epoch microseconds)."""
    held: dict[str, tuple[int, int]] = {}
    for name, value in item.items():
        if name.startswith("h_") and isinstance(value, dict):
            held[name] = (int(value.get("a", 0)), int(value.get("u", 0)))
    return held
