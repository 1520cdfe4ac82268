"""What every offpath function shares: one code asset, the Powertools layer, and a function construct with
its own role and log group.

The asset is `functions/` (the `offpath` package) plus the pure-Python `tzdata` package and the distributions
of `ASSET_DISTRIBUTIONS` (standardwebhooks), copied from the environment that runs the synth. Bundling is local
and copies files in Python: no Docker, no network.

For target `localstack` the asset also carries what the layer brings on AWS (`LAYER_DISTRIBUTIONS`: pydantic
and, from its metadata, its dependencies), copied from the synth's environment, and the functions run on
that environment's Python and this machine's architecture, so its compiled packages (pydantic_core) load.
Where the synth runs on something other than glibc Linux (macOS), the compiled distributions are fetched
instead with pip, as manylinux wheels of the same versions for that Python and architecture.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import platform
import re
import shutil
import subprocess
import sys
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
from offpath.naming import FUNCTION_ENVIRONMENT

# The alias every trigger invokes when the stack runs with SnapStart (`-c snapstart=true`).
LIVE_ALIAS = "live"
FUNCTIONS_DIR = Path(__file__).resolve().parent.parent / "functions"
RUNTIME = lambda_.Runtime.PYTHON_3_14
ARCHITECTURE = lambda_.Architecture.ARM_64
# What the functions import that the Lambda runtime lacks (it has boto3) and the Powertools layer provides.
# Nothing in functions/ imports aws_lambda_powertools itself, so the layer is there for pydantic alone.
LAYER_DISTRIBUTIONS = ("pydantic",)
# What the functions import that neither the runtime nor the layer has: the notifier and the delivery
# function sign webhooks with standardwebhooks (pure Python, no dependencies), carried in the asset itself.
ASSET_DISTRIBUTIONS = ("standardwebhooks",)
COMPILED_SUFFIXES = (".so", ".pyd", ".dylib")
MACHINE_ARCHITECTURES = {
    "x86_64": ("x86_64", lambda_.Architecture.X86_64),
    "amd64": ("x86_64", lambda_.Architecture.X86_64),
    "aarch64": ("aarch64", lambda_.Architecture.ARM_64),
    "arm64": ("aarch64", lambda_.Architecture.ARM_64),
}
IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", "*.pyo", ".mypy_cache", ".pytest_cache")


class BundlingError(RuntimeError):
    pass


def package_dir(name: str) -> Path:
    """Where an installed pure-Python package lives, or a clear error if it is not installed."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise BundlingError(f"package {name!r} is not installed in the environment running the synth (make venv)")
    return Path(next(iter(spec.submodule_search_locations)))


def with_dependencies(names: Sequence[str]) -> list[importlib.metadata.Distribution]:
    """The installed distributions named and every one they require (extras left out), each once."""
    found: dict[str, importlib.metadata.Distribution] = {}
    pending = list(names)
    while pending:
        name = _normalized(pending.pop())
        if name in found:
            continue
        try:
            found[name] = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            raise BundlingError(
                f"distribution {name!r} is not installed in the environment running the synth"
            ) from None
        for requirement in found[name].requires or []:
            if "extra" not in requirement.partition(";")[2]:  # an optional extra's requirement is left out
                pending.append(re.split(r"[\s;<>=!~\[(]", requirement.strip(), maxsplit=1)[0])
    return [found[name] for name in sorted(found)]


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _files(distribution: importlib.metadata.Distribution) -> list[Path]:
    """A distribution's installed files under its site-packages (scripts and bytecode left out)."""
    return [
        Path(str(file))
        for file in distribution.files or []
        if not str(file).startswith("..") and "__pycache__" not in file.parts and file.suffix not in {".pyc", ".pyo"}
    ]


def is_compiled(distribution: importlib.metadata.Distribution) -> bool:
    return any(file.suffix in COMPILED_SUFFIXES for file in _files(distribution))


@dataclass(frozen=True)
class Platform:
    """The Python and architecture the functions run on, which compiled packages must be built for."""

    python: str  # "3.11"
    machine: str  # "x86_64" or "aarch64": manylinux wheel platform names
    runtime: lambda_.Runtime
    architecture: lambda_.Architecture

    @property
    def matches_synth(self) -> bool:
        """Whether the synth's own compiled packages load there: glibc Linux, same Python and machine."""
        return (
            sys.platform == "linux"
            and platform.libc_ver()[0] == "glibc"
            and self.python == f"{sys.version_info.major}.{sys.version_info.minor}"
            and MACHINE_ARCHITECTURES.get(platform.machine().lower(), ("",))[0] == self.machine
        )


def synth_platform() -> Platform:
    """This interpreter's Python and this machine's architecture, as a Lambda runtime and architecture."""
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    runtime = getattr(lambda_.Runtime, f"PYTHON_{sys.version_info.major}_{sys.version_info.minor}", None)
    machine = MACHINE_ARCHITECTURES.get(platform.machine().lower())
    if runtime is None or machine is None:
        raise BundlingError(
            f"target localstack runs the functions on the synth's Python and architecture; Lambda has no "
            f"runtime for Python {python} on {platform.machine()}"
        )
    return Platform(python, machine[0], runtime, machine[1])


def wheel_install_command(distribution: importlib.metadata.Distribution, target: Platform, out: Path) -> list[str]:
    """pip installing the same version of a compiled distribution as a manylinux wheel for the functions'
    Python and architecture (no dependencies: each is installed on its own)."""
    return [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--quiet",
        "--no-deps",
        "--only-binary=:all:",
        "--platform",
        f"manylinux2014_{target.machine}",
        "--implementation",
        "cp",
        "--python-version",
        target.python,
        "--target",
        str(out),
        f"{distribution.metadata['Name']}=={distribution.version}",
    ]


@jsii.implements(cdk.ILocalBundling)
class CopyIntoAsset:
    """Local bundling: copy the source folder's contents, each extra package and each distribution (its
    installed files, metadata included) into the asset. A compiled distribution that would not load on
    `target` is installed from its wheel instead."""

    def __init__(
        self,
        source: Path,
        packages: Sequence[str],
        distributions: Sequence[importlib.metadata.Distribution] = (),
        target: Platform | None = None,
    ) -> None:
        self.source = source
        self.packages = tuple(packages)
        self.distributions = tuple(distributions)
        self.target = target

    def try_bundle(self, output_dir: str, *, image: cdk.DockerImage, **_options: object) -> bool:
        out = Path(output_dir)
        for entry in sorted(self.source.iterdir()):
            if entry.is_dir() and entry.name not in {"__pycache__", ".mypy_cache", ".pytest_cache"}:
                shutil.copytree(entry, out / entry.name, ignore=IGNORED, dirs_exist_ok=True)
            elif entry.is_file() and entry.suffix not in {".pyc", ".pyo"}:
                shutil.copy2(entry, out / entry.name)
        for name in self.packages:
            shutil.copytree(package_dir(name), out / name, ignore=IGNORED, dirs_exist_ok=True)
        for distribution in self.distributions:
            if self.target is not None and is_compiled(distribution) and not self.target.matches_synth:
                subprocess.run(wheel_install_command(distribution, self.target, out), check=True)
                continue
            root = Path(str(distribution.locate_file("")))
            for file in _files(distribution):
                (out / file).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(root / file, out / file)
        return True


def function_code(
    source: Path = FUNCTIONS_DIR,
    packages: Sequence[str] = ("tzdata",),
    distributions: Sequence[str] = (),
    target: Platform | None = None,
) -> lambda_.Code:
    # Checked now, so a missing package fails the synth before any asset is staged.
    for name in packages:
        package_dir(name)
    found = with_dependencies(distributions) if distributions else []
    return lambda_.Code.from_asset(
        str(source),
        exclude=["**/__pycache__", "**/*.pyc"],
        bundling=cdk.BundlingOptions(
            # Required by the API, never used: local bundling always succeeds or raises.
            image=(target.runtime if target else RUNTIME).bundling_image,
            local=CopyIntoAsset(source, packages, found, target),
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
    runtime: lambda_.Runtime = RUNTIME
    architecture: lambda_.Architecture = ARCHITECTURE


def function_kit(scope: Construct, options: StackOptions, environment: Mapping[str, str]) -> FunctionKit:
    """AWS: the asset and the Powertools layer, Python 3.14 on arm64. LocalStack: the asset carries the
    layer's distributions itself and runs on the synth's Python and architecture; no layer, no SSM."""
    if options.localstack:
        target = synth_platform()
        return FunctionKit(
            code=function_code(distributions=LAYER_DISTRIBUTIONS + ASSET_DISTRIBUTIONS, target=target),
            layers=(),
            options=options,
            environment=environment,
            runtime=target.runtime,
            architecture=target.architecture,
        )
    return FunctionKit(
        code=function_code(distributions=ASSET_DISTRIBUTIONS),
        layers=(powertools_layer(scope, options),),
        options=options,
        environment=environment,
    )


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
            runtime=kit.runtime,
            architecture=kit.architecture,
            layers=list(kit.layers),
            memory_size=memory_mb,
            timeout=timeout,
            role=self.role,
            log_group=self.log_group,
            tracing=lambda_.Tracing.ACTIVE if kit.options.tracing else lambda_.Tracing.DISABLED,
            environment={**FUNCTION_ENVIRONMENT, **kit.environment, **(environment or {})},
            # Lambda's advanced logging controls: JSON, and no START/END/REPORT lines (system logs at INFO,
            # ~340 bytes an invocation); the platform's warnings and errors (timeouts, crashes) are kept.
            # Lambda filters application lines at INFO only: an EMF line has no "level", counts as INFO,
            # and must reach CloudWatch. The functions' own level is OFFPATH_LOG_LEVEL.
            logging_format=lambda_.LoggingFormat.JSON,
            system_log_level_v2=lambda_.SystemLogLevel.WARN,
            application_log_level_v2=lambda_.ApplicationLogLevel.INFO,
            snap_start=lambda_.SnapStartConf.ON_PUBLISHED_VERSIONS if kit.options.snapstart else None,
            retry_attempts=async_retry_attempts,
            max_event_age=async_max_event_age,
            on_failure=on_failure,
        )

        # What triggers the function (API integration, event source mapping, schedules) invokes `target`: with
        # SnapStart, the alias of the version published from this code and configuration (a snapshot exists for
        # published versions only); otherwise the function itself.
        self.target: lambda_.IFunction = self.function
        if kit.options.snapstart:
            self.alias = lambda_.Alias(
                self,
                "Live",
                alias_name=LIVE_ALIAS,
                version=self.function.current_version,
                retry_attempts=async_retry_attempts,
                max_event_age=async_max_event_age,
                on_failure=on_failure,
            )
            self.target = self.alias

    def grant(self, actions: Sequence[str], resources: Sequence[str]) -> None:
        self.role.add_to_principal_policy(iam.PolicyStatement(actions=list(actions), resources=list(resources)))
