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


def test_a_batch_progress_bar_fills_with_its_finished_jobs() -> None:
    from offpath_local.cli import progress_bar

    assert progress_bar(0, 4, width=8) == "[........] 0/4"
    assert progress_bar(1, 4, width=8) == "[##......] 1/4"
    assert progress_bar(4, 4, width=8) == "[########] 4/4"
    assert progress_bar(0, 0, width=8) == "[........] 0/0"


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


class _Recording:
    """An ApiClient that answers every submit with a QUEUED job and keeps what it was sent."""

    def __init__(self) -> None:
        self.bodies: list[object] = []

    def call(self, method: str, path: str, **kwargs: object) -> Answer:
        self.bodies.append(kwargs.get("body"))
        return Answer(202, {"job_id": "j1", "type": "demo.echo", "status": "QUEUED"}, {})


def submit_args(*argv: str) -> object:
    from offpath_local.cli import _parser as parser

    return parser().parse_args(["submit", "demo.echo", *argv])


def test_submit_sends_the_expiry_and_the_debounce_it_is_given() -> None:
    import io

    from offpath_local.cli import _submit

    client = _Recording()
    args = submit_args("--expires-at", "2026-12-02T10:00:00Z", "--debounce", "user:42:5")

    assert _submit(client, args, io.StringIO()) == 0  # type: ignore[arg-type]

    assert client.bodies == [
        {
            "type": "demo.echo",
            "payload": {},
            "expires_at": "2026-12-02T10:00:00Z",
            "debounce": {"key": "user:42", "seconds": 5},
        }
    ]


@pytest.mark.parametrize("given", ["nokey", ":5", "k:", "k:five"])
def test_a_debounce_without_key_and_seconds_is_a_usage_error(given: str) -> None:
    import io

    from offpath_local.cli import UsageError, _submit

    with pytest.raises(UsageError, match="KEY:SECONDS"):
        _submit(_Recording(), submit_args("--debounce", given), io.StringIO())  # type: ignore[arg-type]


def test_the_listing_filter_takes_expired_in_any_case() -> None:
    from offpath_local.cli import FINAL_STATES
    from offpath_local.cli import _parser as parser

    assert parser().parse_args(["jobs", "--status", "expired"]).status == "EXPIRED"
    assert "EXPIRED" in FINAL_STATES


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

    assert header[-2] == "PAUSED"
    assert [row[-2] for row in rows] == [f"since {PAUSED_AT}", "-"]


def test_status_says_why_a_due_job_waits_naming_the_jobs_that_hold_its_keys_slots() -> None:
    import io

    from offpath_local.cli import _print_job

    job = {
        "job_id": "j-9",
        "type": "demo.limited",
        "queue": "critical",
        "status": "QUEUED",
        "attempts": 0,
        "max_attempts": 3,
        "created_at": "2026-12-02T05:00:00Z",
        "waiting_on": {
            "reason": "concurrency",
            "message": "2 of the 2 allowed at once for its key are running",
            "holders": ["j-1", "j-2"],
            "until": None,
        },
    }
    out = io.StringIO()

    _print_job(job, out, as_json=False)

    lines = out.getvalue().splitlines()
    assert lines[3:5] == [
        "status           QUEUED",
        "waiting on       2 of the 2 allowed at once for its key are running (running: j-1, j-2)",
    ]
    out = io.StringIO()
    _print_job({**job, "waiting_on": None}, out, as_json=False)
    assert "waiting on" not in out.getvalue()
