"""What every offpath function shares: one code asset, the Powertools layer, and a function construct with
its own role and log group.

The asset is `functions/` (the `offpath` package) plus the pure-Python `tzdata` package copied from the
environment that runs the synth. Bundling is local and copies files in Python: no Docker, no network.
"""

from __future__ import annotations

import importlib.util
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import aws_cdk as cdk
import jsii
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_ssm as ssm
from constructs import Construct

from infra.options import POWERTOOLS_LAYER_PARAMETER, StackOptions

FUNCTIONS_DIR = Path(__file__).resolve().parent.parent / "functions"
RUNTIME = lambda_.Runtime.PYTHON_3_14
ARCHITECTURE = lambda_.Architecture.ARM_64
IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", "*.pyo", ".mypy_cache", ".pytest_cache")


class BundlingError(RuntimeError):
    pass


def package_dir(name: str) -> Path:
    """Where an installed pure-Python package lives, or a clear error if it is not installed."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise BundlingError(f"package {name!r} is not installed in the environment running the synth (make venv)")
    return Path(next(iter(spec.submodule_search_locations)))


@jsii.implements(cdk.ILocalBundling)
class CopyIntoAsset:
    """Local bundling: copy the source folder's contents and each extra package into the asset."""

    def __init__(self, source: Path, packages: Sequence[str]) -> None:
        self.source = source
        self.packages = tuple(packages)

    def try_bundle(self, output_dir: str, *, image: cdk.DockerImage, **_options: object) -> bool:
        out = Path(output_dir)
        for entry in sorted(self.source.iterdir()):
            if entry.is_dir() and entry.name not in {"__pycache__", ".mypy_cache", ".pytest_cache"}:
                shutil.copytree(entry, out / entry.name, ignore=IGNORED, dirs_exist_ok=True)
            elif entry.is_file() and entry.suffix not in {".pyc", ".pyo"}:
                shutil.copy2(entry, out / entry.name)
        for name in self.packages:
            shutil.copytree(package_dir(name), out / name, ignore=IGNORED, dirs_exist_ok=True)
        return True


def function_code(source: Path = FUNCTIONS_DIR, packages: Sequence[str] = ("tzdata",)) -> lambda_.Code:
    # Checked now, so a missing package fails the synth before any asset is staged.
    for name in packages:
        package_dir(name)
    return lambda_.Code.from_asset(
        str(source),
        exclude=["**/__pycache__", "**/*.pyc"],
        bundling=cdk.BundlingOptions(
            # Required by the API, never used: local bundling always succeeds or raises.
            image=RUNTIME.bundling_image,
            local=CopyIntoAsset(source, packages),
        ),
    )


@jsii.implements(lambda_.IDestination)
class QueueDestination:
    """An SQS queue as an asynchronous invocation's destination. Unlike `SqsDestination`, it grants the
    function's role exactly what Lambda calls on the function's behalf: `sqs:SendMessage`."""

    def __init__(self, queue: sqs.IQueue) -> None:
        self.queue = queue

    def bind(
        self, scope: Construct, fn: lambda_.IFunction, *, type: lambda_.DestinationType
    ) -> lambda_.DestinationConfig:
        fn.add_to_role_policy(iam.PolicyStatement(actions=["sqs:SendMessage"], resources=[self.queue.queue_arn]))
        return lambda_.DestinationConfig(destination=self.queue.queue_arn)


@dataclass(frozen=True)
class FunctionKit:
    """Everything the constructs need to make a function: shared code, layer, options and environment."""

    code: lambda_.Code
    layers: tuple[lambda_.ILayerVersion, ...]
    options: StackOptions
    environment: Mapping[str, str]


def powertools_layer(scope: Construct, options: StackOptions) -> lambda_.ILayerVersion:
    """The public Powertools layer: pinned by context, else the latest for this runtime and architecture,
    read from AWS's public SSM parameter when CloudFormation deploys (not at synth)."""
    arn = options.powertools_layer_arn or ssm.StringParameter.value_for_string_parameter(
        scope, POWERTOOLS_LAYER_PARAMETER
    )
    return lambda_.LayerVersion.from_layer_version_arn(scope, "PowertoolsLayer", arn)


class ServiceFunction(Construct):
    """A function with its own role (no managed policies: grants are added per resource) and its own
    log group with retention. X-Ray tracing is active when the `tracing` option is on."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        kit: FunctionKit,
        name: str,
        handler: str,
        description: str,
        timeout: cdk.Duration,
        memory_mb: int,
        environment: Mapping[str, str] | None = None,
        async_retry_attempts: int | None = None,
        async_max_event_age: cdk.Duration | None = None,
        on_failure: lambda_.IDestination | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.function_name = name
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=f"{name}: only what this function calls",
        )
        self.log_group = logs.LogGroup(
            self,
            "Logs",
            log_group_name=f"/aws/lambda/{name}",
            retention=kit.options.log_retention,
            removal_policy=cdk.RemovalPolicy.DESTROY,
        )
        self.log_group.grant_write(self.role)
        self.function = lambda_.Function(
            self,
            "Function",
            function_name=name,
            description=description,
            code=kit.code,
            handler=handler,
            runtime=RUNTIME,
            architecture=ARCHITECTURE,
            layers=list(kit.layers),
            memory_size=memory_mb,
            timeout=timeout,
            role=self.role,
            log_group=self.log_group,
            tracing=lambda_.Tracing.ACTIVE if kit.options.tracing else lambda_.Tracing.DISABLED,
            environment={**kit.environment, **(environment or {})},
            retry_attempts=async_retry_attempts,
            max_event_age=async_max_event_age,
            on_failure=on_failure,
        )

    def grant(self, actions: Sequence[str], resources: Sequence[str]) -> None:
        self.role.add_to_principal_policy(iam.PolicyStatement(actions=list(actions), resources=list(resources)))
