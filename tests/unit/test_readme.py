"""The README's commands are ones the command line takes, and the documents it links to exist."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

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


def video_curl_body() -> dict[str, Any]:
    block = README.split("**A video pipeline**", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    words = shlex.split(block.replace("\\\n", " "))
    assert words[:4] == ["curl", "-s", "-X", "POST"]
    assert words[4] == "http://127.0.0.1:8000/jobs"
    body: dict[str, Any] = json.loads(words[words.index("-d") + 1])
    return body


def test_the_readme_video_curl_sends_the_body_the_e2e_test_sends_and_the_api_accepts() -> None:
    from offpath.handlers.api_models import SubmitBody, parse_body
    from offpath.jobs import load_job_types
    from tests.e2e.test_video_demo import README_BODY

    body = video_curl_body()
    parsed = parse_body(SubmitBody, body)
    registry = load_job_types(demo=True)

    assert body == README_BODY
    assert (parsed.type, parsed.then.type if parsed.then else None) == ("demo.transcode", "demo.thumbnails")
    registry.job_types["demo.transcode"].payload_model.model_validate(parsed.payload)
    registry.job_types["demo.thumbnails"].payload_model.model_validate(parsed.then.payload if parsed.then else None)


def test_the_readme_lists_every_demo_job_type() -> None:
    from offpath.jobs import load_job_types

    listed = README.split("The demo job types", 1)[1].split("are\nalways there", 1)[0]
    demo_types = [name for name in load_job_types(demo=True).job_types if name.startswith("demo.")]

    assert "demo.transcode" in demo_types and "demo.notify" in demo_types
    assert [name for name in demo_types if f"`{name}" not in listed] == []
