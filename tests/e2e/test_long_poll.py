"""Waiting without polling, over HTTP against any target: `offpath submit --wait` and
`offpath status --wait` long-poll `GET /jobs/{id}?wait=N`, so a 10-second job takes a handful of requests;
a waiting request does not hold up the others."""

from __future__ import annotations

import json
import threading
from collections import Counter
from typing import Any

import pytest

from offpath_local.cli import main
from offpath_local.client import ApiClient
from tests.e2e.target import Target
from tests.e2e.test_cli import target_options

# At most a handful: the submit, then one long poll per 20 s (two when a poll ends just before the job does).
HANDFUL = 4


@pytest.fixture
def requests(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Every request the command line sends, by method and path (the query left out)."""
    sent: Counter[str] = Counter()
    real_send = ApiClient.send

    def counted(self: ApiClient, method: str, target: str, data: bytes | None, headers: dict[str, str]) -> Any:
        sent[f"{method} {target.split('?', 1)[0]}"] += 1
        return real_send(self, method, target, data, headers)

    monkeypatch.setattr(ApiClient, "send", counted)
    return sent


def test_submit_wait_on_a_10_second_job_makes_a_handful_of_requests(
    target: Target, requests: Counter[str], capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["submit", *target_options(target), "demo.sleep", "--payload", '{"ms": 10000}', "--wait", "--json"])

    job = json.loads(capsys.readouterr().out)
    assert code == 0
    assert job["status"] == "SUCCEEDED"
    assert job["result"] == {"slept_ms": 10000}
    assert requests["POST /jobs"] == 1
    assert sum(requests.values()) <= HANDFUL, requests


def test_status_wait_waits_for_the_end(
    target: Target, requests: Counter[str], capsys: pytest.CaptureFixture[str]
) -> None:
    job_id = target.submit("demo.sleep", {"ms": 2000}).body["job_id"]
    requests.clear()

    code = main(["status", *target_options(target), job_id, "--wait"])

    out = capsys.readouterr().out
    assert code == 0
    assert "SUCCEEDED" in out
    assert sum(requests.values()) <= 3, requests


def test_a_waiting_request_lets_the_others_through(target: Target) -> None:
    """The embedded api function answers one request at a time; a wait gives it up between its reads."""
    job_id = target.submit("demo.sleep", {"ms": 6000}).body["job_id"]
    answered: list[str] = []
    waiting = threading.Thread(
        target=lambda: answered.append(target.call("GET", f"/jobs/{job_id}?wait=20").body["status"])
    )
    waiting.start()
    try:
        listing = target.call("GET", "/jobs?limit=5")
        # The listing came back while the wait was still open: the job takes 6 s, the wait ends with it.
        assert listing.status == 200
        assert answered == []
    finally:
        waiting.join(timeout=30)
    assert answered == ["SUCCEEDED"]


def test_a_bad_wait_is_refused_over_http(target: Target) -> None:
    job_id = target.submit("demo.echo", {}).body["job_id"]

    answer = target.call("GET", f"/jobs/{job_id}?wait=25")

    assert answer.status == 422
    assert answer.body["error"]["field"] == "wait"
