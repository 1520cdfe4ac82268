"""`-c target=localstack`: no layer, pydantic in the asset, no SSM parameter, the synth's Python and machine."""

from __future__ import annotations

import ast
import importlib.metadata
import json
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

from infra.lambda_function import (
    FUNCTIONS_DIR,
    LAYER_DISTRIBUTIONS,
    Platform,
    synth_platform,
    wheel_install_command,
    with_dependencies,
)
from tests.infra.stacks import Synthesized
from tests.infra.template_view import functions_by_name

HANDLER_MODULES = sorted(
    {
        "offpath.handlers.api",
        "offpath.handlers.worker",
        "offpath.handlers.enqueue",
        "offpath.handlers.sweeper",
    }
)


def asset_root(stack: Synthesized) -> Path:
    manifest = json.loads((stack.outdir / "Offpath.assets.json").read_text())
    (asset,) = [f for f in manifest["files"].values() if f["source"].get("packaging") == "zip"]
    return stack.outdir / asset["source"]["path"]


def test_no_function_has_a_layer_and_each_runs_on_the_synths_python_and_machine(
    localstack_stack: Synthesized,
) -> None:
    target = synth_platform()
    functions = functions_by_name(localstack_stack.json)
    # api, read, enqueue, sweeper, a worker per queue class, the notifier and the delivery function
    assert len(functions) == 4 + len(localstack_stack.registry.queues) + 2
    for name, (_, function) in functions.items():
        assert "Layers" not in function, name
        assert function["Runtime"] == f"python{target.python}", name
        assert function["Architectures"] == [target.architecture.name], name


def test_the_template_reads_no_ssm_parameter(localstack_stack: Synthesized) -> None:
    template = localstack_stack.json
    text = json.dumps(template)

    assert "AWS::SSM" not in text
    assert "/aws/service/powertools" not in text
    assert not template.get("Parameters")
    assert "CheckBootstrapVersion" not in template.get("Rules", {})


def test_the_aws_target_keeps_the_layer_and_the_bootstrap_check(default_stack: Synthesized) -> None:
    template = default_stack.json
    assert "CheckBootstrapVersion" in template["Rules"]
    assert all(f["Layers"] for _, f in functions_by_name(template).values())


def test_the_asset_carries_pydantic_and_its_dependencies_but_not_powertools(localstack_stack: Synthesized) -> None:
    root = asset_root(localstack_stack)
    names = {entry.name for entry in root.iterdir()}

    assert {"offpath", "tzdata", "pydantic", "pydantic_core", "annotated_types", "typing_inspection"} <= names
    assert "typing_extensions.py" in names
    assert any(name.startswith("pydantic-") and name.endswith(".dist-info") for name in names)
    assert "aws_lambda_powertools" not in names
    assert not [p for p in root.rglob("*") if p.name == "__pycache__" or p.suffix == ".pyc"]


def test_nothing_in_functions_imports_powertools() -> None:
    """Why the LocalStack asset carries pydantic alone: the functions do not import Powertools."""
    importers = []
    for path in FUNCTIONS_DIR.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            modules = (
                [alias.name for alias in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            if any(module.split(".")[0] == "aws_lambda_powertools" for module in modules):
                importers.append(str(path.relative_to(FUNCTIONS_DIR)))
    assert importers == []


def test_every_handler_imports_from_the_asset_in_a_clean_interpreter(
    localstack_stack: Synthesized, tmp_path: Path
) -> None:
    """Nothing on the path but the asset and what the Lambda runtime itself provides (boto3 and what it needs)."""
    runtime_dir = tmp_path / "lambda-runtime"
    provided = with_dependencies(["boto3"])
    layer = {d.metadata["Name"].lower() for d in with_dependencies(LAYER_DISTRIBUTIONS)}
    assert not {d.metadata["Name"].lower() for d in provided} & layer
    for distribution in provided:
        root = Path(str(distribution.locate_file("")))
        for file in distribution.files or []:
            if not str(file).startswith("..") and "__pycache__" not in file.parts:
                (runtime_dir / file).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(root / file, runtime_dir / file)
    script = (
        "import sys\n"
        f"sys.path[:] = [{str(asset_root(localstack_stack))!r}, {str(runtime_dir)!r}] + "
        "[p for p in sys.path if 'site-packages' not in p and p]\n"
        f"for name in {HANDLER_MODULES!r}:\n"
        "    module = __import__(name, fromlist=['handler'])\n"
        "    assert callable(module.handler), name\n"
        "    assert module.__file__.startswith(sys.path[0]), module.__file__\n"
        "import pydantic, pydantic_core\n"
        "assert pydantic.__file__.startswith(sys.path[0]) and pydantic_core.__file__.startswith(sys.path[0])\n"
        "print('imported', len(" + repr(HANDLER_MODULES) + "))\n"
    )
    env = {"PATH": os.environ.get("PATH", ""), "AWS_DEFAULT_REGION": "us-east-1", "AWS_REGION": "us-east-1"}

    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", script], env=env, capture_output=True, text=True, timeout=120
    )

    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"imported {len(HANDLER_MODULES)}"


def test_dependencies_come_from_the_metadata_without_optional_extras() -> None:
    names = {d.metadata["Name"].lower().replace("_", "-") for d in with_dependencies(["pydantic"])}

    assert {"pydantic", "pydantic-core", "typing-extensions", "annotated-types", "typing-inspection"} <= names
    assert "email-validator" not in names  # pydantic[email] is an extra


def test_a_synth_elsewhere_fetches_compiled_packages_as_wheels_for_the_functions_platform(tmp_path: Path) -> None:
    """On macOS (or another Python) the synth's pydantic_core would not load in Lambda: pip installs the same
    version as a manylinux wheel for the functions' Python and machine."""
    core = importlib.metadata.distribution("pydantic-core")
    other = Platform("3.13", "aarch64", synth_platform().runtime, synth_platform().architecture)

    command = wheel_install_command(core, other, tmp_path)

    assert other.matches_synth is (sys.version_info[:2] == (3, 13) and synth_platform().machine == "aarch64")
    assert command[1:4] == ["-m", "pip", "install"]
    assert command[command.index("--platform") + 1] == "manylinux2014_aarch64"
    assert command[command.index("--python-version") + 1] == "3.13"
    assert command[command.index("--target") + 1] == str(tmp_path)
    assert {"--no-deps", "--only-binary=:all:"} <= set(command)
    assert command[-1] == f"pydantic_core=={core.version}" or command[-1] == f"pydantic-core=={core.version}"


def test_the_synths_own_compiled_packages_are_copied_only_on_glibc_linux() -> None:
    glibc_linux = sys.platform == "linux" and platform.libc_ver()[0] == "glibc"

    assert synth_platform().matches_synth is glibc_linux
