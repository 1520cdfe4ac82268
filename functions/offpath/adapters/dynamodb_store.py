"""The job store on one DynamoDB table. Every state change is one conditional write.

Item layout (key `pk`):
- `JOB#<job_id>`: the job, which is also its idempotency record (the id derives from tenant + key).
- `ONCE#<job_id>#<name>`: a `ctx.once` mark.
Indexes (offpath.naming.TABLE_INDEXES): `by_tenant` (tenant, created) for listings and the sparse
`sweep` index (shard, sweep time) for the sweeper.
"""

from __future__ import annotations

import base64
import json
import re
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, cast

import botocore.exceptions
from botocore.config import Config

from offpath.domain.errors import (
    IdempotencyConflictError,
    InvalidRequestError,
    JobConflictError,
    JobNotFoundError,
    StoreUnavailableError,
)
from offpath.domain.job import CANCELLABLE_FROM, CLAIMABLE_FROM, Job, JobStatus, Progress
from offpath.domain.ports import CreateOutcome, Firing, JobPage, ScheduleState

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import AttributeValueTypeDef

INDEX_BY_TENANT = "by_tenant"
INDEX_SWEEP = "sweep"
# The sweep index's partition key is spread over shards so no single partition takes every write.
SWEEP_SHARDS = 4
CONFLICT = "ConditionalCheckFailedException"
CURSOR_PK = re.compile(r"JOB#[0-9a-f]{32}")
CURSOR_SORT_KEY = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z#[0-9a-f]{32}")
# total_max_attempts counts the first try: 3 attempts in all ("max_attempts" would mean 3 retries).
SDK_CONFIG = Config(retries={"mode": "standard", "total_max_attempts": 3}, connect_timeout=2, read_timeout=5)

Item = dict[str, "AttributeValueTypeDef"]


def default_client() -> DynamoDBClient:
    import boto3

    return boto3.client("dynamodb", config=SDK_CONFIG)


class DynamoDbJobStore:
    def __init__(self, table_name: str, client: DynamoDBClient | None = None) -> None:
        self.table_name = table_name
        self.client = client or default_client()

    # -- submit -----------------------------------------------------------------------------

    def create(self, job: Job) -> CreateOutcome:
        try:
            self._call(
                self.client.put_item,
                TableName=self.table_name,
                Item=to_item(job),
                ConditionExpression="attribute_not_exists(pk)",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
            return CreateOutcome(job, replayed=False)
        except _ConditionFailed as failed:
            existing = from_item(failed.item)
        if existing.submission_id == job.submission_id:
            # An SDK retry of our own write that had landed: the job is ours, and new.
            return CreateOutcome(existing, replayed=False)
        if existing.tenant != job.tenant or existing.payload_hash != job.payload_hash:
            raise IdempotencyConflictError(existing)
        return CreateOutcome(existing, replayed=True)

    # -- reads ------------------------------------------------------------------------------

    def get(self, job_id: str) -> Job | None:
        response = self._call(
            self.client.get_item, TableName=self.table_name, Key={"pk": {"S": job_key(job_id)}}, ConsistentRead=True
        )
        item = response.get("Item")
        return from_item(item) if item else None

    def list_jobs(
        self, tenant: str, *, status: JobStatus | None, job_type: str | None, limit: int, cursor: str | None
    ) -> JobPage:
        """One query of the keys-only index for `limit` keys, then one batch read of their items,
        filtered by status and type. A filtered page can hold fewer than `limit` jobs and still
        have a cursor."""
        request: dict[str, Any] = {
            "TableName": self.table_name,
            "IndexName": INDEX_BY_TENANT,
            "KeyConditionExpression": "gsi1pk = :k",
            "ExpressionAttributeValues": {":k": {"S": tenant}},
            "ScanIndexForward": False,
            "Limit": limit,
        }
        if cursor is not None:
            request["ExclusiveStartKey"] = decode_cursor(cursor, "gsi1pk", tenant)
        response = self._call(self.client.query, **request)
        last = response.get("LastEvaluatedKey")
        keys = [item["pk"]["S"] for item in response.get("Items", [])]
        jobs = [
            job
            for job in self._get_many(keys)
            if job.tenant == tenant
            and (status is None or job.status is status)
            and (job_type is None or job.type == job_type)
        ]
        return JobPage(jobs, encode_cursor(last) if last else None)

    def _get_many(self, keys: list[str]) -> list[Job]:
        """BatchGetItem in chunks of 100, retrying unprocessed keys; returns jobs in `keys` order."""
        found: dict[str, Job] = {}
        for start in range(0, len(keys), 100):
            pending: list[dict[str, Any]] = [{"pk": {"S": key}} for key in keys[start : start + 100]]
            for _ in range(5):
                if not pending:
                    break
                response = self._call(
                    self.client.batch_get_item,
                    RequestItems={self.table_name: {"Keys": pending, "ConsistentRead": True}},
                )
                for item in response.get("Responses", {}).get(self.table_name, []):
                    found[item["pk"]["S"]] = from_item(item)
                pending = list(response.get("UnprocessedKeys", {}).get(self.table_name, {}).get("Keys", []))
            if pending:
                raise StoreUnavailableError("DynamoDB kept some keys unprocessed")
        return [found[key] for key in keys if key in found]

    # -- worker -----------------------------------------------------------------------------

    def claim(self, job_id: str, *, tenant: str, now: datetime, lease_until: datetime) -> Job:
        claimable = ", ".join(f":from{i}" for i in range(len(CLAIMABLE_FROM)))
        values: Item = {f":from{i}": {"S": s.value} for i, s in enumerate(sorted(CLAIMABLE_FROM))}
        values.update(
            {
                ":running": {"S": JobStatus.RUNNING.value},
                ":tenant": {"S": tenant},
                ":one": {"N": "1"},
                ":now": {"S": iso(now)},
                ":lease": {"S": iso(lease_until)},
            }
        )
        try:
            response = self._call(
                self.client.update_item,
                TableName=self.table_name,
                Key={"pk": {"S": job_key(job_id)}},
                UpdateExpression=(
                    "SET #s = :running, attempt = attempt + :one, lease_until = :lease, "
                    "started_at = if_not_exists(started_at, :now), updated_at = :now REMOVE next_attempt_at"
                ),
                ConditionExpression=(
                    f"tenant = :tenant AND attempt < max_attempts AND "
                    f"(#s IN ({claimable}) OR (#s = :running AND lease_until <= :now))"
                ),
                ExpressionAttributeNames={"#s": "status"},
                ExpressionAttributeValues=values,
                ReturnValues="ALL_NEW",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except _ConditionFailed as failed:
            if not failed.item:
                raise JobNotFoundError(job_id) from None
            current = from_item(failed.item)
            if current.tenant != tenant:
                raise JobConflictError(None, "message tenant does not match the job") from None
            if current.status is JobStatus.RUNNING and current.lease_until == lease_until and current.updated_at == now:
                # This claim's own write, met by an SDK retry after its response was lost.
                return current
            raise JobConflictError(current, f"job is {current.status.value}") from None
        return from_item(response["Attributes"])

    def record_success(self, job: Job, *, result: Any, now: datetime, expires_at: datetime) -> None:
        self._finish(
            job,
            JobStatus.SUCCEEDED,
            now,
            "result_json = :result, finished_at = :now, expires_at = :ttl REMOVE lease_until, #e, sweep_pk, sweep_at",
            {":result": {"S": json.dumps(result, default=str)}, ":ttl": {"N": str(epoch(expires_at))}},
            names={"#e": "error"},
        )

    def record_retry(self, job: Job, *, error: str, now: datetime, next_attempt_at: datetime) -> None:
        self._finish(
            job,
            JobStatus.RETRYING,
            now,
            "#e = :error, next_attempt_at = :next REMOVE lease_until",
            {":error": {"S": error}, ":next": {"S": iso(next_attempt_at)}},
            names={"#e": "error"},
        )

    def record_failure(self, job: Job, *, error: str, now: datetime, expires_at: datetime) -> None:
        self._finish(
            job,
            JobStatus.FAILED,
            now,
            "#e = :error, finished_at = :now, expires_at = :ttl REMOVE lease_until, sweep_pk, sweep_at",
            {":error": {"S": error}, ":ttl": {"N": str(epoch(expires_at))}},
            names={"#e": "error"},
        )

    def fail_expired_lease(self, job: Job, *, now: datetime, expires_at: datetime) -> None:
        self._finish(
            job,
            JobStatus.FAILED,
            now,
            "#e = :error, finished_at = :now, expires_at = :ttl REMOVE lease_until, sweep_pk, sweep_at",
            {":error": {"S": "lease expired"}, ":ttl": {"N": str(epoch(expires_at))}},
            names={"#e": "error"},
            extra_condition="lease_until <= :now",
        )

    def _finish(
        self,
        job: Job,
        status: JobStatus,
        now: datetime,
        update: str,
        values: Item,
        *,
        names: dict[str, str],
        extra_condition: str = "",
    ) -> None:
        """Write an attempt's outcome, fenced: only while that attempt still holds the job."""
        condition = "#s = :running AND attempt = :attempt"
        if extra_condition:
            condition += f" AND {extra_condition}"
        try:
            self._call(
                self.client.update_item,
                TableName=self.table_name,
                Key={"pk": {"S": job_key(job.job_id)}},
                UpdateExpression=f"SET #s = :status, updated_at = :now, {update}",
                ConditionExpression=condition,
                ExpressionAttributeNames={"#s": "status", **names},
                ExpressionAttributeValues={
                    ":status": {"S": status.value},
                    ":running": {"S": JobStatus.RUNNING.value},
                    ":attempt": {"N": str(job.attempt)},
                    ":now": {"S": iso(now)},
                    **values,
                },
            )
        except _ConditionFailed as failed:
            current = from_item(failed.item) if failed.item else None
            raise JobConflictError(current, f"attempt {job.attempt} no longer holds the job") from None

    def set_progress(self, job_id: str, *, attempt: int, progress: Progress, now: datetime) -> None:
        try:
            self._call(
                self.client.update_item,
                TableName=self.table_name,
                Key={"pk": {"S": job_key(job_id)}},
                UpdateExpression="SET progress_fraction = :f, progress_message = :m, updated_at = :now",
                ConditionExpression="#s = :running AND attempt = :attempt",
                ExpressionAttributeNames={"#s": "status"},
                ExpressionAttributeValues={
                    ":f": {"N": repr(progress.fraction)},
                    ":m": {"S": progress.message},
                    ":now": {"S": iso(now)},
                    ":running": {"S": JobStatus.RUNNING.value},
                    ":attempt": {"N": str(attempt)},
                },
            )
        except _ConditionFailed:
            raise JobConflictError(None, f"attempt {attempt} no longer holds the job") from None

    def mark_once(self, job_id: str, name: str, *, now: datetime, expires_at: datetime) -> bool:
        # The mark carries a token of this call: an SDK retry of a mark that landed (its response was
        # lost) finds its own token and is still the first, rather than losing the side effect.
        token = uuid.uuid4().hex
        try:
            self._call(
                self.client.put_item,
                TableName=self.table_name,
                Item={
                    "pk": {"S": f"ONCE#{job_id}#{name}"},
                    "marked_at": {"S": iso(now)},
                    "expires_at": {"N": str(epoch(expires_at))},
                    "mark_token": {"S": token},
                },
                ConditionExpression="attribute_not_exists(pk)",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
            return True
        except _ConditionFailed as failed:
            return failed.item.get("mark_token") == {"S": token}

    # -- scheduling, sweeping and redrive -----------------------------------------------------

    def enqueue_scheduled(self, job_id: str, *, tenant: str, now: datetime, sweep_at: datetime) -> Job:
        return self._move_to_queued(
            job_id, tenant=tenant, now=now, sweep_at=sweep_at, from_status=JobStatus.SCHEDULED, extra_set=""
        )

    def reset_for_redrive(self, job_id: str, *, tenant: str, now: datetime, sweep_at: datetime) -> Job:
        return self._move_to_queued(
            job_id,
            tenant=tenant,
            now=now,
            sweep_at=sweep_at,
            from_status=JobStatus.FAILED,
            extra_set=(
                ", attempt = :zero, redrives = redrives + :one, resends = :zero REMOVE #e, finished_at, expires_at"
            ),
        )

    def _move_to_queued(
        self, job_id: str, *, tenant: str, now: datetime, sweep_at: datetime, from_status: JobStatus, extra_set: str
    ) -> Job:
        names = {"#s": "status"}
        values: Item = {
            ":from": {"S": from_status.value},
            ":queued": {"S": JobStatus.QUEUED.value},
            ":tenant": {"S": tenant},
            ":now": {"S": iso(now)},
            ":shard": {"S": sweep_shard(job_id)},
            ":sweep": {"S": iso(sweep_at)},
        }
        if extra_set:
            names["#e"] = "error"
            values[":zero"] = {"N": "0"}
            values[":one"] = {"N": "1"}
        try:
            response = self._call(
                self.client.update_item,
                TableName=self.table_name,
                Key={"pk": {"S": job_key(job_id)}},
                UpdateExpression=(
                    "SET #s = :queued, updated_at = :now, sweep_pk = :shard, sweep_at = :sweep" + extra_set
                ),
                ConditionExpression="tenant = :tenant AND #s = :from",
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
                ReturnValues="ALL_NEW",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except _ConditionFailed as failed:
            current = _tenants_job(failed, job_id, tenant)
            raise JobConflictError(current, f"job is {current.status.value}") from None
        return from_item(response["Attributes"])

    def requeue_expired_lease(self, job: Job, *, now: datetime, sweep_at: datetime) -> Job:
        try:
            response = self._call(
                self.client.update_item,
                TableName=self.table_name,
                Key={"pk": {"S": job_key(job.job_id)}},
                UpdateExpression=(
                    "SET #s = :queued, updated_at = :now, sweep_at = :sweep, "
                    "resends = resends + :one REMOVE lease_until"
                ),
                ConditionExpression="#s = :running AND attempt = :attempt AND lease_until <= :now AND attempt < :max",
                ExpressionAttributeNames={"#s": "status"},
                ExpressionAttributeValues={
                    ":queued": {"S": JobStatus.QUEUED.value},
                    ":running": {"S": JobStatus.RUNNING.value},
                    ":now": {"S": iso(now)},
                    ":sweep": {"S": iso(sweep_at)},
                    ":one": {"N": "1"},
                    ":attempt": {"N": str(job.attempt)},
                    ":max": {"N": str(job.max_attempts)},
                },
                ReturnValues="ALL_NEW",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except _ConditionFailed as failed:
            current = from_item(failed.item) if failed.item else None
            raise JobConflictError(current, "the job's lease is no longer expired at that attempt") from None
        return from_item(response["Attributes"])

    def due_for_sweep(self, *, now: datetime, limit: int) -> list[Job]:
        keys: list[str] = []
        for shard in range(SWEEP_SHARDS):
            request: dict[str, Any] = {
                "TableName": self.table_name,
                "IndexName": INDEX_SWEEP,
                "KeyConditionExpression": "sweep_pk = :shard AND sweep_at <= :now",
                "ExpressionAttributeValues": {":shard": {"S": f"SWEEP#{shard}"}, ":now": {"S": iso(now)}},
                "Limit": limit,
            }
            response = self._call(self.client.query, **request)
            keys.extend(item["pk"]["S"] for item in response.get("Items", []))
        # The index holds keys only; the items themselves are read consistently.
        due = [job for job in self._get_many(keys) if job.sweep_at is not None and job.sweep_at <= now]
        due.sort(key=lambda job: job.sweep_at or job.created_at)
        return due[:limit]

    def reschedule_sweep(self, job: Job, *, sweep_at: datetime, resent: bool) -> None:
        if job.sweep_at is None:
            raise JobConflictError(job, "the job has no sweep time")
        try:
            self._call(
                self.client.update_item,
                TableName=self.table_name,
                Key={"pk": {"S": job_key(job.job_id)}},
                UpdateExpression="SET sweep_at = :next, resends = resends + :inc",
                ConditionExpression="sweep_at = :seen",
                ExpressionAttributeValues={
                    ":next": {"S": iso(sweep_at)},
                    ":seen": {"S": iso(job.sweep_at)},
                    ":inc": {"N": "1" if resent else "0"},
                },
            )
        except _ConditionFailed:
            raise JobConflictError(None, "another sweep handled the job") from None

    def get_schedule_state(self, name: str) -> ScheduleState | None:
        response = self._call(
            self.client.get_item,
            TableName=self.table_name,
            Key={"pk": {"S": schedule_key(name)}},
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
            condition = "attribute_not_exists(pk)" if current.version == 0 else "version = :seen"
            values: Item = {":seen": {"N": str(current.version)}} if current.version else {}
            try:
                self._call(
                    self.client.put_item,
                    TableName=self.table_name,
                    Item=schedule_state_to_item(updated),
                    ConditionExpression=condition,
                    **({"ExpressionAttributeValues": values} if values else {}),
                )
                return updated
            except _ConditionFailed:
                continue
        raise StoreUnavailableError(f"schedule {name} is being updated too often to record a firing")

    # -- api --------------------------------------------------------------------------------

    def cancel(self, job_id: str, *, tenant: str, now: datetime, expires_at: datetime) -> Job:
        cancellable = ", ".join(f":from{i}" for i in range(len(CANCELLABLE_FROM)))
        values: Item = {f":from{i}": {"S": s.value} for i, s in enumerate(sorted(CANCELLABLE_FROM))}
        try:
            response = self._call(
                self.client.update_item,
                TableName=self.table_name,
                Key={"pk": {"S": job_key(job_id)}},
                UpdateExpression=(
                    "SET #s = :cancelled, updated_at = :now, finished_at = :now, expires_at = :ttl "
                    "REMOVE sweep_pk, sweep_at"
                ),
                ConditionExpression=f"tenant = :tenant AND #s IN ({cancellable})",
                ExpressionAttributeNames={"#s": "status"},
                ExpressionAttributeValues={
                    **values,
                    ":cancelled": {"S": JobStatus.CANCELLED.value},
                    ":tenant": {"S": tenant},
                    ":now": {"S": iso(now)},
                    ":ttl": {"N": str(epoch(expires_at))},
                },
                ReturnValues="ALL_NEW",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except _ConditionFailed as failed:
            current = _tenants_job(failed, job_id, tenant)
            raise JobConflictError(current, f"a {current.status.value} job cannot be cancelled") from None
        return from_item(response["Attributes"])

    # -- plumbing ---------------------------------------------------------------------------

    def _call(self, operation: Callable[..., Any], **request: Any) -> Any:
        try:
            return operation(**request)
        except botocore.exceptions.ClientError as error:
            code = error.response.get("Error", {}).get("Code", "")
            if code == CONFLICT:
                raise _ConditionFailed(cast("Item", error.response.get("Item") or {})) from None
            raise StoreUnavailableError(f"DynamoDB {code or 'error'}") from error
        except botocore.exceptions.BotoCoreError as error:
            raise StoreUnavailableError(f"DynamoDB unreachable: {type(error).__name__}") from error


class _ConditionFailed(Exception):
    def __init__(self, item: Item) -> None:
        self.item = item


def _tenants_job(failed: _ConditionFailed, job_id: str, tenant: str) -> Job:
    """The job a failed condition returned, if it is the tenant's; another tenant's job is no job."""
    current = from_item(failed.item) if failed.item else None
    if current is None or current.tenant != tenant:
        raise JobNotFoundError(job_id)
    return current


def job_key(job_id: str) -> str:
    return f"JOB#{job_id}"


def schedule_key(name: str) -> str:
    return f"SCHEDULE#{name}"


def sweep_shard(job_id: str) -> str:
    return f"SWEEP#{int(job_id[:2], 16) % SWEEP_SHARDS}"


def schedule_state_to_item(state: ScheduleState) -> Item:
    firings = [
        {"slot": f.slot, "fired_at": iso(f.fired_at), "job_id": f.job_id, "skipped_reason": f.skipped_reason}
        for f in state.firings
    ]
    item: Item = {
        "pk": {"S": schedule_key(state.name)},
        "firings_json": {"S": json.dumps(firings, separators=(",", ":"))},
        "version": {"N": str(state.version)},
    }
    if state.last_job_id:
        item["last_job_id"] = {"S": state.last_job_id}
    return item


def schedule_state_from_item(name: str, item: Any) -> ScheduleState:
    firings = tuple(
        Firing(
            slot=f["slot"],
            fired_at=parse_iso(f["fired_at"]),
            job_id=f.get("job_id"),
            skipped_reason=f.get("skipped_reason"),
        )
        for f in json.loads(item["firings_json"]["S"])
    )
    last = item.get("last_job_id")
    return ScheduleState(name, last["S"] if last else None, firings, version=int(item["version"]["N"]))


def iso(when: datetime) -> str:
    """Fixed-width UTC text, so string order is time order inside condition expressions."""
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_iso(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)


def epoch(when: datetime) -> int:
    return int(when.timestamp())


def to_item(job: Job) -> Item:
    created = iso(job.created_at)
    item: Item = {
        "pk": {"S": job_key(job.job_id)},
        "job_id": {"S": job.job_id},
        "tenant": {"S": job.tenant},
        "type": {"S": job.type},
        "queue": {"S": job.queue},
        "status": {"S": job.status.value},
        "payload_json": {"S": json.dumps(job.payload, separators=(",", ":"))},
        "payload_hash": {"S": job.payload_hash},
        "attempt": {"N": str(job.attempt)},
        "max_attempts": {"N": str(job.max_attempts)},
        "submission_id": {"S": job.submission_id},
        "created_at": {"S": created},
        "updated_at": {"S": iso(job.updated_at)},
        "redrives": {"N": str(job.redrives)},
        "gsi1pk": {"S": job.tenant},
        "gsi_sk": {"S": f"{created}#{job.job_id}"},
    }
    optional_text = {
        "idempotency_key": job.idempotency_key,
        "schedule_name": job.schedule_name,
        "error": job.error,
    }
    for name, text in optional_text.items():
        if text is not None:
            item[name] = {"S": text}
    optional_times = {
        "run_at": job.run_at,
        "lease_until": job.lease_until,
        "started_at": job.started_at,
        "finished_at": job.finished_at,
        "next_attempt_at": job.next_attempt_at,
    }
    for name, when in optional_times.items():
        if when is not None:
            item[name] = {"S": iso(when)}
    if job.expires_at is not None:
        item["expires_at"] = {"N": str(epoch(job.expires_at))}
    item["resends"] = {"N": str(job.resends)}
    if job.sweep_at is not None and not job.status.is_final:
        item["sweep_pk"] = {"S": sweep_shard(job.job_id)}
        item["sweep_at"] = {"S": iso(job.sweep_at)}
    if job.result is not None:
        item["result_json"] = {"S": json.dumps(job.result, default=str)}
    if job.progress is not None:
        item["progress_fraction"] = {"N": repr(job.progress.fraction)}
        item["progress_message"] = {"S": job.progress.message}
    return item


def from_item(item: Any) -> Job:
    def text(name: str) -> str | None:
        value = item.get(name)
        return value["S"] if value else None

    def when(name: str) -> datetime | None:
        value = text(name)
        return parse_iso(value) if value else None

    progress = None
    if "progress_fraction" in item:
        progress = Progress(float(item["progress_fraction"]["N"]), text("progress_message") or "")
    result_json = text("result_json")
    expires = item.get("expires_at")
    return Job(
        job_id=item["job_id"]["S"],
        tenant=item["tenant"]["S"],
        type=item["type"]["S"],
        queue=item["queue"]["S"],
        payload=json.loads(item["payload_json"]["S"]),
        payload_hash=item["payload_hash"]["S"],
        status=JobStatus(item["status"]["S"]),
        created_at=parse_iso(item["created_at"]["S"]),
        updated_at=parse_iso(item["updated_at"]["S"]),
        max_attempts=int(item["max_attempts"]["N"]),
        attempt=int(item["attempt"]["N"]),
        idempotency_key=text("idempotency_key"),
        submission_id=text("submission_id") or "",
        run_at=when("run_at"),
        lease_until=when("lease_until"),
        started_at=when("started_at"),
        finished_at=when("finished_at"),
        next_attempt_at=when("next_attempt_at"),
        progress=progress,
        result=json.loads(result_json) if result_json is not None else None,
        error=text("error"),
        expires_at=datetime.fromtimestamp(int(expires["N"]), UTC) if expires else None,
        schedule_name=text("schedule_name"),
        redrives=int(item.get("redrives", {"N": "0"})["N"]),
        sweep_at=when("sweep_at"),
        resends=int(item.get("resends", {"N": "0"})["N"]),
    )


def encode_cursor(key: dict[str, Any]) -> str:
    plain = {name: value["S"] for name, value in key.items()}
    return base64.urlsafe_b64encode(json.dumps(plain, separators=(",", ":")).encode()).decode().rstrip("=")


def decode_cursor(cursor: str, key_name: str, key_value: str) -> Item:
    """A cursor is only accepted for the listing (and tenant) it came from."""
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        plain = json.loads(base64.urlsafe_b64decode(padded.encode()))
        if not isinstance(plain, dict) or plain.get(key_name) != key_value:
            raise ValueError("cursor belongs to another listing")
        if set(plain) != {"pk", key_name, "gsi_sk"} or not all(isinstance(v, str) for v in plain.values()):
            raise ValueError("cursor has the wrong keys")
        if not CURSOR_PK.fullmatch(plain["pk"]) or not CURSOR_SORT_KEY.fullmatch(plain["gsi_sk"]):
            raise ValueError("cursor keys are not keys this table makes")
    except (ValueError, TypeError):
        raise InvalidRequestError("cursor", "cursor is not one this listing returned") from None
    return {name: {"S": value} for name, value in plain.items()}
