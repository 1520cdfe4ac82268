"""The stack's roles against the functions' recorded AWS calls (docs/aws_calls.json): `make iam-check` on the
template `make deploy` would deploy."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from offpath_tools import iam_calls
from offpath_tools.iam_check import check, load_allowlist, main
from tests.infra.stacks import Synthesized


def policy_of(template: dict[str, Any], role_description: str) -> dict[str, Any]:
    """The default policy of the role whose description starts with `role_description`."""
    resources = template["Resources"]
    role = next(
        logical
        for logical, r in resources.items()
        if r["Type"] == "AWS::IAM::Role" and str(r["Properties"].get("Description", "")).startswith(role_description)
    )
    return next(
        r["Properties"]["PolicyDocument"]
        for r in resources.values()
        if r["Type"] == "AWS::IAM::Policy" and {"Ref": role} in r["Properties"]["Roles"]
    )


def test_every_recorded_call_is_granted_and_every_grant_is_used_or_explained(default_stack: Synthesized) -> None:
    report = check(default_stack.json, iam_calls.load(), load_allowlist())

    assert report.missing == []
    assert report.unused == []
    # The default stack sends no events to a bus (`-c event_bus=...`): the notifier's PutEvents is not its call.
    assert report.notes == ["not in this stack (bus:events): notifier: events:PutEvents on bus:events"]
    # Every function of the stack is proven against calls of its own.
    assert sorted(report.counts) == [
        "api",
        "delivery",
        "enqueue",
        "notifier",
        "read",
        "sweeper",
        "worker-bulk",
        "worker-critical",
        "worker-default",
    ]


@pytest.mark.parametrize(
    ("role", "action", "principal"),
    [
        ("offpath-api:", "scheduler:CreateSchedule", "api"),
        ("offpath-worker-default:", "dynamodb:UpdateItem", "worker-default"),
        ("offpath-notifier:", "dynamodb:GetRecords", "notifier"),
        ("EventBridge Scheduler invokes the enqueue function", "lambda:InvokeFunction", "role:SchedulesSchedulerRole"),
    ],
)
def test_a_statement_removed_by_hand_from_a_copy_of_the_template_fails_the_check(
    default_stack: Synthesized,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    role: str,
    action: str,
    principal: str,
) -> None:
    template = copy.deepcopy(default_stack.json)
    statements = policy_of(template, role)["Statement"]
    removed = next(s for s in statements if action in (s["Action"] if isinstance(s["Action"], list) else [s["Action"]]))
    statements.remove(removed)
    (tmp_path / "Offpath.template.json").write_text(json.dumps(template))

    code = main(["--template", str(tmp_path / "Offpath.template.json")])

    assert code == 1
    assert f"MISSING GRANT {principal}: {action} on " in capsys.readouterr().err


def test_the_extended_stack_passes_too(extended_stack: Synthesized) -> None:
    """Its own prefix, a fourth queue class, an event bus, tracing, realtime, quotas."""
    report = check(extended_stack.json, iam_calls.load(), load_allowlist())

    assert report.missing == []
    assert report.unused == []
