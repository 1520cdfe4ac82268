"""localstack/docker-compose.yml: valid (Debian's docker-compose 1.29 checks it without a daemon), the image
pinned to a release, the auth token read from the environment and written nowhere, Lambda's Docker socket,
and every AWS service the LocalStack template uses."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from typing import Any

import pytest
import yaml

from tests.infra.stacks import ROOT, Synthesized

COMPOSE_FILE = ROOT / "localstack" / "docker-compose.yml"
# CloudFormation resource namespaces -> LocalStack service names (the HTTP API is part of apigateway).
SERVICES_OF = {
    "Lambda": "lambda",
    "SQS": "sqs",
    "DynamoDB": "dynamodb",
    "ApiGatewayV2": "apigateway",
    "Scheduler": "scheduler",
    "CloudWatch": "cloudwatch",
    "SNS": "sns",
    "Logs": "logs",
    "IAM": "iam",
    "KMS": "kms",
}
# What cdklocal bootstrap and deploy need besides the stack's own services.
DEPLOYMENT_SERVICES = {"cloudformation", "s3", "ecr", "ssm", "sts"}


def compose_config(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    command = shutil.which("docker-compose")
    assert command, "docker-compose is not installed: `make compose-deps` installs Debian's (make test does)"
    return subprocess.run(
        [command, "-f", str(COMPOSE_FILE), "config"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=COMPOSE_FILE.parent,
    )


@pytest.fixture(scope="module")
def config() -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOCALSTACK_")}
    done = compose_config({**env, "LOCALSTACK_AUTH_TOKEN": "token-from-the-shell"})
    assert done.returncode == 0, done.stderr
    parsed: dict[str, Any] = yaml.safe_load(done.stdout)
    return parsed["services"]["localstack"]  # type: ignore[no-any-return]


def test_the_compose_file_validates_and_pins_a_release_image(config: dict[str, Any]) -> None:
    image = config["image"]

    assert re.fullmatch(r"localstack/localstack:\d{4}\.\d{2}\.\d+", image), image


def test_the_auth_token_comes_from_the_environment_and_is_written_nowhere(config: dict[str, Any]) -> None:
    assert config["environment"]["LOCALSTACK_AUTH_TOKEN"] == "token-from-the-shell"
    assert re.search(r"LOCALSTACK_AUTH_TOKEN: \$\{LOCALSTACK_AUTH_TOKEN:\?", COMPOSE_FILE.read_text())


def test_without_a_token_the_compose_file_refuses_to_start() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOCALSTACK_")}

    done = compose_config(env)

    assert done.returncode != 0
    assert "set LOCALSTACK_AUTH_TOKEN" in done.stderr


def test_lambda_gets_the_docker_socket_and_ports_stay_on_loopback(config: dict[str, Any]) -> None:
    assert any(v.startswith("/var/run/docker.sock:/var/run/docker.sock") for v in config["volumes"])
    assert all(str(port).startswith("127.0.0.1:") for port in config["ports"])


def test_every_service_the_localstack_template_uses_is_started(
    config: dict[str, Any], localstack_stack: Synthesized
) -> None:
    started = set(config["environment"]["SERVICES"].split(","))
    used = {
        SERVICES_OF[resource["Type"].split("::")[1]]
        for resource in localstack_stack.json["Resources"].values()
        if resource["Type"].startswith("AWS::")
    }

    assert used
    assert used | DEPLOYMENT_SERVICES <= started
