"""Waiting without polling, over HTTP against any target: `offpath submit --wait` and
`offpath status --wait` long-poll `GET /jobs/{id}?wait=N`, so a 10-second job takes a handful of requests;
a waiting request does not hold up the others."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from offpath_local.cli import main
from offpath_local.client import ApiClient
from tests.e2e.conftest import TOKEN_B, Local, wait_for
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


WAITS_PER_TENANT = 5  # the runtime's default (OFFPATH_WAITS_PER_TENANT)
# The bound the task sets for another tenant's answers while one tenant holds its waits: generous, as a loaded
# machine answers a submit in well under 0.5 s.
OTHERS_BOUND_S = 2.0


def test_one_tenants_waits_never_hold_up_another_tenants_submit_or_read(local: Local) -> None:
    # Given tenant A holding 3x its cap of waits at once, on a job that cannot finish during them
    later = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
    job_id = local.call("POST", "/jobs", body={"type": "demo.echo", "payload": {}, "run_at": later}).body["job_id"]
    b_job = local.submit("demo.echo", {}, token=TOKEN_B).body["job_id"]
    answers: list[Any] = []
    waits = [
        threading.Thread(target=lambda: answers.append(local.call("GET", f"/jobs/{job_id}?wait=10")))
        for _ in range(3 * WAITS_PER_TENANT)
    ]
    for thread in waits:
        thread.start()
    try:
        # Those past the cap are refused at once; the others hold their waits
        wait_for(lambda: len(answers) >= 2 * WAITS_PER_TENANT or None, timeout_s=8)

        # When tenant B submits and reads
        started = time.monotonic()
        submitted = local.submit("demo.echo", {}, token=TOKEN_B)
        submit_s = time.monotonic() - started
        started = time.monotonic()
        read = local.call("GET", f"/jobs/{b_job}", token=TOKEN_B)
        read_s = time.monotonic() - started
        still_waiting = len(answers) < len(waits)
    finally:
        for thread in waits:
            thread.join(timeout=30)

    # Then B is answered at once, while A's waits were still open
    assert (submitted.status, read.status) == (202, 200)
    assert submit_s < OTHERS_BOUND_S and read_s < OTHERS_BOUND_S, (submit_s, read_s)
    assert still_waiting
    # And A's waits past its cap got 429 with Retry-After, in the error envelope
    statuses = sorted(answer.status for answer in answers)
    assert statuses == [200] * WAITS_PER_TENANT + [429] * (2 * WAITS_PER_TENANT), statuses
    for refused in (answer for answer in answers if answer.status == 429):
        assert refused.body["error"]["code"] == "quota_exceeded"
        assert refused.body["error"]["field"] == "wait"
        assert int(refused.headers["retry-after"]) >= 1
