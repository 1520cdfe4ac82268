"""Chains over HTTP, against any target: each step sees its parent's id and result (`ctx.parent`), the steps run in
order, and a failing step stops the chain there."""

from __future__ import annotations

from typing import Any

from tests.e2e.target import Target

FINAL = {"SUCCEEDED", "FAILED", "CANCELLED"}


def chain(*types: str) -> dict[str, Any]:
    spec: dict[str, Any] | None = None
    for job_type in reversed(types[1:]):
        spec = {"type": job_type, "payload": {}, **({"then": spec} if spec else {})}
    return {"type": types[0], "payload": {"start": 1}, "then": spec}


def next_of(target: Target, job_id: str) -> str:
    """The chain's next job's id, once the job has ended and its next job exists (its id is fixed by the success, the
    job made right after)."""
    next_id = str(target.wait_for_job(job_id, FINAL, timeout_s=60)["next_job_id"])
    target.wait_for(lambda: target.call("GET", f"/jobs/{next_id}").status == 200 or None, timeout_s=60)
    return next_id


def test_a_three_step_chain_runs_in_order_each_step_seeing_the_one_before(target: Target) -> None:
    submitted = target.call("POST", "/jobs", body=chain("demo.step", "demo.step", "demo.step"))
    assert submitted.status == 202, submitted.body
    assert submitted.body["chain"] == "pending"
    first_id = submitted.body["job_id"]

    second_id = next_of(target, first_id)
    third_id = next_of(target, second_id)
    third = target.wait_for_job(third_id, FINAL, timeout_s=60)
    first, second = target.job(first_id), target.job(second_id)

    assert [j["status"] for j in (first, second, third)] == ["SUCCEEDED"] * 3
    assert [j["result"] for j in (first, second, third)] == [
        {"n": 1, "parent_job_id": None},
        {"n": 2, "parent_job_id": first_id},
        {"n": 3, "parent_job_id": second_id},
    ]
    assert [j["parent_job_id"] for j in (first, second, third)] == [None, first_id, second_id]
    assert [j["chain"] for j in (first, second, third)] == ["continued", "continued", None]
    assert first["finished_at"] <= second["started_at"] and second["finished_at"] <= third["started_at"]


def test_a_chain_whose_middle_step_is_poison_stops_there(target: Target) -> None:
    submitted = target.call("POST", "/jobs", body=chain("demo.step", "demo.poison", "demo.step"))
    assert submitted.status == 202, submitted.body
    middle_id = next_of(target, submitted.body["job_id"])
    target.parked.add(middle_id)

    middle = target.wait_for_job(middle_id, FINAL, timeout_s=60)

    assert (middle["status"], middle["chain"], middle["next_job_id"]) == ("FAILED", "stopped", None)
    assert middle["parent_job_id"] == submitted.body["job_id"]
    listed = target.call("GET", "/jobs?type=demo.step&limit=100")
    steps_of_this_chain = [j for j in listed.body["jobs"] if j["job_id"] == submitted.body["job_id"]]
    assert len(steps_of_this_chain) == 1
    assert all(j.get("parent_job_id") != middle_id for j in listed.body["jobs"])
