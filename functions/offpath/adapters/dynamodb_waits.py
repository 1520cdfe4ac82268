"""A tenant's open waits (`GET /jobs/{id}?wait=N`), counted across execution environments on the jobs table.

One item per tenant, `QUOTA#WAIT#<tenant>`: `held` (the waits open) and one attribute per open wait,
`w_<wait id>`, holding the end of its lease (epoch seconds). Taking a slot is one conditional write
(`held < cap`: `ADD held 1`, `SET w_<id>`); giving it back is one (`REMOVE w_<id>`, `ADD held -1`, if the wait
still holds it). A wait that never gives its slot back (its function timed out or crashed) holds it until its
lease ends: a take refused at the cap reads the item's leases from the failed write (no extra read), removes
those that have ended in one conditional write, and tries once more.
"""

from __future__ import annotations

import contextlib
import math
from typing import TYPE_CHECKING, Any

from offpath.adapters.dynamodb_store import (
    ConditionFailed,
    attribute_values,
    call,
    default_client,
    key_of,
    plain_values,
)

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient

LEASE_PREFIX = "w_"
# The item outlives its last lease by a day (TTL), then goes.
ITEM_TTL_S = 86_400


def waits_key(tenant: str) -> str:
    return f"QUOTA#WAIT#{tenant}"


class DynamoDbWaitSlots:
    def __init__(self, table_name: str, client: DynamoDBClient | None = None) -> None:
        self.table_name = table_name
        self.client = client or default_client()

    def take(self, tenant: str, wait_id: str, *, cap: int, now_s: float, lease_s: float) -> float:
        """0 when the slot is taken; else the seconds until the tenant's first lease ends (at least 1)."""
        for attempt in range(2):
            try:
                self._take(tenant, wait_id, cap=cap, now_s=now_s, lease_s=lease_s)
                return 0.0
            except ConditionFailed as failed:
                leases = _leases(failed.item)
            ended = [name for name, until in leases.items() if until <= now_s]
            if not ended or attempt:
                break
            self._reclaim(tenant, ended)
        live = [until for until in leases.values() if until > now_s]
        return max(1.0, math.ceil(min(live) - now_s)) if live else 1.0

    def release(self, tenant: str, wait_id: str) -> None:
        """Give the slot back (nothing when its lease was already reclaimed)."""
        with contextlib.suppress(ConditionFailed):
            call(
                self.client.update_item,
                TableName=self.table_name,
                Key=key_of(waits_key(tenant)),
                UpdateExpression="REMOVE #w ADD held :minus",
                ConditionExpression="attribute_exists(#w)",
                ExpressionAttributeNames={"#w": LEASE_PREFIX + wait_id},
                ExpressionAttributeValues=attribute_values({":minus": -1}),
            )

    def _take(self, tenant: str, wait_id: str, *, cap: int, now_s: float, lease_s: float) -> None:
        until = math.ceil(now_s + lease_s)
        call(
            self.client.update_item,
            TableName=self.table_name,
            Key=key_of(waits_key(tenant)),
            UpdateExpression="SET #w = :until, expires_at = :ttl ADD held :one",
            ConditionExpression="attribute_not_exists(held) OR held < :cap",
            ExpressionAttributeNames={"#w": LEASE_PREFIX + wait_id},
            ExpressionAttributeValues=attribute_values(
                {":until": until, ":ttl": until + ITEM_TTL_S, ":one": 1, ":cap": cap}
            ),
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        )

    def _reclaim(self, tenant: str, ended: list[str]) -> None:
        """Remove the leases that have ended, if they are all still there (else another environment did)."""
        names = {f"#e{n}": name for n, name in enumerate(ended)}
        with contextlib.suppress(ConditionFailed):
            call(
                self.client.update_item,
                TableName=self.table_name,
                Key=key_of(waits_key(tenant)),
                UpdateExpression=f"REMOVE {', '.join(names)} ADD held :minus",
                ConditionExpression=" AND ".join(f"attribute_exists({alias})" for alias in names),
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=attribute_values({":minus": -len(ended)}),
            )


def _leases(item: Any) -> dict[str, float]:
    values = plain_values(item or {})
    return {name: float(value) for name, value in values.items() if name.startswith(LEASE_PREFIX)}
