"""Batches on the jobs table (offpath.domain.batch): one item per batch, one per page of its members, one per keyed
request. Item layout (key `pk` + `sk`):
- `BATCH#<tenant>` / `<batch_id>`: the batch: its total, the pages being added, its counts per final state
  (`count_succeeded`, ...), when it was sealed or cancelled, its callbacks and the callback jobs' ids.
- `BATCHPAGE#<tenant>#<batch_id>` / `<page_id>`: the ids of the jobs one request added (at most 100), written first
  (reserved), then marked written once the jobs exist.
- `BATCHKEY#<tenant>#<sha256(key) prefix>` / `#`: a keyed POST /batches: the batch's id, creation time and fingerprint.
A member's count moves in one transaction with its `batch_counted` mark (`count_member`): docs/decisions.md.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from offpath.adapters.dynamodb_store import (
    NEW_ITEM,
    ConditionFailed,
    Item,
    attribute_values,
    batch_count_update,
    batch_key,
    batch_partition,
    call,
    count_attribute,
    default_client,
    from_item,
    iso,
    job_key,
    key_of,
    parse_iso,
    plain_values,
    transact,
)
from offpath.adapters.item_formats import BATCH, BATCH_KEY, BATCH_PAGE
from offpath.domain.batch import Batch, BatchListing, BatchPage, CallbackSpec, MemberIds
from offpath.domain.errors import BatchConflictError, InvalidRequestError, StoreUnavailableError
from offpath.domain.job import FINAL_STATES, Job, JobStatus
from offpath.naming import TABLE_PARTITION_KEY, TABLE_SORT_KEY

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient

KEY_DIGEST_CHARS = 32
# A batch that takes more jobs: it exists, and is neither sealed nor cancelled.
OPEN_BATCH = " AND ".join(
    (
        f"attribute_exists({TABLE_PARTITION_KEY})",
        "attribute_not_exists(sealed_at)",
        "attribute_not_exists(cancelled_at)",
    )
)
PAGES_READ = 20


def page_partition(tenant: str, batch_id: str) -> str:
    return f"{BATCH_PAGE.prefix}{tenant}#{batch_id}"


def key_partition(tenant: str, idempotency_key: str) -> str:
    digest = hashlib.sha256(idempotency_key.encode()).hexdigest()[:KEY_DIGEST_CHARS]
    return f"{BATCH_KEY.prefix}{tenant}#{digest}"


class DynamoDbBatchStore:
    def __init__(self, table_name: str, client: DynamoDBClient | None = None) -> None:
        self.table_name = table_name
        self.client = client or default_client()

    # -- the batch --------------------------------------------------------------------------

    def create(self, batch: Batch) -> Batch:
        try:
            call(
                self.client.put_item,
                TableName=self.table_name,
                Item=batch_to_item(batch),
                ConditionExpression=NEW_ITEM,
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
            return batch
        except ConditionFailed as failed:
            return batch_from_item(failed.item)

    def record_key(self, batch: Batch) -> Batch:
        if batch.idempotency_key is None:
            raise ValueError("a batch without a key has no key record")
        item = attribute_values(
            {
                TABLE_PARTITION_KEY: key_partition(batch.tenant, batch.idempotency_key),
                TABLE_SORT_KEY: "#",
                **BATCH_KEY.stamp,
                "batch_id": batch.batch_id,
                "created_at": iso(batch.created_at),
                "fingerprint": batch.fingerprint,
            }
        )
        try:
            call(
                self.client.put_item,
                TableName=self.table_name,
                Item=item,
                ConditionExpression=NEW_ITEM,
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
            return batch
        except ConditionFailed as failed:
            if not failed.item:
                raise StoreUnavailableError("DynamoDB returned no record with the failed key condition") from None
            plain = BATCH_KEY.read(plain_values(failed.item))
            created = parse_iso(plain["created_at"])
            return batch.__class__(
                **{
                    **batch.__dict__,
                    "batch_id": plain["batch_id"],
                    "created_at": created,
                    "updated_at": created,
                    "fingerprint": plain["fingerprint"],
                }
            )

    def get(self, batch_id: str, *, tenant: str) -> Batch | None:
        response = call(
            self.client.get_item, TableName=self.table_name, Key=batch_key(tenant, batch_id), ConsistentRead=True
        )
        item = response.get("Item")
        return batch_from_item(item) if item else None

    def list_batches(self, tenant: str, *, limit: int, cursor: str | None) -> BatchListing:
        request: dict[str, Any] = {
            "TableName": self.table_name,
            "KeyConditionExpression": f"{TABLE_PARTITION_KEY} = :p",
            "ExpressionAttributeValues": attribute_values({":p": batch_partition(tenant)}),
            "ScanIndexForward": False,
            "ConsistentRead": True,
            "Limit": limit,
        }
        if cursor is not None:
            request["ExclusiveStartKey"] = key_of(batch_partition(tenant), _decoded(cursor, "cursor"))
        response = call(self.client.query, **request)
        batches = [batch_from_item(item) for item in response.get("Items", [])]
        last = response.get("LastEvaluatedKey")
        following = _encoded(str(plain_values(last)[TABLE_SORT_KEY])) if last and batches else None
        return BatchListing(batches, following)

    def seal(self, batch: Batch, *, now: datetime) -> Batch:
        try:
            response = call(
                self.client.update_item,
                TableName=self.table_name,
                Key=batch_key(batch.tenant, batch.batch_id),
                UpdateExpression="SET sealed_at = if_not_exists(sealed_at, :now), updated_at = :now",
                ConditionExpression=f"attribute_exists({TABLE_PARTITION_KEY}) AND open_pages = :zero",
                ExpressionAttributeValues=attribute_values({":now": iso(now), ":zero": 0}),
                ReturnValues="ALL_NEW",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ConditionFailed as failed:
            raise BatchConflictError(
                "a page of jobs is still being added to the batch; resend it (with its Idempotency-Key), then seal"
                if failed.item
                else "no such batch"
            ) from None
        return batch_from_item(response["Attributes"])

    def mark_cancelled(self, batch: Batch, *, now: datetime) -> Batch:
        response = call(
            self.client.update_item,
            TableName=self.table_name,
            Key=batch_key(batch.tenant, batch.batch_id),
            UpdateExpression="SET cancelled_at = if_not_exists(cancelled_at, :now), updated_at = :now",
            ConditionExpression=f"attribute_exists({TABLE_PARTITION_KEY})",
            ExpressionAttributeValues=attribute_values({":now": iso(now)}),
            ReturnValues="ALL_NEW",
        )
        return batch_from_item(response["Attributes"])

    def record_callback(self, batch: Batch, name: str, job_id: str, *, now: datetime) -> Batch:
        response = call(
            self.client.update_item,
            TableName=self.table_name,
            Key=batch_key(batch.tenant, batch.batch_id),
            UpdateExpression="SET #cb = if_not_exists(#cb, :job), updated_at = :now",
            ExpressionAttributeNames={"#cb": f"callback_{name}"},
            ExpressionAttributeValues=attribute_values({":job": job_id, ":now": iso(now)}),
            ReturnValues="ALL_NEW",
        )
        return batch_from_item(response["Attributes"])

    # -- pages ------------------------------------------------------------------------------

    def reserve_page(self, batch: Batch, page_id: str, job_ids: Sequence[str], *, now: datetime) -> BatchPage:
        page_item = page_to_item(batch, page_id, job_ids, now)
        items: list[dict[str, Any]] = [
            {"Put": {"TableName": self.table_name, "Item": page_item, "ConditionExpression": NEW_ITEM}},
            {
                "Update": {
                    "TableName": self.table_name,
                    "Key": batch_key(batch.tenant, batch.batch_id),
                    "UpdateExpression": "ADD open_pages :one SET updated_at = :now",
                    "ConditionExpression": OPEN_BATCH,
                    "ExpressionAttributeValues": attribute_values({":one": 1, ":now": iso(now)}),
                }
            },
        ]
        if transact(self.client, items):
            return BatchPage(page_id, tuple(job_ids), written=False)
        existing = self._page(batch, page_id)
        if existing is not None:
            return existing
        raise BatchConflictError("the batch is sealed or cancelled: no more jobs can be added")

    def write_page(self, batch: Batch, page: BatchPage, *, now: datetime) -> None:
        if page.written:
            return
        items: list[dict[str, Any]] = [
            {
                "Update": {
                    "TableName": self.table_name,
                    "Key": key_of(page_partition(batch.tenant, batch.batch_id), page.page_id),
                    "UpdateExpression": "SET written = :yes",
                    "ConditionExpression": "written = :no",
                    "ExpressionAttributeValues": attribute_values({":yes": True, ":no": False}),
                }
            },
            {
                "Update": {
                    "TableName": self.table_name,
                    "Key": batch_key(batch.tenant, batch.batch_id),
                    "UpdateExpression": "ADD #total :n, open_pages :minus SET updated_at = :now",
                    "ExpressionAttributeNames": {"#total": "total"},
                    "ExpressionAttributeValues": attribute_values(
                        {":n": len(page.job_ids), ":minus": -1, ":now": iso(now)}
                    ),
                }
            },
        ]
        transact(self.client, items)  # False: written before (a replay)

    def _page(self, batch: Batch, page_id: str) -> BatchPage | None:
        response = call(
            self.client.get_item,
            TableName=self.table_name,
            Key=key_of(page_partition(batch.tenant, batch.batch_id), page_id),
            ConsistentRead=True,
        )
        item = response.get("Item")
        return page_from_item(item) if item else None

    def member_ids(self, batch: Batch, *, limit: int, cursor: str | None) -> MemberIds:
        """Up to `limit` member ids, in the order their pages sort (by page id) and within a page in its order. The
        cursor holds the page and the position within it."""
        page_id, offset = None, 0
        if cursor is not None:
            text = _decoded(cursor, "cursor")
            page_id, _, offset_text = text.partition(":")
            if not offset_text.isdigit():
                raise InvalidRequestError("cursor", "cursor is not one this listing handed out")
            offset = int(offset_text)
        ids: list[str] = []
        start: Item | None = (
            key_of(page_partition(batch.tenant, batch.batch_id), page_id) if page_id is not None else None
        )
        # The cursor's own page is read again (from `offset`), then the pages after it.
        first = True
        while len(ids) < limit:
            request: dict[str, Any] = {
                "TableName": self.table_name,
                "KeyConditionExpression": f"{TABLE_PARTITION_KEY} = :p"
                + (f" AND {TABLE_SORT_KEY} >= :s" if first and page_id is not None else ""),
                "ExpressionAttributeValues": attribute_values(
                    {
                        ":p": page_partition(batch.tenant, batch.batch_id),
                        **({":s": page_id} if first and page_id else {}),
                    }
                ),
                "ConsistentRead": True,
                "Limit": PAGES_READ,
            }
            if start is not None and not first:
                request["ExclusiveStartKey"] = start
            response = call(self.client.query, **request)
            pages = [page_from_item(item) for item in response.get("Items", [])]
            for page in pages:
                skip = offset if first and page.page_id == page_id else 0
                for index in range(skip, len(page.job_ids)):
                    if len(ids) == limit:
                        return MemberIds(ids, _encoded(f"{page.page_id}:{index}"))
                    ids.append(page.job_ids[index])
                start = key_of(page_partition(batch.tenant, batch.batch_id), page.page_id)
            first = False
            if "LastEvaluatedKey" not in response:
                break
        return MemberIds(ids, None)

    # -- members ----------------------------------------------------------------------------

    def count_member(self, job: Job, *, now: datetime) -> bool:
        if job.batch_id is None or not job.status.is_final:
            return False
        job_update = {
            "TableName": self.table_name,
            "Key": job_key(job.tenant, job.job_id),
            "UpdateExpression": "SET batch_counted = :status",
            "ConditionExpression": "#s = :status AND attribute_not_exists(batch_counted)",
            "ExpressionAttributeNames": {"#s": "status"},
            "ExpressionAttributeValues": attribute_values({":status": job.status.value}),
        }
        batch_update = batch_count_update(self.table_name, job.tenant, job.batch_id, job.status, 1, iso(now))
        return transact(self.client, [{"Update": job_update}, {"Update": batch_update}])

    def get_jobs(self, tenant: str, job_ids: Sequence[str]) -> list[Job]:
        found: dict[str, Job] = {}
        for start in range(0, len(job_ids), 100):
            pending: list[Item] = [job_key(tenant, job_id) for job_id in dict.fromkeys(job_ids[start : start + 100])]
            for _ in range(5):
                if not pending:
                    break
                response = call(
                    self.client.batch_get_item,
                    RequestItems={self.table_name: {"Keys": pending, "ConsistentRead": True}},
                )
                for item in response.get("Responses", {}).get(self.table_name, []):
                    job = from_item(item)
                    if job.tenant == tenant:
                        found[job.job_id] = job
                pending = list(response.get("UnprocessedKeys", {}).get(self.table_name, {}).get("Keys", []))
            if pending:
                raise StoreUnavailableError("DynamoDB kept some keys unprocessed")
        return [found[job_id] for job_id in job_ids if job_id in found]


# -- items ----------------------------------------------------------------------------------------


def batch_to_item(batch: Batch) -> Item:
    plain: dict[str, Any] = {
        **key_item(batch),
        **BATCH.stamp,
        "batch_id": batch.batch_id,
        "tenant": batch.tenant,
        "created_at": iso(batch.created_at),
        "updated_at": iso(batch.updated_at),
        "total": batch.total,
        "open_pages": batch.open_pages,
        "callbacks_json": json.dumps(
            {name: {"type": spec.type, "payload": spec.payload} for name, spec in batch.callbacks.items()},
            separators=(",", ":"),
        ),
        "fingerprint": batch.fingerprint,
    }
    for status in FINAL_STATES:
        plain[count_attribute(status)] = batch.count(status)
    optional = {
        "idempotency_key": batch.idempotency_key,
        "parent_job_id": batch.parent_job_id,
        "sealed_at": iso(batch.sealed_at) if batch.sealed_at else None,
        "cancelled_at": iso(batch.cancelled_at) if batch.cancelled_at else None,
    }
    plain.update({name: value for name, value in optional.items() if value is not None})
    return attribute_values(plain)


def page_to_item(batch: Batch, page_id: str, job_ids: Sequence[str], now: datetime) -> Item:
    return attribute_values(
        {
            TABLE_PARTITION_KEY: page_partition(batch.tenant, batch.batch_id),
            TABLE_SORT_KEY: page_id,
            **BATCH_PAGE.stamp,
            "job_ids": list(job_ids),
            "written": False,
            "created_at": iso(now),
        }
    )


def key_item(batch: Batch) -> dict[str, str]:
    return {TABLE_PARTITION_KEY: batch_partition(batch.tenant), TABLE_SORT_KEY: batch.batch_id}


def batch_from_item(item: Mapping[str, Any]) -> Batch:
    plain = BATCH.read(plain_values(item))
    counts = {
        name.removeprefix("count_").upper(): int(value)
        for name, value in plain.items()
        if name.startswith("count_") and int(value) != 0
    }
    callbacks = {
        name: CallbackSpec(type=str(spec["type"]), payload=dict(spec["payload"]))
        for name, spec in json.loads(plain.get("callbacks_json") or "{}").items()
    }
    callback_jobs = {
        name.removeprefix("callback_"): str(value) for name, value in plain.items() if name.startswith("callback_")
    }
    return Batch(
        batch_id=plain["batch_id"],
        tenant=plain["tenant"],
        created_at=parse_iso(plain["created_at"]),
        updated_at=parse_iso(plain["updated_at"]),
        total=int(plain.get("total", 0)),
        open_pages=int(plain.get("open_pages", 0)),
        counts=counts,
        sealed_at=parse_iso(plain["sealed_at"]) if plain.get("sealed_at") else None,
        cancelled_at=parse_iso(plain["cancelled_at"]) if plain.get("cancelled_at") else None,
        callbacks=callbacks,
        callback_jobs=callback_jobs,
        idempotency_key=plain.get("idempotency_key"),
        fingerprint=plain.get("fingerprint") or "",
        parent_job_id=plain.get("parent_job_id"),
    )


def page_from_item(item: Mapping[str, Any]) -> BatchPage:
    plain = BATCH_PAGE.read(plain_values(item))
    return BatchPage(
        str(plain[TABLE_SORT_KEY]), tuple(str(i) for i in plain.get("job_ids", [])), bool(plain["written"])
    )


def _encoded(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def _decoded(cursor: str, field: str) -> str:
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
    except ValueError:
        raise InvalidRequestError(field, f"{field} is not one this listing handed out") from None
    if not text or len(text) > 200 or not text.isprintable():
        raise InvalidRequestError(field, f"{field} is not one this listing handed out")
    return text


__all__ = ["DynamoDbBatchStore", "JobStatus"]
