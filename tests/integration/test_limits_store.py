"""The job types' concurrency slots and rate-limit buckets on the jobs table (adapters/dynamodb_limits.py), against
moto: the same checks run against the in-memory fake the unit tests use; then the worker handler end to end: a
dead worker's slot frees at its lease's end, fenced by the attempt."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from offpath.adapters.dynamodb_limits import DynamoDbLimits, slots_key
from offpath.adapters.dynamodb_store import key_of, plain_values
from offpath.domain.job import JobStatus
from offpath.domain.limits import LimitStore
from offpath.logic.limits import concurrency, lease_bound_s, scope_of
from offpath_local.resources import Resources
from offpath_tools.clocks import ManualClock
from offpath_tools.fakes import InMemoryLimits
from tests.integration.conftest import Pipeline, RecordingMetrics

S = 1_000_000  # microseconds


@pytest.fixture(params=["dynamodb", "memory"])
def limits(request: pytest.FixtureRequest) -> LimitStore:
    if request.param == "memory":
        return InMemoryLimits()
    resources: Resources = request.getfixturevalue("resources")
    clients: dict[str, Any] = request.getfixturevalue("clients")
    return DynamoDbLimits(resources.table_name, client=clients["dynamodb"])


def acquirer(limits: LimitStore, scope: str = "t#k") -> Callable[..., float]:
    def acquire(job_id: str, attempt: int = 1, *, now: int = 0, until: int = 100 * S, limit: int = 2) -> float:
        return limits.acquire(scope, job_id=job_id, attempt=attempt, until_us=until, now_us=now, limit=limit)

    return acquire


def test_slots_up_to_the_limit_then_a_wait_until_one_may_be_free(limits: LimitStore) -> None:
    acquire = acquirer(limits)

    assert (acquire("a"), acquire("b")) == (0, 0)
    assert acquire("c", now=10 * S) == 90  # until the earliest holder's time is up
    assert acquirer(limits, "t#other")("c") == 0  # another key has slots of its own

    limits.release("t#k", job_id="a", attempt=1)
    assert acquire("c", now=10 * S) == 0
    assert acquire("d", now=10 * S) > 0


def test_an_acquire_met_again_by_a_retry_of_its_own_write_holds_its_slot(limits: LimitStore) -> None:
    acquire = acquirer(limits)

    assert acquire("a", until=50 * S) == 0
    assert acquire("a", until=50 * S) == 0  # the same attempt and time: this acquire's own write
    assert acquire("b", limit=1) > 0  # still one holder


def test_a_holder_whose_time_is_up_is_taken_over_and_its_late_release_frees_nothing(limits: LimitStore) -> None:
    acquire = acquirer(limits)
    assert (acquire("dead", until=5 * S), acquire("live", until=50 * S)) == (0, 0)

    assert acquire("next", now=4 * S) > 0
    assert acquire("next", now=6 * S, until=60 * S) == 0  # the dead worker's slot, at its time's end

    limits.release("t#k", job_id="dead", attempt=1)  # the dead attempt's release (it was not dead after all)
    assert acquire("another", now=7 * S) > 0  # both slots still held: by "live" and "next"


def test_a_jobs_own_slot_of_an_earlier_attempt_waits_while_live_and_is_taken_over_when_up(limits: LimitStore) -> None:
    acquire = acquirer(limits)
    assert acquire("j", attempt=1, until=5 * S) == 0

    assert acquire("j", attempt=2, now=1 * S, until=20 * S) == 4  # attempt 1 may still run
    assert acquire("j", attempt=2, now=6 * S, until=20 * S) == 0

    limits.release("t#k", job_id="j", attempt=1)  # fenced: attempt 2's slot stays
    assert acquire("x", now=7 * S, limit=1) > 0
    limits.release("t#k", job_id="j", attempt=2)
    assert acquire("x", now=7 * S, limit=1) == 0


def test_a_bucket_starts_its_burst_then_one_start_per_interval(limits: LimitStore) -> None:
    def take(now: float) -> float:
        return limits.take("t#rated", per_s=2.0, bucket=2, now_us=int(now * S))

    assert (take(100), take(100)) == (0, 0)  # the bucket of 2
    assert take(100) == pytest.approx(0.5)
    assert take(100.5) == 0
    assert take(100.5) == pytest.approx(0.5)
    assert take(110) == 0  # refilled after a quiet spell
    assert take(110) == 0
    assert take(110) > 0


def test_reading_the_holders_and_the_next_start_takes_nothing(limits: LimitStore) -> None:
    acquire = acquirer(limits)
    assert limits.holders("t#k") == {}
    assert (acquire("a", until=50 * S), acquire("b", attempt=2, until=60 * S)) == (0, 0)

    assert limits.holders("t#k") == {"a": (1, 50 * S), "b": (2, 60 * S)}
    assert limits.holders("t#k") == {"a": (1, 50 * S), "b": (2, 60 * S)}  # read twice: nothing was taken

    def next_start(now: float) -> float:
        return limits.next_start_s("t#rated", per_s=2.0, bucket=2, now_us=int(now * S))

    assert next_start(100) == 0  # never used: full
    assert [limits.take("t#rated", per_s=2.0, bucket=2, now_us=100 * S) for _ in range(2)] == [0, 0]
    assert (next_start(100), next_start(100), next_start(100.5)) == (pytest.approx(0.5), pytest.approx(0.5), 0)
    assert limits.take("t#rated", per_s=2.0, bucket=2, now_us=int(100.5 * S)) == 0  # the read took no start


def test_the_slots_item_counts_its_holders(resources: Resources, clients: dict[str, Any]) -> None:
    limits = DynamoDbLimits(resources.table_name, client=clients["dynamodb"])
    acquire = acquirer(limits)
    acquire("a", until=5 * S)
    acquire("b")
    acquire("c", now=6 * S)  # takes a's slot over
    limits.release("t#k", job_id="b", attempt=1)

    item = plain_values(
        clients["dynamodb"].get_item(TableName=resources.table_name, Key=key_of(slots_key("t#k")))["Item"]
    )
    assert item["n"] == 1 and sorted(k for k in item if k.startswith("h_")) == ["h_c"]
    assert item["v"] == 1 and item["expires_at"] > 0


# -- through the worker handler ------------------------------------------------------------------------------


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(datetime.now(UTC).replace(microsecond=0))


@pytest.fixture
def limited(
    resources: Resources, clients: dict[str, Any], registry: Any, metrics: RecordingMetrics, clock: ManualClock
) -> Pipeline:
    return Pipeline(resources, clients, registry, metrics, clock=clock)


def test_a_dead_workers_slot_frees_at_its_leases_end_and_the_waiting_job_then_runs_once(
    limited: Pipeline, clock: ManualClock, metrics: RecordingMetrics
) -> None:
    jobs = []
    for n in range(3):
        status, body, _ = limited.submit("demo.limited", {"account": "acme", "ms": 0})
        assert status == 202, body
        jobs.append(body["job_id"])
    services = limited.worker_services("critical")
    job_type = limited.registry.job_types["demo.limited"]
    # Two workers took a slot and the claim of the first two jobs, then died.
    for job_id in jobs[:2]:
        job = limited.store.get(job_id, tenant="tenant-a")
        assert job is not None
        assert concurrency(job, job_type, services.ports, now=clock.now()) is None
        limited.store.claim(job_id, tenant=job.tenant, now=clock.now(), lease_until=clock.now() + timedelta(seconds=30))
    messages = {m["MessageId"]: m for m in limited.receive("critical", 10)}
    third = next(m for m in messages.values() if jobs[2] in m["Body"])

    answer = limited.invoke_worker([third], "critical")

    assert answer == {"batchItemFailures": [{"itemIdentifier": third["MessageId"]}]}
    waiting = limited.store.get(jobs[2], tenant="tenant-a")
    assert waiting is not None and (waiting.status, waiting.attempt) == (JobStatus.QUEUED, 0)
    assert metrics.counts.get("AdmissionWaits") == 1
    code, view, _ = limited.call("GET", f"/jobs/{jobs[2]}")
    assert code == 200, view
    assert view["waiting_on"] == {
        "reason": "concurrency",
        "message": "2 of the 2 allowed at once for its key are running",
        "holders": sorted(jobs[:2]),
        "until": None,
    }

    clock.advance(lease_bound_s(job_type, services.ports))
    code, view, _ = limited.call("GET", f"/jobs/{jobs[2]}")
    assert view["waiting_on"] is None, "both holders' time is up: the next look takes a slot over"
    assert limited.invoke_worker([third], "critical") == {"batchItemFailures": []}

    done = limited.store.get(jobs[2], tenant="tenant-a")
    assert done is not None and (done.status, done.attempt) == (JobStatus.SUCCEEDED, 1)
    # Its own slot was released after its outcome; one dead worker's slot was taken over (both ended at the same
    # time: whichever the store met first), the other's is still there until taken over.
    item = plain_values(
        limited.clients["dynamodb"].get_item(
            TableName=limited.resources.table_name, Key=key_of(slots_key(scope_of(job_type, done)))
        )["Item"]
    )
    holders = [k for k in item if k.startswith("h_")]
    assert item["n"] == 1 and len(holders) == 1 and holders[0] in {f"h_{jobs[0]}", f"h_{jobs[1]}"}


def test_a_job_whose_limit_cannot_be_read_is_answered_without_why_it_waits(limited: Pipeline) -> None:
    from offpath.domain.errors import StoreUnavailableError

    class Unreadable(InMemoryLimits):
        def holders(self, scope: str) -> dict[str, tuple[int, int]]:
            raise StoreUnavailableError("DynamoDB InternalServerError")

    status, body, _ = limited.submit("demo.limited", {"account": "acme", "ms": 0})
    assert status == 202, body
    limited.api_services.limits = Unreadable()

    code, view, _ = limited.call("GET", f"/jobs/{body['job_id']}")

    assert code == 200, view
    assert (view["status"], view["waiting_on"]) == ("QUEUED", None)
