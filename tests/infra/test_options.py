"""Context options: text from the command line becomes typed options, or a clear error."""

from __future__ import annotations

from typing import Any

import pytest

from infra.options import OptionsError, StackOptions


def options(**context: Any) -> StackOptions:
    return StackOptions.from_context(context.get)


def test_no_context_gives_the_defaults() -> None:
    assert options() == StackOptions()
    assert options().jwt is False


def test_the_target_is_aws_unless_localstack_is_asked_for() -> None:
    assert options().target == "aws" and not options().localstack
    assert options(target="localstack").localstack


def test_command_line_text_is_typed() -> None:
    parsed = options(
        deletion_protection="false", retention_days="14", jwt_issuer="https://id.example.com", jwt_audience="a, b"
    )
    assert parsed.deletion_protection is False
    assert parsed.retention_days == 14
    assert parsed.jwt_audience == ("a", "b")
    assert parsed.jwt is True


@pytest.mark.parametrize(
    ("context", "message"),
    [
        ({"jwt_issuer": "https://id.example.com"}, "both jwt_issuer and jwt_audience"),
        ({"jwt_issuer": "http://id.example.com", "jwt_audience": "a"}, "https://"),
        ({"deletion_protection": "maybe"}, "deletion_protection must be true or false"),
        ({"retention_days": "a week"}, "retention_days must be a whole number"),
        ({"prefix": "Offpath_Prod"}, "prefix"),
        ({"log_retention_days": "4"}, "log_retention_days must be one of"),
        ({"tenant_claims": "tenant,sub claim"}, "tenant_claims"),
        ({"tenant_claims": " , "}, "tenant_claims must name at least one claim"),
        ({"admin_principals": "alice"}, "admin_principals: 'alice' is not an IAM principal ARN"),
        ({"admin_principals": "arn:aws:s3:::bucket"}, "admin_principals"),
        ({"demo_jobs": "sometimes"}, "demo_jobs must be true or false"),
        ({"target": "gcp"}, "target must be one of aws, localstack"),
        ({"powertools_layer_arn": "arn:aws:lambda:x"}, "powertools_layer_arn is no longer an option: .* no layer"),
    ],
)
def test_unusable_context_is_rejected_with_its_key(context: dict[str, str], message: str) -> None:
    with pytest.raises(OptionsError, match=message):
        options(**context)


def test_by_default_the_tenant_claim_alone_names_the_tenant_no_iam_admins_and_no_demo_jobs() -> None:
    defaults = options()

    assert defaults.tenant_claims == ("tenant",)
    assert defaults.admin_principals == ()
    assert defaults.demo_jobs is False


def test_tenant_claims_admin_principals_and_demo_jobs_come_from_context() -> None:
    parsed = options(
        tenant_claims="tenant, sub",
        admin_principals="arn:aws:iam::123456789012:role/ops, arn:aws:iam::123456789012:user/alice",
        demo_jobs="true",
    )

    assert parsed.tenant_claims == ("tenant", "sub")
    assert parsed.admin_principals == ("arn:aws:iam::123456789012:role/ops", "arn:aws:iam::123456789012:user/alice")
    assert parsed.demo_jobs is True
