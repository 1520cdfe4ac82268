"""Bulk actions through the embedded runtime: five poison jobs FAILED, a bulk retry retries each once (their
dead letters taken off the DLQ, then back when they fail again); and `offpath bulk` prints the preview, asks,
and follows the progress to the end. Each test acts on jobs it tagged with a tag of its own, so the runtime's
other jobs are never touched."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from offpath_local.cli import main
from tests.e2e.conftest import Local, wait_for
from tests.e2e.target import Target
from tests.e2e.test_cli import target_options
from tests.e2e.test_metrics import scrape, value

OK, REFUSED, USAGE = 0, 1, 2


def dlq_depth(local: Local) -> int:
    answer = local.call("GET", "/queues")
    assert answer.status == 200, answer.body
    return int(next(q for q in answer.body["queues"] if q["name"] == "default")["dlq_depth"])


def dead_lettered(local: Local) -> float:
    return value(scrape(local), "offpath_jobs_dead_lettered_total", job_type="demo.poison")


def test_a_bulk_retry_of_five_failed_poison_jobs_retries_each_once(local: Local) -> None:
    tag = f"bulk-e2e:{uuid.uuid4().hex[:12]}"
    key, _, label = tag.partition(":")
    base = dlq_depth(local)
    ids = [
        local.call(
            "POST", "/jobs", body={"type": "demo.poison", "payload": {"reason": "bulk"}, "tags": {key: label}}
        ).body["job_id"]
        for _ in range(5)
    ]
    for job_id in ids:
        local.wait_for_job(job_id, {"FAILED"})
    wait_for(lambda: True if dlq_depth(local) == base + 5 else None)
    wait_for(lambda: True if dead_lettered(local) >= 5 else None)
    counted = dead_lettered(local)

    preview = local.call("POST", "/jobs/bulk", body={"action": "retry", "filter": {"tag": tag}, "dry_run": True})
    assert preview.status == 200, preview.body
    assert (preview.body["count"], preview.body["exact"]) == (5, True)
    assert sorted(s["job_id"] for s in preview.body["sample"]) == sorted(ids)

    started = local.call("POST", "/jobs/bulk", body={"action": "retry", "filter": {"status": "FAILED", "tag": tag}})
    assert started.status == 202, started.body
    operation = wait_for(
        lambda: (
            answer.body
            if (answer := local.call("GET", f"/jobs/bulk/{started.body['operation_id']}")).body["status"] != "running"
            else None
        )
    )
    assert (operation["status"], operation["matched"], operation["done"], operation["skipped"]) == (
        "finished",
        5,
        5,
        0,
    )

    # Each fails again (poison), after one more attempt: retried by hand once, two attempts in its history.
    def failed_again(job_id: str) -> dict[str, object] | None:
        job = local.job(job_id)
        return job if job["status"] == "FAILED" and len(job["attempt_history"]) == 2 else None

    for job_id in ids:
        job = wait_for(lambda job_id=job_id: failed_again(job_id))  # type: ignore[misc]
        assert job["retries"] == 1
        assert [a["outcome"] for a in job["attempt_history"]] == ["FAILED", "FAILED"]
    # Their first dead letters were taken off the DLQ by the retry; the second ones are there: five, not ten.
    wait_for(lambda: True if dead_lettered(local) >= counted + 5 else None)
    assert dlq_depth(local) == base + 5


def run(target: Target, *args: str) -> int:
    return main([args[0], *target_options(target), *args[1:]])


def delayed_jobs(target: Target, tag: str, count: int) -> list[str]:
    key, _, label = tag.partition(":")
    run_at = (datetime.now(UTC) + timedelta(days=30)).isoformat().replace("+00:00", "Z")
    ids = []
    for _ in range(count):
        answer = target.call(
            "POST", "/jobs", body={"type": "demo.echo", "payload": {}, "run_at": run_at, "tags": {key: label}}
        )
        assert answer.status == 202, answer.body
        ids.append(answer.body["job_id"])
    return ids


def test_offpath_bulk_previews_then_follows_the_operation_to_its_end(
    target: Target, capsys: pytest.CaptureFixture[str]
) -> None:
    tag = f"bulk-cli:{uuid.uuid4().hex[:12]}"
    ids = delayed_jobs(target, tag, 3)

    code = run(target, "bulk", "cancel", "--tag", tag, "--status", "scheduled", "--yes")

    out = capsys.readouterr().out.splitlines()
    assert code == OK
    assert out[0].startswith("cancel: 3 job(s) match (tenant ")
    assert out[0].endswith(f", status SCHEDULED, tag {tag})")
    assert out[1].split() == ["JOB_ID", "TYPE", "STATUS", "CREATED"]
    assert sorted(line.split()[0] for line in out[2:5]) == sorted(ids)
    assert out[5].startswith("operation ")
    assert out[-1] == "finished: 3 matched, 3 done, 0 skipped, 0 failed"
    assert {target.job(i)["status"] for i in ids} == {"CANCELLED"}


def test_offpath_bulk_dry_run_changes_nothing_and_a_question_needs_a_terminal_or_yes(
    target: Target, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    tag = f"bulk-cli:{uuid.uuid4().hex[:12]}"
    ids = delayed_jobs(target, tag, 2)

    assert run(target, "bulk", "cancel", "--tag", tag, "--dry-run") == OK
    dry = capsys.readouterr().out.splitlines()
    assert dry[0].startswith("cancel: 2 job(s) match")
    assert len(dry) == 4  # the line, the sample's header and its two jobs

    monkeypatch.setattr("sys.stdin.isatty", lambda: False)
    assert run(target, "bulk", "cancel", "--tag", tag) == USAGE
    assert "add --yes to cancel 2 job(s) without a question" in capsys.readouterr().err

    # A terminal's question answered "n": nothing is done.
    monkeypatch.setattr("sys.stdin.isatty", lambda: True)
    monkeypatch.setattr("builtins.input", lambda question: "n")
    assert run(target, "bulk", "cancel", "--tag", tag) == REFUSED
    assert capsys.readouterr().out.splitlines()[-1] == "nothing done"
    assert {target.job(i)["status"] for i in ids} == {"SCHEDULED"}
