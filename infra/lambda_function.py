"""What every offpath function shares: one code asset, its runtime, and a function construct with its own
role and log group.

The asset is `functions/` (the `offpath` package) plus the distributions pinned in
infra/lambda-requirements.txt (pydantic and its dependencies, standardwebhooks, tzdata), installed from their
wheels for the functions' Python and architecture: on AWS Python 3.13 on arm64 (cp313, manylinux2014
aarch64), for target `localstack` Python 3.13 on this machine's architecture. The Lambda runtime brings boto3;
there is no layer. Every module is compiled to bytecode by a Python 3.13 interpreter, as unchecked-hash `.pyc`
files in the asset's `__pycache__` directories: /var/task is read-only, so without them every cold start would
compile the asset again.

Bundling is local Python code: no Docker. The wheels are fetched with pip once into build/lambda-wheels/ (one
directory per platform, `make lambda-wheels`), and every later synth installs them from there, offline.
"""

from __future__ import annotations

import functools
import glob
import hashlib
import os
import platform
import re
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import aws_cdk as cdk
import jsii
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.options import StackOptions
from offpath.naming import FUNCTION_ENVIRONMENT

# The alias every trigger invokes when the stack runs with SnapStart (`-c snapstart=true`).
LIVE_ALIAS = "live"
ROOT = Path(__file__).resolve().parent.parent
FUNCTIONS_DIR = ROOT / "functions"
# The functions' Python: the one `make test` also runs the functions' tests on (docs/decisions.md).
PYTHON = "3.13"
RUNTIME = lambda_.Runtime.PYTHON_3_13
ARCHITECTURE = lambda_.Architecture.ARM_64
REQUIREMENTS = Path(__file__).resolve().parent / "lambda-requirements.txt"
WHEEL_CACHE = ROOT / "build" / "lambda-wheels"
ASSET_CACHE = ROOT / "build" / "lambda-asset"
# Where the asset lives in Lambda: the compiled modules name their source files there (tracebacks).
TASK_ROOT = "/var/task"
# The tests' Python 3.13 environment (make test-lambda-python); OFFPATH_LAMBDA_PYTHON names another interpreter.
TEST_VENV_PYTHON = ROOT / ".venv" / "lambda-python" / "bin" / "python"
MACHINE_ARCHITECTURES = {
    "x86_64": ("x86_64", lambda_.Architecture.X86_64),
    "amd64": ("x86_64", lambda_.Architecture.X86_64),
    "aarch64": ("aarch64", lambda_.Architecture.ARM_64),
    "arm64": ("aarch64", lambda_.Architecture.ARM_64),
}
IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", "*.pyo", ".mypy_cache", ".pytest_cache")


class BundlingError(RuntimeError):
    pass


@dataclass(frozen=True)
class Platform:
    """The Python and architecture the functions run on, which the wheels and the bytecode are made for."""

    python: str  # "3.13"
    machine: str  # "x86_64" or "aarch64": manylinux wheel platform names
    runtime: lambda_.Runtime
    architecture: lambda_.Architecture

    @property
    def wheel_dir(self) -> Path:
        return WHEEL_CACHE / f"cp{self.python.replace('.', '')}-manylinux2014_{self.machine}"


AWS_PLATFORM = Platform(PYTHON, "aarch64", RUNTIME, ARCHITECTURE)


def host_platform() -> Platform:
    """The functions' Python on this machine's architecture: target localstack and the cold-start benchmark."""
    machine = MACHINE_ARCHITECTURES.get(platform.machine().lower())
    if machine is None:
        raise BundlingError(f"Lambda has no architecture for this machine ({platform.machine()})")
    return Platform(PYTHON, machine[0], RUNTIME, machine[1])


def pinned_requirements() -> list[tuple[str, str]]:
    """infra/lambda-requirements.txt as (name, version) pairs; every line must pin one exact version."""
    pins = []
    for line in REQUIREMENTS.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        match = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)==([A-Za-z0-9.+!-]+)", line)
        if match is None:
            raise BundlingError(f"{REQUIREMENTS.name}: {line!r} does not pin one version (name==version)")
        pins.append((match[1], match[2]))
    return pins


def wheel_name(name: str) -> str:
    """A distribution's name as wheel file names spell it (PEP 427 escaping)."""
    return re.sub(r"[-_.]+", "_", name).lower()


def wheel_download_command(target: Platform) -> list[str]:
    """pip fetching the pinned wheels (no dependencies: the file pins them all) for `target`, into its cache."""
    return [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--quiet",
        "--no-deps",
        "--only-binary=:all:",
        "--platform",
        f"manylinux2014_{target.machine}",
        "--implementation",
        "cp",
        "--python-version",
        target.python,
        "--dest",
        str(target.wheel_dir),
        "--requirement",
        str(REQUIREMENTS),
    ]


def _cached_wheels(target: Platform) -> tuple[list[Path], list[str]]:
    found, missing = [], []
    for name, version in pinned_requirements():
        matches = sorted(target.wheel_dir.glob(f"{wheel_name(name)}-{version}-*.whl"))
        if matches:
            found.append(matches[0])
        else:
            missing.append(f"{name}=={version}")
    return found, missing


def pinned_wheels(target: Platform) -> list[Path]:
    """The pinned wheels for `target`, from the cache; what is missing there is fetched once with pip."""
    found, missing = _cached_wheels(target)
    if missing:
        target.wheel_dir.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(wheel_download_command(target), check=False, capture_output=True, text=True)
        found, missing = _cached_wheels(target)
        if done.returncode != 0 or missing:
            raise BundlingError(
                f"the wheels of {', '.join(missing) or 'the pinned distributions'} for Python {target.python} on "
                f"{target.machine} are not in {target.wheel_dir} and pip could not fetch them (make lambda-wheels):"
                f"\n{done.stderr[-2000:]}"
            )
    return found


def install_wheel(wheel: Path, out: Path) -> None:
    """Unpack a wheel into the asset's root, as `pip install --target` lays it out (its .dist-info included,
    its scripts and data files left out)."""
    data = re.compile(r"^[^/]+\.data/(purelib|platlib)/")
    with zipfile.ZipFile(wheel) as archive:
        for member in archive.infolist():
            name = member.filename
            if data.match(name):
                name = data.sub("", name)
            elif re.match(r"^[^/]+\.data/", name):
                continue
            if member.is_dir() or not name:
                continue
            path = out / name
            if out.resolve() not in path.resolve().parents:
                raise BundlingError(f"{wheel.name}: {member.filename!r} lies outside the asset")
            path.parent.mkdir(parents=True, exist_ok=True)
            with archive.open(member) as source, path.open("wb") as sink:
                shutil.copyfileobj(source, sink)


def _python_version(executable: str) -> str | None:
    try:
        done = subprocess.run(
            [executable, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except OSError:
        return None
    return done.stdout.strip() if done.returncode == 0 else None


@functools.cache
def lambda_python() -> str:
    """A Python 3.13 interpreter, the functions' Python, which compiles the asset's bytecode: OFFPATH_LAMBDA_PYTHON,
    else the tests' environment (.venv/lambda-python), else pyenv's 3.13, else `python3.13` on the PATH."""
    candidates = [os.environ.get("OFFPATH_LAMBDA_PYTHON", ""), str(TEST_VENV_PYTHON)]
    pyenv_root = os.environ.get("PYENV_ROOT", str(Path.home() / ".pyenv"))
    candidates += sorted(glob.glob(f"{pyenv_root}/versions/{PYTHON}*/bin/python{PYTHON}"), reverse=True)
    candidates.append(shutil.which(f"python{PYTHON}") or "")
    for candidate in candidates:
        if candidate and Path(candidate).is_file() and _python_version(candidate) == PYTHON:
            return candidate
    raise BundlingError(
        f"no Python {PYTHON} interpreter found (the functions run on it and their bytecode is compiled by it): "
        f"install it (`pyenv install {PYTHON}`, or your system's python{PYTHON} package) or name one in "
        "OFFPATH_LAMBDA_PYTHON"
    )


def compile_bytecode(out: Path, python: str) -> None:
    """Every module of the asset as an unchecked-hash .pyc for `python` (never checked against its source:
    the asset's files do not change), naming its source under /var/task."""
    options = ["-q", "-j", "0", "--invalidation-mode", "unchecked-hash", "-s", str(out), "-p", TASK_ROOT]
    subprocess.run([python, "-m", "compileall", *options, str(out)], check=True)


@jsii.implements(cdk.ILocalBundling)
class CopyIntoAsset:
    """Local bundling: the source folder's contents and the pinned wheels for `target`, then bytecode."""

    def __init__(self, source: Path, target: Platform) -> None:
        self.source = source
        self.target = target

    def try_bundle(self, output_dir: str, *, image: cdk.DockerImage, **_options: object) -> bool:
        bundle(self.source, self.target, Path(output_dir))
        return True


def _inputs_digest(source: Path, target: Platform) -> str:
    """What goes into an asset: the functions' files, the pins, the platform and the compiling interpreter."""
    digest = hashlib.sha256(f"{target.python} {target.machine} {lambda_python()}\n".encode())
    digest.update(REQUIREMENTS.read_bytes())
    for path in sorted(source.rglob("*")):
        skipped = {"__pycache__", ".mypy_cache", ".pytest_cache"} & set(path.parts) or path.suffix in {".pyc", ".pyo"}
        if path.is_file() and not skipped:
            digest.update(f"\0{path.relative_to(source).as_posix()}\0".encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:20]


def bundle(source: Path, target: Platform, out: Path) -> None:
    """The asset's contents in `out` (the cold-start benchmark builds one for this machine with it too). The
    last assets made for each platform are kept in build/lambda-asset: a synth of the same inputs (the tests make
    several) copies one instead of compiling it again."""
    cached = ASSET_CACHE / f"{target.machine}-{_inputs_digest(source, target)}"
    if cached.is_dir():
        try:
            shutil.copytree(cached, out, dirs_exist_ok=True)
            return
        except OSError:  # removed meanwhile by a synth of other inputs: made again below
            pass
    wheels = pinned_wheels(target)
    for entry in sorted(source.iterdir()):
        if entry.is_dir() and entry.name not in {"__pycache__", ".mypy_cache", ".pytest_cache"}:
            shutil.copytree(entry, out / entry.name, ignore=IGNORED, dirs_exist_ok=True)
        elif entry.is_file() and entry.suffix not in {".pyc", ".pyo"}:
            shutil.copy2(entry, out / entry.name)
    for wheel in wheels:
        install_wheel(wheel, out)
    compile_bytecode(out, lambda_python())
    _keep(out, cached)


def _keep(out: Path, cached: Path) -> None:
    """A copy of `out` as `cached`, moved into place whole (a parallel synth sees all of it or none); of the
    earlier assets of the same platform, the two newest are kept."""
    ASSET_CACHE.mkdir(parents=True, exist_ok=True)
    earlier = sorted(ASSET_CACHE.glob(f"{cached.name.split('-')[0]}-*"), key=_modified)
    for old in earlier[:-2]:
        shutil.rmtree(old, ignore_errors=True)
    staging = ASSET_CACHE / f".{cached.name}.{os.getpid()}"
    shutil.copytree(out, staging)
    try:
        staging.rename(cached)
    except OSError:  # another synth kept the same asset first
        shutil.rmtree(staging, ignore_errors=True)


def _modified(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def function_code(target: Platform = AWS_PLATFORM, source: Path = FUNCTIONS_DIR) -> lambda_.Code:
    # Checked now, so a missing wheel or interpreter fails the synth before any asset is staged.
    pinned_wheels(target)
    lambda_python()
    return lambda_.Code.from_asset(
        str(source),
        exclude=["**/__pycache__", "**/*.pyc"],
        # The asset is named by what it holds: the pinned wheels change it as the source does.
        asset_hash_type=cdk.AssetHashType.OUTPUT,
        bundling=cdk.BundlingOptions(
            # Required by the API, never used: local bundling always succeeds or raises.
            image=target.runtime.bundling_image,
            local=CopyIntoAsset(source, target),
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


# OpenTelemetry through the ADOT Python layer (the `otel` option): its wrapper runs the handler instrumented.
OTEL_WRAPPER = "/opt/otel-instrument"
OTEL_ENVIRONMENT = {"AWS_LAMBDA_EXEC_WRAPPER": OTEL_WRAPPER}
# Pinned: the layer of this ADOT Python SDK version, its ARN per region in a mapping of the template (from
# aws_cdk's region table), never a "latest" looked up at deploy time. `otel_layer_arn` replaces it.
OTEL_SDK_VERSION = "1.29.0"
OTEL_MAPPING = "OtelLayerArns"


def otel_layer_arns(architecture: lambda_.Architecture) -> dict[str, dict[str, str]]:
    """Region -> {"arn": the pinned ADOT Python layer version's ARN}, for every region that has it."""
    from aws_cdk import region_info

    arch = "arm64" if architecture.name == lambda_.Architecture.ARM_64.name else "amd64"
    found = {}
    for region in region_info.RegionInfo.regions:
        arn = region.adot_lambda_layer_arn("PYTHON_SDK", OTEL_SDK_VERSION, arch)
        if arn:
            found[region.name] = {"arn": arn}
    return found


def otel_layer(scope: Construct, kit: FunctionKit) -> lambda_.ILayerVersion:
    arn = kit.options.otel_layer_arn
    if arn is None:
        stack = cdk.Stack.of(scope)
        mapping = stack.node.try_find_child(OTEL_MAPPING)
        if mapping is None:
            mapping = cdk.CfnMapping(stack, OTEL_MAPPING, mapping=otel_layer_arns(kit.architecture))
        assert isinstance(mapping, cdk.CfnMapping)
        arn = mapping.find_in_map(cdk.Aws.REGION, "arn")
    return lambda_.LayerVersion.from_layer_version_arn(scope, "OtelLayer", arn)


@dataclass(frozen=True)
class FunctionKit:
    """Everything the constructs need to make a function: shared code, options and environment."""

    code: lambda_.Code
    options: StackOptions
    environment: Mapping[str, str]
    runtime: lambda_.Runtime = RUNTIME
    architecture: lambda_.Architecture = ARCHITECTURE


def function_kit(options: StackOptions, environment: Mapping[str, str]) -> FunctionKit:
    """AWS: Python 3.13 on arm64. LocalStack: Python 3.13 on this machine's architecture. No layer either way,
    but the ADOT layer when `otel` is on (AWS only)."""
    target = host_platform() if options.localstack else AWS_PLATFORM
    return FunctionKit(
        code=function_code(target),
        options=options,
        environment=environment,
        runtime=target.runtime,
        architecture=target.architecture,
    )


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
            memory_size=memory_mb,
            timeout=timeout,
            role=self.role,
            log_group=self.log_group,
            tracing=lambda_.Tracing.ACTIVE if kit.options.traced else lambda_.Tracing.DISABLED,
            environment={
                **FUNCTION_ENVIRONMENT,
                **kit.environment,
                **(environment or {}),
                **(OTEL_ENVIRONMENT if kit.options.otel else {}),
            },
            layers=[otel_layer(self, kit)] if kit.options.otel else None,
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
