"""The `offpath` command line against any target (`--api URL`, its token or SigV4): what a script sees (output,
exit codes)."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from offpath_local.cli import main
from tests.e2e.target import Target

OK, REFUSED, USAGE, CANNOT_CONNECT = 0, 1, 2, 3


def target_options(target: Target) -> list[str]:
    """The target's URL, and its token (none: the command line signs with SigV4)."""
    return ["--api", target.url, *(["--token", target.token] if target.token else [])]


def run(target: Target, *args: str) -> int:
    return main([args[0], *target_options(target), *args[1:]])


def test_submit_wait_follows_an_echo_job_to_success(target: Target, capsys: pytest.CaptureFixture[str]) -> None:
    code = run(target, "submit", "demo.echo", "--payload", '{"from": "cli"}', "--wait", "--json")

    job = json.loads(capsys.readouterr().out)
    assert code == OK
    assert job["status"] == "SUCCEEDED"
    assert job["result"] == {"from": "cli"}


def test_submit_wait_shows_progress_and_ends_with_the_result(
    target: Target, capsys: pytest.CaptureFixture[str]
) -> None:
    code = run(target, "submit", "demo.sleep", "--payload", '{"ms": 400}', "--wait")

    captured = capsys.readouterr()
    assert code == OK
    assert "SUCCEEDED" in captured.out
    assert '"slept_ms": 400' in captured.out
    assert "100%" in captured.err


def test_a_failed_job_exits_1(target: Target, capsys: pytest.CaptureFixture[str]) -> None:
    code = run(target, "submit", "demo.poison", "--payload", '{"reason": "cli poison"}', "--wait", "--json")

    captured = capsys.readouterr()
    target.parked.add(json.loads(captured.out)["job_id"])
    assert code == REFUSED
    assert "FAILED" in captured.out
    assert "cli poison" in captured.out


def test_status_of_a_job(target: Target, capsys: pytest.CaptureFixture[str]) -> None:
    job_id = target.submit("demo.echo", {"n": 1}).body["job_id"]
    target.wait_for_job(job_id, {"SUCCEEDED"})

    code = run(target, "status", job_id)

    out = capsys.readouterr().out
    assert code == OK
    assert job_id in out
    assert "SUCCEEDED" in out


def test_status_of_a_failed_job_shows_its_attempts_error_and_traceback(
    target: Target, capsys: pytest.CaptureFixture[str]
) -> None:
    job_id = target.submit("demo.poison", {"reason": "no such account"}).body["job_id"]
    target.wait_for_job(job_id, {"FAILED"})

    code = run(target, "status", job_id)

    lines = capsys.readouterr().out.splitlines()
    assert code == REFUSED, "a FAILED job's status exits 1"
    assert "attempt 1        FAILED PermanentError: no such account" in lines
    (frame,) = [line for line in lines if "offpath/jobs/demo.py:" in line]
    assert re.fullmatch(r" {18}offpath/jobs/demo\.py:\d+ in poison", frame), frame


def test_a_refused_request_exits_1_with_the_reason(target: Target, capsys: pytest.CaptureFixture[str]) -> None:
    code = run(target, "status", "0" * 32)

    assert code == REFUSED
    assert "404" in capsys.readouterr().err


def test_an_unknown_job_type_exits_1(target: Target, capsys: pytest.CaptureFixture[str]) -> None:
    code = run(target, "submit", "no.such.type")

    assert code == REFUSED
    assert "422" in capsys.readouterr().err


def test_usage_errors_exit_2(target: Target, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(target, "submit", "demo.echo", "--payload", "{not json") == USAGE
    assert main(["no-such-command"]) == USAGE
    assert main([]) == USAGE
    capsys.readouterr()


def test_no_server_exits_3(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]

    code = main(["jobs", "--api", f"http://127.0.0.1:{port}", "--token", "x"])

    assert code == CANNOT_CONNECT
    assert "cannot connect" in capsys.readouterr().err


def test_jobs_and_queues_list_as_tables(target: Target, capsys: pytest.CaptureFixture[str]) -> None:
    target.wait_for_job(target.submit("demo.echo", {}).body["job_id"], {"SUCCEEDED"})

    assert run(target, "jobs", "--status", "SUCCEEDED") == OK
    assert run(target, "queues") == OK

    out = capsys.readouterr().out
    assert "JOB_ID" in out and "SUCCEEDED" in out
    assert "QUEUE" in out and "default" in out


@pytest.mark.needs("token")
def test_the_installed_command_reads_the_token_from_the_environment(target: Target) -> None:
    command = shutil.which("offpath", path=str(Path(sys.executable).parent)) or ""
    args = [command] if command else [sys.executable, "-m", "offpath_local"]
    env = {**os.environ, "OFFPATH_TOKEN": target.token or "", "OFFPATH_URL": target.url}

    done = subprocess.run(
        [*args, "submit", "demo.echo", "--payload", '{"via": "entry point"}', "--wait", "--data", "/nonexistent"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert done.returncode == OK, done.stderr
    assert "SUCCEEDED" in done.stdout


def test_jobs_takes_a_status_in_any_case(target: Target, capsys: pytest.CaptureFixture[str]) -> None:
    job_id = target.submit("demo.poison", {"reason": "cli status case"}).body["job_id"]
    target.parked.add(job_id)
    target.wait_for_job(job_id, {"FAILED"})

    assert run(target, "jobs", "--status", "failed", "--json") == OK

    listed = json.loads(capsys.readouterr().out)
    assert job_id in [job["job_id"] for job in listed["jobs"]]
    assert {job["status"] for job in listed["jobs"]} == {"FAILED"}


def test_retry_runs_a_cancelled_job_again_at_its_run_at_or_now(
    target: Target, capsys: pytest.CaptureFixture[str]
) -> None:
    tomorrow = (datetime.now(UTC) + timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    later = {"type": "demo.echo", "payload": {"n": 2}, "run_at": tomorrow}
    kept, now = (target.call("POST", "/jobs", body=later).body["job_id"] for _ in range(2))
    assert run(target, "cancel", kept) == OK and run(target, "cancel", now) == OK
    capsys.readouterr()

    assert run(target, "retry", kept, "--json") == OK
    scheduled = json.loads(capsys.readouterr().out)
    assert run(target, "retry", now, "--now", "--json") == OK
    queued = json.loads(capsys.readouterr().out)

    assert (scheduled["status"], scheduled["run_at"][:19]) == ("SCHEDULED", tomorrow[:19])
    assert queued["status"] == "QUEUED"
    assert run(target, "cancel", kept) == OK


@pytest.mark.needs("admin")
def test_discard_removes_a_failed_jobs_dead_letter(target: Target, capsys: pytest.CaptureFixture[str]) -> None:
    job_id = target.submit("demo.poison", {"reason": "cli discard"}).body["job_id"]
    target.parked.add(job_id)
    target.wait_for_job(job_id, {"FAILED"})
    capsys.readouterr()

    code = run(target, "discard", "default", job_id)
    again = run(target, "discard", "default", job_id)

    captured = capsys.readouterr()
    assert (code, again) == (OK, REFUSED)
    target.parked.discard(job_id)
    assert "FAILED" in captured.out
    assert "discarded_at" in captured.out
    assert "404" in captured.err
    assert target.job(job_id)["discarded_at"] is not None


@pytest.mark.needs("admin")
def test_discard_with_a_bad_queue_name_exits_1(target: Target, capsys: pytest.CaptureFixture[str]) -> None:
    code = run(target, "discard", "no-such-queue", "0" * 32)

    assert code == REFUSED
    assert "422" in capsys.readouterr().err


def test_job_types_alarms_and_stats_print_tables(target: Target, capsys: pytest.CaptureFixture[str]) -> None:
    job_id = target.submit("demo.echo", {"n": 3}).body["job_id"]
    target.wait_for_job(job_id, {"SUCCEEDED"})

    assert run(target, "job-types") == OK
    types = capsys.readouterr().out
    assert types.splitlines()[0].split() == [
        "JOB_TYPE",
        "QUEUE",
        "MAX_ATTEMPTS",
        "TIMEOUT",
        "SUBMITTED_BY",
        "PAUSED",
        "LIMITS",
    ]
    assert any(line.split()[:2] == ["demo.echo", "default"] and line.split()[-1] == "-" for line in types.splitlines())
    limited = [line for line in types.splitlines() if line.startswith("demo.limited")]
    assert [" ".join(line.split("tenant", 1)[1].split()) for line in limited] == ["- 2 at once per account"]

    assert run(target, "alarms") == OK
    alarms = capsys.readouterr().out.splitlines()
    assert alarms[0].split()[:2] == ["STATE", "ALARM"]
    assert any("offpath-default-dlq-depth" in line for line in alarms)

    assert run(target, "stats", "--minutes", "10") == OK
    stats = capsys.readouterr().out.splitlines()
    assert stats[0].split()[:3] == ["QUEUE", "JOB_TYPE", "SUBMITTED"]


def test_an_admin_lists_the_system_tenants_jobs(target: Target, capsys: pytest.CaptureFixture[str]) -> None:
    code = run(target, "jobs", "--tenant", "system")

    assert code == OK
    assert capsys.readouterr().out.splitlines()[0].split()[:3] == ["JOB_ID", "TYPE", "STATUS"]


def test_submit_with_tags_and_list_by_tag(target: Target, capsys: pytest.CaptureFixture[str]) -> None:
    customer = f"cli-tags-{uuid.uuid4().hex[:8]}"  # this run's own: a live target keeps earlier runs' jobs
    assert run(target, "submit", "demo.echo", "--tag", f"customer={customer}", "--tag", "tier=gold", "--json") == OK
    job_id = json.loads(capsys.readouterr().out)["job_id"]

    assert run(target, "jobs", "--tag", f"customer:{customer}", "--json") == OK
    listed = json.loads(capsys.readouterr().out)["jobs"]
    assert run(target, "status", job_id) == OK
    shown = capsys.readouterr().out

    assert [job["job_id"] for job in listed] == [job_id]
    assert f"customer={customer}, tier=gold" in shown


def test_pause_and_resume_a_job_type_print_its_state(target: Target, capsys: pytest.CaptureFixture[str]) -> None:
    try:
        assert run(target, "pause", "type", "demo.sleep", "--reason", "cli check") == OK
        paused = capsys.readouterr().out.strip()
        assert run(target, "pause", "type", "demo.sleep") == OK
        again = capsys.readouterr().out.strip()
        assert run(target, "job-types") == OK
        listed = capsys.readouterr().out.splitlines()
    finally:
        assert run(target, "resume", "type", "demo.sleep") == OK
    resumed = capsys.readouterr().out.strip()

    assert re.fullmatch(r"job type demo\.sleep paused since \S+Z \(cli check\)", paused), paused
    assert again == paused.replace(" paused since", " already paused since")
    # The PAUSED column (since TIME), then LIMITS ("-": demo.sleep has none).
    assert listed[1].split()[:1] + listed[1].split()[-3:-2] == ["demo.sleep", "since"], "paused types come first"
    assert resumed == "job type demo.sleep resumed"


def test_pausing_an_unknown_queue_exits_1(target: Target, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(target, "pause", "queue", "nope") == REFUSED
    assert "404 not_found: no such queue" in capsys.readouterr().err
