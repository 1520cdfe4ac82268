"""The README's commands are ones the command line takes, and the documents it links to exist."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from offpath_local.cli import _parser as build_parser

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def demo_commands() -> list[list[str]]:
    block = README.split("**The demo pipeline, in five minutes.**", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    return [shlex.split(line, comments=True) for line in block.strip().splitlines()]


def test_every_document_the_readme_links_to_exists() -> None:
    links = re.findall(r"\]\(((?:docs|localstack)/[^)#]+)", README)

    assert "docs/scale.md" in links
    assert [link for link in links if not (ROOT / link).exists()] == []


def test_the_readme_says_how_to_change_the_port_with_a_command_that_parses() -> None:
    assert "`.venv/bin/offpath local --port 8080`" in README
    args = build_parser().parse_args(["local", "--port", "8080"])

    assert (args.command, args.port) == ("local", 8080)


@pytest.mark.parametrize("command", demo_commands(), ids=lambda c: " ".join(c[1:3]))
def test_each_command_of_the_demo_pipeline_parses(command: list[str]) -> None:
    assert command[0] == ".venv/bin/offpath"

    args = build_parser().parse_args(command[1:])

    assert args.command == command[1]
