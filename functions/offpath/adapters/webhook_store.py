"""Webhook endpoints and their delivery logs, in the job table (two more item kinds; not job items, so the
table's stream filter leaves them out):

- `WEBHOOKS#<tenant>`: every endpoint of the tenant, in one item (the notifier reads one item per tenant);
- `WEBHOOKLOG#<tenant>#<name>`: the endpoint's latest delivery attempts and since when they keep failing.

Both are written whole, under a version condition (read, change, write; tried again on a conflict).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from offpath.adapters.dynamodb_store import (
    NEW_ITEM,
    ConditionFailed,
    attribute_values,
    call,
    default_client,
    iso,
    item_key,
    key_of,
    parse_iso,
    plain_values,
)
from offpath.adapters.item_formats import WEBHOOK_ENDPOINTS, WEBHOOK_LOG
from offpath.domain.errors import StoreUnavailableError
from offpath.domain.webhooks import Attempt, DeliveryLog, Endpoint, EndpointLimitError, Secret

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient

CONFLICT_RETRIES = 5
T = TypeVar("T")


def endpoints_key(tenant: str) -> str:
    return f"WEBHOOKS#{tenant}"


def log_key(tenant: str, name: str) -> str:
    return f"WEBHOOKLOG#{tenant}#{name}"


class DynamoDbWebhookStore:
    def __init__(self, table_name: str, client: DynamoDBClient | None = None) -> None:
        self.table_name = table_name
        self.client = client or default_client()

    # -- endpoints --------------------------------------------------------------------------

    def endpoints(self, tenant: str) -> list[Endpoint]:
        return list(self._endpoints(tenant)[0].values())

    def endpoint(self, tenant: str, name: str) -> Endpoint | None:
        return self._endpoints(tenant)[0].get(name)

    def put_endpoint(self, tenant: str, endpoint: Endpoint, *, limit: int) -> bool:
        def change() -> bool:
            endpoints, version = self._endpoints(tenant)
            replaced = endpoint.name in endpoints
            if not replaced and len(endpoints) >= limit:
                raise EndpointLimitError(limit)
            endpoints[endpoint.name] = endpoint
            self._write_endpoints(tenant, endpoints, version)
            return replaced

        return self._retrying(change)

    def delete_endpoint(self, tenant: str, name: str) -> bool:
        def change() -> bool:
            endpoints, version = self._endpoints(tenant)
            if endpoints.pop(name, None) is None:
                return False
            self._write_endpoints(tenant, endpoints, version)
            return True

        deleted = self._retrying(change)
        if deleted:
            self._call(self.client.delete_item, TableName=self.table_name, Key=key_of(log_key(tenant, name)))
        return deleted

    def _endpoints(self, tenant: str) -> tuple[dict[str, Endpoint], int]:
        item = self._get(endpoints_key(tenant))
        if item is None:
            return {}, 0
        item = WEBHOOK_ENDPOINTS.read(item)
        raw = json.loads(item["endpoints_json"])
        return {name: endpoint_from_json(name, data) for name, data in raw.items()}, int(item["version"])

    def _write_endpoints(self, tenant: str, endpoints: dict[str, Endpoint], version: int) -> None:
        text = json.dumps({name: endpoint_to_json(e) for name, e in sorted(endpoints.items())}, separators=(",", ":"))
        self._put_versioned(
            {**item_key(endpoints_key(tenant)), **WEBHOOK_ENDPOINTS.stamp, "endpoints_json": text}, version
        )

    # -- delivery logs ----------------------------------------------------------------------

    def delivery_log(self, tenant: str, name: str) -> DeliveryLog:
        item = self._get(log_key(tenant, name))
        if item is None:
            return DeliveryLog()
        item = WEBHOOK_LOG.read(item)
        attempts = tuple(attempt_from_json(a) for a in json.loads(item["attempts_json"]))
        since = item.get("failing_since")
        return DeliveryLog(attempts, parse_iso(since) if since else None, version=int(item["version"]))

    def record_attempt(self, tenant: str, name: str, attempt: Attempt, *, succeeded: bool) -> DeliveryLog:
        def change() -> DeliveryLog:
            log = self.delivery_log(tenant, name).with_attempt(attempt, succeeded=succeeded)
            plain = {
                **item_key(log_key(tenant, name)),
                **WEBHOOK_LOG.stamp,
                "attempts_json": json.dumps([attempt_to_json(a) for a in log.attempts], separators=(",", ":")),
                "failing_since": iso(log.failing_since) if log.failing_since else None,
            }
            self._put_versioned(plain, log.version)
            return log

        return self._retrying(change)

    # -- plumbing ---------------------------------------------------------------------------

    def _get(self, key: str) -> dict[str, Any] | None:
        response = self._call(self.client.get_item, TableName=self.table_name, Key=key_of(key), ConsistentRead=True)
        item = response.get("Item")
        return plain_values(item) if item else None

    def _put_versioned(self, plain: dict[str, Any], version: int) -> None:
        self._call(
            self.client.put_item,
            TableName=self.table_name,
            Item=attribute_values({**plain, "version": version + 1}),
            ConditionExpression=f"{NEW_ITEM} OR version = :v",
            ExpressionAttributeValues=attribute_values({":v": version}),
        )

    def _retrying(self, change: Callable[[], T]) -> T:
        for _ in range(CONFLICT_RETRIES):
            try:
                return change()
            except ConditionFailed:
                continue
        raise StoreUnavailableError("the webhook item kept changing under a write")

    def _call(self, operation: Callable[..., Any], **request: Any) -> Any:
        return call(operation, **request)


def _when(value: datetime | None) -> str | None:
    return iso(value) if value is not None else None


def _parsed(value: str | None) -> datetime | None:
    return parse_iso(value) if value else None


def endpoint_to_json(endpoint: Endpoint) -> dict[str, Any]:
    return {
        "url": endpoint.url,
        "events": list(endpoint.events),
        "job_types": list(endpoint.job_types),
        "include_payload": endpoint.include_payload,
        "secrets": [{"value": s.value, "expires_at": _when(s.expires_at)} for s in endpoint.secrets],
        "enabled": endpoint.enabled,
        "disabled_reason": endpoint.disabled_reason,
        "disabled_at": _when(endpoint.disabled_at),
        "created_at": _when(endpoint.created_at),
        "updated_at": _when(endpoint.updated_at),
    }


def endpoint_from_json(name: str, data: dict[str, Any]) -> Endpoint:
    return Endpoint(
        name=name,
        url=data["url"],
        events=tuple(data["events"]),
        job_types=tuple(data.get("job_types") or ()),
        include_payload=bool(data.get("include_payload")),
        secrets=tuple(Secret(s["value"], _parsed(s.get("expires_at"))) for s in data["secrets"]),
        enabled=bool(data.get("enabled", True)),
        disabled_reason=data.get("disabled_reason"),
        disabled_at=_parsed(data.get("disabled_at")),
        created_at=_parsed(data.get("created_at")),
        updated_at=_parsed(data.get("updated_at")),
    )


def attempt_to_json(attempt: Attempt) -> dict[str, Any]:
    return {
        "event_id": attempt.event_id,
        "type": attempt.type,
        "attempt": attempt.attempt,
        "at": iso(attempt.at),
        "status_code": attempt.status_code,
        "latency_ms": attempt.latency_ms,
        "error": attempt.error,
        "next_retry_at": _when(attempt.next_retry_at),
    }


def attempt_from_json(data: dict[str, Any]) -> Attempt:
    return Attempt(
        event_id=data["event_id"],
        type=data["type"],
        attempt=int(data["attempt"]),
        at=parse_iso(data["at"]),
        status_code=data.get("status_code"),
        latency_ms=int(data.get("latency_ms") or 0),
        error=data.get("error"),
        next_retry_at=_parsed(data.get("next_retry_at")),
    )
