"""Per-key concurrency and rate limits: the policy as `@job(...)` declares it, and the worker's admission with an
in-memory limit store (the DynamoDB one: tests/integration/test_limits_store.py)."""

from __future__ import annotations

import dataclasses
import logging
import random
from datetime import date, timedelta
from typing import Any

import pytest
from pydantic import BaseModel

from offpath.domain.backoff import Backoff
from offpath.domain.errors import (
    JobConflictError,
    JobNotFoundError,
    PermanentError,
    RegistryError,
    StoreUnavailableError,
)
from offpath.domain.job import Job, JobStatus
from offpath.domain.limits import Limits, LimitSpecError, limits_of, parse_rate_limit
from offpath.domain.ports import JobMessage, Ports
from offpath.domain.registry import LEASE_MARGIN_S, REGISTRY, JobType, Registry, job
from offpath.logic.admission import Wait, admit
from offpath.logic.holdups import Holdup, holdup
from offpath.logic.limits import lease_bound_s, release_slot, scope_of
from offpath.logic.process import Delivery, WorkerPolicy, WorkerPorts, process_record
from offpath_tools.clocks import ManualClock
from offpath_tools.fakes import (
    AnyPayload,
    InMemoryJobQueue,
    InMemoryJobStore,
    InMemoryLimits,
    RecordingMetrics,
    ScriptedJob,
)
from tests.unit.conftest import delivery_of, fails, submitted, unbounded

LIMITED = "test.limited"
RATED = "test.rated"
UNKEYED = "test.unkeyed"


# -- the policy --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "count", "per_s", "bucket"),
    [("10/s", 10, 1, 10), ("100/m", 100, 60, 2), ("2/s", 2, 1, 2), ("1/h", 1, 3600, 1), (" 30 / m ", 30, 60, 1)],
)
def test_a_rate_limit_is_a_count_per_second_minute_or_hour_with_a_bucket_of_one_second(
    text: str, count: int, per_s: int, bucket: int
) -> None:
    rule = parse_rate_limit(text)

    assert (rule.count, rule.per_s, rule.bucket) == (count, per_s, bucket)


@pytest.mark.parametrize("text", ["10", "10/d", "ten/s", "0/s", "-1/s", "10/s/m", "", "1.5/s", "20000/s"])
def test_a_rate_limit_written_wrongly_is_refused(text: str) -> None:
    with pytest.raises(LimitSpecError, match="rate_limit"):
        parse_rate_limit(text)


def test_a_bad_rate_limit_fails_the_job_types_import_with_a_clear_error() -> None:
    before = dict(REGISTRY.job_types)

    with pytest.raises(RegistryError, match=r"job type 'test.badrate': rate_limit '10 per second'.*COUNT/UNIT"):

        @job("test.badrate", payload=AnyPayload, rate_limit="10 per second")
        def bad(payload: Any, ctx: Any) -> None: ...

    assert REGISTRY.job_types == before


class Account(BaseModel):
    account: str
    customer: dict[str, Any] = {}


@pytest.mark.parametrize(
    ("declared", "message"),
    [
        ({"max_concurrency": 0}, "max_concurrency must be a whole number 1..100"),
        ({"max_concurrency": 101}, "max_concurrency must be a whole number 1..100"),
        ({"max_concurrency": True}, "max_concurrency must be a whole number"),
        ({"concurrency_key": "account"}, "concurrency_key needs max_concurrency or rate_limit"),
        ({"concurrency_key": "acc ount", "max_concurrency": 2}, "a payload field path"),
        ({"concurrency_key": "region", "max_concurrency": 2}, "the payload has no field 'region'"),
        ({"concurrency_key": 7, "max_concurrency": 2}, "a function of the payload"),
    ],
)
def test_limits_declared_wrongly_are_refused_at_registration(declared: dict[str, Any], message: str) -> None:
    with pytest.raises(RegistryError, match=message):
        job("test.badlimits", payload=Account, **declared)


def test_a_job_type_made_directly_is_checked_when_added_too() -> None:
    registry = Registry(queues=dict(REGISTRY.queues))
    too_many = JobType(
        "test.direct", lambda p, c: None, Account, "default", 3, 10, Backoff(), limits=Limits(max_concurrency=500)
    )

    with pytest.raises(RegistryError, match=r"job type 'test\.direct': max_concurrency must be a whole number"):
        registry.add_job_type(too_many)
    assert registry.job_types == {}


def test_a_key_is_a_field_path_or_a_function_of_the_payload() -> None:
    by_path = limits_of(concurrency_key="customer.id", max_concurrency=1, rate_limit=None)
    by_function = limits_of(concurrency_key=lambda p: p.account.upper(), max_concurrency=1, rate_limit=None)

    assert by_path.key_of({"customer": {"id": 42}}) == "42"
    assert by_path.key_of({"customer": {}}) == ""  # no value: the key "" (shared by every such job)
    assert by_path.key_of(Account(account="a", customer={"id": "c-1"})) == "c-1"
    assert by_function.key_of(Account(account="acme")) == "ACME"
    assert (by_path.key_text, by_function.key_text, Limits().key_text) == ("customer.id", "function", None)


def test_the_demo_types_declare_their_limits_and_are_open_to_tenants() -> None:
    from offpath.jobs import load_job_types

    registry = load_job_types(demo=True)
    limited, rated = registry.job_types["demo.limited"], registry.job_types["demo.rated"]

    assert (limited.limits.key_text, limited.limits.max_concurrency, limited.limits.rate_limit) == ("account", 2, None)
    assert rated.limits.rate_limit is not None and rated.limits.rate_limit.text == "2/s"
    assert (limited.submitted_by, rated.submitted_by) == ("tenant", "tenant")
    # Their queue class runs more jobs at once than two accounts' limits: the limit bounds them, not the pool.
    assert registry.queues[limited.queue].max_concurrency >= 4 and registry.batch_size(limited.queue) == 1


def test_keys_are_per_tenant_and_key_and_an_unkeyed_limit_is_the_whole_types() -> None:
    limited = JobType(LIMITED, lambda p, c: None, AnyPayload, "default", 3, 10, Backoff(), limits=keyed(2))
    unkeyed = dataclasses.replace(limited, name=UNKEYED, limits=Limits(max_concurrency=2))
    mine, other_account, other_tenant = (
        dataclasses.replace(j, payload={"account": a}, tenant=t)
        for j, a, t in [(_a_job(), "a", "t1"), (_a_job(), "b", "t1"), (_a_job(), "a", "t2")]
    )

    assert len({scope_of(limited, j) for j in (mine, other_account, other_tenant)}) == 3
    assert {scope_of(unkeyed, j) for j in (mine, other_account, other_tenant)} == {UNKEYED}


def test_a_thousand_keys_are_a_thousand_partition_keys() -> None:
    from offpath.adapters.dynamodb_limits import bucket_key, slots_key

    limited = JobType(LIMITED, lambda p, c: None, AnyPayload, "default", 3, 10, Backoff(), limits=keyed(2))
    jobs = [dataclasses.replace(_a_job(), payload={"account": f"account-{n}"}) for n in range(1000)]

    assert len({slots_key(scope_of(limited, j)) for j in jobs}) == 1000
    assert len({bucket_key(scope_of(limited, j), 0) for j in jobs}) == 1000
    assert max(len(slots_key(scope_of(limited, j))) for j in jobs) < 100  # any key text: a short partition key


# -- admission in the worker --------------------------------------------------------------------------


def keyed(max_concurrency: int | None = None, rate_limit: str | None = None) -> Limits:
    return limits_of(concurrency_key="account", max_concurrency=max_concurrency, rate_limit=rate_limit)


@pytest.fixture
def limits() -> InMemoryLimits:
    return InMemoryLimits()


@pytest.fixture
def limited_ports(
    registry: Registry, worker_ports: WorkerPorts, scripted: ScriptedJob, limits: InMemoryLimits
) -> WorkerPorts:
    for name, declared in [(LIMITED, keyed(2)), (RATED, keyed(rate_limit="2/s")), (UNKEYED, Limits(max_concurrency=1))]:
        registry.add_job_type(
            JobType(name, scripted, AnyPayload, "default", 3, 10, Backoff(base_s=2.0, cap_s=5.0), limits=declared)
        )
    return dataclasses.replace(worker_ports, limits=limits)


def run(delivery: Delivery, ports: WorkerPorts) -> bool:
    return process_record(delivery, ports, WorkerPolicy(queue="default"), unbounded)


def test_a_job_over_its_keys_concurrency_waits_unclaimed_and_another_key_runs(
    ports: Ports,
    limited_ports: WorkerPorts,
    scripted: ScriptedJob,
    store: InMemoryJobStore,
    queue: InMemoryJobQueue,
    limits: InMemoryLimits,
    metrics: RecordingMetrics,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="offpath.worker")
    first, second, third = (submitted(ports, LIMITED, {"account": "acme", "n": n}) for n in range(3))
    elsewhere = submitted(ports, LIMITED, {"account": "globex"})
    answers: dict[str, bool] = {}

    def nested(payload: Any, ctx: Any) -> Any:
        # While the first job runs, a second and then a third of its account are delivered (other workers).
        if ctx.job_id == first.job_id:
            answers["second"] = run(delivery_of(second, "m-2"), limited_ports)
        if ctx.job_id == second.job_id:
            answers["third"] = run(delivery_of(third, "m-3"), limited_ports)
            answers["elsewhere"] = run(delivery_of(elsewhere, "m-4"), limited_ports)
        return {"done": True}

    scripted.action = nested

    assert run(delivery_of(first, "m-1"), limited_ports) is True

    assert answers == {"second": True, "third": False, "elsewhere": True}
    waiting = store.get(third.job_id, tenant=third.tenant)
    assert waiting is not None and (waiting.status, waiting.attempt) == (JobStatus.QUEUED, 0)
    assert [(c.receipt_handle, c.timeout_s) for c in queue.visibility_changes] == [("rh-m-3", 2)]
    assert metrics.dimensioned[("AdmissionWaits", "default", LIMITED)] == metrics.counts["AdmissionWaits"] == 1
    [waits] = [r for r in caplog.records if r.getMessage().startswith("job waits")]
    assert (waits.getMessage(), waits.__dict__["retry_in_s"]) == ("job waits (concurrency); it goes back unclaimed", 2)
    # Every slot is free once the jobs' outcomes are written.
    assert all(not held for held in limits.slots.values())
    # The third comes back and runs, with its first attempt.
    assert run(delivery_of(third, "m-3"), limited_ports) is True
    done = store.get(third.job_id, tenant=third.tenant)
    assert done is not None and (done.status, done.attempt) == (JobStatus.SUCCEEDED, 1)


def test_a_waiting_job_looks_again_less_often_the_longer_it_has_waited(
    ports: Ports,
    limited_ports: WorkerPorts,
    store: InMemoryJobStore,
    queue: InMemoryJobQueue,
    limits: InMemoryLimits,
    clock: ManualClock,
) -> None:
    # The key's one slot is held for an hour by a job that runs elsewhere; the waiting job's wait is the largest
    # draw (the fixture's jitter): 2 s at first, a quarter of its wait so far, never more than 30 s.
    holder, waiting = submitted(ports, UNKEYED, {}), submitted(ports, UNKEYED, {})
    hour_us = int((clock.now() + timedelta(hours=1)).timestamp() * 1_000_000)
    assert limits.acquire(UNKEYED, job_id=holder.job_id, attempt=1, until_us=hour_us, now_us=0, limit=1) == 0
    looks = []
    for waited_s in (0, 20, 60, 600):
        clock.set(waiting.created_at + timedelta(seconds=waited_s))
        assert run(delivery_of(waiting, "m-2"), limited_ports) is False
        looks.append(queue.visibility_changes[-1].timeout_s)

    assert looks == [2, 5, 15, 30]
    still = store.get(waiting.job_id, tenant=waiting.tenant)
    assert still is not None and (still.status, still.attempt) == (JobStatus.QUEUED, 0)


def test_a_retrying_job_frees_its_slot_while_it_waits_for_its_backoff(
    ports: Ports, limited_ports: WorkerPorts, scripted: ScriptedJob, store: InMemoryJobStore, limits: InMemoryLimits
) -> None:
    def boom(payload: Any, ctx: Any) -> Any:
        raise RuntimeError("boom")

    scripted.action = boom
    job_ = submitted(ports, UNKEYED, {})

    assert run(delivery_of(job_), limited_ports) is False

    retrying = store.get(job_.job_id, tenant=job_.tenant)
    assert retrying is not None and retrying.status is JobStatus.RETRYING
    assert limits.held(UNKEYED) == {}


def test_a_dead_workers_slot_frees_at_its_leases_end_and_is_taken_over(
    ports: Ports,
    limited_ports: WorkerPorts,
    store: InMemoryJobStore,
    limits: InMemoryLimits,
    clock: ManualClock,
) -> None:
    dead, waiting = submitted(ports, UNKEYED, {}), submitted(ports, UNKEYED, {})
    # A worker took the slot and the claim for `dead`, then died.
    assert run_claim_and_die(dead, limited_ports, clock) == 1

    assert run(delivery_of(waiting, "m-2"), limited_ports) is False
    assert limits.held(UNKEYED) == {dead.job_id: 1}

    clock.advance(lease_bound_s(limited_ports.registry.job_types[UNKEYED], limited_ports))
    assert run(delivery_of(waiting, "m-2"), limited_ports) is True

    assert limits.held(UNKEYED) == {}
    finished = store.get(waiting.job_id, tenant=waiting.tenant)
    assert finished is not None and (finished.status, finished.attempt) == (JobStatus.SUCCEEDED, 1)


def run_claim_and_die(job_: Any, ports: WorkerPorts, clock: ManualClock) -> int:
    """What a worker that dies while running `job_` leaves: its slot and its claim (attempt 1)."""
    from offpath.logic.limits import concurrency

    assert concurrency(job_, ports.registry.job_types[job_.type], ports, now=clock.now()) is None
    now = clock.now()
    claimed = ports.store.claim(job_.job_id, tenant=job_.tenant, now=now, lease_until=now + timedelta(seconds=60))
    return claimed.attempt


def test_an_earlier_attempts_release_does_not_free_a_later_attempts_slot(limits: InMemoryLimits) -> None:
    assert limits.acquire("s", job_id="j", attempt=1, until_us=10, now_us=0, limit=1) == 0
    assert limits.acquire("s", job_id="j", attempt=2, until_us=30, now_us=20, limit=1) == 0  # 1's time is up

    limits.release("s", job_id="j", attempt=1)

    assert limits.held("s") == {"j": 2}


def test_jobs_over_their_keys_rate_start_when_a_token_is_due_without_spending_an_attempt(
    ports: Ports,
    limited_ports: WorkerPorts,
    store: InMemoryJobStore,
    queue: InMemoryJobQueue,
    clock: ManualClock,
) -> None:
    jobs = [submitted(ports, RATED, {"account": "acme"}) for _ in range(3)]
    other = submitted(ports, RATED, {"account": "globex"})

    answers = [run(delivery_of(j, f"m-{n}"), limited_ports) for n, j in enumerate(jobs)]

    assert answers == [True, True, False]  # a bucket of 2 (one second of "2/s"), then one every half second
    assert [(c.receipt_handle, c.timeout_s) for c in queue.visibility_changes] == [("rh-m-2", 1)]
    late = store.get(jobs[2].job_id, tenant=jobs[2].tenant)
    assert late is not None and (late.status, late.attempt) == (JobStatus.QUEUED, 0)
    assert run(delivery_of(other, "m-9"), limited_ports) is True  # another key's bucket
    clock.advance(0.5)
    assert run(delivery_of(jobs[2], "m-2"), limited_ports) is True


def test_a_waiting_message_on_its_last_receives_goes_back_as_a_fresh_delayed_copy(
    ports: Ports, limited_ports: WorkerPorts, queue: InMemoryJobQueue, limits: InMemoryLimits, clock: ManualClock
) -> None:
    blocker, waiting = submitted(ports, UNKEYED, {}), submitted(ports, UNKEYED, {})
    run_claim_and_die(blocker, limited_ports, clock)
    last = limited_ports.registry.max_receive_count("default")
    delivery = dataclasses.replace(delivery_of(waiting), receive_count=last)
    sent_before = len(queue.sent)

    assert run(delivery, limited_ports) is True  # this one acknowledged: its copy carries the job on

    assert [(s.message.job_id, s.delay_s) for s in queue.sent[sent_before:]] == [(waiting.job_id, 2)]


def test_a_type_without_limits_never_touches_the_limit_store(
    ports: Ports, limited_ports: WorkerPorts, limits: InMemoryLimits
) -> None:
    plain = submitted(ports, "test.scripted", {"account": "acme"})

    assert run(delivery_of(plain), limited_ports) is True

    assert (limits.acquires, limits.releases, limits.tats) == (0, 0, {})


def _a_job() -> Any:
    from tests.unit.conftest import a_job

    return a_job()


# -- admission's steps, one by one ----------------------------------------------------------------------------------


class Named(BaseModel):
    account: str | None = None


class Strict(BaseModel):
    account: str
    required_since_v2: int


def add(registry: Registry, scripted: ScriptedJob, name: str, declared: Limits, model: Any = AnyPayload) -> JobType:
    job_type = JobType(name, scripted, model, "default", 3, 10, Backoff(), limits=declared)
    registry.add_job_type(job_type)
    return job_type


def test_admission_given_a_message_reads_the_job_and_counts_it_under_its_key(
    ports: Ports, limited_ports: WorkerPorts, clock: ManualClock, limits: InMemoryLimits
) -> None:
    job_type = limited_ports.registry.job_types[LIMITED]
    jobs = [submitted(ports, LIMITED, {"account": "acme", "n": n}) for n in range(3)]
    other = submitted(ports, LIMITED, {"account": "globex"})

    verdicts = [admit(JobMessage.of(j), job_type, limited_ports, now=clock.now()) for j in [*jobs, other]]

    assert verdicts == [None, None, Wait(2, "concurrency"), None]
    assert limits.held(scope_of(job_type, other)) == {other.job_id: 1}


def test_a_keyed_rate_limit_given_a_message_reads_the_job_and_spends_its_keys_bucket(
    ports: Ports, limited_ports: WorkerPorts, clock: ManualClock
) -> None:
    job_type = limited_ports.registry.job_types[RATED]
    jobs = [submitted(ports, RATED, {"account": "acme", "n": n}) for n in range(3)]
    other = submitted(ports, RATED, {"account": "globex"})

    verdicts = [admit(JobMessage.of(j), job_type, limited_ports, now=clock.now()) for j in [*jobs, other]]

    assert verdicts == [None, None, Wait(1, "rate_limit"), None]


def test_admission_lets_a_job_not_written_or_already_final_go_to_the_claim_holding_nothing(
    ports: Ports, limited_ports: WorkerPorts, store: InMemoryJobStore, clock: ManualClock, limits: InMemoryLimits
) -> None:
    job_type = limited_ports.registry.job_types[UNKEYED]
    done = submitted(ports, UNKEYED, {})
    store.put(dataclasses.replace(done, status=JobStatus.SUCCEEDED))
    missing = dataclasses.replace(done, job_id="f" * 32)

    assert admit(JobMessage.of(missing), job_type, limited_ports, now=clock.now()) is None
    assert admit(JobMessage.of(done), job_type, limited_ports, now=clock.now()) is None
    assert limits.held(UNKEYED) == {}


def test_an_unkeyed_rate_limit_reads_no_job_and_says_why_its_job_waits(
    ports: Ports,
    registry: Registry,
    scripted: ScriptedJob,
    limited_ports: WorkerPorts,
    store: InMemoryJobStore,
    clock: ManualClock,
) -> None:
    job_type = add(
        registry,
        scripted,
        "test.rated.unkeyed",
        limits_of(concurrency_key=None, max_concurrency=None, rate_limit="1/s"),
    )
    first, second = (submitted(ports, job_type.name, {}) for _ in range(2))
    reads = len(store.reads)

    verdicts = [admit(JobMessage.of(j), job_type, limited_ports, now=clock.now()) for j in (first, second)]

    assert verdicts == [None, Wait(1, "rate_limit")]
    assert store.reads[reads:] == []


def test_the_job_page_sees_the_rate_admission_spent(
    ports: Ports, limited_ports: WorkerPorts, clock: ManualClock, limits: InMemoryLimits
) -> None:
    job_type = limited_ports.registry.job_types[RATED]
    jobs = [submitted(ports, RATED, {"account": "acme", "n": n}) for n in range(3)]
    for j in jobs[:2]:
        assert admit(j, job_type, limited_ports, now=clock.now()) is None

    held = holdup(jobs[2], job_type, pauses=None, limits=limits, now=clock.now())

    assert held == Holdup(
        "rate_limit",
        "rate limit 2/s for its key: the next start is free in 1 s",
        until=clock.now() + timedelta(seconds=0.5),
    )


def test_a_holder_whose_time_is_up_within_the_second_makes_the_job_look_again_in_a_second(
    ports: Ports, limited_ports: WorkerPorts, clock: ManualClock, limits: InMemoryLimits
) -> None:
    now_us = int(clock.now().timestamp() * 1_000_000)
    limits.acquire(UNKEYED, job_id="holder", attempt=1, until_us=now_us + 500_000, now_us=now_us, limit=1)
    job_ = submitted(ports, UNKEYED, {})

    verdict = admit(job_, limited_ports.registry.job_types[UNKEYED], limited_ports, now=clock.now())

    assert verdict == Wait(1, "concurrency")


def test_a_job_over_its_concurrency_looks_again_in_one_or_two_seconds_drawn_at_random(
    ports: Ports, limited_ports: WorkerPorts, clock: ManualClock
) -> None:
    drawing = dataclasses.replace(limited_ports, rng=random.Random(7))
    job_type = drawing.registry.job_types[UNKEYED]
    first, second = submitted(ports, UNKEYED, {}), submitted(ports, UNKEYED, {})
    assert admit(first, job_type, drawing, now=clock.now()) is None

    verdict = admit(second, job_type, drawing, now=clock.now())

    assert isinstance(verdict, Wait) and verdict.reason == "concurrency" and verdict.seconds in (1, 2)


def test_a_dead_workers_slot_is_held_a_second_past_its_leases_latest_end(
    ports: Ports, limited_ports: WorkerPorts, clock: ManualClock
) -> None:
    dead, waiting = submitted(ports, UNKEYED, {}), submitted(ports, UNKEYED, {})
    run_claim_and_die(dead, limited_ports, clock)
    timeout = limited_ports.registry.worker_timeout_s("default")

    clock.advance(timeout + LEASE_MARGIN_S)
    assert run(delivery_of(waiting, "m-2"), limited_ports) is False
    clock.advance(1)
    assert run(delivery_of(waiting, "m-2"), limited_ports) is True


def test_a_claim_that_did_not_happen_gives_back_the_slot_taken_for_it(
    ports: Ports, limited_ports: WorkerPorts, clock: ManualClock, limits: InMemoryLimits
) -> None:
    job_type = limited_ports.registry.job_types[UNKEYED]
    job_ = submitted(ports, UNKEYED, {})
    assert admit(job_, job_type, limited_ports, now=clock.now()) is None
    assert limits.held(UNKEYED) == {job_.job_id: 1}

    release_slot(job_, job_type, limited_ports, attempt=1)

    assert limits.held(UNKEYED) == {}


@pytest.mark.parametrize(
    ("status", "attempt", "slot"), [(JobStatus.QUEUED, 0, 1), (JobStatus.RETRYING, 2, 3), (JobStatus.FAILED, 3, 1)]
)
def test_a_slot_is_held_for_the_attempt_the_claim_takes(
    ports: Ports,
    limited_ports: WorkerPorts,
    store: InMemoryJobStore,
    clock: ManualClock,
    limits: InMemoryLimits,
    status: JobStatus,
    attempt: int,
    slot: int,
) -> None:
    job_ = store.put(dataclasses.replace(submitted(ports, UNKEYED, {}), status=status, attempt=attempt))

    assert admit(job_, limited_ports.registry.job_types[UNKEYED], limited_ports, now=clock.now()) is None

    assert limits.held(UNKEYED) == {job_.job_id: slot}


class Unreleasable(InMemoryLimits):
    def release(self, scope: str, *, job_id: str, attempt: int) -> None:
        raise StoreUnavailableError("limits table unavailable")


def test_a_slot_not_released_is_logged_and_frees_when_its_time_is_up(
    ports: Ports, limited_ports: WorkerPorts, caplog: pytest.LogCaptureFixture
) -> None:
    job_ = submitted(ports, UNKEYED, {})
    failing = dataclasses.replace(limited_ports, limits=Unreleasable())

    with caplog.at_level(logging.ERROR, logger="offpath.worker"):
        release_slot(job_, failing.registry.job_types[UNKEYED], failing, attempt=1)

    [logged] = caplog.records
    assert logged.getMessage() == "the job's concurrency slot could not be released; it frees when its time is up"
    assert logged.exc_info is not None


class FlakyRelease(InMemoryLimits):
    """A limits store whose first `failures` releases find the table unavailable."""

    def __init__(self, failures: int) -> None:
        super().__init__()
        self.failures = failures

    def release(self, scope: str, *, job_id: str, attempt: int) -> None:
        if self.failures:
            self.failures -= 1
            raise StoreUnavailableError("limits table unavailable")
        super().release(scope, job_id=job_id, attempt=attempt)


def test_a_release_that_fails_is_tried_again_and_the_slot_frees_at_once(
    ports: Ports, limited_ports: WorkerPorts, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    flaky = FlakyRelease(failures=2)
    flaky_ports = dataclasses.replace(limited_ports, limits=flaky)
    job_type = flaky_ports.registry.job_types[UNKEYED]
    job_ = submitted(ports, UNKEYED, {})
    assert admit(job_, job_type, flaky_ports, now=clock.now()) is None

    with caplog.at_level(logging.ERROR, logger="offpath.worker"):
        release_slot(job_, job_type, flaky_ports, attempt=1)

    assert flaky.held(UNKEYED) == {}
    assert caplog.records == []


def test_a_claim_the_store_could_not_make_gives_back_its_slot_and_the_job_runs_next_time(
    ports: Ports, limited_ports: WorkerPorts, store: InMemoryJobStore, limits: InMemoryLimits
) -> None:
    job_, other = submitted(ports, UNKEYED, {}), submitted(ports, UNKEYED, {})
    store.fail_next("claim", StoreUnavailableError("DynamoDB ServiceUnavailable"))

    assert run(delivery_of(job_, "m-1"), limited_ports) is False

    # Not held idle until its time is up: another job of the type takes the one slot at once.
    assert limits.held(UNKEYED) == {}
    assert run(delivery_of(other, "m-2"), limited_ports) is True
    assert run(delivery_of(job_, "m-1"), limited_ports) is True
    done = store.get(job_.job_id, tenant=job_.tenant)
    assert done is not None and (done.status, done.attempt) == (JobStatus.SUCCEEDED, 1)


def failed_permanently(ports: Ports, limited_ports: WorkerPorts, scripted: ScriptedJob, store: InMemoryJobStore) -> Job:
    job_ = submitted(ports, UNKEYED, {})
    scripted.action = fails(PermanentError("bad input"))
    assert run(delivery_of(job_, "m-1"), limited_ports) is True
    failed = store.get(job_.job_id, tenant=job_.tenant)
    assert failed is not None and failed.status is JobStatus.FAILED
    return failed


def test_a_redrive_another_worker_made_first_gives_back_the_slot_and_the_message_looks_again_at_its_lease_end(
    ports: Ports,
    limited_ports: WorkerPorts,
    scripted: ScriptedJob,
    store: InMemoryJobStore,
    limits: InMemoryLimits,
    queue: InMemoryJobQueue,
    clock: ManualClock,
) -> None:
    failed = failed_permanently(ports, limited_ports, scripted, store)
    # Between this worker's read and its reset, another worker reset the job and claimed it for 60 s.
    theirs = failed.replace(status=JobStatus.RUNNING, lease_until=clock.now() + timedelta(seconds=60), redrives=1)
    store.fail_next("reset_for_redrive", JobConflictError(theirs, "job is not FAILED"))

    assert run(Delivery("m-2", "rh-m-2", delivery_of(failed).body, redriven=True), limited_ports) is False

    assert limits.held(UNKEYED) == {}
    assert [(c.receipt_handle, c.timeout_s) for c in queue.visibility_changes] == [("rh-m-2", 61)]


@pytest.mark.parametrize(
    ("operation", "error", "answer"),
    [
        ("claim", JobNotFoundError("gone"), True),  # expired since: the message is dropped
        ("claim", JobConflictError(None, "gone"), True),
        ("reset_for_redrive", JobConflictError(None, "gone"), True),
    ],
)
def test_a_job_that_is_gone_between_admission_and_claim_gives_back_its_slot(
    ports: Ports,
    limited_ports: WorkerPorts,
    scripted: ScriptedJob,
    store: InMemoryJobStore,
    limits: InMemoryLimits,
    operation: str,
    error: Exception,
    answer: bool,
) -> None:
    failed = failed_permanently(ports, limited_ports, scripted, store)
    store.fail_next(operation, error)

    assert run(Delivery("m-2", "rh-m-2", delivery_of(failed).body, redriven=True), limited_ports) is answer

    assert limits.held(UNKEYED) == {}


def test_a_job_whose_key_cannot_be_computed_counts_under_the_key_nothing_and_says_so(
    ports: Ports,
    registry: Registry,
    scripted: ScriptedJob,
    limited_ports: WorkerPorts,
    clock: ManualClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    job_type = add(
        registry,
        scripted,
        "test.by_function",
        limits_of(concurrency_key=lambda p: p.account.upper(), max_concurrency=1, rate_limit=None),
        Named,
    )
    empty_key, no_key = submitted(ports, job_type.name, {"account": ""}), submitted(ports, job_type.name, {})
    assert admit(empty_key, job_type, limited_ports, now=clock.now()) is None

    with caplog.at_level(logging.WARNING, logger="offpath.worker"):
        verdict = admit(no_key, job_type, limited_ports, now=clock.now())

    assert isinstance(verdict, Wait) and verdict.reason == "concurrency"
    assert [r.getMessage() for r in caplog.records] == [
        "the job's concurrency key could not be computed; it counts under the key ''"
    ]


def test_a_key_function_reads_the_payload_as_its_model(
    ports: Ports, registry: Registry, scripted: ScriptedJob, limited_ports: WorkerPorts, clock: ManualClock
) -> None:
    job_type = add(
        registry,
        scripted,
        "test.by_function",
        limits_of(concurrency_key=lambda p: p.account.upper(), max_concurrency=1, rate_limit=None),
        Named,
    )
    acme, globex = (
        submitted(ports, job_type.name, {"account": "acme"}),
        submitted(ports, job_type.name, {"account": "b"}),
    )

    assert [admit(j, job_type, limited_ports, now=clock.now()) for j in (acme, globex)] == [None, None]


def test_a_field_key_reads_the_stored_payload_even_one_its_model_no_longer_takes(
    ports: Ports, registry: Registry, scripted: ScriptedJob, store: InMemoryJobStore, limited_ports: WorkerPorts
) -> None:
    job_type = add(
        registry,
        scripted,
        "test.by_field",
        limits_of(concurrency_key="account", max_concurrency=1, rate_limit=None),
        Strict,
    )
    made = [submitted(ports, job_type.name, {"account": a, "required_since_v2": 1}) for a in ("acme", "globex")]
    older = [store.put(dataclasses.replace(j, payload={"account": j.payload["account"]})) for j in made]

    assert len({scope_of(job_type, j) for j in older}) == 2


def test_a_keys_scope_is_the_type_and_32_hex_of_the_tenant_and_key_as_the_limit_tables_items_hold_it() -> None:
    limited = JobType(LIMITED, lambda p, c: None, AnyPayload, "default", 3, 10, Backoff(), limits=keyed(2))
    job_ = dataclasses.replace(_a_job(), tenant="tenant-a", payload={"account": "acme"})

    assert scope_of(limited, job_) == "test.limited#85d6081786132ae64cf78a1614e9855d"


# -- the policy's edges -----------------------------------------------------------------------------------------------


def test_a_key_that_is_not_text_is_its_compact_sorted_json_and_no_value_is_the_key_nothing() -> None:
    by_function = limits_of(concurrency_key=lambda p: p["key"], max_concurrency=1, rate_limit=None)

    assert by_function.key_of({"key": {"b": 1, "a": [1, 2]}}) == '{"a":[1,2],"b":1}'
    assert by_function.key_of({"key": date(2026, 3, 1)}) == '"2026-03-01"'
    assert by_function.key_of({"key": None}) == ""
    assert Limits().key_of({"account": "acme"}) == ""
    assert limits_of(concurrency_key="region", max_concurrency=1, rate_limit=None).key_of(Account(account="a")) == ""


def test_the_largest_concurrency_and_the_fastest_rate_are_accepted() -> None:
    assert limits_of(concurrency_key=None, max_concurrency=100, rate_limit="10000/s").max_concurrency == 100


@pytest.mark.parametrize(
    ("declared", "says"),
    [
        ({"concurrency_key": "account"}, "concurrency_key needs max_concurrency or rate_limit (the limit it keys)"),
        (
            {"concurrency_key": 7, "max_concurrency": 2},
            "concurrency_key must be a payload field path or a function of the payload",
        ),
        (
            {"concurrency_key": "no such field " + "x" * 60, "max_concurrency": 2},
            f"concurrency_key {'no such field ' + 'x' * 46!r}: a payload field path ('account', 'customer.id')",
        ),
    ],
)
def test_a_limit_declared_wrongly_says_why_in_full(declared: dict[str, Any], says: str) -> None:
    with pytest.raises(LimitSpecError) as refused:
        limits_of(**{"concurrency_key": None, "max_concurrency": None, "rate_limit": None, **declared})

    assert str(refused.value) == says


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (10, "rate_limit '10': write it as COUNT/UNIT, UNIT one of s, m, h ('10/s')"),
        ("x" * 50, f"rate_limit {'x' * 40!r}: write it as COUNT/UNIT, UNIT one of s, m, h ('10/s')"),
    ],
)
def test_a_rate_limit_written_wrongly_says_how_to_write_it(text: Any, says: str) -> None:
    with pytest.raises(LimitSpecError) as refused:
        parse_rate_limit(text)

    assert str(refused.value) == says


def test_an_attempt_whose_outcome_cannot_be_written_gives_back_its_slot_and_its_job_stays_running(
    ports: Ports,
    limited_ports: WorkerPorts,
    store: InMemoryJobStore,
    clock: ManualClock,
    limits: InMemoryLimits,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    job_ = submitted(ports, UNKEYED, {})
    ends = clock.now() + timedelta(seconds=60)

    def store_down(*args: Any, **kwargs: Any) -> None:
        raise StoreUnavailableError("DynamoDB ServiceUnavailable")

    monkeypatch.setattr(store, "record_success", store_down)
    remaining_ms = lambda: max(0, int((ends - clock.now()).total_seconds() * 1000))  # noqa: E731

    assert process_record(delivery_of(job_), limited_ports, WorkerPolicy(queue="default"), remaining_ms) is False

    assert limits.held(UNKEYED) == {}  # given back, not held idle until its time is up
    running = store.get(job_.job_id, tenant=job_.tenant)
    assert running is not None and running.status is JobStatus.RUNNING  # its lease ends; the next attempt runs it
