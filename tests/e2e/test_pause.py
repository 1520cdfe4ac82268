"""Pause and resume over HTTP against the embedded runtime: a paused queue class is not polled, its jobs (submitted
or coming due from a schedule while it is paused) stay QUEUED without an attempt, and run once it is resumed."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

from offpath.logic.pause import PAUSE_FLAGS_TTL_S
from tests.e2e.conftest import TOKEN_B, Local, wait_for

# How long the test watches the paused queue's jobs stay QUEUED (no assertion on how fast anything happens).
WATCH_S = 3


def default_queue(local: Local) -> dict[str, object]:
    answer = local.call("GET", "/queues")
    assert answer.status == 200, answer.body
    return dict(next(q for q in answer.body["queues"] if q["name"] == "default"))


def test_a_paused_queue_keeps_its_jobs_queued_without_an_attempt_and_runs_them_once_resumed(local: Local) -> None:
    refused = local.call("POST", "/queues/default/pause", token=TOKEN_B)
    paused = local.call("POST", "/queues/default/pause", body={"reason": "e2e: migration"})
    assert (refused.status, refused.body["error"]["code"]) == (403, "forbidden")
    assert (paused.status, paused.body["paused"]) == (200, True), paused.body
    # A receive already waiting when the pause came may still hand a worker a message; the worker's pause flags
    # are then at most PAUSE_FLAGS_TTL_S old (the documented staleness bound): past it, it holds every job back.
    time.sleep(PAUSE_FLAGS_TTL_S + 1)
    try:
        ids = [str(local.submit("demo.echo", {"n": n}).body["job_id"]) for n in range(3)]
        # Due in 10 s: in 0.2 s of the runtime's scheduler clock (60 times real time here), so it comes due while
        # paused; its message's SQS delay is real time, and it is visible 10 s after the submit.
        run_at = (datetime.now(UTC) + timedelta(seconds=10)).isoformat().replace("+00:00", "Z")
        delayed = local.call("POST", "/jobs", body={"type": "demo.echo", "payload": {"n": 9}, "run_at": run_at})
        assert delayed.status == 202, delayed.body
        ids.append(str(delayed.body["job_id"]))
        local.wait_for_job(ids[-1], {"QUEUED"}, timeout_s=60)
        time.sleep(WATCH_S)

        for job_id in ids:
            job = local.job(job_id)
            assert (job["status"], job["attempts"]) == ("QUEUED", 0), job
        shown = default_queue(local)
        assert (shown["paused"], shown["pause_reason"], shown["paused_at"]) == (
            True,
            "e2e: migration",
            paused.body["paused_at"],
        )
        again = local.call("POST", "/queues/default/pause", body={"reason": "another"})
        assert (again.status, again.body["changed"], again.body["paused_at"]) == (200, False, paused.body["paused_at"])
        assert int(again.body["waiting"]) >= 4, "its jobs and any the schedules made meanwhile"
    finally:
        resumed = local.call("POST", "/queues/default/resume")
    assert (resumed.status, resumed.body["paused"], resumed.body["changed"]) == (200, False, True)

    for job_id in ids:
        # A worker that saw the pause put the message back for PAUSED_QUEUE_WAIT_S and reads the pause again before
        # it believes it: well within two minutes, on a loaded machine too.
        job = local.wait_for_job(job_id, {"SUCCEEDED", "FAILED"}, timeout_s=150)
        assert (job["status"], job["attempts"]) == ("SUCCEEDED", 1), job
    assert wait_for(lambda: default_queue(local)["paused"] is False or None)


def test_a_paused_queues_age_alarm_is_shown_paused(local: Local) -> None:
    local.call("POST", "/queues/default/pause")
    try:
        alarms = local.call("GET", "/alarms")
    finally:
        local.call("POST", "/queues/default/resume")

    assert alarms.status == 200, alarms.body
    age = next(a for a in alarms.body["alarms"] if a["name"].endswith("-default-oldest-message-age"))
    assert age["state"] == "PAUSED"
    assert age["reason"].startswith("queue default is paused since ")
