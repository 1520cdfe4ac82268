"""The operations routes over HTTP, against any target: retry by hand, the per-minute statistics (on the embedded
runtime its own aggregation of the functions' metric lines) and the alarms with their states."""

from __future__ import annotations

import pytest

from tests.e2e.target import Target


def test_a_failed_job_retried_over_http_succeeds(target: Target) -> None:
    job_id = target.submit("demo.poison", {"reason": "once", "first_run_only": True}).body["job_id"]
    target.parked.add(job_id)
    target.wait_for_job(job_id, {"FAILED"}, timeout_s=30)

    answer = target.call("POST", f"/jobs/{job_id}/retry")
    again = target.call("POST", f"/jobs/{job_id}/retry")
    # The retry took its dead letter out of the DLQ (one it missed counts as another's: the safe side).
    target.parked.discard(job_id)

    assert (answer.status, answer.body["status"], answer.body["retries"]) == (202, "QUEUED", 1)
    assert again.status == 409, "a job back in the queue is not retried twice"
    done = target.wait_for_job(job_id, {"SUCCEEDED"}, timeout_s=30)
    assert (done["retries"], done["result"]) == (1, {"recovered": True})
    assert [a["outcome"] for a in done["attempt_history"]] == ["FAILED", "SUCCEEDED"]


@pytest.mark.needs("tenant_b")
def test_stats_count_the_jobs_of_the_last_minutes_for_an_admin_only(target: Target) -> None:
    job_id = target.submit("demo.echo", {"stats": True}).body["job_id"]
    target.wait_for_job(job_id, {"SUCCEEDED"})

    def counted() -> list[dict[str, object]] | None:
        rows = target.call("GET", "/stats?minutes=5").body["minutes"]
        echo = [r for r in rows if r["job_type"] == "demo.echo" and r["succeeded"]]
        return echo or None

    # Embedded: the runtime's own aggregation, at once. Deployed: CloudWatch, a minute or two behind.
    rows = target.wait_for(counted, timeout_s=60, interval_s=0.5)
    assert rows[-1]["queue"] == "default"
    assert rows[-1]["duration_p50_s"] is not None
    assert target.call("GET", "/stats?minutes=1", tenant="b").status == 403


@pytest.mark.needs("tenant_b")
def test_alarms_are_the_stacks_with_their_states(target: Target) -> None:
    answer = target.call("GET", "/alarms")

    assert answer.status == 200
    names = [a["name"] for a in answer.body["alarms"]]
    assert any(name.endswith("-default-dlq-depth") for name in names), names  # <prefix>-default-dlq-depth
    assert {a["state"] for a in answer.body["alarms"]} <= {"OK", "ALARM", "INSUFFICIENT_DATA"}
    assert isinstance(answer.body["changes"], list)
    assert target.call("GET", "/alarms", tenant="b").status == 403
