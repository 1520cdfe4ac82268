"""`make smoke URL=...` (`offpath smoke`), run against the embedded runtime as a stand-in for a live stack:
its API with a bearer token, its emulator's CloudWatch alarms and SQS DLQs in place of AWS's. The dashboard,
which the embedded runtime does not make, is put into the emulator as `make deploy` would put it on AWS."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest

from offpath_local.cli import main
from offpath_tools.ledger import TOKEN, LedgerRuntime
from tests.e2e.conftest import wait_for

pytestmark = pytest.mark.needs("embedded")
EMULATOR_LINE = re.compile(r"^\s*emulator\s+(http://127\.0\.0\.1:\d+)", re.MULTILINE)
ALARM = "offpath-default-dlq-depth"


@pytest.fixture(scope="module")
def stand_in(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LedgerRuntime, str]]:
    """A runtime of its own: the redrive step needs a DLQ that holds nothing but the smoke's message."""
    data_dir: Path = tmp_path_factory.mktemp("smoke")
    local = LedgerRuntime.launch(data_dir, alarm_interval_s=0.3)
    try:
        endpoint = wait_for(lambda: _emulator(local.console), timeout_s=10)
        yield local, endpoint
    finally:
        local.stop()


def _emulator(console: Path) -> str | None:
    match = EMULATOR_LINE.search(console.read_text())
    return match.group(1) if match else None


def smoke(local: LedgerRuntime, endpoint: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    args = ["smoke", "--api", local.url, "--token", TOKEN, "--aws-endpoint", endpoint]
    code = main([*args, "--poll", "0.2", "--timeout", "60", "--alarm-timeout", "60"])
    return code, capsys.readouterr().out


def put_dashboard(endpoint: str) -> None:
    """What `make deploy` makes on AWS and the embedded runtime does not: the dashboard named after the prefix."""
    cloudwatch = boto3.client("cloudwatch", endpoint_url=endpoint, region_name="us-east-1")
    widget = {"type": "text", "x": 0, "y": 0, "width": 6, "height": 2, "properties": {"markdown": "offpath"}}
    cloudwatch.put_dashboard(DashboardName="offpath", DashboardBody=json.dumps({"widgets": [widget]}))


def statuses(report: str) -> dict[str, str]:
    return {m.group(2): m.group(1) for m in re.finditer(r"^\s+(PASS|FAIL|SKIP)\s+(\w+)", report, re.MULTILINE)}


def test_smoke_reports_each_check_and_exits_1_on_a_failure_then_0_when_all_pass(
    stand_in: tuple[LedgerRuntime, str], capsys: pytest.CaptureFixture[str]
) -> None:
    local, endpoint = stand_in
    cloudwatch = boto3.client("cloudwatch", endpoint_url=endpoint, region_name="us-east-1")

    code, report = smoke(local, endpoint, capsys)

    assert code == 1, report
    assert statuses(report) == {
        "health": "PASS",
        "submit": "PASS",
        "poison": "PASS",
        "dlq": "PASS",
        "alarm": "PASS",
        "redrive": "PASS",
        "dashboard": "FAIL",
        "cleanup": "PASS",
    }, report
    assert "no CloudWatch dashboard named offpath" in report
    assert "7 passed, 1 failed, 0 skipped" in report
    # The smoke removed its own message from the DLQ: the alarm returns to OK.
    wait_for(
        lambda: cloudwatch.describe_alarms(AlarmNames=[ALARM])["MetricAlarms"][0]["StateValue"] == "OK" or None,
        timeout_s=20,
    )

    put_dashboard(endpoint)
    code, report = smoke(local, endpoint, capsys)

    assert code == 0, report
    assert set(statuses(report).values()) == {"PASS"}, report
    assert "8 passed, 0 failed, 0 skipped" in report


def test_smoke_skips_the_redrive_when_the_dlq_held_other_messages(
    stand_in: tuple[LedgerRuntime, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """A redrive moves the whole DLQ back: never someone else's dead jobs."""
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
    wait_for(lambda: int(sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=[depth])["Attributes"][depth]) or None)

    code, report = smoke(local, endpoint, capsys)

    assert code == 0, report
    assert statuses(report)["redrive"] == "SKIP"
    assert "the DLQ held 1 message(s) before this run" in report
    remaining = int(sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=[depth])["Attributes"][depth])
    assert remaining == 1  # the other job's message is still there; only the smoke's was removed


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
