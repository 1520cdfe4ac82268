"""Webhook endpoints and their delivery logs, in the job table (two more item kinds; not job items, so the
table's stream filter leaves them out):

- `WEBHOOKS#<tenant>`: every endpoint of the tenant, in one item (the notifier reads one item per tenant);
- `WEBHOOKLOG#<tenant>#<name>`: the endpoint's latest delivery attempts and since when they keep failing.

Both are written whole, under a version condition (read, change, write; tried again on a conflict).

An endpoint's signing secrets are stored sealed by the store's cipher (KMS on AWS, a local key file in the
embedded runtime), bound to their tenant and endpoint: the item, the stream and any backup hold no secret in
clear. A secret read is opened once and its sealed text kept, so writing the endpoint again (disabled by a
delivery, another endpoint added) seals nothing new. A store made `with_secrets=False` (the notifier, which
never signs) reads endpoints without their secrets and never writes. Without a cipher (tests), secrets are
stored as they are; an item written so is read by a store with a cipher and sealed at its next write.
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
from offpath.domain.webhooks import Attempt, DeliveryLog, Endpoint, EndpointLimitError, Secret, SecretCipher

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient

CONFLICT_RETRIES = 5
T = TypeVar("T")


def endpoints_key(tenant: str) -> str:
    return f"WEBHOOKS#{tenant}"


def log_key(tenant: str, name: str) -> str:
    return f"WEBHOOKLOG#{tenant}#{name}"


class DynamoDbWebhookStore:
    def __init__(
        self,
        table_name: str,
        client: DynamoDBClient | None = None,
        *,
        cipher: SecretCipher | None = None,
        with_secrets: bool = True,
    ) -> None:
        self.table_name = table_name
        self.client = client or default_client()
        self.cipher = cipher
        self.with_secrets = with_secrets
        self._sealed: dict[tuple[str, str, str], str] = {}  # (tenant, endpoint, secret) -> its sealed text

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

        replaced = self._retrying(change)
        if not replaced:
            self._delete_log(tenant, endpoint.name)
        return replaced

    def update_endpoint(self, tenant: str, name: str, change: Callable[[Endpoint], Endpoint | None]) -> Endpoint | None:
        def apply() -> Endpoint | None:
            endpoints, version = self._endpoints(tenant)
            current = endpoints.get(name)
            updated = None if current is None else change(current)
            if updated is None:
                return None
            endpoints[name] = updated
            self._write_endpoints(tenant, endpoints, version)
            return updated

        return self._retrying(apply)

    def delete_endpoint(self, tenant: str, name: str) -> bool:
        def change() -> bool:
            endpoints, version = self._endpoints(tenant)
            if endpoints.pop(name, None) is None:
                return False
            self._write_endpoints(tenant, endpoints, version)
            return True

        deleted = self._retrying(change)
        if deleted:
            self._delete_log(tenant, name)
        return deleted

    def _delete_log(self, tenant: str, name: str) -> None:
        self._call(self.client.delete_item, TableName=self.table_name, Key=key_of(log_key(tenant, name)))

    def _endpoints(self, tenant: str) -> tuple[dict[str, Endpoint], int]:
        item = self._get(endpoints_key(tenant))
        if item is None:
            return {}, 0
        item = WEBHOOK_ENDPOINTS.read(item)
        raw = json.loads(item["endpoints_json"])
        endpoints = {name: endpoint_from_json(name, data, self._opener(tenant, name)) for name, data in raw.items()}
        return endpoints, int(item["version"])

    def _write_endpoints(self, tenant: str, endpoints: dict[str, Endpoint], version: int) -> None:
        if not self.with_secrets:
            raise RuntimeError("a webhook store without the endpoints' secrets cannot write them")
        plain = {name: endpoint_to_json(e, self._sealer(tenant, name)) for name, e in sorted(endpoints.items())}
        text = json.dumps(plain, separators=(",", ":"))
        self._put_versioned(
            {**item_key(endpoints_key(tenant)), **WEBHOOK_ENDPOINTS.stamp, "endpoints_json": text}, version
        )

    # -- secrets ----------------------------------------------------------------------------

    def _opener(self, tenant: str, name: str) -> Callable[[dict[str, Any]], str | None]:
        return lambda stored: self._open(tenant, name, stored)

    def _sealer(self, tenant: str, name: str) -> Callable[[str], dict[str, str]]:
        return lambda value: self._seal(tenant, name, value)

    def _open(self, tenant: str, name: str, stored: dict[str, Any]) -> str | None:
        """A stored secret in clear; None when this store does not read secrets."""
        if not self.with_secrets:
            return None
        if "sealed" not in stored:
            return str(stored["value"])  # written without a cipher
        if self.cipher is None:
            raise StoreUnavailableError("a webhook secret is sealed and this store has no cipher")
        value = self.cipher.open(str(stored["sealed"]), secret_context(tenant, name))
        self._sealed[(tenant, name, value)] = str(stored["sealed"])
        return value

    def _seal(self, tenant: str, name: str, value: str) -> dict[str, str]:
        if self.cipher is None:
            return {"value": value}
        sealed = self._sealed.get((tenant, name, value))
        if sealed is None:
            sealed = self.cipher.seal(value, secret_context(tenant, name))
            self._sealed[(tenant, name, value)] = sealed
        return {"sealed": sealed}

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


def secret_context(tenant: str, name: str) -> dict[str, str]:
    """What a sealed secret is bound to (KMS encryption context; associated data locally)."""
    return {"offpath:tenant": tenant, "offpath:endpoint": name}


def endpoint_to_json(
    endpoint: Endpoint, seal: Callable[[str], dict[str, str]] = lambda value: {"value": value}
) -> dict[str, Any]:
    return {
        "url": endpoint.url,
        "events": list(endpoint.events),
        "job_types": list(endpoint.job_types),
        "include_payload": endpoint.include_payload,
        "secrets": [{**seal(s.value), "expires_at": _when(s.expires_at)} for s in endpoint.secrets],
        "enabled": endpoint.enabled,
        "disabled_reason": endpoint.disabled_reason,
        "disabled_at": _when(endpoint.disabled_at),
        "created_at": _when(endpoint.created_at),
        "updated_at": _when(endpoint.updated_at),
    }


def endpoint_from_json(
    name: str, data: dict[str, Any], open_: Callable[[dict[str, Any]], str | None] = lambda s: str(s["value"])
) -> Endpoint:
    """`open_` gives a stored secret in clear, or None: the endpoint is read without its secrets."""
    opened = [(open_(s), _parsed(s.get("expires_at"))) for s in data["secrets"]]
    return Endpoint(
        name=name,
        url=data["url"],
        events=tuple(data["events"]),
        job_types=tuple(data.get("job_types") or ()),
        include_payload=bool(data.get("include_payload")),
        secrets=tuple(Secret(value, expires_at) for value, expires_at in opened if value is not None),
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
        "job_id": attempt.job_id,
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
        job_id=data.get("job_id"),  # absent in attempts logged before it was kept
    )
