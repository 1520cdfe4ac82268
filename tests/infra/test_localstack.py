"""`-c target=localstack`: no layer, no SSM parameter, Python 3.13 on this machine's architecture, the same
pinned distributions as on AWS (this machine's wheels of them)."""

from __future__ import annotations

import ast
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
from email.parser import Parser
from pathlib import Path

from infra.lambda_function import (
    AWS_PLATFORM,
    FUNCTIONS_DIR,
    REQUIREMENTS,
    host_platform,
    lambda_python,
    pinned_requirements,
    wheel_download_command,
    wheel_name,
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


def with_dependencies(names: list[str]) -> list[importlib.metadata.Distribution]:
    """The installed distributions named and every one they require (extras left out), each once."""
    found: dict[str, importlib.metadata.Distribution] = {}
    pending = list(names)
    while pending:
        name = wheel_name(re.split(r"[\s;<>=!~\[(]", pending.pop().strip(), maxsplit=1)[0])
        if name not in found:
            found[name] = importlib.metadata.distribution(name)
            pending += [r for r in found[name].requires or [] if "extra" not in r.partition(";")[2]]
    return list(found.values())


def test_no_function_has_a_layer_and_each_runs_on_python313_on_this_machine(
    localstack_stack: Synthesized,
) -> None:
    target = host_platform()
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


def test_the_aws_target_keeps_the_bootstrap_check(default_stack: Synthesized) -> None:
    assert "CheckBootstrapVersion" in default_stack.json["Rules"]


def test_the_asset_carries_pydantic_and_its_dependencies_for_this_machine_but_not_powertools(
    localstack_stack: Synthesized,
) -> None:
    root = localstack_stack.asset
    names = {entry.name for entry in root.iterdir()}

    assert {"offpath", "tzdata", "pydantic", "pydantic_core", "annotated_types", "typing_inspection"} <= names
    assert "typing_extensions.py" in names
    assert any(name.startswith("pydantic-") and name.endswith(".dist-info") for name in names)
    assert "aws_lambda_powertools" not in names
    assert [p.name for p in (root / "pydantic_core").glob("*.so")] == [
        f"_pydantic_core.cpython-313-{host_platform().machine}-linux-gnu.so"
    ]
    assert (root / "offpath" / "handlers" / "__pycache__" / "api.cpython-313.pyc").is_file()


def test_the_pins_cover_what_every_bundled_distribution_requires(localstack_stack: Synthesized) -> None:
    """Each wheel is installed without its dependencies: the requirements file must name them all."""
    pinned = {wheel_name(name) for name, _ in pinned_requirements()}
    required = set()
    for metadata in localstack_stack.asset.glob("*.dist-info/METADATA"):
        for requirement in Parser().parsestr(metadata.read_text()).get_all("Requires-Dist") or []:
            if "extra" not in requirement.partition(";")[2]:
                required.add(wheel_name(re.split(r"[\s;<>=!~\[(]", requirement.strip(), maxsplit=1)[0]))
    assert {"pydantic_core", "typing_extensions"} <= required
    assert required <= pinned


def test_nothing_in_functions_imports_powertools() -> None:
    """Why there is no Powertools layer: the functions do not import Powertools."""
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
    pinned = {wheel_name(name) for name, _ in pinned_requirements()}
    assert not {wheel_name(d.metadata["Name"]) for d in provided} & pinned
    for distribution in provided:
        root = Path(str(distribution.locate_file("")))
        for file in distribution.files or []:
            if not str(file).startswith("..") and "__pycache__" not in file.parts:
                (runtime_dir / file).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(root / file, runtime_dir / file)
    script = (
        "import sys\n"
        f"sys.path[:] = [{str(localstack_stack.asset)!r}, {str(runtime_dir)!r}] + "
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
        [lambda_python(), "-I", "-S", "-c", script], env=env, capture_output=True, text=True, timeout=120
    )

    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"imported {len(HANDLER_MODULES)}"


def test_the_wheels_are_fetched_once_pinned_for_the_functions_python_and_machine() -> None:
    command = wheel_download_command(AWS_PLATFORM)

    assert command[1:4] == ["-m", "pip", "download"]
    assert command[command.index("--platform") + 1] == "manylinux2014_aarch64"
    assert command[command.index("--python-version") + 1] == "3.13"
    assert command[command.index("--dest") + 1] == str(AWS_PLATFORM.wheel_dir)
    assert command[command.index("--requirement") + 1] == str(REQUIREMENTS)
    assert {"--no-deps", "--only-binary=:all:"} <= set(command)
    assert all(re.fullmatch(r"[0-9][0-9a-z.]*", version) for _, version in pinned_requirements())
