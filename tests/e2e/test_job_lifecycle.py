"""The demo job types through their whole life cycle, over HTTP, against any target: the embedded runtime by
default, or the deployment `make e2e URL=...` names (tests/e2e/target.py)."""

from __future__ import annotations

import threading
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.e2e.target import Target


def test_echo_job_succeeds_with_its_payload_as_result(target: Target) -> None:
    submitted = target.submit("demo.echo", {"hello": "world"})
    assert submitted.status == 202
    assert submitted.body["status"] == "QUEUED"
    assert submitted.headers["location"] == f"/jobs/{submitted.body['job_id']}"

    job = target.wait_for_job(submitted.body["job_id"], {"SUCCEEDED", "FAILED"})

    assert job["status"] == "SUCCEEDED"
    assert job["result"] == {"hello": "world"}
    assert job["attempts"] == 1


def test_sleep_job_reports_its_progress_while_running(target: Target) -> None:
    job_id = target.submit("demo.sleep", {"ms": 1200}).body["job_id"]
    seen: list[float] = []

    def finished() -> dict[str, object] | None:
        job = target.job(job_id)
        if job["status"] == "RUNNING" and job["progress"]:
            seen.append(job["progress"]["fraction"])
        return job if job["status"] in {"SUCCEEDED", "FAILED"} else None

    job = target.wait_for(finished, timeout_s=20)

    assert job["status"] == "SUCCEEDED"
    assert job["progress"] == {"fraction": 1.0, "message": "slept 1200 ms"}
    assert any(0 < fraction < 1 for fraction in seen), seen


def test_flaky_job_is_retried_then_succeeds(target: Target) -> None:
    job_id = target.submit("demo.flaky", {"fail_first": 2}).body["job_id"]

    job = target.wait_for_job(job_id, {"SUCCEEDED", "FAILED"}, timeout_s=25)

    assert job["status"] == "SUCCEEDED"
    assert job["attempts"] == 3
    assert job["result"] == {"succeeded_on_attempt": 3}


def test_poison_job_fails_at_once_and_lands_in_the_dlq(target: Target) -> None:
    job_id = target.submit("demo.poison", {"reason": "bad input"}).body["job_id"]
    target.parked.add(job_id)

    job = target.wait_for_job(job_id, {"SUCCEEDED", "FAILED"})

    assert job["status"] == "FAILED"
    assert job["attempts"] == 1
    assert "bad input" in job["error"]
    default = target.wait_for(
        lambda: next(
            (q for q in target.call("GET", "/queues").body["queues"] if q["name"] == "default" and q["dlq_depth"] >= 1),
            None,
        )
    )
    assert default["dlq_depth"] >= 1


def test_concurrent_submits_with_one_idempotency_key_make_one_job(target: Target) -> None:
    key = f"order-{uuid.uuid4()}"
    answers = []
    lock = threading.Lock()

    def submit() -> None:
        answer = target.submit("demo.echo", {"order": 42}, headers={"Idempotency-Key": key})
        with lock:
            answers.append(answer)

    threads = [threading.Thread(target=submit) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert sorted(a.status for a in answers) == [200] * 19 + [202]
    assert len({a.body["job_id"] for a in answers}) == 1
    replays = [a for a in answers if a.status == 200]
    assert all(a.headers.get("idempotent-replayed") == "true" for a in replays)
    job = target.wait_for_job(answers[0].body["job_id"], {"SUCCEEDED", "FAILED"})
    assert job["status"] == "SUCCEEDED"
    assert job["attempts"] == 1


@pytest.mark.needs("tenant_b")
def test_a_tenant_cannot_see_another_tenants_jobs(target: Target) -> None:
    job_id = target.submit("demo.echo", {"secret": "a"}).body["job_id"]

    other = target.call("GET", f"/jobs/{job_id}", tenant="b")
    listed = target.call("GET", "/jobs?limit=100", tenant="b")

    assert other.status == 404
    assert other.body["error"]["code"] == "not_found"
    assert listed.status == 200
    assert job_id not in {j["job_id"] for j in listed.body["jobs"]}


@pytest.mark.needs("tenant_b")
def test_concurrent_submits_of_two_tenants_each_get_their_own_job(target: Target) -> None:
    """The api's environments answer at once (locally: threads of one process, each with its own services):
    no request is answered with another's job, tenant or payload."""
    per_tenant = 12
    answers: dict[tuple[str, int], Any] = {}

    def submit(tenant: str, n: int) -> None:
        answers[(tenant, n)] = target.submit("demo.echo", {"tenant": tenant, "n": n}, tenant=tenant)

    threads = [threading.Thread(target=submit, args=(t, n)) for n in range(per_tenant) for t in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert {key: answer.status for key, answer in answers.items()} == {key: 202 for key in answers}
    assert len({answer.body["job_id"] for answer in answers.values()}) == 2 * per_tenant
    for (tenant, n), answer in answers.items():
        job_id = answer.body["job_id"]
        job = target.wait_for(
            lambda: _if_final(target.job(job_id, tenant=tenant)),
            timeout_s=40,
        )
        assert (job["status"], job["result"]) == ("SUCCEEDED", {"tenant": tenant, "n": n})
        other = "b" if tenant == "a" else "a"
        assert target.call("GET", f"/jobs/{answer.body['job_id']}", tenant=other).status == 404


def test_a_scheduled_job_can_be_cancelled_before_it_runs(target: Target) -> None:
    run_at = (datetime.now(UTC) + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    submitted = target.call("POST", "/jobs", body={"type": "demo.echo", "payload": {}, "run_at": run_at})
    assert submitted.status == 202
    assert submitted.body["status"] == "SCHEDULED"

    cancelled = target.call("POST", f"/jobs/{submitted.body['job_id']}/cancel")

    assert cancelled.status == 200
    assert cancelled.body["status"] == "CANCELLED"
    assert target.job(submitted.body["job_id"])["status"] == "CANCELLED"


def test_a_callers_traceparent_is_the_jobs_trace_from_submit_to_its_end(target: Target) -> None:
    trace = uuid.uuid4().hex
    submitted = target.submit("demo.echo", {"n": 1}, headers={"traceparent": f"00-{trace}-00f067aa0ba902b7-01"})
    assert submitted.status == 202
    assert submitted.body["trace_id"] == trace

    job = target.wait_for_job(submitted.body["job_id"], {"SUCCEEDED", "FAILED"})

    assert (job["status"], job["trace_id"]) == ("SUCCEEDED", trace)


def test_an_invalid_traceparent_is_ignored_and_the_job_gets_a_trace_of_its_own(target: Target) -> None:
    submitted = target.submit("demo.echo", {"n": 1}, headers={"traceparent": "00-not-a-trace-01"})

    assert submitted.status == 202
    assert len(submitted.body["trace_id"]) == 32
    assert submitted.body["trace_id"] != "not"


def _if_final(job: dict[str, Any]) -> dict[str, Any] | None:
    return job if job["status"] in {"SUCCEEDED", "FAILED"} else None
