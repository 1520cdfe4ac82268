"""The distribution names every folder it ships, so an install prints no setuptools warning about a folder that
would be ignored (setuptools warns, at length, for each importable folder missing from `packages`)."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_shipped_folder_is_a_declared_package() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    declared = set(config["packages"])
    found: set[str] = set()
    for package, folder in config["package-dir"].items():
        base = ROOT / folder
        for path in [base, *base.rglob("*")]:
            if not path.is_dir() or path.name in {"__pycache__"} or path.name.startswith("."):
                continue
            if not any(child.is_file() for child in path.iterdir()):
                continue
            relative = path.relative_to(base).parts
            found.add(".".join((package, *relative)))

    assert found - declared == set()
    assert "offpath_local.console.static" in declared
