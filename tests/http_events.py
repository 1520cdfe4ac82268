"""API Gateway HTTP API (payload format 2.0) events, as API Gateway builds them."""

from __future__ import annotations

import json
import uuid
from typing import Any
from urllib.parse import parse_qsl, urlsplit


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
    """A JWT caller whose `tenant` and `sub` claims are `tenant` (`claims`: exactly these claims instead),
    or, with `iam_arn`, an IAM (SigV4) caller with that principal."""
    split = urlsplit(path)
    query = dict(parse_qsl(split.query, keep_blank_values=True))
    text = raw_body if raw_body is not None else (json.dumps(body) if body is not None else None)
    request_context: dict[str, Any] = {
        "accountId": "000000000000",
        "apiId": "local",
        "domainName": "localhost",
        "http": {
            "method": method,
            "path": split.path,
            "protocol": "HTTP/1.1",
            "sourceIp": "127.0.0.1",
            "userAgent": "pytest",
        },
        "requestId": str(uuid.uuid4()),
        "routeKey": "$default",
        "stage": "$default",
        "time": "01/Jan/2026:00:00:00 +0000",
        "timeEpoch": 0,
    }
    if iam_arn is not None:
        request_context["authorizer"] = {"iam": {"userArn": iam_arn, "accountId": iam_arn.split(":")[4]}}
    elif claims is not None:
        request_context["authorizer"] = {"jwt": {"claims": claims, "scopes": scopes or []}}
    elif tenant is not None:
        request_context["authorizer"] = {"jwt": {"claims": {"sub": tenant, "tenant": tenant}, "scopes": scopes or []}}
    return {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": split.path,
        "rawQueryString": split.query,
        "headers": {k.lower(): v for k, v in (headers or {"content-type": "application/json"}).items()},
        "queryStringParameters": query or None,
        "requestContext": request_context,
        "body": text,
        "isBase64Encoded": False,
    }


def body_of(response: dict[str, Any]) -> Any:
    return json.loads(response["body"])
