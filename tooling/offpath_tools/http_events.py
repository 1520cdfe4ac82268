"""API Gateway HTTP API (payload format 2.0) events for calling the api handler directly, built by the local
gateway's own `build_event` (the one builder of such events), from a caller its JWT authorizer let through."""

from __future__ import annotations

import json
from typing import Any

from offpath_local.gateway import build_event, request_id


def http_event(
    method: str,
    path: str,
    *,
    body: Any = None,
    raw_body: str | None = None,
    headers: dict[str, str] | None = None,
    tenant: str | None = "tenant-a",
    scopes: list[str] | None = None,
    claims: dict[str, Any] | None = None,
    iam_arn: str | None = None,
) -> dict[str, Any]:
    """`path` may carry a query string. A JWT caller whose `tenant` and `sub` claims are `tenant` (`claims`:
    exactly these claims instead); with `iam_arn`, an IAM (SigV4) caller with that principal; `tenant` None
    and neither: no authorizer context (an unauthorised caller)."""
    text = raw_body if raw_body is not None else (json.dumps(body) if body is not None else None)
    if claims is None and tenant is not None:
        claims = {"sub": tenant, "tenant": tenant}
    event = build_event(
        method=method,
        target=path,
        headers=list((headers or {"content-type": "application/json"}).items()),
        body=text.encode() if text is not None else b"",
        source_ip="127.0.0.1",
        route=None,
        path_parameters=None,
        claims=claims if iam_arn is None else None,
        scopes=scopes or [],
        domain="localhost",
        req_id=request_id(),
    )
    if iam_arn is not None:
        event["requestContext"]["authorizer"] = {"iam": {"userArn": iam_arn, "accountId": iam_arn.split(":")[4]}}
    return event


def body_of(response: dict[str, Any]) -> Any:
    return json.loads(response["body"])
