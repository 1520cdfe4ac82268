"""TESTPLAN 29: cdk-nag (AwsSolutions, Serverless) and cfn-lint pass; every acknowledgement has a reason."""

from __future__ import annotations

import json
from pathlib import Path

import aws_cdk as cdk
import pytest
from aws_cdk import aws_sqs as sqs
from cfnlint.api import ManualArgs, lint

from infra.nag import nag_packs
from infra.stack import build_app
from tests.infra.stacks import Synthesized, cdk_json_context

# CDK puts an explicit DependsOn on each function's role next to the GetAtt that already orders them.
CFN_LINT_IGNORED = ["W3005"]


def test_cdk_nag_reports_no_unacknowledged_finding(any_stack: Synthesized) -> None:
    findings = []
    for pack in nag_packs():
        report = pack.validate_scope(any_stack.stack)
        for violation in report.violations:
            for resource in violation.violating_resources:
                findings.append(f"{violation.severity} {violation.rule_name} at {resource.construct_path}")
    assert findings == []


def test_a_finding_fails_the_synth_of_the_deployed_app(tmp_path: Path) -> None:
    """build_app (what app.py runs) registers the packs: an unacknowledged finding stops the synth."""
    app, stack = build_app(cdk_json_context(), outdir=str(tmp_path))
    sqs.Queue(stack, "Unchecked", enforce_ssl=False)
    with pytest.raises(RuntimeError, match=r"ValidationFailed[\s\S]*AwsSolutions-SQS4"):
        app.synth()


def test_every_acknowledgement_carries_a_reason(default_stack: Synthesized) -> None:
    acknowledged = {}
    for construct in default_stack.stack.node.find_all():
        for entry in construct.node.metadata:
            if entry.type == cdk.Validations.ACKNOWLEDGED_RULES_METADATA_KEY:
                for rule, reason in dict(entry.data).items():
                    acknowledged[f"{construct.node.path} {rule}"] = reason
    assert acknowledged
    for where, reason in acknowledged.items():
        assert len(reason.split()) >= 8, f"{where}: the reason is too thin: {reason!r}"


@pytest.mark.parametrize("stack_name", ["default_stack", "extended_stack", "localstack_stack"])
def test_cfn_lint_passes(stack_name: str, request: pytest.FixtureRequest) -> None:
    stack: Synthesized = request.getfixturevalue(stack_name)
    matches = lint(
        json.dumps(stack.json),
        config=ManualArgs(regions=["us-east-1", "eu-central-1"], ignore_checks=CFN_LINT_IGNORED),
    )
    assert [str(match) for match in matches] == []


def test_outputs_name_the_api_table_queues_dashboard_and_topic(default_stack: Synthesized) -> None:
    outputs = default_stack.json["Outputs"]
    assert {"ApiUrl", "TableName", "DashboardUrl", "AlarmTopicArn"} <= set(outputs)
    for name in default_stack.registry.queues:
        assert f"Queue{name.title()}" in outputs and f"Dlq{name.title()}" in outputs
    assert "#dashboards:name=offpath" in json.dumps(outputs["DashboardUrl"])
