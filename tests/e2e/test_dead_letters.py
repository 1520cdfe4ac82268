"""Dead letters by hand over HTTP against the embedded runtime: a hand retry takes the job's dead letter off the DLQ,
a discard removes it and leaves the job FAILED, marked, and a redrive after it does not run the job."""

from __future__ import annotations

from tests.e2e.conftest import TOKEN_B, Local, wait_for


def dlq_depth(local: Local) -> int:
    answer = local.call("GET", "/queues")
    assert answer.status == 200, answer.body
    return int(next(q for q in answer.body["queues"] if q["name"] == "default")["dlq_depth"])


def redrive_status(local: Local) -> str | None:
    queue = next(q for q in local.call("GET", "/queues").body["queues"] if q["name"] == "default")
    return queue["redrive"]["status"] if isinstance(queue.get("redrive"), dict) else None


def failed_job(local: Local) -> str:
    job_id = str(local.submit("demo.poison", {"reason": "dead letter", "first_run_only": True}).body["job_id"])
    local.wait_for_job(job_id, {"FAILED"})
    return job_id


def test_a_hand_retry_takes_the_jobs_dead_letter_off_the_dlq(local: Local) -> None:
    job_id = failed_job(local)
    before = dlq_depth(local)

    answer = local.call("POST", f"/jobs/{job_id}/retry")

    assert answer.status == 202, answer.body
    assert dlq_depth(local) == before - 1
    assert local.wait_for_job(job_id, {"SUCCEEDED"})["retries"] == 1


def test_a_discarded_dead_letter_is_gone_and_a_redrive_does_not_run_its_job(local: Local) -> None:
    job_id = failed_job(local)
    before = dlq_depth(local)
    refused = local.call("DELETE", f"/queues/default/dead-letters/{job_id}", token=TOKEN_B)

    answer = local.call("DELETE", f"/queues/default/dead-letters/{job_id}")

    assert (refused.status, refused.body["error"]["code"]) == (403, "forbidden")
    assert answer.status == 200, answer.body
    assert (answer.body["status"], answer.body["discarded_at"] is not None) == ("FAILED", True)
    assert dlq_depth(local) == before - 1
    again = local.call("DELETE", f"/queues/default/dead-letters/{job_id}")
    assert (again.status, again.body["error"]["code"]) == (404, "not_found")

    assert local.call("POST", "/queues/default/redrive").status == 202
    wait_for(lambda: True if redrive_status(local) == "COMPLETED" else None)
    job = local.job(job_id)
    assert (job["status"], job["redrives"], job["discarded_at"]) == ("FAILED", 0, answer.body["discarded_at"])
