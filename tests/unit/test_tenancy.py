"""The tenant comes from the API Gateway authorizer context, never from the request body."""

from __future__ import annotations

from typing import Any

import pytest

from offpath.tenancy import is_admin, tenant_of


def jwt(claims: dict[str, Any], scopes: list[str] | None = None) -> dict[str, Any]:
    return {"requestContext": {"authorizer": {"jwt": {"claims": claims, "scopes": scopes}}}}


def iam(user_arn: str) -> dict[str, Any]:
    return {"requestContext": {"authorizer": {"iam": {"userArn": user_arn, "accountId": "123456789012"}}}}


def test_the_tenant_claim_names_the_tenant() -> None:
    assert tenant_of(jwt({"tenant": "acme", "sub": "user-1"})) == "acme"


def test_a_cognito_custom_tenant_claim_names_the_tenant() -> None:
    assert tenant_of(jwt({"custom:tenant": "acme", "sub": "user-1"})) == "acme"


def test_without_a_tenant_claim_the_subject_is_the_tenant() -> None:
    assert tenant_of(jwt({"sub": "user-1"})) == "user-1"


def test_a_blank_tenant_claim_falls_back_to_the_subject() -> None:
    assert tenant_of(jwt({"tenant": "  ", "sub": "user-1"})) == "user-1"


def test_a_non_text_tenant_claim_is_not_used() -> None:
    assert tenant_of(jwt({"tenant": ["a", "b"], "sub": "user-1"})) == "user-1"


def test_an_overlong_tenant_is_cut_to_256_characters() -> None:
    assert tenant_of(jwt({"tenant": "t" * 1000})) == "t" * 256


def test_an_iam_user_is_the_tenant() -> None:
    arn = "arn:aws:iam::123456789012:user/billing-service"

    assert tenant_of(iam(arn)) == arn


def test_every_session_of_an_assumed_role_is_one_tenant() -> None:
    first = tenant_of(iam("arn:aws:sts::123456789012:assumed-role/billing-service/session-1"))
    second = tenant_of(iam("arn:aws:sts::123456789012:assumed-role/billing-service/i-0abc"))

    assert first == second == "arn:aws:sts::123456789012:assumed-role/billing-service"


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


@pytest.mark.parametrize(
    ("event", "admin"),
    [
        (jwt({"sub": "u"}, scopes=["offpath/admin"]), True),
        (jwt({"sub": "u", "scope": "openid offpath/admin"}), True),
        (jwt({"sub": "u"}, scopes=["offpath/read"]), False),
        (iam("arn:aws:iam::123456789012:user/ops"), True),
        ({}, False),
    ],
)
def test_admins_are_jwt_callers_with_the_admin_scope_or_iam_callers(event: dict[str, Any], admin: bool) -> None:
    assert is_admin(event) is admin
