"""On Lambda the runtime's own root handler is replaced, so each log line is written once."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator

import pytest

from offpath.observability import configure_logging


@pytest.fixture
def clean_root() -> Iterator[logging.Logger]:
    root = logging.getLogger()
    saved, level = list(root.handlers), root.level
    root.handlers = []
    try:
        yield root
    finally:
        root.handlers = saved
        root.setLevel(level)


def test_on_lambda_the_runtimes_handler_gives_way_to_the_json_handler(
    clean_root: logging.Logger, monkeypatch: pytest.MonkeyPatch
) -> None:
    runtime_stream, our_stream = io.StringIO(), io.StringIO()
    clean_root.addHandler(logging.StreamHandler(runtime_stream))  # what the Lambda runtime installs
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", "offpath-worker-default")

    configure_logging("worker", stream=our_stream)
    logging.getLogger("offpath.test").info("hello")

    assert runtime_stream.getvalue() == ""
    assert our_stream.getvalue().count('"message": "hello"') == 1


def test_elsewhere_other_handlers_are_left_alone(clean_root: logging.Logger, monkeypatch: pytest.MonkeyPatch) -> None:
    other_stream, our_stream = io.StringIO(), io.StringIO()
    clean_root.addHandler(logging.StreamHandler(other_stream))
    monkeypatch.delenv("AWS_LAMBDA_FUNCTION_NAME", raising=False)

    configure_logging("worker", stream=our_stream)
    logging.getLogger("offpath.test").info("hello")

    assert "hello" in other_stream.getvalue()
    assert '"message": "hello"' in our_stream.getvalue()
