"""cdk-nag on every synth, and the one way the stack acknowledges a finding: with a reason."""

from __future__ import annotations

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks, NagPack, ServerlessChecks
from constructs import IConstruct

# AWS services whose actions take no resource-level permissions; a `*` resource is allowed for these only.
RESOURCELESS_ACTIONS = frozenset(
    {
        "xray:PutTraceSegments",
        "xray:PutTelemetryRecords",
        "cloudwatch:GetMetricData",
        "cloudwatch:ListMetrics",
        "dynamodb:ListStreams",
    }
)
XRAY_REASON = "X-Ray's PutTraceSegments and PutTelemetryRecords take no resource-level permissions (active tracing)"
NO_TRACING_REASON = (
    "Tracing is off by default for cost: at low volume X-Ray records about one trace per invocation (~$5 per "
    "million jobs); job state, metrics and logs carry the job id instead. Turn it on with -c tracing=true."
)


def nag_packs(scope: IConstruct | None = None) -> list[NagPack]:
    return [AwsSolutionsChecks(scope), ServerlessChecks(scope)]


def add_checks(app: cdk.App) -> None:
    """Run the AwsSolutions and Serverless packs when the app synthesizes; a finding fails the synth."""
    cdk.Validations.of(app).add_plugins(*nag_packs(app))


def acknowledge(scope: IConstruct, rule_id: str, reason: str) -> None:
    if not reason.strip():
        raise ValueError(f"acknowledging {rule_id} needs a reason")
    cdk.Validations.of(scope).acknowledge(cdk.Acknowledgment(id=rule_id, reason=reason))


def wildcard_resource(rule_resource: str) -> str:
    """The id of an AwsSolutions-IAM5 finding on a resource (as cdk-nag spells tokens)."""
    return f"AwsSolutions-IAM5[Resource::{rule_resource}]"
