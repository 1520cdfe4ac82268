"""Settings are read once from the environment, with defaults and bounds."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from pydantic import ValidationError

from offpath.settings import Settings

QUEUES = {"default": "https://sqs.example/offpath-default"}
DLQS = {"default": "https://sqs.example/offpath-default-dlq"}


def environment(**extra: str) -> dict[str, str]:
    return {
        "OFFPATH_TABLE_NAME": "offpath-jobs",
        "OFFPATH_QUEUE_URLS": json.dumps(QUEUES),
        "OFFPATH_DLQ_URLS": json.dumps(DLQS),
        **extra,
    }


def test_queue_urls_are_read_from_json_objects() -> None:
    settings = Settings.from_env(environment())

    assert (settings.table_name, settings.queue_urls, settings.dlq_urls) == ("offpath-jobs", QUEUES, DLQS)


def test_unset_values_take_their_defaults() -> None:
    settings = Settings.from_env(environment())

    assert settings.payload_limit_bytes == 64 * 1024
    assert settings.retention == timedelta(days=7)
    assert settings.queue_class is None
    assert settings.log_level == "INFO"


def test_numbers_and_names_are_read_from_text() -> None:
    settings = Settings.from_env(
        environment(OFFPATH_QUEUE_CLASS="critical", OFFPATH_RETENTION_DAYS="30", OFFPATH_PAYLOAD_LIMIT_BYTES="1024")
    )

    assert (settings.queue_class, settings.retention, settings.payload_limit_bytes) == (
        "critical",
        timedelta(days=30),
        1024,
    )


def test_variables_without_the_prefix_are_ignored() -> None:
    settings = Settings.from_env({**environment(), "TABLE_NAME": "other", "AWS_REGION": "eu-west-1"})

    assert settings.table_name == "offpath-jobs"


def test_a_missing_table_name_is_refused() -> None:
    with pytest.raises(ValidationError, match="table_name"):
        Settings.from_env({"OFFPATH_QUEUE_URLS": json.dumps(QUEUES)})


@pytest.mark.parametrize(
    "extra",
    [
        {"OFFPATH_PAYLOAD_LIMIT_BYTES": "0"},
        {"OFFPATH_PAYLOAD_LIMIT_BYTES": str(256 * 1024 + 1)},
        {"OFFPATH_RETENTION_DAYS": "0"},
        {"OFFPATH_RETENTION_DAYS": "many"},
        {"OFFPATH_QUEUE_URLS": "not json"},
    ],
)
def test_a_value_out_of_bounds_or_malformed_is_refused(extra: dict[str, str]) -> None:
    with pytest.raises((ValidationError, ValueError)):
        Settings.from_env(environment(**extra))


def test_the_process_environment_is_read_when_none_is_given(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in environment(OFFPATH_QUEUE_CLASS="bulk").items():
        monkeypatch.setenv(name, value)

    assert Settings.from_env().queue_class == "bulk"
