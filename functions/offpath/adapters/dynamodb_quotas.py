"""Quota counters on the jobs table (items beside the jobs; no index carries them).

- `QUOTA#RATE#<tenant>#<n>`: a token bucket as GCRA (the generic cell rate algorithm, a token bucket kept
  as one number: `tat`, the theoretical arrival time, in microseconds). A submit is one conditional write
  and no read: `tat = max(tat, now) + 1/rate`, allowed while `tat - now <= (bucket - 1)/rate`. A tenant's
  rate above RATE_PER_ITEM is spread over ceil(rate / RATE_PER_ITEM) items, each with its share of the
  rate and the bucket, chosen at random per submit: no item takes more than ~RATE_PER_ITEM writes a second
  (DynamoDB allows 1,000 write units a second per partition key).
- `QUOTA#USE#<tenant>#<n>` for n < USAGE_SHARDS: the tenant's open and delayed jobs, counted by `ADD` on the
  job's shard (`usage_shard`: a job's opening and closing meet the same item), summed over the shards on read
  (one BatchGetItem, eventually consistent). A decrement is conditional on the shard's count being above 0, so
  no count goes below zero: a job opened before its tenant's quota was set (never counted) closes into a shard
  at 0 and changes nothing; into a shard above 0 it takes one that a counted job will not take back at its own
  close (its shard at 0 then): the count is short by at most the jobs open when the quota was set, and only
  while they and the jobs sharing their shards are open.
"""

from __future__ import annotations

import math
import random
import zlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from offpath.adapters.dynamodb_store import (
    ConditionFailed,
    attribute_values,
    call,
    default_client,
    key_of,
    plain_values,
)
from offpath.adapters.item_formats import FORMAT_ATTRIBUTE, QUOTA_RATE, QUOTA_USAGE, ItemFormat
from offpath.domain.errors import StoreUnavailableError
from offpath.domain.quotas import Usage

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient

RATE_PER_ITEM = 500
USAGE_SHARDS = 16
# A token bucket item outlives an idle tenant by a day (TTL), then goes.
RATE_ITEM_TTL_S = 86_400


def rate_key(tenant: str, n: int) -> str:
    return f"QUOTA#RATE#{tenant}#{n}"


def usage_key(tenant: str, n: int) -> str:
    return f"QUOTA#USE#{tenant}#{n}"


def usage_shard(job_id: str) -> int:
    """The shard that counts a job: the same when it opens and when it closes."""
    return zlib.crc32(job_id.encode()) % USAGE_SHARDS


def rate_items(per_s: float) -> int:
    return max(1, math.ceil(per_s / RATE_PER_ITEM))


class DynamoDbQuotaCounters:
    def __init__(
        self,
        table_name: str,
        client: DynamoDBClient | None = None,
        rng: random.Random | None = None,
        *,
        bucket_key: Callable[[str, int], str] = rate_key,
        bucket_format: ItemFormat = QUOTA_RATE,
    ) -> None:
        """`bucket_key` and `bucket_format`: the token buckets' items (the job types' rate limits keep theirs
        apart, adapters/dynamodb_limits.py)."""
        self.table_name = table_name
        self.client = client or default_client()
        self.rng = rng or random.Random()  # spreads writes; secures nothing
        self.bucket_key = bucket_key
        self.bucket_format = bucket_format
        # Per bucket item, the tat this environment last wrote or saw.
        self._seen_tat: dict[str, int] = {}

    def take(self, tenant: str, *, per_s: float, bucket: int, now_us: int) -> float:
        items = rate_items(per_s)
        interval = max(1, round(1_000_000 * items / per_s))  # microseconds per token of one item
        tolerance = (max(1, bucket // items) - 1) * interval
        key = self.bucket_key(tenant, self.rng.randrange(items))
        ttl = now_us // 1_000_000 + RATE_ITEM_TTL_S
        # Which write to try first: this environment's last sight of the bucket says whether it is in use.
        in_use = self._seen_tat.get(key, 0) > now_us
        for busy in (in_use, not in_use, in_use):
            try:
                self._seen_tat[key] = self._write(key, busy, interval, tolerance, now_us, ttl)
                return 0.0
            except ConditionFailed as failed:
                tat = _tat(failed.item, self.bucket_format)
            if tat is not None:
                self._seen_tat[key] = tat
                if tat > now_us + tolerance:
                    return (tat - tolerance - now_us) / 1_000_000  # over: until one token is back
        # Three writes met three changes by other environments: the bucket is contended; come back shortly.
        return interval / 1_000_000

    def wait_s(self, tenant: str, *, per_s: float, bucket: int, now_us: int) -> float:
        """Read only (one GetItem per item of the bucket): 0 if a take now could succeed on some item, else the
        seconds until one could."""
        items = rate_items(per_s)
        interval = max(1, round(1_000_000 * items / per_s))
        tolerance = (max(1, bucket // items) - 1) * interval
        waits = []
        for n in range(items):
            response = self._call(
                self.client.get_item, TableName=self.table_name, Key=key_of(self.bucket_key(tenant, n))
            )
            tat = _tat(response.get("Item"), self.bucket_format) or 0
            waits.append(max(0, tat - tolerance - now_us) / 1_000_000)
        return min(waits)

    def _write(self, key: str, busy: bool, interval: int, tolerance: int, now_us: int, ttl: int) -> int:
        if busy:
            # In use (tat ahead of now): tat moves on by one interval while within the burst.
            update, condition = "SET tat = tat + :i, expires_at = :ttl", "tat > :now AND tat <= :limit"
            values = {":i": interval, ":now": now_us, ":limit": now_us + tolerance, ":ttl": ttl}
        else:
            # Full (new, or idle since tat): tat starts from now.
            update, condition = "SET tat = :start, expires_at = :ttl", "attribute_not_exists(tat) OR tat <= :now"
            values = {":start": now_us + interval, ":now": now_us, ":ttl": ttl}
        response = self._call(
            self.client.update_item,
            TableName=self.table_name,
            Key=key_of(key),
            # Each write sets every attribute of the bucket's format: it is written in the current one.
            UpdateExpression=f"{update}, {FORMAT_ATTRIBUTE} = :fv",
            ConditionExpression=condition,
            ExpressionAttributeValues=attribute_values({**values, ":fv": self.bucket_format.version}),
            ReturnValues="UPDATED_NEW",
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        )
        return _tat(response.get("Attributes"), self.bucket_format) or now_us + interval

    def usage(self, tenant: str) -> Usage:
        keys = [key_of(usage_key(tenant, n)) for n in range(USAGE_SHARDS)]
        total = Usage()
        for _ in range(5):
            if not keys:
                break
            response = self._call(self.client.batch_get_item, RequestItems={self.table_name: {"Keys": keys}})
            for item in response.get("Responses", {}).get(self.table_name, []):
                values = QUOTA_USAGE.read(plain_values(item))
                total = total.plus(Usage(int(values.get("open_jobs", 0)), int(values.get("delayed_jobs", 0))))
            keys = list(response.get("UnprocessedKeys", {}).get(self.table_name, {}).get("Keys", []))
        if keys:
            raise StoreUnavailableError("DynamoDB kept some quota counts unprocessed")
        return Usage(max(0, total.open_jobs), max(0, total.delayed_jobs))

    def add(self, tenant: str, change: Usage, *, job_id: str) -> None:
        deltas = {"open_jobs": change.open_jobs, "delayed_jobs": change.delayed_jobs}
        key = key_of(usage_key(tenant, usage_shard(job_id)))
        # At most twice: a decrement refused (its count at 0) is dropped and the rest of the change written.
        for _ in range(2):
            deltas = {name: delta for name, delta in deltas.items() if delta}
            if not deltas:
                return
            # Each write changes the counters of the item's format: it is written in the current one.
            values: dict[str, int] = {":fv": QUOTA_USAGE.version}
            parts, conditions = [], []
            for n, (name, delta) in enumerate(sorted(deltas.items())):
                parts.append(f"{name} :d{n}")
                values[f":d{n}"] = delta
                if delta < 0:
                    conditions.append(f"{name} >= :m{n}")
                    values[f":m{n}"] = -delta
            request: dict[str, Any] = {
                "TableName": self.table_name,
                "Key": key,
                "UpdateExpression": "ADD " + ", ".join(parts) + f" SET {FORMAT_ATTRIBUTE} = :fv",
                "ExpressionAttributeValues": attribute_values(values),
            }
            if conditions:
                request["ConditionExpression"] = " AND ".join(conditions)
                request["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
            try:
                self._call(self.client.update_item, **request)
                return
            except ConditionFailed as failed:
                counted = plain_values(failed.item or {})
                deltas = {
                    name: delta for name, delta in deltas.items() if delta > 0 or int(counted.get(name, 0)) >= -delta
                }

    def _call(self, operation: Callable[..., Any], **request: Any) -> Any:
        return call(operation, **request)


def _tat(item: Any, bucket_format: ItemFormat = QUOTA_RATE) -> int | None:
    values = bucket_format.read(plain_values(item or {}))
    return int(values["tat"]) if "tat" in values else None
