"""Bulk operations on the jobs table (domain/bulk.py, logic/bulk.py).

Items (offpath.naming's key attributes, each a single item):
- `BULK#<owner>#<operation_id>` / `#`: one operation: its filter, counts, the listing's cursor, its lease and
  step. Every write is fenced on the step the writer saw. An operation that is over expires (TTL) after the
  retention.
- `BULKOPEN#` / `#`: the running operations, a string set of `<operation_id>:<owner>` (at most
  MAX_OPEN_OPERATIONS, MAX_OPEN_PER_OWNER of one caller): the sweeper reads it once a sweep to continue an
  operation whose runner died.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from offpath.adapters.dynamodb_store import (
    NEW_ITEM,
    ConditionFailed,
    attribute_values,
    call,
    default_client,
    epoch,
    iso,
    item_key,
    key_of,
    parse_iso,
    plain_values,
)
from offpath.adapters.item_formats import BULK_OPEN, BULK_OPERATION
from offpath.domain.bulk import (
    MAX_OPEN_OPERATIONS,
    MAX_OPEN_PER_OWNER,
    BulkFilter,
    BulkOperation,
    BulkOperationConflictError,
    Failure,
    TooManyOperationsError,
)
from offpath.domain.job import JobStatus

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient

OPEN_PARTITION = f"{BULK_OPEN.prefix}"
OPERATION_ID_CHARS = 32


def operation_partition(owner: str, operation_id: str) -> str:
    return f"{BULK_OPERATION.prefix}{owner}#{operation_id}"


class DynamoDbBulkStore:
    def __init__(
        self, table_name: str, client: DynamoDBClient | None = None, *, retention: timedelta = timedelta(days=7)
    ) -> None:
        self.table_name = table_name
        self.client = client or default_client()
        self.retention = retention

    def create(self, operation: BulkOperation) -> None:
        # Entered among the open ones first: an entry whose operation was never written is forgotten by the
        # sweeper; an operation no entry names would never be continued. The caller's own count is read first
        # (not atomic with the entry: callers starting operations at the same instant may pass it by a few; the
        # cap over all callers is the write's condition).
        if sum(owner == operation.owner for owner, _ in self.open_operations()) >= MAX_OPEN_PER_OWNER:
            raise TooManyOperationsError()
        try:
            call(
                self.client.update_item,
                TableName=self.table_name,
                Key=key_of(OPEN_PARTITION),
                UpdateExpression="ADD ops :entry SET v = :v",
                ConditionExpression="attribute_not_exists(ops) OR size(ops) < :max",
                ExpressionAttributeValues=attribute_values(
                    {":entry": {_entry(operation.owner, operation.operation_id)}, ":max": MAX_OPEN_OPERATIONS}
                    | {":v": BULK_OPEN.version}
                ),
            )
        except ConditionFailed:
            raise TooManyOperationsError() from None
        call(
            self.client.put_item,
            TableName=self.table_name,
            Item=self._item(operation),
            ConditionExpression=NEW_ITEM,
        )

    def get(self, owner: str, operation_id: str) -> BulkOperation | None:
        response = call(
            self.client.get_item,
            TableName=self.table_name,
            Key=key_of(operation_partition(owner, operation_id)),
            ConsistentRead=True,
        )
        item = response.get("Item")
        return operation_from_item(item) if item else None

    def take(self, operation: BulkOperation, *, now: datetime, lease_until: datetime) -> BulkOperation:
        try:
            response = call(
                self.client.update_item,
                TableName=self.table_name,
                Key=key_of(operation_partition(operation.owner, operation.operation_id)),
                UpdateExpression="SET lease_until = :lease, step = :next",
                ConditionExpression="#s = :running AND step = :seen AND "
                "(attribute_not_exists(lease_until) OR lease_until <= :now)",
                ExpressionAttributeNames={"#s": "status"},
                ExpressionAttributeValues=attribute_values(
                    {
                        ":lease": iso(lease_until),
                        ":next": operation.step + 1,
                        ":running": "running",
                        ":seen": operation.step,
                        ":now": iso(now),
                    }
                ),
                ReturnValues="ALL_NEW",
            )
        except ConditionFailed:
            raise BulkOperationConflictError() from None
        return operation_from_item(response["Attributes"])

    def save(self, operation: BulkOperation, *, seen_step: int) -> BulkOperation:
        written = operation.replace(step=seen_step + 1)
        try:
            call(
                self.client.put_item,
                TableName=self.table_name,
                Item=self._item(written),
                ConditionExpression="step = :seen",
                ExpressionAttributeValues=attribute_values({":seen": seen_step}),
            )
        except ConditionFailed:
            raise BulkOperationConflictError() from None
        if written.is_over:
            self.forget(written.owner, written.operation_id)
        return written

    def open_operations(self) -> list[tuple[str, str]]:
        response = call(self.client.get_item, TableName=self.table_name, Key=key_of(OPEN_PARTITION))
        item = response.get("Item")
        if not item:
            return []
        entries = BULK_OPEN.read(plain_values(item)).get("ops") or set()
        found = []
        for entry in sorted(entries):
            operation_id, _, owner = str(entry).partition(":")
            found.append((owner, operation_id))
        return found

    def forget(self, owner: str, operation_id: str) -> None:
        call(
            self.client.update_item,
            TableName=self.table_name,
            Key=key_of(OPEN_PARTITION),
            UpdateExpression="DELETE ops :entry",
            ExpressionAttributeValues=attribute_values({":entry": {_entry(owner, operation_id)}}),
        )

    def _item(self, operation: BulkOperation) -> dict[str, Any]:
        expires = operation.finished_at + self.retention if operation.finished_at is not None else None
        return operation_to_item(operation, expires_at=expires)


def _entry(owner: str, operation_id: str) -> str:
    return f"{operation_id}:{owner}"


def operation_to_item(operation: BulkOperation, *, expires_at: datetime | None = None) -> dict[str, Any]:
    f = operation.filter
    return attribute_values(
        {
            **item_key(operation_partition(operation.owner, operation.operation_id)),
            **BULK_OPERATION.stamp,
            "operation_id": operation.operation_id,
            "owner": operation.owner,
            "action": operation.action,
            "tenant": f.tenant,
            "filter_status": f.status.value if f.status is not None else None,
            "filter_type": f.job_type,
            "filter_tag": f"{f.tag[0]}:{f.tag[1]}" if f.tag is not None else None,
            "status": operation.status,
            "created_at": iso(operation.created_at),
            "updated_at": iso(operation.updated_at),
            "finished_at": iso(operation.finished_at) if operation.finished_at else None,
            "limit": operation.limit,
            "matched": operation.matched,
            "done": operation.done,
            "skipped": operation.skipped,
            "failed": operation.failed,
            "skipped_reasons": dict(operation.skipped_reasons) or None,
            "failures_json": json.dumps([[x.job_id, x.error] for x in operation.failures])
            if operation.failures
            else None,
            "cursor": operation.cursor,
            "step": operation.step,
            "lease_until": iso(operation.lease_until) if operation.lease_until else None,
            "limit_reached": operation.limit_reached or None,
            "stop_reason": operation.stop_reason,
            "pages": operation.pages,
            # A number: the table's TTL attribute.
            "expires_at": epoch(expires_at) if expires_at is not None else None,
        }
    )


def operation_from_item(item: dict[str, Any]) -> BulkOperation:
    plain = BULK_OPERATION.read(plain_values(item))

    def when(name: str) -> datetime | None:
        value = plain.get(name)
        return parse_iso(value) if value else None

    tag_text = plain.get("filter_tag")
    tag_key, _, tag_value = str(tag_text).partition(":")
    status = plain.get("filter_status")
    return BulkOperation(
        operation_id=plain["operation_id"],
        owner=plain["owner"],
        action=plain["action"],
        filter=BulkFilter(
            tenant=plain["tenant"],
            status=JobStatus(status) if status else None,
            job_type=plain.get("filter_type"),
            tag=(tag_key, tag_value) if tag_text is not None else None,
        ),
        status=plain["status"],
        created_at=parse_iso(plain["created_at"]),
        updated_at=parse_iso(plain["updated_at"]),
        finished_at=when("finished_at"),
        limit=int(plain.get("limit", 0)),
        matched=int(plain.get("matched", 0)),
        done=int(plain.get("done", 0)),
        skipped=int(plain.get("skipped", 0)),
        failed=int(plain.get("failed", 0)),
        skipped_reasons={str(k): int(v) for k, v in (plain.get("skipped_reasons") or {}).items()},
        failures=tuple(Failure(str(j), str(e)) for j, e in json.loads(plain.get("failures_json") or "[]")),
        cursor=plain.get("cursor"),
        step=int(plain.get("step", 0)),
        lease_until=when("lease_until"),
        limit_reached=bool(plain.get("limit_reached", False)),
        stop_reason=plain.get("stop_reason"),
        pages=int(plain.get("pages", 0)),
    )
