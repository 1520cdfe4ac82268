"""Read a synthesized template the way the tests ask about it: intrinsics rendered as readable text."""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

Resources = dict[str, dict[str, Any]]


def render(value: Any) -> str:
    """`{"Ref": "X"}` -> `<X>`, `{"Fn::GetAtt": ["X", "Arn"]}` -> `<X.Arn>`, `Fn::Join` joined."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and len(value) == 1:
        ((key, arg),) = value.items()
        if key == "Ref":
            return f"<{arg}>"
        if key == "Fn::GetAtt":
            return f"<{arg[0]}.{arg[1]}>"
        if key == "Fn::Join":
            separator, parts = arg
            return separator.join(render(part) for part in parts)
    return json.dumps(value, sort_keys=True)


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def of_type(template: dict[str, Any], resource_type: str) -> Resources:
    return {lid: r for lid, r in template["Resources"].items() if r["Type"] == resource_type}


def functions_by_name(template: dict[str, Any]) -> dict[str, tuple[str, dict[str, Any]]]:
    """Function name -> (logical id, properties)."""
    return {
        r["Properties"]["FunctionName"]: (lid, r["Properties"])
        for lid, r in of_type(template, "AWS::Lambda::Function").items()
    }


def queues_by_name(template: dict[str, Any]) -> dict[str, tuple[str, dict[str, Any]]]:
    return {
        r["Properties"]["QueueName"]: (lid, r["Properties"]) for lid, r in of_type(template, "AWS::SQS::Queue").items()
    }


def role_of(function_properties: dict[str, Any]) -> str:
    return str(function_properties["Role"]["Fn::GetAtt"][0])


def statements_of_role(template: dict[str, Any], role: str) -> list[dict[str, Any]]:
    statements: list[dict[str, Any]] = []
    for policy in of_type(template, "AWS::IAM::Policy").values():
        if {"Ref": role} in policy["Properties"]["Roles"]:
            statements.extend(policy["Properties"]["PolicyDocument"]["Statement"])
    for policy in of_type(template, "AWS::IAM::ManagedPolicy").values():
        if {"Ref": role} in policy["Properties"].get("Roles", []):
            statements.extend(policy["Properties"]["PolicyDocument"]["Statement"])
    return statements


def grants_of_role(template: dict[str, Any], role: str) -> dict[str, set[str]]:
    """Action -> the resources it is allowed on (rendered)."""
    grants: dict[str, set[str]] = defaultdict(set)
    for statement in statements_of_role(template, role):
        assert statement["Effect"] == "Allow"
        for action in as_list(statement["Action"]):
            grants[action].update(render(resource) for resource in as_list(statement["Resource"]))
    return dict(grants)


def alarms_by_name(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["Properties"]["AlarmName"]: r["Properties"] for r in of_type(template, "AWS::CloudWatch::Alarm").values()}


def dimensions(alarm: dict[str, Any]) -> dict[str, str]:
    return {d["Name"]: render(d["Value"]) for d in alarm.get("Dimensions", [])}
