"""A batch over HTTP, against any target: five jobs, one of them poison; its on_complete runs exactly once and its
on_success never."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from offpath_local.cli import main
from tests.e2e.target import Target


def test_a_batch_with_a_poison_job_completes_once_and_never_succeeds(target: Target) -> None:
    marker = uuid.uuid4().hex
    jobs: list[dict[str, Any]] = [{"type": "demo.echo", "payload": {"n": i, "marker": marker}} for i in range(4)]
    jobs.append({"type": "demo.poison", "payload": {"reason": f"poison row {marker}"}})
    created = target.call(
        "POST",
        "/batches",
        body={
            "jobs": jobs,
            "on_complete": {"type": "demo.echo", "payload": {"callback": "complete", "marker": marker}},
            "on_success": {"type": "demo.echo", "payload": {"callback": "success", "marker": marker}},
        },
    )
    assert created.status == 202, created.body
    batch_id = created.body["batch_id"]
    assert (created.body["total"], created.body["pending"]) == (5, 5)

    def complete() -> dict[str, Any] | None:
        batch = target.call("GET", f"/batches/{batch_id}").body
        return batch if batch["status"] == "COMPLETE" and batch["on_complete_job_id"] else None

    batch = target.wait_for(complete, timeout_s=60)
    members = target.call("GET", f"/batches/{batch_id}/jobs?limit=10").body["jobs"]
    for member in members:
        if member["type"] == "demo.poison":
            target.parked.add(member["job_id"])
    assert (batch["succeeded"], batch["failed"], batch["pending"]) == (4, 1, 0)
    assert batch["on_success_job_id"] is None
    callback = target.wait_for_job(batch["on_complete_job_id"], {"SUCCEEDED", "FAILED"}, timeout_s=30)
    assert callback["status"] == "SUCCEEDED"
    assert callback["result"] == {"callback": "complete", "marker": marker}
    assert callback["callback_of"] == batch_id

    # Exactly one callback job of this batch exists, and the batch never succeeds.
    listed = target.call("GET", "/jobs?type=demo.echo&limit=100").body["jobs"]
    assert [j["job_id"] for j in listed if j.get("callback_of") == batch_id] == [batch["on_complete_job_id"]]
    again = target.call("GET", f"/batches/{batch_id}").body
    assert (again["status"], again["on_success_job_id"]) == ("COMPLETE", None)


def test_the_command_line_lists_batches_and_shows_one_with_its_progress(
    target: Target, capsys: pytest.CaptureFixture[str]
) -> None:
    created = target.call(
        "POST",
        "/batches",
        body={
            "jobs": [{"type": "demo.echo", "payload": {"n": i}} for i in range(3)],
            "on_success": {"type": "demo.echo", "payload": {"callback": "success"}},
        },
    )
    batch_id = created.body["batch_id"]
    done = target.wait_for(
        lambda: (lambda b: b if b["on_success_job_id"] else None)(target.call("GET", f"/batches/{batch_id}").body),
        timeout_s=60,
    )
    options = ["--api", target.url, *(["--token", target.token] if target.token else [])]

    assert main(["batches", *options, "--limit", "5"]) == 0
    listed = capsys.readouterr().out
    assert main(["batches", *options, batch_id]) == 0
    shown = capsys.readouterr().out

    assert listed.splitlines()[0].split() == [
        "BATCH_ID",
        "STATUS",
        "TOTAL",
        "PENDING",
        "SUCCEEDED",
        "FAILED",
        "CANCELLED",
        "CREATED",
    ]
    assert f"{batch_id}  SUCCEEDED  3" in listed
    assert f"progress   [{'#' * 30}] 3/3" in shown
    assert "counts     pending 0; succeeded 3" in shown
    assert f"on_success demo.echo: {done['on_success_job_id']}" in shown
    assert sum(1 for line in shown.splitlines() if "demo.echo  SUCCEEDED" in line) == 3
