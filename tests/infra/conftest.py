"""One synthesized app per registry for the whole session: jsii and a synth cost seconds each."""

from __future__ import annotations

import os
from collections.abc import Iterator

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

import pytest

from tests.infra.stacks import EXTENDED_CONTEXT, Synthesized, cdk_json_context, extended_registry, synthesize


@pytest.fixture(scope="session")
def default_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Synthesized]:
    yield synthesize(tmp_path_factory.mktemp("cdk-default"), cdk_json_context(), None)


@pytest.fixture(scope="session")
def extended_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Synthesized]:
    context = {**cdk_json_context(), **EXTENDED_CONTEXT}
    yield synthesize(tmp_path_factory.mktemp("cdk-extended"), context, extended_registry())


@pytest.fixture(scope="session")
def localstack_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Synthesized]:
    """`make synth CDK_ARGS="-c target=localstack"`."""
    context = {**cdk_json_context(), "target": "localstack"}
    yield synthesize(tmp_path_factory.mktemp("cdk-localstack"), context, None)


@pytest.fixture(scope="session", params=["default", "extended", "localstack"])
def any_stack(request: pytest.FixtureRequest) -> Synthesized:
    synthesized: Synthesized = request.getfixturevalue(f"{request.param}_stack")
    return synthesized
