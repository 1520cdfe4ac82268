"""`make smoke URL=...` (`offpath smoke`), run against the embedded runtime as a stand-in for a live stack:
its API with a bearer token, its emulator's CloudWatch alarms and SQS DLQs in place of AWS's. The dashboard,
which the embedded runtime does not make, is put into the emulator as `make deploy` would put it on AWS."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest

from offpath_local.cli import main
from offpath_tools.ledger import TOKEN, LedgerRuntime
from tests.e2e.conftest import ROOT, wait_for

pytestmark = pytest.mark.needs("embedded")
ALARM = "offpath-default-dlq-depth"
CHECKS = ("health", "submit", "poison", "dlq", "alarm", "redrive", "dashboard", "cleanup")


@pytest.fixture(scope="module")
def stand_in(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LedgerRuntime, str]]:
    """A runtime of its own: the redrive step needs a DLQ that holds nothing but the smoke's message."""
    data_dir: Path = tmp_path_factory.mktemp("smoke")
    local = LedgerRuntime.launch(data_dir, alarm_interval_s=0.3)
    try:
        endpoint = wait_for(lambda: _emulator(data_dir), timeout_s=10)
        yield local, endpoint
    finally:
        local.stop()


def _emulator(data_dir: Path) -> str | None:
    """The emulator's endpoint, secret prefix included: in the data directory's local.json, its owner's only."""
    try:
        return str(json.loads((data_dir / "local.json").read_text())["emulator"])
    except (OSError, ValueError, KeyError):
        return None


def smoke(local: LedgerRuntime, endpoint: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """The exit code and the report (standard output; the progress goes to standard error)."""
    args = ["smoke", "--api", local.url, "--token", TOKEN, "--aws-endpoint", endpoint]
    code = main([*args, "--poll", "0.2", "--timeout", "60", "--alarm-timeout", "60"])
    return code, capsys.readouterr().out


REPORT_SHAPE = [
    r"offpath smoke: http://127\.0\.0\.1:\d+ \(prefix offpath, queue default, run [0-9a-f]{12}\)",
    r"  time     \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC \(\d+\.\d s\)",
    *(rf"  [✓✗-] (PASS|FAIL|SKIP)  {name:<10} +\d+\.\d s  .*" for name in CHECKS),
    r"  created  demo\.echo job [0-9a-f]{32}; demo\.poison job [0-9a-f]{32}",
    r"  cleaned  .+",
    r"  left     .+",
    r"offpath smoke: \d passed, \d failed, \d skipped",
]


def assert_shape(report: str) -> list[str]:
    """One screen a person pastes into a ticket: the target, the time, each check, the ids, the clean-up."""
    lines = report.rstrip("\n").split("\n")
    assert len(lines) == len(REPORT_SHAPE), report
    for line, shape in zip(lines, REPORT_SHAPE, strict=True):
        assert re.fullmatch(shape, line), (shape, line)
    assert max(len(line) for line in lines) <= 160, report
    return lines


def put_dashboard(endpoint: str) -> None:
    """What `make deploy` makes on AWS and the embedded runtime does not: the dashboard named after the prefix."""
    cloudwatch = boto3.client("cloudwatch", endpoint_url=endpoint, region_name="us-east-1")
    widget = {"type": "text", "x": 0, "y": 0, "width": 6, "height": 2, "properties": {"markdown": "offpath"}}
    cloudwatch.put_dashboard(DashboardName="offpath", DashboardBody=json.dumps({"widgets": [widget]}))


def statuses(report: str) -> dict[str, str]:
    found = re.finditer(r"^  ([✓✗-]) (PASS|FAIL|SKIP)  (\w+)", report, re.MULTILINE)
    marks = {"PASS": "✓", "FAIL": "✗", "SKIP": "-"}
    assert all(marks[m.group(2)] == m.group(1) for m in re.finditer(r"^  ([✓✗-]) (PASS|FAIL|SKIP)", report, re.M))
    return {m.group(3): m.group(2) for m in found}


def test_smoke_reports_each_check_and_exits_1_on_a_failure_then_0_when_all_pass(
    stand_in: tuple[LedgerRuntime, str], capsys: pytest.CaptureFixture[str]
) -> None:
    local, endpoint = stand_in
    cloudwatch = boto3.client("cloudwatch", endpoint_url=endpoint, region_name="us-east-1")

    code, report = smoke(local, endpoint, capsys)

    assert code == 1, report
    lines = assert_shape(report)
    assert statuses(report) == {
        "health": "PASS",
        "submit": "PASS",
        "poison": "PASS",
        "dlq": "PASS",
        "alarm": "PASS",
        "redrive": "PASS",
        "dashboard": "FAIL",
        "cleanup": "SKIP",
    }, report
    assert "✗ FAIL  dashboard" in report and "no CloudWatch dashboard named offpath" in report
    poison = re.search(r"demo\.poison job ([0-9a-f]{32})", lines[-4]).group(1)  # type: ignore[union-attr]
    assert lines[-3] == f"  cleaned  job {poison}'s dead letter (redriven; the job SUCCEEDED)"
    assert lines[-2] == "  left     nothing"
    assert lines[-1] == "offpath smoke: 6 passed, 1 failed, 1 skipped"
    # The redriven job succeeded: its message left the DLQ, and the alarm returns to OK.
    wait_for(
        lambda: cloudwatch.describe_alarms(AlarmNames=[ALARM])["MetricAlarms"][0]["StateValue"] == "OK" or None,
        timeout_s=60,
    )

    put_dashboard(endpoint)
    code, report = smoke(local, endpoint, capsys)

    assert code == 0, report
    assert_shape(report)
    assert set(statuses(report).values()) == {"PASS", "SKIP"}, report
    assert "offpath smoke: 7 passed, 0 failed, 1 skipped" in report


def test_smoke_skips_the_redrive_when_the_dlq_held_other_messages(
    stand_in: tuple[LedgerRuntime, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """A redrive moves the whole DLQ back: never someone else's dead jobs. The smoke retries its own by hand (the
    retry takes its message out of the DLQ) and never receives the DLQ's messages itself."""
    local, endpoint = stand_in
    put_dashboard(endpoint)
    api = local.api()
    try:
        job_id = api.call("POST", "/jobs", {"type": "demo.poison", "payload": {"reason": "not the smoke's"}})
        assert job_id.status == 202, job_id.body
    finally:
        api.close()
    sqs = boto3.client("sqs", endpoint_url=endpoint, region_name="us-east-1")
    dlq = sqs.get_queue_url(QueueName="offpath-default-dlq")["QueueUrl"]
    depth = "ApproximateNumberOfMessages"
    # Three attempts with backoff, then the DLQ: seconds on a quiet machine, longer beside a loaded test run.
    wait_for(
        lambda: int(sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=[depth])["Attributes"][depth]) or None,
        timeout_s=120,
    )

    code, report = smoke(local, endpoint, capsys)

    assert code == 0, report
    lines = assert_shape(report)
    assert (statuses(report)["redrive"], statuses(report)["cleanup"]) == ("SKIP", "PASS")
    assert "the DLQ held 1 message(s) before this run" in report
    poison = re.search(r"demo\.poison job ([0-9a-f]{32})", lines[-4]).group(1)  # type: ignore[union-attr]
    assert lines[-3] == f"  cleaned  job {poison} retried by hand (SUCCEEDED)"
    assert lines[-2] == "  left     nothing"
    other = local.api()
    try:
        assert other.call("GET", f"/jobs/{job_id.body['job_id']}").body["status"] == "FAILED"
        assert other.call("GET", f"/jobs/{poison}").body["status"] == "SUCCEEDED"
    finally:
        other.close()
    remaining = int(sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=[depth])["Attributes"][depth])
    assert remaining == 1  # the other job's message untouched; the smoke's own removed by the hand retry


def test_smoke_without_an_api_answering_fails_at_health_and_skips_the_rest(
    capsys: pytest.CaptureFixture[str], unused_port: int
) -> None:
    code = main(
        ["smoke", "--api", f"http://127.0.0.1:{unused_port}", "--token", "x", "--aws-endpoint", "http://127.0.0.1:1"]
    )

    report = capsys.readouterr().out
    assert code == 1
    assert statuses(report)["health"] == "FAIL"
    assert set(list(statuses(report).values())[1:]) == {"SKIP"}
    assert "cannot connect" in report


@pytest.fixture
def unused_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_make_deploy_prints_the_smoke_command_with_the_stacks_api_url(tmp_path: Path) -> None:
    url = "https://abc123.execute-api.eu-west-1.amazonaws.com/"
    outputs = tmp_path / "deploy-outputs.json"
    outputs.write_text(json.dumps({"offpath": {"TableName": "offpath-jobs", "ApiUrl": url}}))

    planned = subprocess.run(["make", "-n", "deploy"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    printed = subprocess.run(
        [sys.executable, "-c", f"from offpath_local.smoke import print_next_steps; print_next_steps({str(outputs)!r})"],
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert "--outputs-file cdk.out/deploy-outputs.json" in planned.stdout
    assert 'print_next_steps("cdk.out/deploy-outputs.json")' in planned.stdout
    assert printed.returncode == 0, printed.stderr
    assert f"  make smoke URL={url}\n" in printed.stdout
    assert f"  make e2e URL={url} SIGV4=1\n" in printed.stdout
