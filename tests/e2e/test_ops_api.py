"""The operations routes of the embedded runtime over HTTP: retry by hand, the per-minute statistics (the
runtime's own aggregation of the functions' metric lines) and the alarms (the emulator's, with the changes
the alarm evaluator made)."""

from __future__ import annotations

from tests.e2e.conftest import TOKEN_B, Local, wait_for


def test_a_failed_job_retried_over_http_succeeds(local: Local) -> None:
    job_id = local.submit("demo.poison", {"reason": "once", "first_run_only": True}).body["job_id"]
    local.wait_for_job(job_id, {"FAILED"}, timeout_s=30)

    answer = local.call("POST", f"/jobs/{job_id}/retry")
    again = local.call("POST", f"/jobs/{job_id}/retry")

    assert (answer.status, answer.body["status"], answer.body["retries"]) == (202, "QUEUED", 1)
    assert again.status == 409, "a job back in the queue is not retried twice"
    done = local.wait_for_job(job_id, {"SUCCEEDED"}, timeout_s=30)
    assert (done["retries"], done["result"]) == (1, {"recovered": True})
    assert [a["outcome"] for a in done["attempt_history"]] == ["FAILED", "SUCCEEDED"]


def test_stats_count_the_jobs_of_the_last_minutes_for_an_admin_only(local: Local) -> None:
    job_id = local.submit("demo.echo", {"stats": True}).body["job_id"]
    local.wait_for_job(job_id, {"SUCCEEDED"})

    def counted() -> list[dict[str, object]] | None:
        rows = local.call("GET", "/stats?minutes=5").body["minutes"]
        echo = [r for r in rows if r["job_type"] == "demo.echo" and r["succeeded"]]
        return echo or None

    rows = wait_for(counted, timeout_s=20)
    assert rows[-1]["queue"] == "default"
    assert rows[-1]["duration_p50_s"] is not None
    assert local.call("GET", "/stats?minutes=1", token=TOKEN_B).status == 403


def test_alarms_are_the_stacks_with_their_states(local: Local) -> None:
    answer = local.call("GET", "/alarms")

    assert answer.status == 200
    names = [a["name"] for a in answer.body["alarms"]]
    assert "offpath-default-dlq-depth" in names
    assert {a["state"] for a in answer.body["alarms"]} <= {"OK", "ALARM", "INSUFFICIENT_DATA"}
    assert isinstance(answer.body["changes"], list)
    assert local.call("GET", "/alarms", token=TOKEN_B).status == 403
