"""The job store on one DynamoDB table. Every state change is one conditional write, its condition
rendered from the transition declared in offpath.domain.job (`condition_of`); items are written and
read with boto3's TypeSerializer/TypeDeserializer.

Item layout (key `pk` + `sk`, offpath.naming; every key is made by `item_key`):
- `JOB#<tenant>#<shard>` / `<job_id>`: the job. The shard (0..15) is crc32 of the id, the id is time-ordered
  (offpath.domain.ids), so a tenant's jobs sort by creation time within each of its 16 partitions. A listing
  queries the tenant's partitions of the table itself, newest first, and merges them; its cursor holds the
  position reached in each shard. No listing index: a new job writes one item and no index entry.
- `IDEM#<tenant>#<sha256(key) prefix>` / `#`: an idempotency key's record (the job's id and creation time, the
  submission's fingerprint), written by one conditional put before the job (`record_key`); it expires
  (TTL) after the job's retention, counted from when the job is due.
- `DEBOUNCE#<tenant>#<sha256(type, key) prefix>` / `#`: a debounce key's record (its burst's survivor, when it was
  submitted and when its window ends; logic/debounce.py), replaced by each debounced submit; it expires (TTL) a
  day after its window.
- `ONCE#<scope>#<name>` / `#`: a `ctx.once` mark; `SCHEDULE#<name>` / `#`: a schedule's firings. The quota
  counters (adapters/dynamodb_quotas.py) and the webhook items (adapters/webhook_store.py) are single items too.
Index (offpath.naming.TABLE_INDEXES): the sparse `sweep` index (shard, sweep time) for the sweeper, keys only
(it projects the table's `pk` and `sk`).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import logging
import math
import re
import threading
import uuid
import zlib
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Literal, TypeVar, cast, overload

import botocore.exceptions
from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from botocore.config import Config

from offpath.adapters.item_formats import DEBOUNCE_RECORD, JOB, KEY_RECORD, ONCE_MARK, SCHEDULE_STATE
from offpath.domain.errors import (
    IdempotencyConflictError,
    InvalidRequestError,
    ItemTooLargeError,
    JobConflictError,
    JobNotFoundError,
    StoreUnavailableError,
)
from offpath.domain.job import (
    CANCEL,
    CLAIM,
    DISCARD,
    ENQUEUE_SCHEDULED,
    EXPIRE,
    FAIL,
    FAIL_EXPIRED_LEASE,
    FOLLOWED_UP,
    LEASE_EXPIRED_OUTCOME,
    NAME_SURVIVOR,
    RECORD_PROGRESS,
    REDRIVE,
    REQUEUE_EXPIRED_LEASE,
    RESCHEDULE_SWEEP,
    RETRY,
    RETRY_BY_HAND,
    RETRY_BY_HAND_SCHEDULED,
    SUCCEED,
    SUPERSEDED,
    AttemptError,
    AttemptRecord,
    Facts,
    Guard,
    Job,
    JobStatus,
    Progress,
    Transition,
    fair_share,
    payload_json,
)
from offpath.domain.ports import (
    FILTERED_SCAN_PAGES,
    CreateOutcome,
    DebounceRecord,
    Firing,
    JobPage,
    KeyRecord,
    ScheduleState,
    key_record_extension,
)
from offpath.naming import JOB_ITEM_PREFIX, JOB_SHARDS, SOLE_SORT_KEY, TABLE_PARTITION_KEY, TABLE_SORT_KEY

if TYPE_CHECKING:
    from concurrent.futures import ThreadPoolExecutor

    from mypy_boto3_dynamodb.client import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import AttributeValueTypeDef

INDEX_SWEEP = "sweep"
# The condition of a write that must create its item.
NEW_ITEM = f"attribute_not_exists({TABLE_PARTITION_KEY})"
KEY_ITEM_PREFIX = "IDEM#"
DEBOUNCE_ITEM_PREFIX = "DEBOUNCE#"
# A debounce key's record is kept this long after its window ended (TTL); a record gone is a key never used.
DEBOUNCE_RECORD_MARGIN = timedelta(days=1)
# An idempotency key's record is named by this many hex digits of the key's SHA-256 (128 bits).
KEY_DIGEST_CHARS = 32
# The sweep index's partition key is spread over shards so no single partition takes every write.
SWEEP_SHARDS = 4
CONFLICT = "ConditionalCheckFailedException"
# DynamoDB's ValidationException for an item over 400 KB (PutItem: "Item size has exceeded the maximum allowed
# size"; UpdateItem: "Item size to update has exceeded the maximum allowed size").
ITEM_TOO_LARGE = re.compile(r"item size .*exceeded", re.IGNORECASE)
# A cursor as handed out (contract.CURSOR_PATTERN): base64url without padding, of the key's JSON.
CURSOR_TEXT = re.compile(r"[A-Za-z0-9_-]{1,2048}")
CURSOR_SORT_KEY = re.compile(r"[0-9a-f]{32}")
# A cursor names its listing's tenant by a digest (a tenant may be 1,024 characters; the cursor stays short).
CURSOR_TENANT_CHARS = 16
# total_max_attempts counts the first try: 3 attempts in all ("max_attempts" would mean 3 retries).
# A listing's queries of a tenant's shards go out together: one pooled connection each.
SDK_CONFIG = Config(
    retries={"mode": "standard", "total_max_attempts": 3},
    connect_timeout=2,
    read_timeout=5,
    max_pool_connections=JOB_SHARDS,
)

logger = logging.getLogger(__name__)

Item = dict[str, "AttributeValueTypeDef"]
_T = TypeVar("_T")
_SERIALIZER = TypeSerializer()
_DESERIALIZER = TypeDeserializer()
# What a failed job's write sets, whether an attempt failed or its lease expired on the last one.
FAILED_UPDATE = "#e = :error, finished_at = :now, expires_at = :ttl REMOVE lease_until, sweep_pk, sweep_at"


def default_client() -> DynamoDBClient:
    import boto3

    return boto3.client("dynamodb", config=SDK_CONFIG)


class DynamoDbJobStore:
    def __init__(
        self, table_name: str, client: DynamoDBClient | None = None, *, listing_readers: int = JOB_SHARDS
    ) -> None:
        self.table_name = table_name
        self.client = client or default_client()
        # Items `_readable` left out because they could not be read as jobs.
        self.unreadable_items = 0
        # How many of a listing's shard queries go out at once (1: one after the other); docs/decisions.md.
        self.listing_readers = listing_readers
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()

    # -- submit -----------------------------------------------------------------------------

    def create(self, job: Job) -> CreateOutcome:
        try:
            self._call(
                self.client.put_item,
                TableName=self.table_name,
                Item=to_item(job),
                ConditionExpression=NEW_ITEM,
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
            return CreateOutcome(job, replayed=False)
        except ConditionFailed as failed:
            existing = from_item(failed.item)
        if existing.submission_id == job.submission_id:
            # An SDK retry of our own write that had landed: the job is ours, and new.
            return CreateOutcome(existing, replayed=False)
        if not existing.same_submission(job):
            raise IdempotencyConflictError(existing)
        return CreateOutcome(existing, replayed=True)

    def record_key(self, job: Job, *, expires_at: datetime) -> KeyRecord:
        """One conditional put of the key's record (ReturnValuesOnConditionCheckFailure: the record that
        stands comes back with the failed condition, no read)."""
        if job.idempotency_key is None:
            raise ValueError("a job without an idempotency key has no key record")
        record = KeyRecord(job.job_id, job.created_at, job.fingerprint, job.submission_id)
        try:
            self._call(
                self.client.put_item,
                TableName=self.table_name,
                Item=key_record_to_item(job.tenant, job.idempotency_key, record, expires_at),
                ConditionExpression=NEW_ITEM,
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
            return record
        except ConditionFailed as failed:
            if not failed.item:
                raise StoreUnavailableError("DynamoDB returned no record with the failed key condition") from None
            return key_record_from_item(failed.item)

    def swap_debounce(self, tenant: str, job_type: str, key: str, record: DebounceRecord) -> DebounceRecord | None:
        """One unconditional put (ReturnValues ALL_OLD: the record it replaced comes back with it, no read)."""
        response = self._call(
            self.client.put_item,
            TableName=self.table_name,
            Item=attribute_values(
                {
                    **item_key(debounce_partition(tenant, job_type, key)),
                    **DEBOUNCE_RECORD.stamp,
                    "job_id": record.job_id,
                    "submitted_at": iso(record.submitted_at),
                    "window_end": iso(record.window_end),
                    "expires_at": epoch(record.window_end + DEBOUNCE_RECORD_MARGIN),
                }
            ),
            ReturnValues="ALL_OLD",
        )
        old = response.get("Attributes")
        return debounce_record_from_item(old) if old else None

    def key_record(self, tenant: str, idempotency_key: str) -> KeyRecord | None:
        response = self._call(
            self.client.get_item,
            TableName=self.table_name,
            Key=key_of(idempotency_partition(tenant, idempotency_key)),
            ConsistentRead=True,
        )
        item = response.get("Item")
        return key_record_from_item(item) if item else None

    # -- reads ------------------------------------------------------------------------------

    def get(self, job_id: str, *, tenant: str) -> Job | None:
        response = self._call(
            self.client.get_item, TableName=self.table_name, Key=job_key(tenant, job_id), ConsistentRead=True
        )
        item = response.get("Item")
        job = from_item(item) if item else None
        return job if job is not None and job.tenant == tenant else None

    def list_jobs(
        self,
        tenant: str,
        *,
        status: JobStatus | None,
        job_type: str | None,
        limit: int,
        cursor: str | None,
        tag: tuple[str, str] | None = None,
    ) -> JobPage:
        """The tenant's jobs, newest first. Each of its partitions (shards) is queried for its share of the page
        after the position the cursor holds for it (the queries go out together), newest first; the shards are
        merged, and a shard whose share ran out before the page was full is queried again for the rest. The
        items come back whole: they are filtered by status and type as they are merged, with no second read,
        and a filtered listing reads on until `limit` jobs match or it has passed `FILTERED_SCAN_PAGES` x
        `limit` jobs; then the page is short and its cursor goes on after the last job passed."""
        positions = decode_cursor(cursor, tenant) if cursor is not None else [None] * JOB_SHARDS
        # Ids spread evenly over the shards: a page takes limit/16 of each on average, rarely twice that.
        share = min(limit, 2 * math.ceil(limit / JOB_SHARDS) + 2)
        read_to: dict[int, str | None] = {s: p for s, p in enumerate(positions) if p is not False}
        buffers: dict[int, deque[Item]] = {shard: deque() for shard in read_to}
        more: dict[int, bool] = {}
        to_read = {shard: share for shard in read_to}
        page: list[tuple[int, Item]] = []
        jobs: list[Job] = []
        filtered = status is not None or job_type is not None or tag is not None
        budget = limit * FILTERED_SCAN_PAGES if filtered else limit
        while True:
            for shard, (items, has_more) in self._query_shards(tenant, read_to, to_read).items():
                buffers[shard].extend(items)
                more[shard] = has_more and bool(items)
                if items:
                    read_to[shard] = sort_key_of(items[-1])
            if len(jobs) == limit or len(page) == budget:
                break
            # A shard that may hold more is read on before the merge passes it: its next job may be the newest.
            wanted = min(budget - len(page), max(limit - len(jobs), share))
            to_read = {shard: wanted for shard, buffer in buffers.items() if not buffer and more[shard]}
            if to_read:
                continue
            heads = [shard for shard, buffer in buffers.items() if buffer]
            if not heads:
                break
            newest = max(heads, key=lambda shard: sort_key_of(buffers[shard][0]))
            item = buffers[newest].popleft()
            page.append((newest, item))
            job = self._readable(item)
            if (
                job is not None
                and job.tenant == tenant
                and (status is None or job.status is status)
                and (job_type is None or job.type == job_type)
                and (tag is None or job.tags.get(tag[0]) == tag[1])
            ):
                jobs.append(job)
        following: list[str | Literal[False] | None] = list(positions)
        for shard, item in page:
            following[shard] = sort_key_of(item)
        for shard, buffer in buffers.items():
            if not buffer and not more[shard]:
                following[shard] = False
        done = all(position is False for position in following)
        return JobPage(jobs, None if done else encode_cursor(tenant, following))

    def _query_shards(
        self, tenant: str, after: Mapping[int, str | None], limits: Mapping[int, int]
    ) -> dict[int, tuple[list[Item], bool]]:
        """Query the given shards of the tenant's jobs (shard -> how many), each after its position in `after`:
        together on the store's threads (boto3's clients are thread-safe), or one by one."""
        if len(limits) <= 1 or self.listing_readers <= 1:
            return {shard: self._query_shard(tenant, shard, after[shard], n) for shard, n in limits.items()}
        pool = self._listing_pool()
        futures = {shard: pool.submit(self._query_shard, tenant, shard, after[shard], n) for shard, n in limits.items()}
        return {shard: future.result() for shard, future in futures.items()}

    def _listing_pool(self) -> ThreadPoolExecutor:
        with self._pool_lock:
            if self._pool is None:
                # Imported here: only the api lists, and the other functions' cold start need not pay for it.
                from concurrent.futures import ThreadPoolExecutor

                self._pool = ThreadPoolExecutor(max_workers=self.listing_readers, thread_name_prefix="listing")
            return self._pool

    def _query_shard(self, tenant: str, shard: int, after: str | None, limit: int) -> tuple[list[Item], bool]:
        """Up to `limit` job items of one shard of the tenant's jobs, newest first, after the job id `after`;
        and whether the shard may hold more. Read consistently, as a job read by its id is."""
        partition = job_partition(tenant, shard)
        request: dict[str, Any] = {
            "TableName": self.table_name,
            "KeyConditionExpression": f"{TABLE_PARTITION_KEY} = :p",
            "ExpressionAttributeValues": attribute_values({":p": partition}),
            "ScanIndexForward": False,
            "ConsistentRead": True,
            "Limit": limit,
        }
        if after is not None:
            request["ExclusiveStartKey"] = key_of(partition, after)
        response = self._call(self.client.query, **request)
        return list(response.get("Items", [])), "LastEvaluatedKey" in response

    def _get_many(self, keys: list[Item]) -> list[Job]:
        """BatchGetItem in chunks of 100, retrying unprocessed keys; returns jobs in `keys` order. An item
        that cannot be read as a job is left out (logged by its key, never its content, and counted in
        `unreadable_items`): one bad record never fails a sweep."""
        found: dict[tuple[str, str], Job] = {}
        for start in range(0, len(keys), 100):
            pending: list[Item] = keys[start : start + 100]
            for _ in range(5):
                if not pending:
                    break
                response = self._call(
                    self.client.batch_get_item,
                    RequestItems={self.table_name: {"Keys": pending, "ConsistentRead": True}},
                )
                for item in response.get("Responses", {}).get(self.table_name, []):
                    job = self._readable(item)
                    if job is not None:
                        found[plain_key(item)] = job
                pending = list(response.get("UnprocessedKeys", {}).get(self.table_name, {}).get("Keys", []))
            if pending:
                raise StoreUnavailableError("DynamoDB kept some keys unprocessed")
        return [found[plain_key(key)] for key in keys if plain_key(key) in found]

    def _readable(self, item: Item) -> Job | None:
        try:
            return from_item(item)
        except Exception:
            self.unreadable_items += 1
            logger.error(
                "a job item could not be read; left out",
                extra={"key": "/".join(plain_key(item)), "unreadable_items": self.unreadable_items},
            )
            return None

    # -- worker -----------------------------------------------------------------------------

    def claim(
        self, job_id: str, *, tenant: str, now: datetime, lease_until: datetime, sweep_at: datetime | None = None
    ) -> Job:
        # Only a claim on one of its message's last receives enters the sweep index (logic/process.py).
        swept = ", sweep_pk = :shard, sweep_at = :sweep" if sweep_at is not None else ""
        sweep_values = {":shard": sweep_shard(job_id), ":sweep": iso(sweep_at)} if sweep_at is not None else {}
        try:
            return self._write(
                CLAIM,
                tenant,
                job_id,
                Facts(now=now, tenant=tenant),
                "SET #s = :status, attempt = attempt + :one, lease_until = :lease, "
                "started_at = if_not_exists(started_at, :now), attempt_started_at = :now, updated_at = :now"
                f"{swept} REMOVE next_attempt_at",
                {":one": 1, ":now": iso(now), ":lease": iso(lease_until), **sweep_values},
            )
        except ConditionFailed as failed:
            if not failed.item:
                raise JobNotFoundError(job_id) from None
            # The tenant is part of the key: a job found is the message's tenant's.
            current = from_item(failed.item)
            if current.status is JobStatus.RUNNING and current.lease_until == lease_until and current.updated_at == now:
                # This claim's own write, met by an SDK retry after its response was lost.
                return current
            raise JobConflictError(current, f"job is {current.status.value}") from None

    def record_success(
        self,
        job: Job,
        *,
        result: Any,
        now: datetime,
        expires_at: datetime,
        followup_at: datetime | None = None,
        next_job_id: str | None = None,
    ) -> None:
        sets = "result_json = :result, finished_at = :now, expires_at = :ttl"
        values: dict[str, Any] = {":result": json.dumps(result, default=str), ":ttl": epoch(expires_at)}
        if followup_at is None:
            update = f"{sets} REMOVE lease_until, #e, sweep_pk, sweep_at"
        else:
            # The job has follow-ups (logic/followups.py): it stays in the sweep index until they ran, and a chain's
            # next job's id is fixed here, once ever.
            sets += ", sweep_pk = :shard, sweep_at = :sweep"
            values |= {":shard": sweep_shard(job.job_id), ":sweep": iso(followup_at)}
            if next_job_id is not None:
                sets += ", next_job_id = if_not_exists(next_job_id, :next)"
                values[":next"] = next_job_id
            update = f"{sets} REMOVE lease_until, #e"
        self._record_outcome(SUCCEED, job, now, update, values)
        self._keep_key(job, now, expires_at)

    def clear_followups(self, job: Job) -> None:
        if job.sweep_at is None:
            raise JobConflictError(job, "the job has no sweep time")
        try:
            self._write(
                FOLLOWED_UP,
                job.tenant,
                job.job_id,
                Facts(seen_sweep_at=job.sweep_at),
                "REMOVE sweep_pk, sweep_at",
                {},
                returns=False,
            )
        except ConditionFailed:
            raise JobConflictError(None, "the job's follow-ups were cleared, or it runs again") from None

    def record_retry(
        self, job: Job, *, error: str, now: datetime, next_attempt_at: datetime, detail: AttemptError | None = None
    ) -> None:
        self._record_outcome(
            RETRY,
            job,
            now,
            "#e = :error, next_attempt_at = :next REMOVE lease_until",
            {":error": error, ":next": iso(next_attempt_at)},
            detail=detail,
        )

    def record_failure(
        self, job: Job, *, error: str, now: datetime, expires_at: datetime, detail: AttemptError | None = None
    ) -> None:
        self._record_outcome(FAIL, job, now, FAILED_UPDATE, {":error": error, ":ttl": epoch(expires_at)}, detail=detail)
        self._keep_key(job, now, expires_at)

    def fail_expired_lease(self, job: Job, *, now: datetime, expires_at: datetime) -> None:
        self._record_outcome(
            FAIL_EXPIRED_LEASE,
            job,
            now,
            FAILED_UPDATE,
            {":error": "lease expired", ":ttl": epoch(expires_at)},
            outcome=LEASE_EXPIRED_OUTCOME,
        )
        self._keep_key(job, now, expires_at)

    def _keep_key(self, job: Job, now: datetime, expires_at: datetime) -> None:
        """A keyed job that finished late (more than KEY_RECORD_MARGIN after it was due) would outlive its key's
        record: the record's expiry is moved past the job's (one conditional write, only then; a record that is
        gone or names another job is left alone)."""
        until = key_record_extension(job, now=now, expires_at=expires_at)
        if until is None or job.idempotency_key is None:
            return
        with contextlib.suppress(ConditionFailed):
            self._call(
                self.client.update_item,
                TableName=self.table_name,
                Key=key_of(idempotency_partition(job.tenant, job.idempotency_key)),
                UpdateExpression="SET expires_at = :until",
                ConditionExpression="job_id = :job AND expires_at < :until",
                ExpressionAttributeValues=attribute_values({":until": epoch(until), ":job": job.job_id}),
            )

    def _record_outcome(
        self,
        transition: Transition,
        job: Job,
        now: datetime,
        update: str,
        values: dict[str, Any],
        *,
        outcome: str | None = None,
        detail: AttemptError | None = None,
    ) -> None:
        """Write how an attempt ended (SUCCEEDED, RETRYING or FAILED), fenced: only while that
        attempt still holds the job. The same write adds the attempt to the job's history: the fence
        makes `job`'s history the stored one."""
        if transition.to is not None and transition.to.is_final and job.has_followups and ":sweep" not in values:
            update, kept = keep_in_sweep(update, job.job_id, job.followup_sweep_at(now))
            values = {**values, **kept}
        error = values.get(":error")
        ended = outcome or (transition.to or job.status).value
        history = job.history_with(ended, now, error if isinstance(error, str) else None, detail)
        try:
            self._write(
                transition,
                job.tenant,
                job.job_id,
                Facts(now=now, attempt=job.attempt),
                f"SET #s = :status, updated_at = :now, attempts_json = :attempts, {update}",
                {":now": iso(now), ":attempts": attempts_json(history), **values},
                names={"#e": "error"},
                returns=False,
            )
        except ConditionFailed as failed:
            current = from_item(failed.item) if failed.item else None
            if (
                current is not None
                and current.status is transition.to
                and current.attempt == job.attempt
                and current.updated_at == now
            ):
                # This outcome's own write, met by an SDK retry after its response was lost.
                return
            raise JobConflictError(current, f"attempt {job.attempt} no longer holds the job") from None

    def set_progress(self, job_id: str, *, tenant: str, attempt: int, progress: Progress, now: datetime) -> None:
        try:
            self._write(
                RECORD_PROGRESS,
                tenant,
                job_id,
                Facts(now=now, attempt=attempt),
                "SET progress_fraction = :f, progress_message = :m, updated_at = :now",
                {":f": fraction_number(progress.fraction), ":m": progress.message, ":now": iso(now)},
                returns=False,
            )
        except ConditionFailed:
            raise JobConflictError(None, f"attempt {attempt} no longer holds the job") from None

    def mark_once(self, job_id: str, name: str, *, now: datetime, expires_at: datetime) -> bool:
        # The mark carries a token of this call: an SDK retry of a mark that landed (its response was
        # lost) finds its own token and is still the first, rather than losing the side effect.
        token = uuid.uuid4().hex
        try:
            self._call(
                self.client.put_item,
                TableName=self.table_name,
                Item=attribute_values(
                    {
                        **item_key(f"ONCE#{job_id}#{name}"),
                        **ONCE_MARK.stamp,
                        "marked_at": iso(now),
                        "expires_at": epoch(expires_at),
                        "mark_token": token,
                    }
                ),
                ConditionExpression=NEW_ITEM,
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
            return True
        except ConditionFailed as failed:
            return ONCE_MARK.read(plain_values(failed.item)).get("mark_token") == token

    # -- scheduling, sweeping and redrive -----------------------------------------------------

    def enqueue_scheduled(self, job_id: str, *, tenant: str, now: datetime, sweep_at: datetime) -> Job:
        return self._move_to_queued(ENQUEUE_SCHEDULED, job_id, tenant=tenant, now=now, sweep_at=sweep_at)

    def reset_for_redrive(self, job_id: str, *, tenant: str, now: datetime, sweep_at: datetime) -> Job:
        return self._move_to_queued(
            REDRIVE,
            job_id,
            tenant=tenant,
            now=now,
            sweep_at=sweep_at,
            also=", attempt = :zero, redrives = redrives + :one, resends = :zero REMOVE #e, finished_at, expires_at",
            values={":zero": 0, ":one": 1},
            names={"#e": "error"},
            uncount=True,
        )

    def retry_by_hand(
        self,
        job_id: str,
        *,
        tenant: str,
        now: datetime,
        sweep_at: datetime,
        operation: str | None = None,
        scheduled: bool = False,
    ) -> Job:
        marked = ", bulk_operation_id = :op" if operation is not None else ""
        transition = RETRY_BY_HAND_SCHEDULED if scheduled else RETRY_BY_HAND
        try:
            return self._move_to_queued(
                transition,
                job_id,
                tenant=tenant,
                now=now,
                sweep_at=sweep_at,
                # ADD: a job written before hand retries were counted has no `retries` yet.
                also=f", retried_at = :now, attempt = :zero, resends = :zero{marked} "
                "REMOVE #e, finished_at, expires_at, lease_until, next_attempt_at, discarded_at, start_by, "
                "cancel_reason, superseded_by ADD retries :one",
                values={":zero": 0, ":one": 1, **({":op": operation} if operation is not None else {})},
                names={"#e": "error"},
                uncount=True,
            )
        except JobConflictError as conflict:
            current = conflict.job
            if (
                current is not None
                and current.status is transition.to
                and current.updated_at == now
                and current.sweep_at == sweep_at
            ):
                # This retry's own write, met by an SDK retry after its response was lost.
                return current
            raise

    def _move_to_queued(
        self,
        transition: Transition,
        job_id: str,
        *,
        tenant: str,
        now: datetime,
        sweep_at: datetime,
        also: str = "",
        values: dict[str, Any] | None = None,
        names: dict[str, str] | None = None,
        uncount: bool = False,
    ) -> Job:
        """`uncount`: the job leaves a final state; a batch member counted in that state is uncounted in the same
        transaction (its batch's count of the state - 1, its `batch_counted` mark removed), so the batch's counts
        stay exact while it runs again. A plain job pays nothing for it: one write, whose condition also requires
        no mark; a counted member fails it and takes the transaction."""
        update = "SET #s = :status, updated_at = :now, sweep_pk = :shard, sweep_at = :sweep" + also
        all_values = {":now": iso(now), ":shard": sweep_shard(job_id), ":sweep": iso(sweep_at), **(values or {})}
        facts = Facts(now=now, tenant=tenant)
        try:
            if not uncount:
                return self._write(transition, tenant, job_id, facts, update, all_values, names=names)
            try:
                return self._write(transition, tenant, job_id, facts, update, all_values, names=names, plain_only=True)
            except ConditionFailed as failed:
                current = from_item(failed.item) if failed.item else None
                if current is None or not transition.allows(current, facts):
                    raise
                if current.batch_counted is None or current.batch_id is None:
                    return self._write(transition, tenant, job_id, facts, update, all_values, names=names)
                self._uncount_and_write(transition, current, facts, update, all_values, names or {})
                found = self.get(job_id, tenant=tenant)
                if found is None:
                    raise JobNotFoundError(job_id) from None
                return found
        except ConditionFailed as failed:
            current = _tenants_job(failed, job_id)
            raise JobConflictError(current, f"job is {current.status.value}") from None

    def requeue_expired_lease(self, job: Job, *, now: datetime, sweep_at: datetime) -> Job:
        try:
            return self._write(
                REQUEUE_EXPIRED_LEASE,
                job.tenant,
                job.job_id,
                Facts(now=now, attempt=job.attempt),
                "SET #s = :status, updated_at = :now, sweep_at = :sweep, resends = resends + :one, "
                "attempts_json = :attempts REMOVE lease_until",
                {
                    ":now": iso(now),
                    ":sweep": iso(sweep_at),
                    ":one": 1,
                    ":attempts": attempts_json(job.history_with(LEASE_EXPIRED_OUTCOME, now, "lease expired")),
                },
            )
        except ConditionFailed as failed:
            current = from_item(failed.item) if failed.item else None
            raise JobConflictError(current, "the job's lease is no longer expired at that attempt") from None

    def due_for_sweep(self, *, now: datetime, limit: int) -> list[Job]:
        keys: list[Item] = []
        for shard in range(SWEEP_SHARDS):
            request: dict[str, Any] = {
                "TableName": self.table_name,
                "IndexName": INDEX_SWEEP,
                "KeyConditionExpression": "sweep_pk = :shard AND sweep_at <= :now",
                "ExpressionAttributeValues": attribute_values({":shard": f"SWEEP#{shard}", ":now": iso(now)}),
                "Limit": limit,
            }
            response = self._call(self.client.query, **request)
            # Keys only: the index projects the table's key (pk + sk) beside its own.
            keys.extend(key_of(*plain_key(item)) for item in response.get("Items", []))
        # The index holds keys only; the items themselves are read consistently, then shared out fairly
        # across tenants (each shard's `limit` oldest due keys are the window it is shared out of).
        due = [job for job in self._get_many(keys) if job.sweep_at is not None and job.sweep_at <= now]
        return fair_share(due, limit)

    def reschedule_sweep(self, job: Job, *, sweep_at: datetime, resent: bool) -> None:
        if job.sweep_at is None:
            raise JobConflictError(job, "the job has no sweep time")
        try:
            self._write(
                RESCHEDULE_SWEEP,
                job.tenant,
                job.job_id,
                Facts(seen_sweep_at=job.sweep_at),
                "SET sweep_at = :next, resends = resends + :inc",
                {":next": iso(sweep_at), ":inc": 1 if resent else 0},
                returns=False,
            )
        except ConditionFailed:
            raise JobConflictError(None, "another sweep handled the job") from None

    def get_schedule_state(self, name: str) -> ScheduleState | None:
        response = self._call(
            self.client.get_item,
            TableName=self.table_name,
            Key=key_of(schedule_key(name)),
            ConsistentRead=True,
        )
        item = response.get("Item")
        return schedule_state_from_item(name, item) if item else None

    def record_firing(self, name: str, firing: Firing, *, keep: int) -> ScheduleState:
        for _ in range(5):
            current = self.get_schedule_state(name) or ScheduleState(name, None, (), version=0)
            others = tuple(f for f in current.firings if f.slot != firing.slot)
            updated = ScheduleState(
                name,
                firing.job_id or current.last_job_id,
                ((firing, *others))[:keep],
                version=current.version + 1,
            )
            condition = NEW_ITEM if current.version == 0 else "version = :seen"
            values = attribute_values({":seen": current.version}) if current.version else {}
            try:
                self._call(
                    self.client.put_item,
                    TableName=self.table_name,
                    Item=schedule_state_to_item(updated),
                    ConditionExpression=condition,
                    **({"ExpressionAttributeValues": values} if values else {}),
                )
                return updated
            except ConditionFailed:
                continue
        raise StoreUnavailableError(f"schedule {name} is being updated too often to record a firing")

    # -- api --------------------------------------------------------------------------------

    def cancel(
        self,
        job_id: str,
        *,
        tenant: str,
        now: datetime,
        expires_at: datetime,
        operation: str | None = None,
        superseded_by: str | None = None,
    ) -> Job:
        marked = ", bulk_operation_id = :op" if operation is not None else ""
        # Superseded (a later submit under its debounce key): the reason and the survivor, in the same write.
        why = ", cancel_reason = :reason, superseded_by = :survivor" if superseded_by is not None else ""
        values: dict[str, Any] = {":now": iso(now), ":ttl": epoch(expires_at)}
        if superseded_by is not None:
            values |= {":reason": SUPERSEDED, ":survivor": superseded_by}
        if operation is not None:
            values[":op"] = operation
        update = (
            f"SET #s = :status, updated_at = :now, finished_at = :now, expires_at = :ttl{marked}{why} "
            "REMOVE sweep_pk, sweep_at"
        )
        try:
            try:
                # A plain job (no follow-ups) is cancelled by this one write; a batch member fails its condition
                # and is cancelled by the next, which keeps it in the sweep index for its follow-ups.
                cancelled = self._write(
                    CANCEL, tenant, job_id, Facts(now=now, tenant=tenant), update, values, plain_only=True
                )
            except ConditionFailed as failed:
                current = from_item(failed.item) if failed.item else None
                if current is None or not current.has_followups:
                    raise
                kept_update, kept = keep_in_sweep(update, job_id, current.followup_sweep_at(now))
                cancelled = self._write(
                    CANCEL, tenant, job_id, Facts(now=now, tenant=tenant), kept_update, {**values, **kept}
                )
            try:
                self._keep_key(cancelled, now, expires_at)
            except StoreUnavailableError:
                # The cancel stands (a retry of it would meet a CANCELLED job); only a late job's key is short.
                logger.warning("a cancelled job's key record was not extended", extra={"job_id": job_id})
            return cancelled
        except ConditionFailed as failed:
            current = _tenants_job(failed, job_id)
            if (
                current.status is JobStatus.CANCELLED
                and current.updated_at == now
                and current.finished_at == now
                and current.expires_at == from_epoch(epoch(expires_at))
            ):
                # This cancel's own write, met by an SDK retry after its response was lost.
                return current
            raise JobConflictError(current, f"a {current.status.value} job cannot be cancelled") from None

    def expire(self, job_id: str, *, tenant: str, now: datetime, expires_at: datetime) -> Job:
        """A waiting job past its `start_by` -> EXPIRED (one conditional write); JobConflictError with the job as it
        is when it is not waiting or its expiry has not come (an SDK retry of this write meets its own result)."""
        update = (
            "SET #s = :status, updated_at = :now, finished_at = :now, expires_at = :ttl "
            "REMOVE sweep_pk, sweep_at, lease_until, next_attempt_at"
        )
        values: dict[str, Any] = {":now": iso(now), ":ttl": epoch(expires_at)}
        facts = Facts(now=now, tenant=tenant)
        try:
            try:
                # A batch member fails this write's condition and expires by the next, which keeps it in the sweep
                # index for its follow-ups (its count), as a cancel does.
                expired = self._write(EXPIRE, tenant, job_id, facts, update, values, plain_only=True)
            except ConditionFailed as failed:
                current = from_item(failed.item) if failed.item else None
                if current is None or not current.has_followups:
                    raise
                kept_update, kept = keep_in_sweep(update, job_id, current.followup_sweep_at(now))
                expired = self._write(EXPIRE, tenant, job_id, facts, kept_update, {**values, **kept})
        except ConditionFailed as failed:
            current = _tenants_job(failed, job_id)
            if current.status is JobStatus.EXPIRED and current.updated_at == now:
                return current
            raise JobConflictError(current, f"a {current.status.value} job does not expire now") from None
        try:
            self._keep_key(expired, now, expires_at)
        except StoreUnavailableError:
            logger.warning("an expired job's key record was not extended", extra={"job_id": job_id})
        return expired

    def name_survivor(self, job_id: str, *, tenant: str, seen: str, survivor: str, now: datetime) -> None:
        """One conditional write: the superseded job that named `seen` names `survivor` (its status and times stay)."""
        try:
            self._write(
                NAME_SURVIVOR,
                tenant,
                job_id,
                Facts(now=now, tenant=tenant, seen_survivor=seen),
                "SET superseded_by = :survivor",
                {":survivor": survivor},
                returns=False,
            )
        except ConditionFailed as failed:
            current = _tenants_job(failed, job_id)
            if current.superseded_by == survivor:
                return  # this write's own, met by an SDK retry
            raise JobConflictError(current, "the superseded job names another survivor") from None

    def debounce_record(self, tenant: str, job_type: str, key: str) -> DebounceRecord | None:
        response = self._call(
            self.client.get_item,
            TableName=self.table_name,
            Key=key_of(debounce_partition(tenant, job_type, key)),
            ConsistentRead=True,
        )
        item = response.get("Item")
        return debounce_record_from_item(item) if item else None

    def discard(self, job_id: str, *, tenant: str, now: datetime) -> Job:
        # FAILED stays FAILED: an SDK retry of this write meets its own result and simply writes it again.
        try:
            return self._write(
                DISCARD,
                tenant,
                job_id,
                Facts(now=now, tenant=tenant),
                "SET updated_at = :now, discarded_at = :now",
                {":now": iso(now)},
            )
        except ConditionFailed as failed:
            current = _tenants_job(failed, job_id)
            raise JobConflictError(current, f"job is {current.status.value}") from None

    # -- plumbing ---------------------------------------------------------------------------

    @overload
    def _write(
        self,
        transition: Transition,
        tenant: str,
        job_id: str,
        facts: Facts,
        update: str,
        values: dict[str, Any],
        *,
        names: dict[str, str] | None = None,
        returns: Literal[True] = True,
        plain_only: bool = False,
    ) -> Job: ...

    @overload
    def _write(
        self,
        transition: Transition,
        tenant: str,
        job_id: str,
        facts: Facts,
        update: str,
        values: dict[str, Any],
        *,
        names: dict[str, str] | None = None,
        returns: Literal[False],
        plain_only: bool = False,
    ) -> None: ...

    def _write(
        self,
        transition: Transition,
        tenant: str,
        job_id: str,
        facts: Facts,
        update: str,
        values: dict[str, Any],
        *,
        names: dict[str, str] | None = None,
        returns: bool = True,
        plain_only: bool = False,
    ) -> Job | None:
        """One conditional update of a job: `update` (which sets the status to `:status` when the
        transition changes it; the local runtime's fault injector finds the success write by it)
        under the transition's declared condition. On a failed condition
        `ConditionFailed` carries the job as it was. `plain_only`: the write also requires a job without
        follow-ups (no batch) and not counted in a batch (`batch_counted`), so that a batch member fails the
        condition and is written by the caller's variant for it."""
        condition = condition_of(transition, facts)
        if plain_only:
            condition = Condition(
                f"({condition.expression}) AND attribute_not_exists(batch_id) AND attribute_not_exists(batch_counted)",
                condition.names,
                condition.values,
            )
        if transition.to is not None:
            values = {**values, ":status": transition.to.value}
        clash = {name for name in values.keys() & condition.values.keys() if values[name] != condition.values[name]}
        assert not clash, f"the update and the condition give {clash} different values"
        request: dict[str, Any] = {
            "TableName": self.table_name,
            "Key": job_key(tenant, job_id),
            "UpdateExpression": update,
            "ConditionExpression": condition.expression,
            "ExpressionAttributeNames": {**condition.names, **(names or {})},
            "ExpressionAttributeValues": attribute_values({**condition.values, **values}),
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
        if returns:
            request["ReturnValues"] = "ALL_NEW"
        response = self._call(self.client.update_item, **request)
        return from_item(response["Attributes"]) if returns else None

    def _uncount_and_write(
        self, transition: Transition, job: Job, facts: Facts, update: str, values: dict[str, Any], names: dict[str, str]
    ) -> None:
        """The job's write (`transition`, its mark removed) and its batch's count of the marked state - 1, in one
        transaction, fenced on the mark: ConditionFailed when the job changed meanwhile."""
        assert job.batch_id is not None and job.batch_counted is not None
        condition = condition_of(transition, facts)
        if transition.to is not None:
            values = {**values, ":status": transition.to.value}
        head, removing, tail = update.partition(" REMOVE ")
        update = f"{head} REMOVE batch_counted" + (f", {tail}" if removing else "")
        job_update = {
            "TableName": self.table_name,
            "Key": job_key(job.tenant, job.job_id),
            "UpdateExpression": update,
            "ConditionExpression": f"({condition.expression}) AND batch_counted = :counted",
            "ExpressionAttributeNames": {**condition.names, **names},
            "ExpressionAttributeValues": attribute_values(
                {**condition.values, **values, ":counted": job.batch_counted.value}
            ),
        }
        batch_update = batch_count_update(
            self.table_name, job.tenant, job.batch_id, job.batch_counted, -1, values[":now"]
        )
        if not transact(self.client, [{"Update": job_update}, {"Update": batch_update}]):
            raise ConditionFailed(
                self.client.get_item(
                    TableName=self.table_name, Key=job_key(job.tenant, job.job_id), ConsistentRead=True
                ).get("Item")
                or {}
            )

    # -- plumbing ---------------------------------------------------------------------------

    def _call(self, operation: Callable[..., Any], **request: Any) -> Any:
        return call(operation, **request)


def call(operation: Callable[..., Any], **request: Any) -> Any:
    """One DynamoDB call with its errors as the store's: a failed condition is `ConditionFailed` (with the item
    when the request asked for it), an item over 400 KB `ItemTooLargeError`, anything else
    `StoreUnavailableError`. Every DynamoDB adapter of offpath makes its calls through it."""
    try:
        return operation(**request)
    except botocore.exceptions.ClientError as error:
        code = error.response.get("Error", {}).get("Code", "")
        if code == CONFLICT:
            raise ConditionFailed(cast("Item", error.response.get("Item") or {})) from None
        message = str(error.response.get("Error", {}).get("Message", ""))
        if code == "ValidationException" and ITEM_TOO_LARGE.search(message):
            raise ItemTooLargeError(f"DynamoDB refused the item for its size: {message}") from None
        raise StoreUnavailableError(f"DynamoDB {code or 'error'}") from error
    except botocore.exceptions.BotoCoreError as error:
        raise StoreUnavailableError(f"DynamoDB unreachable: {type(error).__name__}") from error


class ConditionFailed(Exception):
    def __init__(self, item: Item) -> None:
        self.item = item


def _tenants_job(failed: ConditionFailed, job_id: str) -> Job:
    """The job a failed condition returned; none is no job (another tenant's job is not under the caller's key)."""
    if not failed.item:
        raise JobNotFoundError(job_id)
    return from_item(failed.item)


def item_key(partition: str, sort: str = SOLE_SORT_KEY) -> dict[str, str]:
    """An item's key as plain values: the one place the key's attribute names are written (offpath.naming).
    An item alone in its partition (every item but a job) has the constant sort key."""
    return {TABLE_PARTITION_KEY: partition, TABLE_SORT_KEY: sort}


def key_of(partition: str, sort: str = SOLE_SORT_KEY) -> Item:
    return attribute_values(item_key(partition, sort))


def plain_key(item: Mapping[str, Any]) -> tuple[str, str]:
    """The key (partition, sort) of an item as DynamoDB returned it ("" for an attribute it lacks)."""

    def text(name: str) -> str:
        value = item.get(name)
        return str(value.get("S", "")) if isinstance(value, dict) else ""

    return text(TABLE_PARTITION_KEY), text(TABLE_SORT_KEY)


def job_shard(job_id: str) -> int:
    """The shard of a job's partition: from its id, so a job never moves."""
    return zlib.crc32(job_id.encode()) % JOB_SHARDS


def job_partition(tenant: str, shard: int) -> str:
    """The partition key of one shard of a tenant's jobs."""
    return f"{JOB_ITEM_PREFIX}{tenant}#{shard}"


def job_item_key(tenant: str, job_id: str) -> dict[str, str]:
    return item_key(job_partition(tenant, job_shard(job_id)), job_id)


def job_key(tenant: str, job_id: str) -> Item:
    return attribute_values(job_item_key(tenant, job_id))


def sort_key_of(item: Item) -> str:
    return plain_key(item)[1]


def schedule_key(name: str) -> str:
    return f"SCHEDULE#{name}"


def idempotency_partition(tenant: str, idempotency_key: str) -> str:
    """The partition key of a tenant's idempotency key's record (the key itself is not stored)."""
    digest = hashlib.sha256(idempotency_key.encode()).hexdigest()[:KEY_DIGEST_CHARS]
    return f"{KEY_ITEM_PREFIX}{tenant}#{digest}"


def debounce_record_from_item(item: Mapping[str, Any]) -> DebounceRecord:
    plain = DEBOUNCE_RECORD.read(plain_values(item))
    return DebounceRecord(
        job_id=str(plain["job_id"]),
        submitted_at=parse_iso(plain["submitted_at"]),
        window_end=parse_iso(plain["window_end"]),
    )


def debounce_partition(tenant: str, job_type: str, key: str) -> str:
    """The partition key of a tenant's debounce key's record for a job type (the key itself is not stored)."""
    digest = hashlib.sha256(f"{job_type}\n{key}".encode()).hexdigest()[:KEY_DIGEST_CHARS]
    return f"{DEBOUNCE_ITEM_PREFIX}{tenant}#{digest}"


def sweep_shard(job_id: str) -> str:
    """The sweep index's partition of a job: from the random end of its id (its start is the time)."""
    return f"SWEEP#{int(job_id[-2:], 16) % SWEEP_SHARDS}"


# -- conditions, from the transitions declared in offpath.domain.job ------------------------------


@dataclass(frozen=True)
class Condition:
    expression: str
    names: dict[str, str]
    values: dict[str, Any]


def guard_condition(guard: Guard, facts: Facts) -> tuple[str, dict[str, Any]]:
    """A guard of the declaration as a condition expression fragment and the values it names."""
    match guard:
        case Guard.SAME_TENANT:
            return "tenant = :tenant", {":tenant": _fact(facts.tenant, guard)}
        case Guard.ATTEMPT_FENCE:
            return "attempt = :attempt", {":attempt": _fact(facts.attempt, guard)}
        case Guard.ATTEMPTS_LEFT:
            return "attempt < max_attempts", {}
        case Guard.LEASE_EXPIRED:
            return "(attribute_not_exists(lease_until) OR lease_until <= :now)", {":now": iso(_fact(facts.now, guard))}
        case Guard.SWEEP_FENCE:
            return "sweep_at = :seen", {":seen": iso(_fact(facts.seen_sweep_at, guard))}
        case Guard.SURVIVOR_FENCE:
            return "cancel_reason = :superseded AND superseded_by = :seen_survivor", {
                ":superseded": SUPERSEDED,
                ":seen_survivor": _fact(facts.seen_survivor, guard),
            }
        case Guard.START_BY_PASSED:
            # A comparison with a missing attribute is false: a job without an expiry never expires.
            return "start_by <= :now", {":now": iso(_fact(facts.now, guard))}


def condition_of(transition: Transition, facts: Facts) -> Condition:
    """The transition's declaration as one condition expression: its guards, and a status among
    its source states (each with the guards that hold only from it)."""
    values: dict[str, Any] = {}

    def fragments(guards: tuple[Guard, ...]) -> list[str]:
        rendered = []
        for guard in guards:
            fragment, needed = guard_condition(guard, facts)
            rendered.append(fragment)
            values.update(needed)
        return rendered

    def status_value(status: JobStatus) -> str:
        values[f":{status.value.lower()}"] = status.value
        return f":{status.value.lower()}"

    parts = fragments(transition.guards)
    plain = [status_value(s) for s in sorted(transition.from_) if not transition.sources[s]]
    alternatives = []
    if plain:
        alternatives.append(f"#s = {plain[0]}" if len(plain) == 1 else f"#s IN ({', '.join(plain)})")
    for status in sorted(transition.from_):
        if transition.sources[status]:
            alternatives.append(
                "(" + " AND ".join([f"#s = {status_value(status)}", *fragments(transition.sources[status])]) + ")"
            )
    parts.append(alternatives[0] if len(alternatives) == 1 else "(" + " OR ".join(alternatives) + ")")
    return Condition(" AND ".join(parts), {"#s": "status"}, values)


def _fact(fact: _T | None, guard: Guard) -> _T:
    if fact is None:
        raise ValueError(f"the {guard.name} guard needs a fact the write was not given")
    return fact


# -- items ----------------------------------------------------------------------------------------


def attribute_values(plain: Mapping[str, Any]) -> Item:
    """Python values (str, int, Decimal) as DynamoDB attribute values; a None is left out."""
    return {name: _SERIALIZER.serialize(value) for name, value in plain.items() if value is not None}


def plain_values(item: Mapping[str, Any]) -> dict[str, Any]:
    """DynamoDB attribute values as Python values (numbers as Decimal)."""
    return {name: _DESERIALIZER.deserialize(value) for name, value in item.items()}


def schedule_state_to_item(state: ScheduleState) -> Item:
    firings = [
        {"slot": f.slot, "fired_at": iso(f.fired_at), "job_id": f.job_id, "skipped_reason": f.skipped_reason}
        for f in state.firings
    ]
    return attribute_values(
        {
            **item_key(schedule_key(state.name)),
            **SCHEDULE_STATE.stamp,
            "firings_json": json.dumps(firings, separators=(",", ":")),
            "version": state.version,
            "last_job_id": state.last_job_id or None,
        }
    )


def schedule_state_from_item(name: str, item: Mapping[str, Any]) -> ScheduleState:
    plain = SCHEDULE_STATE.read(plain_values(item))
    firings = tuple(
        Firing(
            slot=f["slot"],
            fired_at=parse_iso(f["fired_at"]),
            job_id=f.get("job_id"),
            skipped_reason=f.get("skipped_reason"),
        )
        for f in json.loads(plain["firings_json"])
    )
    return ScheduleState(name, plain.get("last_job_id"), firings, version=int(plain["version"]))


def key_record_to_item(tenant: str, idempotency_key: str, record: KeyRecord, expires_at: datetime) -> Item:
    return attribute_values(
        {
            **item_key(idempotency_partition(tenant, idempotency_key)),
            **KEY_RECORD.stamp,
            "job_id": record.job_id,
            "created_at": iso(record.created_at),
            "fingerprint": record.fingerprint,
            "submission_id": record.submission_id,
            # A number: the table's TTL attribute.
            "expires_at": epoch(expires_at),
        }
    )


def key_record_from_item(item: Mapping[str, Any]) -> KeyRecord:
    plain = KEY_RECORD.read(plain_values(item))
    return KeyRecord(
        job_id=str(plain["job_id"]),
        created_at=parse_iso(plain["created_at"]),
        fingerprint=str(plain["fingerprint"]),
        submission_id=str(plain["submission_id"]),
    )


def iso(when: datetime) -> str:
    """Fixed-width UTC text (a four-digit year, microseconds), so string order is time order inside
    condition expressions and index keys, from year 1 to 9999."""
    utc = when.astimezone(UTC)
    return f"{utc.year:04d}-{utc:%m-%dT%H:%M:%S.%f}Z"


def parse_iso(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)


def epoch(when: datetime) -> int:
    return int(when.timestamp())


def from_epoch(seconds: int | Decimal) -> datetime:
    return datetime.fromtimestamp(int(seconds), UTC)


def fraction_number(fraction: float) -> Decimal:
    """A progress fraction as the number DynamoDB stores (the shortest text that reads back as it)."""
    return Decimal(repr(fraction))


def keep_in_sweep(update: str, job_id: str, sweep_at: datetime | None) -> tuple[str, dict[str, Any]]:
    """A final write's update (`SET ... REMOVE ..., sweep_pk, sweep_at`) made to keep the job in the sweep index at
    `sweep_at` instead: its follow-ups run after it (logic/followups.py)."""
    if sweep_at is None:
        return update, {}
    head, removing, tail = update.partition(" REMOVE ")
    kept = (
        [name.strip() for name in tail.split(",") if name.strip() not in ("sweep_pk", "sweep_at")] if removing else []
    )
    update = f"{head}, sweep_pk = :followup_shard, sweep_at = :followup_sweep"
    if kept:
        update += " REMOVE " + ", ".join(kept)
    return update, {":followup_shard": sweep_shard(job_id), ":followup_sweep": iso(sweep_at)}


BATCH_ITEM_PREFIX = "BATCH#"


def batch_partition(tenant: str) -> str:
    """A tenant's batches share one partition, sorted by id (time-ordered): the listing is one query."""
    return f"{BATCH_ITEM_PREFIX}{tenant}"


def batch_key(tenant: str, batch_id: str) -> Item:
    return key_of(batch_partition(tenant), batch_id)


def count_attribute(status: JobStatus) -> str:
    """The batch item's count of members in a final state."""
    return f"count_{status.value.lower()}"


def batch_count_update(
    table_name: str, tenant: str, batch_id: str, status: JobStatus, delta: int, now_text: Any
) -> dict[str, Any]:
    """The batch's part of a member's count (or uncount): its count of `status` moves by `delta`."""
    return {
        "TableName": table_name,
        "Key": batch_key(tenant, batch_id),
        "UpdateExpression": "ADD #c :delta SET updated_at = :now",
        "ConditionExpression": f"attribute_exists({TABLE_PARTITION_KEY})",
        "ExpressionAttributeNames": {"#c": count_attribute(status)},
        "ExpressionAttributeValues": attribute_values({":delta": delta, ":now": now_text}),
    }


# How often a transaction that met another one on the same items (TransactionConflict) is tried again.
TRANSACTION_TRIES = 5


def transact(client: DynamoDBClient, items: list[dict[str, Any]]) -> bool:
    """One TransactWriteItems: True when it was written, False when a condition failed (nothing written). A
    conflict with another transaction is tried again a few times; then, or on any other error,
    StoreUnavailableError."""
    for _ in range(TRANSACTION_TRIES):
        try:
            client.transact_write_items(TransactItems=cast("Any", items))
            return True
        except botocore.exceptions.ClientError as error:
            code = error.response.get("Error", {}).get("Code", "")
            if code != "TransactionCanceledException":
                raise StoreUnavailableError(f"DynamoDB {code or 'error'}") from error
            reasons = [r.get("Code") for r in cast("Any", error.response).get("CancellationReasons", [])]
            if "ConditionalCheckFailed" in reasons:
                return False
            if not reasons or any(r not in (None, "None", "TransactionConflict") for r in reasons):
                raise StoreUnavailableError(f"DynamoDB transaction cancelled: {reasons}") from error
        except botocore.exceptions.BotoCoreError as error:
            raise StoreUnavailableError(f"DynamoDB unreachable: {type(error).__name__}") from error
    raise StoreUnavailableError("DynamoDB transaction kept conflicting")


def to_item(job: Job) -> Item:
    # A final job is in the sweep index only while its follow-ups are due (logic/followups.py).
    swept = job.sweep_at is not None

    def when(value: datetime | None) -> str | None:
        return iso(value) if value is not None else None

    return attribute_values(
        {
            **job_item_key(job.tenant, job.job_id),
            **JOB.stamp,
            "job_id": job.job_id,
            "tenant": job.tenant,
            "type": job.type,
            "queue": job.queue,
            "status": job.status.value,
            # UTF-8, as the payload limit measures it (items written before were ASCII-escaped; both read back).
            "payload_json": payload_json(job.payload),
            "payload_hash": job.payload_hash,
            "attempt": job.attempt,
            "max_attempts": job.max_attempts,
            "submission_id": job.submission_id,
            "created_at": iso(job.created_at),
            "updated_at": iso(job.updated_at),
            "redrives": job.redrives,
            "resends": job.resends,
            "retries": job.retries,
            "idempotency_key": job.idempotency_key,
            "schedule_name": job.schedule_name,
            "error": job.error,
            "run_at": when(job.run_at),
            "lease_until": when(job.lease_until),
            "started_at": when(job.started_at),
            "finished_at": when(job.finished_at),
            "next_attempt_at": when(job.next_attempt_at),
            # A number: the table's TTL attribute.
            "expires_at": epoch(job.expires_at) if job.expires_at is not None else None,
            # The sparse sweep index's keys: only an unfinished job, or a final one whose follow-ups are due.
            "sweep_pk": sweep_shard(job.job_id) if swept else None,
            "sweep_at": when(job.sweep_at) if swept else None,
            "result_json": json.dumps(job.result, default=str) if job.result is not None else None,
            "progress_fraction": fraction_number(job.progress.fraction) if job.progress is not None else None,
            "progress_message": job.progress.message if job.progress is not None else None,
            "attempt_started_at": when(job.attempt_started_at),
            "attempts_json": attempts_json(job.attempt_history) if job.attempt_history else None,
            "tags": dict(job.tags) if job.tags else None,
            "trace_id": job.trace_id,
            "discarded_at": when(job.discarded_at),
            "batch_id": job.batch_id,
            "batch_counted": job.batch_counted.value if job.batch_counted is not None else None,
            "callback_of": job.callback_of,
            "then_json": payload_json(job.then) if job.then is not None else None,
            "parent_job_id": job.parent_job_id,
            "next_job_id": job.next_job_id,
            "bulk_operation_id": job.bulk_operation_id,
            "start_by": when(job.start_by),
            "cancel_reason": job.cancel_reason,
            "superseded_by": job.superseded_by,
            "debounce_key": job.debounce_key,
            "debounce_s": job.debounce_s,
            "retried_at": when(job.retried_at),
        }
    )


def from_item(item: Mapping[str, Any]) -> Job:
    plain = JOB.read(plain_values(item))

    def when(name: str) -> datetime | None:
        value = plain.get(name)
        return parse_iso(value) if value else None

    progress = None
    if "progress_fraction" in plain:
        progress = Progress(float(plain["progress_fraction"]), plain.get("progress_message") or "")
    result_json = plain.get("result_json")
    expires = plain.get("expires_at")
    return Job(
        job_id=plain["job_id"],
        tenant=plain["tenant"],
        type=plain["type"],
        queue=plain["queue"],
        payload=json.loads(plain["payload_json"]),
        payload_hash=plain["payload_hash"],
        status=JobStatus(plain["status"]),
        created_at=parse_iso(plain["created_at"]),
        updated_at=parse_iso(plain["updated_at"]),
        max_attempts=int(plain["max_attempts"]),
        attempt=int(plain["attempt"]),
        idempotency_key=plain.get("idempotency_key"),
        submission_id=plain.get("submission_id") or "",
        run_at=when("run_at"),
        lease_until=when("lease_until"),
        started_at=when("started_at"),
        finished_at=when("finished_at"),
        next_attempt_at=when("next_attempt_at"),
        progress=progress,
        result=json.loads(result_json) if result_json is not None else None,
        error=plain.get("error"),
        expires_at=from_epoch(expires) if expires is not None else None,
        schedule_name=plain.get("schedule_name"),
        redrives=int(plain.get("redrives", 0)),
        sweep_at=when("sweep_at"),
        resends=int(plain.get("resends", 0)),
        retries=int(plain.get("retries", 0)),
        attempt_started_at=when("attempt_started_at"),
        attempt_history=attempts_from_json(plain.get("attempts_json")),
        tags=dict(plain.get("tags") or {}),
        trace_id=plain.get("trace_id"),
        discarded_at=when("discarded_at"),
        batch_id=plain.get("batch_id"),
        batch_counted=JobStatus(plain["batch_counted"]) if plain.get("batch_counted") else None,
        callback_of=plain.get("callback_of"),
        then=json.loads(plain["then_json"]) if plain.get("then_json") else None,
        parent_job_id=plain.get("parent_job_id"),
        next_job_id=plain.get("next_job_id"),
        bulk_operation_id=plain.get("bulk_operation_id"),
        start_by=when("start_by"),
        cancel_reason=plain.get("cancel_reason"),
        superseded_by=plain.get("superseded_by"),
        debounce_key=plain.get("debounce_key"),
        debounce_s=int(plain["debounce_s"]) if plain.get("debounce_s") is not None else None,
        retried_at=when("retried_at"),
    )


def attempts_json(history: tuple[AttemptRecord, ...]) -> str:
    return json.dumps(
        [
            {
                "attempt": record.attempt,
                "started_at": iso(record.started_at) if record.started_at is not None else None,
                "finished_at": iso(record.finished_at),
                "outcome": record.outcome,
                "error": record.error,
                # Written only when known (a reader of the release before ignores them).
                **({"error_type": record.error_type} if record.error_type is not None else {}),
                **({"traceback": record.traceback} if record.traceback is not None else {}),
            }
            for record in history
        ],
        separators=(",", ":"),
    )


def attempts_from_json(text: str | None) -> tuple[AttemptRecord, ...]:
    if not text:
        return ()
    return tuple(
        AttemptRecord(
            attempt=int(entry["attempt"]),
            started_at=parse_iso(entry["started_at"]) if entry.get("started_at") else None,
            finished_at=parse_iso(entry["finished_at"]),
            outcome=str(entry["outcome"]),
            error=message,
            error_type=error_type,
            traceback=entry.get("traceback"),
        )
        for entry in json.loads(text)
        for error_type, message in (_error_of(entry),)
    )


# An attempt error written before the type was kept apart: "ValueError: boom" (`logic.process._describe`). Only a
# name that reads as an exception class counts ("flaky: ..." was a message of offpath's own errors, untyped).
_TYPED_ERROR = re.compile(r"([A-Z][A-Za-z0-9_]*(?:Error|Exception|Timeout|Warning)): (.*)", re.DOTALL)


def _error_of(entry: dict[str, Any]) -> tuple[str | None, str | None]:
    """An attempt record's error type and message. A record written before types were kept (no `error_type`)
    holds one string: its type is read from it when it starts with a class name and a colon, else None."""
    message = entry.get("error")
    if "error_type" in entry or not isinstance(message, str):
        return entry.get("error_type"), message
    typed = _TYPED_ERROR.fullmatch(message)
    return (typed.group(1), typed.group(2)) if typed else (None, message)


def encode_cursor(tenant: str, positions: list[str | Literal[False] | None]) -> str:
    """A listing's cursor: its tenant (a digest) and, per shard, where the next page starts: `null` at the
    newest job, a job id (the sort key) after that job, `false` when the shard is done. Base64url of the JSON."""
    plain = {"t": tenant_digest(tenant), "p": positions}
    return base64.urlsafe_b64encode(json.dumps(plain, separators=(",", ":")).encode()).decode().rstrip("=")


def tenant_digest(tenant: str) -> str:
    return hashlib.sha256(tenant.encode()).hexdigest()[:CURSOR_TENANT_CHARS]


def decode_cursor(cursor: str, tenant: str) -> list[str | Literal[False] | None]:
    """The per-shard positions of a cursor; only accepted for the listing (and tenant) it came from, with
    one position per shard, each a key of that shard."""
    try:
        if not CURSOR_TEXT.fullmatch(cursor):
            raise ValueError("not base64url")
        padded = cursor + "=" * (-len(cursor) % 4)
        plain = json.loads(base64.urlsafe_b64decode(padded.encode()))
        if not isinstance(plain, dict) or set(plain) != {"t", "p"}:
            raise ValueError("cursor has the wrong keys")
        if plain["t"] != tenant_digest(tenant):
            raise ValueError("cursor belongs to another listing")
        positions = plain["p"]
        if not isinstance(positions, list) or len(positions) != JOB_SHARDS:
            raise ValueError("cursor does not have a position per shard")
        for shard, position in enumerate(positions):
            if position is None or position is False:
                continue
            if not isinstance(position, str) or not CURSOR_SORT_KEY.fullmatch(position):
                raise ValueError("cursor keys are not keys this table makes")
            if job_shard(position) != shard:
                raise ValueError("cursor key is not in its shard")
    except (ValueError, TypeError, RecursionError):  # RecursionError: JSON nested thousands deep
        raise InvalidRequestError("cursor", "cursor is not one this listing returned", code="invalid_cursor") from None
    return cast("list[str | Literal[False] | None]", positions)
