"""`GET /jobs/{id}?wait=N` through the api handler against moto: it answers within a second of the job
finishing, or at N seconds with the job as it is then, with a bounded number of reads. Time is a fake the
test moves: the handler's pauses advance it, and the worker runs the job when it says the job finishes."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

import pytest

from offpath.adapters.dynamodb_waits import DynamoDbWaitSlots
from offpath.logic.waiting import max_reads
from tests.integration.conftest import Pipeline, aws_calls


class FakeTime:
    """A monotonic clock that moves only when the handler pauses; `at(t, action)` runs `action` once the
    clock has reached t (the job finishing while the handler waits)."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.start = self.now
        self.slept: list[float] = []
        self._due: list[tuple[float, Callable[[], object]]] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds
        for when, action in [d for d in self._due if d[0] <= self.now - self.start]:
            self._due.remove((when, action))
            action()

    def at(self, elapsed: float, action: Callable[[], object]) -> None:
        self._due.append((elapsed, action))

    @property
    def elapsed(self) -> float:
        return self.now - self.start


@pytest.fixture
def fake_time(pipeline: Pipeline) -> FakeTime:
    fake = FakeTime()
    pipeline.api_services = dataclasses.replace(pipeline.api_services, sleep=fake.sleep, monotonic=fake.monotonic)
    return fake


def submitted(pipeline: Pipeline) -> str:
    status, job, _ = pipeline.submit("demo.echo", {"n": 1})
    assert status == 202, job
    return str(job["job_id"])


@pytest.mark.parametrize("finishes_at", [0.05, 0.35, 1.4, 7.3, 12.0, 19.95])
def test_the_answer_comes_within_a_second_of_the_job_finishing(
    pipeline: Pipeline, fake_time: FakeTime, finishes_at: float
) -> None:
    job_id = submitted(pipeline)
    fake_time.at(finishes_at, pipeline.drain)

    status, job, _ = pipeline.call("GET", f"/jobs/{job_id}?wait=20")

    assert status == 200
    assert job["status"] == "SUCCEEDED"
    assert finishes_at <= fake_time.elapsed <= finishes_at + 1.0


def test_a_job_already_final_is_answered_at_once(pipeline: Pipeline, fake_time: FakeTime) -> None:
    job_id = submitted(pipeline)
    pipeline.drain()

    status, job, _ = pipeline.call("GET", f"/jobs/{job_id}?wait=20")

    assert (status, job["status"]) == (200, "SUCCEEDED")
    assert fake_time.slept == []


def test_at_the_end_of_the_wait_the_job_is_answered_as_it_is(pipeline: Pipeline, fake_time: FakeTime) -> None:
    job_id = submitted(pipeline)
    calls = aws_calls(pipeline.clients["dynamodb"])

    status, job, _ = pipeline.call("GET", f"/jobs/{job_id}?wait=20")

    assert (status, job["status"]) == (200, "QUEUED")
    assert fake_time.elapsed == pytest.approx(20.0)
    # The reads are bounded: the first, then one after each pause (0.1 s doubling to 1 s); and the pause state,
    # once (the job is answered waiting: why, `waiting_on`; cached per environment for 10 s).
    assert calls["DynamoDB.GetItem"] == max_reads(20) + 1 == 25
    # And the wait's slot: taken, then given back.
    assert calls["DynamoDB.UpdateItem"] == 2
    assert sum(calls.values()) == calls["DynamoDB.GetItem"] + 2


def test_a_wait_too_short_to_pause_answers_at_once(pipeline: Pipeline, fake_time: FakeTime) -> None:
    """Any positive number is a valid wait (the document says so); one under a pause reads once."""
    job_id = submitted(pipeline)

    status, job, _ = pipeline.call("GET", f"/jobs/{job_id}?wait=5e-324")

    assert (status, job["status"]) == (200, "QUEUED")
    assert fake_time.slept == []


def test_a_short_wait_ends_at_its_seconds(pipeline: Pipeline, fake_time: FakeTime) -> None:
    job_id = submitted(pipeline)

    status, job, _ = pipeline.call("GET", f"/jobs/{job_id}?wait=2.5")

    assert (status, job["status"]) == (200, "QUEUED")
    assert fake_time.elapsed == pytest.approx(2.5)


@pytest.mark.parametrize("wait", ["0", "21", "abc", "-3", "3e1", "", "inf"])
def test_a_bad_wait_is_a_422_naming_it_before_any_read(pipeline: Pipeline, fake_time: FakeTime, wait: str) -> None:
    job_id = submitted(pipeline)
    calls = aws_calls(pipeline.clients["dynamodb"])

    status, body, _ = pipeline.call("GET", f"/jobs/{job_id}?wait={wait}")

    assert status == 422
    assert body["error"]["field"] == "wait"
    assert body["error"]["code"] == "invalid_request"
    assert calls["DynamoDB.GetItem"] == 0


def test_another_tenants_job_is_not_found_without_waiting(pipeline: Pipeline, fake_time: FakeTime) -> None:
    job_id = submitted(pipeline)

    status, body, _ = pipeline.call("GET", f"/jobs/{job_id}?wait=20", tenant="tenant-b")

    assert status == 404
    assert body["error"]["code"] == "not_found"
    assert fake_time.slept == []


# -- the cap on a tenant's waits at once (across environments), and leases ----------------------------------


@pytest.fixture
def slots(pipeline: Pipeline) -> DynamoDbWaitSlots:
    return DynamoDbWaitSlots(pipeline.resources.table_name, client=pipeline.clients["dynamodb"])


def test_past_the_cap_a_take_is_refused_until_a_slot_is_given_back(slots: DynamoDbWaitSlots) -> None:
    taken = [slots.take("tenant-a", f"w{n}", cap=3, now_s=1000, lease_s=30) for n in range(3)]

    refused = slots.take("tenant-a", "w3", cap=3, now_s=1005, lease_s=30)

    assert taken == [0, 0, 0]
    assert refused == 25  # until the first lease ends
    assert slots.take("tenant-b", "x", cap=3, now_s=1005, lease_s=30) == 0  # another tenant's count
    slots.release("tenant-a", "w1")
    assert slots.take("tenant-a", "w3", cap=3, now_s=1006, lease_s=30) == 0
    assert slots.take("tenant-a", "w4", cap=3, now_s=1006, lease_s=30) > 0


def test_a_slot_never_given_back_is_reclaimed_when_its_lease_ends(slots: DynamoDbWaitSlots) -> None:
    # Given a tenant at its cap, by waits whose functions died (never released)
    for n in range(2):
        assert slots.take("tenant-a", f"dead{n}", cap=2, now_s=1000, lease_s=30) == 0
    assert slots.take("tenant-a", "live", cap=2, now_s=1029, lease_s=30) > 0

    # When their leases have ended, a take reclaims them
    assert slots.take("tenant-a", "live", cap=2, now_s=1030, lease_s=30) == 0
    assert slots.take("tenant-a", "live2", cap=2, now_s=1030, lease_s=30) == 0

    # Then the count is right again: the cap holds, and a late release of a reclaimed slot changes nothing
    slots.release("tenant-a", "dead0")
    assert slots.take("tenant-a", "third", cap=2, now_s=1031, lease_s=30) > 0
    slots.release("tenant-a", "live")
    assert slots.take("tenant-a", "third", cap=2, now_s=1031, lease_s=30) == 0


def test_a_wait_past_the_tenants_cap_is_a_429_with_retry_after(
    pipeline: Pipeline, fake_time: FakeTime, slots: DynamoDbWaitSlots
) -> None:
    # Given tenant-a's 5 slots held by waits in other environments
    job_id = submitted(pipeline)
    for n in range(5):
        assert slots.take("tenant-a", f"other{n}", cap=5, now_s=time.time(), lease_s=12) == 0

    status, body, headers = pipeline.call("GET", f"/jobs/{job_id}?wait=2")

    assert status == 429
    assert body["error"] == {
        "code": "quota_exceeded",
        "message": "over the limit of 5 waits at once per tenant; to follow many jobs use webhooks or the job "
        "event stream",
        "field": "wait",
    }
    assert 1 <= int(headers["Retry-After"]) <= 13
    assert fake_time.slept == []
    # A read without a wait, and another tenant's wait, are not limited by it
    assert pipeline.call("GET", f"/jobs/{job_id}")[0] == 200
    other = submitted_by(pipeline, "tenant-b")
    assert pipeline.call("GET", f"/jobs/{other}?wait=2", tenant="tenant-b")[0] == 200


def test_a_wait_takes_the_slot_of_a_dead_wait_whose_lease_ended(
    pipeline: Pipeline, fake_time: FakeTime, slots: DynamoDbWaitSlots
) -> None:
    job_id = submitted(pipeline)
    for n in range(5):
        assert slots.take("tenant-a", f"dead{n}", cap=5, now_s=time.time() - 60, lease_s=30) == 0

    status, job, _ = pipeline.call("GET", f"/jobs/{job_id}?wait=2")

    assert (status, job["status"]) == (200, "QUEUED")
    assert fake_time.elapsed == pytest.approx(2.0)


def submitted_by(pipeline: Pipeline, tenant: str) -> str:
    status, job, _ = pipeline.submit("demo.echo", {"n": 1}, tenant=tenant)
    assert status == 202, job
    return str(job["job_id"])
