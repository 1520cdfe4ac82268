"""Settings are read once from the environment, with defaults and bounds."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from offpath.settings import Settings, SettingsError

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
    with pytest.raises(SettingsError, match=r"^OFFPATH_TABLE_NAME is required"):
        Settings.from_env({"OFFPATH_QUEUE_URLS": json.dumps(QUEUES)})


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"OFFPATH_PAYLOAD_LIMIT_BYTES": "0"}, "OFFPATH_PAYLOAD_LIMIT_BYTES must be from 1 to 262144, not 0"),
        ({"OFFPATH_PAYLOAD_LIMIT_BYTES": str(256 * 1024 + 1)}, "must be from 1 to 262144, not 262145"),
        ({"OFFPATH_RETENTION_DAYS": "0"}, "OFFPATH_RETENTION_DAYS must be from 1 to 365, not 0"),
        ({"OFFPATH_RETENTION_DAYS": "many"}, "OFFPATH_RETENTION_DAYS must be an integer from 1 to 365"),
        ({"OFFPATH_RETENTION_DAYS": "1.5"}, "OFFPATH_RETENTION_DAYS must be an integer from 1 to 365"),
        ({"OFFPATH_QUEUE_URLS": "not json"}, "OFFPATH_QUEUE_URLS must be a JSON object of names to text"),
        ({"OFFPATH_QUEUE_URLS": "[1]"}, "OFFPATH_QUEUE_URLS must be a JSON object of names to text"),
        ({"OFFPATH_REDRIVE_MODE": "MOVE"}, "OFFPATH_REDRIVE_MODE must be one of move_task, copy"),
        ({"OFFPATH_DEMO_JOBS": "maybe"}, "OFFPATH_DEMO_JOBS must be one of 1, on, t, true, y, yes or 0, f"),
        ({"OFFPATH_TENANT_CLAIMS": " , "}, "OFFPATH_TENANT_CLAIMS must name at least one claim"),
        ({"OFFPATH_TENANT_CLAIMS": "tenant,a b"}, "OFFPATH_TENANT_CLAIMS tenant claim 'a b' must be 1 to 64 of"),
        ({"OFFPATH_LOOPBACK_RECEIVER_PORTS": "80,x"}, "OFFPATH_LOOPBACK_RECEIVER_PORTS must be comma-separated port"),
        ({"OFFPATH_LOOPBACK_RECEIVER_PORTS": "0"}, "OFFPATH_LOOPBACK_RECEIVER_PORTS must be port numbers from 1"),
        ({"OFFPATH_WEBHOOK_RETRY_SCALE": "0"}, "OFFPATH_WEBHOOK_RETRY_SCALE must be more than 0 to 1, not 0"),
        ({"OFFPATH_WEBHOOK_RETRY_SCALE": "nan"}, "OFFPATH_WEBHOOK_RETRY_SCALE must be more than 0 to 1, not nan"),
        ({"OFFPATH_WEBHOOK_DEADLINE_S": "31"}, "OFFPATH_WEBHOOK_DEADLINE_S must be more than 0 to 30, not 31"),
        ({"OFFPATH_QUOTAS": "acme:nonsense=1"}, "OFFPATH_QUOTAS "),
    ],
)
def test_a_value_out_of_bounds_or_malformed_is_refused_naming_the_variable(extra: dict[str, str], message: str) -> None:
    with pytest.raises(SettingsError) as refused:
        Settings.from_env(environment(**extra))

    assert message in str(refused.value)


def test_every_refused_variable_is_named_at_once() -> None:
    with pytest.raises(SettingsError) as refused:
        Settings.from_env(environment(OFFPATH_RETENTION_DAYS="0", OFFPATH_SWEEP_GRACE_S="x"))

    assert str(refused.value).startswith("OFFPATH_RETENTION_DAYS must be")
    assert "; OFFPATH_SWEEP_GRACE_S must be an integer from 1 to 3600" in str(refused.value)


def test_flags_lists_and_ports_are_read_from_text_and_unknown_variables_ignored() -> None:
    settings = Settings.from_env(
        environment(
            OFFPATH_DEMO_JOBS="Yes",
            OFFPATH_ALLOW_LOOPBACK_RECEIVERS="0",
            OFFPATH_TENANT_CLAIMS="org_id, tenant",
            OFFPATH_ADMIN_PRINCIPALS="arn:aws:iam::1:role/a,arn:aws:iam::1:role/b",
            OFFPATH_LOOPBACK_RECEIVER_PORTS="47001, 47002",
            OFFPATH_WEBHOOK_DEADLINE_S="2.5",
            OFFPATH_NOT_A_SETTING="x",
        )
    )

    assert (settings.demo_jobs, settings.allow_loopback_receivers) == (True, False)
    assert settings.tenant_claims == ("org_id", "tenant")
    assert settings.admin_principals == ("arn:aws:iam::1:role/a", "arn:aws:iam::1:role/b")
    assert settings.loopback_receiver_ports == frozenset({47001, 47002})
    assert settings.webhook_deadline_s == 2.5


def test_values_given_in_code_are_checked_as_those_read_from_text() -> None:
    settings = Settings(table_name="jobs", retention_days=30, loopback_receiver_ports=[47001])

    assert (settings.retention_days, settings.loopback_receiver_ports) == (30, frozenset({47001}))
    assert settings.replace(queue_class="bulk").queue_class == "bulk"
    with pytest.raises(SettingsError, match="OFFPATH_RETENTION_DAYS must be from 1 to 365, not 400"):
        settings.replace(retention_days=400)


def test_the_process_environment_is_read_when_none_is_given(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in environment(OFFPATH_QUEUE_CLASS="bulk").items():
        monkeypatch.setenv(name, value)

    assert Settings.from_env().queue_class == "bulk"
