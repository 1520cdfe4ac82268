"""What the `offpath` command prints for answers that need no server: refusals and the alarm table's order."""

from __future__ import annotations

import pytest

from offpath_local.cli import _alarm_rows, _refused
from offpath_local.client import Answer


def test_a_429_prints_its_retry_after(capsys: pytest.CaptureFixture[str]) -> None:
    answer = Answer(
        429, {"error": {"code": "quota_exceeded", "message": "open_jobs quota of 5 reached"}}, {"retry-after": "7"}
    )

    assert _refused(answer) == 1

    assert (
        capsys.readouterr().err.strip() == "offpath: 429 quota_exceeded: open_jobs quota of 5 reached (retry after 7 s)"
    )


def test_a_404_prints_no_retry_hint(capsys: pytest.CaptureFixture[str]) -> None:
    _refused(Answer(404, {"error": {"code": "not_found", "message": "no such job"}}, {"retry-after": "1"}))

    assert "retry after" not in capsys.readouterr().err


def test_alarms_in_alarm_come_first() -> None:
    body = {
        "alarms": [
            {"name": "a-ok", "state": "OK", "reason": "", "updated_at": None},
            {"name": "b-firing", "state": "ALARM", "reason": "DLQ 1", "updated_at": "2026-12-02T05:00:00Z"},
            {"name": "c-nodata", "state": "INSUFFICIENT_DATA", "reason": "", "updated_at": None},
            {"name": "a-firing", "state": "ALARM", "reason": "age", "updated_at": "2026-12-02T05:01:00Z"},
        ]
    }

    header, rows = _alarm_rows(body)

    assert header == ["STATE", "ALARM", "SINCE", "REASON"]
    assert [row[1] for row in rows] == ["a-firing", "b-firing", "c-nodata", "a-ok"]


def test_the_job_types_table_says_each_types_limits_in_a_few_words() -> None:
    from offpath_local.cli import _job_type_rows

    header, rows = _job_type_rows(
        {
            "job_types": [
                {"name": "a", "queue": "q", "max_attempts": 3, "timeout_s": 10, "submitted_by": "tenant"},
                {
                    "name": "b",
                    "queue": "q",
                    "max_attempts": 3,
                    "timeout_s": 10,
                    "submitted_by": "tenant",
                    "limits": {"concurrency_key": "account", "max_concurrency": 2, "rate_limit": "10/s"},
                },
                {
                    "name": "c",
                    "queue": "q",
                    "max_attempts": 3,
                    "timeout_s": 10,
                    "submitted_by": "tenant",
                    "limits": {"concurrency_key": None, "max_concurrency": None, "rate_limit": "100/m"},
                },
            ]
        }
    )

    assert header[-1] == "LIMITS"
    assert [row[-1] for row in rows] == ["-", "2 at once, 10/s per account", "100/m per type"]
