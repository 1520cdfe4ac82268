"""The pause state on the jobs table: one item, `PAUSES`, one attribute per pause in force.

`q:<queue class>` and `t:<job type>` each hold `{"paused_at": ISO 8601, "reason"?: text}`. Reading every pause is
one GetItem (what the api's listings and the worker's cached flag read); a pause is one conditional UpdateItem that
sets the attribute only where it is absent (so a second pause keeps the first one's `paused_at` and reason: the
failed condition returns the item, no second read); a resume is one UpdateItem that removes it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from offpath.adapters import item_formats
from offpath.adapters.dynamodb_store import (
    ConditionFailed,
    attribute_values,
    call,
    default_client,
    iso,
    key_of,
    parse_iso,
    plain_values,
)
from offpath.domain.pauses import Pause, PauseKind, Pauses
from offpath.naming import PAUSES_ITEM_KEY

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient

_PREFIX: dict[PauseKind, str] = {"queue": "q:", "job_type": "t:"}


def attribute_of(kind: PauseKind, name: str) -> str:
    return _PREFIX[kind] + name


class DynamoDbPauseStore:
    def __init__(self, table_name: str, client: DynamoDBClient | None = None) -> None:
        self.table_name = table_name
        self.client = client or default_client()

    def pauses(self) -> Pauses:
        response = call(
            self.client.get_item, TableName=self.table_name, Key=key_of(PAUSES_ITEM_KEY), ConsistentRead=True
        )
        return pauses_of(response.get("Item") or {})

    def pause(self, pause: Pause) -> tuple[Pause, bool]:
        state: dict[str, Any] = {"paused_at": iso(pause.paused_at)}
        if pause.reason:
            state["reason"] = pause.reason
        try:
            call(
                self.client.update_item,
                TableName=self.table_name,
                Key=key_of(PAUSES_ITEM_KEY),
                UpdateExpression="SET #p = :state, #v = :v",
                ConditionExpression="attribute_not_exists(#p)",
                ExpressionAttributeNames={"#p": attribute_of(pause.kind, pause.name), "#v": "v"},
                ExpressionAttributeValues=attribute_values({":state": state, ":v": item_formats.PAUSES.version}),
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ConditionFailed as failed:
            earlier = pauses_of(failed.item).of(pause.kind, pause.name)
            if earlier is None:  # removed between the condition and its answer: this pause stands as asked
                return self.pause(pause)
            return earlier, False
        return pause, True

    def resume(self, kind: PauseKind, name: str) -> Pause | None:
        response = call(
            self.client.update_item,
            TableName=self.table_name,
            Key=key_of(PAUSES_ITEM_KEY),
            UpdateExpression="REMOVE #p",
            ExpressionAttributeNames={"#p": attribute_of(kind, name)},
            ReturnValues="UPDATED_OLD",
        )
        return pauses_of(response.get("Attributes") or {}).of(kind, name)


def pauses_of(item: Any) -> Pauses:
    """The pauses an item (as DynamoDB returns it, or a part of it) holds."""
    plain = item_formats.PAUSES.read(plain_values(item)) if item else {}
    found: dict[PauseKind, dict[str, Pause]] = {"queue": {}, "job_type": {}}
    for attribute, value in plain.items():
        for kind, prefix in _PREFIX.items():
            if attribute.startswith(prefix) and isinstance(value, dict) and "paused_at" in value:
                name = attribute[len(prefix) :]
                reason = str(value["reason"]) if value.get("reason") else None
                found[kind][name] = Pause(kind, name, parse_iso(str(value["paused_at"])), reason)
    return Pauses(queues=found["queue"], job_types=found["job_type"])
