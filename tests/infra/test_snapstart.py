"""`-c snapstart=true`: every function publishes a version with SnapStart, and every trigger invokes its alias."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from infra.lambda_function import LIVE_ALIAS
from infra.options import OptionsError, StackOptions
from tests.infra.stacks import Synthesized, cdk_json_context, synthesize
from tests.infra.template_view import functions_by_name, of_type, render


@pytest.fixture(scope="module")
def snapstart_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Synthesized]:
    yield synthesize(tmp_path_factory.mktemp("cdk-snapstart"), {**cdk_json_context(), "snapstart": "true"}, None)


def test_without_the_option_there_is_no_version_alias_or_snapstart(default_stack: Synthesized) -> None:
    template = default_stack.json
    assert of_type(template, "AWS::Lambda::Version") == {}
    assert of_type(template, "AWS::Lambda::Alias") == {}
    for _, function in functions_by_name(template).values():
        assert "SnapStart" not in function


def test_with_the_option_every_function_has_snapstart_a_version_and_a_live_alias(snapstart_stack: Synthesized) -> None:
    template = snapstart_stack.json
    functions = functions_by_name(template)
    for _, function in functions.values():
        assert function["SnapStart"] == {"ApplyOn": "PublishedVersions"}
    versions = of_type(template, "AWS::Lambda::Version")
    aliases = of_type(template, "AWS::Lambda::Alias")
    ids = {lid for lid, _ in functions.values()}
    assert {render(v["Properties"]["FunctionName"]) for v in versions.values()} == {f"<{lid}>" for lid in ids}
    assert {render(a["Properties"]["FunctionName"]) for a in aliases.values()} == {f"<{lid}>" for lid in ids}
    assert {a["Properties"]["Name"] for a in aliases.values()} == {LIVE_ALIAS}
    for alias in aliases.values():
        assert render(alias["Properties"]["FunctionVersion"]).startswith("<") and ".Version>" in render(
            alias["Properties"]["FunctionVersion"]
        )


def test_with_the_option_every_trigger_invokes_the_alias(snapstart_stack: Synthesized) -> None:
    template = snapstart_stack.json
    aliases = set(of_type(template, "AWS::Lambda::Alias"))

    def names_an_alias(value: object) -> bool:
        text = json.dumps(value)
        return any(f'"Ref": "{lid}"' in text for lid in aliases) and 'Function"' not in text

    mappings = of_type(template, "AWS::Lambda::EventSourceMapping")
    assert mappings
    for mapping in mappings.values():
        assert names_an_alias(mapping["Properties"]["FunctionName"])
    integrations = of_type(template, "AWS::ApiGatewayV2::Integration")
    assert integrations
    for integration in integrations.values():
        assert names_an_alias(integration["Properties"]["IntegrationUri"])
    schedules = of_type(template, "AWS::Scheduler::Schedule")
    assert schedules
    for schedule in schedules.values():
        assert names_an_alias(schedule["Properties"]["Target"]["Arn"])
    api = functions_by_name(template)["offpath-api"][1]
    assert render(api["Environment"]["Variables"]["OFFPATH_ENQUEUE_FUNCTION_ARN"]).endswith(
        f":function:offpath-enqueue:{LIVE_ALIAS}"
    )


def test_snapstart_is_refused_on_localstack() -> None:
    with pytest.raises(OptionsError, match="snapstart"):
        StackOptions(target="localstack", snapstart=True)
