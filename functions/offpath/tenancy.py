"""Who is calling: the tenant comes from the API Gateway authorizer context, never from the body."""

from __future__ import annotations

from typing import Any

TENANT_CLAIMS = ("tenant", "custom:tenant", "sub")
ADMIN_SCOPE = "offpath/admin"


def tenant_of(event: dict[str, Any]) -> str | None:
    """JWT authorizer: the `tenant` claim, else the subject. IAM: the caller's principal, with an
    assumed role's session name dropped so every session of one role is one tenant."""
    authorizer = (event.get("requestContext") or {}).get("authorizer") or {}
    claims = (authorizer.get("jwt") or {}).get("claims") or {}
    for name in TENANT_CLAIMS:
        value = claims.get(name)
        if isinstance(value, str) and value.strip():
            return value.strip()[:256]
    iam = authorizer.get("iam") or {}
    arn = iam.get("userArn")
    if isinstance(arn, str) and arn:
        if ":assumed-role/" in arn:
            arn = arn.rsplit("/", 1)[0]
        return arn[:256]
    return None


def is_admin(event: dict[str, Any]) -> bool:
    """JWT callers need the admin scope; IAM callers were already authorised per route by their policy."""
    authorizer = (event.get("requestContext") or {}).get("authorizer") or {}
    jwt = authorizer.get("jwt")
    if jwt:
        scopes = jwt.get("scopes") or []
        claims_scope = (jwt.get("claims") or {}).get("scope", "")
        return ADMIN_SCOPE in scopes or ADMIN_SCOPE in str(claims_scope).split()
    return bool(authorizer.get("iam"))
