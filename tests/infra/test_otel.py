"""`-c otel=true`: OpenTelemetry through the ADOT Python layer on every function (pinned, per region from a
mapping, or the ARN the user gives), its exec wrapper, and active tracing; off by default."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest

from infra.lambda_function import OTEL_WRAPPER
from infra.options import OptionsError, StackOptions
from tests.infra.stacks import Synthesized, cdk_json_context, synthesize
from tests.infra.template_view import functions_by_name

GIVEN_ARN = "arn:aws:lambda:eu-west-1:901920570463:layer:aws-otel-python-arm64-ver-1-29-0:2"


@pytest.fixture(scope="module")
def otel_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Synthesized]:
    yield synthesize(tmp_path_factory.mktemp("cdk-otel"), {**cdk_json_context(), "otel": "true"}, None)


@pytest.fixture(scope="module")
def given_layer_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Synthesized]:
    context = {**cdk_json_context(), "otel": "true", "otel_layer_arn": GIVEN_ARN}
    yield synthesize(tmp_path_factory.mktemp("cdk-otel-arn"), context, None)


def test_by_default_no_function_has_a_layer_the_wrapper_or_tracing(default_stack: Synthesized) -> None:
    for name, (_, function) in functions_by_name(default_stack.json).items():
        assert "Layers" not in function, name
        assert "AWS_LAMBDA_EXEC_WRAPPER" not in function["Environment"]["Variables"], name
        assert function.get("TracingConfig", {"Mode": "PassThrough"}) == {"Mode": "PassThrough"}, name


def test_with_otel_every_function_runs_the_pinned_adot_layer_for_its_region_wrapped_and_traced(
    otel_stack: Synthesized,
) -> None:
    template = otel_stack.json
    functions = functions_by_name(template)
    assert len(functions) == len(otel_stack.stack.functions)
    for name, (_, function) in functions.items():
        (layer,) = function["Layers"]
        assert function["Environment"]["Variables"]["AWS_LAMBDA_EXEC_WRAPPER"] == OTEL_WRAPPER == "/opt/otel-instrument"
        assert function["TracingConfig"] == {"Mode": "Active"}, name
        # The ARN for the stack's region from a mapping in the template: nothing is looked up at deploy time.
        mapping_name, key, attribute = layer["Fn::FindInMap"]
        assert key == {"Ref": "AWS::Region"}
        arns = template["Mappings"][mapping_name]
        assert arns["us-east-1"][attribute].startswith("arn:aws:lambda:us-east-1:901920570463:layer:aws-otel-python-")
        assert len(arns) >= 10
        for region, arn in arns.items():
            assert re.fullmatch(
                rf"arn:aws[a-z-]*:lambda:{region}:\d{{12}}:layer:aws-otel-python-arm64-ver-1-29-0:\d+", arn[attribute]
            ), region
        assert "latest" not in json.dumps(arns).lower()


def test_a_layer_arn_given_in_the_context_replaces_the_mapping(given_layer_stack: Synthesized) -> None:
    for name, (_, function) in functions_by_name(given_layer_stack.json).items():
        assert function["Layers"] == [GIVEN_ARN], name
        assert function["TracingConfig"] == {"Mode": "Active"}, name


@pytest.mark.parametrize(
    ("context", "named"),
    [
        (
            {"otel": "true", "otel_layer_arn": "arn:aws:lambda:eu-west-1:901920570463:layer:aws-otel-python"},
            "otel_layer_arn",
        ),
        ({"otel_layer_arn": GIVEN_ARN}, "otel_layer_arn"),
        ({"otel": "true", "target": "localstack"}, "otel"),
    ],
)
def test_a_layer_arn_without_its_version_or_without_otel_is_refused(context: dict[str, str], named: str) -> None:
    with pytest.raises(OptionsError, match=named):
        StackOptions.from_context(context.get)
