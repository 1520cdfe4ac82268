"""The tenant comes from the API Gateway authorizer context, never from the request body; it is validated,
never normalised, and a reserved name never comes from a caller."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from offpath.domain.errors import TenantRefusedError
from offpath.tenancy import is_admin, tenant_of
from offpath_local import cli
from offpath_local.runtime import LocalRuntime

ROLE = "arn:aws:iam::123456789012:role/ops"
ROLE_SESSION = "arn:aws:sts::123456789012:assumed-role/ops/alice"


def jwt(claims: dict[str, Any], scopes: list[str] | None = None) -> dict[str, Any]:
    return {"requestContext": {"authorizer": {"jwt": {"claims": claims, "scopes": scopes}}}}


def iam(user_arn: str) -> dict[str, Any]:
    return {"requestContext": {"authorizer": {"iam": {"userArn": user_arn, "accountId": "123456789012"}}}}


# -- JWT: which claim names the tenant ----------------------------------------------------------


def test_the_tenant_claim_names_the_tenant() -> None:
    assert tenant_of(jwt({"tenant": "acme", "sub": "user-1"})) == "acme"


def test_by_default_the_subject_is_not_a_tenant() -> None:
    assert tenant_of(jwt({"sub": "user-1"})) is None


def test_by_default_a_cognito_custom_claim_is_not_read() -> None:
    assert tenant_of(jwt({"custom:tenant": "acme", "sub": "user-1"})) is None


def test_a_configured_cognito_custom_tenant_claim_names_the_tenant() -> None:
    assert tenant_of(jwt({"custom:tenant": "acme", "sub": "user-1"}), ("tenant", "custom:tenant")) == "acme"


def test_with_sub_configured_the_subject_is_the_tenant_without_a_tenant_claim() -> None:
    assert tenant_of(jwt({"sub": "user-1"}), ("tenant", "sub")) == "user-1"


def test_the_first_configured_claim_the_token_carries_wins_even_when_refused() -> None:
    with pytest.raises(TenantRefusedError):
        tenant_of(jwt({"tenant": "  ", "sub": "user-1"}), ("tenant", "sub"))


# -- JWT: validated, never normalised -----------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        " acme ",
        "acme ",
        "  ",
        "",
        "acme\n",
        "-acme",
        "ac me",
        "acmé",
        "t" * 129,
        "t" * 257,
        ["a", "b"],
        42,
        None,
    ],
)
def test_a_tenant_outside_the_charset_or_length_is_refused(value: Any) -> None:
    with pytest.raises(TenantRefusedError, match="claim 'tenant'"):
        tenant_of(jwt({"tenant": value, "sub": "user-1"}))


def test_two_long_tenants_sharing_a_prefix_do_not_collide() -> None:
    for value in ("t" * 256 + "a", "t" * 256 + "b"):
        with pytest.raises(TenantRefusedError):
            tenant_of(jwt({"tenant": value}))


@pytest.mark.parametrize(
    "value", ["a", "acme", "Acme-Corp_2", "t" * 128, "user@example.com", "org:acme/team=1+2", "a.b"]
)
def test_a_tenant_inside_the_charset_is_taken_as_it_is(value: str) -> None:
    assert tenant_of(jwt({"tenant": value})) == value


@pytest.mark.parametrize("value", ["system", "System", "SYSTEM", "sYsTeM"])
def test_a_reserved_tenant_is_refused_in_any_case(value: str) -> None:
    with pytest.raises(TenantRefusedError, match="reserved"):
        tenant_of(jwt({"tenant": value}))


def test_a_reserved_subject_is_refused_when_sub_names_the_tenant() -> None:
    with pytest.raises(TenantRefusedError, match="reserved"):
        tenant_of(jwt({"sub": "system"}), ("tenant", "sub"))


# -- IAM ----------------------------------------------------------------------------------------


def test_an_iam_user_is_the_tenant() -> None:
    arn = "arn:aws:iam::123456789012:user/billing-service"

    assert tenant_of(iam(arn)) == arn


def test_an_iam_user_with_a_long_path_is_the_tenant_whole() -> None:
    arn = "arn:aws:iam::123456789012:user/" + "division/" * 50 + "billing-service"

    assert tenant_of(iam(arn)) == arn


def test_every_session_of_an_assumed_role_is_one_tenant() -> None:
    first = tenant_of(iam("arn:aws:sts::123456789012:assumed-role/billing-service/session-1"))
    second = tenant_of(iam("arn:aws:sts::123456789012:assumed-role/billing-service/i-0abc"))

    assert first == second == "arn:aws:sts::123456789012:assumed-role/billing-service"


def test_an_assumed_role_arn_without_a_session_name_is_its_role() -> None:
    arn = "arn:aws:sts::123456789012:assumed-role/billing-service"

    assert tenant_of(iam(arn)) == arn


@pytest.mark.parametrize(
    "arn",
    ["system", "not-an-arn", "arn:aws:s3:::bucket", "arn:aws:iam::123:user/x", "arn:aws:iam::123456789012:user/a b"],
)
def test_an_iam_caller_that_is_no_principal_arn_is_refused(arn: str) -> None:
    with pytest.raises(TenantRefusedError):
        tenant_of(iam(arn))


@pytest.mark.parametrize(
    "event",
    [
        {},
        {"requestContext": {}},
        {"requestContext": {"authorizer": None}},
        {"requestContext": {"authorizer": {}}},
        jwt({}),
        {"requestContext": {"authorizer": {"iam": {"userArn": ""}}}},
    ],
)
def test_no_authenticated_caller_means_no_tenant(event: dict[str, Any]) -> None:
    assert tenant_of(event) is None


def test_a_tenant_in_the_body_is_ignored() -> None:
    assert tenant_of({"body": '{"tenant": "acme"}', "requestContext": {}}) is None


# -- admins -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("event", "admin"),
    [
        (jwt({"sub": "u"}, scopes=["offpath/admin"]), True),
        (jwt({"sub": "u", "scope": "openid offpath/admin"}), True),
        (jwt({"sub": "u"}, scopes=["offpath/read"]), False),
        ({}, False),
    ],
)
def test_jwt_admins_are_callers_with_the_admin_scope(event: dict[str, Any], admin: bool) -> None:
    assert is_admin(event, admin_principals=(ROLE,)) is admin


def test_an_unlisted_iam_caller_is_not_an_admin() -> None:
    assert is_admin(iam("arn:aws:iam::123456789012:user/ops")) is False


@pytest.mark.parametrize(
    ("listed", "caller"),
    [
        ("arn:aws:iam::123456789012:user/ops", "arn:aws:iam::123456789012:user/ops"),
        (ROLE, ROLE_SESSION),
        ("arn:aws:iam::123456789012:role/team/ops", ROLE_SESSION),
        ("arn:aws:sts::123456789012:assumed-role/ops/any-session", ROLE_SESSION),
        ("arn:aws:sts::123456789012:assumed-role/ops", ROLE_SESSION),
    ],
)
def test_a_listed_iam_principal_is_an_admin_in_every_session(listed: str, caller: str) -> None:
    assert is_admin(iam(caller), admin_principals=(listed,)) is True


@pytest.mark.parametrize(
    "caller",
    [
        "arn:aws:sts::210987654321:assumed-role/ops/alice",  # same role name, another account
        "arn:aws:sts::123456789012:assumed-role/ops-readonly/alice",
        "arn:aws:iam::123456789012:user/ops",
    ],
)
def test_a_principal_like_a_listed_one_is_not_an_admin(caller: str) -> None:
    assert is_admin(iam(caller), admin_principals=(ROLE,)) is False


# -- the local runtime --------------------------------------------------------------------------


@pytest.mark.parametrize("token", ["system:x", "SYSTEM:x", "bad tenant:x", "t" * 200 + ":x"])
def test_offpath_local_refuses_a_reserved_or_invalid_tenant_before_starting(
    token: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def started(self: LocalRuntime) -> None:
        raise AssertionError(f"the runtime started with --token {token}")

    monkeypatch.setattr(LocalRuntime, "start", started)

    code = cli.main(["local", "--port", "0", "--data", str(tmp_path), "--token", token])

    assert code == cli.USAGE
    assert "--token" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())
