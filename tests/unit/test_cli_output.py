"""What the `offpath` command prints for answers that need no server: refusals and the alarm table's order."""

from __future__ import annotations

import pytest

from offpath_local.cli import _alarm_rows, _job_type_rows, _refused, pause_line
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


PAUSED_AT = "2026-12-02T10:00:00Z"


@pytest.mark.parametrize(
    ("body", "line"),
    [
        (
            {
                "kind": "queue",
                "name": "default",
                "paused": True,
                "paused_at": PAUSED_AT,
                "changed": True,
                "pause_reason": "migration",
                "waiting": 3,
            },
            f"queue default paused since {PAUSED_AT} (migration); 3 jobs waiting",
        ),
        (
            {
                "kind": "queue",
                "name": "default",
                "paused": True,
                "paused_at": PAUSED_AT,
                "changed": False,
                "pause_reason": None,
                "waiting": 1,
            },
            f"queue default already paused since {PAUSED_AT}; 1 job waiting",
        ),
        (
            {
                "kind": "job_type",
                "name": "demo.echo",
                "paused": True,
                "paused_at": PAUSED_AT,
                "changed": True,
                "pause_reason": None,
                "waiting": None,
            },
            f"job type demo.echo paused since {PAUSED_AT}",
        ),
        ({"kind": "queue", "name": "bulk", "paused": False, "changed": True, "waiting": 0}, "queue bulk resumed"),
        (
            {"kind": "job_type", "name": "demo.echo", "paused": False, "changed": False, "waiting": None},
            "job type demo.echo was not paused",
        ),
    ],
)
def test_pause_and_resume_print_the_state_and_whether_it_changed(body: dict[str, object], line: str) -> None:
    assert pause_line(body) == line


def test_the_job_types_table_shows_since_when_a_type_is_paused() -> None:
    body = {
        "job_types": [
            {
                "name": "demo.sleep",
                "queue": "default",
                "max_attempts": 3,
                "timeout_s": 60,
                "submitted_by": "tenant",
                "paused": True,
                "paused_at": PAUSED_AT,
            },
            {
                "name": "demo.echo",
                "queue": "default",
                "max_attempts": 3,
                "timeout_s": 30,
                "submitted_by": "tenant",
                "paused": False,
                "paused_at": None,
            },
        ]
    }

    header, rows = _job_type_rows(body)

    assert header[-1] == "PAUSED"
    assert [row[-1] for row in rows] == [f"since {PAUSED_AT}", "-"]
