"""Who is calling: the tenant comes from the API Gateway authorizer context, never from the body.

A tenant id is validated, never normalised: a value the rules refuse is refused (`TenantRefusedError`,
403 `tenant_refused`), not trimmed, cut or case-folded into some other tenant.

- JWT: the first of the configured claims (the stack's `tenant_claims`, default `tenant` only) the token
  carries. The value must match `TENANT_PATTERN` (ASCII letters, digits and `._:@/+=-`, starting with a
  letter or digit, at most 128 characters) and must not be a reserved name in any letter case.
- IAM: the caller's principal ARN, an assumed role's session name dropped so every session of one role is
  one tenant. It must have the shape of an IAM or STS principal ARN (`IAM_PRINCIPAL_PATTERN`, at most
  1,024 characters); a reserved name can never have that shape.

Admins: a JWT caller with the scope `offpath/admin`, or an IAM caller whose principal is in the stack's
`admin_principals`. Every other caller is a tenant.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from offpath.domain.errors import TenantRefusedError

# Jobs made by schedules belong to this tenant; admins can read them. No caller can ever be it.
SYSTEM_TENANT = "system"
# Names no caller can take, compared in any letter case.
RESERVED_TENANTS = frozenset({SYSTEM_TENANT})
TENANT_MAX_LENGTH = 128
TENANT_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@/+=-]{0,127}")
# An IAM user's path may hold any printable ASCII character; AWS caps a path at 512 characters and a
# name at 64, so a real principal stays far below the cap.
IAM_PRINCIPAL_MAX_LENGTH = 1024
IAM_PRINCIPAL_PATTERN = re.compile(r"arn:aws(?:-[a-z]+)*:(?:iam|sts)::[0-9]{12}:[\x21-\x7e]{1,990}")
# An operator names an admin role by its role ARN; its callers present the role's assumed-role ARN.
ROLE_ARN = re.compile(r"arn:(aws(?:-[a-z]+)*):iam::([0-9]{12}):role/(?:[\x21-\x7e]*/)?([^/]+)")
ASSUMED_ROLE = ":assumed-role/"
DEFAULT_TENANT_CLAIMS = ("tenant",)
CLAIM_NAME_PATTERN = re.compile(r"[A-Za-z0-9_:.-]{1,64}")
ADMIN_SCOPE = "offpath/admin"


def checked_tenant(value: object, source: str = "tenant") -> str:
    """`value` as a tenant id, or TenantRefusedError saying why not."""
    if not isinstance(value, str):
        raise TenantRefusedError(f"the {source} must be text")
    if not TENANT_PATTERN.fullmatch(value):
        raise TenantRefusedError(
            f"the {source} must be 1 to {TENANT_MAX_LENGTH} characters of letters, digits and ._:@/+=- "
            "(starting with a letter or digit)"
        )
    if value.lower() in RESERVED_TENANTS:
        raise TenantRefusedError(f"the {source} is a reserved name")
    return value


def principal_of(arn: str) -> str:
    """An IAM caller's principal: `...:assumed-role/<role>/<session>` becomes `...:assumed-role/<role>`."""
    head, found, resource = arn.partition(ASSUMED_ROLE)
    if not found:
        return arn
    return f"{head}{ASSUMED_ROLE}{resource.split('/', 1)[0]}"


def checked_principal(arn: object) -> str:
    if not isinstance(arn, str) or len(arn) > IAM_PRINCIPAL_MAX_LENGTH or not IAM_PRINCIPAL_PATTERN.fullmatch(arn):
        raise TenantRefusedError("the caller's IAM principal is not an IAM or STS principal ARN")
    return principal_of(arn)


def admin_principal(arn: str) -> str:
    """A configured admin as its callers present themselves: a role ARN (with or without a path) is
    compared as the role's assumed-role principal; any other ARN as its principal."""
    role = ROLE_ARN.fullmatch(arn)
    if role:
        partition, account, name = role.groups()
        return f"arn:{partition}:sts::{account}{ASSUMED_ROLE}{name}"
    return principal_of(arn)


def tenant_of(event: dict[str, Any], claims: Iterable[str] = DEFAULT_TENANT_CLAIMS) -> str | None:
    """The caller's tenant; None without an authenticated caller (or a token with none of `claims`).
    TenantRefusedError when the authorizer names a tenant the rules refuse."""
    authorizer = _authorizer(event)
    jwt = authorizer.get("jwt")
    if jwt:
        token_claims = jwt.get("claims") or {}
        for name in claims:
            if name in token_claims:
                return checked_tenant(token_claims[name], f"claim {name!r}")
        return None
    arn = (authorizer.get("iam") or {}).get("userArn")
    if arn is None or arn == "":
        return None
    return checked_principal(arn)


def is_admin(event: dict[str, Any], admin_principals: Iterable[str] = ()) -> bool:
    """JWT callers need the admin scope; IAM callers must be one of `admin_principals` (user ARNs,
    role ARNs or assumed-role ARNs)."""
    authorizer = _authorizer(event)
    jwt = authorizer.get("jwt")
    if jwt:
        scopes = jwt.get("scopes") or []
        claims_scope = (jwt.get("claims") or {}).get("scope", "")
        return ADMIN_SCOPE in scopes or ADMIN_SCOPE in str(claims_scope).split()
    arn = (authorizer.get("iam") or {}).get("userArn")
    if not isinstance(arn, str) or not arn:
        return False
    return principal_of(arn) in {admin_principal(admin) for admin in admin_principals}


def _authorizer(event: dict[str, Any]) -> dict[str, Any]:
    authorizer: dict[str, Any] = (event.get("requestContext") or {}).get("authorizer") or {}
    return authorizer
